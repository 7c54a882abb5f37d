//! The engine's flags (`EngineArgs`, shared by run, render, the dashboard, `bench soak` and each
//! side of `ab`) and their conversion into a validated engine configuration, and `run` and
//! `render`'s arguments; parsed on the main thread.

use super::parse::{parse_chord, parse_duration, within, DeviceKind};
use clap::{Args, ValueEnum};
use std::path::PathBuf;
use std::time::Duration;
use xrunlab_engine::config::{limit, DriverMode, EngineConfig, Preset};
use xrunlab_sys::sched::RtPolicy;

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
