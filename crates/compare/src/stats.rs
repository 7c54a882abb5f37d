//! Pure statistics for comparing two sides (the t-tests over runs are in `ttest`): a block
//! bootstrap over two histograms (the interval shown for one or two runs a side), and an
//! exact conditional binomial test with its Clopper-Pearson interval for event counts over
//! exposure time (dropouts per hour). Every resampling function takes its seeded
//! RNG, so results are reproducible; the rate test is exact and needs none. Main thread.

use hdrhistogram::Histogram;
use rand::rngs::StdRng;
use rand::Rng;

/// Confidence of the intervals and level of the tests.
pub const CONFIDENCE: f64 = 0.95;

/// Resamples drawn for an interval.
pub const BOOTSTRAP_ROUNDS: usize = 2000;

/// Buffers per block in the one-run bootstrap: neighbouring buffers share a CPU state, so they
/// are counted as one observation per this many (see [`histogram_change`]).
pub const BLOCK_BUFFERS: u64 = 32;

/// The median of `v` ([`xrunlab_stats::median_interpolated`]); NaN when empty, which every
/// figure of compare's tables prints as "n/a".
pub fn median(v: &[f64]) -> f64 {
    xrunlab_stats::median_interpolated(v).unwrap_or(f64::NAN)
}

/// B − A relative to A, as a percentage of A; `None` when A is 0.
pub fn change_pct(a: f64, b: f64) -> Option<f64> {
    (a != 0.0).then(|| (b - a) / a * 100.0)
}

fn interval(changes: &[f64]) -> [f64; 2] {
    let tail = (1.0 - CONFIDENCE) / 2.0;
    [
        xrunlab_stats::quantile_interpolated(changes, tail).unwrap_or(f64::NAN),
        xrunlab_stats::quantile_interpolated(changes, 1.0 - tail).unwrap_or(f64::NAN),
    ]
}

/// What the one-run bootstrap found for one quantile.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HistogramChange {
    /// Interval of the change in percent of A.
    pub interval_pct: [f64; 2],
    /// Two-sided chance of the sign of the change being wrong under resampling.
    pub p_value: f64,
}

/// Change of quantile `q` from histogram `a` to `b`, both in the same units, with a block
/// bootstrap: the histograms keep no order, so each side counts as `count / BLOCK_BUFFERS`
/// independent blocks, and each resample draws the quantile's order statistic among that many
/// (its normal approximation: rank `q ± z·√(q(1−q)/blocks)`). Correlation over shorter spans
/// than a block is thereby allowed for; over longer ones it is not, which is why one run a
/// side is weak evidence. `None` when a side is empty or A's quantile is 0.
pub fn histogram_change(
    a: &Histogram<u64>,
    b: &Histogram<u64>,
    q: f64,
    rng: &mut StdRng,
) -> Option<HistogramChange> {
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let blocks = |h: &Histogram<u64>| (h.len() / BLOCK_BUFFERS).max(1) as f64;
    let (na, nb) = (blocks(a), blocks(b));
    let draw = |h: &Histogram<u64>, n: f64, rng: &mut StdRng| {
        let rank = (q + normal(rng) * (q * (1.0 - q) / n).sqrt()).clamp(0.0, 1.0);
        h.value_at_quantile(rank) as f64
    };
    let mut changes = Vec::with_capacity(BOOTSTRAP_ROUNDS);
    for _ in 0..BOOTSTRAP_ROUNDS {
        let (va, vb) = (draw(a, na, rng), draw(b, nb, rng));
        changes.push(change_pct(va, vb)?);
    }
    let below = changes.iter().filter(|&&c| c <= 0.0).count() as f64;
    let above = changes.iter().filter(|&&c| c >= 0.0).count() as f64;
    let rounds = BOOTSTRAP_ROUNDS as f64;
    let p_value = (2.0 * below.min(above) / rounds).min(1.0);
    Some(HistogramChange {
        interval_pct: interval(&changes),
        p_value,
    })
}

