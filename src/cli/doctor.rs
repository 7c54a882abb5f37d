//! `doctor`'s arguments; parsed on the main thread.

use super::parse::{parse_duration, parse_setting, within};
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;
use xrunlab_engine::config::limit;

#[derive(Debug, Args)]
pub struct DoctorArgs {
    #[arg(long, value_name = "FRAMES", default_value_t = 128,
          value_parser = within(limit::BUFFER_FRAMES),
          help = format!("Buffer size the checks and measurements assume, {}", limit::BUFFER_FRAMES))]
    pub buffer: u32,
    #[arg(long, value_name = "HZ", default_value_t = 48_000,
          value_parser = within(limit::SAMPLE_RATE),
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
