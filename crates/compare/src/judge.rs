//! One metric judged side against side, whatever kind of result it came from: a t-test on the
//! logs of the runs' figures when each side has the runs the test needs (Welch's, or the paired
//! t for the rounds of an A/B), an interval without a verdict when it has fewer (the one-run
//! block bootstrap of the histograms, which cannot see the spread between runs), the exact
//! rate test for events over hours; a verdict only for a gated metric, in the metric's
//! direction (lower is better for latency, load and dropouts; higher for capacity and
//! throughput). Main thread.

use crate::gate::is_extreme;
use crate::{stats, ttest};
use hdrhistogram::Histogram;
use rand::rngs::StdRng;
use xrunlab_engine::Scale;
use xrunlab_results::compare::{Method, MetricComparison, Verdict};

/// Runs a side the t-tests need before they judge: with two, the test has a single degree of
/// freedom and its spread is one difference; with three it has at least two.
pub const MIN_RUNS: usize = 3;

/// A metric's figures on both sides.
pub(crate) struct Figures<'a> {
    /// e.g. "load p99".
    pub name: String,
    /// e.g. "%".
    pub unit: String,
    /// Higher is better (capacity, throughput).
    pub higher_is_better: bool,
    /// Side A's value per file.
    pub a: Vec<f64>,
    /// Side B's value per file.
    pub b: Vec<f64>,
    /// Each side's files' histogram merged, and the quantile the value is, for the one-run
    /// bootstrap; `None`: not resampled (a maximum, a figure without a distribution).
    pub quantile: Option<(&'a Histogram<u64>, &'a Histogram<u64>, f64)>,
}

/// How a metric is judged.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct How {
    /// The i-th runs of the sides are a round of an A/B (paired t), else independent (Welch).
    pub paired: bool,
    /// For a gated metric, the chance of a false verdict it may take (its interval is at
    /// 1 − this); `None`: not gated, a 95 % interval and no verdict.
    pub gated: Option<f64>,
    /// A change within ± this many percent counts as none.
    pub margin_pct: f64,
}

/// The verdict for B when B's value is higher (`Some(true)`), lower (`Some(false)`) or not
/// shown to differ (`None`), in the metric's direction.
pub(crate) fn verdict(b_higher: Option<bool>, higher_is_better: bool) -> Verdict {
    match b_higher {
        Some(higher) if higher == higher_is_better => Verdict::Better,
        Some(_) => Verdict::Worse,
        None => Verdict::NoDifference,
    }
}

/// The verdict of a gated metric from its interval: better or worse when it leaves out zero,
/// no difference when it lies within ± `margin_pct`, undecided otherwise.
pub(crate) fn verdict_of_interval([lo, hi]: [f64; 2], margin_pct: f64, hib: bool) -> Verdict {
    if lo > 0.0 || hi < 0.0 {
        verdict(Some(lo > 0.0), hib)
    } else if lo >= -margin_pct && hi <= margin_pct {
        Verdict::NoDifference
    } else {
        Verdict::Undecided
    }
}

/// Judges one metric (see the module's words).
pub(crate) fn judge(f: Figures, how: How, rng: &mut StdRng) -> MetricComparison {
    let (a_median, b_median) = (stats::median(&f.a), stats::median(&f.b));
    let runs = f.a.len().min(f.b.len());
    let mut m = MetricComparison {
        metric: f.name,
        unit: f.unit,
        a: f.a,
        b: f.b,
        a_median,
        b_median,
        change_pct: stats::change_pct(a_median, b_median),
        interval_pct: None,
        verdict: Verdict::NotJudged,
        p_value: None,
        method: Method::Descriptive,
        higher_is_better: f.higher_is_better,
        change_at_least_pct: None,
        gated: how.gated.is_some(),
        runs_needed: None,
    };
    if is_extreme(&m.metric) {
        return m;
    }
    if runs < MIN_RUNS {
        m.verdict = Verdict::NotEnoughRuns;
        m.runs_needed = Some(MIN_RUNS);
        if let Some(c) = f
            .quantile
            .and_then(|(ha, hb, q)| stats::histogram_change(ha, hb, q, rng))
        {
            m.interval_pct = Some(c.interval_pct);
            m.method = Method::BlockBootstrapOneRun;
        }
        return m;
    }
    let alpha = how.gated.unwrap_or(1.0 - stats::CONFIDENCE);
    let (t, method) = if how.paired {
        let n = runs;
        (
            ttest::paired_log(&m.a[..n], &m.b[..n], alpha),
            Method::PairedTOnLogRatios,
        )
    } else {
        (ttest::welch_log(&m.a, &m.b, alpha), Method::WelchTOnLogs)
    };
    let Some(t) = t else {
        // A zero among the figures: no log, no test; shown as they are.
        return m;
    };
    m.method = method;
    m.change_pct = Some(t.change_pct);
    m.interval_pct = Some(t.interval_pct);
    m.p_value = Some(t.p_value);
    if m.gated {
        m.verdict = verdict_of_interval(t.interval_pct, how.margin_pct, m.higher_is_better);
    }
    m
}

