//! Black-box tests of the dashboard server over real sockets: the same-origin guard and the access
//! token (HTTP and WebSocket), API validation with nothing partially applied, telemetry frames, and
//! the end of `Running` when the device fails. Each test runs a server on its own tokio runtime.

use futures_util::StreamExt;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::handshake::client::Request;
use tokio_tungstenite::tungstenite::http::{HeaderName, HeaderValue};
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use xrunlab_dash::{
    start, Access, DashError, DashOptions, DeviceFactory, FactoryError, Running, Token,
};
use xrunlab_engine::device::sim::SimDevice;
use xrunlab_engine::{
    Device, DeviceError, DeviceInfo, DeviceSignals, Engine, EngineConfig, Renderer,
};

mod page_types;

macro_rules! token {
    () => {
        "server-test-token_0123456789"
    };
}
/// The token the test servers take (most tests are not about tokens; they send it as Bearer).
const TOKEN: &str = token!();
const AUTH: (&str, &str) = ("Authorization", concat!("Bearer ", token!()));

/// Options for a test server: loopback, a free port, the test token.
fn options() -> DashOptions {
    DashOptions {
        access: Access::Token(Token::new(TOKEN).unwrap()),
        ..DashOptions::default()
    }
}

/// A light config: the tests share a small machine with other work.
fn config() -> EngineConfig {
    let mut c = EngineConfig {
        sines: 50,
        ..EngineConfig::default()
    };
    c.rt.priority = None;
    c
}

fn sim_factory() -> DeviceFactory {
    Box::new(|kind: &str, c: &EngineConfig| match kind {
        "sim" => Ok(
            Box::new(SimDevice::new(c.sample_rate, c.buffer_frames, c.input)) as Box<dyn Device>,
        ),
        other => Err(FactoryError::unknown_kind(other, &["sim"])),
    })
}

async fn serve_sim() -> Running {
    serve_sim_with(options()).await
}

async fn serve_sim_with(opts: DashOptions) -> Running {
    let c = config();
    let engine = Engine::start(
        c.clone(),
        Box::new(SimDevice::new(c.sample_rate, c.buffer_frames, false)),
    )
    .unwrap();
    start(opts, engine, sim_factory(), vec!["sim".into()])
        .await
        .unwrap()
}

/// A response: status, head (status line and headers) and body.
struct Reply {
    status: u16,
    head: String,
    body: String,
}

impl Reply {
    /// The value of the first header called `name`.
    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case(name).then_some(v.trim())
        })
    }
}

/// One HTTP/1.1 request with the test token as Bearer; returns (status, body).
async fn request(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let mut with_token = headers.to_vec();
    with_token.push(AUTH);
    let r = send(port, method, path, &with_token, body).await;
    (r.status, r.body)
}

/// One HTTP/1.1 request over a fresh connection with exactly these headers (and Host, unless
/// given).
async fn send(port: u16, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Reply {
    let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req.push_str(&format!("Host: 127.0.0.1:{port}\r\n"));
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut out))
        .await
        .unwrap()
        .unwrap();
    let split = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(out.len(), |i| i + 4);
    let head = String::from_utf8_lossy(&out[..split]).trim_end().to_owned();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    let body = if chunked {
        dechunk(&out[split..])
    } else {
        out[split..].to_vec()
    };
    Reply {
        status,
        head,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

/// The body of a chunked HTTP/1.1 response (sizes in hex, each chunk followed by CRLF, a zero
/// size at the end); panics on a body that stops early, which is what a broken stream is.
fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    loop {
        let line_end = raw
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("a chunk size line");
        let size_text = std::str::from_utf8(&raw[..line_end]).unwrap();
        let size = usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16)
            .unwrap_or_else(|e| panic!("chunk size {size_text:?}: {e}"));
        raw = &raw[line_end + 2..];
        if size == 0 {
            return body;
        }
        assert!(raw.len() >= size + 2, "the body stopped inside a chunk");
        body.extend_from_slice(&raw[..size]);
        raw = &raw[size + 2..];
    }
}

/// PUT /api/config with `body` (and the test token); returns (status, body).
async fn put_config(port: u16, body: &str) -> (u16, String) {
    request(port, "PUT", "/api/config", &[], body).await
}

