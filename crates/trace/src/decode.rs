//! Turns raw tracepoint records (the bytes perf hands over with PERF_SAMPLE_RAW, which are the
//! same bytes tracefs stores) into [`TraceEvent`]s, using field layouts resolved once from the
//! kernel's `format` files. Built at tracer start; `decode` runs on the tracer's reader thread.

use crate::event::{Comm, EventKind, TraceEvent};
use crate::format::{EventFormat, Field, FormatError};
use std::collections::HashMap;
use std::sync::Arc;

/// One tracepoint the tracer asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventSpec {
    /// Subsystem directory under `events/`, e.g. `sched`.
    pub system: &'static str,
    /// Event name, e.g. `sched_switch`.
    pub name: &'static str,
    /// Whether the tracer refuses to start without it.
    pub required: bool,
    /// Recorded only when asked for ([`crate::TraceOptions::extra_events`]): no blame card
    /// uses it, and it costs the audio CPUs time in every event the kernel writes.
    pub opt_in: bool,
}

/// The events a blame card needs (required), those used where the kernel has them, and the
/// opt-in ones that only the Perfetto trace shows (hrtimer expiry, idle states).
///
/// Cost decides what is here: every event is written by the kernel on the audio CPU where it
/// happens, often inside an audio thread's render. Of a wake-up, only `sched_waking` is
/// recorded: it is made by the waker (so the card can tell an audio thread's wake-up from an
/// interrupt's), at the moment the wake-up was asked for, and a move to another run queue
/// follows as `sched_migrate_task`; `sched_wakeup` would repeat it for every wake-up. hrtimer
/// expiry (a fifth to a third of all events on an audio run) and `cpu_idle` (another 4-15 %)
/// are opt-in: the cards do not use them, and the Perfetto trace shows them only when they were
/// recorded.
pub const EVENTS: &[EventSpec] = &[
    spec("sched", "sched_switch", true),
    spec("sched", "sched_waking", true),
    spec("sched", "sched_migrate_task", true),
    spec("irq", "irq_handler_entry", true),
    spec("irq", "irq_handler_exit", true),
    spec("irq", "softirq_entry", true),
    spec("irq", "softirq_exit", true),
    opt_in("timer", "hrtimer_expire_entry"),
    opt_in("timer", "hrtimer_expire_exit"),
    opt_in("power", "cpu_idle"),
    spec("power", "cpu_frequency", false),
];

const fn spec(system: &'static str, name: &'static str, required: bool) -> EventSpec {
    EventSpec {
        system,
        name,
        required,
        opt_in: false,
    }
}

const fn opt_in(system: &'static str, name: &'static str) -> EventSpec {
    EventSpec {
        system,
        name,
        required: false,
        opt_in: true,
    }
}

/// Resolved field positions of one event type.
#[derive(Debug, Clone)]
enum Layout {
    Switch {
        prev_comm: Field,
        prev_pid: Field,
        prev_prio: Field,
        prev_state: Field,
        next_comm: Field,
        next_pid: Field,
        next_prio: Field,
    },
    Wakeup {
        waking: bool,
        comm: Field,
        pid: Field,
        prio: Field,
        target_cpu: Field,
    },
    Migrate {
        comm: Field,
        pid: Field,
        prio: Field,
        orig_cpu: Field,
        dest_cpu: Field,
    },
    IrqEntry {
        irq: Field,
        name: Field,
    },
    IrqExit {
        irq: Field,
    },
    SoftirqEntry {
        vec: Field,
    },
    SoftirqExit {
        vec: Field,
    },
    HrtimerEntry {
        function: Field,
    },
    HrtimerExit,
    CpuIdle {
        state: Field,
    },
    CpuFrequency {
        state: Field,
        cpu_id: Field,
    },
}

