//! The engine's settings: ranges, validation, presets, and which changes apply live; used on
//! control threads only.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::OnceLock;
pub use xrunlab_dsp::ChordNotes;
use xrunlab_dsp::{ChordLayout, Kernel, MAX_CHORD_COPIES};
use xrunlab_sys::sched::RtPolicy;

/// The sample rates offered in lists (the page's menu); any rate in [`limit::SAMPLE_RATE`] is accepted.
pub const COMMON_SAMPLE_RATES: [u32; 5] = [44_100, 48_000, 88_200, 96_000, 192_000];

/// An inclusive range of allowed values and its unit, as errors name it ("5..=100 ms").
/// Serializes as `[min, max]`, as the dashboard's `status.limits` carries it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limit<T> {
    /// The smallest value allowed.
    pub min: T,
    /// The largest value allowed.
    pub max: T,
    /// The unit after the range in messages; empty for counts.
    pub unit: &'static str,
}

impl<T: Copy> Limit<T> {
    /// The range `(min, max)` with its unit.
    pub const fn new((min, max): (T, T), unit: &'static str) -> Limit<T> {
        Limit { min, max, unit }
    }
}

impl<T: PartialOrd + Copy> Limit<T> {
    /// Whether `v` is allowed (never NaN).
    pub fn contains(&self, v: T) -> bool {
        v >= self.min && v <= self.max
    }
}

impl<T: fmt::Display> fmt::Display for Limit<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}..={}", self.min, self.max)?;
        if !self.unit.is_empty() {
            write!(f, " {}", self.unit)?;
        }
        Ok(())
    }
}

impl<T: Serialize> Serialize for Limit<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (&self.min, &self.max).serialize(s)
    }
}

/// Every fixed range the engine's settings have, in one table: validation, the command
/// line's parsers, the dashboard API's messages and the page's controls all read it. (The
/// sine counts depend on the chord and rate: [`EngineConfig::validate`] says them.)
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Limits {
    /// Sample rate in Hz.
    pub sample_rate: Limit<u32>,
    /// Rates offered in lists, all within `sample_rate`.
    pub sample_rates: Vec<u32>,
    /// Buffer size in frames.
    pub buffer_frames: Limit<u32>,
    /// Buffer sizes offered in lists: the powers of two within `buffer_frames`.
    pub buffer_sizes: Vec<u32>,
    /// Times the chord is played.
    pub chords: Limit<usize>,
    /// Processing threads.
    pub threads: Limit<usize>,
    /// Partials per work claim.
    pub chunk_size: Limit<usize>,
    /// Minimum load in percent of the buffer.
    pub min_load_pct: Limit<f32>,
    /// Driver spin in microseconds.
    pub driver_spin_us: Limit<u32>,
    /// The kernel's cost multiplier (a test hook; 1 = off).
    pub kernel_slowdown: Limit<u32>,
    /// Busy threads.
    pub busy_count: Limit<u32>,
    /// Busy thread period in milliseconds.
    pub busy_period_ms: Limit<u32>,
    /// Busy thread duty in percent.
    pub busy_duty_pct: Limit<f32>,
    /// SCHED_FIFO/RR priority.
    pub priority: Limit<u8>,
    /// SCHED_DEADLINE runtime in percent of the period.
    pub deadline_runtime_pct: Limit<f32>,
    /// uclamp.min.
    pub uclamp_min: Limit<u32>,
    /// Injected stall in milliseconds (0 = off).
    pub stall_ms: Limit<f64>,
    /// Time between injected stalls in milliseconds.
    pub stall_every_ms: Limit<f64>,
}

/// Every fixed range of the engine's settings, each written once, here: [`Limits`] (the table
/// the dashboard serves) and every check read these.
pub mod limit {
    use super::{Limit, MAX_CHORD_COPIES};

