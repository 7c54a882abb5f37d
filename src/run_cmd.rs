//! `xrunlab run` and `xrunlab render`: start the engine, collect every buffer, script bursts and faults, checkpoint the JSON every 10 s, and write the summary, JSON and CSV at the end, also on a stop signal or device failure; runs on the main thread.

use crate::cli::{RenderArgs, RunArgs};
use crate::csv_out::CsvOut;
use crate::explain_run::Extras;
use crate::files;
use crate::result::{write_json, EndOfRun, EngineFacts, Event};
use crate::signals::StopSignals;
use crate::Failure;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use xrunlab_engine::device::offline::OfflineDevice;
use xrunlab_engine::{BufferReport, Device, Engine, EngineConfig, EngineError, RunStats};
use xrunlab_sys::Provenance;

/// How often the main thread drains the record rings.
const DRAIN_INTERVAL: Duration = Duration::from_millis(20);
/// How often a run rewrites its JSON while it goes, so that a killed run
/// leaves a result at most this old.
const CHECKPOINT_INTERVAL: Duration = Duration::from_secs(10);

fn start_error(e: EngineError) -> Failure {
    match e {
        EngineError::Config(c) => Failure::Usage(c.to_string()),
        other => Failure::Runtime(other.to_string()),
    }
}

fn provenance() -> Provenance {
    Provenance::collect(
        env!("CARGO_PKG_VERSION"),
        xrunlab_sys::default_proc_root(),
        xrunlab_sys::default_sys_root(),
    )
}

/// Adds one buffer to the statistics and the CSV; a CSV that fails is dropped
/// (its rows so far stay in its in-progress file) and the error kept for the end.
fn add(
    stats: &mut RunStats,
    csv: &mut Option<CsvOut>,
    csv_error: &mut Option<String>,
    b: &BufferReport,
) {
    stats.add(b);
    if let Some(out) = csv.as_mut() {
        if let Err(e) = out.row(b) {
            csv_error.get_or_insert(e);
            *csv = None;
        }
    }
}

