//! `--apply` and `--undo` on trees another user can write: a forged journal restores nothing
//! but its own setting's files at their own paths, symlinks out of a tree are refused, and a
//! journal that is a symlink, someone else's or writable by others is not read.

use crate::fixture::Machine;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use xrunlab_doctor::apply::{apply, ApplyError, Change, Setting};
use xrunlab_doctor::journal::{self, Found, Journal, JournalError, UndoError, SCHEMA};

fn with_cpufreq(cpus: usize) -> Machine {
    let m = Machine::base(cpus, "6.8.0-test");
    for cpu in 0..cpus {
        m.cpufreq(
            cpu,
            "intel_pstate",
            "powersave",
            "performance powersave",
            (400_000, 4_000_000, 4_000_000),
        );
    }
    m
}

fn governor(m: &Machine, cpu: usize) -> PathBuf {
    m.roots().sys(&format!(
        "devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor"
    ))
}

/// A file outside every tree of the machine: what a forged journal or a planted symlink aims at.
fn victim() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("shadow");
    std::fs::write(&p, "secret\n").unwrap();
    (dir, p)
}

/// Writes an orphaned journal (a pid no process has, this boot) as its owner would, mode 0644.
fn plant_journal(m: &Machine, setting: &str, changes: Vec<(PathBuf, &str)>) -> PathBuf {
    let j = Journal {
        schema: SCHEMA.into(),
        setting: setting.into(),
        pid: i32::MAX,
        start_ticks: 1,
        boot_id: std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .unwrap()
            .trim()
            .to_owned(),
        changes: changes
            .into_iter()
            .map(|(path, old)| Change {
                path,
                old: old.into(),
                new: "performance".into(),
            })
            .collect(),
    };
    j.write(&m.roots()).unwrap();
    journal::path(&m.roots())
}

fn orphaned(m: &Machine) -> Journal {
    match journal::find(&m.roots()) {
        Ok(Some(Found::Orphaned(j))) => j,
        other => panic!("expected an orphaned journal, got {other:?}"),
    }
}

