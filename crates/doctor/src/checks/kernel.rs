//! Kernel checks: its build configuration, the preemption model, threaded IRQs, RT
//! throttling, high-resolution timers, the clocksource, NO_HZ and the timer frequency.
//! Runs on the main thread.

use super::{cmdline_fix, Ctx};
use crate::finding::{Area, Check, Finding, Status};
use crate::roots::{read, read_optional, read_value, shown};

const AREA: Area = Area::Kernel;

pub(super) fn check(ctx: &Ctx) -> Vec<Finding> {
    vec![
        config(ctx),
        preempt(ctx),
        threadirqs(ctx),
        rt_throttling(ctx),
        hrtimers(ctx),
        clocksource(ctx),
        nohz(ctx),
        hz(ctx),
    ]
}

fn config(ctx: &Ctx) -> Finding {
    let check = Check::new("kernel.config", AREA, "Kernel build configuration");
    match &ctx.kconfig {
        Ok(c) => check.pass(format!("found at {}", c.source), c.source.clone()),
        Err(e) => check.unknown(
            format!("not found ({e}): build options below are unknown"),
            format!(
                "{}, {}",
                shown(&ctx.roots.fs("boot/config-RELEASE")),
                shown(&ctx.roots.proc("config.gz"))
            ),
        ),
    }
}

/// A preemption model's verdict and the fix towards a better one.
fn judge_mode(mode: &str) -> (Status, Option<String>) {
    match mode {
        "full" | "lazy" | "rt" => (Status::Pass, None),
        _ => (Status::Warn, Some(cmdline_fix("preempt=full"))),
    }
}

fn preempt(ctx: &Ctx) -> Finding {
    let check = Check::new("kernel.preempt", AREA, "Preemption model");
    let realtime = ctx.roots.sys("kernel/realtime");
    if ctx.preempt_rt {
        return check.pass(
            "PREEMPT_RT: a real-time kernel (the whole kernel is preemptible)",
            shown(&realtime),
        );
    }
    let debug = ctx.roots.sys("kernel/debug/sched/preempt");
    let debug_note = match read(&debug) {
        Ok(text) => {
            // "none voluntary (full) lazy": the parenthesised one is in force.
            if let Some(mode) = text
                .split_whitespace()
                .find_map(|w| w.strip_prefix('(')?.strip_suffix(')'))
            {
                let (status, fix) = judge_mode(mode);
                let mut f = check.finding(
                    status,
                    format!("{mode} (PREEMPT_DYNAMIC; choices: {})", text.trim()),
                    shown(&debug),
                );
                f.fix = fix;
                return f;
            }
            format!("{} holds {:?}", shown(&debug), text.trim())
        }
        Err(e) => e.to_string(),
    };
    let cmdline_source = shown(&ctx.roots.proc("cmdline"));
    if let Ok(Some(mode)) = ctx.cmdline.as_ref().map(|c| c.value("preempt")) {
        let (status, fix) = judge_mode(mode);
        let mut f = check.finding(
            status,
            format!("{mode}, from preempt={mode} on the kernel command line ({debug_note})"),
            cmdline_source,
        );
        f.fix = fix;
        return f;
    }
    let Ok(config) = &ctx.kconfig else {
        return check.unknown(format!("no PREEMPT_RT ({} is not 1), {debug_note}, no preempt= on the command line, and no kernel configuration", shown(&realtime)), format!("{}, {}, {cmdline_source}", shown(&realtime), shown(&debug)));
    };
    let built = if config.enabled("CONFIG_PREEMPT_LAZY") {
        "lazy"
    } else if config.enabled("CONFIG_PREEMPT") {
        "full"
    } else if config.enabled("CONFIG_PREEMPT_VOLUNTARY") {
        "voluntary"
    } else if config.enabled("CONFIG_PREEMPT_NONE") {
        "none"
    } else {
        "unknown"
    };
    let source = format!(
        "{}, {}, {cmdline_source}, {}",
        shown(&realtime),
        shown(&debug),
        config.source
    );
    if config.enabled("CONFIG_PREEMPT_DYNAMIC") {
        // The booted mode is the build default unless preempt= says otherwise, but root can
        // switch it at run time through debugfs, which is unreadable here: say so.
        let mut f = check.unknown(
            format!(
                "the mode in force cannot be read ({debug_note}); this PREEMPT_DYNAMIC kernel's \
                 build default is \"{built}\" and the command line has no preempt=, so it is \
                 most likely \"{built}\""
            ),
            source,
        );
        if judge_mode(built).0 != Status::Pass {
            f.fix = Some(cmdline_fix("preempt=full"));
        }
        return f;
    }
    let (status, _) = judge_mode(built);
    let mut f = check.finding(
        if built == "unknown" {
            Status::Unknown
        } else {
            status
        },
        format!("\"{built}\", fixed at build time (no PREEMPT_DYNAMIC)"),
        source,
    );
    if status != Status::Pass {
        f.fix = Some(
            "install a kernel built with PREEMPT_DYNAMIC, PREEMPT or PREEMPT_RT \
             (Debian: sudo apt-get install linux-image-rt-amd64)"
                .to_owned(),
        );
    }
    f
}

