//! CPU and power checks: topology and core types, the cpufreq governor and EPP, frequency
//! limits and boost, SMT, idle-state exit latencies against the buffer period, PM QoS and
//! RAPL. Runs on the main thread.

use super::Ctx;
use crate::finding::{Area, Check, Finding, Status};
use crate::roots::{read_optional, shown};
use std::collections::BTreeMap;
use xrunlab_sys::cpu::{format_cpu_list, online_cpus};
use xrunlab_sys::{cpu_topology, idle_states};

const AREA: Area = Area::CpuPower;

/// One CPU's cpufreq attributes (each `None` when the file is absent or unreadable).
#[derive(Debug, Default)]
struct Freq {
    cpu: usize,
    driver: Option<String>,
    governor: Option<String>,
    available_governors: Option<String>,
    epp: Option<String>,
    min_khz: Option<u64>,
    max_khz: Option<u64>,
    hw_max_khz: Option<u64>,
}

fn freqs(ctx: &Ctx) -> Vec<Freq> {
    online_cpus(&ctx.roots.sys)
        .into_iter()
        .filter_map(|cpu| {
            let d = ctx
                .roots
                .sys(&format!("devices/system/cpu/cpu{cpu}/cpufreq"));
            if !d.is_dir() {
                return None;
            }
            // An empty attribute says nothing, like a missing one.
            let text = |name: &str| {
                read_optional(&d.join(name))
                    .ok()
                    .flatten()
                    .filter(|v| !v.is_empty())
            };
            let khz = |name: &str| text(name).and_then(|v| v.parse().ok());
            Some(Freq {
                cpu,
                driver: text("scaling_driver"),
                governor: text("scaling_governor"),
                available_governors: text("scaling_available_governors"),
                epp: text("energy_performance_preference"),
                min_khz: khz("scaling_min_freq"),
                max_khz: khz("scaling_max_freq"),
                hw_max_khz: khz("cpuinfo_max_freq"),
            })
        })
        .collect()
}

/// "performance: 0-3, powersave: 4-7" from per-CPU values.
fn grouped(values: impl Iterator<Item = (usize, String)>) -> String {
    let mut groups: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (cpu, v) in values {
        groups.entry(v).or_default().push(cpu);
    }
    groups
        .iter()
        .map(|(v, cpus)| format!("{v} on CPUs {}", format_cpu_list(cpus)))
        .collect::<Vec<_>>()
        .join(", ")
}

pub(super) fn check(ctx: &Ctx) -> Vec<Finding> {
    let freqs = freqs(ctx);
    vec![
        topology(ctx),
        governor(ctx, &freqs),
        epp(ctx, &freqs),
        limits(ctx, &freqs),
        smt(ctx),
        idle(ctx),
        pm_qos(ctx),
        energy(ctx),
    ]
}

fn cpufreq_source(ctx: &Ctx, file: &str) -> String {
    shown(
        &ctx.roots
            .sys(&format!("devices/system/cpu/cpu*/cpufreq/{file}")),
    )
}

fn no_cpufreq(ctx: &Ctx, check: &Check, file: &str) -> Finding {
    check.unknown("no cpufreq on this machine (a virtual machine, or the firmware manages frequency): nothing here can read or set it", cpufreq_source(ctx, file))
}

fn topology(ctx: &Ctx) -> Finding {
    let check = Check::new("cpu.topology", AREA, "CPUs and core types");
    let topo = cpu_topology(&ctx.roots.sys);
    let source = shown(&ctx.roots.sys("devices/system/cpu"));
    if topo.is_empty() {
        return check.unknown("no online CPUs listed", source);
    }
    let cores = xrunlab_sys::cpu::physical_cores(
        &ctx.roots.sys,
        &topo.iter().map(|t| t.id).collect::<Vec<_>>(),
    );
    let of_type = |kind: &str| -> Vec<usize> {
        topo.iter()
            .filter(|t| t.core_type.as_deref() == Some(kind))
            .map(|t| t.id)
            .collect()
    };
    let (big, little) = (of_type("performance"), of_type("efficiency"));
    let packages: std::collections::BTreeSet<_> =
        topo.iter().filter_map(|t| t.package_id).collect();
    let clusters: std::collections::BTreeSet<_> =
        topo.iter().filter_map(|t| t.cluster_id).collect();
    let mut reason = format!(
        "{} CPUs on {cores} physical cores, {} package(s), {} cluster(s)",
        topo.len(),
        packages.len().max(1),
        clusters.len().max(1)
    );
    if big.is_empty() || little.is_empty() {
        reason.push_str("; one core type");
        return check.pass(reason, source);
    }
    let capacity = |cpus: &[usize]| {
        topo.iter()
            .filter(|t| cpus.contains(&t.id))
            .filter_map(|t| t.capacity)
            .max()
            .map(|c| format!(" (capacity {c})"))
            .unwrap_or_default()
    };
    reason.push_str(&format!(
        "; performance cores: CPUs {}{}, efficiency cores: CPUs {}{}",
        format_cpu_list(&big),
        capacity(&big),
        format_cpu_list(&little),
        capacity(&little)
    ));
    check.pass(reason, source).with_fix(format!(
        "to keep audio threads off the efficiency cores, run xrunlab with --cpus {}",
        format_cpu_list(&big)
    ))
}

