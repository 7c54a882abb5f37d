//! `xrunlab doctor` as a user runs it: the report and its JSON on this machine, the system facts a
//! run's JSON carries, `--measure --quick` with a verdict for every toggle, `--apply` on fixture
//! trees (undone at exit and on SIGTERM, kept with --keep, refused without cpufreq), and bad input.

use crate::child::{piped, signal, wait_within};
use crate::{json, run_json, scratch, usage_error, xrunlab};
use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

const STATUSES: [&str; 4] = ["pass", "warn", "fail", "unknown"];

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Exit status 0 when nothing fails, 1 otherwise: checked against the report itself.
fn check_exit_matches(out: &Output, fails: usize) {
    let expected = if fails == 0 { 0 } else { 1 };
    assert_eq!(
        out.status.code(),
        Some(expected),
        "{fails} failing finding(s): {:?}",
        text(out)
    );
}

#[test]
fn the_report_on_this_machine() {
    let out = xrunlab().arg("doctor").output().unwrap();
    let (stdout, stderr) = text(&out);
    for heading in [
        "Real-time scheduling",
        "Kernel",
        "CPU and power",
        "Memory, mitigations, uclamp",
        "Interrupts",
        "Audio servers",
        "Tracing",
    ] {
        assert!(
            stdout.contains(&format!("\n{heading}\n")),
            "heading {heading}: {stdout}"
        );
    }
    for id in [
        "rt.fifo",
        "kernel.preempt",
        "cpu.governor",
        "cpu.idle_states",
        "irq.shared",
        "audio.pipewire",
        "trace.tracefs",
    ] {
        assert!(stdout.contains(&format!("({id})")), "{id} in the report");
    }
    assert!(
        stdout.contains("fix:  ") || !stdout.contains("[warn"),
        "warnings carry fixes"
    );
    let fails = stdout.matches("[FAIL   ]").count();
    check_exit_matches(&out, fails);
    if fails > 0 {
        assert!(stderr.contains("check(s) failed"), "{stderr}");
    }
}

#[test]
fn json_on_standard_output() {
    let out = xrunlab().args(["doctor", "--json", "-"]).output().unwrap();
    let (stdout, stderr) = text(&out);
    let v: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("stdout is JSON only ({e}): {stdout}"));
    assert_eq!(v["schema"], "xrunlab.doctor/1");
    assert_eq!(v["provenance"]["tool"], "xrunlab");
    assert!(v["provenance"]["end_time"].is_string());
    assert!(
        stderr.contains("(rt.fifo)"),
        "the text report goes to stderr"
    );
    let findings = v["report"]["findings"].as_array().unwrap();
    assert!(findings.len() >= 30);
    let mut fails = 0;
    for f in findings {
        let status = f["status"].as_str().unwrap();
        assert!(STATUSES.contains(&status), "{f}");
        fails += usize::from(status == "fail");
        for field in ["id", "area", "title", "reason", "source"] {
            assert!(
                !f[field].as_str().unwrap_or("").is_empty(),
                "{field} in {f}"
            );
        }
    }
    assert_eq!(v["report"]["counts"]["fail"], fails);
    assert_eq!(v["exit_status"], u64::from(fails > 0));
    check_exit_matches(&out, fails);
    // The machine facts the report read: the SCHED_FIFO probe really ran here.
    assert!(!v["report"]["probes"]["fifo_attempts"]
        .as_array()
        .unwrap()
        .is_empty());
}

#[test]
fn measure_quick_gives_every_toggle_a_verdict() {
    let dir = scratch("doctor-measure");
    let path = dir.join("doctor.json");
    let t0 = Instant::now();
    let out = xrunlab()
        .args(["doctor", "--measure", "--quick", "--json"])
        .arg(&path)
        .output()
        .unwrap();
    let took = t0.elapsed();
    let (stdout, _) = text(&out);
    let v = json(&path);
    check_exit_matches(
        &out,
        v["report"]["counts"]["fail"].as_u64().unwrap() as usize,
    );
    let m = &v["measure"];
    assert_eq!(m["repeats"], 2);
    assert_eq!(m["interrupted"], serde_json::Value::Null);
    let toggles = m["toggles"].as_array().unwrap();
    let names: Vec<&str> = toggles
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "PM QoS",
            "mlockall",
            "SCHED_FIFO",
            "pinning",
            "busy threads",
            "minimum load"
        ]
    );
    for t in toggles {
        let verdict = t["verdict"].as_str().unwrap();
        assert!(
            ["helps", "no_effect_measurable", "hurts", "not_applied"].contains(&verdict),
            "{t}"
        );
        if verdict != "not_applied" {
            for metric in t["metrics"].as_array().unwrap() {
                assert_eq!(metric["off"]["values"].as_array().unwrap().len(), 2, "{t}");
                assert_eq!(metric["on"]["values"].as_array().unwrap().len(), 2, "{t}");
            }
        }
        // The table row names the toggle and its verdict in words.
        let label = verdict.replace('_', " ");
        assert!(
            stdout.contains(&format!("| {} | off |", t["name"].as_str().unwrap())),
            "{stdout}"
        );
        assert!(stdout.contains(&label), "{label} in {stdout}");
    }
    assert!(
        stdout.contains("within the spread of repeats"),
        "the rule is printed"
    );
    // The same file read back as its type: the report, the measure result, provenance.
    let typed = xrunlab_results::doctor::read_doctor(&path).unwrap();
    assert_eq!(typed.schema, xrunlab_results::doctor::SCHEMA);
    assert!(typed.provenance.end_time.is_some());
    assert_eq!(typed.report.failed(), typed.report.counts.fail > 0);
    assert_eq!(
        typed.report.findings.len(),
        v["report"]["findings"].as_array().unwrap().len()
    );
    let measured = typed.measure.expect("--measure's result");
    assert_eq!(measured.toggles.len(), 6);
    assert_eq!(measured.toggles[0].name, "PM QoS");
    assert!(typed.applied.is_none());
    eprintln!("doctor --measure --quick took {took:?}");
}

