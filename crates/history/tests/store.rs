//! The history on real SQLite files: migrations from every earlier schema version, queries by
//! span, node, culprit and kind, the top culprits, sessions and gaps, snapshots, retention by
//! age and by size, the single-writer lock within one process, and files it must refuse.

use std::path::Path;
use std::time::Duration;
use xrunlab_history::{schema, DriftEntry, Filter, History, Retention, XrunCount, XrunEntry};

const S: i64 = 1_000_000_000;

fn xrun(t: i64, node: &str, kind: &str, culprit: Option<&str>) -> XrunEntry {
    XrunEntry {
        time_ns: t,
        server: "pipewire".into(),
        node: Some(node.into()),
        kind: kind.into(),
        root: if culprit.is_some_and(|c| c.starts_with("irq")) {
            "irq".into()
        } else {
            "node".into()
        },
        culprit: culprit.map(Into::into),
        summary: format!("{node}: {kind}"),
        card: serde_json::json!({ "node": node, "t": t }),
    }
}

fn drift(t: i64, words: &str) -> DriftEntry {
    DriftEntry {
        time_ns: t,
        kind: "sched".into(),
        subject: "data-loop.0 (tid 7447)".into(),
        before: "SCHED_FIFO 88".into(),
        after: "SCHED_OTHER".into(),
        words: words.into(),
    }
}

fn fill(h: &History) {
    let s = h.begin_session(0, "pipewire", "0.1.0").unwrap();
    h.insert_xrun(
        Some(s),
        &xrun(10 * S, "synth", "node_ran_long", Some("synth")),
    )
    .unwrap();
    h.insert_xrun(
        Some(s),
        &xrun(20 * S, "synth", "node_woke_late", Some("irq 24 xhci_hcd")),
    )
    .unwrap();
    h.insert_xrun(
        Some(s),
        &xrun(30 * S, "reverb", "node_ran_long", Some("reverb")),
    )
    .unwrap();
    h.insert_xrun(
        Some(s),
        &xrun(40 * S, "synth", "node_ran_long", Some("synth")),
    )
    .unwrap();
    h.insert_xrun(Some(s), &xrun(50 * S, "reverb", "unexplained", None))
        .unwrap();
    h.insert_drift(Some(s), &drift(15 * S, "data-loop.0 lost SCHED_FIFO"))
        .unwrap();
}

#[test]
fn a_file_of_every_earlier_version_opens_migrated_with_its_rows() {
    for from in 0..schema::VERSION {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("h.db");
        {
            let old = History::open_at_version(&db, from).unwrap();
            assert_eq!(old.schema_version().unwrap(), from);
            if from >= 1 {
                // Written with the SQL of that version, as an old xrunlab would have.
                old.connection()
                    .execute_batch(
                        "INSERT INTO sessions (id, start_ns, stop_ns, server, version)
                             VALUES (1, 5, 900, 'jack', '0.0.9');
                         INSERT INTO xruns
                             (session, time_ns, server, node, kind, root, culprit, summary, card)
                             VALUES (1, 7, 'jack', 'synth', 'ran_long', 'node', 'synth', 's',
                                     '{\"old\":true}');
                         INSERT INTO drift (session, time_ns, kind, subject, before, after, words)
                             VALUES (1, 6, 'governor', 'policy0', 'performance', 'powersave', 'w');",
                    )
                    .unwrap();
            }
        }
        let h = History::open_writer(&db).unwrap();
        assert_eq!(h.schema_version().unwrap(), schema::VERSION, "from v{from}");
        assert_eq!(h.integrity_check().unwrap(), "ok");
        if from >= 1 {
            let x = h.xruns(&Filter::default(), 10).unwrap();
            assert_eq!(x.len(), 1, "from v{from}");
            assert_eq!(x[0].entry.card, serde_json::json!({ "old": true }));
            assert_eq!(
                x[0].entry.kind, "ran_long",
                "an old kind name is kept as is"
            );
            assert_eq!(h.drift(None, None, 10).unwrap().len(), 1);
            let sessions = h.sessions(None, None).unwrap();
            assert_eq!(sessions.len(), 1);
            assert!(sessions[0].gaps.is_empty());
        }
        // What the newest version added works on the migrated file.
        let s = h.begin_session(1000, "pipewire", "0.1.0").unwrap();
        h.open_gap(s, 1100, "the server went away").unwrap();
        h.close_gap(s, 1200).unwrap();
        assert_eq!(
            h.sessions(Some(1000), None).unwrap().last().unwrap().gaps[0].to_ns,
            Some(1200)
        );
    }
}

