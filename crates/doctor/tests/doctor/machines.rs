//! The doctor on five kinds of machine built as fixture trees: a hybrid Intel laptop, an Arm
//! big.LITTLE board, an AMD desktop, a bare VM like the development machines, and a
//! PREEMPT_RT kernel. Each gets the findings and fixes its files call for.

use crate::fixture::{expect, fix, probes, Machine};
use std::io::Write;
use xrunlab_doctor::{Options, Status};

const INTEL_RELEASE: &str = "6.8.0-45-generic";

/// A hybrid Intel laptop: 4 P-core threads (2 cores with SMT) and 4 E-cores, intel_pstate
/// with the powersave governor and EPP balance_power, one E-core capped, deep C10, RAPL, a
/// sound card sharing its IRQ, swap, a user outside the audio group without rtprio, and a
/// PREEMPT_DYNAMIC kernel booted into "voluntary".
fn intel_laptop() -> Machine {
    let m = Machine::base(8, INTEL_RELEASE);
    m.user(1000, &[1000], 0)
        .fs("etc/group", "root:x:0:\naudio:x:29:\nalice:x:1000:\n")
        .proc(
            "self/limits",
            "Max locked memory         8388608              8388608              bytes\n\
             Max realtime priority     0                    0\n",
        )
        .sys("devices/cpu_core/cpus", "0-3\n")
        .sys("devices/cpu_atom/cpus", "4-7\n")
        .sys("devices/system/cpu/smt/control", "on\n")
        .sys("devices/system/cpu/intel_pstate/no_turbo", "0\n")
        .sys("devices/system/cpu/cpuidle/current_driver", "intel_idle\n")
        .sys("class/powercap/intel-rapl:0/energy_uj", "123456789\n")
        .sys("kernel/debug/sched/preempt", "none (voluntary) full lazy\n")
        .proc(
            "swaps",
            "Filename\tType\tSize\tUsed\tPriority\n/dev/nvme0n1p3 partition 8388604 0 -2\n",
        )
        .proc(
            "interrupts",
            "            CPU0       CPU1\n\
             16:         77          3  IO-APIC  16-fasteoi   snd_hda_intel:card0, i801_smbus\n\
            131:       9765          0  IR-PCI-MSI 327680-edge      xhci_hcd\n",
        )
        .proc("irq/16/smp_affinity_list", "0-7\n")
        .process(812, "pipewire", &["/usr/bin/pipewire"])
        .process(640, "rtkit-daemon", &["/usr/libexec/rtkit-daemon"])
        .fs("usr/bin/pipewire", "")
        .fs("usr/libexec/rtkit-daemon", "")
        .boot_config(
            INTEL_RELEASE,
            &[
                "CONFIG_PREEMPT_DYNAMIC=y",
                "CONFIG_PREEMPT_VOLUNTARY=y",
                "CONFIG_HZ=1000",
                "CONFIG_NO_HZ_IDLE=y",
                "CONFIG_HIGH_RES_TIMERS=y",
                "CONFIG_IRQ_FORCED_THREADING=y",
                "CONFIG_UCLAMP_TASK=y",
            ],
        );
    for cpu in 0..8 {
        let (siblings, core) = match cpu {
            0 | 1 => ("0-1", 0),
            2 | 3 => ("2-3", 4),
            n => (["4", "5", "6", "7"][n - 4], 8 + n),
        };
        let t = format!("devices/system/cpu/cpu{cpu}/topology");
        m.sys(
            &format!("{t}/thread_siblings_list"),
            &format!("{siblings}\n"),
        )
        .sys(&format!("{t}/core_id"), &format!("{core}\n"));
        let hw_max = if cpu < 4 { 4_700_000 } else { 3_400_000 };
        let max = if cpu == 7 { 2_000_000 } else { hw_max };
        m.cpufreq(
            cpu,
            "intel_pstate",
            "powersave",
            "performance powersave",
            (400_000, max, hw_max),
        )
        .sys(
            &format!("devices/system/cpu/cpu{cpu}/cpufreq/energy_performance_preference"),
            "balance_power\n",
        )
        .idle_states(
            cpu,
            &[
                ("POLL", 0),
                ("C1", 1),
                ("C1E", 2),
                ("C6", 170),
                ("C8", 200),
                ("C10", 890),
            ],
        );
    }
    m
}

