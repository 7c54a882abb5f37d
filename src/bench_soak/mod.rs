//! `xrunlab bench soak`: runs the engine for a long time on the path `xrunlab run` takes (engine, run collector with its summary, optional CSV) or the dashboard's (engine-owner thread, telemetry, server, one WebSocket reader, in `client_on.rs` behind the `soak-client` feature), and samples the process's resident memory to show it stays flat; runs on the main thread (the dashboard mode adds its own threads).

use crate::cli::parse::DeviceKind;
use crate::cli::SoakArgs;
use crate::csv_out::{CsvOut, CsvRows};
use crate::devices;
use crate::Failure;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use xrunlab_dash::{DashOptions, DeviceFactory};
use xrunlab_engine::{Engine, EngineConfig, RunCollector, Summary};
use xrunlab_sys::Provenance;

// The WebSocket reader of `--dashboard` is a test client: the shipped binary leaves it out
// unless built with the `soak-client` feature ("off" says how to get a build that has it).
#[cfg(feature = "soak-client")]
#[path = "client_on.rs"]
mod client;
#[cfg(not(feature = "soak-client"))]
#[path = "client_off.rs"]
mod client;

/// Buffer size a soak uses unless `--buffer` says otherwise: the smallest common one, where
/// per-buffer memory would grow fastest (1500 buffers a second at 48 kHz).
pub const SOAK_BUFFER_FRAMES: u32 = 32;
/// Growth from the first periodic sample to the end that the soak counts as flat.
const TARGET_GROWTH_BYTES: u64 = 2_000_000;
/// How often the run path drains the rings: the same as `xrunlab run`.
const DRAIN_INTERVAL: Duration = Duration::from_millis(20);
/// How often the loops look at the clock and the interrupt flag between samples.
const TICK: Duration = Duration::from_millis(100);

/// One resident-memory sample.
#[derive(Debug, Clone, Copy, Serialize)]
struct Sample {
    /// Seconds since the engine started.
    t_s: f64,
    /// VmRSS from /proc/self/status, bytes.
    rss_bytes: u64,
    /// Buffers received (run path) or telemetry frames read (dashboard path) so far.
    count: u64,
}

/// The JSON result; written after every sample, so a soak that is killed keeps its samples.
#[derive(Debug, Serialize)]
struct SoakResult {
    schema: &'static str,
    provenance: Provenance,
    /// "run" or "dashboard".
    path: &'static str,
    csv: bool,
    config: EngineConfig,
    duration_s: f64,
    samples: Vec<Sample>,
    /// Growth from `growth_from_s` to the last sample, bytes (negative: it shrank).
    growth_bytes: i64,
    growth_from_s: f64,
    target_growth_bytes: u64,
    /// Whether the run got to its end (not Ctrl-C or a failure); false while it runs.
    complete: bool,
    /// "running" until the soak ends, then why it ended.
    end: String,
    /// The run summary, on the run path.
    summary: Option<Summary>,
    /// Telemetry frames the WebSocket reader received, on the dashboard path.
    frames_received: Option<u64>,
}

fn rss_bytes() -> Result<u64, Failure> {
    xrunlab_sys::read_rss_bytes(xrunlab_sys::default_proc_root(), "self").map_err(|e| {
        Failure::Runtime(format!(
            "bench soak measures resident memory from /proc/self/status and cannot read it: {e}"
        ))
    })
}

/// Sets a flag on Ctrl-C, SIGTERM or SIGHUP so the soak ends early with the samples taken so far.
fn interrupt_flag() -> Arc<AtomicBool> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let flag = Arc::new(AtomicBool::new(false));
    for signal in [SIGINT, SIGTERM, SIGHUP] {
        // A failed registration leaves that signal's default action, which ends the soak
        // with the samples already written to its JSON.
        let _ = signal_hook::flag::register(signal, flag.clone());
    }
    flag
}

fn write_atomically(path: &Path, text: &str) -> Result<(), String> {
    crate::files::write_atomically(path, text.as_bytes()).map_err(|e| e.to_string())
}

fn mb(bytes: f64) -> f64 {
    bytes / 1e6
}

