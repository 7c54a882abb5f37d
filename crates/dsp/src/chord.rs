//! The chord's partials (notes, unison voices, harmonics, pan, start phases) in frequency order; built on a control thread before audio starts.

use crate::rng::SplitMix64;

/// MIDI notes of AudioPerfLab's chord.
const NOTES: [u8; 3] = [53, 56, 60];
/// Unison voices per note: (detune in Hz, pan in -1..=1).
const VOICES: [(f64, f64); 5] = [
    (-4.0, -1.0),
    (-2.0, -1.0),
    (0.0, 0.0),
    (2.0, 1.0),
    (4.0, 1.0),
];
/// The lowest partials of the first chord copy (one per voice) start at phase 0.
pub const FUNDAMENTALS: usize = NOTES.len() * VOICES.len();
/// How many chord copies the sine count may span. One copy is AudioPerfLab's
/// chord; later copies are further unison voices with fresh detunes, so that
/// fast machines and the fast kernel can be loaded too.
pub const MAX_CHORD_COPIES: usize = 256;
/// Extra detune added per further chord copy, in Hz. An irrational-ish step
/// keeps copies from lining up with each other or with the first chord.
const COPY_DETUNE_STEP_HZ: f64 = 0.618_034;
const PHASE_SEED: u64 = 0x5EED_A0D1_0FAB_1234;

/// One sine partial of the chord.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PartialSpec {
    /// Frequency in Hz.
    pub freq_hz: f64,
    /// Signed amplitude when active: `(2A/pi) * (1/i) * (+1 if i even else -1)`.
    pub amplitude: f32,
    /// Equal-power left gain `sin(pi/4 * (1 - pan))`.
    pub gain_l: f32,
    /// Equal-power right gain `sin(pi/4 * (pan + 1))`.
    pub gain_r: f32,
    /// Start phase as a fraction of a turn in 32-bit fixed point.
    pub start_phase: u32,
    /// Phase increment per sample as a fraction of a turn in 32-bit fixed point.
    pub phase_inc: u32,
    /// Which chord copy this partial belongs to (0 = AudioPerfLab's chord).
    pub copy: u16,
    /// Harmonic number, 1 = fundamental.
    pub harmonic: u32,
}

/// All partials of `copies` chord copies, each copy sorted by frequency, copies in order.
#[derive(Debug, Clone)]
pub struct Chord {
    sample_rate: u32,
    /// Index of the first partial of each copy, plus the total at the end.
    copy_starts: Vec<usize>,
    partials: Vec<PartialSpec>,
}

impl Chord {
    /// Builds enough chord copies to hold at least `sines` partials (at least one copy),
    /// capped at [`MAX_CHORD_COPIES`].
    pub fn with_capacity_for(sample_rate: u32, sines: usize) -> Self {
        let mut copies = 1;
        let mut total = copy_len(sample_rate, 0);
        while total < sines && copies < MAX_CHORD_COPIES {
            total += copy_len(sample_rate, copies);
            copies += 1;
        }
        Self::new(sample_rate, copies)
    }

    /// Builds `copies` chord copies (clamped to 1..=[`MAX_CHORD_COPIES`]).
    pub fn new(sample_rate: u32, copies: usize) -> Self {
        let copies = copies.clamp(1, MAX_CHORD_COPIES);
        let mut partials = Vec::new();
        let mut copy_starts = vec![0];
        for copy in 0..copies {
            partials.extend(copy_partials(sample_rate, copy));
            copy_starts.push(partials.len());
        }
        Self {
            sample_rate,
            copy_starts,
            partials,
        }
    }

    /// Partials in AudioPerfLab's chord at `sample_rate` (1717 at 48 kHz, 1578 at 44.1 kHz).
    pub fn partials_per_copy(sample_rate: u32) -> usize {
        copy_len(sample_rate, 0)
    }

    /// The largest sine count any run may ask for at `sample_rate`: all
    /// [`MAX_CHORD_COPIES`] copies. Computed without building them.
    pub fn max_sines(sample_rate: u32) -> usize {
        (0..MAX_CHORD_COPIES)
            .map(|c| copy_len(sample_rate, c))
            .sum()
    }

    /// Sample rate the chord was built for.
    pub fn sample_rate(&self) -> u32 {
        self.sample_rate
    }

    /// Partials in the first copy (AudioPerfLab's chord).
    pub fn per_copy(&self) -> usize {
        self.copy_starts[1]
    }

    /// Number of chord copies built.
    pub fn copies(&self) -> usize {
        self.copy_starts.len() - 1
    }

    /// All partials, lowest first within each copy.
    pub fn partials(&self) -> &[PartialSpec] {
        &self.partials
    }

    /// How many chord copies `sines` partials touch (0 for 0 sines).
    pub fn copies_in_play(&self, sines: usize) -> usize {
        if sines == 0 {
            return 0;
        }
        self.copy_starts[1..]
            .iter()
            .position(|&end| sines <= end)
            .map_or(self.copies(), |i| i + 1)
    }
}

fn midi_to_hz(note: u8) -> f64 {
    440.0 * 2f64.powf((f64::from(note) - 69.0) / 12.0)
}

