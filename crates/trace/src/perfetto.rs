//! A streaming writer of the Chrome JSON Trace Event Format (opens in ui.perfetto.dev): each
//! event is serialized and written as it comes, so a long run never holds its trace in memory.
//! Used by the non-real-time thread that drains the engine's records (and the tracer's events).
//!
//! Big runs: `max_events` caps the file (after the cap only dropout instants are written, and
//! the number left out is recorded in the file's `otherData`), and `every_nth_buffer` thins out
//! per-buffer slices ([`PerfettoWriter::keep_buffer`]). A write error (a full disk) stops the
//! writer with a warning instead of failing the run.

use crate::event::{softirq_name, EventKind, TraceEvent};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// Process id used for the kernel's CPU tracks (no real process has it: pid_max < 2^22).
pub const KERNEL_PID: i32 = 1 << 30;
const CPU_TRACK_BASE: i32 = 1000;
const IRQ_TRACK_BASE: i32 = 2000;

/// A thread track: the process and thread ids the events are drawn under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Track {
    /// Process id.
    pub pid: i32,
    /// Thread id (the audio thread's kernel tid, or a synthetic id for kernel tracks).
    pub tid: i32,
}

/// Size limits for the trace file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PerfettoOptions {
    /// Stop writing ordinary events after this many (dropout instants are always written).
    pub max_events: Option<u64>,
    /// Keep the slices of one buffer in this many (1 = all); buffers with a dropout always.
    pub every_nth_buffer: u32,
}

impl Default for PerfettoOptions {
    fn default() -> PerfettoOptions {
        PerfettoOptions {
            max_events: Some(5_000_000),
            every_nth_buffer: 1,
        }
    }
}

/// What was written, for the run summary and results file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PerfettoSummary {
    /// The trace file.
    pub path: PathBuf,
    /// Trace events written.
    pub events_written: u64,
    /// Events left out by the cap.
    pub events_dropped: u64,
    /// True when the file was closed as valid JSON.
    pub complete: bool,
    /// Why the trace stopped early, if it did (e.g. the disk filled up).
    pub warning: Option<String>,
}

/// Per-CPU state to turn switch and IRQ events into slices across calls.
#[derive(Debug, Default)]
struct KernelTracks {
    named: Vec<u16>,
    running: HashMap<u16, (u64, String, i32, i32)>,
    irq: HashMap<u16, (u64, String, i32)>,
    softirq: HashMap<u16, (u64, u32)>,
    hrtimer: HashMap<u16, (u64, u64)>,
}

/// Streams trace events to a file (or, with [`PerfettoWriter::to_writer`], any `Write`, e.g.
/// a `Vec<u8>` for a trace served over HTTP).
#[derive(Debug)]
pub struct PerfettoWriter<W: Write = BufWriter<File>> {
    path: PathBuf,
    out: Option<W>,
    options: PerfettoOptions,
    written: u64,
    dropped: u64,
    warning: Option<String>,
    closed: bool,
    kernel: KernelTracks,
    /// Extra `otherData` keys.
    other: serde_json::Map<String, Value>,
}

/// The kernel track of who ran on `cpu`.
pub fn cpu_track(cpu: u16) -> Track {
    Track {
        pid: KERNEL_PID,
        tid: CPU_TRACK_BASE + i32::from(cpu),
    }
}

/// The kernel track of interrupts on `cpu`.
pub fn irq_track(cpu: u16) -> Track {
    Track {
        pid: KERNEL_PID,
        tid: IRQ_TRACK_BASE + i32::from(cpu),
    }
}

fn ts_us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

impl PerfettoWriter<BufWriter<File>> {
    /// Creates (truncates) `path` and writes the opening of the JSON document. Fails before
    /// the run starts when the directory does not exist or is not writable; the error names
    /// the path.
    pub fn create(path: &Path, options: PerfettoOptions) -> io::Result<PerfettoWriter> {
        let file = File::create(path).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot create trace file {}: {e}", path.display()),
            )
        })?;
        Ok(PerfettoWriter::to_writer(
            BufWriter::with_capacity(1 << 16, file),
            path,
            options,
        ))
    }
}

impl<W: Write> PerfettoWriter<W> {
    /// Writes the opening of the JSON document to `out`; `name` (a path or a label) is what
    /// a write error's warning names.
    pub fn to_writer(out: W, name: &Path, options: PerfettoOptions) -> PerfettoWriter<W> {
        let mut w = PerfettoWriter {
            path: name.to_owned(),
            out: Some(out),
            options,
            written: 0,
            dropped: 0,
            warning: None,
            closed: false,
            kernel: KernelTracks::default(),
            other: serde_json::Map::new(),
        };
        w.raw(b"{\"traceEvents\":[\n");
        w
    }

