//! Tests of the `xrunlab` binary as a user runs it: bad input, results on disk, Ctrl-C, SIGTERM, SIGHUP and kill -9, the rendered chord, the benchmark, the dashboard's access flags, the doctor; one test binary.

mod dashboard;
mod doctor;
mod errors;
mod explain;
mod lab;
mod lost;
mod render;
mod run;
mod soak;

use std::process::{Command, Output};

/// The binary under test.
pub fn xrunlab() -> Command {
    Command::new(env!("CARGO_BIN_EXE_xrunlab"))
}

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

/// A fresh scratch directory for one test.
pub fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("xrunlab-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
