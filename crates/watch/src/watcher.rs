//! The watch loop: a [`Watcher`] takes a [`Source`]'s events (PipeWire's profiler records,
//! JACK2's xrun callbacks and client list), keeps each node's figures, finds the xruns, and once
//! the kernel's events around one are in, makes its card: the late node's thread, the path to
//! the root, and the root's thread (an upstream node's, or the audio server's own real-time
//! thread that runs the driver). `watch` prints what it yields; `record` stores it. Runs on the
//! caller's thread (watch's main thread); the tracer's reader and the server client's loop run
//! on threads of their own. Its state is bounded by the number of nodes.

use crate::card::{card, Card, Faults, Kernel, RootThreads};
use crate::chain::{driver_late_threshold_ns, Role, Step};
use crate::detect::{Detector, Xrun};
use crate::jack_chain::{derive_cycles, pick_threads};
use crate::mapping::{confirm, map_node, rt_threads, Confidence, Mapping, RtThread};
use crate::model::Cycle;
use crate::source::{Source, SourceEvent, WakeChain};
use crate::summary::{Summary, Tally};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::Path;
use std::time::{Duration, Instant};
use xrunlab_sys::procfs::{reread_thread_faults, thread_faults_file};
use xrunlab_sys::Reread;
use xrunlab_trace::blame::LEAD_IN_NS;
use xrunlab_trace::{now_ns, TraceOptions, Tracer, Window};

/// How long after an xrun's deadline the kernel's events are taken: the tracer's reader drains
/// every 10 ms, so this leaves it time to have the whole window.
const SETTLE_NS: u64 = TAIL_NS + 50_000_000;
/// How far past an xrun's deadline its window of kernel events reaches: a thread still running
/// at the deadline (whose BUSY the server could not give) shows its switch-out in it if it ran
/// up to this late, which is how the kernel's account sees that it ran when the trace lost its
/// switch-in.
const TAIL_NS: u64 = 20_000_000;
/// JACK2 sends its xrun notification after the late cycle: the wake chain is read this far back.
const JACK_LOOKBACK_NS: u64 = 60_000_000;
/// ... and this far ahead, so that a client still running at the notification is seen finishing.
const JACK_LOOKAHEAD_NS: u64 = 30_000_000;
/// Recent wake-ups kept per node (and the driver) to confirm its thread against the kernel's
/// switch-ins.
const AWAKE_HISTORY: usize = 32;
/// How often JACK2's clients' WAIT and BUSY are rebuilt from the wake chain (for the node view
/// and the summary; xruns come from the server's callback): well within the tracer's 500 ms
/// window, so that every cycle is read once.
const JACK_SAMPLE: Duration = Duration::from_millis(250);
/// The most of the wake chain read per sample, ns (what the tracer still holds).
const JACK_SAMPLE_SPAN_NS: u64 = 400_000_000;
/// With a tracer in overwrite mode (`record`), JACK2's clients' cycles are not rebuilt every
/// [`JACK_SAMPLE`]: the medians that find the late client come from the normal cycles in this
/// much of the wake chain before an xrun's own stretch, read with the xrun ...
const JACK_LEARN_SPAN_NS: u64 = 300_000_000;
/// ... at most this often (the figures change slowly; a storm's every xrun reading 300 ms more
/// would cost more than the rebuild it replaces).
const JACK_LEARN_EVERY_NS: u64 = 10_000_000_000;
/// How long the server's and clients' threads, read from /proc, are used before being read
/// again (a graph change or a restarted server is seen within this).
const THREADS_REFRESH: Duration = Duration::from_secs(3);
/// How often the mapped threads' page-fault counters are sampled, and how many samples are kept
/// per thread (a card needs one from before its xrun, which it gets within about 0.1 s).
const FAULT_SAMPLE: Duration = Duration::from_millis(250);
const FAULT_SAMPLES_KEPT: usize = 8;

/// The kernel side: a running tracer, or why there is none.
pub struct KernelSide {
    /// The tracer, when kernel events are recorded.
    pub tracer: Option<Tracer>,
    /// Why there is none, in words for the user.
    pub missing: String,
    /// The CPUs traced.
    pub cpus: Vec<usize>,
}

