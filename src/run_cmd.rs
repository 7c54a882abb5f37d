//! `xrunlab run` and `xrunlab render`: start the engine, collect every buffer, script bursts and
//! faults, checkpoint the JSON every 10 s, and write the summary, JSON and CSV at the end, also on
//! a stop signal or device failure; runs on the main thread.

use crate::cli::run::{EngineArgs, RenderArgs, RunArgs};
use crate::csv_out::{CsvOut, CsvRows};
use crate::explain_run::Extras;
use crate::files;
use crate::run_file::{with_extras, write_json, EngineFacts};
use crate::signals::StopSignals;
use crate::Failure;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use xrunlab_engine::device::offline::OfflineDevice;
use xrunlab_engine::{
    drain_loop, hooks, BufferReport, Device, DrainEnd, DrainSource, Engine, EngineConfig,
    Injection, Repeat, RunCollector, RunStats, Span,
};
use xrunlab_results::run::{EndOfRun, Event};
use xrunlab_sys::{Fingerprint, Provenance};

/// How often a run rewrites its JSON while it goes, so that a killed run
/// leaves a result at most this old.
const CHECKPOINT_INTERVAL: Duration = Duration::from_secs(10);

fn provenance() -> Provenance {
    Provenance::collect(
        env!("CARGO_PKG_VERSION"),
        xrunlab_sys::default_proc_root(),
        xrunlab_sys::default_sys_root(),
    )
}

/// The statistics of what the session's collector drained (it keeps them; see [`Session::start`]).
fn stats(collector: &RunCollector) -> &RunStats {
    collector
        .stats()
        .expect("a session's collector is made with_summary")
}

/// A running engine and everything collected from it.
struct Session {
    collector: RunCollector,
    csv: CsvRows,
    provenance: Provenance,
    fingerprint: Fingerprint,
    events: Vec<Event>,
    json: Option<PathBuf>,
    t0: Instant,
    next_checkpoint: Duration,
    checkpoint_failed: bool,
    system: xrunlab_sys::RunSystemRecorder,
    extras: Extras,
}

impl Session {
    /// Starts the engine, then the CSV's in-progress file (the rings hold
    /// the first buffers meanwhile). The paths were checked beforehand.
    fn start(
        config: EngineConfig,
        device: Box<dyn Device>,
        provenance: Provenance,
        json: Option<&Path>,
        csv: Option<&Path>,
        mut extras: Extras,
    ) -> Result<Session, Failure> {
        let threads = config.realtime_threads();
        let engine = Engine::start(config, device)?;
        extras.set_threads(&engine.threads());
        let csv = match csv {
            Some(p) => Some(CsvOut::create(p, threads).map_err(Failure::Runtime)?),
            None => None,
        };
        let csv = CsvRows::new(csv);
        Ok(Session {
            collector: RunCollector::new(engine).with_summary(),
            csv,
            provenance,
            fingerprint: Fingerprint::collect(
                xrunlab_sys::default_proc_root(),
                xrunlab_sys::default_sys_root(),
            ),
            events: Vec::new(),
            json: json.map(Path::to_path_buf),
            t0: Instant::now(),
            next_checkpoint: CHECKPOINT_INTERVAL,
            checkpoint_failed: false,
            system: xrunlab_sys::RunSystemRecorder::start(
                xrunlab_sys::default_sys_root(),
                xrunlab_sys::run_system::RUN_FREQ_INTERVAL,
            ),
            extras,
        })
    }

    /// Repeats `injection` every `every`, the first one `every` after the start.
    fn repeat(&mut self, injection: Injection, every: Duration) {
        let first_at = self.t0 + every;
        self.collector
            .schedule_mut()
            .set(Repeat { injection, every }, first_at);
    }

    /// After each drain: the extras' per-drain work, the CSV flushed when due and a checkpoint
    /// written when one is due; returns the time since the start.
    fn after_drain(&mut self) -> Duration {
        self.extras.after_drain(xrunlab_engine::rt::clock::now_ns());
        self.csv.flush_if_due();
        let t = self.t0.elapsed();
        if t >= self.next_checkpoint {
            self.checkpoint(t);
            while self.next_checkpoint <= t {
                self.next_checkpoint += CHECKPOINT_INTERVAL;
            }
        }
        t
    }

    /// Injects what the schedule has due at `t` after the start, each one an event.
    fn inject_due(&mut self, t: Duration) {
        for injection in self.collector.inject_due(self.t0 + t) {
            self.events.push(Event {
                t_s: t.as_secs_f64(),
                kind: injection.kind().name().to_owned(),
            });
        }
    }

    /// Why the device ended, when it did on its own, and whether that is not a failure.
    fn device_end(&self) -> Option<(String, bool)> {
        let engine = self.collector.engine()?;
        let reason = engine.device_ended()?;
        Some((reason, !engine.signals().failed()))
    }

