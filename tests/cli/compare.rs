//! `xrunlab compare` on real run results: a slowed kernel found worse (and the gate exits 1),
//! a file against itself shows no difference (the gate passes), and bad files (other schema,
//! truncated, other units, other workload) refused with exit 2 naming the file and field.

use crate::{cpus_alone, run_ok, scratch, usage_error, xrunlab};
use std::path::{Path, PathBuf};

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
fn compare_finds_a_slowed_kernel_worse_and_a_file_against_itself_no_different() {
    let dir = scratch("compare");
    let (a, b) = {
        let _cpus = cpus_alone();
        (
            run_file(&dir, "a.json", &[]),
            run_file(&dir, "b.json", &["--kernel-slowdown", "4"]),
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