#[test]
fn a_file_from_a_newer_xrunlab_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    drop(History::open_writer(&db).unwrap());
    let raw = rusqlite_version_bump(&db);
    let err = History::open_reader(&db)
        .err()
        .expect("refused")
        .to_string();
    assert!(
        err.contains(&format!("schema version {raw}")) && err.contains("newer than this"),
        "{err}"
    );
}

/// Sets the file's user_version one past ours, as a newer xrunlab would; returns it.
fn rusqlite_version_bump(db: &Path) -> i64 {
    let h = History::open_at_version(db, schema::VERSION).unwrap();
    let v = schema::VERSION + 1;
    h.connection()
        .pragma_update(None, "user_version", v)
        .unwrap();
    v
}

#[test]
fn queries_filter_by_span_node_culprit_and_kind() {
    let dir = tempfile::tempdir().unwrap();
    let h = History::open_writer(&dir.path().join("h.db")).unwrap();
    fill(&h);
    let all = h.xruns(&Filter::default(), 100).unwrap();
    assert_eq!(
        all.iter().map(|x| x.entry.time_ns / S).collect::<Vec<_>>(),
        [10, 20, 30, 40, 50]
    );
    let span = Filter {
        since_ns: Some(20 * S),
        until_ns: Some(40 * S),
        ..Filter::default()
    };
    assert_eq!(
        h.count_xruns(&span).unwrap(),
        2,
        "since inclusive, until exclusive"
    );
    let synth = Filter {
        node: Some("synth".into()),
        kind: Some("node_ran_long".into()),
        ..Filter::default()
    };
    assert_eq!(
        h.xruns(&synth, 100)
            .unwrap()
            .iter()
            .map(|x| x.entry.time_ns / S)
            .collect::<Vec<_>>(),
        [10, 40]
    );
    let irq = Filter {
        culprit: Some("irq 24 xhci_hcd".into()),
        ..span.clone()
    };
    assert_eq!(h.xruns(&irq, 100).unwrap()[0].entry.root, "irq");
    // The latest N, still oldest first.
    let last2 = h.xruns(&Filter::default(), 2).unwrap();
    assert_eq!(last2.iter().map(|x| x.id).collect::<Vec<_>>(), [4, 5]);
    let top = h.top_culprits(&Filter::default(), 10).unwrap();
    assert_eq!(
        top.iter()
            .map(|c| (c.culprit.as_str(), c.xruns))
            .collect::<Vec<_>>(),
        [("synth", 2), ("irq 24 xhci_hcd", 1), ("reverb", 1)]
    );
    assert_eq!(h.top_culprits(&span, 10).unwrap().len(), 2);
    assert_eq!(h.drift(Some(16 * S), None, 10).unwrap().len(), 0);
    assert_eq!(
        h.drift(Some(10 * S), Some(20 * S), 10).unwrap()[0]
            .entry
            .words,
        "data-loop.0 lost SCHED_FIFO"
    );
    let counts = h.xrun_counts().unwrap();
    assert_eq!(counts.iter().map(|c| c.xruns).sum::<u64>(), 5);
    assert!(counts.contains(&XrunCount {
        server: "pipewire".into(),
        node: "reverb".into(),
        kind: "unexplained".into(),
        culprit: String::new(),
        xruns: 1
    }));
}

#[test]
fn a_snapshot_reads_back_as_written_and_marks_its_xrun() {
    let dir = tempfile::tempdir().unwrap();
    let h = History::open_writer(&dir.path().join("h.db")).unwrap();
    fill(&h);
    let trace: Vec<u8> = (0..200_000_u32).map(|i| (i % 13) as u8).collect();
    h.insert_snapshot(2, "irq", &trace).unwrap();
    assert_eq!(h.snapshot(2).unwrap().as_deref(), Some(&trace[..]));
    assert_eq!(h.snapshot(3).unwrap(), None);
    let x = h.xruns(&Filter::default(), 10).unwrap();
    assert_eq!(
        x.iter().map(|x| x.has_snapshot).collect::<Vec<_>>(),
        [false, true, false, false, false]
    );
}

