//! The doctor's report: the findings with the options and roots they were made with, and its
//! readable text grouped by area. Built and printed on the main thread.

use crate::checks::{examine, Options};
use crate::finding::{Area, Counts, Finding, Status};
use crate::probe::Probes;
use crate::roots::Roots;
use serde::{Deserialize, Serialize};
use std::fmt::Write;

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
    /// Runs every check against `roots`.
    pub fn examine(roots: &Roots, probes: &Probes, options: Options) -> Report {
        let findings = examine(roots, probes, options);
        Report {
            options,
            roots: roots.clone(),
            probes: probes.clone(),
            counts: Counts::of(&findings),
            findings,
        }
    }

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
                let _ = writeln!(out, "  [{:<7}] {}: {}", f.status.label(), f.title, f.reason);
                if let Some(fix) = &f.fix {
                    let _ = writeln!(out, "            fix:  {fix}");
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
