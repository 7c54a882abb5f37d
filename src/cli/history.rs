//! `history`'s arguments; parsed on the main thread.

use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// From this time on: a span back from now (1h, 2d) or a time (2026-11-25T14:00:00Z,
    /// 2026-11-25 14:00:00 in UTC). Default: everything on file.
    #[arg(long, value_name = "WHEN")]
    pub since: Option<String>,
    /// Up to this time (same forms as --since). Default: now.
    #[arg(long, value_name = "WHEN")]
    pub until: Option<String>,
    /// Only xruns of this node.
    #[arg(long, value_name = "NAME")]
    pub node: Option<String>,
    /// Only xruns this culprit caused (as the top-culprits table names it).
    #[arg(long, value_name = "NAME")]
    pub culprit: Option<String>,
    /// Only this card kind (e.g. node_ran_long, driver_woke_late).
    #[arg(long, value_name = "KIND")]
    pub kind: Option<String>,
    /// Show at most the latest N xruns and N drift events.
    #[arg(long, value_name = "N", default_value_t = 50,
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub limit: u32,
    /// Print JSON (the xruns with their whole cards, the top culprits, the drift events, the
    /// recorder's sessions and gaps) instead of text.
    #[arg(long)]
    pub json: bool,
    /// The history file. Default: $STATE_DIRECTORY/history.db under systemd,
    /// /var/lib/xrunlab/history.db for root, else $XDG_STATE_HOME/xrunlab/history.db
    /// (~/.local/state/xrunlab/history.db).
    #[arg(long, value_name = "FILE")]
    pub db: Option<PathBuf>,
    /// Write the Perfetto snapshot stored with xrun ID (the ID column) to FILE, and nothing else.
    #[arg(long, num_args = 2, value_names = ["ID", "FILE"])]
    pub trace: Option<Vec<String>>,
}
