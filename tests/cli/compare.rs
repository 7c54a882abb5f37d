//! `xrunlab compare` on real run results: one run a side gets intervals but no verdict (a
//! slowed kernel cannot fail the gate), four runs a side of a kernel slowed 3x trip the gate,
//! the gate's names refused when they are no metric or a maximum, and bad files (other schema,
//! truncated, other units, other workload) refused with exit 2 naming the file and field.

use crate::{cpus_alone, run_ok, scratch, usage_error, xrunlab};
use std::path::{Path, PathBuf};
use xrunlab_engine::Scale;

/// Runs `xrunlab run` for 1 s with `extra` flags and returns its JSON file.
fn run_file(dir: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let path = dir.join(name);
    let args = [
        &["run", "--quiet", "--duration", "1s"][..],
        extra,
        &["--json", path.to_str().unwrap()],
    ]
    .concat();
    run_ok(&args);
    path
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn one_run_a_side_gets_intervals_but_no_verdict_and_never_fails_the_gate() {
    let dir = scratch("compare");
    let (a, b) = {
        let _cpus = cpus_alone();
        (
            // Enough sines that the kernel's work, not the cycle's fixed cost, is the load.
            run_file(&dir, "a.json", &["--sines", "300"]),
            run_file(
                &dir,
                "b.json",
                &["--sines", "300", "--kernel-slowdown", "4"],
            ),
        )
    };
    let out_json = dir.join("cmp.json");
    let out = xrunlab()
        .args([
            "compare",
            s(&a),
            "--vs",
            s(&b),
            "--force",
            "--fail-if-worse",
            "10",
        ])
        .args(["--json", s(&out_json)])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // One run a side cannot see how much runs differ: a 4x slower kernel shows in the
    // interval, but no verdict and no failing gate come from it.
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let load = stdout
        .lines()
        .find(|l| l.starts_with("load p50"))
        .unwrap_or_else(|| panic!("a load p50 line: {stdout}"));
    assert!(load.contains("not enough runs: 1 a side, need 3"), "{load}");
    assert!(
        !stdout.contains(" worse ") && !stdout.contains(" better "),
        "{stdout}"
    );
    assert!(
        stdout.contains("gate: load p50, load p99") && stdout.contains("not enough runs for"),
        "{stdout}"
    );
    assert!(stdout.contains("not judged (a maximum)"), "{stdout}");
    let r = crate::json(&out_json);
    assert_eq!(r["schema"], "xrunlab.compare/1");
    assert_eq!(r["metrics"][0]["verdict"], "not_enough_runs");
    assert_eq!(r["metrics"][0]["runs_needed"], 3);
    // The slower kernel shows in the interval, well clear of no change. Not "above +100 %":
    // beside the background compiles one run pair gave +129 % [+64, +142] %.
    assert!(
        r["metrics"][0]["interval_pct"][0].as_f64().unwrap() > 25.0,
        "{r}"
    );
    assert!(r["distributions"][0]["a"]["data"]
        .as_str()
        .unwrap()
        .starts_with("HISTF"));

    let out = xrunlab()
        .args(["compare", s(&a), "--vs", s(&a), "--fail-if-worse", "0"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        !stdout.contains(" worse ") && !stdout.contains(" better "),
        "{stdout}"
    );
    assert!(
        stdout.contains("nothing in the machine fingerprints"),
        "{stdout}"
    );
}

#[test]
fn four_runs_a_side_of_a_three_times_slower_kernel_trip_a_20_percent_gate() {
    // The case: with the exact rank test and Holm over twelve metrics this exited 0.
    let dir = scratch("compare-four");
    let (a, b): (Vec<PathBuf>, Vec<PathBuf>) = {
        let _cpus = cpus_alone();
        (1..=4)
            .map(|i| {
                (
                    run_file(&dir, &format!("a{i}.json"), &["--sines", "300"]),
                    run_file(
                        &dir,
                        &format!("b{i}.json"),
                        &["--sines", "300", "--kernel-slowdown", "3"],
                    ),
                )
            })
            .unzip()
    };
    let names = |v: &[PathBuf]| v.iter().map(|p| s(p).to_owned()).collect::<Vec<_>>();
    let out = xrunlab()
        .arg("compare")
        .args(names(&a))
        .arg("--vs")
        .args(names(&b))
        .args(["--force", "--fail-if-worse", "20"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stdout.contains("Welch's t-test on the logs"), "{stdout}");
    assert!(
        stdout.contains("(97.50 % intervals each, 95 % together): B worse on load p50"),
        "{stdout}"
    );
    assert!(
        stderr.contains("worse than A by more than 20 %") && stderr.contains("load p50"),
        "{stderr}"
    );
    // A gate of another metric judges that one alone; maxima and unknown names are refused.
    let out = xrunlab()
        .arg("compare")
        .args(names(&a))
        .arg("--vs")
        .args(names(&b))
        .args(["--force", "--gate", "driver_wake.p99"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("gate: driver wake-up p99 ("), "{stdout}");
    let load = stdout.lines().find(|l| l.starts_with("load p50")).unwrap();
    assert!(load.contains("not gated"), "{load}");
    let (a1, b1) = (s(&a[0]), s(&b[0]));
    usage_error(
        &["compare", a1, "--vs", b1, "--force", "--gate", "load.max"],
        &[
            "--gate load.max",
            "a maximum",
            "allowed: load.p50, load.p99",
        ],
    );
    usage_error(
        &[
            "compare",
            a1,
            "--vs",
            b1,
            "--force",
            "--gate",
            "load.p50,lod.p99",
        ],
        &["--gate lod.p99", "no such metric", "driver.wake.p99"],
    );
}

#[test]
fn compare_refuses_other_schemas_truncated_files_other_units_and_other_workloads() {
    let dir = scratch("compare-bad");
    let a = run_file(&dir, "a.json", &["--sines", "8"]);
    let other = run_file(&dir, "other.json", &["--sines", "16"]);
    let text = std::fs::read_to_string(&a).unwrap();
    let mut value: serde_json::Value = serde_json::from_str(&text).unwrap();

    let truncated = dir.join("truncated.json");
    std::fs::write(&truncated, &text[..text.len() / 2]).unwrap();
    usage_error(
        &["compare", s(&a), "--vs", s(&truncated)],
        &["truncated.json", "(file)", "ends early"],
    );

    let schema = dir.join("schema.json");
    value["schema"] = "xrunlab.lab/1".into();
    std::fs::write(&schema, value.to_string()).unwrap();
    usage_error(
        &["compare", s(&schema), "--vs", s(&a)],
        &["schema.json", "field schema", "xrunlab.run/2"],
    );

    let units = dir.join("units.json");
    value["schema"] = "xrunlab.run/2".into();
    value["histograms"]["load_pct"]["unit"] = "us".into();
    std::fs::write(&units, value.to_string()).unwrap();
    usage_error(
        &["compare", s(&a), "--vs", s(&units)],
        &["units.json", "histograms.load_pct", "expected percent"],
    );

    let missing = dir.join("missing.json");
    value.as_object_mut().unwrap().remove("fingerprint");
    std::fs::write(&missing, value.to_string()).unwrap();
    usage_error(
        &["compare", s(&a), "--vs", s(&missing)],
        &["missing.json", "fingerprint"],
    );

    usage_error(
        &["compare", s(&a), "--vs", s(&other)],
        &["different workloads", "sines: 8 vs 16", "--force"],
    );
    usage_error(
        &["compare", s(&a), "--vs", s(&a), "--fail-if-worse=-1"],
        &["--fail-if-worse", "0 or more"],
    );
}

/// Runs a short `probe wakeup` and returns its JSON file.
fn probe_file(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    run_ok(&[
        "probe",
        "wakeup",
        "--threads",
        "2",
        "--loops",
        "2000",
        "--interval",
        "200us",
        "--json",
        s(&path),
    ]);
    path
}

#[test]
fn compare_reads_probe_wakeup_results_and_refuses_a_mix_with_a_run() {
    let dir = scratch("compare-probe");
    let (a, b) = (probe_file(&dir, "a.json"), probe_file(&dir, "b.json"));
    // Each thread's latencies are kept whole, with the machine's fingerprint.
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&a).unwrap()).unwrap();
    assert!(written["result"]["fingerprint"]["kernel_release"].is_string());
    for t in written["result"]["threads"].as_array().unwrap() {
        let h: xrunlab_results::EncodedHistogram =
            serde_json::from_value(t["latency_us"].clone()).unwrap();
        let h = h.decode().unwrap();
        assert_eq!(h.len(), t["latency"]["count"].as_u64().unwrap());
        let max_us = h.max() as f64 / 1000.0;
        let exact = t["latency"]["max_us"].as_f64().unwrap();
        assert!(
            (max_us - exact).abs() <= exact * 0.001 + 0.001,
            "{max_us} vs {exact}"
        );
    }

    let out_json = dir.join("cmp.json");
    let out = run_ok(&["compare", s(&a), "--vs", s(&b), "--json", s(&out_json)]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("wake-up p99.9"), "{stdout}");
    let r: xrunlab_results::compare::CompareResult =
        xrunlab_results::read::read_typed(&out_json, xrunlab_results::compare::SCHEMA).unwrap();
    let names: Vec<&str> = r.metrics.iter().map(|m| m.metric.as_str()).collect();
    assert_eq!(
        names,
        ["wake-up p50", "wake-up p99", "wake-up p99.9", "wake-up max"]
    );
    for m in &r.metrics {
        assert_eq!((m.a.len(), m.b.len()), (1, 1), "{m:?}");
        assert!(m.a_median > 0.0 && m.b_median > 0.0, "{m:?}");
    }
    assert_eq!(r.distributions.len(), 1);
    let merged = r.distributions[0].a.decode().unwrap();
    assert_eq!(merged.len(), 4000, "both threads' 2000 wake-ups");
    assert!(r.fingerprint_diff.is_empty(), "{:?}", r.fingerprint_diff);

    let run = run_file(&dir, "run.json", &[]);
    usage_error(
        &["compare", s(&a), "--vs", s(&run)],
        &["run.json", "field schema", "not a mix"],
    );
}

/// Runs the quick `probe sleep` at 1 ms (10 points of 150 ms, about 150 wake-ups each) with
/// `extra` flags and returns its JSON file.
fn sleep_file(dir: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let path = dir.join(name);
    crate::sleep_probe(&path, extra);
    path
}

/// Within a histogram bucket (3 significant digits) of an exact figure, in µs.
fn near(hist_us: f64, exact_us: f64) -> bool {
    (hist_us - exact_us).abs() <= exact_us.abs() * 0.002 + 0.002
}

#[test]
fn compare_reads_experiment_results_typed_with_their_histograms_and_refuses_other_settings() {
    use xrunlab_results::experiment::{parse_experiment, ExperimentFile};

    let dir = scratch("compare-lab");
    let (a, b) = {
        let _cpus = crate::cpus_shared();
        (
            sleep_file(&dir, "a.json", &[]),
            sleep_file(&dir, "b.json", &[]),
        )
    };
    // The typed reader reads what the experiment wrote, and every point keeps its oversleep
    // whole: the histogram's median and maximum are the exact figures, within a bucket.
    let mut counts = Vec::new();
    for p in [&a, &b] {
        let text = std::fs::read_to_string(p).unwrap();
        let ExperimentFile::Sleep(r) = parse_experiment(p, &text).unwrap() else {
            panic!("{} reads as a probe sleep result", p.display())
        };
        assert_eq!(r.kind, "probe.sleep");
        assert_eq!(r.result.points.len(), 10, "5 calls x 2 slacks");
        let mut file_counts = Vec::new();
        for q in &r.result.points {
            let h = q.oversleep_us.decode_as(Scale::Micros).unwrap();
            assert!(h.len() >= 10, "a wake-up every ms for 150 ms: {}", h.len());
            let us = |v: u64| v as f64 / 1000.0;
            assert!(near(us(h.max()), q.oversleep_max_us), "{q:?}");
            assert!(
                near(us(h.value_at_quantile(0.5)), q.oversleep_p50_us),
                "{} vs {}",
                us(h.value_at_quantile(0.5)),
                q.oversleep_p50_us
            );
            file_counts.push(h.len());
        }
        counts.push(file_counts);
    }

    let out_json = dir.join("cmp.json");
    let out = run_ok(&["compare", s(&a), "--vs", s(&b), "--json", s(&out_json)]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("1000 us clock_nanosleep_abs slack 1 ns other-nice0 oversleep p99 (us)"),
        "{stdout}"
    );
    let r: xrunlab_results::compare::CompareResult =
        xrunlab_results::read::read_typed(&out_json, xrunlab_results::compare::SCHEMA).unwrap();
    assert_eq!(r.metrics.len(), 10 * 4, "p50, p99, max and CPU per point");
    assert!(r.metrics.iter().all(|m| !m.higher_is_better));
    // The points' distributions reach the compare result with the counts each side wrote.
    assert_eq!(r.distributions.len(), 10);
    for (i, d) in r.distributions.iter().enumerate() {
        assert!(d.name.ends_with("oversleep"), "{}", d.name);
        assert_eq!(d.a.decode().unwrap().len(), counts[0][i], "{}", d.name);
        assert_eq!(d.b.decode().unwrap().len(), counts[1][i], "{}", d.name);
    }

    // Other settings, another experiment: refused, naming what differs.
    let other = {
        let _cpus = crate::cpus_shared();
        sleep_file(&dir, "other.json", &["--intervals", "10ms"])
    };
    usage_error(
        &["compare", s(&a), "--vs", s(&other)],
        &["different workloads", "intervals", "--force"],
    );
    let placement = dir.join("placement.json");
    run_ok(&[
        "probe",
        "placement",
        "--quiet",
        "--threads",
        "2",
        "--work",
        "1000000",
        "--json",
        s(&placement),
    ]);
    usage_error(
        &["compare", s(&a), "--vs", s(&placement)],
        &["experiment: probe.sleep vs probe.placement"],
    );

    // Bad files: each exit 2, naming the file and the field.
    let text = std::fs::read_to_string(&a).unwrap();
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    let bad = |name: &str, edit: &dyn Fn(&mut serde_json::Value)| {
        let mut v = value.clone();
        edit(&mut v);
        let path = dir.join(name);
        std::fs::write(&path, v.to_string()).unwrap();
        path
    };
    let truncated = dir.join("truncated.json");
    std::fs::write(&truncated, &text[..text.len() / 2]).unwrap();
    usage_error(
        &["compare", s(&a), "--vs", s(&truncated)],
        &["truncated.json", "(file)", "ends early"],
    );
    let schema = bad("schema.json", &|v| v["schema"] = "xrunlab.lab/1".into());
    usage_error(
        &["compare", s(&a), "--vs", s(&schema)],
        &["schema.json", "field schema", "xrunlab.lab/2"],
    );
    let units = bad("units.json", &|v| {
        v["result"]["points"][0]["oversleep_us"]["unit"] = "percent".into()
    });
    usage_error(
        &["compare", s(&a), "--vs", s(&units)],
        &["units.json", "result.points[0].oversleep_us", "expected us"],
    );
    let missing = bad("missing.json", &|v| {
        v["result"]["points"][1]
            .as_object_mut()
            .unwrap()
            .remove("oversleep_us");
    });
    usage_error(
        &["compare", s(&a), "--vs", s(&missing)],
        &["missing.json", "result.points[1]", "oversleep_us"],
    );
    let kind = bad("kind.json", &|v| v["kind"] = "probe.unknown".into());
    usage_error(
        &["compare", s(&a), "--vs", s(&kind)],
        &["kind.json", "field kind", "probe.unknown"],
    );
}

/// Runs the smallest capacity search that still finds a count, 200 ms a trial, with `extra`
/// flags; a few seconds.
fn capacity_file(dir: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let path = dir.join(name);
    crate::small_capacity(&path, "200ms", &[&["--quiet"][..], extra].concat());
    path
}

#[test]
fn compare_judges_capacity_higher_is_better_with_the_repeats_histograms() {
    use xrunlab_results::experiment::{parse_experiment, ExperimentFile};

    let dir = scratch("compare-capacity");
    let (a, b) = {
        let _cpus = cpus_alone();
        (
            capacity_file(&dir, "a.json", &[]),
            capacity_file(&dir, "b.json", &["--kernel-slowdown", "3"]),
        )
    };
    for p in [&a, &b] {
        let text = std::fs::read_to_string(p).unwrap();
        let ExperimentFile::Capacity(r) = parse_experiment(p, &text).unwrap() else {
            panic!("{} reads as a capacity result", p.display())
        };
        let point = &r.result.points[0];
        let h = point
            .histograms
            .as_ref()
            .expect("a confirmed count keeps its buffers");
        let load = h.load_pct.decode_as(Scale::Percent).unwrap();
        let judged: u64 = point.repeats.iter().map(|t| t.buffers).sum();
        assert_eq!(load.len(), judged, "every judged buffer of the repeats");
        let max = point
            .repeats
            .iter()
            .map(|t| t.max_load_pct)
            .fold(0.0, f64::max);
        assert!(
            near(load.max() as f64 / 1000.0, max),
            "{} vs {max}",
            load.max()
        );
    }
    // The slowed kernel is another setting: refused without --force, naming it.
    usage_error(
        &["compare", s(&a), "--vs", s(&b)],
        &["kernel_slowdown", "--force"],
    );
    let out_json = dir.join("cmp.json");
    let out = xrunlab()
        .args(["compare", s(&a), "--vs", s(&b), "--force"])
        .args(["--json", s(&out_json)])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("↑: higher is better"), "{stdout}");
    let r: xrunlab_results::compare::CompareResult =
        xrunlab_results::read::read_typed(&out_json, xrunlab_results::compare::SCHEMA).unwrap();
    let cap = r
        .metrics
        .iter()
        .find(|m| m.metric == "standard 2048 frames capacity")
        .unwrap_or_else(|| panic!("a capacity row: {stdout}"));
    assert!(cap.higher_is_better);
    assert!(
        cap.b_median < cap.a_median,
        "a kernel 3x as costly carries fewer sines: {cap:?}"
    );
    let load = r
        .metrics
        .iter()
        .find(|m| m.metric == "standard 2048 frames at capacity load p50")
        .unwrap_or_else(|| panic!("the repeats' load: {stdout}"));
    assert!(!load.higher_is_better);
    assert!(r
        .distributions
        .iter()
        .any(|d| d.name == "standard 2048 frames at capacity load"));
}

/// Runs `xrunlab args` and returns its output, failing the test (and killing the child) if it
/// has not ended within a minute: far longer than any of these takes, far shorter than the
/// hangs they guard against (a FIFO read forever, a count summed one by one).
fn ends_within_a_minute(args: &[&str]) -> std::process::Output {
    use std::process::Stdio;
    let mut child = xrunlab()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > std::time::Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("xrunlab {args:?} still running after a minute");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn compare_and_report_refuse_hostile_files_without_crashing_hanging_or_eating_memory() {
    let dir = scratch("compare-hostile");
    let a = run_file(&dir, "a.json", &["--sines", "8"]);
    let value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&a).unwrap()).unwrap();
    let forge = |name: &str, edit: &dyn Fn(&mut serde_json::Value)| {
        let mut v = value.clone();
        edit(&mut v);
        let p = dir.join(name);
        std::fs::write(&p, v.to_string()).unwrap();
        p
    };

    // 40 bytes whose header asks for a 4 GiB payload.
    let huge = forge("huge.json", &|v| {
        v["histograms"]["load_pct"]["data"] =
            "HISTE/////8AAAAAAAAAAQAAAAAAAAABAAAAAAAAAAI/8AAAAAAAAA==".into();
    });
    usage_error(
        &["compare", s(&a), "--vs", s(&huge)],
        &[
            "huge.json",
            "histograms.load_pct",
            "payload length is 4294967295",
        ],
    );

    // Another tool's bounds (1..2 at 1 digit): re-scaled, not a panic.
    let odd = forge("odd.json", &|v| {
        v["histograms"]["driver_wake_latency_us"]["data"] =
            "HISTEwAAAAAAAAAAAAAAAQAAAAAAAAABAAAAAAAAAAI/8AAAAAAAAA==".into();
    });
    let out = ends_within_a_minute(&["compare", s(&odd), s(&a), "--vs", s(&a)]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");

    // A trillion dropouts: the rate test in closed form, not a loop over the count.
    let many = forge("many.json", &|v| {
        v["summary"]["dropouts"] = 1_000_000_000_000u64.into();
    });
    let out = ends_within_a_minute(&["compare", s(&a), "--vs", s(&many)]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("dropouts per hour"), "{stdout}");

    // A FIFO would wait for a writer forever; /dev/zero never ends.
    let fifo = dir.join("fifo.json");
    let c = std::ffi::CString::new(s(&fifo)).unwrap();
    // SAFETY: a valid NUL-terminated path; mkfifo only creates the node.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let report = dir.join("report.html");
    for (args, what) in [
        (vec!["compare", s(&a), "--vs", s(&fifo)], "is a FIFO"),
        (
            vec!["compare", "/dev/zero", "--vs", s(&a)],
            "is a character device",
        ),
        (vec!["report", s(&fifo), "--out", s(&report)], "is a FIFO"),
        (
            vec!["report", "/dev/zero", "--out", s(&report)],
            "is a character device",
        ),
    ] {
        let out = ends_within_a_minute(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(what), "{args:?}: {stderr}");
        assert!(stderr.contains("not a regular file"), "{args:?}: {stderr}");
    }
}
