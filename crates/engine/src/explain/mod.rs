//! `--explain`: a blame card for every dropout. The collector side of `xrunlab-trace`: the
//! control thread that drains the engine hands every buffer to an [`Explainer`], which keeps a
//! median work time per thread and load ([`medians`]) and, once the kernel tracer has read past
//! a dropout, cuts its window and builds its card. Runs on that control thread only (the
//! binary's main thread in `run`, the dashboard's engine thread); the tracer has its own
//! non-real-time reader thread, and the audio threads never see any of it.
//!
//! Why in the engine crate: both the `run` command and the dashboard drain an engine and need
//! the same cards, and the trace crate knows nothing of buffers; the engine's collector is the
//! one place that has both the buffer records and the thread ids.
//!
//! Bounds: at most [`ExplainOptions::max_cards`] dropouts are kept (the oldest are forgotten and
//! counted; the culprit totals cover all of them), and cards are built at most
//! [`ExplainOptions::cards_per_second`] per second with bursts of [`ExplainOptions::card_burst`]
//! (each card copies ~25 ms of kernel events), so an overloaded run that drops every buffer
//! costs bounded time; the dropouts beyond that are listed without a card, saying why.

pub mod counters;
pub mod medians;
pub mod perfetto;

/// The kernel tracing crate, for callers that stream its events (a trace file) or show its
/// types: they reach it through the engine, which owns the collection.
pub use xrunlab_trace as trace;

use crate::config::EngineConfig;
use crate::engine::ThreadInfo;
use crate::report::BufferReport;
use medians::WorkMedians;
use serde::Serialize;
use std::collections::VecDeque;
use xrunlab_trace::blame::{LEAD_IN_NS, MARGIN_NS};
use xrunlab_trace::{
    blame, now_ns, AudioThread, BlameCard, BlameInput, CulpritTotal, Culprits, SeenTasks,
    TraceInfo, TraceOptions, TraceStats, Tracer,
};

/// How `--explain` runs.
#[derive(Debug, Clone)]
pub struct ExplainOptions {
    /// The tracer's settings (window, ring sizes, roots).
    pub trace: TraceOptions,
    /// Dropouts kept in memory, newest last.
    pub max_cards: usize,
    /// Cards built per second, sustained.
    pub cards_per_second: f64,
    /// Cards that may be built at once after a quiet time.
    pub card_burst: u32,
}

impl Default for ExplainOptions {
    fn default() -> ExplainOptions {
        ExplainOptions {
            trace: TraceOptions::default(),
            max_cards: 1_000,
            cards_per_second: 20.0,
            card_burst: 64,
        }
    }
}

/// One dropout and, when one could be built, its blame card.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Dropout {
    /// Audio start the buffer belongs to.
    pub epoch: u32,
    /// Buffer sequence number within the epoch.
    pub seq: u64,
    /// Period start, CLOCK_MONOTONIC ns.
    pub period_start_ns: u64,
    /// How late the render ended, µs after the deadline (0 when it was not late).
    pub late_by_us: f64,
    /// `late`, `incomplete`, `device_xrun`, or several joined with `+`.
    pub kind: String,
    /// What the engine knows itself: injected faults, unfinished workers.
    pub notes: Vec<String>,
    /// Why it was late, from the kernel's events.
    pub blame: Option<BlameCard>,
    /// Why there is no card, when there is none.
    pub no_card: Option<String>,
}

impl Dropout {
    /// The card's verdict, or a line saying what is known without one.
    pub fn verdict(&self) -> String {
        match (&self.blame, &self.no_card) {
            (Some(card), _) => card.verdict.clone(),
            (None, why) => {
                let mut v = format!("{} ({:.2} ms late)", self.kind, self.late_by_us / 1000.0);
                for n in &self.notes {
                    v.push_str("; ");
                    v.push_str(n);
                }
                if let Some(why) = why {
                    v.push_str(&format!(" [no card: {why}]"));
                }
                v
            }
        }
    }
}

