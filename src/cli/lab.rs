//! `probe`, `sweep` and `capacity`'s arguments (the experiments; `lab_cmd` turns them into the lab
//! crate's parameters); parsed on the main thread.

use super::parse::{parse_duration, within, CapacityPreset, DeviceKind, ExplainCostFlags};
use clap::{Args, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::time::Duration;

/// Flags every experiment takes.
#[derive(Debug, Args)]
pub struct LabOut {
    /// A short run (a few seconds) with fewer points: a first look, and what the tests use.
    #[arg(long)]
    pub quick: bool,
    /// Write the result (provenance, settings, every point) as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write one CSV row per measured point.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
}

#[derive(Debug, Subcommand)]
pub enum ProbeCommand {
    /// Timer wake-up latency, like cyclictest: absolute-deadline sleeps on N threads.
    Wakeup(WakeupArgs),
    /// The CPU cost and accuracy of sleeping threads: interval x sleep call x timer slack x class.
    Sleep(SleepArgs),
    /// Stragglers: N equal threads started together, where they ran and when each finished.
    Placement(PlacementArgs),
    /// What `--explain` costs: runs with and without the kernel tracer interleaved at one sine
    /// count, the kernel's cost per recorded event, then the dropout-free capacity with and
    /// without it (the experiment behind `bench explain`; needs kernel tracing).
    ExplainCost(ExplainCostArgs),
}

#[derive(Debug, Args)]
pub struct ProbeArgs {
    #[command(subcommand)]
    pub which: ProbeCommand,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PolicyArg {
    Fifo,
    Rr,
    Other,
}

#[derive(Debug, Args)]
pub struct WakeupArgs {
    /// Measuring threads, 1..=256 (cyclictest -t).
    #[arg(long, short = 't', default_value_t = 1)]
    pub threads: usize,
    /// Real-time priority 1..=99 for fifo and rr (cyclictest -p).
    #[arg(long, short = 'p', default_value_t = 80)]
    pub priority: u8,
    /// Scheduling policy (cyclictest --policy).
    #[arg(long, value_enum, default_value_t = PolicyArg::Fifo)]
    pub policy: PolicyArg,
    /// Time between deadlines, 10us..=10s (cyclictest -i, there in µs).
    #[arg(long, short = 'i', value_parser = parse_duration, default_value = "1ms")]
    pub interval: Duration,
    /// Deadlines per thread (cyclictest -l); default: --duration worth.
    #[arg(long, short = 'l', conflicts_with = "duration")]
    pub loops: Option<u64>,
    /// How long to measure (default 10s; --quick 1s).
    #[arg(long, short = 'D', value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Pin thread i to the i-th CPU of this list, round robin (cyclictest -a), e.g. 0-1.
    #[arg(long, short = 'a', value_name = "LIST")]
    pub cpus: Option<String>,
    /// Hold /dev/cpu_dma_latency at 0 µs while measuring (cyclictest does so by default).
    #[arg(long)]
    pub pm_qos: bool,
    /// Lock memory (cyclictest -m).
    #[arg(long, short = 'm')]
    pub mlock: bool,
    /// Run the audio engine on the simulated device with this many sines meanwhile.
    #[arg(long, value_name = "SINES")]
    pub with_load: Option<usize>,
    /// Histogram buckets of 1 µs, 1..=1000000; later wake-ups are overflows (cyclictest -h).
    #[arg(long, value_name = "US", default_value_t = 1000)]
    pub histogram: usize,
    /// Write the histogram in cyclictest's -h text layout.
    #[arg(long, value_name = "FILE")]
    pub histogram_file: Option<PathBuf>,
    #[command(flatten)]
    pub out: LabOut,
}

#[derive(Debug, Args)]
pub struct SleepArgs {
    /// Sleep intervals to sweep, comma-separated, each 10us..=10ms (default 10 values from
    /// 10us to 10ms; --quick: 100us,1ms,10ms).
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_duration)]
    pub intervals: Option<Vec<Duration>>,
    /// Wall time per combination, 20ms..=60s (default 500ms; --quick 150ms).
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub per_point: Option<Duration>,
    #[command(flatten)]
    pub out: LabOut,
}

