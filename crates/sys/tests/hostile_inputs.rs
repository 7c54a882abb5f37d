//! Property tests of the procfs and sysfs parsers on input the kernel did not write: CPU lists
//! of any text, and a thread's real `stat`, `status`, `sched` and `schedstat` files
//! (tests/fixtures/proc, read from this machine) truncated, bit-flipped or with a number
//! replaced by an extreme one. The property: a value, or an error naming the file or the list;
//! never a panic, never an allocation past the capped heap. Runs on the test threads.

use cap::Cap;
use proptest::prelude::*;
use std::alloc::System;
use std::path::Path;
use std::sync::OnceLock;
use xrunlab_sys::cpu::MAX_CPU_ID;
use xrunlab_sys::procfs::{read_rss_bytes, read_thread_faults, read_thread_stat};
use xrunlab_sys::{format_cpu_list, online_cpus, parse_cpu_list};

/// A parser that expands what it reads without bound fails to allocate, which aborts the test
/// binary.
#[global_allocator]
static HEAP: Cap<System> = Cap::new(System, 256 << 20);

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 2_000,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

#[test]
fn a_cpu_list_repeating_every_cpu_takes_the_memory_of_one() {
    let list = "0-65535,".repeat(2_000) + "7";
    let cpus = parse_cpu_list(&list).unwrap();
    assert_eq!(cpus.len(), MAX_CPU_ID + 1);
    assert_eq!(format_cpu_list(&cpus), "0-65535");
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_cpu_list_is_sorted_distinct_cpus_or_an_error_quoting_it(
        text in prop_oneof!["[0-9,\\- ]{0,30}", ".{0,30}", "([0-9]{1,6}(-[0-9]{1,6})?,){0,8}[0-9]{1,6}"],
    ) {
        match parse_cpu_list(&text) {
            Ok(cpus) => {
                prop_assert!(cpus.windows(2).all(|w| w[0] < w[1]), "{:?}", cpus);
                prop_assert!(cpus.iter().all(|&c| c <= MAX_CPU_ID));
                prop_assert_eq!(parse_cpu_list(&format_cpu_list(&cpus)).unwrap(), cpus);
            }
            Err(e) => {
                let m = e.to_string();
                prop_assert!(m.contains(text.trim()) || m.starts_with("empty CPU list"), "{}", m);
            }
        }
    }
}

/// The real files, as a thread directory holds them.
const PROC_FILES: [&str; 4] = ["stat", "status", "sched", "schedstat"];

fn real(name: &str) -> Vec<u8> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/proc")
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// How one file is damaged.
#[derive(Debug, Clone)]
enum Damage {
    Cut(prop::sample::Index),
    Flip(prop::sample::Index, u8),
    /// The n-th run of digits replaced by this text.
    Number(prop::sample::Index, String),
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        any::<prop::sample::Index>().prop_map(Damage::Cut),
        (any::<prop::sample::Index>(), 0u8..8).prop_map(|(i, b)| Damage::Flip(i, b)),
        (
            any::<prop::sample::Index>(),
            prop_oneof![
                Just("18446744073709551615".to_owned()),
                Just("18446744073709551616".to_owned()),
                Just("-1".to_owned()),
                Just("99999999999999999999999999".to_owned()),
                Just(String::new()),
                "[0-9a-z:() ]{0,12}",
            ],
        )
            .prop_map(|(i, s)| Damage::Number(i, s)),
    ]
}

fn damaged(mut bytes: Vec<u8>, d: &Damage) -> Vec<u8> {
    match d {
        Damage::Cut(at) => bytes.truncate(at.index(bytes.len() + 1)),
        Damage::Flip(at, bit) => {
            let i = at.index(bytes.len());
            bytes[i] ^= 1 << bit;
        }
        Damage::Number(which, with) => {
            let text = String::from_utf8_lossy(&bytes).into_owned();
            let runs: Vec<(usize, usize)> = text
                .char_indices()
                .filter(|&(i, c)| {
                    c.is_ascii_digit() && !text[..i].ends_with(|p: char| p.is_ascii_digit())
                })
                .map(|(i, _)| {
                    let end = text[i..]
                        .find(|c: char| !c.is_ascii_digit())
                        .map_or(text.len(), |n| i + n);
                    (i, end)
                })
                .collect();
            if !runs.is_empty() {
                let (start, end) = *which.get(&runs);
                bytes = format!("{}{with}{}", &text[..start], &text[end..]).into_bytes();
            }
        }
    }
    bytes
}

