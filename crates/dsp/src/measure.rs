//! Single-core kernel throughput (partial-samples per second); runs on the calling (non-real-time)
//! thread, which it keeps busy for the whole measurement.
//!
//! Everything is allocated before the timed loop; the loop only zeroes the
//! output buffers, renders and reads the clock once per buffer.

use std::time::{Duration, Instant};

use crate::{render, smoothing_coeff, Chord, Kernel, PartialBank};

/// Sample rate the measurement renders at, and the rate
/// [`KernelFigures::max_sines_at_48k_128`] is expressed for.
pub const MEASURE_SAMPLE_RATE: u32 = 48_000;

/// What [`kernel_throughput`] measured.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct KernelFigures {
    /// The kernel's name ([`Kernel::name`]); owned, so that a result file reads back into it.
    pub kernel: String,
    /// Sines rendered per buffer (all sounding, amplitudes settled).
    pub sines: usize,
    /// Frames per buffer.
    pub frames: usize,
    /// Buffers rendered during the measurement.
    pub buffers: u64,
    /// Wall-clock time spent rendering, in seconds.
    pub elapsed_s: f64,
    /// Nanoseconds per partial-sample (one sine, one frame).
    pub ns_per_partial_sample: f64,
    /// Partial-samples per second on one core.
    pub partial_samples_per_sec: f64,
    /// How many sines one core could keep up with in real time at 48 kHz
    /// (`partial_samples_per_sec / 48000`), whatever the buffer size: the
    /// ceiling for a 128-frame buffer if nothing but the kernel ran.
    pub max_sines_at_48k_128: f64,
}

/// Renders `sines` sounding partials (at least 1) in buffers of `frames`
/// frames (at least 1) with `kernel` on the calling thread, repeatedly, for at
/// least `min_duration` (and at least one buffer), and reports the throughput.
///
/// The partials are the chord's lowest `sines` at 48 kHz with their
/// amplitudes already settled, so every partial is computed in every buffer.
/// Wall-clock time is measured: run it on an otherwise idle core for figures
/// that mean something.
pub fn kernel_throughput(
    kernel: Kernel,
    sines: usize,
    frames: usize,
    min_duration: Duration,
) -> KernelFigures {
    let sines = sines.max(1);
    let frames = frames.max(1);
    let chord = Chord::with_capacity_for(
        MEASURE_SAMPLE_RATE,
        crate::ChordLayout::single(crate::ChordNotes::Apl),
        sines,
    );
    let sines = sines.min(chord.partials().len());
    let mut bank = PartialBank::new(&chord);
    bank.amp[..sines].copy_from_slice(&bank.full_amp[..sines]);
    bank.set_active(0, sines);
    let coeff = smoothing_coeff(MEASURE_SAMPLE_RATE);
    let mut out_l = vec![0f32; frames];
    let mut out_r = vec![0f32; frames];

    // One untimed buffer brings code and data into the caches.
    render(
        kernel,
        bank.view_mut(0, sines),
        coeff,
        &mut out_l,
        &mut out_r,
    );

    let start = Instant::now();
    let mut buffers = 0u64;
    let elapsed = loop {
        out_l.fill(0.0);
        out_r.fill(0.0);
        render(
            kernel,
            bank.view_mut(0, sines),
            coeff,
            &mut out_l,
            &mut out_r,
        );
        buffers += 1;
        let elapsed = start.elapsed();
        if elapsed >= min_duration {
            break elapsed;
        }
    };
    std::hint::black_box((&out_l, &out_r));

    let partial_samples = buffers as f64 * sines as f64 * frames as f64;
    let secs = elapsed.as_secs_f64().max(f64::MIN_POSITIVE);
    let partial_samples_per_sec = partial_samples / secs;
    KernelFigures {
        kernel: kernel.name().to_owned(),
        sines,
        frames,
        buffers,
        elapsed_s: secs,
        ns_per_partial_sample: secs * 1e9 / partial_samples,
        partial_samples_per_sec,
        max_sines_at_48k_128: partial_samples_per_sec / f64::from(MEASURE_SAMPLE_RATE),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_are_consistent() {
        let f = kernel_throughput(Kernel::Fast, 40, 64, Duration::from_millis(5));
        assert_eq!((f.kernel.as_str(), f.sines, f.frames), ("fast", 40, 64));
        assert!(f.buffers >= 1);
        assert!(f.ns_per_partial_sample > 0.0 && f.ns_per_partial_sample.is_finite());
        let product = f.ns_per_partial_sample * f.partial_samples_per_sec;
        assert!((product - 1e9).abs() < 1e3, "{product}");
        assert!((f.max_sines_at_48k_128 * 48_000.0 - f.partial_samples_per_sec).abs() < 1e-3);
    }

    #[test]
    fn degenerate_arguments_are_clamped() {
        let f = kernel_throughput(Kernel::Reference, 0, 0, Duration::ZERO);
        assert_eq!((f.sines, f.frames, f.buffers), (1, 1, 1));
    }
}
