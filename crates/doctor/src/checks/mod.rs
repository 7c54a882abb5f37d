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

pub use xrunlab_results::doctor::Options;

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
