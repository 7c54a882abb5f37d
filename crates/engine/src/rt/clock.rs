//! Clocks and the low-energy wait used by audio threads: CLOCK_MONOTONIC (JACK's clock too), thread
//! CPU time, current CPU, and spinning until a time.

/// Nanoseconds on CLOCK_MONOTONIC (vDSO, no syscall): the time base of every
/// record. Devices whose own clock differs (JACK2 stamps cycles with
/// CLOCK_MONOTONIC_RAW) convert to it before calling the engine.
#[inline]
pub fn now_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CPU time consumed by the calling thread, in nanoseconds.
#[inline]
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Nanoseconds on any clock (0 if the kernel refuses the clock id).
#[inline]
pub fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; clock ids are constants the kernel knows.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// The CPU the calling thread runs on as a record stores it (-1 when the kernel
/// cannot say): `xrunlab_sys::sched::current_cpu`, the one place that asks.
#[inline]
pub fn current_cpu() -> i16 {
    xrunlab_sys::sched::current_cpu()
        .and_then(|c| i16::try_from(c).ok())
        .unwrap_or(-1)
}

/// Keeps the core busy with the CPU's low-energy wait hint (x86 `pause`,
/// arm64 `yield`) until CLOCK_MONOTONIC reaches `until_ns`. This is
/// AudioPerfLab's minimum-load padding; it never sleeps.
#[inline]
pub fn spin_until(until_ns: u64) {
    while now_ns() < until_ns {
        for _ in 0..16 {
            std::hint::spin_loop();
        }
    }
}

/// Sleeps until CLOCK_MONOTONIC reaches `deadline_ns` (absolute, so the
/// schedule never drifts). The simulated device's clock thread uses it to
/// stand in for the hardware interrupt that wakes a real driver thread; a
/// worker uses it only when a hang is injected (fault injection).
pub fn sleep_until(deadline_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
    };
    loop {
        // SAFETY: `ts` is a valid timespec; a null remainder is allowed with TIMER_ABSTIME.
        let rc = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        if rc != libc::EINTR {
            return;
        }
    }
}
