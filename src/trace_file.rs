//! `run --trace FILE`: a Perfetto trace of the run (Chrome JSON trace event format), streamed as
//! buffers are drained into `FILE.PID.partial` and committed over `FILE` at the end (results'
//! `PartialFile`: fsync, rename); runs on the main thread.
//!
//! What it holds: one track per audio thread with a `wake-up` slice (period start to the
//! thread running) and a `render` slice (its work) per buffer; counters for load, active
//! sines, power (measured or estimated, labelled) and CPU frequency where the machine reports
//! them; a `dropout` instant per dropout carrying its verdict; with `--explain`, the kernel's
//! sched slices and IRQs of the audio CPUs beside them. `--trace-every N` keeps the slices of
//! one buffer in N (dropouts always), `--trace-max-events N` caps the file (dropout instants
//! are written past the cap). A write error (a full disk) ends the trace with a warning; the
//! run goes on and its result says so.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use xrunlab_engine::explain::counters::SystemCounters;
use xrunlab_engine::explain::perfetto::BufferTrace;
use xrunlab_engine::explain::trace::{Cursor, PerfettoOptions, PerfettoWriter, TraceEvent, Tracer};
use xrunlab_engine::explain::Dropout;
use xrunlab_engine::{BufferReport, ThreadInfo};
pub use xrunlab_results::run::TraceFileReport;
use xrunlab_results::write::PartialFile;

/// How often power and CPU frequency counters are sampled.
const SAMPLE_EVERY: Duration = Duration::from_secs(1);

/// A trace file being written.
pub struct TraceFile {
    trace: BufferTrace<PartialFile>,
    partial: PathBuf,
    every_nth_buffer: u32,
    cursor: Cursor,
    kernel: Vec<TraceEvent>,
    kernel_missed: u64,
    counters: SystemCounters,
    next_sample: Instant,
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
        let options = PerfettoOptions {
            max_events: Some(max_events),
            every_nth_buffer,
        };
        let out = PartialFile::with_capacity(target, 1 << 16).map_err(|e| e.to_string())?;
        let partial = out.partial().to_path_buf();
        let writer = PerfettoWriter::to_writer(out, &partial, options);
        let pid = std::process::id() as i32;
        let trace = BufferTrace::new(
            writer,
            pid,
            "no --explain: run with it for the kernel's account",
        );
        Ok(TraceFile {
            trace,
            partial,
            every_nth_buffer,
            cursor: Cursor::default(),
            kernel: Vec::new(),
            kernel_missed: 0,
            counters: SystemCounters::live(freq_cpus),
            next_sample: Instant::now(),
            warned: false,
        })
    }

    /// Names one track per audio thread.
    pub fn set_threads(&mut self, threads: &[ThreadInfo]) {
        self.trace.set_threads(threads);
    }

    /// One drained buffer: its slices and counters (one buffer in `--trace-every`, dropouts
    /// always) and, when no card will come for it (`explained` false), its dropout instant.
    pub fn buffer(&mut self, b: &BufferReport, explained: bool) {
        self.trace.buffer(b, explained);
    }

    /// A dropout with its card (or the reason it has none): an instant carrying the verdict.
    pub fn dropout(&mut self, d: &Dropout) {
        self.trace.dropout(d);
    }

    /// The kernel events the tracer decoded since the last call: sched and IRQ slices of the
    /// audio CPUs, and CPU frequency counters where the kernel reports changes.
    pub fn kernel(&mut self, tracer: &Tracer, cpus: &[usize]) {
        self.kernel.clear();
        self.kernel_missed += tracer.read_new(&mut self.cursor, &mut self.kernel);
        let events = std::mem::take(&mut self.kernel);
        self.trace.kernel(&events, cpus);
        self.kernel = events;
    }

    /// Power and cpufreq counters, once a second.
    pub fn sample(&mut self, now_ns: u64) {
        let now = Instant::now();
        if now < self.next_sample {
            return;
        }
        self.next_sample = now + SAMPLE_EVERY;
        let sample = self.counters.sample(now_ns);
        let label = self.counters.power_label();
        self.trace.system_counters(&sample, label);
    }

    /// Says once, on stderr, that the trace stopped (the run goes on).
    pub fn warn_once(&mut self) {
        if self.warned {
            return;
        }
        if let Some(w) = self.trace.writer().warning() {
            eprintln!("warning: {w}");
            self.warned = true;
        }
    }

    /// Closes the JSON document (its metadata saying where the power and frequency counters
    /// came from; `kernel_freq` as [`SystemCounters::notes`] takes it) and renames it into
    /// place (fsynced); a trace that stopped early stays in its in-progress file, which the
    /// report names.
    pub fn finish(self, kernel_freq: Option<bool>) -> TraceFileReport {
        let TraceFile {
            mut trace,
            counters,
            partial,
            every_nth_buffer,
            kernel_missed,
            warned,
            ..
        } = self;
        trace.counter_notes(counters.notes(kernel_freq));
        let (summary, out) = trace.into_writer().finish_into();
        let mut warning = summary.warning.clone();
        let mut path = partial.clone();
        let mut renamed = false;
        match out {
            Some(out) if summary.complete => {
                let target = out.target().to_path_buf();
                match out.commit() {
                    Ok(()) => {
                        path = target;
                        renamed = true;
                    }
                    Err(e) => warning = Some(e.to_string()),
                }
            }
            _ => {
                if let Some(w) = &mut warning {
                    w.push_str(&format!(
                        "; what was written is in {} (not valid JSON)",
                        partial.display()
                    ));
                }
            }
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
