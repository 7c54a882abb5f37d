//! `xrunlab watch`: follows a live PipeWire or JACK graph, and for every xrun prints (and writes)
//! a card naming the late node and what took its time; runs on the main thread, with the kernel
//! tracer's reader and the server client's loop on threads of their own. Read-only: it changes
//! nothing in the graph, the quantum, priorities or affinity.

use crate::cli::parse::WatchServer;
use crate::cli::watch::WatchArgs;
use crate::files;
use crate::signals::StopSignals;
use crate::watch_source::{self, JackChain, Source, SourceEvent};
use crate::watch_view::{LiveView, Screen};
use crate::Failure;
use serde_json::json;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::time::{Duration, Instant};
use xrunlab_results::watch::{KernelNote, WatchResult, SCHEMA};
use xrunlab_results::write::PartialFile;
use xrunlab_sys::printable;
use xrunlab_sys::provenance::Provenance;
use xrunlab_trace::blame::LEAD_IN_NS;
use xrunlab_trace::perfetto::KERNEL_PID;
use xrunlab_trace::{now_ns, PerfettoOptions, PerfettoWriter, TraceOptions, Tracer, Track};
use xrunlab_watch::jack_chain::{derive_cycles, pick_threads};
use xrunlab_watch::{
    card, confirm, map_node, words, Card, Confidence, Detector, Faults, Kernel, Mapping, Summary,
    Tally, Xrun,
};

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
/// Recent wake-ups kept per node to confirm its thread against the kernel's switch-ins.
const AWAKE_HISTORY: usize = 32;
/// How often JACK2's clients' WAIT and BUSY are rebuilt from the wake chain (for the node view
/// and the summary; xruns come from the server's callback): well within the tracer's 500 ms
/// window, so that every cycle is read once.
const JACK_SAMPLE: Duration = Duration::from_millis(250);
/// The most of the wake chain read per sample, ns (what the tracer still holds).
const JACK_SAMPLE_SPAN_NS: u64 = 400_000_000;
/// How long the JACK server's and clients' threads, read from /proc, are used before being
/// read again (a graph change is seen within this).
const JACK_CHAIN_REFRESH: Duration = Duration::from_secs(3);
/// How often the mapped threads' page-fault counters are sampled, and how many samples are kept
/// per thread (a card needs one from before its xrun, which it gets within about 0.1 s).
const FAULT_SAMPLE: Duration = Duration::from_millis(250);
const FAULT_SAMPLES_KEPT: usize = 8;
/// How often --json is rewritten while watching, so a killed watch leaves a recent summary.
const CHECKPOINT: Duration = Duration::from_secs(10);

/// The kernel side: a running tracer, or why there is none.
struct KernelSide {
    tracer: Option<Tracer>,
    missing: String,
    cpus: Vec<usize>,
}