/// What `--explain` did, for result files, the summary and the dashboard.
#[derive(Debug, Clone, Serialize)]
pub struct ExplainReport {
    /// True when the kernel tracer ran.
    pub available: bool,
    /// Why kernel tracing was impossible, when it was.
    pub unavailable: Option<String>,
    /// What the tracer set up.
    pub tracer: Option<TraceInfo>,
    /// The tracer's counters (events by type, lost events, reader CPU time).
    pub stats: Option<TraceStats>,
    /// Kernel events lost because a ring overflowed (the ring's overrun counter), whole run.
    pub lost_events: u64,
    /// Dropouts seen.
    pub dropouts: u64,
    /// Blame cards built.
    pub cards: u64,
    /// Dropouts left without a card (no tracer, or the card rate limit).
    pub without_card: u64,
    /// Dropouts kept in memory (and in the result's `dropouts`).
    pub kept: usize,
    /// Older dropouts forgotten beyond `max_kept` (still counted in the culprit totals).
    pub forgotten: u64,
    /// How many dropouts are kept at most.
    pub max_kept: usize,
    /// The card rate limit.
    pub card_rate_limit: String,
    /// How the "same load" median work time of a card is estimated.
    pub median_estimator: String,
    /// Who stole the most time from the audio threads in late buffers, over the run.
    pub top_culprits: Vec<CulpritTotal>,
}

/// A dropout whose card waits for the tracer to read past its window.
#[derive(Debug)]
struct Pending {
    dropout: Dropout,
    deadline_ns: u64,
    render_end_ns: u64,
    threads: Vec<AudioThread>,
    /// When the tracer will have read the whole window (its end plus two reader polls).
    ready_ns: u64,
}

/// Token bucket for the card rate limit.
#[derive(Debug)]
struct Bucket {
    tokens: f64,
    per_ns: f64,
    cap: f64,
    last_ns: u64,
}

