//! Blame cards on synthetic kernel event sequences: a hog preempting a worker, a lower-priority
//! task the kernel did not preempt, an interrupt storm, a render that ran long, a migration,
//! sleeps inside the render, lost events, and the top-culprits table. Runs on the test harness threads; no kernel access.

use xrunlab_trace::{
    blame, AudioThread, BlameCard, BlameInput, Cause, Comm, CulpritKind, Culprits, EventKind,
    IdleCause, NoLookup, TaskIdentity, TaskLookup, TraceEvent, Window,
};

const MS: u64 = 1_000_000;
const US: u64 = 1_000;
/// Kernel priority of SCHED_FIFO 70 (99 - 70) and 90.
const FIFO70: i32 = 29;
const FIFO90: i32 = 9;
const S: i64 = 1;
const D: i64 = 2;

fn ev(ts: u64, cpu: u16, kind: EventKind) -> TraceEvent {
    TraceEvent {
        ts_ns: ts,
        cpu,
        kind,
    }
}

fn switch(ts: u64, cpu: u16, prev: (&str, i32, i32, i64), next: (&str, i32, i32)) -> TraceEvent {
    ev(
        ts,
        cpu,
        EventKind::Switch {
            prev_comm: Comm::new(prev.0.as_bytes()),
            prev_tid: prev.1,
            prev_prio: prev.2,
            prev_state: prev.3,
            next_comm: Comm::new(next.0.as_bytes()),
            next_tid: next.1,
            next_prio: next.2,
        },
    )
}

/// sched_waking then sched_wakeup of `tid`, queued on `target`, run by `waker`.
fn wake(ts: u64, cpu: u16, comm: &str, tid: i32, target: i32, waker: i32) -> Vec<TraceEvent> {
    [true, false]
        .into_iter()
        .map(|waking| {
            ev(
                ts,
                cpu,
                EventKind::Wakeup {
                    comm: Comm::new(comm.as_bytes()),
                    tid,
                    prio: FIFO70,
                    target_cpu: target,
                    waking,
                    waker_tid: waker,
                    in_interrupt: waker == 0,
                },
            )
        })
        .collect()
}

fn softirq(start: u64, end: u64, cpu: u16, vec: u32) -> Vec<TraceEvent> {
    vec![
        ev(start, cpu, EventKind::SoftirqEntry { vec }),
        ev(end, cpu, EventKind::SoftirqExit { vec }),
    ]
}

fn irq(start: u64, end: u64, cpu: u16, n: i32, name: &str) -> Vec<TraceEvent> {
    vec![
        ev(
            start,
            cpu,
            EventKind::IrqEntry {
                irq: n,
                name: name.into(),
            },
        ),
        ev(end, cpu, EventKind::IrqExit { irq: n }),
    ]
}

fn window(mut events: Vec<TraceEvent>, lost: u64) -> Window {
    events.sort_by_key(|e| e.ts_ns);
    Window {
        t0_ns: 0,
        t1_ns: 10 * MS,
        events,
        lost_events: lost,
        complete: true,
        ..Default::default()
    }
}

fn thread(role: &str, tid: i32, wake: u64, end: u64, median: Option<u64>) -> AudioThread {
    AudioThread {
        role: role.into(),
        tid,
        wake_ns: Some(wake),
        end_ns: Some(end),
        median_busy_ns: median,
    }
}

fn card(
    threads: &[AudioThread],
    w: &Window,
    render_end: u64,
    notes: &[String],
    lookup: &dyn TaskLookup,
) -> BlameCard {
    blame(
        &BlameInput {
            period_start_ns: MS,
            deadline_ns: MS + 1333 * US,
            render_end_ns: render_end,
            threads,
            window: w,
            notes,
        },
        lookup,
    )
}

/// Knows one task, like procfs would while the hog is alive.
struct HogAlive;
impl TaskLookup for HogAlive {
    fn lookup(&self, tid: i32) -> Option<TaskIdentity> {
        (tid == 4711).then(|| TaskIdentity {
            pid: 4700,
            comm: "xrl-hog".into(),
            policy: "SCHED_FIFO 90".into(),
            parent: None,
        })
    }
}

/// Worker 1 (tid 100) sleeps on CPU0; the hog starts at 0.9 ms; the worker is woken at 1.0 ms
/// but only runs when the hog stops at 2.02 ms, and ends at 2.52 ms.
fn hog_scenario() -> (Vec<AudioThread>, Window) {
    let mut events = vec![
        switch(
            500 * US,
            0,
            ("worker 1", 100, FIFO70, S),
            ("swapper/0", 0, 120),
        ),
        switch(
            900 * US,
            0,
            ("swapper/0", 0, 120, 0),
            ("xrl-hog", 4711, FIFO90),
        ),
        switch(
            2020 * US,
            0,
            ("xrl-hog", 4711, FIFO90, S),
            ("worker 1", 100, FIFO70),
        ),
        switch(
            2520 * US,
            0,
            ("worker 1", 100, FIFO70, S),
            ("swapper/0", 0, 120),
        ),
    ];
    events.extend(wake(MS, 0, "worker 1", 100, 0, 0));
    let threads = vec![thread(
        "worker 1",
        100,
        2020 * US,
        2520 * US,
        Some(500 * US),
    )];
    (threads, window(events, 0))
}

