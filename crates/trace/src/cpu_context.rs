//! What the CPUs did that scheduler events do not show: hypervisor steal time (`/proc/stat`)
//! and idle-state entries (cpuidle's `usage` counters), sampled by the tracer's reader thread
//! every [`SAMPLE_EVERY_MS`] and cut to a window's span, so a card can say why an audio thread
//! waited on an idle CPU. Reading takes a root path, so tests use fixture trees.

use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use std::path::Path;

/// How often the reader samples steal and idle counters.
pub const SAMPLE_EVERY_MS: u64 = 100;
/// USER_HZ: /proc/stat counts in these ticks per second on every Linux architecture.
const USER_HZ: u64 = 100;

/// An idle state a CPU entered during the window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IdleEntry {
    /// cpuidle's name for it (`C6`, `halt`...).
    pub name: String,
    /// Its exit latency as the driver declares it, µs.
    pub exit_latency_us: u32,
    /// Entries over the sampled span.
    pub entries: u64,
}

/// Steal and idle states per CPU over (about) a window.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CpuContext {
    /// Hypervisor steal per CPU, ns (10 ms resolution); empty when not sampled.
    pub steal_ns: BTreeMap<u16, u64>,
    /// Idle states entered per CPU, deepest last.
    pub idle_entered: BTreeMap<u16, Vec<IdleEntry>>,
    /// The span the counters cover, ms (samples bracket the window, so it is at least as long).
    pub span_ms: f64,
}

#[derive(Debug, Clone)]
struct Sample {
    ts_ns: u64,
    steal_ticks: BTreeMap<u16, u64>,
    /// Per CPU, per state index: entries so far.
    usage: BTreeMap<u16, Vec<u64>>,
}

/// Samples the counters and keeps the last few seconds of them.
#[derive(Debug)]
pub struct CpuSampler {
    /// `/proc/stat`, kept open (see [`Reread`]: opening was most of a sample's cost).
    stat: Reread,
    /// Per CPU, each idle state's `usage` counter, kept open.
    usage_files: BTreeMap<u16, Vec<Reread>>,
    cpus: Vec<u16>,
    /// Per CPU: (name, exit latency µs) of each idle state, by index.
    states: BTreeMap<u16, Vec<(String, u32)>>,
    samples: VecDeque<Sample>,
    keep_ns: u64,
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

use xrunlab_sys::procfs::parse_steal;
pub use xrunlab_sys::procfs::read_steal;
use xrunlab_sys::Reread;

impl CpuSampler {
    /// A sampler of `cpus`, keeping `keep_ns` of history (the tracer's window).
    pub fn new(proc_root: &Path, sys_root: &Path, cpus: &[usize], keep_ns: u64) -> CpuSampler {
        let cpus: Vec<u16> = cpus.iter().filter_map(|&c| u16::try_from(c).ok()).collect();
        let states: BTreeMap<u16, Vec<(String, u32)>> = cpus
            .iter()
            .map(|&cpu| {
                let dir = sys_root.join(format!("devices/system/cpu/cpu{cpu}/cpuidle"));
                let list: Vec<(String, u32)> = (0..)
                    .map_while(|k| {
                        let s = dir.join(format!("state{k}"));
                        let name = read(&s.join("name"))?.trim().to_owned();
                        let latency = read(&s.join("latency"))
                            .and_then(|l| l.trim().parse().ok())
                            .unwrap_or(0);
                        Some((name, latency))
                    })
                    .collect();
                (cpu, list)
            })
            .collect();
        let usage_files = states
            .iter()
            .map(|(&cpu, list)| {
                let dir = sys_root.join(format!("devices/system/cpu/cpu{cpu}/cpuidle"));
                let files = (0..list.len())
                    .map(|k| Reread::new(dir.join(format!("state{k}/usage"))))
                    .collect();
                (cpu, files)
            })
            .collect();
        CpuSampler {
            stat: Reread::new(proc_root.join("stat")),
            usage_files,
            cpus,
            states,
            samples: VecDeque::new(),
            keep_ns: keep_ns.max(2_000_000_000),
        }
    }

    /// When the newest sample was taken, ns.
    pub fn newest_ns(&self) -> Option<u64> {
        self.samples.back().map(|s| s.ts_ns)
    }

