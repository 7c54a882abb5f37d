//! Test support for the history's crash test (tests/kill.rs): opens the history given as its
//! first argument as the writer, then writes xruns (every fourth with a snapshot) as fast as it
//! can, printing `committed ID` after each commit, until it is killed; with a second argument
//! N, N xruns a transaction (the recorder's batches in a storm). Single-threaded.

use std::io::Write;
use xrunlab_history::{unix_ns, History, XrunEntry};

fn main() {
    let path = std::env::args_os()
        .nth(1)
        .expect("usage: xrunlab-history-writer DB");
    let history = match History::open_writer(std::path::Path::new(&path)) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(3);
        }
    };
    let session = history
        .begin_session(1, "pipewire", "test")
        .expect("a session");
    let stdout = std::io::stdout();
    let snapshot: Vec<u8> = (0..64 * 1024_u32).map(|i| (i * 7 % 251) as u8).collect();
    let batch: i64 = std::env::args()
        .nth(2)
        .map_or(1, |n| n.parse().expect("a batch size"));
    for n in 0_i64.. {
        if batch > 1 && n % batch == 0 {
            history.begin().expect("a transaction");
        }
        let entry = XrunEntry {
            // Wall time: later rounds of the test sort after earlier ones.
            time_ns: unix_ns(std::time::SystemTime::now()),
            server: "pipewire".into(),
            node: Some(format!("node-{}", n % 5)),
            kind: "node_ran_long".into(),
            root: "node".into(),
            culprit: Some(format!("node-{}", n % 5)),
            summary: format!("node-{} ran long", n % 5),
            card: serde_json::json!({ "n": n, "pad": "x".repeat(512) }),
        };
        let id = history
            .insert_xrun(Some(session), &entry)
            .expect("an insert");
        if n % 4 == 0 {
            history
                .insert_snapshot(id, "node", &snapshot)
                .expect("a snapshot");
        }
        if batch > 1 {
            if n % batch != batch - 1 {
                continue;
            }
            history.commit().expect("a commit");
        }
        let mut out = stdout.lock();
        writeln!(out, "committed {id}").expect("stdout");
        out.flush().expect("stdout");
    }
}
