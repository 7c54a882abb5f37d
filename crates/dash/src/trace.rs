//! `GET /api/trace`: the last seconds of the run as a Perfetto trace. The engine-owner thread
//! keeps a bounded [`History`] of drained buffers and, on request, copies the asked-for part
//! with the explain collector's dropouts and the kernel tracer's events into a
//! [`TraceSnapshot`]; a blocking task of the server's runtime turns that into the JSON
//! document, so a big trace never holds up draining or frames.
//!
//! Bounds: at most [`MAX_BUFFERS`] buffers and [`MAX_SECONDS`] seconds are kept, whichever
//! is fewer (16 384 buffers is ~44 s at 48 kHz / 128 frames, ~22 s at 64 frames); each buffer
//! costs ~200 bytes plus ~60 per audio thread, so the history stays under ~12 MB with 8
//! threads. The trace says how many seconds it really covers.

use std::collections::{HashSet, VecDeque};
use std::path::Path;
use xrunlab_engine::explain::perfetto::BufferTrace;
use xrunlab_engine::explain::trace::{PerfettoOptions, PerfettoWriter, Window};
use xrunlab_engine::explain::Dropout;
use xrunlab_engine::{BufferReport, ThreadInfo};

/// Most buffers kept for traces.
pub(crate) const MAX_BUFFERS: usize = 16_384;
/// Most seconds kept for traces, and the most a trace may ask for.
pub(crate) const MAX_SECONDS: u64 = 60;
/// The seconds a trace may ask for.
pub(crate) const SECONDS_RANGE: std::ops::RangeInclusive<u64> = 1..=MAX_SECONDS;
/// Seconds when the request does not say.
pub(crate) const DEFAULT_SECONDS: u64 = 10;

/// The recent buffers and the audio threads that rendered them.
#[derive(Debug, Default)]
pub(crate) struct History {
    buffers: VecDeque<BufferReport>,
    /// From when on (CLOCK_MONOTONIC ns) each set of audio threads rendered, oldest first.
    threads: VecDeque<(u64, Vec<ThreadInfo>)>,
}

impl History {
    /// Keeps a copy of `b`, forgetting the oldest beyond the bounds.
    pub(crate) fn push(&mut self, b: &BufferReport) {
        self.buffers.push_back(b.clone());
        let newest = b.period_start_ns;
        while self.buffers.len() > MAX_BUFFERS
            || self.buffers.front().is_some_and(|f| {
                newest.saturating_sub(f.period_start_ns) > MAX_SECONDS * 1_000_000_000
            })
        {
            self.buffers.pop_front();
        }
        // Thread sets older than the oldest buffer's are no longer needed (keep the one in use).
        let oldest = self.buffers.front().map_or(newest, |f| f.period_start_ns);
        while self.threads.len() > 1 && self.threads[1].0 <= oldest {
            self.threads.pop_front();
        }
    }

    /// The period start of the newest buffer kept.
    pub(crate) fn newest_ns(&self) -> Option<u64> {
        self.buffers.back().map(|b| b.period_start_ns)
    }

    /// The audio threads from `since_ns` on (after an audio start or device switch).
    pub(crate) fn set_threads(&mut self, since_ns: u64, threads: Vec<ThreadInfo>) {
        self.threads.push_back((since_ns, threads));
        // Config changes with no buffer in between (no audio) leave sets nothing uses.
        while self.threads.len() > 1
            && self.threads[1].0 <= self.buffers.front().map_or(since_ns, |b| b.period_start_ns)
        {
            self.threads.pop_front();
        }
    }

    /// The buffers whose period started at or after `from_ns`, with their thread sets.
    pub(crate) fn since(&self, from_ns: u64) -> (Vec<BufferReport>, Vec<(u64, Vec<ThreadInfo>)>) {
        let start = self
            .buffers
            .partition_point(|b| b.period_start_ns < from_ns);
        (
            self.buffers.range(start..).cloned().collect(),
            self.threads.iter().cloned().collect(),
        )
    }
}

/// What a trace is built from, copied on the engine-owner thread.
pub(crate) struct TraceSnapshot {
    /// Seconds asked for.
    pub seconds: u64,
    /// Start and end of the asked-for span, CLOCK_MONOTONIC ns.
    pub from_ns: u64,
    /// End of the span (the moment of the request).
    pub to_ns: u64,
    pub buffers: Vec<BufferReport>,
    pub threads: Vec<(u64, Vec<ThreadInfo>)>,
    /// The explain collector's dropouts in the span (`None`: "Explain dropouts" is off).
    pub dropouts: Option<Vec<Dropout>>,
    /// The kernel tracer's events in the span and the CPUs traced, or why there are none.
    pub kernel: Result<(Window, Vec<usize>), String>,
}

/// A built trace.
pub(crate) struct BuiltTrace {
    /// The JSON document.
    pub json: Vec<u8>,
    /// Seconds of buffers it really covers (less than asked when less is kept).
    pub covered_seconds: f64,
}

