//! The driver side of the render cycle ([`Renderer`]): runs on the device's driver thread (the
//! simulated device's clock thread, or JACK's process thread).

use super::alloc_probe::RtSection;
use super::clock::{current_cpu, now_ns, spin_until, thread_cpu_ns};
use super::controls::LiveControls;
use super::cycle::{work_and_record, CycleShared};
use super::records::{BufferRecord, RecordTx, ThreadRecord};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// How long partials above the active count may still be audible after the
/// count drops: the smoother needs 0.1 s * ln(0.0425 / 1e-5) = 0.84 s to bring
/// the loudest partial below the silence threshold.
const FADE_SECONDS: f64 = 1.2;
/// The driver waits for its workers until the buffer's deadline plus one
/// buffer duration, but never less than this past the deadline: past that a
/// worker is taken as stuck and the buffer is recorded as incomplete (see
/// [`Renderer::render`]). Small buffers (16 frames at 384 kHz is 42 us) would
/// otherwise call a merely descheduled worker stuck.
const MIN_WAIT_MARGIN_NS: u64 = 2_000_000;
/// Without a deadline (offline rendering) the driver waits this long for its
/// workers after publishing a cycle, and as long again before the next cycle
/// for a worker still in the previous one: there is no deadline to keep, and
/// silent buffers rendered as fast as possible would empty the whole file.
const NO_DEADLINE_WAIT_NS: u64 = 5_000_000_000;
/// Workers the unfinished mask of a buffer can name (one bit each).
const MAX_WORKERS: usize = 64;
// Every worker fits the mask: at most limit::THREADS.max workers (waits_for_workers mode).
const _: () = assert!(crate::config::limit::THREADS.max <= MAX_WORKERS);
/// How long a burst lasts.
pub const BURST_SECONDS: f64 = 0.25;

/// One period as the device presents it to the engine.
pub struct Cycle<'a> {
    /// When the device's period began (CLOCK_MONOTONIC ns).
    pub period_start_ns: u64,
    /// When the buffer must be complete; a later end is a dropout.
    pub deadline_ns: u64,
    /// When the driver thread started running for this period.
    pub wake_ns: u64,
    /// Left output; its length is the buffer size.
    pub out_l: &'a mut [f32],
    /// Right output.
    pub out_r: &'a mut [f32],
    /// Stereo input when input is enabled.
    pub input: Option<(&'a [f32], &'a [f32])>,
}

/// What one render call measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CycleOutcome {
    /// When mixing finished.
    pub render_end_ns: u64,
    /// The render ended after the deadline.
    pub late: bool,
}

/// The driver's half of the engine: owned by the device, called once per period.
pub struct Renderer {
    pub(crate) shared: Arc<CycleShared>,
    pub(crate) controls: Arc<LiveControls>,
    pub(crate) buffers: RecordTx<BufferRecord>,
    pub(crate) driver_records: RecordTx<ThreadRecord>,
    pub(crate) driver_slot: Option<usize>,
    pub(crate) workers: u32,
    pub(crate) sample_rate: u32,
    pub(crate) max_frames: usize,
    pub(crate) thread_init: Box<dyn FnMut(bool) + Send>,
    pub(crate) seq: u64,
    /// Generation of the last cycle published.
    generation: u32,
    prev_active: usize,
    limit_high: usize,
    fade_frames_left: u64,
    burst_frames_left: u64,
    last_burst_trigger: u64,
}

