//! The recorder's store loop on a real history file: cards written with the drift before them,
//! the snapshot rate limit, the server's gaps, and the Prometheus endpoint scraped over HTTP with
//! its counts checked against the database's.

use std::io::{Read, Write};
use std::sync::Arc;
use std::time::Duration;
use xrunlab_drift::sched::stat_line;
use xrunlab_drift::WatchedThread;
use xrunlab_history::{Filter, History, Retention};
use xrunlab_record::{
    serve_metrics, Input, Metrics, Recorder, RecorderConfig, Snapshot, SnapshotGate, XrunInput,
};
use xrunlab_testkit::FixtureTree;

const S: i64 = 1_000_000_000;

fn now_ns() -> i64 {
    xrunlab_history::unix_ns(std::time::SystemTime::now())
}

fn xrun(node: &str, kind: &str, root: &str, culprit: &str, snapshot: Snapshot) -> Input {
    Input::Xrun(Box::new(XrunInput {
        time_ns: now_ns(),
        node: Some(node.into()),
        kind: kind.into(),
        root: root.into(),
        culprit: Some(culprit.into()),
        summary: format!("{node}: {kind}, {culprit}"),
        card: serde_json::json!({ "node": node, "case": kind }),
        snapshot,
    }))
}

fn config(root: &FixtureTree) -> RecorderConfig {
    let mut c = RecorderConfig::new("pipewire", Retention::default());
    c.drift_root = root.path().to_path_buf();
    c.drift_every = Duration::from_millis(20);
    c
}

#[test]
fn a_card_after_a_demotion_says_so_and_the_event_is_on_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let tree = FixtureTree::new("recorder");
    tree.write("proc/10/task/11/stat", &stat_line(11, "data-loop.0", 88, 1));
    let mut r = Recorder::new(
        History::open_writer(&db).unwrap(),
        Arc::new(Metrics::new()),
        config(&tree),
    )
    .unwrap();
    r.handle(Input::Threads(vec![WatchedThread {
        pid: 10,
        tid: 11,
        name: "pipewire's data loop".into(),
    }]))
    .unwrap();
    r.tick().unwrap(); // Its baseline.
    r.handle(xrun(
        "synth",
        "node_ran_long",
        "node",
        "synth",
        Snapshot::None,
    ))
    .unwrap();
    tree.write("proc/10/task/11/stat", &stat_line(11, "data-loop.0", 0, 0));
    r.tick().unwrap();
    r.handle(xrun(
        "synth",
        "node_woke_late",
        "node",
        "synth",
        Snapshot::None,
    ))
    .unwrap();
    let stats = r.finish().unwrap();
    assert_eq!((stats.xruns, stats.drift), (2, 1));

    let h = History::open_reader(&db).unwrap();
    let x = h.xruns(&Filter::default(), 10).unwrap();
    assert!(x[0].entry.card.get("drift_before").is_none(), "{:?}", x[0]);
    let words = x[1].entry.card["drift_before"][0].as_str().unwrap();
    assert!(
        words.starts_with("pipewire's data loop (tid 11) has run SCHED_OTHER since "),
        "{words}"
    );
    let d = h.drift(None, None, 10).unwrap();
    assert_eq!(d.len(), 1);
    assert_eq!(
        (d[0].entry.kind.as_str(), d[0].entry.after.as_str()),
        ("sched", "SCHED_OTHER")
    );
    let sessions = h.sessions(None, None).unwrap();
    assert!(sessions[0].stop_ns.is_some(), "the session is closed");
}

