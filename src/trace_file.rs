//! `run --trace FILE`: a Perfetto trace of the run (Chrome JSON trace event format), streamed as buffers are drained into `FILE.PID.partial` and renamed to `FILE` at the end; runs on the main thread.
//!
//! What it holds: one track per audio thread with a `wake-up` slice (period start to the
//! thread running) and a `render` slice (its work) per buffer; counters for load, active
//! sines, power (measured or estimated, labelled) and CPU frequency where the machine reports
//! them; a `dropout` instant per dropout carrying its verdict; with `--explain`, the kernel's
//! sched slices and IRQs of the audio CPUs beside them. `--trace-every N` keeps the slices of
//! one buffer in N (dropouts always), `--trace-max-events N` caps the file (dropout instants
//! are written past the cap). A write error (a full disk) ends the trace with a warning; the
//! run goes on and its result says so.

use serde::Serialize;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use xrunlab_engine::explain::trace::{
    Cursor, EventKind, PerfettoOptions, PerfettoWriter, TraceEvent, Tracer, Track,
};
use xrunlab_engine::explain::{dropout_kind, role, Dropout};
use xrunlab_engine::{BufferReport, ThreadInfo};
use xrunlab_sys::PowerMeter;

/// How often power and CPU frequency counters are sampled.
const SAMPLE_EVERY: Duration = Duration::from_secs(1);

/// What the trace file holds, for the result and the summary.
#[derive(Debug, Clone, Serialize)]
pub struct TraceFileReport {
    /// The trace file (or, when it stopped early, the in-progress file that holds what was written).
    pub path: PathBuf,
    /// Trace events written.
    pub events_written: u64,
    /// Events left out by `--trace-max-events` (dropout instants are never left out).
    pub events_dropped_by_cap: u64,
    /// Keep the slices of one buffer in this many.
    pub every_nth_buffer: u32,
    /// Kernel events that aged out of the tracer's window before the file got them.
    pub kernel_events_missed: u64,
    /// True when the file was closed as valid JSON and renamed into place.
    pub complete: bool,
    /// Why the trace stopped early (e.g. the disk filled up).
    pub warning: Option<String>,
}

/// The in-progress file of a trace bound for `target`.
fn partial_path(target: &Path) -> PathBuf {
    let mut name = target.as_os_str().to_owned();
    name.push(format!(".{}.partial", std::process::id()));
    PathBuf::from(name)
}

/// A trace file being written.
pub struct TraceFile {
    writer: PerfettoWriter,
    target: PathBuf,
    partial: PathBuf,
    every_nth_buffer: u32,
    pid: i32,
    tids: Vec<(usize, i32)>,
    cursor: Cursor,
    kernel: Vec<TraceEvent>,
    kernel_missed: u64,
    power: PowerMeter,
    power_label: String,
    next_sample: Instant,
    freq_cpus: Vec<usize>,
    freqs: Vec<Option<u64>>,
    warned: bool,
}

impl TraceFile {
    /// Creates the in-progress file beside `target` (checked beforehand) and names the process.
    pub fn create(
        target: &Path,
        max_events: u64,
        every_nth_buffer: u32,
        freq_cpus: Vec<usize>,
    ) -> Result<TraceFile, String> {
        let partial = partial_path(target);
        let options = PerfettoOptions {
            max_events: Some(max_events),
            every_nth_buffer,
        };
        let mut writer = PerfettoWriter::create(&partial, options).map_err(|e| e.to_string())?;
        let pid = std::process::id() as i32;
        writer.process_name(pid, "xrunlab audio threads");
        let power = PowerMeter::new(
            xrunlab_sys::default_sys_root(),
            xrunlab_sys::default_proc_root(),
        );
        let power_label = if power.source().starts_with("estimate") {
            "power W (estimate: process CPU time)".to_owned()
        } else {
            "power W (RAPL package)".to_owned()
        };
        Ok(TraceFile {
            writer,
            target: target.to_path_buf(),
            partial,
            every_nth_buffer,
            pid,
            tids: Vec::new(),
            cursor: Cursor::default(),
            kernel: Vec::new(),
            kernel_missed: 0,
            power,
            power_label,
            next_sample: Instant::now(),
            freq_cpus,
            freqs: Vec::new(),
            warned: false,
        })
    }

    fn track(&self, index: usize) -> Track {
        let tid = self
            .tids
            .iter()
            .find(|(i, _)| *i == index)
            .map_or(-(index as i32) - 1, |(_, t)| *t);
        Track { pid: self.pid, tid }
    }