impl Renderer {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        shared: Arc<CycleShared>,
        controls: Arc<LiveControls>,
        buffers: RecordTx<BufferRecord>,
        driver_records: RecordTx<ThreadRecord>,
        driver_slot: Option<usize>,
        workers: u32,
        sample_rate: u32,
        max_frames: usize,
        thread_init: Box<dyn FnMut(bool) + Send>,
    ) -> Self {
        let last_burst_trigger = controls.snapshot().burst_trigger;
        let generation = shared.generation.load(Ordering::Relaxed);
        Self {
            generation,
            shared,
            controls,
            buffers,
            driver_records,
            driver_slot,
            workers,
            sample_rate,
            max_frames,
            thread_init,
            seq: 0,
            prev_active: 0,
            limit_high: 0,
            fade_frames_left: 0,
            burst_frames_left: 0,
            last_burst_trigger,
        }
    }

    /// Sample rate the engine was built for.
    pub fn sample_rate(&self) -> u32 {
        self.sample_rate
    }

    /// The largest buffer [`Renderer::render`] can fill; longer buffers are filled up to it and the rest zeroed.
    pub fn max_frames(&self) -> usize {
        self.max_frames
    }

    /// Call once on the driver thread before the first [`Renderer::render`]
    /// (not real-time: it may make syscalls and allocate). With `apply_rt`
    /// the engine's real-time settings are applied to the thread; without it
    /// (a server-owned thread such as JACK's) the priority is only read back and only the
    /// requested affinity is applied.
    pub fn driver_thread_started(&mut self, apply_rt: bool) {
        (self.thread_init)(apply_rt);
    }

    /// Renders one buffer. Real-time safe: see the module rules in `rt`.
    ///
    /// Never blocks without a bound: the wait for the workers ends at the
    /// deadline plus a margin (`wait_limit`). Workers that have not finished
    /// by then are named in the buffer's record and their part is left out of
    /// the mix; while one of them is still in that cycle, later buffers are
    /// silent and name it too, and the next cycle starts once it is out (the
    /// protocol in `cycle.rs`, step 5).
    pub fn render(&mut self, cycle: Cycle<'_>) -> CycleOutcome {
        let _rt = RtSection::enter();
        let render_start = now_ns();
        let cpu0 = thread_cpu_ns();
        let cpu_start = current_cpu();
        let stall = self.controls.take_stall();
        if stall > 0 {
            spin_until(render_start.saturating_add(stall));
        }
        let frames_total = cycle.out_l.len().min(cycle.out_r.len());
        let frames = frames_total.min(self.max_frames);
        let c = self.controls.snapshot();

        if c.burst_trigger != self.last_burst_trigger {
            self.last_burst_trigger = c.burst_trigger;
            self.burst_frames_left = (BURST_SECONDS * f64::from(self.sample_rate)) as u64;
        }
        let burst = self.burst_frames_left > 0;
        let wanted = c
            .sines
            .saturating_add(if burst { c.burst_sines } else { 0 });
        let first_worker = usize::from(self.driver_slot.is_some());
        let workers = self.workers as usize;
        let buffer_ns = frames as f64 * 1e9 / f64::from(self.sample_rate.max(1));
        let pad_until = render_start.saturating_add((c.min_load * buffer_ns) as u64);
        let mut record = ThreadRecord {
            seq: self.seq,
            wake_ns: cycle.wake_ns,
            ..ThreadRecord::default()
        };
        let (out_l, out_r) = (
            &mut cycle.out_l[..frames_total],
            &mut cycle.out_r[..frames_total],
        );
        let s = &*self.shared;
        let mut stuck = s.unfinished(first_worker, workers, self.generation);
        if stuck != 0 && cycle.deadline_ns == u64::MAX {
            // No deadline to keep (offline): a complete render matters more
            // than speed, so wait for the late worker, bounded as ever.
            let limit = wait_limit(cycle.deadline_ns, now_ns(), buffer_ns as u64);
            stuck = s.wait_for_workers(
                first_worker,
                workers,
                self.generation,
                c.driver_spin_ns,
                limit,
                now_ns,
            );
        }
        let mut injected_hang_worker = 0u32;
        let (active, unfinished_workers) = if stuck != 0 {
            // A worker has still not finished the cycle of an earlier buffer
            // (protocol step 5): no cycle can start, so this buffer is silent.
            out_l.fill(0.0);
            out_r.fill(0.0);
            (0, stuck)
        } else {
            let active = wanted.min(s.partials());
            if active != self.prev_active {
                // SAFETY: driver thread, between cycles (every worker finished the last one, checked above).
                unsafe { s.set_active(self.prev_active, active) };
                if active < self.prev_active {
                    self.fade_frames_left = (FADE_SECONDS * f64::from(self.sample_rate)) as u64;
                }
                self.prev_active = active;
            }
            if self.fade_frames_left == 0 {
                self.limit_high = active;
            }
            self.limit_high = self.limit_high.max(active);
            let hang = self
                .controls
                .take_worker_hang()
                .filter(|&(worker, _)| (1..=workers).contains(&worker));
            if let Some((worker, _)) = hang {
                injected_hang_worker = worker as u32;
            }
            let hang = hang.map(|(worker, ns)| (first_worker + worker - 1, ns));
            s.seq.store(self.seq, Ordering::Relaxed);
            s.frames.store(frames, Ordering::Relaxed);
            s.render_limit.store(self.limit_high, Ordering::Relaxed);
            s.active.store(active, Ordering::Relaxed);
            s.chunk_size.store(c.chunk_size, Ordering::Relaxed);
            s.kernel.store(
                matches!(c.kernel, xrunlab_dsp::Kernel::Fast) as u8,
                Ordering::Relaxed,
            );
            s.period_start_ns
                .store(cycle.period_start_ns, Ordering::Relaxed);
            s.pad_until_ns.store(pad_until, Ordering::Relaxed);
            // SAFETY: driver thread, between cycles (as above).
            unsafe { s.set_hang(hang) };
            self.generation = s.publish(self.workers);
            let generation = self.generation;
            let published_ns = now_ns();

            if let Some(slot) = self.driver_slot {
                // SAFETY: the driver's own slot, during the cycle it just published.
                unsafe { work_and_record(s, Some(slot), &mut record) };
                s.finish_driver_slot(slot, generation);
            }
            let limit = wait_limit(cycle.deadline_ns, published_ns, buffer_ns as u64);
            let unfinished = s.wait_for_workers(
                first_worker,
                workers,
                generation,
                c.driver_spin_ns,
                limit,
                now_ns,
            );
            if unfinished != 0 {
                // Give up on them: nobody may claim another chunk of this cycle.
                s.close_cycle();
            }
            // SAFETY: the cycle `generation` was published by this thread and
            // its wait is over; mix reads only the slots that finished it.
            unsafe {
                s.mix(
                    generation,
                    first_worker,
                    unfinished,
                    &mut out_l[..frames],
                    &mut out_r[..frames],
                )
            };
            out_l[frames..].fill(0.0);
            out_r[frames..].fill(0.0);
            (active, unfinished)
        };
        let input_peak = cycle.input.map(|(l, r)| {
            l.iter()
                .chain(r.iter())
                .fold(0.0f32, |m, v| if v.abs() > m { v.abs() } else { m })
        });
        let render_end = now_ns();
        let late = render_end > cycle.deadline_ns;

        if self.driver_slot.is_none() || stuck != 0 {
            record.cpu_start = cpu_start;
            record.cpu_end = current_cpu();
        }
        record.end_ns = render_end;
        record.cpu_ns = thread_cpu_ns().saturating_sub(cpu0);
        self.driver_records.push(record);
        self.buffers.push(BufferRecord {
            seq: self.seq,
            frames: frames as u32,
            period_start_ns: cycle.period_start_ns,
            deadline_ns: cycle.deadline_ns,
            driver_wake_ns: cycle.wake_ns,
            render_start_ns: render_start,
            render_end_ns: render_end,
            active_sines: active as u32,
            burst,
            late,
            unfinished_workers,
            input_peak,
            injected_stall_ns: stall,
            injected_hang_worker,
        });
        self.seq += 1;
        self.burst_frames_left = self.burst_frames_left.saturating_sub(frames as u64);
        self.fade_frames_left = self.fade_frames_left.saturating_sub(frames as u64);
        if pad_until > render_end {
            spin_until(pad_until);
        }
        CycleOutcome {
            render_end_ns: render_end,
            late,
        }
    }
}

/// When the driver stops waiting for its workers: one buffer duration (at
/// least [`MIN_WAIT_MARGIN_NS`]) past the deadline, or past the moment the
/// cycle was published if the driver itself woke after the deadline, so that
/// the workers always get that margin; [`NO_DEADLINE_WAIT_NS`] after
/// publishing when there is no deadline (offline).
fn wait_limit(deadline_ns: u64, published_ns: u64, buffer_ns: u64) -> u64 {
    if deadline_ns == u64::MAX {
        return published_ns.saturating_add(NO_DEADLINE_WAIT_NS);
    }
    deadline_ns
        .max(published_ns)
        .saturating_add(buffer_ns.max(MIN_WAIT_MARGIN_NS))
}
