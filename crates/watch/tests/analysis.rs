//! watch's analysis on synthetic cycles, fixture /proc trees and fixture kernel event streams:
//! each xrun rule, each card case, the thread mapping's confidence, and bounded state. Runs on
//! the test harness threads; no server or kernel access.

use xrunlab_testkit::FixtureTree;
use xrunlab_trace::{Comm, EventKind, TaskIdentity, TaskLookup, TraceEvent, Window};
use xrunlab_watch::{
    card, confirm, map_node, words, Card, Confidence, Cycle, Detector, Evidence, Faults, Kernel,
    KernelAccount, KernelCulprit, Kind, NoThreads, NodeInfo, NodeStatus, NodeTiming,
};

const US: u64 = 1_000;
const PERIOD: u64 = 5_333_333; // 256 frames at 48 kHz

fn node(id: u32, signal: u64, wait: u64, busy: Option<u64>, status: NodeStatus) -> NodeTiming {
    let awake = if wait == u64::MAX { 0 } else { signal + wait };
    NodeTiming {
        id,
        name: format!("node{id}"),
        signal_ns: signal,
        awake_ns: awake,
        // A node still running carries an earlier finish, as PipeWire reports it.
        finish_ns: busy.map_or(signal.saturating_sub(PERIOD), |b| awake + b),
        status,
        xruns: None,
    }
}

fn cycle(seq: u64, followers: Vec<NodeTiming>, driver_xruns: Option<u32>) -> Cycle {
    let start = 1_000_000_000 + seq * PERIOD;
    Cycle {
        seq,
        rate: 48_000,
        quantum: 256,
        driver: NodeTiming {
            id: 1,
            name: "Dummy-Driver".into(),
            signal_ns: start,
            awake_ns: start + 50 * US,
            finish_ns: start + 60 * US,
            status: NodeStatus::Finished,
            xruns: driver_xruns,
        },
        followers,
        driver_xruns,
        // The driver's timer was set for 10 µs before it signalled: an ordinary wake-up.
        expected_start_ns: Some(start - 10 * US),
    }
}

fn start(seq: u64) -> u64 {
    1_000_000_000 + seq * PERIOD
}

fn normal(seq: u64) -> Cycle {
    cycle(
        seq,
        vec![node(
            7,
            start(seq) + US,
            20 * US,
            Some(100 * US),
            NodeStatus::Finished,
        )],
        Some(0),
    )
}

#[test]
fn normal_cycles_are_no_xrun_and_build_the_medians() {
    let mut d = Detector::new();
    for seq in 0..100 {
        assert!(d.cycle(&normal(seq)).is_empty());
    }
    let s = &d.nodes()[&7];
    assert_eq!((s.cycles, s.err_cycles, s.xruns), (100, 0, 0));
    assert_eq!(s.median_busy_ns(), Some(100 * US));
    assert_eq!(s.median_wait_ns(), Some(20 * US));
}

#[test]
fn observed_cycles_build_the_figures_but_never_report_or_count_an_xrun() {
    let mut d = Detector::new();
    for seq in 0..50 {
        d.observe(&normal(seq));
    }
    // A late cycle seen only to keep the figures: JACK2's callback reports its xrun instead.
    d.observe(&cycle(
        50,
        vec![node(7, start(50) + US, 20 * US, None, NodeStatus::Awake)],
        Some(0),
    ));
    let s = &d.nodes()[&7];
    assert_eq!((s.cycles, s.err_cycles, s.xruns), (50, 0, 0));
    assert_eq!(s.median_busy_ns(), Some(100 * US));
    assert_eq!(s.last_busy_ns, Some(100 * US), "the live view's last BUSY");
    assert_eq!(d.totals(), (51, 0, 0), "cycles counted, no xrun");
}

#[test]
fn a_follower_still_awake_at_the_next_cycle_is_one_xrun_however_many_cycles_it_spans() {
    let mut d = Detector::new();
    for seq in 0..10 {
        d.cycle(&normal(seq));
    }
    // 0.3.65's records of an 8 ms overrun: awake in two records in a row, then finished again.
    let late = |seq| {
        cycle(
            seq,
            vec![node(7, start(seq) + US, 20 * US, None, NodeStatus::Awake)],
            Some(0),
        )
    };
    let first = d.cycle(&late(10));
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].evidence, Evidence::StillRunning);
    assert_eq!(first[0].node.as_ref().map(|n| n.id), Some(7));
    // The graph's deadline: the next cycle's start, not the node's own signal plus a period.
    assert_eq!(first[0].deadline_ns, start(10) + PERIOD);
    assert!(
        d.cycle(&late(11)).is_empty(),
        "the same overrun, one cycle later"
    );
    assert!(d.cycle(&normal(12)).is_empty());
    assert_eq!(
        d.cycle(&late(13)).len(),
        1,
        "a new overrun after a finished cycle"
    );
    let s = &d.nodes()[&7];
    assert_eq!(
        (s.err_cycles, s.xruns),
        (3, 2),
        "ERR counts cycles, xruns count overruns"
    );
}

#[test]
fn a_rising_node_count_or_a_finish_after_the_next_signal_is_an_xrun() {
    let mut d = Detector::new();
    let counted = |seq, n| {
        let mut t = node(
            7,
            start(seq) + US,
            20 * US,
            Some(100 * US),
            NodeStatus::Finished,
        );
        t.xruns = Some(n);
        cycle(seq, vec![t], None)
    };
    assert!(
        d.cycle(&counted(0, 4)).is_empty(),
        "a count seen first is the baseline"
    );
    let x = d.cycle(&counted(1, 5));
    assert_eq!(x.len(), 1);
    assert_eq!(x[0].evidence, Evidence::NodeCount);

    let mut d = Detector::new();
    let long = cycle(
        0,
        vec![node(
            7,
            start(0) + US,
            20 * US,
            Some(PERIOD),
            NodeStatus::Finished,
        )],
        None,
    );
    let x = d.cycle(&long);
    assert_eq!(x.len(), 1);
    assert_eq!(x[0].evidence, Evidence::FinishedLate);
}

#[test]
fn a_driver_count_rise_with_every_node_in_time_is_driver_side() {
    let mut d = Detector::new();
    d.cycle(&normal(0));
    let mut c = normal(1);
    c.driver_xruns = Some(1);
    let x = d.cycle(&c);
    assert_eq!(x.len(), 1);
    assert_eq!(x[0].evidence, Evidence::DriverCount);
    assert!(x[0].node.is_none());
    let card = card(&x[0], None, None, Kernel::Missing("not asked"), &NoThreads);
    assert_eq!(card.kind, Kind::Unexplained);
    assert!(
        words::verdict(&card).contains("the device or its driver was late"),
        "{}",
        words::verdict(&card)
    );
}

fn first_xrun(late: NodeTiming) -> xrunlab_watch::Xrun {
    let mut d = Detector::new();
    d.node(NodeInfo {
        id: 7,
        name: "node7".into(),
        app_name: Some("synth".into()),
        pid: Some(4242),
    });
    for seq in 0..20 {
        d.cycle(&normal(seq));
    }
    let mut x = d.cycle(&cycle(20, vec![late], Some(0)));
    assert_eq!(x.len(), 1);
    x.remove(0)
}

#[test]
fn a_node_that_started_in_time_and_overran_ran_long_and_without_kernel_events_says_why() {
    let x = first_xrun(node(7, start(20) + US, 20 * US, None, NodeStatus::Awake));
    let c = card(
        &x,
        Some("synth".into()),
        None,
        Kernel::Missing("tracing needs root or CAP_PERFMON"),
        &NoThreads,
    );
    assert_eq!(c.kind, Kind::NodeRanLong);
    assert!(c.busy_at_least, "still running: BUSY is a lower bound");
    assert_eq!(c.wait_us, Some(20.0));
    let text = words::verdict(&c);
    assert!(
        text.contains("\"node7\" ran long: BUSY at least 5.31 ms, median 0.10 ms"),
        "{text}"
    );
    assert!(
        text.contains("no kernel events: tracing needs root or CAP_PERFMON"),
        "{text}"
    );
}

