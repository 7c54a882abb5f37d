//! The doctor's result file (schema [`SCHEMA`]): the report of every check (findings with
//! status, reason, fix and source, grouped by area; the options, roots and syscall probes they
//! were made with), the `--measure` result ([`crate::doctor_measure`]) and what `--apply` did;
//! written by the binary through [`crate::write::write_json`] and read back typed
//! ([`read_doctor`]). The doctor crate makes the findings and re-exports these types. Main
//! thread.

use crate::doctor_measure::MeasureReport;
use crate::read::{read_typed, ReadError};
use serde::{Deserialize, Serialize};
use std::fmt::Write;
use std::path::{Path, PathBuf};
use xrunlab_sys::{Outcome, Provenance};

/// Version of the doctor's result layout; bump on incompatible change.
pub const SCHEMA: &str = "xrunlab.doctor/1";

/// How a finding bears on low-latency audio.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Fine as it is.
    Pass,
    /// Likely to cost latency or cause dropouts; the fix says what to change.
    Warn,
    /// Low-latency audio will not work well until this is fixed.
    Fail,
    /// The fact could not be read (missing, unreadable or malformed file); the reason says which.
    Unknown,
}

impl Status {
    /// The word the report prints.
    pub fn label(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
            Status::Unknown => "unknown",
        }
    }
}

/// The part of the system a finding is about; the report groups findings by area.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Area {
    /// Real-time scheduling and the limits that grant it.
    Realtime,
    /// The kernel: preemption, interrupts, timers, throttling.
    Kernel,
    /// CPU frequency, SMT, idle states, energy.
    CpuPower,
    /// Memory, mitigations, uclamp, filesystems.
    System,
    /// Interrupt lines of sound and USB controllers.
    Irqs,
    /// JACK, PipeWire and their configuration.
    AudioServers,
    /// Kernel tracing for dropout forensics.
    Tracing,
}

impl Area {
    /// Every area, in report order.
    pub const ALL: [Area; 7] = [
        Area::Realtime,
        Area::Kernel,
        Area::CpuPower,
        Area::System,
        Area::Irqs,
        Area::AudioServers,
        Area::Tracing,
    ];

    /// The heading the report prints.
    pub fn title(self) -> &'static str {
        match self {
            Area::Realtime => "Real-time scheduling",
            Area::Kernel => "Kernel",
            Area::CpuPower => "CPU and power",
            Area::System => "Memory, mitigations, uclamp",
            Area::Irqs => "Interrupts",
            Area::AudioServers => "Audio servers",
            Area::Tracing => "Tracing",
        }
    }
}

/// One checked fact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// Stable identifier for scripts, e.g. "cpu.governor".
    pub id: String,
    /// The area it belongs to.
    pub area: Area,
    /// What was checked, e.g. "CPU frequency governor".
    pub title: String,
    /// The verdict.
    pub status: Status,
    /// Why, with the values read.
    pub reason: String,
    /// The exact command or configuration line that fixes it; `None` when nothing needs fixing
    /// or nothing can be done from this machine.
    pub fix: Option<String>,
    /// Where the fact came from: the file(s) read or the syscall tried.
    pub source: String,
}

impl Finding {
    /// A finding without a fix.
    pub fn new(
        id: &str,
        area: Area,
        title: &str,
        status: Status,
        reason: impl Into<String>,
        source: impl Into<String>,
    ) -> Finding {
        Finding {
            id: id.to_owned(),
            area,
            title: title.to_owned(),
            status,
            reason: reason.into(),
            fix: None,
            source: source.into(),
        }
    }

    /// The same finding with a fix.
    pub fn with_fix(mut self, fix: impl Into<String>) -> Finding {
        self.fix = Some(fix.into());
        self
    }
}

/// How many findings have each status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Findings that pass.
    pub pass: usize,
    /// Warnings.
    pub warn: usize,
    /// Failures.
    pub fail: usize,
    /// Facts that could not be read.
    pub unknown: usize,
}

impl Counts {
    /// Counts the statuses of `findings`.
    pub fn of(findings: &[Finding]) -> Counts {
        let mut c = Counts::default();
        for f in findings {
            match f.status {
                Status::Pass => c.pass += 1,
                Status::Warn => c.warn += 1,
                Status::Fail => c.fail += 1,
                Status::Unknown => c.unknown += 1,
            }
        }
        c
    }
}

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

/// The three trees the checks read. On a live system: "/proc", "/sys" and "/".
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Roots {
    /// procfs.
    pub proc: PathBuf,
    /// sysfs.
    pub sys: PathBuf,
    /// The filesystem root holding etc/, boot/, usr/, dev/.
    pub fs: PathBuf,
}

impl Roots {
    /// The running system's trees.
    pub fn live() -> Roots {
        Roots {
            proc: PathBuf::from(xrunlab_sys::DEFAULT_PROC_ROOT),
            sys: PathBuf::from(xrunlab_sys::DEFAULT_SYS_ROOT),
            fs: PathBuf::from("/"),
        }
    }

