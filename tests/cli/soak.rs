//! `xrunlab bench soak`: a short soak on each path samples resident memory at the start, every
//! period and the end, writes its JSON, removes its temporary CSV, and refuses bad flags with exit
//! code 2.

use crate::child::{spawn, stop_ok};
use crate::{cpus_shared, json, run_ok, scratch, usage_error};
use std::time::Duration;

/// Samples are at the start, after each period and at the end, in order, each with an RSS.
fn check_samples(r: &serde_json::Value, periods: usize) -> &Vec<serde_json::Value> {
    let samples = r["samples"].as_array().unwrap();
    assert!(
        samples.len() >= periods + 2,
        "start, {periods} periodic and end samples: {samples:?}"
    );
    let mut last_t = -1.0;
    for s in samples {
        let t = s["t_s"].as_f64().unwrap();
        assert!(t > last_t, "samples in time order: {samples:?}");
        last_t = t;
        // Any process with a tokio runtime, an engine and its rings holds megabytes.
        assert!(s["rss_bytes"].as_u64().unwrap() > 1_000_000, "{s}");
    }
    assert!(r["growth_bytes"].is_i64(), "{r}");
    assert_eq!(r["target_growth_bytes"], 2_000_000);
    assert_eq!(r["complete"], true, "{r}");
    assert_eq!(r["end"], "duration reached");
    samples
}

/// A 3 s soak sampled every second, with `flag` (`--csv` or `--dashboard`); its standard output
/// and JSON.
fn short_soak(name: &str, flag: &str) -> (String, serde_json::Value) {
    let j = scratch(name).join("soak.json");
    let out = run_ok(&[
        "bench",
        "soak",
        "--duration",
        "3s",
        "--sample-every",
        "1s",
        flag,
        "--json",
        j.to_str().unwrap(),
    ]);
    (String::from_utf8_lossy(&out.stdout).into_owned(), json(&j))
}

/// The CSV rows went to a temporary file (named on the summary's `csv:` line) that is gone now.
fn assert_csv_removed(stdout: &str) {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("csv:"))
        .unwrap_or_else(|| panic!("no csv: line in {stdout}"));
    let path = line.split(" written to ").nth(1).unwrap();
    let path = path.split(" (removed").next().unwrap();
    assert!(
        !std::path::Path::new(path).exists(),
        "{path} should be removed"
    );
}

#[test]
fn a_short_soak_on_the_run_path_samples_memory_and_removes_its_csv() {
    let _cpus = cpus_shared();
    let (stdout, r) = short_soak("soak-run", "--csv");
    assert!(stdout.contains("RSS MB"), "{stdout}");
    assert!(stdout.contains("target under 2 MB"), "{stdout}");
    assert_eq!(r["schema"], "xrunlab.soak/1");
    assert_eq!(r["path"], "run");
    assert_eq!(r["config"]["buffer_frames"], 32, "32 frames by default");
    assert!(
        r["provenance"]["end_time"].is_string(),
        "{}",
        r["provenance"]
    );
    let samples = check_samples(&r, 2);
    // 3 s at 32 frames and 48 kHz is 4500 buffers; the summary counts all of them that arrived.
    let buffers = r["summary"]["buffers"].as_u64().unwrap();
    assert!(buffers > 1000, "{buffers}");
    let last = samples.last().unwrap()["count"].as_u64().unwrap();
    assert!(last <= buffers && last > 1000, "{last} of {buffers}");
    assert!(
        r["summary"]["load_pct"]["p999"].is_f64(),
        "{}",
        r["summary"]
    );
    assert_csv_removed(&stdout);
    // The same file read back as its type.
    let path = std::env::temp_dir()
        .join(format!("xrunlab-cli-soak-run-{}", std::process::id()))
        .join("soak.json");
    let typed: xrunlab_results::soak::SoakResult =
        xrunlab_results::read::read_typed(&path, xrunlab_results::soak::SCHEMA).unwrap();
    assert!(typed.complete, "{}", typed.end);
    assert_eq!(typed.summary.map(|s| s.buffers), Some(buffers));
    assert_eq!(typed.samples.len(), samples.len());
}

// The reader is a test client, built in only with the `soak-client` feature (test.sh has it).
#[cfg(feature = "soak-client")]
#[test]
fn a_short_soak_on_the_dashboard_path_reads_frames_over_a_websocket() {
    let _cpus = cpus_shared();
    let (stdout, r) = short_soak("soak-dash", "--dashboard");
    assert!(stdout.contains("WebSocket reader received"), "{stdout}");
    assert_eq!(r["path"], "dashboard");
    check_samples(&r, 2);
    // About 30 frames a second; a loaded machine may publish fewer, never none.
    let frames = r["frames_received"].as_u64().unwrap();
    assert!(frames >= 10, "{frames} frames read in 3 s");
    assert!(r["summary"].is_null());
}

#[cfg(not(feature = "soak-client"))]
#[test]
fn without_the_soak_client_feature_the_dashboard_path_is_a_usage_error_naming_it() {
    usage_error(
        &["bench", "soak", "--duration", "1s", "--dashboard"],
        &["--dashboard", "`soak-client` feature", "cargo build"],
    );
}

#[test]
fn bad_soak_flags_are_usage_errors() {
    let cases: &[(&[&str], &str)] = &[
        (&["bench", "soak", "--duration", "0s"], "--duration"),
        (
            &["bench", "soak", "--sample-every", "soon"],
            "--sample-every",
        ),
        (&["bench", "soak", "--buffer", "15"], "--buffer"),
        (&["bench", "soak", "--csv", "--dashboard"], "--dashboard"),
    ];
    for (args, flag) in cases {
        usage_error(args, &[flag]);
    }
}

#[test]
fn sigterm_ends_a_soak_early_with_its_samples_and_without_its_csv() {
    let _cpus = cpus_shared();
    let dir = scratch("soak-term");
    let j = dir.join("soak.json");
    let child = spawn(&[
        "bench",
        "soak",
        "--duration",
        "10m",
        "--sample-every",
        "1s",
        "--csv",
        "--json",
        j.to_str().unwrap(),
    ]);
    std::thread::sleep(Duration::from_millis(2500));
    let out = stop_ok(child, libc::SIGTERM, Duration::from_secs(30));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let r = json(&j);
    assert_eq!(r["complete"], false, "{r}");
    assert!(r["end"].as_str().unwrap().contains("interrupted"), "{r}");
    // The start sample, about two periodic ones and the one at the end.
    assert!(r["samples"].as_array().unwrap().len() >= 3, "{r}");
    assert!(r["summary"]["buffers"].as_u64().unwrap() > 500, "{r}");
    assert_csv_removed(&stdout);
}
