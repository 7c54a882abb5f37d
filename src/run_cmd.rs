//! `xrunlab run` and `xrunlab render`: start the engine, collect every buffer, script bursts and stalls, and write the summary, JSON and CSV, also on Ctrl-C or device failure; runs on the main thread.

use crate::cli::{RenderArgs, RunArgs};
use crate::csv_out::CsvOut;
use crate::result::{self, DeviceCounters, EndOfRun, Event, RunResult, Scheduling};
use crate::Failure;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use xrunlab_engine::device::offline::OfflineDevice;
use xrunlab_engine::{Engine, EngineConfig, EngineError, RunStats};
use xrunlab_sys::Provenance;

/// How often the main thread drains the record rings.
const DRAIN_INTERVAL: Duration = Duration::from_millis(20);

fn start_error(e: EngineError) -> Failure {
    match e {
        EngineError::Config(c) => Failure::Usage(c.to_string()),
        other => Failure::Runtime(other.to_string()),
    }
}

/// Sets a flag on Ctrl-C (and SIGTERM) so the run can end cleanly and keep its data.
fn interrupt_flag() -> Arc<AtomicBool> {
    let flag = Arc::new(AtomicBool::new(false));
    let f = flag.clone();
    // Only one handler may be installed per process; a second call keeps the first.
    let _ = ctrlc::set_handler(move || f.store(true, Ordering::SeqCst));
    flag
}

fn check_writable(path: &Path) -> Result<(), Failure> {
    std::fs::File::create(path)
        .map(|_| ())
        .map_err(|e| Failure::Runtime(format!("cannot write {}: {e}", path.display())))
}

struct Collected {
    stats: RunStats,
    csv: Option<CsvOut>,
    csv_error: Option<String>,
}

impl Collected {
    fn add(&mut self, b: &xrunlab_engine::BufferReport) {
        self.stats.add(b);
        if let Some(csv) = self.csv.as_mut() {
            if let Err(e) = csv.row(b) {
                self.csv_error.get_or_insert(e);
                self.csv = None;
            }
        }
    }
}

