//! `xrunlab ab`'s runner: the engine run with two sets of engine settings interleaved (round 1
//! A then B, round 2 A then B, …), a warm-up discarded before each run, and every run written
//! the moment it ends as a typed run result (xrunlab-results' atomic writer), so a stop signal
//! or a failure loses nothing already measured. The caller compares the runs. Runs on the
//! caller's (main) thread; the engine's own threads do the audio work.

use crate::context::{start_progress, Ctx};
use crate::error::LabError;
use serde::Serialize;
use std::fmt;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use xrunlab_engine::{
    drain_loop, hooks, BufferReport, DrainEnd, Engine, EngineConfig, EngineError, ProcessRt,
    RunStats, Span, ThreadInfo,
};
use xrunlab_results::run::{
    DeviceCounters, EndOfRun, RunFile, RunHistograms, RunResult, Workload, SCHEMA,
};
use xrunlab_sys::{Fingerprint, Outcome, Provenance};

/// Discarded at the start of every run: thread start, first page faults, the clock settling.
pub const WARMUP: Duration = Duration::from_millis(250);

/// One of the two sides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Side {
    /// The baseline (`--a`).
    A,
    /// The candidate (`--b`), judged against A.
    B,
}

impl Side {
    /// The start of its files' names: "a" or "b".
    pub fn prefix(self) -> &'static str {
        match self {
            Side::A => "a",
            Side::B => "b",
        }
    }
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Side::A => "A",
            Side::B => "B",
        })
    }
}

pub use crate::device::OpenDevice;

/// One side's settings.
pub struct Arm<'a> {
    /// The engine flags as the user wrote them, recorded in each result.
    pub flags: String,
    /// The configuration they describe, validated.
    pub config: EngineConfig,
    /// Opens the device for a run.
    pub open: Box<OpenDevice<'a>>,
}

/// How long and how often.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Rounds (one run of each side per round).
    pub rounds: usize,
    /// Measured time of each run, after [`Plan::warmup`].
    pub duration: Duration,
    /// Discarded time at the start of each run.
    pub warmup: Duration,
    /// Where the run results go (`a-1.json`, `b-1.json`, …).
    pub dir: PathBuf,
    /// xrunlab's version, for the provenance.
    pub version: String,
}

/// What `ab` adds to a run result: which side and round it was, and the scheduling the side's
/// settings obtained (a refused setting is a warning, never hidden).
#[derive(Debug, Clone, Serialize)]
pub struct AbDetails {
    /// The run's place in the A/B.
    pub ab: AbRun,
    /// What the audio threads and the process obtained.
    pub scheduling: AbScheduling,
}

/// A run's place in the A/B.
#[derive(Debug, Clone, Serialize)]
pub struct AbRun {
    /// "A" or "B".
    pub side: Side,
    /// 1-based round.
    pub round: usize,
    /// Rounds planned.
    pub rounds: usize,
    /// The side's engine flags.
    pub flags: String,
    /// Discarded seconds at the start.
    pub warmup_s: f64,
    /// Seconds measured after the warm-up.
    pub measured_s: f64,
}

/// What the side's real-time settings obtained.
#[derive(Debug, Clone, Serialize)]
pub struct AbScheduling {
    /// The audio threads, what each asked for and got.
    pub threads: Vec<ThreadInfo>,
    /// mlockall and PM QoS.
    pub process: ProcessRt,
    /// One line per setting that did not take effect, and what ran instead.
    pub warnings: Vec<String>,
}

/// A run result as `ab` writes it.
pub type AbRunResult = RunResult<AbDetails>;

/// Everything the A/B measured.
#[derive(Debug, Default)]
pub struct Runs {
    /// Side A's finished runs, with their files.
    pub a: Vec<(PathBuf, RunFile)>,
    /// Side B's finished runs.
    pub b: Vec<(PathBuf, RunFile)>,
    /// Runs cut short by a stop signal: written (marked so in `end`), not compared.
    pub partial: Vec<PathBuf>,
    /// Settings that did not take effect, per side, each once.
    pub warnings: Vec<String>,
    /// Set when a stop signal ended the A/B early: where it was.
    pub interrupted: Option<String>,
}