/// Judges a rate of events (lower is better) by [`stats::rate_comparison`] over each side's
/// pooled `(events, hours)`: the change of the pooled rates, its exact interval, the verdict
/// and its chance. When A had no events the interval has no upper end: its lower end is kept
/// in `change_at_least_pct`, so a gate can still trip on it. `None` when there is nothing to
/// test (no events, or no hours).
pub(crate) fn judge_rate(
    name: &str,
    unit: &str,
    (a, b): (Vec<f64>, Vec<f64>),
    (na, ha): (u64, f64),
    (nb, hb): (u64, f64),
    how: How,
) -> Option<MetricComparison> {
    let r = stats::rate_comparison(na, ha, nb, hb)?;
    let pct = |ratio: f64| (ratio - 1.0) * 100.0;
    let [lo, hi] = r.ratio_interval;
    let shown = how.gated.is_some_and(|alpha| r.p_value < alpha);
    let (a_median, b_median) = (stats::median(&a), stats::median(&b));
    Some(MetricComparison {
        metric: name.to_owned(),
        unit: unit.to_owned(),
        a,
        b,
        a_median,
        b_median,
        change_pct: r.ratio.map(pct),
        interval_pct: hi.is_finite().then(|| [pct(lo), pct(hi)]),
        verdict: match (how.gated, shown) {
            (None, _) => Verdict::NotJudged,
            (Some(_), true) => verdict(Some(lo > 1.0), false),
            // Not shown: no difference only when the whole interval is within the margin.
            (Some(_), false) => verdict_of_interval([pct(lo), pct(hi)], how.margin_pct, false),
        },
        p_value: Some(r.p_value),
        method: Method::ExactRateTest,
        higher_is_better: false,
        change_at_least_pct: (!hi.is_finite()).then(|| pct(lo)),
        gated: how.gated.is_some(),
        runs_needed: None,
    })
}