fn threadirqs(ctx: &Ctx) -> Finding {
    let check = Check::new("kernel.threadirqs", AREA, "Threaded interrupt handlers");
    let source = shown(&ctx.roots.proc("cmdline"));
    if ctx.preempt_rt {
        return check.pass(
            "forced by PREEMPT_RT",
            shown(&ctx.roots.sys("kernel/realtime")),
        );
    }
    let cmdline = match &ctx.cmdline {
        Ok(c) => c,
        Err(e) => return check.unknown(e.to_string(), source),
    };
    if cmdline.has("threadirqs") {
        return check.pass("threadirqs is on the kernel command line: interrupt handlers run in threads whose priority can be set below audio", source);
    }
    let forced_threading = ctx
        .kconfig
        .as_ref()
        .ok()
        .and_then(|c| c.get("CONFIG_IRQ_FORCED_THREADING"));
    let fix = if forced_threading == Some("n") {
        "this kernel lacks CONFIG_IRQ_FORCED_THREADING: install one that has it (most distribution kernels do)".to_owned()
    } else {
        cmdline_fix("threadirqs")
    };
    check.warn("no threadirqs on the kernel command line: interrupt handlers run in hard IRQ context, ahead of every audio thread", source)
    .with_fix(fix)
}

fn rt_throttling(ctx: &Ctx) -> Finding {
    let check = Check::new("kernel.rt_throttling", AREA, "RT throttling");
    let runtime_path = ctx.roots.proc("sys/kernel/sched_rt_runtime_us");
    let period_path = ctx.roots.proc("sys/kernel/sched_rt_period_us");
    let source = format!("{}, {}", shown(&runtime_path), shown(&period_path));
    let runtime: i64 = match read_value(&runtime_path) {
        Ok(v) => v,
        Err(e) => return check.unknown(e.to_string(), source),
    };
    if runtime < 0 {
        return check.pass("off (sched_rt_runtime_us = -1): real-time threads may use every CPU cycle; a runaway one can hang its CPU", source);
    }
    let period: i64 = match read_value(&period_path) {
        Ok(v) if v > 0 => v,
        Ok(v) => return check.unknown(format!("sched_rt_period_us is {v}"), source),
        Err(e) => return check.unknown(e.to_string(), source),
    };
    let pct = runtime as f64 * 100.0 / period as f64;
    let reason = format!(
        "real-time threads may use {runtime} us of every {period} us ({pct:.0} %); past that they are stopped for the rest of the period"
    );
    if pct >= 90.0 {
        check.pass(
            format!("{reason}: enough unless audio needs more than {pct:.0} % of a CPU"),
            source,
        )
    } else {
        check.warn(reason, source).with_fix(
            "sudo sysctl kernel.sched_rt_runtime_us=950000 (or, undone on exit: xrunlab doctor --apply rt-runtime)",
        )
    }
}

fn hrtimers(ctx: &Ctx) -> Finding {
    let check = Check::new("kernel.hrtimers", AREA, "High-resolution timers");
    let path = ctx.roots.proc("timer_list");
    let from_list = read(&path).map(|text| {
        text.lines()
            .filter_map(|l| {
                let v = l.trim().strip_prefix(".resolution:")?;
                v.trim().strip_suffix("nsecs")?.trim().parse::<u64>().ok()
            })
            .collect::<Vec<u64>>()
    });
    match from_list {
        Ok(res) if !res.is_empty() => {
            let best = *res.iter().min().unwrap_or(&0);
            if best <= 1 {
                check.pass("active: timer resolution 1 ns", shown(&path))
            } else {
                check.fail(format!("inactive: timer resolution {best} ns, so sleeps end on the next tick"), shown(&path))
                .with_fix("use a kernel built with CONFIG_HIGH_RES_TIMERS=y, and remove highres=off from the kernel command line")
            }
        }
        other => {
            let why = match other {
                Ok(_) => format!("{} lists no resolution", shown(&path)),
                Err(e) => e.to_string(),
            };
            match &ctx.kconfig {
                Ok(c) if c.enabled("CONFIG_HIGH_RES_TIMERS") => check.pass(
                    format!("built in (CONFIG_HIGH_RES_TIMERS=y); {why}"),
                    c.source.clone(),
                ),
                Ok(c) if c.get("CONFIG_HIGH_RES_TIMERS").is_some() => check
                    .fail(
                        format!("not built in (CONFIG_HIGH_RES_TIMERS is not set); {why}"),
                        c.source.clone(),
                    )
                    .with_fix("use a kernel built with CONFIG_HIGH_RES_TIMERS=y"),
                _ => check.unknown(why, shown(&path)),
            }
        }
    }
}

