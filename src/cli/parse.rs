//! The value parsers and value kinds several command families share (durations, ranges from the
//! engine's table, the device, the capacity preset, the watched server); a leaf: it uses nothing
//! else from `cli`. Runs on the main thread, while clap parses.

use clap::{Args, ValueEnum};
use std::time::Duration;
use xrunlab_engine::config::Limit;

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

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DeviceKind {
    /// The built-in simulated device: a real-time clock thread.
    Sim,
    /// A JACK server (JACK2, or PipeWire through pw-jack).
    Jack,
}

/// The explain-cost experiment's settings, taken by `probe explain-cost` and `bench explain`.
#[derive(Debug, Args)]
pub struct ExplainCostFlags {
    /// The load of the interleaved runs, in sines (the target is at most +2 % p50 load at 1000).
    #[arg(long, default_value_t = 1000)]
    pub sines: usize,
    /// Rounds; each runs once without and once with --explain, in alternating order
    /// (off-on, on-off, ...), so drift in the machine's other load hits both modes alike
    /// (default 4; --quick 1).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100))]
    pub rounds: Option<u32>,
    /// Length of each run, after 0.5 s of settling that is not counted (default 10s; --quick 1s).
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Buffer size in frames, 16..=8192 (the engine's range).
    #[arg(long, value_name = "FRAMES", default_value_t = 128)]
    pub buffer: u32,
    /// Thread layout of the runs and the capacity trials.
    #[arg(long, value_enum, default_value_t = CapacityPreset::Standard)]
    pub preset: CapacityPreset,
    /// How long each capacity trial must stay dropout-free, 200ms..=1h (default 3s; --quick 500ms).
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub capacity_seconds: Option<Duration>,
    /// Skip the capacity searches (they take a few minutes).
    #[arg(long)]
    pub no_capacity: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CapacityPreset {
    Standard,
    Optimal,
}

pub fn parse_setting(
    s: &str,
) -> Result<xrunlab_doctor::apply::Setting, xrunlab_doctor::apply::UnknownSetting> {
    xrunlab_doctor::apply::Setting::from_name(s)
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
