//! A background sampler of each CPU's current frequency (cpufreq `scaling_cur_freq`) during a
//! run. It runs on its own ordinary (SCHED_OTHER) thread at a bounded rate, keeps bounded
//! memory, and measures its own CPU time so its cost can be reported.

use crate::cpu::online_cpus;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The shortest sampling interval accepted: 20 samples a second is plenty for frequencies
/// that governors change every few milliseconds at best, and keeps the cost negligible.
pub const MIN_INTERVAL: Duration = Duration::from_millis(50);
/// Samples kept before the trace halves its resolution (12 minutes at 10 Hz).
pub const MAX_SAMPLES: usize = 7_200;

/// One reading of every sampled CPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FreqSample {
    /// Milliseconds since the sampler started.
    pub t_ms: u64,
    /// Frequency of each CPU in [`FreqTrace::cpus`] order, in kHz; `None` where the read failed.
    pub khz: Vec<Option<u64>>,
}

/// Everything a sampler collected.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FreqTrace {
    /// The CPUs sampled (those with a readable `scaling_cur_freq` at start).
    pub cpus: Vec<usize>,
    /// The interval between the samples kept, in milliseconds (doubles each time the trace
    /// reaches [`MAX_SAMPLES`] and drops every other sample).
    pub interval_ms: u64,
    /// The samples, oldest first.
    pub samples: Vec<FreqSample>,
    /// CPU time the sampler thread used, in milliseconds.
    pub sampler_cpu_ms: f64,
    /// How long it ran, in seconds.
    pub elapsed_s: f64,
}

impl FreqTrace {
    /// The sampler's CPU use in percent of one CPU over its run time.
    pub fn sampler_cpu_pct(&self) -> f64 {
        if self.elapsed_s <= 0.0 {
            0.0
        } else {
            self.sampler_cpu_ms / 10.0 / self.elapsed_s
        }
    }
}

/// Why frequencies cannot be sampled; results carry the message as their frequency note.
#[derive(Debug, thiserror::Error)]
pub enum FreqSamplerError {
    /// An interval below [`MIN_INTERVAL`].
    #[error("frequency sampling interval {0:?} is below the minimum {MIN_INTERVAL:?}")]
    Interval(Duration),
    /// No CPU has a readable `scaling_cur_freq` (no cpufreq driver, as in most VMs).
    #[error("not available on this machine (no cpufreq)")]
    NotAvailable,
    /// The sampler's thread could not start.
    #[error("cannot start the frequency sampler thread: {0}")]
    Thread(#[source] std::io::Error),
}

/// A running sampler; [`FreqSampler::stop`] ends it and returns the trace.
pub struct FreqSampler {
    stop: mpsc::Sender<()>,
    handle: JoinHandle<FreqTrace>,
}

impl FreqSampler {
    /// Starts sampling every `interval` the CPUs under `sys_root` (normally "/sys") that have
    /// cpufreq. Errors: an interval below [`MIN_INTERVAL`], no cpufreq on this machine (the
    /// message says so, for results to carry), or a thread that cannot start.
    pub fn start(sys_root: &Path, interval: Duration) -> Result<FreqSampler, FreqSamplerError> {
        if interval < MIN_INTERVAL {
            return Err(FreqSamplerError::Interval(interval));
        }
        let files: Vec<(usize, File)> = online_cpus(sys_root)
            .into_iter()
            .filter_map(|cpu| {
                let path = sys_root.join(format!(
                    "devices/system/cpu/cpu{cpu}/cpufreq/scaling_cur_freq"
                ));
                Some((cpu, File::open(path).ok()?))
            })
            .collect();
        if files.is_empty() {
            return Err(FreqSamplerError::NotAvailable);
        }
        let (stop, stopped) = mpsc::channel();
        let handle = std::thread::Builder::new()
            .name("xrl-freq".to_owned())
            .spawn(move || sample_until_stopped(&files, interval, &stopped))
            .map_err(FreqSamplerError::Thread)?;
        Ok(FreqSampler { stop, handle })
    }

    /// Stops the sampler and returns what it collected.
    pub fn stop(self) -> FreqTrace {
        // A send error means the thread already ended, which join reports.
        let _ = self.stop.send(());
        self.handle.join().unwrap_or_else(|_| FreqTrace {
            cpus: Vec::new(),
            interval_ms: 0,
            samples: Vec::new(),
            sampler_cpu_ms: 0.0,
            elapsed_s: 0.0,
        })
    }
}

/// Reads one `scaling_cur_freq` through its open descriptor (sysfs re-reads from offset 0).
fn read_khz(file: &File, buf: &mut [u8]) -> Option<u64> {
    let n = file.read_at(buf, 0).ok()?;
    std::str::from_utf8(&buf[..n]).ok()?.trim().parse().ok()
}

fn thread_cpu_ms() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a live timespec that clock_gettime fills in.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 * 1e3 + ts.tv_nsec as f64 / 1e6
}

