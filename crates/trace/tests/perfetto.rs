//! The Perfetto (Chrome JSON) writer: the file parses, tracks and slices are where they belong,
//! the cap and decimation hold, a full disk stops the writer with a warning, and a missing
//! directory fails at creation. Runs on the test harness threads.

use serde_json::{json, Value};
use std::path::PathBuf;
use xrunlab_trace::perfetto::{cpu_track, irq_track, KERNEL_PID};
use xrunlab_trace::{Comm, EventKind, PerfettoOptions, PerfettoWriter, TraceEvent, Track};

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("xrl-perfetto-{name}-{}.json", std::process::id()))
}

fn events_of(path: &PathBuf) -> (Vec<Value>, Value) {
    let text = std::fs::read_to_string(path).unwrap();
    let doc: Value = serde_json::from_str(&text).expect("the trace is valid JSON");
    (
        doc["traceEvents"].as_array().unwrap().clone(),
        doc["otherData"].clone(),
    )
}

const DRIVER: Track = Track { pid: 10, tid: 11 };
const WORKER: Track = Track { pid: 10, tid: 12 };

#[test]
fn one_render_slice_per_buffer_per_thread_and_an_instant_per_dropout() {
    let path = temp("basic");
    let mut w = PerfettoWriter::create(&path, PerfettoOptions::default()).unwrap();
    w.process_name(10, "xrunlab");
    w.thread_name(DRIVER, "driver");
    w.thread_name(WORKER, "worker 1");
    for seq in 0..50u64 {
        let start = 1_000_000_000 + seq * 2_666_667;
        for t in [DRIVER, WORKER] {
            w.instant(t, "wake", start + 20_000, json!({"seq": seq}));
            w.slice(
                t,
                "render",
                "buffer",
                start + 20_000,
                500_000,
                json!({"seq": seq}),
            );
        }
        w.counter(10, "load", start, &[("load", 0.2)]);
        if seq % 10 == 3 {
            w.dropout(
                DRIVER,
                start + 2_666_667,
                "late: driver ran 2.90 ms",
                json!({"seq": seq}),
            );
        }
    }
    let summary = w.finish();
    assert!(summary.complete && summary.warning.is_none());
    let (events, other) = events_of(&path);
    assert_eq!(summary.events_written as usize, events.len());
    for tid in [11, 12] {
        let renders = events
            .iter()
            .filter(|e| e["ph"] == "X" && e["name"] == "render" && e["tid"] == tid)
            .count();
        assert_eq!(renders, 50, "one render slice per buffer on tid {tid}");
    }
    let names: Vec<&Value> = events.iter().filter(|e| e["ph"] == "M").collect();
    assert_eq!(names.len(), 3);
    let dropouts: Vec<&Value> = events.iter().filter(|e| e["name"] == "dropout").collect();
    assert_eq!(dropouts.len(), 5);
    assert_eq!(dropouts[0]["args"]["verdict"], "late: driver ran 2.90 ms");
    assert_eq!(dropouts[0]["ph"], "i");
    // Microseconds: 1 s + 3 buffers + one period, in µs.
    let ts = dropouts[0]["ts"].as_f64().unwrap();
    assert!(
        (ts - (1_000_000_000.0 + 4.0 * 2_666_667.0) / 1000.0).abs() < 1e-3,
        "{ts}"
    );
    assert_eq!(other["xrunlab_events_dropped_by_cap"], 0);
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn the_cap_keeps_dropouts_and_counts_what_it_left_out_and_decimation_thins_buffers() {
    let path = temp("cap");
    let opts = PerfettoOptions {
        max_events: Some(10),
        every_nth_buffer: 4,
    };
    let mut w = PerfettoWriter::create(&path, opts).unwrap();
    let kept: Vec<u64> = (0..12).filter(|s| w.keep_buffer(*s)).collect();
    assert_eq!(kept, vec![0, 4, 8]);
    for seq in 0..30u64 {
        w.slice(DRIVER, "render", "buffer", seq * 1000, 500, Value::Null);
    }
    w.dropout(DRIVER, 40_000, "late: x", Value::Null);
    let summary = w.finish();
    assert_eq!(summary.events_written, 11);
    assert_eq!(summary.events_dropped, 20);
    let (events, other) = events_of(&path);
    assert_eq!(events.len(), 11);
    assert_eq!(events.last().unwrap()["name"], "dropout");
    assert_eq!(other["xrunlab_events_dropped_by_cap"], 20);
    assert_eq!(other["xrunlab_every_nth_buffer"], 4);
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn a_full_disk_stops_the_trace_with_a_warning_instead_of_failing() {
    // /dev/full accepts the open and fails every write with ENOSPC, like a full disk.
    let mut w = PerfettoWriter::create(
        std::path::Path::new("/dev/full"),
        PerfettoOptions::default(),
    )
    .expect("/dev/full opens");
    for seq in 0..20_000u64 {
        w.slice(
            DRIVER,
            "render",
            "buffer",
            seq * 1000,
            500,
            json!({"seq": seq}),
        );
    }
    let warning = w
        .warning()
        .expect("the writer noticed the full disk")
        .to_owned();
    assert!(warning.contains("No space left on device"), "{warning}");
    assert!(warning.contains("/dev/full"), "{warning}");
    let summary = w.finish();
    assert!(!summary.complete);
    assert!(summary.events_written < 20_000);
}

#[test]
fn a_missing_directory_is_an_error_naming_the_path_before_anything_runs() {
    let path = std::env::temp_dir().join("xrl-no-such-dir-for-trace/run.json");
    let err = PerfettoWriter::create(&path, PerfettoOptions::default()).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("xrl-no-such-dir-for-trace/run.json"),
        "{text}"
    );
    assert!(text.contains("No such file or directory"), "{text}");
}

#[test]
fn kernel_events_become_per_cpu_task_and_interrupt_slices() {
    let path = temp("kernel");
    let mut w = PerfettoWriter::create(&path, PerfettoOptions::default()).unwrap();
    let switch = |ts: u64, cpu: u16, next: &str, tid: i32| TraceEvent {
        ts_ns: ts,
        cpu,
        kind: EventKind::Switch {
            prev_comm: Comm::new(b"x"),
            prev_tid: 1,
            prev_prio: 120,
            prev_state: 1,
            next_comm: Comm::new(next.as_bytes()),
            next_tid: tid,
            next_prio: 9,
        },
    };
    let events = vec![
        switch(1_000, 1, "xrl-hog", 4711),
        TraceEvent {
            ts_ns: 1_500,
            cpu: 1,
            kind: EventKind::SoftirqEntry { vec: 3 },
        },
        TraceEvent {
            ts_ns: 1_700,
            cpu: 1,
            kind: EventKind::SoftirqExit { vec: 3 },
        },
        // hrtimer expiry, when it was recorded (--explain-all).
        TraceEvent {
            ts_ns: 2_000,
            cpu: 1,
            kind: EventKind::HrtimerEntry {
                function: 0xffff_ffff_8100_0000,
            },
        },
        TraceEvent {
            ts_ns: 2_300,
            cpu: 1,
            kind: EventKind::HrtimerExit,
        },
        TraceEvent {
            ts_ns: 2_400,
            cpu: 1,
            kind: EventKind::CpuIdle { state: 1 },
        },
        TraceEvent {
            ts_ns: 2_900,
            cpu: 1,
            kind: EventKind::CpuIdle { state: u32::MAX },
        },
        switch(21_000, 1, "worker", 100),
        switch(22_000, 0, "other-cpu", 5),
        switch(23_000, 0, "other-cpu2", 6),
    ];
    w.kernel_events(&events, &[1]);
    assert!(w.finish().complete);
    let (events, _) = events_of(&path);
    let slices: Vec<&Value> = events.iter().filter(|e| e["ph"] == "X").collect();
    assert_eq!(slices.len(), 3, "{slices:?}");
    let hog = slices.iter().find(|e| e["cat"] == "sched").unwrap();
    assert_eq!(hog["name"], "xrl-hog (4711)");
    assert_eq!(hog["pid"], KERNEL_PID);
    assert_eq!(hog["tid"], cpu_track(1).tid);
    assert_eq!(hog["dur"].as_f64().unwrap(), 20.0);
    let soft = slices.iter().find(|e| e["cat"] == "softirq").unwrap();
    assert_eq!(soft["name"], "softirq NET_RX");
    let timer = slices.iter().find(|e| e["cat"] == "hrtimer").unwrap();
    assert_eq!(timer["tid"], irq_track(1).tid);
    assert_eq!(timer["dur"].as_f64().unwrap(), 0.3);
    assert_eq!(timer["args"]["function"], "0xffffffff81000000");
    let idle: Vec<f64> = events
        .iter()
        .filter(|e| e["ph"] == "C" && e["name"] == "CPU 1 idle state")
        .map(|e| e["args"]["state"].as_f64().unwrap())
        .collect();
    assert_eq!(idle, [1.0, -1.0], "entering C1, then leaving idle");
    assert!(events
        .iter()
        .any(|e| e["ph"] == "M" && e["args"]["name"] == "CPU 1"));
    assert!(
        !events.iter().any(|e| e["args"]["name"] == "CPU 0"),
        "CPU 0 was not asked for"
    );
    std::fs::remove_file(&path).unwrap();
}
