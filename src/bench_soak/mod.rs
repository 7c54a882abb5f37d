//! `xrunlab bench soak`: runs the engine for a long time on the path `xrunlab run` takes (the lab
//! crate's `soak::run_path`: engine, run collector with its summary; the optional CSV rows are
//! written here) or the dashboard's (engine-owner thread, telemetry, server, one WebSocket reader,
//! in `client_enabled.rs` behind the `soak-client` feature), sampling the process's resident memory
//! with the lab crate's sampler to show it stays flat; prints each sample and writes the JSON after
//! each; runs on the main thread (the dashboard mode adds its own threads).

use crate::cli::SoakArgs;
use crate::csv_out::{CsvOut, CsvRows};
use crate::devices;
use crate::Failure;
use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use xrunlab_dash::DashOptions;
use xrunlab_engine::{Engine, EngineConfig};
use xrunlab_lab::soak::{
    clock, rss_bytes, soak_end, PathEnd, Sampler, SoakResult, TARGET_GROWTH_BYTES,
};
use xrunlab_sys::Provenance;

// The WebSocket reader of `--dashboard` is a test client: the shipped binary leaves it out
// unless built with the `soak-client` feature ("off" says how to get a build that has it).
#[cfg(feature = "soak-client")]
#[path = "client_enabled.rs"]
mod client;
#[cfg(not(feature = "soak-client"))]
#[path = "client_disabled.rs"]
mod client;

pub use xrunlab_lab::soak::SOAK_BUFFER_FRAMES;
/// How often the dashboard loop looks at the clock and the interrupt flag between samples.
const TICK: Duration = Duration::from_millis(100);

fn mb(bytes: f64) -> f64 {
    bytes / 1e6
}

/// Rewrites the JSON result at `path`, if asked for; the first failure is kept for the end.
fn write_json(path: Option<&Path>, result: &SoakResult, error: &RefCell<Option<String>>) {
    let Some(path) = path else {
        return;
    };
    if let Err(e) = xrunlab_results::write::write_json(path, result) {
        error.borrow_mut().get_or_insert(e.to_string());
    }
}

/// Prints the sample just taken: time, RSS, change since the first row, progress.
fn print_sample(r: &SoakResult) {
    let (Some(first), Some(last)) = (r.samples.first(), r.samples.last()) else {
        return;
    };
    let since = if r.samples.len() > 1 {
        format!(
            "{:+.3} MB",
            mb(last.rss_bytes as f64 - first.rss_bytes as f64)
        )
    } else {
        "-".to_owned()
    };
    println!(
        "  {:>10}  {:>9.2}  {:>16}  {:>12}",
        clock(Duration::from_secs_f64(last.t_s)),
        mb(last.rss_bytes as f64),
        since,
        last.count
    );
}

pub fn soak(args: &SoakArgs) -> Result<(), Failure> {
    if args.dashboard {
        client::available().map_err(Failure::Usage)?;
    }
    let base = EngineConfig {
        buffer_frames: SOAK_BUFFER_FRAMES,
        ..EngineConfig::default()
    };
    let mut config = args
        .engine
        .to_config(base)
        .map_err(|e| Failure::Usage(e.0))?;
    rss_bytes()?;
    let provenance = Provenance::collect(
        env!("CARGO_PKG_VERSION"),
        xrunlab_sys::default_proc_root(),
        xrunlab_sys::default_sys_root(),
    );
    let device = devices::open(args.engine.device, &args.engine, &mut config)?;
    let path_name = if args.dashboard { "dashboard" } else { "run" };
    println!(
        "soak: {} path ({}), {} frames at {} Hz, {} sines, {} threads, {}; RSS from /proc/self/status every {}",
        path_name,
        if args.dashboard {
            "engine-owner thread, telemetry frames, server, one WebSocket reader"
        } else if args.csv {
            "engine, run collector with summary, CSV to a temporary file"
        } else {
            "engine, run collector with summary"
        },
        config.buffer_frames,
        config.sample_rate,
        config.sines,
        config.threads,
        humantime::format_duration(args.duration),
        humantime::format_duration(args.sample_every),
    );
    let result = SoakResult {
        schema: xrunlab_lab::soak::SCHEMA.to_owned(),
        provenance,
        path: path_name.to_owned(),
        csv: args.csv,
        config: config.clone(),
        duration_s: args.duration.as_secs_f64(),
        samples: Vec::new(),
        growth_bytes: 0,
        growth_from_s: 0.0,
        target_growth_bytes: TARGET_GROWTH_BYTES,
        complete: false,
        end: "running".to_owned(),
        summary: None,
        frames_received: None,
    };
    let counting = if args.dashboard {
        "frames read"
    } else {
        "buffers"
    };
    println!(
        "  {:>10}  {:>9}  {:>16}  {:>12}",
        "time", "RSS MB", "since first row", counting
    );
    let json = args.json.as_deref();
    let json_error = RefCell::new(None);
    // An unwritable result file is refused before the run, not found out after it.
    write_json(json, &result, &json_error);
    if let Some(e) = json_error.take() {
        return Err(Failure::Runtime(e));
    }
    let mut sampler = Sampler::new(args.sample_every, result, |r| {
        print_sample(r);
        write_json(json, r, &json_error);
    });
    // Signals only set a flag, so the soak ends early with the samples taken so far.
    let interrupted = crate::signals::stop_flag().map_err(Failure::Runtime)?;
    let engine = Engine::start(config, device)?;
    let end = if args.dashboard {
        dashboard_path(args, engine, &mut sampler, &interrupted)?
    } else {
        run_path(args, engine, &mut sampler, &interrupted)?
    };
    let (from_s, growth) = sampler.growth();
    let span = sampler.result.samples.last().map_or(0.0, |l| l.t_s) - from_s;
    // A rate from less than ten minutes says more about the allocator than about growth.
    let per_hour = if span >= 600.0 {
        format!(", {:+.2} MB per hour", mb(growth as f64) * 3600.0 / span)
    } else {
        String::new()
    };
    println!(
        "growth from {} to the end: {:+.3} MB over {}{per_hour}; target under {:.0} MB: {}",
        clock(Duration::from_secs_f64(from_s)),
        mb(growth as f64),
        clock(Duration::from_secs_f64(span.max(0.0))),
        mb(TARGET_GROWTH_BYTES as f64),
        if growth < TARGET_GROWTH_BYTES as i64 {
            "met"
        } else {
            "NOT met"
        }
    );
    if let Some(s) = &end.summary {
        println!(
            "run: {} buffers, {} dropouts, load p50 {:.1} % p99 {:.1} % max {:.1} %",
            s.buffers, s.dropouts, s.load_pct.p50, s.load_pct.p99, s.load_pct.max
        );
    }
    if let Some(n) = end.frames_received {
        println!("dashboard: the WebSocket reader received {n} telemetry frames");
    }
    if !end.complete {
        println!("ended early: {}", end.end);
    }
    let r = &mut sampler.result;
    r.provenance.finish();
    r.complete = end.complete;
    r.end = end.end.clone();
    r.summary = end.summary;
    r.frames_received = end.frames_received;
    let result = sampler.result;
    write_json(json, &result, &json_error);
    if let Some(e) = json_error.take() {
        return Err(Failure::Runtime(e));
    }
    if !end.complete && !interrupted.load(Ordering::SeqCst) {
        return Err(Failure::Runtime(end.end));
    }
    Ok(())
}

