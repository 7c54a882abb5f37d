//! The fast kernel: eight partials per vector, a folded odd polynomial instead of `sinf`; runs on
//! audio threads.
//!
//! The phase stays the exact 32-bit fixed-point value the reference kernel
//! uses, so the two kernels agree sample for sample up to the polynomial's
//! error (about 1e-7 of each partial's amplitude) however long they run. The
//! amplitude smoother uses the reference's exact operations (no fused
//! multiply-add), so amplitudes agree bit for bit.
//!
//! On x86_64 with AVX2 and FMA the [`avx2`] body runs; elsewhere a portable
//! version of the same arithmetic, written so compilers can vectorise it.

#[cfg(target_arch = "x86_64")]
mod avx2;

use super::{is_silent, sanitize, RenderStats, MAX_PASS_FRAMES};
use crate::PartialsMut;

/// Partials computed side by side: one AVX register of f32.
const LANES: usize = 8;
/// A quarter turn in fixed point. Oscillators run on `phase + QUARTER_TURN`
/// so that folding onto the sine's monotonic half is one absolute value.
const QUARTER_TURN: u32 = 1 << 30;
/// Quarter turns per fixed-point unit.
const QUARTER_TURNS_PER_UNIT: f32 = 1.0 / QUARTER_TURN as f32;
/// sin(pi/2 * t) ~= t * (c0 + c1 t^2 + c2 t^4 + c3 t^6 + c4 t^8) for t in
/// [-1, 1]: minimax (Remez) fit, error below 5e-8 with f32 coefficients.
const SIN_COEFFS: [f32; 5] = [
    std::f32::consts::FRAC_PI_2,
    -0.645_963_4,
    0.079_688_48,
    -0.004_672_228,
    0.000_150_820_56,
];

pub(super) fn render(
    p: &mut PartialsMut<'_>,
    coeff: f32,
    out_l: &mut [f32],
    out_r: &mut [f32],
) -> RenderStats {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: the CPU supports AVX2 and FMA, checked just above.
            return unsafe { avx2::render(p, coeff, out_l, out_r) };
        }
    }
    render_portable(p, coeff, out_l, out_r)
}

/// Maps an oscillator value (`phase + QUARTER_TURN`) to the fixed-point
/// angle in [-QUARTER_TURN, QUARTER_TURN] with the same sine as `phase`:
/// sin(x) = cos(x - pi/2) is even in `x - pi/2`, i.e. `|u| - quarter`.
#[inline(always)]
fn fold_shifted(u: u32) -> i32 {
    (u as i32).wrapping_abs().wrapping_sub(QUARTER_TURN as i32)
}

/// sin(2 pi (u - QUARTER_TURN) / 2^32), the portable twin of `avx2::sin_shifted`.
#[inline(always)]
fn sin_shifted(u: u32) -> f32 {
    let t = fold_shifted(u) as f32 * QUARTER_TURNS_PER_UNIT;
    let t2 = t * t;
    let c = SIN_COEFFS;
    ((((c[4] * t2 + c[3]) * t2 + c[2]) * t2 + c[1]) * t2 + c[0]) * t
}

/// Eight oscillators; silent lanes have zero increment and zero gains.
#[derive(Default)]
struct Lanes {
    u: [u32; LANES],
    inc: [u32; LANES],
    amp: [f32; LANES],
    target: [f32; LANES],
    gain_l: [f32; LANES],
    gain_r: [f32; LANES],
}