#[test]
fn a_ran_long_card_says_its_threads_page_faults_and_migrations() {
    let x = first_xrun(node(7, start(20) + US, 20 * US, None, NodeStatus::Awake));
    let mut c = card(
        &x,
        None,
        None,
        Kernel::Missing("not recorded (--no-kernel)"),
        &NoThreads,
    );
    assert!(
        !words::verdict(&c).contains("page faults"),
        "no counters, no words"
    );
    c.faults = Some(Faults {
        minor: 12,
        major: 1,
        span_ms: 300.0,
    });
    let text = words::verdict(&c);
    assert!(
        text.contains(
            "page faults 1 major, 12 minor (its thread's counters over the 300.00 ms around it)"
        ),
        "{text}"
    );
    let back: Card = serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
    assert_eq!(back.faults, c.faults, "the record carries them");
}

#[test]
fn an_account_that_says_a_busy_thread_never_ran_on_an_idle_cpu_is_left_out_as_a_lost_switch_in() {
    let account = |ran_us: f64, waited_us: f64, culprit: Option<&str>| KernelAccount {
        verdict: String::new(),
        main_culprit: culprit.map(|kind| KernelCulprit {
            kind: kind.to_owned(),
            name: "x".into(),
            pid: None,
            policy: String::new(),
            cpu: 1,
            us: waited_us,
        }),
        waited_us,
        ran_us,
        blocked_us: 0.0,
        interrupt_us: 0.0,
        migrations: 0,
        lost_events: 0,
        window_complete: true,
        culprits: vec![],
    };
    let busy = Some(8_100_000);
    // JACK2's wake chain says it ran 8.1 ms; the trace lost its switch-in from idle.
    assert!(card::contradicts(busy, &account(0.0, 8100.0, Some("idle"))));
    assert!(card::contradicts(busy, &account(0.0, 8100.0, None)));
    // Held off by a task or an interrupt: a real account.
    assert!(!card::contradicts(
        busy,
        &account(0.0, 8100.0, Some("task"))
    ));
    assert!(!card::contradicts(
        busy,
        &account(50.0, 8050.0, Some("irq"))
    ));
    // It ran: a real account.
    assert!(!card::contradicts(busy, &account(8000.0, 30.0, None)));
    // No BUSY from the server, or a short one: nothing to contradict.
    assert!(!card::contradicts(
        None,
        &account(0.0, 8100.0, Some("idle"))
    ));
    assert!(!card::contradicts(
        Some(500_000),
        &account(0.0, 500.0, Some("idle"))
    ));
}

#[test]
fn a_node_that_never_started_is_never_woke() {
    let x = first_xrun(node(
        7,
        start(20) + US,
        u64::MAX,
        None,
        NodeStatus::Triggered,
    ));
    assert_eq!(
        card(&x, None, None, Kernel::Missing("-"), &NoThreads).kind,
        Kind::NodeWokeLate
    );
}

/// A process tree with one SCHED_FIFO 88 thread (tid 4243) in pid 4242, and a hog (pid 999).
fn procs() -> FixtureTree {
    let t = FixtureTree::new("watch-procs");
    let stat = |tid: i32, comm: &str, prio: u32, policy: u32| {
        // pid (comm) state, then fields 4..=52 with rt_priority (40) and policy (41) set.
        let mut f: Vec<String> = (4..=52).map(|_| "0".to_string()).collect();
        f[40 - 4] = prio.to_string();
        f[41 - 4] = policy.to_string();
        format!("{tid} ({comm}) S {}\n", f.join(" "))
    };
    t.write("4242/task/4242/stat", &stat(4242, "synth", 0, 0));
    t.write("4242/task/4242/comm", "synth\n");
    t.write("4242/task/4243/stat", &stat(4243, "data-loop.0", 83, 1));
    t.write("4242/task/4243/comm", "data-loop.0\n");
    t.write("5000/task/5000/stat", &stat(5000, "idle-app", 0, 0));
    t.write("6000/task/6001/stat", &stat(6001, "a", 80, 1));
    t.write("6000/task/6001/comm", "a\n");
    t.write("6000/task/6002/stat", &stat(6002, "b", 80, 2));
    t.write("6000/task/6002/comm", "b\n");
    t
}

#[test]
fn the_mapping_says_how_sure_it_is() {
    let t = procs();
    let one = map_node(t.path(), Some(4242));
    assert_eq!(one.confidence, Confidence::Medium);
    assert_eq!(
        one.thread.as_ref().map(|t| (t.tid, t.policy.as_str())),
        Some((4243, "SCHED_FIFO 83"))
    );
    assert_eq!(
        map_node(t.path(), Some(5000)).confidence,
        Confidence::Low,
        "no RT thread"
    );
    assert_eq!(
        map_node(t.path(), None).confidence,
        Confidence::Low,
        "no pid"
    );
    let two = map_node(t.path(), Some(6000));
    assert_eq!(two.confidence, Confidence::Low);
    assert!(two.reason.contains("one of 2"), "{}", two.reason);

    // The kernel shows tid 6002 switching in at the node's wake-ups: that settles it.
    let awake: Vec<u64> = (0..5).map(|i| start(i) + 30 * US).collect();
    let events: Vec<TraceEvent> = awake
        .iter()
        .map(|&a| switch(a + 5 * US, 1, ("swapper/1", 0, 120, 0), ("b", 6002, 19)))
        .collect();
    let mut m = two.clone();
    confirm(&mut m, t.path(), &events, &awake);
    assert_eq!(m.confidence, Confidence::High);
    assert_eq!(m.thread.map(|t| t.tid), Some(6002));
    let mut unconfirmed = two;
    confirm(&mut unconfirmed, t.path(), &events[..2], &awake);
    assert_eq!(
        unconfirmed.confidence,
        Confidence::Low,
        "2 of 5 cycles do not confirm"
    );
}

fn switch(ts: u64, cpu: u16, prev: (&str, i32, i32, i64), next: (&str, i32, i32)) -> TraceEvent {
    TraceEvent {
        ts_ns: ts,
        cpu,
        kind: EventKind::Switch {
            prev_comm: Comm::new(prev.0.as_bytes()),
            prev_tid: prev.1,
            prev_prio: prev.2,
            prev_state: prev.3,
            next_comm: Comm::new(next.0.as_bytes()),
            next_tid: next.1,
            next_prio: next.2,
        },
    }
}

struct Hogs;

impl TaskLookup for Hogs {
    fn lookup(&self, tid: i32) -> Option<TaskIdentity> {
        (tid == 999).then(|| TaskIdentity {
            pid: 999,
            comm: "hog".into(),
            policy: "SCHED_FIFO 90".into(),
            parent: None,
        })
    }
}

/// The card of node7's xrun `x` (its thread, tid 4243, found from the fixture /proc) over a
/// window from 20 ms before `signal` to 10 ms after it holding `events`, with the hog known.
fn node7_card(x: &xrunlab_watch::Xrun, signal: u64, events: Vec<TraceEvent>) -> Card {
    let window = Window {
        t0_ns: signal - 20_000_000,
        t1_ns: signal + 10_000_000,
        events,
        lost_events: 0,
        complete: true,
        ..Default::default()
    };
    let t = procs();
    let mapping = map_node(t.path(), Some(4242));
    card(
        x,
        None,
        Some(mapping),
        Kernel::Window(&window, &Hogs),
        &NoThreads,
    )
}

#[test]
fn a_node_held_off_its_cpu_by_a_fifo_hog_woke_late_and_the_card_names_the_hog() {
    let signal = start(20) + US;
    // The node's thread is woken at its signal but a SCHED_FIFO 90 hog holds CPU 1 for 4 ms.
    let late = node(7, signal, 4_000 * US, Some(100 * US), NodeStatus::Finished);
    let x = first_xrun(NodeTiming {
        finish_ns: signal + 4_000 * US + 2_000 * US,
        ..late
    });
    let mut events = vec![
        switch(
            signal - 500 * US,
            1,
            ("swapper/1", 0, 120, 0),
            ("hog", 999, 9),
        ),
        TraceEvent {
            ts_ns: signal,
            cpu: 0,
            kind: EventKind::Wakeup {
                comm: Comm::new(b"data-loop.0"),
                tid: 4243,
                prio: 16,
                target_cpu: 1,
                waking: true,
                waker_tid: 1,
                in_interrupt: false,
            },
        },
        switch(
            signal + 4_000 * US,
            1,
            ("hog", 999, 9, 0),
            ("data-loop.0", 4243, 16),
        ),
        switch(
            signal + 6_000 * US,
            1,
            ("data-loop.0", 4243, 16, 1),
            ("swapper/1", 0, 120),
        ),
    ];
    events.sort_by_key(|e| e.ts_ns);
    let c = node7_card(&x, signal, events);
    assert_eq!(c.kind, Kind::NodeWokeLate, "{c:?}");
    let k = c.kernel.as_ref().expect("kernel account");
    let culprit = k.main_culprit.as_ref().expect("a culprit");
    assert_eq!(
        (culprit.name.as_str(), culprit.pid, culprit.policy.as_str()),
        ("hog", Some(999), "SCHED_FIFO 90")
    );
    assert!(culprit.us > 3_000.0, "{culprit:?}");
    let text = words::verdict(&c);
    assert!(
        text.contains("woke late") && text.contains("behind hog (pid 999, SCHED_FIFO 90) on CPU1"),
        "{text}"
    );
    // The record type goes to --json-lines and comes back.
    let line = serde_json::to_string(&c).expect("serializes");
    let back: xrunlab_watch::Card = serde_json::from_str(&line).expect("reads back");
    assert_eq!(back, c);
}