/// A CSV file in the temporary directory, removed when dropped.
struct TempCsv {
    path: PathBuf,
}

impl Drop for TempCsv {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// `xrunlab run`'s path (the lab crate's), with `run --csv`'s rows into a temporary file
/// removed at the end.
fn run_path(
    args: &SoakArgs,
    engine: Engine,
    sampler: &mut Sampler,
    interrupted: &AtomicBool,
) -> Result<PathEnd, Failure> {
    let threads = engine.config().realtime_threads();
    let temp = args.csv.then(|| TempCsv {
        path: std::env::temp_dir().join(format!("xrunlab-soak-{}.csv", std::process::id())),
    });
    let csv = match &temp {
        Some(t) => Some(CsvOut::create(&t.path, threads).map_err(Failure::Runtime)?),
        None => None,
    };
    let mut csv = CsvRows::new(csv);
    let stop = || interrupted.load(Ordering::SeqCst);
    let end =
        xrunlab_lab::soak::run_path(engine, args.duration, sampler, &stop, &mut |b| csv.row(b))?;
    let csv_errors = csv.finish();
    if let Some(t) = &temp {
        let size = std::fs::metadata(&t.path).map(|m| m.len()).unwrap_or(0);
        println!(
            "csv: {:.1} MB written to {} (removed now; the rows live on disk, not in memory)",
            mb(size as f64),
            t.path.display()
        );
    }
    Ok(if csv_errors.is_empty() {
        end
    } else {
        PathEnd {
            complete: false,
            end: csv_errors.join("; "),
            ..end
        }
    })
}

/// The dashboard's path without a browser: `xrunlab_dash::start` on loopback (any free port)
/// runs the engine-owner thread, which drains the engine and publishes telemetry frames, and
/// the server, whose per-page task streams them to one WebSocket reader.
fn dashboard_path(
    args: &SoakArgs,
    engine: Engine,
    sampler: &mut Sampler,
    interrupted: &AtomicBool,
) -> Result<PathEnd, Failure> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        // As the dashboard itself: two workers.
        .worker_threads(2)
        .thread_name("xrl-soak-http")
        .enable_all()
        .build()
        .map_err(|e| Failure::Runtime(format!("could not start the tokio runtime: {e}")))?;
    let factory = devices::dashboard_factory(&args.engine);
    let opts = DashOptions::default();
    let frames = Arc::new(AtomicU64::new(0));
    let result = runtime.block_on(async {
        let running = xrunlab_dash::start(opts, engine, factory, devices::available())
            .await
            .map_err(|e| Failure::Runtime(e.to_string()))?;
        let url = format!("ws://127.0.0.1:{}/ws", running.local_addr().port());
        let token = running.token().map(|t| t.as_str().to_owned());
        let reader = tokio::spawn(client::read_frames(url, token, frames.clone()));
        let t0 = Instant::now();
        let (complete, mut end) = loop {
            tokio::time::sleep(TICK).await;
            let t = t0.elapsed();
            if reader.is_finished() {
                break (false, "the WebSocket reader stopped".to_owned());
            }
            if let Some(end) = soak_end(t, args.duration, interrupted.load(Ordering::SeqCst)) {
                break end;
            }
            if sampler.due(t) {
                sampler.take(t, frames.load(Ordering::Relaxed))?;
            }
        };
        // The last sample is taken while the dashboard still runs: stopping it frees the engine.
        sampler.take(t0.elapsed(), frames.load(Ordering::Relaxed))?;
        let stopped = running.shutdown().await;
        let read = reader.await;
        let mut complete = complete;
        if let Err(e) = stopped {
            complete = false;
            end = e.to_string();
        } else if let Ok(Err(e)) = read {
            complete = false;
            end = e;
        }
        Ok::<_, Failure>(PathEnd {
            complete,
            end,
            summary: None,
            frames_received: Some(frames.load(Ordering::Relaxed)),
        })
    });
    runtime.shutdown_timeout(Duration::from_secs(1));
    result
}
