//! Real-time scheduling: who the doctor runs as, whether SCHED_FIFO is really obtainable and up
//! to what priority, RLIMIT_RTPRIO and RLIMIT_MEMLOCK, the audio group and the limits files
//! that grant it real-time rights, and rtkit. Runs on the main thread.

use super::Ctx;
use crate::finding::{Area, Check, Finding, Status};
use crate::process::{parse_limit, Limit, CAP_IPC_LOCK, CAP_SYS_NICE};
use crate::roots::{conf_files, shown};

const AREA: Area = Area::Realtime;

/// The limits file the fixes create.
const LIMITS_FILE: &str = "/etc/security/limits.d/95-audio.conf";

pub(super) fn check(ctx: &Ctx) -> Vec<Finding> {
    vec![
        user(ctx),
        fifo(ctx),
        rtprio_limit(ctx),
        memlock_limit(ctx),
        audio_group(ctx),
        rtkit(ctx),
    ]
}

fn status_source(ctx: &Ctx) -> String {
    shown(&ctx.roots.proc("self/status"))
}

fn user(ctx: &Ctx) -> Finding {
    let check = Check::new("rt.user", AREA, "User the checks describe");
    match &ctx.process {
        Err(e) => check.unknown(e.to_string(), status_source(ctx)),
        Ok(p) if p.uid == 0 => check
            .warn(
                "running as root (uid 0): root has CAP_SYS_NICE and CAP_IPC_LOCK, so the \
             real-time findings describe root, not the user who runs your audio software",
                status_source(ctx),
            )
            .with_fix("run `xrunlab doctor` again as the user who runs your audio software"),
        Ok(p) => check.pass(
            format!(
                "running as {} (uid {}), as audio software would",
                ctx.user_label(),
                p.uid
            ),
            status_source(ctx),
        ),
    }
}

/// The limits lines that grant the user real-time rights: the fix for most failures here.
fn limits_fix(ctx: &Ctx) -> String {
    format!(
        "printf '@audio - rtprio 95\\n@audio - memlock unlimited\\n' | sudo tee {LIMITS_FILE} \
         && sudo usermod -aG audio {}, then log in again",
        ctx.user_label()
    )
}

fn fifo(ctx: &Ctx) -> Finding {
    let check = Check::new("rt.fifo", AREA, "SCHED_FIFO obtainable");
    let source = "sched_setattr(SCHED_FIFO) on a scratch thread".to_owned();
    let tried = ctx.probes.fifo_attempts.join("; ");
    let want = ctx.opts.audio_priority;
    match ctx.probes.fifo_max_priority {
        Some(p) if p >= want => check.pass(format!(
                "SCHED_FIFO up to priority {p} (audio threads use {want}); tried: {tried}"
            ), source),
        Some(p) => check.warn(format!(
                "SCHED_FIFO only up to priority {p}, below the {want} audio threads ask for; \
                 tried: {tried}"
            ), source)
        .with_fix(format!("run xrunlab with --priority {p}, or raise the limit: {}", limits_fix(ctx))),
        None => check.fail(format!("no SCHED_FIFO priority could be set: audio threads will run as SCHED_OTHER; tried: {tried}"), source)
        .with_fix(limits_fix(ctx)),
    }
}

fn limits_source(ctx: &Ctx) -> String {
    shown(&ctx.roots.proc("self/limits"))
}

/// The limit on the line starting with `label` of /proc/self/limits, or why it is unknown.
fn limit(ctx: &Ctx, label: &str) -> Result<Limit, String> {
    let text = ctx.limits.as_ref().map_err(ToString::to_string)?;
    parse_limit(text, label)
        .ok_or_else(|| format!("{} has no readable \"{label}\" line", limits_source(ctx)))
}