/// Each CPU's overwrite ring, KiB, where the kernel's events are read only around an xrun. The
/// kernel keeps the newest events in it, so it must hold the oldest window a card reads until
/// the card is made: JACK2's learning read in `record` (300 ms before the xrun's own 60 ms, read
/// 80-180 ms after the xrun, about 0.55 s in all) and PipeWire's card (its cycle, read 70-170 ms
/// after its deadline). A scheduler or interrupt record takes 56-100 bytes: 2 MiB is 21,000 or
/// more, over 0.55 s at up to 38,000 events a second on one CPU (a busy 2-core machine here: a
/// few thousand). A window the ring no longer held whole says so (`complete` false, and the
/// card's verdict says "incomplete").
pub const OVERWRITE_RING_KIB: usize = 2048;

impl KernelSide {
    /// Starts the tracer on every online CPU, unless `no_kernel`; a refusal is kept as words.
    /// The kernel's events are read only around an xrun (overwrite rings) where the server
    /// reports every node's timing itself (`reports_timing`: PipeWire's profiler), and drained
    /// all the time where the cycles come from the kernel's wake chain (JACK2).
    pub fn start(no_kernel: bool, reports_timing: bool) -> KernelSide {
        match reports_timing {
            true => KernelSide::start_with(no_kernel, &KernelSide::around_xruns()),
            false => KernelSide::start_with(no_kernel, &TraceOptions::default()),
        }
    }

    /// The tracer's options for reading the kernel's events only around an xrun (what `record`
    /// runs, and `watch` on PipeWire): between xruns the kernel writes into rings nobody reads.
    pub fn around_xruns() -> TraceOptions {
        TraceOptions {
            overwrite: true,
            ring_kib_per_cpu: OVERWRITE_RING_KIB,
            ..TraceOptions::default()
        }
    }

    /// [`KernelSide::start`] with the tracer's `options` (`record` drains less often).
    pub fn start_with(no_kernel: bool, options: &TraceOptions) -> KernelSide {
        let cpus = xrunlab_sys::online_cpus(Path::new("/sys"));
        if no_kernel {
            return KernelSide {
                tracer: None,
                missing: "not recorded (--no-kernel)".into(),
                cpus,
            };
        }
        match Tracer::start(&cpus, options) {
            Ok(t) => KernelSide {
                tracer: Some(t),
                missing: String::new(),
                cpus,
            },
            Err(e) => KernelSide {
                tracer: None,
                missing: format!(
                    "{e}. Run as root, or give the binary CAP_PERFMON (with perf_event_paranoid \
                     ≤ 2) and read access to tracefs's event formats"
                ),
                cpus,
            },
        }
    }

    /// In words: `recorded on CPUs [0, 1] (perf)`, or why not.
    pub fn words(&self) -> String {
        match &self.tracer {
            Some(t) => format!(
                "recorded on CPUs {:?} ({})",
                t.info().cpus,
                t.info().backend
            ),
            None => self.missing.clone(),
        }
    }
}

/// What the watcher has to say after a step.
#[derive(Debug)]
pub enum WatchEvent {
    /// A cycle the server reported or the wake chain showed (for the trace's slices).
    Cycle(Cycle),
    /// An xrun's card, with the window of kernel events it was made from.
    Card(Box<Card>, Option<Window>),
    /// Something worth telling the user that is not an xrun.
    Note(String),
}

/// The audio server's real-time thread that runs the driver.
#[derive(Debug, Clone)]
struct ServerThread {
    mapping: Mapping,
}