#[test]
fn a_hog_that_preempts_the_worker_is_named_with_pid_and_policy() {
    let (threads, w) = hog_scenario();
    let c = card(&threads, &w, 2520 * US, &[], &HogAlive);
    assert_eq!(c.cause, Cause::Waited);
    assert_eq!(
        c.verdict,
        "late: worker 1 waited 1.02 ms on CPU0 behind xrl-hog (pid 4700, SCHED_FIFO 90)"
    );
    let main = c.main_culprit.as_ref().unwrap();
    assert_eq!(
        (main.who.kind, main.who.tid, main.who.pid),
        (CulpritKind::Task, Some(4711), Some(4700))
    );
    assert!((main.us - 1020.0).abs() < 1e-6, "{}", main.us);
    let t = &c.threads[0];
    assert!((t.waited_us - 1020.0).abs() < 1e-6);
    assert!((t.ran_us - 500.0).abs() < 1e-6);
    assert_eq!(t.wait_accounted, 1.0);
    assert_eq!(t.woken_at_us, Some(0.0));
    assert!(!t.busy_at_period_start);
    assert!((c.late_by_us - 187.0).abs() < 1e-6, "{}", c.late_by_us);
    assert!(c.window_complete && c.lost_events == 0);
}

/// `prev_state` of a task switched out while running (`R+`): TASK_REPORT_MAX, which kernels since
/// 4.14 report for a preempted task, not 0.
const PREEMPTED: i64 = 0x100;

#[test]
fn a_worker_preempted_mid_render_waited_behind_the_hog_and_was_not_blocked() {
    // Worker 1 is woken at 1.0 ms and runs; the hog wakes at 1.1 ms and preempts it (its
    // switch-out says R+), spins to 2.1 ms, and the worker finishes at 2.52 ms.
    let mut events = vec![
        switch(
            500 * US,
            0,
            ("worker 1", 100, FIFO70, S),
            ("swapper/0", 0, 120),
        ),
        switch(MS, 0, ("swapper/0", 0, 120, 0), ("worker 1", 100, FIFO70)),
        switch(
            1100 * US,
            0,
            ("worker 1", 100, FIFO70, PREEMPTED),
            ("xrl-hog", 4711, FIFO90),
        ),
        switch(
            2100 * US,
            0,
            ("xrl-hog", 4711, FIFO90, S),
            ("worker 1", 100, FIFO70),
        ),
        switch(
            2520 * US,
            0,
            ("worker 1", 100, FIFO70, S),
            ("swapper/0", 0, 120),
        ),
    ];
    events.extend(wake(MS, 0, "worker 1", 100, 0, 0));
    events.extend(wake(1100 * US, 0, "xrl-hog", 4711, 0, 0));
    let threads = vec![thread("worker 1", 100, MS, 2520 * US, Some(500 * US))];
    let w = window(events, 0);
    let c = card(&threads, &w, 2520 * US, &[], &HogAlive);
    let t = &c.threads[0];
    assert!(
        (t.waited_us - 1000.0).abs() < 1e-6 && t.sleeps.is_empty(),
        "preempted 1.0 ms, not asleep: waited {} µs, sleeps {:?} ({})",
        t.waited_us,
        t.sleeps,
        c.verdict
    );
    assert_eq!(c.cause, Cause::Waited, "{}", c.verdict);
    let main = c
        .main_culprit
        .as_ref()
        .expect("the hog is the main culprit");
    assert_eq!(main.who.tid, Some(4711), "{}", c.verdict);
}

#[test]
fn without_procfs_the_policy_comes_from_the_kernel_priority() {
    let (threads, w) = hog_scenario();
    let c = card(&threads, &w, 2520 * US, &[], &NoLookup);
    assert!(
        c.verdict
            .ends_with("behind xrl-hog (pid 4711, SCHED_FIFO/RR 90)"),
        "{}",
        c.verdict
    );
}

