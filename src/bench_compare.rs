//! `xrunlab bench compare`: the error rates of `ab --rounds auto` measured where the truth is
//! known by construction. It runs `--trials` A/Bs of identical sides (any verdict on a gated
//! metric is a false one) and as many of side B with `--shift-pct` more sines (the shift must
//! be found: "worse" on a gated metric), interleaved, through the same [`run_ab`] as `ab`,
//! and prints both rates with their exact 95 % intervals and the machine's load average.
//! Runs on the main thread.

use crate::ab_cmd::{run_ab, side, AbSetup};
use crate::cli::bench::CompareBenchArgs;
use crate::cli::compare::Rounds;
use crate::signals::StopSignals;
use crate::Failure;
use serde::Serialize;
use std::time::Instant;
use xrunlab_compare::rates::proportion_interval;
use xrunlab_lab::Ctx;
use xrunlab_results::compare::Verdict;
use xrunlab_sys::Provenance;

/// The layout of `bench compare --json`.
pub const SCHEMA: &str = "xrunlab.bench-compare/1";

/// One A/B of the bench.
#[derive(Debug, Serialize)]
struct Trial {
    /// "identical" or "shifted".
    kind: &'static str,
    /// 1-based.
    trial: u32,
    /// Rounds compared.
    rounds: usize,
    /// Seconds the A/B took.
    seconds: f64,
    /// Gated metrics worse on B.
    worse: Vec<String>,
    /// Gated metrics better on B.
    better: Vec<String>,
    /// Every gated metric decided when it ended.
    decided: bool,
    /// Each gated metric's change and interval in percent, as "load p50 +6.2 % [-3.1, +15.0]".
    changes: Vec<String>,
}

/// A rate over trials.
#[derive(Debug, Serialize)]
struct Rate {
    count: u64,
    trials: u64,
    /// Exact (Clopper-Pearson) 95 % interval of the rate.
    interval: [f64; 2],
}

impl Rate {
    fn of(count: u64, trials: u64) -> Rate {
        Rate {
            count,
            trials,
            interval: proportion_interval(count, trials),
        }
    }

    fn words(&self) -> String {
        format!(
            "{} of {} ({:.0} %, 95 % interval [{:.0}, {:.0}] %)",
            self.count,
            self.trials,
            self.count as f64 / self.trials as f64 * 100.0,
            self.interval[0] * 100.0,
            self.interval[1] * 100.0
        )
    }
}

#[derive(Debug, Serialize)]
struct BenchCompareResult {
    schema: &'static str,
    provenance: Provenance,
    sines: u32,
    shifted_sines: u32,
    duration_s: f64,
    max_time_s: f64,
    /// /proc/loadavg at the start and the end: the machine's other work.
    loadavg_start: String,
    loadavg_end: String,
    false_verdicts: Rate,
    shifts_found: Rate,
    trials: Vec<Trial>,
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".to_owned())
}