    /// Adds a key to the document's `otherData` (metadata shown in Perfetto's info page),
    /// written when the document is closed.
    pub fn other_data(&mut self, key: &str, value: Value) {
        self.other.insert(key.to_owned(), value);
    }

    /// Writes bytes, or on the first error closes the writer and keeps the reason.
    fn raw(&mut self, bytes: &[u8]) {
        let Some(out) = self.out.as_mut() else { return };
        if let Err(e) = out.write_all(bytes) {
            self.fail(e);
        }
    }

    fn fail(&mut self, e: io::Error) {
        self.warning = Some(format!(
            "writing the trace to {} failed ({e}); the trace stops here and the run goes on",
            self.path.display()
        ));
        self.out = None;
    }

    fn emit(&mut self, event: &Value, always: bool) {
        if self.out.is_none() {
            return;
        }
        if !always && self.options.max_events.is_some_and(|m| self.written >= m) {
            self.dropped += 1;
            return;
        }
        let mut line = if self.written == 0 {
            Vec::new()
        } else {
            b",\n".to_vec()
        };
        // Serializing a `Value` into memory cannot fail.
        serde_json::to_writer(&mut line, event).unwrap_or_default();
        self.raw(&line);
        if self.out.is_some() {
            self.written += 1;
        }
    }

    /// Whether to write the slices of buffer `seq` under `every_nth_buffer`.
    pub fn keep_buffer(&self, seq: u64) -> bool {
        seq.is_multiple_of(u64::from(self.options.every_nth_buffer.max(1)))
    }

