//! How close the fast kernel runs to this CPU's own limit: the CPU's peak rate of vector
//! floating-point operations, measured with a short unrolled loop of independent FMA chains, and
//! the kernel's operation count, which together give the fastest the kernel could run here (its
//! roofline). Runs on the caller's thread (the `bench` command's main thread).
//!
//! Why a roofline instead of a fixed speed-up target: the fast kernel's speed over the scalar
//! reference depends on the vector width and FMA throughput of the machine (about 25x with
//! AVX-512, 12-13x on a 2-core AVX2 VM), so "at least 20x" said more about the CPU than the code.

use std::time::{Duration, Instant};

/// Vector floating-point operations of the fast kernel's steady state (constant amplitudes)
/// per 8 partial-samples (one 256-bit register of partials, one sample): the folded sine
/// (`cvtepi32_ps`, 3 `mul_ps`, 4 `fmadd_ps`) and the left and right accumulations (2
/// `fmadd_ps`). Each is one instruction on the FP ports; the integer phase step, abs and
/// subtract run on other ports and are not counted. `fast_kernel_op_count_matches_its_code`
/// counts them in the kernel's source.
pub const FAST_FP_OPS_PER_8_PARTIAL_SAMPLES: u32 = 10;

/// The CPU's measured peak.
#[derive(Debug, Clone, PartialEq)]
pub struct Peak {
    /// What was measured: `256-bit FMA (AVX2)` or `scalar f32 FMA`.
    pub unit: &'static str,
    /// Lanes per operation (8 for 256-bit f32).
    pub lanes: u32,
    /// Operations per ns on one core.
    pub ops_per_ns: f64,
}

/// Independent accumulator chains: more than FMA latency (4-5 cycles) x FMA ports (2) needs.
const CHAINS: usize = 12;

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
/// # Safety
/// AVX2 and FMA are required.
unsafe fn fma_loop_avx2(iterations: u64) -> f32 {
    use std::arch::x86_64::*;
    // SAFETY: AVX2 and FMA are available (this function's contract); registers only.
    unsafe {
        let a = _mm256_set1_ps(0.999_999);
        let b = _mm256_set1_ps(1e-7);
        let mut acc = [_mm256_set1_ps(1.0); CHAINS];
        for _ in 0..iterations {
            for x in acc.iter_mut() {
                *x = _mm256_fmadd_ps(*x, a, b);
            }
        }
        let mut sum = _mm256_setzero_ps();
        for x in acc {
            sum = _mm256_add_ps(sum, x);
        }
        let mut out = [0f32; 8];
        _mm256_storeu_ps(out.as_mut_ptr(), sum);
        out.iter().sum()
    }
}

fn fma_loop_scalar(iterations: u64) -> f32 {
    let mut acc = [1f32; CHAINS];
    for _ in 0..iterations {
        for x in acc.iter_mut() {
            *x = x.mul_add(0.999_999, 1e-7);
        }
    }
    acc.iter().sum()
}

/// Measures the peak for about `duration` and keeps the best of several rounds (the least
/// disturbed by the rest of the machine).
pub fn measure_peak(duration: Duration) -> Peak {
    let rounds = 5;
    let per_round = duration / rounds;
    #[cfg(target_arch = "x86_64")]
    let vector =
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma");
    #[cfg(not(target_arch = "x86_64"))]
    let vector = false;
    let run = |iterations: u64| -> f32 {
        #[cfg(target_arch = "x86_64")]
        if vector {
            // SAFETY: AVX2 and FMA were detected just above.
            return unsafe { fma_loop_avx2(iterations) };
        }
        fma_loop_scalar(iterations)
    };
    // Calibrate to the round length, then time rounds of that many iterations.
    let mut iterations = 10_000u64;
    loop {
        let t = Instant::now();
        std::hint::black_box(run(iterations));
        if t.elapsed() >= per_round / 4 || iterations > 1 << 34 {
            break;
        }
        iterations *= 2;
    }
    let best_ns = (0..rounds)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(run(iterations));
            t.elapsed().as_nanos().max(1) as f64
        })
        .fold(f64::INFINITY, f64::min);
    let ops = (iterations * CHAINS as u64) as f64;
    let (unit, lanes) = if vector {
        ("256-bit FMA (AVX2)", 8)
    } else {
        ("scalar f32 FMA", 1)
    };
    Peak {
        unit,
        lanes,
        ops_per_ns: ops / best_ns,
    }
}

/// The fastest the fast kernel could run at `peak`, ns per partial-sample (its roofline). With a
/// scalar peak the count is the same operations on one lane each.
pub fn fast_kernel_roofline_ns(peak: &Peak) -> f64 {
    let ops_per_partial_sample =
        f64::from(FAST_FP_OPS_PER_8_PARTIAL_SAMPLES) / 8.0 * (8.0 / f64::from(peak.lanes)).max(1.0);
    ops_per_partial_sample / peak.ops_per_ns
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vector FP instructions of the steady-state loop: `sin_shifted` and the two
    /// accumulations in `run_settled`'s inner loop, counted in the kernel's own source.
    #[test]
    fn fast_kernel_op_count_matches_its_code() {
        let src = include_str!("kernel/fast/avx2.rs");
        let body = |start: &str| {
            let at = src
                .find(start)
                .unwrap_or_else(|| panic!("{start} is in avx2.rs"));
            let rest = &src[at..];
            // The function's body: up to the next item.
            let end = rest[1..]
                .find("\nunsafe fn ")
                .or(rest[1..].find("\n///"))
                .map_or(rest.len(), |e| e + 1);
            &rest[..end]
        };
        let fp_ops = |text: &str| {
            ["_mm256_fmadd_ps(", "_mm256_mul_ps(", "_mm256_cvtepi32_ps("]
                .iter()
                .map(|op| text.matches(op).count())
                .sum::<usize>()
        };
        let sine = fp_ops(body("unsafe fn sin_shifted("));
        let settled = body("unsafe fn run_settled(");
        // Only the per-sample loop counts: the gains are scaled once per block, before it.
        let inner = &settled[settled.find("for (al, ar)").expect("the per-sample loop")..];
        let accumulate = fp_ops(inner);
        assert_eq!(sine, 8, "cvt + 3 mul + 4 fmadd in sin_shifted");
        assert_eq!(accumulate, 2, "left and right fmadd per sample");
        assert_eq!(
            (sine + accumulate) as u32,
            FAST_FP_OPS_PER_8_PARTIAL_SAMPLES
        );
    }

    #[test]
    fn the_peak_is_positive_and_the_roofline_follows_from_it() {
        let peak = measure_peak(Duration::from_millis(50));
        assert!(
            peak.ops_per_ns > 0.0 && peak.ops_per_ns.is_finite(),
            "{peak:?}"
        );
        let roof = fast_kernel_roofline_ns(&peak);
        assert!(
            (roof * peak.ops_per_ns
                - f64::from(FAST_FP_OPS_PER_8_PARTIAL_SAMPLES) / 8.0
                    * (8.0 / f64::from(peak.lanes)))
            .abs()
                < 1e-9
        );
    }
}