#[test]
fn state_stays_bounded_over_many_cycles() {
    let mut d = Detector::new();
    for seq in 0..200_000 {
        let mut c = normal(seq);
        if seq % 1000 == 999 {
            c.followers[0].status = NodeStatus::Awake;
            c.followers[0].finish_ns = 0;
        }
        d.cycle(&c);
    }
    assert_eq!(
        d.nodes().len(),
        2,
        "one entry per node (the follower and the driver), not per cycle"
    );
    let (cycles, xruns, _) = d.totals();
    assert_eq!((cycles, xruns), (200_000, 200));
}

#[test]
fn jack_client_timing_comes_from_the_wake_chain_and_shows_the_overrun() {
    use xrunlab_watch::jack_chain::{derive_cycles, ChainThreads, Period};
    let (server, client) = (17920, 17927);
    let wake = |ts: u64| TraceEvent {
        ts_ns: ts,
        cpu: 1,
        kind: EventKind::Wakeup {
            comm: Comm::new(b"late"),
            tid: client,
            prio: 24,
            target_cpu: 0,
            waking: true,
            waker_tid: server,
            in_interrupt: false,
        },
    };
    let mut events = Vec::new();
    for i in 0..8u64 {
        let s = start(i);
        // The client is busy through cycle 3's start, so the server does not wake it then.
        if i == 3 {
            continue;
        }
        let run = if i == 2 { 7_000 * US } else { 20 * US };
        events.push(wake(s));
        events.push(switch(
            s + 15 * US,
            0,
            ("swapper/0", 0, 120, 0),
            ("late", client, 24),
        ));
        events.push(switch(
            s + 15 * US + run,
            0,
            ("late", client, 24, 1),
            ("swapper/0", 0, 120),
        ));
    }
    events.sort_by_key(|e| e.ts_ns);
    let threads = ChainThreads {
        server_tid: server,
        clients: vec![(1, "late".into(), client)],
    };
    let cycles = derive_cycles(
        &events,
        &threads,
        Period {
            frames: 256,
            rate: 48_000,
        },
    );
    assert_eq!(
        cycles.len(),
        6,
        "8 starts seen as 7 (none at 3), the last left open"
    );
    let c0 = &cycles[0].followers[0];
    assert_eq!(
        (c0.signal_ns, c0.awake_ns, c0.finish_ns),
        (start(0), start(0) + 15 * US, start(0) + 35 * US)
    );
    assert_eq!(c0.status, NodeStatus::Finished);
    let mut d = Detector::new();
    let xruns: Vec<_> = cycles.iter().flat_map(|c| d.cycle(c)).collect();
    assert_eq!(xruns.len(), 1, "{xruns:?}");
    assert_eq!(xruns[0].evidence, Evidence::FinishedLate);
    assert_eq!(xruns[0].node.as_ref().map(|n| n.signal_ns), Some(start(2)));
    assert_eq!(
        card(&xruns[0], None, None, Kernel::Missing("-"), &NoThreads).kind,
        Kind::NodeRanLong
    );
}

#[test]
fn a_jack_client_preempted_mid_callback_finishes_when_it_sleeps_not_when_preempted() {
    use xrunlab_watch::jack_chain::{derive_cycles, ChainThreads, Period};
    let (server, client, hog) = (17920, 17927, 999);
    let wake = |ts: u64| TraceEvent {
        ts_ns: ts,
        cpu: 1,
        kind: EventKind::Wakeup {
            comm: Comm::new(b"late"),
            tid: client,
            prio: 24,
            target_cpu: 0,
            waking: true,
            waker_tid: server,
            in_interrupt: false,
        },
    };
    // `R+`: kernels since 4.14 report a preempted task's prev_state as TASK_REPORT_MAX.
    const PREEMPTED: i64 = 0x100;
    let mut events = Vec::new();
    for i in 0..4u64 {
        let s = start(i);
        events.push(wake(s));
        events.push(switch(
            s + 15 * US,
            0,
            ("swapper/0", 0, 120, 0),
            ("late", client, 24),
        ));
        if i == 1 {
            // A hog preempts the callback for 2 ms; it then runs 10 µs more and sleeps.
            events.push(switch(
                s + 25 * US,
                0,
                ("late", client, 24, PREEMPTED),
                ("hog", hog, 9),
            ));
            events.push(switch(
                s + 2_025 * US,
                0,
                ("hog", hog, 9, 1),
                ("late", client, 24),
            ));
            events.push(switch(
                s + 2_035 * US,
                0,
                ("late", client, 24, 1),
                ("swapper/0", 0, 120),
            ));
        } else {
            events.push(switch(
                s + 35 * US,
                0,
                ("late", client, 24, 1),
                ("swapper/0", 0, 120),
            ));
        }
    }
    events.sort_by_key(|e| e.ts_ns);
    let threads = ChainThreads {
        server_tid: server,
        clients: vec![(1, "late".into(), client)],
    };
    let cycles = derive_cycles(
        &events,
        &threads,
        Period {
            frames: 256,
            rate: 48_000,
        },
    );
    let c1 = &cycles[1].followers[0];
    assert_eq!(
        (c1.awake_ns, c1.finish_ns, c1.status),
        (
            start(1) + 15 * US,
            start(1) + 2_035 * US,
            NodeStatus::Finished
        ),
        "the callback ended at its sleep, after the 2 ms preemption"
    );
}

#[test]
fn the_callback_thread_is_the_one_the_server_wakes() {
    use xrunlab_watch::jack_chain::pick_threads;
    let wake = |ts: u64, tid: i32, waker: i32| TraceEvent {
        ts_ns: ts,
        cpu: 0,
        kind: EventKind::Wakeup {
            comm: Comm::new(b"x"),
            tid,
            prio: 24,
            target_cpu: 0,
            waking: true,
            waker_tid: waker,
            in_interrupt: false,
        },
    };
    // Process 1 has a worker (11, woken by its own callback thread) and the callback thread (12).
    let events: Vec<TraceEvent> = (0..5)
        .flat_map(|i| [wake(start(i), 12, 100), wake(start(i) + US, 11, 12)])
        .collect();
    let (threads, counts) = pick_threads(&events, 100, &[(1, "engine".into(), vec![11, 12])]);
    assert_eq!(threads.clients, vec![(1, "engine".to_owned(), 12)]);
    assert_eq!(counts, vec![(1, 5)]);
}

#[test]
fn a_card_whose_kernel_window_was_incomplete_or_lost_events_says_its_causes_may_be_missing() {
    let x = first_xrun(node(7, start(20) + US, 20 * US, None, NodeStatus::Awake));
    let mut c = card(&x, None, None, Kernel::Missing("not recorded"), &NoThreads);
    let account = |lost_events: u64, window_complete: bool| KernelAccount {
        verdict: String::new(),
        main_culprit: None,
        waited_us: 0.0,
        ran_us: 4000.0,
        blocked_us: 0.0,
        interrupt_us: 0.0,
        migrations: 0,
        lost_events,
        window_complete,
        culprits: vec![],
    };
    c.kernel = Some(account(0, true));
    let whole = words::verdict(&c);
    assert!(!whole.contains("incomplete"), "{whole}");
    c.kernel = Some(account(0, false));
    let cut = words::verdict(&c);
    assert!(
        cut.ends_with(
            " [kernel events incomplete: the window did not reach over the whole cycle; causes \
             may be missing]"
        ),
        "{cut}"
    );
    c.kernel = Some(account(12, true));
    let lost = words::verdict(&c);
    assert!(
        lost.ends_with(" [kernel events incomplete: 12 lost; causes may be missing]"),
        "{lost}"
    );
    // A record written before the field existed reads as complete.
    let mut json = serde_json::to_value(&c).unwrap();
    json["kernel"]
        .as_object_mut()
        .unwrap()
        .remove("window_complete");
    let back: Card = serde_json::from_value(json).unwrap();
    assert!(back.kernel.unwrap().window_complete);
}

