//! `report`'s arguments; parsed on the main thread.

use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Result files written by --json of run, probe, sweep, capacity, compare or ab.
    #[arg(required = true, value_name = "FILE.json")]
    pub files: Vec<PathBuf>,
    /// The HTML file to write.
    #[arg(long, value_name = "FILE", default_value = "report.html")]
    pub out: PathBuf,
}