fn rtprio_limit(ctx: &Ctx) -> Finding {
    let check = Check::new("rt.rtprio_limit", AREA, "RLIMIT_RTPRIO");
    let limit = match limit(ctx, "Max realtime priority") {
        Ok(l) => l,
        Err(why) => return check.unknown(why, limits_source(ctx)),
    };
    let shown_limit = format!("soft {}, hard {}", limit.show_soft(""), limit.show_hard(""));
    let privileged = ctx.process.as_ref().is_ok_and(|p| p.has_cap(CAP_SYS_NICE));
    let want = u64::from(ctx.opts.audio_priority);
    let soft = limit.soft.unwrap_or(u64::MAX);
    if privileged {
        check.pass(
            format!("{shown_limit}; not needed: this process has CAP_SYS_NICE"),
            limits_source(ctx),
        )
    } else if soft >= want {
        check.pass(
            format!(
                "{shown_limit}: priorities up to {} allowed",
                limit.show_soft("")
            ),
            limits_source(ctx),
        )
    } else if soft > 0 {
        check
            .warn(
                format!("{shown_limit}: below the priority {want} audio threads ask for"),
                limits_source(ctx),
            )
            .with_fix(limits_fix(ctx))
    } else {
        check
            .fail(
                format!("{shown_limit}: no real-time priority allowed without CAP_SYS_NICE"),
                limits_source(ctx),
            )
            .with_fix(limits_fix(ctx))
    }
}

fn memlock_limit(ctx: &Ctx) -> Finding {
    let check = Check::new("rt.memlock_limit", AREA, "RLIMIT_MEMLOCK");
    let limit = match limit(ctx, "Max locked memory") {
        Ok(l) => l,
        Err(why) => return check.unknown(why, limits_source(ctx)),
    };
    let shown_limit = limit.show_soft("bytes");
    if ctx.process.as_ref().is_ok_and(|p| p.has_cap(CAP_IPC_LOCK)) {
        check.pass(
            format!("{shown_limit}; not needed: this process has CAP_IPC_LOCK (mlockall works)"),
            limits_source(ctx),
        )
    } else if limit.soft.is_none() {
        check.pass("unlimited: mlockall works", limits_source(ctx))
    } else {
        check
            .warn(
                format!(
                    "{shown_limit}: mlockall (--mlock) of a whole audio process needs more; \
                 page faults can then stall real-time threads"
                ),
                limits_source(ctx),
            )
            .with_fix(limits_fix(ctx))
    }
}

/// A line of a limits file that sets rtprio or memlock.
#[derive(Debug, Clone, PartialEq, Eq)]
struct LimitLine {
    file: String,
    domain: String,
    item: String,
    value: String,
}

/// rtprio and memlock lines of /etc/security/limits.conf and limits.d/*.conf, in the order
/// pam_limits reads them.
fn limit_lines(ctx: &Ctx) -> (Vec<LimitLine>, Vec<String>) {
    let base = ctx.roots.fs("etc/security/limits.conf");
    let mut files = vec![base];
    files.extend(conf_files(&ctx.roots.fs("etc/security/limits.d")));
    let mut lines = Vec::new();
    let mut read_files = Vec::new();
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        read_files.push(shown(&file));
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or("");
            let f: Vec<&str> = line.split_whitespace().collect();
            if let [domain, _kind, item, value] = f[..] {
                if item == "rtprio" || item == "memlock" {
                    lines.push(LimitLine {
                        file: shown(&file),
                        domain: domain.to_owned(),
                        item: item.to_owned(),
                        value: value.to_owned(),
                    });
                }
            }
        }
    }
    (lines, read_files)
}

