//! `xrunlab compare` on real run results: a slowed kernel found worse (and the gate exits 1),
//! a file against itself shows no difference (the gate passes), and bad files (other schema,
//! truncated, other units, other workload) refused with exit 2 naming the file and field.

use crate::{cpus_alone, run_ok, scratch, usage_error, xrunlab};
use std::path::{Path, PathBuf};

/// Runs `xrunlab run` for 1 s with `extra` flags and returns its JSON file.
/// A 4 s run: one run a side is judged by a block bootstrap over 32-buffer blocks, and the
/// gate holds 95 % over the whole table (Holm), so a single pair of runs needs enough blocks
/// (about 45 here; 11 in 1 s) for a real difference to clear it.
fn run_file(dir: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let path = dir.join(name);
    let args = [
        &["run", "--quiet", "--duration", "4s"][..],
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
fn compare_finds_a_slowed_kernel_worse_and_a_file_against_itself_no_different() {
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
    assert_eq!(
        out.status.code(),
        Some(1),
        "the gate fails: {stdout}\n{stderr}"
    );
    let load = stdout
        .lines()
        .find(|l| l.starts_with("load p50"))
        .unwrap_or_else(|| panic!("a load p50 line: {stdout}"));
    assert!(load.contains("worse"), "{load}");
    assert!(
        stdout.contains("weak evidence"),
        "one run a side is said to be weak: {stdout}"
    );
    assert!(
        stderr.contains("load p50"),
        "the gate names the metric: {stderr}"
    );
    let r = crate::json(&out_json);
    assert_eq!(r["schema"], "xrunlab.compare/1");
    assert_eq!(r["metrics"][0]["verdict"], "worse");
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
