//! An experiment's file read back as its kind's type, whichever kind it is
//! ([`ExperimentFile`], [`parse_experiment`]): the enum over every experiment, apart from the
//! envelope they share ([`crate::lab`]), which each experiment's own module imports. Read by
//! `compare` and `report` on the main thread.

use crate::histogram::EncodedHistogram;
use crate::lab::{kind_of, parse_lab, LabResult, Params, SCHEMA};
use crate::read::{parse_typed, ReadError};
use std::path::Path;
use xrunlab_sys::Fingerprint;

/// An experiment's file read back as its kind's type (`probe wakeup`, compared on its own, has
/// its own reader, [`crate::wakeup::parse_wakeup`]).
#[derive(Debug, Clone)]
pub enum ExperimentFile {
    /// `probe sleep`.
    Sleep(LabResult<crate::sleep::SleepResult>),
    /// `probe placement`.
    Placement(LabResult<crate::placement::PlacementResult>),
    /// `sweep threads`.
    Threads(LabResult<crate::sweep::ThreadsResult>),
    /// `sweep buffer`.
    Buffer(LabResult<crate::sweep::BufferResult>),
    /// `capacity`.
    Capacity(LabResult<crate::capacity::CapacityResult>),
}

/// The kinds [`parse_experiment`] reads.
pub const EXPERIMENT_KINDS: &[&str] = &[
    crate::sleep::KIND,
    crate::placement::KIND,
    crate::sweep::THREADS_KIND,
    crate::sweep::BUFFER_KIND,
    crate::capacity::KIND,
];

/// Calls `$body` with the envelope of whichever experiment `$e` holds, bound to `$r`.
macro_rules! each_kind {
    ($e:expr, $r:ident => $body:expr) => {
        match $e {
            ExperimentFile::Sleep($r) => $body,
            ExperimentFile::Placement($r) => $body,
            ExperimentFile::Threads($r) => $body,
            ExperimentFile::Buffer($r) => $body,
            ExperimentFile::Capacity($r) => $body,
        }
    };
}

impl ExperimentFile {
    /// The experiment's kind, e.g. "capacity".
    pub fn kind(&self) -> &str {
        each_kind!(self, r => &r.kind)
    }

    /// The machine it ran on.
    pub fn fingerprint(&self) -> &Fingerprint {
        each_kind!(self, r => &r.fingerprint)
    }

    /// Its settings.
    pub fn params(&self) -> &Params {
        each_kind!(self, r => &r.result.params)
    }

    /// Whether it was stopped before every point was measured.
    pub fn incomplete(&self) -> bool {
        each_kind!(self, r => r.incomplete)
    }
}

impl ExperimentFile {
    /// Every distribution the experiment kept, with the series name of its point or thread,
    /// in the file's order.
    pub fn kept(&self) -> Vec<(&'static str, String, &EncodedHistogram)> {
        let mut out = Vec::new();
        match self {
            ExperimentFile::Sleep(r) => {
                for q in &r.result.points {
                    out.push(("oversleep", q.label(), &q.oversleep_us));
                }
            }
            ExperimentFile::Placement(r) => {
                for t in &r.result.threads {
                    out.push(("buffer time", format!("thread {}", t.index), &t.buffer_us));
                }
            }
            ExperimentFile::Threads(r) => {
                for q in &r.result.points {
                    out.push(("step time", q.label(), &q.step_us));
                }
            }
            ExperimentFile::Buffer(r) => {
                for q in &r.result.points {
                    let (name, h) = (q.label(), &q.histograms);
                    out.push(("load", name.clone(), &h.load_pct));
                    out.push(("driver wake-up", name, &h.driver_wake_latency_us));
                }
            }
            ExperimentFile::Capacity(r) => {
                for q in &r.result.points {
                    if let Some(h) = &q.histograms {
                        let name = q.label();
                        out.push(("load at capacity", name.clone(), &h.load_pct));
                        out.push((
                            "driver wake-up at capacity",
                            name,
                            &h.driver_wake_latency_us,
                        ));
                    }
                }
            }
        }
        out
    }
}

/// Reads `text` (from `path`) as whichever experiment its `kind` names; a kind without a
/// reader here is refused naming the field `kind`.
pub fn parse_experiment(path: &Path, text: &str) -> Result<ExperimentFile, ReadError> {
    let kind = kind_of(text).unwrap_or_default();
    let e = match kind.as_str() {
        crate::sleep::KIND => ExperimentFile::Sleep(parse_lab(path, text, &kind)?),
        crate::placement::KIND => ExperimentFile::Placement(parse_lab(path, text, &kind)?),
        crate::sweep::THREADS_KIND => ExperimentFile::Threads(parse_lab(path, text, &kind)?),
        crate::sweep::BUFFER_KIND => ExperimentFile::Buffer(parse_lab(path, text, &kind)?),
        crate::capacity::KIND => ExperimentFile::Capacity(parse_lab(path, text, &kind)?),
        // Not an experiment file at all (another schema, not JSON): the typed read says why.
        "" => {
            return parse_typed::<LabResult<serde_json::Value>>(path, text, SCHEMA)
                .and_then(|_| Err(ReadError::new(path, "kind", "missing")))
        }
        other => {
            return Err(ReadError::new(
                path,
                "kind",
                format!("is {other:?}; allowed {}", EXPERIMENT_KINDS.join(", ")),
            ))
        }
    };
    Ok(e)
}
