//! Command-line arguments (clap derive) and their conversion into an engine configuration; runs on the main thread.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::time::Duration;
use xrunlab_engine::config::{limit, DriverMode, EngineConfig, Limit, Preset};
use xrunlab_sys::sched::RtPolicy;

/// xrunlab: a lab for real-time audio performance on Linux multi-core machines.
///
/// With no subcommand it starts the engine on the default device and serves
/// the live dashboard.
#[derive(Debug, Parser)]
#[command(name = "xrunlab", version, about, long_about = None, args_conflicts_with_subcommands = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub dashboard: DashboardArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the live dashboard (the default when no subcommand is given).
    Dashboard(DashboardArgs),
    /// Run the engine headless for a duration and print a summary.
    Run(RunArgs),
    /// Render the chord offline, as fast as possible, into a WAV file.
    Render(RenderArgs),
    /// Measure kernel throughput and engine overhead, and print a table.
    Bench(BenchArgs),
    /// Probes: timer wake-up latency, the cost of sleeping, thread placement.
    Probe(crate::lab_cli::ProbeArgs),
    /// Sweeps: throughput against threads and scheduling class.
    Sweep(crate::lab_cli::SweepArgs),
    /// Check this machine for low-latency audio; --measure proves fixes by measuring them.
    Doctor(DoctorArgs),
    /// VoiceMark, LatencyMark and burst response: the largest dropout-free sine count per buffer
    /// and preset, the smallest buffer for a load, the largest burst a steady load absorbs.
    Capacity(crate::lab_cli::CapacityArgs),
    /// Draw result files (run and experiment JSON) in one self-contained HTML page.
    Report(ReportArgs),
    /// Name the culprit of every xrun in the live PipeWire or JACK graph: the late node, and
    /// what the kernel says took its time. Read-only: it changes nothing in the graph.
    Watch(WatchArgs),
    /// Did it get better? Compare run results (repeats, machines, kernels, settings) side A
    /// against side B per metric, with a 95 % interval, a verdict and its chance under noise.
    Compare(CompareArgs),
    /// A/B of two sets of engine flags: the engine run interleaved (A, B, A, B, …), every run
    /// written as a run result, then compared as `compare` does.
    Ab(AbArgs),
    /// Write the man pages (one per command) from these definitions: the top page to standard
    /// output, or every page into --dir.
    Man(ManArgs),
    /// Print a shell completion script for these commands and flags.
    Completions(CompletionsArgs),
}

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

/// Which audio server `watch` follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WatchServer {
    /// PipeWire when its socket answers, otherwise JACK.
    Auto,
    /// PipeWire, through its profiler (needs a build with the `pipewire` feature).
    Pipewire,
    /// JACK2, as a passive client (needs a build with the `jack` feature).
    Jack,
}

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

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Result files written by --json of run, probe, sweep, capacity, compare or ab.
    #[arg(required = true, value_name = "FILE.json")]
    pub files: Vec<PathBuf>,
    /// The HTML file to write.
    #[arg(long, value_name = "FILE", default_value = "report.html")]
    pub out: PathBuf,
}

