//! `xrunlab record`: the flight recorder. Watch's analysis (the same [`Watcher`] and cards) runs
//! until stopped and every card goes into the SQLite history with the drift that preceded it;
//! the server may come and go (the gap is recorded and recording goes on). Runs on the main
//! thread; the history's store loop, the metrics server, the tracer's reader and the server
//! client's loop run on threads of their own.

use crate::cli::record::RecordArgs;
use crate::signals::StopSignals;
use crate::watch_source;
use crate::Failure;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use xrunlab_drift::WatchedThread;
use xrunlab_history::{unix_ns, History, Retention};
use xrunlab_record::{
    serve_metrics, spawn, Input, Metrics, Recorder, RecorderConfig, Snapshot, SnapshotGate,
    XrunInput,
};
use xrunlab_trace::{now_ns, Window};
use xrunlab_watch::{words, Card, KernelSide, Role, Source, WatchEvent, Watcher};

/// How often the cycle counts, the graph's nodes and the followed threads are told to the store.
const REPORT_EVERY: Duration = Duration::from_secs(1);
/// How often a server that went away is looked for again.
const RECONNECT_EVERY: Duration = Duration::from_secs(1);
/// How long the recorder reads on once told to end, so that the records the server sent before
/// the end are read: a record waits up to a batch in the source's thread, then up to a batch
/// for this thread's next read; and a little (`kill -9` cannot wait: it loses those batches).
const DRAIN: Duration = Duration::from_millis(2 * watch_source::RECORDED.as_millis() as u64 + 150);

fn open_source(args: &RecordArgs) -> Result<Box<dyn Source>, String> {
    watch_source::open(
        args.server,
        args.jack_server.as_deref(),
        watch_source::RECORDED,
    )
}

/// A CLOCK_MONOTONIC time as ns since the Unix epoch.
fn wall_ns(mono_ns: u64) -> i64 {
    let now = unix_ns(SystemTime::now());
    now - i64::try_from(now_ns().saturating_sub(mono_ns)).unwrap_or(0)
}

/// The store's row of a card: its kind, what kind of root, who it blames, and the Perfetto
/// snapshot of its `window` when `gate` lets one through (built only then).
fn xrun_input(
    c: &Card,
    window: Option<&Window>,
    cpus: &[usize],
    gate: &mut SnapshotGate,
) -> Result<XrunInput, Failure> {
    let root = c.root_step();
    let culprit = c
        .root
        .as_ref()
        .and_then(|r| r.account.as_ref())
        .or(c.kernel.as_ref())
        .and_then(|k| k.main_culprit.as_ref())
        .filter(|k| k.kind != "idle")
        .map(|k| k.name.clone())
        .or_else(|| {
            root.filter(|r| r.role == Role::Node)
                .map(|r| r.name.clone())
        });
    let root = match root.map(|r| r.role) {
        Some(Role::Driver) => "driver",
        Some(Role::Node) => "node",
        None => "none",
    };
    let summary = words::verdict(c);
    let snapshot = match window {
        Some(w) if gate.enabled() => match gate.admit(root) {
            true => Snapshot::Trace(xrunlab_watch::snapshot::snapshot(c, &summary, w, cpus)),
            false => Snapshot::RateLimited,
        },
        _ => Snapshot::None,
    };
    Ok(XrunInput {
        time_ns: wall_ns(c.xrun.cycle_start_ns),
        node: c.xrun.node.as_ref().map(|n| n.name.clone()),
        kind: c.kind.name().to_owned(),
        root: root.to_owned(),
        culprit,
        summary,
        card: serde_json::to_value(c)
            .map_err(|e| Failure::Runtime(format!("a card does not serialize: {e}")))?,
        snapshot,
    })
}

