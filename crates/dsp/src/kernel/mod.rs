//! Kernel selection and the shared entry point [`render`]; runs on audio threads (see the crate's real-time contract).

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

/// Adds `partials`, smoothed toward their targets with `coeff`, into `out_l`
/// and `out_r` over `min(out_l.len(), out_r.len())` frames. Silent partials
/// (current and target amplitude below [`crate::SILENCE_THRESHOLD`]) are skipped
/// and keep their phase. Real-time safe.
pub fn render(
    kernel: Kernel,
    partials: PartialsMut<'_>,
    coeff: f32,
    out_l: &mut [f32],
    out_r: &mut [f32],
) -> RenderStats {
    let frames = out_l.len().min(out_r.len());
    let (out_l, out_r) = (&mut out_l[..frames], &mut out_r[..frames]);
    match kernel {
        Kernel::Reference => reference::render(partials, coeff, out_l, out_r),
        Kernel::Fast => fast::render(partials, coeff, out_l, out_r),
    }
}

/// Radians per unit of 32-bit fixed-point phase, read as signed (`-pi..pi`).
pub(crate) const RAD_PER_PHASE_UNIT: f32 = std::f32::consts::PI / 2_147_483_648.0;

#[inline(always)]
pub(crate) fn is_silent(amp: f32, target: f32) -> bool {
    // Written so that NaN counts as silent rather than sounding forever.
    !(amp.abs() >= crate::SILENCE_THRESHOLD || target.abs() >= crate::SILENCE_THRESHOLD)
}
