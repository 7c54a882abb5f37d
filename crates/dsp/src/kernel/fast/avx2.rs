//! The fast kernel's AVX2+FMA body: sixteen partials per step whose state stays in registers for a
//! whole pass; runs on audio threads.
//!
//! Each step loads sixteen oscillators, renders every frame of the pass into
//! per-frame vector accumulators on the stack, and writes the state back once.
//! When every amplitude is already at its smoother's fixed point (the usual
//! steady state: in f32 the one-pole smoother stops moving a few thousand
//! ulps from its target) the amplitude is folded into the pan gains and the
//! per-sample smoothing is skipped; the result is the same amplitude the
//! smoother would have produced, sample for sample.

// Intrinsics are safe to call inside `#[target_feature]` functions from Rust
// 1.87 on, but need `unsafe` on the workspace's minimum (1.80).
#![allow(unused_unsafe)]

use std::arch::x86_64::*;
use std::mem::MaybeUninit;

use super::{
    RenderStats, LANES, MAX_PASS_FRAMES, QUARTER_TURN, QUARTER_TURNS_PER_UNIT, SIN_COEFFS,
};
use crate::PartialsMut;

/// Vectors per step: two independent dependency chains per frame, few enough
/// that their state and the constants fit the sixteen ymm registers.
const VECS: usize = 2;
/// Partials per step.
const STEP: usize = LANES * VECS;

/// Oscillator state of one step, one vector per eight partials.
#[derive(Clone, Copy)]
struct Step {
    /// `phase + QUARTER_TURN`.
    u: [__m256i; VECS],
    inc: [__m256i; VECS],
    amp: [__m256; VECS],
    target: [__m256; VECS],
    gain_l: [__m256; VECS],
    gain_r: [__m256; VECS],
    /// All ones in lanes that sound (their state is written back).
    active: [__m256; VECS],
}

/// Renders one pass (at most [`MAX_PASS_FRAMES`] frames).
///
/// # Safety
/// The CPU must support AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn render(
    p: &mut PartialsMut<'_>,
    coeff: f32,
    out_l: &mut [f32],
    out_r: &mut [f32],
) -> RenderStats {
    let n = p.len();
    let frames = out_l.len().min(out_r.len()).min(MAX_PASS_FRAMES);
    let mut acc_l = [MaybeUninit::<__m256>::uninit(); MAX_PASS_FRAMES];
    let mut acc_r = [MaybeUninit::<__m256>::uninit(); MAX_PASS_FRAMES];
    for a in acc_l[..frames].iter_mut().chain(acc_r[..frames].iter_mut()) {
        // SAFETY: AVX is available (this function's contract).
        a.write(unsafe { _mm256_setzero_ps() });
    }
    // SAFETY: the first `frames` entries were initialised just above, and
    // MaybeUninit<T> has T's layout.
    let (acc_l, acc_r) = unsafe {
        (
            std::slice::from_raw_parts_mut(acc_l.as_mut_ptr().cast::<__m256>(), frames),
            std::slice::from_raw_parts_mut(acc_r.as_mut_ptr().cast::<__m256>(), frames),
        )
    };

    let mut computed = 0u32;
    let mut start = 0;
    while start < n {
        let width = STEP.min(n - start);
        let mut buf = Staging::default();
        let from_slices = width == STEP;
        if !from_slices {
            buf.fill(p, start, width);
        }
        // SAFETY: a full step reads STEP elements from `start` of slices at
        // least `n` long; a partial step reads the STEP-long staging arrays.
        let mut s = unsafe {
            if from_slices {
                load(
                    p.phase.as_ptr().add(start),
                    p.inc.as_ptr().add(start),
                    p.amp.as_ptr().add(start),
                    p.target.as_ptr().add(start),
                    p.gain_l.as_ptr().add(start),
                    p.gain_r.as_ptr().add(start),
                )
            } else {
                buf.load()
            }
        };
        // SAFETY: AVX2 is available (this function's contract).
        let active = unsafe { active_count(&s) };
        if active > 0 {
            computed += active;
            // SAFETY: AVX2 and FMA are available (this function's contract).
            unsafe {
                if settled(&s, coeff) {
                    run_settled(&mut s, acc_l, acc_r);
                } else {
                    run_smoothing(&mut s, coeff, acc_l, acc_r);
                }
            }
            // SAFETY: as for the load: STEP elements from `start` of slices at
            // least `n` long, or the staging arrays.
            unsafe {
                if from_slices {
                    store(
                        &s,
                        p.phase.as_mut_ptr().add(start),
                        p.amp.as_mut_ptr().add(start),
                    );
                } else {
                    store(&s, buf.phase.as_mut_ptr(), buf.amp.as_mut_ptr());
                    buf.drain(p, start, width);
                }
            }
        }
        start += width;
    }

    for ((l, r), (al, ar)) in out_l[..frames]
        .iter_mut()
        .zip(out_r[..frames].iter_mut())
        .zip(acc_l.iter().zip(acc_r.iter()))
    {
        // SAFETY: AVX2 is available (this function's contract).
        unsafe {
            *l += hsum(*al);
            *r += hsum(*ar);
        }
    }
    RenderStats { computed }
}

