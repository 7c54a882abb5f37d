//! `record`'s arguments; parsed on the main thread.

use super::parse::{parse_duration, WatchServer};
use clap::Args;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct RecordArgs {
    /// The server to record.
    #[arg(long, value_enum, default_value = "auto")]
    pub server: WatchServer,
    /// The JACK server's name (`jackd -n NAME`); JACK_DEFAULT_SERVER otherwise.
    #[arg(long, value_name = "NAME")]
    pub jack_server: Option<String>,
    /// The history file. Default: $STATE_DIRECTORY/history.db under systemd,
    /// /var/lib/xrunlab/history.db for root, else $XDG_STATE_HOME/xrunlab/history.db.
    #[arg(long, value_name = "FILE")]
    pub db: Option<PathBuf>,
    /// Keep this much history (e.g. 30d, 12h); older xruns and drift events are removed.
    #[arg(long, value_name = "DUR", default_value = "30d", value_parser = parse_duration)]
    pub retain: Duration,
    /// Keep the file under this size (e.g. 200MB, 1GiB); the oldest snapshots, then xruns go.
    #[arg(long, value_name = "SIZE", default_value = "200MB", value_parser = parse_size)]
    pub max_size: u64,
    /// Serve Prometheus metrics (read-only) on this address, e.g. 127.0.0.1:9464.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<SocketAddr>,
    /// Let --metrics listen on an address that is not loopback.
    #[arg(long)]
    pub metrics_public: bool,
    /// Do not record kernel events: cards from the server's timing alone.
    #[arg(long)]
    pub no_kernel: bool,
    /// Keep a Perfetto snapshot of an xrun's window at most this often per root cause
    /// (e.g. 30s, 5m); 0 keeps none. Every xrun gets its card whatever this is.
    #[arg(long, value_name = "DUR", default_value = "30s", value_parser = parse_interval)]
    pub snapshot_every: Duration,
    /// Stop after this long; otherwise until Ctrl-C, SIGTERM or SIGHUP.
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub duration: Option<Duration>,
}

fn parse_size(text: &str) -> Result<u64, String> {
    xrunlab_history::parse_size(text)
}

/// A duration, or 0 for never.
fn parse_interval(text: &str) -> Result<Duration, String> {
    match text.trim() {
        "0" => Ok(Duration::ZERO),
        t => humantime::parse_duration(t)
            .map_err(|e| format!("{e} (write e.g. 30s, 5m, or 0 for never)")),
    }
}
