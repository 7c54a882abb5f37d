//! cpuidle: each CPU's idle states with their exit latency, and how often each was entered
//! (usage counted over a run as the difference of two snapshots). Read by non-real-time threads.

use crate::cpu::online_cpus;
use crate::{read_parsed, read_trimmed};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// One idle state of one CPU, as `devices/system/cpu/cpuN/cpuidle/stateK/` describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdleState {
    /// CPU number.
    pub cpu: usize,
    /// State index K (0 is the shallowest).
    pub index: usize,
    /// Name, e.g. "POLL", "C1E", "WFI".
    pub name: String,
    /// Exit latency in microseconds: how long a wake-up from this state can take.
    pub latency_us: Option<u64>,
    /// Target residency in microseconds: the shortest idle period worth entering it for.
    pub residency_us: Option<u64>,
    /// Whether the state is disabled (`disable` is 1).
    pub disabled: bool,
    /// Times the state was entered since boot.
    pub usage: Option<u64>,
    /// Time spent in the state since boot, in microseconds.
    pub time_us: Option<u64>,
}

/// The cpuidle driver in use (`devices/system/cpu/cpuidle/current_driver`), e.g. "intel_idle".
pub fn idle_driver(sys_root: &Path) -> Option<String> {
    read_trimmed(&sys_root.join("devices/system/cpu/cpuidle/current_driver"))
}

/// Every idle state of every online CPU under `sys_root`, in CPU then state order; empty
/// without cpuidle. A state whose `name` is missing is skipped (the directory is not a state).
pub fn idle_states(sys_root: &Path) -> Vec<IdleState> {
    let mut out = Vec::new();
    for cpu in online_cpus(sys_root) {
        let dir = sys_root.join(format!("devices/system/cpu/cpu{cpu}/cpuidle"));
        let mut indexes: Vec<usize> = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.strip_prefix("state")?.parse().ok())
            .collect();
        indexes.sort_unstable();
        for index in indexes {
            let s = dir.join(format!("state{index}"));
            let Some(name) = read_trimmed(&s.join("name")) else {
                continue;
            };
            out.push(IdleState {
                cpu,
                index,
                name,
                latency_us: read_parsed(&s.join("latency")),
                residency_us: read_parsed(&s.join("residency")),
                disabled: read_parsed::<u8>(&s.join("disable")) == Some(1),
                usage: read_parsed(&s.join("usage")),
                time_us: read_parsed(&s.join("time")),
            });
        }
    }
    out
}

/// How often one idle state was entered over a run, and how long it was in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdleUsage {
    /// CPU number.
    pub cpu: usize,
    /// State index.
    pub index: usize,
    /// State name.
    pub name: String,
    /// Exit latency in microseconds.
    pub latency_us: Option<u64>,
    /// Entries during the run.
    pub entries: u64,
    /// Time in the state during the run, in microseconds.
    pub time_us: u64,
}

/// Usage over a run: `after - before`, matched by CPU and state index. States missing from
/// either snapshot, or whose counters are unreadable, are left out; a counter that went
/// backwards (CPU hotplug resets it) counts as 0.
pub fn idle_usage_delta(before: &[IdleState], after: &[IdleState]) -> Vec<IdleUsage> {
    after
        .iter()
        .filter_map(|a| {
            let b = before
                .iter()
                .find(|b| b.cpu == a.cpu && b.index == a.index)?;
            Some(IdleUsage {
                cpu: a.cpu,
                index: a.index,
                name: a.name.clone(),
                latency_us: a.latency_us,
                entries: a.usage?.saturating_sub(b.usage?),
                time_us: a.time_us?.saturating_sub(b.time_us?),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Fixture;

    fn write_state(f: &Fixture, cpu: usize, k: usize, name: &str, latency: u64, usage: u64) {
        let d = format!("devices/system/cpu/cpu{cpu}/cpuidle/state{k}");
        f.write(&format!("{d}/name"), &format!("{name}\n"))
            .write(&format!("{d}/latency"), &format!("{latency}\n"))
            .write(&format!("{d}/residency"), &format!("{}\n", latency * 3))
            .write(&format!("{d}/disable"), "0\n")
            .write(&format!("{d}/usage"), &format!("{usage}\n"))
            .write(&format!("{d}/time"), &format!("{}\n", usage * 10));
    }

    #[test]
    fn reads_states_and_counts_usage_over_a_run() {
        let f = Fixture::new("cpuidle");
        f.write("devices/system/cpu/online", "0-1\n")
            .write("devices/system/cpu/cpuidle/current_driver", "intel_idle\n");
        for cpu in 0..2 {
            write_state(&f, cpu, 0, "POLL", 0, 5);
            write_state(&f, cpu, 1, "C1E", 10, 100);
            write_state(&f, cpu, 10, "C10", 890, 7);
        }
        f.write("devices/system/cpu/cpu1/cpuidle/state10/disable", "1\n");
        let before = idle_states(f.path());
        assert_eq!(idle_driver(f.path()).as_deref(), Some("intel_idle"));
        assert_eq!(before.len(), 6);
        let names: Vec<_> = before[..3].iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            ["POLL", "C1E", "C10"],
            "numeric order, not text order"
        );
        assert_eq!(before[2].latency_us, Some(890));
        assert_eq!(before[2].residency_us, Some(2670));
        assert!(!before[2].disabled && before[5].disabled);

        write_state(&f, 0, 1, "C1E", 10, 160);
        write_state(&f, 1, 1, "C1E", 10, 40); // went backwards: counts as 0
        let delta = idle_usage_delta(&before, &idle_states(f.path()));
        let c1e: Vec<_> = delta.iter().filter(|u| u.name == "C1E").collect();
        assert_eq!((c1e[0].cpu, c1e[0].entries, c1e[0].time_us), (0, 60, 600));
        assert_eq!(c1e[1].entries, 0);
        assert!(delta
            .iter()
            .filter(|u| u.name != "C1E")
            .all(|u| u.entries == 0));
    }

    #[test]
    fn no_cpuidle_or_garbled_files() {
        let f = Fixture::new("cpuidle-none");
        f.write("devices/system/cpu/online", "0\n");
        assert!(idle_states(f.path()).is_empty());
        assert_eq!(idle_driver(f.path()), None);
        f.write("devices/system/cpu/cpu0/cpuidle/state0/latency", "zero\n")
            .write("devices/system/cpu/cpu0/cpuidle/state0/name", "POLL\n")
            .write("devices/system/cpu/cpu0/cpuidle/state1/latency", "1\n")
            .write("devices/system/cpu/cpu0/cpuidle/stateX/name", "junk\n");
        let states = idle_states(f.path());
        assert_eq!(states.len(), 1, "a state without a name is skipped");
        assert_eq!(states[0].latency_us, None);
        assert_eq!(states[0].usage, None);
        assert!(idle_usage_delta(&states, &states).is_empty());
    }
}
