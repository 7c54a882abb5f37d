//! `xrunlab bench`: kernel throughput per core and the engine's own overhead per buffer, printed as
//! a table (and JSON); `bench soak` is in `bench_soak`, `bench explain` in `bench_explain`, `bench
//! compare` in `bench_compare`; runs on the main thread.

use crate::cli::{BenchArgs, BenchMode};
use crate::Failure;
use std::time::Duration;
use xrunlab_dsp::measure::kernel_throughput;
use xrunlab_dsp::{ChordLayout, ChordNotes, Kernel};
use xrunlab_engine::device::sim::SimDevice;
use xrunlab_engine::{Distribution, Engine, EngineConfig, Percentiles, Scale};
use xrunlab_results::bench::{BenchResult, OverheadFigures, Roofline, SCHEMA};
use xrunlab_sys::Provenance;

fn overhead(duration: Duration) -> Result<OverheadFigures, Failure> {
    let config = EngineConfig {
        sines: 0,
        burst_sines: 0,
        threads: 2,
        buffer_frames: 128,
        ..EngineConfig::default()
    };
    let device = SimDevice::new(config.sample_rate, config.buffer_frames, false);
    let mut engine =
        Engine::start(config, Box::new(device)).map_err(|e| Failure::Runtime(e.to_string()))?;
    let mut render = Distribution::new(Scale::Micros);
    let mut handoff = Distribution::new(Scale::Micros);
    let mut own = Distribution::new(Scale::Micros);
    let mut wake = Distribution::new(Scale::Micros);
    let mut sink = |b: &xrunlab_engine::BufferReport| {
        let total = b.render_end_ns.saturating_sub(b.render_start_ns);
        let last_worker_running = b
            .threads
            .iter()
            .filter(|t| t.index > 0)
            .map(|t| b.period_start_ns + t.wake_latency_ns)
            .max()
            .unwrap_or(b.render_start_ns);
        let h = last_worker_running
            .saturating_sub(b.render_start_ns)
            .min(total);
        render.record(total as f64 / 1e3);
        handoff.record(h as f64 / 1e3);
        own.record((total - h) as f64 / 1e3);
        for t in b.threads.iter().filter(|t| t.index > 0) {
            wake.record(t.wake_latency_ns as f64 / 1e3);
        }
    };
    xrunlab_engine::drain_loop(
        &mut engine,
        xrunlab_engine::Span::For(duration),
        || false,
        &mut sink,
    );
    let driver_sched = engine
        .threads()
        .first()
        .map(|t| t.sched.obtained.clone())
        .unwrap_or_default();
    engine.stop(&mut sink);
    Ok(OverheadFigures {
        sines: 0,
        threads: 2,
        buffer_frames: 128,
        buffers: usize::try_from(render.count()).unwrap_or(usize::MAX),
        render_us: render.percentiles(),
        os_handoff_us: handoff.percentiles(),
        engine_own_us: own.percentiles(),
        worker_wake_us: wake.percentiles(),
        driver_sched,
    })
}

pub fn bench(args: &BenchArgs) -> Result<(), Failure> {
    match &args.mode {
        Some(BenchMode::Soak(soak)) => return crate::bench_soak::soak(soak),
        Some(BenchMode::Explain(a)) => return crate::bench_explain::explain(a),
        Some(BenchMode::Watch(a)) => return crate::bench_watch::bench(a),
        Some(BenchMode::Record(a)) => return crate::bench_record::bench(a),
        Some(BenchMode::Compare(a)) => return crate::bench_compare::bench(a),
        None => {}
    }
    let provenance = Provenance::collect(
        env!("CARGO_PKG_VERSION"),
        xrunlab_sys::default_proc_root(),
        xrunlab_sys::default_sys_root(),
    );
    let (kernel_time, overhead_time) = if args.quick {
        (Duration::from_millis(300), Duration::from_secs(1))
    } else {
        (Duration::from_secs(2), Duration::from_secs(5))
    };
    // One AudioPerfLab chord (the four-note default): the load it is tuned to max out a core with.
    let sines = ChordLayout::single(ChordNotes::Apl).partials_per_chord(48_000);
    println!(
        "kernel throughput on one core ({sines} sines x 128 frames at 48 kHz, {} per kernel)",
        humantime::format_duration(kernel_time)
    );
    println!("  kernel      ns/partial-sample   Mpartial-samples/s/core   sines/core in real time");
    let mut kernels = Vec::new();
    for kernel in [Kernel::Reference, Kernel::Fast] {
        let f = kernel_throughput(kernel, sines, 128, kernel_time);
        println!(
            "  {:<10} {:>18.3} {:>25.1} {:>25.0}",
            f.kernel,
            f.ns_per_partial_sample,
            f.partial_samples_per_sec / 1e6,
            f.max_sines_at_48k_128
        );
        kernels.push(f);
    }
    let ratio = kernels[1].partial_samples_per_sec / kernels[0].partial_samples_per_sec.max(1.0);
    println!("  fast / reference throughput: {ratio:.1}x (depends on the CPU's vector width: see the roofline)");
    let peak = xrunlab_dsp::roofline::measure_peak(kernel_time / 2);
    let roof_ns = xrunlab_dsp::roofline::fast_kernel_roofline_ns(&peak);
    let fast_ns = kernels[1].ns_per_partial_sample;
    let roofline = Roofline {
        peak_unit: peak.unit.to_owned(),
        peak_ops_per_ns: peak.ops_per_ns,
        fp_ops_per_8_partial_samples: xrunlab_dsp::roofline::FAST_FP_OPS_PER_8_PARTIAL_SAMPLES,
        roofline_ns_per_partial_sample: roof_ns,
        fast_ns_per_partial_sample: fast_ns,
        fast_pct_of_roofline: roof_ns / fast_ns * 100.0,
    };
    println!(
        "  this core's measured peak: {:.2} {} per ns; the fast kernel needs {} vector FP ops per 8 \
         partial-samples, so its roofline is {:.3} ns per partial-sample",
        peak.ops_per_ns, peak.unit, roofline.fp_ops_per_8_partial_samples, roof_ns
    );
    println!(
        "  fast kernel: {fast_ns:.3} ns per partial-sample = {:.0} % of the roofline (an estimate: \
         it counts FP-port operations only; integer phase steps and loads run on other ports)",
        roofline.fast_pct_of_roofline
    );
    println!();
    let o = overhead(overhead_time)?;
    println!(
        "engine overhead: {} sines, {} threads, buffer {} frames, {} buffers on the simulated device (driver {})",
        o.sines, o.threads, o.buffer_frames, o.buffers, o.driver_sched
    );
    let row = |name: &str, p: &Percentiles, note: &str| {
        println!(
            "  {name:<34} p50 {:>6.1} us  p99 {:>6.1} us  max {:>7.1} us{note}",
            p.p50, p.p99, p.max
        );
    };
    row("render wall time", &o.render_us, "");
    row(
        "  of which the OS running a worker",
        &o.os_handoff_us,
        "  (futex wake to worker running)",
    );
    row(
        "  engine's own time",
        &o.engine_own_us,
        "  (targets: p50 < 20 us, p99 < 100 us)",
    );
    row(
        "worker wake-up latency",
        &o.worker_wake_us,
        "  (period start to worker running)",
    );
    if let Some(path) = &args.json {
        let mut provenance = provenance;
        provenance.finish();
        let result = BenchResult {
            schema: SCHEMA.to_owned(),
            provenance,
            kernels,
            fast_over_reference: ratio,
            roofline,
            overhead: o,
        };
        xrunlab_results::write::write_json(path, &result)?;
    }
    Ok(())
}
