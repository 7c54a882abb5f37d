//! Order statistics of small samples, one definition each: which median (interpolated or the
//! lower middle), which percentile (nearest rank) and which quantile (interpolated) a figure
//! uses is said by the function's name. Used by the lab, compare and the binary's benches, on
//! whichever control thread calls them; never on an audio thread (they sort copies).
//!
//! Every function takes any floats, NaN included (sorted by [`f64::total_cmp`], so NaN sorts
//! last), and returns `None` for an empty sample rather than panicking.

/// The median, interpolated: the middle value of an odd count, the mean of the middle two of
/// an even count. `None` when `v` is empty.
pub fn median_interpolated(v: &[f64]) -> Option<f64> {
    let s = sorted(v);
    let n = s.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(s[n / 2]),
        _ => Some((s[n / 2 - 1] + s[n / 2]) / 2.0),
    }
}

/// The lower median: the middle value of an odd count, the lower of the middle two of an even
/// count, so always a value that was observed. `None` when `v` is empty.
pub fn median_lower(v: &[f64]) -> Option<f64> {
    percentile_nearest_rank_sorted(&sorted(v), 0.5)
}

/// The `q` percentile (0..=1) of an ascending sample by nearest rank: the smallest value with
/// at least a `q` share of the sample at or below it (rank ⌈q·n⌉, at least 1). `None` when
/// `sorted` is empty. The caller sorts (a sample asked for several percentiles is sorted once).
pub fn percentile_nearest_rank_sorted(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let n = sorted.len();
    let rank = (q.clamp(0.0, 1.0) * n as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, n) - 1])
}

/// The `q` quantile (0..=1) by linear interpolation between order statistics (Hyndman and
/// Fan's type 7, R's and NumPy's default): position q·(n−1). `None` when `v` is empty.
pub fn quantile_interpolated(v: &[f64], q: f64) -> Option<f64> {
    let s = sorted(v);
    if s.is_empty() {
        return None;
    }
    let pos = q.clamp(0.0, 1.0) * (s.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    Some(s[lo] + (s[hi] - s[lo]) * (pos - lo as f64))
}

/// The arithmetic mean. `None` when `v` is empty.
pub fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

fn sorted(v: &[f64]) -> Vec<f64> {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(median_interpolated(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median_interpolated(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median_lower(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median_lower(&[4.0, 1.0, 2.0, 3.0]), Some(2.0));
        assert_eq!(median_interpolated(&[]), None);
        assert_eq!(median_lower(&[]), None);
        assert_eq!(median_lower(&[7.0]), Some(7.0));
    }

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile_nearest_rank_sorted(&v, 0.5), Some(50.0));
        assert_eq!(percentile_nearest_rank_sorted(&v, 0.99), Some(99.0));
        assert_eq!(percentile_nearest_rank_sorted(&v, 1.0), Some(100.0));
        assert_eq!(percentile_nearest_rank_sorted(&v, 0.0), Some(1.0));
        assert_eq!(percentile_nearest_rank_sorted(&[], 0.5), None);
    }

    #[test]
    fn interpolated_quantiles_and_the_mean() {
        let v = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(quantile_interpolated(&v, 0.5), Some(3.0));
        assert_eq!(quantile_interpolated(&v, 0.25), Some(2.0));
        assert_eq!(quantile_interpolated(&v, 0.1), Some(1.4));
        assert_eq!(quantile_interpolated(&[], 0.5), None);
        assert_eq!(mean(&v), Some(3.0));
        assert_eq!(mean(&[]), None);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// Every median lies within the sample's range, the lower one is observed, and the
        /// interpolated one is the type-7 quantile at 0.5.
        #[test]
        fn medians_lie_in_the_sample(v in prop::collection::vec(-1e9f64..1e9, 1..60)) {
            let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let m = median_interpolated(&v).unwrap();
            let l = median_lower(&v).unwrap();
            prop_assert!(lo <= m && m <= hi);
            prop_assert!(v.contains(&l));
            prop_assert!(l <= m);
            let q = quantile_interpolated(&v, 0.5).unwrap();
            prop_assert!((q - m).abs() <= 1e-6 * m.abs().max(1.0));
        }

        /// Any floats, NaN and infinities included, give a value, never a panic.
        #[test]
        fn any_floats_never_panic(v in prop::collection::vec(any::<f64>(), 0..40), q in any::<f64>()) {
            let _ = median_interpolated(&v);
            let _ = median_lower(&v);
            let _ = quantile_interpolated(&v, q);
            let mut s = v.clone();
            s.sort_by(f64::total_cmp);
            let _ = percentile_nearest_rank_sorted(&s, q);
        }
    }
}
