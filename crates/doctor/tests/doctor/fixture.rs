//! Fixture machines: a temporary directory holding proc/, sys/ and fs/ trees that tests fill
//! with the files a real machine of some kind has, plus hand-made syscall probe results.

use std::path::Path;
use xrunlab_doctor::{Finding, Options, Probes, Report, Roots, Status};
use xrunlab_sys::Outcome;

pub struct Machine {
    dir: tempfile::TempDir,
}

impl Machine {
    /// An empty machine: no file at all.
    pub fn empty() -> Machine {
        let dir = tempfile::tempdir().expect("a temporary directory");
        for sub in ["proc", "sys", "fs"] {
            std::fs::create_dir_all(dir.path().join(sub)).unwrap();
        }
        Machine { dir }
    }

    /// A machine with the files every Linux system has, set to unremarkable values: an
    /// unprivileged user "alice" (uid 1000) in the audio group that limits.d grants rtprio 95
    /// and unlimited memlock, no swap, RT throttling at 95 %, high-resolution timers, tracefs
    /// mounted with its sched and irq events, `cpus` online CPUs.
    pub fn base(cpus: usize, release: &str) -> Machine {
        let m = Machine::empty();
        m.user(1000, &[29], 0)
            .proc(
                "self/limits",
                "Limit                     Soft Limit           Hard Limit           Units\n\
                 Max locked memory         unlimited            unlimited            bytes\n\
                 Max realtime priority     95                   95\n\
                 Max realtime timeout      200000               200000               us\n",
            )
            .proc("cmdline", &format!("BOOT_IMAGE=/boot/vmlinuz-{release} root=UUID=1 ro quiet\n"))
            .proc("sys/kernel/osrelease", &format!("{release}\n"))
            .proc("sys/kernel/sched_rt_runtime_us", "950000\n")
            .proc("sys/kernel/sched_rt_period_us", "1000000\n")
            .proc("sys/kernel/perf_event_paranoid", "2\n")
            .proc("sys/vm/swappiness", "60\n")
            .proc("swaps", "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n")
            .proc(
                "mounts",
                "/dev/nvme0n1p2 / ext4 rw,relatime 0 0\n\
                 tracefs /sys/kernel/tracing tracefs rw,nosuid,nodev,noexec,relatime 0 0\n",
            )
            .proc("filesystems", "nodev\tsysfs\nnodev\ttracefs\n\text4\n")
            .proc(
                "timer_list",
                "Timer List Version: v0.9\ncpu: 0\n .resolution: 1 nsecs\n",
            )
            .proc(
                "interrupts",
                "           CPU0\n   0:         20   IO-APIC   2-edge      timer\nLOC:     123   Local timer interrupts\n",
            )
            .sys("devices/system/cpu/online", &format!("0-{}\n", cpus - 1))
            .sys("devices/system/clocksource/clocksource0/current_clocksource", "tsc\n")
            .sys("devices/system/clocksource/clocksource0/available_clocksource", "tsc hpet acpi_pm\n")
            .sys("devices/system/cpu/vulnerabilities/meltdown", "Not affected\n")
            .sys("devices/system/cpu/vulnerabilities/spectre_v2", "Mitigation: Enhanced / Automatic IBRS\n")
            .fs("etc/passwd", "root:x:0:0:root:/root:/bin/bash\nalice:x:1000:1000::/home/alice:/bin/bash\n")
            .fs("etc/group", "root:x:0:\naudio:x:29:alice\nalice:x:1000:\n")
            .fs("etc/security/limits.d/audio.conf", "@audio   -  rtprio     95\n@audio   -  memlock    unlimited\n")
            .fs("dev/cpu_dma_latency", "");
        for event in xrunlab_doctor::checks::TRACE_EVENTS {
            m.sys(
                &format!("kernel/tracing/events/{event}/format"),
                "name: x\n",
            );
        }
        for cpu in 0..cpus {
            let t = format!("devices/system/cpu/cpu{cpu}/topology");
            m.sys(&format!("{t}/core_id"), &format!("{cpu}\n"))
                .sys(&format!("{t}/physical_package_id"), "0\n")
                .sys(&format!("{t}/thread_siblings_list"), &format!("{cpu}\n"));
        }
        m
    }

    /// The identity in proc/self/status: effective uid, supplementary groups, capabilities.
    pub fn user(&self, uid: u32, groups: &[u32], cap_eff: u64) -> &Machine {
        let groups: Vec<String> = groups.iter().map(u32::to_string).collect();
        self.proc(
            "self/status",
            &format!(
                "Name:\tdoctor\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\nGid:\t{uid}\t{uid}\t{uid}\t{uid}\nGroups:\t{}\nCapEff:\t{cap_eff:016x}\n",
                groups.join(" ")
            ),
        )
    }

    fn write(&self, rel: &str, text: &str) -> &Machine {
        let p = self.dir.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
        self
    }

    pub fn proc(&self, rel: &str, text: &str) -> &Machine {
        self.write(&format!("proc/{rel}"), text)
    }

    pub fn sys(&self, rel: &str, text: &str) -> &Machine {
        self.write(&format!("sys/{rel}"), text)
    }

