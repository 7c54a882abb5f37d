//! The wake primitive of the render cycle: a Linux futex on an atomic word; called by the driver
//! and the workers.

use std::sync::atomic::AtomicU32;

/// Blocks while `word` still holds `expected` (returns at once if it does not).
/// Spurious wake-ups are possible; callers re-check their condition.
#[inline]
pub fn wait(word: &AtomicU32, expected: u32) {
    // SAFETY: `word` is a live, aligned u32 for the duration of the call;
    // FUTEX_WAIT_PRIVATE only reads it and sleeps; a null timeout waits forever.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            std::ptr::null::<libc::timespec>(),
        );
    }
}

/// Blocks while `word` still holds `expected`, for at most `timeout_ns`
/// (relative, measured by the kernel on CLOCK_MONOTONIC). Returns at once if
/// the word differs; spurious and early wake-ups are possible, so callers
/// re-check their condition and their own deadline.
#[inline]
pub fn wait_timeout(word: &AtomicU32, expected: u32, timeout_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (timeout_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: `word` is a live, aligned u32 for the duration of the call and
    // `ts` a valid timespec on the stack; FUTEX_WAIT_PRIVATE only reads the
    // word and sleeps, for at most the relative timeout.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            &ts as *const libc::timespec,
        );
    }
}

/// Wakes every thread blocked in [`wait`] on `word`.
#[inline]
pub fn wake_all(word: &AtomicU32) {
    // SAFETY: `word` is a live, aligned u32; FUTEX_WAKE_PRIVATE does not touch memory.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            i32::MAX,
        );
    }
}