fn render_portable(
    p: &mut PartialsMut<'_>,
    coeff: f32,
    out_l: &mut [f32],
    out_r: &mut [f32],
) -> RenderStats {
    let n = p.len();
    let frames = out_l.len().min(out_r.len()).min(MAX_PASS_FRAMES);
    let mut acc_l = [[0f32; LANES]; MAX_PASS_FRAMES];
    let mut acc_r = [[0f32; LANES]; MAX_PASS_FRAMES];
    let (acc_l, acc_r) = (&mut acc_l[..frames], &mut acc_r[..frames]);
    let mut computed = 0u32;
    for start in (0..n).step_by(LANES) {
        let mut g = Lanes::default();
        let mut active = [false; LANES];
        for (l, on) in active.iter_mut().enumerate().take(n - start) {
            let i = start + l;
            let (amp, target) = (sanitize(p.amp[i]), sanitize(p.target[i]));
            if is_silent(amp, target) {
                continue;
            }
            *on = true;
            computed += 1;
            g.u[l] = p.phase[i].wrapping_add(QUARTER_TURN);
            g.inc[l] = p.inc[i];
            g.amp[l] = amp;
            g.target[l] = target;
            g.gain_l[l] = p.gain_l[i];
            g.gain_r[l] = p.gain_r[i];
        }
        if !active.contains(&true) {
            continue;
        }
        for (al, ar) in acc_l.iter_mut().zip(acc_r.iter_mut()) {
            for l in 0..LANES {
                g.amp[l] += (g.target[l] - g.amp[l]) * coeff;
                let v = sin_shifted(g.u[l]) * g.amp[l];
                al[l] += v * g.gain_l[l];
                ar[l] += v * g.gain_r[l];
                g.u[l] = g.u[l].wrapping_add(g.inc[l]);
            }
        }
        for (l, _) in active.iter().enumerate().filter(|(_, on)| **on) {
            p.phase[start + l] = g.u[l].wrapping_sub(QUARTER_TURN);
            p.amp[start + l] = g.amp[l];
        }
    }
    for (f, (al, ar)) in acc_l.iter().zip(acc_r.iter()).enumerate() {
        out_l[f] += al.iter().sum::<f32>();
        out_r[f] += ar.iter().sum::<f32>();
    }
    RenderStats { computed }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{smoothing_coeff, Chord, PartialBank};

    #[test]
    fn polynomial_sine_matches_sin_over_the_whole_turn() {
        let mut worst = 0f64;
        for k in 0..(1u64 << 20) {
            let phase = (k << 12) as u32 ^ 0x5A5;
            let u = phase.wrapping_add(QUARTER_TURN);
            let exact = (f64::from(phase as i32) * std::f64::consts::PI / 2_147_483_648.0).sin();
            worst = worst.max((f64::from(sin_shifted(u)) - exact).abs());
        }
        // Polynomial error plus f32 rounding: about -130 dB of the partial.
        assert!(worst < 3e-7, "worst polynomial error {worst:e}");
        // The folding corners: peaks and zero crossings land exactly.
        assert_eq!(sin_shifted(QUARTER_TURN), 0.0);
        assert_eq!(sin_shifted(QUARTER_TURN.wrapping_mul(2)), 1.0);
        assert_eq!(sin_shifted(0), -1.0);
        assert_eq!(sin_shifted(QUARTER_TURN.wrapping_mul(3)), 0.0);
    }

    /// The portable body is not the one that runs on AVX2 machines, so it is
    /// checked against the reference here.
    #[test]
    fn portable_body_agrees_with_reference() {
        let chord = Chord::single(48_000, crate::ChordNotes::Apl);
        let coeff = smoothing_coeff(48_000);
        let mut a = PartialBank::new(&chord);
        a.set_active(0, 301);
        a.amp[299] = f32::NAN;
        let mut b = a.clone();
        let mut worst = 0f32;
        for buffer in 0..200 {
            if buffer == 100 {
                a.set_active(301, 37);
                b.set_active(301, 37);
            }
            let (mut al, mut ar) = ([0f32; 128], [0f32; 128]);
            let (mut bl, mut br) = ([0f32; 128], [0f32; 128]);
            let n = a.len();
            let sa =
                super::super::reference::render(&mut a.view_mut(0, n), coeff, &mut al, &mut ar);
            let sb = render_portable(&mut b.view_mut(0, n), coeff, &mut bl, &mut br);
            assert_eq!(sa, sb);
            for (x, y) in al.iter().chain(&ar).zip(bl.iter().chain(&br)) {
                worst = worst.max((x - y).abs());
            }
        }
        assert_eq!(a.phase, b.phase);
        assert_eq!(a.amp, b.amp);
        assert!(worst < 3.2e-5, "worst difference {worst:e}");
    }
}