    /// Sample rates the engine accepts.
    pub const SAMPLE_RATE: Limit<u32> = Limit::new((8_000, 384_000), "Hz");
    /// Buffer sizes the engine accepts, in frames; scratch buffers are sized for the maximum.
    pub const BUFFER_FRAMES: Limit<u32> = Limit::new((16, 8_192), "frames");
    /// AudioPerfLab's chord duplicates (its default is one per physical core).
    pub const CHORDS: Limit<usize> = Limit::new((1, MAX_CHORD_COPIES), "");
    /// Processing threads the engine accepts.
    pub const THREADS: Limit<usize> = Limit::new((1, 64), "");
    /// Partials per work chunk.
    pub const CHUNK_SIZE: Limit<usize> = Limit::new((1, 65_536), "");
    /// The minimum load, in percent of the buffer.
    pub const MIN_LOAD_PCT: Limit<f32> = Limit::new((0.0, 100.0), "%");
    /// How long the driver may spin on the workers before it sleeps, in microseconds.
    pub const DRIVER_SPIN_US: Limit<u32> = Limit::new((0, 1_000), "us");
    /// Test hook: how many times the kernel's cost is multiplied ([`super::EngineConfig::kernel_slowdown`]).
    pub const KERNEL_SLOWDOWN: Limit<u32> = Limit::new((1, 16), "");
    /// Busy threads (AudioPerfLab's range).
    pub const BUSY_COUNT: Limit<u32> = Limit::new((0, 4), "");
    /// Busy thread period in milliseconds (AudioPerfLab's range).
    pub const BUSY_PERIOD_MS: Limit<u32> = Limit::new((5, 100), "ms");
    /// The busy threads' duty, in percent of the busy period.
    pub const BUSY_DUTY_PCT: Limit<f32> = Limit::new((0.0, 100.0), "%");
    /// SCHED_FIFO/RR priorities Linux accepts.
    pub const PRIORITY: Limit<u8> = Limit::new((1, 99), "");
    /// SCHED_DEADLINE runtime in percent of the period: some runtime, at most all of it.
    pub const DEADLINE_RUNTIME_PCT: Limit<f32> = Limit::new((1.0, 100.0), "%");
    /// uclamp.min values Linux accepts (1024 = the biggest CPU at its highest frequency).
    pub const UCLAMP_MIN: Limit<u32> = Limit::new((0, 1_024), "");
    /// Injected stall length in milliseconds (0 = off): a stall longer than a second only freezes
    /// the page.
    pub const STALL_MS: Limit<f64> = Limit::new((0.0, 1_000.0), "ms");
    /// Time between injected stalls in milliseconds.
    pub const STALL_EVERY_MS: Limit<f64> = Limit::new((10.0, 60_000.0), "ms");
}

impl Limits {
    /// The table.
    pub fn get() -> Limits {
        let (lo, hi) = (limit::BUFFER_FRAMES.min, limit::BUFFER_FRAMES.max);
        Limits {
            sample_rate: limit::SAMPLE_RATE,
            sample_rates: COMMON_SAMPLE_RATES
                .into_iter()
                .filter(|r| limit::SAMPLE_RATE.contains(*r))
                .collect(),
            buffer_frames: limit::BUFFER_FRAMES,
            buffer_sizes: (0..u32::BITS)
                .map(|b| 1u32 << b)
                .filter(|n| (lo..=hi).contains(n))
                .collect(),
            chords: limit::CHORDS,
            threads: limit::THREADS,
            chunk_size: limit::CHUNK_SIZE,
            min_load_pct: limit::MIN_LOAD_PCT,
            driver_spin_us: limit::DRIVER_SPIN_US,
            kernel_slowdown: limit::KERNEL_SLOWDOWN,
            busy_count: limit::BUSY_COUNT,
            busy_period_ms: limit::BUSY_PERIOD_MS,
            busy_duty_pct: limit::BUSY_DUTY_PCT,
            priority: limit::PRIORITY,
            deadline_runtime_pct: limit::DEADLINE_RUNTIME_PCT,
            uclamp_min: limit::UCLAMP_MIN,
            stall_ms: limit::STALL_MS,
            stall_every_ms: limit::STALL_EVERY_MS,
        }
    }
}

