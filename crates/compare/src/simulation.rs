//! The error rates of the verdicts, pinned by simulation: synthetic runs drawn from known
//! distributions with a fixed seed (fast and deterministic), judged by the same code as real
//! runs, so the false-verdict rate on identical sides and the power on a known shift are
//! counted, not argued. Test-only; runs on the test thread.

use crate::analyse::Options;
use crate::gate::Plan;
use crate::judge::{judge, Figures};
use crate::sequential::{all_decided, Looks};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use xrunlab_results::compare::{MetricComparison, Verdict};

const TRIALS: u64 = 2000;

/// A standard normal draw (Box-Muller).
fn normal(rng: &mut StdRng) -> f64 {
    let u1: f64 = 1.0 - rng.random::<f64>();
    let u2: f64 = rng.random();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// One run's load p50 and p99 on a machine whose state gives the run `drift` (a log factor
/// both runs of an A/B round share) and its own log-normal noise `sigma`; `work` scales the
/// load (1.1: 10 % more sines). p99 moves with p50, with noise of its own.
fn run(rng: &mut StdRng, work: f64, drift: f64, sigma: f64) -> [f64; 2] {
    let p50 = 8.0 * work * (drift + sigma * normal(rng)).exp();
    [p50, p50 * 1.6 * (0.5 * sigma * normal(rng)).exp()]
}

/// The gated metrics' verdicts for runs `a` and `b` (each run's [p50, p99]) at `alpha`.
fn judged(a: &[[f64; 2]], b: &[[f64; 2]], paired: bool, alpha: f64) -> Vec<MetricComparison> {
    let names = ["load p50".to_owned(), "load p99".to_owned()];
    let options = Options {
        paired,
        alpha,
        ..Options::default()
    };
    let plan = Plan::new(&names, &options, Some(crate::gate::RUN_DEFAULT)).unwrap();
    let mut rng = StdRng::seed_from_u64(0);
    names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let f = Figures {
                name: name.clone(),
                unit: "%".into(),
                higher_is_better: false,
                a: a.iter().map(|r| r[i]).collect(),
                b: b.iter().map(|r| r[i]).collect(),
                quantile: None,
            };
            judge(f, plan.how(name), &mut rng)
        })
        .collect()
}

fn any_verdict(ms: &[MetricComparison]) -> bool {
    ms.iter()
        .any(|m| matches!(m.verdict, Verdict::Better | Verdict::Worse))
}

fn found_worse(ms: &[MetricComparison]) -> bool {
    ms.iter().any(|m| m.verdict == Verdict::Worse)
        && ms.iter().all(|m| m.verdict != Verdict::Better)
}

/// Independent runs, `n` a side, B's work `work` times A's, each run's own spread `sigma`
/// (the machine's state between runs is part of it: no pairing to cancel it).
fn compare_trials(
    n: usize,
    work: f64,
    sigma: f64,
    hit: impl Fn(&[MetricComparison]) -> bool,
) -> u64 {
    (0..TRIALS)
        .filter(|&seed| {
            let mut rng = StdRng::seed_from_u64(seed);
            let a: Vec<[f64; 2]> = (0..n).map(|_| run(&mut rng, 1.0, 0.0, sigma)).collect();
            let b: Vec<[f64; 2]> = (0..n).map(|_| run(&mut rng, work, 0.0, sigma)).collect();
            hit(&judged(&a, &b, false, 0.05))
        })
        .count() as u64
}

#[test]
fn identical_sides_get_a_verdict_in_at_most_5_percent_of_comparisons() {
    for n in [3, 4, 8] {
        let false_verdicts = compare_trials(n, 1.0, 0.15, any_verdict);
        eprintln!("{n} runs a side, identical: {false_verdicts} of {TRIALS} with a verdict");
        assert!(
            false_verdicts * 100 <= TRIALS * 5,
            "{n} runs a side: {false_verdicts} of {TRIALS}"
        );
    }
}

#[test]
fn four_runs_a_side_of_a_kernel_three_times_slower_trip_a_20_percent_gate() {
    // The case: 4 runs a side, load up 3x, run-to-run spread as on a shared machine
    // (one run's median load 7 %, another's 10 %: about 20 % in logs).
    let tripped = compare_trials(4, 3.0, 0.2, |ms| {
        ms.iter().any(|m| m.worse_by_more_than(20.0))
    });
    eprintln!("4 runs a side, 3x: the 20 % gate tripped in {tripped} of {TRIALS}");
    assert!(tripped * 100 >= TRIALS * 99, "{tripped} of {TRIALS}");
}

