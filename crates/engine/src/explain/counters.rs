//! Power and CPU frequency counters for the Perfetto traces (`run --trace` and the dashboard's
//! `GET /api/trace`): sampled about once a second on the caller's non-real-time thread (the
//! run's main thread, the dashboard's engine-owner thread) from RAPL (or the labelled CPU-time
//! estimate) and cpufreq, plus the notes that say in the trace's metadata which of them this
//! machine has, and what stands in for a missing one; never a silent gap.

use super::perfetto::BufferTrace;
use std::io::Write;
use std::path::{Path, PathBuf};
use xrunlab_sys::PowerMeter;

/// How often the counters are sampled.
pub const SAMPLE_EVERY_NS: u64 = 1_000_000_000;

/// One sample of the counters.
#[derive(Debug, Clone, PartialEq)]
pub struct CounterSample {
    /// When it was taken, CLOCK_MONOTONIC ns.
    pub ts_ns: u64,
    /// Average power since the previous sample, W (`None` on the first sample or when the
    /// source could not be read).
    pub power_w: Option<f64>,
    /// Current frequency of each CPU that reports one, kHz.
    pub freqs_khz: Vec<(usize, u64)>,
}

/// Samples power and cpufreq frequencies for a trace.
#[derive(Debug)]
pub struct SystemCounters {
    power: PowerMeter,
    power_source: String,
    estimated: bool,
    sys_root: PathBuf,
    cpus: Vec<usize>,
    freqs: Vec<Option<u64>>,
    /// CPUs that ever reported a cpufreq frequency.
    freq_seen: Vec<usize>,
    samples: u64,
}

impl SystemCounters {
    /// Counters of `cpus` from the sysfs and procfs at `sys_root` and `proc_root` (fixture
    /// trees in tests).
    pub fn new(sys_root: &Path, proc_root: &Path, cpus: Vec<usize>) -> SystemCounters {
        let power = PowerMeter::new(sys_root, proc_root);
        let power_source = power.source();
        SystemCounters {
            estimated: power_source.starts_with("estimate"),
            power,
            power_source,
            sys_root: sys_root.to_path_buf(),
            freqs: Vec::with_capacity(cpus.len()),
            cpus,
            freq_seen: Vec::new(),
            samples: 0,
        }
    }

    /// The live machine's counters of `cpus`.
    pub fn live(cpus: Vec<usize>) -> SystemCounters {
        SystemCounters::new(
            xrunlab_sys::default_sys_root(),
            xrunlab_sys::default_proc_root(),
            cpus,
        )
    }