/// A partial step (the last few partials of a view) copied into full-width
/// arrays; lanes past the end stay zero, which reads as silent.
#[derive(Default)]
struct Staging {
    phase: [u32; STEP],
    inc: [u32; STEP],
    amp: [f32; STEP],
    target: [f32; STEP],
    gain_l: [f32; STEP],
    gain_r: [f32; STEP],
}

impl Staging {
    fn fill(&mut self, p: &PartialsMut<'_>, start: usize, width: usize) {
        let r = start..start + width;
        self.phase[..width].copy_from_slice(&p.phase[r.clone()]);
        self.inc[..width].copy_from_slice(&p.inc[r.clone()]);
        self.amp[..width].copy_from_slice(&p.amp[r.clone()]);
        self.target[..width].copy_from_slice(&p.target[r.clone()]);
        self.gain_l[..width].copy_from_slice(&p.gain_l[r.clone()]);
        self.gain_r[..width].copy_from_slice(&p.gain_r[r]);
    }

    /// # Safety
    /// The CPU must support AVX2.
    #[inline(always)]
    unsafe fn load(&self) -> Step {
        // SAFETY: every array holds STEP elements.
        unsafe {
            load(
                self.phase.as_ptr(),
                self.inc.as_ptr(),
                self.amp.as_ptr(),
                self.target.as_ptr(),
                self.gain_l.as_ptr(),
                self.gain_r.as_ptr(),
            )
        }
    }

    /// Copies the written-back state of the real partials home.
    fn drain(&self, p: &mut PartialsMut<'_>, start: usize, width: usize) {
        p.phase[start..start + width].copy_from_slice(&self.phase[..width]);
        p.amp[start..start + width].copy_from_slice(&self.amp[..width]);
    }
}