/// Makes the engine stall `stall_ms` every `every_ms` (PUT /api/fault), checking it took it.
async fn inject_stalls(port: u16, stall_ms: u32, every_ms: u32) {
    let fault = format!(r#"{{"stall_ms": {stall_ms}, "every_ms": {every_ms}}}"#);
    let (status, body) = request(port, "PUT", "/api/fault", &[], &fault).await;
    assert_eq!(status, 200, "{body}");
}

fn json_of(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

async fn get_config(port: u16) -> Value {
    let (status, body) = request(port, "GET", "/api/config", &[], "").await;
    assert_eq!(status, 200, "{body}");
    json_of(&body)
}

/// A client's end of the dashboard's WebSocket.
type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// The `/ws` upgrade request with these extra headers (Origin, Authorization, Cookie).
fn ws_request(port: u16, headers: &[(&str, &str)]) -> Request {
    let mut req = format!("ws://127.0.0.1:{port}/ws")
        .into_client_request()
        .unwrap();
    for (k, v) in headers {
        req.headers_mut().append(
            HeaderName::from_bytes(k.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    req
}

/// Opens a WebSocket with these extra headers; returns the handshake's status code and, when
/// the server switched protocols, the socket (for reading frames).
async fn ws_handshake(port: u16, headers: &[(&str, &str)]) -> (u16, Option<Ws>) {
    match tokio_tungstenite::connect_async(ws_request(port, headers)).await {
        Ok((ws, reply)) => (reply.status().as_u16(), Some(ws)),
        Err(WsError::Http(reply)) => (reply.status().as_u16(), None),
        Err(e) => panic!("WebSocket handshake on port {port} failed: {e}"),
    }
}

/// A WebSocket upgrade's status (the socket is dropped).
async fn ws_status(port: u16, headers: &[(&str, &str)]) -> u16 {
    ws_handshake(port, headers).await.0
}

/// Opens a WebSocket with these extra headers, checking the server accepted it (101).
async fn ws_open(port: u16, headers: &[(&str, &str)]) -> Ws {
    match ws_handshake(port, headers).await {
        (101, Some(ws)) => ws,
        (status, _) => panic!("WebSocket with {headers:?}: status {status}, not 101"),
    }
}

/// Reads the next message, which must be a server text frame.
async fn ws_text(ws: &mut Ws) -> String {
    let next = tokio::time::timeout(Duration::from_secs(20), ws.next())
        .await
        .expect("a frame within 20 s");
    match next {
        Some(Ok(Message::Text(text))) => text.to_string(),
        other => panic!("not a text frame: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_origins_and_hosts_are_refused() {
    let running = serve_sim().await;
    let port = running.local_addr().port();
    let own = format!("http://127.0.0.1:{port}");
    let before = get_config(port).await;

    let (status, body) = request(
        port,
        "PUT",
        "/api/config",
        &[("Origin", "http://evil.example")],
        r#"{"sines": 7}"#,
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert!(json_of(&body)["error"].as_str().unwrap().contains("Origin"));
    let (status, _) = request(port, "POST", "/api/burst", &[("Origin", "null")], "").await;
    assert_eq!(status, 403);
    // DNS rebinding: the attacker's name now resolves to 127.0.0.1, so Host carries it.
    let rebind = format!("rebind.example:{port}");
    let (status, _) = request(port, "GET", "/api/status", &[("Host", &rebind)], "").await;
    assert_eq!(status, 403);
    let (status, _) = request(port, "GET", "/", &[("Host", &rebind)], "").await;
    assert_eq!(status, 403);
    let (status, _) = request(port, "GET", "/api/trace", &[("Host", &rebind)], "").await;
    assert_eq!(
        status, 403,
        "the trace download is guarded like every route"
    );
    let (status, _) = request(
        port,
        "GET",
        "/api/trace",
        &[("Origin", "http://evil.example")],
        "",
    )
    .await;
    assert_eq!(status, 403);
    assert_eq!(
        get_config(port).await,
        before,
        "a refused request changed nothing"
    );

    let status = ws_status(port, &[("Origin", "http://evil.example"), AUTH]).await;
    assert_eq!(status, 403, "the token does not let a foreign page in");
    let other_port = format!("http://127.0.0.1:{}", port + 1);
    let status = ws_status(port, &[("Origin", &other_port), AUTH]).await;
    assert_eq!(status, 403);
    // Without the token a foreign page still gets 403: the guard answers before the token check.
    let r = send(port, "POST", "/api/burst", &[("Origin", "null")], "").await;
    assert_eq!(r.status, 403, "{}", r.body);

    let mut ws = ws_open(port, &[("Origin", &own), AUTH]).await;
    let frame = json_of(&ws_text(&mut ws).await);
    assert_eq!(frame["type"], "frame");
    assert!(frame["counts"]["buffers"].as_u64().is_some());
    // Scripts send no Origin; they are allowed (with the token).
    let status = ws_status(port, &[AUTH]).await;
    assert_eq!(status, 101);
    let (status, body) = request(
        port,
        "PUT",
        "/api/config",
        &[("Origin", &own)],
        r#"{"sines": 60}"#,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, page) = request(
        port,
        "GET",
        "/",
        &[("Host", &format!("localhost:{port}"))],
        "",
    )
    .await;
    assert_eq!(status, 200);
    assert!(page.contains("xrunlab"));
    running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_validates_and_applies_whole_configs() {
    let running = serve_sim().await;
    let port = running.local_addr().port();
    let before = get_config(port).await;
    assert_eq!(before["preset"], "standard");
    assert_eq!(before["device"], "sim");

    // Out of range: 422 naming the field and range; the valid part of the request is not applied.
    let (status, body) = put_config(port, r#"{"sines": 77, "busy": {"count": 9}}"#).await;
    assert_eq!(status, 422, "{body}");
    let e = json_of(&body);
    assert_eq!(
        (
            e["field"].as_str(),
            e["path"].as_str(),
            e["allowed"].as_str()
        ),
        (Some("busy_threads"), Some("busy.count"), Some("0..=4"))
    );
    assert_eq!(get_config(port).await["sines"], before["sines"]);

    for (patch, path) in [
        (json!({"rt": {"priority": 100}}), "rt.priority"),
        (json!({"min_load_pct": -1}), "min_load_pct"),
        (json!({"threads": 0}), "threads"),
        (json!({"sines": "lots"}), "sines"),
        (json!({"device": "jack"}), "device"),
    ] {
        let (status, body) = put_config(port, &patch.to_string()).await;
        assert_eq!(status, 422, "{patch}: {body}");
        assert_eq!(json_of(&body)["path"], path, "{body}");
    }
    let (status, body) = put_config(port, r#"{"sinez": 3}"#).await;
    assert_eq!(status, 400, "{body}");
    let (status, _) = put_config(port, "not json").await;
    assert_eq!(status, 400);

    // Live change, then a preset (a restart: the driver mode changes).
    let (status, body) = put_config(port, r#"{"sines": 80, "min_load_pct": 5}"#).await;
    assert_eq!(status, 200, "{body}");
    let r = json_of(&body);
    assert_eq!(
        (
            r["sines"].as_u64(),
            r["restarted"].as_bool(),
            r["preset"].as_str()
        ),
        (Some(80), Some(false), Some("custom"))
    );
    let (status, body) = put_config(port, r#"{"preset": "optimal"}"#).await;
    assert_eq!(status, 200, "{body}");
    let r = json_of(&body);
    assert_eq!(
        (r["preset"].as_str(), r["restarted"].as_bool()),
        (Some("optimal"), Some(true))
    );
    let status_body = request(port, "GET", "/api/status", &[], "").await.1;
    let s = json_of(&status_body);
    assert_eq!(
        s["threads"].as_array().unwrap().len(),
        3,
        "optimal: driver + 2 workers"
    );
    assert_eq!(s["busy_threads"], 1);
    assert!(s["threads"][0]["sched"]["uclamp"]["status"].is_string());
    assert!(s["power"]["source"].is_string());

    // Toggling input makes the device anew, and the input meter gets a signal.
    let (status, body) = put_config(port, r#"{"input": true}"#).await;
    assert_eq!(status, 200, "{body}");
    let mut ws = ws_open(port, &[AUTH]).await;
    let mut peak = None;
    for _ in 0..30 {
        let f = json_of(&ws_text(&mut ws).await);
        if let Some(p) = f["input_peak"].as_f64() {
            peak = Some(p);
            break;
        }
    }
    assert!(peak.is_some_and(|p| p > 0.1), "input peak {peak:?}");

    let (status, body) = request(port, "POST", "/api/burst", &[], "").await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = request(port, "PUT", "/api/fault", &[], r#"{"stall_ms": 5000}"#).await;
    assert_eq!(
        (status, json_of(&body)["path"].as_str()),
        (422, Some("stall_ms"))
    );
    let (status, _) = request(port, "GET", "/api/nothing", &[], "").await;
    assert_eq!(status, 404);
    running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn injected_stalls_count_as_dropouts() {
    let running = serve_sim().await;
    let port = running.local_addr().port();
    inject_stalls(port, 8, 100).await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    let s = json_of(&request(port, "GET", "/api/status", &[], "").await.1);
    assert!(
        s["counts"]["dropouts"].as_u64().unwrap() >= 3,
        "{}",
        s["counts"]
    );
    assert!(
        s["counts"]["skipped_periods"].as_u64().unwrap() >= 3,
        "{}",
        s["counts"]
    );
    running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_that_stops_reading_loses_frames_and_the_engine_goes_on() {
    let running = serve_sim().await;
    let port = running.local_addr().port();
    // A tiny receive window: the server's sends soon wait on this page, as on a frozen tab.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(1024).unwrap();
    let stream = socket.connect(([127, 0, 0, 1], port).into()).await.unwrap();
    let (ws, reply) = tokio_tungstenite::client_async(ws_request(port, &[AUTH]), stream)
        .await
        .unwrap();
    assert_eq!(reply.status().as_u16(), 101);
    let counts = |body: String| json_of(&body)["counts"].clone();
    let before = counts(request(port, "GET", "/api/status", &[], "").await.1);
    let mut after = before.clone();
    // Frames are ~1-2 kB at 30 a second; the kernel's socket buffers take a while to fill.
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        after = counts(request(port, "GET", "/api/status", &[], "").await.1);
        if after["frames_dropped"].as_u64() > Some(0) {
            break;
        }
    }
    assert!(after["frames_dropped"].as_u64() > Some(0), "{after}");
    // Meanwhile every period was drained and counted: ~375 per second at 128 frames,
    // 48 kHz, rendered or (on a loaded machine) skipped after a late render.
    let delta = |k: &str| after[k].as_u64().unwrap() - before[k].as_u64().unwrap();
    let (buffers, skipped, frames) = (delta("buffers"), delta("skipped_periods"), delta("frames"));
    assert!(
        (buffers + skipped) as f64 > frames as f64 * 12.5 * 0.8,
        "{buffers} buffers and {skipped} skipped periods in {frames} frames"
    );
    drop(ws);
    running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_that_cannot_start_leaves_the_old_one_running() {
    let c = config();
    let engine = Engine::start(
        c.clone(),
        Box::new(SimDevice::new(c.sample_rate, c.buffer_frames, false)),
    )
    .unwrap();
    let factory: DeviceFactory = Box::new(|kind: &str, c: &EngineConfig| match kind {
        "sim" => Ok(
            Box::new(SimDevice::new(c.sample_rate, c.buffer_frames, c.input)) as Box<dyn Device>,
        ),
        _ => Err(DeviceError::new(
            xrunlab_engine::DeviceErrorKind::Unavailable,
            "no such hardware here",
        )
        .into()),
    });
    let running = start(
        options(),
        engine,
        factory,
        vec!["sim".into(), "broken".into()],
    )
    .await
    .unwrap();
    let port = running.local_addr().port();
    let (status, body) = put_config(port, r#"{"device": "broken", "sines": 70}"#).await;
    assert_eq!(status, 503, "{body}");
    let error = json_of(&body)["error"].as_str().unwrap().to_owned();
    assert!(
        error.contains("no such hardware here") && error.contains("still on the sim device"),
        "{error}"
    );
    let config = get_config(port).await;
    assert_eq!(
        (config["device"].as_str(), config["sines"].as_u64()),
        (Some("sim"), Some(50))
    );
    let buffers = |body: String| json_of(&body)["counts"]["buffers"].as_u64().unwrap();
    let before = buffers(request(port, "GET", "/api/status", &[], "").await.1);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        buffers(request(port, "GET", "/api/status", &[], "").await.1) > before + 50,
        "audio runs again"
    );
    running.shutdown().await.unwrap();
}

/// A device that fails shortly after it starts, like a JACK server going away.
struct FailingDevice {
    stop: Arc<AtomicBool>,
}

impl Device for FailingDevice {
    fn info(&self) -> DeviceInfo {
        DeviceInfo {
            kind: "failing".into(),
            name: "test device".into(),
            sample_rate: 48_000,
            buffer_frames: 128,
            can_set_sample_rate: false,
            can_set_buffer: false,
            driver_thread: "none".into(),
            driver_thread_is_ours: false,
            notes: vec![],
        }
    }
    fn configure(&mut self, _: u32, _: u32) -> Result<DeviceInfo, DeviceError> {
        Ok(self.info())
    }
    fn start(
        &mut self,
        renderer: Renderer,
        signals: Arc<DeviceSignals>,
    ) -> Result<(), DeviceError> {
        let stop = self.stop.clone();
        std::thread::spawn(move || {
            let _renderer = renderer;
            std::thread::sleep(Duration::from_millis(200));
            if !stop.load(Ordering::Acquire) {
                signals.fail("the test server went away");
            }
        });
        Ok(())
    }
    fn stop(&mut self) {
        self.stop.store(true, Ordering::Release);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_device_ends_the_dashboard_with_its_reason() {
    let engine = Engine::start(
        config(),
        Box::new(FailingDevice {
            stop: Arc::new(AtomicBool::new(false)),
        }),
    )
    .unwrap();
    let running = start(
        DashOptions::default(),
        engine,
        sim_factory(),
        vec!["sim".into()],
    )
    .await
    .unwrap();
    let result = tokio::time::timeout(
        Duration::from_secs(10),
        running.run_until(std::future::pending()),
    )
    .await
    .unwrap();
    assert!(
        matches!(&result, Err(DashError::Device(why)) if why == "the test server went away"),
        "{result:?}"
    );
}

/// The signals this process catches, from /proc/self/status (bit `n - 1` for signal `n`).
fn caught_signals() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let mask = status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .expect("SigCgt in /proc/self/status");
    u64::from_str_radix(mask.trim(), 16).unwrap()
}

#[test]
fn serve_stops_when_the_callers_stop_future_completes_and_installs_no_signal_handler() {
    let c = config();
    let engine = Engine::start(
        c.clone(),
        Box::new(SimDevice::new(c.sample_rate, c.buffer_frames, false)),
    )
    .unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let stop = async move {
            let _ = stop_rx.await;
        };
        let result =
            xrunlab_dash::serve(options(), engine, sim_factory(), vec!["sim".into()], stop);
        let _ = done_tx.send(result);
    });
    // Still serving while the caller has not said stop.
    assert!(done_rx.recv_timeout(Duration::from_millis(500)).is_err());
    stop_tx.send(()).unwrap();
    let result = done_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("serve returns once the caller's stop future completes");
    assert!(result.is_ok(), "{result:?}");
    let signals = caught_signals();
    for (signal, name) in [(1, "SIGHUP"), (2, "SIGINT"), (15, "SIGTERM")] {
        assert_eq!(
            signals & (1 << (signal - 1)),
            0,
            "the library caught {name}: signals belong to the binary"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_port_in_use_is_a_bind_error_naming_the_address_with_the_io_error_as_source() {
    use std::error::Error;
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let c = config();
    let engine = Engine::start(
        c.clone(),
        Box::new(SimDevice::new(c.sample_rate, c.buffer_frames, false)),
    )
    .unwrap();
    let opts = DashOptions { port, ..options() };
    let Err(e) = start(opts, engine, sim_factory(), vec!["sim".into()]).await else {
        panic!("bound a port that is in use");
    };
    assert!(matches!(e, DashError::Bind { .. }), "{e:?}");
    assert!(e.to_string().contains(&format!("127.0.0.1:{port}")), "{e}");
    let io = e
        .source()
        .and_then(|s| s.downcast_ref::<std::io::Error>())
        .expect("the source is the io::Error");
    assert_eq!(io.kind(), std::io::ErrorKind::AddrInUse);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_without_the_token_get_401_saying_where_it_is() {
    let running = serve_sim().await;
    let port = running.local_addr().port();
    let before = get_config(port).await;

    // Every route, the page and its files included, and routes that do not exist.
    for (method, path) in [
        ("GET", "/"),
        ("GET", "/static/app.js"),
        ("GET", "/api/config"),
        ("PUT", "/api/config"),
        ("POST", "/api/burst"),
        ("GET", "/api/status"),
        ("PUT", "/api/fault"),
        ("GET", "/api/trace?seconds=2"),
        ("GET", "/favicon.ico"),
        ("GET", "/api/nothing"),
    ] {
        let r = send(port, method, path, &[], r#"{"sines": 7}"#).await;
        assert_eq!(r.status, 401, "{method} {path}: {}", r.body);
        assert_eq!(
            r.header("www-authenticate"),
            Some(r#"Bearer realm="xrunlab""#),
            "{method} {path}"
        );
        let said = if path.starts_with("/api/") {
            json_of(&r.body)["error"].as_str().unwrap().to_owned()
        } else {
            assert!(
                r.header("content-type").unwrap().starts_with("text/html"),
                "{path}"
            );
            assert!(r.body.contains("id=\"needs-token\""), "{}", r.body);
            r.body
        };
        for hint in [
            "this dashboard needs its token",
            &format!("http://127.0.0.1:{port}/?token="),
            "--token",
            "Authorization: Bearer",
        ] {
            // The page starts the message with a capital letter.
            assert!(
                said.to_lowercase().contains(&hint.to_lowercase()),
                "{method} {path}: no {hint:?} in {said}"
            );
        }
        assert!(!said.contains(TOKEN), "a refusal does not tell the token");
    }

    // Wrong tokens: the same length with one character changed, a prefix, the token with more,
    // another scheme, and the right token in a cookie of another port's name.
    let mut same_length = TOKEN.as_bytes().to_vec();
    same_length[TOKEN.len() / 2] ^= 1;
    let same_length = String::from_utf8(same_length).unwrap();
    assert_eq!(same_length.len(), TOKEN.len());
    let other_port_cookie = format!("xrunlab-token-{}={TOKEN}", port + 1);
    let wrong: Vec<(&str, String)> = vec![
        ("Authorization", format!("Bearer {same_length}")),
        (
            "Authorization",
            format!("Bearer {}", &TOKEN[..TOKEN.len() - 1]),
        ),
        ("Authorization", format!("Bearer {}", &TOKEN[..4])),
        ("Authorization", format!("Bearer {TOKEN}x")),
        ("Authorization", "Bearer ".into()),
        ("Authorization", format!("Basic {TOKEN}")),
        ("Authorization", TOKEN.into()),
        ("Cookie", format!("xrunlab-token-{port}={same_length}")),
        ("Cookie", format!("xrunlab-token-{port}={}", &TOKEN[..8])),
        ("Cookie", other_port_cookie.clone()),
    ];
    for (name, value) in &wrong {
        let r = send(
            port,
            "PUT",
            "/api/config",
            &[(name, value)],
            r#"{"sines": 7}"#,
        )
        .await;
        assert_eq!(r.status, 401, "{name}: {value}: {}", r.body);
        let error = json_of(&r.body)["error"].as_str().unwrap().to_owned();
        let presented =
            value.contains(&format!("xrunlab-token-{port}=")) || name == &"Authorization";
        if presented {
            assert!(
                error.contains("not this dashboard's token"),
                "{value}: {error}"
            );
        }
        assert_eq!(
            ws_status(port, &[(name, value)]).await,
            401,
            "WebSocket with {name}: {value}"
        );
        // A right token starts the count of wrong ones again, so twenty in this test do not
        // reach the pause after ten in a row (tested on its own below).
        assert_eq!(
            send(port, "GET", "/api/status", &[AUTH], "").await.status,
            200
        );
    }
    assert_eq!(
        get_config(port).await,
        before,
        "refused requests changed nothing"
    );

    // The right token: as Bearer (any case of the scheme), on the API and the page.
    for auth in [format!("Bearer {TOKEN}"), format!("bearer {TOKEN}")] {
        let r = send(port, "GET", "/api/status", &[("Authorization", &auth)], "").await;
        assert_eq!(r.status, 200, "{auth}: {}", r.body);
    }
    let r = send(port, "GET", "/", &[AUTH], "").await;
    assert_eq!(r.status, 200);
    assert!(r.body.contains("xrunlab"));
    // A WebSocket is refused without the token and accepted with it.
    assert_eq!(ws_status(port, &[]).await, 401);
    let mut ws = ws_open(port, &[AUTH]).await;
    assert_eq!(json_of(&ws_text(&mut ws).await)["type"], "frame");
    running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_trades_the_token_for_an_http_only_strict_cookie() {
    let running = serve_sim().await;
    let port = running.local_addr().port();
    assert_eq!(
        running.url(),
        format!("http://127.0.0.1:{port}/?token={TOKEN}")
    );
    assert_eq!(running.base_url(), format!("http://127.0.0.1:{port}/"));

    let r = send(port, "GET", &format!("/?token={TOKEN}"), &[], "").await;
    assert_eq!(r.status, 303, "{}", r.head);
    assert_eq!(
        r.header("location"),
        Some("/"),
        "the token leaves the address bar"
    );
    let set_cookie = r.header("set-cookie").unwrap().to_owned();
    let attributes: Vec<&str> = set_cookie.split(';').map(str::trim).collect();
    let cookie = attributes[0];
    assert_eq!(cookie, format!("xrunlab-token-{port}={TOKEN}"));
    for a in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(attributes.contains(&a), "no {a} in {set_cookie}");
    }
    assert_eq!(r.header("cache-control"), Some("no-store"));

    // With the cookie: the page, its files, the API and the WebSocket.
    let with_cookie = [("Cookie", cookie)];
    let r = send(port, "GET", "/", &with_cookie, "").await;
    assert_eq!(r.status, 200);
    assert!(
        r.body.contains("<script type=\"module\""),
        "the dashboard page"
    );
    assert_eq!(
        send(port, "GET", "/static/app.js", &with_cookie, "")
            .await
            .status,
        200
    );
    let r = send(port, "PUT", "/api/config", &with_cookie, r#"{"sines": 60}"#).await;
    assert_eq!(r.status, 200, "{}", r.body);
    // Among other cookies, as a browser sends them.
    let among = format!("a=1; {cookie}; b=2");
    let r = send(port, "GET", "/api/status", &[("Cookie", &among)], "").await;
    assert_eq!(r.status, 200, "{}", r.body);
    let mut ws = ws_open(port, &with_cookie).await;
    assert_eq!(json_of(&ws_text(&mut ws).await)["type"], "frame");

    // A wrong or empty token in the address gets the 401 page and no cookie.
    for query in [
        "/?token=wrong",
        "/?token=",
        &format!("/?token={}", &TOKEN[..5]),
    ] {
        let r = send(port, "GET", query, &[], "").await;
        assert_eq!(r.status, 401, "{query}");
        assert!(r.header("set-cookie").is_none(), "{query}");
        assert!(r.body.contains("not this dashboard's token"), "{}", r.body);
    }
    // The address's token is only traded on the page, not taken by the API.
    let r = send(port, "GET", &format!("/api/status?token={TOKEN}"), &[], "").await;
    assert_eq!(r.status, 401);
    running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generated_token_is_in_the_printed_url_and_is_required() {
    let running = serve_sim_with(DashOptions::default()).await;
    let port = running.local_addr().port();
    let url = running.url();
    let token = url
        .strip_prefix(&format!("http://127.0.0.1:{port}/?token="))
        .unwrap_or_else(|| panic!("{url}"))
        .to_owned();
    assert_eq!(token.len(), 48, "{url}");
    assert_eq!(running.token().map(Token::as_str), Some(token.as_str()));
    assert_eq!(send(port, "GET", "/api/status", &[], "").await.status, 401);
    assert_eq!(
        send(port, "GET", "/api/status", &[AUTH], "").await.status,
        401,
        "the test token is not this server's"
    );
    let bearer = format!("Bearer {token}");
    let r = send(
        port,
        "GET",
        "/api/status",
        &[("Authorization", &bearer)],
        "",
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        send(port, "GET", &format!("/?token={token}"), &[], "")
            .await
            .status,
        303
    );
    running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_token_local_requests_pass_and_foreign_pages_are_still_refused() {
    let running = serve_sim_with(DashOptions {
        access: Access::Open,
        ..DashOptions::default()
    })
    .await;
    let port = running.local_addr().port();
    assert!(running.token().is_none());
    assert_eq!(running.url(), format!("http://127.0.0.1:{port}/"));
    let r = send(port, "GET", "/api/status", &[], "").await;
    assert_eq!(r.status, 200, "{}", r.body);
    let r = send(port, "PUT", "/api/config", &[], r#"{"sines": 61}"#).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(send(port, "GET", "/", &[], "").await.status, 200);
    assert_eq!(ws_status(port, &[]).await, 101);
    // A token in the address is not needed and changes nothing.
    assert_eq!(
        send(port, "GET", "/?token=anything", &[], "").await.status,
        200
    );
    let evil = [("Origin", "http://evil.example")];
    assert_eq!(
        send(port, "POST", "/api/burst", &evil, "").await.status,
        403
    );
    assert_eq!(ws_status(port, &evil).await, 403);
    running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_explain_api_validates_and_says_why_there_is_no_card() {
    let running = serve_sim().await;
    let port = running.local_addr().port();
    let (status, body) = request(port, "GET", "/api/explain", &[], "").await;
    assert_eq!((status, json_of(&body)), (200, json!({"enabled": false})));
    let s = json_of(&request(port, "GET", "/api/status", &[], "").await.1);
    assert_eq!(s["explain"]["enabled"], false, "{}", s["explain"]);
    for (body, want, field) in [
        (r#"{"enabled": 3}"#, 422, Some("enabled")),
        (r#"{"enabled": "yes"}"#, 422, Some("enabled")),
        (r#"{}"#, 400, None),
        ("not json", 400, None),
    ] {
        let (status, reply) = request(port, "PUT", "/api/explain", &[], body).await;
        assert_eq!(status, want, "{body}: {reply}");
        let v = json_of(&reply);
        assert!(v["error"].as_str().is_some_and(|e| !e.is_empty()), "{v}");
        if let Some(f) = field {
            assert_eq!(v["field"], f);
            assert_eq!(v["allowed"], "true or false");
        }
    }
    let (status, body) = request(port, "GET", "/api/dropouts/0/5", &[], "").await;
    assert_eq!(status, 404);
    assert!(body.contains("\\\"Explain dropouts\\\" is off"), "{body}");
    let (status, body) = request(port, "GET", "/api/dropouts/first/5", &[], "").await;
    assert_eq!(status, 404);
    assert!(body.contains("both parts are numbers"), "{body}");
    running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root and perf tracepoints"]
async fn explain_all_records_the_events_no_card_needs_and_the_default_leaves_them_out() {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "needs root and perf tracepoints (CI runs ignored tests as root)"
    );
    let opted_in = ["timer:hrtimer_expire_entry", "timer:hrtimer_expire_exit"];
    for explain_all in [false, true] {
        let running = serve_sim_with(DashOptions {
            explain: true,
            explain_all,
            ..options()
        })
        .await;
        let port = running.local_addr().port();
        let (status, body) = request(port, "GET", "/api/explain", &[], "").await;
        assert_eq!(status, 200, "{body}");
        let tracer = &json_of(&body)["tracer"];
        let listed = |key: &str, event: &str| {
            tracer[key]
                .as_array()
                .is_some_and(|l| l.iter().any(|e| e == event))
        };
        for event in opted_in {
            assert_eq!(
                listed("events", event),
                explain_all,
                "--explain-all {explain_all}: {event} recorded? {tracer}"
            );
            assert_eq!(
                listed("events_left_out", event),
                !explain_all,
                "--explain-all {explain_all}: {event} said to be left out? {tracer}"
            );
        }
        running.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root and perf tracepoints"]
async fn with_explain_on_a_stalled_buffer_in_the_frames_has_a_card_blaming_its_render() {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "needs root and perf tracepoints (CI runs ignored tests as root)"
    );
    // SCHED_FIFO audio threads, as a real run has: with SCHED_OTHER ones the other tests'
    // servers may really hold the stalled driver up for longer than its stall.
    let mut c = config();
    c.rt.priority = Some(70);
    let engine = Engine::start(
        c.clone(),
        Box::new(SimDevice::new(c.sample_rate, c.buffer_frames, false)),
    )
    .unwrap();
    let running = start(options(), engine, sim_factory(), vec!["sim".into()])
        .await
        .unwrap();
    let port = running.local_addr().port();
    let (status, body) = request(port, "PUT", "/api/explain", &[], r#"{"enabled": true}"#).await;
    assert_eq!(status, 200, "{body}");
    let v = json_of(&body);
    assert_eq!(v["enabled"], true);
    assert_eq!(v["available"], true, "kernel tracing works as root: {v}");
    // A card compares a thread's run with its median for the load, known after a few normal
    // buffers: start stalling once explaining has seen some.
    tokio::time::sleep(Duration::from_millis(300)).await;
    inject_stalls(port, 8, 200).await;
    // Frames name each dropout by epoch and sequence number; the card of a stalled one blames
    // the driver's own render.
    let mut ws = ws_open(port, &[AUTH]).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut blamed = None;
    while blamed.is_none() && tokio::time::Instant::now() < deadline {
        let frame = json_of(&ws_text(&mut ws).await);
        for d in frame["drops"].as_array().into_iter().flatten() {
            let (epoch, seq) = (d[1].as_u64().unwrap(), d[2].as_u64().unwrap());
            // The card is built about 50 ms after the buffer.
            for _ in 0..20 {
                let (status, body) = request(
                    port,
                    "GET",
                    &format!("/api/dropouts/{epoch}/{seq}"),
                    &[],
                    "",
                )
                .await;
                if status == 200 {
                    let card = json_of(&body);
                    if card["notes"][0]
                        .as_str()
                        .is_some_and(|n| n.starts_with("injected stall"))
                    {
                        blamed = Some(card);
                    }
                    break;
                }
                assert_eq!(status, 404, "{body}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    let card = blamed.expect("a stalled buffer's card within 10 s");
    let threads = json_of(&request(port, "GET", "/api/status", &[], "").await.1)["threads"].clone();
    assert!(
        threads[0]["sched"]["obtained"]
            .as_str()
            .is_some_and(|s| s.starts_with("SCHED_FIFO")),
        "the driver runs SCHED_FIFO: {threads}"
    );
    assert_eq!(card["blame"]["cause"], "ran_long", "{card:#}");
    assert_eq!(card["blame"]["thread"], "driver", "{card:#}");
    let v = json_of(&request(port, "GET", "/api/explain", &[], "").await.1);
    assert!(v["cards"].as_u64().unwrap() >= 1, "{v}");
    assert!(v["recent"]
        .as_array()
        .unwrap()
        .iter()
        .any(|d| d["verdict"].as_str().unwrap().contains("injected stall")));
    // The trace download carries the kernel's sched slices of the audio CPUs and the cards'
    // verdicts on the dropout instants.
    let r = send(port, "GET", "/api/trace?seconds=2", &[AUTH], "").await;
    assert_eq!(r.status, 200, "{}", r.body);
    let doc = json_of(&r.body);
    let events = trace_events(&doc);
    let kernel_pid = 1i64 << 30;
    assert!(
        events
            .iter()
            .any(|e| e["pid"] == kernel_pid && e["cat"] == "sched"),
        "sched slices of the audio CPUs: {}",
        doc["otherData"]
    );
    assert!(
        events
            .iter()
            .any(|e| e["name"] == "dropout" && e["args"]["detail"]["cause"] == "ran_long"),
        "a dropout instant with its card's cause"
    );
    running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_carries_the_cpu_topology_and_idle_state_entries() {
    let running = serve_sim().await;
    let port = running.local_addr().port();
    let sys = std::path::Path::new(xrunlab_sys::DEFAULT_SYS_ROOT);
    let online = xrunlab_sys::cpu::online_cpus(sys);
    // Idle entries need time to accumulate on a machine that has cpuidle.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let s = json_of(&request(port, "GET", "/api/status", &[], "").await.1);
    let topology = s["topology"].as_array().expect("topology in the status");
    let ids: Vec<u64> = topology.iter().map(|t| t["id"].as_u64().unwrap()).collect();
    assert_eq!(
        ids,
        online.iter().map(|&c| c as u64).collect::<Vec<_>>(),
        "one entry per online CPU"
    );
    assert!(topology
        .iter()
        .all(|t| t["smt_siblings"].as_array().is_some_and(|s| !s.is_empty())));
    let states = s["idle"]["states"]
        .as_array()
        .expect("idle states in the status");
    if xrunlab_sys::idle_states(sys).is_empty() {
        assert_eq!(s["idle"]["note"], "no cpuidle states on this machine");
    } else {
        // One row per CPU and state, with entries counted since the dashboard started.
        assert_eq!(states.len(), xrunlab_sys::idle_states(sys).len());
        assert!(states.iter().all(|st| st["entries"].as_u64().is_some()));
        assert!(s["idle"]["driver"].as_str().is_some(), "{}", s["idle"]);
    }
    running.shutdown().await.unwrap();
}

/// The trace events of a Chrome JSON trace document.
fn trace_events(doc: &Value) -> &Vec<Value> {
    doc["traceEvents"].as_array().expect("a traceEvents array")
}

/// Render slices per (tid, seq) of the audio process in a trace.
fn render_slices(doc: &Value) -> std::collections::HashMap<(i64, u64), usize> {
    let mut n = std::collections::HashMap::new();
    for e in trace_events(doc) {
        if e["ph"] == "X" && e["name"] == "render" {
            let key = (
                e["tid"].as_i64().unwrap(),
                e["args"]["seq"].as_u64().unwrap(),
            );
            *n.entry(key).or_insert(0) += 1;
        }
    }
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_trace_download_has_a_render_per_buffer_and_thread_and_the_stalled_dropout() {
    let running = serve_sim().await;
    let port = running.local_addr().port();
    for (query, value) in [
        ("seconds=0", "\"0\""),
        ("seconds=61", "\"61\""),
        ("seconds=abc", "\"abc\""),
    ] {
        let (status, body) = request(port, "GET", &format!("/api/trace?{query}"), &[], "").await;
        assert_eq!(status, 422, "{query}: {body}");
        let v = json_of(&body);
        assert_eq!(v["field"], "seconds", "{v}");
        assert_eq!(v["value"], value, "{v}");
        assert!(v["allowed"].as_str().unwrap().contains("1..=60"), "{v}");
    }
    inject_stalls(port, 8, 500).await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let status_now = json_of(&request(port, "GET", "/api/status", &[], "").await.1);
    let r = send(port, "GET", "/api/trace?seconds=2", &[AUTH], "").await;
    assert_eq!(r.status, 200, "{}", r.body);
    let disposition = r.header("content-disposition").unwrap();
    assert!(
        disposition.starts_with("attachment; filename=\"xrunlab-trace-")
            && disposition.ends_with(".json\"")
            && !disposition.contains(':'),
        "{disposition}"
    );
    assert!(r
        .header("content-type")
        .unwrap()
        .starts_with("application/json"));
    let covered: f64 = r
        .header("x-xrunlab-trace-seconds")
        .unwrap()
        .parse()
        .unwrap();
    // 2.5 s were kept, so the whole 2 s are covered (less at most one period at the start).
    assert!((1.9..=2.0).contains(&covered), "covers {covered} s");
    assert_eq!(
        r.header("transfer-encoding"),
        Some("chunked"),
        "the trace is streamed as it is built"
    );
    let doc = json_of(&r.body);
    assert_eq!(doc["otherData"]["xrunlab_requested_seconds"], 2);
    // Power is measured or labelled as an estimate, and the frequency note says where the
    // figures come from or why there are none: never left out silently.
    let power = doc["otherData"]["xrunlab_power"].as_str().unwrap();
    let power_track = if power.starts_with("RAPL") {
        "power W (RAPL package)"
    } else {
        assert!(power.starts_with("no measured power: estimate"), "{power}");
        "power W (estimate: process CPU time)"
    };
    assert!(
        trace_events(&doc)
            .iter()
            .any(|e| e["ph"] == "C" && e["name"] == power_track),
        "a {power_track} counter in 2.5 s of samples once a second"
    );
    let freq = doc["otherData"]["xrunlab_cpu_frequency"].as_str().unwrap();
    assert!(
        freq.starts_with("cpufreq scaling_cur_freq of CPUs")
            || freq.starts_with("no cpufreq frequency for CPUs"),
        "{freq}"
    );
    assert!(freq.contains("only with explain"), "explain is off: {freq}");
    assert_eq!(
        doc["otherData"]["xrunlab_covered_seconds"].as_f64(),
        Some((covered * 1000.0).round() / 1000.0)
    );
    assert!(doc["otherData"]["xrunlab_kernel_events"]
        .as_str()
        .unwrap()
        .contains("is off"));

    // Every audio thread has a named track.
    let threads = status_now["threads"].as_array().unwrap();
    assert_eq!(threads.len(), config().realtime_threads(), "{threads:?}");
    let named: Vec<(i64, String)> = trace_events(&doc)
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .map(|e| {
            (
                e["tid"].as_i64().unwrap(),
                e["args"]["name"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    for t in threads {
        let tid = t["tid"].as_i64().unwrap();
        let role = if t["index"] == 0 {
            "driver".to_owned()
        } else {
            format!("worker {}", t["index"])
        };
        assert!(
            named.contains(&(tid, format!("{role} (tid {tid})"))),
            "{tid} in {named:?}"
        );
    }
    // One render slice per buffer and thread: the driver renders every buffer, a worker each
    // buffer at most once (a stalled buffer may go without its part).
    let renders = render_slices(&doc);
    assert!(
        renders.values().all(|&n| n == 1),
        "a (thread, buffer) twice"
    );
    let driver = threads[0]["tid"].as_i64().unwrap();
    let seqs: std::collections::BTreeSet<u64> = renders.keys().map(|&(_, s)| s).collect();
    let driver_seqs = renders.keys().filter(|(t, _)| *t == driver).count();
    assert_eq!(driver_seqs, seqs.len(), "the driver renders every buffer");
    let c = config();
    let expected = covered * f64::from(c.sample_rate) / f64::from(c.buffer_frames);
    assert!(
        (seqs.len() as f64) > 0.85 * expected && (seqs.len() as f64) < expected + 2.0,
        "{} buffers for {covered} s (expected about {expected:.0})",
        seqs.len()
    );
    for t in &threads[1..] {
        let tid = t["tid"].as_i64().unwrap();
        let n = renders.keys().filter(|(t, _)| *t == tid).count();
        assert!(
            n as f64 >= 0.9 * seqs.len() as f64,
            "worker {tid}: {n} of {}",
            seqs.len()
        );
    }
    // The stalls (one per 500 ms) show as dropout instants saying they were injected.
    let stalled = trace_events(&doc)
        .iter()
        .filter(|e| e["ph"] == "i" && e["name"] == "dropout")
        .filter(|e| {
            e["args"]["detail"]["notes"].as_array().is_some_and(|n| {
                n.iter()
                    .any(|n| n.as_str().unwrap().starts_with("injected stall"))
            })
        })
        .count();
    assert!(
        stalled >= 2,
        "{stalled} injected-stall dropouts in 2 s of stalls every 500 ms"
    );

    // The default span is 10 s; only 2.5 s are kept, and the trace says so.
    let r = send(port, "GET", "/api/trace", &[AUTH], "").await;
    assert_eq!(r.status, 200, "{}", r.body);
    let covered: f64 = r
        .header("x-xrunlab-trace-seconds")
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        (2.0..5.0).contains(&covered),
        "covers {covered} s of the 10 asked"
    );
    let doc = json_of(&r.body);
    assert_eq!(doc["otherData"]["xrunlab_requested_seconds"], 10);
    running.shutdown().await.unwrap();
}

/// Every JSON answer the page reads, and a telemetry frame, has exactly the fields
/// `static/types.js` declares for it, recursively: a field added to a Rust view (status.rs,
/// the engine's and sys's structs) and not to the page's types fails here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_and_frames_match_the_page_types() {
    let defs = page_types::Typedefs::parse(include_str!("../static/types.js"));
    let running = serve_sim().await;
    let port = running.local_addr().port();
    let ask = |method: &'static str, path: &'static str, body: &'static str| async move {
        let (status, reply) = request(port, method, path, &[], body).await;
        assert_eq!(status, 200, "{method} {path}: {reply}");
        json_of(&reply)
    };
    let get = |path| ask("GET", path, "");
    // Stalls make dropouts, so the explain view lists recent ones.
    ask("PUT", "/api/fault", r#"{"stall_ms": 5, "every_ms": 100}"#).await;
    ask("PUT", "/api/explain", r#"{"enabled": true}"#).await;
    // Power is sampled every 250 ms; stalls need a few periods.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let status = get("/api/status").await;
    let explain = get("/api/explain").await;
    assert!(
        explain["recent"].as_array().is_some_and(|r| !r.is_empty()),
        "stalls were listed: {explain}"
    );
    let burst = ask("POST", "/api/burst", "{}").await;
    let put = ask("PUT", "/api/config", r#"{"sines": 60}"#).await;
    let (code, refused) = request(port, "PUT", "/api/config", &[], r#"{"sines": "x"}"#).await;
    assert_eq!(code, 422, "{refused}");
    let mut ws = ws_open(port, &[AUTH]).await;
    let mut frame = json_of(&ws_text(&mut ws).await);
    while frame["threads"].as_array().is_none_or(|t| t.is_empty()) || frame["ts"] == json!([]) {
        frame = json_of(&ws_text(&mut ws).await);
    }
    let off = ask("PUT", "/api/explain", r#"{"enabled": false}"#).await;
    // Nested types a live sample may lack on this machine (no cpuidle, no power yet).
    let idle = serde_json::to_value(xrunlab_sys::IdleUsage {
        cpu: 0,
        index: 1,
        name: "C1".into(),
        latency_us: Some(2),
        entries: 10,
        time_us: 100,
    })
    .unwrap();
    let power = serde_json::to_value(xrunlab_sys::PowerSample {
        watts: 1.5,
        estimated: true,
    })
    .unwrap();
    let samples = [
        ("Status", status),
        ("ExplainView", explain),
        ("ExplainView", off),
        ("ConfigView", get("/api/config").await),
        ("ConfigView", put),
        ("BurstAnswer", burst),
        ("ApiErrorBody", json_of(&refused)),
        ("FaultView", get("/api/fault").await),
        ("Frame", frame),
        ("IdleUsage", idle),
        ("PowerSample", power),
    ];
    let mut errors = Vec::new();
    for (name, value) in &samples {
        errors.extend(defs.check(name, value));
    }
    assert!(
        errors.is_empty(),
        "static/types.js is out of step with the server:\n{}",
        errors.join("\n")
    );
    running.shutdown().await.unwrap();
}

/// Sends `head` (request line and headers, ending in a blank line) and `body` on a fresh
/// connection, writing while it reads: a server that answers before reading a large body whole
/// may close the connection on the rest. Returns the status and the body.
async fn send_large(port: u16, head: String, body: Vec<u8>) -> Reply {
    let s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let (mut rd, mut wr) = s.into_split();
    let writer = tokio::spawn(async move {
        // Refused early, the rest of the body has nowhere to go: that is not this test's error.
        let _ = wr.write_all(head.as_bytes()).await;
        let _ = wr.write_all(&body).await;
        let _ = wr.shutdown().await;
    });
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match tokio::time::timeout(Duration::from_secs(20), rd.read(&mut buf))
            .await
            .expect("an answer within 20 s")
        {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            // A reset after the answer arrived.
            Err(_) if !out.is_empty() => break,
            Err(e) => panic!("no answer: {e}"),
        }
    }
    writer.abort();
    let split = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(out.len(), |i| i + 4);
    let head = String::from_utf8_lossy(&out[..split]).trim_end().to_owned();
    Reply {
        status: head
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0),
        head,
        body: String::from_utf8_lossy(&out[split..]).into_owned(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_past_64_kib_is_refused_with_413_naming_the_limit() {
    let server = serve_sim().await;
    let port = server.local_addr().port();
    let put = |path: &str, len: usize| {
        (
            format!(
                "PUT {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\
                 {}: {}\r\nContent-Type: application/json\r\nContent-Length: {len}\r\n\r\n",
                AUTH.0, AUTH.1
            ),
            // A JSON string: whitespace-padded, it stays one valid value at any length.
            {
                let mut b = vec![b' '; len];
                b[len - 2..].copy_from_slice(b"{}");
                b
            },
        )
    };
    for path in ["/api/config", "/api/fault", "/api/explain"] {
        let (head, body) = put(path, 1 << 20);
        let r = send_large(port, head, body).await;
        assert_eq!(r.status, 413, "{path}: {} {}", r.head, r.body);
        let v = json_of(&r.body);
        assert!(
            v["error"]
                .as_str()
                .is_some_and(|e| e.contains("at most 65536 bytes")),
            "{path}: {v}"
        );
    }
    // Just under the limit, the body is read (and judged on its content).
    let (head, body) = put("/api/config", 60 * 1024);
    let r = send_large(port, head, body).await;
    assert_ne!(r.status, 413, "{}", r.body);
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websockets_past_the_cap_are_refused_and_a_closed_one_frees_its_place() {
    let server = serve_sim().await;
    let port = server.local_addr().port();
    let mut open = Vec::new();
    for _ in 0..32 {
        open.push(ws_open(port, &[AUTH]).await);
    }
    let (status, _) = ws_handshake(port, &[AUTH]).await;
    assert_eq!(status, 503, "the 33rd WebSocket is refused");
    let r = send(port, "GET", "/api/status", &[AUTH], "").await;
    assert_eq!(r.status, 200, "the API still answers: {}", r.body);
    let mut closed = open.pop().unwrap();
    closed.close(None).await.unwrap();
    drop(closed);
    let reopened = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let (101, Some(ws)) = ws_handshake(port, &[AUTH]).await {
                return ws;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("a closed page frees its place within 10 s");
    drop(reopened);
    drop(open);
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_ten_wrong_tokens_an_address_is_refused_for_a_while_even_with_the_right_one() {
    let server = serve_sim().await;
    let port = server.local_addr().port();
    let wrong = ("Authorization", "Bearer not-the-token-0123456789");
    for n in 1..=10 {
        let r = send(port, "GET", "/api/status", &[wrong], "").await;
        assert_eq!(r.status, 401, "wrong token {n}: {}", r.body);
    }
    let r = send(port, "GET", "/api/status", &[wrong], "").await;
    assert_eq!(r.status, 429, "{}", r.body);
    let pause: u64 = r
        .header("retry-after")
        .and_then(|v| v.parse().ok())
        .expect("a Retry-After header");
    assert!((1..=60).contains(&pause), "{pause}");
    assert!(
        json_of(&r.body)["error"]
            .as_str()
            .is_some_and(|e| e.contains("too many wrong tokens from 127.0.0.1")),
        "{}",
        r.body
    );
    // During the pause the token is not looked at: a guesser learns nothing from a right one.
    let r = send(port, "GET", "/api/status", &[AUTH], "").await;
    assert_eq!(r.status, 429, "{}", r.body);
    let (status, _) = ws_handshake(port, &[AUTH]).await;
    assert_eq!(status, 429, "WebSockets wait too");
    // Once it is over, the right token passes and the count starts again.
    tokio::time::sleep(Duration::from_secs(pause)).await;
    let passed = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let r = send(port, "GET", "/api/status", &[AUTH], "").await;
            if r.status == 200 {
                return;
            }
            assert_eq!(r.status, 429, "{}", r.body);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    assert!(passed.is_ok(), "the right token passes after the pause");
    let r = send(port, "GET", "/api/status", &[wrong], "").await;
    assert_eq!(r.status, 401, "{}", r.body);
    server.shutdown().await.unwrap();
}
