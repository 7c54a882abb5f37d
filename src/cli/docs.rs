//! `man` and `completions`' arguments; parsed on the main thread.

use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write every page (xrunlab.1, xrunlab-run.1, ...) into this directory, creating it.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum, value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}
