//! A latency histogram in 1 µs buckets up to a cap, with an overflow count, exact min/max/sum and
//! the first overflow cycles, as cyclictest keeps it, and beside it the same latencies in an
//! HdrHistogram (1 ns steps, 3 significant digits, no cap) for the result file's interchange text;
//! recorded on a measuring thread (allocation-free after [`Histogram::new`]), summarized
//! afterwards.

use xrunlab_engine::{Distribution, Scale};

/// Overflow cycle numbers kept per thread, as cyclictest prints them.
pub const OVERFLOW_CYCLES_KEPT: usize = 20;

/// Latencies of one thread.
#[derive(Debug, Clone)]
pub struct Histogram {
    buckets: Vec<u64>,
    overflows: u64,
    overflow_cycles: [u64; OVERFLOW_CYCLES_KEPT],
    count: u64,
    sum_ns: u128,
    min_ns: u64,
    max_ns: u64,
    /// Every latency in µs at 1 ns steps: fixed bounds, so recording never allocates.
    exact: Distribution,
}

pub use xrunlab_results::wakeup::LatencySummary;

impl Histogram {
    /// A histogram of `cap_us` 1 µs buckets (at least 1); everything from `cap_us` up counts as overflow.
    pub fn new(cap_us: usize) -> Histogram {
        Histogram {
            buckets: vec![0; cap_us.max(1)],
            overflows: 0,
            overflow_cycles: [0; OVERFLOW_CYCLES_KEPT],
            count: 0,
            sum_ns: 0,
            min_ns: u64::MAX,
            max_ns: 0,
            exact: Distribution::new(Scale::Micros),
        }
    }

    /// Records one latency of `ns` nanoseconds at loop `cycle`. Allocation-free.
    pub fn record(&mut self, ns: u64, cycle: u64) {
        let us = (ns / 1000) as usize;
        match self.buckets.get_mut(us) {
            Some(b) => *b += 1,
            None => {
                if let Some(slot) = self.overflow_cycles.get_mut(self.overflows as usize) {
                    *slot = cycle;
                }
                self.overflows += 1;
            }
        }
        self.count += 1;
        self.sum_ns += ns as u128;
        self.min_ns = self.min_ns.min(ns);
        self.max_ns = self.max_ns.max(ns);
        self.exact.record(ns as f64 / 1000.0);
    }

    /// The latencies in microseconds, kept past the cap: what the result file encodes.
    pub fn distribution(&self) -> &Distribution {
        &self.exact
    }

    /// Samples recorded, overflows included.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The buckets (index = µs).
    pub fn buckets(&self) -> &[u64] {
        &self.buckets
    }

    /// Samples at or above the cap.
    pub fn overflows(&self) -> u64 {
        self.overflows
    }

    /// The loop numbers of the first overflows (at most [`OVERFLOW_CYCLES_KEPT`]).
    pub fn overflow_cycles(&self) -> &[u64] {
        let n = (self.overflows as usize).min(OVERFLOW_CYCLES_KEPT);
        &self.overflow_cycles[..n]
    }

    /// The lower edge of the bucket holding quantile `q` (0..=1), in µs.
    fn quantile_us(&self, q: f64) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let rank = ((q * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (us, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return us as f64;
            }
        }
        self.buckets.len() as f64
    }

    /// Min, avg, percentiles and max in µs (zeros when nothing was recorded).
    pub fn summary(&self) -> LatencySummary {
        let n = self.count.max(1) as f64;
        LatencySummary {
            count: self.count,
            min_us: if self.count == 0 {
                0.0
            } else {
                self.min_ns as f64 / 1000.0
            },
            avg_us: self.sum_ns as f64 / n / 1000.0,
            p50_us: self.quantile_us(0.5),
            p99_us: self.quantile_us(0.99),
            p999_us: self.quantile_us(0.999),
            max_us: self.max_ns as f64 / 1000.0,
            overflows: self.overflows,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_percentiles_and_overflow_follow_the_samples() {
        let mut h = Histogram::new(10);
        for i in 0..100u64 {
            h.record(i % 10 * 1000 + 500, i);
        }
        h.record(25_000, 100);
        let s = h.summary();
        assert_eq!(s.count, 101);
        assert_eq!(h.buckets().iter().sum::<u64>() + h.overflows(), 101);
        assert_eq!(s.overflows, 1);
        assert_eq!(h.overflow_cycles(), &[100]);
        assert_eq!(s.min_us, 0.5);
        assert_eq!(s.max_us, 25.0);
        assert_eq!(s.p50_us, 5.0, "the 51st of 101 samples lies in bucket 5");
        assert_eq!(
            s.p999_us, 10.0,
            "the top sample is in the overflow: the cap"
        );
    }
}
