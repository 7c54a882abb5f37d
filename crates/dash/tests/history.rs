//! Black-box tests of the History view's routes over real sockets, on real SQLite files written
//! through the history's own writer: the token and the same-origin guard, a span filtered by
//! node, culprit and kind and cut at a limit, one xrun's whole card, bad parameters (400 saying
//! what is allowed), a missing file (the view says how to record, the dashboard goes on), and
//! the answers against the page's types. Each test runs a server on its own tokio runtime.

mod page_types;

use serde_json::Value;
use std::path::Path;
use std::time::{Duration, SystemTime};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use xrunlab_dash::{start, Access, DashOptions, DeviceFactory, FactoryError, Running, Token};
use xrunlab_engine::device::sim::SimDevice;
use xrunlab_engine::{Device, Engine, EngineConfig};
use xrunlab_history::{unix_ns, DriftEntry, History, XrunEntry};

const TOKEN: &str = "history-test-token_0123456789";
const MIN: i64 = 60_000_000_000;

async fn serve(history: Option<&Path>) -> Running {
    let mut c = EngineConfig {
        sines: 20,
        ..EngineConfig::default()
    };
    c.rt.priority = None;
    let engine = Engine::start(
        c.clone(),
        Box::new(SimDevice::new(c.sample_rate, c.buffer_frames, false)),
    )
    .unwrap();
    let factory: DeviceFactory = Box::new(|kind: &str, c: &EngineConfig| match kind {
        "sim" => Ok(
            Box::new(SimDevice::new(c.sample_rate, c.buffer_frames, c.input)) as Box<dyn Device>,
        ),
        other => Err(FactoryError::unknown_kind(other, &["sim"])),
    });
    let opts = DashOptions {
        access: Access::Token(Token::new(TOKEN).unwrap()),
        history: history.map(Path::to_path_buf),
        ..DashOptions::default()
    };
    start(opts, engine, factory, vec!["sim".into()])
        .await
        .unwrap()
}

/// `GET path` with these headers (Host is added); returns the status and the body.
async fn get_with(port: u16, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut out))
        .await
        .unwrap()
        .unwrap();
    let text = String::from_utf8_lossy(&out).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap();
    (status, body.to_owned())
}