#[derive(Debug, Args)]
pub struct DashboardArgs {
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
    #[command(flatten)]
    pub engine: EngineArgs,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// How long to run, e.g. 10s, 500ms, 2m.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Write the full result (summary, scheduling obtained, provenance) as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write one CSV row per buffer.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Trigger a burst at this interval, e.g. 2s.
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub burst_every: Option<Duration>,
    /// Fault injection: make a render busy-wait this long (use with --stall-every).
    #[arg(long, value_name = "DUR", value_parser = parse_duration, requires = "stall_every")]
    pub stall: Option<Duration>,
    /// Fault injection interval.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, requires = "stall")]
    pub stall_every: Option<Duration>,
    /// Fault injection: make worker thread N (1 = the first) hang inside its
    /// cycle for --hang, every --hang-every; the driver stops waiting for it
    /// at the deadline plus a margin and records incomplete renders.
    #[arg(long, value_name = "N", requires = "hang_every")]
    pub hang_worker: Option<usize>,
    /// How long the worker hangs.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, default_value = "50ms")]
    pub hang: Duration,
    /// Worker hang interval.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, requires = "hang_worker")]
    pub hang_every: Option<Duration>,
    /// Print only the summary (no progress line).
    #[arg(long, short)]
    pub quiet: bool,
    /// Explain every dropout from the kernel's own scheduler and interrupt events (needs root):
    /// a blame card per dropout in the JSON (`dropouts[].blame`) and a top-culprits table in
    /// the summary. Where tracing is impossible the reason is said and the run goes on.
    #[arg(long)]
    pub explain: bool,
    /// With --explain: also record the kernel events no blame card uses, hrtimer expiry and
    /// idle states (cpu_idle), shown in the --trace file (hrtimer slices on each CPU's
    /// interrupt track, an idle-state counter per CPU). They are a quarter to a half of all
    /// kernel events, each written on an audio CPU, so they are off unless asked for.
    #[arg(long, requires = "explain")]
    pub explain_all: bool,
    /// Write a Perfetto trace (Chrome JSON; opens in ui.perfetto.dev): a track per audio
    /// thread with each buffer's wake-up and render, load and sine counters, an instant per
    /// dropout with its verdict, and with --explain the kernel's sched and IRQ slices.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Cap the trace at N events (then only dropout instants are written; the number left
    /// out is in the file and the result).
    #[arg(long, value_name = "N", default_value_t = 5_000_000, requires = "trace",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub trace_max_events: u64,
    /// Keep the slices and counters of one buffer in N in the trace (buffers with a dropout
    /// always).
    #[arg(long, value_name = "N", default_value_t = 1, requires = "trace",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub trace_every: u32,
    #[command(flatten)]
    pub engine: EngineArgs,
}

#[derive(Debug, Args)]
pub struct RenderArgs {
    /// WAV file to write (32-bit float, stereo).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Audio duration to render.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Write the run result as JSON too.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub engine: EngineArgs,
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub mode: Option<BenchMode>,
    /// Shorter measurements (for a quick look; noisier).
    #[arg(long)]
    pub quick: bool,
    /// Write the figures as JSON too.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum BenchMode {
    /// Run the engine for a long time (32 frames unless --buffer says otherwise) and sample
    /// the process's resident memory, to show it stays flat (target: under 2 MB of growth).
    Soak(Box<SoakArgs>),
    /// What `--explain` costs, measured side by side in one invocation: runs with and without
    /// the kernel tracer interleaved at one sine count (load p50/p99, kernel events/s, lost
    /// events, the reader's CPU), then the dropout-free capacity with and without it.
    Explain(ExplainBenchArgs),
    /// What `watch` achieves and costs on a running server: an xrunlab JACK client (through
    /// pw-jack on PipeWire) stalls on purpose, and watch, with and without kernel events, must
    /// report each stall and name that client; prints its CPU, the reported share, the share
    /// named correctly, the delay from xrun to card, and lost kernel events.
    Watch(WatchBenchArgs),
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
}

