//! Building the run's result file (JSON; its types are `xrunlab_results::run`): provenance,
//! settings, scheduling obtained, summary, device counters, end reason; built on the main
//! thread, written atomically at checkpoints and at the end.

use std::path::Path;
use xrunlab_engine::busy::BusyThreadInfo;
use xrunlab_engine::{DeviceInfo, Engine, EngineConfig, ProcessRt, RunStats, ThreadInfo};
use xrunlab_results::run::{DeviceCounters, EndOfRun, Event, RunHistograms, Workload, SCHEMA};
use xrunlab_sys::procfs::ThreadStat;
use xrunlab_sys::{Fingerprint, Provenance};

pub use xrunlab_results::run::{OsThreadStats, RunDetails, Scheduling};

/// A run's result as `run` writes it: the typed core in xrunlab-results (which `compare`
/// and `report` read back) and the sections below.
pub type RunResult = xrunlab_results::run::RunResult<RunDetails>;

/// What took effect for real-time settings that did not: one line each, for the summary and the JSON.
pub fn warnings(
    threads: &[ThreadInfo],
    busy: &[BusyThreadInfo],
    process: &ProcessRt,
    info: &DeviceInfo,
) -> Vec<String> {
    use xrunlab_sys::Outcome;
    let mut out = Vec::new();
    for b in busy {
        if let Outcome::Refused { reason, fallback } = &b.priority {
            out.push(format!(
                "busy thread tid {}: nice 19 refused ({reason}); running with {fallback}",
                b.tid
            ));
        }
    }
    for t in threads {
        let who = thread_name(t.index);
        if t.index == 0 && !info.driver_thread_is_ours {
            continue;
        }
        for (what, o) in [
            ("priority", &t.sched.priority),
            ("SCHED_DEADLINE", &t.sched.deadline),
            ("uclamp.min", &t.sched.uclamp),
            ("affinity", &t.sched.affinity),
        ] {
            match o {
                Outcome::Refused { reason, fallback } => out.push(format!(
                    "{who}: {what} refused ({reason}); running with {fallback}"
                )),
                Outcome::Unsupported { reason } => out.push(format!(
                    "{who}: {what} {reason}; running with {}",
                    t.sched.obtained
                )),
                _ => {}
            }
        }
    }
    for (what, o) in [
        ("mlockall", &process.mlock),
        ("PM QoS (/dev/cpu_dma_latency)", &process.pm_qos),
    ] {
        match o {
            Outcome::Refused { reason, fallback } => {
                out.push(format!("{what} refused ({reason}); {fallback}"))
            }
            Outcome::Unsupported { reason } => out.push(format!("{what}: {reason}")),
            _ => {}
        }
    }
    out
}

pub fn thread_name(index: usize) -> String {
    if index == 0 {
        "driver".into()
    } else {
        format!("worker {index}")
    }
}

/// /proc counters of each audio thread since it started; threads that are gone are skipped.
pub fn os_stats(threads: &[ThreadInfo]) -> Vec<OsThreadStats> {
    let pid = std::process::id() as i32;
    let root = xrunlab_sys::default_proc_root();
    threads
        .iter()
        .filter_map(|t| {
            let now = xrunlab_sys::read_thread_stat(root, pid, t.tid).ok()?;
            let start = t.stat_at_start.unwrap_or_default();
            Some(delta(t, &start, &now))
        })
        .collect()
}

fn delta(t: &ThreadInfo, a: &ThreadStat, b: &ThreadStat) -> OsThreadStats {
    OsThreadStats {
        index: t.index,
        tid: t.tid,
        voluntary_switches: b.voluntary_switches.saturating_sub(a.voluntary_switches),
        involuntary_switches: b
            .involuntary_switches
            .saturating_sub(a.involuntary_switches),
        runqueue_wait_ms: b.runqueue_wait_ns.saturating_sub(a.runqueue_wait_ns) as f64 / 1e6,
        run_ms: b.run_ns.saturating_sub(a.run_ns) as f64 / 1e6,
        kernel_migrations: b
            .migrations
            .zip(a.migrations)
            .map(|(b, a)| b.saturating_sub(a)),
        user_ms: b.utime_ns.saturating_sub(a.utime_ns) as f64 / 1e6,
        system_ms: b.stime_ns.saturating_sub(a.stime_ns) as f64 / 1e6,
    }
}

