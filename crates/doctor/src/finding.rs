//! A finding: one checked fact about the machine, with its status, reason, fix and source.
//! Plain data, built by the checks on the calling (main) thread.

use serde::{Deserialize, Serialize};

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

/// One check's identity: it makes that check's findings, each with its status, reason and
/// source, so a check names its id, area and title once.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Check<'a> {
    id: &'a str,
    area: Area,
    title: &'a str,
}

impl<'a> Check<'a> {
    /// The check `id` ("cpu.governor") of `area`, titled `title`.
    pub(crate) const fn new(id: &'a str, area: Area, title: &'a str) -> Check<'a> {
        Check { id, area, title }
    }

    /// Its finding with this status.
    pub(crate) fn finding(
        &self,
        status: Status,
        reason: impl Into<String>,
        source: impl Into<String>,
    ) -> Finding {
        Finding::new(self.id, self.area, self.title, status, reason, source)
    }

    /// It passes.
    pub(crate) fn pass(&self, reason: impl Into<String>, source: impl Into<String>) -> Finding {
        self.finding(Status::Pass, reason, source)
    }

    /// A warning.
    pub(crate) fn warn(&self, reason: impl Into<String>, source: impl Into<String>) -> Finding {
        self.finding(Status::Warn, reason, source)
    }

    /// A failure.
    pub(crate) fn fail(&self, reason: impl Into<String>, source: impl Into<String>) -> Finding {
        self.finding(Status::Fail, reason, source)
    }

    /// The fact could not be read.
    pub(crate) fn unknown(&self, reason: impl Into<String>, source: impl Into<String>) -> Finding {
        self.finding(Status::Unknown, reason, source)
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