/// Loads STEP oscillators; non-finite amplitudes read as 0, and silent lanes
/// get zero increment, amplitude and gains so they neither sound nor move.
///
/// # Safety
/// Every pointer must be valid for reading STEP elements; AVX2 is required.
#[inline(always)]
unsafe fn load(
    phase: *const u32,
    inc: *const u32,
    amp: *const f32,
    target: *const f32,
    gain_l: *const f32,
    gain_r: *const f32,
) -> Step {
    // SAFETY: the caller guarantees STEP readable elements behind each pointer.
    unsafe {
        let quarter = _mm256_set1_epi32(QUARTER_TURN as i32);
        let abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(i32::MAX));
        let inf = _mm256_set1_ps(f32::INFINITY);
        let threshold = _mm256_set1_ps(crate::SILENCE_THRESHOLD);
        let zero = _mm256_setzero_ps();
        let mut s = Step {
            u: [_mm256_setzero_si256(); VECS],
            inc: [_mm256_setzero_si256(); VECS],
            amp: [zero; VECS],
            target: [zero; VECS],
            gain_l: [zero; VECS],
            gain_r: [zero; VECS],
            active: [zero; VECS],
        };
        for k in 0..VECS {
            let o = k * LANES;
            let a = _mm256_loadu_ps(amp.add(o));
            let t = _mm256_loadu_ps(target.add(o));
            // Ordered compares are false for NaN: non-finite reads as 0.
            let a = _mm256_and_ps(
                a,
                _mm256_cmp_ps::<_CMP_LT_OQ>(_mm256_and_ps(a, abs_mask), inf),
            );
            let t = _mm256_and_ps(
                t,
                _mm256_cmp_ps::<_CMP_LT_OQ>(_mm256_and_ps(t, abs_mask), inf),
            );
            let on = _mm256_or_ps(
                _mm256_cmp_ps::<_CMP_GE_OQ>(_mm256_and_ps(a, abs_mask), threshold),
                _mm256_cmp_ps::<_CMP_GE_OQ>(_mm256_and_ps(t, abs_mask), threshold),
            );
            let on_i = _mm256_castps_si256(on);
            s.active[k] = on;
            s.u[k] = _mm256_add_epi32(_mm256_loadu_si256(phase.add(o).cast()), quarter);
            s.inc[k] = _mm256_and_si256(_mm256_loadu_si256(inc.add(o).cast()), on_i);
            s.amp[k] = _mm256_and_ps(a, on);
            s.target[k] = _mm256_and_ps(t, on);
            s.gain_l[k] = _mm256_and_ps(_mm256_loadu_ps(gain_l.add(o)), on);
            s.gain_r[k] = _mm256_and_ps(_mm256_loadu_ps(gain_r.add(o)), on);
        }
        s
    }
}

/// Writes phases (silent lanes did not move) and the amplitudes of sounding
/// lanes back; silent lanes keep their stored amplitude, as in the reference.
///
/// # Safety
/// Both pointers must be valid for reading and writing STEP elements; AVX2 is required.
#[inline(always)]
unsafe fn store(s: &Step, phase: *mut u32, amp: *mut f32) {
    // SAFETY: the caller guarantees STEP writable elements behind each pointer.
    unsafe {
        let quarter = _mm256_set1_epi32(QUARTER_TURN as i32);
        for k in 0..VECS {
            let o = k * LANES;
            _mm256_storeu_si256(phase.add(o).cast(), _mm256_sub_epi32(s.u[k], quarter));
            let old = _mm256_loadu_ps(amp.add(o));
            _mm256_storeu_ps(amp.add(o), _mm256_blendv_ps(old, s.amp[k], s.active[k]));
        }
    }
}

/// # Safety
/// AVX2 is required.
#[inline(always)]
unsafe fn active_count(s: &Step) -> u32 {
    let mut count = 0;
    for k in 0..VECS {
        // SAFETY: AVX is available (the caller's contract).
        count += unsafe { _mm256_movemask_ps(s.active[k]) }.count_ones();
    }
    count
}

/// True when one smoothing step leaves every amplitude unchanged: then it
/// stays unchanged for the whole pass, and the smoother can be skipped exactly.
///
/// # Safety
/// AVX2 is required.
#[inline(always)]
unsafe fn settled(s: &Step, coeff: f32) -> bool {
    // SAFETY: AVX is available (the caller's contract).
    unsafe {
        let c = _mm256_set1_ps(coeff);
        (0..VECS).all(|k| {
            let next = smooth(s.amp[k], s.target[k], c);
            _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_EQ_OQ>(next, s.amp[k])) == 0xFF
        })
    }
}

/// One smoother step, `amp + (target - amp) * coeff`, with the reference's
/// rounding (no fused multiply-add).
///
/// # Safety
/// AVX is required.
#[inline(always)]
unsafe fn smooth(amp: __m256, target: __m256, coeff: __m256) -> __m256 {
    // SAFETY: AVX is available (the caller's contract).
    unsafe { _mm256_add_ps(amp, _mm256_mul_ps(_mm256_sub_ps(target, amp), coeff)) }
}

