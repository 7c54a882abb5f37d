//! The experiment commands (`probe`, `sweep`, `capacity`): validate flags, run the lab crate's experiment with a progress bar and the stop signals, print its summary and write its JSON and CSV atomically (also after Ctrl-C or SIGTERM, marked incomplete); runs on the main thread.

use crate::cli::lab::{
    BufferArgs, CapacityArgs, LabOut, PlacementArgs, PolicyArg, ProbeArgs, ProbeCommand, SleepArgs,
    SweepArgs, SweepCommand, ThreadsArgs, WakeupArgs,
};
use crate::cli::parse::CapacityPreset;
use crate::cli::parse::DeviceKind;
use crate::devices;
use crate::jack_support::JackArgs;
use crate::signals::StopSignals;
use crate::{files, Failure};
use std::io::IsTerminal;
use std::time::Duration;
use xrunlab_lab::timing::Class;
use xrunlab_lab::{
    buffer, capacity as cap, placement, sleep, threads, wakeup, Ctx, Experiment, LabError,
};
use xrunlab_sys::Provenance;

impl From<LabError> for Failure {
    fn from(e: LabError) -> Failure {
        match e {
            LabError::Usage(m) => Failure::Usage(m),
            LabError::Runtime(m) => Failure::Runtime(m),
        }
    }
}

fn usage(flag: &str, value: impl std::fmt::Display, allowed: &str) -> Failure {
    Failure::Usage(format!(
        "invalid value '{value}' for {flag}: allowed {allowed}"
    ))
}

fn cpus(list: &Option<String>) -> Result<Option<Vec<usize>>, Failure> {
    list.as_deref()
        .map(|l| {
            xrunlab_sys::parse_cpu_list(l)
                .map_err(|e| usage("--cpus", l, &format!("a CPU list such as 0-3,6 ({e})")))
        })
        .transpose()
}

/// Runs `experiment` with the shared plumbing: checks the output paths first, shows progress,
/// stops on SIGINT/SIGTERM/SIGHUP keeping what was measured, prints and writes the result.
/// `after` writes extra files from the result.
fn execute<T: Experiment>(
    out: &LabOut,
    extra_paths: &[(&str, Option<&std::path::Path>)],
    experiment: impl FnOnce(&Ctx) -> Result<T, LabError>,
    after: impl FnOnce(&T) -> Result<(), String>,
) -> Result<(), Failure> {
    for (flag, path) in [
        ("--json", out.json.as_deref()),
        ("--csv", out.csv.as_deref()),
    ]
    .into_iter()
    .chain(extra_paths.iter().copied())
    {
        if let Some(p) = path {
            files::check_writable(flag, p)?;
        }
    }
    let signals = StopSignals::install().map_err(Failure::Runtime)?;
    let provenance = Provenance::collect(
        env!("CARGO_PKG_VERSION"),
        xrunlab_sys::default_proc_root(),
        xrunlab_sys::default_sys_root(),
    );
    let fingerprint = xrunlab_sys::fingerprint::Fingerprint::collect(
        xrunlab_sys::default_proc_root(),
        xrunlab_sys::default_sys_root(),
    );
    let stop = || signals.received().is_some();
    let progress = if out.quiet || !std::io::stderr().is_terminal() {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::new(0)
    };
    let ctx = Ctx {
        stop: &stop,
        progress,
    };
    let result = experiment(&ctx)?;
    let lab = xrunlab_lab::common::lab_result(
        provenance,
        fingerprint,
        out.quick,
        result,
        signals.received(),
    );
    print!("{}", lab.result.text());
    for w in &lab.warnings {
        println!("warning: {w}");
    }
    if lab.incomplete {
        println!("incomplete: {}", lab.end_reason);
    }
    let mut errors = Vec::new();
    if let Some(p) = &out.json {
        errors.extend(
            xrunlab_results::write::write_json(p, &lab)
                .err()
                .map(|e| e.to_string()),
        );
    }
    if let Some(p) = &out.csv {
        match lab.result.table().to_csv() {
            Ok(bytes) => errors.extend(files::write_atomically(p, &bytes).err()),
            Err(e) => errors.push(format!("cannot write {}: {e}", p.display())),
        }
    }
    errors.extend(after(&lab.result).err());
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Failure::Runtime(errors.join("; ")))
    }
}

pub fn probe(args: &ProbeArgs) -> Result<(), Failure> {
    match &args.which {
        ProbeCommand::Wakeup(a) => probe_wakeup(a),
        ProbeCommand::Sleep(a) => probe_sleep(a),
        ProbeCommand::Placement(a) => probe_placement(a),
    }
}

fn class(policy: PolicyArg, priority: u8) -> Class {
    match policy {
        PolicyArg::Fifo => Class::Fifo { priority },
        PolicyArg::Rr => Class::Rr { priority },
        PolicyArg::Other => Class::Other { nice: 0 },
    }
}