/// Runs `xrunlab record`.
pub fn record(args: &RecordArgs) -> Result<(), Failure> {
    let signals = StopSignals::install().map_err(Failure::Runtime)?;
    let db = match &args.db {
        Some(p) => p.clone(),
        None => xrunlab_history::default_path().ok_or_else(|| {
            Failure::Usage(
                "no place for the history: set XDG_STATE_HOME or HOME, or give --db FILE".into(),
            )
        })?,
    };
    let history = History::open_writer(&db)?;
    let metrics = Arc::new(Metrics::new());
    let _server = match args.metrics {
        Some(addr) => Some(
            serve_metrics(addr, args.metrics_public, metrics.clone())
                .map_err(|e| Failure::Usage(e.to_string()))?,
        ),
        None => None,
    };
    let retention = Retention {
        max_age: Some(args.retain),
        max_bytes: Some(args.max_size),
    };
    let server_kind = if watch_source::is_pipewire(args.server) {
        "pipewire"
    } else {
        "jack"
    };
    let recorder = Recorder::new(
        history,
        metrics.clone(),
        RecorderConfig::new(server_kind, retention),
    )?;
    let handle = spawn(recorder)
        .map_err(|e| Failure::Runtime(format!("cannot start the store's thread: {e}")))?;
    println!("recording into {}", db.display());
    let mut gate = SnapshotGate::new(args.snapshot_every);
    let started = Instant::now();
    let mut watcher: Option<Watcher> = None;
    let mut gone_since: Option<Instant> = None;
    let mut tried = Instant::now() - RECONNECT_EVERY;
    let mut cycles = 0u64;
    let mut delays = Vec::new();
    let mut reported = Instant::now();
    let mut nodes: BTreeSet<String> = BTreeSet::new();
    // The nodes the first report finds were there before the recorder: the baseline, not drift.
    // (After a server restart, the nodes that come back with it are filed as appeared.)
    let mut baseline = true;
    let mut graph = None;
    let mut xruns = 0u64;
    // Why and since when the recorder is ending: it reads on for one batch first, so that what
    // the server reported before the end is on file (a second stop signal exits at once).
    let mut ending: Option<(String, Instant)> = None;
    let end = loop {
        if ending.is_none() {
            if let Some(sig) = signals.received() {
                ending = Some((format!("ended by {sig}"), Instant::now()));
            } else if args.duration.is_some_and(|d| started.elapsed() >= d) {
                ending = Some(("the --duration ended".to_owned(), Instant::now()));
            }
        }
        if let Some((why, since)) = &ending {
            if watcher.is_none() || since.elapsed() >= DRAIN {
                break why.clone();
            }
        }
        let Some(w) = watcher.as_mut() else {
            if let Some(left) = RECONNECT_EVERY.checked_sub(tried.elapsed()) {
                // Until the next try, waking only to see a stop signal: a recorder left waiting
                // for a server for weeks costs next to nothing.
                std::thread::sleep(left.min(Duration::from_millis(250)));
                continue;
            }
            tried = Instant::now();
            match open_source(args) {
                Ok(source) => {
                    println!("recording {}", source.describe());
                    if gone_since.take().is_some() {
                        let _ = handle.inputs.send(Input::ServerBack {
                            time_ns: unix_ns(SystemTime::now()),
                        });
                    }
                    // Nothing reads the kernel's events between xruns, on either server (watch
                    // on JACK2, with its live view, drains them continuously).
                    watcher = Some(Watcher::new(
                        source,
                        KernelSide::start_with(args.no_kernel, &KernelSide::around_xruns()),
                    ));
                }
                Err(e)
                    if gone_since.is_none()
                        && xruns == 0
                        && started.elapsed() < RECONNECT_EVERY * 2 =>
                {
                    // The first try: a server that is not there at all is the user's to know.
                    eprintln!("no server yet ({e}); waiting for one");
                    gone_since = Some(Instant::now());
                }
                Err(_) => {}
            }
            continue;
        };
        match w.step(watch_source::RECORDED) {
            Ok(events) => {
                for e in events {
                    match e {
                        WatchEvent::Card(c, window) => {
                            xruns += 1;
                            println!("{}", xrunlab_sys::printable(&words::verdict(&c)));
                            let input =
                                xrun_input(&c, window.as_ref(), &w.kernel().cpus, &mut gate)?;
                            // Waits rather than lose a card when the disk is slow.
                            let _ = handle.inputs.send(Input::Xrun(Box::new(input)));
                        }
                        WatchEvent::Cycle(c) => {
                            cycles += 1;
                            if let Some(late) = xrunlab_watch::chain::driver_lateness_ns(&c) {
                                if delays.len() < 4096 {
                                    delays.push(late);
                                }
                            }
                            if graph != Some((c.quantum, c.rate)) {
                                graph = Some((c.quantum, c.rate));
                                let _ = handle.inputs.send(Input::Graph {
                                    quantum: c.quantum,
                                    rate: c.rate,
                                    time_ns: wall_ns(c.driver.signal_ns),
                                });
                            }
                        }
                        WatchEvent::Note(s) => eprintln!("note: {}", xrunlab_sys::printable(&s)),
                    }
                }
            }
            Err(why) => {
                eprintln!("{why}; recording goes on when the server is back");
                let _ = handle.inputs.send(Input::ServerGone {
                    time_ns: unix_ns(SystemTime::now()),
                    reason: why,
                });
                let cpus = w.kernel().cpus.clone();
                for e in w.finish() {
                    if let WatchEvent::Card(c, window) = e {
                        let input = xrun_input(&c, window.as_ref(), &cpus, &mut gate)?;
                        let _ = handle.inputs.send(Input::Xrun(Box::new(input)));
                    }
                }
                watcher = None;
                gone_since = Some(Instant::now());
                nodes.clear();
                continue;
            }
        }
        if reported.elapsed() >= REPORT_EVERY {
            reported = Instant::now();
            // JACK2's cycles are rebuilt from the wake chain only around xruns here: its own
            // frame clock counts them all.
            let seen = std::mem::take(&mut cycles);
            let count = match w.reports_timing() {
                true => seen,
                false => w.cycles_run().unwrap_or(seen),
            };
            let _ = handle.inputs.try_send(Input::Cycles {
                count,
                wake_delays_ns: std::mem::take(&mut delays),
            });
            let now: BTreeSet<String> = w.names().values().map(|(n, _)| n.clone()).collect();
            if std::mem::take(&mut baseline) {
                nodes.clone_from(&now);
            }
            for (name, added) in now
                .difference(&nodes)
                .map(|n| (n, true))
                .chain(nodes.difference(&now).map(|n| (n, false)))
            {
                let _ = handle.inputs.send(Input::Node {
                    name: name.clone(),
                    added,
                    time_ns: unix_ns(SystemTime::now()),
                });
            }
            nodes = now;
            let threads: Vec<WatchedThread> = w
                .server_thread()
                .and_then(|m| Some((m.pid?, m.thread.clone()?)))
                .map(|(pid, t)| WatchedThread {
                    pid,
                    tid: t.tid,
                    name: format!("the server's {} thread ({})", t.comm, t.policy),
                })
                .into_iter()
                .collect();
            let _ = handle.inputs.try_send(Input::Threads(threads));
        }
    };
    if let Some(mut w) = watcher {
        let cpus = w.kernel().cpus.clone();
        for e in w.finish() {
            if let WatchEvent::Card(c, window) = e {
                let input = xrun_input(&c, window.as_ref(), &cpus, &mut gate)?;
                let _ = handle.inputs.send(Input::Xrun(Box::new(input)));
            }
        }
    }
    let stats = handle.stop()?;
    println!("recorded until {end}: {stats:?}");
    Ok(())
}
