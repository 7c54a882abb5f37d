//! Proves that the real-time path never allocates: a counting global allocator watches every render
//! cycle of the driver and the workers while controls change live.
//!
//! Counts are kept per thread (by kernel tid), so a test that allocates inside a
//! real-time section on purpose cannot disturb one that checks an engine's threads.

use crate::harness::{collect, config, start};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::time::Duration;
use xrunlab_engine::rt::alloc_probe::in_rt_section;
use xrunlab_engine::DriverMode;

struct Counting;

/// Threads that ever allocated inside a real-time section: (tid, allocations, frees).
/// A fixed table, so that counting never allocates.
const SLOTS: usize = 1024;
static TIDS: [AtomicI32; SLOTS] = [const { AtomicI32::new(0) }; SLOTS];
static ALLOCS: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];
static FREES: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];

thread_local! {
    // const-initialised without a destructor: reading it never allocates.
    static TID: Cell<i32> = const { Cell::new(0) };
}

fn current_tid() -> i32 {
    TID.with(|t| {
        if t.get() == 0 {
            // SAFETY: gettid takes no arguments and cannot fail.
            t.set(unsafe { libc::syscall(libc::SYS_gettid) } as i32);
        }
        t.get()
    })
}

/// The table slot of `tid`, claimed on first use (None when the table is full).
fn slot(tid: i32) -> Option<usize> {
    (0..SLOTS).find(|&i| {
        let owner = TIDS[i].load(Ordering::Acquire);
        owner == tid
            || (owner == 0
                && (TIDS[i]
                    .compare_exchange(0, tid, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                    || TIDS[i].load(Ordering::Acquire) == tid))
    })
}

fn count(table: &[AtomicU64; SLOTS]) {
    if in_rt_section() {
        match slot(current_tid()) {
            Some(i) => table[i].fetch_add(1, Ordering::Relaxed),
            // Never lose a count: a full table shows up in every thread's total.
            None => table[SLOTS - 1].fetch_add(1, Ordering::Relaxed),
        };
    }
}

/// Allocations and frees inside real-time sections on the threads `tids`.
fn rt_counts(tids: &[i32]) -> (u64, u64) {
    (0..SLOTS)
        .filter(|&i| tids.contains(&TIDS[i].load(Ordering::Acquire)) || i == SLOTS - 1)
        .fold((0, 0), |(a, f), i| {
            (
                a + ALLOCS[i].load(Ordering::Relaxed),
                f + FREES[i].load(Ordering::Relaxed),
            )
        })
}

// SAFETY: defers to the system allocator; the counters are atomics in static
// tables, and in_rt_section and TID read const thread-locals that never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(&ALLOCS);
        // SAFETY: forwarded contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(&FREES);
        // SAFETY: forwarded contract.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(&ALLOCS);
        // SAFETY: forwarded contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn the_real_time_path_does_not_allocate() {
    // The kernel slowdown (a test hook) renders into scratch of its own: watched too.
    for (mode, slowdown) in [
        (DriverMode::ProcessesSines, 1),
        (DriverMode::WaitsForWorkers, 1),
        (DriverMode::ProcessesSines, 3),
    ] {
        let mut c = config(600, 3, 128);
        c.driver_mode = mode;
        c.kernel_slowdown = slowdown;
        c.min_load_pct = 20.0;
        c.burst_sines = 800;
        c.input = true;
        let mut engine = start(c.clone());
        let tids: Vec<i32> = engine.threads().iter().map(|t| t.tid).collect();
        assert_eq!(
            tids.len(),
            c.realtime_threads(),
            "every audio thread is watched"
        );
        let before = rt_counts(&tids);
        let mut seen = collect(&mut engine, Duration::from_millis(300));
        engine.trigger_burst();
        c.sines = 200;
        c.kernel = xrunlab_dsp::Kernel::Fast;
        c.chunk_size = 64;
        engine
            .apply(c.clone(), |b| seen.push(b.clone()))
            .expect("live change");
        engine.inject_stall(100_000);
        seen.extend(collect(&mut engine, Duration::from_millis(200)));
        // A hung worker: the driver's timed-out wait, partial mix and silent buffers.
        engine.inject_worker_hang(1, 20_000_000);
        seen.extend(collect(&mut engine, Duration::from_millis(300)));
        let after = rt_counts(&tids);
        engine.stop(|_| {});
        assert!(
            seen.len() > 100,
            "{mode:?} x{slowdown}: the engine rendered only {} buffers",
            seen.len()
        );
        assert!(
            seen.iter().any(|b| b.burst),
            "the burst ran during the watched window"
        );
        assert!(
            seen.iter().all(|b| b.input_peak.is_some()),
            "input was metered"
        );
        assert!(
            seen.iter().any(|b| b.incomplete()),
            "{mode:?} x{slowdown}: the worker hang ran during the watched window"
        );
        assert_eq!(
            after, before,
            "{mode:?} x{slowdown}: allocations/frees on the real-time path"
        );
    }
}

#[test]
fn the_probe_sees_allocations_inside_sections() {
    // The allocator check above would pass vacuously if the probe never fired:
    // show that a real-time section does flag an allocation on this thread.
    let me = [current_tid()];
    let before = rt_counts(&me);
    xrunlab_engine::rt::alloc_probe::with_rt_section_for_tests(|| {
        let v: Vec<u8> = Vec::with_capacity(64);
        std::hint::black_box(v);
    });
    let after = rt_counts(&me);
    assert_eq!(
        after.0,
        before.0 + 1,
        "one allocation counted on this thread"
    );
    assert_eq!(after.1, before.1 + 1, "and its free");
}
