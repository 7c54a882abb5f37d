//! Provenance: the facts every result file records about the run that produced it (tool,
//! command line, kernel, machine, governors, real-time limits, times). Collected on the main
//! thread before a run and finished after it.

use crate::cpu::{governor_summary, online_cpus};
use crate::read_parsed;
use crate::read_trimmed;
use serde::{Deserialize, Serialize};
use std::ffi::CStr;
use std::path::Path;
use std::time::SystemTime;

/// Where a result came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    /// Always "xrunlab".
    pub tool: String,
    /// The tool's version.
    pub version: String,
    /// argv, program name first.
    pub command_line: Vec<String>,
    /// uname sysname, release and version, e.g. "Linux 6.1.0-18-amd64 #1 SMP PREEMPT_DYNAMIC ...".
    pub kernel: String,
    /// uname machine, e.g. "x86_64".
    pub machine: String,
    /// uname nodename.
    pub hostname: String,
    /// /proc/cpuinfo "model name", or the Arm implementer/part codes.
    pub cpu_model: String,
    /// Online CPUs.
    pub cpu_count: usize,
    /// [`governor_summary`].
    pub governor: String,
    /// Whether the kernel is PREEMPT_RT (/sys/kernel/realtime is 1).
    pub preempt_rt: bool,
    /// RT throttling budget per period in us (-1 = throttling off); `None` if unreadable.
    pub rt_runtime_us: Option<i64>,
    /// When the run started, RFC 3339 UTC.
    pub start_time: String,
    /// When the run ended, RFC 3339 UTC; `None` until [`Provenance::finish`].
    pub end_time: Option<String>,
}

impl Provenance {
    /// Gathers the facts now; the roots are normally "/proc" and "/sys". The kernel, machine
    /// and hostname come from uname(2), the command line from `std::env::args`.
    pub fn collect(version: &str, proc_root: &Path, sys_root: &Path) -> Provenance {
        let uname = Uname::get();
        let cpus = online_cpus(sys_root);
        Provenance {
            tool: "xrunlab".to_owned(),
            version: version.to_owned(),
            command_line: std::env::args().collect(),
            kernel: uname
                .as_ref()
                .map(|u| format!("{} {} {}", u.sysname, u.release, u.version))
                .unwrap_or_else(|| "unknown".to_owned()),
            machine: uname
                .as_ref()
                .map_or_else(|| "unknown".to_owned(), |u| u.machine.clone()),
            hostname: uname
                .as_ref()
                .map_or_else(|| "unknown".to_owned(), |u| u.nodename.clone()),
            cpu_model: std::fs::read_to_string(proc_root.join("cpuinfo"))
                .ok()
                .and_then(|s| cpu_model(&s))
                .unwrap_or_else(|| "unknown".to_owned()),
            cpu_count: if cpus.is_empty() {
                crate::sched::online_cpu_count()
            } else {
                cpus.len()
            },
            governor: governor_summary(sys_root),
            preempt_rt: read_trimmed(&sys_root.join("kernel/realtime")).as_deref() == Some("1"),
            rt_runtime_us: read_parsed(&proc_root.join("sys/kernel/sched_rt_runtime_us")),
            start_time: now_rfc3339(),
            end_time: None,
        }
    }

    /// Records the end of the run.
    pub fn finish(&mut self) {
        self.end_time = Some(now_rfc3339());
    }
}

/// Current time as RFC 3339 UTC with milliseconds, e.g. "2026-11-23T08:26:00.123Z".
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

/// The CPU model from /proc/cpuinfo text: x86 "model name", else the Arm implementer and part
/// codes (Arm kernels print no model name), else None.
pub(crate) fn cpu_model(cpuinfo: &str) -> Option<String> {
    let field = |name: &str| {
        cpuinfo.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            (key.trim() == name && !value.trim().is_empty()).then(|| value.trim().to_owned())
        })
    };
    if let Some(model) = field("model name") {
        return Some(model);
    }
    match (field("CPU implementer"), field("CPU part")) {
        (Some(implementer), Some(part)) => {
            Some(format!("Arm CPU implementer {implementer} part {part}"))
        }
        _ => None,
    }
}

/// uname(2)'s fields as text.
pub(crate) struct Uname {
    pub(crate) sysname: String,
    pub(crate) nodename: String,
    pub(crate) release: String,
    pub(crate) version: String,
    pub(crate) machine: String,
}