    /// Rewrites the JSON (atomically) with everything measured so far.
    fn checkpoint(&mut self, t: Duration) {
        let (Some(path), Some(engine)) = (&self.json, self.collector.engine()) else {
            return;
        };
        let mut provenance = self.provenance.clone();
        provenance.finish();
        let rows = self
            .csv
            .partial()
            .map(|p| format!("; the CSV rows so far are in {}", p.display()))
            .unwrap_or_default();
        let end = EndOfRun {
            reason: format!(
                "checkpoint at {:.1} s: the run was still going; a later checkpoint or the final result replaces this{rows}",
                t.as_secs_f64()
            ),
            ok: true,
            checkpoint: true,
        };
        let mut fingerprint = self.fingerprint.clone();
        fingerprint.finish(xrunlab_sys::default_proc_root());
        let result = with_extras(
            EngineFacts::read(engine).into_result(
                stats(&self.collector),
                provenance,
                fingerprint,
                self.events.clone(),
                end,
            ),
            self.extras.checkpoint(),
        );
        if let Err(e) = write_json(path, &result) {
            // Once: the final write will report the error again if it persists.
            if !self.checkpoint_failed {
                eprintln!("warning: checkpoint failed: {e}");
                self.checkpoint_failed = true;
            }
        }
    }

    /// Stops the engine (collecting its last buffers), writes the JSON and
    /// renames the CSV into place, and prints the summary.
    fn finish(self, reason: String, ok: bool) -> Result<(), Failure> {
        let Session {
            mut collector,
            mut csv,
            mut provenance,
            mut fingerprint,
            events,
            json,
            system,
            mut extras,
            ..
        } = self;
        let facts = collector.engine().map(EngineFacts::read);
        collector.stop(|b| {
            csv.row(b);
            extras.buffer(b);
        });
        let system = system.finish();
        let extras = extras.finish(xrunlab_engine::rt::clock::now_ns());
        provenance.finish();
        fingerprint.finish(xrunlab_sys::default_proc_root());
        let end = EndOfRun {
            reason: reason.clone(),
            ok,
            checkpoint: false,
        };
        let facts = facts.ok_or_else(|| Failure::Runtime(format!("{reason}; no engine ran")))?;
        let mut result = with_extras(
            facts.into_result(stats(&collector), provenance, fingerprint, events, end),
            extras,
        );
        result.details.system = Some(system);
        let mut errors = csv.finish();
        if let Some(path) = &json {
            if let Err(e) = write_json(path, &result) {
                errors.push(e.to_string());
            }
        }
        print!("{}", crate::summary_text::render(&result));
        if !ok {
            return Err(Failure::Runtime(reason));
        }
        if !errors.is_empty() {
            return Err(Failure::Runtime(errors.join("; ")));
        }
        Ok(())
    }
}

/// The session drains its collector, each buffer to the CSV and the extras (`--explain`,
/// `--trace`) before the loop's sink, so that [`collect`]'s hook sees them written.
impl DrainSource for Session {
    fn drain_into(&mut self, each: &mut dyn FnMut(&BufferReport)) -> usize {
        let Session {
            collector,
            csv,
            extras,
            ..
        } = self;
        collector.drain(|b| {
            csv.row(b);
            extras.buffer(b);
            each(b);
        })
    }
}

/// The steps `run` and `render` share before their device is made: the engine flags as a
/// config (a bad one is a usage error), the command's own `check` of it (what it finds is
/// handed back), provenance from here, and each output path checked (nothing is created yet).
fn prepare<T>(
    engine: &EngineArgs,
    check: impl FnOnce(&EngineConfig) -> Result<T, Failure>,
    outputs: &[(&str, Option<&Path>)],
) -> Result<(EngineConfig, T, Provenance), Failure> {
    let config = engine
        .to_config(EngineConfig::default())
        .map_err(|e| Failure::Usage(e.0))?;
    let checked = check(&config)?;
    let provenance = provenance();
    for (flag, path) in outputs {
        if let Some(p) = path {
            files::check_writable(flag, p)?;
        }
    }
    Ok((config, checked, provenance))
}

/// How a command words the ends the shared loop finds.
struct Endings {
    /// Put before the reason a device gives for ending on its own.
    device: &'static str,
    /// Said after "interrupted by SIGNAL after T s; ".
    interrupted: &'static str,
}

