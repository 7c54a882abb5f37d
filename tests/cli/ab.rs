//! `xrunlab ab` end to end with short rounds: a kernel slowed 4x on side B found worse on load
//! by the paired t-test (the gate exits 1), `--rounds auto` stopping at its first look when the
//! gate is decided, too few rounds giving "not enough runs" and never a verdict, identical
//! sides passing the gate, `bench compare` measuring both error rates,
//! every finished run on disk as a run result, SIGTERM keeping the finished runs and comparing
//! them, and bad flags inside --a/--b refused with exit 2 naming the side and the flag.

use crate::child::{signal, spawn, wait_within};
use crate::{cpus_alone, scratch, usage_error, xrunlab};
use std::path::Path;
use std::time::{Duration, Instant};

/// Rounds of the end-to-end A/Bs with a fixed number: the paired t-test needs 3.
const ROUNDS: &str = "4";

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The printed line of `metric`.
fn line<'a>(stdout: &'a str, metric: &str) -> &'a str {
    stdout
        .lines()
        .find(|l| l.starts_with(metric))
        .unwrap_or_else(|| panic!("a {metric} line: {stdout}"))
}

/// Runs `xrunlab ab` with 1 s rounds; returns exit code, stdout, stderr.
fn ab(dir: &Path, a: &str, b: &str, extra: &[&str]) -> (Option<i32>, String, String) {
    let out = {
        let _cpus = cpus_alone();
        xrunlab()
            .args([
                "ab",
                "--a",
                a,
                "--b",
                b,
                "--rounds",
                ROUNDS,
                "--duration",
                "1s",
            ])
            .args(["--dir", s(&dir.join("runs"))])
            .args(extra)
            .output()
            .unwrap()
    };
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn ab_finds_a_kernel_slowed_on_side_b_worse_on_load_and_its_gate_exits_1() {
    let dir = scratch("ab-slow");
    let cmp = dir.join("cmp.json");
    let (code, stdout, stderr) = ab(
        &dir,
        "--buffer 256",
        "--buffer 256 --kernel-slowdown 4",
        &["--fail-if-worse", "10", "--json", s(&cmp)],
    );
    assert_eq!(code, Some(1), "the gate fails: {stdout}\n{stderr}");
    let load = line(&stdout, "load p50");
    assert!(load.contains("worse"), "{load}");
    assert!(
        stdout.contains(
            "gate: load p50, load p99 (97.50 % intervals each, 95 % together): B worse on load p50"
        ),
        "{stdout}"
    );
    assert!(
        stderr.contains("worse than A by more than 10 %") && stderr.contains("load p50"),
        "the gate names the metric: {stderr}"
    );
    assert!(
        stdout.contains("B: --buffer 256 --kernel-slowdown 4"),
        "{stdout}"
    );
    assert!(stdout.contains("paired t-test on the logs"), "{stdout}");
    let r = crate::json(&cmp);
    assert_eq!(r["schema"], "xrunlab.compare/1");
    assert_eq!(r["metrics"][0]["metric"], "load p50");
    assert_eq!(r["metrics"][0]["verdict"], "worse");
    assert_eq!(r["metrics"][0]["method"], "paired_t_on_log_ratios");
    assert_eq!(r["a_files"].as_array().unwrap().len(), 4);
    for side in ["a", "b"] {
        for round in 1..=4 {
            let run = crate::json(&dir.join(format!("runs/{side}-{round}.json")));
            assert_eq!(run["schema"], "xrunlab.run/2");
            assert_eq!(run["ab"]["side"], side.to_uppercase());
            assert_eq!(run["ab"]["round"], round);
            assert!(run["histograms"]["load_pct"]["data"]
                .as_str()
                .unwrap()
                .starts_with("HISTF"));
            let slowdown = if side == "b" { 4 } else { 1 };
            assert_eq!(run["config"]["kernel_slowdown"], slowdown);
        }
    }
}

#[test]
fn ab_with_identical_sides_shows_no_difference_and_its_gate_passes() {
    let dir = scratch("ab-same");
    let (code, stdout, stderr) = ab(
        &dir,
        "--buffer 256",
        "--buffer 256",
        &["--fail-if-worse", "10"],
    );
    assert_eq!(code, Some(0), "the gate passes: {stdout}\n{stderr}");
    assert!(
        stdout.contains("nothing in the machine fingerprints") && !stdout.contains("workloads"),
        "{stdout}"
    );
    // The gate's intervals hold 95 % together: one identical A/B in twenty may call a gated
    // metric either way by chance, but worse by 10 % or more would be real.
    assert!(stdout.contains("gate: load p50, load p99 ("), "{stdout}");
    assert!(!stdout.contains("no difference shown"), "{stdout}");
}

#[test]
fn ab_with_too_few_rounds_says_not_enough_runs_and_never_fails_the_gate() {
    // The case: with 3 rounds a +77 % change was "no difference shown".
    let dir = scratch("ab-few");
    let out = {
        let _cpus = cpus_alone();
        xrunlab()
            .args([
                "ab",
                "--a",
                "--sines 300",
                "--b",
                "--sines 300 --kernel-slowdown 4",
            ])
            .args([
                "--rounds",
                "2",
                "--duration",
                "500ms",
                "--fail-if-worse",
                "10",
            ])
            .args(["--dir", s(&dir.join("runs"))])
            .output()
            .unwrap()
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let load = line(&stdout, "load p50");
    assert!(load.contains("not enough runs: 2 a side, need 3"), "{load}");
    assert!(!stdout.contains("no difference"), "{stdout}");
    assert!(stderr.contains("give --rounds 3 or more"), "{stderr}");
}

#[test]
fn ab_rounds_auto_stops_at_its_first_look_once_the_gate_is_decided() {
    let dir = scratch("ab-auto");
    let runs = dir.join("runs");
    let out = {
        let _cpus = cpus_alone();
        xrunlab()
            .args([
                "ab",
                "--a",
                "--sines 300",
                "--b",
                "--sines 300 --kernel-slowdown 4",
            ])
            .args(["--rounds", "auto", "--max-time", "40s", "--duration", "1s"])
            .args(["--gate", "load.p50", "--fail-if-worse", "20"])
            .args(["--dir", s(&runs)])
            .output()
            .unwrap()
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    // 40 s of 2 × 1.25 s runs and 0.3 s a round: 14 rounds at most, looks at 4, 7, 11, 14.
    assert!(
        stdout.contains(
            "--rounds auto: every gated metric decided after round 4 of at most 14 (looks at \
             rounds 4, 7, 11, 14)"
        ),
        "{stdout}"
    );
    assert!(line(&stdout, "load p50").contains("worse"), "{stdout}");
    assert!(runs.join("b-4.json").exists() && !runs.join("a-5.json").exists());
}

#[test]
fn bench_compare_measures_false_verdicts_and_power_where_the_truth_is_known() {
    let dir = scratch("bench-compare");
    let json = dir.join("bench.json");
    let out = {
        let _cpus = cpus_alone();
        xrunlab()
            .args(["bench", "compare", "--trials", "1", "--duration", "200ms"])
            .args(["--sines", "300"])
            .args([
                "--max-time",
                "10s",
                "--shift-pct",
                "200",
                "--json",
                s(&json),
            ])
            .output()
            .unwrap()
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("false verdicts on identical sides: ") && stdout.contains("load average"),
        "{stdout}"
    );
    // Three times the sines: found worse, and in the JSON.
    assert!(
        stdout.contains("200 % shifts found worse: 1 of 1 (100 %"),
        "{stdout}"
    );
    let r = crate::json(&json);
    assert_eq!(r["schema"], "xrunlab.bench-compare/1");
    assert_eq!(r["shifted_sines"], 900);
    assert!(stdout.contains("(--sines 900 --burst-sines 0)"), "{stdout}");
    assert_eq!(r["trials"].as_array().unwrap().len(), 2);
    assert_eq!(r["trials"][1]["kind"], "shifted");
    assert_eq!(r["trials"][1]["worse"][0], "load p50");
}

#[test]
fn ab_on_sigterm_keeps_every_finished_run_and_compares_them() {
    let dir = scratch("ab-term");
    let runs = dir.join("runs");
    let child = {
        let _cpus = cpus_alone();
        let child = spawn(&[
            "ab",
            "--a",
            "",
            "--b",
            "",
            "--rounds",
            "3",
            "--duration",
            "1s",
            "--dir",
            s(&runs),
        ]);
        let t0 = Instant::now();
        while !runs.join("b-1.json").exists() {
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "round 1 never ended"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // b-1.json is written just before round 2 starts; a signal in that gap would stop
        // the lab *between* runs (no a-2.json, which is also right but not what this test
        // checks). Round 2's A run lasts its warm-up plus 1 s of clock time, so 400 ms after
        // b-1.json the signal lands inside it.
        std::thread::sleep(Duration::from_millis(400));
        signal(&child, libc::SIGTERM);
        wait_within(child, Duration::from_secs(30))
    };
    let stdout = String::from_utf8_lossy(&child.stdout);
    let stderr = String::from_utf8_lossy(&child.stderr);
    assert_eq!(child.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("during round 2 of 3, side A"),
        "the signal was meant to land inside round 2's A run: {stdout}"
    );
    assert!(
        stdout.contains("A: 1 file(s)   B: 1 file(s)") && stdout.contains("interrupted by SIGTERM"),
        "{stdout}"
    );
    let cut = crate::json(&runs.join("a-2.json"));
    assert!(
        cut["end"]["reason"]
            .as_str()
            .unwrap()
            .contains("not compared"),
        "{cut}"
    );
    assert!(!runs.join("b-2.json").exists());
}

#[test]
fn ab_refuses_bad_flags_inside_a_side_naming_the_side_and_the_flag() {
    usage_error(
        &["ab", "--a", "--buffer 64", "--b", "--buffer 64 --bogus"],
        &["--b", "--bogus", "engine flags of `xrunlab run`"],
    );
    usage_error(
        &["ab", "--a", "--buffer 99999", "--b", ""],
        &["--a", "--buffer", "allowed 16..=8192"],
    );
    usage_error(
        &["ab", "--a", "", "--b", "--duration 1s"],
        &["--b", "--duration"],
    );
    usage_error(
        &["ab", "--a", "--jack-client 'x", "--b", ""],
        &["--a", "unbalanced quotes"],
    );
    usage_error(
        &["ab", "--a", "", "--b", "--kernel-slowdown 99"],
        &["--b", "--kernel-slowdown"],
    );
    let dir = scratch("ab-bad");
    std::fs::write(dir.join("a-1.json"), "{}").unwrap();
    usage_error(
        &["ab", "--a", "", "--b", "", "--dir", s(&dir)],
        &["--dir", "already holds A/B runs"],
    );
    usage_error(
        &["ab", "--a", "", "--b", "", "--fail-if-worse=-1"],
        &["--fail-if-worse", "0 or more"],
    );
    usage_error(
        &["ab", "--a", "", "--b", "", "--rounds", "0"],
        &["--rounds", "allowed: 1..=1000 or auto"],
    );
    usage_error(
        &["ab", "--a", "", "--b", "", "--max-time", "1m"],
        &["--max-time", "only with --rounds auto"],
    );
    usage_error(
        &[
            "ab",
            "--a",
            "",
            "--b",
            "",
            "--rounds",
            "auto",
            "--max-time",
            "5s",
        ],
        &["--max-time 5s", "first looks after 4 rounds"],
    );
    usage_error(
        &["ab", "--a", "", "--b", "", "--gate", "load.max"],
        &["--gate load.max", "a maximum"],
    );
}
