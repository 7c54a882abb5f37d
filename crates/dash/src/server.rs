//! The HTTP and WebSocket server (axum on the tokio runtime's threads): routes, the same-origin
//! guard and then the token check on every request, the JSON API handlers that forward to the
//! engine-owner thread, and one task per page streaming telemetry.

use crate::api::ApiError;
use crate::assets;
use crate::auth::{self, Gate};
use crate::guard::OriginPolicy;
use crate::history::{self, HistorySource};
use crate::owner::{Command, Shared};
use crate::trace;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::ws::{Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query, RawQuery, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::time::Duration;
use tokio::sync::{broadcast, oneshot, watch, Semaphore};

/// Longest a request waits for the engine thread: a restart or device switch takes a while,
/// but a wedged engine thread must not hang the page forever.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(15);

/// Commands that may wait for the engine thread at once; past that a request is answered 503
/// at once instead of queueing (a flood must not grow memory, and the engine thread never
/// waits for the server either way).
pub(crate) const COMMAND_QUEUE: usize = 32;

/// Largest request body: the API's bodies are a few hundred bytes of JSON.
pub(crate) const MAX_BODY_BYTES: usize = 64 * 1024;

/// Pages streaming telemetry at once; another WebSocket is refused with 503.
pub(crate) const MAX_WEBSOCKETS: usize = 32;

/// What every handler shares.
#[derive(Clone)]
pub(crate) struct AppState {
    /// To the engine thread; bounded ([`COMMAND_QUEUE`]).
    pub commands: mpsc::SyncSender<Command>,
    pub frames: broadcast::Sender<Utf8Bytes>,
    pub shared: Arc<Shared>,
    pub policy: Arc<OriginPolicy>,
    pub gate: Arc<Gate>,
    /// Becomes true at shutdown, so open WebSockets close instead of holding the server up.
    pub closing: watch::Receiver<bool>,
    /// One permit per open WebSocket ([`MAX_WEBSOCKETS`]).
    pub websockets: Arc<Semaphore>,
    /// The flight recorder's history, read by the History view.
    pub history: Arc<HistorySource>,
}

/// The routes, with the same-origin guard and then the token check in front of all of them.
pub(crate) fn router(state: AppState) -> Router {
    let policy = state.policy.clone();
    let gate = state.gate.clone();
    Router::new()
        .route("/", get(index))
        .route("/static/{file}", get(asset))
        .route("/api/config", get(get_config).put(put_config))
        .route("/api/burst", post(burst))
        .route("/api/status", get(status))
        .route("/api/fault", get(get_fault).put(put_fault))
        .route("/api/explain", get(get_explain).put(put_explain))
        .route("/api/dropouts/{epoch}/{seq}", get(get_dropout))
        .route("/api/trace", get(get_trace))
        .route("/api/history", get(get_history))
        .route("/api/history/xruns/{id}", get(get_history_xrun))
        .route("/ws", get(ws))
        .fallback(not_found)
        .with_state(state)
        // Every route: a body past this is refused (413) before it is read whole.
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
        // The last layer added runs first: a foreign page is refused (403) before any token is
        // looked at.
        .layer(axum::middleware::from_fn_with_state(
            gate,
            auth::require_token,
        ))
        .layer(axum::middleware::from_fn_with_state(policy, same_origin))
}

async fn same_origin(
    State(policy): State<Arc<OriginPolicy>>,
    req: Request,
    next: Next,
) -> Response {
    // Scoped so no borrow of the request (whose body is not Sync) lives across the await.
    let verdict = {
        // A header that is not text cannot name this server; U+FFFD makes it fail the check.
        let header = |name: header::HeaderName| {
            req.headers()
                .get(name)
                .map(|v| v.to_str().unwrap_or("\u{fffd}"))
        };
        policy.check(header(header::HOST), header(header::ORIGIN))
    };
    match verdict {
        Ok(()) => next.run(req).await,
        Err(why) => error_response(&ApiError::failed(403, why.to_string())),
    }
}

fn error_response(e: &ApiError) -> Response {
    let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, Json(e)).into_response()
}

async fn not_found() -> Response {
    error_response(&ApiError::failed(404, "no such page or API route (see API.md: /api/config, /api/status, /api/burst, /api/fault, /api/explain, /api/dropouts/{epoch}/{seq}, /api/trace, /api/history, /api/history/xruns/{id}, /ws)"))
}

async fn index() -> Response {
    asset_response("index.html")
}

