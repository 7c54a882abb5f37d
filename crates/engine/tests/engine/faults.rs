//! Faults the engine must survive without losing measurements: a worker that hangs inside its
//! cycle, and server xruns noted while no buffer is waiting to be drained.

use crate::harness::{collect, config, start};
use std::time::{Duration, Instant};
use xrunlab_engine::rt::clock::now_ns;
use xrunlab_engine::{BufferReport, DriverMode, Engine, RunStats};

/// Drains until `n` buffers in all were seen (or `limit` passes).
fn collect_until(engine: &mut Engine, seen: &mut Vec<BufferReport>, n: usize, limit: Duration) {
    let t0 = Instant::now();
    while seen.len() < n && t0.elapsed() < limit {
        std::thread::sleep(Duration::from_millis(5));
        engine.drain(|b| seen.push(b.clone()));
    }
}

/// The longest run of consecutive incomplete buffers in `seen`.
fn longest_run(seen: &[BufferReport]) -> Vec<&BufferReport> {
    let mut best: Vec<&BufferReport> = Vec::new();
    let mut run: Vec<&BufferReport> = Vec::new();
    for b in seen {
        if b.incomplete() && run.last().is_none_or(|p| p.seq + 1 == b.seq) {
            run.push(b);
        } else {
            run = if b.incomplete() { vec![b] } else { Vec::new() };
        }
        if run.len() > best.len() {
            best = run.clone();
        }
    }
    best
}

#[test]
fn a_hung_worker_does_not_hang_the_driver_and_is_named_in_the_incomplete_buffers() {
    const HANG_NS: u64 = 50_000_000;
    for mode in [DriverMode::ProcessesSines, DriverMode::WaitsForWorkers] {
        // 128 frames at 48 kHz: 2.67 ms periods, so the 50 ms hang spans ~19 of them.
        let mut c = config(400, 3, 128);
        c.driver_mode = mode;
        // Small chunks: the hung worker is sure to hold one when it hangs.
        c.chunk_size = 16;
        let threads = c.realtime_threads();
        let mut engine = start(c);
        let mut seen = collect(&mut engine, Duration::from_millis(300));
        let before = seen.len();
        engine.inject_worker_hang(2, HANG_NS);
        seen.extend(collect(&mut engine, Duration::from_millis(500)));
        engine.stop(|b| seen.push(b.clone()));

        let period_ns = 128.0 * 1e9 / 48_000.0;
        // On a loaded machine a worker the hypervisor or another real-time task keeps
        // off its CPU past the wait limit is, rightly, named too: the hang is the
        // longest run of consecutive incomplete buffers after the injection.
        let all_incomplete: Vec<&BufferReport> = seen.iter().filter(|b| b.incomplete()).collect();
        let incomplete = longest_run(&seen[before..]);
        assert!(
            seen[..before].iter().filter(|b| b.incomplete()).count() <= 2,
            "{mode:?}: at most the odd descheduled worker before the hang"
        );
        assert!(
            incomplete
                .iter()
                .all(|b| b.unfinished_threads().collect::<Vec<_>>() == [2]),
            "{mode:?}: every buffer of the hang names worker 2 alone: {:?}",
            incomplete
                .iter()
                .map(|b| (b.seq, b.unfinished_workers))
                .collect::<Vec<_>>()
        );
        // The driver went on: a buffer every period or so through the hang, not one 50 ms wait.
        assert!(
            incomplete.len() >= 8,
            "{mode:?}: the driver kept rendering during the 50 ms hang, but only {} buffers name the hung worker",
            incomplete.len()
        );
        let first = incomplete[0];
        let last = incomplete[incomplete.len() - 1];
        let hung: Vec<(u64, u32)> = seen
            .iter()
            .filter(|b| b.injected_hang_worker != 0)
            .map(|b| (b.seq, b.injected_hang_worker))
            .collect();
        assert_eq!(
            hung,
            [(first.seq, 2)],
            "{mode:?}: the record of the buffer whose cycle the hang was injected into names worker 2"
        );
        assert!(
            last.seq - first.seq + 1 == incomplete.len() as u64,
            "{mode:?}: the incomplete buffers are consecutive"
        );
        let span_ms = (last.period_start_ns - first.period_start_ns) as f64 / 1e6;
        assert!(
            (30.0..500.0).contains(&span_ms),
            "{mode:?}: incomplete buffers span {span_ms:.1} ms for a 50 ms hang"
        );
        // The buffer whose wait timed out ended about one period past its deadline, not 50 ms later.
        let overrun_ms = first.render_end_ns.saturating_sub(first.deadline_ns) as f64 / 1e6;
        assert!(
            first.late && overrun_ms < 20.0,
            "{mode:?}: the first incomplete buffer ended {overrun_ms:.1} ms past its deadline"
        );
        let hang_window: Vec<&BufferReport> = seen
            .iter()
            .filter(|b| b.seq >= first.seq && b.seq <= last.seq + 1)
            .collect();
        let max_gap_ms = hang_window
            .windows(2)
            .map(|w| (w[1].period_start_ns - w[0].period_start_ns) as f64 / 1e6)
            .fold(0.0, f64::max);
        assert!(
            max_gap_ms < 20.0,
            "{mode:?}: buffers kept coming (largest gap {max_gap_ms:.1} ms, period {:.2} ms)",
            period_ns / 1e6
        );
        let silent_on_time = incomplete[1..]
            .iter()
            .filter(|b| !b.late && b.active_sines == 0)
            .count();
        assert!(
            silent_on_time >= 6,
            "{mode:?}: while the worker hangs, buffers are silent and on time ({silent_on_time})"
        );
        // Recovery: complete buffers with every thread again after the hang.
        let after: Vec<&BufferReport> = seen.iter().filter(|b| b.seq > last.seq).collect();
        let complete_after = after
            .iter()
            .filter(|b| !b.incomplete() && b.threads.len() == threads && b.active_sines == 400)
            .count();
        assert!(
            complete_after > 50,
            "{mode:?}: the engine recovered ({complete_after} complete buffers after the hang)"
        );
        eprintln!(
            "{mode:?}: 50 ms hang -> {} incomplete buffers over {span_ms:.1} ms, first ended {overrun_ms:.2} ms past its deadline, largest gap {max_gap_ms:.2} ms, {complete_after} complete buffers after",
            incomplete.len()
        );
        let mut stats = RunStats::new(threads);
        seen.iter().for_each(|b| stats.add(b));
        let summary = stats.summary();
        assert_eq!(summary.incomplete_renders, all_incomplete.len() as u64);
        let worker2 = summary.threads.iter().find(|t| t.index == 2).unwrap();
        assert!(worker2.unfinished_buffers >= incomplete.len() as u64);
        assert!(summary.dropouts >= summary.incomplete_renders);
    }
}

