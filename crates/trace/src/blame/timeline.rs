//! Per-CPU timelines: who occupied each CPU when (from `sched_switch`), its interrupt and
//! softirq intervals, and its frequency, rebuilt from a window's events. Read by the blame
//! card's accounting on the caller's thread (the engine's explain collector, watch's main
//! thread), never on an audio thread.

use super::card::CulpritKind;
use crate::event::{softirq_name, EventKind, TraceEvent};
use std::collections::BTreeMap;

/// A half-open interval `[start, end)` in ns.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Span {
    pub(super) start: u64,
    pub(super) end: u64,
}

impl Span {
    pub(super) fn overlap(&self, other: &Span) -> u64 {
        self.end
            .min(other.end)
            .saturating_sub(self.start.max(other.start))
    }
    pub(super) fn clip(&self, lo: u64, hi: u64) -> Option<Span> {
        let s = Span {
            start: self.start.max(lo),
            end: self.end.min(hi),
        };
        (s.end > s.start).then_some(s)
    }
}

/// Who occupied a CPU during a span.
#[derive(Debug, Clone)]
pub(super) struct Occupancy {
    pub(super) span: Span,
    pub(super) tid: i32,
    pub(super) comm: String,
    pub(super) prio: i32,
}

/// An interrupt interval on a CPU.
#[derive(Debug, Clone)]
pub(super) struct IrqSpan {
    pub(super) span: Span,
    pub(super) kind: CulpritKind,
    pub(super) name: String,
    pub(super) irq: Option<i32>,
}

#[derive(Debug, Default)]
pub(super) struct CpuTimeline {
    pub(super) occupancy: Vec<Occupancy>,
    pub(super) irqs: Vec<IrqSpan>,
    pub(super) freq_khz: Option<u32>,
}

impl CpuTimeline {
    pub(super) fn irq_time(&self, span: &Span) -> u64 {
        self.irqs.iter().map(|i| i.span.overlap(span)).sum()
    }
}

/// Rebuilds occupancy and interrupt intervals of every CPU seen in the window.
pub(super) fn cpu_timelines(events: &[TraceEvent], t0: u64, t1: u64) -> BTreeMap<u16, CpuTimeline> {
    let mut rebuild = Rebuild::new(t0);
    for e in events {
        rebuild.event(e);
    }
    rebuild.close(t1)
}

/// The timelines being rebuilt, and per CPU: the current occupant since when; open hardirq and
/// softirq; whether an entry of each was seen yet.
struct Rebuild {
    t0: u64,
    cpus: BTreeMap<u16, CpuTimeline>,
    running: BTreeMap<u16, (u64, i32, String, i32)>,
    open_irq: BTreeMap<u16, (u64, i32, String)>,
    open_soft: BTreeMap<u16, (u64, u32)>,
    saw_irq_entry: BTreeMap<u16, bool>,
    saw_soft_entry: BTreeMap<u16, bool>,
}

impl Rebuild {
    fn new(t0: u64) -> Rebuild {
        Rebuild {
            t0,
            cpus: BTreeMap::new(),
            running: BTreeMap::new(),
            open_irq: BTreeMap::new(),
            open_soft: BTreeMap::new(),
            saw_irq_entry: BTreeMap::new(),
            saw_soft_entry: BTreeMap::new(),
        }
    }

    fn timeline(&mut self, cpu: u16) -> &mut CpuTimeline {
        self.cpus.entry(cpu).or_default()
    }

