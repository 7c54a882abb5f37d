//! `xrunlab ab`: parses each side's engine flags with `run`'s own flag definitions (a bad
//! flag is a usage error naming the side and the flag), runs the lab crate's interleaved A/B
//! with a progress bar and the stop signals (a fixed number of rounds, or `--rounds auto`:
//! the group-sequential stopping rule of xrunlab-compare's `sequential`), then compares the
//! finished rounds by the paired t-test (printing, --json, --fail-if-worse); `bench compare`
//! runs its A/Bs through [`run_ab`]. Runs on the main thread.

use crate::cli::compare::{AbArgs, Rounds};
use crate::cli::run::EngineArgs;
use crate::signals::StopSignals;
use crate::{devices, files, Failure};
use clap::Parser;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use xrunlab_compare::gate::is_extreme;
use xrunlab_compare::sequential::{Looks, FIRST_LOOK};
use xrunlab_compare::{compare, Options, MIN_RUNS};
use xrunlab_engine::EngineConfig;
use xrunlab_lab::ab::{self, Arm, Plan, Runs};
use xrunlab_lab::Ctx;
use xrunlab_results::compare::{CompareResult, Verdict};
use xrunlab_results::run::RunFile;

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
pub fn side(flag: &str, text: &str) -> Result<(EngineArgs, EngineConfig), Failure> {
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

/// `--max-time` when `--rounds auto` is given without it.
pub const DEFAULT_MAX_TIME: Duration = Duration::from_secs(180);

/// What a round costs besides its two runs' warm-up and measured time (opening the device,
/// starting and stopping the engine, writing the files), for planning the rounds of
/// `--rounds auto`.
const ROUND_OVERHEAD: Duration = Duration::from_millis(300);

/// One A/B, its sides parsed.
pub struct AbSetup {
    /// Side A's flags as the user wrote them, parsed.
    pub a: (String, EngineArgs, EngineConfig),
    /// Side B's.
    pub b: (String, EngineArgs, EngineConfig),
    /// How many rounds.
    pub rounds: Rounds,
    /// With [`Rounds::Auto`]: the most time the runs may take.
    pub max_time: Duration,
    /// Each run's measured time.
    pub duration: Duration,
    /// Where the runs go.
    pub dir: PathBuf,
    /// The gated metrics (`None`: the default) and the margin.
    pub gate: Option<Vec<String>>,
    /// A change within ± this many percent counts as none.
    pub margin_pct: f64,
}

/// What an A/B found.
pub struct AbOutcome {
    /// The comparison of its finished rounds.
    pub result: CompareResult,
    /// Rounds compared.
    pub rounds: usize,
}

/// The most rounds `--rounds auto` can run in `max_time` with runs of `duration`.
pub fn max_rounds(max_time: Duration, duration: Duration) -> usize {
    let round = 2 * (ab::WARMUP + duration) + ROUND_OVERHEAD;
    (max_time.as_secs_f64() / round.as_secs_f64()).floor() as usize
}

/// Every gated metric decided: better, worse, or no change beyond the margin.
pub fn decided(result: &CompareResult) -> bool {
    xrunlab_compare::sequential::all_decided(&result.metrics)
}

pub fn ab(args: &AbArgs) -> Result<(), Failure> {
    crate::compare_cmd::check_gate(args.fail_if_worse)?;
    let (a_args, a_config) = side("--a", &args.a)?;
    let (b_args, b_config) = side("--b", &args.b)?;
    if let Some(p) = &args.json {
        files::check_writable("--json", p)?;
    }
    let max_time = match (args.rounds, args.max_time) {
        (Rounds::Fixed(_), Some(_)) => {
            return Err(Failure::Usage(
                "invalid --max-time: it bounds --rounds auto (allowed only with --rounds auto)"
                    .to_owned(),
            ))
        }
        (_, t) => t.unwrap_or(DEFAULT_MAX_TIME),
    };
    if args.rounds == Rounds::Auto && max_rounds(max_time, args.duration) < FIRST_LOOK {
        return Err(Failure::Usage(format!(
            "invalid --max-time {}: --rounds auto first looks after {FIRST_LOOK} rounds, which \
             take about {} with runs of {} (allowed: at least that, or a shorter --duration)",
            humantime::format_duration(max_time),
            humantime::format_duration(
                (2 * (ab::WARMUP + args.duration) + ROUND_OVERHEAD) * FIRST_LOOK as u32
            ),
            humantime::format_duration(args.duration),
        )));
    }
    if let Some(gate) = &args.gate {
        xrunlab_compare::check_run_gate(gate)?;
    }
    let dir = args.dir.clone().unwrap_or_else(default_dir);
    ab::prepare_dir(&dir)?;
    if let Rounds::Fixed(n) = args.rounds {
        if (n as usize) < MIN_RUNS {
            eprintln!(
                "note: {n} round(s): the paired t-test needs {MIN_RUNS} rounds to see how much \
                 rounds differ, so every metric gets its interval and \"not enough runs\"; \
                 give --rounds {MIN_RUNS} or more, or --rounds auto"
            );
        }
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
    let setup = AbSetup {
        a: (args.a.clone(), a_args, a_config),
        b: (args.b.clone(), b_args, b_config),
        rounds: args.rounds,
        max_time,
        duration: args.duration,
        dir: dir.clone(),
        gate: args.gate.clone(),
        margin_pct: crate::compare_cmd::margin(args.fail_if_worse),
    };
    if !args.quiet {
        let rounds = match args.rounds {
            Rounds::Fixed(n) => format!("{n} round(s)"),
            Rounds::Auto => format!(
                "up to {} rounds (--rounds auto within {})",
                max_rounds(max_time, args.duration),
                humantime::format_duration(max_time)
            ),
        };
        eprintln!(
            "ab: {rounds} of A then B, {} each; runs go to {}",
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
    let outcome = run_ab(&setup, &ctx, &mut say, &|| signals.received())?;
    crate::compare_cmd::finish(&outcome.result, args.json.as_deref(), args.fail_if_worse)
}

/// Runs one A/B as `setup` says and compares its finished rounds; `stopped_by` names the stop
/// signal once one came.
pub fn run_ab(
    setup: &AbSetup,
    ctx: &Ctx,
    say: &mut dyn FnMut(&str),
    stopped_by: &dyn Fn() -> Option<&'static str>,
) -> Result<AbOutcome, Failure> {
    let (mut looks, rounds) = match setup.rounds {
        Rounds::Fixed(n) => (None, n as usize),
        Rounds::Auto => {
            let max = max_rounds(setup.max_time, setup.duration);
            let alpha = Options::default().alpha;
            (Looks::new(max, alpha), max)
        }
    };
    let plan = Plan {
        rounds,
        duration: setup.duration,
        warmup: ab::WARMUP,
        dir: setup.dir.clone(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
    };
    let opener = |engine: &EngineArgs| {
        let (kind, jack) = (engine.device, devices::jack_args(engine));
        move |config: &mut EngineConfig| devices::open_with(kind, &jack, config)
    };
    let arm = |(flags, args, config): &(String, EngineArgs, EngineConfig)| Arm {
        flags: flags.clone(),
        config: config.clone(),
        open: Box::new(opener(args)),
    };
    let (mut a, mut b) = (arm(&setup.a), arm(&setup.b));
    let options = |alpha: f64| Options {
        // The user chose both sides' flags, so a workload that differs (a buffer size, a
        // preset) is the point of the A/B: shown in the output, not refused.
        force: true,
        gate: setup.gate.clone(),
        paired: true,
        alpha,
        margin_pct: setup.margin_pct,
    };
    // The comparison at the last look, and whether it decided every gated metric.
    let mut last_look: Option<(usize, f64, CompareResult)> = None;
    let mut gate_error = None;
    let t0 = Instant::now();
    let mut after_round = |round: usize, runs: &Runs| -> bool {
        let Some(l) = looks.as_mut() else {
            return false;
        };
        if let Some(alpha) = l.look(round) {
            match compare_rounds(runs, &options(alpha)) {
                Ok(r) => {
                    let done = decided(&r);
                    last_look = Some((round, alpha, r));
                    if done {
                        return true;
                    }
                }
                Err(e) => {
                    gate_error = Some(e);
                    return true;
                }
            }
        }
        // Stop when the next round would end past --max-time.
        let per_round = t0.elapsed() / round as u32;
        t0.elapsed() + per_round > setup.max_time
    };
    let runs = ab::run(ctx, &plan, (&mut a, &mut b), say, &mut after_round)?;
    if let Some(e) = gate_error {
        return Err(e);
    }
    let interrupted = runs.interrupted.as_ref().map(|at| {
        format!(
            "interrupted by {} {at}",
            stopped_by().unwrap_or("a stop signal")
        )
    });
    let n = runs.a.len().min(runs.b.len());
    if n == 0 {
        return Err(Failure::Runtime(format!(
            "{}; no comparison: a side has no finished run (the runs are in {})",
            interrupted.as_deref().unwrap_or("ended early"),
            setup.dir.display()
        )));
    }
    let mut sequential_note = None;
    let mut result = match (looks.as_mut(), last_look) {
        (None, _) => compare_rounds(&runs, &options(Options::default().alpha))?,
        (Some(_), Some((round, alpha, r))) if round == n => {
            sequential_note = Some(format!(
                "--rounds auto: {} after round {n} of at most {rounds} (looks at rounds {}); \
                 this look tested at α = {alpha:.4} of the 5 % the looks share",
                if decided(&r) {
                    "every gated metric decided"
                } else {
                    "stopped at the last look, not every gated metric decided"
                },
                looks_words(looks.as_ref()),
            ));
            r
        }
        (Some(l), _) => {
            let alpha = l.rest();
            sequential_note = Some(format!(
                "--rounds auto: ended after round {n} of at most {rounds} ({}); the final test \
                 spends what the looks left, α = {alpha:.4}",
                if interrupted.is_some() {
                    "a stop signal"
                } else {
                    "--max-time"
                },
            ));
            if alpha > 0.0 {
                compare_rounds(&runs, &options(alpha))?
            } else {
                compare_rounds(&runs, &options(f64::MIN_POSITIVE))?
            }
        }
    };
    result
        .notes
        .retain(|note| !note.starts_with("different workloads compared because --force"));
    result.notes.insert(
        0,
        format!("A: {}   B: {}", shown(&setup.a.0), shown(&setup.b.0)),
    );
    result.notes.extend(sequential_note);
    result
        .notes
        .extend(runs.warnings.iter().map(|w| format!("not in effect: {w}")));
    if let Some(i) = interrupted {
        result.notes.push(format!(
            "{i}: {} finished run(s) of A and {} of B, {n} round(s) compared; the cut-short run \
             is kept in {} but not compared",
            runs.a.len(),
            runs.b.len(),
            runs.partial
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    debug_assert!(result
        .metrics
        .iter()
        .all(|m| !is_extreme(&m.metric) || m.verdict == Verdict::NotJudged));
    Ok(AbOutcome { result, rounds: n })
}

/// The finished rounds compared pair by pair.
fn compare_rounds(runs: &Runs, options: &Options) -> Result<CompareResult, Failure> {
    let n = runs.a.len().min(runs.b.len());
    let side = |s: &[(PathBuf, RunFile)]| s[..n].to_vec();
    let provenance = xrunlab_sys::Provenance::collect(
        env!("CARGO_PKG_VERSION"),
        xrunlab_sys::default_proc_root(),
        xrunlab_sys::default_sys_root(),
    );
    compare(&side(&runs.a), &side(&runs.b), options, provenance).map_err(|e| match e {
        xrunlab_compare::CompareError::Gate(_) => Failure::from(e),
        e => Failure::Runtime(format!("comparing the runs: {e}")),
    })
}

fn looks_words(looks: Option<&Looks>) -> String {
    looks
        .map(|l| {
            l.rounds()
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}

/// A side's flags for the output ("defaults" when empty).
fn shown(flags: &str) -> String {
    if flags.trim().is_empty() {
        "(defaults)".to_owned()
    } else {
        flags.trim().to_owned()
    }
}
