//! `compare` and `ab`'s arguments; parsed on the main thread.

use super::parse::parse_duration;
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct AbArgs {
    /// Side A's engine flags, as on `run`'s command line, e.g. --a "--buffer 64".
    #[arg(long = "a", value_name = "FLAGS", allow_hyphen_values = true)]
    pub a: String,
    /// Side B's engine flags, judged against A, e.g. --b "--buffer 64 --pm-qos --pin".
    #[arg(long = "b", value_name = "FLAGS", allow_hyphen_values = true)]
    pub b: String,
    /// Rounds: each runs A then B. The exact test over runs needs 4 or more a side to show
    /// a difference at 95 %.
    #[arg(long, value_name = "N", default_value_t = 5,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub rounds: u32,
    /// Measured time of each run (after a 250 ms warm-up that is discarded).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Write the compare result (for `report`) here, atomically.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Where each run's result goes (a-1.json, b-1.json, …); created if missing, refused if it
    /// already holds A/B runs. Default: a new ab-TIMESTAMP directory here.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Exit 1 when a metric of B is worse than A's by more than PCT percent with 95 %
    /// confidence (the whole interval above PCT): a gate for CI.
    #[arg(long, value_name = "PCT")]
    pub fail_if_worse: Option<f64>,
    /// Print only the comparison (no progress).
    #[arg(long, short)]
    pub quiet: bool,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Side A: run results written by `run --json` (several = repeats or machines).
    #[arg(required = true, value_name = "A.json")]
    pub files: Vec<PathBuf>,
    /// Side B's run results.
    #[arg(long, required = true, num_args = 1.., value_name = "B.json")]
    pub vs: Vec<PathBuf>,
    /// Write the compare result (for `report`) here, atomically.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Exit 1 when a metric of B is worse than A's by more than PCT percent with 95 %
    /// confidence (the whole interval above PCT): a gate for CI.
    #[arg(long, value_name = "PCT")]
    pub fail_if_worse: Option<f64>,
    /// Compare results of different workloads (buffer, rate, sines, preset, DSP kernel) anyway.
    #[arg(long)]
    pub force: bool,
}