impl Layout {
    fn resolve(f: &EventFormat) -> Result<Option<Layout>, FormatError> {
        let layout = match f.name.as_str() {
            "sched_switch" => Layout::Switch {
                prev_comm: f.field("prev_comm")?,
                prev_pid: f.field("prev_pid")?,
                prev_prio: f.field("prev_prio")?,
                prev_state: f.field("prev_state")?,
                next_comm: f.field("next_comm")?,
                next_pid: f.field("next_pid")?,
                next_prio: f.field("next_prio")?,
            },
            "sched_waking" | "sched_wakeup" => Layout::Wakeup {
                waking: f.name == "sched_waking",
                comm: f.field("comm")?,
                pid: f.field("pid")?,
                prio: f.field("prio")?,
                target_cpu: f.field("target_cpu")?,
            },
            "sched_migrate_task" => Layout::Migrate {
                comm: f.field("comm")?,
                pid: f.field("pid")?,
                prio: f.field("prio")?,
                orig_cpu: f.field("orig_cpu")?,
                dest_cpu: f.field("dest_cpu")?,
            },
            "irq_handler_entry" => Layout::IrqEntry {
                irq: f.field("irq")?,
                name: f.field("name")?,
            },
            "irq_handler_exit" => Layout::IrqExit {
                irq: f.field("irq")?,
            },
            "softirq_entry" => Layout::SoftirqEntry {
                vec: f.field("vec")?,
            },
            "softirq_exit" => Layout::SoftirqExit {
                vec: f.field("vec")?,
            },
            "hrtimer_expire_entry" => Layout::HrtimerEntry {
                function: f.field("function")?,
            },
            "hrtimer_expire_exit" => Layout::HrtimerExit,
            "cpu_idle" => Layout::CpuIdle {
                state: f.field("state")?,
            },
            "cpu_frequency" => Layout::CpuFrequency {
                state: f.field("state")?,
                cpu_id: f.field("cpu_id")?,
            },
            _ => return Ok(None),
        };
        Ok(Some(layout))
    }
}

/// Decodes raw records of the events in [`EVENTS`].
#[derive(Debug, Clone)]
pub struct Decoder {
    common_type: Field,
    common_flags: Field,
    common_pid: Field,
    layouts: HashMap<u16, Layout>,
    irq_names: HashMap<i32, Arc<str>>,
}

impl Decoder {
    /// Builds a decoder from parsed `format` files. Events it does not know are ignored; a known
    /// event whose format lacks a field it needs is an error naming the event and field.
    pub fn new(formats: &[EventFormat]) -> Result<Decoder, FormatError> {
        let first = formats.first().ok_or(FormatError::NoFormats)?;
        let mut layouts = HashMap::new();
        for f in formats {
            if let Some(layout) = Layout::resolve(f)? {
                layouts.insert(f.id, layout);
            }
        }
        Ok(Decoder {
            common_type: first.field("common_type")?,
            common_flags: first.field("common_flags")?,
            common_pid: first.field("common_pid")?,
            layouts,
            irq_names: HashMap::new(),
        })
    }