    /// The power counter's track name, which says whether it is measured or estimated.
    pub fn power_label(&self) -> &'static str {
        if self.estimated {
            "power W (estimate: process CPU time)"
        } else {
            "power W (RAPL package)"
        }
    }

    /// Takes a sample stamped `ts_ns`.
    pub fn sample(&mut self, ts_ns: u64) -> CounterSample {
        self.samples += 1;
        let power_w = self.power.sample().map(|p| p.watts);
        xrunlab_sys::read_cur_freqs_khz(&self.sys_root, &self.cpus, &mut self.freqs);
        let freqs_khz: Vec<(usize, u64)> = self
            .cpus
            .iter()
            .zip(&self.freqs)
            .filter_map(|(c, f)| f.map(|f| (*c, f)))
            .collect();
        for (cpu, _) in &freqs_khz {
            if !self.freq_seen.contains(cpu) {
                self.freq_seen.push(*cpu);
            }
        }
        CounterSample {
            ts_ns,
            power_w,
            freqs_khz,
        }
    }

    /// Metadata for the trace's `otherData`: where the power and frequency counters come from,
    /// or why there are none and what stands in. `kernel_freq` is whether the kernel tracer
    /// records `power:cpu_frequency` (`None`: no tracer ran).
    pub fn notes(&self, kernel_freq: Option<bool>) -> Vec<(&'static str, String)> {
        let power = if self.estimated {
            format!(
                "no measured power: {}; counter \"{}\", once a second",
                self.power_source,
                self.power_label()
            )
        } else {
            format!(
                "{}, counter \"{}\", once a second",
                self.power_source,
                self.power_label()
            )
        };
        let cpufreq = if self.freq_seen.is_empty() {
            format!(
                "no cpufreq frequency for CPUs {} ({} has no cpuN/cpufreq/scaling_cur_freq{})",
                xrunlab_sys::format_cpu_list(&self.cpus),
                self.sys_root.join("devices/system/cpu").display(),
                if self.samples == 0 {
                    "; not sampled yet"
                } else {
                    ""
                }
            )
        } else {
            let mut seen = self.freq_seen.clone();
            seen.sort_unstable();
            format!(
                "cpufreq scaling_cur_freq of CPUs {}, counters \"CPU N MHz (cpufreq)\", once a second",
                xrunlab_sys::format_cpu_list(&seen)
            )
        };
        let kernel = match kernel_freq {
            Some(true) => "the kernel's power:cpu_frequency events, counters \"CPU N MHz (kernel)\" at each change".to_owned(),
            Some(false) => "this kernel has no power:cpu_frequency event".to_owned(),
            None => "the kernel's power:cpu_frequency events are recorded only with explain (kernel tracing) on".to_owned(),
        };
        vec![
            ("xrunlab_power", power),
            ("xrunlab_cpu_frequency", format!("{cpufreq}; {kernel}")),
        ]
    }
}

impl<W: Write> BufferTrace<W> {
    /// Writes one sample of the power and frequency counters on the process track.
    pub fn system_counters(&mut self, s: &CounterSample, power_label: &str) {
        let pid = self.pid();
        if let Some(w) = s.power_w {
            self.writer()
                .counter(pid, power_label, s.ts_ns, &[("W", w)]);
        }
        for (cpu, khz) in &s.freqs_khz {
            self.writer().counter(
                pid,
                &format!("CPU {cpu} MHz (cpufreq)"),
                s.ts_ns,
                &[("MHz", *khz as f64 / 1000.0)],
            );
        }
    }

