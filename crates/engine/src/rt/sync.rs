//! The cycle protocol's synchronization primitives in one place, so the race checker can swap them;
//! used on audio threads.
//!
//! Normally these are the standard atomics, a thin `UnsafeCell` and a futex
//! word that sleeps in [`super::futex`]. Built with `RUSTFLAGS="--cfg loom"`
//! they are [loom](https://docs.rs/loom)'s, and `rt/loom_model.rs` explores
//! the driver/worker hand-off of `cycle.rs` over every interleaving (bounded
//! by `LOOM_MAX_PREEMPTIONS`) and over the weak memory orderings loom models.
//! Nothing else in `rt/` names `cfg(loom)`.
//!
//! # What the loom futex models, and what it does not
//! A [`FutexWord`] under loom is the word plus a loom `Mutex` and `Condvar`:
//! `wait` takes the mutex, re-reads the word (SeqCst) and sleeps on the
//! condvar only if it still holds the expected value; `wake_all` takes the
//! mutex and notifies every sleeper. That is the futex contract the protocol
//! relies on: a waker that changed the word before calling wake cannot be
//! missed by a waiter, because the waiter either reads the new value or is
//! already asleep when the wake comes. Loom reports a lost wake-up as a
//! deadlock (every thread blocked).
//!
//! Not modelled: the kernel's own ordering is stronger than the model's
//! (a full barrier in `futex_wait`), so the model may report races the
//! kernel would hide, never the other way round; spurious wake-ups (the
//! code re-checks after every wait, so they only add schedules); and time.
//! `wait_timeout` sleeps like `wait`: the model's timer thread delivers the
//! timeout by moving the model's clock past the driver's limit and waking the
//! word, as the kernel's timer would wake the sleeper. A timeout that fires
//! between the driver's clock check and its sleep is missed in the model
//! (the kernel's relative timeout starts inside the syscall and cannot be);
//! the driver is then woken by the last worker instead. The real-time
//! properties (how long anything takes, the deadline arithmetic of
//! `driver.rs`) are the engine tests' job, not the model's.

use std::ops::Deref;

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize};

/// A 32-bit atomic that threads can sleep on until it changes (a futex word).
pub(crate) struct FutexWord {
    word: AtomicU32,
    #[cfg(loom)]
    sleepers: (loom::sync::Mutex<()>, loom::sync::Condvar),
}

impl FutexWord {
    pub(crate) fn new(value: u32) -> Self {
        Self {
            word: AtomicU32::new(value),
            #[cfg(loom)]
            sleepers: (loom::sync::Mutex::new(()), loom::sync::Condvar::new()),
        }
    }

    /// Blocks while the word still holds `expected`; may return spuriously.
    #[cfg(not(loom))]
    #[inline]
    pub(crate) fn wait(&self, expected: u32) {
        super::futex::wait(&self.word, expected);
    }

    /// As [`FutexWord::wait`], for at most `timeout_ns`.
    #[cfg(not(loom))]
    #[inline]
    pub(crate) fn wait_timeout(&self, expected: u32, timeout_ns: u64) {
        super::futex::wait_timeout(&self.word, expected, timeout_ns);
    }

    /// Wakes every thread sleeping on the word.
    #[cfg(not(loom))]
    #[inline]
    pub(crate) fn wake_all(&self) {
        super::futex::wake_all(&self.word);
    }

    #[cfg(loom)]
    pub(crate) fn wait(&self, expected: u32) {
        let (lock, sleepers) = &self.sleepers;
        let guard = lock.lock().unwrap();
        if self.word.load(std::sync::atomic::Ordering::SeqCst) == expected {
            drop(sleepers.wait(guard).unwrap());
        }
    }

    #[cfg(loom)]
    pub(crate) fn wait_timeout(&self, expected: u32, _timeout_ns: u64) {
        self.wait(expected);
    }

    #[cfg(loom)]
    pub(crate) fn wake_all(&self) {
        let (lock, sleepers) = &self.sleepers;
        let _guard = lock.lock().unwrap();
        sleepers.notify_all();
    }
}

impl Deref for FutexWord {
    type Target = AtomicU32;

    fn deref(&self) -> &AtomicU32 {
        &self.word
    }
}

/// An `UnsafeCell` whose accesses loom can check: each access holds a guard
/// ([`ConstPtr`], [`MutPtr`]) for as long as the reference is used, and loom
/// reports a mutable access that is not ordered after every other access.
#[cfg(not(loom))]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    pub(crate) fn new(value: T) -> Self {
        Self(std::cell::UnsafeCell::new(value))
    }

    /// Shared access, for as long as the returned guard lives.
    #[inline]
    pub(crate) fn get(&self) -> ConstPtr<T> {
        ConstPtr(self.0.get())
    }

    /// Exclusive access, for as long as the returned guard lives.
    #[inline]
    pub(crate) fn get_mut(&self) -> MutPtr<T> {
        MutPtr(self.0.get())
    }
}

/// Shared access to an [`UnsafeCell`]'s value.
#[cfg(not(loom))]
pub(crate) struct ConstPtr<T>(*const T);

#[cfg(not(loom))]
impl<T> ConstPtr<T> {
    /// # Safety
    /// No thread may write the value while the reference lives.
    #[inline]
    pub(crate) unsafe fn deref(&self) -> &T {
        // SAFETY: forwarded caller contract; the pointer comes from a live cell.
        unsafe { &*self.0 }
    }
}

/// Exclusive access to an [`UnsafeCell`]'s value.
#[cfg(not(loom))]
pub(crate) struct MutPtr<T>(*mut T);

#[cfg(not(loom))]
impl<T> MutPtr<T> {
    /// # Safety
    /// No other thread may touch the value while the reference lives.
    #[inline]
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn deref(&self) -> &mut T {
        // SAFETY: forwarded caller contract; the pointer comes from a live cell.
        unsafe { &mut *self.0 }
    }
}
