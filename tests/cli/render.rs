//! `xrunlab render`: the WAV it writes holds the chord's partials and nothing else.

use crate::{run_ok, scratch};
use xrunlab_dsp::Chord;

/// Power of `freq` in `x` (Goertzel), normalised so a full-scale sine gives ~0.25.
fn goertzel(x: &[f32], rate: f64, freq: f64) -> f64 {
    let w = std::f64::consts::TAU * freq / rate;
    let coeff = 2.0 * w.cos();
    let (mut s1, mut s2) = (0.0f64, 0.0f64);
    for (n, &v) in x.iter().enumerate() {
        // Hann window keeps leakage from neighbouring partials low.
        let win = 0.5 - 0.5 * (std::f64::consts::TAU * n as f64 / x.len() as f64).cos();
        let s = f64::from(v) * win + coeff * s1 - s2;
        s2 = s1;
        s1 = s;
    }
    let power = s1 * s1 + s2 * s2 - coeff * s1 * s2;
    power / (x.len() as f64 * x.len() as f64 / 4.0)
}

#[test]
fn the_rendered_chord_has_exactly_the_first_n_partials() {
    let dir = scratch("render");
    let wav = dir.join("chord.wav");
    let n = 15;
    run_ok(&[
        "render",
        "--out",
        wav.to_str().unwrap(),
        "--sines",
        &n.to_string(),
        "--duration",
        "3s",
        "--no-rt",
        // One chord, so the N lowest partials are N distinct frequencies (AudioPerfLab's
        // duplicates, one chord per physical core, share theirs).
        "--chords",
        "1",
    ]);
    let mut reader = hound::WavReader::open(&wav).unwrap();
    assert_eq!(reader.spec().sample_rate, 48_000);
    let samples: Vec<f32> = reader.samples::<f32>().map(Result::unwrap).collect();
    // Left channel, after the 100 ms fade-in has settled.
    let left: Vec<f32> = samples.chunks(2).map(|f| f[0]).skip(48_000).collect();
    let chord = Chord::single(48_000, xrunlab_dsp::ChordNotes::Apl);
    let partials = chord.partials();
    // Unison voices 2 Hz apart need a 2 s window to resolve.
    let sounding: Vec<f64> = partials[..n]
        .iter()
        .map(|p| goertzel(&left, 48_000.0, p.freq_hz))
        .collect();
    let quiet: Vec<f64> = partials[n..n + 15]
        .iter()
        .map(|p| goertzel(&left, 48_000.0, p.freq_hz))
        .collect();
    let weakest = sounding.iter().cloned().fold(f64::INFINITY, f64::min);
    let loudest_absent = quiet.iter().cloned().fold(0.0, f64::max);
    // Left gains: pan -1 voices are loudest on the left, pan +1 voices are silent there.
    let audible_left: Vec<f64> = partials[..n]
        .iter()
        .zip(&sounding)
        .filter(|(p, _)| p.gain_l > 0.1)
        .map(|(_, s)| *s)
        .collect();
    assert_eq!(
        audible_left.len(),
        9,
        "the 15 lowest are notes 53, 56 and 60: 3 notes x 3 voices with a left pan gain"
    );
    let weakest_left = audible_left.iter().cloned().fold(f64::INFINITY, f64::min);
    assert!(
        weakest_left > 1000.0 * loudest_absent.max(1e-12),
        "partials 1..{n} stand out: weakest {weakest_left:e} vs absent {loudest_absent:e} (all {weakest:e})"
    );
    // The right count: raising N to 30 adds the next partials (note 65's fundamentals,
    // note 53's second harmonics).
    let wav30 = dir.join("chord30.wav");
    run_ok(&[
        "render",
        "--out",
        wav30.to_str().unwrap(),
        "--sines",
        "30",
        "--duration",
        "3s",
        "--no-rt",
        "--chords",
        "1",
    ]);
    let samples: Vec<f32> = hound::WavReader::open(&wav30)
        .unwrap()
        .samples::<f32>()
        .map(Result::unwrap)
        .collect();
    let left30: Vec<f32> = samples.chunks(2).map(|f| f[0]).skip(48_000).collect();
    let second: Vec<f64> = partials[n..30]
        .iter()
        .filter(|p| p.gain_l > 0.1)
        .map(|p| goertzel(&left30, 48_000.0, p.freq_hz))
        .collect();
    assert!(second
        .iter()
        .all(|&s| s > 1000.0 * loudest_absent.max(1e-12)));
}
