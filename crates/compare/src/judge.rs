//! One metric judged side against side, whatever kind of result it came from: the method the
//! number of files allows (over the files, a one-run block bootstrap of the histograms, or the
//! exact rate test for events over hours), and the verdict in the metric's direction (lower is
//! better for latency, load and dropouts; higher for capacity and throughput). Main thread.

use crate::stats;
use hdrhistogram::Histogram;
use rand::rngs::StdRng;
use xrunlab_engine::Scale;
use xrunlab_results::compare::{Method, MetricComparison, Verdict};

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

/// The verdict for B when B's value is higher (`Some(true)`), lower (`Some(false)`) or not
/// shown to differ (`None`), in the metric's direction.
pub(crate) fn verdict(b_higher: Option<bool>, higher_is_better: bool) -> Verdict {
    match b_higher {
        Some(higher) if higher == higher_is_better => Verdict::Better,
        Some(_) => Verdict::Worse,
        None => Verdict::NoDifference,
    }
}

/// Judges one metric: over the files when both sides have several (`repeats`), else by the
/// block bootstrap of the histograms when there are some, else described without a verdict.
pub(crate) fn judge(f: Figures, repeats: bool, rng: &mut StdRng) -> MetricComparison {
    let (a_median, b_median) = (stats::median(&f.a), stats::median(&f.b));
    let (method, interval, p) = if repeats {
        let p = stats::permutation_p(&f.a, &f.b, rng);
        let i = stats::runs_change_interval(&f.a, &f.b, rng);
        (Method::PermutationOverRuns, i, i.map(|_| p))
    } else if let Some((ha, hb, q)) = f.quantile {
        let c = stats::histogram_change(ha, hb, q, rng);
        (
            Method::BlockBootstrapOneRun,
            c.map(|c| c.interval_pct),
            c.map(|c| c.p_value),
        )
    } else {
        (Method::Descriptive, None, None)
    };
    let b_higher = interval.zip(p).and_then(|(i, p)| stats::verdict_of(i, p));
    MetricComparison {
        metric: f.name,
        unit: f.unit,
        a: f.a,
        b: f.b,
        a_median,
        b_median,
        change_pct: stats::change_pct(a_median, b_median),
        interval_pct: interval,
        verdict: verdict(b_higher, f.higher_is_better),
        p_value: p,
        method,
        higher_is_better: f.higher_is_better,
        change_at_least_pct: None,
    }
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
) -> Option<MetricComparison> {
    let r = stats::rate_comparison(na, ha, nb, hb)?;
    let pct = |ratio: f64| (ratio - 1.0) * 100.0;
    let [lo, hi] = r.ratio_interval;
    let shown = r.p_value < 1.0 - stats::CONFIDENCE;
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
        verdict: verdict(shown.then_some(lo > 1.0), false),
        p_value: Some(r.p_value),
        method: Method::ExactRateTest,
        higher_is_better: false,
        change_at_least_pct: (!hi.is_finite()).then(|| pct(lo)),
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

    #[test]
    fn the_verdict_follows_the_metrics_direction() {
        assert_eq!(verdict(Some(true), false), Verdict::Worse);
        assert_eq!(verdict(Some(false), false), Verdict::Better);
        assert_eq!(verdict(Some(true), true), Verdict::Better);
        assert_eq!(verdict(Some(false), true), Verdict::Worse);
        assert_eq!(verdict(None, true), Verdict::NoDifference);
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
            judge(f, true, rng)
        };
        let lower = run(800.0, &mut rng);
        assert_eq!(lower.verdict, Verdict::Worse, "{lower:?}");
        assert!(lower.higher_is_better);
        assert!(lower.worse_by_more_than(10.0), "{lower:?}");
        assert!(!lower.worse_by_more_than(25.0), "{lower:?}");
        let higher = run(1200.0, &mut rng);
        assert_eq!(higher.verdict, Verdict::Better, "{higher:?}");
        assert!(!higher.worse_by_more_than(0.0));
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
        )
        .unwrap();
        assert_eq!(m.verdict, Verdict::Worse);
        assert_eq!(m.interval_pct, None);
        let lo = m.change_at_least_pct.unwrap();
        assert!(lo > 100.0, "{lo}");
        assert!(m.worse_by_more_than(50.0), "{m:?}");
        // 0 against 1: noise can do that; no verdict, no gate.
        let m = judge_rate("d", "per hour", (vec![0.0], vec![1.0]), (0, 1.0), (1, 1.0)).unwrap();
        assert_eq!(m.verdict, Verdict::NoDifference);
        assert!(!m.worse_by_more_than(0.0));
        // Fewer dropouts on B never trip the gate.
        let m = judge_rate(
            "d",
            "per hour",
            (vec![30.0], vec![0.0]),
            (30, 1.0),
            (0, 1.0),
        )
        .unwrap();
        assert_eq!(m.verdict, Verdict::Better);
        assert!(!m.worse_by_more_than(0.0));
    }
}
