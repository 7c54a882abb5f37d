//! The words of a compare result: what differs between the machines on top, then one line per
//! metric (both sides, the change with its interval, the verdict and its chance under noise),
//! the notes, and a row per machine; runs on the main thread.

use std::fmt::Write;
use xrunlab_results::compare::{CompareResult, FingerprintChange, Method, Verdict};

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
    let _ = writeln!(
        s,
        "\n{:<w$} {:>10} {:>10} {:>9} {:>20}  {:<19} {:>7}",
        if any_higher {
            "metric (lower is better; ↑: higher is better)"
        } else {
            "metric (lower is better)"
        },
        "A",
        "B",
        "change",
        "95 % interval",
        "verdict",
        "chance",
        w = width
    );
    for m in &r.metrics {
        let change = m
            .change_pct
            .map_or_else(|| "-".to_owned(), |c| format!("{c:+.1} %"));
        let interval = match (m.interval_pct, m.change_at_least_pct) {
            (Some([lo, hi]), _) => format!("[{lo:+.1}, {hi:+.1}] %"),
            (None, Some(lo)) => format!("[{lo:+.1} %, no end)"),
            (None, None) => "-".to_owned(),
        };
        let verdict = match (m.verdict, m.method) {
            (_, Method::Descriptive) => "not tested",
            (Verdict::Better, _) => "better",
            (Verdict::Worse, _) => "worse",
            (Verdict::NoDifference, _) => "no difference shown",
        };
        let chance = m
            .p_value
            .map_or_else(|| "-".to_owned(), |p| format!("{p:.3}"));
        let _ = writeln!(
            s,
            "{:<width$} {:>10} {:>10} {:>9} {:>20}  {:<19} {:>7}",
            label(m),
            number(m.a_median),
            number(m.b_median),
            change,
            interval,
            verdict,
            chance
        );
    }
    let _ = writeln!(
        s,
        "\nA and B are the medians over each side's runs; chance: how often noise alone gives a \
         difference this large ({}).",
        match r.metrics.first().map(|m| m.method) {
            Some(Method::PermutationOverRuns) =>
                "exact Mann-Whitney over the runs, intervals by bootstrapping the runs",
            _ => "block bootstrap over the buffers of one run a side",
        }
    );
    if r.metrics.iter().any(|m| m.method == Method::ExactRateTest) {
        let _ = writeln!(
            s,
            "dropouts per hour: B's pooled rate against A's, by the exact binomial test of the \
             dropout counts given each side's hours, with Clopper-Pearson's interval of the rate \
             ratio (when A had none, the change and the interval's upper end are unbounded: \
             the interval is shown from its lower end)."
        );
    }
    let tested = r.metrics.iter().filter(|m| m.p_value.is_some()).count();
    if tested > 1 {
        let held = xrunlab_compare::held_over_table(r);
        let named = |v: Verdict| {
            held.iter()
                .filter(|m| m.verdict == v)
                .map(|m| m.metric.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let (worse, better) = (named(Verdict::Worse), named(Verdict::Better));
        let found = match (worse.is_empty(), better.is_empty()) {
            (true, true) => "no difference shown".to_owned(),
            (false, true) => format!("B worse on {worse}"),
            (true, false) => format!("B better on {better}"),
            (false, false) => format!("B worse on {worse}; better on {better}"),
        };
        let _ = writeln!(
            s,
            "over all {tested} tested metrics together (Holm, {:.0} %): {found}",
            r.confidence * 100.0
        );
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
