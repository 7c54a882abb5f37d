//! The race checker's model of the render cycle's driver/worker hand-off (protocol in `cycle.rs`);
//! loom runs each test's threads under its scheduler.
//!
//! Built only with `RUSTFLAGS="--cfg loom"`, where `rt/sync.rs` makes the
//! protocol's atomics, slot cells and futex words loom's (its module doc says
//! what the futex model covers and what it does not). Run it as test.sh
//! does: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test -p
//! xrunlab-engine --release --lib loom` (with its own `CARGO_TARGET_DIR`).
//!
//! What runs is the real code: the workers are `worker::run` itself, and the
//! driver calls the protocol's steps in `Renderer::render`'s order
//! (`unfinished` for a worker still in an earlier cycle, `publish`, the
//! driver's own slot through `work_and_record`, `wait_for_workers`,
//! `close_cycle`, `mix`). `render` itself is not run: its clocks, records and
//! controls are not the protocol and would only multiply the schedules; the
//! model's [`Driver::render`] is that order, kept beside it by hand. The
//! partials are the real bank and kernel on a few partials and frames.
//!
//! Invariants checked in every explored schedule:
//! - every partial is rendered exactly once per completed cycle (its phase),
//!   and the chunks claimed add up to the partials;
//! - the driver mixes only what every worker signalled: a complete cycle's
//!   mix equals a one-thread render of the same partials, and loom's cell
//!   checker fails any read of a slot not ordered after its worker's writes;
//! - no lost wake-up: loom fails a schedule where every thread sleeps;
//! - a late worker is detected (named in the mask, left out of the mix, the
//!   next buffer silent until it is out) and both outcomes are reached;
//! - stop reaches every worker, asleep or still in a cycle.

// The model's own bookkeeping (thread handles, chunk counts) is test code
// around the real-time calls, not part of them.
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    clippy::disallowed_macros
)]

use super::cycle::{work_and_record, CycleShared};
use super::records::{record_ring, ThreadRecord};
use super::worker;
use loom::sync::atomic::AtomicU64;
use loom::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use xrunlab_dsp::{Chord, ChordNotes, Kernel, PartialBank};

/// Partials rendered per cycle, frames per buffer, partials per chunk: enough
/// for two threads to split a cycle, small enough for loom.
const PARTIALS: usize = 2;
const FRAMES: usize = 2;
const CHUNK: usize = 1;
const SAMPLE_RATE: u32 = 48_000;

fn chord() -> Chord {
    Chord::single(SAMPLE_RATE, ChordNotes::Apl)
}

/// Shared state with `slots` slots, the first `PARTIALS` partials sounding and
/// the cycle's parameters stored (they are constant in the model; the
/// threads start after this, so they see them).
fn shared(slots: usize) -> Arc<CycleShared> {
    let s = CycleShared::new(&chord(), slots, FRAMES, 1);
    // SAFETY: no audio thread exists yet.
    unsafe { s.set_active(0, PARTIALS) };
    s.frames.store(FRAMES, Ordering::Relaxed);
    s.render_limit.store(PARTIALS, Ordering::Relaxed);
    s.active.store(PARTIALS, Ordering::Relaxed);
    s.chunk_size.store(CHUNK, Ordering::Relaxed);
    Arc::new(s)
}

/// The driver's half, in `Renderer::render`'s order of protocol calls.
struct Driver {
    generation: u32,
    driver_slot: Option<usize>,
    first_worker: usize,
    workers: usize,
    /// Chunks the driver's own slot claimed, per cycle it ran.
    chunks: Vec<u32>,
}

impl Driver {
    fn new(s: &CycleShared, driver_slot: Option<usize>, workers: usize) -> Self {
        Self {
            generation: s.generation.load(Ordering::Relaxed),
            driver_slot,
            first_worker: usize::from(driver_slot.is_some()),
            workers,
            chunks: Vec::new(),
        }
    }

    /// One buffer: returns the mask of workers not done (as `BufferRecord::unfinished_workers`)
    /// and whether a cycle was published.
    fn render(
        &mut self,
        s: &CycleShared,
        limit_ns: u64,
        now: impl Fn() -> u64,
        out_l: &mut [f32],
        out_r: &mut [f32],
    ) -> (u64, bool) {
        let stuck = s.unfinished(self.first_worker, self.workers, self.generation);
        if stuck != 0 {
            out_l.fill(0.0);
            out_r.fill(0.0);
            return (stuck, false);
        }
        self.generation = s.publish(self.workers as u32);
        if let Some(slot) = self.driver_slot {
            let mut record = ThreadRecord::default();
            // SAFETY: the driver's own slot, during the cycle it just published.
            unsafe { work_and_record(s, Some(slot), &mut record) };
            s.finish_driver_slot(slot, self.generation);
            self.chunks.push(record.chunks);
        }
        let unfinished = s.wait_for_workers(
            self.first_worker,
            self.workers,
            self.generation,
            0,
            limit_ns,
            now,
        );
        if unfinished != 0 {
            s.close_cycle();
        }
        // SAFETY: this thread published the cycle and its wait is over.
        unsafe { s.mix(self.generation, self.first_worker, unfinished, out_l, out_r) };
        (unfinished, true)
    }

