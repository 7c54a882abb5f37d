//! Proves that the real-time path never allocates: a counting global allocator watches every render cycle of the driver and the workers while controls change live.

use crate::harness::{collect, config, start};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use xrunlab_engine::rt::alloc_probe::in_rt_section;
use xrunlab_engine::DriverMode;

struct Counting;

static RT_ALLOCS: AtomicU64 = AtomicU64::new(0);
static RT_FREES: AtomicU64 = AtomicU64::new(0);

// SAFETY: defers to the system allocator; the counters are atomics, and
// in_rt_section reads a const thread-local that never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if in_rt_section() {
            RT_ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: forwarded contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if in_rt_section() {
            RT_FREES.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: forwarded contract.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if in_rt_section() {
            RT_ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: forwarded contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn the_real_time_path_does_not_allocate() {
    for mode in [DriverMode::ProcessesSines, DriverMode::WaitsForWorkers] {
        let mut c = config(600, 3, 128);
        c.driver_mode = mode;
        c.min_load_pct = 20.0;
        c.burst_sines = 800;
        c.input = true;
        let mut engine = start(c.clone());
        let before = (
            RT_ALLOCS.load(Ordering::Relaxed),
            RT_FREES.load(Ordering::Relaxed),
        );
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
        let after = (
            RT_ALLOCS.load(Ordering::Relaxed),
            RT_FREES.load(Ordering::Relaxed),
        );
        engine.stop(|_| {});
        assert!(
            seen.len() > 200,
            "{mode:?}: the engine rendered only {} buffers",
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
            "{mode:?}: the worker hang ran during the watched window"
        );
        assert_eq!(
            after, before,
            "{mode:?}: allocations/frees on the real-time path"
        );
    }
}

#[test]
fn the_probe_sees_allocations_inside_sections() {
    // The allocator check above would pass vacuously if the probe never fired:
    // show that a real-time section does flag an allocation on this thread.
    let before = RT_ALLOCS.load(Ordering::Relaxed);
    xrunlab_engine::rt::alloc_probe::with_rt_section_for_tests(|| {
        let v: Vec<u8> = Vec::with_capacity(64);
        std::hint::black_box(v);
    });
    assert!(RT_ALLOCS.load(Ordering::Relaxed) > before);
}
