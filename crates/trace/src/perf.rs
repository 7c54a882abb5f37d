//! perf_event_open tracepoints, one ring per traced CPU: every event of a CPU writes into the
//! ring of that CPU's first event (PERF_EVENT_IOC_SET_OUTPUT), so each ring is already in time
//! order. Opened on the thread that starts the tracer; drained by the tracer's reader thread.

use crate::decode::{Decoder, EventSpec};
use crate::event::{EventKind, TraceEvent};
use crate::format::EventFormat;
use crate::setup::{euid, perf_paranoid, TraceUnavailable};
use perf_event::data::Record;
use perf_event::events::Tracepoint;
use perf_event::{Builder, Clock, Counter, SampleFlag, Sampler};
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

/// The ring of one CPU and the counters that feed it.
pub(crate) struct CpuRing {
    pub(crate) cpu: usize,
    sampler: Sampler,
    /// Time of the last sample read, to stamp a lost-records marker that opens a drain.
    last_ts: u64,
    // Kept open: closing a counter stops its event. Never read directly.
    _redirected: Vec<Counter>,
}

fn builder_for(id: u16, cpu: usize, ring_bytes: usize) -> Builder<'static> {
    let mut b = Builder::new(Tracepoint::with_id(u64::from(id)));
    b.one_cpu(cpu)
        .any_pid()
        // Tracepoints fire in kernel mode; excluding the kernel would filter every sample.
        .exclude_kernel(false)
        // RAW carries the task ids (`common_pid`) and each ring is one CPU's: nothing else is
        // needed, and every byte less is less for the kernel to write on the audio CPU.
        .sample(SampleFlag::RAW | SampleFlag::TIME)
        .sample_period(1)
        // The engine's timestamps are CLOCK_MONOTONIC; the events must line up with them.
        .clockid(Clock::MONOTONIC)
        // Nobody sleeps on the ring (the reader polls on a timer); a high watermark keeps the
        // kernel from queueing a wake-up for every event.
        .wakeup_watermark(ring_bytes / 2)
        .enabled(false);
    b
}

pub(crate) fn refused(
    spec: &EventSpec,
    cpu: usize,
    e: &io::Error,
    proc_root: &Path,
) -> TraceUnavailable {
    let event = format!("{}:{}", spec.system, spec.name);
    let errno = e.raw_os_error().unwrap_or(0);
    if (errno == libc::EACCES || errno == libc::EPERM) && euid() != 0 {
        return TraceUnavailable::NotRoot {
            euid: euid(),
            needed_for: format!(
                "system-wide perf tracepoints ({event}) (or CAP_PERFMON, or \
                 kernel.perf_event_paranoid=-1)"
            ),
        };
    }
    let paranoid = perf_paranoid(proc_root)
        .map(|p| format!("kernel.perf_event_paranoid = {p}"))
        .unwrap_or_else(|| "perf_event_paranoid unreadable".to_owned());
    TraceUnavailable::PerfRefused {
        event,
        cpu,
        reason: format!("{e} ({paranoid})"),
    }
}

/// Opens every event of `formats` on `cpu`, all writing into one ring of `ring_bytes`.
pub(crate) fn open_cpu(
    cpu: usize,
    formats: &[(EventSpec, EventFormat)],
    ring_bytes: usize,
    proc_root: &Path,
) -> Result<CpuRing, TraceUnavailable> {
    let mut iter = formats.iter();
    let (first_spec, first) = iter.next().ok_or_else(|| TraceUnavailable::MissingEvent {
        event: "sched:sched_switch".into(),
        reason: "no events to trace".into(),
    })?;
    let sampler = builder_for(first.id, cpu, ring_bytes)
        .build()
        .and_then(|c| c.sampled(ring_bytes))
        .map_err(|e| refused(first_spec, cpu, &e, proc_root))?;
    let mut redirected = Vec::new();
    for (spec, format) in iter {
        let counter = builder_for(format.id, cpu, ring_bytes)
            .build()
            .map_err(|e| refused(spec, cpu, &e, proc_root))?;
        // SAFETY: both descriptors are open perf events owned by this function; SET_OUTPUT only
        // redirects the second one's samples into the first one's ring.
        let rc = unsafe {
            perf_event_open_sys::ioctls::SET_OUTPUT(counter.as_raw_fd(), sampler.as_raw_fd())
        };
        if rc != 0 {
            return Err(refused(spec, cpu, &io::Error::last_os_error(), proc_root));
        }
        redirected.push(counter);
    }
    Ok(CpuRing {
        cpu,
        sampler,
        last_ts: 0,
        _redirected: redirected,
    })
}

impl CpuRing {
    /// Starts all events of this ring.
    pub(crate) fn enable(&mut self) -> io::Result<()> {
        for c in &mut self._redirected {
            c.enable()?;
        }
        self.sampler.enable()
    }

    /// Stops all events of this ring (records already written stay readable).
    pub(crate) fn disable(&mut self) {
        let _ = self.sampler.disable();
        for c in &mut self._redirected {
            let _ = c.disable();
        }
    }

    /// Decodes everything in the ring into `out` (in time order) and returns the number of
    /// events the kernel reported lost. A lost-records marker becomes an [`EventKind::Lost`]
    /// event stamped with the time of the record before it, so windows can see where the gap is.
    pub(crate) fn drain(&mut self, decoder: &mut Decoder, out: &mut Vec<TraceEvent>) -> u64 {
        let cpu = self.cpu as u16;
        let mut lost = 0;
        let mut last_ts = self.last_ts;
        while let Some(record) = self.sampler.next_record() {
            match record.parse_record() {
                Ok(Record::Sample(sample)) => {
                    let (Some(raw), Some(ts)) = (sample.raw(), sample.time()) else {
                        continue;
                    };
                    last_ts = ts;
                    if let Some(ev) = decoder.decode(raw, ts, cpu) {
                        out.push(ev);
                    }
                }
                Ok(Record::Lost(l)) => {
                    lost += l.lost;
                    out.push(TraceEvent {
                        ts_ns: last_ts,
                        cpu,
                        kind: EventKind::Lost { count: l.lost },
                    });
                }
                // Other records (throttling, unknown types) carry nothing a card uses.
                Ok(_) | Err(_) => {}
            }
        }
        self.last_ts = last_ts;
        lost
    }
}