#[test]
fn snapshots_are_kept_once_per_interval_per_root_and_gaps_are_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let tree = FixtureTree::new("recorder-snap");
    let mut r = Recorder::new(
        History::open_writer(&db).unwrap(),
        Arc::new(Metrics::new()),
        config(&tree),
    )
    .unwrap();
    // As record does: the gate decides before a trace is built.
    let mut gate = SnapshotGate::new(Duration::from_secs(30));
    let mut snap = |root: &str| match gate.admit(root) {
        true => Snapshot::Trace(b"perfetto bytes".to_vec()),
        false => Snapshot::RateLimited,
    };
    r.handle(xrun(
        "a",
        "driver_woke_late",
        "task",
        "busyhog",
        snap("task"),
    ))
    .unwrap();
    r.handle(xrun(
        "a",
        "driver_woke_late",
        "task",
        "busyhog",
        snap("task"),
    ))
    .unwrap();
    r.handle(xrun("b", "node_ran_long", "node", "b", snap("node")))
        .unwrap();
    r.handle(xrun("c", "node_ran_long", "node", "c", Snapshot::None))
        .unwrap();
    let gone = now_ns();
    r.handle(Input::ServerGone {
        time_ns: gone,
        reason: "the server's socket closed".into(),
    })
    .unwrap();
    r.handle(Input::ServerBack { time_ns: gone + S }).unwrap();
    let stats = r.finish().unwrap();
    assert_eq!(
        (stats.snapshots, stats.snapshots_skipped, stats.gaps),
        (2, 1, 1)
    );
    let h = History::open_reader(&db).unwrap();
    let x = h.xruns(&Filter::default(), 10).unwrap();
    assert_eq!(
        x.iter().map(|x| x.has_snapshot).collect::<Vec<_>>(),
        [true, false, true, false]
    );
    let gaps = &h.sessions(None, None).unwrap()[0].gaps;
    assert_eq!(gaps.len(), 1);
    assert_eq!(gaps[0].to_ns, Some(gone + S));
    assert_eq!(gaps[0].reason, "the server's socket closed");
}

/// `GET path` on `addr`; returns the status line and the body.
fn get(addr: std::net::SocketAddr, path: &str) -> (String, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_owned(), body.to_owned())
}

/// Reads the text format back (unescaping label values), as Prometheus would: the samples of
/// `name`, each as its labels and value.
fn samples(text: &str, name: &str) -> Vec<(Vec<(String, String)>, f64)> {
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some(rest) = line.strip_prefix(name) else {
            continue;
        };
        let Some(rest) = rest.strip_prefix('{') else {
            continue;
        };
        let mut labels = Vec::new();
        let mut chars = rest.chars();
        loop {
            let key: String = chars.by_ref().take_while(|&c| c != '=').collect();
            assert_eq!(chars.next(), Some('"'), "{line}");
            let mut value = String::new();
            loop {
                match chars.next().expect("an ended value") {
                    '\\' => value.push(match chars.next().unwrap() {
                        'n' => '\n',
                        c @ ('\\' | '"') => c,
                        c => panic!("a bad escape \\{c} in {line}"),
                    }),
                    '"' => break,
                    '\n' => panic!("a raw line feed in {line}"),
                    c => value.push(c),
                }
            }
            labels.push((key, value));
            match chars.next() {
                Some(',') => continue,
                Some('}') => break,
                other => panic!("{other:?} after a label in {line}"),
            }
        }
        let value: f64 = chars.as_str().trim().parse().unwrap();
        out.push((labels, value));
    }
    out
}