    /// Names a process track.
    pub fn process_name(&mut self, pid: i32, name: &str) {
        let ev = json!({"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                        "args": {"name": name}});
        self.emit(&ev, true);
    }

    /// Names a thread track (one per audio thread).
    pub fn thread_name(&mut self, track: Track, name: &str) {
        let ev = json!({"name": "thread_name", "ph": "M", "pid": track.pid, "tid": track.tid,
                        "args": {"name": name}});
        self.emit(&ev, true);
    }

    /// A complete slice (`X`), e.g. one buffer's render on a thread's track.
    pub fn slice(
        &mut self,
        track: Track,
        name: &str,
        cat: &str,
        start_ns: u64,
        dur_ns: u64,
        args: Value,
    ) {
        let ev = json!({"name": name, "cat": cat, "ph": "X", "ts": ts_us(start_ns),
                        "dur": ts_us(dur_ns), "pid": track.pid, "tid": track.tid, "args": args});
        self.emit(&ev, false);
    }

    /// An instant event (`i`) on a thread's track, e.g. a wake-up.
    pub fn instant(&mut self, track: Track, name: &str, ts_ns: u64, args: Value) {
        let ev = json!({"name": name, "ph": "i", "s": "t", "ts": ts_us(ts_ns),
                        "pid": track.pid, "tid": track.tid, "args": args});
        self.emit(&ev, false);
    }

    /// A dropout: a process-wide instant carrying the verdict. Written even past the cap.
    pub fn dropout(&mut self, track: Track, ts_ns: u64, verdict: &str, args: Value) {
        let ev = json!({"name": "dropout", "cat": "dropout", "ph": "i", "s": "p",
                        "ts": ts_us(ts_ns), "pid": track.pid, "tid": track.tid,
                        "args": {"verdict": verdict, "detail": args}});
        self.emit(&ev, true);
    }

    /// Counter values (`C`) at `ts_ns`, e.g. `[("load", 0.42)]`; one counter track per name.
    pub fn counter(&mut self, pid: i32, name: &str, ts_ns: u64, values: &[(&str, f64)]) {
        let args: serde_json::Map<String, Value> = values
            .iter()
            .map(|(k, v)| ((*k).to_owned(), json!(v)))
            .collect();
        let ev = json!({"name": name, "ph": "C", "ts": ts_us(ts_ns), "pid": pid, "args": args});
        self.emit(&ev, false);
    }

    /// Kernel tracks for `cpus`: who ran on each CPU (one slice per task run, named
    /// `comm (tid)`) and IRQ/softirq slices (and, when they were recorded, hrtimer expiry
    /// slices and an idle-state counter per CPU), from tracer events in time order. State carries
    /// over between calls, so pass each event once.
    pub fn kernel_events(&mut self, events: &[TraceEvent], cpus: &[usize]) {
        for e in events {
            if !cpus.contains(&usize::from(e.cpu)) {
                continue;
            }
            self.name_cpu_tracks(e.cpu);
            let cpu_track = cpu_track(e.cpu);
            let irq_track = irq_track(e.cpu);
            match &e.kind {
                EventKind::Switch {
                    next_comm,
                    next_tid,
                    next_prio,
                    ..
                } => {
                    if let Some((since, comm, tid, prio)) = self.kernel.running.remove(&e.cpu) {
                        self.slice(
                            cpu_track,
                            &format!("{comm} ({tid})"),
                            "sched",
                            since,
                            e.ts_ns.saturating_sub(since),
                            json!({"tid": tid, "prio": prio}),
                        );
                    }
                    self.kernel.running.insert(
                        e.cpu,
                        (e.ts_ns, next_comm.to_string(), *next_tid, *next_prio),
                    );
                }
                EventKind::IrqEntry { irq, name } => {
                    self.kernel
                        .irq
                        .insert(e.cpu, (e.ts_ns, name.to_string(), *irq));
                }
                EventKind::IrqExit { .. } => {
                    if let Some((since, name, irq)) = self.kernel.irq.remove(&e.cpu) {
                        self.slice(
                            irq_track,
                            &format!("irq {irq} {name}"),
                            "irq",
                            since,
                            e.ts_ns.saturating_sub(since),
                            json!({"irq": irq}),
                        );
                    }
                }
                EventKind::SoftirqEntry { vec } => {
                    self.kernel.softirq.insert(e.cpu, (e.ts_ns, *vec));
                }
                EventKind::SoftirqExit { .. } => {
                    if let Some((since, vec)) = self.kernel.softirq.remove(&e.cpu) {
                        self.slice(
                            irq_track,
                            &format!("softirq {}", softirq_name(vec)),
                            "softirq",
                            since,
                            e.ts_ns.saturating_sub(since),
                            json!({"vec": vec}),
                        );
                    }
                }
                EventKind::HrtimerEntry { function } => {
                    self.kernel.hrtimer.insert(e.cpu, (e.ts_ns, *function));
                }
                EventKind::HrtimerExit => {
                    if let Some((since, function)) = self.kernel.hrtimer.remove(&e.cpu) {
                        self.slice(
                            irq_track,
                            "hrtimer",
                            "hrtimer",
                            since,
                            e.ts_ns.saturating_sub(since),
                            json!({"function": format!("{function:#x}")}),
                        );
                    }
                }
                EventKind::CpuIdle { state } => {
                    // The kernel's "left idle" is state -1 (u32::MAX as recorded).
                    let value = if *state == u32::MAX {
                        -1.0
                    } else {
                        f64::from(*state)
                    };
                    self.counter(
                        KERNEL_PID,
                        &format!("CPU {} idle state", e.cpu),
                        e.ts_ns,
                        &[("state", value)],
                    );
                }
                EventKind::Lost { count } => {
                    self.instant(
                        cpu_track,
                        "kernel events lost",
                        e.ts_ns,
                        json!({"count": count}),
                    );
                }
                _ => {}
            }
        }
    }

    fn name_cpu_tracks(&mut self, cpu: u16) {
        if self.kernel.named.contains(&cpu) {
            return;
        }
        if self.kernel.named.is_empty() {
            self.process_name(KERNEL_PID, "kernel (audio CPUs)");
        }
        self.kernel.named.push(cpu);
        self.thread_name(cpu_track(cpu), &format!("CPU {cpu}"));
        self.thread_name(irq_track(cpu), &format!("CPU {cpu} interrupts"));
    }

    /// Why the writer stopped early, if it did.
    pub fn warning(&self) -> Option<&str> {
        self.warning.as_deref()
    }

    fn close(&mut self) {
        if self.closed {
            return;
        }
        self.closed = true;
        let mut tail = std::mem::take(&mut self.other);
        tail.insert("xrunlab_events_dropped_by_cap".into(), json!(self.dropped));
        tail.insert(
            "xrunlab_every_nth_buffer".into(),
            json!(self.options.every_nth_buffer),
        );
        let mut end = b"\n],\"displayTimeUnit\":\"ms\",\"otherData\":".to_vec();
        serde_json::to_writer(&mut end, &tail).unwrap_or_default();
        end.extend_from_slice(b"}\n");
        self.raw(&end);
        if let Some(out) = self.out.as_mut() {
            if let Err(e) = out.flush() {
                self.fail(e);
            }
        }
    }

    /// Closes the JSON document and reports what was written.
    pub fn finish(self) -> PerfettoSummary {
        self.finish_into().0
    }

    /// Closes the JSON document; returns what was written and the writer (none when a write
    /// failed).
    pub fn finish_into(mut self) -> (PerfettoSummary, Option<W>) {
        self.close();
        let summary = PerfettoSummary {
            path: self.path.clone(),
            events_written: self.written,
            events_dropped: self.dropped,
            complete: self.warning.is_none(),
            warning: self.warning.clone(),
        };
        (summary, self.out.take())
    }
}

impl<W: Write> Drop for PerfettoWriter<W> {
    fn drop(&mut self) {
        self.close();
    }
}
