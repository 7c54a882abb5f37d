//! System checks: CPU vulnerability mitigations (reported, not judged), swappiness, uclamp
//! and filesystems to avoid for audio. Runs on the main thread.

use super::Ctx;
use crate::finding::{Area, Check, Finding};
use crate::roots::{read, read_value, shown};
use xrunlab_sys::Outcome;

const AREA: Area = Area::System;

pub(super) fn check(ctx: &Ctx) -> Vec<Finding> {
    vec![
        mitigations(ctx),
        swappiness(ctx),
        uclamp(ctx),
        filesystems(ctx),
    ]
}

fn mitigations(ctx: &Ctx) -> Finding {
    let check = Check::new("system.mitigations", AREA, "CPU vulnerability mitigations");
    let dir = ctx.roots.sys("devices/system/cpu/vulnerabilities");
    let source = shown(&dir);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return check.unknown(format!("{source} is missing or unreadable"), source);
    };
    let mut names: Vec<(String, String)> = entries
        .flatten()
        .filter_map(|e| {
            let text = std::fs::read_to_string(e.path()).ok()?;
            Some((
                e.file_name().to_string_lossy().into_owned(),
                text.trim().to_owned(),
            ))
        })
        .collect();
    names.sort();
    let mitigated: Vec<&str> = names
        .iter()
        .filter(|(_, s)| s.starts_with("Mitigation"))
        .map(|(n, _)| n.as_str())
        .collect();
    let vulnerable: Vec<&str> = names
        .iter()
        .filter(|(_, s)| s.starts_with("Vulnerable"))
        .map(|(n, _)| n.as_str())
        .collect();
    let cmdline = ctx
        .cmdline
        .as_ref()
        .ok()
        .and_then(|c| c.value("mitigations"))
        .map(|v| format!("mitigations={v} on the command line; "))
        .unwrap_or_default();
    check.pass(format!(
            "reported, not judged: {cmdline}{} mitigated ({}), {} vulnerable ({}), {} not affected; \
             mitigations cost some speed on system calls and context switches, and turning them \
             off (mitigations=off) trades security for it: measure before deciding",
            mitigated.len(),
            mitigated.join(", "),
            vulnerable.len(),
            vulnerable.join(", "),
            names.len() - mitigated.len() - vulnerable.len()
        ), source)
}

fn swappiness(ctx: &Ctx) -> Finding {
    let check = Check::new("system.swappiness", AREA, "Swappiness");
    let swaps = ctx.roots.proc("swaps");
    let path = ctx.roots.proc("sys/vm/swappiness");
    let source = format!("{}, {}", shown(&swaps), shown(&path));
    let swap_devices = match read(&swaps) {
        Ok(t) => t.lines().skip(1).filter(|l| !l.trim().is_empty()).count(),
        Err(e) => return check.unknown(e.to_string(), source),
    };
    let value: u32 = match read_value(&path) {
        Ok(v) => v,
        Err(e) if swap_devices == 0 => {
            return check.pass(format!("no swap configured ({e})"), source)
        }
        Err(e) => return check.unknown(e.to_string(), source),
    };
    if swap_devices == 0 {
        check.pass(
            format!("no swap configured (vm.swappiness {value} does not apply)"),
            source,
        )
    } else if value <= 10 {
        check.pass(
            format!("vm.swappiness {value} with {swap_devices} swap device(s)"),
            source,
        )
    } else {
        check.warn(format!("vm.swappiness {value} with {swap_devices} swap device(s): audio buffers may be swapped out under memory pressure"), source)
        .with_fix("sudo sysctl vm.swappiness=10 && echo vm.swappiness=10 | sudo tee /etc/sysctl.d/90-audio.conf")
    }
}

fn uclamp(ctx: &Ctx) -> Finding {
    let check = Check::new("system.uclamp", AREA, "Utilization clamping (uclamp)");
    let source = format!(
        "sched_setattr(SCHED_FLAG_UTIL_CLAMP_MIN 512) on a scratch thread, {}",
        shown(&ctx.roots.proc("sys/kernel/sched_util_clamp_min"))
    );
    let config = ctx
        .kconfig
        .as_ref()
        .ok()
        .and_then(|c| c.get("CONFIG_UCLAMP_TASK"))
        .map(|v| format!(" (CONFIG_UCLAMP_TASK={v})"))
        .unwrap_or_default();
    match &ctx.probes.uclamp {
        Outcome::Applied { detail } => check.pass(format!("works ({detail}): xrunlab's work interval asks the scheduler for speed with uclamp.min"), source),
        Outcome::Unsupported { reason } => check.warn(format!("{reason}: xrunlab's work interval (uclamp.min) has no effect here; other settings must keep the CPU fast"), source)
        .with_fix("use a kernel built with CONFIG_UCLAMP_TASK=y"),
        Outcome::Refused { reason, .. } => check.warn(format!("refused: {reason}{config}"), source)
        .with_fix("give the audio user CAP_SYS_NICE (raising uclamp.min needs it)"),
        Outcome::NotRequested => check.unknown("not probed", source),
    }
}

fn filesystems(ctx: &Ctx) -> Finding {
    let check = Check::new("system.filesystems", AREA, "Filesystems");
    let path = ctx.roots.proc("mounts");
    let source = shown(&path);
    let text = match read(&path) {
        Ok(t) => t,
        Err(e) => return check.unknown(e.to_string(), source),
    };
    // Network and FUSE filesystems can stall a reader for a long time; reiserfs is known to
    // take long locks. Audio files streamed from them can arrive late.
    let avoid: Vec<String> = text
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (mount, kind) = (*f.get(1)?, *f.get(2)?);
            let base = kind.split('.').next().unwrap_or(kind);
            matches!(
                base,
                "fuse" | "fuseblk" | "nfs" | "nfs4" | "cifs" | "smb3" | "reiserfs" | "sshfs"
            )
            .then(|| format!("{mount} ({kind})"))
        })
        .collect();
    if avoid.is_empty() {
        check.pass("no network, FUSE or reiserfs mounts", source)
    } else {
        check
            .warn(
                format!(
                    "keep audio files off these mounts, whose reads can stall: {}",
                    avoid.join(", ")
                ),
                source,
            )
            .with_fix("record to and play from a local ext4, xfs or btrfs filesystem")
    }
}
