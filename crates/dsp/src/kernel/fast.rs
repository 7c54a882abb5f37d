//! The fast kernel: eight partials per vector lane group, a folded odd polynomial instead of `sinf`; runs on audio threads.
//!
//! The phase stays the exact 32-bit fixed-point value the reference kernel
//! uses, so the two kernels agree sample for sample up to the polynomial's
//! error (about 1e-7 of each partial's amplitude) however long they run.

use super::{is_silent, RenderStats, RAD_PER_PHASE_UNIT};
use crate::PartialsMut;

/// Partials computed side by side: one AVX register of f32.
const LANES: usize = 8;
/// Frames per accumulation block; the per-lane accumulators stay in L1.
const BLOCK: usize = 64;
/// A quarter turn in fixed point.
const QUARTER_TURN: i32 = 1 << 30;

pub(super) fn render(
    p: PartialsMut<'_>,
    coeff: f32,
    out_l: &mut [f32],
    out_r: &mut [f32],
) -> RenderStats {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: the CPU supports AVX2 and FMA, checked just above.
            return unsafe { render_avx2(p, coeff, out_l, out_r) };
        }
    }
    render_lanes(p, coeff, out_l, out_r)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn render_avx2(
    p: PartialsMut<'_>,
    coeff: f32,
    out_l: &mut [f32],
    out_r: &mut [f32],
) -> RenderStats {
    render_lanes(p, coeff, out_l, out_r)
}

/// sin(x) for x in [-pi/2, pi/2]: Taylor series to x^11, error below 6e-8.
#[inline(always)]
fn sin_quadrant(x: f32) -> f32 {
    let x2 = x * x;
    let p = -2.505_210_8e-8_f32;
    let p = p * x2 + 2.755_731_9e-6;
    let p = p * x2 - 1.984_127e-4;
    let p = p * x2 + 8.333_333_e-3;
    let p = p * x2 - 1.666_666_7e-1;
    let p = p * x2 + 1.0;
    p * x
}

/// Folds a signed fixed-point phase into [-quarter, quarter] turn with the
/// same sine: sin(pi - x) = sin(x) and sin(-pi - x) = sin(x).
#[inline(always)]
fn fold(phase: u32) -> f32 {
    let p = phase as i32;
    let q = if !(-QUARTER_TURN..=QUARTER_TURN).contains(&p) {
        i32::MIN.wrapping_sub(p)
    } else {
        p
    };
    q as f32 * RAD_PER_PHASE_UNIT
}

struct LaneGroup {
    phase: [u32; LANES],
    inc: [u32; LANES],
    amp: [f32; LANES],
    target: [f32; LANES],
    coeff: [f32; LANES],
    gain_l: [f32; LANES],
    gain_r: [f32; LANES],
}

#[inline(always)]
fn render_lanes(
    p: PartialsMut<'_>,
    coeff: f32,
    out_l: &mut [f32],
    out_r: &mut [f32],
) -> RenderStats {
    let n = p.len();
    let frames = out_l.len().min(out_r.len());
    let mut computed = 0u32;
    // Count once: the set of silent partials does not change inside one call
    // (amplitudes only move when a partial is computed).
    for i in 0..n {
        if !is_silent(p.amp[i], p.target[i]) {
            computed += 1;
        }
    }
    if computed == 0 {
        return RenderStats { computed };
    }
    let mut acc_l = [[0f32; LANES]; BLOCK];
    let mut acc_r = [[0f32; LANES]; BLOCK];
    let mut block_start = 0;
    while block_start < frames {
        let block_len = BLOCK.min(frames - block_start);
        for a in acc_l[..block_len]
            .iter_mut()
            .chain(acc_r[..block_len].iter_mut())
        {
            *a = [0.0; LANES];
        }
        let mut group_start = 0;
        while group_start < n {
            let mut g = LaneGroup {
                phase: [0; LANES],
                inc: [0; LANES],
                amp: [0.0; LANES],
                target: [0.0; LANES],
                coeff: [0.0; LANES],
                gain_l: [0.0; LANES],
                gain_r: [0.0; LANES],
            };
            let mut any = false;
            for l in 0..LANES {
                let i = group_start + l;
                // Silent partials and lanes past the end stay frozen and mute,
                // exactly as the reference kernel skips them.
                if i < n && !is_silent(p.amp[i], p.target[i]) {
                    any = true;
                    g.phase[l] = p.phase[i];
                    g.inc[l] = p.inc[i];
                    g.amp[l] = p.amp[i];
                    g.target[l] = p.target[i];
                    g.coeff[l] = coeff;
                    g.gain_l[l] = p.gain_l[i];
                    g.gain_r[l] = p.gain_r[i];
                }
            }
            if any {
                run_block(&mut g, &mut acc_l[..block_len], &mut acc_r[..block_len]);
                for l in 0..LANES {
                    let i = group_start + l;
                    if i < n && g.coeff[l] != 0.0 {
                        p.phase[i] = g.phase[l];
                        p.amp[i] = g.amp[l];
                    }
                }
            }
            group_start += LANES;
        }
        for f in 0..block_len {
            out_l[block_start + f] += acc_l[f].iter().sum::<f32>();
            out_r[block_start + f] += acc_r[f].iter().sum::<f32>();
        }
        block_start += block_len;
    }
    RenderStats { computed }
}

#[inline(always)]
fn run_block(g: &mut LaneGroup, acc_l: &mut [[f32; LANES]], acc_r: &mut [[f32; LANES]]) {
    for (al, ar) in acc_l.iter_mut().zip(acc_r.iter_mut()) {
        for l in 0..LANES {
            g.amp[l] += (g.target[l] - g.amp[l]) * g.coeff[l];
            let v = sin_quadrant(fold(g.phase[l])) * g.amp[l];
            al[l] += v * g.gain_l[l];
            ar[l] += v * g.gain_r[l];
            g.phase[l] = g.phase[l].wrapping_add(g.inc[l]);
        }
    }
}