    /// Names one track per audio thread.
    pub fn set_threads(&mut self, threads: &[ThreadInfo]) {
        self.tids = threads.iter().map(|t| (t.index, t.tid)).collect();
        for t in threads {
            let name = format!("{} (tid {})", role(t.index), t.tid);
            self.writer.thread_name(self.track(t.index), &name);
        }
    }

    /// One drained buffer: its slices and counters (one buffer in `--trace-every`, dropouts
    /// always) and, when no card will come for it (`explained` false), its dropout instant.
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
                    json!({"seq": b.seq, "sines": t.sines, "computed": t.computed,
                           "cpu_start": t.cpu_start, "cpu_end": t.cpu_end,
                           "cpu_us": t.cpu_ns as f64 / 1000.0}),
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
            let verdict = format!(
                "{} (no --explain: run with it for the kernel's account)",
                dropout_kind(b)
            );
            let track = self.track(0);
            self.writer.dropout(
                track,
                b.period_start_ns,
                &verdict,
                json!({"seq": b.seq, "late_by_us":
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
            json!({"seq": d.seq, "kind": d.kind, "late_by_us": d.late_by_us,
                   "notes": d.notes,
                   "cause": card.map(|c| c.cause),
                   "main_culprit": card.and_then(|c| c.main_culprit.clone()),
                   "no_card": d.no_card}),
        );
    }

    /// The kernel events the tracer decoded since the last call: sched and IRQ slices of the
    /// audio CPUs, and CPU frequency counters where the kernel reports changes.
    pub fn kernel(&mut self, tracer: &Tracer, cpus: &[usize]) {
        self.kernel.clear();
        self.kernel_missed += tracer.read_new(&mut self.cursor, &mut self.kernel);
        let events = std::mem::take(&mut self.kernel);
        self.writer.kernel_events(&events, cpus);
        for e in &events {
            if let EventKind::CpuFrequency { khz, cpu_id } = e.kind {
                self.writer.counter(
                    self.pid,
                    &format!("CPU {cpu_id} MHz (kernel)"),
                    e.ts_ns,
                    &[("MHz", f64::from(khz) / 1000.0)],
                );
            }
        }
        self.kernel = events;
    }

    /// Power and cpufreq counters, once a second.
    pub fn sample(&mut self, now_ns: u64) {
        let now = Instant::now();
        if now < self.next_sample {
            return;
        }
        self.next_sample = now + SAMPLE_EVERY;
        if let Some(p) = self.power.sample() {
            let label = self.power_label.clone();
            self.writer
                .counter(self.pid, &label, now_ns, &[("W", p.watts)]);
        }
        xrunlab_sys::read_cur_freqs_khz(
            xrunlab_sys::default_sys_root(),
            &self.freq_cpus,
            &mut self.freqs,
        );
        let readings: Vec<(usize, u64)> = self
            .freq_cpus
            .iter()
            .zip(&self.freqs)
            .filter_map(|(c, f)| f.map(|f| (*c, f)))
            .collect();
        for (cpu, khz) in readings {
            self.writer.counter(
                self.pid,
                &format!("CPU {cpu} MHz (cpufreq)"),
                now_ns,
                &[("MHz", khz as f64 / 1000.0)],
            );
        }
    }

    /// Says once, on stderr, that the trace stopped (the run goes on).
    pub fn warn_once(&mut self) {
        if self.warned {
            return;
        }
        if let Some(w) = self.writer.warning() {
            eprintln!("warning: {w}");
            self.warned = true;
        }
    }

    /// Closes the JSON document and renames it into place; a trace that stopped early stays
    /// in its in-progress file, which the report names.
    pub fn finish(self) -> TraceFileReport {
        let TraceFile {
            writer,
            target,
            partial,
            every_nth_buffer,
            kernel_missed,
            warned,
            ..
        } = self;
        let summary = writer.finish();
        let mut warning = summary.warning.clone();
        let mut path = partial.clone();
        let mut renamed = false;
        if summary.complete {
            match std::fs::rename(&partial, &target) {
                Ok(()) => {
                    path = target;
                    renamed = true;
                }
                Err(e) => {
                    warning = Some(format!(
                        "cannot rename {} to {}: {e}; the trace is in the former",
                        partial.display(),
                        target.display()
                    ))
                }
            }
        } else if let Some(w) = &mut warning {
            w.push_str(&format!(
                "; what was written is in {} (not valid JSON)",
                partial.display()
            ));
        }
        if let (Some(w), false) = (&warning, warned) {
            eprintln!("warning: {w}");
        }
        TraceFileReport {
            complete: renamed,
            path,
            events_written: summary.events_written,
            events_dropped_by_cap: summary.events_dropped,
            every_nth_buffer,
            kernel_events_missed: kernel_missed,
            warning,
        }
    }
}
