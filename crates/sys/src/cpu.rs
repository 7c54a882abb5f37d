//! CPU topology, core types, cpufreq governors and frequencies, read from sysfs (its mount
//! point is a parameter). Runs on non-real-time threads: setup, provenance and the dashboard.

use crate::{read_parsed, read_trimmed};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Largest CPU number [`parse_cpu_list`] accepts: far above any real machine, low enough that a
/// typo like "0-4000000000" is an error instead of a huge allocation.
pub const MAX_CPU_ID: usize = 65_535;

/// What sysfs says about one online CPU. Each field is `None` where the machine does not
/// expose it (no cpufreq in VMs, no capacities on symmetric x86).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuInfo {
    /// Logical CPU number.
    pub id: usize,
    /// "performance" or "efficiency" on heterogeneous machines (Intel hybrid, Arm big.LITTLE).
    pub core_type: Option<String>,
    /// Arm `cpu_capacity` (1024 = the biggest core).
    pub capacity: Option<u32>,
    /// cpufreq scaling governor, e.g. "schedutil".
    pub governor: Option<String>,
    /// Current frequency in kHz.
    pub cur_freq_khz: Option<u64>,
    /// Lowest frequency the governor may pick, in kHz.
    pub min_freq_khz: Option<u64>,
    /// Highest frequency the governor may pick, in kHz.
    pub max_freq_khz: Option<u64>,
}

/// Parses a kernel CPU list such as "0-3,5" into sorted, deduplicated CPU numbers. Used for
/// sysfs files and for the CLI's `--cpus`, so errors say which part was wrong.
///
/// ```
/// use xrunlab_sys::{format_cpu_list, parse_cpu_list};
/// assert_eq!(parse_cpu_list("0-3,5").unwrap(), vec![0, 1, 2, 3, 5]);
/// assert_eq!(format_cpu_list(&[0, 1, 2, 3, 5]), "0-3,5");
/// assert!(parse_cpu_list("3-1").unwrap_err().to_string().contains("backwards"));
/// ```
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>, CpuListError> {
    let s = s.trim();
    if s.is_empty() {
        return Err(CpuListError::Empty);
    }
    let number = |t: &str| -> Result<usize, CpuListError> {
        let n: usize = t.trim().parse().map_err(|_| CpuListError::NotANumber {
            item: t.trim().to_owned(),
            list: s.to_owned(),
        })?;
        if n > MAX_CPU_ID {
            return Err(CpuListError::AboveMax {
                cpu: n,
                list: s.to_owned(),
            });
        }
        Ok(n)
    };
    // Ranges first, expanded once merged: a list repeating "0-65535" a thousand times names
    // 65,536 CPUs, not 65 million.
    let mut ranges = Vec::new();
    for part in s.split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                let (first, last) = (number(a)?, number(b)?);
                if first > last {
                    return Err(CpuListError::Backwards {
                        range: part.trim().to_owned(),
                        list: s.to_owned(),
                    });
                }
                ranges.push((first, last));
            }
            None => {
                let n = number(part)?;
                ranges.push((n, n));
            }
        }
    }
    ranges.sort_unstable();
    let mut cpus = Vec::new();
    for (first, last) in ranges {
        // Sorted by first: only the part above the last CPU taken is new.
        let from = cpus.last().map_or(first, |&top: &usize| first.max(top + 1));
        cpus.extend(from..=last);
    }
    Ok(cpus)
}

/// Why a CPU list ("0-3,5") did not parse; the message quotes the list and says what is allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CpuListError {
    /// Nothing but blanks.
    #[error("empty CPU list (expected something like \"0-3,5\")")]
    Empty,
    /// An item that is not a number or a range of two.
    #[error("\"{item}\" is not a CPU number in CPU list \"{list}\"")]
    NotANumber {
        /// The item as written.
        item: String,
        /// The whole list.
        list: String,
    },
    /// A CPU above [`MAX_CPU_ID`].
    #[error("CPU {cpu} in CPU list \"{list}\" is above the largest supported CPU {MAX_CPU_ID}")]
    AboveMax {
        /// The CPU number written.
        cpu: usize,
        /// The whole list.
        list: String,
    },
    /// A range whose first CPU is above its last.
    #[error("range \"{range}\" in CPU list \"{list}\" runs backwards")]
    Backwards {
        /// The range as written.
        range: String,
        /// The whole list.
        list: String,
    },
}

