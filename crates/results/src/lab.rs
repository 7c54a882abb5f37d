//! The experiments' result files (schema [`SCHEMA`], one kind per experiment): the envelope that
//! every `probe`, `sweep` and `capacity` result shares ([`LabResult`]), the scheduling a measuring
//! thread obtained ([`SchedObtained`]), and reading a file back as one kind's type, naming the file
//! and the field of what does not fit. Written by the lab experiments through the binary, read by
//! `compare` and `report`, on the main thread.

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
pub struct SchedObtained {
    /// Kernel thread id.
    pub tid: i32,
    /// The class asked for.
    pub requested: String,
    /// Whether the class took effect, or what runs instead.
    pub class: Outcome,
    /// Whether pinning took effect.
    pub affinity: Outcome,
}

impl SchedObtained {
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
