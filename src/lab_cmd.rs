//! The experiment commands (`probe`, `sweep`, `capacity`; also `bench explain`'s parameters):
//! validate flags, run the lab crate's experiment with a progress bar and the stop signals, print
//! its summary and write its JSON and CSV atomically (also after Ctrl-C or SIGTERM, marked
//! incomplete); runs on the main thread.

use crate::cli::lab::{
    BufferArgs, CapacityArgs, ExplainCostArgs, LabOut, PlacementArgs, PolicyArg, ProbeArgs,
    ProbeCommand, SleepArgs, SweepArgs, SweepCommand, ThreadsArgs, WakeupArgs,
};
use crate::cli::parse::DeviceKind;
use crate::cli::parse::{CapacityPreset, ExplainCostFlags};
use crate::devices;
use crate::jack_support::JackArgs;
use crate::signals::StopSignals;
use crate::{files, Failure};
use std::io::IsTerminal;
use std::time::Duration;
use xrunlab_lab::timing::Class;
use xrunlab_lab::{
    buffer, capacity as cap, explain_cost, placement, sleep, threads, wakeup, Ctx, Experiment,
    LabError, LabResult,
};
use xrunlab_sys::Provenance;

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
/// The experiment may hand its figures so far to the callback it is given, which rewrites the
/// JSON result marked incomplete ("running"), so that even a kill -9 keeps them.
/// `after` writes extra files from the result.
fn execute<T: Experiment>(
    out: &LabOut,
    extra_paths: &[(&str, Option<&std::path::Path>)],
    experiment: impl FnOnce(&Ctx, &mut dyn FnMut(&T)) -> Result<T, LabError>,
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
    let mut partial_error = None;
    let mut save_partial = |r: &T| {
        let Some(p) = &out.json else {
            return;
        };
        let mut provenance = provenance.clone();
        provenance.finish();
        let lab = LabResult {
            schema: xrunlab_lab::envelope::SCHEMA.to_owned(),
            kind: T::KIND.to_owned(),
            provenance,
            fingerprint: fingerprint.clone(),
            quick: out.quick,
            incomplete: true,
            end_reason: "running: these are the figures measured so far".into(),
            warnings: r.warnings(),
            result: r,
        };
        if let Err(e) = xrunlab_results::write::write_json(p, &lab) {
            partial_error.get_or_insert(e);
        }
    };
    let result = experiment(&ctx, &mut save_partial)?;
    let lab = xrunlab_lab::envelope::lab_result(
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
    let mut errors: Vec<String> = partial_error.into_iter().map(|e| e.to_string()).collect();
    if let Some(p) = &out.json {
        errors.extend(
            xrunlab_results::write::write_json(p, &lab)
                .err()
                .map(|e| e.to_string()),
        );
    }
    if let Some(p) = &out.csv {
        match lab.result.table().to_csv() {
            Ok(bytes) => errors.extend(
                files::write_atomically(p, &bytes)
                    .err()
                    .map(|e| e.to_string()),
            ),
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
        ProbeCommand::ExplainCost(a) => probe_explain_cost(a),
    }
}

/// The explain-cost experiment's parameters from the flags `probe explain-cost` and `bench
/// explain` share.
#[allow(clippy::too_many_arguments)]
pub fn explain_cost_params(
    quick: bool,
    f: &ExplainCostFlags,
) -> Result<explain_cost::ExplainCostParams, Failure> {
    let mut p = explain_cost::ExplainCostParams::new(quick, f.sines, f.buffer, preset_of(f.preset));
    if let Some(r) = f.rounds {
        p.rounds = r;
    }
    if let Some(d) = f.duration {
        p.run = d;
    }
    if let Some(s) = f.capacity_seconds {
        p.capacity.seconds = s;
    }
    p.search_capacity = !f.no_capacity;
    p.validate()?;
    Ok(p)
}

fn preset_of(p: CapacityPreset) -> xrunlab_engine::Preset {
    match p {
        CapacityPreset::Standard => xrunlab_engine::Preset::Standard,
        CapacityPreset::Optimal => xrunlab_engine::Preset::Optimal,
    }
}

fn probe_explain_cost(a: &ExplainCostArgs) -> Result<(), Failure> {
    let params = explain_cost_params(a.out.quick, &a.flags)?;
    execute(
        &a.out,
        &[],
        |ctx, save| {
            explain_cost::run(&params, ctx, &mut |step, b| {
                if matches!(
                    step,
                    explain_cost::Step::Run
                        | explain_cost::Step::EventCost
                        | explain_cost::Step::Capacity
                ) {
                    save(b);
                }
            })
        },
        |_| Ok(()),
    )
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
        |ctx, _| wakeup::run(&params, ctx),
        |r| match hist_file {
            Some(p) => files::write_atomically(p, wakeup::histogram_text(r).as_bytes())
                .map_err(|e| e.to_string()),
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
    execute(&a.out, &[], |ctx, _| sleep::run(&params, ctx), |_| Ok(()))
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
    execute(
        &a.out,
        &[],
        |ctx, _| placement::run(&params, ctx),
        |_| Ok(()),
    )
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
    execute(&a.out, &[], |ctx, _| threads::run(&params, ctx), |_| Ok(()))
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
    execute(&a.out, &[], |ctx, _| buffer::run(&params, ctx), |_| Ok(()))
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
        params.presets = p.iter().map(|&p| preset_of(p)).collect();
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
        devices::open_with(kind, &JackArgs::default(), &mut c)?;
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
        |ctx, _| cap::run(&params, &mut open, ctx),
        |_| Ok(()),
    )
}