/// Formats CPU numbers the way the kernel does, collapsing runs: `[0, 1, 2, 3, 5]` -> "0-3,5".
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out = String::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        if !out.is_empty() {
            out.push(',');
        }
        if end == start {
            out.push_str(&start.to_string());
        } else {
            out.push_str(&format!("{start}-{end}"));
        }
        i += 1;
    }
    out
}

pub(crate) fn cpu_dir(sys_root: &Path, cpu: usize) -> PathBuf {
    sys_root.join(format!("devices/system/cpu/cpu{cpu}"))
}

/// Online CPUs from `devices/system/cpu/online` under `sys_root` (normally "/sys"). When that
/// file is missing or garbled, falls back to the `cpuN` directories; empty when neither exists.
pub fn online_cpus(sys_root: &Path) -> Vec<usize> {
    let cpu_root = sys_root.join("devices/system/cpu");
    if let Some(list) = read_trimmed(&cpu_root.join("online")) {
        if let Ok(cpus) = parse_cpu_list(&list) {
            return cpus;
        }
    }
    let mut cpus: Vec<usize> = std::fs::read_dir(&cpu_root)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.strip_prefix("cpu")?.parse().ok())
        .collect();
    cpus.sort_unstable();
    cpus
}

/// The CPUs a run may pin threads to, and what that list is, for a message that refuses one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsableCpus {
    /// The CPUs, ascending.
    pub cpus: Vec<usize>,
    /// What they are: "online CPUs 0-3", or why sysfs could not say and what stands in.
    pub what: String,
}

/// The online CPUs under `sys_root` ([`online_cpus`]); when sysfs lists none (a container
/// without /sys), the CPUs this process may run on (sched_getaffinity), saying so; when that
/// fails too, none, saying why.
pub fn usable_cpus(sys_root: &Path) -> UsableCpus {
    let online = online_cpus(sys_root);
    if !online.is_empty() {
        let what = format!("online CPUs {}", format_cpu_list(&online));
        return UsableCpus { cpus: online, what };
    }
    let missing = format!(
        "{} lists no online CPU (its online file and cpuN directories are missing or unreadable: \
         a container without /sys?)",
        sys_root.join("devices/system/cpu").display()
    );
    match crate::sched::allowed_cpus() {
        Ok(allowed) if !allowed.is_empty() => UsableCpus {
            what: format!(
                "the CPUs this process may run on, {} (from sched_getaffinity: {missing})",
                format_cpu_list(&allowed)
            ),
            cpus: allowed,
        },
        Ok(_) => UsableCpus {
            cpus: Vec::new(),
            what: format!("no CPU: {missing}, and sched_getaffinity gave none"),
        },
        Err(errno) => UsableCpus {
            cpus: Vec::new(),
            what: format!(
                "no CPU: {missing}, and sched_getaffinity failed ({})",
                nix::errno::Errno::from_raw(errno).desc()
            ),
        },
    }
}

/// The CPUs to spread or pin threads over when the user names none: [`usable_cpus`]'s list
/// (the real online ids, which may have gaps: "0,2-3" after a CPU went offline), or, when
/// neither sysfs nor sched_getaffinity can say, CPUs 0..n of the online count (sysconf).
/// Never empty.
pub fn cpu_set(sys_root: &Path) -> Vec<usize> {
    let usable = usable_cpus(sys_root).cpus;
    if usable.is_empty() {
        (0..crate::sched::online_cpu_count()).collect()
    } else {
        usable
    }
}

/// The physical core a CPU belongs to: its package and core id from sysfs topology, or
/// the CPU itself when the topology files are missing (then it counts as a core of its own).
fn core_key(sys_root: &Path, cpu: usize) -> (Option<u64>, u64) {
    let topo = cpu_dir(sys_root, cpu).join("topology");
    match (
        read_parsed::<u64>(&topo.join("physical_package_id")),
        read_parsed::<u64>(&topo.join("core_id")),
    ) {
        (package, Some(core)) => (package, core),
        _ => (None, 1 << 32 | cpu as u64),
    }
}

/// How many physical cores the CPUs in `cpus` span: SMT siblings (same package and core
/// id) count once. This is AudioPerfLab's count of cores available for DSP.
pub fn physical_cores(sys_root: &Path, cpus: &[usize]) -> usize {
    let mut keys: Vec<_> = cpus.iter().map(|&c| core_key(sys_root, c)).collect();
    keys.sort_unstable();
    keys.dedup();
    keys.len()
}

