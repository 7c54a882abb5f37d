//! Measures the engine on JACK against the simulated device: wake-up latency, engine overhead, and
//! the largest sine count without a dropout; runs on the main thread, the engine's threads do the
//! audio.
//!
//! Needs a running JACK server for the JACK half, e.g.
//! `jackd -n bench -R -d dummy -r 48000 -p 128 &`. Usage:
//!
//! ```text
//! cargo run --release -p xrunlab-jack --example jack_vs_sim -- compare [--server bench] [--sines 300] [--seconds 10]
//! cargo run --release -p xrunlab-jack --example jack_vs_sim -- capacity [--server bench] [--device jack|sim] [--seconds 30]
//! ```
//!
//! Both use the Standard preset (2 processing threads, the driver processes
//! sines), the reference kernel, 128 frames at 48 kHz. A dropout is a late
//! render, a server xrun, or a period the simulated device had to skip.

use std::time::{Duration, Instant};
use xrunlab_engine::device::sim::SimDevice;
use xrunlab_engine::{BufferReport, Device, Engine, EngineConfig};
use xrunlab_jack::{JackDevice, JackOptions};

struct Args {
    mode: String,
    server: Option<String>,
    device: String,
    sines: usize,
    seconds: f64,
    fast: bool,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        mode: String::new(),
        server: None,
        device: "both".into(),
        sines: 300,
        seconds: 10.0,
        fast: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--server" => a.server = Some(value()?),
            "--device" => a.device = value()?,
            "--sines" => a.sines = value()?.parse().map_err(|e| format!("--sines: {e}"))?,
            "--seconds" => a.seconds = value()?.parse().map_err(|e| format!("--seconds: {e}"))?,
            "--fast" => a.fast = true,
            "compare" | "capacity" => a.mode = arg,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if a.mode.is_empty() {
        return Err("say `compare` or `capacity`".into());
    }
    Ok(a)
}

fn device(kind: &str, server: &Option<String>) -> Result<Box<dyn Device>, String> {
    match kind {
        "sim" => Ok(Box::new(SimDevice::new(48_000, 128, false))),
        _ => JackDevice::connect(JackOptions {
            server: server.clone(),
            ..JackOptions::default()
        })
        .map(|d| Box::new(d) as Box<dyn Device>)
        .map_err(|e| e.to_string()),
    }
}

/// What one run measured.
struct Run {
    buffers: Vec<BufferReport>,
    xruns: u64,
    skipped: u64,
    server_load: Option<f32>,
}

impl Run {
    fn dropouts(&self) -> usize {
        self.buffers.iter().filter(|b| b.dropout()).count()
            + self.xruns as usize
            + self.skipped as usize
    }
}

fn run(kind: &str, a: &Args, sines: usize, seconds: f64) -> Result<Run, String> {
    let mut config = EngineConfig {
        sines,
        ..EngineConfig::default()
    };
    if a.fast {
        config.kernel = xrunlab_dsp::Kernel::Fast;
    }
    let mut engine = Engine::start(config, device(kind, &a.server)?).map_err(|e| e.to_string())?;
    // Settle: the first buffers carry thread start-up and the fade-in.
    std::thread::sleep(Duration::from_millis(500));
    engine.drain(|_| {});
    let xruns0 = engine.signals().xruns();
    let skipped0 = engine.signals().skipped_periods();
    let mut buffers = Vec::new();
    let t0 = Instant::now();
    while t0.elapsed().as_secs_f64() < seconds {
        std::thread::sleep(Duration::from_millis(200));
        engine.drain(|b| buffers.push(b.clone()));
        if let Some(reason) = engine.device_ended() {
            return Err(reason);
        }
    }
    let xruns = engine.signals().xruns() - xruns0;
    let skipped = engine.signals().skipped_periods() - skipped0;
    let server_load = engine.signals().server_load();
    engine.stop(|b| buffers.push(b.clone()));
    Ok(Run {
        buffers,
        xruns,
        skipped,
        server_load,
    })
}

fn percentile(mut v: Vec<u64>, p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_unstable();
    let i = ((v.len() - 1) as f64 * p).round() as usize;
    v[i] as f64 / 1e3
}

