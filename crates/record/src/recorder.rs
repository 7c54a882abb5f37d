//! The recorder's store loop: takes [`Input`]s from watch's side on a bounded channel, polls
//! drift between them, and writes the history: one row per xrun (its card carrying the drift
//! that precedes it) with its snapshot where the rate limit let one through, every drift event,
//! the session and its gaps; retention runs at the start and then periodically. Runs on the
//! recorder's store thread, the history's one writer.

use crate::{Metrics, Snapshot};
use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use xrunlab_drift::{
    before_card, clock_time_local, DriftEvent, DriftKind, DriftMonitor, Lookback, WatchedThread,
};
use xrunlab_history::{unix_ns, DriftEntry, History, HistoryError, Retention, XrunEntry};

/// One xrun as watch's analysis gives it.
#[derive(Debug, Clone)]
pub struct XrunInput {
    /// When its cycle started, ns since the Unix epoch.
    pub time_ns: i64,
    /// The late node, if one was.
    pub node: Option<String>,
    /// The card kind's name (watch's names: `node_ran_long`…).
    pub kind: String,
    /// The root cause's kind, in a word or two (`node`, `driver`, `irq`, `task`…).
    pub root: String,
    /// Who the card blames, if anyone.
    pub culprit: Option<String>,
    /// The card in one line, as watch prints it.
    pub summary: String,
    /// The whole card, as watch's `--json` writes it.
    pub card: serde_json::Value,
    /// The Perfetto trace of its window, when the kernel's events were read and the
    /// [`crate::SnapshotGate`] let it through (at most one per root cause per interval).
    pub snapshot: Snapshot,
}

/// What the recorder is told.
#[derive(Debug)]
pub enum Input {
    /// An xrun's card.
    Xrun(Box<XrunInput>),
    /// `count` more cycles, with the driver's wake-up delays measured among them, ns.
    Cycles {
        /// Cycles since the last report.
        count: u64,
        /// The driver's wake-up delay after its expected start, per cycle where known.
        wake_delays_ns: Vec<u64>,
    },
    /// The graph's quantum and rate, as of `time_ns` (sent when seen; only changes are kept).
    Graph {
        /// Frames per cycle.
        quantum: u32,
        /// Hz.
        rate: u32,
        /// When, ns since the Unix epoch.
        time_ns: i64,
    },
    /// A node appeared or went away.
    Node {
        /// Its name.
        name: String,
        /// Appeared (true) or went away.
        added: bool,
        /// When, ns since the Unix epoch.
        time_ns: i64,
    },
    /// The real-time threads to follow for drift (the server's and the nodes'), replacing the
    /// previous list.
    Threads(Vec<WatchedThread>),
    /// The server went away (stopped, crashed, restarting).
    ServerGone {
        /// When, ns since the Unix epoch.
        time_ns: i64,
        /// What the recorder saw.
        reason: String,
    },
    /// The server is back.
    ServerBack {
        /// When, ns since the Unix epoch.
        time_ns: i64,
    },
    /// Stop: end the session and return.
    Stop,
}

/// How the recorder behaves.
#[derive(Debug, Clone)]
pub struct RecorderConfig {
    /// `pipewire` or `jack`.
    pub server: String,
    /// The xrunlab version, for the session row.
    pub version: String,
    /// How much history to keep.
    pub retention: Retention,
    /// How often retention runs after the first pass at the start.
    pub retain_every: Duration,
    /// How often drift is polled.
    pub drift_every: Duration,
    /// Where drift reads /proc and /sys (`/` on the machine).
    pub drift_root: PathBuf,
}

impl RecorderConfig {
    /// The defaults for `server`: retention as given, hourly retention passes, drift polled
    /// every second.
    pub fn new(server: &str, retention: Retention) -> RecorderConfig {
        RecorderConfig {
            server: server.to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            retention,
            retain_every: Duration::from_secs(3600),
            drift_every: Duration::from_secs(1),
            drift_root: PathBuf::from("/"),
        }
    }
}

/// What a recorder wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Xruns written.
    pub xruns: u64,
    /// Snapshots kept.
    pub snapshots: u64,
    /// Snapshots dropped by the rate limit.
    pub snapshots_skipped: u64,
    /// Drift events written.
    pub drift: u64,
    /// Gaps (the server went away).
    pub gaps: u64,
    /// Transactions committed for the inputs: fewer than the xruns when a storm's cards came
    /// together and were written as one.
    pub commits: u64,
}

/// Passing drift events kept for the cards' words: enough for a storm of node changes in a
/// minute, bounded for a month.
const RECENT_DRIFT: usize = 256;
/// Settings still in effect kept for the cards' words (one per thread, policy…).
const STATE_DRIFT: usize = 256;