/// The file of `side`'s run in `round`.
pub fn file_name(side: Side, round: usize) -> String {
    format!("{}-{round}.json", side.prefix())
}

/// Creates `dir` if needed and refuses one that already holds A/B runs, so an earlier A/B's
/// measurements are never overwritten.
pub fn prepare_dir(dir: &Path) -> Result<(), LabError> {
    std::fs::create_dir_all(dir).map_err(|e| {
        LabError::Usage(format!(
            "invalid --dir {}: cannot create it: {e}",
            dir.display()
        ))
    })?;
    let entries = std::fs::read_dir(dir).map_err(|e| {
        LabError::Usage(format!(
            "invalid --dir {}: cannot read it: {e}",
            dir.display()
        ))
    })?;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_run = |p: &str| {
            name.strip_prefix(p)
                .and_then(|n| n.strip_suffix(".json"))
                .is_some_and(|n| n.parse::<usize>().is_ok())
        };
        if is_run("a-") || is_run("b-") {
            return Err(LabError::Usage(format!(
                "invalid --dir {}: it already holds A/B runs ({name}); give an empty or new \
                 directory so they are not overwritten",
                dir.display()
            )));
        }
    }
    Ok(())
}

/// One side's run as it ended.
struct Measured {
    result: AbRunResult,
    /// A stop signal came before the duration was measured.
    stopped: bool,
    /// The device ended on its own (a server gone), with its reason.
    device_ended: Option<String>,
}

/// Runs the A/B: up to `plan.rounds` rounds of A then B, each run written to `plan.dir` as
/// soon as it ends. `say` receives a line per finished run; `after_round` is called with the
/// round and the runs so far after each round, and ends the A/B by returning true (a
/// sequential A/B's stopping rule). A stop signal (polled through `ctx`) ends the A/B after
/// writing the run it interrupted; a run that fails ends it with an error, the runs before it
/// kept on disk.
pub fn run<'a>(
    ctx: &Ctx,
    plan: &Plan,
    (a, b): (&mut Arm<'a>, &mut Arm<'a>),
    say: &mut dyn FnMut(&str),
    after_round: &mut dyn FnMut(usize, &Runs) -> bool,
) -> Result<Runs, LabError> {
    let per_run = (plan.warmup + plan.duration).as_millis() as u64;
    start_progress(ctx, per_run * 2 * plan.rounds as u64, "ab");
    let mut runs = Runs::default();
    'rounds: for round in 1..=plan.rounds {
        for (side, arm) in [(Side::A, &mut *a), (Side::B, &mut *b)] {
            if ctx.stopped() {
                runs.interrupted = Some(format!(
                    "before round {round} of {}, side {side}",
                    plan.rounds
                ));
                break 'rounds;
            }
            ctx.progress.set_message(format!(
                "round {round}/{}: {side} ({})",
                plan.rounds, arm.flags
            ));
            let done = per_run * (2 * (round as u64 - 1) + u64::from(side == Side::B));
            let measured = measure(ctx, plan, arm, side, round, done)?;
            let path = plan.dir.join(file_name(side, round));
            xrunlab_results::write::write_json(&path, &measured.result)?;
            for w in &measured.result.details.scheduling.warnings {
                let w = format!("{side}: {w}");
                if !runs.warnings.contains(&w) {
                    runs.warnings.push(w);
                }
            }
            if let Some(reason) = measured.device_ended {
                return Err(LabError::Runtime(format!(
                    "side {side}, round {round}: the device ended ({reason}); the runs so far \
                     are in {}",
                    plan.dir.display()
                )));
            }
            if measured.stopped {
                say(&format!(
                    "round {round}/{} {side}: interrupted; written to {} (not compared)",
                    plan.rounds,
                    path.display()
                ));
                runs.partial.push(path);
                runs.interrupted = Some(format!(
                    "during round {round} of {}, side {side}",
                    plan.rounds
                ));
                break 'rounds;
            }
            let s = &measured.result.summary;
            say(&format!(
                "round {round}/{} {side}: load p50 {:.2} % p99 {:.2} %, driver wake-up p99 \
                 {:.1} us, dropouts {} -> {}",
                plan.rounds,
                s.load_pct.p50,
                s.load_pct.p99,
                s.driver_wake_latency_us.p99,
                s.dropouts,
                path.display()
            ));
            let file = measured.result.into_file();
            match side {
                Side::A => runs.a.push((path, file)),
                Side::B => runs.b.push((path, file)),
            }
        }
        if after_round(round, &runs) {
            break;
        }
    }
    ctx.progress.finish_and_clear();
    Ok(runs)
}