#[test]
fn an_interrupt_storm_is_blamed_by_softirq_type() {
    // The worker runs 1.0..2.6 ms on CPU0; NET_RX softirqs take 0.8 ms and IRQ 11 0.1 ms of it.
    let mut events = vec![
        switch(
            500 * US,
            0,
            ("swapper/0", 0, 120, 0),
            ("worker 1", 100, FIFO70),
        ),
        switch(
            600 * US,
            0,
            ("worker 1", 100, FIFO70, S),
            ("swapper/0", 0, 120),
        ),
        switch(MS, 0, ("swapper/0", 0, 120, 0), ("worker 1", 100, FIFO70)),
        switch(
            2600 * US,
            0,
            ("worker 1", 100, FIFO70, S),
            ("swapper/0", 0, 120),
        ),
    ];
    events.extend(wake(MS - 10 * US, 0, "worker 1", 100, 0, 0));
    for k in 0..4 {
        let s = 1100 * US + k * 300 * US;
        events.extend(softirq(s, s + 200 * US, 0, 3));
    }
    events.extend(irq(2450 * US, 2550 * US, 0, 11, "virtio0-input.0"));
    let threads = [thread("worker 1", 100, MS, 2600 * US, Some(700 * US))];
    let c = card(&threads, &window(events, 0), 2600 * US, &[], &NoLookup);
    assert_eq!(c.cause, Cause::Interrupts, "{}", c.verdict);
    assert_eq!(
        c.verdict,
        "late: worker 1 lost 0.90 ms to interrupts on CPU0 (mostly NET_RX 0.80 ms)"
    );
    let t = &c.threads[0];
    assert!((t.interrupt_us - 900.0).abs() < 1e-6);
    assert!((t.ran_us - 700.0).abs() < 1e-6, "{}", t.ran_us);
    assert_eq!(t.interrupts[0].who.kind, CulpritKind::Softirq);
    assert_eq!(t.interrupts[0].count, 4);
    assert_eq!(t.interrupts[1].who.irq, Some(11));
    assert_eq!(t.interrupts[1].who.name, "virtio0-input.0");
}

#[test]
fn a_render_that_ran_long_is_blamed_on_itself_with_the_engine_note() {
    let mut events = vec![
        switch(
            100 * US,
            1,
            ("driver", 200, FIFO70, S),
            ("swapper/1", 0, 120),
        ),
        switch(MS, 1, ("swapper/1", 0, 120, 0), ("driver", 200, FIFO70)),
        switch(
            3900 * US,
            1,
            ("driver", 200, FIFO70, S),
            ("swapper/1", 0, 120),
        ),
        ev(
            200 * US,
            1,
            EventKind::CpuFrequency {
                khz: 2_400_000,
                cpu_id: 1,
            },
        ),
    ];
    events.extend(wake(MS, 1, "driver", 200, 1, 0));
    let threads = [thread("driver", 200, MS, 3900 * US, Some(600 * US))];
    let notes = ["injected stall".to_owned()];
    let c = card(&threads, &window(events, 0), 3900 * US, &notes, &NoLookup);
    assert_eq!(c.cause, Cause::RanLong);
    assert_eq!(
        c.verdict,
        "late: driver ran 2.90 ms (median 0.60 ms) at 2.40 GHz; injected stall"
    );
    assert_eq!(c.threads[0].cpu_khz, Some(2_400_000));
    assert!(c.main_culprit.is_none());
}

#[test]
fn a_migration_is_listed_and_both_cpus_are_accounted() {
    // Worker preempted on CPU0 by a normal task at 1.2 ms, pulled to CPU1 at 1.5 ms, runs there.
    let mut events = vec![
        switch(MS, 0, ("swapper/0", 0, 120, 0), ("worker 1", 100, FIFO70)),
        switch(
            1200 * US,
            0,
            ("worker 1", 100, FIFO70, 0),
            ("ksoftirqd/0", 15, 120),
        ),
        ev(
            1500 * US,
            1,
            EventKind::Migrate {
                comm: Comm::new(b"worker 1"),
                tid: 100,
                prio: FIFO70,
                orig_cpu: 0,
                dest_cpu: 1,
            },
        ),
        switch(1400 * US, 1, ("swapper/1", 0, 120, 0), ("cc1", 777, 120)),
        switch(
            1600 * US,
            1,
            ("cc1", 777, 120, 0),
            ("worker 1", 100, FIFO70),
        ),
        switch(
            2000 * US,
            1,
            ("worker 1", 100, FIFO70, S),
            ("cc1", 777, 120),
        ),
    ];
    events.extend(wake(990 * US, 0, "worker 1", 100, 0, 0));
    let threads = [thread("worker 1", 100, MS, 2000 * US, None)];
    let c = card(&threads, &window(events, 0), 2000 * US, &[], &NoLookup);
    let t = &c.threads[0];
    assert_eq!(t.cpus, vec![0, 1]);
    assert_eq!(t.migrations.len(), 1);
    assert_eq!((t.migrations[0].from_cpu, t.migrations[0].to_cpu), (0, 1));
    assert!((t.migrations[0].at_us - 500.0).abs() < 1e-6);
    // It waited 1.2..1.5 ms on CPU0 behind ksoftirqd, then 1.5..1.6 ms on CPU1 behind cc1.
    assert!((t.waited_us - 400.0).abs() < 1e-6, "{}", t.waited_us);
    assert_eq!(t.ran_instead[0].who.name, "ksoftirqd/0");
    assert_eq!(t.ran_instead[0].cpu, 0);
    assert!((t.ran_instead[0].us - 300.0).abs() < 1e-6);
    assert_eq!(t.ran_instead[1].who.name, "cc1");
    assert_eq!(t.ran_instead[1].cpu, 1);
    assert!((t.ran_instead[1].us - 100.0).abs() < 1e-6);
    assert_eq!(t.wait_accounted, 1.0);
    assert!((t.ran_us - 600.0).abs() < 1e-6);
}

