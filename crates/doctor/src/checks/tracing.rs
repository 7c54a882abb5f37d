//! Tracing checks: whether the kernel tracing that dropout forensics needs is there —
//! tracefs mounted (or mountable), the sched and irq events, and perf_event_paranoid for
//! reading them through perf, and whether this user can trace at all (and the least-privilege
//! fix when not). Runs on the main thread.

use super::Ctx;
use crate::finding::{Area, Check, Finding, Status};
use crate::process::{
    ProcessStatus, CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_PERFMON, CAP_SYS_ADMIN,
};
use crate::roots::{read, read_value, shown};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

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
    let user = as_user(ctx, mounted);
    let recorder = recorder(ctx, &user);
    vec![tracefs, events(ctx, mounted), paranoid(ctx), user, recorder]
}

/// The directory `path` is in, or the nearest one above it that exists (the recorder creates
/// the rest), and whether this process may create files there.
fn writable_place(path: &Path, p: &ProcessStatus) -> Result<String, String> {
    let dir = path
        .ancestors()
        .skip(1)
        .find(|d| d.is_dir())
        .ok_or_else(|| format!("no directory above {} exists", path.display()))?;
    if p.has_cap(CAP_DAC_OVERRIDE) {
        return Ok(format!("history at {} (CAP_DAC_OVERRIDE)", path.display()));
    }
    let meta = std::fs::metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    // Write and search: 2 | 1.
    if permits(&meta, p, 3) {
        Ok(format!("history at {}", path.display()))
    } else {
        Err(format!(
            "{} is mode {:o}, owner {}:{}: this user cannot create the history {} there",
            dir.display(),
            meta.mode() & 0o7777,
            meta.uid(),
            meta.gid(),
            path.display()
        ))
    }
}

