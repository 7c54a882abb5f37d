//! Nothing measured is lost when a run ends badly: SIGTERM and SIGHUP end `run`, `render` and the
//! dashboard cleanly; `kill -9` leaves a checkpoint and never destroys an earlier result; result
//! paths are checked before a run starts.

use crate::child::{kill_9, piped, spawn_dashboard, spawn_long_run, stop_ok};
use crate::{cpus_shared, json, partials, run_json, run_json_csv, run_ok, scratch, xrunlab};
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

/// Starts an hour-long render into `wav` with `extra` flags: one SCHED_OTHER thread, about 10x
/// real time on this machine, without starving the tests that run beside it.
fn spawn_long_render(wav: &Path, extra: &[&str]) -> Child {
    piped(
        xrunlab()
            .args(["render", "--duration", "3600s", "--sines", "300"])
            .args(["--threads", "1", "--no-rt", "--out"])
            .arg(wav)
            .args(extra),
    )
}

/// Checks that every row of a CSV has the header's column count; returns the data rows.
fn csv_rows(path: &Path) -> usize {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let columns = lines.next().expect("a header").split(',').count();
    let mut rows = 0;
    for (i, line) in lines.enumerate() {
        assert_eq!(
            line.split(',').count(),
            columns,
            "{} row {i} has the header's columns: {line}",
            path.display()
        );
        rows += 1;
    }
    assert!(text.ends_with('\n'), "the last row is complete");
    rows
}

#[test]
fn sigterm_and_sighup_end_a_run_cleanly_and_keep_both_files() {
    let _cpus = cpus_shared();
    for (sig, name) in [(libc::SIGTERM, "SIGTERM"), (libc::SIGHUP, "SIGHUP")] {
        let dir = scratch(&format!("signal-{name}"));
        let (j, c) = (dir.join("r.json"), dir.join("r.csv"));
        let child = spawn_long_run(&j, &c);
        std::thread::sleep(Duration::from_millis(1500));
        let out = stop_ok(child, sig, Duration::from_secs(20));
        let r = json(&j);
        let reason = r["end"]["reason"].as_str().unwrap();
        assert!(
            reason.contains(&format!("interrupted by {name} after")) && reason.contains("kept"),
            "{name}: {reason}"
        );
        assert_eq!(r["end"]["checkpoint"], false);
        let buffers = r["summary"]["buffers"].as_u64().unwrap();
        assert!(
            buffers > 200,
            "{name}: buffers before the signal: {buffers}"
        );
        assert_eq!(
            csv_rows(&c) as u64,
            buffers,
            "{name}: one CSV row per buffer"
        );
        assert!(
            partials(&dir).is_empty(),
            "{name}: the in-progress CSV was renamed into place"
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("interrupted by {name}")));
    }
}

#[test]
fn kill_9_during_a_long_run_leaves_a_valid_checkpoint_and_the_rows() {
    let _cpus = cpus_shared();
    let dir = scratch("kill9-checkpoint");
    let (j, c) = (dir.join("r.json"), dir.join("r.csv"));
    let child = spawn_long_run(&j, &c);
    let t0 = Instant::now();
    // The first checkpoint is due 10 s after the engine started; kill a little after it.
    while !j.exists() && t0.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(j.exists(), "a checkpoint appeared within 30 s");
    std::thread::sleep(Duration::from_millis(2500));
    kill_9(child);
    let r = json(&j);
    let reason = r["end"]["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("checkpoint at 10.") && reason.contains("still going"),
        "{reason}"
    );
    assert_eq!(r["end"]["checkpoint"], true);
    assert!(r["provenance"]["end_time"].is_string());
    let buffers = r["summary"]["buffers"].as_u64().unwrap();
    // 10 s at 375 buffers per second, less the start-up.
    assert!(
        buffers > 3000,
        "the checkpoint holds 10 s of buffers: {buffers}"
    );
    assert!(
        !c.exists(),
        "the CSV is renamed into place only when a run ends"
    );
    let partial = partials(&dir);
    assert_eq!(partial.len(), 1, "one in-progress CSV: {partial:?}");
    assert!(
        reason.contains(&partial[0].display().to_string()),
        "the checkpoint names the in-progress CSV: {reason}"
    );
    let rows = csv_rows(&partial[0]) as u64;
    assert!(
        rows >= buffers,
        "the in-progress CSV, flushed every second, holds at least the checkpoint's {buffers} buffers: {rows}"
    );
}

#[test]
fn kill_9_before_the_first_checkpoint_leaves_the_previous_files_intact() {
    let _cpus = cpus_shared();
    let dir = scratch("kill9-early");
    let (j, c) = (dir.join("r.json"), dir.join("r.csv"));
    let old_json = "{\"earlier\": \"run\"}\n";
    let old_csv = "epoch,seq\n0,0\n";
    std::fs::write(&j, old_json).unwrap();
    std::fs::write(&c, old_csv).unwrap();
    let child = spawn_long_run(&j, &c);
    std::thread::sleep(Duration::from_millis(2500));
    kill_9(child);
    assert_eq!(std::fs::read_to_string(&j).unwrap(), old_json);
    assert_eq!(
        json(&j)["earlier"],
        "run",
        "the earlier JSON is still valid"
    );
    assert_eq!(std::fs::read_to_string(&c).unwrap(), old_csv);
    let partial = partials(&dir);
    assert_eq!(partial.len(), 1, "{partial:?}");
    assert!(
        csv_rows(&partial[0]) > 300,
        "the killed run's rows up to about a second ago are kept beside the earlier CSV"
    );
}