#[derive(Debug, Args)]
pub struct ExplainBenchArgs {
    /// The load of the interleaved runs, in sines (the target is at most +2 % p50 load at 1000).
    #[arg(long, default_value_t = 1000)]
    pub sines: usize,
    /// Rounds; each runs once without and once with --explain, in alternating order
    /// (off-on, on-off, ...), so drift in the machine's other load hits both modes alike.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100))]
    pub rounds: Option<u32>,
    /// Length of each run, after 0.5 s of settling that is not counted (default 10s; --quick 1s).
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Buffer size in frames, 16..=4096.
    #[arg(long, value_name = "FRAMES", default_value_t = 128)]
    pub buffer: u32,
    /// Thread layout of the runs and the capacity trials.
    #[arg(long, value_enum, default_value_t = crate::lab_cli::CapacityPreset::Standard)]
    pub preset: crate::lab_cli::CapacityPreset,
    /// How long each capacity trial must stay dropout-free, 200ms..=1h (default 3s; --quick 500ms).
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub capacity_seconds: Option<Duration>,
    /// Skip the capacity searches (they take a few minutes).
    #[arg(long)]
    pub no_capacity: bool,
    /// A short look (1 round of 1 s runs, a coarse capacity search): what the tests use.
    #[arg(long)]
    pub quick: bool,
    /// Write every run, the comparison and provenance as JSON (rewritten after each run).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct SoakArgs {
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
    /// with one WebSocket reader standing in for a page (no browser).
    #[arg(long)]
    pub dashboard: bool,
    /// Write the samples, growth and provenance as JSON too.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub engine: EngineArgs,
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    #[arg(long, value_name = "FRAMES", default_value_t = 128,
          help = format!("Buffer size the checks and measurements assume, {}", limit::BUFFER_FRAMES))]
    pub buffer: u32,
    #[arg(long, value_name = "HZ", default_value_t = 48_000,
          help = format!("Sample rate the checks and measurements assume, {}", limit::SAMPLE_RATE))]
    pub rate: u32,
    /// Write the report (and measurements) as JSON; "-" writes it to standard output
    /// instead of the text report.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Measure process-local settings (PM QoS, mlockall, SCHED_FIFO, pinning, busy
    /// threads, minimum load) in interleaved, repeated A/B runs on the simulated device.
    #[arg(long)]
    pub measure: bool,
    /// With --measure: 2 runs of 1 s per arm instead of 3 of 2 s (about 30 s in all).
    #[arg(long, requires = "measure")]
    pub quick: bool,
    /// Apply one reversible system setting while the doctor runs: "governor" (performance
    /// on every CPU with cpufreq) or "rt-runtime" (sched_rt_runtime_us = -1). It is undone
    /// when the doctor exits, also on Ctrl-C, SIGTERM or SIGHUP, unless --keep is given.
    #[arg(long, value_name = "NAME", value_parser = parse_setting)]
    pub apply: Option<xrunlab_doctor::apply::Setting>,
    /// With --apply: leave the setting in force (the undo command is printed).
    #[arg(long, requires = "apply", conflicts_with = "hold")]
    pub keep: bool,
    /// Restore what an earlier `--apply` left in force when it was killed (its undo journal,
    /// /run/xrunlab/doctor-undo.json), then exit.
    #[arg(long, conflicts_with_all = ["apply", "measure"])]
    pub undo: bool,
    /// With --apply: hold the setting this long (or until a stop signal) before undoing it,
    /// e.g. 10m, to run something else meanwhile.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, requires = "apply")]
    pub hold: Option<Duration>,
    /// Read procfs from DIR instead of /proc (for tests with fixture trees).
    #[arg(long, value_name = "DIR", env = "XRUNLAB_PROC_ROOT", hide = true)]
    pub proc_root: Option<PathBuf>,
    /// Read sysfs from DIR instead of /sys (for tests with fixture trees).
    #[arg(long, value_name = "DIR", env = "XRUNLAB_SYS_ROOT", hide = true)]
    pub sys_root: Option<PathBuf>,
    /// Read /etc, /boot, /usr and /dev under DIR instead of / (for tests with fixture trees).
    #[arg(long, value_name = "DIR", env = "XRUNLAB_FS_ROOT", hide = true)]
    pub fs_root: Option<PathBuf>,
}