#[test]
fn the_metrics_endpoint_counts_what_the_database_holds() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let tree = FixtureTree::new("recorder-metrics");
    let metrics = Arc::new(Metrics::new());
    let server = serve_metrics("127.0.0.1:0".parse().unwrap(), false, metrics.clone()).unwrap();
    let recorder = Recorder::new(
        History::open_writer(&db).unwrap(),
        metrics.clone(),
        config(&tree),
    )
    .unwrap();
    let store = xrunlab_record::spawn(recorder).unwrap();
    let tx = store.inputs.clone();
    // A name with every character the format must escape.
    let odd = "my \"synth\" \\ v2\nbeta";
    for (node, kind, culprit) in [
        ("synth", "node_ran_long", "synth"),
        ("synth", "node_ran_long", "synth"),
        (odd, "node_woke_late", "irq 24 (xhci_hcd)"),
        ("reverb", "driver_woke_late", "busyhog"),
    ] {
        tx.send(xrun(node, kind, "node", culprit, Snapshot::None))
            .unwrap();
    }
    tx.send(Input::Cycles {
        count: 1000,
        wake_delays_ns: vec![30_000, 80_000, 7_000_000],
    })
    .unwrap();
    tx.send(Input::Graph {
        quantum: 256,
        rate: 48000,
        time_ns: now_ns(),
    })
    .unwrap();
    tx.send(Input::Graph {
        quantum: 128,
        rate: 48000,
        time_ns: now_ns(),
    })
    .unwrap();
    let stats = store.stop().unwrap();
    assert_eq!((stats.xruns, stats.drift), (4, 1));

    let (status, body) = get(server.addr(), "/metrics");
    assert!(status.contains("200"), "{status}");
    let (status, _) = get(server.addr(), "/other");
    assert!(status.contains("404"), "only /metrics is served: {status}");

    let h = History::open_reader(&db).unwrap();
    let mut from_db: Vec<(Vec<(String, String)>, f64)> = h
        .xrun_counts()
        .unwrap()
        .into_iter()
        .map(|c| {
            (
                vec![
                    ("server".to_owned(), c.server),
                    ("node".to_owned(), c.node),
                    ("kind".to_owned(), c.kind),
                    ("culprit".to_owned(), c.culprit),
                ],
                c.xruns as f64,
            )
        })
        .collect();
    let mut scraped = samples(&body, "xrunlab_xruns_total");
    from_db.sort_by(|a, b| a.0.cmp(&b.0));
    scraped.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(scraped, from_db, "\n{body}");
    assert_eq!(scraped.len(), 3);
    assert_eq!(
        samples(&body, "xrunlab_cycles_total"),
        [(vec![("server".into(), "pipewire".into())], 1000.0)]
    );
    let drift = samples(&body, "xrunlab_drift_events_total");
    assert_eq!(drift, [(vec![("kind".into(), "quantum".into())], 1.0)]);
    assert_eq!(
        h.drift(None, None, 10).unwrap().len(),
        1,
        "the same count on file"
    );
    let count = samples(&body, "xrunlab_driver_wake_delay_seconds_count");
    assert_eq!(count[0].1, 3.0);
    drop(server);
}

#[test]
fn a_public_address_is_refused_without_the_flag() {
    let e = serve_metrics(
        "0.0.0.0:0".parse().unwrap(),
        false,
        Arc::new(Metrics::new()),
    )
    .err()
    .expect("refused")
    .to_string();
    assert!(
        e.contains("not a loopback address") && e.contains("--metrics-public"),
        "{e}"
    );
    let ok = serve_metrics("0.0.0.0:0".parse().unwrap(), true, Arc::new(Metrics::new()));
    assert!(ok.is_ok(), "allowed with the flag");
}

#[test]
fn a_storms_cards_that_arrive_together_are_one_commit_and_all_on_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let tree = FixtureTree::new("recorder-batch");
    let r = Recorder::new(
        History::open_writer(&db).unwrap(),
        Arc::new(Metrics::new()),
        config(&tree),
    )
    .unwrap();
    // Fifty cards and the counts between them, all waiting when the store loop takes the
    // first: two batches of at most 64 inputs, instead of fifty commits.
    let (tx, rx) = std::sync::mpsc::sync_channel(1024);
    for n in 0..50 {
        let node = format!("n{n}");
        tx.send(xrun(&node, "node_ran_long", "node", &node, Snapshot::None))
            .unwrap();
        tx.send(Input::Cycles {
            count: 10,
            wake_delays_ns: vec![],
        })
        .unwrap();
    }
    tx.send(Input::Stop).unwrap();
    let stats = r.run(rx).unwrap();
    assert_eq!((stats.xruns, stats.commits), (50, 2), "{stats:?}");
    let h = History::open_reader(&db).unwrap();
    assert_eq!(h.count_xruns(&Filter::default()).unwrap(), 50);
    // Taken one at a time, each is its own commit; counts alone are none.
    let mut r = Recorder::new(
        History::open_writer(&db).unwrap(),
        Arc::new(Metrics::new()),
        config(&tree),
    )
    .unwrap();
    for _ in 0..3 {
        r.handle_batch(vec![xrun(
            "x",
            "node_ran_long",
            "node",
            "x",
            Snapshot::None,
        )])
        .unwrap();
    }
    r.handle_batch(vec![Input::Cycles {
        count: 10,
        wake_delays_ns: vec![],
    }])
    .unwrap();
    let stats = r.finish().unwrap();
    assert_eq!((stats.xruns, stats.commits), (3, 3), "{stats:?}");
    assert_eq!(h.count_xruns(&Filter::default()).unwrap(), 53);
}