#[test]
fn hybrid_intel_laptop() {
    let m = intel_laptop();
    let r = m.report(&probes(None, true));

    let g = expect(
        &r,
        "cpu.governor",
        Status::Warn,
        &[
            "powersave on CPUs 0-7",
            "intel_pstate",
            "available: performance powersave",
        ],
    );
    assert!(fix(&g).starts_with(
        "echo performance | sudo tee /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor"
    ));
    let e = expect(
        &r,
        "cpu.epp",
        Status::Warn,
        &["balance_power on CPUs 0-7", "intel_pstate"],
    );
    assert!(fix(&e).contains("echo performance | sudo tee /sys/devices/system/cpu/cpu*/cpufreq/energy_performance_preference"));
    assert!(
        fix(&e).contains("intel_pstate sets EPP to performance by itself"),
        "{}",
        fix(&e)
    );
    let l = expect(
        &r,
        "cpu.freq_limits",
        Status::Warn,
        &["CPU 7 is capped at 2000 MHz of 3400 MHz"],
    );
    assert_eq!(
        fix(&l),
        "echo 3400000 | sudo tee /sys/devices/system/cpu/cpu7/cpufreq/scaling_max_freq"
    );
    let t = expect(
        &r,
        "cpu.topology",
        Status::Pass,
        &[
            "8 CPUs on 6 physical cores",
            "performance cores: CPUs 0-3",
            "efficiency cores: CPUs 4-7",
        ],
    );
    assert!(fix(&t).ends_with("--cpus 0-3"), "{}", fix(&t));
    let s = expect(
        &r,
        "cpu.smt",
        Status::Warn,
        &["siblings 0-1, 2-3 share cores"],
    );
    assert!(
        fix(&s).starts_with("run xrunlab with --cpus 0,2,4-7 (one CPU per core)"),
        "{}",
        fix(&s)
    );
    let i = expect(
        &r,
        "cpu.idle_states",
        Status::Warn,
        &["driver intel_idle", "C10 890 us", "33 %"],
    );
    assert!(
        fix(&i).contains("--pm-qos") && fix(&i).ends_with("cpuidle/state5/disable"),
        "{}",
        fix(&i)
    );
    expect(&r, "cpu.energy", Status::Pass, &["RAPL"]);
    expect(&r, "cpu.pm_qos", Status::Pass, &["writable"]);

    let p = expect(
        &r,
        "kernel.preempt",
        Status::Warn,
        &["voluntary (PREEMPT_DYNAMIC"],
    );
    assert!(fix(&p).starts_with("add preempt=full to GRUB_CMDLINE_LINUX_DEFAULT"));
    expect(
        &r,
        "kernel.config",
        Status::Pass,
        &["boot/config-6.8.0-45-generic"],
    );
    expect(&r, "kernel.hz", Status::Pass, &["1000 Hz"]);
    let ti = expect(&r, "kernel.threadirqs", Status::Warn, &["no threadirqs"]);
    assert!(fix(&ti).starts_with("add threadirqs"));

    let f = expect(
        &r,
        "rt.fifo",
        Status::Fail,
        &["no SCHED_FIFO priority could be set", "EPERM"],
    );
    assert!(
        fix(&f).contains("@audio - rtprio 95") && fix(&f).contains("usermod -aG audio alice"),
        "{}",
        fix(&f)
    );
    expect(&r, "rt.rtprio_limit", Status::Fail, &["soft 0, hard 0"]);
    expect(&r, "rt.memlock_limit", Status::Warn, &["8388608 bytes"]);
    let a = expect(
        &r,
        "rt.audio_group",
        Status::Warn,
        &["alice is in no group", "@audio rtprio 95"],
    );
    assert_eq!(fix(&a), "sudo usermod -aG audio alice, then log in again");
    expect(
        &r,
        "rt.rtkit",
        Status::Pass,
        &["rtkit-daemon runs (pid 640)"],
    );
    expect(&r, "rt.user", Status::Pass, &["alice (uid 1000)"]);

    let sh = expect(
        &r,
        "irq.shared",
        Status::Warn,
        &["IRQ 16: snd_hda_intel:card0, i801_smbus"],
    );
    assert!(sh.fix.is_some());
    expect(
        &r,
        "irq.sound",
        Status::Pass,
        &["IRQ 16 (snd_hda_intel:card0) on CPUs 0-7", "no IRQ thread"],
    );
    let sw = expect(
        &r,
        "system.swappiness",
        Status::Warn,
        &["vm.swappiness 60 with 1 swap device"],
    );
    assert!(fix(&sw).starts_with("sudo sysctl vm.swappiness=10"));
    expect(&r, "system.uclamp", Status::Pass, &["works"]);
    expect(&r, "audio.pipewire", Status::Pass, &["runs (pid 812)"]);
    expect(
        &r,
        "trace.perf_paranoid",
        Status::Warn,
        &["2: without CAP_PERFMON"],
    );

    assert!(r.failed(), "no SCHED_FIFO is a failure");
    assert_eq!(r.counts.fail, 2);
}