#[test]
fn a_server_xrun_noted_while_no_buffer_is_waiting_is_counted_in_the_next_buffer() {
    // 8192 frames at 8 kHz: one buffer every 1.024 s, so a drain right after
    // one finds no buffer waiting. The old drain dropped xruns noted then.
    let mut c = config(10, 2, 8192);
    c.sample_rate = 8_000;
    let mut engine = start(c);
    let mut seen = Vec::new();
    collect_until(&mut engine, &mut seen, 1, Duration::from_secs(5));
    assert_eq!(seen.len(), 1, "the first buffer arrives");
    engine.signals().note_xrun(now_ns());
    engine.signals().note_xrun(now_ns());
    let drained = engine.drain(|b| seen.push(b.clone()));
    assert_eq!(
        drained, 0,
        "no buffer is waiting right after one was drained: the xruns must be kept"
    );
    collect_until(&mut engine, &mut seen, 2, Duration::from_secs(5));
    engine.stop(|b| seen.push(b.clone()));
    assert!(seen.len() >= 2, "a second buffer arrives");
    assert_eq!(
        seen.iter().map(|b| u64::from(b.server_xruns)).sum::<u64>(),
        2,
        "both xruns are attributed: {:?}",
        seen.iter()
            .map(|b| (b.seq, b.server_xruns))
            .collect::<Vec<_>>()
    );
    assert!(
        seen[1].device_xrun && seen[1].server_xruns == 2,
        "they go to the first buffer drained after them (the one they fell in was delivered)"
    );
    let mut stats = RunStats::new(2);
    seen.iter().for_each(|b| stats.add(b));
    assert_eq!(stats.summary().server_xruns, 2);
    assert_eq!(stats.summary().buffers_with_device_xrun, 1);
}
