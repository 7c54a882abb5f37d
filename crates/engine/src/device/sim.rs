//! The simulated device: a real-time clock thread that wakes at absolute period boundaries and
//! drives the engine like audio hardware; its thread is the driver thread.
//!
//! Timing model: period k starts at `t0 + k * P` (P = buffer / rate, computed
//! in integer nanoseconds from k so it never drifts). The buffer for period k
//! must be complete by the start of period k + 1. A render that ends later is
//! a dropout. Catch-up policy, like hardware after an xrun: the periods that
//! went by during the late render are skipped (counted, not rendered), and the
//! device resumes at the first period boundary after the late render ended.

use super::{Device, DeviceError, DeviceErrorKind, DeviceInfo, DeviceSignals, DeviceThread};
use crate::rt::clock::{now_ns, sleep_until};
use crate::rt::driver::{Cycle, Renderer};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Frequency of the simulated input signal.
const INPUT_TONE_HZ: f64 = 440.0;
/// Peak of the simulated input signal (-12 dBFS).
const INPUT_TONE_PEAK: f32 = 0.25;

/// The built-in clocked device.
pub struct SimDevice {
    sample_rate: u32,
    buffer_frames: u32,
    input: bool,
    running: Option<DeviceThread>,
}

impl SimDevice {
    /// A device at `sample_rate` and `buffer_frames`; `input` feeds a test tone as input.
    pub fn new(sample_rate: u32, buffer_frames: u32, input: bool) -> Self {
        Self {
            sample_rate,
            buffer_frames,
            input,
            running: None,
        }
    }
}

/// Nanoseconds from t0 to the start of period `k`, exact in integers.
fn period_offset_ns(k: u64, frames: u32, rate: u32) -> u64 {
    ((u128::from(k) * u128::from(frames) * 1_000_000_000) / u128::from(rate.max(1))) as u64
}

impl Device for SimDevice {
    fn info(&self) -> DeviceInfo {
        DeviceInfo {
            kind: "sim".into(),
            name: "simulated device".into(),
            sample_rate: self.sample_rate,
            buffer_frames: self.buffer_frames,
            can_set_sample_rate: true,
            can_set_buffer: true,
            driver_thread: "xrunlab clock thread".into(),
            driver_thread_is_ours: true,
            notes: vec![
                "clock: absolute CLOCK_MONOTONIC period boundaries; a render must finish by the next boundary".into(),
                "after a late render the device skips the periods that went by and resumes at the next boundary".into(),
            ],
        }
    }

    fn configure(
        &mut self,
        sample_rate: u32,
        buffer_frames: u32,
    ) -> Result<DeviceInfo, DeviceError> {
        if self.running.is_some() {
            return Err(DeviceError::new(
                DeviceErrorKind::State,
                "the simulated device must be stopped to change its settings",
            ));
        }
        self.sample_rate = sample_rate;
        self.buffer_frames = buffer_frames;
        Ok(self.info())
    }

    fn start(
        &mut self,
        mut renderer: Renderer,
        signals: Arc<DeviceSignals>,
    ) -> Result<(), DeviceError> {
        if self.running.is_some() {
            return Err(DeviceError::new(
                DeviceErrorKind::State,
                "the simulated device is already running",
            ));
        }
        let (rate, frames, input) = (self.sample_rate, self.buffer_frames, self.input);
        self.running = Some(DeviceThread::spawn("xrl-sim-clock", move |stop| {
            renderer.driver_thread_started(true);
            clock_loop(&mut renderer, &signals, &stop, rate, frames, input);
        })?);
        Ok(())
    }

    fn stop(&mut self) {
        self.running = None;
    }
}

/// The device's buffers, allocated before the clock loop starts.
struct Buffers {
    out_l: Vec<f32>,
    out_r: Vec<f32>,
    in_l: Vec<f32>,
    in_r: Vec<f32>,
}

fn clock_loop(
    renderer: &mut Renderer,
    signals: &DeviceSignals,
    stop: &AtomicBool,
    rate: u32,
    frames: u32,
    input: bool,
) {
    let n = frames as usize;
    let buffers = Buffers {
        out_l: vec![0.0f32; n],
        out_r: vec![0.0f32; n],
        in_l: vec![0.0f32; n],
        in_r: vec![0.0f32; n],
    };
    periods(renderer, signals, stop, rate, frames, input, buffers);
}

// The period loop is the driver thread's real-time path: the rules of `rt`, checked.
#[deny(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    clippy::disallowed_macros
)]
fn periods(
    renderer: &mut Renderer,
    signals: &DeviceSignals,
    stop: &AtomicBool,
    rate: u32,
    frames: u32,
    input: bool,
    buffers: Buffers,
) {
    let Buffers {
        mut out_l,
        mut out_r,
        mut in_l,
        mut in_r,
    } = buffers;
    let mut tone_phase = 0.0f64;
    let tone_inc = std::f64::consts::TAU * INPUT_TONE_HZ / f64::from(rate.max(1));
    // Start one period from now so the first period is not already late.
    let t0 = now_ns() + period_offset_ns(1, frames, rate);
    let mut k: u64 = 0;
    while !stop.load(Ordering::Acquire) {
        let period_start = t0 + period_offset_ns(k, frames, rate);
        let deadline = t0 + period_offset_ns(k + 1, frames, rate);
        sleep_until(period_start);
        let wake = now_ns();
        if input {
            for (l, r) in in_l.iter_mut().zip(in_r.iter_mut()) {
                let v = (tone_phase.sin() as f32) * INPUT_TONE_PEAK;
                (*l, *r) = (v, v);
                tone_phase = (tone_phase + tone_inc) % std::f64::consts::TAU;
            }
        }
        let outcome = renderer.render(Cycle {
            period_start_ns: period_start,
            deadline_ns: deadline,
            wake_ns: wake,
            out_l: &mut out_l,
            out_r: &mut out_r,
            input: if input { Some((&in_l, &in_r)) } else { None },
        });
        if outcome.late {
            // Resume at the first boundary after the render ended.
            let elapsed = outcome.render_end_ns.saturating_sub(t0);
            let mut next = k + 1;
            while t0 + period_offset_ns(next, frames, rate) <= t0 + elapsed {
                next += 1;
            }
            signals.add_skipped_periods(next - (k + 1));
            k = next;
        } else {
            k += 1;
        }
    }
}
