//! The least privilege each feature needs, as user `nobody` (setpriv; the tests need root to
//! drop to it): `run --explain` records kernel events and names an RT hog with CAP_PERFMON and
//! CAP_DAC_READ_SEARCH as ambient capabilities, or with CAP_PERFMON alone once tracefs is
//! mounted with nobody's group; the same rights given as file capabilities on a copy of the
//! binary (doctor's setcap fix) let it trace; doctor says whether this user can trace and how
//! to fix it; the dashboard serves without any privilege. Runs on test threads.

use crate::child::{piped, require_root, stop_ok};
use crate::explain::{hog_is_named, require_tracer, root_turn};
use crate::{json, scratch};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

/// The binary under test, where user nobody can run it: in place when every directory above
/// it lets others search it, else copied (mode 0755) to a scratch directory, once per test
/// process. Once: each copy re-creates its scratch directory, so tests copying at the same time
/// deleted each other's copy between its `cp` and its run (seen in the fresh-machine chroot,
/// where the checkout is under /root, mode 0700: the dashboard test's child found no binary).
fn binary_for_nobody() -> PathBuf {
    static COPY: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_xrunlab"));
    let others_may =
        |p: &Path, bit: u32| std::fs::metadata(p).is_ok_and(|m| m.permissions().mode() & bit != 0);
    if others_may(&bin, 0o001) && bin.ancestors().skip(1).all(|d| others_may(d, 0o001)) {
        return bin;
    }
    COPY.get_or_init(|| copy_for_nobody("binary")).clone()
}

/// A copy of the binary, mode 0755, in a scratch directory `name` that others may search.
///
/// The copy is made by a `cp` child, not by this process: a file this process held open for
/// writing would be inherited by any child another test thread forks meanwhile, and executing
/// the copy while such a child still holds it fails with ETXTBSY ("Text file busy"). `cp`'s
/// descriptor lives and dies in `cp`, which has exited before the copy is run.
fn copy_for_nobody(name: &str) -> PathBuf {
    let dir = scratch(name);
    std::fs::set_permissions(&dir, PermissionsExt::from_mode(0o755)).unwrap();
    let copy = dir.join("xrunlab");
    let cp = Command::new("cp")
        .arg(env!("CARGO_BIN_EXE_xrunlab"))
        .arg(&copy)
        .status()
        .expect("cp runs");
    assert!(
        cp.success(),
        "cp of the binary to {} failed: {cp}",
        copy.display()
    );
    std::fs::set_permissions(&copy, PermissionsExt::from_mode(0o755)).unwrap();
    copy
}

/// `setpriv` running `bin` as nobody:nogroup without supplementary groups, with exactly the
/// capabilities `caps` (e.g. `["perfmon"]`) as inheritable and ambient ones, none when empty.
fn as_nobody(bin: &Path, caps: &[&str]) -> Command {
    require_root();
    let mut c = Command::new("setpriv");
    c.args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"]);
    if caps.is_empty() {
        c.arg("--inh-caps=-all");
    } else {
        let list: Vec<String> = caps.iter().map(|c| format!("+{c}")).collect();
        let list = list.join(",");
        c.arg(format!("--inh-caps={list}"))
            .arg(format!("--ambient-caps={list}"));
    }
    c.arg("--").arg(bin);
    c
}

/// A scratch directory nobody may write to.
fn writable_scratch(name: &str) -> PathBuf {
    let dir = scratch(name);
    std::fs::set_permissions(&dir, PermissionsExt::from_mode(0o777)).unwrap();
    dir
}