#[test]
fn arm_big_little_board() {
    let m = Machine::base(6, "6.1.0-rpi");
    m.proc(
        "cmdline",
        "console=ttyAMA0 root=/dev/mmcblk0p2 threadirqs\n",
    )
    .sys("devices/system/cpu/cpuidle/current_driver", "psci_idle\n")
    .remove("fs/boot");
    // The kernel configuration comes gzipped from /proc/config.gz, as on most Arm boards.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(b"CONFIG_PREEMPT=y\nCONFIG_HZ=250\nCONFIG_NO_HZ_IDLE=y\nCONFIG_HIGH_RES_TIMERS=y\n# CONFIG_UCLAMP_TASK is not set\n")
        .unwrap();
    std::fs::write(m.path().join("proc/config.gz"), gz.finish().unwrap()).unwrap();
    for cpu in 0..6 {
        let (capacity, cluster, hw_max) = if cpu < 4 {
            (446, 0, 1_800_000)
        } else {
            (1024, 1, 2_400_000)
        };
        m.sys(
            &format!("devices/system/cpu/cpu{cpu}/cpu_capacity"),
            &format!("{capacity}\n"),
        )
        .sys(
            &format!("devices/system/cpu/cpu{cpu}/topology/cluster_id"),
            &format!("{cluster}\n"),
        )
        .cpufreq(
            cpu,
            "cpufreq-dt",
            "schedutil",
            "conservative ondemand userspace powersave performance schedutil",
            (408_000, hw_max, hw_max),
        )
        .idle_states(
            cpu,
            &[("WFI", 1), ("cpu-sleep-0", 150), ("cluster-sleep-0", 1200)],
        );
    }
    let r = m.report(&probes(Some(95), false));

    let g = expect(
        &r,
        "cpu.governor",
        Status::Warn,
        &["schedutil on CPUs 0-5", "driver cpufreq-dt"],
    );
    assert!(fix(&g).starts_with(
        "echo performance | sudo tee /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor"
    ));
    expect(
        &r,
        "cpu.epp",
        Status::Pass,
        &["not used by driver cpufreq-dt"],
    );
    expect(
        &r,
        "cpu.freq_limits",
        Status::Pass,
        &[
            "no caps",
            "408-1800 MHz on CPUs 0-3",
            "408-2400 MHz on CPUs 4-5",
        ],
    );
    let t = expect(
        &r,
        "cpu.topology",
        Status::Pass,
        &[
            "2 cluster(s)",
            "performance cores: CPUs 4-5 (capacity 1024)",
            "efficiency cores: CPUs 0-3 (capacity 446)",
        ],
    );
    assert!(fix(&t).ends_with("--cpus 4-5"));
    expect(&r, "cpu.smt", Status::Pass, &["no CPU shares its core"]);
    let i = expect(
        &r,
        "cpu.idle_states",
        Status::Warn,
        &["cluster-sleep-0 takes 1200 us", "45 %"],
    );
    assert!(fix(&i).ends_with("cpuidle/state2/disable"), "{}", fix(&i));
    expect(&r, "cpu.energy", Status::Unknown, &["no RAPL"]);
    expect(&r, "kernel.config", Status::Pass, &["config.gz"]);
    expect(
        &r,
        "kernel.preempt",
        Status::Pass,
        &["\"full\", fixed at build time"],
    );
    expect(
        &r,
        "kernel.threadirqs",
        Status::Pass,
        &["threadirqs is on the kernel command line"],
    );
    let u = expect(
        &r,
        "system.uclamp",
        Status::Warn,
        &["CONFIG_UCLAMP_TASK missing"],
    );
    assert_eq!(fix(&u), "use a kernel built with CONFIG_UCLAMP_TASK=y");
    expect(
        &r,
        "rt.fifo",
        Status::Pass,
        &["up to priority 95", "99: refused: EPERM"],
    );
    expect(&r, "rt.rtprio_limit", Status::Pass, &["soft 95, hard 95"]);
    expect(
        &r,
        "rt.audio_group",
        Status::Pass,
        &["alice is in audio", "rtprio 95"],
    );
    expect(
        &r,
        "rt.rtkit",
        Status::Pass,
        &["not needed: SCHED_FIFO is obtainable directly"],
    );
    assert!(!r.failed(), "{}", r.text());

    // A 64-frame buffer lasts 1333 us: the 1200 us cluster sleep is then 90 % of it.
    let small = m.report_with(
        &probes(Some(95), false),
        Options {
            buffer_frames: 64,
            ..Options::default()
        },
    );
    expect(
        &small,
        "cpu.idle_states",
        Status::Fail,
        &["64-frame buffer", "90 %"],
    );
    assert!(small.failed());
}