    /// True when every root is the live system's.
    pub fn is_live(&self) -> bool {
        *self == Roots::live()
    }

    /// A path under procfs, e.g. `proc("sys/kernel/sched_rt_runtime_us")`.
    pub fn proc(&self, rel: &str) -> PathBuf {
        self.proc.join(rel)
    }

    /// A path under sysfs, e.g. `sys("kernel/realtime")`.
    pub fn sys(&self, rel: &str) -> PathBuf {
        self.sys.join(rel)
    }

    /// A path under the filesystem root, e.g. `fs("etc/group")`.
    pub fn fs(&self, rel: &str) -> PathBuf {
        self.fs.join(rel)
    }
}

/// What the syscall probes found. Tests build one by hand to stand for another machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Probes {
    /// The highest SCHED_FIFO priority a scratch thread obtained; `None` when none could be set.
    pub fifo_max_priority: Option<u8>,
    /// What the kernel said to each priority tried, highest first, e.g. "99: EPERM: ...".
    pub fifo_attempts: Vec<String>,
    /// What a scratch thread got for uclamp_min 512.
    pub uclamp: Outcome,
    /// Where `xrunlab record` would keep its history for this process (the history crate's
    /// `default_path`: the service's state directory, /var/lib/xrunlab for root, else the
    /// user's XDG state directory); `None` when there is no place for it (no HOME).
    #[serde(default)]
    pub history: Option<PathBuf>,
}

/// Everything the checks found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The audio setup checked for.
    pub options: Options,
    /// The trees read.
    pub roots: Roots,
    /// What the syscall probes found.
    pub probes: Probes,
    /// Every finding, grouped by area in report order.
    pub findings: Vec<Finding>,
    /// How many findings have each status.
    pub counts: Counts,
}

impl Report {
    /// True when any finding fails.
    pub fn failed(&self) -> bool {
        self.counts.fail > 0
    }

    /// The finding with `id`, if any.
    pub fn get(&self, id: &str) -> Option<&Finding> {
        self.findings.iter().find(|f| f.id == id)
    }

    /// The readable report: a heading per area, one entry per finding with its fix and source.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let o = &self.options;
        let _ = writeln!(
            out,
            "xrunlab doctor: checked for {} frames at {} Hz ({:.0} us per buffer), audio threads at SCHED_FIFO {}",
            o.buffer_frames,
            o.sample_rate,
            o.period_us(),
            o.audio_priority
        );
        if !self.roots.is_live() {
            let _ = writeln!(
                out,
                "(reading proc from {}, sys from {}, files from {})",
                self.roots.proc.display(),
                self.roots.sys.display(),
                self.roots.fs.display()
            );
        }
        for area in Area::ALL {
            let findings: Vec<&Finding> = self.findings.iter().filter(|f| f.area == area).collect();
            if findings.is_empty() {
                continue;
            }
            let _ = writeln!(out, "\n{}", area.title());
            for f in findings {
                // A reason can quote what other programs chose (a process's command line, a
                // file's text): its control characters are escaped; the JSON keeps them raw.
                let reason = xrunlab_sys::printable(&f.reason);
                let _ = writeln!(out, "  [{:<7}] {}: {reason}", f.status.label(), f.title);
                if let Some(fix) = &f.fix {
                    let _ = writeln!(out, "            fix:  {}", xrunlab_sys::printable(fix));
                }
                let _ = writeln!(out, "            from: {}  ({})", f.source, f.id);
            }
        }
        let c = self.counts;
        let _ = writeln!(
            out,
            "\n{} pass, {} warn, {} fail, {} unknown{}",
            c.pass,
            c.warn,
            c.fail,
            c.unknown,
            if c.fail > 0 { " (exit status 1)" } else { "" }
        );
        out
    }
}

impl Status {
    /// Whether this status asks for action.
    pub fn needs_action(self) -> bool {
        matches!(self, Status::Warn | Status::Fail)
    }
}

/// One file changed by an applied setting.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Change {
    /// The file written.
    pub path: PathBuf,
    /// Its value before.
    pub old: String,
    /// The value written.
    pub new: String,
}

/// What `--apply` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppliedInfo {
    /// The setting's name on the command line ("governor", "rt-runtime").
    pub setting: String,
    /// What it does.
    pub description: String,
    /// The files written.
    pub changes: Vec<Change>,
    /// "undone on exit", "kept (--keep)", or why the undo failed.
    pub end: String,
}

/// The doctor's result file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DoctorResult {
    /// [`SCHEMA`].
    pub schema: String,
    /// Where it came from.
    pub provenance: Provenance,
    /// Every check's finding.
    pub report: Report,
    /// `--measure`'s toggles.
    pub measure: Option<MeasureReport>,
    /// `--apply`'s setting.
    pub applied: Option<AppliedInfo>,
    /// 0 when nothing fails, 1 otherwise.
    pub exit_status: u8,
}

/// Reads a doctor result file back; a field that does not fit is named.
pub fn read_doctor(path: &Path) -> Result<DoctorResult, ReadError> {
    read_typed(path, SCHEMA)
}