    /// The offline path of `render` for a worker still in an earlier cycle:
    /// wait for it without a limit (the model's stand-in for "the next buffers
    /// are silent until it is out").
    fn wait_out_late(&self, s: &CycleShared) {
        let left = s.wait_for_workers(
            self.first_worker,
            self.workers,
            self.generation,
            0,
            u64::MAX,
            || 0,
        );
        assert_eq!(left, 0, "a late worker never finished");
    }
}

/// A one-thread render of the first `PARTIALS` partials, cycle after cycle.
struct Reference {
    bank: PartialBank,
    coeff: f32,
}

impl Reference {
    fn new() -> Self {
        let mut bank = PartialBank::new(&chord());
        bank.set_active(0, PARTIALS);
        Self {
            bank,
            coeff: xrunlab_dsp::smoothing_coeff(SAMPLE_RATE),
        }
    }

    fn cycle(&mut self) -> ([f32; FRAMES], [f32; FRAMES]) {
        let (mut l, mut r) = ([0.0; FRAMES], [0.0; FRAMES]);
        let view = self.bank.view_mut(0, PARTIALS);
        xrunlab_dsp::render(Kernel::Reference, view, self.coeff, &mut l, &mut r);
        (l, r)
    }
}

fn assert_mix(l: &[f32], r: &[f32], reference: &([f32; FRAMES], [f32; FRAMES])) {
    for (got, want) in l.iter().zip(&reference.0).chain(r.iter().zip(&reference.1)) {
        assert!(
            (got - want).abs() <= 1e-6,
            "mix {l:?} {r:?} is not the one-thread render {reference:?}"
        );
    }
}

/// Each rendered partial's phase moved by `cycles` buffers: it was rendered
/// exactly once per cycle (twice would move it further, a lost chunk less).
fn assert_phases(s: &CycleShared, cycles: u32) {
    let start = PartialBank::new(&chord());
    for i in 0..PARTIALS {
        let want = start.phase[i].wrapping_add(start.inc[i].wrapping_mul(FRAMES as u32 * cycles));
        assert_eq!(
            s.phases()[i],
            want,
            "partial {i} not rendered exactly once in each of {cycles} cycles"
        );
    }
}

/// Starts `worker::run` on slots `first..first + count`; returns the threads
/// and their record rings.
fn spawn_workers(
    s: &Arc<CycleShared>,
    first: usize,
    count: usize,
) -> (
    Vec<loom::thread::JoinHandle<()>>,
    Vec<super::records::RecordRx<ThreadRecord>>,
) {
    let seen = s.generation.load(Ordering::Acquire);
    let mut handles = Vec::new();
    let mut rings = Vec::new();
    for slot in first..first + count {
        let (tx, rx) = record_ring::<ThreadRecord>();
        let s = s.clone();
        handles.push(loom::thread::spawn(move || worker::run(&s, slot, tx, seen)));
        rings.push(rx);
    }
    (handles, rings)
}

fn stop(s: &CycleShared, handles: Vec<loom::thread::JoinHandle<()>>) {
    s.stop_workers();
    for h in handles {
        h.join().unwrap();
    }
}

/// The driver renders into its own slot while one worker renders into its
/// slot; two cycles, so the second reuses slots and chunks the first used.
#[test]
fn loom_driver_and_worker_render_every_partial_once_per_cycle() {
    loom::model(|| {
        let s = shared(2);
        let (handles, mut rings) = spawn_workers(&s, 1, 1);
        let mut driver = Driver::new(&s, Some(0), 1);
        let mut reference = Reference::new();
        let (mut l, mut r) = ([0.0; FRAMES], [0.0; FRAMES]);
        for cycle in 1..=2 {
            let (unfinished, published) = driver.render(&s, u64::MAX, || 0, &mut l, &mut r);
            assert!(published && unfinished == 0);
            assert_mix(&l, &r, &reference.cycle());
            assert_phases(&s, cycle);
        }
        stop(&s, handles);
        let worker_chunks: u32 = std::iter::from_fn(|| rings[0].pop())
            .map(|r| r.chunks)
            .sum();
        let driver_chunks: u32 = driver.chunks.iter().sum();
        assert_eq!(driver_chunks + worker_chunks, 2 * PARTIALS as u32);
    });
}