/// A fixture machine for --apply: 2 CPUs with cpufreq (powersave), RT throttling at 95 %.
fn fixture(name: &str, cpufreq: bool) -> std::path::PathBuf {
    let dir = scratch(name);
    let write = |rel: &str, text: &str| {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    write("sys/devices/system/cpu/online", "0-1\n");
    write("proc/sys/kernel/sched_rt_runtime_us", "950000\n");
    write("proc/sys/kernel/sched_rt_period_us", "1000000\n");
    write("fs/etc/group", "audio:x:29:\n");
    if cpufreq {
        for cpu in 0..2 {
            write(
                &format!("sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor"),
                "powersave\n",
            );
        }
    }
    dir
}

fn doctor_on(dir: &Path) -> std::process::Command {
    let mut c = xrunlab();
    c.arg("doctor")
        .arg("--proc-root")
        .arg(dir.join("proc"))
        .arg("--sys-root")
        .arg(dir.join("sys"))
        .arg("--fs-root")
        .arg(dir.join("fs"));
    c
}

fn governor(dir: &Path, cpu: usize) -> String {
    std::fs::read_to_string(dir.join(format!(
        "sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor"
    )))
    .unwrap()
    .trim()
    .to_owned()
}

#[test]
fn apply_governor_is_undone_at_exit_or_kept() {
    let dir = fixture("doctor-apply", true);
    let out = doctor_on(&dir)
        .args(["--apply", "governor", "--json", "-"])
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("applied governor")
            && stderr.contains("undo by hand: echo powersave | sudo tee "),
        "{stderr}"
    );
    assert!(
        stderr.contains("(reading proc from "),
        "the report says it read fixture trees"
    );
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    // Read back as its type too, applied setting and all.
    let typed: xrunlab_results::doctor::DoctorResult = xrunlab_results::read::parse_typed(
        Path::new("-"),
        &stdout,
        xrunlab_results::doctor::SCHEMA,
    )
    .unwrap();
    let applied = typed.applied.expect("--apply's record");
    assert_eq!(
        (applied.setting.as_str(), applied.end.as_str()),
        ("governor", "undone on exit")
    );
    assert_eq!(applied.changes[1].new, "performance");
    assert!(typed.report.roots.proc.starts_with(&dir));
    assert_eq!(v["applied"]["setting"], "governor");
    assert_eq!(v["applied"]["end"], "undone on exit");
    assert_eq!(v["applied"]["changes"][1]["old"], "powersave");
    assert_eq!(v["applied"]["changes"][1]["new"], "performance");
    assert_eq!(
        (governor(&dir, 0), governor(&dir, 1)),
        ("powersave".into(), "powersave".into())
    );

    let out = doctor_on(&dir)
        .args(["--apply", "governor", "--keep"])
        .output()
        .unwrap();
    let (stdout, _) = text(&out);
    assert!(out.status.success());
    assert!(
        stdout.contains("governor kept in force; undo by hand: echo powersave | sudo tee "),
        "{stdout}"
    );
    assert_eq!(governor(&dir, 1), "performance");
}

/// Runs `doctor --apply setting --hold 60s` on the fixture `dir`, waits (bounded) until
/// `applied` says the setting is written, lets it reach the hold, then stops it with `sig`;
/// checks it exits 0 and returns its output.
fn hold_then_stop(dir: &Path, setting: &str, sig: i32, applied: impl Fn() -> bool) -> Output {
    let child = piped(doctor_on(dir).args(["--apply", setting, "--hold", "60s"]));
    // The setting is written before the checks run.
    let t0 = Instant::now();
    while !applied() {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "{setting} was not applied"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500));
    signal(&child, sig);
    let out = wait_within(child, Duration::from_secs(30));
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    out
}

