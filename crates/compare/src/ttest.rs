//! t-tests on the logs of per-run figures, which see the spread between runs: Welch's for two
//! independent sets of runs, the paired t for the rounds of an A/B (A then B, interleaved).
//! Logs, because run figures are ratios-of-time that spread multiplicatively (a run twice as
//! loaded is as likely as one half as loaded), so the interval is of the ratio B/A and is
//! shown as a percentage change. The t distribution is statrs'. Main thread.

use statrs::distribution::{ContinuousCDF, StudentsT};

/// What a t-test found: the change B/A of the geometric means and its interval, in percent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TChange {
    /// (B/A − 1) × 100 for the ratio of the geometric means (paired: of the rounds' ratios).
    pub change_pct: f64,
    /// The interval of the change at confidence 1 − α.
    pub interval_pct: [f64; 2],
    /// Two-sided chance of a difference of logs at least this large under no change.
    pub p_value: f64,
    /// Degrees of freedom (Welch-Satterthwaite's for Welch's test).
    pub df: f64,
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// Sample variance (n − 1).
fn variance(v: &[f64]) -> f64 {
    let m = mean(v);
    v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64
}

/// The logs of `v`; `None` when a figure is not positive and finite (its log is undefined).
fn logs(v: &[f64]) -> Option<Vec<f64>> {
    v.iter()
        .map(|&x| (x.is_finite() && x > 0.0).then(|| x.ln()))
        .collect()
}

/// The change, interval and chance of a difference of logs `d` with standard error `se` on
/// `df` degrees of freedom, at confidence 1 − `alpha`.
fn t_change(d: f64, se: f64, df: f64, alpha: f64) -> Option<TChange> {
    let pct = |x: f64| x.exp_m1() * 100.0;
    if se == 0.0 {
        // Every run gave the same figure on each side: no spread, the difference is exact.
        return Some(TChange {
            change_pct: pct(d),
            interval_pct: [pct(d), pct(d)],
            p_value: if d == 0.0 { 1.0 } else { 0.0 },
            df,
        });
    }
    let t = StudentsT::new(0.0, 1.0, df).ok()?;
    let p_value = (2.0 * t.sf((d / se).abs())).min(1.0);
    let q = t.inverse_cdf(1.0 - alpha / 2.0);
    Some(TChange {
        change_pct: pct(d),
        interval_pct: [pct(d - q * se), pct(d + q * se)],
        p_value,
        df,
    })
}

/// Welch's t-test of `b` against `a` on logs at confidence 1 − `alpha`; `None` with fewer than
/// two runs a side or a figure that is not positive.
pub fn welch_log(a: &[f64], b: &[f64], alpha: f64) -> Option<TChange> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let (la, lb) = (logs(a)?, logs(b)?);
    let (na, nb) = (la.len() as f64, lb.len() as f64);
    let (va, vb) = (variance(&la) / na, variance(&lb) / nb);
    let se = (va + vb).sqrt();
    // Welch-Satterthwaite; with no spread at all the smaller side's n − 1 stands in.
    let df = if va + vb > 0.0 {
        (va + vb).powi(2) / (va.powi(2) / (na - 1.0) + vb.powi(2) / (nb - 1.0))
    } else {
        na.min(nb) - 1.0
    };
    t_change(mean(&lb) - mean(&la), se, df, alpha)
}

/// The paired t-test on the logs of `b[i] / a[i]` (round i's runs) at confidence 1 − `alpha`;
/// `None` with fewer than two pairs, sides of different lengths or a figure that is not
/// positive.
pub fn paired_log(a: &[f64], b: &[f64], alpha: f64) -> Option<TChange> {
    if a.len() != b.len() || a.len() < 2 {
        return None;
    }
    let (la, lb) = (logs(a)?, logs(b)?);
    let d: Vec<f64> = la.iter().zip(&lb).map(|(x, y)| y - x).collect();
    let n = d.len() as f64;
    t_change(mean(&d), (variance(&d) / n).sqrt(), n - 1.0, alpha)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn welch_gives_the_textbook_figures() {
        // Logs A 1.0, 1.1, 0.9, 1.05 and B 1.6, 1.4, 1.9, 1.5: variances 0.021875/3 and
        // 0.14/3, so se = √(0.0072917/4 + 0.046667/4) = 0.116145, t = 0.5875/se = 5.058 and
        // Welch-Satterthwaite's df = 3.915.
        let a = [1.0f64, 1.1, 0.9, 1.05].map(f64::exp);
        let b = [1.6f64, 1.4, 1.9, 1.5].map(f64::exp);
        let t = welch_log(&a, &b, 0.05).unwrap();
        assert!(
            (t.change_pct - 0.5875f64.exp_m1() * 100.0).abs() < 1e-9,
            "{t:?}"
        );
        assert!((t.df - 3.915).abs() < 1e-3, "{t:?}");
        let q = StudentsT::new(0.0, 1.0, t.df).unwrap().inverse_cdf(0.975);
        let lo = (0.5875 - q * 0.116_145f64).exp_m1() * 100.0;
        assert!((t.interval_pct[0] - lo).abs() < 0.01, "{t:?} {lo}");
        // t tables: t = 5.06 on 4 df is two-sided p = 0.0072; on 3.9 df a little more.
        assert!(t.p_value > 0.0072 && t.p_value < 0.009, "{t:?}");
        // The 97.5 % points of t on 4 and 10 df are 2.776 and 2.228.
        for (df, point) in [(4.0, 2.776), (10.0, 2.228)] {
            let q = StudentsT::new(0.0, 1.0, df).unwrap().inverse_cdf(0.975);
            assert!((q - point).abs() < 1e-3, "{df}: {q}");
        }
    }

    #[test]
    fn the_paired_test_cancels_what_both_runs_of_a_round_share() {
        // Rounds drift by a factor of 2 between them, B is 10 % above A in every round: Welch
        // sees the drift as spread and cannot tell; the pairs see the 10 % exactly.
        let a = [1.0, 2.0, 4.0, 1.5, 3.0];
        let b: Vec<f64> = a.iter().map(|x| x * 1.1).collect();
        let w = welch_log(&a, &b, 0.05).unwrap();
        assert!(w.p_value > 0.5 && w.interval_pct[0] < -30.0, "{w:?}");
        let p = paired_log(&a, &b, 0.05).unwrap();
        assert!((p.change_pct - 10.0).abs() < 1e-9, "{p:?}");
        assert!(p.p_value < 1e-9, "{p:?}");
        assert!((p.interval_pct[0] - 10.0).abs() < 1e-6, "{p:?}");
    }

    #[test]
    fn too_few_runs_or_a_zero_give_no_test() {
        assert_eq!(welch_log(&[1.0], &[2.0, 3.0], 0.05), None);
        assert_eq!(welch_log(&[1.0, 0.0], &[2.0, 3.0], 0.05), None);
        assert_eq!(paired_log(&[1.0, 2.0], &[2.0], 0.05), None);
        assert_eq!(paired_log(&[1.0], &[2.0], 0.05), None);
        let same = welch_log(&[2.0, 2.0], &[2.0, 2.0], 0.05).unwrap();
        assert_eq!((same.p_value, same.interval_pct), (1.0, [0.0, 0.0]));
    }
}
