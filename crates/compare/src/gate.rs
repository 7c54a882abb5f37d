//! The gate: which metrics get a verdict. A verdict on every one of a dozen metrics would call
//! some difference on identical sides in one comparison of four, and a correction over all of
//! them would leave a small number of runs no power; so only the gated metrics are judged, and
//! their intervals hold together (Bonferroni over the gate). The user names them
//! (`--gate load.p50,driver_wake.p99`); each kind of result has a default. Main thread.

use crate::analyse::{CompareError, Options};
use crate::judge::How;

/// The gate of run results when the user names none: the load's median and its p99, what a
/// change to the DSP or the scheduling moves first.
pub const RUN_DEFAULT: &[&str] = &["load p50", "load p99"];

/// The gate of `probe wakeup` results when the user names none.
pub const PROBE_DEFAULT: &[&str] = &["wake-up p50", "wake-up p99"];

/// A metric name as printed ("driver wake-up p99.9") or typed ("driver_wake.p99.9") reduced to
/// one spelling: lower case, "-up" dropped, spaces and underscores as dots.
pub fn key(name: &str) -> String {
    name.trim()
        .to_lowercase()
        .replace("-up", "")
        .replace([' ', '_'], ".")
}

/// An extreme (a maximum): one sample of each run, whose spread no test on a few runs can
/// model, so it is shown and never judged.
pub fn is_extreme(name: &str) -> bool {
    name.ends_with(" max")
}

/// The gated metrics among the table's rows `names`, in the table's order: the ones `wanted`
/// names, or `default`'s (`None`: every row that is not an extreme). A name that is no row, or
/// an extreme, is an error saying what is allowed.
pub(crate) fn resolve(
    names: &[String],
    wanted: Option<&[String]>,
    default: Option<&[&str]>,
) -> Result<Vec<String>, CompareError> {
    let allowed: Vec<&String> = names.iter().filter(|n| !is_extreme(n)).collect();
    let Some(wanted) = wanted else {
        return Ok(allowed
            .into_iter()
            .filter(|n| default.is_none_or(|d| d.iter().any(|x| key(x) == key(n))))
            .cloned()
            .collect());
    };
    let spelled = || {
        allowed
            .iter()
            .map(|n| key(n))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if wanted.is_empty() {
        return Err(CompareError::Gate(format!(
            "invalid --gate: it names no metric (allowed: {})",
            spelled()
        )));
    }
    for w in wanted {
        if names.iter().any(|n| is_extreme(n) && key(n) == key(w)) {
            return Err(CompareError::Gate(format!(
                "invalid --gate {w}: a maximum is one sample a run, which no test over a few \
                 runs can judge (allowed: {})",
                spelled()
            )));
        }
        if !allowed.iter().any(|n| key(n) == key(w)) {
            return Err(CompareError::Gate(format!(
                "invalid --gate {w}: no such metric in these results (allowed: {})",
                spelled()
            )));
        }
    }
    Ok(allowed
        .into_iter()
        .filter(|n| wanted.iter().any(|w| key(w) == key(n)))
        .cloned()
        .collect())
}

/// How every metric of one comparison is judged: the gate, and the chance of a false verdict
/// each gated metric may take (Bonferroni: the options' α shared evenly).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Plan {
    /// The gated metrics' names.
    pub gated: Vec<String>,
    /// Each gated metric's α.
    pub alpha_each: f64,
    /// The options' pairing and margin.
    pub paired: bool,
    /// A change within ± this many percent counts as none.
    pub margin_pct: f64,
}

impl Plan {
    /// The gate over the table's rows `names`, as `options` ask (`default` as in [`resolve`]).
    pub fn new(
        names: &[String],
        options: &Options,
        default: Option<&[&str]>,
    ) -> Result<Plan, CompareError> {
        let gated = resolve(names, options.gate.as_deref(), default)?;
        Ok(Plan {
            alpha_each: options.alpha / gated.len().max(1) as f64,
            gated,
            paired: options.paired,
            margin_pct: options.margin_pct,
        })
    }

    /// How metric `name` is judged.
    pub fn how(&self, name: &str) -> How {
        How {
            paired: self.paired,
            gated: self
                .gated
                .iter()
                .any(|g| g == name)
                .then_some(self.alpha_each),
            margin_pct: self.margin_pct,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Vec<String> {
        [
            "load p50",
            "load p99",
            "load max",
            "driver wake-up p99",
            "dropouts per hour",
        ]
        .map(String::from)
        .to_vec()
    }

    #[test]
    fn typed_and_printed_names_meet() {
        assert_eq!(key("driver_wake.p99"), key("driver wake-up p99"));
        assert_eq!(key("Load.P50"), "load.p50");
        assert_eq!(key("dropouts_per_hour"), key("dropouts per hour"));
    }

    #[test]
    fn the_gate_is_the_named_metrics_or_the_default_and_never_a_maximum() {
        let n = names();
        assert_eq!(
            resolve(&n, None, Some(RUN_DEFAULT)).unwrap(),
            ["load p50", "load p99"]
        );
        assert_eq!(
            resolve(&n, None, None).unwrap(),
            [
                "load p50",
                "load p99",
                "driver wake-up p99",
                "dropouts per hour"
            ]
        );
        let wanted = ["driver_wake.p99".to_owned(), "load.p50".to_owned()];
        assert_eq!(
            resolve(&n, Some(&wanted), None).unwrap(),
            ["load p50", "driver wake-up p99"]
        );
        let e = resolve(&n, Some(&["load.max".to_owned()]), None).unwrap_err();
        assert!(e.to_string().contains("--gate load.max: a maximum"), "{e}");
        let e = resolve(&n, Some(&["load.p90".to_owned()]), None).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("no such metric"), "{text}");
        assert!(
            text.contains("allowed: load.p50, load.p99, driver.wake.p99"),
            "{text}"
        );
        assert!(resolve(&n, Some(&[]), None).is_err());
    }
}
