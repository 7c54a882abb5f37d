//! Tracing checks: whether the kernel tracing that dropout forensics needs is there —
//! tracefs mounted (or mountable), the sched and irq events, and perf_event_paranoid for
//! reading them through perf. Runs on the main thread.

use super::Ctx;
use crate::finding::{Area, Check, Finding};
use crate::process::{CAP_PERFMON, CAP_SYS_ADMIN};
use crate::roots::{read, read_value, shown};

const AREA: Area = Area::Tracing;

/// The tracepoints xrunlab's trace blames late buffers with, as `group/event`.
pub const EVENTS: [&str; 7] = [
    "sched/sched_switch",
    "sched/sched_migrate_task",
    "sched/sched_waking",
    "irq/irq_handler_entry",
    "irq/irq_handler_exit",
    "irq/softirq_entry",
    "irq/softirq_exit",
];

pub(super) fn check(ctx: &Ctx) -> Vec<Finding> {
    let (tracefs, mounted) = tracefs(ctx);
    vec![tracefs, events(ctx, mounted), paranoid(ctx)]
}

/// Finds tracefs in /proc/mounts; returns the finding and whether it is mounted at
/// /sys/kernel/tracing.
fn tracefs(ctx: &Ctx) -> (Finding, bool) {
    let check = Check::new("trace.tracefs", AREA, "tracefs");
    let mounts = ctx.roots.proc("mounts");
    let filesystems = ctx.roots.proc("filesystems");
    let source = format!("{}, {}", shown(&mounts), shown(&filesystems));
    let text = match read(&mounts) {
        Ok(t) => t,
        Err(e) => return (check.unknown(e, source), false),
    };
    let points: Vec<&str> = text
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.get(2) == Some(&"tracefs"))
                .then(|| f.get(1).copied())
                .flatten()
        })
        .collect();
    if points.contains(&"/sys/kernel/tracing") {
        let f = check.pass("mounted at /sys/kernel/tracing", source);
        return (f, true);
    }
    let known = read(&filesystems).map(|t| {
        t.lines()
            .any(|l| l.split_whitespace().last() == Some("tracefs"))
    });
    let fix = "sudo mount -t tracefs nodev /sys/kernel/tracing";
    let f = match (points.first(), known) {
        (Some(p), _) => check
            .warn(
                format!("mounted at {p}, not at /sys/kernel/tracing where xrunlab looks"),
                source,
            )
            .with_fix(fix),
        (None, Ok(true)) => check
            .warn(
                "not mounted, but the kernel has it: dropout forensics need it mounted",
                source,
            )
            .with_fix(fix),
        (None, Ok(false)) => check
            .warn(
                "this kernel has no tracefs (CONFIG_TRACING off): no dropout forensics",
                source,
            )
            .with_fix("use a kernel built with CONFIG_FTRACE=y"),
        (None, Err(e)) => check.unknown(format!("not mounted; {e}"), source),
    };
    (f, false)
}

fn events(ctx: &Ctx, mounted: bool) -> Finding {
    let check = Check::new("trace.events", AREA, "Scheduler and IRQ trace events");
    let dir = ctx.roots.sys("kernel/tracing/events");
    let source = shown(&dir);
    if !mounted {
        return check.unknown(
            "tracefs is not mounted at /sys/kernel/tracing, so its events cannot be listed",
            source,
        );
    }
    let missing: Vec<&str> = EVENTS
        .iter()
        .copied()
        .filter(|e| !dir.join(e).is_dir())
        .collect();
    if missing.is_empty() {
        check.pass(format!("all present: {}", EVENTS.join(", ")), source)
    } else {
        check.warn(format!("missing: {} (blame cards will lack them)", missing.join(", ")), source)
        .with_fix("use a kernel built with CONFIG_FTRACE=y and CONFIG_TRACING=y (the sched and irq events come with it)")
    }
}

fn paranoid(ctx: &Ctx) -> Finding {
    let check = Check::new("trace.perf_paranoid", AREA, "perf_event_paranoid");
    let path = ctx.roots.proc("sys/kernel/perf_event_paranoid");
    let source = format!(
        "{}, {}",
        shown(&path),
        shown(&ctx.roots.proc("self/status"))
    );
    let value: i32 = match read_value(&path) {
        Ok(v) => v,
        Err(e) => return check.unknown(e, source),
    };
    let privileged = ctx
        .process
        .as_ref()
        .is_ok_and(|p| p.has_cap(CAP_PERFMON) || p.has_cap(CAP_SYS_ADMIN));
    if privileged {
        check.pass(
            format!("{value}; not limiting: this process has CAP_PERFMON/CAP_SYS_ADMIN"),
            source,
        )
    } else if value <= -1 {
        check.pass(format!("{value}: any user may record tracepoints"), source)
    } else {
        check
            .warn(
                format!("{value}: without CAP_PERFMON, tracepoint records (raw samples) need -1"),
                source,
            )
            .with_fix("sudo sysctl kernel.perf_event_paranoid=-1 (or run the trace as root)")
    }
}