impl TraceSnapshot {
    /// The seconds the kept buffers cover: from the first one in the span to the request.
    fn covered_seconds(&self) -> f64 {
        self.buffers.first().map_or(0.0, |b| {
            self.to_ns
                .saturating_sub(b.period_start_ns.max(self.from_ns)) as f64
                / 1e9
        })
    }

    /// The Chrome JSON trace of the snapshot.
    pub(crate) fn build(self) -> BuiltTrace {
        let covered_seconds = self.covered_seconds();
        let options = PerfettoOptions {
            max_events: None,
            every_nth_buffer: 1,
        };
        let mut writer =
            PerfettoWriter::to_writer(Vec::new(), Path::new("GET /api/trace"), options);
        writer.other_data("xrunlab_source", "dashboard GET /api/trace".into());
        writer.other_data("xrunlab_version", env!("CARGO_PKG_VERSION").into());
        writer.other_data("xrunlab_requested_seconds", self.seconds.into());
        writer.other_data(
            "xrunlab_covered_seconds",
            ((covered_seconds * 1000.0).round() / 1000.0).into(),
        );
        writer.other_data("xrunlab_buffers", self.buffers.len().into());
        writer.other_data(
            "xrunlab_history_bound",
            format!("the last {MAX_BUFFERS} buffers or {MAX_SECONDS} s, whichever is fewer").into(),
        );
        let kernel_note = match &self.kernel {
            Ok((w, cpus)) => format!(
                "{} kernel events of CPUs {cpus:?} still in the tracer's window{}{}",
                w.events.len(),
                if w.complete {
                    ""
                } else {
                    " (the window no longer reaches back to the start of the trace)"
                },
                if w.lost_events > 0 {
                    format!("; {} lost by the kernel", w.lost_events)
                } else {
                    String::new()
                },
            ),
            Err(why) => why.clone(),
        };
        writer.other_data("xrunlab_kernel_events", kernel_note.into());
        let hint = if self.dropouts.is_some() {
            "no card: not seen while explaining, or its card is still being built"
        } else {
            "\"Explain dropouts\" was off: turn it on for the kernel's account"
        };
        let mut trace = BufferTrace::new(writer, std::process::id() as i32, hint);
        let dropouts = self.dropouts.unwrap_or_default();
        let explained: HashSet<(u64, u64)> = dropouts
            .iter()
            .map(|d| (d.period_start_ns, d.seq))
            .collect();
        let mut sets = self.threads.iter().peekable();
        let mut current: Option<&Vec<ThreadInfo>> = None;
        for b in &self.buffers {
            while let Some((since, threads)) = sets.peek() {
                if *since > b.period_start_ns && current.is_some() {
                    break;
                }
                trace.set_threads(threads);
                current = Some(threads);
                sets.next();
            }
            trace.buffer(b, explained.contains(&(b.period_start_ns, b.seq)));
        }
        for d in &dropouts {
            trace.dropout(d);
        }
        if let Ok((window, cpus)) = &self.kernel {
            trace.kernel(&window.events, cpus);
        }
        let (_, out) = trace.into_writer().finish_into();
        BuiltTrace {
            // Writing into a Vec cannot fail.
            json: out.unwrap_or_default(),
            covered_seconds,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buffer(seq: u64, period_start_ns: u64) -> BufferReport {
        BufferReport {
            epoch: 0,
            seq,
            frames: 128,
            sample_rate: 48_000,
            period_start_ns,
            deadline_ns: period_start_ns + 2_666_666,
            driver_wake_ns: period_start_ns,
            render_start_ns: period_start_ns,
            render_end_ns: period_start_ns + 1_000_000,
            active_sines: 10,
            burst: false,
            late: false,
            device_xrun: false,
            server_xruns: 0,
            unfinished_workers: 0,
            input_peak: None,
            server_load_pct: None,
            injected_stall_ns: 0,
            injected_hang_worker: 0,
            threads: Vec::new(),
        }
    }

    #[test]
    fn the_history_keeps_at_most_max_buffers() {
        let mut h = History::default();
        for seq in 0..(MAX_BUFFERS as u64 + 100) {
            h.push(&buffer(seq, seq * 1_000));
        }
        let (kept, _) = h.since(0);
        assert_eq!(kept.len(), MAX_BUFFERS);
        assert_eq!(kept[0].seq, 100, "the oldest are forgotten");
    }

    #[test]
    fn the_history_keeps_at_most_max_seconds_and_since_cuts_the_span() {
        let mut h = History::default();
        let second = 1_000_000_000;
        for seq in 0..100 {
            // One buffer a second: 100 s, of which the last 60 (and the one at exactly 60 s) stay.
            h.push(&buffer(seq, seq * second));
        }
        let (kept, _) = h.since(0);
        assert_eq!(kept.first().map(|b| b.seq), Some(39));
        assert_eq!(kept.len(), 61);
        let (last, _) = h.since(95 * second);
        assert_eq!(
            last.iter().map(|b| b.seq).collect::<Vec<_>>(),
            [95, 96, 97, 98, 99]
        );
    }
}