/// The store loop's state.
pub struct Recorder {
    history: History,
    metrics: Arc<Metrics>,
    config: RecorderConfig,
    session: i64,
    monitor: DriftMonitor,
    recent: VecDeque<DriftEvent>,
    state: BTreeMap<(DriftKind, String), DriftEvent>,
    last_retain: Instant,
    server_up: bool,
    stats: Stats,
}

fn now_ns() -> i64 {
    unix_ns(SystemTime::now())
}

impl Recorder {
    /// Starts a session in `history` and runs a first retention pass.
    pub fn new(
        history: History,
        metrics: Arc<Metrics>,
        config: RecorderConfig,
    ) -> Result<Recorder, HistoryError> {
        history.retain(&config.retention, now_ns())?;
        let session = history.begin_session(now_ns(), &config.server, &config.version)?;
        metrics.set_server_up(&config.server, true);
        let mut monitor = DriftMonitor::new(config.drift_root.clone());
        // The baseline: what the machine is like as recording starts is no change.
        monitor.poll();
        Ok(Recorder {
            history,
            metrics,
            monitor,
            session,
            recent: VecDeque::with_capacity(RECENT_DRIFT),
            state: BTreeMap::new(),
            last_retain: Instant::now(),
            server_up: true,
            stats: Stats::default(),
            config,
        })
    }

    /// The session this recorder writes.
    pub fn session(&self) -> i64 {
        self.session
    }

