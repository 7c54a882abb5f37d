//! The machine fingerprint every result carries: the settings that move latency figures
//! (kernel and its preemption model, boot parameters, governor and EPP, idle states, SMT and
//! core types, virtualisation and the steal over the run), so `compare` can say what differs
//! between two results. Collected on the main thread before a run and finished after it.

use crate::cmdline::Cmdline;
use crate::cpu::{cpu_dir, format_cpu_list, governor_summary, online_cpus};
use crate::cpuidle::{idle_driver, idle_states};
use crate::provenance::{cpu_model, Uname};
use crate::read_trimmed;
use crate::topology::{cpu_topology, smt_in_use};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// What a machine was set up like for a run. Every field is what the kernel said; a fact it
/// did not expose is `None` or "unknown", never a guess.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fingerprint {
    /// uname release, e.g. "6.1.0-18-amd64".
    pub kernel_release: String,
    /// Preemption model: "PREEMPT_RT", "PREEMPT_DYNAMIC (preempt=full)", "PREEMPT",
    /// "PREEMPT_DYNAMIC" (mode not on the command line) or "none/voluntary".
    pub preemption: String,
    /// `threadirqs` on the kernel command line.
    pub threadirqs: bool,
    /// `isolcpus=` from the command line.
    pub isolcpus: Option<String>,
    /// `nohz_full=` from the command line.
    pub nohz_full: Option<String>,
    /// Governors of the online CPUs (see [`governor_summary`]).
    pub governor: String,
    /// Energy-performance preference of the online CPUs, grouped like the governors; `None`
    /// without the attribute.
    pub epp: Option<String>,
    /// cpuidle driver, e.g. "intel_idle"; `None` without cpuidle.
    pub idle_driver: Option<String>,
    /// The deepest idle state not disabled on CPU 0, e.g. "C6 (exit 170 us)".
    pub deepest_idle_state: Option<String>,
    /// Whether SMT siblings are online.
    pub smt: bool,
    /// Core types on heterogeneous machines ("performance: 0-7, efficiency: 8-15"), else "uniform".
    pub core_types: String,
    /// /proc/cpuinfo model name.
    pub cpu_model: String,
    /// Online CPUs.
    pub cpu_count: usize,
    /// The audio server's quantum (buffer frames) when the run used one (JACK); `None` otherwise.
    pub server_quantum_frames: Option<u32>,
    /// The hypervisor, when the machine is a virtual machine ("KVM", "xen", or "yes" when the
    /// CPU flags say so without a name); `None` on bare metal.
    pub hypervisor: Option<String>,
    /// Share of all CPU time the hypervisor stole over the run, in percent (`/proc/stat`);
    /// `None` until [`Fingerprint::finish`] or without the counter.
    pub steal_pct: Option<f64>,
    /// Total and steal ticks when collected, for the steal over the run.
    #[serde(skip)]
    steal_at_start: Option<(u64, u64)>,
}