/// Everything the loop keeps between events; all of it bounded by the number of nodes.
struct State {
    detector: Detector,
    tally: Tally,
    names: BTreeMap<u32, (String, Option<i32>)>,
    mappings: HashMap<u32, Mapping>,
    awake: HashMap<u32, VecDeque<u64>>,
    /// The driver's recent wake-ups (PipeWire's driver block), to confirm the server's thread.
    driver_awake: VecDeque<u64>,
    pending: VecDeque<Xrun>,
    jack_xruns: VecDeque<u64>,
    /// JACK: each client's callback thread as the wake chain showed it, and in how many wakes.
    jack_threads: HashMap<u32, (i32, usize)>,
    /// JACK: the last overrun carded (node, signal), and the callbacks it caused after the first.
    last_jack: Option<(u32, u64)>,
    /// JACK: when the server called back for the last carded overrun, ns.
    last_jack_at: Option<u64>,
    jack_repeats: u64,
    /// When watch started, ns: JACK2's cycles are numbered from it by the period.
    started_ns: u64,
    /// JACK: the wake chain was read up to here (the start of the last cycle not yet taken), ns.
    jack_observed_until: u64,
    jack_sampled: Instant,
    /// JACK: the server's and clients' threads, and when they were read.
    jack_chain: Option<(WakeChain, Instant)>,
    /// The server's thread that runs the driver, and when it was looked for.
    server: Option<ServerThread>,
    server_looked: Option<Instant>,
    /// Each mapped thread's page-fault counters, sampled every 250 ms: (ns, minor, major), the
    /// last few, so that a card finds one taken before its xrun.
    fault_samples: HashMap<i32, FaultSeries>,
    faults_sampled: Instant,
    gaps: u64,
}

/// One thread's page-fault samples, and its `stat` file kept open between them (opening it was
/// most of a sample's cost; see `xrunlab_sys::Reread`).
struct FaultSeries {
    pid: i32,
    file: Reread,
    samples: VecDeque<(u64, u64, u64)>,
}

/// The threads a card's path may lead to, looked up for one card.
struct PathThreads {
    driver: Option<Mapping>,
    nodes: HashMap<u32, Mapping>,
}

impl RootThreads for PathThreads {
    fn thread_of(&self, role: Role, id: u32) -> Option<Mapping> {
        match role {
            Role::Driver => self.driver.clone(),
            Role::Node => self.nodes.get(&id).cloned(),
        }
    }
}

/// The real-time thread of the server's process that runs the driver: PipeWire's `data-loop.N`
/// by name where there is one (1.x), else the highest-priority one (0.3.65 names it `pipewire`
/// like its main thread; JACK2 names none of its threads).
fn driver_thread(threads: &[RtThread]) -> Option<RtThread> {
    let priority = |t: &RtThread| {
        t.policy
            .rsplit(' ')
            .next()
            .and_then(|p| p.parse::<u32>().ok())
            .unwrap_or(0)
    };
    threads
        .iter()
        .find(|t| t.comm.starts_with("data-loop"))
        .or_else(|| threads.iter().max_by_key(|t| priority(t)))
        .cloned()
}

impl State {
    /// The threads whose page faults are followed: every node's mapped thread.
    fn mapped_threads(&self) -> Vec<(i32, i32)> {
        let mapped = self
            .mappings
            .values()
            .filter_map(|m| Some((m.pid?, m.thread.as_ref()?.tid)));
        let jack = self
            .jack_threads
            .iter()
            .filter_map(|(id, (tid, _))| Some((self.names.get(id)?.1?, *tid)));
        mapped.chain(jack).collect()
    }

    /// Samples the followed threads' page-fault counters (and forgets threads no longer mapped).
    fn sample_faults(&mut self) {
        // A node's thread is found once, so that its first card has a sample from before it.
        for (id, (_, pid)) in &self.names {
            if !self.mappings.contains_key(id) {
                self.mappings
                    .insert(*id, map_node(Path::new("/proc"), *pid));
            }
        }
        let threads = self.mapped_threads();
        self.fault_samples
            .retain(|tid, f| threads.iter().any(|(p, t)| t == tid && *p == f.pid));
        let now = now_ns();
        for (pid, tid) in threads {
            let f = self
                .fault_samples
                .entry(tid)
                .or_insert_with(|| FaultSeries {
                    pid,
                    file: thread_faults_file(Path::new("/proc"), pid, tid),
                    samples: VecDeque::new(),
                });
            if let Ok((minor, major)) = reread_thread_faults(&mut f.file) {
                f.samples.push_back((now, minor, major));
                if f.samples.len() > FAULT_SAMPLES_KEPT {
                    f.samples.pop_front();
                }
            }
        }
    }

