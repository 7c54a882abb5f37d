//! `xrunlab watch`: follows a live PipeWire or JACK graph, and for every xrun prints (and writes)
//! a card naming the late node and what took its time; runs on the main thread, with the kernel
//! tracer's reader and the server client's loop on threads of their own. Read-only: it changes
//! nothing in the graph, the quantum, priorities or affinity.

use crate::cli::watch::WatchArgs;
use crate::files;
use crate::signals::StopSignals;
use crate::watch_source;
use crate::watch_view::{LiveView, Screen};
use crate::Failure;
use serde_json::json;
use std::collections::{BTreeMap, HashMap};
use std::io::IsTerminal;
use std::path::Path;
use std::time::{Duration, Instant};
use xrunlab_results::line_log::LineLog;
use xrunlab_results::watch::{KernelNote, WatchResult, XrunCard, XrunRecord, SCHEMA};
use xrunlab_results::write::PartialFile;
use xrunlab_sys::printable;
use xrunlab_sys::provenance::Provenance;
use xrunlab_trace::perfetto::KERNEL_PID;
use xrunlab_trace::{now_ns, PerfettoOptions, PerfettoWriter, Track};
use xrunlab_watch::{words, Card, KernelSide, Source, Summary, WatchEvent, Watcher};

/// How often --json is rewritten while watching, so a killed watch leaves a recent summary.
const CHECKPOINT: Duration = Duration::from_secs(10);

/// Where the xrun lines and records go.
struct Output {
    started: Instant,
    /// The live node view, unless --batch or stdout is not a terminal.
    view: Option<LiveView>,
    /// `--json-lines`: one record a line, appended to the named file as it happens.
    lines: Option<LineLog>,
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
            // The record's type is results' (read back typed by bench watch and the tests).
            let card: XrunCard = serde_json::to_value(c)
                .and_then(serde_json::from_value)
                .map_err(|e| {
                    Failure::Runtime(format!("a card that does not fit its record: {e}"))
                })?;
            let record = XrunRecord {
                verdict: verdict.clone(),
                reported_ns: now_ns(),
                card,
            };
            // One record a line, in the file as it happens: a killed watch loses none.
            out.append(&record)?;
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
            xrunlab_watch::snapshot::write_card(t, c, &verdict, track, window, cpus);
        }
        Ok(())
    }

    /// What a watcher step yielded: cards printed and written, cycles into the trace, notes.
    fn events(
        &mut self,
        events: Vec<WatchEvent>,
        watcher: &Watcher,
        cpus: &[usize],
    ) -> Result<(), Failure> {
        for e in events {
            match e {
                WatchEvent::Cycle(c) => self.cycle(&c, watcher.names()),
                WatchEvent::Card(c, window) => self.card(&c, window.as_ref(), cpus)?,
                // A note can quote a client's name: escaped for the terminal.
                WatchEvent::Note(s) => match self.view.as_mut() {
                    Some(v) => v.log(format!("note: {}", printable(&s))),
                    None => eprintln!("note: {}", printable(&s)),
                },
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
    watch_source::open(args.server, args.jack_server.as_deref(), watch_source::LIVE)
        .map_err(Failure::Runtime)
}

/// Runs `xrunlab watch`.
pub fn watch(args: &WatchArgs) -> Result<(), Failure> {
    for (flag, path) in [("--json", &args.json), ("--trace", &args.trace)] {
        if let Some(p) = path {
            files::check_writable(flag, p)?;
        }
    }
    // A log, appended to (never truncated) and readable while watch runs.
    let lines = match &args.json_lines {
        Some(target) => {
            Some(LineLog::open(target).map_err(|e| Failure::Usage(format!("--json-lines: {e}")))?)
        }
        None => None,
    };
    let signals = StopSignals::install().map_err(Failure::Runtime)?;
    let mut provenance = Provenance::collect(
        env!("CARGO_PKG_VERSION"),
        Path::new("/proc"),
        Path::new("/sys"),
    );
    let source = open_source(args)?;
    let server = source.describe();
    let reports_timing = source.reports_timing();
    let mut watcher = Watcher::new(source, KernelSide::start(args.no_kernel, reports_timing));
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
    let kernel_words = watcher.kernel().words();
    println!("watching {server}; read-only, nothing in the graph is changed");
    println!("kernel events: {kernel_words}");
    if let Some(log) = lines.as_ref().filter(|l| l.earlier_bytes() > 0) {
        println!(
            "--json-lines: appending to {} ({} bytes from earlier runs kept)",
            printable(&log.path().display().to_string()),
            log.earlier_bytes()
        );
    }
    let note = (!reports_timing && watcher.kernel().tracer.is_none()).then(|| {
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
    let cpus = watcher.kernel().cpus.clone();
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
            v.tick(|| screen(&server, &kernel_words, &note, &watcher, started))
                .map_err(|e| Failure::Runtime(format!("the live view: {e}")))?;
        }
        match watcher.step(Duration::from_millis(50)) {
            Ok(events) => out.events(events, &watcher, &cpus)?,
            Err(why) => {
                server_gone = Some(why.clone());
                end_reason = why;
                break;
            }
        }
        if last_checkpoint.elapsed() >= CHECKPOINT {
            last_checkpoint = Instant::now();
            if let Some(p) = &args.json {
                write_result(
                    p,
                    &provenance,
                    &server,
                    &watcher,
                    started,
                    "watch still running",
                    true,
                )?;
            }
        }
    }
    let last = watcher.finish();
    out.events(last, &watcher, &cpus)?;

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
    let summary = watcher.summary();
    print_summary(
        &server,
        started.elapsed(),
        &summary,
        watcher.gaps(),
        &end_reason,
    );
    if let Some(p) = &args.json {
        write_result(
            p,
            &provenance,
            &server,
            &watcher,
            started,
            &end_reason,
            false,
        )?;
    }
    if let Some(lines) = out.lines.take() {
        lines.sync()?;
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

/// What the live view shows now.
fn screen(
    server: &str,
    kernel: &str,
    note: &Option<String>,
    watcher: &Watcher,
    started: Instant,
) -> Screen {
    let (cycles, xruns, _) = watcher.detector().totals();
    Screen {
        server: server.to_owned(),
        kernel: kernel.to_owned(),
        quantum: watcher.detector().quantum(),
        cycles,
        xruns,
        elapsed_s: started.elapsed().as_secs_f64(),
        nodes: Screen::rows(watcher.detector()),
        note: note.clone(),
    }
}

fn write_result(
    path: &Path,
    provenance: &Provenance,
    server: &str,
    watcher: &Watcher,
    started: Instant,
    end_reason: &str,
    checkpoint: bool,
) -> Result<(), Failure> {
    let kernel = watcher.kernel();
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
        profiler_gaps: watcher.gaps(),
        jack_repeat_callbacks: watcher.jack_repeats(),
        summary: watcher.summary(),
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