impl Uname {
    pub(crate) fn get() -> Option<Uname> {
        // SAFETY: utsname is plain char arrays; all-zero is a valid value.
        let mut u: libc::utsname = unsafe { std::mem::zeroed() };
        // SAFETY: `u` is a live, writable utsname, which is all uname writes to.
        if unsafe { libc::uname(&mut u) } != 0 {
            return None;
        }
        let text = |field: &[libc::c_char]| {
            // Reinterpret as bytes; the kernel NUL-terminates each field, and if it somehow
            // did not, the lookup below fails and the field reads as empty instead of overrunning.
            let bytes: Vec<u8> = field.iter().map(|&c| c as u8).collect();
            CStr::from_bytes_until_nul(&bytes)
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        };
        Some(Uname {
            sysname: text(&u.sysname),
            nodename: text(&u.nodename),
            release: text(&u.release),
            version: text(&u.version),
            machine: text(&u.machine),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Fixture;

    #[test]
    fn cpu_model_from_x86_and_arm_cpuinfo() {
        let x86 = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\n";
        assert_eq!(cpu_model(x86).as_deref(), Some("AMD EPYC 7B13"));
        let arm = "processor\t: 0\nBogoMIPS\t: 48.00\nCPU implementer\t: 0x41\n\
                   CPU architecture: 8\nCPU variant\t: 0x3\nCPU part\t: 0xd0c\n";
        assert_eq!(
            cpu_model(arm).as_deref(),
            Some("Arm CPU implementer 0x41 part 0xd0c")
        );
        assert_eq!(cpu_model("processor\t: 0\n"), None);
    }

    #[test]
    fn collects_from_fixture_trees() {
        let proc_root = Fixture::new("prov-proc");
        let sys_root = Fixture::new("prov-sys");
        proc_root
            .write("cpuinfo", "model name\t: Test CPU 9000\n")
            .write("sys/kernel/sched_rt_runtime_us", "-1\n");
        sys_root
            .write("kernel/realtime", "1\n")
            .write("devices/system/cpu/online", "0-7\n")
            .write(
                "devices/system/cpu/cpu0/cpufreq/scaling_governor",
                "performance\n",
            );
        let mut p = Provenance::collect("1.2.3", proc_root.path(), sys_root.path());
        assert_eq!(p.tool, "xrunlab");
        assert_eq!(p.version, "1.2.3");
        assert_eq!(p.cpu_model, "Test CPU 9000");
        assert_eq!(p.cpu_count, 8);
        assert_eq!(p.governor, "performance: 0, no cpufreq: 1-7");
        assert!(p.preempt_rt);
        assert_eq!(p.rt_runtime_us, Some(-1));
        assert!(!p.command_line.is_empty());
        assert_eq!(p.end_time, None);
        p.finish();
        let end = p.end_time.as_deref().unwrap();
        let start = humantime::parse_rfc3339(&p.start_time).unwrap();
        assert!(humantime::parse_rfc3339(end).unwrap() >= start);

        let empty = Fixture::new("prov-empty");
        let p = Provenance::collect("0", empty.path(), empty.path());
        assert_eq!(p.cpu_model, "unknown");
        assert!(!p.preempt_rt);
        assert_eq!(p.rt_runtime_us, None);
        assert_eq!(p.governor, "not available on this machine (no cpufreq)");
        assert!(p.cpu_count >= 1);
    }

    #[test]
    fn live_machine() {
        let mut p = Provenance::collect(
            "test",
            Path::new(crate::DEFAULT_PROC_ROOT),
            Path::new(crate::DEFAULT_SYS_ROOT),
        );
        assert!(p.kernel.starts_with("Linux "), "{}", p.kernel);
        assert!(!p.machine.is_empty() && p.machine != "unknown");
        assert!(!p.cpu_model.is_empty() && p.cpu_model != "unknown");
        assert_eq!(p.cpu_count, crate::sched::online_cpu_count());
        if !Path::new("/sys/devices/system/cpu/cpu0/cpufreq").exists() {
            assert_eq!(p.governor, "not available on this machine (no cpufreq)");
        }
        // On these machines RT throttling is configured (950000 us per second by default).
        if Path::new("/proc/sys/kernel/sched_rt_runtime_us").exists() {
            assert!(p.rt_runtime_us.is_some());
        }
        p.finish();
        let json = serde_json::to_value(&p).unwrap();
        assert_eq!(json["tool"], "xrunlab");
        assert!(json["end_time"].is_string());
        assert!(json["start_time"].as_str().unwrap().ends_with('Z'));
    }
}