impl KernelSide {
    fn start(no_kernel: bool) -> KernelSide {
        let cpus = xrunlab_sys::online_cpus(Path::new("/sys"));
        if no_kernel {
            return KernelSide {
                tracer: None,
                missing: "not recorded (--no-kernel)".into(),
                cpus,
            };
        }
        match Tracer::start(&cpus, &TraceOptions::default()) {
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
}

/// Where the xrun lines and records go.
struct Output {
    started: Instant,
    /// The live node view, unless --batch or stdout is not a terminal.
    view: Option<LiveView>,
    /// `--json-lines`: one record a line into its partial file, committed at the end.
    lines: Option<PartialFile>,
    /// `--trace`: streamed into its partial file, committed at the end when complete.
    trace: Option<PerfettoWriter<PartialFile>>,
    tracks: HashMap<u32, Track>,
}

impl Output {
    fn card(
        &mut self,
        c: &Card,
        window: Option<&xrunlab_trace::Window>,
        cpus: &[usize],
    ) -> Result<(), Failure> {
        let verdict = words::verdict(c);
        let line = format!("[{:8.3} s] {verdict}", self.started.elapsed().as_secs_f64());
        match self.view.as_mut() {
            Some(v) => v.log(line),
            None => println!("{line}"),
        }
        if let Some(out) = self.lines.as_mut() {
            // When it was printed, for the delay from the xrun to its card (bench watch).
            let record = json!({"verdict": verdict, "reported_ns": now_ns(), "card": c});
            let cannot = |e: &dyn std::fmt::Display, partial: &Path| {
                Failure::Runtime(format!("cannot write {}: {e}", partial.display()))
            };
            serde_json::to_writer(&mut *out, &record).map_err(|e| cannot(&e, out.partial()))?;
            // One record a line, on disk as it happens: a killed watch loses none.
            writeln!(out)
                .and_then(|_| out.flush())
                .map_err(|e| cannot(&e, out.partial()))?;
        }
        if let Some(t) = self.trace.as_mut() {
            let track = c
                .xrun
                .node
                .as_ref()
                .and_then(|n| self.tracks.get(&n.id).copied())
                .unwrap_or(Track {
                    pid: KERNEL_PID,
                    tid: 0,
                });
            t.dropout(track, c.xrun.deadline_ns, &verdict, json!(c));
            if let Some(w) = window {
                t.kernel_events(&w.events, cpus);
            }
        }
        Ok(())
    }

    fn cycle(&mut self, c: &xrunlab_watch::Cycle, names: &BTreeMap<u32, (String, Option<i32>)>) {
        let Some(t) = self.trace.as_mut() else {
            return;
        };
        for n in &c.followers {
            let track = *self.tracks.entry(n.id).or_insert_with(|| {
                // Nodes without a known process share one synthetic process, a track each.
                let (name, pid) = names.get(&n.id).cloned().unwrap_or((n.name.clone(), None));
                let track = Track {
                    pid: pid.unwrap_or(KERNEL_PID + 1),
                    tid: (1 << 29) + n.id as i32,
                };
                t.thread_name(track, &format!("node {name}"));
                track
            });
            if let Some(w) = n.wait_ns() {
                t.slice(
                    track,
                    "wait",
                    "node",
                    n.signal_ns,
                    w,
                    json!({"cycle": c.seq}),
                );
            }
            if let Some(b) = n.busy_ns() {
                t.slice(
                    track,
                    "busy",
                    "node",
                    n.awake_ns,
                    b,
                    json!({"cycle": c.seq}),
                );
            }
        }
    }
}

fn open_source(args: &WatchArgs) -> Result<Box<dyn Source>, Failure> {
    let jack = || watch_source::open_jack(args.jack_server.as_deref());
    let opened = match args.server {
        WatchServer::Pipewire => watch_source::open_pipewire(),
        WatchServer::Jack => jack(),
        WatchServer::Auto if watch_source::pipewire_answers() => watch_source::open_pipewire(),
        WatchServer::Auto => {
            jack().map_err(|e| format!("no PipeWire server answers on its socket, and JACK: {e}"))
        }
    };
    opened.map_err(Failure::Runtime)
}

/// Everything the loop keeps between events; all of it bounded by the number of nodes.
struct State {
    detector: Detector,
    tally: Tally,
    names: BTreeMap<u32, (String, Option<i32>)>,
    mappings: HashMap<u32, Mapping>,
    awake: HashMap<u32, VecDeque<u64>>,
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
    jack_chain: Option<(JackChain, Instant)>,
    /// Each mapped thread's page-fault counters, sampled every 250 ms: (ns, minor, major), the
    /// last few, so that a card finds one taken before its xrun.
    fault_samples: HashMap<i32, VecDeque<(u64, u64, u64)>>,
    faults_sampled: Instant,
    gaps: u64,
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
            .retain(|tid, _| threads.iter().any(|(_, t)| t == tid));
        let now = now_ns();
        for (pid, tid) in threads {
            if let Ok((minor, major)) =
                xrunlab_sys::procfs::read_thread_faults(Path::new("/proc"), pid, tid)
            {
                let s = self.fault_samples.entry(tid).or_default();
                s.push_back((now, minor, major));
                if s.len() > FAULT_SAMPLES_KEPT {
                    s.pop_front();
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
            let thread = xrunlab_watch::mapping::rt_threads(Path::new("/proc"), pid)
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

    /// The card of `x`, with the kernel's events when they are recorded. `unattributed` says why
    /// a server-reported xrun could not be tied to a node (JACK2 without the wake chain).
    fn card_of(
        &mut self,
        x: &Xrun,
        kernel: &KernelSide,
        unattributed: Option<&str>,
    ) -> (Card, Option<xrunlab_trace::Window>) {
        let app = x
            .node
            .as_ref()
            .and_then(|n| self.detector.nodes().get(&n.id))
            .and_then(|s| s.info.app_name.clone());
        let Some(node) = &x.node else {
            let c = match unattributed {
                Some(why) => card(x, app, None, Kernel::Missing(why)),
                // The graph was seen finishing in time: driver-side.
                None => {
                    let seen = xrunlab_trace::Window {
                        t0_ns: x.cycle_start_ns,
                        t1_ns: x.deadline_ns,
                        events: Vec::new(),
                        lost_events: 0,
                        complete: true,
                        ..Default::default()
                    };
                    card(
                        x,
                        app,
                        None,
                        Kernel::Window(&seen, &xrunlab_trace::NoLookup),
                    )
                }
            };
            return (c, None);
        };
        let mut mapping = self.mapping(node.id);
        let Some(tracer) = &kernel.tracer else {
            return (
                card(x, app, Some(mapping), Kernel::Missing(&kernel.missing)),
                None,
            );
        };
        let signal = if node.signal_ns > 0 {
            node.signal_ns
        } else {
            x.cycle_start_ns
        };
        let window = tracer.snapshot(signal.saturating_sub(LEAD_IN_NS), x.deadline_ns + TAIL_NS);
        let awake: Vec<u64> = self
            .awake
            .get(&node.id)
            .map(|a| a.iter().copied().collect())
            .unwrap_or_default();
        confirm(&mut mapping, Path::new("/proc"), &window.events, &awake);
        self.mappings.insert(node.id, mapping.clone());
        let lookup = tracer.tasks();
        (
            card(x, app, Some(mapping), Kernel::Window(&window, &lookup)),
            Some(window),
        )
    }
}

/// Runs `xrunlab watch`.
pub fn watch(args: &WatchArgs) -> Result<(), Failure> {
    for (flag, path) in [
        ("--json", &args.json),
        ("--json-lines", &args.json_lines),
        ("--trace", &args.trace),
    ] {
        if let Some(p) = path {
            files::check_writable(flag, p)?;
        }
    }
    let signals = StopSignals::install().map_err(Failure::Runtime)?;
    let mut provenance = Provenance::collect(
        env!("CARGO_PKG_VERSION"),
        Path::new("/proc"),
        Path::new("/sys"),
    );
    let mut source = open_source(args)?;
    let server = source.describe();
    let kernel = KernelSide::start(args.no_kernel);
    let lines = match &args.json_lines {
        Some(target) => Some(PartialFile::create(target)?),
        None => None,
    };
    let trace = match &args.trace {
        Some(p) => Some(PerfettoWriter::to_writer(
            PartialFile::with_capacity(p, 1 << 16)?,
            p,
            PerfettoOptions {
                max_events: Some(2_000_000),
                every_nth_buffer: 1,
            },
        )),
        None => None,
    };
    let batch = args.batch || !std::io::stdout().is_terminal();
    let kernel_words = match &kernel.tracer {
        Some(t) => format!(
            "recorded on CPUs {:?} ({})",
            t.info().cpus,
            t.info().backend
        ),
        None => kernel.missing.clone(),
    };
    println!("watching {server}; read-only, nothing in the graph is changed");
    println!("kernel events: {kernel_words}");
    let note = (!source.reports_timing() && kernel.tracer.is_none()).then(|| {
        "JACK2 reports no per-client timing: WAIT and BUSY come from the kernel's wake chain, \
         which is not recorded"
            .to_owned()
    });
    let view = if batch {
        None
    } else {
        Some(LiveView::start().map_err(|e| {
            Failure::Runtime(format!(
                "cannot take over the terminal for the live view ({e}); --batch prints plain lines"
            ))
        })?)
    };
    let mut out = Output {
        started: Instant::now(),
        view,
        lines,
        trace,
        tracks: HashMap::new(),
    };

    let mut st = State {
        detector: Detector::new(),
        tally: Tally::default(),
        names: BTreeMap::new(),
        mappings: HashMap::new(),
        awake: HashMap::new(),
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
        fault_samples: HashMap::new(),
        faults_sampled: Instant::now(),
        gaps: 0,
    };
    let end_reason;
    let mut server_gone = None;
    let mut last_checkpoint = Instant::now();
    let started = Instant::now();
    loop {
        if let Some(sig) = signals.received() {
            end_reason = format!("ended by {sig}");
            break;
        }
        if args.duration.is_some_and(|d| started.elapsed() >= d) {
            end_reason = "the --duration ended".into();
            break;
        }
        if let Some(v) = out.view.as_mut() {
            // Raw mode turns Ctrl-C into a key rather than SIGINT.
            if v.quit_requested() {
                end_reason = "ended from the live view".into();
                break;
            }
            v.tick(|| screen(&server, &kernel_words, &note, &st, started))
                .map_err(|e| Failure::Runtime(format!("the live view: {e}")))?;
        }
        match source.next(Duration::from_millis(50)) {
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
                out.cycle(&c, &st.names);
                let found = st.detector.cycle(&c);
                st.pending.extend(found);
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
            Some(SourceEvent::Note(s)) => match out.view.as_mut() {
                // A note can quote a client's name.
                Some(v) => v.log(format!("note: {}", printable(&s))),
                None => eprintln!("note: {}", printable(&s)),
            },
            Some(SourceEvent::Ended(why)) => {
                server_gone = Some(why.clone());
                end_reason = why;
                break;
            }
            None => {}
        }
        flush_cards(&mut st, &kernel, &mut out, source.as_mut(), false)?;
        if st.faults_sampled.elapsed() >= FAULT_SAMPLE {
            st.faults_sampled = Instant::now();
            st.sample_faults();
        }
        if !source.reports_timing() && st.jack_sampled.elapsed() >= JACK_SAMPLE {
            st.jack_sampled = Instant::now();
            sample_jack_timing(&mut st, &kernel, &mut out, source.as_mut());
        }
        if last_checkpoint.elapsed() >= CHECKPOINT {
            last_checkpoint = Instant::now();
            if let Some(p) = &args.json {
                write_result(
                    p,
                    &provenance,
                    &server,
                    &st,
                    &kernel,
                    started,
                    "watch still running",
                    true,
                )?;
            }
        }
    }
    flush_cards(&mut st, &kernel, &mut out, source.as_mut(), true)?;

    if let Some(v) = out.view.take() {
        let log = v.finish();
        if log.dropped > 0 {
            println!(
                "({} earlier xruns are not repeated here{})",
                log.dropped,
                if args.json_lines.is_some() {
                    "; --json-lines has them all"
                } else {
                    ""
                }
            );
        }
        for line in &log.lines {
            println!("{line}");
        }
    }
    provenance.finish();
    let summary = st.tally.summary(&st.detector);
    print_summary(&server, started.elapsed(), &summary, st.gaps, &end_reason);
    if let Some(p) = &args.json {
        write_result(
            p,
            &provenance,
            &server,
            &st,
            &kernel,
            started,
            &end_reason,
            false,
        )?;
    }
    if let Some(lines) = out.lines.take() {
        lines.commit()?;
    }
    if let Some(t) = out.trace.take() {
        if let Some(w) = finish_trace(t) {
            eprintln!("warning: {w}");
        }
    }
    match server_gone {
        Some(why) => Err(Failure::Runtime(format!(
            "{why}; what was seen until then is written"
        ))),
        None => Ok(()),
    }
}

/// Closes `--trace`'s document and commits it over its target; what went wrong, if anything
/// (a trace that stopped early stays in its partial file, which the warning names).
fn finish_trace(t: PerfettoWriter<PartialFile>) -> Option<String> {
    match t.finish_into() {
        (s, Some(out)) if s.complete => out.commit().err().map(|e| e.to_string()),
        (s, _) => {
            // The writer was named after the target; its partial file is beside it.
            let kept = xrunlab_results::write::partial_path(&s.path);
            let why = s.warning.unwrap_or_else(|| "the trace stopped".into());
            Some(format!(
                "{why}; what was written is in {} (not valid JSON)",
                kept.display()
            ))
        }
    }
}

/// JACK2: rebuilds the clients' cycles since the last sample from the kernel's wake chain, for
/// their WAIT and BUSY (and the trace's slices); the cycle cut by the window's end is taken with
/// the next sample.
fn sample_jack_timing(
    st: &mut State,
    kernel: &KernelSide,
    out: &mut Output,
    source: &mut dyn Source,
) {
    let Some(tracer) = &kernel.tracer else {
        return;
    };
    // Finding the server and its clients walks /proc: done again only every few seconds.
    if st
        .jack_chain
        .as_ref()
        .is_none_or(|(_, at)| at.elapsed() >= JACK_CHAIN_REFRESH)
    {
        st.jack_chain = source.chain().map(|c| (c, Instant::now()));
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
        out.cycle(c, &st.names);
    }
    st.jack_observed_until = last.driver.signal_ns;
}

/// What the live view shows now.
fn screen(
    server: &str,
    kernel: &str,
    note: &Option<String>,
    st: &State,
    started: Instant,
) -> Screen {
    let (cycles, xruns, _) = st.detector.totals();
    Screen {
        server: server.to_owned(),
        kernel: kernel.to_owned(),
        quantum: st.detector.quantum(),
        cycles,
        xruns,
        elapsed_s: started.elapsed().as_secs_f64(),
        nodes: Screen::rows(&st.detector),
        note: note.clone(),
    }
}

/// Turns xruns whose kernel window is complete into cards (all of them when `all`).
fn flush_cards(
    st: &mut State,
    kernel: &KernelSide,
    out: &mut Output,
    source: &mut dyn Source,
    all: bool,
) -> Result<(), Failure> {
    let now = now_ns();
    let settled = |deadline: u64| all || kernel.tracer.is_none() || now > deadline + SETTLE_NS;
    while st.pending.front().is_some_and(|x| settled(x.deadline_ns)) {
        let x = st.pending.pop_front().expect("checked");
        let (mut c, window) = st.card_of(&x, kernel, None);
        c.faults = st.faults_of(&c);
        st.tally.add(&c);
        out.card(&c, window.as_ref(), &kernel.cpus)?;
    }
    while st
        .jack_xruns
        .front()
        .is_some_and(|&at| settled(at + JACK_LOOKAHEAD_NS))
    {
        let at = st.jack_xruns.pop_front().expect("checked");
        let period = st.detector.quantum().unwrap_or((0, 0));
        let mut unattributed = None;
        let found = match (&kernel.tracer, source.chain()) {
            (Some(tracer), Some(chain)) => {
                let window =
                    tracer.snapshot(at.saturating_sub(JACK_LOOKBACK_NS), at + JACK_LOOKAHEAD_NS);
                let (threads, counts) =
                    pick_threads(&window.events, chain.server_tid, &chain.clients);
                for (id, _, tid) in &threads.clients {
                    let wakes = counts.iter().find(|c| c.0 == *id).map_or(0, |c| c.1);
                    st.jack_threads.insert(*id, (*tid, wakes));
                }
                let cycles = derive_cycles(&window.events, &threads, chain.period);
                let mut local = Detector::new();
                for s in st.detector.nodes().values() {
                    local.node(s.info.clone());
                }
                let late: Vec<Xrun> = cycles
                    .iter()
                    .flat_map(|c| local.cycle(c))
                    .filter(|x| x.cycle_start_ns < at)
                    .collect();
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
                    // A callback just after a carded overrun whose window no longer shows it
                    // late: JACK2's repeat for the same overrun, not a driver-side xrun.
                    None if st
                        .last_jack_at
                        .is_some_and(|t| at.saturating_sub(t) < JACK_LOOKBACK_NS) =>
                    {
                        st.jack_repeats += 1;
                        continue;
                    }
                    None => None,
                }
            }
            (None, _) => {
                unattributed = Some(kernel.missing.clone());
                None
            }
            (Some(_), None) => {
                unattributed = Some(
                    "the JACK server's or its clients' real-time threads were not found in /proc"
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
        out.card(&c, window.as_ref(), &kernel.cpus)?;
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn write_result(
    path: &Path,
    provenance: &Provenance,
    server: &str,
    st: &State,
    kernel: &KernelSide,
    started: Instant,
    end_reason: &str,
    checkpoint: bool,
) -> Result<(), Failure> {
    let lost = kernel.tracer.as_ref().map_or(0, |t| t.stats().lost_total);
    let result = WatchResult {
        schema: SCHEMA.to_owned(),
        provenance: provenance.clone(),
        server: server.to_owned(),
        duration_s: started.elapsed().as_secs_f64(),
        end_reason: end_reason.to_owned(),
        checkpoint,
        kernel_events: KernelNote {
            recorded: kernel.tracer.is_some(),
            note: if kernel.tracer.is_some() {
                "recorded".to_owned()
            } else {
                kernel.missing.clone()
            },
            lost,
        },
        profiler_gaps: st.gaps,
        jack_repeat_callbacks: st.jack_repeats,
        summary: st.tally.summary(&st.detector),
    };
    Ok(xrunlab_results::write::write_json(path, &result)?)
}

fn print_summary(server: &str, elapsed: Duration, s: &Summary, gaps: u64, end_reason: &str) {
    let cases: Vec<String> = s
        .cases
        .iter()
        .map(|(k, v)| format!("{} {v}", k.replace('_', " ")))
        .collect();
    println!();
    println!(
        "watched {server} for {:.1} s ({end_reason}): {} cycles, {} xruns{}; {} cards with kernel events",
        elapsed.as_secs_f64(),
        s.cycles,
        s.xruns,
        if cases.is_empty() { String::new() } else { format!(" ({})", cases.join(", ")) },
        s.with_kernel
    );
    if gaps > 0 {
        println!("the server's profiler dropped {gaps} cycle records: xruns in them are not seen");
    }
    let ms = |us: Option<f64>| us.map_or("-".to_owned(), words::dur);
    println!(
        "{:<28} {:>7} {:>9} {:>6} {:>6} {:>10} {:>10} {:>10}",
        "node", "pid", "cycles", "ERR", "xruns", "WAIT p50", "BUSY p50", "BUSY p99"
    );
    for n in &s.nodes {
        println!(
            "{:<28} {:>7} {:>9} {:>6} {:>6} {:>10} {:>10} {:>10}",
            printable(&n.name),
            n.pid.map_or("-".into(), |p| p.to_string()),
            n.cycles,
            n.err_cycles,
            n.xruns,
            ms(n.median_wait_us),
            ms(n.median_busy_us),
            ms(n.p99_busy_us)
        );
    }
    if !s.top_culprits.is_empty() {
        println!("top culprits (the kernel's main cause of each xrun):");
        for c in s.top_culprits.iter().take(5) {
            let pid = c
                .pid
                .map(|p| format!(" (pid {p}, {})", c.policy))
                .unwrap_or_default();
            println!(
                "  {} {}{pid}: {} xruns, {:.2} ms",
                c.kind,
                printable(&c.name),
                c.xruns,
                c.us / 1000.0
            );
        }
    }
}