/// `GET path` with the token; the status and the JSON body.
async fn get(port: u16, path: &str) -> (u16, Value) {
    let bearer = format!("Bearer {TOKEN}");
    let (status, body) = get_with(port, path, &[("Authorization", &bearer)]).await;
    let json = serde_json::from_str(&body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"));
    (status, json)
}

fn xrun(t: i64, node: &str, kind: &str, culprit: Option<&str>) -> XrunEntry {
    XrunEntry {
        time_ns: t,
        server: "pipewire".into(),
        node: Some(node.into()),
        kind: kind.into(),
        root: "node".into(),
        culprit: culprit.map(Into::into),
        summary: format!("xrun: \"{node}\" {kind}"),
        card: serde_json::json!({ "kind": kind, "drift_before": ["after: a change"] }),
    }
}

/// A history of the last hour: four xruns (one with a snapshot, one of a node named like a
/// script), two drift events, and a gap; returns the ids of the xruns, oldest first.
fn fill(db: &Path) -> Vec<i64> {
    let now = unix_ns(SystemTime::now());
    let h = History::open_writer(db).unwrap();
    let s = h.begin_session(now - 60 * MIN, "pipewire", "test").unwrap();
    let ids = vec![
        h.insert_xrun(
            Some(s),
            &xrun(now - 50 * MIN, "synth", "node_ran_long", Some("synth")),
        )
        .unwrap(),
        h.insert_xrun(
            Some(s),
            &xrun(now - 40 * MIN, "synth", "driver_woke_late", Some("busyhog")),
        )
        .unwrap(),
        h.insert_xrun(
            Some(s),
            &xrun(
                now - 20 * MIN,
                "<script>alert(1)</script>",
                "node_ran_long",
                None,
            ),
        )
        .unwrap(),
        h.insert_xrun(
            Some(s),
            &xrun(
                now - 10 * MIN,
                "reverb",
                "node_woke_late",
                Some("irq 24 xhci_hcd"),
            ),
        )
        .unwrap(),
    ];
    h.insert_snapshot(ids[0], "node", b"a perfetto trace")
        .unwrap();
    for (t, words) in [(55, "the governor became powersave"), (15, "resume")] {
        h.insert_drift(
            Some(s),
            &DriftEntry {
                time_ns: now - t * MIN,
                kind: "governor".into(),
                subject: "policy0".into(),
                before: "performance".into(),
                after: "powersave".into(),
                words: words.into(),
            },
        )
        .unwrap();
    }
    h.open_gap(s, now - 35 * MIN, "the server went away")
        .unwrap();
    h.close_gap(s, now - 30 * MIN).unwrap();
    ids
}

fn times(v: &Value) -> Vec<String> {
    v["xruns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["node"].as_str().unwrap_or("").to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_history_routes_sit_behind_the_token_and_the_origin_guard() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("history.db");
    let ids = fill(&db);
    let running = serve(Some(&db)).await;
    let port = running.local_addr().port();
    let card = format!("/api/history/xruns/{}", ids[0]);
    for path in ["/api/history", "/api/history?node=synth", card.as_str()] {
        let (status, body) = get_with(port, path, &[]).await;
        assert_eq!(status, 401, "{path} without a token: {body}");
        assert!(!body.contains("synth"), "{body}");
        let bearer = format!("Bearer {TOKEN}");
        let (status, body) = get_with(
            port,
            path,
            &[
                ("Authorization", &bearer),
                ("Origin", "http://evil.example"),
            ],
        )
        .await;
        assert_eq!(status, 403, "{path} from another site: {body}");
        assert_eq!(get(port, path).await.0, 200, "{path} with the token");
    }
    running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_history_is_listed_filtered_cut_and_its_cards_read() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("history.db");
    let ids = fill(&db);
    let running = serve(Some(&db)).await;
    let port = running.local_addr().port();

    let (status, all) = get(port, "/api/history").await;
    assert_eq!(status, 200, "{all}");
    assert_eq!(all["available"], true);
    assert_eq!(all["db"], db.to_string_lossy().as_ref());
    assert_eq!(all["matching"], 4);
    assert_eq!(all["truncated"], false);
    assert_eq!(
        times(&all),
        ["synth", "synth", "<script>alert(1)</script>", "reverb"]
    );
    let first = &all["xruns"][0];
    assert_eq!(first["id"], ids[0]);
    assert_eq!(first["has_snapshot"], true);
    assert_eq!(first["kind"], "node_ran_long");
    assert_eq!(first["summary"], "xrun: \"synth\" node_ran_long");
    assert!(first.get("card").is_none(), "the list carries no cards");
    assert_eq!(all["drift"].as_array().unwrap().len(), 2);
    assert_eq!(all["drift"][1]["words"], "resume");
    let gaps = all["gaps"].as_array().unwrap();
    assert_eq!(gaps.len(), 1, "{gaps:?}");
    assert_eq!(gaps[0]["reason"], "the server went away");
    assert_eq!(gaps[0]["server"], "pipewire");
    assert_eq!(all["facets"]["nodes"][0]["value"], "synth");
    assert_eq!(all["facets"]["nodes"][0]["xruns"], 2);
    assert_eq!(all["facets"]["kinds"].as_array().unwrap().len(), 3);

    // Filters narrow the xruns; the facets stay those of the span, to choose others from.
    let (_, synth) = get(port, "/api/history?node=synth").await;
    assert_eq!(times(&synth), ["synth", "synth"]);
    assert_eq!(synth["facets"], all["facets"]);
    let (_, hog) = get(port, "/api/history?culprit=busyhog&kind=driver_woke_late").await;
    assert_eq!(hog["matching"], 1);
    assert_eq!(hog["xruns"][0]["id"], ids[1]);
    let (_, script) = get(
        port,
        "/api/history?node=%3Cscript%3Ealert(1)%3C%2Fscript%3E",
    )
    .await;
    assert_eq!(script["matching"], 1, "a name is taken percent-decoded");
    let (_, none) = get(port, "/api/history?kind=interrupt_late").await;
    assert_eq!(none["matching"], 0);
    assert_eq!(none["xruns"], serde_json::json!([]));

    // A span back from now: the last 30 minutes hold two xruns, one drift event, no gap start.
    let (_, recent) = get(port, "/api/history?since=30m").await;
    assert_eq!(recent["matching"], 2);
    assert_eq!(recent["drift"].as_array().unwrap().len(), 1);
    assert!(recent["since_ns"].as_i64().unwrap() < recent["now_ns"].as_i64().unwrap());
    assert_eq!(recent["facets"]["nodes"].as_array().unwrap().len(), 2);
    let (_, early) = get(port, "/api/history?since=2h&until=45m").await;
    assert_eq!(times(&early), ["synth"]);
    assert_eq!(early["gaps"], serde_json::json!([]), "the gap is later");

    // Cut: the latest rows, and the answer says so.
    let (_, cut) = get(port, "/api/history?limit=2").await;
    assert_eq!(cut["matching"], 4);
    assert_eq!(cut["truncated"], true);
    assert_eq!(cut["drift_truncated"], false);
    assert_eq!(times(&cut), ["<script>alert(1)</script>", "reverb"]);
    let (_, one) = get(port, "/api/history?limit=1").await;
    assert_eq!(one["drift"].as_array().unwrap().len(), 1);
    assert_eq!(
        (
            one["drift_matching"].clone(),
            one["drift_truncated"].clone()
        ),
        (2.into(), true.into())
    );

    // One xrun with its whole card.
    let (status, card) = get(port, &format!("/api/history/xruns/{}", ids[0])).await;
    assert_eq!(status, 200, "{card}");
    assert_eq!(card["id"], ids[0]);
    assert_eq!(card["node"], "synth");
    assert_eq!(card["has_snapshot"], true);
    assert_eq!(card["card"]["drift_before"][0], "after: a change");
    let (status, gone) = get(port, "/api/history/xruns/999999").await;
    assert_eq!(status, 404, "{gone}");
    assert!(gone["error"]
        .as_str()
        .unwrap()
        .contains("trimmed by retention"));
    running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_parameters_are_400_saying_what_is_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("history.db");
    fill(&db);
    let running = serve(Some(&db)).await;
    let port = running.local_addr().port();
    let cases = [
        ("/api/history?since=yesterday", "30m, 1h, 2d"),
        ("/api/history?until=tomorrow", "UTC time"),
        ("/api/history?since=1h&until=2h", "the span is empty"),
        ("/api/history?limit=0", "1..=2000"),
        ("/api/history?limit=5000", "1..=2000"),
        (
            "/api/history?nodes=synth",
            "takes since, until, node, culprit, kind, limit",
        ),
        ("/api/history?node=a&node=b", "given twice"),
        ("/api/history/xruns/abc", "a whole number from 1"),
        ("/api/history/xruns/0", "a whole number from 1"),
        ("/api/history/xruns/-3", "a whole number from 1"),
    ];
    for (path, says) in cases {
        let (status, body) = get(port, path).await;
        assert_eq!(status, 400, "{path}: {body}");
        let error = body["error"].as_str().unwrap();
        assert!(error.contains(says), "{path}: {error}");
    }
    let (_, body) = get(port, "/api/history?since=yesterday").await;
    assert_eq!(body["field"], "since");
    assert_eq!(body["value"], "yesterday");
    // The dashboard goes on.
    assert_eq!(get(port, "/api/history").await.0, 200);
    running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_history_says_how_to_record_and_the_dashboard_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("none").join("history.db");
    let running = serve(Some(&db)).await;
    let port = running.local_addr().port();
    let (status, view) = get(port, "/api/history?since=1h").await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["available"], false);
    assert!(view["why"]
        .as_str()
        .unwrap()
        .contains(&format!("no history at {}", db.display())));
    assert!(view["how"].as_str().unwrap().contains("xrunlab record"));
    let (status, card) = get(port, "/api/history/xruns/1").await;
    assert_eq!(status, 404, "{card}");
    assert!(card["error"].as_str().unwrap().contains("xrunlab record"));
    assert!(
        !db.exists() && !db.parent().unwrap().exists(),
        "nothing created"
    );
    // Bad parameters are still bad without a file.
    assert_eq!(get(port, "/api/history?limit=0").await.0, 400);
    // The recorder starts later: the next read finds its file.
    fill(&db);
    let (_, view) = get(port, "/api/history").await;
    assert_eq!(view["available"], true);
    assert_eq!(view["matching"], 4);
    assert_eq!(
        get(port, "/api/config").await.0,
        200,
        "the dashboard goes on"
    );
    running.shutdown().await.unwrap();

    // No file named at all (no HOME for a default): said, not failed.
    let running = serve(None).await;
    let (status, view) = get(running.local_addr().port(), "/api/history").await;
    assert_eq!(status, 200);
    assert_eq!(view["available"], false);
    assert!(view["why"].as_str().unwrap().contains("--history FILE"));
    running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_history_answers_match_the_page_types() {
    let defs = page_types::Typedefs::parse(include_str!("../static/types.js"));
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("history.db");
    let ids = fill(&db);
    let running = serve(Some(&db)).await;
    let port = running.local_addr().port();
    let missing = serve(Some(&dir.path().join("none.db"))).await;
    let samples = [
        ("HistoryAnswer", get(port, "/api/history").await.1),
        ("HistoryAnswer", get(port, "/api/history?since=1m").await.1),
        (
            "HistoryAnswer",
            get(missing.local_addr().port(), "/api/history").await.1,
        ),
        (
            "HistoryXrun",
            get(port, &format!("/api/history/xruns/{}", ids[2])).await.1,
        ),
        ("ApiErrorBody", get(port, "/api/history?limit=0").await.1),
    ];
    let mut errors = Vec::new();
    for (name, value) in &samples {
        errors.extend(defs.check(name, value));
    }
    assert!(
        errors.is_empty(),
        "static/types.js is out of step with the history routes:\n{}",
        errors.join("\n")
    );
    running.shutdown().await.unwrap();
    missing.shutdown().await.unwrap();
}