    /// The page faults of the card's thread from the last sample before its xrun until now.
    fn faults_of(&self, c: &Card) -> Option<Faults> {
        let m = c.mapping.as_ref()?;
        let (pid, tid) = (m.pid?, m.thread.as_ref()?.tid);
        let (at, minor0, major0) = self
            .fault_samples
            .get(&tid)?
            .samples
            .iter()
            .rev()
            .find(|s| s.0 <= c.xrun.cycle_start_ns)
            .copied()?;
        let (minor, major) =
            xrunlab_sys::procfs::read_thread_faults(Path::new("/proc"), pid, tid).ok()?;
        Some(Faults {
            minor: minor.saturating_sub(minor0),
            major: major.saturating_sub(major0),
            span_ms: now_ns().saturating_sub(at) as f64 / 1e6,
        })
    }

    fn mapping(&mut self, id: u32) -> Mapping {
        let pid = self.names.get(&id).and_then(|n| n.1);
        if let (Some(&(tid, wakes)), Some(pid)) = (self.jack_threads.get(&id), pid) {
            let thread = rt_threads(Path::new("/proc"), pid)
                .into_iter()
                .find(|t| t.tid == tid);
            if let Some(thread) = thread {
                return Mapping {
                    pid: Some(pid),
                    thread: Some(thread),
                    confidence: if wakes >= 3 {
                        Confidence::High
                    } else {
                        Confidence::Medium
                    },
                    reason: format!(
                        "woken by the JACK server's thread {wakes} times around this xrun"
                    ),
                };
            }
        }
        let m = self
            .mappings
            .entry(id)
            .or_insert_with(|| map_node(Path::new("/proc"), pid));
        if m.pid != pid {
            *m = map_node(Path::new("/proc"), pid);
        }
        m.clone()
    }

    /// Looks for the server's driver thread again when it is unknown or old.
    fn find_server(&mut self, source: &mut dyn Source) {
        if self
            .server_looked
            .is_some_and(|at| at.elapsed() < THREADS_REFRESH)
        {
            return;
        }
        self.server_looked = Some(Instant::now());
        // JACK2: the wake chain names the thread that wakes the clients.
        if let Some((chain, _)) = &self.jack_chain {
            let thread = rt_threads(Path::new("/proc"), chain.server_pid)
                .into_iter()
                .find(|t| t.tid == chain.server_tid);
            if let Some(thread) = thread {
                self.server = Some(ServerThread {
                    mapping: Mapping {
                        pid: Some(chain.server_pid),
                        thread: Some(thread),
                        confidence: Confidence::High,
                        reason: "the server's real-time thread that wakes its clients' threads \
                                 each cycle (the wake chain)"
                            .to_owned(),
                    },
                });
                return;
            }
        }
        let Some(pid) = source.server_pid() else {
            return;
        };
        let threads = rt_threads(Path::new("/proc"), pid);
        let keep_confirmed = self.server.as_ref().is_some_and(|s| {
            s.mapping.pid == Some(pid)
                && s.mapping.confidence == Confidence::High
                && s.mapping
                    .thread
                    .as_ref()
                    .is_some_and(|t| threads.iter().any(|c| c.tid == t.tid))
        });
        if keep_confirmed {
            return;
        }
        let Some(pick) = driver_thread(&threads) else {
            self.server = None;
            return;
        };
        let (confidence, reason) = match threads.len() {
            1 => (
                Confidence::Medium,
                format!(
                    "the only real-time thread of {} (pid {pid})",
                    source.server_name()
                ),
            ),
            n => (
                Confidence::Low,
                format!(
                    "{} of {n} real-time threads of {} (pid {pid}), not yet confirmed",
                    pick.comm,
                    source.server_name()
                ),
            ),
        };
        self.server = Some(ServerThread {
            mapping: Mapping {
                pid: Some(pid),
                thread: Some(pick),
                confidence,
                reason,
            },
        });
    }