async fn asset(Path(file): Path<String>) -> Response {
    asset_response(&file)
}

fn asset_response(name: &str) -> Response {
    let Some((body, content_type)) = assets::get(name) else {
        return error_response(&ApiError::failed(404, format!("no asset {name:?}")));
    };
    let mut response = body.into_response();
    let h = response.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    // The assets are in the binary, so a rebuilt binary must not meet stale cached copies.
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
        ),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// Sends `make(reply)` to the engine thread and waits for its answer.
async fn ask<T>(
    state: &AppState,
    make: impl FnOnce(oneshot::Sender<T>) -> Command,
) -> Result<T, ApiError> {
    let (tx, rx) = oneshot::channel();
    state.commands.try_send(make(tx)).map_err(|e| match e {
        mpsc::TrySendError::Full(_) => ApiError::failed(
            503,
            format!(
                "the engine thread is busy: {COMMAND_QUEUE} requests are already waiting for it; \
                 try again shortly"
            ),
        ),
        mpsc::TrySendError::Disconnected(_) => {
            ApiError::failed(503, "the engine thread has stopped")
        }
    })?;
    match tokio::time::timeout(COMMAND_TIMEOUT, rx).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(_)) => Err(ApiError::failed(
            503,
            "the engine thread stopped before answering",
        )),
        Err(_) => Err(ApiError::failed(
            504,
            "the engine thread did not answer within 15 s",
        )),
    }
}

fn json_or_error(r: Result<Value, ApiError>) -> Response {
    match r {
        Ok(v) => Json(v).into_response(),
        Err(e) => error_response(&e),
    }
}

/// The request's JSON body, or why not: too large (413, naming the limit) or not JSON (400).
fn parse_body(body: Result<Bytes, BytesRejection>) -> Result<Value, ApiError> {
    let body = body.map_err(|e| {
        ApiError::failed(
            e.status().as_u16(),
            format!(
                "the body could not be read: {e} (at most {MAX_BODY_BYTES} bytes are accepted)"
            ),
        )
    })?;
    serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request(format!("the body is not valid JSON: {e}")))
}

async fn get_config(State(state): State<AppState>) -> Response {
    json_or_error(ask(&state, Command::GetConfig).await)
}

async fn put_config(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let result = match parse_body(body) {
        Ok(v) => ask(&state, |tx| Command::PutConfig(v, tx))
            .await
            .and_then(|r| r),
        Err(e) => Err(e),
    };
    json_or_error(result)
}

async fn burst(State(state): State<AppState>) -> Response {
    json_or_error(ask(&state, Command::Burst).await)
}

async fn status(State(state): State<AppState>) -> Response {
    json_or_error(ask(&state, Command::Status).await)
}

async fn get_fault(State(state): State<AppState>) -> Response {
    json_or_error(
        ask(&state, Command::Status)
            .await
            .map(|s| s["fault"].clone()),
    )
}

async fn put_fault(State(state): State<AppState>, body: Result<Bytes, BytesRejection>) -> Response {
    let result = match parse_body(body) {
        Ok(v) => ask(&state, |tx| Command::Fault(v, tx))
            .await
            .and_then(|r| r),
        Err(e) => Err(e),
    };
    json_or_error(result)
}

async fn get_explain(State(state): State<AppState>) -> Response {
    json_or_error(ask(&state, Command::GetExplain).await)
}

async fn put_explain(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let result = match parse_body(body) {
        Ok(v) => ask(&state, |tx| Command::PutExplain(v, tx))
            .await
            .and_then(|r| r),
        Err(e) => Err(e),
    };
    json_or_error(result)
}

async fn get_dropout(
    State(state): State<AppState>,
    Path((epoch, seq)): Path<(String, String)>,
) -> Response {
    let (Ok(epoch), Ok(seq)) = (epoch.parse::<u32>(), seq.parse::<u64>()) else {
        return error_response(&ApiError::failed(
            404,
            format!("no dropout {epoch}/{seq}: both parts are numbers (an audio start and a buffer sequence number, from a frame's drops)"),
        ));
    };
    json_or_error(
        ask(&state, |tx| Command::Dropout(epoch, seq, tx))
            .await
            .and_then(|r| r),
    )
}

