//! `--apply` on fixture trees: the setting is written, the guard restores the old values on
//! undo and on drop, keep leaves it, and a machine without cpufreq says it cannot.

use crate::fixture::Machine;
use crate::machines::bare_vm;
use xrunlab_doctor::apply::{apply, ApplyError, Setting};

fn with_cpufreq() -> Machine {
    let m = Machine::base(4, "6.8.0-test");
    for cpu in 0..4 {
        m.cpufreq(
            cpu,
            "intel_pstate",
            "powersave",
            "performance powersave",
            (400_000, 4_000_000, 4_000_000),
        );
    }
    m
}

fn governors(m: &Machine) -> Vec<String> {
    (0..4)
        .map(|c| {
            m.read(&format!(
                "sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor"
            ))
            .trim()
            .to_owned()
        })
        .collect()
}

#[test]
fn governor_is_applied_and_undone() {
    let m = with_cpufreq();
    let applied = apply(Setting::Governor, &m.roots()).unwrap();
    assert_eq!(governors(&m), ["performance"; 4]);
    assert_eq!(applied.changes().len(), 4);
    assert_eq!(applied.changes()[0].old, "powersave");
    let undo = applied.undo_commands();
    assert!(
        undo[0].starts_with("echo powersave | sudo tee ")
            && undo[0].ends_with("cpu0/cpufreq/scaling_governor"),
        "{undo:?}"
    );
    applied.undo().unwrap();
    assert_eq!(governors(&m), ["powersave"; 4]);

    // Dropping the guard (an early return, a panic unwinding) undoes it too.
    drop(apply(Setting::Governor, &m.roots()).unwrap());
    assert_eq!(governors(&m), ["powersave"; 4]);

    let kept = apply(Setting::Governor, &m.roots()).unwrap().keep();
    assert_eq!(kept.len(), 4);
    assert_eq!(
        governors(&m),
        ["performance"; 4],
        "--keep leaves it in force"
    );
}

#[test]
fn rt_runtime_is_applied_and_undone() {
    let m = with_cpufreq();
    let applied = apply(Setting::RtRuntime, &m.roots()).unwrap();
    assert_eq!(m.read("proc/sys/kernel/sched_rt_runtime_us"), "-1\n");
    drop(applied);
    assert_eq!(m.read("proc/sys/kernel/sched_rt_runtime_us"), "950000\n");
}

#[test]
fn a_machine_without_cpufreq_cannot_apply_the_governor() {
    let m = bare_vm();
    match apply(Setting::Governor, &m.roots()) {
        Err(ApplyError::Unavailable(why)) => assert!(why.contains("no CPU has cpufreq"), "{why}"),
        other => panic!("expected Unavailable, got {other:?}"),
    }
    m.remove("proc/sys/kernel/sched_rt_runtime_us");
    assert!(matches!(
        apply(Setting::RtRuntime, &m.roots()),
        Err(ApplyError::Unavailable(_))
    ));
}

#[test]
fn a_failed_write_restores_what_was_written() {
    let m = with_cpufreq();
    // CPU 2's governor is a directory: writing it fails after CPUs 0 and 1 were changed.
    m.remove("sys/devices/system/cpu/cpu2/cpufreq/scaling_governor")
        .sys("devices/system/cpu/cpu2/cpufreq/scaling_governor/x", "");
    match apply(Setting::Governor, &m.roots()) {
        // Reading its old value fails (EISDIR) before anything is written; either way the
        // message names the file and the io error is the source.
        Err(e @ (ApplyError::Read { .. } | ApplyError::Write(_))) => {
            use std::error::Error;
            assert!(
                e.to_string().contains("cpu2/cpufreq/scaling_governor"),
                "{e}"
            );
            let io = e
                .source()
                .and_then(|s| s.downcast_ref::<std::io::Error>())
                .expect("the source is the io::Error");
            assert_eq!(io.kind(), std::io::ErrorKind::IsADirectory, "{io}");
        }
        other => panic!("expected Read or Write, got {other:?}"),
    }
    for c in [0, 1, 3] {
        assert_eq!(
            m.read(&format!(
                "sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor"
            ))
            .trim(),
            "powersave"
        );
    }
}

#[test]
fn setting_names() {
    assert_eq!(Setting::from_name("governor"), Ok(Setting::Governor));
    assert_eq!(Setting::from_name("rt-runtime"), Ok(Setting::RtRuntime));
    let e = Setting::from_name("turbo").unwrap_err();
    assert_eq!(
        e.to_string(),
        "unknown setting \"turbo\" (allowed: governor, rt-runtime)"
    );
}