impl Fingerprint {
    /// Reads the machine now; the roots are normally "/proc" and "/sys".
    pub fn collect(proc_root: &Path, sys_root: &Path) -> Fingerprint {
        let uname = Uname::get();
        let cmdline =
            Cmdline::parse(&std::fs::read_to_string(proc_root.join("cmdline")).unwrap_or_default());
        let cpuinfo = std::fs::read_to_string(proc_root.join("cpuinfo")).unwrap_or_default();
        let topology = cpu_topology(sys_root);
        Fingerprint {
            kernel_release: uname
                .as_ref()
                .map_or_else(|| "unknown".to_owned(), |u| u.release.clone()),
            preemption: preemption(
                uname.as_ref().map_or("", |u| u.version.as_str()),
                read_trimmed(&sys_root.join("kernel/realtime")).as_deref() == Some("1"),
                &cmdline,
            ),
            threadirqs: cmdline.has("threadirqs"),
            isolcpus: cmdline.value("isolcpus").map(str::to_owned),
            nohz_full: cmdline.value("nohz_full").map(str::to_owned),
            governor: governor_summary(sys_root),
            epp: grouped(sys_root, "cpufreq/energy_performance_preference"),
            idle_driver: idle_driver(sys_root),
            deepest_idle_state: idle_states(sys_root)
                .into_iter()
                .filter(|s| s.cpu == 0 && !s.disabled)
                .max_by_key(|s| s.index)
                .map(|s| match s.latency_us {
                    Some(l) => format!("{} (exit {l} us)", s.name),
                    None => s.name,
                }),
            smt: smt_in_use(&topology),
            core_types: {
                let mut kinds: Vec<(String, Vec<usize>)> = Vec::new();
                for t in &topology {
                    let Some(kind) = &t.core_type else { continue };
                    match kinds.iter_mut().find(|(k, _)| k == kind) {
                        Some((_, cpus)) => cpus.push(t.id),
                        None => kinds.push((kind.clone(), vec![t.id])),
                    }
                }
                if kinds.len() < 2 {
                    "uniform".to_owned()
                } else {
                    kinds
                        .iter()
                        .map(|(k, cpus)| format!("{k}: {}", format_cpu_list(cpus)))
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            },
            cpu_model: cpu_model(&cpuinfo).unwrap_or_else(|| "unknown".to_owned()),
            cpu_count: online_cpus(sys_root).len(),
            server_quantum_frames: None,
            hypervisor: hypervisor(sys_root, &cpuinfo),
            steal_pct: None,
            steal_at_start: cpu_ticks(proc_root),
        }
    }

    /// Records the steal over the run since [`Fingerprint::collect`].
    pub fn finish(&mut self, proc_root: &Path) {
        if let (Some((total0, steal0)), Some((total1, steal1))) =
            (self.steal_at_start, cpu_ticks(proc_root))
        {
            let total = total1.saturating_sub(total0);
            if total > 0 {
                self.steal_pct = Some(steal1.saturating_sub(steal0) as f64 * 100.0 / total as f64);
            }
        }
    }
}

/// The preemption model from uname's version string, /sys/kernel/realtime and `preempt=`.
fn preemption(uname_version: &str, realtime: bool, cmdline: &Cmdline) -> String {
    let words: Vec<&str> = uname_version.split_whitespace().collect();
    if realtime || words.contains(&"PREEMPT_RT") {
        "PREEMPT_RT".to_owned()
    } else if words.contains(&"PREEMPT_DYNAMIC") {
        match cmdline.value("preempt") {
            Some(mode) => format!("PREEMPT_DYNAMIC (preempt={mode})"),
            None => "PREEMPT_DYNAMIC".to_owned(),
        }
    } else if words.contains(&"PREEMPT") {
        "PREEMPT".to_owned()
    } else {
        "none/voluntary".to_owned()
    }
}

/// One attribute under each online CPU's directory, grouped by value like the governors;
/// `None` when no CPU has it.
fn grouped(sys_root: &Path, attribute: &str) -> Option<String> {
    let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
    for cpu in online_cpus(sys_root) {
        let Some(value) = read_trimmed(&cpu_dir(sys_root, cpu).join(attribute)) else {
            continue;
        };
        match groups.iter_mut().find(|(v, _)| *v == value) {
            Some((_, cpus)) => cpus.push(cpu),
            None => groups.push((value, vec![cpu])),
        }
    }
    match groups.as_slice() {
        [] => None,
        [(v, _)] => Some(v.clone()),
        _ => Some(
            groups
                .iter()
                .map(|(v, cpus)| format!("{v}: {}", format_cpu_list(cpus)))
                .collect::<Vec<_>>()
                .join(", "),
        ),
    }
}

/// The hypervisor's name from sysfs, or "yes" when only the CPU's `hypervisor` flag says so.
fn hypervisor(sys_root: &Path, cpuinfo: &str) -> Option<String> {
    if let Some(kind) = read_trimmed(&sys_root.join("hypervisor/type")).filter(|k| !k.is_empty()) {
        return Some(kind);
    }
    let flagged = cpuinfo.lines().any(|l| {
        l.split_once(':').is_some_and(|(k, v)| {
            k.trim() == "flags" && v.split_whitespace().any(|f| f == "hypervisor")
        })
    });
    flagged.then(|| {
        read_trimmed(&sys_root.join("class/dmi/id/sys_vendor"))
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| "yes".to_owned())
    })
}