    /// Takes one sample at `ts_ns` and forgets those older than the history kept.
    pub fn sample(&mut self, ts_ns: u64) {
        let steal = self.stat.read().map(parse_steal).unwrap_or_default();
        let usage = self
            .usage_files
            .iter_mut()
            .map(|(&cpu, files)| {
                let counts = files
                    .iter_mut()
                    .map(|f| {
                        f.read()
                            .ok()
                            .and_then(|u| u.trim().parse().ok())
                            .unwrap_or(0)
                    })
                    .collect();
                (cpu, counts)
            })
            .collect();
        self.samples.push_back(Sample {
            ts_ns,
            steal_ticks: steal
                .into_iter()
                .filter(|(c, _)| self.cpus.contains(c))
                .collect(),
            usage,
        });
        while self
            .samples
            .front()
            .is_some_and(|s| s.ts_ns + self.keep_ns < ts_ns)
        {
            self.samples.pop_front();
        }
    }

    /// The counters' change over the samples that bracket `[t0_ns, t1_ns]` (as close as the
    /// samples allow); empty when fewer than two samples exist.
    pub fn context(&self, t0_ns: u64, t1_ns: u64) -> CpuContext {
        let before = self
            .samples
            .iter()
            .rev()
            .find(|s| s.ts_ns <= t0_ns)
            .or(self.samples.front());
        let after = self
            .samples
            .iter()
            .find(|s| s.ts_ns >= t1_ns)
            .or(self.samples.back());
        let (Some(a), Some(b)) = (before, after) else {
            return CpuContext::default();
        };
        if b.ts_ns <= a.ts_ns {
            return CpuContext::default();
        }
        let steal_ns = b
            .steal_ticks
            .iter()
            .map(|(cpu, t)| {
                let d = t.saturating_sub(a.steal_ticks.get(cpu).copied().unwrap_or(*t));
                (*cpu, d * (1_000_000_000 / USER_HZ))
            })
            .collect();
        let idle_entered = b
            .usage
            .iter()
            .map(|(cpu, counts)| {
                let names = self.states.get(cpu).cloned().unwrap_or_default();
                let entered = counts
                    .iter()
                    .enumerate()
                    .filter_map(|(k, n)| {
                        let was = a
                            .usage
                            .get(cpu)
                            .and_then(|u| u.get(k))
                            .copied()
                            .unwrap_or(*n);
                        let (name, exit_latency_us) = names.get(k).cloned()?;
                        let entries = n.saturating_sub(was);
                        (entries > 0).then_some(IdleEntry {
                            name,
                            exit_latency_us,
                            entries,
                        })
                    })
                    .collect();
                (*cpu, entered)
            })
            .collect();
        CpuContext {
            steal_ns,
            idle_entered,
            span_ms: (b.ts_ns - a.ts_ns) as f64 / 1e6,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xrunlab_testkit::FixtureTree;

    fn stat(steal0: u64, steal1: u64) -> String {
        format!(
            "cpu  1 2 3 4 5 6 7 {} 0 0\ncpu0 1 2 3 4 5 6 7 {steal0} 0 0\ncpu1 1 2 3 4 5 6 7 {steal1} 0 0\nintr 1\n",
            steal0 + steal1
        )
    }

    #[test]
    fn steal_and_idle_entries_are_the_change_between_the_samples_around_the_window() {
        let t = FixtureTree::new("cpu-context");
        t.write("proc/stat", &stat(10, 3));
        for (k, name, lat) in [(0, "POLL", 0), (1, "C6", 200)] {
            t.write(
                &format!("sys/devices/system/cpu/cpu0/cpuidle/state{k}/name"),
                &format!("{name}\n"),
            );
            t.write(
                &format!("sys/devices/system/cpu/cpu0/cpuidle/state{k}/latency"),
                &format!("{lat}\n"),
            );
            t.write(
                &format!("sys/devices/system/cpu/cpu0/cpuidle/state{k}/usage"),
                "100\n",
            );
        }
        let mut s = CpuSampler::new(
            &t.path().join("proc"),
            &t.path().join("sys"),
            &[0, 1],
            1_000_000_000,
        );
        s.sample(1_000_000_000);
        assert_eq!(
            s.context(1_050_000_000, 1_060_000_000),
            CpuContext::default(),
            "one sample says nothing"
        );
        t.write("proc/stat", &stat(12, 3));
        t.write("sys/devices/system/cpu/cpu0/cpuidle/state1/usage", "104\n");
        s.sample(1_100_000_000);
        let c = s.context(1_050_000_000, 1_060_000_000);
        assert_eq!(
            c.steal_ns.get(&0),
            Some(&20_000_000),
            "2 ticks of 10 ms on CPU0"
        );
        assert_eq!(c.steal_ns.get(&1), Some(&0));
        assert_eq!(
            c.idle_entered.get(&0),
            Some(&vec![IdleEntry {
                name: "C6".into(),
                exit_latency_us: 200,
                entries: 4
            }])
        );
        assert_eq!(c.span_ms, 100.0);
    }
}
