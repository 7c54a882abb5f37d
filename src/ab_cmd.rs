//! `xrunlab ab`: parses each side's engine flags with `run`'s own flag definitions (a bad
//! flag is a usage error naming the side and the flag), runs the lab crate's interleaved A/B
//! with a progress bar and the stop signals, then compares the finished runs as `compare`
//! does (printing, --json, --fail-if-worse); runs on the main thread.

use crate::cli::compare::AbArgs;
use crate::cli::run::EngineArgs;
use crate::signals::StopSignals;
use crate::{devices, files, Failure};
use clap::Parser;
use std::io::IsTerminal;
use std::path::PathBuf;
use xrunlab_compare::{compare, Options};
use xrunlab_engine::EngineConfig;
use xrunlab_lab::ab::{self, Arm, Plan, MIN_ROUNDS_FOR_VERDICT};
use xrunlab_lab::Ctx;

/// One side's flags: exactly the engine flags `run` takes.
#[derive(Debug, Parser)]
#[command(
    no_binary_name = true,
    disable_help_flag = true,
    disable_version_flag = true
)]
struct SideFlags {
    #[command(flatten)]
    engine: EngineArgs,
}

/// What clap says is wrong, without its usage block: "unexpected argument '--x' found", the
/// tip that may follow, or `invalid value '9999' for '--buffer <FRAMES>': allowed 16..=4096`.
fn clap_problem(e: &clap::Error) -> String {
    let text = e.render().to_string();
    text.lines()
        .map(str::trim)
        .take_while(|l| !l.starts_with("Usage:"))
        .filter(|l| !l.is_empty())
        .map(|l| l.strip_prefix("error: ").unwrap_or(l))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Parses side `flag`'s text (split as a shell would) into engine flags and their config.
fn side(flag: &str, text: &str) -> Result<(EngineArgs, EngineConfig), Failure> {
    let words = shlex::split(text).ok_or_else(|| {
        Failure::Usage(format!(
            "invalid {flag} {text:?}: unbalanced quotes or a trailing backslash (write the \
             engine flags as on a shell command line, e.g. {flag} \"--buffer 64 --pin\")"
        ))
    })?;
    let args = SideFlags::try_parse_from(&words)
        .map_err(|e| {
            Failure::Usage(format!(
                "invalid {flag} {text:?}: {} (allowed: the engine flags of `xrunlab run`, see \
                 xrunlab run --help)",
                clap_problem(&e)
            ))
        })?
        .engine;
    let config = args
        .to_config(EngineConfig::default())
        .map_err(|e| Failure::Usage(format!("invalid {flag} {text:?}: {}", e.0)))?;
    Ok((args, config))
}

/// A new directory name for this A/B's runs: ab-YYYYMMDDTHHMMSSZ.
fn default_dir() -> PathBuf {
    let stamp: String = xrunlab_sys::now_rfc3339()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect();
    PathBuf::from(format!("ab-{stamp}"))
}

pub fn ab(args: &AbArgs) -> Result<(), Failure> {
    crate::compare_cmd::check_gate(args.fail_if_worse)?;
    let (a_args, a_config) = side("--a", &args.a)?;
    let (b_args, b_config) = side("--b", &args.b)?;
    if let Some(p) = &args.json {
        files::check_writable("--json", p)?;
    }
    let dir = args.dir.clone().unwrap_or_else(default_dir);
    ab::prepare_dir(&dir)?;
    let rounds = args.rounds as usize;
    let few = (rounds < MIN_ROUNDS_FOR_VERDICT).then(|| {
        format!(
            "{rounds} round(s): with fewer than {MIN_ROUNDS_FOR_VERDICT} runs a side the exact \
             test over runs cannot reach a 5 % chance (its smallest is 2 / C(2n, n)), so no \
             verdict but \"no difference\" can come out{}",
            if rounds == 1 {
                "; one run a side falls back to the block bootstrap, which is weak evidence"
            } else {
                ""
            }
        )
    });
    if let Some(note) = &few {
        eprintln!("note: {note}; give --rounds {MIN_ROUNDS_FOR_VERDICT} or more");
    }
    let signals = StopSignals::install().map_err(Failure::Runtime)?;
    let stop = || signals.received().is_some();
    let progress = if args.quiet || !std::io::stderr().is_terminal() {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::new(0)
    };
    let ctx = Ctx {
        stop: &stop,
        progress: progress.clone(),
    };
    let plan = Plan {
        rounds,
        duration: args.duration,
        warmup: ab::WARMUP,
        dir: dir.clone(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
    };
    let opener = |engine: &EngineArgs| {
        let (kind, jack) = (engine.device, devices::jack_args(engine));
        move |config: &mut EngineConfig| devices::open_with(kind, &jack, config)
    };
    let mut a = Arm {
        flags: args.a.clone(),
        config: a_config,
        open: Box::new(opener(&a_args)),
    };
    let mut b = Arm {
        flags: args.b.clone(),
        config: b_config,
        open: Box::new(opener(&b_args)),
    };
    if !args.quiet {
        eprintln!(
            "ab: {rounds} round(s) of A then B, {} each; runs go to {}",
            humantime::format_duration(args.duration),
            dir.display()
        );
    }
    let mut say = |line: &str| {
        if args.quiet {
        } else if progress.is_hidden() {
            eprintln!("{line}");
        } else {
            progress.println(line);
        }
    };
    let runs = ab::run(&ctx, &plan, &mut a, &mut b, &mut say)?;
    let interrupted = runs.interrupted.as_ref().map(|at| {
        format!(
            "interrupted by {} {at}",
            signals.received().unwrap_or("a stop signal")
        )
    });
    if runs.a.is_empty() || runs.b.is_empty() {
        return Err(Failure::Runtime(format!(
            "{}; no comparison: a side has no finished run (the runs are in {})",
            interrupted.as_deref().unwrap_or("ended early"),
            dir.display()
        )));
    }
    let provenance = xrunlab_sys::Provenance::collect(
        env!("CARGO_PKG_VERSION"),
        xrunlab_sys::default_proc_root(),
        xrunlab_sys::default_sys_root(),
    );
    // The user chose both sides' flags, so a workload that differs (a buffer size, a preset)
    // is the point of the A/B: shown in the output, not refused.
    let mut result = compare(&runs.a, &runs.b, Options { force: true }, provenance)
        .map_err(|e| Failure::Runtime(format!("comparing the runs in {}: {e}", dir.display())))?;
    result
        .notes
        .retain(|n| !n.starts_with("different workloads compared because --force"));
    result
        .notes
        .insert(0, format!("A: {}   B: {}", shown(&args.a), shown(&args.b)));
    result.notes.extend(few);
    result
        .notes
        .extend(runs.warnings.iter().map(|w| format!("not in effect: {w}")));
    if let Some(note) =
        gate_out_of_reach(&result, args.fail_if_worse, runs.a.len().min(runs.b.len()))
    {
        result.notes.push(note);
    }
    if let Some(i) = interrupted {
        result.notes.push(format!(
            "{i}: {} finished run(s) of A and {} of B compared; the cut-short run is kept in {} \
             but not compared",
            runs.a.len(),
            runs.b.len(),
            runs.partial
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    crate::compare_cmd::finish(&result, args.json.as_deref(), args.fail_if_worse)
}

/// Whether --fail-if-worse can trip at all with `n` runs a side: the gate holds 5 % over all
/// the tested metrics (Holm), so the smallest chance the exact test can give, 2 / C(2n, n),
/// must be below 5 % divided by their number.
fn gate_out_of_reach(
    result: &xrunlab_results::compare::CompareResult,
    gate: Option<f64>,
    n: usize,
) -> Option<String> {
    gate?;
    let family = result
        .metrics
        .iter()
        .filter(|m| m.p_value.is_some())
        .count();
    if n < 2 || family == 0 {
        return None;
    }
    let smallest =
        |n: usize| 2.0 / (0..n).fold(1.0, |c, i| c * (2 * n - i) as f64 / (i + 1) as f64);
    let level = (1.0 - result.confidence) / family as f64;
    if smallest(n) <= level {
        return None;
    }
    let needed = (n..).find(|&k| smallest(k) <= level).unwrap_or(n);
    Some(format!(
        "--fail-if-worse cannot trip with {n} runs a side: it holds 5 % over {family} tested \
         metrics, so one needs a chance of {level:.4} or less, and the exact test's smallest is \
         {:.4}; give --rounds {needed} or more",
        smallest(n)
    ))
}

/// A side's flags for the output ("defaults" when empty).
fn shown(flags: &str) -> String {
    if flags.trim().is_empty() {
        "(defaults)".to_owned()
    } else {
        flags.trim().to_owned()
    }
}