#[test]
fn names_from_other_programs_reach_the_verdict_with_their_control_characters_escaped() {
    let x = first_xrun(node(7, start(20) + US, 20 * US, None, NodeStatus::Awake));
    let mut c = card(&x, None, None, Kernel::Missing("not recorded"), &NoThreads);
    // A client can name its node anything: here a title change and a screen clear.
    c.xrun.node.as_mut().expect("a node").name = "synth\x1b]0;owned\x07\x1b[2J".into();
    c.kernel = Some(KernelAccount {
        verdict: String::new(),
        main_culprit: Some(KernelCulprit {
            kind: "task".into(),
            name: "hog\u{9b}31m".into(),
            pid: Some(999),
            policy: "SCHED_FIFO 90".into(),
            cpu: 1,
            us: 4000.0,
        }),
        waited_us: 0.0,
        ran_us: 4000.0,
        blocked_us: 0.0,
        interrupt_us: 0.0,
        migrations: 0,
        lost_events: 0,
        window_complete: true,
        culprits: vec![],
    });
    let text = words::verdict(&c);
    assert!(
        !text.chars().any(xrunlab_sys::printable::is_control),
        "{text:?}"
    );
    assert!(
        text.contains("\"synth\\x1b]0;owned\\x07\\x1b[2J\"") && text.contains("hog\\u{9b}31m"),
        "{text}"
    );
    // The record keeps the raw names.
    let back: Card = serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
    assert_eq!(back.xrun.node.unwrap().name, "synth\x1b]0;owned\x07\x1b[2J");
}

/// The driver's thread (tid 50 of process 40) as the card's root threads know it.
struct DriverThread;

impl xrunlab_watch::RootThreads for DriverThread {
    fn thread_of(&self, role: xrunlab_watch::Role, _: u32) -> Option<xrunlab_watch::Mapping> {
        (role == xrunlab_watch::Role::Driver).then(|| xrunlab_watch::Mapping {
            pid: Some(40),
            thread: Some(xrunlab_watch::RtThread {
                tid: 50,
                comm: "data-loop.0".into(),
                policy: "SCHED_FIFO 88".into(),
            }),
            confidence: Confidence::High,
            reason: "test".into(),
        })
    }
}

fn waking(ts: u64, cpu: u16, tid: i32, in_interrupt: bool) -> TraceEvent {
    TraceEvent {
        ts_ns: ts,
        cpu,
        kind: EventKind::Wakeup {
            comm: Comm::new(b"data-loop.0"),
            tid,
            prio: 11,
            target_cpu: i32::from(cpu),
            waking: true,
            waker_tid: 0,
            in_interrupt,
        },
    }
}

#[test]
fn lateness_passed_down_a_chain_is_blamed_on_the_node_upstream_that_ran_long() {
    let mut d = Detector::new();
    // A (id 7) runs 100 µs, then signals B (id 8), which runs 1.5 ms: normal cycles.
    let chain = |seq: u64, a_busy: u64| {
        let s = start(seq);
        let a = node(7, s + US, 20 * US, Some(a_busy), NodeStatus::Finished);
        let b_signal = a.finish_ns + 2 * US;
        let b = node(8, b_signal, 20 * US, Some(1_500 * US), NodeStatus::Finished);
        cycle(seq, vec![a, b], Some(0))
    };
    for seq in 0..20 {
        assert!(d.cycle(&chain(seq, 100 * US)).is_empty());
    }
    // A spikes to 4.5 ms: B, still 1.5 ms itself, ends past the cycle's end.
    let x = d.cycle(&chain(20, 4_500 * US));
    assert_eq!(x.len(), 1, "{x:?}");
    assert_eq!(
        x[0].node.as_ref().map(|n| n.id),
        Some(8),
        "B is the late one"
    );
    let names: Vec<&str> = x[0].path.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["node8", "node7"], "{:?}", x[0].path);
    assert_eq!(x[0].path[0].finding, xrunlab_watch::Finding::NotSignalled);
    assert_eq!(x[0].path[1].finding, xrunlab_watch::Finding::RanLong);
    let c = card(&x[0], None, None, Kernel::Missing("-"), &NoThreads);
    assert_eq!(c.kind, Kind::NodeRanLong);
    let text = words::verdict(&c);
    assert!(
        text.contains(
            "\"node8\" finished late: its signal came 4.40 ms late: upstream, \"node7\" ran long"
        ),
        "{text}"
    );
}

/// A driver due at `due` that started its cycle 7 ms later, at `start`: a whole period lost,
/// every node in time. The detector (after 20 normal cycles), its xruns, `due` and `start`.
fn driver_7ms_late() -> (Detector, Vec<xrunlab_watch::Xrun>, u64, u64) {
    let mut d = Detector::new();
    for seq in 0..20 {
        d.cycle(&normal(seq));
    }
    let mut late = normal(20);
    let due = late.driver.signal_ns - 7_000 * US;
    late.expected_start_ns = Some(due);
    let x = d.cycle(&late);
    (d, x, due, late.driver.signal_ns)
}

/// The card of `x` over `events`: a complete window from 20 ms before `due` to 30 ms after the
/// driver's `start`, with the driver's thread known.
fn driver_card(x: &xrunlab_watch::Xrun, due: u64, start: u64, events: Vec<TraceEvent>) -> Card {
    let window = Window {
        t0_ns: due - 20_000 * US,
        t1_ns: start + 30_000 * US,
        events,
        lost_events: 0,
        complete: true,
        ..Default::default()
    };
    card(x, None, None, Kernel::Window(&window, &Hogs), &DriverThread)
}

#[test]
fn a_driver_that_started_a_cycle_late_behind_a_hog_is_the_root_and_the_card_names_the_hog() {
    let (d, x, due, start) = driver_7ms_late();
    assert_eq!(x.len(), 1, "{x:?}");
    assert_eq!(x[0].evidence, Evidence::DriverLate);
    // The driver's thread was woken on time, then waited behind a SCHED_FIFO 90 hog on CPU 1.
    let events = vec![
        switch(
            due - 1_000 * US,
            1,
            ("data-loop.0", 50, 11, 1),
            ("hog", 999, 9),
        ),
        waking(due + 5 * US, 1, 50, true),
        switch(
            start - 10 * US,
            1,
            ("hog", 999, 9, 0),
            ("data-loop.0", 50, 11),
        ),
    ];
    let c = driver_card(&x[0], due, start, events);
    assert_eq!(c.kind, Kind::DriverWokeLate, "{c:?}");
    let root = c.root.as_ref().expect("the driver's account");
    let culprit = root
        .account
        .as_ref()
        .and_then(|a| a.main_culprit.as_ref())
        .expect("a culprit");
    assert_eq!((culprit.name.as_str(), culprit.pid), ("hog", Some(999)));
    let text = words::verdict(&c);
    assert!(
        text.contains("the driver \"Dummy-Driver\" (thread data-loop.0, tid 50) woke 7.00 ms late, behind hog (pid 999, SCHED_FIFO 90) on CPU1"),
        "{text}"
    );
    // The summary's table of what delayed the server's threads names the hog.
    let mut tally = xrunlab_watch::Tally::default();
    tally.add(&c);
    let s = tally.summary(&d);
    assert_eq!(
        s.server_delays.first().map(|l| l.name.as_str()),
        Some("hog")
    );
    assert!(
        s.delay_verdict.starts_with("highest delay: hog (pid 999)"),
        "{}",
        s.delay_verdict
    );
}