fn refused(m: &Machine, words: &str) {
    let j = orphaned(m);
    match journal::undo(&m.roots(), &j) {
        Err(e @ UndoError::Refused { .. }) => {
            let text = e.to_string();
            assert!(
                text.contains(words) && text.contains("nothing was written"),
                "{text}"
            );
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(
        journal::path(&m.roots()).exists(),
        "a refused journal stays"
    );
}

#[test]
fn a_forged_journal_restores_nothing_outside_its_settings_own_files() {
    let m = with_cpufreq(2);
    let (_keep, victim) = victim();
    // A path outside the tree.
    plant_journal(&m, "governor", vec![(victim.clone(), "powersave")]);
    refused(&m, "which governor does not write");
    // A path inside the tree that is not a governor file.
    let passwd = m.roots().fs("etc/passwd");
    plant_journal(&m, "rt-runtime", vec![(passwd, "0")]);
    refused(&m, "which rt-runtime does not write");
    // A governor file reached through "..".
    let dotdot = m
        .roots()
        .sys("devices/system/cpu/cpu0/../../../../fs/etc/x/cpufreq/scaling_governor");
    plant_journal(&m, "governor", vec![(dotdot, "powersave")]);
    refused(&m, "which governor does not write");
    // The right file, but a value no governor has (a newline smuggles a second line).
    plant_journal(
        &m,
        "governor",
        vec![(governor(&m, 0), "powersave\nroot::0")],
    );
    refused(&m, "not a value of governor");
    // A setting the doctor does not know.
    plant_journal(&m, "turbo", vec![(governor(&m, 0), "powersave")]);
    refused(&m, "unknown setting \"turbo\"");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "secret\n");
    assert_eq!(
        m.read("sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        "powersave\n"
    );

    // What `--apply` itself writes is undone.
    plant_journal(
        &m,
        "governor",
        vec![
            (governor(&m, 0), "schedutil"),
            (governor(&m, 1), "schedutil"),
        ],
    );
    let restored = journal::undo(&m.roots(), &orphaned(&m)).unwrap();
    assert_eq!(restored.len(), 2);
    assert_eq!(
        m.read("sys/devices/system/cpu/cpu1/cpufreq/scaling_governor"),
        "schedutil\n"
    );
    assert!(!journal::path(&m.roots()).exists());
}

fn symlink(target: &Path, link: &Path) {
    let _ = std::fs::remove_file(link).or_else(|_| std::fs::remove_dir_all(link));
    std::os::unix::fs::symlink(target, link).unwrap();
}

#[test]
fn symlinks_out_of_the_tree_are_refused_and_those_within_it_followed() {
    let m = with_cpufreq(3);
    let (_keep, victim) = victim();
    // CPU 0's governor file is a symlink to a file outside.
    symlink(&victim, &governor(&m, 0));
    match apply(Setting::Governor, &m.roots()) {
        Err(e @ ApplyError::Read { .. }) => {
            assert!(e.to_string().contains("it is a symlink"), "{e}")
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(!journal::path(&m.roots()).exists(), "nothing was recorded");
    // An undo naming it writes nothing through it.
    plant_journal(&m, "governor", vec![(governor(&m, 0), "powersave")]);
    match journal::undo(&m.roots(), &orphaned(&m)) {
        Err(e @ UndoError::Writes(_)) => assert!(e.to_string().contains("symlink"), "{e}"),
        other => panic!("expected a failed write, got {other:?}"),
    }
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "secret\n");
    journal::remove(&m.roots()).unwrap();

    // A directory on the way is a symlink out of the tree.
    let outside = victim.parent().unwrap().join("cpufreq");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("scaling_governor"), "powersave\n").unwrap();
    m.remove("sys/devices/system/cpu/cpu0");
    m.sys("devices/system/cpu/cpu0/online", "1\n");
    symlink(&outside, &m.roots().sys("devices/system/cpu/cpu0/cpufreq"));
    match apply(Setting::Governor, &m.roots()) {
        Err(e) => assert!(e.to_string().contains("leads out of"), "{e}"),
        Ok(_) => panic!("applied through a symlink out of the tree"),
    }
    assert_eq!(
        std::fs::read_to_string(outside.join("scaling_governor")).unwrap(),
        "powersave\n"
    );

    // A symlink within the tree, as a real sysfs has (cpuN/cpufreq -> ../cpufreq/policyN).
    for cpu in 0..3 {
        let policy = m
            .roots()
            .sys(&format!("devices/system/cpu/cpufreq/policy{cpu}"));
        std::fs::create_dir_all(&policy).unwrap();
        std::fs::write(policy.join("scaling_governor"), "powersave\n").unwrap();
        symlink(
            Path::new(&format!("../cpufreq/policy{cpu}")),
            &m.roots()
                .sys(&format!("devices/system/cpu/cpu{cpu}/cpufreq")),
        );
    }
    let applied = apply(Setting::Governor, &m.roots()).unwrap();
    assert_eq!(
        m.read("sys/devices/system/cpu/cpufreq/policy2/scaling_governor"),
        "performance\n"
    );
    applied.undo().unwrap();
    assert_eq!(
        m.read("sys/devices/system/cpu/cpufreq/policy2/scaling_governor"),
        "powersave\n"
    );
}

#[test]
fn a_file_holding_no_governor_is_not_recorded_or_changed() {
    let m = with_cpufreq(1);
    m.sys(
        "devices/system/cpu/cpu0/cpufreq/scaling_governor",
        "root:x:0:0::/root:/bin/sh\n",
    );
    match apply(Setting::Governor, &m.roots()) {
        Err(e @ ApplyError::Unexpected { .. }) => {
            assert!(e.to_string().contains("not a value of governor"), "{e}")
        }
        other => panic!("expected Unexpected, got {other:?}"),
    }
    assert!(!journal::path(&m.roots()).exists());
}

fn untrusted(m: &Machine, words: &str) {
    match journal::find(&m.roots()) {
        Err(e @ JournalError::Untrusted { .. }) => {
            assert!(e.to_string().contains(words), "{e}")
        }
        other => panic!("expected an untrusted journal, got {other:?}"),
    }
}

#[test]
fn a_journal_that_is_a_symlink_or_writable_by_others_is_not_read() {
    let m = with_cpufreq(1);
    let p = plant_journal(&m, "governor", vec![(governor(&m, 0), "schedutil")]);
    orphaned(&m);
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o664)).unwrap();
    untrusted(&m, "other users may write it (mode 0664)");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o646)).unwrap();
    untrusted(&m, "other users may write it (mode 0646)");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
    let moved = p.with_extension("real");
    std::fs::rename(&p, &moved).unwrap();
    symlink(&moved, &p);
    untrusted(&m, "it is a symlink");
    // Applying is refused while it is there, and the refusal says why.
    match apply(Setting::Governor, &m.roots()) {
        Err(ApplyError::Journal(JournalError::Untrusted { .. })) => {}
        other => panic!("expected the untrusted journal's error, got {other:?}"),
    }
    assert_eq!(
        m.read("sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        "powersave\n"
    );
}

#[test]
fn a_journal_owned_by_another_user_is_not_read() {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "this test gives a file away (chown): run it as root, as CI does"
    );
    let m = with_cpufreq(1);
    let p = plant_journal(&m, "governor", vec![(governor(&m, 0), "schedutil")]);
    std::os::unix::fs::chown(&p, Some(65534), None).unwrap();
    untrusted(&m, "owned by uid 65534, not by uid 0");
    std::os::unix::fs::chown(&p, Some(0), None).unwrap();
    orphaned(&m);
}
