//! The chord's partials (notes, unison voices, harmonics, pan, start phases) in frequency order,
//! laid out as AudioPerfLab lays them out; built on a control thread before audio starts.
//!
//! Follows AudioPerfLab's default branch (commit c3a692c, files
//! `AudioPerfLab/Constants.hpp`, `AudioPerfLab/Partial.cpp`, `AudioPerfLab/Engine.mm`):
//! the chord's note list is duplicated once per core available for DSP, every
//! partial of every voice is generated with voice amplitude
//! `1 / (notes in the duplicated list × 5)`, all are sorted by frequency, and
//! the lowest `15 × chords` start at phase 0. Above AudioPerfLab's range,
//! xrunlab appends its own further copies with fresh detunes, so that fast
//! machines and the fast kernel can be loaded too.

use crate::rng::SplitMix64;
use serde::{Deserialize, Serialize};

/// Which chord AudioPerfLab plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum ChordNotes {
    /// Notes 53, 56, 60, 65: AudioPerfLab since October 2020 (2058 partials at 48 kHz).
    #[default]
    #[serde(rename = "apl")]
    Apl,
    /// Notes 53, 56, 60: AudioPerfLab before October 2020 (1717 partials at 48 kHz).
    #[serde(rename = "apl-2020")]
    Apl2020,
}

impl ChordNotes {
    /// Every chord, default first.
    pub const ALL: [ChordNotes; 2] = [ChordNotes::Apl, ChordNotes::Apl2020];

    /// MIDI note numbers.
    pub fn notes(self) -> &'static [u8] {
        match self {
            ChordNotes::Apl => &[53, 56, 60, 65],
            ChordNotes::Apl2020 => &[53, 56, 60],
        }
    }

    /// Name on the command line, in the API and in results.
    pub fn name(self) -> &'static str {
        match self {
            ChordNotes::Apl => "apl",
            ChordNotes::Apl2020 => "apl-2020",
        }
    }

    /// Parses a name from [`ChordNotes::name`].
    pub fn from_name(name: &str) -> Option<ChordNotes> {
        Self::ALL.into_iter().find(|c| c.name() == name)
    }

    /// The allowed names, for error messages: `"apl", "apl-2020"`.
    pub fn allowed() -> String {
        Self::ALL
            .iter()
            .map(|c| format!("{:?}", c.name()))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// How a chord is laid out: which notes, and how many times AudioPerfLab's part is duplicated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChordLayout {
    /// The note list.
    pub notes: ChordNotes,
    /// AudioPerfLab's duplicates: one chord per core available for DSP (physical
    /// cores; SMT siblings do not count). At least 1.
    pub chords: usize,
}

impl ChordLayout {
    /// One chord of `notes`.
    pub fn single(notes: ChordNotes) -> Self {
        Self { notes, chords: 1 }
    }

    /// Partials in one chord at `sample_rate` (2058 at 48 kHz for [`ChordNotes::Apl`]).
    pub fn partials_per_chord(&self, sample_rate: u32) -> usize {
        copy_len(self.notes, sample_rate, 0)
    }

    /// AudioPerfLab's sine maximum: one chord per core, `chords × partials_per_chord`.
    pub fn apl_max_sines(&self, sample_rate: u32) -> usize {
        self.chords.max(1) * self.partials_per_chord(sample_rate)
    }

    /// The largest sine count any run may ask for: AudioPerfLab's range plus
    /// xrunlab's own copies, [`MAX_CHORD_COPIES`] copies in all. Computed without building them.
    pub fn max_sines(&self, sample_rate: u32) -> usize {
        let chords = self.chords.clamp(1, MAX_CHORD_COPIES);
        self.apl_max_sines(sample_rate)
            + (1..=MAX_CHORD_COPIES - chords)
                .map(|c| copy_len(self.notes, sample_rate, c))
                .sum::<usize>()
    }
}