/// AudioPerfLab's `kDefaultNumSines`: sines per chord at start.
pub const DEFAULT_SINES_PER_CHORD: usize = 18;
/// AudioPerfLab's default burst (`defaultNumBurstSinesPercent`): 75 % of its sine maximum.
pub const DEFAULT_BURST_FRACTION: f64 = 0.75;

/// Physical cores among `cpus`, or among the CPUs this process may run on when
/// `None`: AudioPerfLab's recommended number of processing threads and its chord
/// count (it ignores SMT siblings, which add little DSP capacity). At least 1.
pub fn recommended_threads(cpus: Option<&[usize]>) -> usize {
    static ALLOWED: OnceLock<Vec<usize>> = OnceLock::new();
    let allowed = ALLOWED.get_or_init(|| {
        xrunlab_sys::sched::allowed_cpus()
            .unwrap_or_else(|_| xrunlab_sys::cpu::online_cpus(xrunlab_sys::default_sys_root()))
    });
    let cpus = cpus.unwrap_or(allowed);
    xrunlab_sys::cpu::physical_cores(xrunlab_sys::default_sys_root(), cpus).max(1)
}
/// How the driver thread takes part in the render.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum DriverMode {
    /// The driver is one of the processing threads.
    #[default]
    ProcessesSines,
    /// The driver only wakes workers, waits and mixes: one more real-time thread.
    WaitsForWorkers,
}

impl DriverMode {
    /// Name on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            DriverMode::ProcessesSines => "processes_sines",
            DriverMode::WaitsForWorkers => "waits_for_workers",
        }
    }
}

/// AudioPerfLab's presets (`Base/Config.hpp`); anything else reads back as [`Preset::Custom`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Preset {
    /// The recommended processing threads (physical cores xrunlab may use), driver
    /// processes sines, work interval on, no minimum load, no busy threads.
    Standard,
    /// "Busy thread + delegated DSP": the recommended processing threads, driver waits
    /// for workers, work interval off, no minimum load, 1 busy thread (35 ms, 50 %).
    Optimal,
    /// Any other combination.
    Custom,
}

impl Preset {
    /// Parses a preset name.
    pub fn from_name(name: &str) -> Option<Preset> {
        match name {
            "standard" => Some(Preset::Standard),
            "optimal" => Some(Preset::Optimal),
            "custom" => Some(Preset::Custom),
            _ => None,
        }
    }

    /// Name on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            Preset::Standard => "standard",
            Preset::Optimal => "optimal",
            Preset::Custom => "custom",
        }
    }
}

/// Low-priority threads that keep the CPU out of low-frequency states.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BusyConfig {
    /// Number of busy threads, 0..=4.
    pub count: u32,
    /// Length of one block-then-work loop in milliseconds, 5..=100.
    pub period_ms: u32,
    /// Percent of the period spent working, 0..=100.
    pub duty_pct: f32,
}

impl Default for BusyConfig {
    fn default() -> Self {
        Self {
            count: 0,
            period_ms: 35,
            duty_pct: 50.0,
        }
    }
}

/// Real-time options for the audio threads; each is reported with what took effect.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RtConfig {
    /// SCHED_FIFO/RR priority 1..=99; `None` leaves the threads SCHED_OTHER.
    pub priority: Option<u8>,
    /// FIFO or round robin.
    pub policy: RtPolicy,
    /// Ask for SCHED_DEADLINE with the buffer period as period and deadline.
    pub deadline: bool,
    /// SCHED_DEADLINE runtime as percent of the period, 1..=100.
    pub deadline_runtime_pct: f32,
    /// uclamp.min value (0..=1024) requested while the work interval is on.
    pub uclamp_min: u32,
    /// CPUs the audio threads may run on; `None` = all.
    pub cpus: Option<Vec<usize>>,
    /// Pin each audio thread to one CPU of `cpus` (or of all CPUs), round robin.
    pub pin: bool,
    /// mlockall(MCL_CURRENT | MCL_FUTURE).
    pub mlock: bool,
    /// Hold /dev/cpu_dma_latency at 0 us for the run (PM QoS).
    pub pm_qos: bool,
}

