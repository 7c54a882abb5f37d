//! "Can --explain/watch trace as this user?" (`trace.user`) on fixture machines: no rights
//! gets the setcap and group-mount fix, CAP_PERFMON with a tracefs group passes, a missing
//! half gets only its own fix, an unmounted tracefs gets the mount command, root passes.

use crate::fixture::{expect, fix, probes, Machine};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use xrunlab_doctor::Status;

const CAP_PERFMON: u64 = 1 << 38;
/// A uid no test runner has, so the fixture's tracefs files (owned by the runner) are not its.
const UID: u32 = 4242;

/// The base machine with user "alice" as uid [`UID`] in `groups` with capabilities `caps`,
/// and tracefs's root and sched_switch format at modes `root_mode` / `format_mode`, as the
/// kernel creates them (0700 and 0440 by default).
fn machine(groups: &[u32], caps: u64, root_mode: u32, format_mode: u32) -> Machine {
    let m = Machine::base(2, "6.12.0-amd64");
    m.user(UID, groups, caps)
        .fs(
            "etc/group",
            &format!("root:x:0:\naudio:x:29:alice\nalice:x:{UID}:\n"),
        )
        .fs(
            "etc/passwd",
            &format!(
                "root:x:0:0:root:/root:/bin/bash\nalice:x:{UID}:{UID}::/home/alice:/bin/bash\n"
            ),
        );
    let tracing = m.roots().sys.join("kernel/tracing");
    let format = tracing.join("events/sched/sched_switch/format");
    std::fs::set_permissions(&tracing, PermissionsExt::from_mode(root_mode)).unwrap();
    std::fs::set_permissions(&format, PermissionsExt::from_mode(format_mode)).unwrap();
    m
}

/// The group that owns the fixture's tracefs files (the test runner's).
fn tracefs_gid(m: &Machine) -> u32 {
    std::fs::metadata(m.roots().sys.join("kernel/tracing"))
        .unwrap()
        .gid()
}

#[test]
fn without_rights_the_fix_is_cap_perfmon_and_a_tracefs_group_mount() {
    let m = machine(&[29], 0, 0o700, 0o440);
    let r = m.report(&probes(None, true));
    let f = expect(
        &r,
        "trace.user",
        Status::Warn,
        &[
            "no: ",
            "kernel/tracing is mode 700",
            "no search access",
            "perf_event_paranoid is 2 and the process lacks CAP_PERFMON",
        ],
    );
    let fix = fix(&f);
    assert!(
        fix.starts_with(
            "sudo setcap cap_perfmon+ep \"$(command -v xrunlab)\" && \
             sudo mount -o remount,gid=alice,mode=0750 /sys/kernel/tracing"
        ),
        "{fix}"
    );
    assert!(
        fix.contains("tracefs /sys/kernel/tracing tracefs gid=alice,mode=0750 0 0"),
        "{fix}"
    );
    assert!(
        fix.ends_with("sudo setcap cap_perfmon,cap_dac_read_search+ep \"$(command -v xrunlab)\""),
        "{fix}"
    );
}

#[test]
fn cap_perfmon_and_a_tracefs_group_are_enough() {
    let m = machine(&[], CAP_PERFMON, 0o750, 0o440);
    let gid = tracefs_gid(&m);
    m.user(UID, &[29, gid], CAP_PERFMON);
    let r = m.report(&probes(None, true));
    expect(
        &r,
        "trace.user",
        Status::Pass,
        &[
            &format!("yes: the event formats are readable through group {gid}"),
            "perf tracepoints through CAP_PERFMON",
        ],
    );
}

#[test]
fn a_readable_tracefs_without_perf_rights_gets_only_the_setcap_fix() {
    let m = machine(&[], 0, 0o750, 0o440);
    let gid = tracefs_gid(&m);
    m.user(UID, &[gid], 0);
    let r = m.report(&probes(None, true));
    let f = expect(
        &r,
        "trace.user",
        Status::Warn,
        &["perf_event_paranoid is 2"],
    );
    assert!(!f.reason.contains("tracing is mode"), "{}", f.reason);
    assert_eq!(
        fix(&f),
        "sudo setcap cap_perfmon+ep \"$(command -v xrunlab)\" (or, for every user and \
         program: sudo sysctl kernel.perf_event_paranoid=-1)"
    );
    // perf_event_paranoid -1 opens perf to everyone: then the formats are all that matter.
    m.proc("sys/kernel/perf_event_paranoid", "-1\n");
    expect(
        &m.report(&probes(None, true)),
        "trace.user",
        Status::Pass,
        &["perf tracepoints through perf_event_paranoid -1"],
    );
}