/// Two workers and a driver that only waits: each worker's wake-up (the
/// cycle) and the driver's (the last one out) must arrive in every order.
#[test]
fn loom_two_workers_no_lost_wakeup() {
    loom::model(|| {
        let s = shared(2);
        let (handles, _rings) = spawn_workers(&s, 0, 2);
        let mut driver = Driver::new(&s, None, 2);
        let mut reference = Reference::new();
        let (mut l, mut r) = ([0.0; FRAMES], [0.0; FRAMES]);
        for cycle in 1..=2 {
            let (unfinished, published) = driver.render(&s, u64::MAX, || 0, &mut l, &mut r);
            assert!(published && unfinished == 0);
            assert_mix(&l, &r, &reference.cycle());
            assert_phases(&s, cycle);
        }
        stop(&s, handles);
    });
}

/// A timer fires while the worker may still be rendering: the driver either
/// mixes a complete cycle or names the worker, closes the cycle and mixes
/// nothing of it; the next buffer is silent while the worker is still in
/// that cycle, and the next cycle starts only once it is out.
#[test]
fn loom_late_worker_is_detected_and_left_out() {
    static LATE: AtomicUsize = AtomicUsize::new(0);
    static ON_TIME: AtomicUsize = AtomicUsize::new(0);
    LATE.store(0, Ordering::Relaxed);
    ON_TIME.store(0, Ordering::Relaxed);
    const LIMIT: u64 = 1;
    loom::model(|| {
        let s = shared(1);
        let clock = Arc::new(AtomicU64::new(0));
        let (handles, _rings) = spawn_workers(&s, 0, 1);
        let timer = {
            let (s, clock) = (s.clone(), clock.clone());
            // The deadline passes at some point of the schedule; the kernel
            // would then wake the driver's timed futex wait.
            loom::thread::spawn(move || {
                clock.store(LIMIT, Ordering::SeqCst);
                s.remaining.wake_all();
            })
        };
        let now = || clock.load(Ordering::SeqCst);
        let mut driver = Driver::new(&s, None, 1);
        let mut reference = Reference::new();
        let (mut l, mut r) = ([0.0; FRAMES], [0.0; FRAMES]);
        let (unfinished, _) = driver.render(&s, LIMIT, now, &mut l, &mut r);
        let first = reference.cycle();
        if unfinished == 0 {
            ON_TIME.fetch_add(1, Ordering::Relaxed);
            assert_mix(&l, &r, &first);
        } else {
            LATE.fetch_add(1, Ordering::Relaxed);
            assert_eq!(unfinished, 1, "the late worker is named");
            assert!(
                l.iter().chain(&r).all(|v| *v == 0.0),
                "its part is left out"
            );
            // The next buffer, while it may still be in that cycle.
            let (stuck, published) = driver.render(&s, LIMIT, now, &mut l, &mut r);
            if !published {
                assert_eq!(stuck, 1);
                assert!(l.iter().chain(&r).all(|v| *v == 0.0));
            }
        }
        // Every cycle over before the partials are read (protocol step 1).
        driver.wait_out_late(&s);
        timer.join().unwrap();
        // The closed cycle rendered each partial at most once: the phases
        // lie between the cycles completed and the cycles published.
        let start = PartialBank::new(&chord());
        for i in 0..PARTIALS {
            let step = start.inc[i].wrapping_mul(FRAMES as u32);
            let done = s.phases()[i].wrapping_sub(start.phase[i]);
            assert!(
                done == 0 || done == step || done == step.wrapping_mul(2),
                "partial {i} rendered more than once per cycle"
            );
        }
        stop(&s, handles);
    });
    assert!(
        LATE.load(Ordering::Relaxed) > 0,
        "no schedule had a late worker"
    );
    assert!(
        ON_TIME.load(Ordering::Relaxed) > 0,
        "no schedule finished in time"
    );
}

/// Stop while a cycle may be unfinished (the driver gave up on it): every
/// worker leaves, whether asleep, in the cycle, or not yet woken for it.
#[test]
fn loom_stop_reaches_every_worker() {
    loom::model(|| {
        let s = shared(2);
        let clock = Arc::new(AtomicU64::new(0));
        let (handles, _rings) = spawn_workers(&s, 0, 2);
        let mut driver = Driver::new(&s, None, 2);
        let (mut l, mut r) = ([0.0; FRAMES], [0.0; FRAMES]);
        // The limit has passed: the driver gives up at its first look unless both are done.
        clock.store(1, Ordering::SeqCst);
        driver.render(&s, 1, || clock.load(Ordering::SeqCst), &mut l, &mut r);
        stop(&s, handles);
    });
}