    /// The card of `x`, with the kernel's events when they are recorded. `unattributed` says why
    /// a server-reported xrun could not be tied to a node (JACK2 without the wake chain).
    fn card_of(
        &mut self,
        x: &Xrun,
        kernel: &KernelSide,
        unattributed: Option<&str>,
    ) -> (Card, Option<Window>) {
        let app = x
            .node
            .as_ref()
            .and_then(|n| self.detector.nodes().get(&n.id))
            .and_then(|s| s.info.app_name.clone());
        // The threads of every node the path (or the path the kernel may choose) leads to.
        let mut nodes = HashMap::new();
        for s in x.path.iter().chain(&x.signaller_path) {
            if s.role == Role::Node && x.node.as_ref().is_none_or(|n| n.id != s.id) {
                nodes.insert(s.id, self.mapping(s.id));
            }
        }
        let mut threads = PathThreads {
            driver: self.server.as_ref().map(|s| s.mapping.clone()),
            nodes,
        };
        let node_mapping = x.node.as_ref().map(|n| self.mapping(n.id));
        let tracer = match (&kernel.tracer, unattributed) {
            (Some(t), None) => t,
            (_, why) => {
                let why = why.unwrap_or(&kernel.missing);
                return (
                    card(x, app, node_mapping, Kernel::Missing(why), &threads),
                    None,
                );
            }
        };
        let signal = x
            .node
            .as_ref()
            .map(|n| n.signal_ns)
            .filter(|&s| s > 0)
            .unwrap_or(x.cycle_start_ns);
        // From the lead-in before the earliest moment any step looks at: the node's signal, or
        // the driver's expected wake-up when it started the cycle late.
        let expected = x
            .path
            .iter()
            .chain(&x.signaller_path)
            .filter(|s: &&Step| s.role == Role::Driver)
            .map(|s| s.signal_ns.saturating_sub(s.excess_ns))
            .filter(|&e| e > 0)
            .min()
            .unwrap_or(signal);
        let from = signal.min(expected).saturating_sub(LEAD_IN_NS);
        let window = tracer.snapshot(from, x.deadline_ns + TAIL_NS);
        let lookup = tracer.tasks();
        // Confirm the driver's thread with its switch-ins at the driver's wake-ups.
        if let Some(server) = self.server.as_mut() {
            let awake: Vec<u64> = self.driver_awake.iter().copied().collect();
            confirm(
                &mut server.mapping,
                Path::new("/proc"),
                &window.events,
                &awake,
            );
            threads.driver = Some(server.mapping.clone());
        }
        let mapping = match (x.node.as_ref(), node_mapping) {
            (Some(node), Some(mut mapping)) => {
                let awake: Vec<u64> = self
                    .awake
                    .get(&node.id)
                    .map(|a| a.iter().copied().collect())
                    .unwrap_or_default();
                confirm(&mut mapping, Path::new("/proc"), &window.events, &awake);
                self.mappings.insert(node.id, mapping.clone());
                Some(mapping)
            }
            (_, m) => m,
        };
        (
            card(x, app, mapping, Kernel::Window(&window, &lookup), &threads),
            Some(window),
        )
    }
}

/// Whether the kernel's events are read only around an xrun (a tracer in overwrite mode, as
/// `record` runs it): then nothing reads the wake chain between xruns.
fn reads_around_xruns(kernel: &KernelSide) -> bool {
    kernel.tracer.as_ref().is_some_and(|t| t.info().overwrite)
}

/// Follows a live graph and yields its xruns' cards.
pub struct Watcher {
    source: Box<dyn Source>,
    kernel: KernelSide,
    st: State,
}

