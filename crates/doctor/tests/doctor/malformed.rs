//! Missing and malformed files give "unknown" findings that name the file, never a panic.

use crate::fixture::{expect, probes, Machine};
use xrunlab_doctor::{Report, Status};

#[test]
fn an_empty_machine_gives_unknowns_not_panics() {
    let m = Machine::empty();
    let r = m.report(&probes(None, false));
    for id in [
        "rt.user",
        "rt.rtprio_limit",
        "rt.memlock_limit",
        "rt.audio_group",
        "kernel.config",
        "kernel.preempt",
        "kernel.threadirqs",
        "kernel.rt_throttling",
        "kernel.hrtimers",
        "kernel.clocksource",
        "kernel.nohz",
        "kernel.hz",
        "cpu.topology",
        "cpu.governor",
        "cpu.idle_states",
        "cpu.smt",
        "cpu.pm_qos",
        "system.mitigations",
        "system.swappiness",
        "system.filesystems",
        "irq.shared",
        "irq.sound",
        "trace.tracefs",
        "trace.events",
        "trace.perf_paranoid",
    ] {
        let f = expect(&r, id, Status::Unknown, &[]);
        assert!(!f.reason.is_empty() && !f.source.is_empty(), "{f:#?}");
    }
    expect(
        &r,
        "kernel.rt_throttling",
        Status::Unknown,
        &["sched_rt_runtime_us is missing"],
    );
    expect(&r, "rt.user", Status::Unknown, &["self/status is missing"]);
    // The probes are not files: no FIFO is a real failure even on an empty tree.
    expect(&r, "rt.fifo", Status::Fail, &[]);
    every_finding_is_complete(&r);
}

#[test]
fn malformed_files_give_unknown_with_the_file_named() {
    let m = Machine::base(2, "6.1.0-test");
    m.proc("self/status", "Name:\tdoctor\nUid:\tnobody\n")
        .proc(
            "self/limits",
            "Max realtime priority     lots     x\nMax locked memory\n",
        )
        .proc("sys/kernel/sched_rt_runtime_us", "abc\n")
        .proc("sys/kernel/perf_event_paranoid", "\n")
        .proc("sys/vm/swappiness", "sixty\n")
        .proc("swaps", "Filename Type\n/swapfile file 1 0 -2\n")
        .proc("timer_list", "junk\n")
        .proc("interrupts", "garbage without colons\n\0\0\n")
        .proc("cmdline", "\u{fffd}\n")
        .sys("devices/system/cpu/online", "zero-one\n")
        .sys("kernel/debug/sched/preempt", "no parentheses here\n")
        .sys(
            "devices/system/clocksource/clocksource0/current_clocksource",
            "",
        )
        .sys("class/powercap/intel-rapl:0/energy_uj", "lots\n")
        .fs("etc/group", ":::\nbroken\n")
        .fs(
            "boot/config-6.1.0-test",
            "CONFIG_HZ=fast\nnot a config line\n",
        );
    for cpu in 0..2 {
        let d = format!("devices/system/cpu/cpu{cpu}/cpufreq");
        m.sys(&format!("{d}/scaling_governor"), "\n")
            .sys(&format!("{d}/scaling_max_freq"), "many\n")
            .sys(&format!("{d}/cpuinfo_max_freq"), "\n")
            .sys(
                &format!("devices/system/cpu/cpu{cpu}/cpuidle/state0/name"),
                "POLL\n",
            )
            .sys(
                &format!("devices/system/cpu/cpu{cpu}/cpuidle/state0/latency"),
                "soon\n",
            );
    }
    let r = m.report(&probes(Some(99), true));
    expect(&r, "rt.user", Status::Unknown, &["no readable Uid line"]);
    expect(
        &r,
        "rt.rtprio_limit",
        Status::Unknown,
        &["no readable \"Max realtime priority\" line"],
    );
    expect(
        &r,
        "kernel.rt_throttling",
        Status::Unknown,
        &["holds \"abc\", which does not parse"],
    );
    expect(
        &r,
        "trace.perf_paranoid",
        Status::Unknown,
        &["does not parse"],
    );
    expect(
        &r,
        "system.swappiness",
        Status::Unknown,
        &["holds \"sixty\""],
    );
    expect(
        &r,
        "kernel.hz",
        Status::Unknown,
        &["CONFIG_HZ is not in the configuration"],
    );
    expect(
        &r,
        "kernel.hrtimers",
        Status::Unknown,
        &["lists no resolution"],
    );
    expect(&r, "cpu.energy", Status::Unknown, &["does not parse"]);
    // The "online" list is garbled, so the cpuN directories tell which CPUs exist.
    expect(
        &r,
        "cpu.governor",
        Status::Unknown,
        &["no scaling_governor is readable"],
    );
    expect(
        &r,
        "cpu.idle_states",
        Status::Unknown,
        &["states: POLL ?;", "exit latency of POLL is unreadable"],
    );
    expect(&r, "irq.shared", Status::Pass, &["no sound or USB"]);
    every_finding_is_complete(&r);
    // The report still serializes: scripts get it whole.
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["findings"].as_array().unwrap().len(), r.findings.len());
}

/// Every finding has an id, a title, a reason and a source, and text and JSON render it.
fn every_finding_is_complete(r: &Report) {
    assert!(r.findings.len() >= 30, "{} findings", r.findings.len());
    for f in &r.findings {
        assert!(
            !f.id.is_empty() && !f.title.is_empty() && !f.reason.is_empty() && !f.source.is_empty(),
            "{f:#?}"
        );
    }
    let text = r.text();
    for f in &r.findings {
        assert!(
            text.contains(&format!("({})", f.id)),
            "the text shows {}",
            f.id
        );
    }
    let mut ids: Vec<&str> = r.findings.iter().map(|f| f.id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), r.findings.len(), "ids are unique");
}

#[test]
fn a_command_line_with_terminal_escapes_is_escaped_in_the_text_and_raw_in_the_json() {
    let m = Machine::base(2, "6.8.0-test");
    // Any user can start a process whose arguments move the cursor or retitle the window.
    m.process(
        901,
        "jackd",
        &["jackd", "-d", "dummy\x1b]0;owned\x07\x1b[2J\u{9b}1m"],
    );
    let r = m.report(&probes(Some(99), true));
    let f = expect(&r, "audio.jack", Status::Pass, &["runs (pid 901)"]);
    assert!(
        f.reason.contains("\x1b]0;owned\x07"),
        "the finding keeps it raw: {f:?}"
    );
    let text = r.text();
    assert!(
        !text.contains('\x1b') && !text.contains('\x07') && !text.contains('\u{9b}'),
        "{text:?}"
    );
    assert!(
        text.contains("dummy\\x1b]0;owned\\x07\\x1b[2J\\u{9b}1m"),
        "{text}"
    );
    let json = serde_json::to_string(&r).unwrap();
    let back: Report = serde_json::from_str(&json).unwrap();
    assert_eq!(back.get("audio.jack").unwrap().reason, f.reason);
}