#[test]
fn a_driver_woken_late_by_a_timer_with_nothing_in_its_way_is_a_late_interrupt() {
    let (_, x, due, start) = driver_7ms_late();
    // Asleep until a timer interrupt woke it 7 ms late on an idle CPU 1.
    let woke = start - 20 * US;
    let events = vec![
        switch(
            due - 1_000 * US,
            1,
            ("data-loop.0", 50, 11, 1),
            ("swapper/1", 0, 120),
        ),
        TraceEvent {
            ts_ns: woke - 2 * US,
            cpu: 1,
            kind: EventKind::HrtimerEntry { function: 0 },
        },
        waking(woke, 1, 50, true),
        TraceEvent {
            ts_ns: woke + 2 * US,
            cpu: 1,
            kind: EventKind::HrtimerExit,
        },
        switch(
            woke + 5 * US,
            1,
            ("swapper/1", 0, 120, 0),
            ("data-loop.0", 50, 11),
        ),
    ];
    let c = driver_card(&x[0], due, start, events);
    assert_eq!(c.kind, Kind::InterruptLate, "{c:?}");
    let woken = c
        .root
        .as_ref()
        .and_then(|r| r.woken.as_ref())
        .expect("its wake-up");
    assert_eq!(woken.source, xrunlab_trace::WakeSource::Timer);
    let text = words::verdict(&c);
    assert!(
        text.contains("by a timer interrupt (hrtimer) on CPU1"),
        "{text}"
    );
}

/// A kernel that records nothing while a CPU runs its idle task (this VM's second CPU, under
/// perf and ftrace alike): the driver sleeps there, a hog's timer and the driver's fire while it
/// is idle, and the hog runs first; neither the hog's switch-in nor the driver's wake-up is in
/// the window. The hog's switch out to the driver, and the tick seen while it ran, remain.
#[test]
fn a_driver_whose_wake_up_the_trace_lacks_is_named_behind_the_task_that_held_its_cpu() {
    let (_, x, due, start) = driver_7ms_late();
    let tick = |ts: u64, entry: bool| TraceEvent {
        ts_ns: ts,
        cpu: 1,
        kind: if entry {
            EventKind::SoftirqEntry { vec: 1 }
        } else {
            EventKind::SoftirqExit { vec: 1 }
        },
    };
    let events = vec![
        switch(
            due - 3_000 * US,
            1,
            ("data-loop.0", 50, 11, 1),
            ("swapper/1", 0, 120),
        ),
        tick(due + 1_000 * US, true),
        tick(due + 1_010 * US, false),
        tick(due + 5_000 * US, true),
        tick(due + 5_010 * US, false),
        switch(
            start - 10 * US,
            1,
            ("hog", 999, 9, 1),
            ("data-loop.0", 50, 11),
        ),
    ];
    let c = driver_card(&x[0], due, start, events.clone());
    assert_eq!(c.kind, Kind::DriverWokeLate, "{c:?}");
    let root = c.root.as_ref().expect("the driver's account");
    assert!(root.woken.is_none(), "no wake-up is made up: {root:?}");
    let culprit = root
        .account
        .as_ref()
        .and_then(|a| a.main_culprit.as_ref())
        .expect("a culprit");
    assert_eq!((culprit.name.as_str(), culprit.pid), ("hog", Some(999)));
    // From the first tick seen on the CPU (1 ms after the driver was due) to its switch out.
    assert!((culprit.us - 5_990.0).abs() < 1.0, "{culprit:?}");
    let text = words::verdict(&c);
    assert!(
        text.contains("woke 7.00 ms late, behind hog (pid 999"),
        "{text}"
    );

    // The same window with the hog's switch-in seen: the hog has the whole span.
    let mut seen = events;
    seen.insert(
        1,
        switch(due - 500 * US, 1, ("swapper/1", 0, 120, 0), ("hog", 999, 9)),
    );
    let c = driver_card(&x[0], due, start, seen);
    let culprit = c
        .root
        .as_ref()
        .and_then(|r| r.account.as_ref())
        .and_then(|a| a.main_culprit.as_ref())
        .expect("a culprit");
    assert!((culprit.us - 6_990.0).abs() < 1.0, "{culprit:?}");
}

/// A wake-up of `tid` (named `comm`, at priority `prio`) made by `waker` on `cpu`, for
/// `target_cpu`.
fn woken_by(
    ts: u64,
    (cpu, target_cpu): (u16, u16),
    (comm, tid, prio): (&str, i32, i32),
    waker: i32,
) -> TraceEvent {
    TraceEvent {
        ts_ns: ts,
        cpu,
        kind: EventKind::Wakeup {
            comm: Comm::new(comm.as_bytes()),
            tid,
            prio,
            target_cpu: i32::from(target_cpu),
            waking: true,
            waker_tid: waker,
            in_interrupt: false,
        },
    }
}

/// The driver runs in time on CPU0, signals a client and sleeps until the client wakes it; the
/// client's thread waits on CPU1 behind a hog for 6.9 ms. What delayed the driver is the hog,
/// through the client it waited for.
#[test]
fn a_driver_that_slept_waiting_for_a_client_held_off_by_a_hog_names_the_hog_through_it() {
    let (_, x, due, start) = driver_7ms_late();
    let events = vec![
        switch(due - 500 * US, 1, ("swapper/1", 0, 120, 0), ("hog", 999, 9)),
        waking(due, 0, 50, true),
        switch(
            due + 5 * US,
            0,
            ("swapper/0", 0, 120, 0),
            ("data-loop.0", 50, 11),
        ),
        woken_by(due + 20 * US, (0, 1), ("client", 60, 30), 50),
        switch(
            due + 50 * US,
            0,
            ("data-loop.0", 50, 11, 1),
            ("swapper/0", 0, 120),
        ),
        switch(due + 6_900 * US, 1, ("hog", 999, 9, 1), ("client", 60, 30)),
        woken_by(due + 6_950 * US, (1, 0), ("data-loop.0", 50, 11), 60),
        switch(
            due + 6_960 * US,
            1,
            ("client", 60, 30, 1),
            ("swapper/1", 0, 120),
        ),
        switch(
            due + 6_980 * US,
            0,
            ("swapper/0", 0, 120, 0),
            ("data-loop.0", 50, 11),
        ),
    ];
    let c = driver_card(&x[0], due, start, events.clone());
    assert_eq!(c.kind, Kind::DriverWokeLate, "{c:?}");
    let root = c.root.as_ref().expect("the driver's account");
    let held = root.waker.as_ref().expect("the client's account");
    let culprit = held.main_culprit.as_ref().expect("a culprit");
    assert_eq!((culprit.name.as_str(), culprit.pid), ("hog", Some(999)));
    assert!((held.waited_us - 6_880.0).abs() < 1.0, "{held:?}");
    // The driver's own culprit is the hog too: the summary and the recorder's culprit name it.
    let own = root.account.as_ref().and_then(|a| a.main_culprit.as_ref());
    assert_eq!(own.map(|c| c.pid), Some(Some(999)), "{root:?}");
    let text = words::verdict(&c);
    assert!(
        text.contains("woken only then by thread client (tid 60), which was held off its CPU for 6.88 ms, behind hog (pid 999, SCHED_FIFO 90) on CPU1"),
        "{text}"
    );

    // The same client running its 6.9 ms itself (switched in at once, the hog gone): it ran
    // long, its own doing; the driver's card does not go through it to the hog.
    let mut ran = events;
    ran.retain(|e| {
        !matches!(
            &e.kind,
            EventKind::Switch { next_tid: 999, .. } | EventKind::Switch { prev_tid: 999, .. }
        )
    });
    ran.insert(
        4,
        switch(
            due + 60 * US,
            1,
            ("swapper/1", 0, 120, 0),
            ("client", 60, 30),
        ),
    );
    let c = driver_card(&x[0], due, start, ran);
    let root = c.root.as_ref().expect("the driver's account");
    assert!(root.waker.is_none(), "{root:?}");
    assert!(
        !words::verdict(&c).contains("hog"),
        "{}",
        words::verdict(&c)
    );
}

