//! `compare` and `ab`'s arguments; parsed on the main thread.

use super::parse::parse_duration;
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

/// How many rounds an A/B runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rounds {
    /// This many.
    Fixed(u32),
    /// Until every gated metric is decided, or --max-time.
    Auto,
}

/// `--rounds`: 1..=1000 or "auto".
fn parse_rounds(s: &str) -> Result<Rounds, String> {
    if s == "auto" {
        return Ok(Rounds::Auto);
    }
    match s.parse::<u32>() {
        Ok(n) if (1..=1000).contains(&n) => Ok(Rounds::Fixed(n)),
        _ => Err(format!("{s:?}; allowed: 1..=1000 or auto")),
    }
}

#[derive(Debug, Args)]
pub struct AbArgs {
    /// Side A's engine flags, as on `run`'s command line, e.g. --a "--buffer 64".
    #[arg(long = "a", value_name = "FLAGS", allow_hyphen_values = true)]
    pub a: String,
    /// Side B's engine flags, judged against A, e.g. --b "--buffer 64 --pm-qos --pin".
    #[arg(long = "b", value_name = "FLAGS", allow_hyphen_values = true)]
    pub b: String,
    /// Rounds: each runs A then B, 1..=1000, or "auto": look after a quarter, half, three
    /// quarters and all of the rounds --max-time allows, and stop as soon as every gated
    /// metric is decided (the paired t-test needs 3 rounds for a verdict).
    #[arg(long, value_name = "N|auto", default_value = "5", value_parser = parse_rounds)]
    pub rounds: Rounds,
    /// With --rounds auto: the most time the runs may take (default 3m).
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub max_time: Option<Duration>,
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
    /// Exit 1 when a gated metric of B is worse than A's by more than PCT percent with 95 %
    /// confidence over the gate (the whole interval above PCT): a gate for CI. Also the
    /// margin: a change within ±PCT counts as none (default 5).
    #[arg(long, value_name = "PCT")]
    pub fail_if_worse: Option<f64>,
    /// The metrics that get a verdict, comma-separated, e.g. load.p50,driver_wake.p99
    /// (default: load.p50,load.p99). Maxima are never judged.
    #[arg(long, value_name = "METRICS", value_delimiter = ',')]
    pub gate: Option<Vec<String>>,
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
    /// Exit 1 when a gated metric of B is worse than A's by more than PCT percent with 95 %
    /// confidence over the gate (the whole interval above PCT): a gate for CI. Also the
    /// margin: a change within ±PCT counts as none (default 5).
    #[arg(long, value_name = "PCT")]
    pub fail_if_worse: Option<f64>,
    /// The metrics that get a verdict, comma-separated, e.g. load.p50,driver_wake.p99
    /// (default for runs: load.p50,load.p99; probes: wake.p50,wake.p99; experiments: every
    /// figure but the maxima). Maxima are never judged.
    #[arg(long, value_name = "METRICS", value_delimiter = ',')]
    pub gate: Option<Vec<String>>,
    /// Compare results of different workloads (buffer, rate, sines, preset, DSP kernel) anyway.
    #[arg(long)]
    pub force: bool,
}