fn clock(t: Duration) -> String {
    let s = t.as_secs();
    format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// Takes samples at the start, every `every` and at the end; prints each row as it is taken
/// and rewrites the JSON result.
struct Sampler {
    every: Duration,
    next: Duration,
    result: SoakResult,
    json: Option<PathBuf>,
    json_error: Option<String>,
}

impl Sampler {
    /// `counting` names the progress column: "buffers" or "frames read".
    fn new(every: Duration, counting: &str, result: SoakResult, json: Option<PathBuf>) -> Sampler {
        println!(
            "  {:>10}  {:>9}  {:>16}  {:>12}",
            "time", "RSS MB", "since first row", counting
        );
        Sampler {
            every,
            next: every,
            result,
            json,
            json_error: None,
        }
    }

    fn due(&self, t: Duration) -> bool {
        self.result.samples.is_empty() || t >= self.next
    }

    fn take(&mut self, t: Duration, count: u64) -> Result<(), Failure> {
        let rss = rss_bytes()?;
        while self.next <= t {
            self.next += self.every;
        }
        let since = match self.result.samples.first() {
            Some(first) => format!("{:+.3} MB", mb(rss as f64 - first.rss_bytes as f64)),
            None => "-".to_owned(),
        };
        println!(
            "  {:>10}  {:>9.2}  {:>16}  {:>12}",
            clock(t),
            mb(rss as f64),
            since,
            count
        );
        self.result.samples.push(Sample {
            t_s: t.as_secs_f64(),
            rss_bytes: rss,
            count,
        });
        (self.result.growth_from_s, self.result.growth_bytes) = self.growth();
        self.write_json();
        Ok(())
    }

    /// Growth from the first periodic sample (after warm-up: rings, histograms and allocator
    /// arenas are in place by then) to the last; from the start sample on runs shorter than
    /// one period.
    fn growth(&self) -> (f64, i64) {
        let samples = &self.result.samples;
        let last = samples.last();
        let base = samples
            .iter()
            .find(|s| s.t_s >= self.every.as_secs_f64())
            .filter(|s| last.is_some_and(|l| l.t_s > s.t_s))
            .or(samples.first());
        match (base, last) {
            (Some(b), Some(l)) => (b.t_s, l.rss_bytes as i64 - b.rss_bytes as i64),
            _ => (0.0, 0),
        }
    }

    /// Rewrites the JSON result, if asked for; the first failure is kept for the end.
    fn write_json(&mut self) {
        let Some(path) = &self.json else {
            return;
        };
        let written = serde_json::to_string_pretty(&self.result)
            .map_err(|e| format!("cannot serialize the result: {e}"))
            .and_then(|text| write_atomically(path, &(text + "\n")));
        if let Err(e) = written {
            self.json_error.get_or_insert(e);
        }
    }
}

/// What a soak path hands back besides the samples.
struct PathEnd {
    complete: bool,
    end: String,
    summary: Option<Summary>,
    frames_received: Option<u64>,
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
    let device =
        devices::open(args.engine.device, &args.engine, &mut config).map_err(Failure::Runtime)?;
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
        schema: "xrunlab.soak/1",
        provenance,
        path: path_name,
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
    let mut sampler = Sampler::new(args.sample_every, counting, result, args.json.clone());
    // An unwritable result file is refused before the run, not found out after it.
    sampler.write_json();
    if let Some(e) = sampler.json_error.take() {
        return Err(Failure::Runtime(e));
    }
    let interrupted = interrupt_flag();
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
    sampler.write_json();
    if let Some(e) = sampler.json_error {
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

/// `xrunlab run`'s collection: drain every 20 ms through a [`RunCollector`] keeping the
/// summary (and into the CSV), summary at the end.
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
    let mut collector = RunCollector::new(engine).with_summary();
    let t0 = Instant::now();
    let (complete, end) = loop {
        std::thread::sleep(DRAIN_INTERVAL);
        collector.drain(|b| csv.row(b));
        let t = t0.elapsed();
        if let Some(reason) = collector.engine().and_then(Engine::device_ended) {
            break (false, format!("device ended: {reason}"));
        }
        if let Some(end) = soak_end(t, args, interrupted) {
            break end;
        }
        if sampler.due(t) {
            sampler.take(t, collector.totals().buffers)?;
        }
    };
    // The last sample is taken while the engine still runs: stopping it frees its rings.
    sampler.take(t0.elapsed(), collector.totals().buffers)?;
    collector.stop(|b| csv.row(b));
    let summary = collector.summary();
    let csv_errors = csv.finish();
    if let Some(t) = &temp {
        let size = std::fs::metadata(&t.path).map(|m| m.len()).unwrap_or(0);
        println!(
            "csv: {:.1} MB written to {} (removed now; the rows live on disk, not in memory)",
            mb(size as f64),
            t.path.display()
        );
    }
    let (complete, end) = if csv_errors.is_empty() {
        (complete, end)
    } else {
        (false, csv_errors.join("; "))
    };
    Ok(PathEnd {
        complete,
        end,
        summary,
        frames_received: None,
    })
}

/// Whether a soak ends at `t`, and how: (complete, reason) when a signal came or its duration
/// is reached.
fn soak_end(t: Duration, args: &SoakArgs, interrupted: &AtomicBool) -> Option<(bool, String)> {
    if interrupted.load(Ordering::SeqCst) {
        return Some((
            false,
            format!("interrupted after {} (Ctrl-C, SIGTERM or SIGHUP)", clock(t)),
        ));
    }
    (t >= args.duration).then(|| (true, "duration reached".to_owned()))
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
    let jack = devices::jack_args(&args.engine);
    let factory: DeviceFactory = Box::new(move |kind, config| {
        let kind = match kind {
            "sim" => DeviceKind::Sim,
            "jack" => DeviceKind::Jack,
            other => return Err(format!("unknown device {other:?}")),
        };
        devices::open_with(kind, &jack, &mut config.clone())
    });
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
            if let Some(end) = soak_end(t, args, interrupted) {
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
