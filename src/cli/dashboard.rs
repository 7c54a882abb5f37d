//! The dashboard's arguments (`xrunlab dashboard`, and `xrunlab` with no subcommand); parsed on the
//! main thread.

use super::parse::duration_within;
use clap::Args;
use std::time::Duration;
use xrunlab_engine::config::limit;

// E is the engine's flags (`run::EngineArgs`), given in `cli`'s top so that this family uses
// no sibling.
#[derive(Debug, Args)]
pub struct DashboardArgs<E: Args> {
    /// Port to listen on; 0 picks a free one.
    #[arg(long, default_value_t = 8517)]
    pub port: u16,
    /// Address to listen on. Anything but loopback exposes the engine's controls to the network.
    #[arg(long, default_value = "127.0.0.1")]
    pub listen: std::net::IpAddr,
    /// Token the page and the API require, instead of a random one made at start (which is
    /// printed in the URL). 1 to 256 characters of A-Z a-z 0-9 - . _ ~. Other users can see a
    /// command line: XRUNLAB_TOKEN is the private way to give it.
    #[arg(
        long,
        value_name = "TOKEN",
        env = "XRUNLAB_TOKEN",
        hide_env_values = true,
        conflicts_with = "no_token"
    )]
    pub token: Option<xrunlab_dash::Token>,
    /// Serve without a token: any user or process on this machine can then drive the engine
    /// (a warning says so at start). Pages from other sites are refused either way.
    #[arg(long)]
    pub no_token: bool,
    // The same ranges as PUT /api/fault, from the engine's table.
    #[arg(long, value_name = "DUR", requires = "stall_every",
          value_parser = duration_within(limit::STALL_MS),
          help = format!("Fault injection: make a render busy-wait this long, {} (use with \
                          --stall-every)", limit::STALL_MS))]
    pub stall: Option<Duration>,
    #[arg(long, value_name = "DUR", requires = "stall",
          value_parser = duration_within(limit::STALL_EVERY_MS),
          help = format!("Fault injection interval, {}", limit::STALL_EVERY_MS))]
    pub stall_every: Option<Duration>,
    /// Start with "Explain dropouts" on: a blame card for every dropout from the kernel's own
    /// scheduler and interrupt events (needs root; the page's checkbox turns it on and off).
    #[arg(long)]
    pub explain: bool,
    /// Whenever "Explain dropouts" is on, also record the kernel events no blame card uses,
    /// hrtimer expiry and idle states, shown in the saved trace (as `run --explain-all`).
    #[arg(long)]
    pub explain_all: bool,
    /// The flight recorder's history the History view reads (read-only; `xrunlab record`
    /// may be writing it meanwhile). Default: the recorder's own default file. A missing file
    /// is no error: the view says how to start recording.
    #[arg(long, value_name = "FILE")]
    pub history: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub engine: E,
}