pub fn parse_setting(s: &str) -> Result<xrunlab_doctor::apply::Setting, String> {
    xrunlab_doctor::apply::Setting::from_name(s)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DeviceKind {
    /// The built-in simulated device: a real-time clock thread.
    Sim,
    /// A JACK server (JACK2, or PipeWire through pw-jack).
    Jack,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PresetArg {
    Standard,
    Optimal,
    Custom,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DriverModeArg {
    /// The driver thread is one of the processing threads.
    ProcessesSines,
    /// The driver only wakes workers, waits and mixes.
    WaitsForWorkers,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum KernelArg {
    Reference,
    Fast,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnOff {
    On,
    Off,
}

/// Every engine control. Unset flags keep the preset's (or the default) value.
#[derive(Debug, Args)]
pub struct EngineArgs {
    /// Audio device.
    #[arg(long, value_enum, default_value_t = DeviceKind::Sim, help_heading = "Device")]
    pub device: DeviceKind,
    // The ranges in these flags' help and checks are the engine's table (`Limits`).
    #[arg(long, value_name = "HZ", help_heading = "Device",
          value_parser = within(limit::SAMPLE_RATE),
          help = format!("Sample rate, {} (a JACK server imposes its own)", limit::SAMPLE_RATE))]
    pub rate: Option<u32>,
    #[arg(long, value_name = "FRAMES", help_heading = "Device",
          value_parser = within(limit::BUFFER_FRAMES),
          help = format!("Buffer size, {} (with JACK: ask the server for it)", limit::BUFFER_FRAMES))]
    pub buffer: Option<u32>,
    /// Enable audio input (a test tone on the simulated device), shown by a meter.
    #[arg(long, help_heading = "Device")]
    pub input: bool,
    /// JACK server name (`jackd -n NAME`); default: $JACK_DEFAULT_SERVER, else "default".
    #[arg(long, value_name = "NAME", help_heading = "Device")]
    pub jack_server: Option<String>,
    /// JACK client name.
    #[arg(
        long,
        value_name = "NAME",
        default_value = "xrunlab",
        help_heading = "Device"
    )]
    pub jack_client: String,
    /// Connect the JACK ports to the system ports.
    #[arg(long, help_heading = "Device")]
    pub jack_connect: bool,

    /// Start from a preset; other flags then override its fields.
    #[arg(long, value_enum, help_heading = "Workload")]
    pub preset: Option<PresetArg>,
    /// The chord: "apl" (AudioPerfLab's notes 53 56 60 65, the default) or
    /// "apl-2020" (its three-note chord before October 2020).
    #[arg(long, value_name = "NAME", value_parser = parse_chord, help_heading = "Workload")]
    pub chord: Option<xrunlab_dsp::ChordNotes>,
    #[arg(long, value_name = "N", help_heading = "Workload",
          value_parser = within(limit::CHORDS),
          help = format!("Times the chord is played, {}; AudioPerfLab plays it once per physical \
                          core (the default), which sets the sine maximum", limit::CHORDS))]
    pub chords: Option<usize>,
    /// Sustained sine count (the N lowest partials); default 18 per chord, as AudioPerfLab.
    #[arg(long, value_name = "N", help_heading = "Workload")]
    pub sines: Option<usize>,
    /// Extra sines during a burst; default 75 % of AudioPerfLab's sine maximum, as it does.
    #[arg(long, value_name = "N", help_heading = "Workload")]
    pub burst_sines: Option<usize>,
    /// Oscillator kernel.
    #[arg(long, value_enum, help_heading = "Workload")]
    pub kernel: Option<KernelArg>,
    #[arg(long, value_name = "N", help_heading = "Workload",
          value_parser = within(limit::CHUNK_SIZE),
          help = format!("Partials per atomic work claim, {}", limit::CHUNK_SIZE))]
    pub chunk_size: Option<usize>,
    /// Test hook: the kernel costs K times as much, 1..=16 (each chunk is rendered K
    /// times, the extra passes into scratch); results state it and read back as preset custom.
    #[arg(long, value_name = "K", hide = true, allow_negative_numbers = true,
          value_parser = within(limit::KERNEL_SLOWDOWN))]
    pub kernel_slowdown: Option<u32>,

    #[arg(long, value_name = "N", help_heading = "Threads and workarounds",
          value_parser = within(limit::THREADS),
          help = format!("Processing threads, {} (the driver counts when it processes sines); \
                          presets use the physical cores xrunlab may use, as AudioPerfLab uses \
                          the recommended count", limit::THREADS))]
    pub threads: Option<usize>,
    /// Driver thread mode.
    #[arg(long, value_enum, help_heading = "Threads and workarounds")]
    pub driver_mode: Option<DriverModeArg>,
    #[arg(long, value_name = "PCT", allow_negative_numbers = true,
          help_heading = "Threads and workarounds", value_parser = within(limit::MIN_LOAD_PCT),
          help = format!("Minimum load of the buffer, {} (low-energy padding, not counted as \
                          load)", limit::MIN_LOAD_PCT))]
    pub min_load: Option<f32>,
    #[arg(long, value_name = "N", help_heading = "Threads and workarounds",
          value_parser = within(limit::BUSY_COUNT),
          help = format!("Busy threads, {}", limit::BUSY_COUNT))]
    pub busy_threads: Option<u32>,
    #[arg(long, value_name = "MS", help_heading = "Threads and workarounds",
          value_parser = within(limit::BUSY_PERIOD_MS),
          help = format!("Busy thread period, {}", limit::BUSY_PERIOD_MS))]
    pub busy_period: Option<u32>,
    #[arg(long, value_name = "PCT", allow_negative_numbers = true,
          help_heading = "Threads and workarounds", value_parser = within(limit::BUSY_DUTY_PCT),
          help = format!("Busy thread duty, {}", limit::BUSY_DUTY_PCT))]
    pub busy_duty: Option<f32>,
    /// Work interval: on Linux, audio threads ask for uclamp.min.
    #[arg(long, value_enum, help_heading = "Threads and workarounds")]
    pub work_interval: Option<OnOff>,
    #[arg(long, value_name = "US", allow_negative_numbers = true,
          help_heading = "Threads and workarounds", value_parser = within(limit::DRIVER_SPIN_US),
          help = format!("How long the driver spins on the workers before it sleeps, {} (0, the \
                          presets' value, blocks at once as AudioPerfLab does)", limit::DRIVER_SPIN_US))]
    pub driver_spin: Option<u32>,

    #[arg(long, value_name = "N", conflicts_with = "no_rt", help_heading = "Real-time",
          value_parser = within(limit::PRIORITY),
          help = format!("SCHED_FIFO priority for audio threads, {}", limit::PRIORITY))]
    pub priority: Option<u8>,
    /// Use SCHED_RR instead of SCHED_FIFO.
    #[arg(long, conflicts_with = "no_rt", help_heading = "Real-time")]
    pub rr: bool,
    /// Leave audio threads SCHED_OTHER.
    #[arg(long, help_heading = "Real-time")]
    pub no_rt: bool,
    /// SCHED_DEADLINE for audio threads (period = buffer duration).
    #[arg(long, help_heading = "Real-time")]
    pub deadline: bool,
    #[arg(long, value_name = "PCT", requires = "deadline", allow_negative_numbers = true,
          help_heading = "Real-time", value_parser = within(limit::DEADLINE_RUNTIME_PCT),
          help = format!("SCHED_DEADLINE runtime of the period, {}", limit::DEADLINE_RUNTIME_PCT))]
    pub deadline_runtime: Option<f32>,
    #[arg(long, value_name = "N", help_heading = "Real-time",
          value_parser = within(limit::UCLAMP_MIN),
          help = format!("uclamp.min requested while the work interval is on, {}", limit::UCLAMP_MIN))]
    pub uclamp_min: Option<u32>,
    /// CPUs audio threads may run on, e.g. 0-3,6.
    #[arg(long, value_name = "LIST", help_heading = "Real-time")]
    pub cpus: Option<String>,
    /// Pin each audio thread to one CPU (round robin over --cpus, or all CPUs).
    #[arg(long, help_heading = "Real-time")]
    pub pin: bool,
    /// Lock all memory (mlockall).
    #[arg(long, help_heading = "Real-time")]
    pub mlock: bool,
    /// Hold /dev/cpu_dma_latency at 0 us (keeps CPUs out of deep idle states).
    #[arg(long, help_heading = "Real-time")]
    pub pm_qos: bool,
}