#[test]
fn a_driver_whose_own_processing_ran_long_is_the_root_and_the_card_splits_its_time() {
    let mut d = Detector::new();
    for seq in 0..20 {
        d.cycle(&normal(seq));
    }
    // Every node in time; the driver, woken on time, took 3.02 ms against its 10 µs median,
    // and the device's xrun count went up.
    let mut late = normal(20);
    let s = late.driver.signal_ns;
    late.driver.awake_ns = s + 40 * US;
    late.driver.finish_ns = s + 3_060 * US;
    late.driver.xruns = Some(1);
    late.driver_xruns = Some(1);
    let x = d.cycle(&late);
    assert_eq!(x.len(), 1, "{x:?}");
    assert_eq!(x[0].evidence, Evidence::DriverCount);
    let step = x[0].path.last().expect("the driver's step");
    assert_eq!(
        (step.role, step.finding),
        (
            xrunlab_watch::Role::Driver,
            xrunlab_watch::Finding::DriverRanLong
        )
    );

    // Without kernel events, the timing alone names the driver.
    let c = card(
        &x[0],
        None,
        None,
        Kernel::Missing("not recorded (--no-kernel)"),
        &DriverThread,
    );
    assert_eq!(c.kind, Kind::DriverRanLong, "{c:?}");
    let text = words::verdict(&c);
    assert!(
        text.contains(
            "every node finished in time, but the driver \"Dummy-Driver\" (thread data-loop.0, \
             tid 50) ran long: BUSY 3.01 ms over its median (no kernel account: not recorded \
             (--no-kernel))"
        ),
        "{text}"
    );

    // With them, its 3.02 ms are split: on its CPU (minus an interrupt), preempted by a
    // SCHED_FIFO hog, blocked on a lock another thread released.
    let events = vec![
        waking(s + 40 * US, 1, 50, true),
        switch(
            s + 40 * US,
            1,
            ("swapper/1", 0, 120, 0),
            ("data-loop.0", 50, 11),
        ),
        TraceEvent {
            ts_ns: s + 1_000 * US,
            cpu: 1,
            kind: EventKind::IrqEntry {
                irq: 24,
                name: "xhci_hcd".into(),
            },
        },
        TraceEvent {
            ts_ns: s + 1_050 * US,
            cpu: 1,
            kind: EventKind::IrqExit { irq: 24 },
        },
        switch(
            s + 1_500 * US,
            1,
            ("data-loop.0", 50, 11, 0),
            ("hog", 999, 9),
        ),
        switch(
            s + 1_900 * US,
            1,
            ("hog", 999, 9, 0),
            ("data-loop.0", 50, 11),
        ),
        switch(
            s + 2_500 * US,
            1,
            ("data-loop.0", 50, 11, 1),
            ("swapper/1", 0, 120),
        ),
        TraceEvent {
            ts_ns: s + 2_800 * US,
            cpu: 0,
            kind: EventKind::Wakeup {
                comm: Comm::new(b"data-loop.0"),
                tid: 50,
                prio: 11,
                target_cpu: 1,
                waking: true,
                waker_tid: 77,
                in_interrupt: false,
            },
        },
        switch(
            s + 2_800 * US,
            1,
            ("swapper/1", 0, 120, 0),
            ("data-loop.0", 50, 11),
        ),
        switch(
            s + 3_060 * US,
            1,
            ("data-loop.0", 50, 11, 1),
            ("swapper/1", 0, 120),
        ),
    ];
    let window = Window {
        t0_ns: s - 20_000 * US,
        t1_ns: s + 30_000 * US,
        events,
        lost_events: 0,
        complete: true,
        ..Default::default()
    };
    let c = card(
        &x[0],
        None,
        None,
        Kernel::Window(&window, &Hogs),
        &DriverThread,
    );
    assert_eq!(c.kind, Kind::DriverRanLong, "{c:?}");
    let root = c.root.as_ref().expect("the driver's account");
    assert_eq!(
        (root.role, root.name.as_str()),
        (xrunlab_watch::Role::Driver, "Dummy-Driver")
    );
    let k = root.account.as_ref().expect("a kernel account");
    assert_eq!(
        (k.ran_us, k.waited_us, k.blocked_us, k.interrupt_us),
        (2_270.0, 400.0, 300.0, 50.0)
    );
    let culprit = k.main_culprit.as_ref().expect("who preempted it");
    assert_eq!((culprit.name.as_str(), culprit.pid), ("hog", Some(999)));
    let text = words::verdict(&c);
    assert!(
        text.contains(
            "every node finished in time, but the driver \"Dummy-Driver\" (thread data-loop.0, \
             tid 50) ran long: on its CPU 2.27 ms, preempted 0.40 ms, blocked 0.30 ms, \
             interrupts 50 µs"
        ),
        "{text}"
    );
    let json = serde_json::to_value(&c).expect("serializes");
    assert_eq!(json["kind"], "driver_ran_long");
}

#[test]
fn a_follower_asleep_through_its_cycle_was_not_signalled_and_the_driver_that_should_have_is_the_root(
) {
    let signal = start(20) + US;
    let x = first_xrun(node(7, signal, u64::MAX, None, NodeStatus::Triggered));
    // By timing alone it never started, so it woke late.
    assert_eq!(x.path[0].finding, xrunlab_watch::Finding::WokeLate);
    let s = start(20);
    let events = vec![
        // The node's thread went to sleep a millisecond before its signal and was never woken.
        switch(
            signal - 1_000 * US,
            1,
            ("data-loop.0", 4243, 16, 1),
            ("swapper/1", 0, 120),
        ),
        // The driver's thread: woken by its timer in time, it ran 60 µs and slept again, with
        // nothing holding it off.
        waking(s - 10 * US, 0, 50, true),
        switch(
            s - 5 * US,
            0,
            ("swapper/0", 0, 120, 0),
            ("data-loop.0", 50, 11),
        ),
        switch(
            s + 60 * US,
            0,
            ("data-loop.0", 50, 11, 1),
            ("swapper/0", 0, 120),
        ),
    ];
    let window = Window {
        t0_ns: signal - 20_000 * US,
        t1_ns: signal + 10_000 * US,
        events,
        lost_events: 0,
        complete: true,
        ..Default::default()
    };
    let t = procs();
    let mapping = map_node(t.path(), Some(4242));
    let c = card(
        &x,
        None,
        Some(mapping),
        Kernel::Window(&window, &Hogs),
        &DriverThread,
    );
    assert_eq!(c.kind, Kind::NodeNotSignalled, "{c:?}");
    let names: Vec<&str> = c.path.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["node7", "Dummy-Driver"], "{:?}", c.path);
    assert_eq!(c.path[0].finding, xrunlab_watch::Finding::NotSignalled);
    let k = c.kernel.as_ref().expect("the node's kernel account");
    assert!(k.ran_us < 100.0 && k.waited_us < 100.0, "{k:?}");
    let root = c.root.as_ref().expect("the driver's account");
    assert_eq!(root.role, xrunlab_watch::Role::Driver);
    assert!(
        root.account
            .as_ref()
            .is_some_and(|a| a.main_culprit.is_none()),
        "nothing held the driver off: {root:?}"
    );
    let text = words::verdict(&c);
    assert!(
        text.contains(
            "\"node7\" (pid 4242) never started: the driver \"Dummy-Driver\" (thread \
             data-loop.0, tid 50) did not signal it in time"
        ),
        "{text}"
    );
}

#[test]
fn an_xrun_nothing_explains_is_unexplained_and_says_why() {
    // JACK2's callback reported an xrun, no late node was found, and tracing was not allowed.
    let mut d = Detector::new();
    let x = d.server_reported(start(3), (256, 48_000));
    let c = card(
        &x,
        None,
        None,
        Kernel::Missing("tracing needs root or CAP_PERFMON"),
        &NoThreads,
    );
    assert_eq!(c.kind, Kind::Unexplained);
    assert!(c.root_step().is_none() && c.root.is_none(), "{c:?}");
    assert_eq!(
        c.unexplained.as_deref(),
        Some("the server reported an xrun but does not say which node was late")
    );
    assert_eq!(
        c.kernel_missing.as_deref(),
        Some("tracing needs root or CAP_PERFMON")
    );
    assert_eq!(
        words::verdict(&c),
        "xrun 1 (cycle 0): unexplained: the server reported an xrun but does not say which node \
         was late (no kernel events: tracing needs root or CAP_PERFMON)"
    );

    // A node's own xrun count went up while its signal, WAIT and BUSY were all at their
    // medians, in a cycle the driver started in time.
    let mut d = Detector::new();
    let counted = |seq, n| {
        let mut c = normal(seq);
        c.followers[0].xruns = Some(n);
        c
    };
    for seq in 0..20 {
        assert!(d.cycle(&counted(seq, 4)).is_empty());
    }
    let x = d.cycle(&counted(20, 5));
    assert_eq!(x.len(), 1, "{x:?}");
    assert_eq!(x[0].evidence, Evidence::NodeCount);
    let c = card(
        &x[0],
        None,
        None,
        Kernel::Missing("not recorded (--no-kernel)"),
        &NoThreads,
    );
    assert_eq!(c.kind, Kind::Unexplained, "{c:?}");
    let root = c.root_step().expect("the node itself");
    assert_eq!(
        (root.name.as_str(), root.finding),
        ("node7", xrunlab_watch::Finding::InTime)
    );
    let why = "its signal, wait and work were each within its medians, and the driver started \
               the cycle in time";
    assert_eq!(c.unexplained.as_deref(), Some(why));
    let text = words::verdict(&c);
    assert!(
        text.contains(&format!(
            "\"node7\" was late, unexplained: {why} (no kernel events: not recorded (--no-kernel))"
        )),
        "{text}"
    );
}

