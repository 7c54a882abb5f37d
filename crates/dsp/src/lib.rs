//! xrunlab-dsp: AudioPerfLab's workload (a unison saw chord built from sine partials) and the
//! kernels that compute it; the chord is built on a control thread, the kernels run on audio
//! threads.
//!
//! # Real-time contract
//! Everything reachable from [`render`] runs on real-time audio threads: it does
//! not allocate, lock, print or block, and bad data (NaN amplitudes, empty
//! ranges, mismatched slice lengths) never panics — lengths are clamped to the
//! shortest slice. Building a [`Chord`] or a [`PartialBank`] allocates and is done
//! before audio starts.
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

mod bank;
mod chord;
pub mod kernel;
pub mod measure;
mod rng;
pub mod roofline;

pub use bank::{PartialBank, PartialsMut};
pub use chord::{
    Chord, ChordLayout, ChordNotes, PartialSpec, MAX_CHORD_COPIES, UNRANDOMIZED_PHASES,
};
pub use kernel::{render, Kernel, RenderStats};

/// Below this amplitude a partial whose target is also below it is skipped.
pub const SILENCE_THRESHOLD: f32 = 1e-5;

/// Time constant of the one-pole amplitude smoother, in seconds.
pub const SMOOTHING_SECONDS: f64 = 0.1;

/// One-pole smoothing coefficient for `sample_rate`: `1 - exp(-1 / (0.1 * sr))`.
pub fn smoothing_coeff(sample_rate: u32) -> f32 {
    (1.0 - (-1.0 / (SMOOTHING_SECONDS * f64::from(sample_rate))).exp()) as f32
}
