//! Chord correctness seen in the spectrum: energy at exactly the N lowest partials, none at the
//! next ones, and one peak per resolvable partial; runs on the test threads.
//!
//! The mono mix (left + right: every voice reaches it with a gain of at least
//! one) of 2^18 frames (5.46 s, 0.18 Hz bins) is windowed with a 4-term
//! Blackman-Harris window (side lobes below -92 dB, main lobe 4 bins or
//! 0.73 Hz either side), so partials 2 Hz apart are cleanly resolved.
//! Amplitudes are read with Goertzel (the windowed DTFT at the exact
//! frequency, no scalloping); peaks are counted on a radix-2 FFT.

use crate::common::{db, inc_to_hz, render_channels, settle, SR};
use xrunlab_dsp::{Chord, Kernel, PartialBank};

const LEN: usize = 1 << 18;
/// Partials closer than this to any other active partial may merge or
/// interfere; farther ones must stand alone in the spectrum.
const RESOLVED_HZ: f64 = 2.0;
/// A peak belongs to a partial when it lies this close to its frequency.
const PEAK_MATCH_HZ: f64 = 0.5;

fn blackman_harris(n: usize) -> Vec<f64> {
    let a = [0.35875, 0.48829, 0.14128, 0.01168];
    (0..n)
        .map(|i| {
            let x = 2.0 * std::f64::consts::PI * i as f64 / n as f64;
            a[0] - a[1] * x.cos() + a[2] * (2.0 * x).cos() - a[3] * (3.0 * x).cos()
        })
        .collect()
}

/// Amplitude of the sine at `hz` in the windowed signal `x` (window sum `wsum`).
fn goertzel_amplitude(x: &[f64], wsum: f64, hz: f64) -> f64 {
    let w = 2.0 * std::f64::consts::PI * hz / f64::from(SR);
    let c = 2.0 * w.cos();
    let (mut s1, mut s2) = (0.0, 0.0);
    for &v in x {
        let s = v + c * s1 - s2;
        s2 = s1;
        s1 = s;
    }
    let power = s1 * s1 + s2 * s2 - c * s1 * s2;
    2.0 * power.max(0.0).sqrt() / wsum
}

/// In-place iterative radix-2 FFT.
fn fft(re: &mut [f64], im: &mut [f64]) {
    let n = re.len();
    assert!(n.is_power_of_two() && im.len() == n);
    let mut j = 0;
    for i in 1..n {
        let mut bit = n >> 1;
        while j & bit != 0 {
            j ^= bit;
            bit >>= 1;
        }
        j |= bit;
        if i < j {
            re.swap(i, j);
            im.swap(i, j);
        }
    }
    let mut len = 2;
    while len <= n {
        let ang = -2.0 * std::f64::consts::PI / len as f64;
        for start in (0..n).step_by(len) {
            for k in 0..len / 2 {
                let (wr, wi) = ((ang * k as f64).cos(), (ang * k as f64).sin());
                let (a, b) = (start + k, start + k + len / 2);
                let (xr, xi) = (re[b] * wr - im[b] * wi, re[b] * wi + im[b] * wr);
                re[b] = re[a] - xr;
                im[b] = im[a] - xi;
                re[a] += xr;
                im[a] += xi;
            }
        }
        len <<= 1;
    }
}

struct Partial {
    hz: f64,
    /// Amplitude in the mono mix: |amplitude| * (gain_l + gain_r).
    mono: f64,
}