fn probe_wakeup(a: &WakeupArgs) -> Result<(), Failure> {
    let class = class(a.policy, a.priority);
    let loops = match (a.loops, a.duration) {
        (Some(l), _) => l,
        (None, d) => {
            let d = d.unwrap_or(if a.out.quick {
                Duration::from_secs(1)
            } else {
                Duration::from_secs(10)
            });
            (d.as_nanos() / a.interval.as_nanos().max(1)).max(1) as u64
        }
    };
    let params = wakeup::WakeupParams {
        threads: a.threads,
        class,
        interval: a.interval,
        loops,
        cpus: cpus(&a.cpus)?,
        pm_qos: a.pm_qos,
        mlock: a.mlock,
        with_load: a.with_load,
        histogram_us: a.histogram,
    };
    params.validate()?;
    let hist_file = a.histogram_file.as_deref();
    execute(
        &a.out,
        &[("--histogram-file", hist_file)],
        |ctx| wakeup::run(&params, ctx),
        |r| match hist_file {
            Some(p) => files::write_atomically(p, wakeup::histogram_text(r).as_bytes()),
            None => Ok(()),
        },
    )
}

fn probe_sleep(a: &SleepArgs) -> Result<(), Failure> {
    let mut params = if a.out.quick {
        sleep::SleepParams::quick()
    } else {
        sleep::SleepParams::full()
    };
    if let Some(i) = &a.intervals {
        params.intervals = i.clone();
    }
    if let Some(d) = a.per_point {
        params.per_point = d;
    }
    params.validate()?;
    execute(&a.out, &[], |ctx| sleep::run(&params, ctx), |_| Ok(()))
}

fn probe_placement(a: &PlacementArgs) -> Result<(), Failure> {
    let params = placement::PlacementParams {
        threads: a.threads.unwrap_or_else(xrunlab_sys::online_cpu_count),
        work_partial_samples: a
            .work
            .unwrap_or(if a.out.quick { 30_000_000 } else { 300_000_000 }),
        straggler_pct: a.straggler_pct,
        class: class(a.policy, a.priority),
        inject_straggler: a.inject_straggler,
    };
    params.validate()?;
    execute(&a.out, &[], |ctx| placement::run(&params, ctx), |_| Ok(()))
}

pub fn sweep(args: &SweepArgs) -> Result<(), Failure> {
    match &args.which {
        SweepCommand::Threads(a) => sweep_threads(a),
        SweepCommand::Buffer(a) => sweep_buffer(a),
    }
}

fn sweep_threads(a: &ThreadsArgs) -> Result<(), Failure> {
    let mut params = if a.out.quick {
        threads::ThreadsParams::quick()
    } else {
        threads::ThreadsParams::full()
    };
    if let Some(n) = a.max_threads {
        params.max_threads = n;
    }
    if let Some(d) = a.per_point {
        params.per_point = d;
    }
    params.knee_pct = a.knee_pct;
    params.validate()?;
    execute(&a.out, &[], |ctx| threads::run(&params, ctx), |_| Ok(()))
}

fn sweep_buffer(a: &BufferArgs) -> Result<(), Failure> {
    let mut params = if a.out.quick {
        buffer::BufferParams::quick()
    } else {
        buffer::BufferParams::full()
    };
    if let Some(b) = &a.buffers {
        params.buffers = b.clone();
    }
    if let Some(d) = a.per_point {
        params.per_point = d;
    }
    params.sines = a.sines;
    params.validate()?;
    execute(&a.out, &[], |ctx| buffer::run(&params, ctx), |_| Ok(()))
}

pub fn capacity(a: &CapacityArgs) -> Result<(), Failure> {
    let mut params = if a.out.quick {
        cap::CapacityParams::quick()
    } else {
        cap::CapacityParams::full()
    };
    if let Some(b) = &a.buffers {
        params.buffers = b.clone();
    }
    if let Some(p) = &a.presets {
        params.presets = p
            .iter()
            .map(|p| match p {
                CapacityPreset::Standard => xrunlab_engine::Preset::Standard,
                CapacityPreset::Optimal => xrunlab_engine::Preset::Optimal,
            })
            .collect();
    }
    if let Some(d) = a.seconds {
        params.seconds = d;
    }
    params.repeats = a.repeats;
    params.latency_sines = a.latency_sines;
    params.burst_load_pct = a.burst_load;
    params.kernel_slowdown = a.kernel_slowdown;
    params.device = match a.device {
        DeviceKind::Sim => "sim",
        DeviceKind::Jack => "jack",
    }
    .into();
    params.validate()?;
    let kind = a.device;
    if kind == DeviceKind::Jack && !crate::jack_support::AVAILABLE {
        // The same message `run --device jack` gives in a build without JACK.
        let mut c = xrunlab_engine::EngineConfig::default();
        devices::open_with(kind, &JackArgs::default(), &mut c).map_err(Failure::Runtime)?;
    }
    let mut open = |c: &mut xrunlab_engine::EngineConfig| {
        let jack = JackArgs {
            server: a.jack_server.clone(),
            buffer_request: Some(c.buffer_frames),
            ..JackArgs::default()
        };
        devices::open_with(kind, &jack, c)
    };
    execute(
        &a.out,
        &[],
        |ctx| cap::run(&params, &mut open, ctx),
        |_| Ok(()),
    )
}