pub fn bench(args: &CompareBenchArgs) -> Result<(), Failure> {
    if let Some(p) = &args.json {
        crate::files::check_writable("--json", p)?;
    }
    let shift = |n: u32| -> Result<u32, Failure> {
        u32::try_from((u64::from(n) * u64::from(100 + args.shift_pct)).div_ceil(100)).map_err(
            |_| {
                Failure::Usage(format!(
                    "invalid --shift-pct {}: {n} sines shifted is too many (allowed: a shift \
                     that leaves at most {} sines)",
                    args.shift_pct,
                    u32::MAX
                ))
            },
        )
    };
    let shifted = shift(args.sines)?;
    let a_flags = format!("--sines {} --burst-sines {}", args.sines, args.burst_sines);
    let b_flags = format!(
        "--sines {shifted} --burst-sines {}",
        shift(args.burst_sines)?
    );
    if let Some(gate) = &args.gate {
        xrunlab_compare::check_run_gate(gate)?;
    }
    // Checked once here; each A/B parses its own (the parsed flags are not copied).
    side("--a", &a_flags)?;
    side("--b", &b_flags)?;
    let signals = StopSignals::install().map_err(Failure::Runtime)?;
    let stop = || signals.received().is_some();
    let ctx = Ctx::silent(&stop);
    let mut provenance = Provenance::collect(
        env!("CARGO_PKG_VERSION"),
        xrunlab_sys::default_proc_root(),
        xrunlab_sys::default_sys_root(),
    );
    let loadavg_start = loadavg();
    println!(
        "bench compare: {} A/Bs of identical sides ({a_flags}) and {} of B shifted {} % \
         ({b_flags}), each --rounds auto within {} of {} runs; load average {loadavg_start}",
        args.trials,
        args.trials,
        args.shift_pct,
        humantime::format_duration(args.max_time),
        humantime::format_duration(args.duration),
    );
    let scratch = tempfile::tempdir()
        .map_err(|e| Failure::Runtime(format!("cannot make a scratch directory: {e}")))?;
    let mut trials = Vec::new();
    'trials: for trial in 1..=args.trials {
        for (kind, b_text) in [("identical", &a_flags), ("shifted", &b_flags)] {
            if stop() {
                break 'trials;
            }
            let (a_args, a_config) = side("--a", &a_flags)?;
            let (b_args, b_config) = side("--b", b_text)?;
            let setup = AbSetup {
                a: (a_flags.clone(), a_args, a_config),
                b: (b_text.clone(), b_args, b_config),
                rounds: Rounds::Auto,
                max_time: args.max_time,
                duration: args.duration,
                dir: scratch.path().join(format!("{kind}-{trial}")),
                gate: args.gate.clone(),
                margin_pct: xrunlab_compare::DEFAULT_MARGIN_PCT,
            };
            xrunlab_lab::ab::prepare_dir(&setup.dir)?;
            let t0 = Instant::now();
            let outcome = run_ab(&setup, &ctx, &mut |_| {}, &|| signals.received())?;
            let named = |v: Verdict| -> Vec<String> {
                outcome
                    .result
                    .metrics
                    .iter()
                    .filter(|m| m.gated && m.verdict == v)
                    .map(|m| m.metric.clone())
                    .collect()
            };
            let t = Trial {
                kind,
                trial,
                rounds: outcome.rounds,
                seconds: t0.elapsed().as_secs_f64(),
                worse: named(Verdict::Worse),
                better: named(Verdict::Better),
                decided: crate::ab_cmd::decided(&outcome.result),
                changes: outcome
                    .result
                    .metrics
                    .iter()
                    .filter(|m| m.gated)
                    .map(|m| {
                        let change = m
                            .change_pct
                            .map_or("-".to_owned(), |c| format!("{c:+.1} %"));
                        let interval = m
                            .interval_pct
                            .map_or("-".to_owned(), |[lo, hi]| format!("[{lo:+.1}, {hi:+.1}]"));
                        format!("{} {change} {interval}", m.metric)
                    })
                    .collect(),
            };
            println!(
                "  {kind:<9} {trial:>3}/{}: {} after {} rounds ({:.0} s): {}",
                args.trials,
                match (t.worse.is_empty(), t.better.is_empty()) {
                    (true, true) if t.decided => "no change beyond the margin".to_owned(),
                    (true, true) => "undecided".to_owned(),
                    _ => format!(
                        "worse on [{}], better on [{}]",
                        t.worse.join(", "),
                        t.better.join(", ")
                    ),
                },
                t.rounds,
                t.seconds,
                t.changes.join(", ")
            );
            trials.push(t);
        }
    }
    let count = |kind: &str, hit: &dyn Fn(&Trial) -> bool| {
        let of_kind: Vec<&Trial> = trials.iter().filter(|t| t.kind == kind).collect();
        Rate::of(
            of_kind.iter().filter(|t| hit(t)).count() as u64,
            of_kind.len() as u64,
        )
    };
    if trials.len() < 2 {
        return Err(Failure::Runtime(
            "stopped before one A/B of each kind finished: no rates".to_owned(),
        ));
    }
    let false_verdicts = count("identical", &|t| {
        !t.worse.is_empty() || !t.better.is_empty()
    });
    let shifts_found = count("shifted", &|t| !t.worse.is_empty() && t.better.is_empty());
    let loadavg_end = loadavg();
    println!(
        "false verdicts on identical sides: {} (goal: at most 5 %)",
        false_verdicts.words()
    );
    println!(
        "{} % shifts found worse: {} (goal: at least 90 %)",
        args.shift_pct,
        shifts_found.words()
    );
    let times: Vec<f64> = trials.iter().map(|t| t.seconds).collect();
    println!(
        "each A/B took {:.0} s at most, {:.0} s on average; load average {loadavg_end} at the end",
        times.iter().copied().fold(0.0, f64::max),
        times.iter().sum::<f64>() / times.len() as f64
    );
    if let Some(p) = &args.json {
        provenance.finish();
        let result = BenchCompareResult {
            schema: SCHEMA,
            provenance,
            sines: args.sines,
            shifted_sines: shifted,
            duration_s: args.duration.as_secs_f64(),
            max_time_s: args.max_time.as_secs_f64(),
            loadavg_start,
            loadavg_end,
            false_verdicts,
            shifts_found,
            trials,
        };
        xrunlab_results::write::write_json(p, &result)?;
    }
    Ok(())
}