impl Bucket {
    fn take(&mut self, now: u64) -> bool {
        let dt = now.saturating_sub(self.last_ns) as f64;
        self.last_ns = now;
        self.tokens = (self.tokens + dt * self.per_ns).min(self.cap);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// The role name of audio thread `index` (0 = driver).
pub fn role(index: usize) -> String {
    if index == 0 {
        "driver".into()
    } else {
        format!("worker {index}")
    }
}

/// The CPUs the audio threads of `config` may run on: `rt.cpus`, else the CPUs this process
/// may use.
pub fn audio_cpus(config: &EngineConfig) -> Vec<usize> {
    if let Some(cpus) = &config.rt.cpus {
        return cpus.clone();
    }
    match xrunlab_sys::sched::allowed_cpus() {
        Ok(cpus) if !cpus.is_empty() => cpus,
        _ => xrunlab_sys::cpu_set(xrunlab_sys::default_sys_root()),
    }
}

/// Feeds dropouts to the kernel tracer and keeps their cards; see the module doc.
pub struct Explainer {
    tracer: Option<Tracer>,
    unavailable: Option<String>,
    info: Option<TraceInfo>,
    final_stats: Option<TraceStats>,
    options: ExplainOptions,
    /// Thread index → tid of the current audio start.
    tids: Vec<(usize, i32)>,
    medians: WorkMedians,
    pending: VecDeque<Pending>,
    kept: VecDeque<Dropout>,
    /// Finished since the last [`Explainer::build_due`].
    fresh: Vec<Dropout>,
    culprits: Culprits,
    bucket: Bucket,
    lookup: SeenTasks,
    dropouts: u64,
    cards: u64,
    without_card: u64,
    forgotten: u64,
}

impl Explainer {
    /// Starts the kernel tracer on `cpus`. Call from a non-real-time thread (the tracer's reader
    /// inherits its policy). Never fails: where tracing is impossible the explainer still lists
    /// dropouts, and [`Explainer::unavailable`] says exactly why there are no cards.
    pub fn start(cpus: &[usize], options: ExplainOptions) -> Explainer {
        let (tracer, unavailable) = match Tracer::start(cpus, &options.trace) {
            Ok(t) => (Some(t), None),
            Err(e) => (None, Some(e.to_string())),
        };
        let info = tracer.as_ref().map(|t| t.info().clone());
        // Tasks as the tracer first saw them (a short-lived culprit is gone by card time).
        let lookup = match &tracer {
            Some(t) => t.tasks(),
            None => SeenTasks::new(&options.trace.roots.proc_root),
        };
        let bucket = Bucket {
            tokens: f64::from(options.card_burst),
            per_ns: options.cards_per_second / 1e9,
            cap: f64::from(options.card_burst.max(1)),
            last_ns: now_ns(),
        };
        Explainer {
            tracer,
            unavailable,
            info,
            final_stats: None,
            options,
            tids: Vec::new(),
            medians: WorkMedians::new(),
            pending: VecDeque::new(),
            kept: VecDeque::new(),
            fresh: Vec::new(),
            culprits: Culprits::new(),
            bucket,
            lookup,
            dropouts: 0,
            cards: 0,
            without_card: 0,
            forgotten: 0,
        }
    }

    /// Why kernel tracing is impossible, if it is.
    pub fn unavailable(&self) -> Option<&str> {
        self.unavailable.as_deref()
    }

    /// The running tracer (for streaming its events into a trace file).
    pub fn tracer(&self) -> Option<&Tracer> {
        self.tracer.as_ref()
    }

    /// Whether the tracer records the kernel's `power:cpu_frequency` events (`None`: no tracer
    /// runs), for the trace's note on where frequencies come from.
    pub fn traces_cpu_frequency(&self) -> Option<bool> {
        self.info
            .as_ref()
            .map(|i| i.events.iter().any(|e| e == "power:cpu_frequency"))
    }

    /// The CPUs traced.
    pub fn cpus(&self) -> &[usize] {
        self.info.as_ref().map_or(&[], |i| i.cpus.as_slice())
    }

    /// Takes the audio threads' ids; call after every audio (re)start, before draining its
    /// buffers (cards name threads by index, role and tid).
    pub fn set_threads(&mut self, threads: &[ThreadInfo]) {
        self.tids = threads.iter().map(|t| (t.index, t.tid)).collect();
        // A restart may change the load or thread layout: the old medians say nothing then.
        self.medians = WorkMedians::new();
    }

    /// Takes one drained buffer: a normal one feeds the medians, a dropout gets a card later
    /// (or, past the rate limit or without a tracer, none, saying why).
    pub fn observe(&mut self, b: &BufferReport) {
        if !b.dropout() {
            if b.injected_stall_ns == 0 && b.injected_hang_worker == 0 {
                self.medians.add(b);
            }
            return;
        }
        self.dropouts += 1;
        let mut dropout = Dropout {
            epoch: b.epoch,
            seq: b.seq,
            period_start_ns: b.period_start_ns,
            late_by_us: b.render_end_ns.saturating_sub(b.deadline_ns) as f64 / 1000.0,
            kind: dropout_kind(b),
            notes: notes(b),
            blame: None,
            no_card: None,
        };
        let now = now_ns();
        let why_not = if self.tracer.is_none() {
            Some("kernel tracing unavailable (see explain.unavailable)".to_owned())
        } else if b.deadline_ns == u64::MAX {
            Some("the buffer has no deadline (offline)".to_owned())
        } else if !self.bucket.take(now) {
            Some(format!(
                "card rate limit reached ({} cards/s, bursts of {})",
                self.options.cards_per_second, self.options.card_burst
            ))
        } else {
            None
        };
        if let Some(why) = why_not {
            dropout.no_card = Some(why);
            self.without_card += 1;
            self.finish_one(dropout);
            return;
        }
        let threads = self.audio_threads(b);
        let t1 = b.deadline_ns.max(b.render_end_ns) + MARGIN_NS;
        let poll_ns = self.options.trace.poll_ms.max(1) * 1_000_000;
        self.pending.push_back(Pending {
            dropout,
            deadline_ns: b.deadline_ns,
            render_end_ns: b.render_end_ns,
            threads,
            ready_ns: t1 + 2 * poll_ns + 1_000_000,
        });
    }

    fn audio_threads(&self, b: &BufferReport) -> Vec<AudioThread> {
        self.tids
            .iter()
            .map(|&(index, tid)| {
                let part = b.threads.iter().find(|t| t.index == index);
                let wake = part.map(|t| b.period_start_ns + t.wake_latency_ns);
                AudioThread {
                    role: role(index),
                    tid,
                    wake_ns: wake,
                    end_ns: part.zip(wake).map(|(t, w)| w + t.busy_ns),
                    median_busy_ns: self.medians.median(index, b.active_sines),
                }
            })
            .collect()
    }

    fn finish_one(&mut self, dropout: Dropout) {
        if let Some(card) = &dropout.blame {
            self.cards += 1;
            self.culprits.add(card);
        }
        self.kept.push_back(dropout.clone());
        while self.kept.len() > self.options.max_cards {
            self.kept.pop_front();
            self.forgotten += 1;
        }
        self.fresh.push(dropout);
    }

    /// Builds the cards whose windows the tracer has read (all of them with `all`, waiting for
    /// the tracer as needed, for the end of a run) and returns every dropout finished since
    /// the last call, with or without a card. Call after each drain.
    pub fn build_due(&mut self, all: bool) -> Vec<Dropout> {
        let now = now_ns();
        while let Some(p) = self.pending.front() {
            if !all && p.ready_ns > now {
                break;
            }
            let Some(p) = self.pending.pop_front() else {
                break;
            };
            let dropout = self.build(p);
            self.finish_one(dropout);
        }
        std::mem::take(&mut self.fresh)
    }

    fn build(&self, p: Pending) -> Dropout {
        let mut dropout = p.dropout;
        let Some(tracer) = &self.tracer else {
            dropout.no_card = Some("kernel tracing stopped".into());
            return dropout;
        };
        let start = dropout.period_start_ns;
        let window = tracer.snapshot(
            start.saturating_sub(LEAD_IN_NS),
            p.deadline_ns.max(p.render_end_ns) + MARGIN_NS,
        );
        let card = blame(
            &BlameInput {
                period_start_ns: start,
                deadline_ns: p.deadline_ns,
                render_end_ns: p.render_end_ns,
                threads: &p.threads,
                window: &window,
                notes: &dropout.notes,
            },
            &self.lookup,
        );
        dropout.blame = Some(card);
        dropout
    }

    /// Builds every pending card, then stops the tracer (its descriptors close, the kernel
    /// frees its rings); returns the dropouts finished since the last [`Explainer::build_due`].
    pub fn finish(&mut self) -> Vec<Dropout> {
        let fresh = self.build_due(true);
        if let Some(t) = self.tracer.take() {
            self.final_stats = Some(t.stop());
        }
        fresh
    }

    /// The dropouts kept, oldest first.
    pub fn dropouts(&self) -> impl DoubleEndedIterator<Item = &Dropout> {
        self.kept.iter()
    }

    /// A kept dropout by audio start and sequence number.
    pub fn find(&self, epoch: u32, seq: u64) -> Option<&Dropout> {
        self.kept.iter().find(|d| d.epoch == epoch && d.seq == seq)
    }

    /// The `n` culprits that stole the most time so far.
    pub fn top_culprits(&self, n: usize) -> Vec<CulpritTotal> {
        self.culprits.top(n)
    }

    /// Kernel events lost so far.
    pub fn lost_events(&self) -> u64 {
        self.stats().map_or(0, |s| s.lost_total)
    }

    fn stats(&self) -> Option<TraceStats> {
        match &self.tracer {
            Some(t) => Some(t.stats()),
            None => self.final_stats.clone(),
        }
    }

    /// What happened so far (or, after [`Explainer::finish`], over the whole run).
    pub fn report(&self, top: usize) -> ExplainReport {
        let stats = self.stats();
        ExplainReport {
            available: self.info.is_some(),
            unavailable: self.unavailable.clone(),
            tracer: self.info.clone(),
            lost_events: stats.as_ref().map_or(0, |s| s.lost_total),
            stats,
            dropouts: self.dropouts,
            cards: self.cards,
            without_card: self.without_card,
            kept: self.kept.len(),
            forgotten: self.forgotten,
            max_kept: self.options.max_cards,
            card_rate_limit: format!(
                "{} cards/s, bursts of {}",
                self.options.cards_per_second, self.options.card_burst
            ),
            median_estimator: WorkMedians::description(),
            top_culprits: self.culprits.top(top),
        }
    }
}

/// What kind of dropout `b` is: `late`, `incomplete`, `device_xrun`, joined with `+`.
pub fn dropout_kind(b: &BufferReport) -> String {
    let mut kinds = Vec::new();
    if b.late {
        kinds.push("late");
    }
    if b.incomplete() {
        kinds.push("incomplete");
    }
    if b.device_xrun {
        kinds.push("device_xrun");
    }
    kinds.join("+")
}

/// What the engine itself knows about a dropout: faults it injected, workers that did not finish.
fn notes(b: &BufferReport) -> Vec<String> {
    let mut notes = Vec::new();
    if b.injected_stall_ns > 0 {
        notes.push(format!(
            "injected stall ({:.2} ms)",
            b.injected_stall_ns as f64 / 1e6
        ));
    }
    if b.injected_hang_worker > 0 {
        notes.push(format!(
            "injected hang of worker {}",
            b.injected_hang_worker
        ));
    }
    for w in b.unfinished_threads() {
        notes.push(format!("worker {w} did not finish (its part is missing)"));
    }
    if b.server_xruns > 0 {
        notes.push(format!("{} server xrun(s) noted", b.server_xruns));
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use xrunlab_trace::Roots;

    fn late_buffer(seq: u64) -> BufferReport {
        BufferReport {
            record: crate::rt::records::BufferRecord {
                seq,
                frames: 128,
                period_start_ns: 1_000_000,
                deadline_ns: 3_666_666,
                driver_wake_ns: 1_010_000,
                render_start_ns: 1_010_000,
                render_end_ns: 9_000_000,
                active_sines: 100,
                late: true,
                unfinished_workers: 0b10,
                injected_stall_ns: 8_000_000,
                ..Default::default()
            },
            sample_rate: 48_000,
            ..BufferReport::default()
        }
    }

    /// Options whose roots hold no tracefs: the tracer cannot start.
    fn no_tracefs() -> ExplainOptions {
        let fixture = PathBuf::from("/nonexistent-xrunlab-fixture");
        ExplainOptions {
            trace: TraceOptions {
                roots: Roots {
                    proc_root: fixture.join("proc"),
                    sys_root: fixture.join("sys"),
                    tracefs: Some(fixture.join("tracefs")),
                    mount_if_needed: false,
                },
                ..TraceOptions::default()
            },
            max_cards: 2,
            ..ExplainOptions::default()
        }
    }

    #[test]
    fn without_a_tracer_dropouts_are_listed_with_the_reason_and_kept_bounded() {
        let mut e = Explainer::start(&[0], no_tracefs());
        let why = e
            .unavailable()
            .expect("no tracefs in the fixture")
            .to_owned();
        assert!(why.contains("not a tracefs"), "{why}");
        for seq in 0..3 {
            e.observe(&late_buffer(seq));
        }
        let fresh = e.build_due(false);
        assert_eq!(fresh.len(), 3, "dropouts without a card finish at once");
        let d = &fresh[0];
        assert_eq!(d.kind, "late+incomplete");
        assert!((d.late_by_us - 5_333.334).abs() < 0.01, "{}", d.late_by_us);
        assert_eq!(
            d.notes,
            [
                "injected stall (8.00 ms)",
                "worker 2 did not finish (its part is missing)"
            ]
        );
        assert!(d.blame.is_none());
        assert!(d.verdict().contains("injected stall"), "{}", d.verdict());
        assert!(d.verdict().contains("no card: kernel tracing unavailable"));
        let r = e.report(10);
        assert!(!r.available);
        assert_eq!(r.unavailable.as_deref(), Some(why.as_str()));
        assert_eq!((r.dropouts, r.cards, r.without_card), (3, 0, 3));
        assert_eq!((r.kept, r.forgotten), (2, 1), "only the last 2 are kept");
        assert_eq!(
            e.dropouts().map(|d| d.seq).collect::<Vec<_>>(),
            [1, 2],
            "the oldest is forgotten"
        );
        assert!(e.find(0, 2).is_some() && e.find(0, 0).is_none());
    }

    #[test]
    fn the_card_rate_limit_leaves_the_excess_without_a_card() {
        let mut b = Bucket {
            tokens: 2.0,
            per_ns: 10.0 / 1e9,
            cap: 2.0,
            last_ns: 0,
        };
        assert!(b.take(0) && b.take(0));
        assert!(!b.take(0), "the burst is used up");
        assert!(!b.take(50_000_000), "half a token after 50 ms at 10/s");
        assert!(b.take(100_000_000), "one token after 100 ms");
    }
}
