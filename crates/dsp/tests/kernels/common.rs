//! Shared helpers: settled banks and buffer-by-buffer rendering; run on the test threads.

use xrunlab_dsp::{render, smoothing_coeff, Kernel, PartialBank};

pub const SR: u32 = 48_000;
pub const BUFFER: usize = 128;

/// -90 dBFS relative to a full scale of 1.0.
pub const MINUS_90_DBFS: f32 = 3.162_277_7e-5;

pub fn db(x: f64) -> f64 {
    20.0 * x.log10()
}

/// Partials `0..n` sounding with their amplitude already settled.
pub fn settle(bank: &mut PartialBank, n: usize) {
    let n = n.min(bank.len());
    bank.amp[..n].copy_from_slice(&bank.full_amp[..n]);
    bank.set_active(0, n);
}

/// Renders partials `0..view` of `bank` for `frames` frames in buffers of
/// [`BUFFER`] frames, returning the left and right channels.
pub fn render_channels(
    kernel: Kernel,
    bank: &mut PartialBank,
    view: usize,
    frames: usize,
) -> (Vec<f32>, Vec<f32>) {
    let coeff = smoothing_coeff(SR);
    let mut left = vec![0f32; frames];
    let mut right = vec![0f32; frames];
    for (l, r) in left.chunks_mut(BUFFER).zip(right.chunks_mut(BUFFER)) {
        render(kernel, bank.view_mut(0, view), coeff, l, r);
    }
    (left, right)
}

/// The frequency a fixed-point phase increment really plays at.
pub fn inc_to_hz(inc: u32) -> f64 {
    f64::from(inc) * f64::from(SR) / 4_294_967_296.0
}