#[test]
fn sleeps_inside_the_render_separate_blocking_from_waiting_for_workers() {
    // The driver (tid 200) waits on a futex for worker 1 (tid 100), which sleeps in D state
    // (page fault from disk) for 1 ms until kworker 55 wakes it.
    let mut events = vec![
        switch(MS, 0, ("swapper/0", 0, 120, 0), ("driver", 200, FIFO70)),
        switch(MS, 1, ("swapper/1", 0, 120, 0), ("worker 1", 100, FIFO70)),
        switch(
            1100 * US,
            0,
            ("driver", 200, FIFO70, S),
            ("swapper/0", 0, 120),
        ),
        switch(
            1200 * US,
            1,
            ("worker 1", 100, FIFO70, D),
            ("swapper/1", 0, 120),
        ),
        switch(
            2200 * US,
            1,
            ("swapper/1", 0, 120, 0),
            ("worker 1", 100, FIFO70),
        ),
        switch(
            2500 * US,
            1,
            ("worker 1", 100, FIFO70, S),
            ("swapper/1", 0, 120),
        ),
        switch(
            2500 * US,
            0,
            ("swapper/0", 0, 120, 0),
            ("driver", 200, FIFO70),
        ),
        switch(
            2600 * US,
            0,
            ("driver", 200, FIFO70, S),
            ("swapper/0", 0, 120),
        ),
        switch(
            2150 * US,
            1,
            ("swapper/1", 0, 120, 0),
            ("kworker/1:1", 55, 120),
        ),
        switch(
            2190 * US,
            1,
            ("kworker/1:1", 55, 120, S),
            ("swapper/1", 0, 120),
        ),
    ];
    events.extend(wake(2190 * US, 1, "worker 1", 100, 1, 55));
    events.extend(wake(2495 * US, 1, "driver", 200, 0, 100));
    let threads = [
        thread("driver", 200, MS, 2600 * US, None),
        thread("worker 1", 100, MS, 2500 * US, None),
    ];
    let c = card(&threads, &window(events, 0), 2600 * US, &[], &NoLookup);
    assert_eq!(c.cause, Cause::Blocked, "{}", c.verdict);
    assert_eq!(
        c.verdict,
        "late: worker 1 blocked 0.99 ms inside the render (uninterruptible sleep: I/O or page fault)"
    );
    let driver = &c.threads[0];
    assert_eq!(driver.sleeps.len(), 1);
    assert!(driver.sleeps[0].waited_for_audio_thread);
    assert_eq!(driver.sleeps[0].woken_by.as_deref(), Some("worker 1"));
    let worker = &c.threads[1];
    assert_eq!(worker.sleeps[0].state, "D");
    assert_eq!(
        worker.sleeps[0].woken_by.as_deref(),
        Some("kworker/1:1 (55)")
    );
}

#[test]
fn lost_events_make_the_card_say_it_is_incomplete() {
    let (threads, mut w) = hog_scenario();
    w.lost_events = 3;
    let c = card(&threads, &w, 2520 * US, &[], &NoLookup);
    assert_eq!(c.lost_events, 3);
    assert!(
        c.verdict
            .ends_with("[incomplete: the kernel lost 3 events in this window]"),
        "{}",
        c.verdict
    );
    w.lost_events = 0;
    w.complete = false;
    let c = card(&threads, &w, 2520 * US, &[], &NoLookup);
    assert!(
        c.verdict.contains("[incomplete: the trace window"),
        "{}",
        c.verdict
    );
}

#[test]
fn no_events_at_all_gives_an_unexplained_verdict() {
    let threads = [thread("driver", 200, MS, 2600 * US, None)];
    let c = card(&threads, &window(Vec::new(), 0), 2600 * US, &[], &NoLookup);
    assert_eq!(c.cause, Cause::Unexplained);
    assert_eq!(
        c.verdict,
        "late: no kernel cause found (render ended 0.27 ms after the deadline)"
    );
}

