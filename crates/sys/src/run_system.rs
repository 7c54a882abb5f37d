//! What the machine did during a run: the CPU topology, each idle state's entries over the
//! run (usage deltas), and each CPU's frequency sampled by a [`FreqSampler`]. Started and
//! finished on the control thread that runs the run; the sampler has its own thread.

use crate::cpuidle::{idle_driver, idle_states, idle_usage_delta, IdleState, IdleUsage};
use crate::freq_sampler::{FreqSampler, FreqSamplerError, FreqTrace};
use crate::topology::{cpu_topology, CpuTopology};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How often a run samples CPU frequencies: 10 times a second.
pub const RUN_FREQ_INTERVAL: Duration = Duration::from_millis(100);

/// The system facts of one run, for its result file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunSystem {
    /// Each online CPU's place in the machine.
    pub topology: Vec<CpuTopology>,
    /// The cpuidle driver, e.g. "intel_idle"; `None` without cpuidle.
    pub idle_driver: Option<String>,
    /// Entries into each idle state of each CPU during the run.
    pub idle_usage: Vec<IdleUsage>,
    /// Each CPU's frequency over the run; `None` where cpufreq is missing (see `frequency_note`).
    pub frequency: Option<FreqTrace>,
    /// Where the frequencies come from, or why there are none.
    pub frequency_note: String,
}

/// Recording in progress: the idle counters at the start and the running sampler.
pub struct RunSystemRecorder {
    sys_root: PathBuf,
    idle_before: Vec<IdleState>,
    sampler: Result<FreqSampler, FreqSamplerError>,
}

impl RunSystemRecorder {
    /// Snapshots the idle counters and starts sampling frequencies every `interval` under
    /// `sys_root` (normally "/sys").
    pub fn start(sys_root: &Path, interval: Duration) -> RunSystemRecorder {
        RunSystemRecorder {
            sys_root: sys_root.to_path_buf(),
            idle_before: idle_states(sys_root),
            sampler: FreqSampler::start(sys_root, interval),
        }
    }

    /// Stops the sampler and computes the deltas.
    pub fn finish(self) -> RunSystem {
        let (frequency, frequency_note) = match self.sampler {
            Ok(sampler) => {
                let trace = sampler.stop();
                let note = format!(
                    "scaling_cur_freq sampled every {} ms on a SCHED_OTHER thread; the sampler used {:.1} ms of CPU ({:.3} % of one CPU)",
                    trace.interval_ms,
                    trace.sampler_cpu_ms,
                    trace.sampler_cpu_pct()
                );
                (Some(trace), note)
            }
            Err(why) => (None, why.to_string()),
        };
        RunSystem {
            topology: cpu_topology(&self.sys_root),
            idle_driver: idle_driver(&self.sys_root),
            idle_usage: idle_usage_delta(&self.idle_before, &idle_states(&self.sys_root)),
            frequency,
            frequency_note,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Fixture;

    #[test]
    fn records_idle_entries_and_frequencies_over_a_run() {
        let f = Fixture::new("run-system");
        f.write("devices/system/cpu/online", "0\n")
            .write("devices/system/cpu/cpuidle/current_driver", "intel_idle\n")
            .write("devices/system/cpu/cpu0/cpuidle/state1/name", "C6\n")
            .write("devices/system/cpu/cpu0/cpuidle/state1/usage", "10\n")
            .write("devices/system/cpu/cpu0/cpuidle/state1/time", "100\n")
            .write(
                "devices/system/cpu/cpu0/cpufreq/scaling_cur_freq",
                "2000000\n",
            );
        let rec = RunSystemRecorder::start(f.path(), crate::freq_sampler::MIN_INTERVAL);
        f.write("devices/system/cpu/cpu0/cpuidle/state1/usage", "25\n")
            .write("devices/system/cpu/cpu0/cpuidle/state1/time", "400\n");
        std::thread::sleep(Duration::from_millis(120));
        let s = rec.finish();
        assert_eq!(s.topology.len(), 1);
        assert_eq!(s.idle_driver.as_deref(), Some("intel_idle"));
        assert_eq!(
            (s.idle_usage[0].entries, s.idle_usage[0].time_us),
            (15, 300)
        );
        let trace = s.frequency.unwrap();
        assert_eq!(trace.samples[0].khz, vec![Some(2_000_000)]);
        assert!(
            s.frequency_note.contains("sampled every 50 ms"),
            "{}",
            s.frequency_note
        );

        let none = Fixture::new("run-system-none");
        none.write("devices/system/cpu/online", "0\n");
        let s = RunSystemRecorder::start(none.path(), RUN_FREQ_INTERVAL).finish();
        assert_eq!(s.frequency, None);
        assert_eq!(
            s.frequency_note,
            "not available on this machine (no cpufreq)"
        );
    }
}