    pub fn fs(&self, rel: &str, text: &str) -> &Machine {
        self.write(&format!("fs/{rel}"), text)
    }

    pub fn remove(&self, rel: &str) -> &Machine {
        let p = self.dir.path().join(rel);
        let _ = std::fs::remove_file(&p).or_else(|_| std::fs::remove_dir_all(&p));
        self
    }

    /// A running process: proc/PID/comm and cmdline (words joined by NUL).
    pub fn process(&self, pid: u32, comm: &str, argv: &[&str]) -> &Machine {
        self.proc(&format!("{pid}/comm"), &format!("{comm}\n"))
            .proc(&format!("{pid}/cmdline"), &(argv.join("\0") + "\0"))
    }

    /// cpufreq files of one CPU; frequencies (scaling min, scaling max, hardware max) in kHz.
    pub fn cpufreq(
        &self,
        cpu: usize,
        driver: &str,
        governor: &str,
        available: &str,
        (min_khz, max_khz, hw_max_khz): (u64, u64, u64),
    ) -> &Machine {
        let d = format!("devices/system/cpu/cpu{cpu}/cpufreq");
        self.sys(&format!("{d}/scaling_driver"), &format!("{driver}\n"))
            .sys(&format!("{d}/scaling_governor"), &format!("{governor}\n"))
            .sys(
                &format!("{d}/scaling_available_governors"),
                &format!("{available}\n"),
            )
            .sys(&format!("{d}/scaling_min_freq"), &format!("{min_khz}\n"))
            .sys(&format!("{d}/scaling_max_freq"), &format!("{max_khz}\n"))
            .sys(&format!("{d}/cpuinfo_max_freq"), &format!("{hw_max_khz}\n"))
            .sys(&format!("{d}/scaling_cur_freq"), &format!("{min_khz}\n"))
    }

    /// cpuidle states of one CPU: (name, exit latency us).
    pub fn idle_states(&self, cpu: usize, states: &[(&str, u64)]) -> &Machine {
        for (k, (name, latency)) in states.iter().enumerate() {
            let d = format!("devices/system/cpu/cpu{cpu}/cpuidle/state{k}");
            self.sys(&format!("{d}/name"), &format!("{name}\n"))
                .sys(&format!("{d}/latency"), &format!("{latency}\n"))
                .sys(&format!("{d}/disable"), "0\n")
                .sys(&format!("{d}/usage"), "100\n");
        }
        self
    }

    /// A kernel configuration at fs/boot/config-RELEASE.
    pub fn boot_config(&self, release: &str, lines: &[&str]) -> &Machine {
        self.fs(
            &format!("boot/config-{release}"),
            &(lines.join("\n") + "\n"),
        )
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn roots(&self) -> Roots {
        Roots {
            proc: self.dir.path().join("proc"),
            sys: self.dir.path().join("sys"),
            fs: self.dir.path().join("fs"),
        }
    }

    pub fn report(&self, probes: &Probes) -> Report {
        self.report_with(probes, Options::default())
    }

    pub fn report_with(&self, probes: &Probes, options: Options) -> Report {
        xrunlab_doctor::report::build(&self.roots(), probes, options)
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(rel)).unwrap()
    }
}

/// Probes of a user whose limits allow `priority` at most (None: no real-time at all).
pub fn probes(priority: Option<u8>, uclamp: bool) -> Probes {
    let mut attempts = Vec::new();
    if priority != Some(99) {
        attempts.push("99: refused: EPERM: operation not permitted (need CAP_SYS_NICE or an RLIMIT_RTPRIO); running with SCHED_OTHER nice 0".to_owned());
    }
    if let Some(p) = priority {
        attempts.push(format!("{p}: obtained (SCHED_FIFO {p})"));
    }
    Probes {
        fifo_max_priority: priority,
        fifo_attempts: attempts,
        uclamp: if uclamp {
            Outcome::Applied {
                detail: "uclamp_min 512 of 1024".to_owned(),
            }
        } else {
            Outcome::Unsupported {
                reason: "not supported by this kernel (CONFIG_UCLAMP_TASK missing)".to_owned(),
            }
        },
        history: None,
    }
}

/// The finding `id`, failing the test with the report when it is missing.
pub fn finding<'a>(report: &'a Report, id: &str) -> &'a Finding {
    report
        .get(id)
        .unwrap_or_else(|| panic!("no finding {id} in:\n{}", report.text()))
}

/// Asserts a finding's status, and that its reason contains each of `words`.
pub fn expect(report: &Report, id: &str, status: Status, words: &[&str]) -> Finding {
    let f = finding(report, id).clone();
    assert_eq!(f.status, status, "{id}: {f:#?}");
    for w in words {
        assert!(
            f.reason.contains(w),
            "{id}: reason lacks {w:?}: {}",
            f.reason
        );
    }
    f
}

/// The finding's fix, failing when there is none.
pub fn fix(f: &Finding) -> &str {
    f.fix
        .as_deref()
        .unwrap_or_else(|| panic!("{}: no fix: {f:#?}", f.id))
}