/// A standard normal draw (Box-Muller; one of the pair is enough here).
fn normal(rng: &mut StdRng) -> f64 {
    let u1: f64 = 1.0 - rng.random::<f64>();
    let u2: f64 = rng.random();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// What the exact rate test found for two event counts over their exposure times.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateComparison {
    /// B's rate over A's; `None` when A has no events.
    pub ratio: Option<f64>,
    /// [`CONFIDENCE`] interval of the ratio; the upper end is infinite when A has no events.
    pub ratio_interval: [f64; 2],
    /// Two-sided chance of a split of the events at least this uneven under equal rates.
    pub p_value: f64,
}

/// Compares event rates: `a` events in `a_hours` against `b` events in `b_hours`. Given the
/// total n = a + b, B's count is binomial with share π = b_hours·R / (a_hours + b_hours·R)
/// for the rate ratio R, so the test of R = 1 and its interval are exact (no normal
/// approximation, honest for the handful of dropouts a good run has): the chance is the
/// doubled smaller tail at π₀ = b_hours / (a_hours + b_hours), and the interval is
/// Clopper-Pearson's for π, turned into R. The two agree: the chance is below
/// 1 − [`CONFIDENCE`] exactly when the interval leaves out 1. `None` when an exposure is not
/// positive or there are no events at all (nothing to compare).
pub fn rate_comparison(a: u64, a_hours: f64, b: u64, b_hours: f64) -> Option<RateComparison> {
    let exposed = |h: f64| h.is_finite() && h > 0.0;
    if !exposed(a_hours) || !exposed(b_hours) || a + b == 0 {
        return None;
    }
    let n = a + b;
    let pi0 = b_hours / (a_hours + b_hours);
    let lower_tail = binomial_cdf(b, n, pi0);
    let upper_tail = if b == 0 {
        1.0
    } else {
        1.0 - binomial_cdf(b - 1, n, pi0)
    };
    let p_value = (2.0 * lower_tail.min(upper_tail)).min(1.0);
    let tail = (1.0 - CONFIDENCE) / 2.0;
    // Clopper-Pearson: the π at which seeing b or more (b or fewer) is just `tail` likely.
    let pi_lo = if b == 0 {
        0.0
    } else {
        bisect(|pi| 1.0 - binomial_cdf(b - 1, n, pi) - tail, true)
    };
    let pi_hi = if b == n {
        1.0
    } else {
        bisect(|pi| binomial_cdf(b, n, pi) - tail, false)
    };
    let to_ratio = |pi: f64| {
        if pi >= 1.0 {
            f64::INFINITY
        } else {
            pi / (1.0 - pi) * a_hours / b_hours
        }
    };
    Some(RateComparison {
        ratio: (a > 0).then(|| (b as f64 / b_hours) / (a as f64 / a_hours)),
        ratio_interval: [to_ratio(pi_lo), to_ratio(pi_hi)],
        p_value,
    })
}

