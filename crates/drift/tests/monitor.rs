//! The drift monitor on fixture trees (every kind of change it reads from /proc and /sys, and a
//! suspend from the clocks), and live: a real SCHED_FIFO thread demoted with `chrt -o -p 0`.

use xrunlab_drift::sched::stat_line;
use xrunlab_drift::{before_card, ClockSample, DriftKind, DriftMonitor, Lookback, WatchedThread};
use xrunlab_testkit::FixtureTree;

const S: i64 = 1_000_000_000;

fn clock(wall_s: i64, suspended_s: i64) -> ClockSample {
    ClockSample {
        wall_ns: wall_s * S,
        boot_ns: (wall_s + suspended_s) * S,
        mono_ns: wall_s * S,
    }
}

fn machine() -> FixtureTree {
    let t = FixtureTree::new("drift");
    t.write(
        "proc/100/task/101/stat",
        &stat_line(101, "data-loop.0", 88, 1),
    )
    .write(
        "sys/devices/system/cpu/cpufreq/policy0/scaling_governor",
        "performance\n",
    )
    .write(
        "sys/devices/system/cpu/cpufreq/policy0/energy_performance_preference",
        "performance\n",
    )
    .write(
        "sys/devices/system/cpu/cpufreq/policy1/scaling_governor",
        "performance\n",
    )
    .write("sys/firmware/acpi/platform_profile", "performance\n")
    .write("sys/devices/system/cpu/online", "0-3\n")
    .write(
        "sys/devices/system/cpu/cpu1/thermal_throttle/core_throttle_count",
        "4\n",
    )
    .write(
        "sys/devices/system/cpu/cpu1/thermal_throttle/package_throttle_count",
        "0\n",
    );
    t
}

fn watched() -> Vec<WatchedThread> {
    vec![WatchedThread {
        pid: 100,
        tid: 101,
        name: "pipewire's data loop".into(),
    }]
}

#[test]
fn the_first_poll_is_a_baseline_and_an_unchanged_machine_says_nothing() {
    let t = machine();
    let mut m = DriftMonitor::new(t.path());
    m.watch_threads(watched());
    assert_eq!(m.poll_at(clock(100, 0)), []);
    assert_eq!(m.poll_at(clock(101, 0)), []);
}