/// Core types from Intel hybrid PMU cpu lists, or else from Arm capacities relative to the
/// biggest core. `None` on symmetric machines, where the label would mean nothing.
fn core_type(
    cpu: usize,
    hybrid: Option<&(Vec<usize>, Vec<usize>)>,
    capacity: Option<u32>,
    max_capacity: Option<u32>,
    symmetric: bool,
) -> Option<String> {
    if let Some((performance, efficiency)) = hybrid {
        if performance.contains(&cpu) {
            return Some("performance".to_owned());
        }
        if efficiency.contains(&cpu) {
            return Some("efficiency".to_owned());
        }
        return None;
    }
    if symmetric {
        return None;
    }
    let (cap, max) = (capacity?, max_capacity?);
    Some(
        if cap >= max {
            "performance"
        } else {
            "efficiency"
        }
        .to_owned(),
    )
}

fn hybrid_lists(sys_root: &Path) -> Option<(Vec<usize>, Vec<usize>)> {
    let list = |name: &str| {
        read_trimmed(&sys_root.join(format!("devices/{name}/cpus")))
            .and_then(|s| parse_cpu_list(&s).ok())
    };
    match (list("cpu_core"), list("cpu_atom")) {
        (None, None) => None,
        (p, e) => Some((p.unwrap_or_default(), e.unwrap_or_default())),
    }
}

/// Everything sysfs under `sys_root` says about each online CPU.
pub fn cpu_infos(sys_root: &Path) -> Vec<CpuInfo> {
    let cpus = online_cpus(sys_root);
    let hybrid = hybrid_lists(sys_root);
    let capacities: Vec<Option<u32>> = cpus
        .iter()
        .map(|&c| read_parsed(&cpu_dir(sys_root, c).join("cpu_capacity")))
        .collect();
    let max_capacity = capacities.iter().flatten().copied().max();
    let min_capacity = capacities.iter().flatten().copied().min();
    let symmetric = max_capacity == min_capacity;
    cpus.iter()
        .zip(&capacities)
        .map(|(&id, &capacity)| {
            let freq = cpu_dir(sys_root, id).join("cpufreq");
            CpuInfo {
                id,
                core_type: core_type(id, hybrid.as_ref(), capacity, max_capacity, symmetric),
                capacity,
                governor: read_trimmed(&freq.join("scaling_governor")),
                cur_freq_khz: read_parsed(&freq.join("scaling_cur_freq")),
                min_freq_khz: read_parsed(&freq.join("scaling_min_freq")),
                max_freq_khz: read_parsed(&freq.join("scaling_max_freq")),
            }
        })
        .collect()
}

/// Current frequency of each CPU in `cpus`, in kHz, into `out` (cleared first; one entry per
/// CPU, `None` where unknown). Meant for the dashboard's periodic refresh: `out` is reused.
pub fn read_cur_freqs_khz(sys_root: &Path, cpus: &[usize], out: &mut Vec<Option<u64>>) {
    out.clear();
    out.extend(
        cpus.iter()
            .map(|&c| read_parsed(&cpu_dir(sys_root, c).join("cpufreq/scaling_cur_freq"))),
    );
}