/// Everything but the summary and end, read from a running engine.
pub fn workload(engine: &Engine) -> Workload {
    let c = engine.config();
    Workload {
        kernel: c.kernel.name().to_owned(),
        sines: c.sines,
        burst_sines: c.burst_sines,
        chord: engine.chord_info(),
    }
}

/// What a result needs from the running engine: read before it stops (its threads are gone after).
pub struct EngineFacts {
    threads: Vec<ThreadInfo>,
    busy_threads: Vec<BusyThreadInfo>,
    busy_achieved_duty_pct: Option<f64>,
    os_stats: Vec<OsThreadStats>,
    device: DeviceInfo,
    process: ProcessRt,
    workload: Workload,
    config: EngineConfig,
    device_counters: DeviceCounters,
    ring_drops: u64,
}

impl EngineFacts {
    /// Reads the facts; cheap (a few small /proc reads), so checkpoints can call it.
    pub fn read(engine: &Engine) -> EngineFacts {
        let threads = engine.threads();
        let signals = engine.signals();
        EngineFacts {
            busy_threads: engine.busy_thread_info(),
            busy_achieved_duty_pct: engine.busy_achieved_duty().map(|d| d * 100.0),
            os_stats: os_stats(&threads),
            threads,
            device: engine.device_info(),
            process: engine.process_rt().clone(),
            workload: workload(engine),
            config: engine.config().clone(),
            device_counters: DeviceCounters {
                server_xruns: signals.xruns(),
                skipped_periods: signals.skipped_periods(),
                server_dsp_load_pct: signals.server_load(),
            },
            ring_drops: engine.ring_drops(),
        }
    }

    /// The result file's content.
    pub fn into_result(
        self,
        stats: &RunStats,
        provenance: Provenance,
        fingerprint: Fingerprint,
        events: Vec<Event>,
        end: EndOfRun,
    ) -> RunResult {
        let warnings = warnings(
            &self.threads,
            &self.busy_threads,
            &self.process,
            &self.device,
        );
        let mut fingerprint = fingerprint;
        if self.device.kind == "jack" {
            fingerprint.server_quantum_frames = Some(self.device.buffer_frames);
        }
        RunResult {
            schema: SCHEMA.to_owned(),
            provenance,
            fingerprint,
            preset: self.config.preset().name().to_owned(),
            config: self.config,
            device: self.device,
            workload: self.workload,
            summary: stats.summary(),
            histograms: RunHistograms::of(stats),
            device_counters: self.device_counters,
            ring_drops: self.ring_drops,
            events,
            end,
            details: RunDetails {
                scheduling: Scheduling {
                    threads: self.threads,
                    busy_threads: self.busy_threads,
                    busy_achieved_duty_pct: self.busy_achieved_duty_pct,
                    process: self.process,
                    os_stats: self.os_stats,
                    warnings,
                },
                system: None,
                explain: None,
                dropouts: None,
                trace: None,
            },
        }
    }
}

/// Adds the `--explain` and `--trace` parts.
pub fn with_extras(mut result: RunResult, extras: crate::explain_run::ExtrasResult) -> RunResult {
    result.details.explain = extras.explain;
    result.details.dropouts = extras.dropouts;
    result.details.trace = extras.trace;
    result
}

/// Writes `result` as pretty JSON to `path`, atomically: the previous file
/// stays whole until the new one replaces it.
pub fn write_json(
    path: &Path,
    result: &RunResult,
) -> Result<(), xrunlab_results::write::WriteError> {
    xrunlab_results::write::write_json(path, result)
}