/// A usage error: what was wrong and what is allowed.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

pub fn parse_chord(s: &str) -> Result<xrunlab_dsp::ChordNotes, String> {
    xrunlab_dsp::ChordNotes::from_name(s).ok_or_else(|| {
        format!(
            "unknown chord (allowed: {})",
            xrunlab_dsp::ChordNotes::allowed()
        )
    })
}

/// A value parser for a number within `limit`, the engine's range for the flag: anything else
/// is a usage error (exit code 2) naming the flag and the range.
pub fn within<T>(limit: Limit<T>) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync
where
    T: std::str::FromStr + PartialOrd + Copy + std::fmt::Display + Send + Sync + 'static,
{
    move |s: &str| match s.trim().parse::<T>() {
        Ok(v) if limit.contains(v) => Ok(v),
        _ => Err(format!("allowed {limit}")),
    }
}

/// A duration parser for a flag whose range the engine's table gives in milliseconds.
pub fn duration_within(
    limit: Limit<f64>,
) -> impl Fn(&str) -> Result<Duration, String> + Clone + Send + Sync {
    move |s: &str| {
        let d = parse_duration(s)?;
        let ms = d.as_secs_f64() * 1e3;
        if limit.contains(ms) {
            Ok(d)
        } else {
            Err(format!("{ms} ms; allowed {limit}"))
        }
    }
}

pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s).map_err(|e| format!("{e} (write e.g. 10s, 500ms, 2m)"))?;
    if d.is_zero() {
        return Err("the duration must be longer than 0 (write e.g. 10s, 500ms, 2m)".into());
    }
    Ok(d)
}