#[test]
fn result_paths_in_a_missing_directory_fail_before_the_run_starts() {
    for flag in ["--json", "--csv"] {
        let t0 = Instant::now();
        let out = xrunlab()
            .args([
                "run",
                "--duration",
                "30s",
                flag,
                "/nonexistent-xrunlab-dir/r.out",
            ])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag}: {stderr}");
        assert!(
            stderr.contains(flag)
                && stderr.contains("/nonexistent-xrunlab-dir/r.out")
                && stderr.contains("the directory /nonexistent-xrunlab-dir does not exist"),
            "{flag}: {stderr}"
        );
        assert!(out.stdout.is_empty(), "no run happened");
        assert!(t0.elapsed() < Duration::from_secs(10), "it failed at once");
    }
}

#[test]
fn sigterm_ends_a_render_cleanly_with_a_readable_wav() {
    let _cpus = cpus_shared();
    let dir = scratch("render-sigterm");
    let (wav, j) = (dir.join("chord.wav"), dir.join("r.json"));
    let child = spawn_long_render(&wav, &["--json", j.to_str().unwrap()]);
    std::thread::sleep(Duration::from_millis(1500));
    stop_ok(child, libc::SIGTERM, Duration::from_secs(30));
    let reason = json(&j)["end"]["reason"].as_str().unwrap().to_owned();
    assert!(reason.contains("interrupted by SIGTERM"), "{reason}");
    let reader = hound::WavReader::open(&wav).unwrap();
    assert!(reader.len() > 0, "the WAV holds what was rendered");
    assert!(
        u64::from(reader.duration()) < 3600 * 48_000,
        "the render was cut short"
    );
}

#[test]
fn kill_9_during_a_render_keeps_the_earlier_wav_and_a_readable_partial_one() {
    let _cpus = cpus_shared();
    let dir = scratch("render-kill9");
    let wav = dir.join("chord.wav");
    std::fs::write(&wav, b"an earlier render").unwrap();
    let child = spawn_long_render(&wav, &[]);
    std::thread::sleep(Duration::from_millis(2500));
    kill_9(child);
    assert_eq!(std::fs::read(&wav).unwrap(), b"an earlier render");
    let partial = partials(&dir);
    assert_eq!(partial.len(), 1, "{partial:?}");
    // The header is brought up to date every second: the samples up to then read back.
    let reader = hound::WavReader::open(&partial[0]).unwrap();
    assert!(
        reader.duration() > 0,
        "the partial WAV holds what was rendered until the last second"
    );
}

#[test]
fn the_dashboard_stops_cleanly_on_sigterm_and_sighup() {
    let _cpus = cpus_shared();
    for (sig, name) in [(libc::SIGTERM, "SIGTERM"), (libc::SIGHUP, "SIGHUP")] {
        let (child, url) = spawn_dashboard(&[]);
        assert!(url.starts_with("http://127.0.0.1:"), "{name}: {url}");
        let out = stop_ok(child, sig, Duration::from_secs(20));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(&format!("{name} received")), "{stderr}");
    }
}

#[test]
fn the_driver_spin_is_a_setting_reported_in_the_results() {
    let _cpus = cpus_shared();
    let (stdout, r) = run_json("spin", &["--duration", "300ms", "--driver-spin", "100"]);
    assert!(
        stdout.contains("driver spin before sleeping: 100 µs"),
        "{stdout}"
    );
    assert_eq!(r["config"]["driver_spin_us"], 100);
    assert_eq!(r["preset"], "custom", "a spin is no preset's");
    let out = run_ok(&[
        "run",
        "--duration",
        "300ms",
        "--quiet",
        "--preset",
        "optimal",
    ]);
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("driver spin before sleeping: 0 µs (AudioPerfLab blocks at once)"),
        "presets block at once"
    );
}

#[test]
fn a_hung_worker_shows_as_incomplete_renders_naming_it() {
    let _cpus = cpus_shared();
    let (stdout, r, csv) = run_json_csv(
        "hang",
        &[
            "--duration",
            "2s",
            "--threads",
            "3",
            "--sines",
            "300",
            "--chunk-size",
            "16",
            "--hang-worker",
            "2",
            "--hang",
            "40ms",
            "--hang-every",
            "500ms",
        ],
    );
    assert!(stdout.contains("incomplete worker 2:"), "{stdout}");
    let incomplete = r["summary"]["incomplete_renders"].as_u64().unwrap();
    assert!(
        incomplete >= 10,
        "3 hangs of 40 ms make incomplete renders: {incomplete}"
    );
    let worker2 = r["summary"]["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["index"] == 2)
        .unwrap();
    // A loaded machine may keep another worker off its CPU past the wait limit too:
    // that buffer is incomplete and names it, rightly. Worker 2 is named in most.
    let unfinished2 = worker2["unfinished_buffers"].as_u64().unwrap();
    assert!(
        unfinished2 >= 10 && unfinished2 <= incomplete,
        "worker 2 unfinished in {unfinished2} of {incomplete} incomplete renders"
    );
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let col = header
        .iter()
        .position(|h| *h == "unfinished_threads")
        .unwrap();
    let named = csv
        .lines()
        .skip(1)
        .filter(|l| {
            l.split(',')
                .nth(col)
                .is_some_and(|f| f.split(';').any(|t| t == "2"))
        })
        .count() as u64;
    assert_eq!(
        named, unfinished2,
        "the CSV names worker 2 in each buffer the summary counts for it"
    );
    assert!(r["events"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["kind"] == "worker_hang"));
}
