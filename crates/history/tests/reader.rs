//! The history read strictly read-only, as the dashboard reads it: beside a live writer, the
//! list of xruns without cards, one xrun with its card, the facets of a span, the drift count,
//! and the files it must refuse (missing, older schema, newer schema) without writing them.

use xrunlab_history::{schema, DriftEntry, Facet, Filter, History, HistoryError, XrunEntry};

const S: i64 = 1_000_000_000;

fn xrun(t: i64, node: &str, kind: &str, culprit: Option<&str>) -> XrunEntry {
    XrunEntry {
        time_ns: t,
        server: "jack".into(),
        node: Some(node.into()),
        kind: kind.into(),
        root: "node".into(),
        culprit: culprit.map(Into::into),
        summary: format!("{node}: {kind}"),
        card: serde_json::json!({ "kind": kind, "node": node }),
    }
}

fn facet(value: &str, xruns: u64) -> Facet {
    Facet {
        value: value.into(),
        xruns,
    }
}

#[test]
fn a_read_only_reader_sees_a_live_writers_rows() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let w = History::open_writer(&db).unwrap();
    let s = w.begin_session(0, "jack", "t").unwrap();
    let a = w
        .insert_xrun(
            Some(s),
            &xrun(10 * S, "synth", "node_ran_long", Some("synth")),
        )
        .unwrap();
    w.insert_xrun(
        Some(s),
        &xrun(20 * S, "synth", "driver_woke_late", Some("busyhog")),
    )
    .unwrap();
    w.insert_xrun(Some(s), &xrun(30 * S, "<script>x", "node_ran_long", None))
        .unwrap();
    w.insert_snapshot(a, "node", b"perfetto").unwrap();
    for t in [15, 25, 35] {
        w.insert_drift(
            Some(s),
            &DriftEntry {
                time_ns: t * S,
                kind: "governor".into(),
                subject: "policy0".into(),
                before: "performance".into(),
                after: "powersave".into(),
                words: format!("governor changed at {t}"),
            },
        )
        .unwrap();
    }

    // The writer still holds the file (and its lock): a read-only reader opens it anyway.
    let r = History::open_read_only(&db).unwrap();
    let heads = r.xrun_heads(&Filter::default(), 100).unwrap();
    assert_eq!(
        heads.iter().map(|h| h.time_ns / S).collect::<Vec<_>>(),
        [10, 20, 30]
    );
    assert!(heads[0].has_snapshot && !heads[1].has_snapshot);
    assert_eq!(heads[2].node.as_deref(), Some("<script>x"));
    assert_eq!(heads[2].culprit, None);
    // The latest ones when cut, oldest first.
    let latest = r.xrun_heads(&Filter::default(), 2).unwrap();
    assert_eq!(
        latest.iter().map(|h| h.time_ns / S).collect::<Vec<_>>(),
        [20, 30]
    );
    let by_kind = Filter {
        kind: Some("node_ran_long".into()),
        ..Filter::default()
    };
    assert_eq!(r.xrun_heads(&by_kind, 100).unwrap().len(), 2);

    let one = r.xrun(a).unwrap().expect("xrun a is on file");
    assert_eq!(one.entry.card["node"], "synth");
    assert!(one.has_snapshot);
    assert_eq!(one.session, Some(s));
    assert_eq!(r.xrun(a + 100).unwrap(), None);

    let f = r.facets(None, None, 10).unwrap();
    assert_eq!(f.nodes, [facet("synth", 2), facet("<script>x", 1)]);
    assert_eq!(f.culprits, [facet("busyhog", 1), facet("synth", 1)]);
    assert_eq!(
        f.kinds,
        [facet("node_ran_long", 2), facet("driver_woke_late", 1)]
    );
    let late = r.facets(Some(20 * S), Some(30 * S), 10).unwrap();
    assert_eq!(late.nodes, [facet("synth", 1)]);
    assert_eq!(late.kinds, [facet("driver_woke_late", 1)]);
    assert_eq!(r.facets(None, None, 1).unwrap().kinds.len(), 1);

    assert_eq!(r.count_drift(None, None).unwrap(), 3);
    assert_eq!(r.count_drift(Some(20 * S), Some(35 * S)).unwrap(), 1);

    // Written after the reader opened: the next read sees it.
    w.insert_xrun(Some(s), &xrun(40 * S, "synth", "node_woke_late", None))
        .unwrap();
    assert_eq!(r.count_xruns(&Filter::default()).unwrap(), 4);
    // And the reader cannot write.
    assert!(r
        .connection()
        .execute("DELETE FROM xruns", [])
        .is_err_and(|e| e.to_string().contains("readonly")));
}

#[test]
fn a_read_only_reader_refuses_missing_older_and_newer_files_and_writes_none() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("none.db");
    assert!(matches!(
        History::open_read_only(&missing),
        Err(HistoryError::Missing(_))
    ));
    assert!(!missing.exists(), "a reader creates nothing");

    let old = dir.path().join("old.db");
    drop(History::open_at_version(&old, 1).unwrap());
    let e = History::open_read_only(&old).err().expect("refused");
    assert!(
        matches!(e, HistoryError::Outdated { found: 1, .. }),
        "{e:?}"
    );
    assert!(e.to_string().contains("older than this xrunlab's"), "{e}");
    assert_eq!(
        History::open_at_version(&old, 1)
            .unwrap()
            .schema_version()
            .unwrap(),
        1,
        "left at its version"
    );

    let new = dir.path().join("new.db");
    {
        let h = History::open_writer(&new).unwrap();
        h.connection()
            .pragma_update(None, "user_version", schema::VERSION + 1)
            .unwrap();
    }
    assert!(matches!(
        History::open_read_only(&new),
        Err(HistoryError::TooNew { .. })
    ));
}

#[test]
fn a_reader_opens_while_the_writer_holds_a_transaction_open() {
    // Opening a reader takes no write lock: CI once saw a reader refused with "database is
    // locked" beside a writer committing as fast as it could, because opening set a pragma
    // that needs the write lock. Here the writer keeps its transaction open throughout, so a
    // reader that needed that lock could never get it.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let w = History::open_writer(&db).unwrap();
    let s = w.begin_session(0, "jack", "t").unwrap();
    w.insert_xrun(Some(s), &xrun(S, "synth", "node_ran_long", None))
        .unwrap();
    w.begin().unwrap();
    w.insert_xrun(Some(s), &xrun(2 * S, "synth", "node_ran_long", None))
        .unwrap();
    let reader = History::open_reader(&db).expect("a reader beside an open write transaction");
    // It sees the committed row, not the one still in the writer's transaction.
    assert_eq!(reader.count_xruns(&Filter::default()).unwrap(), 1);
    let read_only = History::open_read_only(&db).expect("a read-only reader likewise");
    assert_eq!(read_only.count_xruns(&Filter::default()).unwrap(), 1);
    w.commit().unwrap();
    assert_eq!(reader.count_xruns(&Filter::default()).unwrap(), 2);
}