#[test]
fn cap_perfmon_without_the_group_gets_only_the_mount_fix() {
    let m = machine(&[29], CAP_PERFMON, 0o700, 0o440);
    let r = m.report(&probes(None, true));
    let f = expect(
        &r,
        "trace.user",
        Status::Warn,
        &["kernel/tracing is mode 700"],
    );
    assert!(!f.reason.contains("perf_event_paranoid"), "{}", f.reason);
    assert!(
        fix(&f).starts_with("sudo mount -o remount,gid=alice,mode=0750 /sys/kernel/tracing"),
        "{}",
        fix(&f)
    );
}

#[test]
fn an_unmounted_tracefs_gets_the_mount_with_the_group() {
    let m = machine(&[29], CAP_PERFMON, 0o700, 0o440);
    m.proc("mounts", "/dev/vda1 / ext4 rw,relatime 0 0\n");
    let r = m.report(&probes(None, true));
    let f = expect(
        &r,
        "trace.user",
        Status::Warn,
        &["not mounted at /sys/kernel/tracing and mounting it needs CAP_SYS_ADMIN"],
    );
    assert!(
        fix(&f)
            .starts_with("sudo mount -t tracefs -o gid=alice,mode=0750 nodev /sys/kernel/tracing"),
        "{}",
        fix(&f)
    );
}

#[test]
fn root_can_trace() {
    let m = crate::machines::bare_vm();
    expect(
        &m.report(&probes(None, true)),
        "trace.user",
        Status::Pass,
        &["CAP_DAC_READ_SEARCH", "CAP_PERFMON"],
    );
}

/// `trace.recorder`: with no place for the history, no tracing rights and no server, each is
/// said, with the fixes for the first two.
#[test]
fn the_recorder_check_says_each_thing_it_lacks_and_how_to_get_it() {
    let m = machine(&[29], 0, 0o700, 0o440);
    let r = m.report(&probes(None, true));
    let f = expect(
        &r,
        "trace.recorder",
        Status::Warn,
        &[
            "not fully: ",
            "no place for the history",
            "the kernel's events are not readable",
            "no audio server runs (pipewire, jackd)",
        ],
    );
    let fix = fix(&f);
    assert!(
        fix.starts_with("give it one: xrunlab record --db FILE; "),
        "{fix}"
    );
    assert!(fix.contains("sudo setcap cap_perfmon+ep"), "{fix}");
}

/// `trace.recorder` passes with a history place this user may write, tracing rights and a
/// server running; a place it may not write is named with its mode and owner.
#[test]
fn the_recorder_check_passes_with_a_writable_place_rights_and_a_server() {
    let m = machine(&[], CAP_PERFMON, 0o750, 0o440);
    let gid = tracefs_gid(&m);
    m.user(UID, &[29, gid], CAP_PERFMON);
    m.process(4321, "pipewire", &["/usr/bin/pipewire"]);
    let state = tempfile::tempdir().unwrap();
    std::fs::set_permissions(state.path(), PermissionsExt::from_mode(0o777)).unwrap();
    // The recorder makes xrunlab/ itself: the nearest directory that exists is what counts.
    let db = state.path().join("xrunlab/history.db");
    let mut p = probes(None, true);
    p.history = Some(db.clone());
    expect(
        &m.report(&p),
        "trace.recorder",
        Status::Pass,
        &[
            &format!("yes: history at {}", db.display()),
            "kernel events readable",
            "pipewire (pid 4321) to record",
        ],
    );
    // The same directory at 0755, owned by the test runner, not by alice.
    std::fs::set_permissions(state.path(), PermissionsExt::from_mode(0o755)).unwrap();
    let f = expect(
        &m.report(&p),
        "trace.recorder",
        Status::Warn,
        &["is mode 755", "this user cannot create the history"],
    );
    assert!(!f.reason.contains("kernel's events"), "{}", f.reason);
    assert_eq!(
        fix(&f),
        "give it a file this user may write: xrunlab record --db FILE"
    );
}