/// The undamaged files as read (once).
fn whole_thread() -> &'static xrunlab_sys::ThreadStat {
    static ONCE: OnceLock<xrunlab_sys::ThreadStat> = OnceLock::new();
    ONCE.get_or_init(|| {
        let root = real_tree();
        let s = read_thread_stat(root.path(), 1, 1).unwrap();
        assert!(s.has_schedstat && s.migrations.is_some() && s.voluntary_switches > 0);
        s
    })
}

/// A procfs tree holding thread 1 of process 1 with the real files, and an empty sysfs.
fn real_tree() -> tempfile::TempDir {
    // In memory where there is a tmpfs: thousands of rewrites of a disk file wait on its
    // journal (20 s here, against 2 s).
    let shm = Path::new("/dev/shm");
    let root = if shm.is_dir() {
        tempfile::tempdir_in(shm)
    } else {
        tempfile::tempdir()
    }
    .unwrap();
    let dir = root.path().join("1/task/1");
    std::fs::create_dir_all(&dir).unwrap();
    for name in PROC_FILES {
        std::fs::write(dir.join(name), real(name)).unwrap();
    }
    std::fs::write(root.path().join("1/status"), real("status")).unwrap();
    std::fs::create_dir_all(root.path().join("devices/system/cpu")).unwrap();
    root
}

thread_local! {
    /// Each test thread's tree: a case damages one file and puts it back after.
    static TREE: tempfile::TempDir = real_tree();
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn damaged_thread_files_read_or_name_the_file(
        file in 0usize..4,
        d in damage(),
        online in prop_oneof!["[0-9,\\-]{0,12}", Just("0-65535,".repeat(64))],
    ) {
        TREE.with(|root| {
            let target = root.path().join("1/task/1").join(PROC_FILES[file]);
            std::fs::write(&target, damaged(real(PROC_FILES[file]), &d)).unwrap();
            let holds = damaged_tree_holds(root.path(), file, &online);
            std::fs::write(&target, real(PROC_FILES[file])).unwrap();
            holds
        })?;
    }
}

/// The property over a tree whose `PROC_FILES[file]` is damaged and whose online CPU list is
/// `online`: what the undamaged files say is read as it is, and a damaged one reads or is an
/// error naming it.
fn damaged_tree_holds(root: &Path, file: usize, online: &str) -> Result<(), TestCaseError> {
    let names_a_file = |e: &std::io::Error| {
        let m = e.to_string();
        PROC_FILES.iter().any(|f| m.contains(&format!("/{f}: ")))
    };
    let whole = whole_thread();
    match read_thread_stat(root, 1, 1) {
        Ok(s) => {
            if file != 0 {
                prop_assert_eq!(
                    (
                        s.utime_ns,
                        s.stime_ns,
                        s.minor_faults,
                        s.major_faults,
                        s.last_cpu
                    ),
                    (
                        whole.utime_ns,
                        whole.stime_ns,
                        whole.minor_faults,
                        whole.major_faults,
                        whole.last_cpu
                    )
                );
            }
            if file != 1 {
                prop_assert_eq!(
                    (s.voluntary_switches, s.involuntary_switches),
                    (whole.voluntary_switches, whole.involuntary_switches)
                );
            }
            if file != 2 {
                prop_assert_eq!(s.migrations, whole.migrations);
            }
            if file != 3 {
                prop_assert_eq!((s.run_ns, s.timeslices), (whole.run_ns, whole.timeslices));
            }
        }
        Err(e) => prop_assert!(names_a_file(&e), "{}", e),
    }
    if let Err(e) = read_thread_faults(root, 1, 1) {
        prop_assert!(names_a_file(&e), "{}", e);
    }
    if let Err(e) = read_rss_bytes(root, "1") {
        prop_assert!(names_a_file(&e), "{}", e);
    }
    // A sysfs online list of any text: its CPUs, or the CPU directories (none here).
    std::fs::write(root.join("devices/system/cpu/online"), online).unwrap();
    prop_assert_eq!(
        online_cpus(root),
        parse_cpu_list(online).unwrap_or_default()
    );
    Ok(())
}