#[test]
fn apply_is_undone_on_sigterm() {
    let dir = fixture("doctor-apply-term", true);
    let runtime = dir.join("proc/sys/kernel/sched_rt_runtime_us");
    let out = hold_then_stop(&dir, "rt-runtime", libc::SIGTERM, || {
        std::fs::read_to_string(&runtime).unwrap().trim() == "-1"
    });
    let (stdout, stderr) = text(&out);
    assert_eq!(
        std::fs::read_to_string(&runtime).unwrap(),
        "950000\n",
        "restored on SIGTERM"
    );
    assert!(stdout.contains("rt-runtime undone"), "{stdout}");
    assert!(stderr.contains("holding rt-runtime"), "{stderr}");

    // The governor too, and SIGINT (Ctrl-C) works the same way.
    hold_then_stop(&dir, "governor", libc::SIGINT, || {
        governor(&dir, 0) == "performance"
    });
    assert_eq!(
        (governor(&dir, 0), governor(&dir, 1)),
        ("powersave".into(), "powersave".into())
    );
}

#[test]
fn apply_governor_without_cpufreq_says_it_cannot() {
    let dir = fixture("doctor-apply-vm", false);
    let out = doctor_on(&dir)
        .args(["--apply", "governor"])
        .output()
        .unwrap();
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot apply governor: no CPU has cpufreq on this machine"),
        "{stderr}"
    );
}

#[test]
fn bad_input_is_a_usage_error() {
    let dir = scratch("doctor-bad");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["--buffer".into(), "7".into()],
            // Checked by the flag's parser against the engine's table, as run's flags are.
            "invalid value '7' for '--buffer <FRAMES>': allowed 16..=8192 frames",
        ),
        (
            vec!["--rate".into(), "1000".into()],
            "invalid value '1000' for '--rate <HZ>': allowed 8000..=384000 Hz",
        ),
        (
            vec!["--apply".into(), "turbo".into()],
            "unknown setting \"turbo\" (allowed: governor, rt-runtime)",
        ),
        (vec!["--quick".into()], "--measure"),
        (vec!["--keep".into()], "--apply"),
        (vec!["--hold".into(), "5s".into()], "--apply"),
        (
            vec!["--sys-root".into(), "/nonexistent-xrunlab".into()],
            "invalid value '/nonexistent-xrunlab' for --sys-root: not a directory",
        ),
        (
            vec![
                "--json".into(),
                dir.join("missing/d.json").display().to_string(),
            ],
            "missing does not exist",
        ),
    ];
    for (args, message) in cases {
        let args: Vec<&str> = std::iter::once("doctor")
            .chain(args.iter().map(String::as_str))
            .collect();
        usage_error(&args, &[message]);
    }
}

#[test]
fn a_run_records_topology_idle_states_and_frequencies() {
    let (_, v) = run_json("doctor-run-system", &["--duration", "1s"]);
    let system = &v["system"];
    let cpus = xrunlab_sys::cpu::online_cpus(xrunlab_sys::default_sys_root()).len();
    assert_eq!(system["topology"].as_array().unwrap().len(), cpus);
    let cpufreq = Path::new("/sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq").exists();
    if cpufreq {
        assert!(!system["frequency"]["samples"]
            .as_array()
            .unwrap()
            .is_empty());
        assert!(system["frequency_note"]
            .as_str()
            .unwrap()
            .contains("sampled every 100 ms"));
    } else {
        assert_eq!(system["frequency"], serde_json::Value::Null);
        assert_eq!(
            system["frequency_note"],
            "not available on this machine (no cpufreq)"
        );
    }
    if Path::new("/sys/devices/system/cpu/cpu0/cpuidle").exists() {
        let usage = system["idle_usage"].as_array().unwrap();
        assert!(!usage.is_empty());
        assert!(usage
            .iter()
            .all(|u| u["entries"].is_u64() && u["name"].is_string()));
    }
}

fn rt_runtime(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("proc/sys/kernel/sched_rt_runtime_us"))
        .unwrap()
        .trim()
        .to_owned()
}

fn journal_path(dir: &Path) -> std::path::PathBuf {
    dir.join("fs/run/xrunlab/doctor-undo.json")
}