/// One run of one side: warm-up discarded, then `plan.duration` measured.
fn measure(
    ctx: &Ctx,
    plan: &Plan,
    arm: &mut Arm,
    side: Side,
    round: usize,
    done_ms: u64,
) -> Result<Measured, LabError> {
    let mut config = arm.config.clone();
    let device = (arm.open)(&mut config).map_err(|source| LabError::Device {
        context: format!("side {side}: cannot open the device"),
        source,
    })?;
    let (proc_root, sys_root) = (
        xrunlab_sys::default_proc_root(),
        xrunlab_sys::default_sys_root(),
    );
    let mut provenance = Provenance::collect(&plan.version, proc_root, sys_root);
    let mut fingerprint = Fingerprint::collect(proc_root, sys_root);
    let threads = config.realtime_threads();
    let unlock = config.rt.mlock;
    let mut engine = Engine::start(config, device).map_err(|e| match e {
        EngineError::Config(c) => LabError::Usage(format!("in --{}: {c}", side.prefix())),
        source => LabError::Engine {
            context: format!("side {side}: the engine did not start"),
            source,
        },
    })?;
    let t0 = Instant::now();
    // After each drain of the warm-up and the measurement: the progress bar, and the end of a
    // device that ended on its own (a closure of shared borrows, so both loops take a copy).
    let watch = |e: &mut Engine, _: Duration, _: bool| {
        ctx.progress
            .set_position(done_ms + t0.elapsed().as_millis() as u64);
        e.device_ended()
            .map_or(ControlFlow::Continue(()), ControlFlow::Break)
    };
    let stop = || ctx.stopped();
    let warmup = Span::For(plan.warmup);
    let mut end = drain_loop(&mut engine, warmup, stop, &mut hooks(|_| {}, watch));
    let mut stats = RunStats::new(threads);
    let t1 = Instant::now();
    if end == DrainEnd::Elapsed {
        let measuring = Span::For(plan.duration);
        let mut sink = hooks(|b: &BufferReport| stats.add(b), watch);
        end = drain_loop(&mut engine, measuring, stop, &mut sink);
    }
    let (device_ended, stopped) = match end {
        DrainEnd::Broke(reason) => (Some(reason), false),
        DrainEnd::Stopped => (None, true),
        DrainEnd::Elapsed => (None, false),
    };
    let measured_s = t1.elapsed().as_secs_f64();
    // Read before stopping: the threads are gone after.
    let device = engine.device_info();
    let c = engine.config().clone();
    let workload = Workload {
        kernel: c.kernel.name().to_owned(),
        sines: c.sines,
        burst_sines: c.burst_sines,
        chord: engine.chord_info(),
    };
    let signals = engine.signals();
    let device_counters = DeviceCounters {
        server_xruns: signals.xruns(),
        skipped_periods: signals.skipped_periods(),
        server_dsp_load_pct: signals.server_load(),
    };
    let ring_drops = engine.ring_drops();
    let thread_info = engine.threads();
    let process = engine.process_rt().clone();
    engine.stop(|b| stats.add(b));
    if unlock {
        // mlockall outlives the engine; the other side's next run must start unlocked.
        xrunlab_sys::sched::unlock_memory();
    }
    provenance.finish();
    fingerprint.finish(proc_root);
    if device.kind == "jack" {
        fingerprint.server_quantum_frames = Some(device.buffer_frames);
    }
    let warnings = warnings(&thread_info, &process, device.driver_thread_is_ours);
    let end = match (&device_ended, stopped) {
        (Some(reason), _) => EndOfRun {
            reason: format!("device ended: {reason}"),
            ok: false,
            checkpoint: false,
        },
        (None, true) => EndOfRun {
            reason: format!(
                "interrupted after {measured_s:.1} s of {:.1} s; data up to then is kept, but \
                 the run is not compared (it is shorter than the others)",
                plan.duration.as_secs_f64()
            ),
            ok: true,
            checkpoint: false,
        },
        (None, false) => EndOfRun {
            reason: format!(
                "duration reached ({:.1} s after a {:.2} s warm-up)",
                plan.duration.as_secs_f64(),
                plan.warmup.as_secs_f64()
            ),
            ok: true,
            checkpoint: false,
        },
    };
    let result = RunResult {
        schema: SCHEMA.to_owned(),
        provenance,
        fingerprint,
        preset: c.preset().name().to_owned(),
        config: c,
        device,
        workload,
        summary: stats.summary(),
        histograms: RunHistograms::of(&stats),
        device_counters,
        ring_drops,
        events: Vec::new(),
        end,
        details: AbDetails {
            ab: AbRun {
                side,
                round,
                rounds: plan.rounds,
                flags: arm.flags.clone(),
                warmup_s: plan.warmup.as_secs_f64(),
                measured_s,
            },
            scheduling: AbScheduling {
                threads: thread_info,
                process,
                warnings,
            },
        },
    };
    Ok(Measured {
        result,
        stopped,
        device_ended,
    })
}