/// Unison voices per note: (detune in Hz, pan in -1..=1).
const VOICES: [(f64, f64); 5] = [
    (-4.0, -1.0),
    (-2.0, -1.0),
    (0.0, 0.0),
    (2.0, 1.0),
    (4.0, 1.0),
];
/// AudioPerfLab's `kNumUnrandomizedPhases`: the lowest 15 partials per chord
/// start at phase 0 (the constant dates from the three-note chord and was kept).
pub const UNRANDOMIZED_PHASES: usize = 15;
/// How many chord copies the sine count may span, AudioPerfLab's duplicates
/// included. Copies beyond AudioPerfLab's are xrunlab's own: further unison
/// voices with fresh detunes.
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
    /// 0 for AudioPerfLab's partials; 1.. for xrunlab's own extra copies.
    pub copy: u16,
    /// Harmonic number, 1 = fundamental.
    pub harmonic: u32,
}

/// AudioPerfLab's duplicated chord sorted by frequency, then xrunlab's extra
/// copies, each sorted by frequency, in order.
#[derive(Debug, Clone)]
pub struct Chord {
    sample_rate: u32,
    layout: ChordLayout,
    /// Index of the first partial of each block (AudioPerfLab's, then each extra copy), plus the total.
    block_starts: Vec<usize>,
    partials: Vec<PartialSpec>,
}

impl Chord {
    /// AudioPerfLab's part of `layout` plus enough extra copies to hold at
    /// least `sines` partials, within [`MAX_CHORD_COPIES`] copies in all.
    pub fn with_capacity_for(sample_rate: u32, layout: ChordLayout, sines: usize) -> Self {
        let chords = layout.chords.clamp(1, MAX_CHORD_COPIES);
        let mut extra = 0;
        let mut total = layout.apl_max_sines(sample_rate);
        while total < sines && chords + extra < MAX_CHORD_COPIES {
            extra += 1;
            total += copy_len(layout.notes, sample_rate, extra);
        }
        Self::new(sample_rate, layout, extra)
    }

    /// AudioPerfLab's part of `layout` and `extra_copies` of xrunlab's own
    /// (`chords` clamped to 1..=[`MAX_CHORD_COPIES`], extras to what is left).
    pub fn new(sample_rate: u32, layout: ChordLayout, extra_copies: usize) -> Self {
        let chords = layout.chords.clamp(1, MAX_CHORD_COPIES);
        let layout = ChordLayout { chords, ..layout };
        let extra_copies = extra_copies.min(MAX_CHORD_COPIES - chords);
        let voice_amp = 1.0 / (layout.notes.notes().len() * chords * VOICES.len()) as f64;
        let mut partials = apl_partials(sample_rate, layout, voice_amp);
        let mut block_starts = vec![0, partials.len()];
        for copy in 1..=extra_copies {
            partials.extend(extra_copy(sample_rate, layout.notes, copy, voice_amp));
            block_starts.push(partials.len());
        }
        Self {
            sample_rate,
            layout,
            block_starts,
            partials,
        }
    }

    /// One AudioPerfLab chord of `notes` and nothing more.
    pub fn single(sample_rate: u32, notes: ChordNotes) -> Self {
        Self::new(sample_rate, ChordLayout::single(notes), 0)
    }

    /// Sample rate the chord was built for.
    pub fn sample_rate(&self) -> u32 {
        self.sample_rate
    }

    /// The layout it was built with.
    pub fn layout(&self) -> ChordLayout {
        self.layout
    }

    /// Partials of one chord (2058 at 48 kHz for [`ChordNotes::Apl`]).
    pub fn per_chord(&self) -> usize {
        self.layout.partials_per_chord(self.sample_rate)
    }

    /// Partials in AudioPerfLab's part: its sine maximum.
    pub fn apl_partials(&self) -> usize {
        self.block_starts[1]
    }

    /// xrunlab's own copies built beyond AudioPerfLab's part.
    pub fn extra_copies(&self) -> usize {
        self.block_starts.len() - 2
    }

    /// All partials: AudioPerfLab's lowest first, then each extra copy lowest first.
    pub fn partials(&self) -> &[PartialSpec] {
        &self.partials
    }

    /// How many of xrunlab's extra copies `sines` partials reach into (0 within AudioPerfLab's range).
    pub fn extra_copies_in_play(&self, sines: usize) -> usize {
        self.block_starts[1..]
            .iter()
            .position(|&end| sines <= end)
            .unwrap_or(self.extra_copies())
    }
}

