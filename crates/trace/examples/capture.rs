//! Captures the audio-CPU kernel events for a while and prints what the flight recorder saw:
//! events per type, lost events, and the reader thread's CPU cost. Runs on the main thread
//! (plus the tracer's reader and, with `--pingpong`, two load threads).
//!
//! `cargo run -p xrunlab-trace --example capture -- --cpus 0-1 --ms 200 [--pingpong]`

use clap::Parser;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;
use xrunlab_trace::{TraceOptions, Tracer};

#[derive(Parser)]
struct Args {
    /// CPUs to trace, e.g. `0-1` or `0,2`.
    #[arg(long, default_value = "0-1", value_parser = parse_cpus)]
    cpus: CpuList,
    /// How long to capture, ms.
    #[arg(long, default_value_t = 200)]
    ms: u64,
    /// Generate scheduler load meanwhile: two threads ping-pong a token as fast as they can.
    #[arg(long)]
    pingpong: bool,
}

#[derive(Clone)]
struct CpuList(Vec<usize>);

fn parse_cpus(s: &str) -> Result<CpuList, xrunlab_sys::CpuListError> {
    xrunlab_sys::parse_cpu_list(s).map(CpuList)
}

/// Two threads handing a token back and forth: every hand-over is a wake-up and a switch.
fn pingpong(stop: Arc<AtomicBool>) -> Vec<std::thread::JoinHandle<u64>> {
    let (to_b, from_a) = mpsc::channel::<()>();
    let (to_a, from_b) = mpsc::channel::<()>();
    let stop_b = stop.clone();
    let a = std::thread::spawn(move || {
        let mut n = 0;
        while !stop.load(Ordering::Relaxed) {
            if to_b.send(()).is_err() || from_b.recv().is_err() {
                break;
            }
            n += 1;
        }
        n
    });
    let b = std::thread::spawn(move || {
        let mut n = 0;
        while let Ok(()) = from_a.recv() {
            if stop_b.load(Ordering::Relaxed) || to_a.send(()).is_err() {
                break;
            }
            n += 1;
        }
        n
    });
    vec![a, b]
}

fn main() {
    let args = Args::parse();
    let cpus = args.cpus.0;
    let tracer = match Tracer::start(&cpus, &TraceOptions::default()) {
        Ok(t) => t,
        Err(why) => {
            eprintln!("capture: {why}");
            std::process::exit(1);
        }
    };
    let info = tracer.info();
    println!(
        "tracing CPUs {} via {} ({}), tracefs {}{}",
        xrunlab_sys::format_cpu_list(&info.cpus),
        info.backend,
        info.clock,
        info.tracefs.display(),
        if info.mounted_tracefs {
            " (mounted now)"
        } else {
            ""
        }
    );
    if !info.missing_optional_events.is_empty() {
        println!(
            "not in this kernel: {}",
            info.missing_optional_events.join(", ")
        );
    }
    let stop = Arc::new(AtomicBool::new(false));
    let load = if args.pingpong {
        pingpong(stop.clone())
    } else {
        Vec::new()
    };
    std::thread::sleep(Duration::from_millis(args.ms));
    stop.store(true, Ordering::Relaxed);
    let round_trips: u64 = load.into_iter().map(|h| h.join().unwrap_or(0)).sum();
    let stopping = std::time::Instant::now();
    let stats = tracer.stop();
    let stop_ms = stopping.elapsed().as_secs_f64() * 1e3;
    println!("events by type:");
    for (kind, n) in &stats.events_by_type {
        println!("  {kind:<14} {n:>9}");
    }
    println!("  {:<14} {:>9}", "total", stats.events_total);
    println!(
        "lost events: {} {:?}; window held {} events at the end ({} evicted by the cap)",
        stats.lost_total, stats.lost_by_cpu, stats.window_events, stats.evicted_by_cap
    );
    if args.pingpong {
        println!("load: {round_trips} ping-pong hand-overs");
    }
    println!(
        "reader thread: {:.2} ms CPU over {:.0} ms = {:.2} % of one CPU ({:.0} events/s, {:.2} µs CPU per event)",
        stats.reader_cpu_ms,
        stats.elapsed_ms,
        100.0 * stats.reader_cpu_ms / stats.elapsed_ms.max(1e-9),
        stats.events_total as f64 / (stats.elapsed_ms / 1000.0).max(1e-9),
        1000.0 * stats.reader_cpu_ms / (stats.events_total.max(1) as f64),
    );
    println!("stop (closing the perf events) took {stop_ms:.0} ms");
}