/// Collects through the one drain loop ([`drain_loop`]) until the device ends, a stop signal
/// arrives or `duration` (when given) is reached, calling `step` after each drain but the last
/// with the time since the start; then finishes the session.
fn collect(
    mut session: Session,
    signals: &StopSignals,
    endings: Endings,
    duration: Option<Duration>,
    mut step: impl FnMut(&mut Session, Duration),
) -> Result<(), Failure> {
    let after = |session: &mut Session, _: Duration, last: bool| {
        let t = session.after_drain();
        if let Some((reason, ok)) = session.device_end() {
            return ControlFlow::Break((format!("{}{reason}", endings.device), ok));
        }
        if !last {
            step(session, t);
        }
        ControlFlow::Continue(())
    };
    let span = duration.map_or(Span::Open, Span::For);
    let stopped = || signals.received().is_some();
    let end = drain_loop(&mut session, span, stopped, &mut hooks(|_| {}, after));
    let (reason, ok) = match end {
        DrainEnd::Broke(end) => end,
        DrainEnd::Stopped => (
            format!(
                "interrupted by {} after {:.1} s; {}",
                signals.received().unwrap_or("a stop signal"),
                session.t0.elapsed().as_secs_f64(),
                endings.interrupted
            ),
            true,
        ),
        // Only a run with a duration gets here.
        DrainEnd::Elapsed => (
            format!(
                "duration reached ({})",
                humantime::format_duration(duration.unwrap_or_default())
            ),
            true,
        ),
    };
    session.finish(reason, ok)
}

/// The worker `--hang-worker` names, checked against the configuration.
fn hang_worker(args: &RunArgs, config: &EngineConfig) -> Result<Option<usize>, Failure> {
    let Some(w) = args.hang_worker else {
        return Ok(None);
    };
    let workers = config.worker_threads();
    if workers == 0 {
        return Err(Failure::Usage(format!(
            "invalid value '{w}' for --hang-worker: this configuration has no worker threads \
             (--threads 1 with the driver processing sines)"
        )));
    }
    if !(1..=workers).contains(&w) {
        return Err(Failure::Usage(format!(
            "invalid value '{w}' for --hang-worker: allowed 1..={workers} (the worker threads of this configuration)"
        )));
    }
    Ok(Some(w))
}

pub fn run(args: &RunArgs) -> Result<(), Failure> {
    let (mut config, hang, provenance) = prepare(
        &args.engine,
        |config| hang_worker(args, config),
        &[
            ("--json", args.json.as_deref()),
            ("--csv", args.csv.as_deref()),
            ("--trace", args.trace.as_deref()),
        ],
    )?;
    let device = crate::devices::open(args.engine.device, &args.engine, &mut config)?;
    let signals = StopSignals::install().map_err(Failure::Runtime)?;
    let extras = Extras::start(args, &config)?;
    let mut session = Session::start(
        config,
        device,
        provenance,
        args.json.as_deref(),
        args.csv.as_deref(),
        extras,
    )?;
    if let Some(every) = args.burst_every {
        session.repeat(Injection::Burst, every);
    }
    if let (Some(every), Some(stall)) = (args.stall_every, args.stall) {
        session.repeat(Injection::Stall(stall), every);
    }
    if let (Some(every), Some(worker)) = (args.hang_every, hang) {
        let hang = args.hang;
        session.repeat(Injection::WorkerHang { worker, hang }, every);
    }
    let mut next_progress = Duration::from_secs(1);
    let endings = Endings {
        device: "device ended: ",
        interrupted: "data up to then is kept",
    };
    collect(
        session,
        &signals,
        endings,
        Some(args.duration),
        |session, t| {
            session.inject_due(t);
            if !args.quiet && t >= next_progress {
                let totals = session.collector.totals();
                eprintln!(
                    "{:>5.1} s  buffers {}  dropouts {}",
                    t.as_secs_f64(),
                    totals.buffers,
                    totals.dropouts
                );
                next_progress += Duration::from_secs(1);
            }
        },
    )
}

pub fn render(args: &RenderArgs) -> Result<(), Failure> {
    let only_sim = |_: &EngineConfig| {
        if args.engine.device != crate::cli::parse::DeviceKind::Sim {
            return Err(Failure::Usage(
                "render writes a file with the offline device; --device does not apply".into(),
            ));
        }
        Ok(())
    };
    let (config, (), provenance) = prepare(
        &args.engine,
        only_sim,
        &[("--out", Some(&args.out)), ("--json", args.json.as_deref())],
    )?;
    let frames = (args.duration.as_secs_f64() * f64::from(config.sample_rate)).round() as u64;
    let device = OfflineDevice::new(
        config.sample_rate,
        config.buffer_frames,
        frames.max(1),
        args.out.clone(),
    );
    let signals = StopSignals::install().map_err(Failure::Runtime)?;
    let session = Session::start(
        config,
        Box::new(device),
        provenance,
        args.json.as_deref(),
        None,
        Extras::none(),
    )?;
    let endings = Endings {
        device: "",
        interrupted: "the WAV file holds what was rendered",
    };
    collect(session, &signals, endings, None, |_, _| {})
}