/// The `seconds` of `GET /api/trace?seconds=N`: 1..=60, 10 when not given.
fn trace_seconds(query: Option<&str>) -> Result<u64, ApiError> {
    let given = query
        .unwrap_or("")
        .split('&')
        .find_map(|pair| pair.strip_prefix("seconds="));
    let Some(text) = given else {
        return Ok(trace::DEFAULT_SECONDS);
    };
    text.parse::<u64>()
        .ok()
        .filter(|n| trace::SECONDS_RANGE.contains(n))
        .ok_or_else(|| {
            ApiError::invalid(
                "seconds",
                format!("{text:?}"),
                format!(
                    "a whole number of seconds, {}..={}",
                    trace::SECONDS_RANGE.start(),
                    trace::SECONDS_RANGE.end()
                ),
            )
        })
}

/// GET /api/trace?seconds=N: the last N seconds as a Chrome JSON trace, as a download. The
/// engine thread copies what it keeps; a blocking task writes the JSON into the response body
/// as it builds it (chunked), and the connection's send buffer is widened for it.
async fn get_trace(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
    request: Request,
) -> Response {
    let seconds = match trace_seconds(query.as_deref()) {
        Ok(n) => n,
        Err(e) => return error_response(&e),
    };
    let snapshot = match ask(&state, |tx| Command::Trace(seconds, tx)).await {
        Ok(s) => s,
        Err(e) => return error_response(&e),
    };
    if let Some(conn) = request
        .extensions()
        .get::<axum::extract::ConnectInfo<trace::ConnSocket>>()
    {
        // A refusal only leaves the download slower.
        let _ = conn.0.widen_send_buffer(trace::TRACE_SEND_BUFFER_BYTES);
    }
    let covered_seconds = snapshot.covered_seconds();
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(4);
    let on_failure = tx.clone();
    let build = tokio::task::spawn_blocking(move || {
        snapshot
            .write_to(trace::ChunkWriter::new(tx))
            .and_then(|mut w| std::io::Write::flush(&mut w).map_err(trace::WriteError::Flush))
    });
    tokio::spawn(async move {
        // A build that fails midway must not end the body as if it were whole: an error in the
        // stream makes the server abort the response, and the client sees a broken transfer.
        let why = match build.await {
            Ok(Ok(())) => return,
            Ok(Err(e)) => e.to_string(),
            Err(e) => format!("building the trace failed: {e}"),
        };
        let _ = on_failure.send(Err(std::io::Error::other(why))).await;
    });
    let chunks = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|chunk| (chunk, rx))
    });
    // RFC 3339 without colons, which some file systems refuse in names.
    let stamp = humantime::format_rfc3339_seconds(std::time::SystemTime::now())
        .to_string()
        .replace(':', "-");
    let disposition = format!("attachment; filename=\"xrunlab-trace-{stamp}.json\"");
    let mut response = axum::body::Body::from_stream(chunks).into_response();
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if let Ok(v) = HeaderValue::from_str(&disposition) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    if let Ok(v) = HeaderValue::from_str(&format!("{covered_seconds:.3}")) {
        h.insert("x-xrunlab-trace-seconds", v);
    }
    response
}