/// Whether `xrunlab record` could run here and explain what it records: a place for its history
/// this process may write, the kernel's events (`user`, the finding above), and an audio server
/// to record.
fn recorder(ctx: &Ctx, user: &Finding) -> Finding {
    let check = Check::new(
        "trace.recorder",
        AREA,
        "The flight recorder could run (xrunlab record)",
    );
    let source = format!(
        "{}, the history's default place, the kernel tracing finding (trace.user), the \
         processes in {}",
        shown(&ctx.roots.proc("self/status")),
        shown(&ctx.roots.proc(""))
    );
    let p = match &ctx.process {
        Ok(p) => p,
        Err(e) => return check.unknown(e.to_string(), source),
    };
    let mut have = Vec::new();
    let mut missing = Vec::new();
    let mut fixes = Vec::new();
    match &ctx.probes.history {
        None => {
            missing
                .push("no place for the history (neither XDG_STATE_HOME nor HOME is set)".into());
            fixes.push("give it one: xrunlab record --db FILE".to_owned());
        }
        Some(path) => match writable_place(path, p) {
            Ok(place) => have.push(place),
            Err(why) => {
                missing.push(why);
                fixes.push("give it a file this user may write: xrunlab record --db FILE".into());
            }
        },
    }
    if user.status == Status::Pass {
        have.push("kernel events readable".to_owned());
    } else {
        missing.push(
            "the kernel's events are not readable, so cards name the late node but not what held \
             it (trace.user says why)"
                .to_owned(),
        );
        if let Some(fix) = &user.fix {
            fixes.push(fix.clone());
        }
    }
    match ctx.running(&["pipewire", "jackd", "jackdbus"]) {
        Some((pid, comm)) => have.push(format!("{comm} (pid {pid}) to record")),
        None => missing.push(
            "no audio server runs (pipewire, jackd), so the recorder would wait for one".to_owned(),
        ),
    }
    if missing.is_empty() {
        return check.pass(format!("yes: {}", have.join("; ")), source);
    }
    let f = check.warn(format!("not fully: {}", missing.join("; ")), source);
    if fixes.is_empty() {
        f
    } else {
        f.with_fix(fixes.join("; "))
    }
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
        Err(e) => return (check.unknown(e.to_string(), source), false),
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
        Err(e) => return check.unknown(e.to_string(), source),
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

/// The event format the tracer reads first, below the tracefs root: every directory on the way
/// must be searchable and the file readable.
const FORMAT_PATH: [&str; 4] = ["events", "sched", "sched_switch", "format"];

/// Whether the mode bits of `meta` grant `want` (4 read, 1 search) to a process with `p`'s
/// ids and no DAC capability: the owner's bits, else the group's, else the others'.
fn permits(meta: &std::fs::Metadata, p: &ProcessStatus, want: u32) -> bool {
    let mode = meta.mode();
    let bits = if meta.uid() == p.uid {
        mode >> 6
    } else if p.gids.contains(&meta.gid()) {
        mode >> 3
    } else {
        mode
    };
    bits & want == want
}

/// Whether `p` can read the tracer's event formats under the tracefs at `root`: `Ok` says
/// how, `Err` names the first path that stops it, with its mode and owner.
fn formats_readable(root: &Path, p: &ProcessStatus) -> Result<String, String> {
    if p.has_cap(CAP_DAC_READ_SEARCH) || p.has_cap(CAP_DAC_OVERRIDE) {
        return Ok("the event formats are readable through CAP_DAC_READ_SEARCH".to_owned());
    }
    let mut path = root.to_path_buf();
    let mut group_used = None;
    for (i, part) in std::iter::once("").chain(FORMAT_PATH).enumerate() {
        if !part.is_empty() {
            path.push(part);
        }
        let meta = std::fs::metadata(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let want = if i == FORMAT_PATH.len() { 4 } else { 1 };
        if !permits(&meta, p, want) {
            return Err(format!(
                "{} is mode {:o} owned by {}:{}, which gives uid {} (groups {}) no {}",
                path.display(),
                meta.mode() & 0o7777,
                meta.uid(),
                meta.gid(),
                p.uid,
                p.gids
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
                if want == 4 {
                    "read access"
                } else {
                    "search access"
                },
            ));
        }
        if meta.uid() != p.uid && p.gids.contains(&meta.gid()) && meta.mode() & want == 0 {
            group_used = Some(meta.gid());
        }
    }
    Ok(match group_used {
        Some(gid) => format!("the event formats are readable through group {gid}"),
        None => "the event formats are readable by this user".to_owned(),
    })
}

/// "Can `--explain` and `watch --trace` trace as this user?": tracefs's event formats must be
/// readable (tracefs mounted: mounting needs CAP_SYS_ADMIN), and perf must allow system-wide
/// tracepoints with raw samples (CAP_PERFMON, or perf_event_paranoid -1). The fix is the least
/// privilege that closes the gap: CAP_PERFMON on the binary and tracefs mounted with a group
/// the user is in, or CAP_DAC_READ_SEARCH on the binary instead of the group mount.
fn as_user(ctx: &Ctx, mounted: bool) -> Finding {
    let check = Check::new(
        "trace.user",
        AREA,
        "Kernel tracing as this user (--explain, watch --trace)",
    );
    let tracefs = ctx.roots.sys("kernel/tracing");
    let paranoid_path = ctx.roots.proc("sys/kernel/perf_event_paranoid");
    let source = format!(
        "{}, {}, {}, {}",
        shown(&ctx.roots.proc("self/status")),
        shown(&ctx.roots.proc("mounts")),
        shown(&tracefs.join(FORMAT_PATH.join("/"))),
        shown(&paranoid_path)
    );
    let p = match &ctx.process {
        Ok(p) => p,
        Err(e) => return check.unknown(e.to_string(), source),
    };
    let perf = if p.has_cap(CAP_PERFMON) || p.has_cap(CAP_SYS_ADMIN) {
        Ok("perf tracepoints through CAP_PERFMON".to_owned())
    } else {
        match read_value::<i32>(&paranoid_path) {
            Ok(v) if v <= -1 => Ok(format!("perf tracepoints through perf_event_paranoid {v}")),
            Ok(v) => Err(format!(
                "perf_event_paranoid is {v} and the process lacks CAP_PERFMON \
                 (system-wide tracepoints with raw samples need one or paranoid -1)"
            )),
            Err(e) => Err(e.to_string()),
        }
    };
    let formats = if !mounted {
        if p.has_cap(CAP_SYS_ADMIN) {
            Ok("tracefs is not mounted; xrunlab mounts it (CAP_SYS_ADMIN)".to_owned())
        } else {
            Err(
                "tracefs is not mounted at /sys/kernel/tracing and mounting it needs CAP_SYS_ADMIN"
                    .to_owned(),
            )
        }
    } else {
        formats_readable(&tracefs, p)
    };
    if let (Ok(f), Ok(perf)) = (&formats, &perf) {
        return check.pass(format!("yes: {f}; {perf}"), source);
    }
    let bin = std::fs::read_link(ctx.roots.proc("self/exe"))
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "\"$(command -v xrunlab)\"".to_owned());
    let group = ctx
        .groups
        .as_ref()
        .ok()
        .and_then(|g| g.iter().find(|g| g.gid == p.gid))
        .map_or_else(|| p.gid.to_string(), |g| g.name.clone());
    let options = format!("gid={group},mode=0750");
    let mount = if mounted {
        format!("sudo mount -o remount,{options} /sys/kernel/tracing")
    } else {
        format!("sudo mount -t tracefs -o {options} nodev /sys/kernel/tracing")
    };
    let keep = format!(
        "(to keep it across reboots, /etc/fstab: `tracefs /sys/kernel/tracing tracefs {options} 0 0`)"
    );
    let missing: Vec<&str> = [&formats, &perf]
        .into_iter()
        .filter_map(|r| r.as_ref().err().map(String::as_str))
        .collect();
    let fix = match (&formats, &perf) {
        (Err(_), Err(_)) => format!(
            "sudo setcap cap_perfmon+ep {bin} && {mount} {keep}; or, letting the binary read \
             every file instead of the group mount: sudo setcap cap_perfmon,cap_dac_read_search+ep {bin}"
        ),
        (Err(_), Ok(_)) => format!("{mount} {keep}"),
        _ => format!(
            "sudo setcap cap_perfmon+ep {bin} (or, for every user and program: \
             sudo sysctl kernel.perf_event_paranoid=-1)"
        ),
    };
    check
        .warn(format!("no: {}", missing.join("; ")), source)
        .with_fix(fix)
}