impl Watcher {
    /// A watcher over `source`, with the kernel's events from `kernel`.
    pub fn new(source: Box<dyn Source>, kernel: KernelSide) -> Watcher {
        Watcher {
            source,
            kernel,
            st: State {
                detector: Detector::new(),
                tally: Tally::default(),
                names: BTreeMap::new(),
                mappings: HashMap::new(),
                awake: HashMap::new(),
                driver_awake: VecDeque::new(),
                pending: VecDeque::new(),
                jack_xruns: VecDeque::new(),
                jack_threads: HashMap::new(),
                last_jack: None,
                last_jack_at: None,
                jack_repeats: 0,
                started_ns: now_ns(),
                jack_observed_until: 0,
                jack_sampled: Instant::now(),
                jack_chain: None,
                server: None,
                server_looked: None,
                fault_samples: HashMap::new(),
                faults_sampled: Instant::now(),
                gaps: 0,
            },
        }
    }

    /// The server, as its source describes it.
    pub fn describe(&self) -> String {
        self.source.describe()
    }

    /// Whether the server reports each node's timing itself.
    pub fn reports_timing(&self) -> bool {
        self.source.reports_timing()
    }

    /// The kernel side.
    pub fn kernel(&self) -> &KernelSide {
        &self.kernel
    }

    /// The nodes' figures.
    pub fn detector(&self) -> &Detector {
        &self.st.detector
    }

    /// Each node's name and process, by id.
    pub fn names(&self) -> &BTreeMap<u32, (String, Option<i32>)> {
        &self.st.names
    }

    /// The summary so far.
    pub fn summary(&self) -> Summary {
        self.st.tally.summary(&self.st.detector)
    }

    /// Cycles the server's profiler dropped.
    pub fn gaps(&self) -> u64 {
        self.st.gaps
    }

    /// JACK2's callbacks after the first of one overrun.
    pub fn jack_repeats(&self) -> u64 {
        self.st.jack_repeats
    }

    /// Cycles the server ran since the last call, from its own clock (see
    /// [`Source::cycles_run`]).
    pub fn cycles_run(&mut self) -> Option<u64> {
        self.source.cycles_run()
    }

    /// The server's thread that runs the driver, where found: its mapping.
    pub fn server_thread(&self) -> Option<&Mapping> {
        self.st.server.as_ref().map(|s| &s.mapping)
    }

    /// One step: the source's next event (waiting at most `timeout`), then the cards whose
    /// kernel window is complete. `Err` with the reason when the server went away (the cards
    /// still pending are in [`Watcher::finish`]).
    pub fn step(&mut self, timeout: Duration) -> Result<Vec<WatchEvent>, String> {
        let mut out = Vec::new();
        let st = &mut self.st;
        match self.source.next(timeout) {
            Some(SourceEvent::Cycle(c)) => {
                for n in &c.followers {
                    if n.awake_ns > 0 && n.wait_ns().is_some() {
                        let a = st.awake.entry(n.id).or_default();
                        a.push_back(n.awake_ns);
                        if a.len() > AWAKE_HISTORY {
                            a.pop_front();
                        }
                    }
                }
                if c.driver.awake_ns > 0 {
                    st.driver_awake.push_back(c.driver.awake_ns);
                    if st.driver_awake.len() > AWAKE_HISTORY {
                        st.driver_awake.pop_front();
                    }
                }
                let found = st.detector.cycle(&c);
                st.pending.extend(found);
                out.push(WatchEvent::Cycle(c));
            }
            Some(SourceEvent::Node(n)) => {
                st.names.insert(n.id, (n.name.clone(), n.pid));
                st.detector.node(n);
            }
            Some(SourceEvent::NodeRemoved(id)) => {
                st.names.remove(&id);
                st.mappings.remove(&id);
                st.awake.remove(&id);
                st.detector.node_removed(id);
            }
            Some(SourceEvent::ServerXrun(at)) => st.jack_xruns.push_back(at),
            Some(SourceEvent::Gap(n)) => st.gaps += n,
            Some(SourceEvent::Note(s)) => out.push(WatchEvent::Note(s)),
            Some(SourceEvent::Ended(why)) => return Err(why),
            None => {}
        }
        if self.kernel.tracer.is_some() {
            st.find_server(self.source.as_mut());
        }
        self.flush_cards(false, &mut out);
        let st = &mut self.st;
        if st.faults_sampled.elapsed() >= FAULT_SAMPLE {
            st.faults_sampled = Instant::now();
            st.sample_faults();
        }
        if !self.source.reports_timing()
            && !reads_around_xruns(&self.kernel)
            && st.jack_sampled.elapsed() >= JACK_SAMPLE
        {
            st.jack_sampled = Instant::now();
            self.sample_jack_timing(&mut out);
        }
        Ok(out)
    }

