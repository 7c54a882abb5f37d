//! The read-only metrics endpoint: `GET /metrics` answers the counters in the Prometheus text
//! format, and nothing else is served. It listens on loopback unless the caller allows other
//! addresses on purpose. Runs on a one-thread tokio runtime on a thread of its own.

use crate::Metrics;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use std::net::SocketAddr;
use std::sync::Arc;

/// Why the endpoint did not start.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// A non-loopback address without the permission to use one.
    #[error(
        "--metrics {0}: not a loopback address; the endpoint is read-only but tells anyone who \
         can reach it about this machine's audio, so it listens on 127.0.0.1 or ::1 unless \
         --metrics-public is given too"
    )]
    NotLoopback(SocketAddr),
    /// The address could not be bound.
    #[error("--metrics {addr}: cannot listen there: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The runtime or its thread could not start.
    #[error("the metrics endpoint's thread: {0}")]
    Thread(#[source] std::io::Error),
}

/// The running endpoint; stops when dropped.
pub struct MetricsServer {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl MetricsServer {
    /// Where it listens (the real port when 0 was asked).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn scrape(metrics: Arc<Metrics>) -> impl IntoResponse {
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        metrics.render(),
    )
}

/// Serves `metrics` on `addr`; a non-loopback address only with `allow_public`.
pub fn serve_metrics(
    addr: SocketAddr,
    allow_public: bool,
    metrics: Arc<Metrics>,
) -> Result<MetricsServer, MetricsError> {
    if !addr.ip().is_loopback() && !allow_public {
        return Err(MetricsError::NotLoopback(addr));
    }
    let listener =
        std::net::TcpListener::bind(addr).map_err(|source| MetricsError::Bind { addr, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| MetricsError::Bind { addr, source })?;
    listener
        .set_nonblocking(true)
        .map_err(|source| MetricsError::Bind { addr, source })?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .map_err(MetricsError::Thread)?;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let app = Router::new().route("/metrics", get(move || scrape(metrics.clone())));
    let thread = std::thread::Builder::new()
        .name("xrunlab-metrics".into())
        .spawn(move || {
            runtime.block_on(async move {
                let listener = match tokio::net::TcpListener::from_std(listener) {
                    Ok(l) => l,
                    Err(e) => {
                        eprintln!("xrunlab record: the metrics endpoint stopped: {e}");
                        return;
                    }
                };
                let serve = axum::serve(listener, app).with_graceful_shutdown(async {
                    let _ = stop_rx.await;
                });
                if let Err(e) = serve.await {
                    eprintln!("xrunlab record: the metrics endpoint stopped: {e}");
                }
            });
        })
        .map_err(MetricsError::Thread)?;
    Ok(MetricsServer {
        addr: bound,
        stop: Some(stop_tx),
        thread: Some(thread),
    })
}