/// Drivers whose "performance" governor also fixes EPP at performance (active mode).
fn epp_driver(driver: Option<&str>) -> bool {
    matches!(driver, Some("intel_pstate" | "amd-pstate-epp"))
}

fn governor(ctx: &Ctx, freqs: &[Freq]) -> Finding {
    let check = Check::new("cpu.governor", AREA, "CPU frequency governor");
    if freqs.is_empty() {
        return no_cpufreq(ctx, &check, "scaling_governor");
    }
    let source = cpufreq_source(ctx, "scaling_governor");
    let Some(first) = freqs.iter().find(|f| f.governor.is_some()) else {
        return check.unknown("cpufreq exists but no scaling_governor is readable", source);
    };
    let driver = first
        .driver
        .clone()
        .unwrap_or_else(|| "unknown driver".to_owned());
    let summary = grouped(
        freqs
            .iter()
            .filter_map(|f| Some((f.cpu, f.governor.clone()?))),
    );
    if freqs
        .iter()
        .all(|f| f.governor.as_deref() == Some("performance"))
    {
        return check.pass(
            format!("performance on every CPU (driver {driver})"),
            source,
        );
    }
    let available = first.available_governors.clone().unwrap_or_default();
    let reason = format!(
        "{summary} (driver {driver}; available: {}): the CPU may run slowly when audio starts a buffer",
        if available.is_empty() { "unknown" } else { &available }
    );
    if !available.is_empty() && !available.split_whitespace().any(|g| g == "performance") {
        return check.warn(
            format!("{reason}; this driver offers no performance governor"),
            source,
        );
    }
    check.warn(reason, source).with_fix(
        "echo performance | sudo tee /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor \
         (or, undone on exit: xrunlab doctor --apply governor)",
    )
}

fn epp(ctx: &Ctx, freqs: &[Freq]) -> Finding {
    let check = Check::new("cpu.epp", AREA, "Energy-performance preference (EPP)");
    if freqs.is_empty() {
        return no_cpufreq(ctx, &check, "energy_performance_preference");
    }
    let source = cpufreq_source(ctx, "energy_performance_preference");
    let with_epp: Vec<&Freq> = freqs.iter().filter(|f| f.epp.is_some()).collect();
    let driver = freqs
        .iter()
        .find_map(|f| f.driver.clone())
        .unwrap_or_else(|| "unknown driver".to_owned());
    if with_epp.is_empty() {
        return check.pass(format!("not used by driver {driver}"), source);
    }
    let summary = grouped(
        with_epp
            .iter()
            .filter_map(|f| Some((f.cpu, f.epp.clone()?))),
    );
    if with_epp
        .iter()
        .all(|f| f.epp.as_deref() == Some("performance"))
    {
        return check.pass(
            format!("performance on every CPU (driver {driver})"),
            source,
        );
    }
    let mut fix = "echo performance | sudo tee /sys/devices/system/cpu/cpu*/cpufreq/energy_performance_preference".to_owned();
    if epp_driver(Some(&driver)) {
        fix.push_str(&format!(
            " (with the performance governor, {driver} sets EPP to performance by itself and refuses other values)"
        ));
    }
    check.warn(format!("{summary} (driver {driver}): the hardware favours saving energy over reaching speed quickly"), source)
    .with_fix(fix)
}

