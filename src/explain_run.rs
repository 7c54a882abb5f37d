//! What `run --explain` and `run --trace` add to a run: the kernel tracer and blame cards (the
//! engine's [`Explainer`]) and the Perfetto trace file, fed with every drained buffer; runs on the
//! main thread, which is not real-time (the tracer's reader inherits that).

use crate::cli::run::RunArgs;
use crate::trace_file::{TraceFile, TraceFileReport};
use crate::Failure;
use xrunlab_engine::explain::{audio_cpus, Dropout, ExplainOptions, ExplainReport, Explainer};
use xrunlab_engine::{BufferReport, EngineConfig, ThreadInfo};

/// Culprits listed in results and the summary.
pub const TOP_CULPRITS: usize = 10;

/// The explain and trace parts of a result.
#[derive(Debug, Clone, Default)]
pub struct ExtrasResult {
    pub explain: Option<ExplainReport>,
    pub dropouts: Option<Vec<Dropout>>,
    pub trace: Option<TraceFileReport>,
}

/// The tracer, the cards and the trace file of one run; each is optional.
#[derive(Default)]
pub struct Extras {
    explain: Option<Explainer>,
    trace: Option<TraceFile>,
}

impl Extras {
    /// Nothing extra (`render`, or a run without the flags).
    pub fn none() -> Extras {
        Extras::default()
    }

    /// Starts the tracer (before the engine, so its first buffers are covered) and creates the
    /// trace file's in-progress file. A tracer that cannot run is said once on stderr; the run
    /// goes on without cards.
    pub fn start(args: &RunArgs, config: &EngineConfig) -> Result<Extras, Failure> {
        let cpus = audio_cpus(config);
        let explain = args.explain.then(|| {
            let mut options = ExplainOptions::default();
            options.trace.extra_events = args.explain_all;
            let e = Explainer::start(&cpus, options);
            if let Some(why) = e.unavailable() {
                eprintln!("warning: --explain: {why}; the run goes on without blame cards");
            }
            e
        });
        let trace = match &args.trace {
            Some(path) => Some(
                TraceFile::create(path, args.trace_max_events, args.trace_every, cpus)
                    .map_err(Failure::Runtime)?,
            ),
            None => None,
        };
        Ok(Extras { explain, trace })
    }

    /// The audio threads of the engine just started.
    pub fn set_threads(&mut self, threads: &[ThreadInfo]) {
        if let Some(e) = self.explain.as_mut() {
            e.set_threads(threads);
        }
        if let Some(t) = self.trace.as_mut() {
            t.set_threads(threads);
        }
    }

    /// One drained buffer.
    pub fn buffer(&mut self, b: &BufferReport) {
        if let Some(e) = self.explain.as_mut() {
            e.observe(b);
        }
        if let Some(t) = self.trace.as_mut() {
            t.buffer(b, self.explain.is_some());
        }
    }

    /// After each drain: the cards that are due, the kernel's new events and the counters
    /// into the trace file.
    pub fn after_drain(&mut self, now_ns: u64) {
        let fresh = match self.explain.as_mut() {
            Some(e) => e.build_due(false),
            None => Vec::new(),
        };
        self.feed_trace(&fresh, now_ns);
    }

    fn feed_trace(&mut self, fresh: &[Dropout], now_ns: u64) {
        let Some(t) = self.trace.as_mut() else {
            return;
        };
        for d in fresh {
            t.dropout(d);
        }
        if let Some(tracer) = self.explain.as_ref().and_then(|e| e.tracer()) {
            let cpus = tracer.info().cpus.clone();
            t.kernel(tracer, &cpus);
        }
        t.sample(now_ns);
        t.warn_once();
    }

    /// The explain part of a checkpoint (the trace file is reported at the end).
    pub fn checkpoint(&self) -> ExtrasResult {
        ExtrasResult {
            explain: self.explain.as_ref().map(|e| e.report(TOP_CULPRITS)),
            dropouts: self
                .explain
                .as_ref()
                .map(|e| e.dropouts().cloned().collect()),
            trace: None,
        }
    }

    /// Builds the remaining cards, stops the tracer, closes the trace file.
    pub fn finish(mut self, now_ns: u64) -> ExtrasResult {
        // The kernel's last events go to the file before the tracer stops.
        self.feed_trace(&[], now_ns);
        let fresh = match self.explain.as_mut() {
            Some(e) => e.finish(),
            None => Vec::new(),
        };
        self.feed_trace(&fresh, now_ns);
        ExtrasResult {
            trace: {
                let kernel_freq = self
                    .explain
                    .as_ref()
                    .and_then(Explainer::traces_cpu_frequency);
                self.trace.take().map(|t| t.finish(kernel_freq))
            },
            ..self.checkpoint()
        }
    }
}