    /// Every card still pending, whatever its kernel window (at the end of a watch).
    pub fn finish(&mut self) -> Vec<WatchEvent> {
        let mut out = Vec::new();
        self.flush_cards(true, &mut out);
        out
    }

    /// JACK2: rebuilds the clients' cycles since the last sample from the kernel's wake chain,
    /// for their WAIT and BUSY (and the trace's slices); the cycle cut by the window's end is
    /// taken with the next sample.
    fn sample_jack_timing(&mut self, out: &mut Vec<WatchEvent>) {
        let Some(tracer) = &self.kernel.tracer else {
            return;
        };
        let st = &mut self.st;
        // Finding the server and its clients walks /proc: done again only every few seconds.
        if st
            .jack_chain
            .as_ref()
            .is_none_or(|(_, at)| at.elapsed() >= THREADS_REFRESH)
        {
            st.jack_chain = self.source.chain().map(|c| (c, Instant::now()));
        }
        let Some((chain, _)) = &st.jack_chain else {
            return;
        };
        let to = now_ns().saturating_sub(JACK_LOOKAHEAD_NS);
        let from = st
            .jack_observed_until
            .max(to.saturating_sub(JACK_SAMPLE_SPAN_NS));
        if to <= from {
            return;
        }
        let window = tracer.snapshot(from, to);
        let (threads, _) = pick_threads(&window.events, chain.server_tid, &chain.clients);
        let cycles = derive_cycles(&window.events, &threads, chain.period);
        let Some((last, whole)) = cycles.split_last() else {
            return;
        };
        for c in whole {
            st.detector.observe(c);
            out.push(WatchEvent::Cycle(c.clone()));
        }
        st.jack_observed_until = last.driver.signal_ns;
    }

