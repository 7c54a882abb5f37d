//! `kill -9` at any moment leaves a history that passes SQLite's integrity check and holds every
//! xrun whose commit was reported: a real writer process (xrunlab-history-writer) killed with
//! SIGKILL in the middle of its insert loop, at several points, then the file reopened.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use xrunlab_history::{Filter, History};

/// Starts a writer on `db`, lets it report `commits` commits, and kills it with SIGKILL; returns
/// the last id it reported committed.
fn write_then_kill(db: &std::path::Path, commits: usize, batch: usize) -> i64 {
    let mut child = Command::new(env!("CARGO_BIN_EXE_xrunlab-history-writer"))
        .arg(db)
        .arg(batch.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the writer starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut last = 0;
    for _ in 0..commits {
        let line = lines
            .next()
            .expect("the writer reports commits")
            .expect("a line");
        last = line
            .strip_prefix("committed ")
            .expect("a commit line")
            .parse()
            .expect("an id");
    }
    // SAFETY: kill on our own child's pid, which has not been reaped.
    let rc = unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    assert_eq!(rc, 0, "SIGKILL sent");
    let status = child.wait().expect("the writer is reaped");
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc::SIGKILL),
        "the writer died of SIGKILL, not on its own: {status:?}"
    );
    last
}

#[test]
fn a_writer_killed_mid_insert_leaves_an_intact_file_with_every_committed_xrun() {
    killed_mid_insert(1);
}

#[test]
fn a_writer_killed_mid_batch_leaves_an_intact_file_with_every_committed_batch() {
    // Seven xruns a transaction, as the recorder commits a storm's cards that came together.
    killed_mid_insert(7);
}

fn killed_mid_insert(batch: usize) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("history.db");
    let mut committed_before = 0;
    // Several kill points, so that some land inside a snapshot's write and some between rows.
    for (round, commits) in [37, 113, 5, 250, 61].into_iter().enumerate() {
        let last = write_then_kill(&db, commits, batch);
        let history = History::open_writer(&db)
            .unwrap_or_else(|e| panic!("round {round}: reopening after kill -9: {e}"));
        assert_eq!(history.integrity_check().unwrap(), "ok", "round {round}");
        let count = history.count_xruns(&Filter::default()).unwrap() as i64;
        // Every reported commit is there (the writer may have committed more before the
        // signal landed; those are whole rows too).
        assert!(
            count >= last,
            "round {round}: {count} xruns on file, {last} reported committed"
        );
        let latest = history.xruns(&Filter::default(), 8).unwrap();
        assert_eq!(latest.last().unwrap().id, count, "round {round}");
        assert!(latest
            .iter()
            .all(|x| x.entry.card["pad"].as_str().unwrap().len() == 512));
        assert!(count > committed_before, "round {round}: nothing written");
        let max_id: i64 = history
            .connection()
            .query_row("SELECT MAX(id) FROM xruns", [], |r| r.get(0))
            .unwrap();
        assert_eq!(max_id, count, "round {round}: ids have no holes");
        // A transaction is all or nothing: only whole batches are on file.
        assert_eq!(count % batch as i64, 0, "round {round}: {count} xruns");
        // Every snapshot that is on file reads back whole.
        let snap = history.snapshot(1).unwrap().expect("xrun 1 has a snapshot");
        assert_eq!(snap.len(), 64 * 1024);
        committed_before = count;
        drop(history);
    }
}

#[test]
fn a_second_writer_process_is_refused_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("history.db");
    let mut child = Command::new(env!("CARGO_BIN_EXE_xrunlab-history-writer"))
        .arg(&db)
        .stdout(Stdio::piped())
        .spawn()
        .expect("the writer starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    lines.next().expect("a first commit").unwrap();
    let err = match History::open_writer(&db) {
        Ok(_) => panic!("a second writer was let in beside a running one"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains(&format!("another recorder (pid {})", child.id()))
            && err.contains("one recorder per history database"),
        "{err}"
    );
    // A reader is welcome meanwhile.
    let reader = History::open_reader(&db).unwrap();
    assert!(reader.count_xruns(&Filter::default()).unwrap() >= 1);
    // SAFETY: kill on our own child's pid, which has not been reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
    // Its lock died with it.
    History::open_writer(&db).expect("the lock goes with the process that held it");
}
