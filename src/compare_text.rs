//! The words of a compare result: what differs between the machines on top, then one line per
//! metric (both sides, the change with its interval, the verdict and its chance under noise),
//! the notes, and a row per machine; runs on the main thread.

use std::fmt::Write;
use xrunlab_results::compare::{
    CompareResult, FingerprintChange, Method, MetricComparison, Verdict,
};

fn change_words(c: &FingerprintChange) -> String {
    let field = c.field.replace('_', " ");
    let side = |v: &[String]| v.join(" / ");
    match (side(&c.a).as_str(), side(&c.b).as_str()) {
        ("false", "true") => format!("{field} added"),
        ("true", "false") => format!("{field} removed"),
        (a, b) => format!("{field} {a} → {b}"),
    }
}

fn number(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// The text `compare` prints.
pub fn render(r: &CompareResult) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "A: {} file(s)   B: {} file(s)",
        r.a_files.len(),
        r.b_files.len()
    );
    if r.fingerprint_diff.is_empty() {
        let _ = writeln!(
            s,
            "what differs between A and B: nothing in the machine fingerprints"
        );
    } else {
        let words: Vec<String> = r.fingerprint_diff.iter().map(change_words).collect();
        let _ = writeln!(s, "what differs between A and B: {}", words.join(", "));
    }
    if !r.workload_diff.is_empty() {
        let words: Vec<String> = r.workload_diff.iter().map(change_words).collect();
        let _ = writeln!(
            s,
            "workloads differ (compared anyway): {}",
            words.join(", ")
        );
    }
    let any_higher = r.metrics.iter().any(|m| m.higher_is_better);
    let label = |m: &xrunlab_results::compare::MetricComparison| {
        format!(
            "{} ({}){}",
            m.metric,
            m.unit,
            if m.higher_is_better { " ↑" } else { "" }
        )
    };
    // Wide enough for the longest row (a sweep's point names its settings).
    let width = r
        .metrics
        .iter()
        .map(|m| label(m).chars().count())
        .max()
        .unwrap_or(0)
        .max(28);
    let verdicts: Vec<String> = r.metrics.iter().map(|m| verdict_words(r, m)).collect();
    let vw = verdicts
        .iter()
        .map(|v| v.chars().count())
        .max()
        .unwrap_or(0)
        .max(19);
    let _ = writeln!(
        s,
        "\n{:<w$} {:>10} {:>10} {:>9} {:>20}  {:<vw$} {:>7}",
        if any_higher {
            "metric (lower is better; ↑: higher is better)"
        } else {
            "metric (lower is better)"
        },
        "A",
        "B",
        "change",
        "interval",
        "verdict",
        "chance",
        w = width
    );
    for (m, verdict) in r.metrics.iter().zip(&verdicts) {
        let change = m
            .change_pct
            .map_or_else(|| "-".to_owned(), |c| format!("{c:+.1} %"));
        let interval = match (m.interval_pct, m.change_at_least_pct) {
            (Some([lo, hi]), _) => format!("[{lo:+.1}, {hi:+.1}] %"),
            (None, Some(lo)) => format!("[{lo:+.1} %, no end)"),
            (None, None) => "-".to_owned(),
        };
        let chance = m
            .p_value
            .map_or_else(|| "-".to_owned(), |p| format!("{p:.3}"));
        let _ = writeln!(
            s,
            "{:<width$} {:>10} {:>10} {:>9} {:>20}  {:<vw$} {:>7}",
            label(m),
            number(m.a_median),
            number(m.b_median),
            change,
            interval,
            verdict,
            chance
        );
    }
    let _ = writeln!(s, "\n{}", method_words(r));
    if r.metrics.iter().any(|m| m.method == Method::ExactRateTest) {
        let _ = writeln!(
            s,
            "dropouts per hour: B's pooled rate against A's, by the exact binomial test of the \
             dropout counts given each side's hours, with Clopper-Pearson's interval of the rate \
             ratio (when A had none, the change and the interval's upper end are unbounded: \
             the interval is shown from its lower end)."
        );
    }
    if let Some(line) = gate_line(r) {
        let _ = writeln!(s, "{line}");
    }
    for n in &r.notes {
        let _ = writeln!(s, "note: {n}");
    }
    if r.machines.len() > 2 || r.machines.iter().any(|m| m.files.len() > 1) {
        let _ = writeln!(s, "\nper machine (median [min, max] over its runs):");
        for m in &r.machines {
            let f = &m.fingerprint;
            let figures: Vec<String> = m
                .metrics
                .iter()
                .filter(|x| x.metric == "load p50" || x.metric == "driver wake-up p99")
                .map(|x| {
                    format!(
                        "{} {} [{}, {}]",
                        x.metric,
                        number(x.median),
                        number(x.min),
                        number(x.max)
                    )
                })
                .collect();
            let _ = writeln!(
                s,
                "  {} {} ({}, {}, {}): {} run(s); {}",
                m.side.to_uppercase(),
                f.cpu_model,
                f.kernel_release,
                f.preemption,
                f.governor,
                m.files.len(),
                figures.join("; ")
            );
        }
    }
    s
}