pub fn run(args: &RunArgs) -> Result<(), Failure> {
    let mut config = args
        .engine
        .to_config(EngineConfig::default())
        .map_err(|e| Failure::Usage(e.0))?;
    let provenance = Provenance::collect(
        env!("CARGO_PKG_VERSION"),
        xrunlab_sys::default_proc_root(),
        xrunlab_sys::default_sys_root(),
    );
    if let Some(p) = &args.json {
        check_writable(p)?;
    }
    let csv = match &args.csv {
        Some(p) => Some(CsvOut::create(p, config.realtime_threads()).map_err(Failure::Runtime)?),
        None => None,
    };
    let device = crate::devices::open(args.engine.device, &args.engine, &mut config)
        .map_err(Failure::Runtime)?;
    let interrupted = interrupt_flag();
    let expected_threads = config.realtime_threads();
    let mut engine = Engine::start(config, device).map_err(start_error)?;
    let mut col = Collected {
        stats: RunStats::new(expected_threads),
        csv,
        csv_error: None,
    };
    let mut events = Vec::new();
    let t0 = Instant::now();
    let mut next_burst = args.burst_every;
    let mut next_stall = args.stall_every;
    let mut next_progress = Duration::from_secs(1);
    let (reason, ok) = loop {
        std::thread::sleep(DRAIN_INTERVAL);
        engine.drain(|b| col.add(b));
        let t = t0.elapsed();
        if let Some(reason) = engine.device_ended() {
            break (
                format!("device ended: {reason}"),
                !engine.signals().failed(),
            );
        }
        if interrupted.load(Ordering::SeqCst) {
            break (
                format!(
                    "interrupted after {:.1} s (Ctrl-C); data up to then is kept",
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
                events.push(Event {
                    t_s: t.as_secs_f64(),
                    kind: "burst",
                });
                next_burst = Some(at + every);
            }
        }
        if let (Some(at), Some(every), Some(stall)) = (next_stall, args.stall_every, args.stall) {
            if t >= at {
                engine.inject_stall(stall.as_nanos() as u64);
                events.push(Event {
                    t_s: t.as_secs_f64(),
                    kind: "stall",
                });
                next_stall = Some(at + every);
            }
        }
        if !args.quiet && t >= next_progress {
            eprintln!(
                "{:>5.1} s  buffers {}  dropouts {}",
                t.as_secs_f64(),
                col.stats.buffers(),
                col.stats.dropouts()
            );
            next_progress += Duration::from_secs(1);
        }
    };
    finish(
        engine,
        col,
        provenance,
        events,
        reason,
        ok,
        args.json.as_deref(),
    )
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
    let provenance = Provenance::collect(
        env!("CARGO_PKG_VERSION"),
        xrunlab_sys::default_proc_root(),
        xrunlab_sys::default_sys_root(),
    );
    if let Some(p) = &args.json {
        check_writable(p)?;
    }
    let frames = (args.duration.as_secs_f64() * f64::from(config.sample_rate)).round() as u64;
    let device = OfflineDevice::new(
        config.sample_rate,
        config.buffer_frames,
        frames.max(1),
        args.out.clone(),
    );
    let interrupted = interrupt_flag();
    let expected_threads = config.realtime_threads();
    let mut engine = Engine::start(config, Box::new(device)).map_err(start_error)?;
    let mut col = Collected {
        stats: RunStats::new(expected_threads),
        csv: None,
        csv_error: None,
    };
    let (reason, ok) = loop {
        std::thread::sleep(DRAIN_INTERVAL);
        engine.drain(|b| col.add(b));
        if let Some(reason) = engine.device_ended() {
            break (reason, !engine.signals().failed());
        }
        if interrupted.load(Ordering::SeqCst) {
            break (
                "interrupted (Ctrl-C); the WAV file holds what was rendered".into(),
                true,
            );
        }
    };
    finish(
        engine,
        col,
        provenance,
        Vec::new(),
        reason,
        ok,
        args.json.as_deref(),
    )
}

fn finish(
    engine: Engine,
    mut col: Collected,
    mut provenance: Provenance,
    events: Vec<Event>,
    reason: String,
    ok: bool,
    json: Option<&Path>,
) -> Result<(), Failure> {
    let threads = engine.threads();
    let busy_threads = engine.busy_thread_info();
    let busy_achieved_duty_pct = engine.busy_achieved_duty().map(|d| d * 100.0);
    let os_stats = result::os_stats(&threads);
    let device = engine.device_info();
    let process = engine.process_rt().clone();
    let workload = result::workload(&engine);
    let config = engine.config().clone();
    let signals = engine.signals();
    let device_counters = DeviceCounters {
        server_xruns: signals.xruns(),
        skipped_periods: signals.skipped_periods(),
        server_dsp_load_pct: signals.server_load(),
    };
    let ring_drops_before_stop = engine.ring_drops();
    engine.stop(|b| col.add(b));
    provenance.finish();
    let warnings = result::warnings(&threads, &busy_threads, &process, &device);
    let result = RunResult {
        schema: result::SCHEMA,
        provenance,
        preset: config.preset().name(),
        config,
        device,
        workload,
        scheduling: Scheduling {
            threads,
            busy_threads,
            busy_achieved_duty_pct,
            process,
            os_stats,
            warnings,
        },
        summary: col.stats.summary(),
        device_counters,
        ring_drops: ring_drops_before_stop,
        events,
        end: EndOfRun {
            reason: reason.clone(),
            ok,
        },
    };
    let mut errors = Vec::new();
    if let Some(csv) = col.csv.as_mut() {
        if let Err(e) = csv.flush() {
            errors.push(e);
        }
    }
    errors.extend(col.csv_error.take());
    if let Some(path) = json {
        if let Err(e) = result::write_json(path, &result) {
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