/// Quantile `q` of `h` (its maximum for `None`) in `scale`'s reported unit.
pub(crate) fn value_at(h: &Histogram<u64>, q: Option<f64>, scale: Scale) -> f64 {
    let units = match q {
        Some(q) => h.value_at_quantile(q),
        None => h.max(),
    };
    units as f64 / scale.units_per_value()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    const GATED: How = How {
        paired: false,
        gated: Some(0.05),
        margin_pct: 5.0,
    };

    #[test]
    fn the_verdict_follows_the_metrics_direction() {
        assert_eq!(verdict(Some(true), false), Verdict::Worse);
        assert_eq!(verdict(Some(false), false), Verdict::Better);
        assert_eq!(verdict(Some(true), true), Verdict::Better);
        assert_eq!(verdict(Some(false), true), Verdict::Worse);
        // Capacity down 20 % over 6 runs a side: worse, and beyond a 10 % gate; up 20 %: better.
        let mut rng = StdRng::seed_from_u64(1);
        let run = |base: f64, rng: &mut StdRng| {
            let f = Figures {
                name: "sines".into(),
                unit: "sines".into(),
                higher_is_better: true,
                a: (0..6).map(|i| 1000.0 + f64::from(i)).collect(),
                b: (0..6).map(|i| base + f64::from(i)).collect(),
                quantile: None,
            };
            judge(f, GATED, rng)
        };
        let lower = run(800.0, &mut rng);
        assert_eq!(lower.verdict, Verdict::Worse, "{lower:?}");
        assert_eq!(lower.method, Method::WelchTOnLogs);
        assert!(lower.higher_is_better && lower.gated);
        assert!(lower.worse_by_more_than(10.0), "{lower:?}");
        assert!(!lower.worse_by_more_than(25.0), "{lower:?}");
        let higher = run(1200.0, &mut rng);
        assert_eq!(higher.verdict, Verdict::Better, "{higher:?}");
        assert!(!higher.worse_by_more_than(0.0));
        let same = run(1000.0, &mut rng);
        assert_eq!(same.verdict, Verdict::NoDifference, "{same:?}");
    }

    fn figures(name: &str, a: &[f64], b: &[f64]) -> Figures<'static> {
        Figures {
            name: name.into(),
            unit: "%".into(),
            higher_is_better: false,
            a: a.to_vec(),
            b: b.to_vec(),
            quantile: None,
        }
    }

    #[test]
    fn without_the_runs_a_test_needs_there_is_no_verdict() {
        let mut rng = StdRng::seed_from_u64(1);
        // Two runs a side three times apart: a huge change, but no spread to judge it by.
        let m = judge(
            figures("load p50", &[1.0, 1.1], &[3.0, 3.3]),
            GATED,
            &mut rng,
        );
        assert_eq!(m.verdict, Verdict::NotEnoughRuns, "{m:?}");
        assert_eq!((m.runs_needed, m.p_value), (Some(MIN_RUNS), None));
        assert!(!m.worse_by_more_than(0.0));
        // Extremes are never judged, whatever the runs.
        let m = judge(
            figures("load max", &[1.0, 1.1, 1.0], &[3.0, 3.3, 3.1]),
            GATED,
            &mut rng,
        );
        assert_eq!((m.verdict, m.interval_pct), (Verdict::NotJudged, None));
        // Outside the gate: interval and chance shown, no verdict.
        let how = How {
            gated: None,
            ..GATED
        };
        let m = judge(
            figures("x", &[1.0, 1.1, 1.0], &[3.0, 3.3, 3.1]),
            how,
            &mut rng,
        );
        assert_eq!(m.verdict, Verdict::NotJudged);
        assert!(m.interval_pct.unwrap()[0] > 100.0 && m.p_value.unwrap() < 0.001);
        // A wide interval across zero is undecided, never "no difference".
        let m = judge(
            figures("y", &[1.0, 2.0, 1.5], &[1.2, 2.2, 1.4]),
            GATED,
            &mut rng,
        );
        assert_eq!(m.verdict, Verdict::Undecided, "{m:?}");
    }

    #[test]
    fn dropouts_from_none_to_many_can_fail_the_gate() {
        // A: 0 dropouts in 1 h; B: 30 in 1 h. No upper end, but the rise is certain.
        let m = judge_rate(
            "dropouts per hour",
            "per hour",
            (vec![0.0], vec![30.0]),
            (0, 1.0),
            (30, 1.0),
            GATED,
        )
        .unwrap();
        assert_eq!(m.verdict, Verdict::Worse);
        assert_eq!(m.interval_pct, None);
        let lo = m.change_at_least_pct.unwrap();
        assert!(lo > 100.0, "{lo}");
        assert!(m.worse_by_more_than(50.0), "{m:?}");
        // 0 against 1: noise can do that; no verdict, no gate.
        let one = ((0, 1.0), (1, 1.0));
        let m = judge_rate("d", "h", (vec![0.0], vec![1.0]), one.0, one.1, GATED).unwrap();
        assert_eq!(m.verdict, Verdict::Undecided);
        assert!(!m.worse_by_more_than(0.0));
        // Fewer dropouts on B never trip the gate.
        let fewer = ((30, 1.0), (0, 1.0));
        let m = judge_rate("d", "h", (vec![30.0], vec![0.0]), fewer.0, fewer.1, GATED).unwrap();
        assert_eq!(m.verdict, Verdict::Better);
        assert!(!m.worse_by_more_than(0.0));
        // Not gated: shown, not judged.
        let how = How {
            gated: None,
            ..GATED
        };
        let m = judge_rate("d", "h", (vec![0.0], vec![30.0]), (0, 1.0), (30, 1.0), how).unwrap();
        assert_eq!(m.verdict, Verdict::NotJudged);
    }
}
