//! Property tests of the doctor's kernel-configuration and undo-journal readers on input they
//! did not write: a real kernel configuration excerpt (tests/fixtures/kconfig, Linux 6.18) and
//! a journal written by the doctor itself, truncated, bit-flipped or with a line or value
//! replaced; and a gzip bomb as /proc/config.gz. The property: a value, or an error naming the
//! file; never a panic, never an allocation past the capped heap. Runs on the test threads.

use cap::Cap;
use proptest::prelude::*;
use std::alloc::System;
use std::io::Write as _;
use std::path::Path;
use xrunlab_doctor::journal::{self, Found, Journal, JournalError};
use xrunlab_doctor::kconfig::{KernelConfig, MAX_CONFIG_BYTES};
use xrunlab_doctor::roots::Roots;
use xrunlab_results::doctor::Change;

/// Below what a gzip bomb of 64 MiB would need: reading it whole aborts the test binary.
#[global_allocator]
static HEAP: Cap<System> = Cap::new(System, 48 << 20);

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 2_000,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn kconfig() -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kconfig");
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn roots_in(dir: &Path) -> Roots {
    Roots {
        proc: dir.join("proc"),
        sys: dir.join("sys"),
        fs: dir.to_path_buf(),
    }
}

#[test]
fn a_gzip_bomb_as_proc_config_gz_is_refused_past_the_limit() {
    let dir = scratch();
    std::fs::create_dir_all(dir.path().join("proc")).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let line = b"CONFIG_X=y\n".repeat(1 << 16);
    // 64 MiB of configuration in about 100 KiB.
    for _ in 0..(64 << 20) / line.len() {
        gz.write_all(&line).unwrap();
    }
    std::fs::write(dir.path().join("proc/config.gz"), gz.finish().unwrap()).unwrap();
    let e = KernelConfig::load(&roots_in(dir.path())).unwrap_err();
    let m = e.to_string();
    assert!(
        m.contains("config.gz does not decompress: inflates past 16 MiB"),
        "{m}"
    );
    assert_eq!(MAX_CONFIG_BYTES, 16 << 20);
}

/// Damage to a text.
#[derive(Debug, Clone)]
enum Damage {
    Cut(prop::sample::Index),
    Flip(prop::sample::Index, u8),
    /// A line replaced by this text.
    Line(prop::sample::Index, String),
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        any::<prop::sample::Index>().prop_map(Damage::Cut),
        (any::<prop::sample::Index>(), 0u8..8).prop_map(|(i, b)| Damage::Flip(i, b)),
        (
            any::<prop::sample::Index>(),
            prop_oneof![
                "CONFIG_[A-Z_]{1,12}=[a-z0-9\"]{0,6}",
                "# CONFIG_[A-Z_]{1,12} is not set",
                "[ =#\"a-z_A-Z{}:,\\[\\]0-9]{0,30}",
            ],
        )
            .prop_map(|(i, s)| Damage::Line(i, s)),
    ]
}

fn damaged(text: &str, d: &Damage) -> String {
    let mut bytes = text.as_bytes().to_vec();
    match d {
        Damage::Cut(at) => bytes.truncate(at.index(bytes.len() + 1)),
        Damage::Flip(at, bit) => {
            let i = at.index(bytes.len());
            bytes[i] ^= 1 << bit;
        }
        Damage::Line(which, with) => {
            let mut lines: Vec<&str> = text.lines().collect();
            let i = which.index(lines.len());
            lines[i] = with;
            return lines.join("\n");
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

proptest! {
    #![proptest_config(config())]

    /// Every well-formed line of the damaged text is an option of the parse.
    #[test]
    fn any_kernel_configuration_text_parses_its_well_formed_lines(d in damage()) {
        let text = damaged(&kconfig(), &d);
        let c = KernelConfig::parse("kconfig", &text);
        for line in text.lines().map(str::trim) {
            let name = if let Some(rest) = line.strip_prefix("# ") {
                rest.strip_suffix(" is not set")
            } else {
                line.split_once('=').map(|(n, _)| n).filter(|n| n.starts_with("CONFIG_"))
            };
            if let Some(name) = name {
                prop_assert!(c.get(name).is_some(), "{} lost from {:?}", name, line);
            }
        }
    }
}

/// A journal as the doctor writes it, under `dir`.
fn write_journal(dir: &Path) -> Roots {
    let roots = roots_in(dir);
    let changes = vec![Change {
        path: dir.join("sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        old: "schedutil".into(),
        new: "performance".into(),
    }];
    Journal::for_this_process("governor", changes)
        .write(&roots)
        .unwrap();
    roots
}

/// A scratch directory in memory where there is a tmpfs: thousands of rewrites of a disk file
/// wait on its journal.
fn scratch() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        tempfile::tempdir_in(shm)
    } else {
        tempfile::tempdir()
    }
    .unwrap()
}

thread_local! {
    /// Each test thread's tree with a journal the doctor wrote, and that journal's text.
    static JOURNAL: (tempfile::TempDir, Roots, String) = {
        let dir = scratch();
        let roots = write_journal(dir.path());
        let text = std::fs::read_to_string(journal::path(&roots)).unwrap();
        (dir, roots, text)
    };
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn a_damaged_undo_journal_reads_or_is_an_error_naming_it(d in damage()) {
        JOURNAL.with(|(_, roots, text)| {
            let path = journal::path(roots);
            std::fs::write(&path, damaged(text, &d)).unwrap();
            match journal::find(roots) {
                Ok(Some(Found::Orphaned(j) | Found::OwnerRunning(j) | Found::EarlierBoot(j))) => {
                    prop_assert_eq!(j.schema, journal::SCHEMA);
                }
                Ok(None) => prop_assert!(false, "the journal is there"),
                Err(e @ (JournalError::Damaged { .. } | JournalError::Read { .. } | JournalError::Schema { .. })) => {
                    prop_assert!(e.to_string().contains(&path.display().to_string()), "{}", e);
                }
                Err(e) => prop_assert!(false, "{}", e),
            }
            Ok(())
        })?;
    }
}