#[test]
fn amd_desktop() {
    let release = "6.11.4-301.fc41.x86_64";
    let m = Machine::base(16, release);
    m.proc(
        "cmdline",
        &format!(
            "BOOT_IMAGE=(hd0,gpt2)/vmlinuz-{release} root=UUID=1 ro rhgb quiet preempt=full\n"
        ),
    )
    .sys("devices/system/cpu/smt/control", "on\n")
    .sys("devices/system/cpu/cpufreq/boost", "0\n")
    .sys("devices/system/cpu/cpuidle/current_driver", "acpi_idle\n")
    .sys("class/powercap/intel-rapl:0/energy_uj", "987654\n")
    .proc(
        "interrupts",
        "            CPU0       CPU1\n\
             80:        500        100  IR-PCI-MSI 1050624-edge      snd_hda_intel:card1\n\
             81:        900          0  IR-PCI-MSI 1050625-edge      xhci_hcd\n",
    )
    .proc("irq/80/smp_affinity_list", "0-15\n")
    .proc("157/comm", "irq/80-snd_hda_intel:card1\n")
    // stat: pid (comm) state, then fields 4..; field 40 (rt_priority) = 50, 41 (policy) = 1.
    .proc(
        "157/stat",
        &format!(
            "157 (irq/80-snd_hda_intel:card1) S {} 50 1 0 0 0 0 0 0 0 0 0\n",
            ["0"; 36].join(" ")
        ),
    )
    .process(
        4242,
        "jackd",
        &[
            "jackd", "-R", "-P", "80", "-d", "alsa", "-d", "hw:1", "-p", "128", "-r", "48000",
        ],
    )
    .fs("usr/bin/jackd", "")
    .boot_config(
        release,
        &[
            "CONFIG_PREEMPT_DYNAMIC=y",
            "CONFIG_PREEMPT_VOLUNTARY=y",
            "CONFIG_HZ=1000",
            "CONFIG_NO_HZ_FULL=y",
            "CONFIG_HIGH_RES_TIMERS=y",
            "CONFIG_UCLAMP_TASK=y",
        ],
    );
    for cpu in 0..16 {
        let core = cpu % 8;
        let t = format!("devices/system/cpu/cpu{cpu}/topology");
        m.sys(&format!("{t}/core_id"), &format!("{core}\n"))
            .sys(
                &format!("{t}/thread_siblings_list"),
                &format!("{core},{}\n", core + 8),
            )
            .cpufreq(
                cpu,
                "amd-pstate-epp",
                "powersave",
                "performance powersave",
                (545_000, 5_700_000, 5_700_000),
            )
            .sys(
                &format!("devices/system/cpu/cpu{cpu}/cpufreq/energy_performance_preference"),
                "balance_performance\n",
            )
            .idle_states(cpu, &[("POLL", 0), ("C1", 1), ("C2", 18), ("C3", 350)]);
    }
    let r = m.report(&probes(Some(95), true));

    let g = expect(
        &r,
        "cpu.governor",
        Status::Warn,
        &["powersave on CPUs 0-15", "amd-pstate-epp"],
    );
    assert!(fix(&g).contains("xrunlab doctor --apply governor"));
    let e = expect(
        &r,
        "cpu.epp",
        Status::Warn,
        &["balance_performance on CPUs 0-15"],
    );
    assert!(
        fix(&e).contains("amd-pstate-epp sets EPP to performance by itself"),
        "{}",
        fix(&e)
    );
    let l = expect(&r, "cpu.freq_limits", Status::Warn, &["boost is off"]);
    assert_eq!(
        fix(&l),
        "echo 1 | sudo tee /sys/devices/system/cpu/cpufreq/boost"
    );
    let s = expect(&r, "cpu.smt", Status::Warn, &["siblings 0,8, 1,9"]);
    assert!(
        fix(&s).starts_with("run xrunlab with --cpus 0-7 (one CPU per core)"),
        "{}",
        fix(&s)
    );
    expect(
        &r,
        "cpu.topology",
        Status::Pass,
        &["16 CPUs on 8 physical cores", "one core type"],
    );
    let i = expect(&r, "cpu.idle_states", Status::Warn, &["C3 350 us", "13 %"]);
    assert!(fix(&i).ends_with("cpuidle/state3/disable"));
    expect(&r, "cpu.energy", Status::Pass, &["RAPL"]);
    expect(
        &r,
        "kernel.preempt",
        Status::Pass,
        &["full, from preempt=full on the kernel command line"],
    );
    expect(&r, "kernel.nohz", Status::Pass, &["NO_HZ_FULL"]);
    expect(
        &r,
        "audio.jack",
        Status::Pass,
        &["jackd runs (pid 4242): jackd -R -P 80 -d alsa"],
    );
    expect(
        &r,
        "irq.shared",
        Status::Pass,
        &["none shared: IRQ 80 snd_hda_intel:card1, IRQ 81 xhci_hcd"],
    );
    let snd = expect(
        &r,
        "irq.sound",
        Status::Warn,
        &[
            "IRQ 80 (snd_hda_intel:card1) on CPUs 0-15",
            "pid 157",
            "FIFO 50",
        ],
    );
    assert!(
        fix(&snd).starts_with("sudo chrt -f -p 80 157"),
        "{}",
        fix(&snd)
    );
    assert!(!r.failed(), "{}", r.text());
}

