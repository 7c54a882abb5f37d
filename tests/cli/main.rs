//! Tests of the `xrunlab` binary as a user runs it: bad input, results on disk, A/B runs, Ctrl-C,
//! SIGTERM, SIGHUP and kill -9, the rendered chord, the benchmark, the dashboard's access flags,
//! the doctor, the flight recorder's history, the man pages and completions; one test binary.

mod ab;
mod child;
mod compare;
mod dashboard;
mod doctor;
mod errors;
mod explain;
mod history;
mod lab;
mod lost;
mod man;
mod privileges;
mod render;
mod run;
mod soak;

use std::process::{Command, Output};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// The two CPUs, as the tests share them. Tests that load them on purpose with real-time
/// threads (the capacity search, the buffer sweep, an RT hog on CPU 1) take them alone; tests
/// that judge a run's timing (no incomplete render, buffers counted in wall time) share them
/// with each other but never run beside those.
static CPUS: RwLock<()> = RwLock::new(());

/// Waits until no other test holds the CPUs, then holds them alone.
pub fn cpus_alone() -> RwLockWriteGuard<'static, ()> {
    CPUS.write().unwrap_or_else(|p| p.into_inner())
}

/// Waits until no test holds the CPUs alone; other timing tests may run meanwhile.
pub fn cpus_shared() -> RwLockReadGuard<'static, ()> {
    CPUS.read().unwrap_or_else(|p| p.into_inner())
}

/// The binary under test.
pub fn xrunlab() -> Command {
    Command::new(env!("CARGO_BIN_EXE_xrunlab"))
}

/// Runs `xrunlab args` to its end and asserts exit status 0.
pub fn run_ok(args: &[&str]) -> Output {
    let out = xrunlab().args(args).output().expect("xrunlab runs");
    assert!(
        out.status.success(),
        "xrunlab {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    out
}

/// Runs `xrunlab run --quiet args --json FILE` to its end (status 0), FILE in a fresh scratch
/// directory called `name`; returns its standard output and the JSON result.
pub fn run_json(name: &str, args: &[&str]) -> (String, serde_json::Value) {
    let (stdout, result, _) = run_in(name, args, false);
    (stdout, result)
}

/// [`run_json`] with `--csv FILE` too; also returns the CSV's text.
pub fn run_json_csv(name: &str, args: &[&str]) -> (String, serde_json::Value, String) {
    let (stdout, result, csv) = run_in(name, args, true);
    (stdout, result, csv.unwrap())
}

fn run_in(name: &str, args: &[&str], csv: bool) -> (String, serde_json::Value, Option<String>) {
    let dir = scratch(name);
    let (j, c) = (dir.join("r.json"), dir.join("r.csv"));
    let mut run = [
        &["run", "--quiet"][..],
        args,
        &["--json", j.to_str().unwrap()],
    ]
    .concat();
    if csv {
        run.extend(["--csv", c.to_str().unwrap()]);
    }
    let out = run_ok(&run);
    let text = csv.then(|| std::fs::read_to_string(&c).unwrap());
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        json(&j),
        text,
    )
}

/// Asserts that `xrunlab args` is a usage error: exit code 2, no panic, and every string of
/// `expect` (the flag, what is allowed) in its standard error.
pub fn usage_error(args: &[&str], expect: &[&str]) {
    let out = xrunlab().args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "xrunlab {args:?}: {stderr}");
    for e in expect {
        assert!(
            stderr.contains(e),
            "xrunlab {args:?}: expected {e:?} in {stderr:?}"
        );
    }
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// Runs the quick `probe sleep` at one interval (1 ms: every call, both slacks) with `extra`
/// flags, writing its result to `json`.
pub fn sleep_probe(json: &std::path::Path, extra: &[&str]) {
    let args = [
        &["probe", "sleep", "--quick", "--quiet", "--intervals", "1ms"][..],
        extra,
        &["--json", json.to_str().unwrap()],
    ]
    .concat();
    run_ok(&args);
}

/// Runs the smallest capacity search that still finds a count (2048 frames, one repeat, no
/// burst, a LatencyMark of one sine) with `seconds` per trial and `extra` flags, writing its
/// result to `json`.
pub fn small_capacity(json: &std::path::Path, seconds: &str, extra: &[&str]) -> Output {
    let args = [
        &[
            "capacity",
            "--quick",
            "--buffers",
            "2048",
            "--seconds",
            seconds,
            "--repeats",
            "1",
            "--burst-load",
            "0",
            "--latency-sines",
            "1",
        ][..],
        extra,
        &["--json", json.to_str().unwrap()],
    ]
    .concat();
    run_ok(&args)
}

/// A JSON file the binary wrote.
pub fn json(path: &std::path::Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not valid JSON ({e}): {text}", path.display()))
}

/// Files in `dir` whose name ends with `.partial` (a result still being written).
pub fn partials(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".partial"))
        .collect()
}

/// A fresh scratch directory for one test.
pub fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("xrunlab-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
