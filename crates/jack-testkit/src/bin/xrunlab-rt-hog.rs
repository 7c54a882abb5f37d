//! A real-time hog for tests and `bench watch`: pinned to one CPU at SCHED_FIFO, it spins for a
//! while at a steady interval, starving whatever real-time thread of lower priority shares that
//! CPU (an audio server's own thread, in watch's "starved driver" tests). Runs on its main
//! thread only.
//!
//! Usage: `xrunlab-rt-hog CPU PRIORITY SPIN_US EVERY_MS [SECONDS]`. It prints `hog PID` once it
//! runs at its priority, then `spin NS` (CLOCK_MONOTONIC, the spin's start) for each spin, so a
//! test can match the xruns it caused. Exits 3 when SCHED_FIFO is refused, 4 when the affinity is.

use std::io::Write;

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn usage() -> ! {
    eprintln!("usage: xrunlab-rt-hog CPU PRIORITY SPIN_US EVERY_MS [SECONDS]");
    std::process::exit(2)
}

fn arg<T: std::str::FromStr>(args: &[String], i: usize) -> T {
    args.get(i)
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| usage())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !(4..=5).contains(&args.len()) {
        usage();
    }
    let cpu: usize = arg(&args, 0);
    let priority: i32 = arg(&args, 1);
    let spin_ns = arg::<u64>(&args, 2) * 1000;
    let every_ns = arg::<u64>(&args, 3) * 1_000_000;
    let seconds: u64 = if args.len() == 5 { arg(&args, 4) } else { 3600 };
    if cpu >= libc::CPU_SETSIZE as usize || every_ns == 0 {
        usage();
    }
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET stays within it (checked above).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            eprintln!("sched_setaffinity: {}", std::io::Error::last_os_error());
            std::process::exit(4);
        }
        let param = libc::sched_param {
            sched_priority: priority,
        };
        if libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) != 0 {
            eprintln!("sched_setscheduler: {}", std::io::Error::last_os_error());
            std::process::exit(3);
        }
    }
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "hog {}", std::process::id());
    let _ = out.flush();
    let end = monotonic_ns() + seconds * 1_000_000_000;
    // Absolute times (next += every), so the schedule never drifts.
    let mut next = monotonic_ns() + every_ns;
    while next < end {
        let ts = libc::timespec {
            tv_sec: (next / 1_000_000_000) as libc::time_t,
            tv_nsec: (next % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: `ts` is a valid timespec; the remainder pointer may be null with TIMER_ABSTIME.
        unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        let start = monotonic_ns();
        while monotonic_ns() - start < spin_ns {
            std::hint::spin_loop();
        }
        let _ = writeln!(out, "spin {start}");
        let _ = out.flush();
        next += every_ns;
    }
}