/// What one sequential A/B of at most `max_rounds` rounds ended with, and after how many:
/// each round's two runs share a drift of the machine (log spread `drift`), each run has its
/// own noise `sigma`.
fn sequential_ab(
    rng: &mut StdRng,
    work: f64,
    (drift, sigma): (f64, f64),
    max_rounds: usize,
) -> (Vec<MetricComparison>, usize) {
    let mut looks = Looks::new(max_rounds, 0.05).unwrap();
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let mut last = Vec::new();
    for round in 1..=max_rounds {
        let d = drift * normal(rng);
        a.push(run(rng, 1.0, d, sigma));
        b.push(run(rng, work, d, sigma));
        if let Some(alpha) = looks.look(round) {
            last = judged(&a, &b, true, alpha);
            if all_decided(&last) {
                return (last, round);
            }
        }
    }
    (last, max_rounds)
}

/// 64 rounds: what `ab --rounds auto --duration 1s` fits in its default 3 minutes.
const MAX_ROUNDS: usize = 64;

/// Rounds drift by 30 % (other jobs come and go), the runs within a round by 8 % each.
const SHARED_MACHINE: (f64, f64) = (0.3, 0.08);

fn sequential_trials(work: f64, hit: impl Fn(&[MetricComparison]) -> bool) -> (u64, f64) {
    let mut rounds = 0;
    let hits = (0..TRIALS)
        .filter(|&seed| {
            let mut rng = StdRng::seed_from_u64(seed);
            let (ms, r) = sequential_ab(&mut rng, work, SHARED_MACHINE, MAX_ROUNDS);
            rounds += r;
            hit(&ms)
        })
        .count() as u64;
    (hits, rounds as f64 / TRIALS as f64)
}

#[test]
fn a_sequential_ab_of_identical_sides_gives_a_verdict_in_at_most_5_percent() {
    let (false_verdicts, rounds) = sequential_trials(1.0, any_verdict);
    eprintln!("sequential, identical: {false_verdicts} of {TRIALS} with a verdict, {rounds:.1} rounds on average");
    assert!(
        false_verdicts * 100 <= TRIALS * 5,
        "{false_verdicts} of {TRIALS}"
    );
}

#[test]
fn a_sequential_ab_finds_a_10_percent_shift_in_at_least_90_percent_and_stops_early() {
    let (found, rounds) = sequential_trials(1.1, found_worse);
    eprintln!("sequential, +10 %: found in {found} of {TRIALS}, {rounds:.1} rounds on average");
    assert!(found * 100 >= TRIALS * 90, "{found} of {TRIALS}");
    assert!(
        rounds < MAX_ROUNDS as f64 * 0.75,
        "{rounds} rounds on average"
    );
    // Welch on the same kind of runs, unpaired, 64 a side: the drift swamps the shift.
    let unpaired = (0..200)
        .filter(|&seed| {
            let mut rng = StdRng::seed_from_u64(seed);
            let (mut a, mut b) = (Vec::new(), Vec::new());
            for _ in 0..MAX_ROUNDS {
                let d = SHARED_MACHINE.0 * normal(&mut rng);
                a.push(run(&mut rng, 1.0, d, SHARED_MACHINE.1));
                b.push(run(&mut rng, 1.1, d, SHARED_MACHINE.1));
            }
            found_worse(&judged(&a, &b, false, 0.05))
        })
        .count();
    eprintln!("unpaired Welch over {MAX_ROUNDS} rounds, +10 %: found in {unpaired} of 200");
    assert!(unpaired < 180, "unpaired found it in {unpaired} of 200");
}

#[test]
fn a_threefold_slowdown_stops_a_sequential_ab_at_its_first_look() {
    let mut rng = StdRng::seed_from_u64(7);
    let (ms, rounds) = sequential_ab(&mut rng, 3.0, SHARED_MACHINE, MAX_ROUNDS);
    assert_eq!(rounds, 16);
    assert!(ms.iter().all(|m| m.verdict == Verdict::Worse), "{ms:?}");
}