impl Default for RtConfig {
    fn default() -> Self {
        Self {
            priority: Some(70),
            policy: RtPolicy::Fifo,
            deadline: false,
            deadline_runtime_pct: 50.0,
            uclamp_min: 1024,
            cpus: None,
            pin: false,
            mlock: false,
            pm_qos: false,
        }
    }
}

/// Every setting of the engine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct EngineConfig {
    /// Requested sample rate in Hz (a server device may impose its own).
    pub sample_rate: u32,
    /// Requested buffer size in frames (a server device may impose its own).
    pub buffer_frames: u32,
    /// The chord: AudioPerfLab's four notes (default) or its pre-October-2020 three.
    pub chord: ChordNotes,
    /// How many times AudioPerfLab's part of the chord is played: one per physical
    /// core xrunlab may use, as AudioPerfLab does. Sets the sine maximum.
    pub chords: usize,
    /// Sustained sine count: the N lowest partials.
    pub sines: usize,
    /// Extra sines added for 0.25 s by a burst.
    pub burst_sines: usize,
    /// Oscillator kernel.
    #[serde(with = "kernel_serde")]
    pub kernel: Kernel,
    /// Partials handed out per atomic claim.
    pub chunk_size: usize,
    /// Processing threads (including the driver when it processes sines).
    pub threads: usize,
    /// Driver thread mode.
    pub driver_mode: DriverMode,
    /// Minimum load in percent of the buffer duration, 0..=100.
    pub min_load_pct: f32,
    /// How long the driver spins on the workers before it sleeps on the futex,
    /// in microseconds, 0..=1000. AudioPerfLab's driver blocks at once (0, the
    /// presets' value); a spin saves a wake-up per buffer but is a minimum
    /// load of its own on the driver's core, so results report it.
    pub driver_spin_us: u32,
    /// Busy threads.
    pub busy: BusyConfig,
    /// Work interval: on Linux, audio threads ask for uclamp.min (see [`RtConfig::uclamp_min`]),
    /// the nearest hint that they serve a deadline.
    pub work_interval: bool,
    /// Real-time options.
    pub rt: RtConfig,
    /// Enable audio input (metered, not mixed).
    pub input: bool,
    /// Test hook, 1..=16 (1 = off): every chunk of partials is rendered this many
    /// times (the extra passes from the same phases into scratch buffers that are
    /// thrown away), so the kernel costs K times as much while the output stays the
    /// same. Lets tests check that a slower kernel lowers the measured capacity; a
    /// slowed result reads back as preset [`Preset::Custom`] and says so.
    pub kernel_slowdown: u32,
}

impl Default for EngineConfig {
    /// AudioPerfLab's start-up state on this machine: one chord per physical core,
    /// 18 sines per chord, a burst of 75 % of the sine maximum, the standard preset.
    fn default() -> Self {
        let chords = recommended_threads(None).min(limit::CHORDS.max);
        let layout = ChordLayout {
            notes: ChordNotes::Apl,
            chords,
        };
        let (sines, burst_sines) = default_sines(layout, 48_000);
        let mut c = Self {
            sample_rate: 48_000,
            buffer_frames: 128,
            chord: layout.notes,
            chords,
            sines,
            burst_sines,
            kernel: Kernel::Reference,
            chunk_size: 256,
            threads: chords,
            driver_mode: DriverMode::ProcessesSines,
            min_load_pct: 0.0,
            driver_spin_us: 0,
            busy: BusyConfig::default(),
            work_interval: true,
            rt: RtConfig::default(),
            input: false,
            kernel_slowdown: 1,
        };
        c.apply_preset(Preset::Standard);
        c
    }
}