impl EngineArgs {
    /// The engine configuration these flags describe, validated.
    pub fn to_config(&self, base: EngineConfig) -> Result<EngineConfig, UsageError> {
        let mut c = base;
        // The CPU set comes first: presets and the chord count follow the physical
        // cores it holds, as AudioPerfLab's follow the cores available for DSP.
        if let Some(list) = &self.cpus {
            let cpus = xrunlab_sys::cpu::parse_cpu_list(list).map_err(|e| {
                UsageError(format!("invalid --cpus {list:?}: {e} (write e.g. 0-3,6)"))
            })?;
            c.rt.cpus = Some(cpus);
            c.threads = c.recommended_threads();
            c.set_chord_layout(c.chord, c.recommended_threads());
        }
        c.set_chord_layout(
            self.chord.unwrap_or(c.chord),
            self.chords.unwrap_or(c.chords),
        );
        if let Some(p) = self.preset {
            c.apply_preset(match p {
                PresetArg::Standard => Preset::Standard,
                PresetArg::Optimal => Preset::Optimal,
                PresetArg::Custom => Preset::Custom,
            });
        }
        if let Some(v) = self.rate {
            c.sample_rate = v;
        }
        if let Some(v) = self.buffer {
            c.buffer_frames = v;
        }
        c.input |= self.input;
        if let Some(v) = self.sines {
            c.sines = v;
        }
        if let Some(v) = self.burst_sines {
            c.burst_sines = v;
        }
        if let Some(k) = self.kernel {
            c.kernel = match k {
                KernelArg::Reference => xrunlab_dsp::Kernel::Reference,
                KernelArg::Fast => xrunlab_dsp::Kernel::Fast,
            };
        }
        if let Some(v) = self.chunk_size {
            c.chunk_size = v;
        }
        if let Some(v) = self.kernel_slowdown {
            c.kernel_slowdown = v;
        }
        if let Some(v) = self.threads {
            c.threads = v;
        }
        if let Some(m) = self.driver_mode {
            c.driver_mode = match m {
                DriverModeArg::ProcessesSines => DriverMode::ProcessesSines,
                DriverModeArg::WaitsForWorkers => DriverMode::WaitsForWorkers,
            };
        }
        if let Some(v) = self.min_load {
            c.min_load_pct = v;
        }
        if let Some(v) = self.busy_threads {
            c.busy.count = v;
        }
        if let Some(v) = self.busy_period {
            c.busy.period_ms = v;
        }
        if let Some(v) = self.busy_duty {
            c.busy.duty_pct = v;
        }
        if let Some(v) = self.work_interval {
            c.work_interval = v == OnOff::On;
        }
        if let Some(v) = self.driver_spin {
            c.driver_spin_us = v;
        }
        if self.no_rt {
            c.rt.priority = None;
        }
        if let Some(p) = self.priority {
            c.rt.priority = Some(p);
        }
        if self.rr {
            c.rt.policy = RtPolicy::RoundRobin;
        }
        c.rt.deadline |= self.deadline;
        if let Some(v) = self.deadline_runtime {
            c.rt.deadline_runtime_pct = v;
        }
        if let Some(v) = self.uclamp_min {
            c.rt.uclamp_min = v;
        }
        c.rt.pin |= self.pin;
        c.rt.mlock |= self.mlock;
        c.rt.pm_qos |= self.pm_qos;
        c.validate().map_err(|e| UsageError(flag_error(&e)))?;
        Ok(c)
    }
}

/// Names the command-line flag for an engine field in a validation error.
fn flag_error(e: &xrunlab_engine::ConfigError) -> String {
    let flag = match e.field.as_str() {
        "sample_rate" => "--rate",
        "buffer_frames" => "--buffer",
        "sines" => "--sines",
        "burst_sines" => "--burst-sines",
        "chunk_size" => "--chunk-size",
        "chords" => "--chords",
        "threads" => "--threads",
        "min_load" => "--min-load",
        "busy_threads" => "--busy-threads",
        "busy_period_ms" => "--busy-period",
        "busy_duty" => "--busy-duty",
        "driver_spin_us" => "--driver-spin",
        "kernel_slowdown" => "--kernel-slowdown",
        "priority" => "--priority",
        "deadline_runtime" => "--deadline-runtime",
        "uclamp_min" => "--uclamp-min",
        "cpus" => "--cpus",
        other => other,
    };
    format!(
        "invalid value '{}' for {flag}: allowed {}",
        e.value, e.allowed
    )
}