fn check_chord(kernel: Kernel, n: usize) {
    let chord = Chord::single(SR, xrunlab_dsp::ChordNotes::Apl);
    let mut bank = PartialBank::new(&chord);
    settle(&mut bank, n);
    let partials: Vec<Partial> = chord
        .partials()
        .iter()
        .map(|p| Partial {
            hz: inc_to_hz(p.phase_inc),
            mono: f64::from(p.amplitude.abs()) * f64::from(p.gain_l + p.gain_r),
        })
        .collect();
    let (active, inactive) = partials.split_at(n);
    let inactive = &inactive[..20];
    // The view includes silent partials above N, which must be skipped.
    let (l, r) = render_channels(kernel, &mut bank, n + 40, LEN);
    let window = blackman_harris(LEN);
    let wsum: f64 = window.iter().sum();
    let x: Vec<f64> = (0..LEN)
        .map(|i| (f64::from(l[i]) + f64::from(r[i])) * window[i])
        .collect();

    let nearest = |hz: f64, skip: Option<usize>| {
        active
            .iter()
            .enumerate()
            .filter(|&(i, _)| Some(i) != skip)
            .map(|(_, p)| (p.hz - hz).abs())
            .fold(f64::INFINITY, f64::min)
    };
    let resolved: Vec<usize> = (0..n)
        .filter(|&i| nearest(active[i].hz, Some(i)) >= RESOLVED_HZ)
        .collect();

    // Every active partial is there; resolved ones with their exact amplitude.
    let mut worst_resolved = 0f64;
    for (i, p) in active.iter().enumerate() {
        let got = goertzel_amplitude(&x, wsum, p.hz);
        if resolved.contains(&i) {
            let rel = (got / p.mono - 1.0).abs();
            worst_resolved = worst_resolved.max(rel);
            assert!(
                rel < 0.01,
                "{kernel:?} N={n}: partial {i} at {:.2} Hz has amplitude {got:e}, expected {:e}",
                p.hz,
                p.mono
            );
        } else {
            assert!(
                got > 0.5 * p.mono,
                "{kernel:?} N={n}: partial {i} at {:.2} Hz has amplitude {got:e}, expected about {:e}",
                p.hz,
                p.mono
            );
        }
    }

    // The next partials are silent wherever no active one masks them.
    let mut checked_inactive = 0;
    for (j, p) in inactive.iter().enumerate() {
        if nearest(p.hz, None) < RESOLVED_HZ {
            continue;
        }
        checked_inactive += 1;
        let got = goertzel_amplitude(&x, wsum, p.hz);
        assert!(
            got < 1e-3 * p.mono,
            "{kernel:?} N={n}: partial {} at {:.2} Hz should be silent but has {:.1} dB of its amplitude",
            n + j,
            p.hz,
            db(got / p.mono)
        );
    }
    assert!(
        checked_inactive >= 5,
        "N={n}: too few unmasked inactive partials ({checked_inactive})"
    );

    // Peaks: one for each resolved partial, none away from active partials.
    let mut re = x.clone();
    let mut im = vec![0.0; LEN];
    fft(&mut re, &mut im);
    let mag: Vec<f64> = (0..LEN / 2)
        .map(|k| 2.0 * (re[k] * re[k] + im[k] * im[k]).sqrt() / wsum)
        .collect();
    let quietest = active.iter().map(|p| p.mono).fold(f64::INFINITY, f64::min);
    let floor = 0.25 * quietest;
    let bin_hz = f64::from(SR) / LEN as f64;
    let peaks: Vec<f64> = (1..mag.len() - 1)
        .filter(|&k| mag[k] > floor && mag[k] > mag[k - 1] && mag[k] >= mag[k + 1])
        .map(|k| k as f64 * bin_hz)
        .collect();
    for &hz in &peaks {
        assert!(
            nearest(hz, None) <= PEAK_MATCH_HZ,
            "{kernel:?} N={n}: spurious peak at {hz:.2} Hz"
        );
    }
    for &i in &resolved {
        let hits = peaks
            .iter()
            .filter(|&&hz| (hz - active[i].hz).abs() <= PEAK_MATCH_HZ)
            .count();
        assert_eq!(
            hits, 1,
            "{kernel:?} N={n}: partial {i} at {:.2} Hz",
            active[i].hz
        );
    }
    // Partials closer than RESOLVED_HZ may merge, so the count lies between
    // the number of groups they form and N.
    let groups = 1 + active
        .windows(2)
        .filter(|w| w[1].hz - w[0].hz >= RESOLVED_HZ)
        .count();
    assert!(
        (groups..=n).contains(&peaks.len()),
        "{kernel:?} N={n}: {} peaks, expected {groups}..={n}",
        peaks.len()
    );
    if resolved.len() == n {
        assert_eq!(peaks.len(), n, "{kernel:?} N={n}: every partial resolvable");
    }
    eprintln!(
        "{kernel:?} N={n}: {} peaks, {} resolved partials (worst amplitude error {:.3} %), {} groups, {checked_inactive} silent partials checked",
        peaks.len(),
        resolved.len(),
        worst_resolved * 100.0,
        groups
    );
}

#[test]
fn fundamentals_alone_give_fifteen_peaks() {
    for kernel in [Kernel::Reference, Kernel::Fast] {
        check_chord(kernel, 15);
    }
}

#[test]
fn forty_sines_spectrum() {
    for kernel in [Kernel::Reference, Kernel::Fast] {
        check_chord(kernel, 40);
    }
}

#[test]
fn two_hundred_sines_spectrum() {
    for kernel in [Kernel::Reference, Kernel::Fast] {
        check_chord(kernel, 200);
    }
}