#[derive(Debug, Args)]
pub struct PlacementArgs {
    /// Equal threads, 1..=256 (default: the online CPUs).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Partial-samples each thread renders with the reference kernel (default 300000000;
    /// --quick 30000000).
    #[arg(long, value_name = "N")]
    pub work: Option<u64>,
    /// A thread finishing more than this percentage after the median is a straggler, 0..=1000.
    #[arg(
        long,
        value_name = "PCT",
        default_value_t = 20.0,
        allow_negative_numbers = true
    )]
    pub straggler_pct: f64,
    /// Scheduling policy of the threads.
    #[arg(long, value_enum, default_value_t = PolicyArg::Other)]
    pub policy: PolicyArg,
    /// Priority 1..=99 for fifo and rr.
    #[arg(long, default_value_t = 80)]
    pub priority: u8,
    /// Test hook: thread N (0-based) stalls after its work as long as the work took.
    #[arg(long, value_name = "N", hide = true)]
    pub inject_straggler: Option<usize>,
    #[command(flatten)]
    pub out: LabOut,
}

#[derive(Debug, Args)]
pub struct ExplainCostArgs {
    #[command(flatten)]
    pub flags: ExplainCostFlags,
    #[command(flatten)]
    pub out: LabOut,
}

#[derive(Debug, Subcommand)]
pub enum SweepCommand {
    /// Throughput against thread count and scheduling class (sine kernel and zstd).
    Threads(ThreadsArgs),
    /// Audio-thread CPU (user and system per thread), wake-ups and dropouts against buffer size.
    Buffer(BufferArgs),
}

#[derive(Debug, Args)]
pub struct SweepArgs {
    #[command(subcommand)]
    pub which: SweepCommand,
}

#[derive(Debug, Args)]
pub struct ThreadsArgs {
    /// Largest thread count, 1..=256 (default: twice the online CPUs).
    #[arg(long, value_name = "N")]
    pub max_threads: Option<usize>,
    /// Wall time per point, 50ms..=60s (default 1s; --quick 200ms).
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub per_point: Option<Duration>,
    /// The knee: where an added thread brings less than this percentage of one thread's throughput, 0..=100.
    #[arg(
        long,
        value_name = "PCT",
        default_value_t = 10.0,
        allow_negative_numbers = true
    )]
    pub knee_pct: f64,
    #[command(flatten)]
    pub out: LabOut,
}

#[derive(Debug, Args)]
pub struct BufferArgs {
    /// Buffer sizes in frames, comma-separated powers of two 16..=8192 (default all of them;
    /// --quick: 32,256,2048).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub buffers: Option<Vec<u32>>,
    /// Sustained sines at every point.
    #[arg(long, value_name = "N", default_value_t = 500)]
    pub sines: usize,
    /// Measured wall time per point, 200ms..=600s (default 3s; --quick 1s).
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub per_point: Option<Duration>,
    #[command(flatten)]
    pub out: LabOut,
}

#[derive(Debug, Args)]
pub struct CapacityArgs {
    /// Buffer sizes in frames, comma-separated, each 16..=8192 (default 64,128,256; --quick 128).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub buffers: Option<Vec<u32>>,
    /// Presets, comma-separated (default standard,optimal; --quick standard).
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_enum)]
    pub presets: Option<Vec<CapacityPreset>>,
    /// How long a trial must stay dropout-free, 200ms..=1h (default 5s; --quick 1s).
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub seconds: Option<Duration>,
    /// Confirmation runs at the found count, 1..=100.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub repeats: usize,
    /// LatencyMark: the load, in sines, whose smallest dropout-free buffer is searched.
    #[arg(long, value_name = "N", default_value_t = 300)]
    pub latency_sines: usize,
    /// Burst response: the steady load as a percentage of the capacity found, 0..=100 (0: skip).
    #[arg(
        long,
        value_name = "PCT",
        default_value_t = 50.0,
        allow_negative_numbers = true
    )]
    pub burst_load: f64,
    /// Audio device: the simulated one, or a running JACK server (asked for each buffer size).
    #[arg(long, value_enum, default_value_t = DeviceKind::Sim)]
    pub device: DeviceKind,
    /// With --device jack: the server's name (`jackd -n NAME`); default: $JACK_DEFAULT_SERVER or "default".
    #[arg(long, value_name = "NAME")]
    pub jack_server: Option<String>,
    /// Test hook: the kernel costs K times as much, 1..=16; the result says so.
    #[arg(long, value_name = "K", default_value_t = 1, hide = true,
          allow_negative_numbers = true, value_parser = within(xrunlab_engine::config::limit::KERNEL_SLOWDOWN))]
    pub kernel_slowdown: u32,
    #[command(flatten)]
    pub out: LabOut,
}