/// sin(2 pi (u - QUARTER_TURN) / 2^32) in each lane; see `super::sin_shifted`.
///
/// # Safety
/// AVX2 and FMA are required.
#[inline(always)]
unsafe fn sin_shifted(u: __m256i) -> __m256 {
    // SAFETY: AVX2 and FMA are available (the caller's contract).
    unsafe {
        let x = _mm256_sub_epi32(_mm256_abs_epi32(u), _mm256_set1_epi32(QUARTER_TURN as i32));
        let t = _mm256_mul_ps(
            _mm256_cvtepi32_ps(x),
            _mm256_set1_ps(QUARTER_TURNS_PER_UNIT),
        );
        let t2 = _mm256_mul_ps(t, t);
        let c = |i: usize| _mm256_set1_ps(SIN_COEFFS[i]);
        let p = _mm256_fmadd_ps(c(4), t2, c(3));
        let p = _mm256_fmadd_ps(p, t2, c(2));
        let p = _mm256_fmadd_ps(p, t2, c(1));
        let p = _mm256_fmadd_ps(p, t2, c(0));
        _mm256_mul_ps(p, t)
    }
}

/// Constant amplitudes: `out += sin * (amp * gain)`.
///
/// # Safety
/// AVX2 and FMA are required.
#[target_feature(enable = "avx2,fma")]
unsafe fn run_settled(s: &mut Step, acc_l: &mut [__m256], acc_r: &mut [__m256]) {
    // SAFETY: AVX2 and FMA are available (this function's contract); only
    // register arithmetic, no pointers.
    unsafe {
        let mut u = s.u;
        let inc = s.inc;
        let mut gl = s.gain_l;
        let mut gr = s.gain_r;
        for k in 0..VECS {
            gl[k] = _mm256_mul_ps(gl[k], s.amp[k]);
            gr[k] = _mm256_mul_ps(gr[k], s.amp[k]);
        }
        for (al, ar) in acc_l.iter_mut().zip(acc_r.iter_mut()) {
            let (mut l, mut r) = (*al, *ar);
            for k in 0..VECS {
                let v = sin_shifted(u[k]);
                l = _mm256_fmadd_ps(v, gl[k], l);
                r = _mm256_fmadd_ps(v, gr[k], r);
                u[k] = _mm256_add_epi32(u[k], inc[k]);
            }
            (*al, *ar) = (l, r);
        }
        s.u = u;
    }
}

/// Amplitudes on their way to their targets: one smoother step per sample.
///
/// # Safety
/// AVX2 and FMA are required.
#[target_feature(enable = "avx2,fma")]
unsafe fn run_smoothing(s: &mut Step, coeff: f32, acc_l: &mut [__m256], acc_r: &mut [__m256]) {
    // SAFETY: AVX2 and FMA are available (this function's contract); only
    // register arithmetic, no pointers.
    unsafe {
        let c = _mm256_set1_ps(coeff);
        let (mut u, mut amp) = (s.u, s.amp);
        let (inc, target, gl, gr) = (s.inc, s.target, s.gain_l, s.gain_r);
        for (al, ar) in acc_l.iter_mut().zip(acc_r.iter_mut()) {
            let (mut l, mut r) = (*al, *ar);
            for k in 0..VECS {
                amp[k] = smooth(amp[k], target[k], c);
                let v = _mm256_mul_ps(sin_shifted(u[k]), amp[k]);
                l = _mm256_fmadd_ps(v, gl[k], l);
                r = _mm256_fmadd_ps(v, gr[k], r);
                u[k] = _mm256_add_epi32(u[k], inc[k]);
            }
            (*al, *ar) = (l, r);
        }
        (s.u, s.amp) = (u, amp);
    }
}

/// Sum of the eight lanes.
///
/// # Safety
/// AVX is required.
#[inline(always)]
unsafe fn hsum(v: __m256) -> f32 {
    // SAFETY: AVX is available (the caller's contract).
    unsafe {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        let s = _mm_add_ss(s, _mm_shuffle_ps::<1>(s, s));
        _mm_cvtss_f32(s)
    }
}
