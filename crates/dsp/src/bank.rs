//! The oscillators' running state (phase, amplitude, target) in structure-of-arrays form; built on
//! a control thread, mutated chunk by chunk on audio threads.

use crate::chord::Chord;

/// Running state of every partial of a [`Chord`], laid out for the kernels.
///
/// Phases are 32-bit fixed-point fractions of a turn: adding the increment with
/// wrapping arithmetic wraps every step exactly, so the phase never drifts or
/// loses precision however long the run.
#[derive(Debug, Clone)]
pub struct PartialBank {
    /// Phase, fraction of a turn in 32-bit fixed point.
    pub phase: Vec<u32>,
    /// Phase increment per sample.
    pub inc: Vec<u32>,
    /// Current (smoothed) signed amplitude.
    pub amp: Vec<f32>,
    /// Target signed amplitude: the partial's amplitude when active, 0 when not.
    pub target: Vec<f32>,
    /// Signed amplitude of the partial when it is active.
    pub full_amp: Vec<f32>,
    /// Left pan gain.
    pub gain_l: Vec<f32>,
    /// Right pan gain.
    pub gain_r: Vec<f32>,
}

impl PartialBank {
    /// All partials start silent, at their start phase.
    pub fn new(chord: &Chord) -> Self {
        let p = chord.partials();
        Self {
            phase: p.iter().map(|p| p.start_phase).collect(),
            inc: p.iter().map(|p| p.phase_inc).collect(),
            amp: vec![0.0; p.len()],
            target: vec![0.0; p.len()],
            full_amp: p.iter().map(|p| p.amplitude).collect(),
            gain_l: p.iter().map(|p| p.gain_l).collect(),
            gain_r: p.iter().map(|p| p.gain_r).collect(),
        }
    }

    /// Number of partials.
    pub fn len(&self) -> usize {
        self.phase.len()
    }

    /// True when the bank holds no partials.
    pub fn is_empty(&self) -> bool {
        self.phase.is_empty()
    }

    /// Makes partials `0..active` sound and the rest fade out. Only the indices
    /// between the previous and the new count are touched, so the cost is the
    /// size of the change, not of the bank. Real-time safe.
    pub fn set_active(&mut self, previous: usize, active: usize) {
        let len = self.len();
        let (lo, hi) = (previous.min(active).min(len), previous.max(active).min(len));
        for i in lo..hi {
            self.target[i] = if i < active { self.full_amp[i] } else { 0.0 };
        }
    }

    /// A mutable view of partials `start..end` (clamped to the bank).
    pub fn view_mut(&mut self, start: usize, end: usize) -> PartialsMut<'_> {
        let end = end.min(self.len());
        let start = start.min(end);
        PartialsMut {
            phase: &mut self.phase[start..end],
            inc: &self.inc[start..end],
            amp: &mut self.amp[start..end],
            target: &self.target[start..end],
            gain_l: &self.gain_l[start..end],
            gain_r: &self.gain_r[start..end],
        }
    }
}

/// A contiguous range of partials that one thread renders.
#[derive(Debug)]
pub struct PartialsMut<'a> {
    /// Phases, advanced by the kernel.
    pub phase: &'a mut [u32],
    /// Phase increments.
    pub inc: &'a [u32],
    /// Current amplitudes, smoothed by the kernel toward `target`.
    pub amp: &'a mut [f32],
    /// Target amplitudes.
    pub target: &'a [f32],
    /// Left gains.
    pub gain_l: &'a [f32],
    /// Right gains.
    pub gain_r: &'a [f32],
}

impl PartialsMut<'_> {
    /// Number of partials in the view (the shortest of its slices).
    pub fn len(&self) -> usize {
        self.phase
            .len()
            .min(self.inc.len())
            .min(self.amp.len())
            .min(self.target.len())
            .min(self.gain_l.len())
            .min(self.gain_r.len())
    }

    /// True when the view holds no partials.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