    /// Writes the counters' notes into the trace's metadata.
    pub fn counter_notes(&mut self, notes: Vec<(&'static str, String)>) {
        for (key, text) in notes {
            self.writer().other_data(key, text.into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xrunlab_trace::{PerfettoOptions, PerfettoWriter};

    use xrunlab_testkit::FixtureTree as Fixture;

    /// A process stat line (52 fields) with `utime` and `stime` ticks (fields 14 and 15).
    fn stat(utime: u64, stime: u64) -> String {
        let mut fields = vec!["0".to_owned(); 50];
        fields[0] = "S".to_owned();
        fields[11] = utime.to_string();
        fields[12] = stime.to_string();
        format!("1 (xrunlab) {}\n", fields.join(" "))
    }

    fn trace_of(counters: &SystemCounters, samples: &[CounterSample]) -> serde_json::Value {
        let writer =
            PerfettoWriter::to_writer(Vec::new(), Path::new("test"), PerfettoOptions::default());
        let mut trace = BufferTrace::new(writer, 7, "test");
        for s in samples {
            trace.system_counters(s, counters.power_label());
        }
        trace.counter_notes(counters.notes(Some(false)));
        let (_, out) = trace.into_writer().finish_into();
        serde_json::from_slice(&out.unwrap()).unwrap()
    }

    #[test]
    fn rapl_and_cpufreq_become_counters_and_the_notes_name_their_source() {
        let fx = Fixture::new("rapl");
        fx.write("sys/class/powercap/intel-rapl:0/energy_uj", "1000000\n");
        fx.write(
            "sys/class/powercap/intel-rapl:0/max_energy_range_uj",
            "262143328850\n",
        );
        fx.write(
            "sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq",
            "2400000\n",
        );
        fx.write(
            "sys/devices/system/cpu/cpu1/cpufreq/scaling_cur_freq",
            "800000\n",
        );
        let mut c =
            SystemCounters::new(&fx.path().join("sys"), &fx.path().join("proc"), vec![0, 1]);
        assert_eq!(c.power_label(), "power W (RAPL package)");
        let first = c.sample(1_000_000_000);
        assert_eq!(first.power_w, None, "power needs two readings");
        assert_eq!(first.freqs_khz, [(0, 2_400_000), (1, 800_000)]);
        // 5 J more: some watts, whatever the (real) time between the samples was.
        fx.write("sys/class/powercap/intel-rapl:0/energy_uj", "6000000\n");
        std::thread::sleep(std::time::Duration::from_millis(20));
        let second = c.sample(2_000_000_000);
        let watts = second.power_w.expect("a power reading");
        assert!(watts > 0.0 && watts.is_finite(), "{watts}");
        let doc = trace_of(&c, &[first, second]);
        let events = doc["traceEvents"].as_array().unwrap();
        let counter = |name: &str| -> Vec<f64> {
            events
                .iter()
                .filter(|e| e["ph"] == "C" && e["name"] == name)
                .map(|e| {
                    e["args"]
                        .as_object()
                        .unwrap()
                        .values()
                        .next()
                        .unwrap()
                        .as_f64()
                        .unwrap()
                })
                .collect()
        };
        assert_eq!(counter("CPU 0 MHz (cpufreq)"), [2400.0, 2400.0]);
        assert_eq!(counter("CPU 1 MHz (cpufreq)"), [800.0, 800.0]);
        assert_eq!(counter("power W (RAPL package)").len(), 1);
        let other = &doc["otherData"];
        assert!(
            other["xrunlab_power"]
                .as_str()
                .unwrap()
                .starts_with("RAPL package energy"),
            "{other}"
        );
        let freq = other["xrunlab_cpu_frequency"].as_str().unwrap();
        assert!(
            freq.starts_with("cpufreq scaling_cur_freq of CPUs 0-1"),
            "{freq}"
        );
        assert!(freq.contains("no power:cpu_frequency event"), "{freq}");
    }

    #[test]
    fn without_rapl_and_cpufreq_the_trace_says_so_and_labels_the_estimate() {
        let fx = Fixture::new("none");
        fx.write("sys/devices/system/cpu/online", "0-1\n");
        fx.write("proc/self/stat", &stat(100, 0));
        let mut c =
            SystemCounters::new(&fx.path().join("sys"), &fx.path().join("proc"), vec![0, 1]);
        assert_eq!(c.power_label(), "power W (estimate: process CPU time)");
        let first = c.sample(1);
        fx.write("proc/self/stat", &stat(200, 50));
        std::thread::sleep(std::time::Duration::from_millis(20));
        let second = c.sample(2);
        assert!(first.freqs_khz.is_empty() && second.freqs_khz.is_empty());
        assert!(second.power_w.is_some(), "the estimate still gives watts");
        let doc = trace_of(&c, &[first, second]);
        let events = doc["traceEvents"].as_array().unwrap();
        assert!(!events
            .iter()
            .any(|e| e["name"].as_str().unwrap_or("").contains("MHz")));
        assert!(events
            .iter()
            .any(|e| e["ph"] == "C" && e["name"] == "power W (estimate: process CPU time)"));
        let other = &doc["otherData"];
        let power = other["xrunlab_power"].as_str().unwrap();
        assert!(
            power.starts_with("no measured power: estimate: process CPU time")
                && power.contains("no RAPL on this machine"),
            "{power}"
        );
        let freq = other["xrunlab_cpu_frequency"].as_str().unwrap();
        assert!(
            freq.starts_with("no cpufreq frequency for CPUs 0-1")
                && freq.contains("scaling_cur_freq"),
            "{freq}"
        );
        assert_eq!(
            c.notes(None)[1].1.rsplit("; ").next().unwrap(),
            "the kernel's power:cpu_frequency events are recorded only with explain (kernel tracing) on"
        );
    }
}