fn audio_group(ctx: &Ctx) -> Finding {
    let check = Check::new("rt.audio_group", AREA, "Audio group and limits files");
    let (lines, files) = limit_lines(ctx);
    let mut source = vec![shown(&ctx.roots.fs("etc/group"))];
    source.push(if files.is_empty() {
        shown(&ctx.roots.fs("etc/security/limits.d"))
    } else {
        files.join(", ")
    });
    let source = source.join(", ");
    let groups = match &ctx.groups {
        Ok(g) => g,
        Err(e) => return check.unknown(e.to_string(), source),
    };
    let rt_lines: Vec<&LimitLine> = lines
        .iter()
        .filter(|l| l.item == "rtprio" && l.domain.starts_with('@'))
        .collect();
    let user = ctx.user_label();
    let member_of = |name: &str| -> bool {
        groups.iter().any(|g| {
            g.name == name
                && (g.members.contains(&user)
                    || ctx.process.as_ref().is_ok_and(|p| p.gids.contains(&g.gid)))
        })
    };
    let granting: Vec<String> = rt_lines
        .iter()
        .map(|l| format!("{} rtprio {} ({})", l.domain, l.value, l.file))
        .collect();
    if let Some(l) = rt_lines.iter().find(|l| member_of(&l.domain[1..])) {
        return check.pass(
            format!(
                "{user} is in {}, which {} grants rtprio {}",
                &l.domain[1..],
                l.file,
                l.value
            ),
            source,
        );
    }
    let is_root = ctx.process.as_ref().is_ok_and(|p| p.uid == 0);
    let has_audio = groups.iter().any(|g| g.name == "audio");
    let grants = if granting.is_empty() {
        "no limits file grants rtprio to a group".to_owned()
    } else {
        format!("limits files grant: {}", granting.join(", "))
    };
    if is_root {
        return check.pass(
            format!(
                "root needs no group (CAP_SYS_NICE); {grants}{}",
                if has_audio {
                    ""
                } else {
                    "; there is no audio group"
                }
            ),
            source,
        );
    }
    let fix = match rt_lines.first() {
        Some(l) => format!(
            "sudo usermod -aG {} {user}, then log in again",
            &l.domain[1..]
        ),
        None => limits_fix(ctx),
    };
    check
        .warn(
            format!("{user} is in no group that limits files grant real-time priority; {grants}"),
            source,
        )
        .with_fix(fix)
}

fn rtkit(ctx: &Ctx) -> Finding {
    let check = Check::new("rt.rtkit", AREA, "rtkit (RealtimeKit)");
    let candidates = [
        "usr/libexec/rtkit-daemon",
        "usr/lib/rtkit/rtkit-daemon",
        "usr/sbin/rtkit-daemon",
    ];
    let installed = candidates
        .iter()
        .map(|c| ctx.roots.fs(c))
        .find(|p| p.exists());
    let running = ctx.running(&["rtkit-daemon"]);
    let source = format!(
        "{} and {}/*/comm",
        candidates
            .iter()
            .map(|c| shown(&ctx.roots.fs(c)))
            .collect::<Vec<_>>()
            .join(", "),
        shown(&ctx.roots.proc)
    );
    let direct = ctx.probes.fifo_max_priority.is_some();
    let rttime = ctx
        .limits
        .as_ref()
        .ok()
        .and_then(|t| parse_limit(t, "Max realtime timeout"))
        .map(|l| {
            format!(
                "; RLIMIT_RTTIME is {} (rtkit requires a finite one)",
                l.show_soft("us")
            )
        })
        .unwrap_or_default();
    match (installed, running) {
        (_, Some((pid, _))) => check.pass(format!("rtkit-daemon runs (pid {pid}): desktop clients can ask it for real-time priority{rttime}"), source),
        (Some(path), None) => check.finding(if direct { Status::Pass } else { Status::Warn }, format!(
                "{} is installed but not running (it is started on demand over the system D-Bus){}{rttime}",
                shown(&path),
                if direct { "; not needed here: SCHED_FIFO is obtainable directly" } else { "" }
            ), source)
        .with_fix("sudo systemctl start rtkit-daemon"),
        (None, None) if direct => check.pass(format!("not installed; not needed: SCHED_FIFO is obtainable directly{rttime}"), source),
        (None, None) => check.warn(format!("not installed, and SCHED_FIFO is not obtainable directly{rttime}"), source)
        .with_fix(format!("sudo apt-get install rtkit, or: {}", limits_fix(ctx))),
    }
}