fn limits(ctx: &Ctx, freqs: &[Freq]) -> Finding {
    let check = Check::new("cpu.freq_limits", AREA, "Frequency limits and boost");
    if freqs.is_empty() {
        return no_cpufreq(ctx, &check, "scaling_max_freq");
    }
    let mut problems = Vec::new();
    let mut fixes = Vec::new();
    let capped: Vec<&Freq> = freqs
        .iter()
        .filter(|f| matches!((f.max_khz, f.hw_max_khz), (Some(max), Some(hw)) if max < hw))
        .collect();
    for f in &capped {
        problems.push(format!(
            "CPU {} is capped at {} MHz of {} MHz",
            f.cpu,
            f.max_khz.unwrap_or(0) / 1000,
            f.hw_max_khz.unwrap_or(0) / 1000
        ));
        fixes.push(format!(
            "echo {} | sudo tee /sys/devices/system/cpu/cpu{}/cpufreq/scaling_max_freq",
            f.hw_max_khz.unwrap_or(0),
            f.cpu
        ));
    }
    let no_turbo = ctx.roots.sys("devices/system/cpu/intel_pstate/no_turbo");
    if read_optional(&no_turbo).ok().flatten().as_deref() == Some("1") {
        problems.push("turbo is off (intel_pstate/no_turbo is 1)".to_owned());
        fixes.push("echo 0 | sudo tee /sys/devices/system/cpu/intel_pstate/no_turbo".to_owned());
    }
    let boost = ctx.roots.sys("devices/system/cpu/cpufreq/boost");
    if read_optional(&boost).ok().flatten().as_deref() == Some("0") {
        problems.push("boost is off (cpufreq/boost is 0)".to_owned());
        fixes.push("echo 1 | sudo tee /sys/devices/system/cpu/cpufreq/boost".to_owned());
    }
    let range = grouped(freqs.iter().filter_map(|f| {
        Some((
            f.cpu,
            format!("{}-{} MHz", f.min_khz? / 1000, f.max_khz? / 1000),
        ))
    }));
    let source = format!(
        "{}, {}, {}, {}",
        cpufreq_source(ctx, "scaling_max_freq"),
        cpufreq_source(ctx, "cpuinfo_max_freq"),
        shown(&no_turbo),
        shown(&boost)
    );
    if problems.is_empty() {
        check.pass(format!("no caps: {range}"), source)
    } else {
        check
            .warn(format!("{}; ranges: {range}", problems.join("; ")), source)
            .with_fix(fixes.join(" && "))
    }
}

fn smt(ctx: &Ctx) -> Finding {
    let check = Check::new("cpu.smt", AREA, "Simultaneous multithreading (SMT)");
    let control = ctx.roots.sys("devices/system/cpu/smt/control");
    let topo = cpu_topology(&ctx.roots.sys);
    // One sibling of each core: the CPUs audio can use without sharing a core.
    let mut firsts: Vec<usize> = topo
        .iter()
        .filter(|t| t.smt_siblings.first().is_none_or(|&s| s == t.id))
        .map(|t| t.id)
        .collect();
    firsts.sort_unstable();
    let shared: Vec<String> = topo
        .iter()
        .filter(|t| t.smt_siblings.len() > 1 && t.smt_siblings.first() == Some(&t.id))
        .map(|t| format_cpu_list(&t.smt_siblings))
        .collect();
    let source = format!(
        "{}, {}",
        shown(&control),
        shown(
            &ctx.roots
                .sys("devices/system/cpu/cpu*/topology/thread_siblings_list")
        )
    );
    let state = read_optional(&control).ok().flatten();
    match state.as_deref() {
        Some("off" | "forceoff") => check.pass("off: every CPU has a core to itself", source),
        Some("notsupported" | "notimplemented") => {
            check.pass("not supported by this CPU: every CPU has a core to itself", source)
        }
        _ if shared.is_empty() && !topo.is_empty() => check.pass(format!("{}: no CPU shares its core", state.as_deref().unwrap_or("no smt/control")), source),
        _ if topo.is_empty() => check.unknown("no topology to read", source),
        _ => check.warn(format!(
                "on: siblings {} share cores, so an audio thread runs slower while its sibling is busy",
                shared.join(", ")
            ), source)
        .with_fix(format!(
            "run xrunlab with --cpus {} (one CPU per core), or turn SMT off: echo off | sudo tee /sys/devices/system/cpu/smt/control",
            format_cpu_list(&firsts)
        )),
    }
}

