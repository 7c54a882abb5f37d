//! The buffer records as a Perfetto trace (Chrome JSON trace event format): one track per
//! audio thread with a `wake-up` and a `render` slice per buffer, load and sine counters, a
//! `dropout` instant per dropout with its verdict (its blame card's, when there is one), and
//! the kernel tracer's sched/IRQ slices of the audio CPUs. Shared by `run --trace` (streamed
//! to a file on the main thread) and the dashboard's `GET /api/trace` (built from its recent
//! history off the engine-owner thread); runs on whichever non-real-time thread calls it.

use super::{dropout_kind, notes, role, Dropout};
use crate::engine::ThreadInfo;
use crate::report::BufferReport;
use serde_json::json;
use std::io::Write;
use xrunlab_trace::{EventKind, PerfettoWriter, TraceEvent, Track};

/// Writes buffers, dropouts and kernel events as trace events to a [`PerfettoWriter`].
pub struct BufferTrace<W: Write> {
    writer: PerfettoWriter<W>,
    pid: i32,
    /// Thread index → tid of the audio start being written.
    tids: Vec<(usize, i32)>,
    /// Tracks already named (a restart brings new tids).
    named: Vec<i32>,
    /// Said in a dropout instant that has no card, after its kind.
    no_card_hint: String,
}

impl<W: Write> BufferTrace<W> {
    /// Names the process track `pid`; `no_card_hint` says, in dropout instants written by
    /// [`BufferTrace::buffer`], why they carry no card.
    pub fn new(mut writer: PerfettoWriter<W>, pid: i32, no_card_hint: &str) -> BufferTrace<W> {
        writer.process_name(pid, "xrunlab audio threads");
        BufferTrace {
            writer,
            pid,
            tids: Vec::new(),
            named: Vec::new(),
            no_card_hint: no_card_hint.to_owned(),
        }
    }

    /// The writer, for counters and metadata of the caller's own.
    pub fn writer(&mut self) -> &mut PerfettoWriter<W> {
        &mut self.writer
    }

    /// The process id of the audio thread tracks.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// The track of audio thread `index` (a synthetic negative tid before its tid is known).
    pub fn track(&self, index: usize) -> Track {
        let tid = self
            .tids
            .iter()
            .find(|(i, _)| *i == index)
            .map_or(-(index as i32) - 1, |(_, t)| *t);
        Track { pid: self.pid, tid }
    }

    /// Takes the audio threads of the buffers that follow and names a track for each new one,
    /// `driver (tid N)` / `worker K (tid N)`.
    pub fn set_threads(&mut self, threads: &[ThreadInfo]) {
        self.tids = threads.iter().map(|t| (t.index, t.tid)).collect();
        for t in threads {
            if self.named.contains(&t.tid) {
                continue;
            }
            self.named.push(t.tid);
            let name = format!("{} (tid {})", role(t.index), t.tid);
            self.writer.thread_name(self.track(t.index), &name);
        }
    }

    /// One buffer: its slices and counters (one buffer in the writer's `every_nth_buffer`,
    /// dropouts always) and, when no [`BufferTrace::dropout`] will come for it (`explained`
    /// false), its dropout instant.
    pub fn buffer(&mut self, b: &BufferReport, explained: bool) {
        if self.writer.keep_buffer(b.seq) || b.dropout() {
            for t in &b.threads {
                let track = self.track(t.index);
                let wake = b.period_start_ns + t.wake_latency_ns;
                self.writer.slice(
                    track,
                    "wake-up",
                    "wake",
                    b.period_start_ns,
                    t.wake_latency_ns,
                    json!({"seq": b.seq}),
                );
                self.writer.slice(
                    track,
                    "render",
                    "render",
                    wake,
                    t.busy_ns,
                    json!({"seq": b.seq, "epoch": b.epoch, "sines": t.sines,
                           "computed": t.computed, "cpu_start": t.cpu_start,
                           "cpu_end": t.cpu_end, "cpu_us": t.cpu_ns as f64 / 1000.0}),
                );
            }
            self.writer.counter(
                self.pid,
                "load %",
                b.period_start_ns,
                &[("load", b.load() * 100.0)],
            );
            self.writer.counter(
                self.pid,
                "active sines",
                b.period_start_ns,
                &[("sines", f64::from(b.active_sines))],
            );
        }
        if b.dropout() && !explained {
            let verdict = format!("{} ({})", dropout_kind(b), self.no_card_hint);
            let track = self.track(0);
            self.writer.dropout(
                track,
                b.period_start_ns,
                &verdict,
                json!({"seq": b.seq, "epoch": b.epoch, "notes": notes(b), "late_by_us":
                       b.render_end_ns.saturating_sub(b.deadline_ns) as f64 / 1000.0}),
            );
        }
    }

    /// A dropout with its card (or the reason it has none): an instant carrying the verdict.
    pub fn dropout(&mut self, d: &Dropout) {
        let track = self.track(0);
        let card = d.blame.as_ref();
        self.writer.dropout(
            track,
            d.period_start_ns,
            &d.verdict(),
            json!({"seq": d.seq, "epoch": d.epoch, "kind": d.kind, "late_by_us": d.late_by_us,
                   "notes": d.notes,
                   "cause": card.map(|c| c.cause),
                   "main_culprit": card.and_then(|c| c.main_culprit.clone()),
                   "no_card": d.no_card}),
        );
    }

    /// Kernel events in time order, each passed once: sched and IRQ slices of `cpus`, and CPU
    /// frequency counters where the kernel reports changes.
    pub fn kernel(&mut self, events: &[TraceEvent], cpus: &[usize]) {
        self.writer.kernel_events(events, cpus);
        for e in events {
            if let EventKind::CpuFrequency { khz, cpu_id } = e.kind {
                self.writer.counter(
                    self.pid,
                    &format!("CPU {cpu_id} MHz (kernel)"),
                    e.ts_ns,
                    &[("MHz", f64::from(khz) / 1000.0)],
                );
            }
        }
    }

    /// The writer, to close it.
    pub fn into_writer(self) -> PerfettoWriter<W> {
        self.writer
    }
}
