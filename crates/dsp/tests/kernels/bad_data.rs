//! Bad data never panics and has a sensible result: non-finite amplitudes, empty views, mismatched
//! lengths, zero frames; runs on the test threads.

use crate::common::{settle, SR};
use xrunlab_dsp::{render, smoothing_coeff, Chord, Kernel, PartialBank, PartialsMut};

const KERNELS: [Kernel; 2] = [Kernel::Reference, Kernel::Fast];

fn bank() -> PartialBank {
    let mut bank = PartialBank::new(&Chord::single(SR, xrunlab_dsp::ChordNotes::Apl));
    settle(&mut bank, 40);
    bank
}

#[test]
fn non_finite_amplitudes_silence_their_partial_only() {
    let coeff = smoothing_coeff(SR);
    let mut results = Vec::new();
    for kernel in KERNELS {
        let mut bank = bank();
        bank.target[3] = f32::NAN; // amplitude settled, target NaN: fades out like 0
        bank.amp[5] = f32::NAN; // sounding target, NaN amplitude: restarts from 0
        bank.amp[7] = f32::INFINITY;
        (bank.amp[9], bank.target[9]) = (0.0, f32::NAN); // silent
        (bank.amp[11], bank.target[11]) = (f32::NAN, 0.0); // silent
        (bank.amp[13], bank.target[13]) = (f32::NEG_INFINITY, f32::INFINITY); // silent
        let phases = bank.phase.clone();
        let (mut l, mut r) = ([0f32; 128], [0f32; 128]);
        let stats = render(kernel, bank.view_mut(0, 40), coeff, &mut l, &mut r);
        assert_eq!(
            stats.computed, 37,
            "{kernel:?}: all but the three silent ones"
        );
        assert!(
            l.iter().chain(&r).all(|v| v.is_finite()),
            "{kernel:?}: output poisoned"
        );
        assert!(
            l.iter().any(|&v| v != 0.0),
            "{kernel:?}: the good partials still sound"
        );
        for i in [9, 11, 13] {
            assert_eq!(
                bank.phase[i], phases[i],
                "{kernel:?}: silent partial {i} moved"
            );
        }
        assert!(
            bank.amp[3].abs() < bank.full_amp[3].abs(),
            "{kernel:?}: NaN target fades out"
        );
        for i in [5, 7] {
            assert!(
                bank.amp[i].is_finite() && bank.amp[i] != 0.0,
                "{kernel:?}: amplitude {i} restarted"
            );
        }
        results.push((
            bank.phase,
            bank.amp.iter().map(|a| a.to_bits()).collect::<Vec<_>>(),
            l,
        ));
    }
    assert_eq!(
        results[0].0, results[1].0,
        "both kernels keep the same phases"
    );
    assert_eq!(
        results[0].1, results[1].1,
        "both kernels keep the same amplitudes"
    );
}

#[test]
fn empty_views_and_zero_frames_do_nothing() {
    let coeff = smoothing_coeff(SR);
    for kernel in KERNELS {
        let mut bank = bank();
        let before = bank.clone();
        let (mut l, mut r) = ([0.25f32; 128], [0.5f32; 128]);
        for (start, end) in [(5, 5), (10, 3), (5_000, 6_000), (0, 0)] {
            let stats = render(kernel, bank.view_mut(start, end), coeff, &mut l, &mut r);
            assert_eq!(stats.computed, 0, "{kernel:?}: view {start}..{end}");
        }
        assert!(
            l.iter().all(|&v| v == 0.25) && r.iter().all(|&v| v == 0.5),
            "{kernel:?}"
        );
        let stats = render(kernel, bank.view_mut(0, 40), coeff, &mut [], &mut []);
        assert_eq!(
            stats.computed, 0,
            "{kernel:?}: zero frames computes nothing"
        );
        let stats = render(kernel, bank.view_mut(0, 40), coeff, &mut l, &mut []);
        assert_eq!(
            stats.computed, 0,
            "{kernel:?}: one empty channel means zero frames"
        );
        assert_eq!(bank.phase, before.phase, "{kernel:?}");
        assert_eq!(bank.amp, before.amp, "{kernel:?}");
    }
}

#[test]
fn mismatched_output_lengths_render_the_shorter() {
    let coeff = smoothing_coeff(SR);
    for kernel in KERNELS {
        let mut bank = bank();
        let start = bank.phase.clone();
        let (mut l, mut r) = ([0f32; 128], [0f32; 50]);
        render(kernel, bank.view_mut(0, 40), coeff, &mut l, &mut r);
        assert!(
            l[50..].iter().all(|&v| v == 0.0),
            "{kernel:?}: frames past the shorter untouched"
        );
        assert!(l[..50].iter().any(|&v| v != 0.0), "{kernel:?}");
        for ((&end, &begin), &inc) in bank.phase[..40].iter().zip(&start).zip(&bank.inc) {
            assert_eq!(end, begin.wrapping_add(inc.wrapping_mul(50)), "{kernel:?}");
        }
    }
}

#[test]
fn mismatched_view_slices_use_the_shortest() {
    let coeff = smoothing_coeff(SR);
    for kernel in KERNELS {
        let mut bank = bank();
        let start = bank.phase.clone();
        let (mut l, mut r) = ([0f32; 128], [0f32; 128]);
        let PartialBank {
            phase,
            inc,
            amp,
            target,
            gain_l,
            gain_r,
            ..
        } = &mut bank;
        let view = PartialsMut {
            phase: &mut phase[..30],
            inc: &inc[..21],
            amp: &mut amp[..40],
            target: &target[..25],
            gain_l: &gain_l[..35],
            gain_r: &gain_r[..33],
        };
        assert_eq!(view.len(), 21);
        assert_eq!(
            render(kernel, view, coeff, &mut l, &mut r).computed,
            21,
            "{kernel:?}"
        );
        assert!(
            bank.phase[..21].iter().zip(&start).all(|(a, b)| a != b),
            "{kernel:?}"
        );
        assert_eq!(
            bank.phase[21..],
            start[21..],
            "{kernel:?}: past the shortest slice untouched"
        );
    }
}
