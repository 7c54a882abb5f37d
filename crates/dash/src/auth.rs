//! The token check in front of every route (run by the server's tokio threads after the same-origin
//! guard): `GET /?token=…` trades the token for a cookie, a request carrying the token as that
//! cookie or as `Authorization: Bearer` passes, anything else gets 401 saying where the token is.

use crate::api::ApiError;
use crate::backoff::{Backoff, FREE_TRIES, LONGEST_PAUSE};
use crate::token::{bearer, cookie_values, Token};
use crate::trace::ConnSocket;
use axum::extract::{Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Response};
use axum::Json;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::Arc;
use std::time::Instant;

/// What the check needs: the token (none with `--no-token`) and the server's port.
pub(crate) struct Gate {
    token: Option<Token>,
    port: u16,
    cookie_name: String,
    /// Wrong tokens per client address, and the pauses they earned.
    backoff: Backoff,
}

impl Gate {
    pub(crate) fn new(token: Option<Token>, port: u16) -> Gate {
        Gate {
            token,
            port,
            cookie_name: cookie_name(port),
            backoff: Backoff::default(),
        }
    }
}

/// The cookie's name carries the port: browsers send a cookie for 127.0.0.1 to every port,
/// and two dashboards on one machine must not overwrite each other's.
pub(crate) fn cookie_name(port: u16) -> String {
    format!("xrunlab-token-{port}")
}

/// What becomes of a request.
enum Verdict {
    Pass,
    /// `GET /?token=` with the right token: set the cookie and send the page to `/`.
    Exchange,
    /// Refused; `wrong` when a token was presented but is not this server's.
    Refuse {
        wrong: bool,
    },
}

pub(crate) async fn require_token(
    State(gate): State<Arc<Gate>>,
    req: Request,
    next: Next,
) -> Response {
    let Some(token) = &gate.token else {
        return next.run(req).await;
    };
    let peer = req
        .extensions()
        .get::<axum::extract::ConnectInfo<ConnSocket>>()
        .map_or(IpAddr::V6(Ipv6Addr::UNSPECIFIED), |c| c.0.peer());
    if let Some(left) = gate.backoff.paused(peer, Instant::now()) {
        return slow_down(peer, left);
    }
    let verdict = judge(
        token,
        &gate.cookie_name,
        req.method(),
        req.uri(),
        req.headers(),
    );
    match verdict {
        Verdict::Pass => {
            gate.backoff.right(peer);
            next.run(req).await
        }
        Verdict::Exchange => {
            gate.backoff.right(peer);
            exchange(&gate, token)
        }
        Verdict::Refuse { wrong } => {
            if wrong {
                gate.backoff.wrong(peer, Instant::now());
            }
            refuse(&gate, req.uri().path(), wrong)
        }
    }
}

/// The 429 of a paused address, saying why and for how long.
fn slow_down(peer: IpAddr, left: std::time::Duration) -> Response {
    let seconds = left.as_secs_f64().ceil().max(1.0) as u64;
    let message = format!(
        "too many wrong tokens from {peer}: every request from it is refused for {seconds} s more \
         (after {FREE_TRIES} wrong tokens in a row each further one doubles the pause, up to {} s; \
         a right token ends it)",
        LONGEST_PAUSE.as_secs()
    );
    let mut response = (
        StatusCode::TOO_MANY_REQUESTS,
        Json(ApiError::failed(429, message)),
    )
        .into_response();
    let h = response.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&seconds.to_string()) {
        h.insert(header::RETRY_AFTER, v);
    }
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

fn judge(token: &Token, cookie: &str, method: &Method, uri: &Uri, headers: &HeaderMap) -> Verdict {
    if uri.path() == "/" && (method == Method::GET || method == Method::HEAD) {
        if let Ok(Query(query)) = Query::<HashMap<String, String>>::try_from_uri(uri) {
            if let Some(given) = query.get("token") {
                return if token.matches(given.as_bytes()) {
                    Verdict::Exchange
                } else {
                    Verdict::Refuse { wrong: true }
                };
            }
        }
    }
    // A header that is not text cannot hold a token (they are ASCII); it counts as wrong.
    let texts = |name: header::HeaderName| {
        headers
            .get_all(name)
            .iter()
            .map(|v| v.to_str().unwrap_or("\u{fffd}"))
    };
    let mut presented = false;
    for value in texts(header::AUTHORIZATION) {
        presented = true;
        if bearer(value).is_some_and(|b| token.matches(b.as_bytes())) {
            return Verdict::Pass;
        }
    }
    for value in texts(header::COOKIE) {
        for candidate in cookie_values(value, cookie) {
            presented = true;
            if token.matches(candidate.as_bytes()) {
                return Verdict::Pass;
            }
        }
    }
    Verdict::Refuse { wrong: presented }
}

fn exchange(gate: &Gate, token: &Token) -> Response {
    // No Max-Age: the cookie lasts as long as the browser session, and a restarted server
    // (with a new token) needs the new URL anyway.
    let cookie = format!(
        "{}={}; Path=/; HttpOnly; SameSite=Strict",
        gate.cookie_name,
        token.as_str()
    );
    let mut response = StatusCode::SEE_OTHER.into_response();
    let h = response.headers_mut();
    match HeaderValue::from_str(&cookie) {
        Ok(v) => h.insert(header::SET_COOKIE, v),
        // Unreachable: tokens are checked to be cookie-safe ASCII when made.
        Err(_) => return refuse(gate, "/", true),
    };
    // Redirected to "/", the address bar no longer shows the token.
    h.insert(header::LOCATION, HeaderValue::from_static("/"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

/// The message of a 401: where the token is.
fn where_the_token_is(port: u16, wrong: bool) -> String {
    let what = if wrong {
        "the token given is not this dashboard's token (it makes a new one at every start unless \
         started with --token)"
    } else {
        "this dashboard needs its token"
    };
    format!(
        "{what}: open the URL that xrunlab printed when it started \
         (http://127.0.0.1:{port}/?token=…; if it was started with --token, that token goes \
         after token=); scripts send the header \"Authorization: Bearer TOKEN\""
    )
}

/// `message` with a capital first letter, to stand alone on a page.
fn sentence(message: &str) -> String {
    let mut chars = message.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

fn refuse(gate: &Gate, path: &str, wrong: bool) -> Response {
    let message = where_the_token_is(gate.port, wrong);
    let mut response = if path.starts_with("/api/") || path == "/ws" {
        (
            StatusCode::UNAUTHORIZED,
            Json(ApiError::failed(401, message)),
        )
            .into_response()
    } else {
        // A page for people: no script, no style, nothing loaded from the server.
        let page = format!(
            "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
             <title>xrunlab: token needed</title></head>\n<body><h1>xrunlab dashboard: token needed</h1>\n\
             <p id=\"needs-token\">{}.</p></body></html>\n",
            sentence(&message)
        );
        let mut r = (StatusCode::UNAUTHORIZED, Html(page)).into_response();
        r.headers_mut().insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static("default-src 'none'; frame-ancestors 'none'"),
        );
        r
    };
    let h = response.headers_mut();
    h.insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"xrunlab\""),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}
