//! The passive watch client against a real `jackd -d dummy`: it sees clients come and go and the
//! xruns a late client causes, without joining the graph; runs on the test thread.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};
use xrunlab_jack::{procs, JackEvent, JackWatch};
use xrunlab_jack_testkit::{late_client, take_turn, TestServer};

/// Kills the child when dropped, also when the test fails.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Events until `deadline`, or until `stop` says enough.
fn collect(
    rx: &Receiver<JackEvent>,
    within: Duration,
    stop: impl Fn(&[JackEvent]) -> bool,
) -> Vec<JackEvent> {
    let t0 = Instant::now();
    let mut seen = Vec::new();
    while t0.elapsed() < within && !stop(&seen) {
        if let Ok(e) = rx.recv_timeout(Duration::from_millis(50)) {
            seen.push(e);
        }
    }
    seen
}

#[test]
fn the_watch_client_sees_a_late_clients_xruns_without_joining_the_graph() {
    let _turn = take_turn();
    let server = TestServer::start("xwatch", 256);
    let (watch, rx) = JackWatch::open("xrunlab-watch", Some(server.name())).expect("watch opens");
    assert_eq!(watch.buffer_size(), 256);
    assert_eq!(watch.sample_rate(), 48_000);
    assert_eq!(
        watch.clients(),
        vec!["system".to_owned()],
        "only the driver's ports before a client comes"
    );
    // Read-only: the watching client owns no port, so no other client can see or connect to it.
    let ports = server.tool("jack_lsp", &[]);
    assert!(
        !ports.contains("xrunlab-watch"),
        "the watch client registered ports:\n{ports}"
    );

    // Every 40th cycle (about 5 per second at 256 frames), 8 ms of busy work: past the 5.3 ms quantum.
    let mut child = Command::new(late_client())
        .args(["late", "40", "8000", "30"])
        .env("JACK_DEFAULT_SERVER", server.name())
        .stdout(Stdio::piped())
        .spawn()
        .expect("late client starts");
    let stdout = child.stdout.take().expect("piped");
    let late_pid = child.id() as i32;
    let _child = Reaped(child);
    let (late_tx, late_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(ns) = line.strip_prefix("late ") {
                let _ = late_tx.send(ns.parse::<u64>().expect("late NS"));
            }
        }
    });

    let changed = collect(&rx, Duration::from_secs(5), |seen| {
        seen.contains(&JackEvent::GraphChanged)
    });
    assert!(
        changed.contains(&JackEvent::GraphChanged),
        "no graph change when a client came: {changed:?}"
    );
    // The graph changes as the client opens, before its port exists: poll the list.
    let t0 = Instant::now();
    while !watch.clients().contains(&"late".to_owned()) {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "clients: {:?}",
            watch.clients()
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    // Who is who, from procfs: the server by its listening socket, the client by its futex files.
    let proc_root = std::path::Path::new("/proc");
    let served_by = procs::find_server(proc_root, server.name()).expect("the server's process");
    assert_eq!(served_by.pid, server.pid());
    let users = procs::client_processes(
        proc_root,
        server.name(),
        &[std::process::id() as i32, served_by.pid],
    );
    let pids: Vec<i32> = users.iter().map(|(p, _)| p.pid).collect();
    assert_eq!(
        pids,
        vec![late_pid],
        "client processes of the server (the watcher excluded)"
    );
    let paired = procs::match_clients(&watch.clients(), &users);
    assert_eq!(
        paired.get("late").map(|m| m.0),
        Some(late_pid),
        "{paired:?}"
    );

    let events = collect(&rx, Duration::from_secs(3), |_| false);
    let xruns: Vec<u64> = events
        .iter()
        .filter_map(|e| match e {
            JackEvent::Xrun { at_ns } => Some(*at_ns),
            _ => None,
        })
        .collect();
    let induced: Vec<u64> = late_rx.try_iter().collect();
    assert!(
        induced.len() >= 3,
        "the late client ran long only {} times",
        induced.len()
    );
    // Each induced overrun is followed by an xrun notification; a generous bound, since the
    // notification thread is not real-time on a shared machine.
    let last_xrun = xruns.last().copied().unwrap_or(0);
    for &late in induced.iter().filter(|&&ns| ns + 1_000_000_000 < last_xrun) {
        assert!(
            xruns.iter().any(|&x| x >= late && x < late + 1_000_000_000),
            "the overrun at {late} ns brought no xrun within 1 s; xruns: {xruns:?}"
        );
    }

    drop(_child);
    server.kill();
    let gone = collect(&rx, Duration::from_secs(5), |seen| {
        seen.iter().any(|e| matches!(e, JackEvent::Shutdown { .. }))
    });
    assert!(
        gone.iter().any(|e| matches!(e, JackEvent::Shutdown { .. })),
        "no shutdown after the server was killed: {gone:?}"
    );
}

#[test]
fn no_server_is_a_clear_error() {
    let _turn = take_turn();
    let err = match JackWatch::open("xrunlab-watch", Some("xrunlab-watch-nobody")) {
        Ok(_) => panic!("a watch client opened on a server that does not exist"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("no JACK server is running"), "{err}");
}