/// Drops every other sample (keeping the first): the whole run at half the resolution,
/// rather than only its start or its end.
fn halve(samples: &mut Vec<FreqSample>) {
    let mut i = 0;
    samples.retain(|_| {
        i += 1;
        i % 2 == 1
    });
}

fn sample_until_stopped(
    files: &[(usize, File)],
    interval: Duration,
    stopped: &mpsc::Receiver<()>,
) -> FreqTrace {
    let cpu0 = thread_cpu_ms();
    let t0 = Instant::now();
    let mut every = interval;
    let mut samples: Vec<FreqSample> = Vec::with_capacity(MAX_SAMPLES);
    let mut buf = [0u8; 32];
    let mut next = t0;
    loop {
        let t_ms = t0.elapsed().as_millis() as u64;
        let khz = files.iter().map(|(_, f)| read_khz(f, &mut buf)).collect();
        samples.push(FreqSample { t_ms, khz });
        if samples.len() >= MAX_SAMPLES {
            halve(&mut samples);
            every *= 2;
        }
        // Absolute schedule, so the samples do not drift later by the read time.
        next += every;
        match stopped.recv_timeout(next.saturating_duration_since(Instant::now())) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    FreqTrace {
        cpus: files.iter().map(|(cpu, _)| *cpu).collect(),
        interval_ms: every.as_millis() as u64,
        samples,
        sampler_cpu_ms: thread_cpu_ms() - cpu0,
        elapsed_s: t0.elapsed().as_secs_f64(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Fixture;

    #[test]
    fn samples_changing_frequencies_until_stopped() {
        let f = Fixture::new("freq-sampler");
        f.write("devices/system/cpu/online", "0-2\n");
        for cpu in [0, 2] {
            f.write(
                &format!("devices/system/cpu/cpu{cpu}/cpufreq/scaling_cur_freq"),
                "800000\n",
            );
        }
        let sampler = FreqSampler::start(f.path(), MIN_INTERVAL).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        f.write(
            "devices/system/cpu/cpu2/cpufreq/scaling_cur_freq",
            "3400000\n",
        );
        std::thread::sleep(Duration::from_millis(200));
        let trace = sampler.stop();
        assert_eq!(trace.cpus, vec![0, 2], "CPU 1 has no cpufreq");
        assert_eq!(trace.interval_ms, 50);
        assert!(trace.samples.len() >= 3, "{trace:?}");
        let first = &trace.samples[0];
        let last = trace.samples.last().unwrap();
        assert_eq!(first.khz, vec![Some(800_000), Some(800_000)]);
        assert_eq!(last.khz, vec![Some(800_000), Some(3_400_000)]);
        assert!(trace.samples.windows(2).all(|w| w[0].t_ms <= w[1].t_ms));
        assert!(trace.elapsed_s >= 0.3);
        assert!(trace.sampler_cpu_ms >= 0.0 && trace.sampler_cpu_pct() < 100.0);
    }

    #[test]
    fn refuses_without_cpufreq_or_with_a_short_interval() {
        let f = Fixture::new("freq-none");
        f.write("devices/system/cpu/online", "0\n");
        let err = FreqSampler::start(f.path(), Duration::from_millis(100))
            .err()
            .unwrap();
        assert!(matches!(err, FreqSamplerError::NotAvailable), "{err:?}");
        assert_eq!(
            err.to_string(),
            "not available on this machine (no cpufreq)"
        );
        let err = FreqSampler::start(f.path(), Duration::from_millis(10))
            .err()
            .unwrap();
        assert!(err.to_string().contains("below the minimum"), "{err}");
    }

    #[test]
    fn halving_keeps_the_whole_run() {
        let mut samples: Vec<FreqSample> = (0..6)
            .map(|t| FreqSample {
                t_ms: t * 100,
                khz: vec![],
            })
            .collect();
        halve(&mut samples);
        let t: Vec<u64> = samples.iter().map(|s| s.t_ms).collect();
        assert_eq!(t, [0, 200, 400]);
    }

    #[test]
    fn a_garbled_reading_is_none() {
        let f = Fixture::new("freq-garbled");
        f.write("devices/system/cpu/online", "0\n")
            .write("devices/system/cpu/cpu0/cpufreq/scaling_cur_freq", "fast\n");
        let trace = FreqSampler::start(f.path(), MIN_INTERVAL).unwrap().stop();
        assert_eq!(trace.samples[0].khz, vec![None]);
    }
}
