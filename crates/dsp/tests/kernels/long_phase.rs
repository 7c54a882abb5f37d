//! Ten minutes of audio in many calls: the fixed-point phase ends exactly where the arithmetic says
//! and the output is still the analytic sine; runs on the test threads.

use crate::common::{settle, SR};
use xrunlab_dsp::{render, smoothing_coeff, Chord, Kernel, PartialBank};

const FRAMES: usize = 10 * 60 * SR as usize;
const CHUNK: usize = 1024;

#[test]
fn phase_is_exact_after_ten_minutes() {
    let chord = Chord::single(SR, xrunlab_dsp::ChordNotes::Apl);
    let coeff = smoothing_coeff(SR);
    for kernel in [Kernel::Reference, Kernel::Fast] {
        let mut bank = PartialBank::new(&chord);
        // The lowest fundamental, an increment with every bit pattern
        // (golden ratio of a turn), and the chord's highest partial.
        bank.inc[1] = 0x9E37_79B9;
        bank.phase[1] = 12_345;
        bank.inc[2] = bank.inc[bank.len() - 1];
        settle(&mut bank, 3);
        let (start, inc) = (bank.phase[..3].to_vec(), bank.inc[..3].to_vec());
        let (mut l, mut r) = ([0f32; CHUNK], [0f32; CHUNK]);
        for _ in 0..FRAMES / CHUNK {
            l.fill(0.0);
            r.fill(0.0);
            render(kernel, bank.view_mut(0, 3), coeff, &mut l, &mut r);
        }
        // The phase after k frames, straight from the arithmetic.
        let phase_at = |i: usize, k: usize| start[i].wrapping_add((k as u32).wrapping_mul(inc[i]));
        for i in 0..3 {
            assert_eq!(
                bank.phase[i],
                phase_at(i, FRAMES),
                "{kernel:?}: partial {i}"
            );
            assert_eq!(
                bank.amp[i], bank.full_amp[i],
                "{kernel:?}: amplitude {i} moved"
            );
        }
        // The last chunk against sines of the analytic phase, in f64.
        let mut worst = 0f64;
        for (k, (&got_l, &got_r)) in l.iter().zip(&r).enumerate() {
            let frame = FRAMES - CHUNK + k;
            let (mut want_l, mut want_r) = (0f64, 0f64);
            for i in 0..3 {
                let angle =
                    f64::from(phase_at(i, frame) as i32) * std::f64::consts::PI / 2_147_483_648.0;
                let v = angle.sin() * f64::from(bank.full_amp[i]);
                want_l += v * f64::from(bank.gain_l[i]);
                want_r += v * f64::from(bank.gain_r[i]);
            }
            worst = worst
                .max((f64::from(got_l) - want_l).abs())
                .max((f64::from(got_r) - want_r).abs());
        }
        // The partials sum to about 0.09: this is -140 dBFS, f32 rounding.
        assert!(
            worst < 1e-7,
            "{kernel:?}: worst deviation from the analytic sine {worst:e}"
        );
    }
}