    /// Decodes one raw record recorded at `ts_ns` on `cpu`. `None` for a record of an unknown
    /// event type or one too short for its layout (never a panic on bad bytes).
    pub fn decode(&mut self, raw: &[u8], ts_ns: u64, cpu: u16) -> Option<TraceEvent> {
        let id = u16::try_from(self.common_type.read_int(raw)?).ok()?;
        let int = |f: &Field| f.read_int(raw);
        let i32_of = |f: &Field| f.read_int(raw).map(|v| v as i32);
        let comm = |f: &Field| f.read_bytes(raw).map(Comm::new);
        let kind = match self.layouts.get(&id)? {
            Layout::Switch {
                prev_comm,
                prev_pid,
                prev_prio,
                prev_state,
                next_comm,
                next_pid,
                next_prio,
            } => EventKind::Switch {
                prev_comm: comm(prev_comm)?,
                prev_tid: i32_of(prev_pid)?,
                prev_prio: i32_of(prev_prio)?,
                prev_state: int(prev_state)?,
                next_comm: comm(next_comm)?,
                next_tid: i32_of(next_pid)?,
                next_prio: i32_of(next_prio)?,
            },
            Layout::Wakeup {
                waking,
                comm: c,
                pid,
                prio,
                target_cpu,
            } => EventKind::Wakeup {
                comm: comm(c)?,
                tid: i32_of(pid)?,
                prio: i32_of(prio)?,
                target_cpu: i32_of(target_cpu)?,
                waking: *waking,
                waker_tid: i32_of(&self.common_pid)?,
                in_interrupt: int(&self.common_flags)? & crate::event::FLAGS_IN_INTERRUPT != 0,
            },
            Layout::Migrate {
                comm: c,
                pid,
                prio,
                orig_cpu,
                dest_cpu,
            } => EventKind::Migrate {
                comm: comm(c)?,
                tid: i32_of(pid)?,
                prio: i32_of(prio)?,
                orig_cpu: i32_of(orig_cpu)?,
                dest_cpu: i32_of(dest_cpu)?,
            },
            Layout::IrqEntry { irq, name } => {
                let irq = i32_of(irq)?;
                let bytes = name.read_bytes(raw)?;
                // IRQ names repeat: share one allocation per IRQ while its name stays the same.
                let cached = self
                    .irq_names
                    .get(&irq)
                    .filter(|n| n.as_bytes() == bytes)
                    .cloned();
                let name = match cached {
                    Some(n) => n,
                    None => {
                        let n: Arc<str> = String::from_utf8_lossy(bytes).into();
                        self.irq_names.insert(irq, n.clone());
                        n
                    }
                };
                EventKind::IrqEntry { irq, name }
            }
            Layout::IrqExit { irq } => EventKind::IrqExit { irq: i32_of(irq)? },
            Layout::SoftirqEntry { vec } => EventKind::SoftirqEntry {
                vec: int(vec)? as u32,
            },
            Layout::SoftirqExit { vec } => EventKind::SoftirqExit {
                vec: int(vec)? as u32,
            },
            Layout::HrtimerEntry { function } => EventKind::HrtimerEntry {
                function: int(function)? as u64,
            },
            Layout::HrtimerExit => EventKind::HrtimerExit,
            Layout::CpuIdle { state } => EventKind::CpuIdle {
                state: int(state)? as u32,
            },
            Layout::CpuFrequency { state, cpu_id } => EventKind::CpuFrequency {
                khz: int(state)? as u32,
                cpu_id: int(cpu_id)? as u32,
            },
        };
        Some(TraceEvent { ts_ns, cpu, kind })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// sched_switch and irq_handler_entry formats as Linux 6.18 on x86_64 declares them.
    pub(crate) const SWITCH: &str = "name: sched_switch\nID: 372\nformat:\n\
        \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
        \tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
        \tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
        \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
        \tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\
        \tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n\
        \tfield:int prev_prio;\toffset:28;\tsize:4;\tsigned:1;\n\
        \tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n\
        \tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;\n\
        \tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;\n\
        \tfield:int next_prio;\toffset:60;\tsize:4;\tsigned:1;\n\n\
        print fmt: \"prev_comm=%s\", REC->prev_comm\n";

    pub(crate) const IRQ_ENTRY: &str = "name: irq_handler_entry\nID: 225\nformat:\n\
        \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
        \tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
        \tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
        \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
        \tfield:int irq;\toffset:8;\tsize:4;\tsigned:1;\n\
        \tfield:__data_loc char[] name;\toffset:12;\tsize:4;\tsigned:0;\n\n\
        print fmt: \"irq=%d name=%s\", REC->irq, __get_str(name)\n";

    /// A raw sched_switch record laid out by hand from the format above.
    pub(crate) fn switch_bytes(
        prev: &str,
        prev_pid: i32,
        prev_prio: i32,
        state: i64,
        next: &str,
        next_pid: i32,
        next_prio: i32,
    ) -> Vec<u8> {
        let mut raw = vec![0u8; 64];
        raw[0..2].copy_from_slice(&372u16.to_ne_bytes());
        raw[4..8].copy_from_slice(&prev_pid.to_ne_bytes());
        raw[8..8 + prev.len()].copy_from_slice(prev.as_bytes());
        raw[24..28].copy_from_slice(&prev_pid.to_ne_bytes());
        raw[28..32].copy_from_slice(&prev_prio.to_ne_bytes());
        raw[32..40].copy_from_slice(&state.to_ne_bytes());
        raw[40..40 + next.len()].copy_from_slice(next.as_bytes());
        raw[56..60].copy_from_slice(&next_pid.to_ne_bytes());
        raw[60..64].copy_from_slice(&next_prio.to_ne_bytes());
        raw
    }

    fn decoder() -> Decoder {
        let formats = [
            EventFormat::parse(SWITCH).unwrap(),
            EventFormat::parse(IRQ_ENTRY).unwrap(),
        ];
        Decoder::new(&formats).unwrap()
    }

    #[test]
    fn decodes_a_switch_record_by_its_format() {
        let mut d = decoder();
        let raw = switch_bytes("worker", 100, 29, 0, "xrl-hog", 4711, 9);
        let ev = d.decode(&raw, 1_000, 1).unwrap();
        assert_eq!(ev.ts_ns, 1_000);
        assert_eq!(ev.cpu, 1);
        assert_eq!(
            ev.kind,
            EventKind::Switch {
                prev_comm: Comm::new(b"worker"),
                prev_tid: 100,
                prev_prio: 29,
                prev_state: 0,
                next_comm: Comm::new(b"xrl-hog"),
                next_tid: 4711,
                next_prio: 9,
            }
        );
    }

    #[test]
    fn decodes_irq_names_and_shares_them() {
        let mut d = decoder();
        let mut raw = vec![0u8; 16];
        raw[0..2].copy_from_slice(&225u16.to_ne_bytes());
        raw[8..12].copy_from_slice(&11i32.to_ne_bytes());
        raw.extend_from_slice(b"virtio0-input.0\0");
        raw[12..16].copy_from_slice(&((16u32 << 16) | 16).to_ne_bytes());
        let a = d.decode(&raw, 5, 0).unwrap();
        let b = d.decode(&raw, 6, 0).unwrap();
        match (&a.kind, &b.kind) {
            (EventKind::IrqEntry { irq, name }, EventKind::IrqEntry { name: name_b, .. }) => {
                assert_eq!(*irq, 11);
                assert_eq!(&**name, "virtio0-input.0");
                assert!(
                    Arc::ptr_eq(name, name_b),
                    "the name is allocated once per IRQ"
                );
            }
            other => panic!("expected two IRQ entries, got {other:?}"),
        }
    }

    #[test]
    fn unknown_ids_and_short_records_are_skipped() {
        let mut d = decoder();
        let mut raw = switch_bytes("a", 1, 120, 1, "b", 2, 120);
        raw[0..2].copy_from_slice(&999u16.to_ne_bytes());
        assert!(d.decode(&raw, 0, 0).is_none());
        let raw = switch_bytes("a", 1, 120, 1, "b", 2, 120);
        assert!(d.decode(&raw[..50], 0, 0).is_none());
        assert!(d.decode(&[], 0, 0).is_none());
    }

    #[test]
    fn a_known_event_missing_a_field_is_refused_by_name() {
        let broken = SWITCH.replace("next_prio", "next_priority");
        let err = Decoder::new(&[EventFormat::parse(&broken).unwrap()]).unwrap_err();
        assert_eq!(
            err,
            FormatError::NoField {
                event: "sched_switch".into(),
                field: "next_prio".into()
            }
        );
        assert!(
            err.to_string()
                .contains("sched_switch has no field `next_prio`"),
            "{err}"
        );
    }
}