/// One line describing the governors of the online CPUs: "performance (all CPUs)",
/// "schedutil: 0-3, performance: 4-7", or "not available on this machine (no cpufreq)".
pub fn governor_summary(sys_root: &Path) -> String {
    let cpus = online_cpus(sys_root);
    // Groups in order of their first CPU, so the line reads like the topology.
    let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
    for &cpu in &cpus {
        let governor = read_trimmed(&cpu_dir(sys_root, cpu).join("cpufreq/scaling_governor"))
            .unwrap_or_else(|| "no cpufreq".to_owned());
        match groups.iter_mut().find(|(g, _)| *g == governor) {
            Some((_, members)) => members.push(cpu),
            None => groups.push((governor, vec![cpu])),
        }
    }
    match groups.as_slice() {
        [] => "not available on this machine (no cpufreq)".to_owned(),
        [(g, _)] if g == "no cpufreq" => "not available on this machine (no cpufreq)".to_owned(),
        [(g, _)] => format!("{g} (all CPUs)"),
        _ => groups
            .iter()
            .map(|(g, members)| format!("{g}: {}", format_cpu_list(members)))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Fixture;

    #[test]
    fn parses_and_formats_cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,5").unwrap(), vec![0, 1, 2, 3, 5]);
        assert_eq!(parse_cpu_list(" 7, 2-3 ,2\n").unwrap(), vec![2, 3, 7]);
        assert_eq!(parse_cpu_list("4").unwrap(), vec![4]);
        assert_eq!(format_cpu_list(&[5, 0, 1, 2, 3]), "0-3,5");
        assert_eq!(format_cpu_list(&[1, 3]), "1,3");
        assert_eq!(format_cpu_list(&[]), "");
        let round_trip = "0-2,4,6-7";
        assert_eq!(
            format_cpu_list(&parse_cpu_list(round_trip).unwrap()),
            round_trip
        );
    }

    #[test]
    fn cpu_list_errors_say_what_was_wrong() {
        assert_eq!(parse_cpu_list(""), Err(CpuListError::Empty));
        assert!(parse_cpu_list("")
            .unwrap_err()
            .to_string()
            .contains("empty"));
        assert!(parse_cpu_list("0-x")
            .unwrap_err()
            .to_string()
            .contains("\"x\" is not a CPU number"));
        assert!(parse_cpu_list("3-1")
            .unwrap_err()
            .to_string()
            .contains("\"3-1\""));
        assert!(parse_cpu_list("0,,1")
            .unwrap_err()
            .to_string()
            .contains("not a CPU number"));
        assert!(parse_cpu_list("0-4000000000")
            .unwrap_err()
            .to_string()
            .contains("above the largest"));
    }

    fn cpufreq_fixture() -> Fixture {
        let f = Fixture::new("cpufreq");
        f.write("devices/system/cpu/online", "0-3\n");
        for cpu in 0..4 {
            let (gov, cur) = if cpu < 2 {
                ("schedutil", 1_200_000 + cpu * 1000)
            } else {
                ("performance", 3_000_000)
            };
            let d = format!("devices/system/cpu/cpu{cpu}/cpufreq");
            f.write(&format!("{d}/scaling_governor"), &format!("{gov}\n"));
            f.write(&format!("{d}/scaling_cur_freq"), &format!("{cur}\n"));
            f.write(&format!("{d}/scaling_min_freq"), "800000\n");
            f.write(&format!("{d}/scaling_max_freq"), "3500000\n");
        }
        f
    }

    #[test]
    fn reads_cpufreq_with_two_governors() {
        let f = cpufreq_fixture();
        assert_eq!(online_cpus(f.path()), vec![0, 1, 2, 3]);
        assert_eq!(
            governor_summary(f.path()),
            "schedutil: 0-1, performance: 2-3"
        );
        let infos = cpu_infos(f.path());
        assert_eq!(infos.len(), 4);
        assert_eq!(infos[1].governor.as_deref(), Some("schedutil"));
        assert_eq!(infos[1].cur_freq_khz, Some(1_201_000));
        assert_eq!(infos[3].governor.as_deref(), Some("performance"));
        assert_eq!(infos[3].min_freq_khz, Some(800_000));
        assert_eq!(infos[3].max_freq_khz, Some(3_500_000));
        assert_eq!(infos[0].core_type, None);

        let mut out = vec![Some(1)];
        read_cur_freqs_khz(f.path(), &[0, 3, 9], &mut out);
        assert_eq!(out, vec![Some(1_200_000), Some(3_000_000), None]);

        for cpu in 0..4 {
            f.write(
                &format!("devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor"),
                "performance\n",
            );
        }
        assert_eq!(governor_summary(f.path()), "performance (all CPUs)");
    }

    #[test]
    fn cpus_without_cpufreq_are_named_in_a_mixed_summary() {
        let f = cpufreq_fixture();
        f.write("devices/system/cpu/online", "0-4\n");
        assert_eq!(
            governor_summary(f.path()),
            "schedutil: 0-1, performance: 2-3, no cpufreq: 4"
        );
    }

    #[test]
    fn the_cpu_set_is_the_real_online_ids_even_with_a_gap() {
        let f = Fixture::new("gap");
        // CPU 1 went offline: three CPUs online, and they are not 0..3.
        f.write("devices/system/cpu/online", "0,2-3\n");
        assert_eq!(cpu_set(f.path()), vec![0, 2, 3]);
        // Without sysfs, the CPUs this process may use (never an empty set).
        let none = Fixture::new("no-sys");
        let fallback = cpu_set(none.path());
        assert!(!fallback.is_empty());
        assert_eq!(
            fallback,
            crate::sched::allowed_cpus().unwrap(),
            "sched_getaffinity's set"
        );
    }

    #[test]
    fn intel_hybrid_core_types() {
        let f = Fixture::new("hybrid");
        f.write("devices/system/cpu/online", "0-5\n")
            .write("devices/cpu_core/cpus", "0-3\n")
            .write("devices/cpu_atom/cpus", "4-5\n");
        let types: Vec<_> = cpu_infos(f.path())
            .into_iter()
            .map(|i| i.core_type)
            .collect();
        let p = Some("performance".to_owned());
        let e = Some("efficiency".to_owned());
        assert_eq!(
            types,
            vec![p.clone(), p.clone(), p.clone(), p, e.clone(), e]
        );
    }

    #[test]
    fn arm_capacity_core_types() {
        let f = Fixture::new("arm");
        f.write("devices/system/cpu/online", "0-3\n");
        for (cpu, cap) in [(0, 446), (1, 446), (2, 1024), (3, 871)] {
            f.write(
                &format!("devices/system/cpu/cpu{cpu}/cpu_capacity"),
                &format!("{cap}\n"),
            );
        }
        let infos = cpu_infos(f.path());
        assert_eq!(infos[0].capacity, Some(446));
        assert_eq!(infos[0].core_type.as_deref(), Some("efficiency"));
        assert_eq!(infos[2].core_type.as_deref(), Some("performance"));
        assert_eq!(infos[3].core_type.as_deref(), Some("efficiency"));

        // Equal capacities everywhere: there are no core types to tell apart.
        for cpu in 0..4 {
            f.write(
                &format!("devices/system/cpu/cpu{cpu}/cpu_capacity"),
                "1024\n",
            );
        }
        assert!(cpu_infos(f.path()).iter().all(|i| i.core_type.is_none()));
    }

    #[test]
    fn missing_sysfs_reports_not_available() {
        let f = Fixture::new("empty-sys");
        assert!(online_cpus(f.path()).is_empty());
        assert!(cpu_infos(f.path()).is_empty());
        assert_eq!(
            governor_summary(f.path()),
            "not available on this machine (no cpufreq)"
        );
        // Without the "online" file the cpuN directories still tell which CPUs exist.
        f.write("devices/system/cpu/cpu1/uevent", "")
            .write("devices/system/cpu/cpu0/uevent", "")
            .write("devices/system/cpu/cpufreq/ignored", "");
        assert_eq!(online_cpus(f.path()), vec![0, 1]);
    }

    #[test]
    fn live_machine() {
        let sys = Path::new(crate::DEFAULT_SYS_ROOT);
        assert!(
            sys.join("devices/system/cpu/online").exists(),
            "/sys is not mounted: this test reads the machine's CPUs there"
        );
        let cpus = online_cpus(sys);
        assert_eq!(cpus.len(), crate::sched::online_cpu_count());
        assert_eq!(cpu_infos(sys).len(), cpus.len());
        let has_cpufreq = sys.join("devices/system/cpu/cpu0/cpufreq").exists();
        let summary = governor_summary(sys);
        assert_eq!(
            summary == "not available on this machine (no cpufreq)",
            !has_cpufreq,
            "{summary}"
        );
    }

    #[test]
    fn smt_siblings_count_as_one_physical_core() {
        let f = crate::testutil::Fixture::new("smt");
        // 4 CPUs: 0/2 and 1/3 are SMT siblings; CPU 4 has no topology files.
        for (cpu, core) in [(0, 0), (1, 1), (2, 0), (3, 1)] {
            f.write(
                &format!("devices/system/cpu/cpu{cpu}/topology/core_id"),
                &format!("{core}\n"),
            );
            f.write(
                &format!("devices/system/cpu/cpu{cpu}/topology/physical_package_id"),
                "0\n",
            );
        }
        assert_eq!(physical_cores(f.path(), &[0, 1, 2, 3]), 2);
        assert_eq!(physical_cores(f.path(), &[0, 2]), 1);
        assert_eq!(physical_cores(f.path(), &[0, 1, 2, 3, 4]), 3);
        assert_eq!(physical_cores(f.path(), &[]), 0);
    }
}