#[test]
fn the_culprit_table_sums_over_cards_and_counts_main_culprits() {
    let (threads, w) = hog_scenario();
    let mut table = Culprits::new();
    let c = card(&threads, &w, 2520 * US, &[], &HogAlive);
    table.add(&c);
    table.add(&c);
    assert_eq!(table.cards(), 2);
    let top = table.top(5);
    assert_eq!(top[0].who.name, "xrl-hog");
    assert_eq!(top[0].who.pid, Some(4700));
    assert_eq!(top[0].who.policy, "SCHED_FIFO 90");
    assert_eq!((top[0].dropouts, top[0].main_culprit_of), (2, 2));
    // A later card built after the hog exited knows only the trace's priority: the policy
    // read from procfs stays.
    let gone = card(&threads, &w, 2520 * US, &[], &NoLookup);
    assert_eq!(
        gone.main_culprit.as_ref().unwrap().who.policy,
        "SCHED_FIFO/RR 90"
    );
    table.add(&gone);
    assert_eq!(table.top(1)[0].who.policy, "SCHED_FIFO 90");
    assert!((top[0].stolen_us - 2040.0).abs() < 1e-6);
    assert!((top[0].max_us - 1020.0).abs() < 1e-6);
    let json = serde_json::to_value(&c).unwrap();
    assert_eq!(json["cause"], "waited");
    assert_eq!(json["threads"][0]["ran_instead"][0]["kind"], "task");
}

#[test]
fn a_late_timer_wake_up_of_the_first_thread_is_named() {
    // The driver sleeps until the period start, but the timer interrupt wakes it 1.5 ms late;
    // it then runs its usual 0.6 ms.
    let mut events = vec![
        switch(
            200 * US,
            0,
            ("driver", 200, FIFO70, S),
            ("swapper/0", 0, 120),
        ),
        switch(
            2510 * US,
            0,
            ("swapper/0", 0, 120, 0),
            ("driver", 200, FIFO70),
        ),
        switch(
            3110 * US,
            0,
            ("driver", 200, FIFO70, S),
            ("swapper/0", 0, 120),
        ),
    ];
    events.extend(wake(2500 * US, 0, "driver", 200, 0, 0));
    let threads = [thread("driver", 200, 2510 * US, 3110 * US, Some(600 * US))];
    let c = card(&threads, &window(events, 0), 3110 * US, &[], &NoLookup);
    assert_eq!(c.cause, Cause::WokeLate, "{}", c.verdict);
    assert_eq!(
        c.verdict,
        "late: driver was woken 1.50 ms after the period start (timer or wake-up latency)"
    );
    assert_eq!(c.threads[0].woken_at_us, Some(1500.0));
    assert!((c.threads[0].waited_us - 10.0).abs() < 1e-6);
}

/// A kernel that reports no switch out of the idle task, and perf dropping the timer wake-up
/// made in idle context (both seen on the development VM): the driver's run is still found,
/// from its switch-out and the engine's own wake stamp, and the stall is blamed on its render.
#[test]
fn a_run_whose_switch_in_from_idle_is_missing_is_inferred_from_the_engines_wake_stamp() {
    let driver = 200;
    let events = vec![
        // The previous buffer: the driver sleeps at 0.5 ms; CPU1 goes idle.
        switch(
            500 * US,
            1,
            ("xrl-sim-clock", driver, FIFO70, S),
            ("swapper/1", 0, 120),
        ),
        // A tick on CPU1 while idle, then nothing of the wake-up or the switch-in: the driver
        // is next seen waking a worker at 1.05 ms and switching out at 9.1 ms.
        ev(800 * US, 1, EventKind::HrtimerExit),
        wake(1050 * US, 1, "worker 1", 100, 0, driver).remove(0),
        switch(
            9100 * US,
            1,
            ("xrl-sim-clock", driver, FIFO70, S),
            ("swapper/1", 0, 120),
        ),
    ];
    let threads = vec![thread(
        "driver",
        driver,
        1020 * US,
        9100 * US,
        Some(500 * US),
    )];
    let w = window(events, 0);
    let c = card(
        &threads,
        &w,
        9100 * US,
        &["injected stall (8.00 ms)".to_owned()],
        &NoLookup,
    );
    let t = &c.threads[0];
    assert_eq!(t.unseen_switch_ins, 1, "{t:#?}");
    assert_eq!(t.cpus, [1]);
    // The run starts at the engine's wake stamp (1.02 ms), which lies between the CPU's last
    // reported switch (0.5 ms) and the first sign of the driver running (1.05 ms); the tick
    // at 0.8 ms says nothing about who ran.
    assert!((t.ran_us - 8080.0).abs() < 1e-6, "{}", t.ran_us);
    assert!(t.wake_inferred);
    assert_eq!(t.woken_at_us, Some(20.0));
    assert_eq!(c.cause, Cause::RanLong);
    assert_eq!(
        c.verdict,
        "late: driver ran 8.08 ms (median 0.50 ms); injected stall (8.00 ms)"
    );

    // Without the engine's stamp the run starts at the CPU's last switch (0.5 ms), counted
    // from the period start (1.0 ms).
    let no_stamp = vec![AudioThread {
        wake_ns: None,
        ..threads[0].clone()
    }];
    let c = card(&no_stamp, &w, 9100 * US, &[], &NoLookup);
    assert!(
        (c.threads[0].ran_us - 8100.0).abs() < 1e-6,
        "{:#?}",
        c.threads[0]
    );
    assert_eq!(c.cause, Cause::RanLong);
}