#[test]
fn every_kind_is_named_in_the_json_as_its_name() {
    let mut names = Vec::new();
    for k in Kind::ALL {
        let json = serde_json::to_value(k).expect("serializes");
        assert_eq!(json, serde_json::Value::from(k.name()), "{k:?}");
        let back: Kind = serde_json::from_value(json).expect("reads back");
        assert_eq!(back, k);
        names.push(k.name());
    }
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), Kind::ALL.len(), "each kind has its own name");
}

#[test]
fn a_bystander_whose_blocks_during_another_nodes_overrun_are_the_next_cycles_is_no_xrun() {
    // PipeWire 0.3.65, recorded by `bench watch`: while node 7 overruns for four cycles, node 8
    // (signalled by the driver, not by 7) is stamped in each record with the next cycle's
    // signal (a period after this cycle's start) and finishes within that next cycle. Only 7's
    // overrun is an xrun; before the fix, 8 was one in every cycle of the overrun.
    let mut d = Detector::new();
    let pair = |seq: u64, stalled: bool| {
        let s = start(seq);
        let (a, b_signal) = if stalled {
            (
                node(7, s + US, 20 * US, None, NodeStatus::Awake),
                start(seq + 1) + US,
            )
        } else {
            (
                node(7, s + US, 20 * US, Some(100 * US), NodeStatus::Finished),
                s + 2 * US,
            )
        };
        let b = node(8, b_signal, 20 * US, Some(80 * US), NodeStatus::Finished);
        cycle(seq, vec![a, b], Some(0))
    };
    for seq in 0..20 {
        assert!(d.cycle(&pair(seq, false)).is_empty());
    }
    let mut xruns = Vec::new();
    for seq in 20..24 {
        xruns.extend(d.cycle(&pair(seq, true)));
    }
    for seq in 24..40 {
        xruns.extend(d.cycle(&pair(seq, false)));
    }
    let late: Vec<Option<u32>> = xruns
        .iter()
        .map(|x| x.node.as_ref().map(|n| n.id))
        .collect();
    assert_eq!(late, [Some(7)], "{xruns:?}");
    // The bystander's medians stay its own: its offset is counted from the next cycle's start.
    let offset = d.nodes().get(&8).and_then(|s| s.median_offset_ns());
    assert!(offset.is_some_and(|o| o < 10 * US), "{offset:?}");
}

#[test]
fn a_node_signalled_a_period_late_by_a_node_upstream_is_still_late() {
    // The chain's case at the edge: A ran long until just before the cycle's end, B (signalled
    // by A's finish a period after the start) ends past it. B's block is this cycle's, not the
    // next one's, and its signal was late.
    let mut d = Detector::new();
    let chain = |seq: u64, a_busy: u64| {
        let s = start(seq);
        let a = node(7, s + US, 20 * US, Some(a_busy), NodeStatus::Finished);
        let b = node(
            8,
            a.finish_ns + 2 * US,
            20 * US,
            Some(500 * US),
            NodeStatus::Finished,
        );
        cycle(seq, vec![a, b], Some(0))
    };
    for seq in 0..20 {
        assert!(d.cycle(&chain(seq, 100 * US)).is_empty());
    }
    let x = d.cycle(&chain(20, PERIOD - 100 * US));
    assert_eq!(x.len(), 1, "{x:?}");
    let names: Vec<&str> = x[0].path.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["node8", "node7"], "{:?}", x[0].path);
    assert_eq!(x[0].path[0].finding, xrunlab_watch::Finding::NotSignalled);
}

#[test]
fn two_nodes_the_driver_held_back_in_one_cycle_are_one_card_of_the_driver() {
    // Recorded on PipeWire 0.3.65: the driver's processing ran 18 ms, and both followers were
    // signalled only as it finished. One root, one card (the first node named on it); before,
    // each follower got a card of its own for the same driver.
    let mut d = Detector::new();
    let pair = |seq: u64| {
        let s = start(seq);
        let a = node(
            7,
            s + 61 * US,
            20 * US,
            Some(100 * US),
            NodeStatus::Finished,
        );
        let b = node(8, s + 62 * US, 20 * US, Some(80 * US), NodeStatus::Finished);
        cycle(seq, vec![a, b], Some(0))
    };
    for seq in 0..20 {
        assert!(d.cycle(&pair(seq)).is_empty());
    }
    let mut late = pair(20);
    let s = late.driver.signal_ns;
    late.driver.finish_ns = s + 18_000 * US;
    late.followers[0] = node(7, s + 18_002 * US, 0, None, NodeStatus::Triggered);
    late.followers[1] = node(8, s + 18_003 * US, 0, None, NodeStatus::Triggered);
    late.followers[0].awake_ns = s + 18_001 * US;
    late.followers[1].awake_ns = s + 18_001 * US;
    let x = d.cycle(&late);
    assert_eq!(x.len(), 1, "{x:?}");
    let root = x[0].path.last().expect("a root");
    assert_eq!(
        (root.role, root.finding),
        (
            xrunlab_watch::Role::Driver,
            xrunlab_watch::Finding::DriverRanLong
        ),
        "{:?}",
        x[0].path
    );
}

#[test]
fn on_pipewire_1_4_a_node_awake_with_an_awake_cycles_old_never_started_and_did_not_run_long() {
    // PipeWire 1.4.2, recorded under `record` with an RT hog starving the server's thread: the
    // client `Awake`, its awake and finish 17 ms before its signal (12 µs apart). The card said
    // "ran long: BUSY 12 µs"; it never started in this cycle.
    let signal = start(20) + 4 * US;
    let x = never_started_since_its_signal(
        signal,
        (signal - 17_000 * US, signal - 16_988 * US),
        NodeStatus::Awake,
    );
    assert_eq!(x.node.as_ref().map(|n| n.awake_ns), Some(0));
}

/// The xrun of node 7 signalled at `signal` with a stale (awake, finish) from a cycle before, in
/// `status`: still running at the deadline, and late from its signal on (it woke late), not
/// from that stale awake.
fn never_started_since_its_signal(
    signal: u64,
    (awake_ns, finish_ns): (u64, u64),
    status: NodeStatus,
) -> xrunlab_watch::Xrun {
    let x = first_xrun(NodeTiming {
        id: 7,
        name: "node7".into(),
        signal_ns: signal,
        awake_ns,
        finish_ns,
        status,
        xruns: None,
    });
    assert_eq!(x.evidence, Evidence::StillRunning);
    assert_eq!(
        x.path[0].finding,
        xrunlab_watch::Finding::WokeLate,
        "{:?}",
        x.path
    );
    x
}

#[test]
fn on_pipewire_1_4_a_node_signalled_again_and_held_off_its_cpu_woke_late_behind_the_hog() {
    // PipeWire 1.4.2, measured: a client held off its CPU by a SCHED_FIFO hog is recorded in
    // the cycle before, `Triggered`, its signal already the next cycle's and its awake and
    // finish still this one's (in time, 6 µs apart). Its lateness runs from that signal: it
    // never woke since. Before, the card said "ran long: BUSY 6 µs" with the kernel's account
    // over those 6 µs, and never the hog.
    let s = start(20);
    let signal = start(21) + 4 * US;
    let x =
        never_started_since_its_signal(signal, (s + 29 * US, s + 35 * US), NodeStatus::Triggered);
    let mut events = vec![
        switch(
            signal - 200 * US,
            1,
            ("swapper/1", 0, 120, 0),
            ("hog", 999, 9),
        ),
        TraceEvent {
            ts_ns: signal,
            cpu: 0,
            kind: EventKind::Wakeup {
                comm: Comm::new(b"data-loop.0"),
                tid: 4243,
                prio: 16,
                target_cpu: 1,
                waking: true,
                waker_tid: 1,
                in_interrupt: false,
            },
        },
        switch(
            signal + 9_000 * US,
            1,
            ("hog", 999, 9, 0),
            ("data-loop.0", 4243, 16),
        ),
    ];
    events.sort_by_key(|e| e.ts_ns);
    let window = Window {
        t0_ns: s - 20_000_000,
        t1_ns: signal + 20_000_000,
        events,
        lost_events: 0,
        complete: true,
        ..Default::default()
    };
    let t = procs();
    let c = card(
        &x,
        None,
        Some(map_node(t.path(), Some(4242))),
        Kernel::Window(&window, &Hogs),
        &NoThreads,
    );
    assert_eq!(c.kind, Kind::NodeWokeLate, "{c:?}");
    let culprit = c
        .kernel
        .as_ref()
        .and_then(|k| k.main_culprit.as_ref())
        .expect("a culprit");
    assert_eq!((culprit.name.as_str(), culprit.pid), ("hog", Some(999)));
    assert!(culprit.us > 4_000.0, "{culprit:?}");
}

