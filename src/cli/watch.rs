//! `watch`'s arguments; parsed on the main thread.

use super::parse::{parse_duration, WatchServer};
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct WatchArgs {
    /// The server to watch.
    #[arg(long, value_enum, default_value = "auto")]
    pub server: WatchServer,
    /// The JACK server's name (`jackd -n NAME`); JACK_DEFAULT_SERVER otherwise.
    #[arg(long, value_name = "NAME")]
    pub jack_server: Option<String>,
    /// Stop after this long (e.g. 60s, 10m); otherwise until Ctrl-C, SIGTERM or SIGHUP.
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Write one JSON record per xrun here, flushed as each happens.
    #[arg(long, value_name = "FILE")]
    pub json_lines: Option<PathBuf>,
    /// Write the summary here at the end (atomically, with provenance).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write a Perfetto trace: one slice per node per cycle, the xruns, and the kernel's events.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Do not record kernel events: cards from the server's timing alone.
    #[arg(long)]
    pub no_kernel: bool,
    /// Plain lines instead of the live view (also when standard output is not a terminal).
    #[arg(long)]
    pub batch: bool,
}
