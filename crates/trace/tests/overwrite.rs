//! The tracer's overwrite mode on the real kernel (needs root): per-CPU rings that write
//! backward and are read only when a window is asked for. Events written before the read come
//! back in time order, and again on a second read; a ring too small for the window keeps its
//! newest whole records and says the window is incomplete; so does a window from before the
//! rings were opened.

use std::sync::Mutex;
use xrunlab_sys::{apply_to_current_thread, RtRequest};
use xrunlab_trace::{now_ns, EventKind, TraceOptions, Tracer, Window};

static SERIAL: Mutex<()> = Mutex::new(());

const WORK_CPU: usize = 1;

fn overwrite(ring_kib: usize) -> TraceOptions {
    TraceOptions {
        overwrite: true,
        ring_kib_per_cpu: ring_kib,
        ..TraceOptions::default()
    }
}

/// A thread on `WORK_CPU` that sleeps `n` times for `sleep_us`: each sleep is a switch out of
/// it. Returns its tid.
fn sleeper(n: usize, sleep_us: u64) -> i32 {
    std::thread::spawn(move || {
        let report = apply_to_current_thread(&RtRequest {
            cpus: Some(vec![WORK_CPU]),
            ..RtRequest::default()
        });
        assert!(report.affinity.took_effect(), "{report:?}");
        for _ in 0..n {
            std::thread::sleep(std::time::Duration::from_micros(sleep_us));
        }
        // SAFETY: gettid has no preconditions.
        unsafe { libc::gettid() }
    })
    .join()
    .expect("the sleeper ran")
}

fn switches_out_of(w: &Window, tid: i32) -> Vec<u64> {
    w.events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Switch { prev_tid, .. } if prev_tid == tid))
        .map(|e| e.ts_ns)
        .collect()
}

fn assert_in_order_and_inside(w: &Window) {
    assert!(
        w.events.windows(2).all(|p| p[0].ts_ns <= p[1].ts_ns),
        "not in time order"
    );
    assert!(
        w.events
            .iter()
            .all(|e| e.ts_ns >= w.t0_ns && e.ts_ns <= w.t1_ns),
        "an event outside [{}, {}]",
        w.t0_ns,
        w.t1_ns
    );
}

#[test]
#[ignore = "needs root and tracefs: system-wide perf tracepoints"]
fn events_written_before_the_read_come_back_in_time_order_and_again_on_a_second_read() {
    let _turn = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let tracer = Tracer::start(&[0, 1], &overwrite(1024)).expect("tracing (run as root)");
    assert!(tracer.info().overwrite && tracer.info().backend.contains("overwrite"));
    let t0 = now_ns();
    let tid = sleeper(50, 1000);
    let t1 = now_ns();
    let w = tracer.snapshot(t0, t1);
    assert!(w.complete, "a 1 MiB ring holds 50 ms of a quiet machine");
    assert_in_order_and_inside(&w);
    let out = switches_out_of(&w, tid);
    assert!(
        out.len() >= 50,
        "{} switches out of the sleeper, 50 sleeps",
        out.len()
    );
    // Reading does not consume: the kernel keeps the events until it overwrites them.
    let again = tracer.snapshot(t0, t1);
    assert_eq!(switches_out_of(&again, tid), out);
    let stats = tracer.stop();
    assert_eq!(stats.undecoded, 0, "{stats:?}");
    assert!(stats.events_total >= 100, "{stats:?}");
}

#[test]
#[ignore = "needs root and tracefs: system-wide perf tracepoints"]
fn a_ring_too_small_keeps_its_newest_whole_records_and_says_the_window_is_incomplete() {
    let _turn = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    // 8 KiB: under a hundred records; the sleeper alone writes thousands.
    let tracer = Tracer::start(&[0, 1], &overwrite(8)).expect("tracing (run as root)");
    let t0 = now_ns();
    let tid = sleeper(3000, 20);
    let t1 = now_ns();
    let w = tracer.snapshot(t0, t1);
    assert!(!w.complete, "3000 switches cannot fit in 8 KiB");
    assert_in_order_and_inside(&w);
    let out = switches_out_of(&w, tid);
    assert!(
        !out.is_empty() && out.len() < 200,
        "{} switches kept",
        out.len()
    );
    // The newest are the ones kept: the sleeper's last switch out is among them.
    let last = *out.last().expect("some kept");
    assert!(
        t1 - last < 5_000_000,
        "the last kept switch is {} µs before the end",
        (t1 - last) / 1000
    );
    // No torn record: every sample of the overwritten ring decoded.
    let stats = tracer.stats();
    assert_eq!(stats.undecoded, 0, "{stats:?}");
    // A window the ring still holds whole is complete: the last 200 µs (the machine's other
    // work goes on filling the small ring meanwhile, so not the sleeper's).
    let end = now_ns();
    let held = tracer.snapshot(end - 200_000, end);
    assert!(held.complete, "the last 200 µs fit in 8 KiB");
    assert_in_order_and_inside(&held);
}

#[test]
#[ignore = "needs root and tracefs: system-wide perf tracepoints"]
fn a_window_from_before_the_rings_were_opened_is_incomplete() {
    let _turn = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let before = now_ns();
    std::thread::sleep(std::time::Duration::from_millis(5));
    let tracer = Tracer::start(&[0, 1], &overwrite(1024)).expect("tracing (run as root)");
    sleeper(10, 1000);
    let w = tracer.snapshot(before, now_ns());
    assert!(
        !w.complete,
        "the rings hold nothing from before they opened"
    );
    assert!(!w.events.is_empty());
    // The same ring, asked from after it opened, is whole.
    let since = tracer.snapshot(w.events[0].ts_ns, now_ns());
    assert!(since.complete);
}