/// All-CPU ticks and steal ticks from `/proc/stat`'s "cpu " line.
fn cpu_ticks(proc_root: &Path) -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string(proc_root.join("stat")).ok()?;
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let ticks: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map_while(|f| f.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal [guest guest_nice]: guest time is
    // already counted in user, so only the first eight add up to the total.
    let steal = *ticks.get(7)?;
    Some((ticks.iter().take(8).sum(), steal))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Fixture;

    #[test]
    fn reads_boot_parameters_power_idle_and_steal_from_fixture_trees() {
        let proc_root = Fixture::new("fp-proc");
        let sys_root = Fixture::new("fp-sys");
        proc_root
            .write(
                "cmdline",
                "quiet threadirqs isolcpus=2-3 nohz_full=2-3 preempt=full\n",
            )
            .write(
                "cpuinfo",
                "model name\t: Test CPU 9000\nflags\t\t: fpu hypervisor sse\n",
            )
            .write("stat", "cpu  100 0 100 700 0 0 0 100 0 0\ncpu0 1 2\n");
        sys_root
            .write("devices/system/cpu/online", "0-1\n")
            .write(
                "devices/system/cpu/cpu0/cpufreq/scaling_governor",
                "performance\n",
            )
            .write(
                "devices/system/cpu/cpu1/cpufreq/scaling_governor",
                "performance\n",
            )
            .write(
                "devices/system/cpu/cpu0/cpufreq/energy_performance_preference",
                "performance\n",
            )
            .write(
                "devices/system/cpu/cpu1/cpufreq/energy_performance_preference",
                "balance_power\n",
            )
            .write("devices/system/cpu/cpuidle/current_driver", "intel_idle\n")
            .write("devices/system/cpu/cpu0/cpuidle/state0/name", "POLL\n")
            .write("devices/system/cpu/cpu0/cpuidle/state1/name", "C1\n")
            .write("devices/system/cpu/cpu0/cpuidle/state1/latency", "2\n")
            .write("devices/system/cpu/cpu0/cpuidle/state2/name", "C6\n")
            .write("devices/system/cpu/cpu0/cpuidle/state2/latency", "170\n")
            .write("devices/system/cpu/cpu0/cpuidle/state2/disable", "1\n")
            .write("hypervisor/type", "xen\n");
        let mut f = Fingerprint::collect(proc_root.path(), sys_root.path());
        assert!(f.threadirqs);
        assert_eq!(f.isolcpus.as_deref(), Some("2-3"));
        assert_eq!(f.nohz_full.as_deref(), Some("2-3"));
        assert_eq!(f.governor, "performance (all CPUs)");
        assert_eq!(f.epp.as_deref(), Some("performance: 0, balance_power: 1"));
        assert_eq!(f.idle_driver.as_deref(), Some("intel_idle"));
        // C6 is disabled, so C1 is the deepest a CPU can enter.
        assert_eq!(f.deepest_idle_state.as_deref(), Some("C1 (exit 2 us)"));
        assert_eq!(f.cpu_model, "Test CPU 9000");
        assert_eq!(f.cpu_count, 2);
        assert_eq!(f.core_types, "uniform");
        assert_eq!(f.hypervisor.as_deref(), Some("xen"));
        assert_eq!(f.steal_pct, None);
        proc_root.write("stat", "cpu  200 0 200 1400 0 0 0 200 0 0\n");
        f.finish(proc_root.path());
        // 100 of the 1000 ticks since the start were stolen.
        assert_eq!(f.steal_pct, Some(10.0));

        let empty = Fixture::new("fp-empty");
        let f = Fingerprint::collect(empty.path(), empty.path());
        assert!(!f.threadirqs && f.epp.is_none() && f.idle_driver.is_none());
        assert_eq!(f.hypervisor, None);
        assert_eq!(f.cpu_model, "unknown");
    }

    #[test]
    fn preemption_model_from_uname_and_the_command_line() {
        let none = Cmdline::parse("");
        let full = Cmdline::parse("preempt=full");
        let dynamic = "#1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1";
        assert_eq!(preemption(dynamic, false, &none), "PREEMPT_DYNAMIC");
        assert_eq!(
            preemption(dynamic, false, &full),
            "PREEMPT_DYNAMIC (preempt=full)"
        );
        assert_eq!(preemption("#1 SMP PREEMPT_RT", false, &none), "PREEMPT_RT");
        assert_eq!(preemption("#1 SMP", true, &none), "PREEMPT_RT");
        assert_eq!(preemption("#1 SMP PREEMPT", false, &none), "PREEMPT");
        assert_eq!(preemption("#1 SMP", false, &none), "none/voluntary");
    }
}
