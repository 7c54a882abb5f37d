//! How often a method's verdicts are right, measured over trials whose truth is known (`bench
//! compare`, the simulation tests): a count of x in n and its exact (Clopper-Pearson) interval,
//! from statrs' beta quantiles. Main thread.

use statrs::distribution::{Beta, ContinuousCDF};

/// The 95 % Clopper-Pearson interval of a proportion seen `x` times in `n` trials (`n` > 0).
pub fn proportion_interval(x: u64, n: u64) -> [f64; 2] {
    let (xf, nf) = (x as f64, n as f64);
    let lo = if x == 0 {
        0.0
    } else {
        Beta::new(xf, nf - xf + 1.0).map_or(0.0, |b| b.inverse_cdf(0.025))
    };
    let hi = if x >= n {
        1.0
    } else {
        Beta::new(xf + 1.0, nf - xf).map_or(1.0, |b| b.inverse_cdf(0.975))
    };
    [lo, hi]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_clopper_pearsons_published_intervals() {
        // 5 of 10: [0.187086, 0.812914]; 0 of 10: [0, 0.308497] (the rule of three's exact form).
        let [lo, hi] = proportion_interval(5, 10);
        assert!((lo - 0.187_086).abs() < 1e-5 && (hi - 0.812_914).abs() < 1e-5);
        let [lo, hi] = proportion_interval(0, 10);
        assert!(lo == 0.0 && (hi - 0.308_497).abs() < 1e-5, "{hi}");
        assert_eq!(proportion_interval(10, 10)[1], 1.0);
    }
}