    fn event(&mut self, e: &TraceEvent) {
        // Every CPU an event names has a timeline, whatever the event.
        self.timeline(e.cpu);
        match &e.kind {
            EventKind::Switch {
                prev_comm,
                prev_tid,
                prev_prio,
                next_comm,
                next_tid,
                next_prio,
                ..
            } => self.switch(
                e,
                (*prev_tid, prev_comm.to_string(), *prev_prio),
                (*next_tid, next_comm.to_string(), *next_prio),
            ),
            EventKind::IrqEntry { irq, name } => {
                self.saw_irq_entry.insert(e.cpu, true);
                self.open_irq
                    .insert(e.cpu, (e.ts_ns, *irq, name.to_string()));
            }
            EventKind::IrqExit { irq } => self.irq_exit(e, *irq),
            EventKind::SoftirqEntry { vec } => {
                self.saw_soft_entry.insert(e.cpu, true);
                self.open_soft.insert(e.cpu, (e.ts_ns, *vec));
            }
            EventKind::SoftirqExit { vec } => self.softirq_exit(e, *vec),
            EventKind::CpuFrequency { khz, cpu_id } => {
                if let Ok(c) = u16::try_from(*cpu_id) {
                    self.timeline(c).freq_khz = Some(*khz);
                }
            }
            _ => {}
        }
    }

    /// `prev` and `next` are (tid, comm, prio).
    fn switch(&mut self, e: &TraceEvent, prev: (i32, String, i32), next: (i32, String, i32)) {
        // The switch-out names the task as it is now: a priority or name changed
        // while it ran (sched_setscheduler, prctl) shows here, not at its switch-in.
        // The first switch of a CPU covers the time since the window start.
        let since = self.running.remove(&e.cpu).map_or(self.t0, |r| r.0);
        let (tid, comm, prio) = prev;
        self.timeline(e.cpu).occupancy.push(Occupancy {
            span: Span {
                start: since,
                end: e.ts_ns,
            },
            tid,
            comm,
            prio,
        });
        let (tid, comm, prio) = next;
        self.running.insert(e.cpu, (e.ts_ns, tid, comm, prio));
    }

    fn irq_exit(&mut self, e: &TraceEvent, irq: i32) {
        let opened = match self.open_irq.remove(&e.cpu) {
            Some((s, _, name)) => Some((s, name)),
            // An exit without any entry yet: the handler ran since the window start.
            None if !self.saw_irq_entry.get(&e.cpu).copied().unwrap_or(false) => {
                Some((self.t0, format!("irq {irq}")))
            }
            None => None,
        };
        if let Some((start, name)) = opened {
            self.timeline(e.cpu).irqs.push(IrqSpan {
                span: Span {
                    start,
                    end: e.ts_ns,
                },
                kind: CulpritKind::Irq,
                name,
                irq: Some(irq),
            });
        }
    }

    fn softirq_exit(&mut self, e: &TraceEvent, vec: u32) {
        let start = match self.open_soft.remove(&e.cpu) {
            Some((s, _)) => Some(s),
            None if !self.saw_soft_entry.get(&e.cpu).copied().unwrap_or(false) => Some(self.t0),
            None => None,
        };
        if let Some(start) = start {
            self.timeline(e.cpu).irqs.push(IrqSpan {
                span: Span {
                    start,
                    end: e.ts_ns,
                },
                kind: CulpritKind::Softirq,
                name: softirq_name(vec),
                irq: None,
            });
        }
    }

    /// The timelines, with whatever is still running or open lasting to the window end `t1`.
    fn close(mut self, t1: u64) -> BTreeMap<u16, CpuTimeline> {
        for (cpu, (since, tid, comm, prio)) in std::mem::take(&mut self.running) {
            self.timeline(cpu).occupancy.push(Occupancy {
                span: Span {
                    start: since,
                    end: t1,
                },
                tid,
                comm,
                prio,
            });
        }
        for (cpu, (since, irq, name)) in std::mem::take(&mut self.open_irq) {
            self.timeline(cpu).irqs.push(IrqSpan {
                span: Span {
                    start: since,
                    end: t1,
                },
                kind: CulpritKind::Irq,
                name,
                irq: Some(irq),
            });
        }
        for (cpu, (since, vec)) in std::mem::take(&mut self.open_soft) {
            self.timeline(cpu).irqs.push(IrqSpan {
                span: Span {
                    start: since,
                    end: t1,
                },
                kind: CulpritKind::Softirq,
                name: softirq_name(vec),
                irq: None,
            });
        }
        self.cpus
    }
}