/// GET /api/history?since=…&until=…&node=…&culprit=…&kind=…&limit=…: the History view's
/// span (see `history`).
async fn get_history(
    State(state): State<AppState>,
    query: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Response {
    let pairs = match query {
        Ok(Query(pairs)) => pairs,
        Err(e) => {
            return error_response(&ApiError::bad_request(format!(
                "the query string cannot be read: {e}"
            )))
        }
    };
    json_or_error(history::overview(&state.history, &pairs).await)
}

/// GET /api/history/xruns/{id}: one xrun of the history with its whole card.
async fn get_history_xrun(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    json_or_error(history::xrun(&state.history, &id).await)
}

async fn ws(State(state): State<AppState>, upgrade: WebSocketUpgrade) -> Response {
    // Held for as long as the stream runs (dropped with the closure if the upgrade fails).
    let Ok(permit) = state.websockets.clone().try_acquire_owned() else {
        return error_response(&ApiError::failed(
            503,
            format!(
                "too many live pages: {MAX_WEBSOCKETS} WebSocket connections are open, the most \
                 this dashboard serves; close a page and reload"
            ),
        ));
    };
    let frames = state.frames.subscribe();
    upgrade
        // Frames are a few kB; a bigger message from a page is not something it should send.
        .max_message_size(64 * 1024)
        .on_upgrade(move |socket| async move {
            stream(socket, frames, state.shared, state.closing).await;
            drop(permit);
        })
}

/// One page's stream. While a send waits on a slow page, newer frames keep arriving from the
/// broadcast ring: only the newest is kept for the next send and every one it replaces is
/// counted as dropped at once, so a frozen page shows up in the counts while it is frozen. The
/// engine thread never waits for any of this.
async fn stream(
    mut socket: WebSocket,
    mut frames: broadcast::Receiver<Utf8Bytes>,
    shared: Arc<Shared>,
    mut closing: watch::Receiver<bool>,
) {
    let mut lost: u64 = 0;
    let mut told: u64 = 0;
    let count = |n: u64, lost: &mut u64| {
        *lost += n;
        shared.frames_dropped.fetch_add(n, Ordering::Relaxed);
    };
    loop {
        if *closing.borrow() {
            let _ = socket.send(Message::Close(None)).await;
            return;
        }
        let mut next = tokio::select! {
            // An error means the server is gone without saying so: stop too.
            changed = closing.changed() => if changed.is_err() { return } else { continue },
            frame = frames.recv() => match frame {
                Ok(text) => Some(text),
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    count(n, &mut lost);
                    None
                }
                Err(broadcast::error::RecvError::Closed) => {
                    let _ = socket.send(Message::Close(None)).await;
                    return;
                }
            },
            incoming = socket.recv() => match incoming {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return,
                Some(Ok(_)) => None,
            },
        };
        while let Some(text) = next.take() {
            let message = if lost > told {
                // Tell the page before its next frame how many it missed (its own total).
                told = lost;
                next = Some(text);
                Message::Text(
                    json!({ "type": "lagged", "dropped_frames": lost })
                        .to_string()
                        .into(),
                )
            } else {
                Message::Text(text)
            };
            let send = socket.send(message);
            tokio::pin!(send);
            loop {
                tokio::select! {
                    sent = &mut send => {
                        if sent.is_err() {
                            return;
                        }
                        break;
                    }
                    frame = frames.recv() => match frame {
                        Ok(newer) => {
                            if next.replace(newer).is_some() {
                                count(1, &mut lost);
                            }
                        }
                        Err(broadcast::error::RecvError::Lagged(n)) => count(n, &mut lost),
                        Err(broadcast::error::RecvError::Closed) => return,
                    },
                    _ = closing.changed() => return,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{IpAddr, Ipv4Addr};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// The status line of `GET path` on a fresh connection.
    async fn status_of(port: u16, path: &str) -> String {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        let req =
            format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
        s.write_all(req.as_bytes()).await.unwrap();
        let mut out = Vec::new();
        s.read_to_end(&mut out).await.unwrap();
        String::from_utf8_lossy(&out).into_owned()
    }

    /// An engine thread that takes no command (wedged, or busy restarting a device): the
    /// requests that fill the queue wait, and the next ones are answered 503 at once instead of
    /// queueing without bound.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_full_command_queue_answers_503_at_once() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (commands, stalled) = mpsc::sync_channel(COMMAND_QUEUE);
        let (_closing_tx, closing) = watch::channel(false);
        let state = AppState {
            commands,
            frames: broadcast::channel(1).0,
            shared: Arc::new(Shared::default()),
            policy: Arc::new(OriginPolicy::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port)),
            gate: Arc::new(Gate::new(None, port)),
            closing,
            websockets: Arc::new(Semaphore::new(MAX_WEBSOCKETS)),
            history: Arc::new(HistorySource::new(None)),
        };
        let filler = state.commands.clone();
        tokio::spawn(async move { axum::serve(listener, router(state)).await });
        // Requests that wait for the engine thread fill the queue.
        let mut queued = 0;
        while filler
            .try_send(Command::Status(oneshot::channel().0))
            .is_ok()
        {
            queued += 1;
        }
        assert_eq!(queued, COMMAND_QUEUE, "the queue is bounded");
        // The next request is refused at once, long before the 15 s command timeout.
        let reply = tokio::time::timeout(Duration::from_secs(10), status_of(port, "/api/config"))
            .await
            .expect("an answer within 10 s");
        assert!(
            reply.starts_with("HTTP/1.1 503")
                && reply.contains(&format!("{COMMAND_QUEUE} requests are already waiting")),
            "{reply}"
        );
        // The engine thread goes away: a request says so.
        drop(stalled);
        let reply = status_of(port, "/api/config").await;
        assert!(reply.contains("the engine thread has stopped"), "{reply}");
    }
}