/// AudioPerfLab's start-up sine and burst counts for `layout`: 18 per chord, and 75 %
/// of its sine maximum.
fn default_sines(layout: ChordLayout, sample_rate: u32) -> (usize, usize) {
    let burst = layout.apl_max_sines(sample_rate) as f64 * DEFAULT_BURST_FRACTION;
    (
        DEFAULT_SINES_PER_CHORD * layout.chords,
        burst.round() as usize,
    )
}

mod kernel_serde {
    use serde::{Deserialize, Deserializer, Serializer};
    use xrunlab_dsp::Kernel;

    pub fn serialize<S: Serializer>(k: &Kernel, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(k.name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Kernel, D::Error> {
        let name = String::deserialize(d)?;
        Kernel::from_name(&name).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "unknown kernel {name:?}: allowed are \"reference\" and \"fast\""
            ))
        })
    }
}

/// A setting outside its allowed range.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConfigError {
    /// The field, as named on the command line and in the API (e.g. "sines").
    pub field: String,
    /// The rejected value.
    pub value: String,
    /// What is allowed.
    pub allowed: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid {}: {} (allowed: {})",
            self.field, self.value, self.allowed
        )
    }
}

impl std::error::Error for ConfigError {}

fn err(field: &str, value: impl fmt::Display, allowed: impl Into<String>) -> ConfigError {
    ConfigError {
        field: field.into(),
        value: value.to_string(),
        allowed: allowed.into(),
    }
}

fn check<T: PartialOrd + fmt::Display + Copy>(
    field: &str,
    v: T,
    limit: Limit<T>,
) -> Result<(), ConfigError> {
    if limit.contains(v) {
        Ok(())
    } else {
        Err(err(field, v, limit.to_string()))
    }
}

