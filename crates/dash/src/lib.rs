//! xrunlab-dash: the live dashboard — an HTTP/WebSocket server on its own tokio runtime, one
//! engine-owner thread that holds the `Engine`, and the embedded page that draws AudioPerfLab's
//! visualizations and controls.
//!
//! Threads: [`serve`] blocks the caller's thread on a tokio runtime whose worker threads run
//! the server (`server`); the engine lives on one std thread (`owner`), which the server
//! talks to through a command channel and which publishes telemetry through a broadcast
//! channel that never blocks it. The audio threads never see the dashboard: the owner only
//! drains the engine's wait-free rings and sets its atomics.
//!
//! The page's files are compiled into the binary ([`assets`]), so `cargo run` needs no build
//! step; the JSON API is described in `API.md` beside this crate's `Cargo.toml`.
#![deny(missing_docs)]
// API errors carry the field, value and range as strings; they are built only when a request
// is refused, on control threads, so their size on the stack does not matter.
#![allow(clippy::result_large_err)]

pub mod api;
pub mod assets;
mod auth;
mod backoff;
pub mod guard;
mod history;
mod owner;
mod server;
mod status;
pub mod telemetry;
pub mod token;
mod trace;

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast;
use xrunlab_engine::{Device, DeviceError, Engine, EngineConfig};

pub use token::{Access, Token, TokenError};

/// Makes a device of a kind ("sim", "jack"...) for a config: the CLI's, so the page can switch devices.
pub type DeviceFactory =
    Box<dyn Fn(&str, &EngineConfig) -> Result<Box<dyn Device>, FactoryError> + Send>;

/// Why a [`DeviceFactory`] made no device. The page shows the message when a switch fails.
#[derive(Debug, thiserror::Error)]
pub enum FactoryError {
    /// This build cannot make a device of that kind.
    #[error("unknown device {kind:?}: allowed are {allowed}")]
    UnknownKind {
        /// The kind asked for.
        kind: String,
        /// The kinds the factory can make, comma-separated.
        allowed: String,
    },
    /// A device of a known kind could not be opened (no JACK server...); the device's error
    /// says what to do.
    #[error("{0}")]
    Open(#[from] DeviceError),
}

impl FactoryError {
    /// An unknown `kind`, with the kinds the factory can make.
    pub fn unknown_kind(kind: &str, allowed: &[impl AsRef<str>]) -> FactoryError {
        FactoryError::UnknownKind {
            kind: kind.to_owned(),
            allowed: allowed
                .iter()
                .map(|k| k.as_ref())
                .collect::<Vec<_>>()
                .join(", "),
        }
    }
}

/// Fault injection: stall one render by `stall` every `every`, to make dropouts on demand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    /// How long the stalled render busy-waits before working.
    pub stall: Duration,
    /// Time between stalls.
    pub every: Duration,
}

/// Where and how the dashboard serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DashOptions {
    /// Address to bind; 127.0.0.1 unless the user exposes it (with a warning).
    pub listen: IpAddr,
    /// Port; 0 picks a free one.
    pub port: u16,
    /// Stalls injected from the start (`--stall`/`--stall-every`); pages can change them
    /// through `PUT /api/fault`.
    pub fault: Option<Fault>,
    /// Whether requests need a token (by default a random one, printed in the URL).
    pub access: Access,
    /// Start with "Explain dropouts" on (`--explain`); pages can change it through
    /// `PUT /api/explain`.
    pub explain: bool,
    /// Whenever explaining, also record hrtimer expiry and idle states (`--explain-all`): no
    /// card uses them, the saved trace shows them.
    pub explain_all: bool,
    /// The flight recorder's history the History view reads (read-only); `None` when there is
    /// none to name (the view then says how to get one).
    pub history: Option<std::path::PathBuf>,
}

impl Default for DashOptions {
    fn default() -> Self {
        DashOptions {
            listen: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: 0,
            fault: None,
            access: Access::GeneratedToken,
            explain: false,
            explain_all: false,
            history: None,
        }
    }
}

