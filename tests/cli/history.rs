//! `xrunlab history` on a real history file populated through the history crate: the xruns with
//! their causes and drift, filters, the top culprits, the gaps, JSON, a stored trace written out,
//! and bad input refused with exit code 2.

use super::{run_ok, scratch, usage_error};
use xrunlab_history::{unix_ns, DriftEntry, History, XrunEntry};

const MIN: i64 = 60_000_000_000;

/// A history with four xruns over the last hour (one with a trace and drift words), a drift
/// event and a gap; returns its path.
fn populated(name: &str) -> std::path::PathBuf {
    let db = scratch(name).join("history.db");
    let h = History::open_writer(&db).unwrap();
    let now = unix_ns(std::time::SystemTime::now());
    let s = h
        .begin_session(now - 60 * MIN, "pipewire", "0.1.0")
        .unwrap();
    let x = |mins_ago: i64, node: &str, kind: &str, culprit: &str, summary: &str| XrunEntry {
        time_ns: now - mins_ago * MIN,
        server: "pipewire".into(),
        node: Some(node.into()),
        kind: kind.into(),
        root: "node".into(),
        culprit: Some(culprit.into()),
        summary: summary.into(),
        card: serde_json::json!({ "node": node }),
    };
    h.insert_xrun(
        Some(s),
        &x(
            50,
            "synth",
            "node_ran_long",
            "synth",
            "\"synth\" ran 6.1 ms long",
        ),
    )
    .unwrap();
    h.insert_drift(
        Some(s),
        &DriftEntry {
            time_ns: now - 40 * MIN,
            kind: "sched".into(),
            subject: "pipewire's data loop (tid 7447)".into(),
            before: "SCHED_FIFO 88".into(),
            after: "SCHED_OTHER".into(),
            words: "pipewire's data loop (tid 7447) lost real-time scheduling".into(),
        },
    )
    .unwrap();
    let mut late = x(
        30,
        "calm",
        "driver_woke_late",
        "busyhog",
        "\"calm\" never started: the driver woke 15.2 ms late, behind busyhog",
    );
    late.card = serde_json::json!({
        "node": "calm",
        "drift_before": ["pipewire's data loop (tid 7447) has run SCHED_OTHER since 13:02:00"],
    });
    let id = h.insert_xrun(Some(s), &late).unwrap();
    h.insert_snapshot(id, "task", b"\x0a\x02perfetto-bytes")
        .unwrap();
    h.insert_xrun(
        Some(s),
        &x(20, "calm", "driver_woke_late", "busyhog", "again busyhog"),
    )
    .unwrap();
    h.insert_xrun(
        Some(s),
        &x(5, "synth", "node_ran_long", "synth", "synth again"),
    )
    .unwrap();
    h.open_gap(s, now - 10 * MIN, "the server's socket closed")
        .unwrap();
    h.close_gap(s, now - 9 * MIN).unwrap();
    db
}

#[test]
fn history_prints_the_xruns_with_causes_drift_culprits_and_gaps() {
    let db = populated("history-text");
    let out = run_ok(&["history", "--db", db.to_str().unwrap()]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("4 xruns (everything on file)"), "{text}");
    assert!(text.contains("driver_woke_late"), "{text}");
    assert!(
        text.contains(
            "\"calm\" never started: the driver woke 15.2 ms late, behind busyhog  [trace]"
        ),
        "{text}"
    );
    assert!(
        text.contains("after: pipewire's data loop (tid 7447) has run SCHED_OTHER since 13:02:00"),
        "{text}"
    );
    assert!(
        text.contains("top culprits:\n     2  busyhog\n     2  synth\n"),
        "{text}"
    );
    assert!(
        text.contains("pipewire's data loop (tid 7447) lost real-time scheduling"),
        "{text}"
    );
    assert!(
        text.contains("gap: the pipewire server was away from"),
        "{text}"
    );
    assert!(text.contains("the server's socket closed"), "{text}");
}