/// Like the development machines: 2 vCPUs, no cpufreq, haltpoll, no RAPL, no SMT, a
/// PREEMPT_DYNAMIC kernel whose mode debugfs will not tell, root, no sound card.
pub fn bare_vm() -> Machine {
    let release = "6.1.0-18-amd64";
    let m = Machine::base(2, release);
    m.user(0, &[], 0x1ff_ffff_ffff)
        .proc(
            "self/limits",
            "Max locked memory         8388608              8388608              bytes\n\
             Max realtime priority     0                    0\n",
        )
        .proc(
            "cmdline",
            "console=ttyS0 quiet haltpoll.guest_halt_poll_ns=0\n",
        )
        .sys("devices/system/cpu/smt/control", "notsupported\n")
        .sys("devices/system/cpu/cpuidle/current_driver", "haltpoll\n")
        .boot_config(
            release,
            &[
                "CONFIG_PREEMPT_DYNAMIC=y",
                "CONFIG_PREEMPT_NONE=y",
                "CONFIG_HZ=250",
                "CONFIG_NO_HZ_IDLE=y",
                "CONFIG_HIGH_RES_TIMERS=y",
                "# CONFIG_UCLAMP_TASK is not set",
            ],
        );
    for cpu in 0..2 {
        m.idle_states(cpu, &[("POLL", 0), ("haltpoll idle", 1)]);
    }
    m
}

#[test]
fn bare_vm_like_the_development_machines() {
    let m = bare_vm();
    let r = m.report(&probes(Some(99), false));
    for id in ["cpu.governor", "cpu.epp", "cpu.freq_limits"] {
        let f = expect(&r, id, Status::Unknown, &["no cpufreq on this machine"]);
        assert_eq!(f.fix, None, "{id}: nothing to set inside a VM");
    }
    let p = expect(
        &r,
        "kernel.preempt",
        Status::Unknown,
        &["most likely \"none\"", "sched/preempt is missing"],
    );
    assert!(fix(&p).starts_with("add preempt=full"));
    expect(
        &r,
        "cpu.idle_states",
        Status::Pass,
        &["driver haltpoll", "haltpoll idle 1 us"],
    );
    expect(&r, "cpu.smt", Status::Pass, &["not supported by this CPU"]);
    expect(&r, "cpu.energy", Status::Unknown, &["estimate"]);
    expect(&r, "rt.user", Status::Warn, &["running as root"]);
    expect(&r, "rt.rtprio_limit", Status::Pass, &["CAP_SYS_NICE"]);
    expect(&r, "rt.memlock_limit", Status::Pass, &["CAP_IPC_LOCK"]);
    expect(&r, "rt.audio_group", Status::Pass, &["root needs no group"]);
    expect(
        &r,
        "irq.shared",
        Status::Pass,
        &["no sound or USB controller IRQs"],
    );
    expect(&r, "irq.sound", Status::Unknown, &["no sound card IRQ"]);
    expect(&r, "trace.perf_paranoid", Status::Pass, &["CAP_PERFMON"]);
    expect(
        &r,
        "audio.pipewire_quantum",
        Status::Pass,
        &["not installed"],
    );
    assert!(!r.failed(), "{}", r.text());
}