fn idle(ctx: &Ctx) -> Finding {
    let check = Check::new(
        "cpu.idle_states",
        AREA,
        "Idle states against the buffer period",
    );
    let states = idle_states(&ctx.roots.sys);
    let source = format!(
        "{}, {}",
        shown(&ctx.roots.sys("devices/system/cpu/cpuidle/current_driver")),
        shown(
            &ctx.roots
                .sys("devices/system/cpu/cpu*/cpuidle/state*/{name,latency,disable}")
        )
    );
    let driver = xrunlab_sys::cpuidle::idle_driver(&ctx.roots.sys)
        .unwrap_or_else(|| "unknown driver".to_owned());
    if states.is_empty() {
        return check.unknown(
            "no cpuidle states listed: how deep CPUs sleep is up to the firmware or hypervisor",
            source,
        );
    }
    let period = ctx.opts.period_us();
    // Distinct states by index (the same on every CPU in practice), deepest latency kept.
    let mut by_index: BTreeMap<usize, (String, Option<u64>, bool)> = BTreeMap::new();
    for s in &states {
        let e = by_index
            .entry(s.index)
            .or_insert((s.name.clone(), s.latency_us, true));
        e.1 = e.1.max(s.latency_us);
        // Counted as disabled only if disabled on every CPU.
        e.2 &= s.disabled;
    }
    let listing = by_index
        .values()
        .map(|(name, lat, disabled)| {
            let lat = lat.map_or("?".to_owned(), |l| format!("{l} us"));
            if *disabled {
                format!("{name} {lat} (disabled)")
            } else {
                format!("{name} {lat}")
            }
        })
        .collect::<Vec<_>>()
        .join(", ");
    let deep: Vec<(usize, &str, u64)> = by_index
        .iter()
        .filter(|(_, (_, _, disabled))| !disabled)
        .filter_map(|(&k, (name, lat, _))| Some((k, name.as_str(), (*lat)?)))
        .filter(|&(_, _, lat)| lat as f64 > period / 10.0)
        .collect();
    let reason = format!(
        "driver {driver}; states: {listing}; a {}-frame buffer at {} Hz lasts {period:.0} us",
        ctx.opts.buffer_frames, ctx.opts.sample_rate
    );
    let unreadable: Vec<&str> = by_index
        .values()
        .filter(|(_, lat, disabled)| !disabled && lat.is_none())
        .map(|(name, _, _)| name.as_str())
        .collect();
    if deep.is_empty() && !unreadable.is_empty() {
        return check.unknown(
            format!(
                "{reason}: the exit latency of {} is unreadable",
                unreadable.join(", ")
            ),
            source,
        );
    }
    let Some(&(_, worst_name, worst)) = deep.iter().max_by_key(|d| d.2) else {
        return check.pass(
            format!("{reason}: every enabled state wakes within a tenth of it"),
            source,
        );
    };
    let indexes = deep.iter().map(|d| d.0.to_string()).collect::<Vec<_>>();
    let states_glob = if indexes.len() == 1 {
        format!("state{}", indexes[0])
    } else {
        format!("state{{{}}}", indexes.join(","))
    };
    let status = if worst as f64 >= period / 2.0 {
        Status::Fail
    } else {
        Status::Warn
    };
    check.finding(status, format!(
            "{reason}: waking from {worst_name} takes {worst} us, {:.0} % of it (warn above 10 %, fail from 50 %)",
            worst as f64 * 100.0 / period
        ), source)
    .with_fix(format!(
        "run xrunlab with --pm-qos (holds /dev/cpu_dma_latency at 0 while it runs), or disable the deep states: \
         echo 1 | sudo tee /sys/devices/system/cpu/cpu*/cpuidle/{states_glob}/disable"
    ))
}

fn pm_qos(ctx: &Ctx) -> Finding {
    let check = Check::new("cpu.pm_qos", AREA, "PM QoS device (/dev/cpu_dma_latency)");
    let path = ctx.roots.fs("dev/cpu_dma_latency");
    let source = format!("access({}, W_OK)", shown(&path));
    if !path.exists() {
        return check.unknown(
            format!(
                "{} is missing: no CPU wake-up latency requests possible",
                shown(&path)
            ),
            source,
        );
    }
    let Ok(c_path) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else {
        return check.unknown("the path holds a NUL byte", source);
    };
    // SAFETY: `c_path` is a live NUL-terminated string; access only reads it.
    let writable = unsafe { libc::access(c_path.as_ptr(), libc::W_OK) } == 0;
    if writable {
        check.pass(
            "writable: xrunlab --pm-qos (and DAWs) can keep CPUs out of deep idle states",
            source,
        )
    } else {
        check.warn("not writable by this user: --pm-qos and DAWs cannot keep CPUs out of deep idle states", source)
        .with_fix(
            "echo 'KERNEL==\"cpu_dma_latency\", GROUP=\"audio\", MODE=\"0660\"' | sudo tee /etc/udev/rules.d/99-cpu-dma-latency.rules && sudo udevadm trigger",
        )
    }
}

fn energy(ctx: &Ctx) -> Finding {
    let check = Check::new("cpu.energy", AREA, "Energy measurement (RAPL)");
    let path = ctx.roots.sys("class/powercap/intel-rapl:0/energy_uj");
    let source = shown(&path);
    match read_optional(&path) {
        Ok(Some(v)) if v.parse::<u64>().is_ok() => check.pass(
            "RAPL package energy is readable: the dashboard measures energy",
            source,
        ),
        Ok(Some(v)) => check.unknown(
            format!("{source} holds {v:?}, which does not parse"),
            source,
        ),
        Ok(None) => check.unknown(
            "no RAPL on this machine: the dashboard's energy view is an estimate (labelled so)",
            source,
        ),
        Err(e) => check
            .warn(format!("{e}: energy is estimated instead"), source)
            .with_fix("run as root, or: sudo chmod o+r /sys/class/powercap/intel-rapl:*/energy_uj"),
    }
}
