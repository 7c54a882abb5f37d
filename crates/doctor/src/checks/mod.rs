//! The checks, one module per area. Each reads its facts through a shared `Ctx` (the roots,
//! the syscall probes, and the facts several checks need, read once) and returns findings.
//! Runs on the main thread.

mod audio;
mod kernel;
mod power;
mod realtime;
mod system;
mod tracing;

pub(crate) mod irqs;

pub use tracing::EVENTS as TRACE_EVENTS;

use crate::finding::Finding;
use crate::kconfig::{KconfigError, KernelConfig};
use crate::probe::Probes;
use crate::process::{parse_groups, user_name, Cmdline, Group, ProcessStatus};
use crate::roots::{read, ReadError, Roots};
use serde::{Deserialize, Serialize};

/// What the audio setup being checked for looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Options {
    /// Buffer size in frames (idle-state exit latencies and PipeWire's quantum are compared
    /// with it).
    pub buffer_frames: u32,
    /// Sample rate in Hz.
    pub sample_rate: u32,
    /// The SCHED_FIFO priority audio threads run at (xrunlab's default is 70).
    pub audio_priority: u8,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            buffer_frames: 128,
            sample_rate: 48_000,
            audio_priority: 70,
        }
    }
}

impl Options {
    /// One buffer's duration in microseconds.
    pub fn period_us(&self) -> f64 {
        f64::from(self.buffer_frames) * 1e6 / f64::from(self.sample_rate.max(1))
    }
}

/// Facts several checks share, read once.
pub(crate) struct Ctx<'a> {
    pub roots: &'a Roots,
    pub probes: &'a Probes,
    pub opts: Options,
    pub process: Result<ProcessStatus, ReadError>,
    pub limits: Result<String, ReadError>,
    pub cmdline: Result<Cmdline, ReadError>,
    pub kconfig: Result<KernelConfig, KconfigError>,
    pub groups: Result<Vec<Group>, ReadError>,
    /// The user name of the effective uid, when /etc/passwd knows it.
    pub user: Option<String>,
    /// Running processes: (pid, comm).
    pub processes: Vec<(u32, String)>,
    /// /sys/kernel/realtime is 1.
    pub preempt_rt: bool,
}

impl<'a> Ctx<'a> {
    pub fn new(roots: &'a Roots, probes: &'a Probes, opts: Options) -> Ctx<'a> {
        let process = ProcessStatus::read(roots);
        let user = process
            .as_ref()
            .ok()
            .and_then(|p| user_name(&read(&roots.fs("etc/passwd")).ok()?, p.uid));
        Ctx {
            roots,
            probes,
            opts,
            limits: read(&roots.proc("self/limits")),
            cmdline: read(&roots.proc("cmdline")).map(|t| Cmdline::parse(&t)),
            kconfig: KernelConfig::load(roots),
            groups: read(&roots.fs("etc/group")).map(|t| parse_groups(&t)),
            user,
            processes: processes(roots),
            preempt_rt: read(&roots.sys("kernel/realtime")).is_ok_and(|t| t.trim() == "1"),
            process,
        }
    }

    /// The user's name for messages and fixes: the passwd name, else "uid N", else "$USER".
    pub fn user_label(&self) -> String {
        match (&self.user, &self.process) {
            (Some(name), _) => name.clone(),
            (None, Ok(p)) => format!("uid {}", p.uid),
            (None, Err(_)) => "$USER".to_owned(),
        }
    }

    /// Whether a process whose comm is one of `names` runs; the first one's pid.
    pub fn running(&self, names: &[&str]) -> Option<(u32, &str)> {
        self.processes
            .iter()
            .find(|(_, comm)| names.contains(&comm.as_str()))
            .map(|(pid, comm)| (*pid, comm.as_str()))
    }
}

/// Every process in `proc` with its comm.
fn processes(roots: &Roots) -> Vec<(u32, String)> {
    let mut out: Vec<(u32, String)> = std::fs::read_dir(&roots.proc)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
            Some((pid, comm.trim().to_owned()))
        })
        .collect();
    out.sort_unstable();
    out
}

/// Runs every check.
pub fn examine(roots: &Roots, probes: &Probes, opts: Options) -> Vec<Finding> {
    let ctx = Ctx::new(roots, probes, opts);
    let mut out = Vec::new();
    out.extend(realtime::check(&ctx));
    out.extend(kernel::check(&ctx));
    out.extend(power::check(&ctx));
    out.extend(system::check(&ctx));
    out.extend(irqs::check(&ctx));
    out.extend(audio::check(&ctx));
    out.extend(tracing::check(&ctx));
    out
}

/// The command that adds a kernel command-line word on Debian-like systems (GRUB).
pub(crate) fn cmdline_fix(word: &str) -> String {
    format!(
        "add {word} to GRUB_CMDLINE_LINUX_DEFAULT in /etc/default/grub, then run \
         `sudo update-grub` and reboot"
    )
}