    /// Runs until [`Input::Stop`] or until every sender is gone; ends the session.
    pub fn run(mut self, inputs: Receiver<Input>) -> Result<Stats, HistoryError> {
        let mut next_poll = Instant::now() + self.config.drift_every;
        loop {
            let wait = next_poll.saturating_duration_since(Instant::now());
            match inputs.recv_timeout(wait) {
                Ok(Input::Stop) | Err(RecvTimeoutError::Disconnected) => break,
                Ok(input) => {
                    // What came with it is written with it, in one commit, before more is taken.
                    let mut batch = vec![input];
                    let mut stop = false;
                    while batch.len() < BATCH_MAX {
                        match inputs.try_recv() {
                            Ok(Input::Stop) => {
                                stop = true;
                                break;
                            }
                            Ok(more) => batch.push(more),
                            Err(_) => break,
                        }
                    }
                    self.handle_batch(batch)?;
                    if stop {
                        break;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    self.tick()?;
                    next_poll = Instant::now() + self.config.drift_every;
                }
            }
        }
        self.finish()
    }

    /// Polls drift, and runs retention when it is due.
    pub fn tick(&mut self) -> Result<(), HistoryError> {
        for e in self.monitor.poll() {
            self.drift(e)?;
        }
        if self.last_retain.elapsed() >= self.config.retain_every {
            self.history.retain(&self.config.retention, now_ns())?;
            self.last_retain = Instant::now();
        }
        Ok(())
    }

    /// Ends the session; returns what was written.
    pub fn finish(self) -> Result<Stats, HistoryError> {
        self.history.end_session(self.session, now_ns())?;
        Ok(self.stats)
    }

    /// Takes inputs that arrived together, in order, in one transaction: committed (on disk)
    /// when this returns, or on an error none of them is.
    pub fn handle_batch(&mut self, batch: Vec<Input>) -> Result<(), HistoryError> {
        // Counts and the followed threads go to memory only: no transaction for them.
        let writes = |i: &Input| !matches!(i, Input::Cycles { .. } | Input::Threads(_));
        if !batch.iter().any(writes) {
            for input in batch {
                self.handle(input)?;
            }
            return Ok(());
        }
        self.history.begin()?;
        for input in batch {
            if let Err(e) = self.handle(input) {
                let _ = self.history.rollback();
                return Err(e);
            }
        }
        self.history.commit()?;
        self.stats.commits += 1;
        Ok(())
    }

    /// Takes one input (anything but `Stop`, which [`Recorder::run`] handles).
    pub fn handle(&mut self, input: Input) -> Result<(), HistoryError> {
        let server = self.config.server.clone();
        match input {
            Input::Xrun(x) => self.xrun(*x)?,
            Input::Cycles {
                count,
                wake_delays_ns,
            } => {
                self.metrics.count_cycles(&server, count);
                for d in wake_delays_ns {
                    self.metrics.observe_wake_delay(&server, d as f64 / 1e9);
                }
            }
            Input::Graph {
                quantum,
                rate,
                time_ns,
            } => {
                for e in self.monitor.graph(quantum, rate, time_ns) {
                    self.drift(e)?;
                }
            }
            Input::Node {
                name,
                added,
                time_ns,
            } => {
                let e = self.monitor.node(&name, added, time_ns);
                self.drift(e)?;
            }
            Input::Threads(threads) => self.monitor.watch_threads(threads),
            Input::ServerGone { time_ns, reason } => {
                if self.server_up {
                    self.history.open_gap(self.session, time_ns, &reason)?;
                    self.server_up = false;
                    self.stats.gaps += 1;
                    self.metrics.set_server_up(&server, false);
                }
            }
            Input::ServerBack { time_ns } => {
                if !self.server_up {
                    self.history.close_gap(self.session, time_ns)?;
                    self.server_up = true;
                    self.metrics.set_server_up(&server, true);
                }
            }
            Input::Stop => {}
        }
        Ok(())
    }

    fn drift(&mut self, e: DriftEvent) -> Result<(), HistoryError> {
        self.history.insert_drift(
            Some(self.session),
            &DriftEntry {
                time_ns: e.time_ns,
                kind: e.kind.name().to_owned(),
                subject: e.subject.clone(),
                before: e.before.clone(),
                after: e.after.clone(),
                words: e.words(),
            },
        )?;
        self.metrics.count_drift(e.kind.name());
        self.stats.drift += 1;
        if matches!(
            e.kind,
            DriftKind::Sched | DriftKind::Governor | DriftKind::Epp | DriftKind::PlatformProfile
        ) {
            let key = (e.kind, e.subject.clone());
            if !self.state.contains_key(&key) && self.state.len() >= STATE_DRIFT {
                // Full: the setting changed longest ago goes.
                if let Some(oldest) = self
                    .state
                    .iter()
                    .min_by_key(|(_, v)| v.time_ns)
                    .map(|(k, _)| k.clone())
                {
                    self.state.remove(&oldest);
                }
            }
            self.state.insert(key, e);
        } else {
            if self.recent.len() == RECENT_DRIFT {
                self.recent.pop_front();
            }
            self.recent.push_back(e);
        }
        Ok(())
    }

    fn xrun(&mut self, x: XrunInput) -> Result<(), HistoryError> {
        let known: Vec<DriftEvent> = self
            .state
            .values()
            .chain(self.recent.iter())
            .cloned()
            .collect();
        let words = before_card(&known, x.time_ns, Lookback::default(), &clock_time_local);
        let mut card = x.card;
        if let (Some(obj), false) = (card.as_object_mut(), words.is_empty()) {
            obj.insert("drift_before".into(), serde_json::json!(words));
        }
        let entry = XrunEntry {
            time_ns: x.time_ns,
            server: self.config.server.clone(),
            node: x.node,
            kind: x.kind,
            root: x.root,
            culprit: x.culprit,
            summary: x.summary,
            card,
        };
        let id = self.history.insert_xrun(Some(self.session), &entry)?;
        self.stats.xruns += 1;
        self.metrics.count_xrun(
            &entry.server,
            entry.node.as_deref().unwrap_or(""),
            &entry.kind,
            entry.culprit.as_deref().unwrap_or(""),
        );
        match x.snapshot {
            Snapshot::Trace(trace) => {
                self.history.insert_snapshot(id, &entry.root, &trace)?;
                self.stats.snapshots += 1;
            }
            Snapshot::RateLimited => self.stats.snapshots_skipped += 1,
            Snapshot::None => {}
        }
        Ok(())
    }
}

/// A recorder running on its own store thread.
pub struct RecorderHandle {
    /// Where watch's side sends its inputs. Bounded: send an xrun with `send` (it waits rather
    /// than lose a card when the disk is slow), and cycle counts with `try_send` (a dropped
    /// batch only undercounts the cycles' metric).
    pub inputs: SyncSender<Input>,
    thread: std::thread::JoinHandle<Result<Stats, HistoryError>>,
}

impl RecorderHandle {
    /// Tells the store loop to stop, waits for it, and returns what it wrote.
    pub fn stop(self) -> Result<Stats, HistoryError> {
        let _ = self.inputs.send(Input::Stop);
        match self.thread.join() {
            Ok(result) => result,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
}

/// The most inputs written in one transaction: a storm's burst of cards is one commit, and a
/// flood still commits every so often.
const BATCH_MAX: usize = 64;

/// Inputs that may wait in the channel: a storm of xruns at 48 kHz / 64 is 750 a second, and
/// the store writes each in well under a millisecond; this bounds the memory a stalled disk can
/// take.
pub const INPUT_CAPACITY: usize = 1024;

/// Runs `recorder` on a thread of its own (`xrunlab-record`).
pub fn spawn(recorder: Recorder) -> std::io::Result<RecorderHandle> {
    let (inputs, rx) = std::sync::mpsc::sync_channel(INPUT_CAPACITY);
    let thread = std::thread::Builder::new()
        .name("xrunlab-record".into())
        .spawn(move || recorder.run(rx))?;
    Ok(RecorderHandle { inputs, thread })
}
