//! Measures the CPU cost of the frequency sampler: it samples a fixture tree of N CPUs (on
//! the temp dir) at 10 Hz for a few seconds and prints the thread CPU time it used. Where this
//! machine has cpufreq, it samples the real /sys too; where it has not, it times pread() of a
//! real sysfs attribute (cpuidle usage) as the stand-in for one scaling_cur_freq read.
//! Runs on the main thread; the sampler has its own.
//!
//! `cargo run --release -p xrunlab-sys --example freq_sampler_cost [SECONDS] [CPUS]`

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};
use xrunlab_sys::run_system::RUN_FREQ_INTERVAL;
use xrunlab_sys::FreqSampler;

fn report(what: &str, sys_root: &Path, seconds: u64) {
    match FreqSampler::start(sys_root, RUN_FREQ_INTERVAL) {
        Ok(s) => {
            std::thread::sleep(Duration::from_secs(seconds));
            let t = s.stop();
            println!(
                "{what}: {} CPUs, {} samples in {:.1} s: {:.2} ms of CPU, {:.4} % of one CPU, {:.1} us per sample",
                t.cpus.len(),
                t.samples.len(),
                t.elapsed_s,
                t.sampler_cpu_ms,
                t.sampler_cpu_pct(),
                t.sampler_cpu_ms * 1e3 / t.samples.len().max(1) as f64
            );
        }
        Err(e) => println!("{what}: {e}"),
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let seconds: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let cpus: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(64);

    let root = std::env::temp_dir().join(format!("xrunlab-freq-cost-{}", std::process::id()));
    std::fs::create_dir_all(root.join("devices/system/cpu")).unwrap();
    std::fs::write(
        root.join("devices/system/cpu/online"),
        format!("0-{}\n", cpus - 1),
    )
    .unwrap();
    for cpu in 0..cpus {
        let d = root.join(format!("devices/system/cpu/cpu{cpu}/cpufreq"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("scaling_cur_freq"), "2400000\n").unwrap();
    }
    report("fixture tree (tmp files, not sysfs)", &root, seconds);
    let _ = std::fs::remove_dir_all(&root);

    report("this machine's /sys", Path::new("/sys"), seconds);

    let attr = Path::new("/sys/devices/system/cpu/cpu0/cpuidle/state0/usage");
    if let Ok(f) = std::fs::File::open(attr) {
        let mut buf = [0u8; 32];
        let n = 100_000;
        let t0 = Instant::now();
        for _ in 0..n {
            let _ = f.read_at(&mut buf, 0);
        }
        println!(
            "one pread() of a real sysfs attribute ({}): {:.2} us (wall clock, {n} reads)",
            attr.display(),
            t0.elapsed().as_secs_f64() * 1e6 / f64::from(n)
        );
    }
}