/// The PipeWire client of watch's test, on this VM: woken at 1.02 ms on idle CPU1, its switch-in
/// lost, still running at the end of the account (the deadline; the server could not give its
/// BUSY) and switching out after it. The events after the end say it ran: it is not a wait on an
/// idle CPU. A switch-in after the end, or a CPU switch between the wake-up and the end, says it
/// did wait (for as long as it did).
#[test]
fn a_thread_still_running_at_the_end_whose_switch_in_was_lost_ran_from_its_wake_up() {
    let client = 300;
    let base = |after_end: Vec<TraceEvent>| {
        let mut events = vec![switch(
            500 * US,
            1,
            ("late", client, FIFO70, S),
            ("swapper/1", 0, 120),
        )];
        events.extend(wake(1020 * US, 0, "late", client, 1, 0));
        events.extend(after_end);
        window(events, 0)
    };
    let still_running = vec![AudioThread {
        role: "late".into(),
        tid: client,
        wake_ns: Some(1030 * US),
        end_ns: None,
        median_busy_ns: Some(US),
    }];
    let end = MS + 1333 * US;
    // Its switch-out 2 ms after the end.
    let w = base(vec![switch(
        end + 2 * MS,
        1,
        ("late", client, FIFO70, S),
        ("swapper/1", 0, 120),
    )]);
    let c = card(&still_running, &w, end, &[], &NoLookup);
    let t = &c.threads[0];
    assert_eq!(t.unseen_switch_ins, 1, "{t:#?}");
    assert!(t.waited_us < 1e-6, "{t:#?}");
    assert!(
        (t.ran_us - 1313.0).abs() < 1e-6,
        "ran from its wake-up to the end: {t:#?}"
    );
    assert_eq!(c.cause, Cause::RanLong, "{}", c.verdict);

    // Its switch-in seen after the end: it waited on CPU1 the whole time.
    let w = base(vec![switch(
        end + MS,
        1,
        ("swapper/1", 0, 120, 0),
        ("late", client, FIFO70),
    )]);
    let c = card(&still_running, &w, end, &[], &NoLookup);
    let t = &c.threads[0];
    assert_eq!(t.unseen_switch_ins, 0, "{t:#?}");
    assert!(
        t.ran_us < 1e-6 && (t.waited_us - 1313.0).abs() < 1e-6,
        "{t:#?}"
    );

    // A switch on CPU1 after the end and before its switch-out: the unseen switch-in came after
    // the end, so within the account it waited.
    let w = base(vec![
        switch(
            end + MS,
            1,
            ("kworker/1:1", 55, 120, S),
            ("swapper/1", 0, 120),
        ),
        switch(
            end + 2 * MS,
            1,
            ("late", client, FIFO70, S),
            ("swapper/1", 0, 120),
        ),
    ]);
    let c = card(&still_running, &w, end, &[], &NoLookup);
    let t = &c.threads[0];
    assert_eq!(t.unseen_switch_ins, 0, "{t:#?}");
    assert!(t.ran_us < 1e-6, "{t:#?}");
}

/// Worker 1 sleeps on CPU0 from 0.5 ms while `held` (comm, tid, kernel priority) has the CPU; it
/// is woken at 1.0 ms, runs only when `held` is switched out at 2.0 ms (in state `held_state`),
/// and ends at 2.4 ms.
fn woken_at_1ms_run_at_2ms(
    held: (&str, i32, i32),
    held_state: i64,
    cpu: xrunlab_trace::CpuContext,
) -> (Vec<AudioThread>, Window) {
    let (comm, tid, prio) = held;
    let mut events = vec![
        switch(500 * US, 0, ("worker 1", 100, FIFO70, S), (comm, tid, prio)),
        switch(
            2000 * US,
            0,
            (comm, tid, prio, held_state),
            ("worker 1", 100, FIFO70),
        ),
        switch(
            2400 * US,
            0,
            ("worker 1", 100, FIFO70, S),
            ("swapper/0", 0, 120),
        ),
    ];
    events.extend(wake(MS, 0, "worker 1", 100, 0, 0));
    let threads = vec![thread(
        "worker 1",
        100,
        2000 * US,
        2400 * US,
        Some(400 * US),
    )];
    let mut w = window(events, 0);
    w.cpu = cpu;
    (threads, w)
}

/// Worker 1 is woken at 1.0 ms on CPU0, which stays idle until the worker runs at 2.0 ms: a wait
/// that nobody took, only an idle CPU that did not schedule it.
fn idle_scenario(cpu: xrunlab_trace::CpuContext) -> (Vec<AudioThread>, Window) {
    woken_at_1ms_run_at_2ms(("swapper/0", 0, 120), 0, cpu)
}

fn context(steal_ms: u64, entered: &[(&str, u32)]) -> xrunlab_trace::CpuContext {
    let mut c = xrunlab_trace::CpuContext {
        span_ms: 200.0,
        ..Default::default()
    };
    c.steal_ns.insert(0, steal_ms * MS);
    c.idle_entered.insert(
        0,
        entered
            .iter()
            .map(|(name, lat)| xrunlab_trace::IdleEntry {
                name: (*name).into(),
                exit_latency_us: *lat,
                entries: 3,
            })
            .collect(),
    );
    c
}