#[test]
fn a_snapshot_shows_a_run_whose_switch_in_the_window_lacks() {
    // perf drops some switches made from an idle CPU's context: the late node's thread is seen
    // switching out after 8 ms on its CPU, never switching in. Its run still shows, from that
    // CPU's switch before (an unrelated one), marked as such; before, it had no slice at all.
    let signal = start(20) + US;
    let x = first_xrun(node(7, signal, 20 * US, None, NodeStatus::Awake));
    let window = Window {
        t0_ns: signal - 20_000_000,
        t1_ns: signal + 20_000_000,
        events: vec![
            switch(
                signal - 300 * US,
                1,
                ("kworker/1:0", 77, 120, 1),
                ("swapper/1", 0, 120),
            ),
            switch(
                signal + 8_000 * US,
                1,
                ("data-loop.0", 4243, 16, 1),
                ("swapper/1", 0, 120),
            ),
        ],
        lost_events: 0,
        complete: true,
        ..Default::default()
    };
    let t = procs();
    let c = card(
        &x,
        None,
        Some(map_node(t.path(), Some(4242))),
        Kernel::Window(&window, &Hogs),
        &NoThreads,
    );
    let bytes = xrunlab_watch::snapshot::snapshot(&c, &words::verdict(&c), &window, &[0, 1]);
    let trace: serde_json::Value = serde_json::from_slice(&bytes).expect("a JSON trace");
    let running: Vec<&serde_json::Value> = trace["traceEvents"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["name"] == "running" && e["tid"] == 4243)
        .collect();
    assert_eq!(running.len(), 1, "{running:?}");
    assert_eq!(running[0]["args"]["switch_in_not_seen"], true);
    let dur = running[0]["dur"].as_f64().expect("a duration");
    assert!((8_200.0..8_400.0).contains(&dur), "{dur} µs");
}

#[test]
fn a_node_whose_overrun_began_cycles_before_the_record_has_that_run_as_its_account() {
    // PipeWire 0.3 reports a client that spun 10 ms with the stamps of the last cycle it
    // spanned: awake just after that cycle's signal and still running at the record. In that
    // cycle alone its thread barely ran (it waited 160 µs behind a hog, then slept); the 10 ms
    // before it are the overrun.
    let signal = start(20) + US;
    let x = first_xrun(node(7, signal, 20 * US, None, NodeStatus::Awake));
    let events = vec![
        switch(
            signal - 10_000 * US,
            1,
            ("swapper/1", 0, 120, 0),
            ("data-loop.0", 4243, 16),
        ),
        switch(
            signal - 100 * US,
            1,
            ("data-loop.0", 4243, 16, 0),
            ("hog", 999, 9),
        ),
        switch(
            signal + 60 * US,
            1,
            ("hog", 999, 9, 1),
            ("data-loop.0", 4243, 16),
        ),
        switch(
            signal + 100 * US,
            1,
            ("data-loop.0", 4243, 16, 1),
            ("swapper/1", 0, 120),
        ),
    ];
    let c = node7_card(&x, signal, events);
    assert_eq!(c.kind, Kind::NodeRanLong, "{c:?}");
    assert_eq!(c.root_step().map(|s| s.name.as_str()), Some("node7"));
    let k = c.kernel.as_ref().expect("kernel account");
    assert!(
        k.ran_us > 9_000.0,
        "the account covers the run before the cycle: {k:?}"
    );
    assert!(
        k.main_culprit.as_ref().is_none_or(|m| m.name != "hog"),
        "the hog that held it 160 µs is not the cause of a 10 ms overrun: {k:?}"
    );
}

#[test]
fn a_node_the_server_calls_still_running_whose_thread_slept_did_not_run_long() {
    // PipeWire 0.3.65 during a hog's spin on the driver's CPU: the calm client is reported still
    // running (BUSY "at least" the cycle), yet its thread ran 29 µs and slept through the rest,
    // and did not run before it either. Nothing on file says it ran long; with no late driver
    // found to root it in, the card is unexplained and says what the kernel saw.
    let signal = start(20) + US;
    let x = first_xrun(node(7, signal, 20 * US, None, NodeStatus::Awake));
    let events = vec![
        switch(
            signal + 10 * US,
            0,
            ("swapper/0", 0, 120, 0),
            ("data-loop.0", 4243, 16),
        ),
        switch(
            signal + 39 * US,
            0,
            ("data-loop.0", 4243, 16, 1),
            ("swapper/0", 0, 120),
        ),
    ];
    let c = node7_card(&x, signal, events);
    assert_eq!(c.kind, Kind::Unexplained, "{c:?}");
    let text = words::verdict(&c);
    assert!(!text.contains("ran long"), "{text}");
    assert!(
        text.contains("the server reports it still running")
            && text.contains("its thread was on its CPU for 29 µs"),
        "{text}"
    );
}

/// The driver sleeps until the client's process thread wakes it; that thread slept waiting for
/// its worker, which waited on CPU1 behind a hog: the chain is followed back to the hog.
#[test]
fn a_driver_that_slept_waiting_for_a_client_whose_worker_a_hog_held_off_names_the_hog() {
    let (_, x, due, start) = driver_7ms_late();
    let (client, worker) = (("client", 60, 30), ("worker", 61, 30));
    let events = vec![
        switch(due - 500 * US, 1, ("swapper/1", 0, 120, 0), ("hog", 999, 9)),
        waking(due, 0, 50, true),
        switch(
            due + 5 * US,
            0,
            ("swapper/0", 0, 120, 0),
            ("data-loop.0", 50, 11),
        ),
        woken_by(due + 20 * US, (0, 0), client, 50),
        switch(
            due + 50 * US,
            0,
            ("data-loop.0", 50, 11, 1),
            ("client", 60, 30),
        ),
        woken_by(due + 60 * US, (0, 0), worker, 60),
        switch(
            due + 80 * US,
            0,
            ("client", 60, 30, 1),
            ("swapper/0", 0, 120),
        ),
        switch(due + 6_900 * US, 1, ("hog", 999, 9, 1), ("worker", 61, 30)),
        woken_by(due + 6_930 * US, (1, 1), client, 61),
        switch(
            due + 6_935 * US,
            1,
            ("worker", 61, 30, 1),
            ("swapper/1", 0, 120),
        ),
        switch(
            due + 6_936 * US,
            0,
            ("swapper/0", 0, 120, 0),
            ("client", 60, 30),
        ),
        woken_by(due + 6_950 * US, (0, 0), ("data-loop.0", 50, 30), 60),
        switch(
            due + 6_960 * US,
            0,
            ("client", 60, 30, 1),
            ("data-loop.0", 50, 11),
        ),
    ];
    let c = driver_card(&x[0], due, start, events);
    assert_eq!(c.kind, Kind::DriverWokeLate, "{c:?}");
    let root = c.root.as_ref().expect("the driver's account");
    let held = root.waker.as_ref().expect("the worker's account");
    assert_eq!(
        held.main_culprit.as_ref().map(|c| (c.name.as_str(), c.pid)),
        Some(("hog", Some(999))),
        "{held:?}"
    );
    assert_eq!(root.waker_via.len(), 1, "{root:?}");
    let text = words::verdict(&c);
    assert!(
        text.contains("woken only then by thread client (tid 60), which slept until woken by thread worker (tid 61), which was held off its CPU for"),
        "{text}"
    );
    assert!(
        text.contains("behind hog (pid 999, SCHED_FIFO 90) on CPU1"),
        "{text}"
    );
}