fn midi_to_hz(note: u8) -> f64 {
    440.0 * 2f64.powf((f64::from(note) - 69.0) / 12.0)
}

fn freq_to_inc(freq_hz: f64, sample_rate: u32) -> u32 {
    let turns = freq_hz / f64::from(sample_rate);
    (turns * 4_294_967_296.0).round() as u64 as u32
}

/// The detuned frequency and pan of each voice of copy `copy` (0 = AudioPerfLab's detunes).
fn voice_freqs(notes: ChordNotes, copy: usize) -> impl Iterator<Item = (f64, f64)> {
    let extra_detune = copy as f64 * COPY_DETUNE_STEP_HZ;
    notes.notes().iter().flat_map(move |&note| {
        VOICES.iter().map(move |&(detune, pan)| {
            let sign = if detune < 0.0 { -1.0 } else { 1.0 };
            (midi_to_hz(note) + detune + sign * extra_detune, pan)
        })
    })
}

/// Number of partials in one chord of copy `copy`: every harmonic up to Nyquist.
fn copy_len(notes: ChordNotes, sample_rate: u32, copy: usize) -> usize {
    let nyquist = f64::from(sample_rate) / 2.0;
    voice_freqs(notes, copy)
        .map(|(f, _)| (nyquist / f).floor() as usize)
        .sum()
}

/// Every harmonic of every voice of one chord of copy `copy`, unsorted, at phase 0.
fn voice_partials(
    notes: ChordNotes,
    sample_rate: u32,
    copy: usize,
    voice_amp: f64,
) -> impl Iterator<Item = PartialSpec> {
    let nyquist = f64::from(sample_rate) / 2.0;
    voice_freqs(notes, copy).flat_map(move |(f, pan)| {
        let gain_l = (std::f64::consts::FRAC_PI_4 * (1.0 - pan)).sin() as f32;
        let gain_r = (std::f64::consts::FRAC_PI_4 * (pan + 1.0)).sin() as f32;
        let harmonics = (nyquist / f).floor() as u32;
        (1..=harmonics).map(move |i| {
            let sign = if i % 2 == 0 { 1.0 } else { -1.0 };
            let amplitude = 2.0 * voice_amp / std::f64::consts::PI / f64::from(i) * sign;
            PartialSpec {
                freq_hz: f * f64::from(i),
                amplitude: amplitude as f32,
                gain_l,
                gain_r,
                start_phase: 0,
                phase_inc: freq_to_inc(f * f64::from(i), sample_rate),
                copy: copy as u16,
                harmonic: i,
            }
        })
    })
}

/// Sorts by frequency (stable: equal frequencies keep generation order) and
/// gives every partial past the first `unrandomized` a seeded random start phase.
fn sort_and_phase(mut out: Vec<PartialSpec>, unrandomized: usize, seed: u64) -> Vec<PartialSpec> {
    out.sort_by(|a, b| a.freq_hz.total_cmp(&b.freq_hz));
    let mut rng = SplitMix64::new(seed);
    for (idx, p) in out.iter_mut().enumerate() {
        let random = (rng.next_u64() >> 32) as u32;
        p.start_phase = if idx < unrandomized { 0 } else { random };
    }
    out
}

/// AudioPerfLab's part: the note list duplicated `chords` times (sorted, as
/// `duplicateChord` does), every voice's harmonics, sorted by frequency.
fn apl_partials(sample_rate: u32, layout: ChordLayout, voice_amp: f64) -> Vec<PartialSpec> {
    let mut out = Vec::with_capacity(layout.apl_max_sines(sample_rate));
    // Duplicating the sorted note list and sorting it again puts each note's
    // duplicates side by side; generation order only matters for equal frequencies.
    for _ in 0..layout.chords {
        out.extend(voice_partials(layout.notes, sample_rate, 0, voice_amp));
    }
    sort_and_phase(out, UNRANDOMIZED_PHASES * layout.chords, PHASE_SEED)
}