#[test]
fn a_setting_left_by_a_killed_apply_is_found_and_undone() {
    let dir = fixture("doctor-undo-kill", false);
    let mut child = piped(doctor_on(&dir).args(["--apply", "rt-runtime", "--hold", "60s"]));
    let t0 = Instant::now();
    while rt_runtime(&dir) != "-1" {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "rt-runtime was not applied"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        journal_path(&dir).exists(),
        "the journal is written before the setting"
    );
    child.kill().unwrap(); // SIGKILL: no chance to undo
    child.wait().unwrap();
    assert_eq!(
        rt_runtime(&dir),
        "-1",
        "kill -9 leaves the setting in force"
    );

    let out = doctor_on(&dir).output().unwrap();
    let (stdout, _) = text(&out);
    assert!(
        stdout.contains("ended without undoing it") && stdout.contains("xrunlab doctor --undo"),
        "{stdout}"
    );
    let out = doctor_on(&dir).arg("--undo").output().unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("rt-runtime undone"), "{stdout}");
    assert_eq!(rt_runtime(&dir), "950000", "the old value is back");
    assert!(!journal_path(&dir).exists(), "the journal goes once undone");
    let out = doctor_on(&dir).arg("--undo").output().unwrap();
    assert!(text(&out).0.contains("nothing to undo"));
}

fn write_journal(dir: &Path, pid: u32, start_ticks: u64, boot_id: &str) {
    let p = journal_path(dir);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    let j = serde_json::json!({
        "schema": "xrunlab.doctor-undo/1", "setting": "rt-runtime", "pid": pid,
        "start_ticks": start_ticks, "boot_id": boot_id,
        "changes": [{"path": dir.join("proc/sys/kernel/sched_rt_runtime_us"), "old": "950000", "new": "-1"}]
    });
    std::fs::write(p, j.to_string()).unwrap();
}

fn own_start_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    stat[stat.rfind(')').unwrap() + 1..]
        .split_whitespace()
        .nth(19)
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn a_journal_from_an_earlier_boot_is_discarded_and_a_live_owners_is_left_alone() {
    let dir = fixture("doctor-undo-boot", false);
    std::fs::write(dir.join("proc/sys/kernel/sched_rt_runtime_us"), "-1\n").unwrap();
    write_journal(&dir, 1, 1, "00000000-0000-0000-0000-000000000000");
    let out = doctor_on(&dir).output().unwrap();
    assert!(
        text(&out).0.contains("discarded the undo journal"),
        "{}",
        text(&out).0
    );
    assert!(!journal_path(&dir).exists());
    assert_eq!(
        rt_runtime(&dir),
        "-1",
        "nothing is restored from another boot"
    );

    // This test process is alive with this start time: its journal is not touched.
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    write_journal(&dir, std::process::id(), own_start_ticks(), boot.trim());
    let out = doctor_on(&dir).arg("--undo").output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).1.contains("is still running"),
        "{}",
        text(&out).1
    );
    assert!(journal_path(&dir).exists());
    assert_eq!(rt_runtime(&dir), "-1");
    // The same pid with another start time is a reused pid: the owner is gone.
    write_journal(&dir, std::process::id(), own_start_ticks() + 1, boot.trim());
    let out = doctor_on(&dir).arg("--undo").output().unwrap();
    assert!(out.status.success(), "{}", text(&out).1);
    assert_eq!(rt_runtime(&dir), "950000");
}

#[test]
fn a_damaged_journal_is_an_error_that_keeps_it_and_undo_with_apply_is_refused() {
    let dir = fixture("doctor-undo-bad", false);
    let p = journal_path(&dir);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, "{\"schema\": \"xrunlab.doctor-undo/1\", \"setting\": ").unwrap();
    let out = doctor_on(&dir).arg("--undo").output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).1.contains("is damaged"), "{}", text(&out).1);
    assert!(p.exists(), "a damaged journal is not deleted silently");
    let out = doctor_on(&dir)
        .args(["--undo", "--apply", "rt-runtime"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn undo_refuses_a_forged_journal_that_names_a_file_outside_its_setting() {
    let dir = fixture("doctor-undo-forged", false);
    let victim = dir.join("victim");
    std::fs::write(&victim, "root:x:0:0::/root:/bin/sh\n").unwrap();
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    let p = journal_path(&dir);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    // Whoever can write the fs root can write a journal: it names any file and any value.
    let j = serde_json::json!({
        "schema": "xrunlab.doctor-undo/1", "setting": "rt-runtime", "pid": i32::MAX,
        "start_ticks": 1, "boot_id": boot.trim(),
        "changes": [{"path": victim, "old": "owned", "new": "-1"}]
    });
    std::fs::write(&p, j.to_string()).unwrap();
    let out = doctor_on(&dir).arg("--undo").output().unwrap();
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("refused the undo journal")
            && stderr.contains("which rt-runtime does not write")
            && stderr.contains("nothing was written"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "root:x:0:0::/root:/bin/sh\n"
    );
    assert!(p.exists(), "the journal is kept for a person to look at");

    // A journal others may write is not read at all.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o666)).unwrap();
    let out = doctor_on(&dir).arg("--undo").output().unwrap();
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("is not trusted: other users may write it (mode 0666)"),
        "{stderr}"
    );
}
