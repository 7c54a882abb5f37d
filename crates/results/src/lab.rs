//! The experiments' result files (schema [`SCHEMA`], one kind per experiment): the envelope
//! that every `probe`, `sweep` and `capacity` result shares ([`LabResult`]), the scheduling a
//! measuring thread obtained ([`Applied`]), and reading a file back as one kind's type, naming
//! the file and the field of what does not fit. Written by the lab experiments through the
//! binary, read by `compare` and `report`, on the main thread.

use crate::histogram::EncodedHistogram;
use crate::read::{parse_typed, ReadError};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::path::Path;
use xrunlab_sys::{Fingerprint, Outcome, Provenance};

/// Version of the experiments' result layout; bump on incompatible change (2: every
/// experiment keeps its distributions as HdrHistograms).
pub const SCHEMA: &str = "xrunlab.lab/2";

/// An experiment's settings as a reader gets them: the experiment's own parameter type is
/// the writer's (it validates them); readers compare them setting by setting.
pub type Params = serde_json::Map<String, serde_json::Value>;

/// The JSON file of an experiment.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LabResult<T> {
    /// [`SCHEMA`].
    pub schema: String,
    /// The experiment, e.g. "probe.wakeup" (each experiment's module has its `KIND`).
    pub kind: String,
    /// Version, command line, kernel, CPU, governor, start and end time (as `run`).
    pub provenance: Provenance,
    /// The machine as the experiment found it (boot parameters, power and idle settings, VM and
    /// the steal over the experiment), as `run` records it, for `compare`'s fingerprint diff.
    pub fingerprint: Fingerprint,
    /// Whether `--quick` (short, noisier) settings were used.
    pub quick: bool,
    /// True when the experiment was stopped before every point was measured; the points here
    /// are the finished ones.
    pub incomplete: bool,
    /// Why it ended.
    pub end_reason: String,
    /// What did not take effect and what was used instead.
    pub warnings: Vec<String>,
    /// The experiment's figures.
    pub result: T,
}

/// What a measuring thread's scheduling request obtained.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Applied {
    /// Kernel thread id.
    pub tid: i32,
    /// The class asked for.
    pub requested: String,
    /// Whether the class took effect, or what runs instead.
    pub class: Outcome,
    /// Whether pinning took effect.
    pub affinity: Outcome,
}

impl Applied {
    /// A warning line when the class or the pinning was refused.
    pub fn warning(&self, who: &str) -> Option<String> {
        for (what, o) in [
            ("scheduling class", &self.class),
            ("affinity", &self.affinity),
        ] {
            if let Outcome::Refused { reason, fallback } = o {
                return Some(format!(
                    "{who}: {what} {} refused ({reason}); running with {fallback}",
                    self.requested
                ));
            }
        }
        None
    }
}

/// The `kind` of an experiment file's text, when it is one (JSON with [`SCHEMA`]).
pub fn kind_of(text: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    if v.get("schema")?.as_str()? != SCHEMA {
        return None;
    }
    v.get("kind")?.as_str().map(str::to_owned)
}

/// Refuses an experiment file of another kind than `kind`, naming the field `kind`. Text that
/// is not an experiment file passes: the typed read names what is wrong with it.
pub fn check_kind(path: &Path, text: &str, kind: &str) -> Result<(), ReadError> {
    match kind_of(text) {
        Some(other) if other != kind => Err(ReadError::new(
            path,
            "kind",
            format!("is {other:?}; expected a {kind:?} result"),
        )),
        _ => Ok(()),
    }
}

/// Reads `text` (from `path`) as the experiment `kind` whose figures are a `T`.
pub fn parse_lab<T: DeserializeOwned>(
    path: &Path,
    text: &str,
    kind: &str,
) -> Result<LabResult<T>, ReadError> {
    check_kind(path, text, kind)?;
    parse_typed(path, text, SCHEMA)
}

/// An experiment's file read back as its kind's type (`probe wakeup`, compared on its own, has
/// its own reader, [`crate::probe::parse_wakeup`]).
#[derive(Debug, Clone)]
pub enum Experiment {
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
            Experiment::Sleep($r) => $body,
            Experiment::Placement($r) => $body,
            Experiment::Threads($r) => $body,
            Experiment::Buffer($r) => $body,
            Experiment::Capacity($r) => $body,
        }
    };
}

impl Experiment {
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

impl Experiment {
    /// Every distribution the experiment kept, with the series name of its point or thread,
    /// in the file's order.
    pub fn kept(&self) -> Vec<(&'static str, String, &EncodedHistogram)> {
        let mut out = Vec::new();
        match self {
            Experiment::Sleep(r) => {
                for q in &r.result.points {
                    out.push(("oversleep", q.label(), &q.oversleep_us));
                }
            }
            Experiment::Placement(r) => {
                for t in &r.result.threads {
                    out.push(("buffer time", format!("thread {}", t.index), &t.buffer_us));
                }
            }
            Experiment::Threads(r) => {
                for q in &r.result.points {
                    out.push(("step time", q.label(), &q.step_us));
                }
            }
            Experiment::Buffer(r) => {
                for q in &r.result.points {
                    let (name, h) = (q.label(), &q.histograms);
                    out.push(("load", name.clone(), &h.load_pct));
                    out.push(("driver wake-up", name, &h.driver_wake_latency_us));
                }
            }
            Experiment::Capacity(r) => {
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
pub fn parse_experiment(path: &Path, text: &str) -> Result<Experiment, ReadError> {
    let kind = kind_of(text).unwrap_or_default();
    let e = match kind.as_str() {
        crate::sleep::KIND => Experiment::Sleep(parse_lab(path, text, &kind)?),
        crate::placement::KIND => Experiment::Placement(parse_lab(path, text, &kind)?),
        crate::sweep::THREADS_KIND => Experiment::Threads(parse_lab(path, text, &kind)?),
        crate::sweep::BUFFER_KIND => Experiment::Buffer(parse_lab(path, text, &kind)?),
        crate::capacity::KIND => Experiment::Capacity(parse_lab(path, text, &kind)?),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_kind_is_refused_naming_the_field() {
        let text = r#"{"schema":"xrunlab.lab/2","kind":"sweep.buffer"}"#;
        let e = parse_lab::<serde_json::Value>(Path::new("x.json"), text, "capacity").unwrap_err();
        assert_eq!(e.field, "kind");
        assert!(e.problem.contains("sweep.buffer"), "{e}");
        let e =
            parse_lab::<serde_json::Value>(Path::new("x.json"), "{\"schema\": \"xr", "capacity")
                .unwrap_err();
        assert_eq!(e.field, "(file)");
    }
}