/// Why the dashboard could not run or stopped.
#[derive(Debug, thiserror::Error)]
pub enum DashError {
    /// The address could not be bound (in use, not an address of this machine...).
    #[error("dashboard: could not listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// The tokio runtime or a thread could not be started.
    #[error("dashboard: could not start {what}: {source}")]
    Runtime {
        /// What could not be started ("the tokio runtime", "the engine thread").
        what: &'static str,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// No access token could be made.
    #[error("dashboard: {0}")]
    Token(#[from] TokenError),
    /// The engine thread panicked; the panic's message went to stderr.
    #[error("dashboard: the engine thread panicked")]
    EnginePanicked,
    /// The audio device failed; the reason says what happened and what to do.
    #[error("the audio device failed: {0}")]
    Device(String),
}

/// Runs the dashboard until `stop` completes (`Ok`) or until the device fails
/// (`Err(DashError::Device)`), blocking the calling thread. The caller owns the process's
/// signals: the binary makes `stop` complete on SIGINT, SIGTERM or SIGHUP, and installs those
/// handlers before calling, so a signal sent right after the URL is printed is caught. Prints
/// exactly one line to stdout, `xrunlab dashboard: http://127.0.0.1:PORT/?token=TOKEN`
/// (without `?token=` when `opts.access` is [`Access::Open`]), once it listens, and a warning
/// to stderr when `opts.listen` is not a loopback address or there is no token. `kinds` are the
/// device kinds `factory` can make.
pub fn serve(
    opts: DashOptions,
    engine: Engine,
    factory: DeviceFactory,
    kinds: Vec<String>,
    stop: impl std::future::Future<Output = ()>,
) -> Result<(), DashError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        // Two workers: the server does little per request, and the machine's cores belong to audio.
        .worker_threads(2)
        .thread_name("xrl-dash-http")
        .enable_all()
        .build()
        .map_err(|source| DashError::Runtime {
            what: "the tokio runtime",
            source,
        })?;
    let result = runtime.block_on(async move {
        let running = start(opts, engine, factory, kinds).await?;
        println!("xrunlab dashboard: {}", running.url());
        let _ = std::io::stdout().flush();
        running.run_until(stop).await
    });
    // WebSocket tasks end when the engine thread's channel closes; do not wait on stragglers.
    runtime.shutdown_timeout(Duration::from_secs(1));
    result
}

/// Kernel send buffer of each connection (accepted sockets inherit it from the listener). Small,
/// so a page that stops reading blocks its sends within about half a second of frames and then
/// skips frames, instead of the kernel queueing megabytes of stale ones for it to replay.
const SEND_BUFFER_BYTES: u32 = 32 * 1024;

fn bind(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    // Restarting on a fixed port must not wait out the old connections' TIME_WAIT.
    socket.set_reuseaddr(true)?;
    socket.set_send_buffer_size(SEND_BUFFER_BYTES)?;
    socket.bind(addr)?;
    socket.listen(128)
}

/// A dashboard serving on the current tokio runtime (see [`start`]).
pub struct Running {
    addr: SocketAddr,
    commands: std::sync::mpsc::SyncSender<owner::Command>,
    owner: Option<std::thread::JoinHandle<owner::Exit>>,
    owner_done: Option<tokio::sync::oneshot::Receiver<()>>,
    server: tokio::task::JoinHandle<()>,
    stop_server: Option<tokio::sync::oneshot::Sender<()>>,
    closing: tokio::sync::watch::Sender<bool>,
    token: Option<Token>,
}

impl Running {
    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The token requests need; `None` with [`Access::Open`].
    pub fn token(&self) -> Option<&Token> {
        self.token.as_ref()
    }

    /// The URL to open, with the token (`/?token=…`) unless access is open; the page trades
    /// it for a cookie and moves on to [`Running::base_url`].
    pub fn url(&self) -> String {
        match &self.token {
            Some(t) => format!("{}?token={}", self.base_url(), t.as_str()),
            None => self.base_url(),
        }
    }

    /// The server's root URL without the token: 127.0.0.1 when bound to loopback or to all
    /// addresses.
    pub fn base_url(&self) -> String {
        let ip = self.addr.ip();
        let host = if ip.is_loopback() || ip.is_unspecified() {
            "127.0.0.1".to_owned()
        } else if ip.is_ipv6() {
            format!("[{ip}]")
        } else {
            ip.to_string()
        };
        format!("http://{host}:{}/", self.addr.port())
    }

    /// Serves until `stop` completes or the device ends, then stops the engine and the server.
    pub async fn run_until(
        mut self,
        stop: impl std::future::Future<Output = ()>,
    ) -> Result<(), DashError> {
        let done = self.owner_done.take();
        tokio::select! {
            () = stop => {}
            _ = async { if let Some(d) = done { let _ = d.await; } } => {}
        }
        self.shutdown().await
    }

