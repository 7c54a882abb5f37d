//! `bench`'s arguments (its table, `bench soak`, `bench explain`, `bench watch`, `bench record`);
//! parsed on the main thread.

use super::parse::{parse_duration, ExplainCostFlags, WatchServer};
use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::time::Duration;

// E is the engine's flags (`run::EngineArgs`) that `bench soak` takes, given in `cli`'s top so
// that this family uses no sibling.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchArgs<E: Args> {
    #[command(subcommand)]
    pub mode: Option<BenchMode<E>>,
    /// Shorter measurements (for a quick look; noisier).
    #[arg(long)]
    pub quick: bool,
    /// Write the figures as JSON too.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum BenchMode<E: Args> {
    /// Run the engine for a long time (32 frames unless --buffer says otherwise) and sample
    /// the process's resident memory, to show it stays flat (target: under 2 MB of growth).
    Soak(Box<SoakArgs<E>>),
    /// What `--explain` costs, measured side by side in one invocation: runs with and without
    /// the kernel tracer interleaved at one sine count (load p50/p99, kernel events/s, lost
    /// events, the reader's CPU), then the dropout-free capacity with and without it.
    Explain(ExplainBenchArgs),
    /// What `watch` achieves and costs on a running server: an xrunlab JACK client (through
    /// pw-jack on PipeWire) stalls on purpose, and watch, with and without kernel events, must
    /// report each stall and name that client; prints its CPU, the reported share, the share
    /// named correctly, the delay from xrun to card, and lost kernel events.
    Watch(WatchBenchArgs),
    /// What `record` costs against `watch`, side by side on the same running server: both run
    /// at once through an idle phase (a calm xrunlab JACK client) and an xrun storm (the client
    /// stalls on purpose); prints each one's CPU (% of one core, CPU-seconds per hour), its
    /// resident memory and the xruns it saw.
    Record(RecordBenchArgs),
    /// How often `ab --rounds auto` is wrong, measured where the truth is known: A/Bs of
    /// identical sides (any verdict is false) and of side B with more sines (the shift must be
    /// found worse); prints both rates with their exact 95 % intervals.
    Compare(CompareBenchArgs),
}

#[derive(Debug, Args)]
pub struct CompareBenchArgs {
    /// A/Bs of each kind (identical sides, shifted sides), 1..=1000.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub trials: u32,
    /// Sines on side A, and on both sides of the identical A/Bs, 1..=100000. Enough that the
    /// kernel's work, not the cycle's fixed cost (about 4 % load here), is most of the load:
    /// at 1500 a 10 % shift of the sines moves the load p50 by about 9 %.
    #[arg(long, default_value_t = 1500, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub sines: u32,
    /// Extra sines during a burst on side A, 0..=100000 (B shifts them too). None by default:
    /// bursts come and go within a run and blur its load.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=100_000))]
    pub burst_sines: u32,
    /// The metrics that get a verdict, as `ab --gate` (default: ab's, load.p50,load.p99).
    #[arg(long, value_name = "METRICS", value_delimiter = ',')]
    pub gate: Option<Vec<String>>,
    /// Side B's shift: this many percent more sines and burst sines (10: 300 → 330), 1..=1000.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub shift_pct: u32,
    /// Each run's measured time.
    #[arg(long, value_name = "DUR", default_value = "1s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Each A/B's --max-time (they run --rounds auto).
    #[arg(long, value_name = "DUR", default_value = "3m", value_parser = parse_duration)]
    pub max_time: Duration,
    /// Write every A/B's outcome and both rates as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

/// Which xruns `bench watch` induces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BenchCause {
    /// A client that runs long.
    Client,
    /// An RT hog that starves the server's own thread.
    Server,
    /// Both, one after the other.
    Both,
}

#[derive(Debug, Args)]
pub struct WatchBenchArgs {
    /// The server to measure on (it must be running; auto: PipeWire when its socket answers).
    #[arg(long, value_enum, default_value = "auto")]
    pub server: WatchServer,
    /// The JACK server's name.
    #[arg(long, value_name = "NAME")]
    pub jack_server: Option<String>,
    /// How long each mode watches.
    #[arg(long, value_name = "DUR", default_value = "20s", value_parser = parse_duration)]
    pub duration: Duration,
    /// How often the culprit stalls (each stall is one induced xrun).
    #[arg(long, value_name = "DUR", default_value = "500ms", value_parser = parse_duration)]
    pub stall_every: Duration,
    /// Which xruns to induce: `client` (a client that runs long, watched three ways), `server`
    /// (a SCHED_FIFO 95 hog spinning 15 ms every 700 ms on the CPU the server's own real-time
    /// thread is pinned to for the mode; needs root or CAP_SYS_NICE), or `both`.
    #[arg(long, value_enum, default_value = "both")]
    pub cause: BenchCause,
    /// Write every mode's figures and provenance as JSON too.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct RecordBenchArgs {
    /// The server to measure on (it must be running; auto: PipeWire when its socket answers).
    #[arg(long, value_enum, default_value = "auto")]
    pub server: WatchServer,
    /// The JACK server's name.
    #[arg(long, value_name = "NAME")]
    pub jack_server: Option<String>,
    /// How long each phase (idle, then the storm) runs, 4s or more; the first 2 s of each are
    /// the tools' start-up and are not counted.
    #[arg(long, value_name = "DUR", default_value = "60s", value_parser = parse_duration)]
    pub duration: Duration,
    /// How often the storm's client stalls 12 ms (each stall is one induced xrun).
    #[arg(long, value_name = "DUR", default_value = "250ms", value_parser = parse_duration)]
    pub stall_every: Duration,
    /// Both tools without the kernel's events (`--no-kernel`).
    #[arg(long)]
    pub no_kernel: bool,
    /// Write both phases' rows and provenance as JSON too.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ExplainBenchArgs {
    #[command(flatten)]
    pub flags: ExplainCostFlags,
    /// A short look (1 round of 1 s runs, a coarse capacity search): what the tests use.
    #[arg(long)]
    pub quick: bool,
    /// Write every run, the comparison and provenance as JSON (rewritten after each run).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct SoakArgs<E: Args> {
    /// How long to run, e.g. 30m, 3m, 8h.
    #[arg(long, default_value = "30m", value_parser = parse_duration)]
    pub duration: Duration,
    /// How often to sample resident memory (also sampled at the start and the end).
    #[arg(long, value_name = "DUR", default_value = "1m", value_parser = parse_duration)]
    pub sample_every: Duration,
    /// Also write `run --csv`'s per-buffer rows, to a temporary file removed at the end.
    #[arg(long, conflicts_with = "dashboard")]
    pub csv: bool,
    /// Soak the dashboard's path instead of `run`'s: its engine thread, telemetry and server,
    /// with one WebSocket reader standing in for a page (no browser; needs a build with the
    /// `soak-client` feature).
    #[arg(long)]
    pub dashboard: bool,
    /// Write the samples, growth and provenance as JSON too.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub engine: E,
}