#[test]
fn an_idle_cpu_is_never_a_culprit_and_hypervisor_steal_explains_the_wait() {
    let (threads, w) = idle_scenario(context(10, &[("POLL", 0)]));
    let c = card(&threads, &w, 2400 * US, &[], &NoLookup);
    let t = &c.threads[0];
    assert!(
        t.ran_instead.is_empty(),
        "idle is not a culprit: {:?}",
        t.ran_instead
    );
    assert!(c.main_culprit.is_none());
    assert!((t.idle_wait_us - 1000.0).abs() < 1e-6, "{}", t.idle_wait_us);
    assert_eq!(
        t.idle_cause,
        Some(IdleCause::Steal {
            cpu: 0,
            steal_us: 10_000.0,
            span_ms: 200.0
        })
    );
    assert_eq!(t.wait_accounted, 1.0, "steal explains the wait");
    assert!(
        c.verdict
            .contains("the vCPU was not running (10.00 ms of hypervisor steal"),
        "{}",
        c.verdict
    );
}

#[test]
fn without_steal_the_deepest_idle_state_entered_explains_the_wait() {
    let (threads, w) = idle_scenario(context(0, &[("POLL", 0), ("C1", 2), ("C6", 200)]));
    let c = card(&threads, &w, 2400 * US, &[], &NoLookup);
    assert_eq!(
        c.threads[0].idle_cause,
        Some(IdleCause::IdleExit {
            cpu: 0,
            state: "C6".into(),
            exit_latency_us: 200
        })
    );
    assert!(
        c.verdict.contains("waking from C6 (200 µs exit latency)"),
        "{}",
        c.verdict
    );
}

#[test]
fn an_idle_wait_nothing_explains_says_so_with_low_confidence() {
    let (threads, w) = idle_scenario(xrunlab_trace::CpuContext::default());
    let c = card(&threads, &w, 2400 * US, &[], &NoLookup);
    assert_eq!(
        c.threads[0].idle_cause,
        Some(IdleCause::Unexplained { cpu: 0 })
    );
    assert!(
        c.threads[0].wait_accounted < 0.01,
        "an unexplained wait is not accounted"
    );
    assert!(
        c.verdict.contains(
            "unexplained: the CPU was idle while the thread was runnable (low confidence"
        ),
        "{}",
        c.verdict
    );
}

/// A hog that renamed itself (python3 → notahog) between two cards, and three short-lived
/// children of one shell that inherited SCHED_FIFO 85.
struct Family;
impl TaskLookup for Family {
    fn lookup(&self, tid: i32) -> Option<TaskIdentity> {
        let shell = Some((300, "notahog".to_owned(), "SCHED_FIFO 85".to_owned()));
        match tid {
            4711 => Some(TaskIdentity {
                pid: 4711,
                comm: "notahog".into(),
                policy: "SCHED_FIFO 85".into(),
                parent: None,
            }),
            // Set their own policy under a SCHED_OTHER shell (`chrt` in a loop): not inherited.
            601..=602 => Some(TaskIdentity {
                pid: tid,
                comm: "python3".into(),
                policy: "SCHED_FIFO 95".into(),
                parent: Some((400, "bash".into(), "SCHED_OTHER nice 0".into())),
            }),
            501..=503 => Some(TaskIdentity {
                pid: tid,
                comm: "sleep".into(),
                policy: "SCHED_FIFO 85".into(),
                parent: shell,
            }),
            _ => None,
        }
    }
}

/// The worker waits 1 ms on CPU0 behind `tid` running under the name `comm`.
fn preempted_by(tid: i32, comm: &str) -> (Vec<AudioThread>, Window) {
    let mut events = vec![
        switch(
            500 * US,
            0,
            ("worker 1", 100, FIFO70, S),
            ("swapper/0", 0, 120),
        ),
        switch(900 * US, 0, ("swapper/0", 0, 120, 0), (comm, tid, 14)),
        switch(2000 * US, 0, (comm, tid, 14, S), ("worker 1", 100, FIFO70)),
        switch(
            2400 * US,
            0,
            ("worker 1", 100, FIFO70, S),
            ("swapper/0", 0, 120),
        ),
    ];
    events.extend(wake(MS, 0, "worker 1", 100, 0, 0));
    (
        vec![thread(
            "worker 1",
            100,
            2000 * US,
            2400 * US,
            Some(400 * US),
        )],
        window(events, 0),
    )
}