    /// Stops the engine (delivering its last buffers) and the server.
    pub async fn shutdown(mut self) -> Result<(), DashError> {
        // The queue may be full: wait for room off the server's threads.
        let commands = self.commands.clone();
        let _ = tokio::task::spawn_blocking(move || commands.send(owner::Command::Stop)).await;
        let exit = match self.owner.take() {
            Some(h) => tokio::task::spawn_blocking(move || h.join())
                .await
                .ok()
                .and_then(|r| r.ok()),
            None => None,
        };
        let _ = self.closing.send(true);
        if let Some(tx) = self.stop_server.take() {
            let _ = tx.send(());
        }
        let _ = tokio::time::timeout(Duration::from_secs(2), &mut self.server).await;
        self.server.abort();
        match exit {
            Some(owner::Exit::DeviceFailed(reason)) => Err(DashError::Device(reason)),
            Some(owner::Exit::DeviceEnded(reason)) => {
                eprintln!("xrunlab dashboard: the device stopped: {reason}");
                Ok(())
            }
            Some(owner::Exit::Stopped) => Ok(()),
            None => Err(DashError::EnginePanicked),
        }
    }
}

/// Binds, starts the engine-owner thread and the server on the current tokio runtime, and
/// returns at once. Prints the non-loopback and no-token warnings (not the URL line: [`serve`]
/// does that).
pub async fn start(
    opts: DashOptions,
    engine: Engine,
    factory: DeviceFactory,
    kinds: Vec<String>,
) -> Result<Running, DashError> {
    let asked = SocketAddr::new(opts.listen, opts.port);
    let cannot_bind = |source| DashError::Bind {
        addr: asked,
        source,
    };
    let listener = bind(asked).map_err(cannot_bind)?;
    let addr = listener.local_addr().map_err(cannot_bind)?;
    let token = match opts.access {
        Access::GeneratedToken => Some(Token::generate()?),
        Access::Token(t) => Some(t),
        Access::Open => None,
    };
    match (opts.listen.is_loopback(), token.is_some()) {
        (true, true) => {}
        (true, false) => eprintln!(
            "warning: the dashboard takes no token (--no-token): any user or process on this machine \
             can change the engine's settings through {addr} (pages from other sites are still refused)"
        ),
        (false, true) => eprintln!(
            "warning: the dashboard listens on {addr}, reachable from other machines over plain HTTP: \
             the token is needed, but anyone who can watch the network can read it on its way"
        ),
        (false, false) => eprintln!(
            "warning: the dashboard listens on {addr}, reachable from other machines, and takes no token \
             (--no-token): anyone who can reach it can change the engine's settings (pages from other \
             sites are still refused)"
        ),
    }
    // A page that falls more than 8 frames (~0.25 s) behind loses frames instead of queueing them.
    let (frames, _) = broadcast::channel(8);
    let shared = Arc::new(owner::Shared::default());
    // The owner thread holds `done_tx`; its end (even a panic) drops it, which wakes `done_rx`.
    let (done_tx, done_rx) = tokio::sync::oneshot::channel();
    let (commands, owner) = owner::spawn(
        engine,
        factory,
        kinds,
        owner::Initial {
            fault: opts.fault,
            explain: opts.explain,
            explain_all: opts.explain_all,
        },
        frames.clone(),
        shared.clone(),
        done_tx,
    )
    .map_err(|source| DashError::Runtime {
        what: "the engine thread",
        source,
    })?;
    let (closing, closing_rx) = tokio::sync::watch::channel(false);
    let state = server::AppState {
        commands: commands.clone(),
        frames,
        shared,
        policy: Arc::new(guard::OriginPolicy::new(opts.listen, addr.port())),
        gate: Arc::new(auth::Gate::new(token.clone(), addr.port())),
        closing: closing_rx,
        websockets: Arc::new(tokio::sync::Semaphore::new(server::MAX_WEBSOCKETS)),
        history: Arc::new(history::HistorySource::new(opts.history.clone())),
    };
    let app = server::router(state);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        // The connection's socket goes with each request: the trace download widens its send
        // buffer (see `trace::ConnSocket`).
        let app = app.into_make_service_with_connect_info::<trace::ConnSocket>();
        let serve = axum::serve(listener, app).with_graceful_shutdown(async {
            let _ = stop_rx.await;
        });
        if let Err(e) = serve.await {
            eprintln!("xrunlab dashboard: the server stopped: {e}");
        }
    });
    Ok(Running {
        addr,
        commands,
        owner: Some(owner),
        owner_done: Some(done_rx),
        server,
        stop_server: Some(stop_tx),
        closing,
        token,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error;

    #[test]
    fn factory_errors_name_the_kind_and_keep_the_device_error_as_source() {
        let unknown = FactoryError::unknown_kind("alsa", &["sim", "jack"]);
        assert_eq!(
            unknown.to_string(),
            "unknown device \"alsa\": allowed are sim, jack"
        );
        assert!(unknown.source().is_none());

        let open = FactoryError::from(DeviceError::new(
            xrunlab_engine::DeviceErrorKind::Unavailable,
            "no JACK server is running",
        ));
        assert_eq!(open.to_string(), "no JACK server is running");
        let source = open.source().expect("the device error is the source");
        let device = source.downcast_ref::<DeviceError>().expect("a DeviceError");
        assert_eq!(device.kind(), xrunlab_engine::DeviceErrorKind::Unavailable);
        assert_eq!(device.message(), "no JACK server is running");
    }
}