#[test]
fn history_filters_by_span_node_culprit_and_kind() {
    let db = populated("history-filters");
    let db = db.to_str().unwrap();
    let json = |args: &[&str]| -> serde_json::Value {
        let out = run_ok(&[&["history", "--json", "--db", db][..], args].concat());
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let ids = |v: &serde_json::Value| -> Vec<i64> {
        v["xruns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["id"].as_i64().unwrap())
            .collect()
    };
    let recent = json(&["--since", "25m"]);
    assert_eq!(ids(&recent), [3, 4]);
    assert_eq!(recent["matching"], 2);
    assert_eq!(
        recent["drift"].as_array().unwrap().len(),
        0,
        "the drift was 40 min ago"
    );
    assert_eq!(ids(&json(&["--node", "synth"])), [1, 4]);
    assert_eq!(ids(&json(&["--culprit", "busyhog", "--until", "25m"])), [2]);
    assert_eq!(
        ids(&json(&["--kind", "node_ran_long", "--since", "1h"])),
        [1, 4]
    );
    let all = json(&["--limit", "1"]);
    assert_eq!(ids(&all), [4], "the latest one");
    assert_eq!(all["matching"], 4);
    assert_eq!(all["top_culprits"][0]["xruns"], 2);
    assert_eq!(all["xruns"][0]["card"]["node"], "synth", "the whole card");
    assert_eq!(
        all["sessions"][0]["gaps"][0]["reason"],
        "the server's socket closed"
    );
}

#[test]
fn history_trace_writes_the_stored_snapshot() {
    let db = populated("history-trace");
    let out = db.with_file_name("xrun2.perfetto-trace");
    run_ok(&[
        "history",
        "--db",
        db.to_str().unwrap(),
        "--trace",
        "2",
        out.to_str().unwrap(),
    ]);
    assert_eq!(std::fs::read(&out).unwrap(), b"\x0a\x02perfetto-bytes");
    let db = db.to_str().unwrap();
    let o = out.to_str().unwrap();
    usage_error(
        &["history", "--db", db, "--trace", "1", o],
        &["xrun 1 has no stored trace"],
    );
    usage_error(
        &["history", "--db", db, "--trace", "99", o],
        &["there is no xrun 99"],
    );
    usage_error(
        &["history", "--db", db, "--trace", "x", o],
        &["not an xrun ID"],
    );
}

#[test]
fn history_refuses_bad_input_with_what_is_allowed() {
    let db = populated("history-bad");
    let db = db.to_str().unwrap();
    usage_error(
        &["history", "--db", db, "--since", "yesterday-ish"],
        &["--since", "30m, 1h, 2d", "2026-11-25T14:00:00Z"],
    );
    usage_error(
        &["history", "--db", db, "--since", "1h", "--until", "2h"],
        &["is not before --until"],
    );
    let missing = scratch("history-missing").join("none.db");
    usage_error(
        &["history", "--db", missing.to_str().unwrap()],
        &["nothing has been recorded there yet"],
    );
    assert!(!missing.exists(), "history creates no file");
}

#[test]
fn record_refuses_a_bad_snapshot_interval_with_what_is_allowed() {
    let db = scratch("record-bad-interval").join("h.db");
    let db = db.to_str().unwrap();
    usage_error(
        &["record", "--db", db, "--snapshot-every", "often"],
        &["--snapshot-every", "30s, 5m, or 0 for never"],
    );
    usage_error(
        &["record", "--db", db, "--snapshot-every", "5"],
        &["0 for never"],
    );
}

#[test]
fn bench_record_refuses_a_phase_too_short_to_count() {
    usage_error(
        &["bench", "record", "--server", "jack", "--duration", "3s"],
        &["--duration 3s", "4s or more"],
    );
}

#[test]
fn history_piped_into_a_reader_that_stops_early_ends_quietly() {
    // `xrunlab history | head`: more lines than a pipe holds, and a reader that reads one line
    // and goes away. The process ends on SIGPIPE like any Unix filter, with nothing on stderr
    // (it used to panic with "failed printing to stdout").
    let db = scratch("history-pipe").join("history.db");
    let h = History::open_writer(&db).unwrap();
    let now = unix_ns(std::time::SystemTime::now());
    let s = h.begin_session(now - 60 * MIN, "jack", "0.1.0").unwrap();
    h.begin().unwrap();
    for i in 0..2000 {
        h.insert_xrun(
            Some(s),
            &XrunEntry {
                time_ns: now - MIN + i,
                server: "jack".into(),
                node: Some("synth".into()),
                kind: "node_ran_long".into(),
                root: "node".into(),
                culprit: Some("synth".into()),
                summary: format!("\"synth\" ran long, xrun {i} of a long list"),
                card: serde_json::json!({}),
            },
        )
        .unwrap();
    }
    h.commit().unwrap();
    drop(h);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_xrunlab"))
        .args(["history", "--limit", "2000", "--db"])
        .arg(&db)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut first,
    )
    .unwrap();
    assert!(first.contains("2000 xruns"), "{first}");
    // The reader is gone (the BufReader and the pipe's end were dropped).
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&out.status),
        Some(libc::SIGPIPE),
        "{:?}",
        out.status
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