fn clocksource(ctx: &Ctx) -> Finding {
    let check = Check::new("kernel.clocksource", AREA, "Clocksource");
    let dir = ctx.roots.sys("devices/system/clocksource/clocksource0");
    let current = dir.join("current_clocksource");
    let available = read_optional(&dir.join("available_clocksource"))
        .ok()
        .flatten()
        .unwrap_or_default();
    let source = shown(&current);
    let name = match read(&current) {
        Ok(t) => t.trim().to_owned(),
        Err(e) => return check.unknown(e.to_string(), source),
    };
    match name.as_str() {
        "tsc"
        | "kvm-clock"
        | "arch_sys_counter"
        | "hyperv_clocksource_tsc_page"
        | "riscv_clocksource" => {
            check.pass(format!("{name}: clock reads are cheap (vDSO)"), source)
        }
        "jiffies" => check
            .fail("jiffies: time only advances by ticks".to_owned(), source)
            .with_fix(format!(
                "check dmesg for clocksource errors; available: {available}"
            )),
        _ => {
            let f = check.warn(
                format!(
                    "{name}: every clock read is a slow device access (available: {available})"
                ),
                source,
            );
            if available.split_whitespace().any(|c| c == "tsc") {
                f.with_fix("echo tsc | sudo tee /sys/devices/system/clocksource/clocksource0/current_clocksource")
            } else {
                f
            }
        }
    }
}

fn nohz(ctx: &Ctx) -> Finding {
    let check = Check::new("kernel.nohz", AREA, "Tickless kernel (NO_HZ)");
    let full_path = ctx.roots.sys("devices/system/cpu/nohz_full");
    let full = read_optional(&full_path)
        .ok()
        .flatten()
        .filter(|s| !s.is_empty() && s != "(null)");
    let full_note = match &full {
        Some(cpus) => format!("; nohz_full CPUs: {cpus}"),
        None => String::new(),
    };
    if ctx
        .cmdline
        .as_ref()
        .is_ok_and(|c| c.value("nohz") == Some("off"))
    {
        return check.warn("nohz=off on the kernel command line: idle CPUs take every tick", shown(&ctx.roots.proc("cmdline")))
        .with_fix("remove nohz=off from GRUB_CMDLINE_LINUX_DEFAULT in /etc/default/grub, then run `sudo update-grub` and reboot");
    }
    match &ctx.kconfig {
        Ok(c)
            if c.enabled("CONFIG_NO_HZ_IDLE")
                || c.enabled("CONFIG_NO_HZ_FULL")
                || c.enabled("CONFIG_NO_HZ") =>
        {
            let kind = if c.enabled("CONFIG_NO_HZ_FULL") {
                "NO_HZ_FULL"
            } else {
                "NO_HZ_IDLE"
            };
            check.pass(
                format!("{kind}: idle CPUs skip the tick{full_note}"),
                format!("{}, {}", c.source, shown(&full_path)),
            )
        }
        Ok(c) => check
            .warn(
                format!("periodic ticks on every CPU (no CONFIG_NO_HZ_IDLE){full_note}"),
                c.source.clone(),
            )
            .with_fix("use a kernel built with CONFIG_NO_HZ_IDLE=y"),
        Err(e) => check.unknown(
            format!("no kernel configuration ({e}){full_note}"),
            shown(&full_path),
        ),
    }
}

fn hz(ctx: &Ctx) -> Finding {
    let check = Check::new("kernel.hz", AREA, "Timer frequency (CONFIG_HZ)");
    let config = match &ctx.kconfig {
        Ok(c) => c,
        Err(e) => return check.unknown(format!("no kernel configuration ({e})"), "CONFIG_HZ"),
    };
    let Some(hz) = config.get("CONFIG_HZ").and_then(|v| v.parse::<u32>().ok()) else {
        return check.unknown(
            "CONFIG_HZ is not in the configuration",
            config.source.clone(),
        );
    };
    if config.enabled("CONFIG_HIGH_RES_TIMERS") || hz >= 1000 {
        check.pass(
            format!(
                "{hz} Hz: the scheduler tick; audio wake-ups use high-resolution timers, not ticks"
            ),
            config.source.clone(),
        )
    } else {
        check
            .warn(
                format!(
                    "{hz} Hz without high-resolution timers: sleeps end on {} ms ticks",
                    1000 / hz.max(1)
                ),
                config.source.clone(),
            )
            .with_fix("use a kernel built with CONFIG_HIGH_RES_TIMERS=y (or CONFIG_HZ_1000=y)")
    }
}