#[test]
fn a_second_writer_in_the_same_process_is_refused_until_the_first_closes() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let first = History::open_writer(&db).unwrap();
    let err = History::open_writer(&db)
        .err()
        .expect("refused")
        .to_string();
    assert!(
        err.contains(&format!("(pid {})", std::process::id())) && err.contains("another --db"),
        "{err}"
    );
    drop(first);
    History::open_writer(&db).expect("free again once the first is closed");
}

#[test]
fn reading_a_missing_history_says_nothing_was_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let err = History::open_reader(&dir.path().join("none.db"))
        .err()
        .expect("refused")
        .to_string();
    assert!(err.contains("nothing has been recorded there yet"), "{err}");
    assert!(
        !dir.path().join("none.db").exists(),
        "a reader creates nothing"
    );
}

#[test]
fn retention_by_age_removes_old_rows_and_ended_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let h = History::open_writer(&dir.path().join("h.db")).unwrap();
    fill(&h);
    let old = h.begin_session(0, "jack", "0.1.0").unwrap();
    h.end_session(old, 12 * S).unwrap();
    h.insert_snapshot(1, "node", b"trace").unwrap();
    let trimmed = h
        .retain(
            &Retention {
                max_age: Some(Duration::from_secs(35)),
                max_bytes: None,
            },
            60 * S,
        )
        .unwrap();
    assert_eq!(
        (
            trimmed.xruns,
            trimmed.drift,
            trimmed.snapshots,
            trimmed.sessions
        ),
        (2, 1, 1, 1)
    );
    let left = h.xruns(&Filter::default(), 10).unwrap();
    assert_eq!(
        left.iter().map(|x| x.entry.time_ns / S).collect::<Vec<_>>(),
        [30, 40, 50]
    );
    assert_eq!(h.integrity_check().unwrap(), "ok");
}

#[test]
fn retention_by_size_trims_snapshots_first_then_the_oldest_rows_and_shrinks_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let h = History::open_writer(&db).unwrap();
    // Incompressible snapshots, so that they are the bulk of the file.
    let mut seed = 0x9e37_79b9_u32;
    let mut noise = |n: usize| -> Vec<u8> {
        (0..n)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 17;
                seed ^= seed << 5;
                seed as u8
            })
            .collect()
    };
    for i in 0..400 {
        let mut x = xrun(i * S, "synth", "node_ran_long", Some("synth"));
        x.card = serde_json::json!({ "pad": "y".repeat(2000), "i": i });
        let id = h.insert_xrun(None, &x).unwrap();
        if i % 10 == 0 {
            h.insert_snapshot(id, "node", &noise(100_000)).unwrap();
        }
    }
    // The rows in the file itself, not in the WAL, to compare the file's size with.
    h.connection()
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    let full = std::fs::metadata(&db).unwrap().len();
    let before = h.used_bytes().unwrap();
    assert!(before > 4_000_000, "{before}");

    // Over the limit by less than the snapshots: only snapshots go, oldest first.
    let t = h
        .retain(
            &Retention {
                max_age: None,
                max_bytes: Some(before - 1_000_000),
            },
            0,
        )
        .unwrap();
    assert!(t.snapshots > 0 && t.xruns == 0, "{t:?}");
    assert!(h.used_bytes().unwrap() <= before - 1_000_000);
    assert_eq!(h.count_xruns(&Filter::default()).unwrap(), 400);
    assert!(h.snapshot(1).unwrap().is_none(), "the oldest snapshot went");
    assert!(h.snapshot(391).unwrap().is_some(), "the newest stayed");

    // Under what the rows alone take: every snapshot, then the oldest rows go.
    let t = h
        .retain(
            &Retention {
                max_age: None,
                max_bytes: Some(300_000),
            },
            0,
        )
        .unwrap();
    assert!(t.xruns > 0, "{t:?}");
    assert!(h.used_bytes().unwrap() <= 300_000);
    let left = h.xruns(&Filter::default(), 1000).unwrap();
    assert_eq!(
        left.last().unwrap().entry.time_ns,
        399 * S,
        "the newest stays"
    );
    assert_eq!(left.len() as u64, 400 - t.xruns);
    assert_eq!(h.integrity_check().unwrap(), "ok");
    // The freed pages went back to the file system.
    let now = std::fs::metadata(&db).unwrap().len();
    assert!(now <= 400_000 && now < full, "{full} → {now} bytes");
}