impl EngineConfig {
    /// Checks every field; the first error names the field and what is allowed.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check("sample_rate", self.sample_rate, limit::SAMPLE_RATE)?;
        check("buffer_frames", self.buffer_frames, limit::BUFFER_FRAMES)?;
        check("chords", self.chords, limit::CHORDS)?;
        let layout = self.chord_layout();
        let max = layout.max_sines(self.sample_rate);
        let apl_max = layout.apl_max_sines(self.sample_rate);
        let per_chord = layout.partials_per_chord(self.sample_rate);
        let allowed = |what: &str| {
            format!(
                "0..={max} {what}at {} Hz: AudioPerfLab's range is 0..={apl_max} \
                 ({} × the {:?} chord; one chord is {per_chord} partials), \
                 and xrunlab's own extra copies go up to {MAX_CHORD_COPIES} copies",
                self.sample_rate,
                self.chords,
                self.chord.name(),
            )
        };
        if self.sines > max {
            return Err(err("sines", self.sines, allowed("")));
        }
        if self.burst_sines > max {
            return Err(err("burst_sines", self.burst_sines, allowed("")));
        }
        if self.sines + self.burst_sines > max {
            return Err(err(
                "burst_sines",
                self.burst_sines,
                allowed("together with sines "),
            ));
        }
        check("chunk_size", self.chunk_size, limit::CHUNK_SIZE)?;
        check("threads", self.threads, limit::THREADS)?;
        check("min_load", self.min_load_pct, limit::MIN_LOAD_PCT)?;
        check("driver_spin_us", self.driver_spin_us, limit::DRIVER_SPIN_US)?;
        check(
            "kernel_slowdown",
            self.kernel_slowdown,
            limit::KERNEL_SLOWDOWN,
        )?;
        check("busy_threads", self.busy.count, limit::BUSY_COUNT)?;
        check("busy_period_ms", self.busy.period_ms, limit::BUSY_PERIOD_MS)?;
        check("busy_duty", self.busy.duty_pct, limit::BUSY_DUTY_PCT)?;
        if let Some(p) = self.rt.priority {
            check("priority", p, limit::PRIORITY)?;
        }
        if self.rt.deadline {
            check(
                "deadline_runtime",
                self.rt.deadline_runtime_pct,
                limit::DEADLINE_RUNTIME_PCT,
            )?;
        }
        check("uclamp_min", self.rt.uclamp_min, limit::UCLAMP_MIN)?;
        if let Some(cpus) = &self.rt.cpus {
            if cpus.is_empty() {
                return Err(err("cpus", "(empty)", "a CPU list such as 0-3,6"));
            }
            if let Some(bad) = cpus.iter().find(|&&c| c >= libc::CPU_SETSIZE as usize) {
                return Err(err(
                    "cpus",
                    bad,
                    format!("CPU numbers 0..={}", libc::CPU_SETSIZE - 1),
                ));
            }
        }
        Ok(())
    }

    /// The chord as the engine builds it.
    pub fn chord_layout(&self) -> ChordLayout {
        ChordLayout {
            notes: self.chord,
            chords: self.chords,
        }
    }

    /// Sets the chord and its count. A sine or burst count still at AudioPerfLab's
    /// default for the old chord (18 per chord; 75 % of the sine maximum) moves to
    /// the default for the new one, so the defaults stay derived as AudioPerfLab's are.
    pub fn set_chord_layout(&mut self, notes: ChordNotes, chords: usize) {
        let (old_sines, old_burst) = default_sines(self.chord_layout(), self.sample_rate);
        let new = ChordLayout { notes, chords };
        let (new_sines, new_burst) = default_sines(new, self.sample_rate);
        if self.sines == old_sines {
            self.sines = new_sines;
        }
        if self.burst_sines == old_burst {
            self.burst_sines = new_burst;
        }
        self.chord = notes;
        self.chords = chords;
    }

    /// AudioPerfLab's recommended thread count for these settings: the physical
    /// cores among `rt.cpus`, or among the CPUs this process may use.
    pub fn recommended_threads(&self) -> usize {
        recommended_threads(self.rt.cpus.as_deref()).min(limit::THREADS.max)
    }

    /// Sets the preset's fields; [`Preset::Custom`] changes nothing. Both presets
    /// use the recommended thread count, as AudioPerfLab's do.
    pub fn apply_preset(&mut self, preset: Preset) {
        let recommended = self.recommended_threads();
        match preset {
            Preset::Standard => {
                self.threads = recommended;
                self.driver_mode = DriverMode::ProcessesSines;
                self.work_interval = true;
                self.min_load_pct = 0.0;
                self.driver_spin_us = 0;
                self.busy.count = 0;
            }
            Preset::Optimal => {
                self.threads = recommended;
                self.driver_mode = DriverMode::WaitsForWorkers;
                self.work_interval = false;
                self.min_load_pct = 0.0;
                self.driver_spin_us = 0;
                self.busy = BusyConfig {
                    count: 1,
                    period_ms: 35,
                    duty_pct: 50.0,
                };
            }
            Preset::Custom => {}
        }
    }

    /// Which preset the settings match; anything else is [`Preset::Custom`].
    pub fn preset(&self) -> Preset {
        // A slowed kernel is a test hook, never a preset's workload.
        let common = self.threads == self.recommended_threads()
            && self.min_load_pct == 0.0
            && self.driver_spin_us == 0
            && self.kernel_slowdown == 1;
        if common
            && self.driver_mode == DriverMode::ProcessesSines
            && self.work_interval
            && self.busy.count == 0
        {
            Preset::Standard
        } else if common
            && self.driver_mode == DriverMode::WaitsForWorkers
            && !self.work_interval
            && self.busy
                == (BusyConfig {
                    count: 1,
                    period_ms: 35,
                    duty_pct: 50.0,
                })
        {
            Preset::Optimal
        } else {
            Preset::Custom
        }
    }

    /// Real-time threads the engine runs: processing threads, plus the driver when it only waits.
    pub fn realtime_threads(&self) -> usize {
        match self.driver_mode {
            DriverMode::ProcessesSines => self.threads,
            DriverMode::WaitsForWorkers => self.threads + 1,
        }
    }

    /// Worker threads the engine spawns (the driver thread belongs to the device).
    pub fn worker_threads(&self) -> usize {
        match self.driver_mode {
            DriverMode::ProcessesSines => self.threads - 1,
            DriverMode::WaitsForWorkers => self.threads,
        }
    }

    /// Whether going from `self` to `new` needs audio restarted; everything else applies live.
    pub fn needs_restart(&self, new: &EngineConfig) -> bool {
        self.sample_rate != new.sample_rate
            || self.buffer_frames != new.buffer_frames
            || self.chord != new.chord
            || self.chords != new.chords
            || self.threads != new.threads
            || self.driver_mode != new.driver_mode
            || self.work_interval != new.work_interval
            || self.rt != new.rt
            || self.input != new.input
            || self.kernel_slowdown != new.kernel_slowdown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_map_to_settings_and_back() {
        let mut c = EngineConfig::default();
        let n = recommended_threads(None);
        assert_eq!(c.threads, n, "presets use the recommended thread count");
        assert_eq!(c.preset(), Preset::Standard);
        c.apply_preset(Preset::Optimal);
        assert_eq!(c.preset(), Preset::Optimal);
        assert_eq!(
            (c.threads, c.driver_mode, c.work_interval),
            (n, DriverMode::WaitsForWorkers, false)
        );
        assert_eq!(
            c.busy,
            BusyConfig {
                count: 1,
                period_ms: 35,
                duty_pct: 50.0
            }
        );
        assert_eq!(c.realtime_threads(), n + 1);
        c.busy.duty_pct = 60.0;
        assert_eq!(c.preset(), Preset::Custom);
        c.apply_preset(Preset::Standard);
        assert_eq!(c.preset(), Preset::Standard);
        assert_eq!(
            (c.threads, c.driver_mode, c.work_interval, c.busy.count),
            (n, DriverMode::ProcessesSines, true, 0)
        );
        c.threads = n + 1;
        assert_eq!(c.preset(), Preset::Custom, "--threads overrides the preset");
        c.threads = n;
        c.min_load_pct = 10.0;
        assert_eq!(c.preset(), Preset::Custom);
        c.apply_preset(Preset::Custom);
        assert_eq!(c.min_load_pct, 10.0, "custom changes nothing");
        c.apply_preset(Preset::Standard);
        c.driver_spin_us = 50;
        assert_eq!(
            c.preset(),
            Preset::Custom,
            "a driver spin is not a preset's"
        );
        c.apply_preset(Preset::Optimal);
        assert_eq!(
            (c.driver_spin_us, c.preset()),
            (0, Preset::Optimal),
            "presets block at once, as AudioPerfLab's driver does"
        );
        assert_eq!(EngineConfig::default().driver_spin_us, 0);
        c.kernel_slowdown = 3;
        assert_eq!(
            c.preset(),
            Preset::Custom,
            "a slowed kernel never passes for a preset"
        );
        assert_eq!(EngineConfig::default().kernel_slowdown, 1);
    }

    #[test]
    fn validation_names_field_and_range() {
        let ok = EngineConfig::default();
        ok.validate().unwrap();
        type Mutation = Box<dyn Fn(&mut EngineConfig)>;
        let cases: Vec<(Mutation, &str, &str)> = vec![
            (
                Box::new(|c| c.sample_rate = 7_999),
                "sample_rate",
                "8000..=384000",
            ),
            (
                Box::new(|c| c.buffer_frames = 8_193),
                "buffer_frames",
                "16..=8192",
            ),
            (Box::new(|c| c.threads = 0), "threads", "1..=64"),
            (Box::new(|c| c.threads = 65), "threads", "1..=64"),
            (Box::new(|c| c.min_load_pct = 101.0), "min_load", "0..=100"),
            (
                Box::new(|c| c.min_load_pct = f32::NAN),
                "min_load",
                "0..=100",
            ),
            (Box::new(|c| c.busy.count = 5), "busy_threads", "0..=4"),
            (
                Box::new(|c| c.driver_spin_us = 1_001),
                "driver_spin_us",
                "0..=1000",
            ),
            (
                Box::new(|c| c.busy.period_ms = 4),
                "busy_period_ms",
                "5..=100",
            ),
            (Box::new(|c| c.sines = usize::MAX), "sines", "at 48000 Hz"),
            (Box::new(|c| c.chords = 0), "chords", "1..=256"),
            (
                Box::new(|c| c.kernel_slowdown = 0),
                "kernel_slowdown",
                "1..=16",
            ),
            (
                Box::new(|c| c.kernel_slowdown = 17),
                "kernel_slowdown",
                "1..=16",
            ),
        ];
        for (mutate, field, allowed) in cases {
            let mut c = ok.clone();
            mutate(&mut c);
            let e = c.validate().unwrap_err();
            assert_eq!(e.field, field);
            assert!(e.allowed.contains(allowed), "{e}");
        }
    }

    #[test]
    fn defaults_follow_audioperflab_one_chord_per_physical_core() {
        let c = EngineConfig::default();
        let n = recommended_threads(None);
        assert_eq!((c.chord, c.chords), (ChordNotes::Apl, n));
        assert_eq!(c.sines, 18 * n);
        let apl_max = 2058 * n;
        assert_eq!(c.chord_layout().apl_max_sines(48_000), apl_max);
        assert_eq!(c.burst_sines, (apl_max as f64 * 0.75).round() as usize);
        let mut old = c.clone();
        old.chord = ChordNotes::Apl2020;
        assert_eq!(old.chord_layout().apl_max_sines(48_000), 1717 * n);
        assert!(c.needs_restart(&old), "a chord change rebuilds the bank");
        let mut four = c.clone();
        four.set_chord_layout(ChordNotes::Apl, 4);
        assert_eq!(
            (four.sines, four.burst_sines),
            (72, 6174),
            "defaults follow"
        );
        let mut custom = c.clone();
        custom.sines = 500;
        custom.set_chord_layout(ChordNotes::Apl2020, 1);
        assert_eq!(
            (custom.sines, custom.burst_sines),
            (500, 1288),
            "a chosen count stays"
        );
    }

    #[test]
    fn limits_serialize_as_pairs_and_lists_stay_inside_their_ranges() {
        let l = Limits::get();
        let v = serde_json::to_value(&l).unwrap();
        assert_eq!(v["busy_period_ms"], serde_json::json!([5, 100]));
        assert_eq!(v["min_load_pct"], serde_json::json!([0.0, 100.0]));
        assert_eq!(l.busy_period_ms.to_string(), "5..=100 ms");
        assert_eq!(l.busy_count.to_string(), "0..=4");
        assert_eq!(l.buffer_sizes.first(), Some(&limit::BUFFER_FRAMES.min));
        assert_eq!(l.buffer_sizes.last(), Some(&limit::BUFFER_FRAMES.max));
        assert!(l.buffer_sizes.windows(2).all(|w| w[1] == 2 * w[0]));
        assert!(l.sample_rates.contains(&48_000));
        assert!(l.sample_rates.iter().all(|&r| l.sample_rate.contains(r)));
        assert!(!l.min_load_pct.contains(f32::NAN), "NaN is never in range");
    }

    #[test]
    fn live_and_restart_changes_are_told_apart() {
        let a = EngineConfig::default();
        let mut b = a.clone();
        b.sines = 500;
        b.min_load_pct = 30.0;
        b.busy.count = 2;
        b.driver_spin_us = 200;
        assert!(!a.needs_restart(&b));
        b.threads = 3;
        assert!(a.needs_restart(&b));
        let mut slowed = a.clone();
        slowed.kernel_slowdown = 3;
        assert!(
            a.needs_restart(&slowed),
            "the slowdown's scratch is built with the audio threads"
        );
    }
}
