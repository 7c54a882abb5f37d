//! The machine-wide settings drift follows, read from sysfs under a root path: each cpufreq
//! policy's governor and energy preference, the platform profile, the online CPUs and the
//! thermal-throttle counters. A file that is missing (no cpufreq in a VM, no ACPI profile) is
//! simply not followed. Read on the drift thread.

use std::collections::BTreeMap;
use std::path::Path;

fn read_trimmed(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
}

/// Directory entries of `dir` whose names start with `prefix`, sorted.
fn entries(dir: &Path, prefix: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.starts_with(prefix))
        .collect();
    names.sort();
    names
}

/// Each cpufreq policy's `scaling_governor` and `energy_performance_preference`, keyed
/// `policyN governor` and `policyN epp`.
pub fn cpufreq(root: &Path) -> BTreeMap<String, String> {
    let dir = root.join("sys/devices/system/cpu/cpufreq");
    let mut out = BTreeMap::new();
    for policy in entries(&dir, "policy") {
        for (file, key) in [
            ("scaling_governor", "governor"),
            ("energy_performance_preference", "epp"),
        ] {
            if let Some(v) = read_trimmed(&dir.join(&policy).join(file)) {
                out.insert(format!("{policy} {key}"), v);
            }
        }
    }
    out
}

/// `/sys/firmware/acpi/platform_profile`.
pub fn platform_profile(root: &Path) -> Option<String> {
    read_trimmed(&root.join("sys/firmware/acpi/platform_profile"))
}

/// `/sys/devices/system/cpu/online`, as the kernel writes it (`0-3,5`).
pub fn online(root: &Path) -> Option<String> {
    read_trimmed(&root.join("sys/devices/system/cpu/online"))
}

/// Each CPU's thermal-throttle counters, keyed `cpuN core` and `cpuN package`.
pub fn throttle(root: &Path) -> BTreeMap<String, u64> {
    let dir = root.join("sys/devices/system/cpu");
    let mut out = BTreeMap::new();
    for cpu in entries(&dir, "cpu") {
        if !cpu[3..].chars().all(|c| c.is_ascii_digit()) || cpu.len() == 3 {
            continue;
        }
        for (file, key) in [
            ("core_throttle_count", "core"),
            ("package_throttle_count", "package"),
        ] {
            let path = dir.join(&cpu).join("thermal_throttle").join(file);
            if let Some(n) = read_trimmed(&path).and_then(|s| s.parse().ok()) {
                out.insert(format!("{cpu} {key}"), n);
            }
        }
    }
    out
}