/// A running engine and everything collected from it.
struct Session {
    engine: Engine,
    stats: RunStats,
    csv: Option<CsvOut>,
    csv_error: Option<String>,
    provenance: Provenance,
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
        let engine = Engine::start(config, device).map_err(start_error)?;
        extras.set_threads(&engine.threads());
        let csv = match csv {
            Some(p) => Some(CsvOut::create(p, threads).map_err(Failure::Runtime)?),
            None => None,
        };
        Ok(Session {
            engine,
            stats: RunStats::new(threads),
            csv,
            csv_error: None,
            provenance,
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

    /// Waits one drain interval, drains, flushes the CSV when due and writes a
    /// checkpoint when one is due; returns the time since the start.
    fn tick(&mut self) -> Duration {
        std::thread::sleep(DRAIN_INTERVAL);
        let Session {
            engine,
            stats,
            csv,
            csv_error,
            extras,
            ..
        } = self;
        engine.drain(|b| {
            add(stats, csv, csv_error, b);
            extras.buffer(b);
        });
        extras.after_drain(xrunlab_engine::rt::clock::now_ns());
        if let Some(out) = self.csv.as_mut() {
            if let Err(e) = out.flush_if_due() {
                self.csv_error.get_or_insert(e);
                self.csv = None;
            }
        }
        let t = self.t0.elapsed();
        if t >= self.next_checkpoint {
            self.checkpoint(t);
            while self.next_checkpoint <= t {
                self.next_checkpoint += CHECKPOINT_INTERVAL;
            }
        }
        t
    }

    /// Rewrites the JSON (atomically) with everything measured so far.
    fn checkpoint(&mut self, t: Duration) {
        let Some(path) = &self.json else {
            return;
        };
        let mut provenance = self.provenance.clone();
        provenance.finish();
        let rows = self
            .csv
            .as_ref()
            .map(|c| format!("; the CSV rows so far are in {}", c.partial().display()))
            .unwrap_or_default();
        let end = EndOfRun {
            reason: format!(
                "checkpoint at {:.1} s: the run was still going; a later checkpoint or the final result replaces this{rows}",
                t.as_secs_f64()
            ),
            ok: true,
            checkpoint: true,
        };
        let result = EngineFacts::read(&self.engine)
            .into_result(self.stats.summary(), provenance, self.events.clone(), end)
            .with_extras(self.extras.checkpoint());
        if let Err(e) = write_json(path, &result) {
            // Once: the final write will report the error again if it persists.
            if !self.checkpoint_failed {
                eprintln!("warning: checkpoint failed: {e}");
                self.checkpoint_failed = true;
            }
        }
    }

    fn event(&mut self, t: Duration, kind: &'static str) {
        self.events.push(Event {
            t_s: t.as_secs_f64(),
            kind,
        });
    }

    /// Stops the engine (collecting its last buffers), writes the JSON and
    /// renames the CSV into place, and prints the summary.
    fn finish(self, reason: String, ok: bool) -> Result<(), Failure> {
        let Session {
            engine,
            mut stats,
            mut csv,
            mut csv_error,
            mut provenance,
            events,
            json,
            system,
            mut extras,
            ..
        } = self;
        let facts = EngineFacts::read(&engine);
        engine.stop(|b| {
            add(&mut stats, &mut csv, &mut csv_error, b);
            extras.buffer(b);
        });
        let system = system.finish();
        let extras = extras.finish(xrunlab_engine::rt::clock::now_ns());
        provenance.finish();
        let end = EndOfRun {
            reason: reason.clone(),
            ok,
            checkpoint: false,
        };
        let mut result = facts
            .into_result(stats.summary(), provenance, events, end)
            .with_extras(extras);
        result.system = Some(system);
        let mut errors = Vec::new();
        if let Some(out) = csv {
            if let Err(e) = out.finish() {
                errors.push(e);
            }
        }
        errors.extend(csv_error);
        if let Some(path) = &json {
            if let Err(e) = write_json(path, &result) {
                errors.push(e);
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
    let mut config = args
        .engine
        .to_config(EngineConfig::default())
        .map_err(|e| Failure::Usage(e.0))?;
    let hang_worker = hang_worker(args, &config)?;
    let provenance = provenance();
    if let Some(p) = &args.json {
        files::check_writable("--json", p)?;
    }
    if let Some(p) = &args.csv {
        files::check_writable("--csv", p)?;
    }
    if let Some(p) = &args.trace {
        files::check_writable("--trace", p)?;
    }
    let device = crate::devices::open(args.engine.device, &args.engine, &mut config)
        .map_err(Failure::Runtime)?;
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
    let mut next_burst = args.burst_every;
    let mut next_stall = args.stall_every;
    let mut next_hang = args.hang_every;
    let mut next_progress = Duration::from_secs(1);
    let (reason, ok) = loop {
        let t = session.tick();
        let engine = &session.engine;
        if let Some(reason) = engine.device_ended() {
            break (
                format!("device ended: {reason}"),
                !engine.signals().failed(),
            );
        }
        if let Some(signal) = signals.received() {
            break (
                format!(
                    "interrupted by {signal} after {:.1} s; data up to then is kept",
                    t.as_secs_f64()
                ),
                true,
            );
        }
        if t >= args.duration {
            break (
                format!(
                    "duration reached ({})",
                    humantime::format_duration(args.duration)
                ),
                true,
            );
        }
        if let (Some(at), Some(every)) = (next_burst, args.burst_every) {
            if t >= at {
                engine.trigger_burst();
                session.event(t, "burst");
                next_burst = Some(at + every);
            }
        }
        if let (Some(at), Some(every), Some(stall)) = (next_stall, args.stall_every, args.stall) {
            if t >= at {
                session.engine.inject_stall(stall.as_nanos() as u64);
                session.event(t, "stall");
                next_stall = Some(at + every);
            }
        }
        if let (Some(at), Some(every), Some(worker)) = (next_hang, args.hang_every, hang_worker) {
            if t >= at {
                session
                    .engine
                    .inject_worker_hang(worker, args.hang.as_nanos() as u64);
                session.event(t, "worker_hang");
                next_hang = Some(at + every);
            }
        }
        if !args.quiet && t >= next_progress {
            eprintln!(
                "{:>5.1} s  buffers {}  dropouts {}",
                t.as_secs_f64(),
                session.stats.buffers(),
                session.stats.dropouts()
            );
            next_progress += Duration::from_secs(1);
        }
    };
    session.finish(reason, ok)
}

pub fn render(args: &RenderArgs) -> Result<(), Failure> {
    let config = args
        .engine
        .to_config(EngineConfig::default())
        .map_err(|e| Failure::Usage(e.0))?;
    if args.engine.device != crate::cli::DeviceKind::Sim {
        return Err(Failure::Usage(
            "render writes a file with the offline device; --device does not apply".into(),
        ));
    }
    let provenance = provenance();
    files::check_writable("--out", &args.out)?;
    if let Some(p) = &args.json {
        files::check_writable("--json", p)?;
    }
    let frames = (args.duration.as_secs_f64() * f64::from(config.sample_rate)).round() as u64;
    let device = OfflineDevice::new(
        config.sample_rate,
        config.buffer_frames,
        frames.max(1),
        args.out.clone(),
    );
    let signals = StopSignals::install().map_err(Failure::Runtime)?;
    let mut session = Session::start(
        config,
        Box::new(device),
        provenance,
        args.json.as_deref(),
        None,
        Extras::none(),
    )?;
    let (reason, ok) = loop {
        let t = session.tick();
        if let Some(reason) = session.engine.device_ended() {
            break (reason, !session.engine.signals().failed());
        }
        if let Some(signal) = signals.received() {
            break (
                format!(
                    "interrupted by {signal} after {:.1} s; the WAV file holds what was rendered",
                    t.as_secs_f64()
                ),
                true,
            );
        }
    };
    session.finish(reason, ok)
}
