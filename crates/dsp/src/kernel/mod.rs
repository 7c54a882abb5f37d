//! Kernel selection and the shared entry point [`render`]; runs on audio threads (see the crate's
//! real-time contract).

// The real-time contract, checked against clippy.toml's list.
#![deny(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    clippy::disallowed_macros
)]

mod fast;
mod reference;

use crate::PartialsMut;

/// Which oscillator computes the partials.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Kernel {
    /// One scalar `sinf` per sample per partial: AudioPerfLab's cost, so that
    /// "N sines" means the same load in both tools.
    #[default]
    Reference,
    /// A vectorised polynomial oscillator, within -90 dBFS of the reference.
    Fast,
}

impl Kernel {
    /// The kernel's name on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Reference => "reference",
            Kernel::Fast => "fast",
        }
    }

    /// Parses a kernel name.
    pub fn from_name(name: &str) -> Option<Kernel> {
        match name {
            "reference" => Some(Kernel::Reference),
            "fast" => Some(Kernel::Fast),
            _ => None,
        }
    }
}

/// What a [`render`] call did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RenderStats {
    /// Partials that were computed (sounding or still fading).
    pub computed: u32,
}

/// Frames one kernel pass renders at most. [`render`] splits longer buffers
/// into passes of this size; whether a partial is silent is decided once per
/// pass, identically in both kernels.
pub const MAX_PASS_FRAMES: usize = 256;

/// Adds `partials`, smoothed toward their targets with `coeff`, into `out_l`
/// and `out_r` over `min(out_l.len(), out_r.len())` frames. Silent partials
/// (current and target amplitude below [`crate::SILENCE_THRESHOLD`], decided
/// at the start of each pass of at most [`MAX_PASS_FRAMES`] frames) are
/// skipped and keep their phase. A non-finite amplitude or target counts as 0,
/// so bad data silences its partial instead of poisoning the mix. With no
/// frames nothing is computed. Real-time safe.
pub fn render(
    kernel: Kernel,
    mut partials: PartialsMut<'_>,
    coeff: f32,
    out_l: &mut [f32],
    out_r: &mut [f32],
) -> RenderStats {
    let mut stats = RenderStats::default();
    for (l, r) in out_l
        .chunks_mut(MAX_PASS_FRAMES)
        .zip(out_r.chunks_mut(MAX_PASS_FRAMES))
    {
        let frames = l.len().min(r.len());
        let (l, r) = (&mut l[..frames], &mut r[..frames]);
        let pass = match kernel {
            Kernel::Reference => reference::render(&mut partials, coeff, l, r),
            Kernel::Fast => fast::render(&mut partials, coeff, l, r),
        };
        // The set of computed partials only shrinks within a call (targets
        // do not change), so the first pass holds the largest count.
        stats.computed = stats.computed.max(pass.computed);
    }
    stats
}

/// Radians per unit of 32-bit fixed-point phase, read as signed (`-pi..pi`).
pub(crate) const RAD_PER_PHASE_UNIT: f32 = std::f32::consts::PI / 2_147_483_648.0;

/// Bad amplitudes (NaN, infinite) read as 0.
#[inline(always)]
pub(crate) fn sanitize(x: f32) -> f32 {
    if x.is_finite() {
        x
    } else {
        0.0
    }
}

#[inline(always)]
pub(crate) fn is_silent(amp: f32, target: f32) -> bool {
    // Written so that NaN counts as silent rather than sounding forever.
    !(amp.abs() >= crate::SILENCE_THRESHOLD || target.abs() >= crate::SILENCE_THRESHOLD)
}
