//! `xrunlab run --device jack` as a user runs it, against a `jackd -d dummy` each test starts on
//! its own thread and stops by pid (a drop guard).
#![cfg(feature = "jack")]

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use xrunlab_jack_testkit::{take_turn, TestServer};

fn xrunlab() -> Command {
    Command::new(env!("CARGO_BIN_EXE_xrunlab"))
}

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("xrunlab-jack-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}

/// Waits for `child` at most `limit`; kills it and fails the test on a hang.
fn wait_bounded(mut child: Child, limit: Duration) -> std::process::Output {
    let t0 = Instant::now();
    while matches!(child.try_wait(), Ok(None)) {
        if t0.elapsed() > limit {
            let _ = child.kill();
            panic!("xrunlab did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("xrunlab output")
}

#[test]
fn jack_without_a_server_fails_at_once_saying_how_to_start_one() {
    let t0 = Instant::now();
    let out = xrunlab()
        .args([
            "run",
            "--device",
            "jack",
            "--jack-server",
            "xrl-cli-nobody",
            "--duration",
            "60s",
        ])
        .output()
        .expect("xrunlab runs");
    // "At once" against a 60 s run; the bound is loose because the other
    // tests of this binary start servers at the same time.
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "took {:?}",
        t0.elapsed()
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no JACK server is running"), "{stderr}");
    assert!(
        stderr.contains("jackd -n xrl-cli-nobody -d dummy"),
        "{stderr}"
    );
}

#[test]
fn a_killed_server_ends_the_run_non_zero_with_the_results_written() {
    let _turn = take_turn();
    let server = TestServer::start("xrl-cli-test", 128);
    let dir = scratch("killed");
    let (json, csv) = (dir.join("out.json"), dir.join("out.csv"));
    let child = xrunlab()
        .args([
            "run",
            "--device",
            "jack",
            "--jack-server",
            server.name(),
            "--duration",
            "20s",
            "-q",
        ])
        .arg("--json")
        .arg(&json)
        .arg("--csv")
        .arg(&csv)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("xrunlab runs");
    std::thread::sleep(Duration::from_millis(1_500));
    server.kill();
    let out = wait_bounded(child, Duration::from_secs(10));
    assert!(!out.status.success(), "a run whose server died must fail");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("shut down"), "{stderr}");

    let result: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("JSON written"))
            .expect("valid JSON");
    assert_eq!(result["end"]["ok"], false, "{}", result["end"]);
    assert!(result["end"]["reason"]
        .as_str()
        .unwrap_or("")
        .contains("shut down"));
    let buffers = result["summary"]["buffers"].as_u64().unwrap_or(0);
    // About 1.5 s at 375 buffers/s, minus start-up.
    assert!(buffers > 300, "{buffers} buffers in the JSON");
    let rows = std::fs::read_to_string(&csv)
        .expect("CSV written")
        .lines()
        .count() as u64
        - 1;
    assert_eq!(rows, buffers, "one CSV row per buffer in the JSON summary");
}

/// A private PipeWire daemon (no session manager, its dummy driver), killed when dropped.
struct PipeWire {
    runtime_dir: std::path::PathBuf,
    child: Child,
}

impl PipeWire {
    /// `None` when PipeWire and its JACK library are not installed.
    fn start() -> Option<PipeWire> {
        let installed = |tool: &str| {
            Command::new("sh")
                .args(["-c", &format!("command -v {tool}")])
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        if !installed("pipewire") || !installed("pw-jack") {
            return None;
        }
        let runtime_dir = scratch("pipewire-runtime");
        let child = Command::new("pipewire")
            .env("XDG_RUNTIME_DIR", &runtime_dir)
            .env("PIPEWIRE_QUANTUM", "128/48000")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("pipewire starts");
        let pw = PipeWire { runtime_dir, child };
        let t0 = Instant::now();
        while !pw.runtime_dir.join("pipewire-0").exists() {
            assert!(
                t0.elapsed() < Duration::from_secs(5),
                "pipewire not ready after 5 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(pw)
    }

    /// `xrunlab ARGS` through `pw-jack`, on this daemon.
    fn xrunlab(&self, args: &[&str]) -> Command {
        let mut c = Command::new("pw-jack");
        c.arg(env!("CARGO_BIN_EXE_xrunlab"))
            .args(args)
            .env("XDG_RUNTIME_DIR", &self.runtime_dir)
            .env("PIPEWIRE_QUANTUM", "128/48000");
        c
    }
}

impl Drop for PipeWire {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.runtime_dir);
    }
}

#[test]
#[ignore = "needs pipewire and pipewire-jack installed (test.sh installs them and runs it with --include-ignored)"]
fn pipewire_serves_the_jack_device_and_its_death_ends_the_run() {
    let _turn = take_turn();
    let pw = PipeWire::start()
        .expect("PipeWire is not installed: apt-get install pipewire pipewire-jack");
    let dir = scratch("pipewire");
    let json = dir.join("run.json");
    let out = pw
        .xrunlab(&[
            "run",
            "--device",
            "jack",
            "--duration",
            "2s",
            "-q",
            "--json",
        ])
        .arg(&json)
        .output()
        .expect("pw-jack xrunlab runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("JSON written"))
            .expect("valid JSON");
    assert_eq!(
        result["device"]["buffer_frames"], 128,
        "PIPEWIRE_QUANTUM=128/48000"
    );
    assert_eq!(result["device"]["sample_rate"], 48_000);
    let buffers = result["summary"]["buffers"].as_u64().unwrap_or(0);
    assert!(
        (700..=790).contains(&buffers),
        "{buffers} buffers in 2 s at 375/s"
    );

    // PipeWire's libjack does not report the daemon's death; the device's
    // watchdog ends the run when the callbacks stop.
    let child = pw
        .xrunlab(&[
            "run",
            "--device",
            "jack",
            "--duration",
            "20s",
            "-q",
            "--json",
        ])
        .arg(&json)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("pw-jack xrunlab runs");
    std::thread::sleep(Duration::from_millis(1_500));
    drop(pw);
    let out = wait_bounded(child, Duration::from_secs(10));
    assert!(!out.status.success(), "a run whose server died must fail");
    let result: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("JSON written"))
            .expect("valid JSON");
    assert!(
        result["end"]["reason"]
            .as_str()
            .unwrap_or("")
            .contains("stopped calling"),
        "{}",
        result["end"]
    );
    assert!(result["summary"]["buffers"].as_u64().unwrap_or(0) > 300);
}

#[test]
fn capacity_on_jack_asks_the_server_for_each_buffer_and_finds_a_clean_count() {
    let _turn = take_turn();
    let server = TestServer::start("xrl-cli-test", 128);
    let dir = scratch("capacity");
    let json = dir.join("c.json");
    let child = xrunlab()
        .args([
            "capacity",
            "--device",
            "jack",
            "--jack-server",
            server.name(),
            "--quick",
            "--buffers",
            "256",
            "--seconds",
            "300ms",
            "--repeats",
            "1",
            "--burst-load",
            "0",
            "--latency-sines",
            "50",
            "--json",
            json.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_bounded(child, Duration::from_secs(120));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(r["result"]["params"]["device"], "jack");
    let p = &r["result"]["points"][0];
    // The server started at 128 frames; every capacity trial ran at the 256 asked for.
    for t in p["trials"].as_array().unwrap() {
        assert_eq!(t["buffer"], 256, "{t}");
    }
    let sines = p["sines"].as_u64().unwrap();
    assert!(
        sines > 0 && sines < p["search_ceiling"].as_u64().unwrap(),
        "{p}"
    );
    // The LatencyMark's binary search asks for a different size each trial, starting at 256
    // frames; the server followed every request.
    let sizes: Vec<u64> = r["result"]["latency"][0]["trials"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["buffer"].as_u64().unwrap())
        .collect();
    assert_eq!(sizes.first(), Some(&256), "{sizes:?}");
    let mut distinct = sizes.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), sizes.len(), "{sizes:?}");
    assert!(sizes
        .iter()
        .all(|b| b.is_power_of_two() && (16..=4096).contains(b)));
}

#[test]
fn pinning_on_jack_pins_the_process_thread_apart_from_every_worker() {
    let _turn = take_turn();
    let server = TestServer::start("xrl-cli-pin", 256);
    let dir = scratch("pin");
    let json = dir.join("pin.json");
    let out = xrunlab()
        .args(["run", "--device", "jack", "--jack-server", server.name()])
        .args([
            "--pin",
            "--sines",
            "300",
            "--duration",
            "4s",
            "-q",
            "--json",
        ])
        .arg(&json)
        .output()
        .expect("xrunlab runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("JSON written")).expect("JSON");
    let threads = r["scheduling"]["threads"].as_array().expect("threads");
    let affinity = |t: &serde_json::Value| t["sched"]["affinity"].clone();
    let driver = threads
        .iter()
        .find(|t| t["index"] == 0)
        .expect("the driver's entry");
    assert_eq!(
        affinity(driver)["status"],
        "applied",
        "the driver (JACK's thread) is pinned: {}",
        affinity(driver)
    );
    let cpus_of = |t: &serde_json::Value| affinity(t)["detail"].as_str().unwrap_or("").to_owned();
    let driver_cpus = cpus_of(driver);
    assert!(!driver_cpus.is_empty(), "{driver}");
    let workers: Vec<&serde_json::Value> = threads.iter().filter(|t| t["index"] != 0).collect();
    assert!(
        !workers.is_empty(),
        "the standard preset has a worker on 2 CPUs"
    );
    for w in &workers {
        assert_eq!(affinity(w)["status"], "applied");
        assert_ne!(
            cpus_of(w),
            driver_cpus,
            "a worker shares the driver's CPU: {w}"
        );
    }
    // Each processing thread takes a real share of the 300 sines.
    for t in r["summary"]["threads"]
        .as_array()
        .expect("per-thread summary")
    {
        let share = t["share_pct"].as_f64().unwrap_or(0.0);
        assert!(share > 5.0, "a thread took {share} % of the work: {t}");
    }
}