/// A line per real-time setting that did not take effect (the same facts `run` warns about).
fn warnings(threads: &[ThreadInfo], process: &ProcessRt, driver_is_ours: bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut note = |what: String, o: &Outcome| match o {
        Outcome::Refused { reason, fallback } => {
            let line = format!("{what} refused ({reason}); running with {fallback}");
            if !out.contains(&line) {
                out.push(line);
            }
        }
        Outcome::Unsupported { reason } => {
            let line = format!("{what}: {reason}");
            if !out.contains(&line) {
                out.push(line);
            }
        }
        Outcome::NotRequested | Outcome::Applied { .. } => {}
    };
    for t in threads.iter().filter(|t| t.index > 0 || driver_is_ours) {
        let who = if t.index == 0 {
            "driver".to_owned()
        } else {
            format!("worker {}", t.index)
        };
        note(format!("{who}: priority"), &t.sched.priority);
        note(format!("{who}: SCHED_DEADLINE"), &t.sched.deadline);
        note(format!("{who}: uclamp.min"), &t.sched.uclamp);
        note(format!("{who}: affinity"), &t.sched.affinity);
    }
    note("mlockall".to_owned(), &process.mlock);
    note("PM QoS (/dev/cpu_dma_latency)".to_owned(), &process.pm_qos);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use xrunlab_engine::device::sim::SimDevice;
    use xrunlab_results::read::read_typed;

    fn arm(flags: &str, slowdown: u32) -> Arm<'static> {
        let config = EngineConfig {
            kernel_slowdown: slowdown,
            sines: 16,
            ..EngineConfig::default()
        };
        Arm {
            flags: flags.to_owned(),
            config,
            open: Box::new(|c: &mut EngineConfig| {
                Ok(
                    Box::new(SimDevice::new(c.sample_rate, c.buffer_frames, false))
                        as Box<dyn xrunlab_engine::Device>,
                )
            }),
        }
    }

    #[test]
    fn runs_interleave_and_every_run_is_a_readable_run_result() {
        let dir = tempfile::tempdir().unwrap();
        let plan = Plan {
            rounds: 2,
            duration: Duration::from_millis(300),
            warmup: Duration::from_millis(50),
            dir: dir.path().to_path_buf(),
            version: "test".into(),
        };
        let never = || false;
        let ctx = Ctx::silent(&never);
        let mut lines = Vec::new();
        let mut rounds_seen = Vec::new();
        let runs = run(
            &ctx,
            &plan,
            (&mut arm("", 1), &mut arm("--kernel-slowdown 2", 2)),
            &mut |l| lines.push(l.to_owned()),
            &mut |round, runs| {
                rounds_seen.push((round, runs.a.len(), runs.b.len()));
                false
            },
        )
        .unwrap();
        assert_eq!(rounds_seen, [(1, 1, 1), (2, 2, 2)]);
        assert_eq!((runs.a.len(), runs.b.len()), (2, 2));
        let order: Vec<String> = lines.iter().map(|l| l[..9].to_owned()).collect();
        assert_eq!(order, ["round 1/2", "round 1/2", "round 2/2", "round 2/2"]);
        assert!(
            lines[0].contains(" A:") && lines[1].contains(" B:"),
            "{lines:?}"
        );
        for (path, file) in runs.a.iter().chain(&runs.b) {
            let back: RunFile = read_typed(path, SCHEMA).unwrap();
            assert_eq!(back.summary.buffers, file.summary.buffers);
            assert_eq!(back.histograms, file.histograms);
            assert!(back.summary.buffers > 0);
            assert!(back.end.ok && !back.end.checkpoint);
        }
        assert_eq!(runs.b[0].1.config.kernel_slowdown, 2);
        let text = std::fs::read_to_string(dir.path().join("b-2.json")).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["ab"]["side"], "B");
        assert_eq!(v["ab"]["round"], 2);
        assert_eq!(v["ab"]["flags"], "--kernel-slowdown 2");
        let refused = prepare_dir(dir.path()).unwrap_err();
        assert!(refused.to_string().contains("already holds A/B runs"));
    }

    #[test]
    fn the_stopping_rule_ends_the_ab_after_the_round_it_says() {
        let dir = tempfile::tempdir().unwrap();
        let plan = Plan {
            rounds: 5,
            duration: Duration::from_millis(100),
            warmup: Duration::from_millis(20),
            dir: dir.path().to_path_buf(),
            version: "test".into(),
        };
        let never = || false;
        let ctx = Ctx::silent(&never);
        let (mut a, mut b) = (arm("", 1), arm("", 1));
        let runs = run(
            &ctx,
            &plan,
            (&mut a, &mut b),
            &mut |_| {},
            &mut |round, _| round == 2,
        )
        .unwrap();
        assert_eq!((runs.a.len(), runs.b.len()), (2, 2));
        assert!(runs.interrupted.is_none());
        assert!(!dir.path().join("a-3.json").exists());
    }

    #[test]
    fn a_stop_keeps_the_interrupted_run_on_disk_and_out_of_the_comparison() {
        let dir = tempfile::tempdir().unwrap();
        let plan = Plan {
            rounds: 3,
            duration: Duration::from_millis(400),
            warmup: Duration::from_millis(20),
            dir: dir.path().to_path_buf(),
            version: "test".into(),
        };
        let start = Instant::now();
        // Stops during round 1's B run (A takes about 420 ms).
        let stop = move || start.elapsed() > Duration::from_millis(600);
        let ctx = Ctx::silent(&stop);
        let (mut a, mut b) = (arm("", 1), arm("", 1));
        let runs = run(&ctx, &plan, (&mut a, &mut b), &mut |_| {}, &mut |_, _| {
            false
        })
        .unwrap();
        assert_eq!((runs.a.len(), runs.b.len()), (1, 0));
        assert_eq!(runs.partial, [dir.path().join("b-1.json")]);
        assert!(runs.interrupted.unwrap().contains("round 1 of 3, side B"));
        let back: RunFile = read_typed(&runs.partial[0], SCHEMA).unwrap();
        assert!(
            back.end.reason.contains("not compared"),
            "{}",
            back.end.reason
        );
    }
}