fn line(name: &str, v: Vec<u64>) {
    let mean = if v.is_empty() {
        f64::NAN
    } else {
        v.iter().sum::<u64>() as f64 / v.len() as f64 / 1e3
    };
    println!(
        "  {name:<34} mean {mean:8.1}  p50 {:8.1}  p99 {:8.1}  max {:8.1} us",
        percentile(v.clone(), 0.5),
        percentile(v.clone(), 0.99),
        percentile(v, 1.0)
    );
}

fn report(kind: &str, sines: usize, r: &Run) {
    let b = &r.buffers;
    println!(
        "{kind}: {sines} sines, {} buffers, {} late, {} server xruns, {} skipped periods, server DSP load {}",
        b.len(),
        b.iter().filter(|b| b.late).count(),
        r.xruns,
        r.skipped,
        r.server_load.map_or("n/a".into(), |l| format!("{l:.1} %"))
    );
    line(
        "driver wake latency",
        b.iter().map(|b| b.driver_wake_latency_ns()).collect(),
    );
    line(
        "worker wake latency",
        b.iter()
            .flat_map(|b| {
                b.threads
                    .iter()
                    .filter(|t| t.index > 0)
                    .map(|t| t.wake_latency_ns)
            })
            .collect(),
    );
    line(
        "callback entry (wake->render start)",
        b.iter()
            .map(|b| b.render_start_ns.saturating_sub(b.driver_wake_ns))
            .collect(),
    );
    // At 0 sines this is the engine's own cost per buffer.
    line(
        "render",
        b.iter()
            .map(|b| b.render_end_ns.saturating_sub(b.render_start_ns))
            .collect(),
    );
    let early = b
        .iter()
        .filter(|b| b.driver_wake_ns < b.period_start_ns)
        .count();
    if early > 0 {
        let max_early = b
            .iter()
            .map(|b| b.period_start_ns.saturating_sub(b.driver_wake_ns))
            .max()
            .unwrap_or(0);
        println!(
            "  driver ran before the period start in {early} buffers (at most {:.1} us)",
            max_early as f64 / 1e3
        );
    }
}

/// Largest sine count with no dropout: doubling then bisection with short
/// trials (a failed trial is run again once, so that a single disturbance
/// from outside, on a shared machine, does not end the search), then the
/// full-length confirmation, stepping down 5 % until it passes.
fn capacity(kind: &str, a: &Args) -> Result<usize, String> {
    let trial = 4.0;
    let once = |n: usize, secs: f64| -> Result<bool, String> {
        let r = run(kind, a, n, secs)?;
        eprintln!("  {kind} {n} sines for {secs} s: {} dropouts", r.dropouts());
        Ok(r.dropouts() == 0)
    };
    let ok = |n: usize| -> Result<bool, String> { Ok(once(n, trial)? || once(n, trial)?) };
    let (mut lo, mut hi) = (0usize, 256usize);
    while ok(hi)? {
        lo = hi;
        hi *= 2;
    }
    while hi - lo > (lo / 50).max(8) {
        let mid = (lo + hi) / 2;
        if ok(mid)? {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let mut n = lo;
    while n > 0 && !once(n, a.seconds)? {
        n = n * 95 / 100;
    }
    Ok(n)
}

fn main() {
    let a = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("jack_vs_sim: {e}");
            std::process::exit(2);
        }
    };
    let kinds: Vec<&str> = if a.device == "both" {
        vec!["sim", "jack"]
    } else {
        vec![a.device.as_str()]
    };
    for kind in kinds {
        let result = if a.mode == "compare" {
            // At 0 sines the render is the engine's own cost: waking the
            // worker, waiting for it, mixing and recording.
            run(kind, &a, a.sines, a.seconds)
                .map(|r| report(kind, a.sines, &r))
                .and_then(|_| run(kind, &a, 0, a.seconds.min(5.0)))
                .map(|r| report(kind, 0, &r))
        } else {
            capacity(kind, &a).map(|n| {
                println!(
                    "{kind}: at most {n} sines without a dropout over {} s",
                    a.seconds
                )
            })
        };
        if let Err(e) = result {
            eprintln!("jack_vs_sim ({kind}): {e}");
            std::process::exit(1);
        }
    }
}