/// The root in (0, 1) of `f` by bisection: `f` rises with π when `rising`, else falls.
/// Sixty halvings leave less than 1e-18 of the unit interval.
fn bisect(f: impl Fn(f64) -> f64, rising: bool) -> f64 {
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    for _ in 0..60 {
        let mid = (lo + hi) / 2.0;
        if (f(mid) < 0.0) == rising {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (lo + hi) / 2.0
}

/// Above this standard deviation, [`binomial_cdf`] uses the normal approximation: by the
/// Berry-Esseen bound its error is below 0.4748 · (p² + q²) / sd < 5e-6, far below any
/// significance level, and the exact sum would take millions of steps.
const EXACT_SD_LIMIT: f64 = 1e5;

/// A term this far below the largest one ends the exact sum: the terms left fall faster than
/// geometrically, so they add less than 1e-20 · sd < 1e-15 of the total.
const NEGLIGIBLE: f64 = 1e-20;

/// P(X ≤ k) for X ~ Binomial(n, p), in steps bounded by the spread rather than the count, so
/// that a count in the trillions ends as fast as one in the thousands. The terms are walked
/// outward from the mode, each from its neighbour (P(i + 1) / P(i) = (n − i)p / ((i + 1)q), so
/// no coefficient overflows), until they are negligible: at most about 20 · sd + 50 steps.
/// Above a sd of `EXACT_SD_LIMIT` (1e5), the normal approximation with continuity correction.
pub fn binomial_cdf(k: u64, n: u64, p: f64) -> f64 {
    if k >= n || p <= 0.0 {
        return 1.0;
    }
    if p >= 1.0 {
        return 0.0;
    }
    let q = 1.0 - p;
    let sd = (n as f64 * p * q).sqrt();
    if sd > EXACT_SD_LIMIT {
        let z = (k as f64 + 0.5 - n as f64 * p) / sd;
        return 0.5 * libm::erfc(-z / std::f64::consts::SQRT_2);
    }
    // The mode, floor((n + 1) p), has the largest term: weights are relative to it.
    let mode = ((n as f64 + 1.0) * p).floor().min(n as f64) as u64;
    let (mut below, mut total) = (0.0f64, 0.0f64);
    let (mut w, mut i) = (1.0f64, mode);
    loop {
        total += w;
        if i <= k {
            below += w;
        }
        if i == 0 || w < NEGLIGIBLE {
            break;
        }
        w *= i as f64 * q / ((n - i + 1) as f64 * p);
        i -= 1;
    }
    let (mut w, mut i) = (1.0f64, mode);
    while i < n {
        w *= (n - i) as f64 * p / ((i + 1) as f64 * q);
        i += 1;
        total += w;
        if i <= k {
            below += w;
        }
        if w < NEGLIGIBLE {
            break;
        }
    }
    (below / total).clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    const TRIALS: u64 = 200;

    /// The one-run bootstrap's calibration: a change only when the chance under noise is
    /// below 1 − [`CONFIDENCE`] and the interval leaves out zero.
    fn verdict_of(interval_pct: [f64; 2], p_value: f64) -> Option<bool> {
        let shown = p_value < 1.0 - CONFIDENCE && (interval_pct[0] > 0.0 || interval_pct[1] < 0.0);
        shown.then_some(interval_pct[0] > 0.0)
    }

    /// Log-normal draws around `median` with shape `sigma` (latency-like: long right tail).
    fn lognormal(rng: &mut StdRng, median: f64, sigma: f64) -> f64 {
        median * (sigma * normal(rng)).exp()
    }

    /// A run's histogram: `n` buffers in microseconds (1 ns steps, as the engine records).
    fn run_histogram(rng: &mut StdRng, median: f64, n: usize) -> Histogram<u64> {
        let mut h = Histogram::new_with_bounds(1, 10_000_000_000, 3).unwrap();
        for _ in 0..n {
            h.saturating_record((lognormal(rng, median, 0.4) * 1000.0) as u64);
        }
        h
    }

    fn verdicts(mut trial: impl FnMut(&mut StdRng) -> Option<bool>) -> (u64, u64, u64) {
        let (mut better, mut worse, mut none) = (0, 0, 0);
        for seed in 0..TRIALS {
            let mut rng = StdRng::seed_from_u64(seed);
            match trial(&mut rng) {
                Some(true) => worse += 1,
                Some(false) => better += 1,
                None => none += 1,
            }
        }
        (better, worse, none)
    }

    fn histogram_trial(rng: &mut StdRng, shift: f64) -> Option<bool> {
        let a = run_histogram(rng, 100.0, 20_000);
        let b = run_histogram(rng, 100.0 * shift, 20_000);
        let c = histogram_change(&a, &b, 0.5, rng)?;
        verdict_of(c.interval_pct, c.p_value)
    }

    #[test]
    fn one_run_each_from_one_distribution_shows_no_difference_in_at_least_90_percent() {
        let (_, _, none) = verdicts(|rng| histogram_trial(rng, 1.0));
        assert!(
            none >= TRIALS * 9 / 10,
            "no difference in {none} of {TRIALS}"
        );
    }

    #[test]
    fn one_run_each_finds_a_ten_percent_median_shift_in_at_least_90_percent() {
        let (better, worse, _) = verdicts(|rng| histogram_trial(rng, 1.10));
        assert!(worse >= TRIALS * 9 / 10, "worse in {worse} of {TRIALS}");
        assert_eq!(better, 0);
    }

    #[test]
    fn medians_and_changes() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(change_pct(0.0, 1.0), None);
        assert_eq!(verdict_of([1.0, 5.0], 0.01), Some(true));
        assert_eq!(verdict_of([-5.0, -1.0], 0.01), Some(false));
        assert_eq!(verdict_of([-1.0, 5.0], 0.01), None);
        assert_eq!(verdict_of([1.0, 5.0], 0.2), None);
    }

    /// The term-by-term sum in log space that [`binomial_cdf`] replaced: exact, but one step
    /// per count. The reference for the counts it can still afford.
    fn summed_cdf(k: u64, n: u64, p: f64) -> f64 {
        let (lp, lq) = (p.ln(), (-p).ln_1p());
        let mut ln_choose = 0.0f64;
        let mut sum = 0.0;
        for i in 0..=k {
            if i > 0 {
                ln_choose += ((n - i + 1) as f64).ln() - (i as f64).ln();
            }
            sum += (ln_choose + i as f64 * lp + (n - i) as f64 * lq).exp();
        }
        sum.min(1.0)
    }

    #[test]
    fn the_binomial_cdf_agrees_with_the_term_sum_from_ten_to_a_million() {
        for (n, p) in [
            (10u64, 0.3),
            (1_000, 0.01),
            (5_000, 0.5),
            (20_000, 0.9),
            (100_000, 0.2),
            (1_000_000, 0.5),
            (1_000_000, 1e-5),
        ] {
            let (mean, sd) = (n as f64 * p, (n as f64 * p * (1.0 - p)).sqrt());
            for z in [-4.0, -2.0, -1.0, 0.0, 1.0, 2.0, 4.0] {
                let k = (mean + z * sd).clamp(0.0, (n - 1) as f64) as u64;
                let (got, want) = (binomial_cdf(k, n, p), summed_cdf(k, n, p));
                assert!(
                    (got - want).abs() <= 1e-10 + 1e-6 * want,
                    "P(X <= {k}) for Binomial({n}, {p}): {got}, term sum {want}"
                );
            }
        }
    }

    #[test]
    fn a_trillion_dropouts_are_compared_at_once_not_counted_one_by_one() {
        // A bound far above the microseconds this takes; the term sum took minutes.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let same = rate_comparison(1_000_000_000_000, 1.0, 1_000_000_000_000, 1.0);
            let more = rate_comparison(1_000_000_000_000, 1.0, 1_001_000_000_000, 1.0);
            let _ = tx.send((same, more));
        });
        let (same, more) = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("the rate test returned");
        let same = same.unwrap();
        assert!(same.p_value > 0.5, "{same:?}");
        let [lo, hi] = same.ratio_interval;
        assert!(lo < 1.0 && 1.0 < hi && hi - lo < 1e-4, "{same:?}");
        let more = more.unwrap();
        assert!(more.p_value < 1e-6, "{more:?}");
        assert!(more.ratio_interval[0] > 1.0, "{more:?}");
    }

    #[test]
    fn the_binomial_cdf_matches_known_values() {
        // P(X ≤ 2) for Binomial(10, 0.3) = 0.3827827; P(X ≤ 5) for Binomial(10, 0.5) = 0.623046875.
        assert!((binomial_cdf(2, 10, 0.3) - 0.382_782_7).abs() < 1e-7);
        assert!((binomial_cdf(5, 10, 0.5) - 0.623_046_875).abs() < 1e-12);
        assert_eq!(binomial_cdf(10, 10, 0.4), 1.0);
        // Large n: the median of Binomial(100000, 0.5) leaves just over half below it.
        let c = binomial_cdf(50_000, 100_000, 0.5);
        assert!(c > 0.5 && c < 0.502, "{c}");
    }

    #[test]
    fn the_rate_interval_is_clopper_pearsons() {
        // 5 events on B of 10, equal hours: Clopper-Pearson for π is [0.187086, 0.812914]
        // (the beta quantiles), so the ratio's is π/(1−π).
        let r = rate_comparison(5, 1.0, 5, 1.0).unwrap();
        let expect = |pi: f64| pi / (1.0 - pi);
        assert!(
            (r.ratio_interval[0] - expect(0.187_086_3)).abs() < 1e-5,
            "{r:?}"
        );
        assert!(
            (r.ratio_interval[1] - expect(0.812_913_7)).abs() < 1e-5,
            "{r:?}"
        );
        assert_eq!(r.ratio, Some(1.0));
        assert!((r.p_value - 1.0).abs() < 1e-12);
        // None on A: the ratio is unbounded above, but its lower end and the chance are not.
        let r = rate_comparison(0, 1.0, 12, 1.0).unwrap();
        assert_eq!((r.ratio, r.ratio_interval[1]), (None, f64::INFINITY));
        assert!(r.ratio_interval[0] > 1.0 && r.p_value < 0.001, "{r:?}");
        // Exposure counts: 10 events in 1 hour against 20 in 2 hours is one rate.
        let r = rate_comparison(10, 1.0, 20, 2.0).unwrap();
        assert!(
            (r.ratio.unwrap() - 1.0).abs() < 1e-12 && r.p_value > 0.9,
            "{r:?}"
        );
        assert!(rate_comparison(0, 1.0, 0, 1.0).is_none());
        assert!(rate_comparison(3, 0.0, 1, 1.0).is_none());
    }

    /// A Poisson count of mean `mean` (Knuth's product of uniforms, fine for small means).
    fn poisson(rng: &mut StdRng, mean: f64) -> u64 {
        let limit = (-mean).exp();
        let (mut k, mut prod) = (0u64, rng.random::<f64>());
        while prod > limit {
            k += 1;
            prod *= rng.random::<f64>();
        }
        k
    }

    /// Verdicts of 200 seeded trials of A at `rate` per hour over 2 h against B at
    /// `rate × factor` over 3 h.
    fn rate_trials(rate: f64, factor: f64) -> (u64, u64, u64) {
        verdicts(|rng| {
            let (a, b) = (poisson(rng, rate * 2.0), poisson(rng, rate * factor * 3.0));
            let r = rate_comparison(a, 2.0, b, 3.0)?;
            let shown = r.p_value < 1.0 - CONFIDENCE;
            let interval_excludes_one = r.ratio_interval[0] > 1.0 || r.ratio_interval[1] < 1.0;
            assert_eq!(
                shown, interval_excludes_one,
                "test and interval agree: {r:?}"
            );
            shown.then_some(r.ratio_interval[0] > 1.0)
        })
    }

    #[test]
    fn equal_dropout_rates_show_no_difference_in_at_least_90_percent_of_trials() {
        let (better, worse, none) = rate_trials(6.0, 1.0);
        assert!(
            none >= TRIALS * 9 / 10,
            "worse {worse} better {better} none {none}"
        );
    }

    #[test]
    fn a_threefold_dropout_rate_is_found_in_at_least_90_percent_of_trials() {
        // About 12 dropouts on A and 54 on B per trial.
        let (better, worse, none) = rate_trials(6.0, 3.0);
        assert!(
            worse >= TRIALS * 9 / 10,
            "worse {worse} better {better} none {none}"
        );
    }
}