#[test]
fn preempt_rt_kernel() {
    let release = "6.1.0-18-rt-amd64";
    let m = Machine::base(4, release);
    m.sys("kernel/realtime", "1\n")
        .proc("sys/kernel/sched_rt_runtime_us", "-1\n")
        .boot_config(
            release,
            &[
                "CONFIG_PREEMPT_RT=y",
                "CONFIG_HZ=1000",
                "CONFIG_NO_HZ_FULL=y",
                "CONFIG_HIGH_RES_TIMERS=y",
            ],
        );
    let r = m.report(&probes(Some(95), true));
    expect(&r, "kernel.preempt", Status::Pass, &["PREEMPT_RT"]);
    let t = expect(
        &r,
        "kernel.threadirqs",
        Status::Pass,
        &["forced by PREEMPT_RT"],
    );
    assert!(t.source.ends_with("kernel/realtime"));
    expect(
        &r,
        "kernel.rt_throttling",
        Status::Pass,
        &["off (sched_rt_runtime_us = -1)"],
    );
    expect(&r, "kernel.hz", Status::Pass, &["1000 Hz"]);
    assert!(!r.failed(), "{}", r.text());
}

#[test]
fn pipewire_configuration_and_vm_overrides() {
    let m = bare_vm();
    m.fs("usr/bin/pipewire", "")
        .fs(
            "usr/share/pipewire/pipewire.conf",
            "context.properties = {\n    #default.clock.quantum = 1024\n    default.clock.min-quantum = 16\n    vm.overrides = {\n        default.clock.min-quantum = 1024\n    }\n}\n\
             context.modules = [\n    { name = libpipewire-module-rt\n        args = {\n            nice.level = -11\n            rt.prio = 88\n        }\n    }\n]\n",
        )
        .fs("etc/security/limits.d/95-pipewire.conf", "@pipewire - rtprio 95\n");
    let r = m.report(&probes(Some(99), false));
    expect(
        &r,
        "audio.pipewire_quantum",
        Status::Pass,
        &[
            "quantum 1024 (PipeWire's default)",
            "min-quantum 16",
            "PIPEWIRE_QUANTUM=128/48000",
            "vm.overrides are not applied",
        ],
    );
    expect(
        &r,
        "audio.pipewire_rt",
        Status::Pass,
        &["rt.prio 88", "nice.level -11", "@pipewire - rtprio 95"],
    );

    // With a VM vendor in DMI, PipeWire applies vm.overrides: 128 frames are then out of reach.
    m.sys("class/dmi/id/sys_vendor", "QEMU\n");
    let r = m.report(&probes(Some(99), false));
    let q = expect(
        &r,
        "audio.pipewire_quantum",
        Status::Warn,
        &["min-quantum 1024 (VM override)", "cannot get 128 frames"],
    );
    assert!(
        fix(&q).contains("default.clock.min-quantum = 128")
            && fix(&q).contains("/etc/pipewire/pipewire.conf.d/")
    );

    // An /etc copy replaces the shipped file; a drop-in then overrides it.
    m.remove("sys/class/dmi")
        .fs(
            "etc/pipewire/pipewire.conf",
            "context.properties = {\n  default.clock.quantum = 512\n}\n",
        )
        .fs(
            "etc/pipewire/pipewire.conf.d/10-rate.conf",
            "context.properties = {\n  default.clock.rate = 96000\n}\n",
        );
    let r = m.report(&probes(Some(99), false));
    expect(
        &r,
        "audio.pipewire_quantum",
        Status::Pass,
        &[
            "rate 96000 Hz,",
            "quantum 512 (5.3 ms)",
            "min-quantum 32 (PipeWire's default)",
        ],
    );
    let rt = expect(
        &r,
        "audio.pipewire_rt",
        Status::Warn,
        &["no configuration file loads libpipewire-module-rt"],
    );
    assert!(rt.fix.is_some());
}