fn freq_to_inc(freq_hz: f64, sample_rate: u32) -> u32 {
    let turns = freq_hz / f64::from(sample_rate);
    (turns * 4_294_967_296.0).round() as u64 as u32
}

/// The detuned frequency of each voice of chord copy `copy`.
fn voice_freqs(copy: usize) -> impl Iterator<Item = (f64, f64)> {
    let extra_detune = copy as f64 * COPY_DETUNE_STEP_HZ;
    NOTES.iter().flat_map(move |&note| {
        VOICES.iter().map(move |&(detune, pan)| {
            let sign = if detune < 0.0 { -1.0 } else { 1.0 };
            (midi_to_hz(note) + detune + sign * extra_detune, pan)
        })
    })
}

/// Number of partials in chord copy `copy`: every harmonic up to Nyquist.
fn copy_len(sample_rate: u32, copy: usize) -> usize {
    let nyquist = f64::from(sample_rate) / 2.0;
    voice_freqs(copy)
        .map(|(f, _)| (nyquist / f).floor() as usize)
        .sum()
}

/// The partials of one chord copy, sorted by frequency, with start phases.
fn copy_partials(sample_rate: u32, copy: usize) -> Vec<PartialSpec> {
    let voice_amp = 1.0 / (NOTES.len() * VOICES.len()) as f64;
    let nyquist = f64::from(sample_rate) / 2.0;
    let mut out = Vec::with_capacity(copy_len(sample_rate, copy));
    {
        for (f, pan) in voice_freqs(copy) {
            let gain_l = (std::f64::consts::FRAC_PI_4 * (1.0 - pan)).sin() as f32;
            let gain_r = (std::f64::consts::FRAC_PI_4 * (pan + 1.0)).sin() as f32;
            let harmonics = (nyquist / f).floor() as u32;
            for i in 1..=harmonics {
                let sign = if i % 2 == 0 { 1.0 } else { -1.0 };
                let amplitude = 2.0 * voice_amp / std::f64::consts::PI / f64::from(i) * sign;
                out.push(PartialSpec {
                    freq_hz: f * f64::from(i),
                    amplitude: amplitude as f32,
                    gain_l,
                    gain_r,
                    start_phase: 0,
                    phase_inc: freq_to_inc(f * f64::from(i), sample_rate),
                    copy: copy as u16,
                    harmonic: i,
                });
            }
        }
    }
    // Stable sort keeps generation order (note, voice, harmonic) for equal frequencies.
    out.sort_by(|a, b| a.freq_hz.total_cmp(&b.freq_hz));
    let mut rng = SplitMix64::new(PHASE_SEED ^ (copy as u64).wrapping_mul(0xA24B_AED4_963E_E407));
    for (idx, p) in out.iter_mut().enumerate() {
        let random = (rng.next_u64() >> 32) as u32;
        p.start_phase = if copy == 0 && idx < FUNDAMENTALS {
            0
        } else {
            random
        };
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chord_sizes_match_audioperflab() {
        let per48 = Chord::partials_per_copy(48_000);
        let per44 = Chord::partials_per_copy(44_100);
        assert!((1700..=1730).contains(&per48), "48 kHz: {per48}");
        assert!((1560..=1590).contains(&per44), "44.1 kHz: {per44}");
    }

    #[test]
    fn fundamentals_come_first_at_phase_zero() {
        let chord = Chord::new(48_000, 2);
        let p = chord.partials();
        assert!(p[..FUNDAMENTALS]
            .iter()
            .all(|p| p.harmonic == 1 && p.start_phase == 0));
        assert_eq!(p[FUNDAMENTALS].harmonic, 2);
        assert!(p[FUNDAMENTALS..].iter().any(|p| p.start_phase != 0));
        assert!(p
            .windows(2)
            .take(chord.per_copy() - 1)
            .all(|w| w[0].freq_hz <= w[1].freq_hz));
        // The second copy starts over at the bottom with fresh detunes and random phases.
        let second = &p[chord.per_copy()..];
        assert!(second[0].freq_hz < 200.0 && second[0].start_phase != 0);
        assert!(p.iter().all(|p| p.freq_hz < 24_000.0));
    }

    #[test]
    fn first_copy_is_identical_whatever_the_copy_count() {
        let one = Chord::new(48_000, 1);
        let three = Chord::new(48_000, 3);
        assert_eq!(one.partials(), &three.partials()[..one.per_copy()]);
        assert_eq!(three.copies(), 3);
        assert_eq!(three.copies_in_play(one.per_copy() + 1), 2);
    }

    #[test]
    fn amplitudes_and_pans_follow_the_saw_formula() {
        let chord = Chord::new(48_000, 1);
        let a = 2.0 / 15.0 / std::f32::consts::PI;
        for p in chord.partials() {
            let expected = a / p.harmonic as f32 * if p.harmonic % 2 == 0 { 1.0 } else { -1.0 };
            assert!((p.amplitude - expected).abs() < 1e-7);
            let power = p.gain_l * p.gain_l + p.gain_r * p.gain_r;
            assert!((power - 1.0).abs() < 1e-5, "equal-power pan");
        }
    }
}