#[test]
fn every_change_under_the_root_is_an_event_with_the_polls_time() {
    let t = machine();
    let mut m = DriftMonitor::new(t.path());
    m.watch_threads(watched());
    m.poll_at(clock(100, 0));
    t.write(
        "proc/100/task/101/stat",
        &stat_line(101, "data-loop.0", 0, 0),
    )
    .write(
        "sys/devices/system/cpu/cpufreq/policy1/scaling_governor",
        "powersave\n",
    )
    .write(
        "sys/devices/system/cpu/cpufreq/policy0/energy_performance_preference",
        "power\n",
    )
    .write("sys/firmware/acpi/platform_profile", "low-power\n")
    .write("sys/devices/system/cpu/online", "0-2\n")
    .write(
        "sys/devices/system/cpu/cpu1/thermal_throttle/core_throttle_count",
        "9\n",
    );
    // Suspended 30 s between the polls.
    let events = m.poll_at(clock(140, 30));
    let got: Vec<(DriftKind, &str, &str, &str)> = events
        .iter()
        .map(|e| {
            (
                e.kind,
                e.subject.as_str(),
                e.before.as_str(),
                e.after.as_str(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (DriftKind::Resume, "machine", "awake", "30.0 s"),
            (
                DriftKind::Sched,
                "pipewire's data loop (tid 101)",
                "SCHED_FIFO 88",
                "SCHED_OTHER"
            ),
            (DriftKind::Epp, "policy0", "performance", "power"),
            (DriftKind::Governor, "policy1", "performance", "powersave"),
            (
                DriftKind::PlatformProfile,
                "platform",
                "performance",
                "low-power"
            ),
            (DriftKind::CpuOnline, "cpus", "0-3", "0-2"),
            (DriftKind::Throttle, "cpu1 core", "4", "9"),
        ]
    );
    assert!(events.iter().all(|e| e.time_ns == 140 * S));
    assert_eq!(
        events[1].words(),
        "pipewire's data loop (tid 101) lost real-time scheduling: SCHED_FIFO 88 → SCHED_OTHER"
    );

    // Back to FIFO, then the thread is gone.
    t.write(
        "proc/100/task/101/stat",
        &stat_line(101, "data-loop.0", 88, 1),
    );
    let back = m.poll_at(clock(141, 30));
    assert_eq!(back.len(), 1);
    assert!(
        back[0].words().contains("got real-time scheduling back"),
        "{}",
        back[0].words()
    );
    std::fs::remove_dir_all(t.path().join("proc/100")).unwrap();
    let gone = m.poll_at(clock(142, 30));
    assert_eq!(gone[0].kind, DriftKind::ThreadGone);
    assert_eq!(m.poll_at(clock(143, 30)), [], "a gone thread is said once");
}

#[test]
fn quantum_rate_and_nodes_come_from_the_caller() {
    let mut m = DriftMonitor::new("/nonexistent-root");
    assert_eq!(m.graph(256, 48000, 1), []);
    assert_eq!(m.graph(256, 48000, 2), []);
    let e = m.graph(64, 44100, 3);
    assert_eq!(
        e.iter()
            .map(|e| (e.kind, e.before.as_str(), e.after.as_str()))
            .collect::<Vec<_>>(),
        [
            (DriftKind::Quantum, "256", "64"),
            (DriftKind::Rate, "48000", "44100")
        ]
    );
    assert_eq!(m.node("synth", true, 4).words(), "node synth appeared");
    assert_eq!(m.node("synth", false, 5).kind, DriftKind::NodeRemoved);
}

#[test]
fn a_card_after_a_resume_and_a_demotion_says_since_when() {
    let t = machine();
    let mut m = DriftMonitor::new(t.path());
    m.watch_threads(watched());
    let mut events = m.poll_at(clock(1000, 0));
    t.write(
        "proc/100/task/101/stat",
        &stat_line(101, "data-loop.0", 0, 0),
    );
    events.extend(m.poll_at(clock(2000, 600)));
    t.write(
        "sys/devices/system/cpu/cpu1/thermal_throttle/core_throttle_count",
        "6\n",
    );
    events.extend(m.poll_at(clock(2030, 600)));
    t.write(
        "sys/devices/system/cpu/cpu1/thermal_throttle/core_throttle_count",
        "10\n",
    );
    events.extend(m.poll_at(clock(2040, 600)));
    let hhmm = |ns: i64| format!("t{}", ns / S);

    let words = before_card(&events, 2050 * S, Lookback::default(), &hhmm);
    assert_eq!(
        words,
        [
            "pipewire's data loop (tid 101) has run SCHED_OTHER since the resume at t2000 (it had SCHED_FIFO 88)",
            "the machine resumed from suspend at t2000, 50 s before",
            "cpu1 core was thermally throttled 6 times in the 60 s before",
        ]
    );
    // Hours later the demotion is still in effect; the passing events are not mentioned.
    let later = before_card(&events, 9000 * S, Lookback::default(), &hhmm);
    assert_eq!(later.len(), 1, "{later:?}");
    // A card before any of it has nothing to say.
    assert!(before_card(&events, 1500 * S, Lookback::default(), &hhmm).is_empty());
}

/// A live SCHED_FIFO thread, demoted by `chrt -o -p 0 TID` as rtkit or a user would: the
/// monitor reads it from the real /proc.
#[test]
fn a_real_fifo_thread_demoted_with_chrt_is_seen() {
    let (tx, rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    let worker = std::thread::spawn(move || {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        let param = libc::sched_param { sched_priority: 10 };
        // SAFETY: sets this thread's own policy with a valid param.
        let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
        tx.send((tid, rc)).unwrap();
        let _ = stop_rx.recv();
    });
    let (tid, rc) = rx.recv().unwrap();
    assert_eq!(
        rc,
        0,
        "SCHED_FIFO refused (run as root or with CAP_SYS_NICE): {}",
        std::io::Error::last_os_error()
    );
    let mut m = DriftMonitor::new("/");
    m.watch_threads(vec![WatchedThread {
        pid: std::process::id() as i32,
        tid,
        name: "test thread".into(),
    }]);
    assert!(
        m.poll().iter().all(|e| e.kind != DriftKind::Sched),
        "the baseline is no event"
    );
    let out = std::process::Command::new("chrt")
        .args(["-o", "-p", "0", &tid.to_string()])
        .output()
        .expect("chrt runs (util-linux)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events = m.poll();
    let sched: Vec<_> = events
        .iter()
        .filter(|e| e.kind == DriftKind::Sched)
        .collect();
    assert_eq!(sched.len(), 1, "{events:?}");
    assert_eq!(
        (sched[0].before.as_str(), sched[0].after.as_str()),
        ("SCHED_FIFO 10", "SCHED_OTHER")
    );
    stop_tx.send(()).unwrap();
    worker.join().unwrap();
}