    /// Turns xruns whose kernel window is complete into cards (all of them when `all`).
    fn flush_cards(&mut self, all: bool, out: &mut Vec<WatchEvent>) {
        let kernel = &self.kernel;
        let st = &mut self.st;
        let now = now_ns();
        let settled = |deadline: u64| all || kernel.tracer.is_none() || now > deadline + SETTLE_NS;
        while st.pending.front().is_some_and(|x| settled(x.deadline_ns)) {
            let x = st.pending.pop_front().expect("checked");
            let (mut c, window) = st.card_of(&x, kernel, None);
            c.faults = st.faults_of(&c);
            st.tally.add(&c);
            out.push(WatchEvent::Card(Box::new(c), window));
        }
        while st
            .jack_xruns
            .front()
            .is_some_and(|&at| settled(at + JACK_LOOKAHEAD_NS))
        {
            let at = st.jack_xruns.pop_front().expect("checked");
            let period = st.detector.quantum().unwrap_or((0, 0));
            let mut unattributed = None;
            // Where nothing rebuilds the clients' cycles between xruns (`record`), the server's
            // and clients' threads are looked up again here when they are old.
            let stale =
                |at: &Instant| reads_around_xruns(kernel) && at.elapsed() >= THREADS_REFRESH;
            if st.jack_chain.as_ref().is_none_or(|(_, at)| stale(at)) {
                st.jack_chain = self.source.chain().map(|c| (c, Instant::now()));
            }
            let chain = st.jack_chain.as_ref().map(|(c, _)| c.clone());
            let found = match (&kernel.tracer, chain) {
                (Some(tracer), Some(chain)) => {
                    let own_from = at.saturating_sub(JACK_LOOKBACK_NS);
                    let learn = reads_around_xruns(kernel)
                        && st.jack_observed_until + JACK_LEARN_EVERY_NS <= own_from;
                    let from = match learn {
                        true => own_from.saturating_sub(JACK_LEARN_SPAN_NS),
                        false => own_from,
                    };
                    let window = tracer.snapshot(from, at + JACK_LOOKAHEAD_NS);
                    let (threads, counts) =
                        pick_threads(&window.events, chain.server_tid, &chain.clients);
                    for (id, _, tid) in &threads.clients {
                        let wakes = counts.iter().find(|c| c.0 == *id).map_or(0, |c| c.1);
                        st.jack_threads.insert(*id, (*tid, wakes));
                    }
                    let mut cycles = derive_cycles(&window.events, &threads, chain.period);
                    if learn {
                        // The cycles before the xrun's own stretch teach the figures; the rest
                        // are looked at as without learning.
                        let (before, own): (Vec<Cycle>, Vec<Cycle>) = cycles
                            .into_iter()
                            .partition(|c| c.driver.signal_ns < own_from);
                        for c in before {
                            st.detector.observe(&c);
                            out.push(WatchEvent::Cycle(c));
                        }
                        st.jack_observed_until = own_from;
                        cycles = own;
                    }
                    // The medians come from the nodes' figures so far: a local detector learns
                    // them from the figures' owner, then finds the late cycles in the window.
                    let mut local = st.detector.clone_figures();
                    let late: Vec<Xrun> = cycles
                        .iter()
                        .flat_map(|c| local.cycle(c))
                        .filter(|x| x.cycle_start_ns < at)
                        .collect();
                    // A driver that started a cycle late, with every client in time.
                    let driver_late = || {
                        let threshold = driver_late_threshold_ns(chain.period.ns());
                        cycles
                            .iter()
                            .filter(|c| c.driver.signal_ns < at)
                            .filter(|c| {
                                crate::chain::driver_lateness_ns(c).is_some_and(|l| l >= threshold)
                            })
                            .max_by_key(|c| crate::chain::driver_lateness_ns(c))
                            .cloned()
                    };
                    match late.last() {
                        // JACK2 calls back once per late cycle: a long overrun is one xrun.
                        Some(x) if x.node.as_ref().map(|n| (n.id, n.signal_ns)) == st.last_jack => {
                            st.jack_repeats += 1;
                            continue;
                        }
                        Some(x) => {
                            st.last_jack = x.node.as_ref().map(|n| (n.id, n.signal_ns));
                            let mut x = x.clone();
                            // The rebuilt cycles are numbered within their window: number them
                            // from watch's start instead.
                            x.cycle = x.cycle_start_ns.saturating_sub(st.started_ns)
                                / chain.period.ns().max(1);
                            Some(st.detector.adopt(x))
                        }
                        // A callback just after a carded overrun whose window no longer shows
                        // it late: JACK2's repeat for the same overrun, not a new xrun.
                        None if st
                            .last_jack_at
                            .is_some_and(|t| at.saturating_sub(t) < JACK_LOOKBACK_NS) =>
                        {
                            st.jack_repeats += 1;
                            continue;
                        }
                        None => match driver_late() {
                            Some(c) => {
                                let mut x = st.detector.driver_late(&c);
                                x.cycle = c.driver.signal_ns.saturating_sub(st.started_ns)
                                    / chain.period.ns().max(1);
                                Some(x)
                            }
                            None => None,
                        },
                    }
                }
                (None, _) => {
                    unattributed = Some(kernel.missing.clone());
                    None
                }
                (Some(_), None) => {
                    unattributed = Some(
                        "the JACK server's or its clients' real-time threads were not found in \
                         /proc"
                            .to_owned(),
                    );
                    None
                }
            };
            // Every carded callback opens the window in which a callback that finds nothing new
            // late is JACK2 repeating itself (a late driver is called back for every cycle too).
            st.last_jack_at = Some(at);
            let x = found.unwrap_or_else(|| st.detector.server_reported(at, period));
            let (mut c, window) = st.card_of(&x, kernel, unattributed.as_deref());
            c.faults = st.faults_of(&c);
            st.tally.add(&c);
            out.push(WatchEvent::Card(Box::new(c), window));
        }
    }
}