/// xrunlab's extra copy `copy` (1..): AudioPerfLab's voices with a further detune, all phases random.
fn extra_copy(
    sample_rate: u32,
    notes: ChordNotes,
    copy: usize,
    voice_amp: f64,
) -> Vec<PartialSpec> {
    let out = voice_partials(notes, sample_rate, copy, voice_amp).collect();
    sort_and_phase(
        out,
        0,
        PHASE_SEED ^ (copy as u64).wrapping_mul(0xA24B_AED4_963E_E407),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const APL: ChordNotes = ChordNotes::Apl;

    #[test]
    fn chord_sizes_match_audioperflab() {
        // DESIGN.md: 2058 partials at 48 kHz for the four-note chord, 1717 for the three-note one.
        assert_eq!(ChordLayout::single(APL).partials_per_chord(48_000), 2058);
        assert_eq!(
            ChordLayout::single(ChordNotes::Apl2020).partials_per_chord(48_000),
            1717
        );
        let per44 = ChordLayout::single(ChordNotes::Apl2020).partials_per_chord(44_100);
        assert!((1560..=1590).contains(&per44), "44.1 kHz: {per44}");
        let two = ChordLayout {
            notes: APL,
            chords: 2,
        };
        assert_eq!(two.apl_max_sines(48_000), 4116);
        assert_eq!(Chord::new(48_000, two, 0).partials().len(), 4116);
    }

    #[test]
    fn lowest_partials_start_at_phase_zero_and_all_are_sorted() {
        let chord = Chord::new(
            48_000,
            ChordLayout {
                notes: APL,
                chords: 2,
            },
            1,
        );
        let p = chord.partials();
        assert!(p[..30].iter().all(|p| p.start_phase == 0));
        assert!(p[30..].iter().any(|p| p.start_phase != 0));
        assert!(p[..chord.apl_partials()]
            .windows(2)
            .all(|w| w[0].freq_hz <= w[1].freq_hz));
        // Duplicates share frequencies: AudioPerfLab plays the same chord once per core.
        assert_eq!(p[0].freq_hz, p[1].freq_hz);
        // The extra copy starts over at the bottom with fresh detunes and random phases.
        let extra = &p[chord.apl_partials()..];
        assert!(extra[0].freq_hz < 200.0 && extra[0].start_phase != 0);
        assert!(extra.iter().all(|p| p.copy == 1));
        assert!(p.iter().all(|p| p.freq_hz < 24_000.0));
    }

    #[test]
    fn audioperflab_part_is_identical_whatever_the_extra_copies() {
        let layout = ChordLayout {
            notes: APL,
            chords: 2,
        };
        let none = Chord::new(48_000, layout, 0);
        let three = Chord::new(48_000, layout, 3);
        assert_eq!(none.partials(), &three.partials()[..none.apl_partials()]);
        assert_eq!(three.extra_copies(), 3);
        assert_eq!(three.extra_copies_in_play(none.apl_partials()), 0);
        assert_eq!(three.extra_copies_in_play(none.apl_partials() + 1), 1);
        let grown = Chord::with_capacity_for(48_000, layout, none.apl_partials() + 2059);
        assert_eq!(grown.extra_copies(), 2);
        assert!(layout.max_sines(48_000) > 200 * 2058);
    }

    #[test]
    fn amplitudes_and_pans_follow_the_saw_formula() {
        for (chords, notes) in [(1, APL), (2, APL), (1, ChordNotes::Apl2020)] {
            let chord = Chord::new(48_000, ChordLayout { notes, chords }, 0);
            // Voice amplitude A = 1 / (notes in the duplicated list × 5).
            let voice = 1.0 / (notes.notes().len() * chords * 5) as f32;
            let a = 2.0 * voice / std::f32::consts::PI;
            for p in chord.partials() {
                let sign = if p.harmonic % 2 == 0 { 1.0 } else { -1.0 };
                assert!((p.amplitude - a / p.harmonic as f32 * sign).abs() < 1e-7);
                let power = p.gain_l * p.gain_l + p.gain_r * p.gain_r;
                assert!((power - 1.0).abs() < 1e-5, "equal-power pan");
            }
        }
    }

    #[test]
    fn chord_names_round_trip() {
        for c in ChordNotes::ALL {
            assert_eq!(ChordNotes::from_name(c.name()), Some(c));
        }
        assert_eq!(ChordNotes::from_name("major"), None);
        assert_eq!(ChordNotes::allowed(), "\"apl\", \"apl-2020\"");
    }
}