#[test]
fn a_renamed_hog_is_one_culprit_and_inherited_children_are_one_row_under_their_parent() {
    let mut table = Culprits::new();
    for (tid, comm) in [
        (4711, "python3"),
        (4711, "notahog"),
        (501, "sleep"),
        (502, "sleep"),
        (503, "sleep"),
    ] {
        let (threads, w) = preempted_by(tid, comm);
        let c = card(&threads, &w, 2400 * US, &[], &Family);
        if comm == "python3" {
            // The card itself already names the task by its newest name and keeps the old one.
            let who = &c.main_culprit.as_ref().unwrap().who;
            assert_eq!(
                (who.name.as_str(), who.earlier_names.clone()),
                ("notahog", vec!["python3".to_owned()])
            );
            assert!(
                c.verdict
                    .contains("behind notahog (was python3) (pid 4711, SCHED_FIFO 85)"),
                "{}",
                c.verdict
            );
        }
        table.add(&c);
    }
    let top = table.top(10);
    assert_eq!(
        top.len(),
        2,
        "one row for the hog, one for the children: {top:#?}"
    );
    let hog = top
        .iter()
        .find(|t| t.who.tid == Some(4711))
        .expect("the hog's row");
    assert_eq!(hog.who.name, "notahog");
    assert_eq!(hog.who.earlier_names, ["python3"]);
    assert_eq!(hog.dropouts, 2);
    let kids = top
        .iter()
        .find(|t| t.processes > 1)
        .expect("the children's row");
    assert_eq!(kids.who.name, "children of notahog");
    assert_eq!(
        (kids.processes, kids.who.pid, kids.dropouts),
        (3, Some(300), 3)
    );
    assert!(
        (kids.stolen_us - 3.0 * 1000.0).abs() < 1.0,
        "{}",
        kids.stolen_us
    );
    assert_eq!(
        kids.who.policy, "SCHED_FIFO 85",
        "one label for the policy everywhere"
    );
}

#[test]
fn a_thread_still_busy_with_an_earlier_buffer_at_the_period_start_started_late() {
    // The driver has been running since 0.2 ms (an earlier buffer) when the period starts at
    // 1 ms; it begins this buffer's work only at 2.3 ms and does its usual 0.6 ms.
    let events = vec![
        switch(
            200 * US,
            0,
            ("swapper/0", 0, 120, 0),
            ("driver", 200, FIFO70),
        ),
        switch(
            2900 * US,
            0,
            ("driver", 200, FIFO70, S),
            ("swapper/0", 0, 120),
        ),
    ];
    let threads = [thread("driver", 200, 2300 * US, 2900 * US, Some(600 * US))];
    let c = card(&threads, &window(events, 0), 2900 * US, &[], &NoLookup);
    assert_eq!(c.cause, Cause::StartedLate, "{}", c.verdict);
    assert_eq!(
        c.verdict,
        "late: driver started 1.30 ms after the period start, still busy with an earlier buffer"
    );
    assert!(c.threads[0].busy_at_period_start, "{:?}", c.threads[0]);
}

/// Worker 1 (SCHED_FIFO 70) is woken at 1.0 ms on CPU0, where kdamond.0 (SCHED_OTHER, kernel
/// priority 120) runs on until 2.0 ms: a preemptible kernel would have switched at once.
fn not_preempted_scenario(cpu: xrunlab_trace::CpuContext) -> (Vec<AudioThread>, Window) {
    woken_at_1ms_run_at_2ms(("kdamond.0", 76, 120), PREEMPTED, cpu)
}

#[test]
fn a_lower_priority_task_the_kernel_did_not_preempt_is_named_as_such() {
    let (threads, w) = not_preempted_scenario(xrunlab_trace::CpuContext::default());
    let c = card(&threads, &w, 2400 * US, &[], &NoLookup);
    assert_eq!(c.cause, Cause::Waited);
    assert_eq!(
        c.verdict,
        "late: worker 1 waited 1.00 ms on CPU0 behind kdamond.0 (pid 76, normal nice 0), which \
         the kernel did not preempt though its priority is lower"
    );
    let t = &c.threads[0];
    assert!((t.waited_us - 1000.0).abs() < 1e-6, "{}", t.waited_us);
    assert!(
        (t.not_preempted_us - 1000.0).abs() < 1e-6,
        "{}",
        t.not_preempted_us
    );
    // A hog of a higher priority preempted the worker as the kernel should: no such note.
    let (threads, w) = hog_scenario();
    let c = card(&threads, &w, 2520 * US, &[], &HogAlive);
    assert_eq!(c.threads[0].not_preempted_us, 0.0);
    assert!(!c.verdict.contains("preempt"), "{}", c.verdict);
}

#[test]
fn steal_on_the_cpu_of_a_wait_behind_a_task_is_said_beside_the_task() {
    let (threads, w) = not_preempted_scenario(context(10, &[]));
    let c = card(&threads, &w, 2400 * US, &[], &NoLookup);
    assert!(
        c.verdict.ends_with(
            "(CPU0 had 10.00 ms of hypervisor steal in the 200 ms around it: the vCPU may not \
             have been running)"
        ),
        "{}",
        c.verdict
    );
    assert!(c.verdict.contains("behind kdamond.0"), "{}", c.verdict);
}