/// The verdict column of metric `m`.
fn verdict_words(r: &CompareResult, m: &MetricComparison) -> String {
    match (m.verdict, m.method) {
        (Verdict::Better, _) => "better".to_owned(),
        (Verdict::Worse, _) => "worse".to_owned(),
        (Verdict::NoDifference, _) => match r.margin_pct {
            Some(margin) => format!("no change beyond ±{margin} %"),
            None => "no difference shown".to_owned(),
        },
        (Verdict::Undecided, _) => "undecided: too few runs".to_owned(),
        (Verdict::NotEnoughRuns, _) => format!(
            "not enough runs: {} a side, need {}",
            m.a.len().min(m.b.len()),
            m.runs_needed.unwrap_or(xrunlab_compare::MIN_RUNS)
        ),
        (Verdict::NotJudged, _) if xrunlab_compare::gate::is_extreme(&m.metric) => {
            "not judged (a maximum)".to_owned()
        }
        (Verdict::NotJudged, Method::Descriptive) => "not tested".to_owned(),
        (Verdict::NotJudged, _) => "not gated".to_owned(),
    }
}

/// The line under the table that says how the figures were found.
fn method_words(r: &CompareResult) -> String {
    let method = r
        .metrics
        .iter()
        .map(|m| m.method)
        .find(|m| !matches!(m, Method::ExactRateTest | Method::Descriptive));
    let how = match method {
        Some(Method::WelchTOnLogs) => {
            "Welch's t-test on the logs of the runs' figures, which sees how much runs differ; \
             change and interval: of the ratio of the geometric means"
        }
        Some(Method::PairedTOnLogRatios) => {
            "the paired t-test on the logs of each round's B/A, so what both runs of a round \
             share cancels; change and interval: of the geometric mean of the rounds' ratios"
        }
        Some(Method::PermutationOverRuns) => {
            "exact Mann-Whitney over the runs, intervals by bootstrapping the runs"
        }
        Some(Method::BlockBootstrapOneRun) => {
            "intervals by a block bootstrap over the buffers, which cannot see how much runs \
             differ, so no verdict"
        }
        _ => "no metric could be tested",
    };
    format!(
        "A and B are the medians over each side's runs; chance: how often noise alone gives a \
         difference this large ({how})."
    )
}

/// The gate's verdict: only the gated metrics are judged, their intervals holding together.
fn gate_line(r: &CompareResult) -> Option<String> {
    let gated: Vec<&MetricComparison> = r.metrics.iter().filter(|m| m.gated).collect();
    if gated.is_empty() {
        return None;
    }
    let named = |v: Verdict| {
        gated
            .iter()
            .filter(|m| m.verdict == v)
            .map(|m| m.metric.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut found = Vec::new();
    for (v, words) in [
        (Verdict::Worse, "B worse on"),
        (Verdict::Better, "B better on"),
        (Verdict::Undecided, "undecided (too few runs) on"),
        (Verdict::NotEnoughRuns, "not enough runs for"),
    ] {
        let n = named(v);
        if !n.is_empty() {
            found.push(format!("{words} {n}"));
        }
    }
    if found.is_empty() {
        found.push(match r.margin_pct {
            Some(m) => format!("no change beyond ±{m} %"),
            None => "no difference shown".to_owned(),
        });
    }
    let each = r.gate_confidence.map_or_else(String::new, |c| {
        format!("{:.2} % intervals each, ", c * 100.0)
    });
    Some(format!(
        "gate: {} ({each}{:.0} % together): {}",
        gated
            .iter()
            .map(|m| m.metric.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        r.confidence * 100.0,
        found.join("; ")
    ))
}
