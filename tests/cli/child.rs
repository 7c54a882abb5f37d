//! Starting, signalling and waiting for the `xrunlab` processes under test, shared by the modules
//! of the cli test binary; runs on test threads.

use crate::xrunlab;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Starts `xrunlab args` with its standard output and error piped.
pub fn spawn(args: &[&str]) -> Child {
    piped(xrunlab().args(args))
}

/// Starts `xrunlab run --quiet args`.
pub fn spawn_run(args: &[&str]) -> Child {
    piped(xrunlab().args(["run", "--quiet"]).args(args))
}

/// Starts a 60 s run that writes its JSON to `j` and its CSV to `c`.
pub fn spawn_long_run(j: &Path, c: &Path) -> Child {
    spawn_run(&[
        "--duration",
        "60s",
        "--json",
        j.to_str().unwrap(),
        "--csv",
        c.to_str().unwrap(),
    ])
}

/// Starts `command` with its standard output and error piped.
pub fn piped(command: &mut Command) -> Child {
    command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Starts `xrunlab dashboard` on a free port (without a token from the environment) with
/// `extra` flags; returns the process and the URL it printed on its first line.
pub fn spawn_dashboard(extra: &[&str]) -> (Child, String) {
    let mut child = piped(
        xrunlab()
            .args(["dashboard", "--port", "0"])
            .args(extra)
            .env_remove("XRUNLAB_TOKEN"),
    );
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("xrunlab dashboard: ")
        .unwrap_or_else(|| panic!("no URL line: {line:?}"))
        .to_owned();
    (child, url)
}

/// Sends `signal` to the child.
pub fn signal(child: &Child, signal: i32) {
    // SAFETY: kill with the pid of our own child and a valid signal number.
    let rc = unsafe { libc::kill(child.id() as i32, signal) };
    assert_eq!(rc, 0, "kill({signal})");
}

/// Waits for the child to exit, failing the test (and killing it) after `limit`.
pub fn wait_within(mut child: Child, limit: Duration) -> Output {
    let t0 = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed() > limit {
            let _ = child.kill();
            panic!("xrunlab did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

/// Waits for the child to exit (within `limit`) with status 0; shows its output otherwise.
pub fn wait_ok(child: Child, limit: Duration) -> Output {
    let out = wait_within(child, limit);
    assert!(
        out.status.success(),
        "xrunlab failed ({:?}): {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    out
}

/// Sends `signal` to the child and waits for it to end cleanly (status 0) within `limit`.
pub fn stop_ok(child: Child, sig: i32, limit: Duration) -> Output {
    signal(&child, sig);
    wait_ok(child, limit)
}

/// Kills the child with SIGKILL (`kill -9`) and checks that this is what ended it.
pub fn kill_9(child: Child) -> Output {
    signal(&child, libc::SIGKILL);
    let out = wait_within(child, Duration::from_secs(10));
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&out.status),
        Some(libc::SIGKILL),
        "{:?}",
        out.status
    );
    out
}

/// Fails loudly unless the tests run as root.
pub fn require_root() {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "needs root: run as root (test.sh runs ignored tests with --include-ignored)"
    );
}

/// Runs `xrunlab args` as user nobody, with no capabilities (through setpriv; needs root),
/// after making `dir` writable for it.
pub fn output_as_nobody(dir: &Path, args: &[&str]) -> Output {
    require_root();
    std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    Command::new("setpriv")
        .args([
            "--reuid=nobody",
            "--regid=nogroup",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_xrunlab"))
        .args(args)
        .output()
        .unwrap()
}
