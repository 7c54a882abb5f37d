//! The dashboard command's access flags as a user runs them: `--token` sets the token that the
//! printed URL carries and the API needs, `--no-token` serves without one and warns; and the
//! binary's own signal handling: SIGINT, SIGTERM and SIGHUP each stop it cleanly; and the
//! history the History view reads: the recorder's default file, or `--history FILE`.

use crate::child::{piped, spawn_dashboard, stop_ok};
use crate::{scratch, xrunlab};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Child;
use std::time::Duration;

/// Starts `xrunlab dashboard` (light: 50 sines, no real time) with `extra` flags; returns the
/// process and the URL it printed.
fn start(extra: &[&str]) -> (Child, String) {
    let flags = [&["--sines", "50", "--no-rt"][..], extra].concat();
    spawn_dashboard(&flags)
}

/// Ctrl-C; returns what the process wrote to stderr, after checking it ended cleanly.
fn stop(child: Child) -> String {
    let out = stop_ok(child, libc::SIGINT, Duration::from_secs(20));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The status code of `GET path` on 127.0.0.1:`port` with these extra header lines.
fn status_of(port: u16, path: &str, headers: &str) -> u16 {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n{headers}\r\n"
    )
    .unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    reply
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status in {reply:?}"))
}

fn port_of(url: &str) -> u16 {
    let rest = url.strip_prefix("http://127.0.0.1:").unwrap();
    rest[..rest.find('/').unwrap()].parse().unwrap()
}

#[test]
fn a_given_token_is_in_the_printed_url_and_the_api_needs_it() {
    let (child, url) = start(&["--token", "cli-test.token_1~"]);
    let port = port_of(&url);
    assert_eq!(
        url,
        format!("http://127.0.0.1:{port}/?token=cli-test.token_1~")
    );
    assert_eq!(status_of(port, "/api/status", ""), 401);
    assert_eq!(
        status_of(
            port,
            "/api/status",
            "Authorization: Bearer cli-test.token_2~\r\n"
        ),
        401
    );
    assert_eq!(
        status_of(
            port,
            "/api/status",
            "Authorization: Bearer cli-test.token_1~\r\n"
        ),
        200
    );
    assert_eq!(status_of(port, "/?token=cli-test.token_1~", ""), 303);
    let stderr = stop(child);
    assert!(!stderr.contains("warning"), "{stderr}");
}

#[test]
fn no_token_serves_without_one_and_warns() {
    let (child, url) = start(&["--no-token"]);
    let port = port_of(&url);
    assert_eq!(url, format!("http://127.0.0.1:{port}/"));
    assert_eq!(status_of(port, "/api/status", ""), 200);
    let stderr = stop(child);
    assert!(
        stderr.contains("warning: the dashboard takes no token (--no-token)")
            && stderr.contains("any user or process on this machine"),
        "{stderr}"
    );
}

#[test]
fn sigterm_and_sighup_stop_the_dashboard_cleanly_saying_which() {
    // The binary owns the signals (the dash library takes its stop future): each one ends the
    // dashboard with status 0 and names itself.
    for (signal, name) in [(libc::SIGTERM, "SIGTERM"), (libc::SIGHUP, "SIGHUP")] {
        let (child, _url) = start(&["--no-token"]);
        let out = stop_ok(child, signal, Duration::from_secs(20));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!("xrunlab dashboard: {name} received, stopping")),
            "{stderr}"
        );
    }
}

/// The JSON body of `GET path` on 127.0.0.1:`port` (no token needed: started with --no-token).
fn json_of(port: u16, path: &str) -> serde_json::Value {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    let body = reply.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {reply}"))
}

/// The dashboard reads the history where the recorder writes it by default (here systemd's
/// `STATE_DIRECTORY`, which the default follows first), `--history FILE` names another, and a
/// missing one is said in the answer, not an error that stops the dashboard.
#[test]
fn the_dashboard_reads_the_recorders_default_history_or_the_one_named() {
    let dir = scratch("dashboard-history");
    let db = dir.join("history.db");
    {
        let h = xrunlab_history::History::open_writer(&db).unwrap();
        let now = xrunlab_history::unix_ns(std::time::SystemTime::now());
        let x = xrunlab_history::XrunEntry {
            time_ns: now - 60_000_000_000,
            server: "jack".into(),
            node: Some("synth".into()),
            kind: "node_ran_long".into(),
            root: "node".into(),
            culprit: None,
            summary: "\"synth\" ran long".into(),
            card: serde_json::json!({}),
        };
        h.insert_xrun(None, &x).unwrap();
    }
    let mut child = piped(
        xrunlab()
            .args([
                "dashboard",
                "--port",
                "0",
                "--sines",
                "50",
                "--no-rt",
                "--no-token",
            ])
            .env("STATE_DIRECTORY", &dir)
            .env_remove("XRUNLAB_TOKEN"),
    );
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = port_of(line.trim().strip_prefix("xrunlab dashboard: ").unwrap());
    let view = json_of(port, "/api/history?since=1h");
    stop(child);
    assert_eq!(view["available"], true, "{view}");
    assert_eq!(view["db"], db.to_str().unwrap());
    assert_eq!(view["xruns"][0]["node"], "synth");

    let missing = dir.join("elsewhere.db");
    let (child, url) = start(&["--no-token", "--history", missing.to_str().unwrap()]);
    let view = json_of(port_of(&url), "/api/history");
    assert_eq!(status_of(port_of(&url), "/api/status", ""), 200);
    stop(child);
    assert_eq!(view["available"], false, "{view}");
    assert!(
        view["why"]
            .as_str()
            .unwrap()
            .contains(&format!("no history at {}", missing.display())),
        "{view}"
    );
    assert!(!missing.exists(), "a reader creates nothing");
}