/// A short `run --explain` with injected stalls through `command`; returns its JSON result
/// after checking that the tracer ran and recorded kernel events.
fn explain_records_events(mut command: Command, name: &str) -> Value {
    let dir = writable_scratch(name);
    let j = dir.join("r.json");
    let out = command
        .args(["run", "--quiet", "--explain", "--duration", "1s"])
        .args(["--stall", "8ms", "--stall-every", "300ms"])
        .args(["--json", j.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    let r = json(&j);
    require_tracer(&r);
    let stats = &r["explain"]["stats"];
    assert!(
        stats["events_total"].as_u64().unwrap_or(0) > 0
            && stats["events_by_type"]["switch"].as_u64().unwrap_or(0) > 0,
        "kernel events recorded: {}",
        r["explain"]
    );
    r
}

#[test]
#[ignore = "needs root: drops to user nobody with setpriv and forks SCHED_FIFO hogs"]
fn explain_as_nobody_with_cap_perfmon_and_cap_dac_read_search_names_a_hog() {
    let _turn = root_turn();
    let bin = binary_for_nobody();
    let dir = writable_scratch("nobody-hog");
    hog_is_named(&dir, |args| {
        piped(
            as_nobody(&bin, &["perfmon", "dac_read_search"])
                .args(["run", "--quiet"])
                .args(args),
        )
    });
}

/// Remounts tracefs with group nogroup and mode 0750 (doctor's group fix) until dropped, then
/// restores the kernel's defaults (root's group, mode 0700).
struct TracefsGroup;

impl TracefsGroup {
    fn nogroup() -> TracefsGroup {
        let ok = Command::new("mount")
            .args(["-o", "remount,gid=65534,mode=0750", "/sys/kernel/tracing"])
            .status()
            .unwrap()
            .success();
        assert!(
            ok,
            "mount -o remount,gid=65534,mode=0750 /sys/kernel/tracing failed"
        );
        TracefsGroup
    }
}

impl Drop for TracefsGroup {
    fn drop(&mut self) {
        let _ = Command::new("mount")
            .args(["-o", "remount,gid=0,mode=0700", "/sys/kernel/tracing"])
            .status();
    }
}

#[test]
#[ignore = "needs root: remounts tracefs with a group and drops to user nobody"]
fn explain_as_nobody_with_cap_perfmon_alone_once_tracefs_has_its_group() {
    let _turn = root_turn();
    let bin = binary_for_nobody();
    {
        // Without the group, CAP_PERFMON alone cannot read the event formats.
        let dir = writable_scratch("nobody-perfmon-only");
        let j = dir.join("r.json");
        let out = as_nobody(&bin, &["perfmon"])
            .args(["run", "--quiet", "--explain", "--duration", "1s"])
            .args(["--json", j.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(out.status.success());
        let r = json(&j);
        assert_eq!(r["explain"]["available"], false, "{}", r["explain"]);
        let reason = r["explain"]["unavailable"].as_str().unwrap();
        assert!(reason.contains("reading tracefs"), "{reason}");
    }
    let _group = TracefsGroup::nogroup();
    explain_records_events(as_nobody(&bin, &["perfmon"]), "nobody-perfmon-group");
}

#[test]
#[ignore = "needs root: sets file capabilities and drops to user nobody"]
fn doctors_setcap_fix_lets_nobody_trace_without_ambient_capabilities() {
    let _turn = root_turn();
    let copy = copy_for_nobody("nobody-setcap");
    // A binary that reads every file must not outlive the test, even a failed one.
    let _remove = RemoveOnDrop(copy.parent().unwrap().to_path_buf());
    let ok = Command::new("setcap")
        .args(["cap_perfmon,cap_dac_read_search+ep", copy.to_str().unwrap()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "setcap on {}", copy.display());
    explain_records_events(as_nobody(&copy, &[]), "nobody-setcap-run");
}

/// Removes a directory when dropped.
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `doctor --json -` run through `command`: its trace.user finding.
fn trace_user(mut command: Command) -> Value {
    let out: Output = command.args(["doctor", "--json", "-"]).output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "doctor --json -: {e}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    report["report"]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "trace.user")
        .unwrap_or_else(|| panic!("no trace.user finding"))
        .clone()
}

#[test]
#[ignore = "needs root: drops to user nobody with setpriv"]
fn doctor_tells_nobody_whether_it_can_trace_and_the_exact_fix() {
    let bin = binary_for_nobody();
    let f = trace_user(as_nobody(&bin, &[]));
    assert_eq!(f["status"], "warn", "{f:#}");
    let reason = f["reason"].as_str().unwrap();
    assert!(
        reason.contains("/sys/kernel/tracing is mode 700") && reason.contains("CAP_PERFMON"),
        "{reason}"
    );
    let fix = f["fix"].as_str().unwrap();
    let bin_shown = bin.display().to_string();
    assert!(
        fix.starts_with(&format!(
            "sudo setcap cap_perfmon+ep {bin_shown} && \
             sudo mount -o remount,gid=nogroup,mode=0750 /sys/kernel/tracing"
        )),
        "{fix}"
    );
    let f = trace_user(as_nobody(&bin, &["perfmon", "dac_read_search"]));
    assert_eq!(f["status"], "pass", "{f:#}");
}

/// The full reply to `GET path` on 127.0.0.1:`port` with these extra header lines.
fn get(port: u16, path: &str, headers: &str) -> String {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n{headers}\r\n"
    )
    .unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    reply
}

#[test]
#[ignore = "needs root: drops to user nobody with setpriv"]
fn the_dashboard_serves_its_page_as_nobody_without_capabilities() {
    let bin = binary_for_nobody();
    let mut child = piped(
        as_nobody(&bin, &[])
            .args([
                "dashboard",
                "--port",
                "0",
                "--sines",
                "50",
                "--token",
                "nobody-token-0001",
            ])
            .env_remove("XRUNLAB_TOKEN"),
    );
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let Some(url) = line.trim().strip_prefix("xrunlab dashboard: ") else {
        // The child ended before serving: what it said is the reason.
        let mut err = String::new();
        if let Some(mut e) = child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        panic!("no URL line: {line:?}; stderr: {err}");
    };
    let rest = url.strip_prefix("http://127.0.0.1:").unwrap();
    let port: u16 = rest[..rest.find('/').unwrap()].parse().unwrap();
    // The token URL sets the session cookie and redirects to the page.
    let redirect = get(port, "/?token=nobody-token-0001", "");
    assert!(redirect.starts_with("HTTP/1.1 303"), "{redirect}");
    let cookie = redirect
        .lines()
        .find_map(|l| {
            l.strip_prefix("set-cookie: ")
                .or(l.strip_prefix("Set-Cookie: "))
        })
        .and_then(|c| c.split(';').next())
        .unwrap_or_else(|| panic!("no cookie: {redirect}"));
    let page = get(port, "/", &format!("Cookie: {cookie}\r\n"));
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    assert!(
        page.contains("<html")
            || page.contains("<!doctype html")
            || page.contains("<!DOCTYPE html"),
        "{page}"
    );
    let status = get(
        port,
        "/api/status",
        "Authorization: Bearer nobody-token-0001\r\n",
    );
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    stop_ok(child, libc::SIGINT, Duration::from_secs(20));
}
