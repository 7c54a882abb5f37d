//! State shared by the driver and the workers, and the chunk-claiming loop both run; used on audio
//! threads.
//!
//! The cycle protocol, which every `unsafe` block below relies on:
//! 1. A cycle is over when every worker's slot holds the cycle's generation
//!    in `done` (read with Acquire). Between cycles only the driver touches
//!    the cycle parameters, the partials (phases, amplitudes, targets) and
//!    the slots.
//! 2. The driver publishes a cycle only between cycles: it stores the
//!    parameters, adds the workers to `remaining`, then
//!    `generation.fetch_add(Release)`; workers read `generation` with
//!    Acquire. So a worker is never more than one generation behind, and a
//!    worker still in an old cycle never sees the parameters change under it.
//! 3. During a cycle, partial ranges are handed out by `next_chunk.fetch_add`,
//!    so no two threads ever touch the same partial; each thread writes only
//!    its own scratch slot.
//! 4. A worker finishes by storing the cycle's generation in its slot's
//!    `done` (Release); after that it touches no partial and no slot until the
//!    next generation. Only then does it decrement `remaining`, the futex word
//!    the driver sleeps on, and the thread that brings it to 0 wakes the
//!    driver. `remaining` only decides who wakes the driver, never who may
//!    touch what: the driver adds to it (never stores), so a late worker's
//!    decrement still owed from an earlier cycle keeps the count right.
//! 5. The driver's wait is bounded (see `driver.rs`). When workers have not
//!    finished by the bound, the driver closes the cycle (`next_chunk` jumps
//!    to [`CLOSED`], so no further chunk can be claimed) and mixes only the
//!    slots whose `done` holds this generation and that its wait did not
//!    name (one that finished since is left out too, as its record says). A
//!    slot that is not done is
//!    never read: its worker may still be writing it, and a chunk of partials
//!    it claimed. By step 1 the cycle is not over, so until the late worker
//!    finishes the driver publishes nothing and touches no partial, target,
//!    parameter or slot: it outputs silence and names the workers not done.
//!    Every access of the late worker stays exclusive, and the next cycle
//!    starts only once it is out.
//! 6. To stop, the control thread stops the device (no more driver calls),
//!    sets `stop` and bumps `generation`; workers leave when they see it.

use super::clock::{current_cpu, now_ns, sleep_until, thread_cpu_ns};
use super::records::ThreadRecord;
use super::sync::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, FutexWord, UnsafeCell};
use std::sync::atomic::Ordering;
use xrunlab_dsp::{Chord, Kernel, PartialBank, PartialsMut};

/// One thread's private stereo accumulation buffer.
pub(crate) struct Slot {
    left: UnsafeCell<Box<[f32]>>,
    right: UnsafeCell<Box<[f32]>>,
    /// The kernel slowdown's scratch (empty when it is off).
    extra: UnsafeCell<Extra>,
    /// Generation of the last cycle this slot's thread finished (protocol step 4).
    done: AtomicU32,
}

/// Where a slot's thread renders the kernel slowdown's extra passes: copies of
/// a chunk's phases and amplitudes (so every pass starts from the same state
/// and the real one is advanced once) and an output that is thrown away.
struct Extra {
    phase: Box<[u32]>,
    amp: Box<[f32]>,
    left: Box<[f32]>,
    right: Box<[f32]>,
}

/// `next_chunk` of a cycle the driver gave up waiting for: every later claim
/// lands past any partial count, however it is multiplied by the chunk size.
const CLOSED: usize = usize::MAX / 2;

/// `hang_slot` when no worker is to hang.
const NO_SLOT: usize = usize::MAX;

/// Raw views of the partial bank's arrays; the bank itself never moves its heap buffers.
struct BankPtrs {
    phase: *mut u32,
    inc: *const u32,
    amp: *mut f32,
    target: *mut f32,
    full_amp: *const f32,
    gain_l: *const f32,
    gain_r: *const f32,
    len: usize,
}

pub(crate) struct CycleShared {
    /// Futex word: bumped to start a cycle or to stop.
    pub generation: FutexWord,
    /// Futex word the driver sleeps on: workers that have not yet left their
    /// cycle (protocol step 4; it decides who wakes the driver, not who may
    /// touch what).
    pub remaining: FutexWord,
    pub next_chunk: AtomicUsize,
    pub stop: AtomicBool,
    pub seq: AtomicU64,
    pub frames: AtomicUsize,
    pub render_limit: AtomicUsize,
    pub active: AtomicUsize,
    pub chunk_size: AtomicUsize,
    pub kernel: AtomicU8,
    pub period_start_ns: AtomicU64,
    pub pad_until_ns: AtomicU64,
    /// Fault injection for this cycle: the slot whose worker hangs, or [`NO_SLOT`].
    hang_slot: AtomicUsize,
    /// How long that worker hangs, in ns.
    hang_ns: AtomicU64,
    pub coeff: f32,
    /// Test hook: each chunk is rendered this many times (1 = once; see
    /// `EngineConfig::kernel_slowdown`). Fixed for the audio threads' lifetime.
    slowdown: u32,
    slots: Box<[Slot]>,
    bank: BankPtrs,
    // Owns the memory `bank` points into; never referenced after construction.
    _bank_owner: PartialBank,
}

// SAFETY: the raw pointers and UnsafeCells are only accessed under the cycle
// protocol described at the top of this file, which gives every access either
// exclusivity (disjoint chunk ranges, own slot) or a happens-before edge.
unsafe impl Sync for CycleShared {}
// SAFETY: as above; the pointed-to memory is owned by `_bank_owner`, which moves with the struct.
unsafe impl Send for CycleShared {}

/// What one thread did in one cycle.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Work {
    pub sines: u32,
    pub computed: u32,
    pub chunks: u32,
}

impl CycleShared {
    /// Built on the control thread before the audio threads start: the one place here that allocates.
    #[allow(clippy::disallowed_macros, clippy::disallowed_methods)]
    pub(crate) fn new(chord: &Chord, slots: usize, max_frames: usize, slowdown: u32) -> Self {
        let mut bank = PartialBank::new(chord);
        // The slowdown's scratch holds any chunk (at most the bank) and any buffer.
        let (extra_partials, extra_frames) = if slowdown > 1 {
            (bank.len(), max_frames)
        } else {
            (0, 0)
        };
        let ptrs = BankPtrs {
            phase: bank.phase.as_mut_ptr(),
            inc: bank.inc.as_ptr(),
            amp: bank.amp.as_mut_ptr(),
            target: bank.target.as_mut_ptr(),
            full_amp: bank.full_amp.as_ptr(),
            gain_l: bank.gain_l.as_ptr(),
            gain_r: bank.gain_r.as_ptr(),
            len: bank.len(),
        };
        let slots = (0..slots)
            .map(|_| Slot {
                left: UnsafeCell::new(vec![0.0; max_frames].into_boxed_slice()),
                right: UnsafeCell::new(vec![0.0; max_frames].into_boxed_slice()),
                extra: UnsafeCell::new(Extra {
                    phase: vec![0; extra_partials].into_boxed_slice(),
                    amp: vec![0.0; extra_partials].into_boxed_slice(),
                    left: vec![0.0; extra_frames].into_boxed_slice(),
                    right: vec![0.0; extra_frames].into_boxed_slice(),
                }),
                done: AtomicU32::new(0),
            })
            .collect();
        Self {
            generation: FutexWord::new(0),
            remaining: FutexWord::new(0),
            next_chunk: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            seq: AtomicU64::new(0),
            frames: AtomicUsize::new(0),
            render_limit: AtomicUsize::new(0),
            active: AtomicUsize::new(0),
            chunk_size: AtomicUsize::new(256),
            kernel: AtomicU8::new(0),
            period_start_ns: AtomicU64::new(0),
            pad_until_ns: AtomicU64::new(0),
            hang_slot: AtomicUsize::new(NO_SLOT),
            hang_ns: AtomicU64::new(0),
            coeff: xrunlab_dsp::smoothing_coeff(chord.sample_rate()),
            slowdown: slowdown.max(1),
            slots,
            bank: ptrs,
            _bank_owner: bank,
        }
    }

    pub(crate) fn partials(&self) -> usize {
        self.bank.len
    }

    /// Makes partials `0..active` sound and the rest fade; touches only the changed range.
    ///
    /// # Safety
    /// Driver only, between cycles (protocol step 1).
    pub(crate) unsafe fn set_active(&self, previous: usize, active: usize) {
        let len = self.bank.len;
        let (lo, hi) = (previous.min(active).min(len), previous.max(active).min(len));
        for i in lo..hi {
            // SAFETY: i < len; no worker reads targets between cycles (caller's contract).
            unsafe {
                *self.bank.target.add(i) = if i < active {
                    *self.bank.full_amp.add(i)
                } else {
                    0.0
                }
            };
        }
    }

    /// Partials `start..end` (clamped).
    ///
    /// # Safety
    /// The caller must own the range for this cycle (claimed through `next_chunk`).
    unsafe fn view(&self, start: usize, end: usize) -> PartialsMut<'_> {
        let end = end.min(self.bank.len);
        let start = start.min(end);
        let n = end - start;
        let b = &self.bank;
        // SAFETY: start..end lies inside the bank; the range is exclusively the
        // caller's for this cycle (protocol step 3), and targets are only read.
        unsafe {
            PartialsMut {
                phase: std::slice::from_raw_parts_mut(b.phase.add(start), n),
                inc: std::slice::from_raw_parts(b.inc.add(start), n),
                amp: std::slice::from_raw_parts_mut(b.amp.add(start), n),
                target: std::slice::from_raw_parts(b.target.add(start), n),
                gain_l: std::slice::from_raw_parts(b.gain_l.add(start), n),
                gain_r: std::slice::from_raw_parts(b.gain_r.add(start), n),
            }
        }
    }

    /// Zeroes slot `slot`'s first `frames` frames, then claims and renders
    /// chunks into it until none are left.
    ///
    /// # Safety
    /// `slot` must be the calling thread's own slot, during a published cycle.
    pub(crate) unsafe fn process(&self, slot: usize) -> Work {
        let Some(s) = self.slots.get(slot) else {
            return Work::default();
        };
        let frames = self.frames.load(Ordering::Relaxed);
        let (left, right) = (s.left.get_mut(), s.right.get_mut());
        // SAFETY: the slot is exclusively this thread's during the cycle (caller's contract).
        let (left, right) = unsafe { (left.deref(), right.deref()) };
        let frames = frames.min(left.len());
        let (left, right) = (&mut left[..frames], &mut right[..frames]);
        left.fill(0.0);
        right.fill(0.0);
        let extra = s.extra.get_mut();
        // SAFETY: as the slot's buffers above: this thread's alone during the cycle.
        let extra = unsafe { extra.deref() };
        let limit = self.render_limit.load(Ordering::Relaxed).min(self.bank.len);
        let active = self.active.load(Ordering::Relaxed);
        let chunk = self.chunk_size.load(Ordering::Relaxed).max(1);
        let kernel = if self.kernel.load(Ordering::Relaxed) == 1 {
            Kernel::Fast
        } else {
            Kernel::Reference
        };
        let mut hang_ns = if self.hang_slot.load(Ordering::Relaxed) == slot {
            self.hang_ns.load(Ordering::Relaxed)
        } else {
            0
        };
        let mut work = Work::default();
        loop {
            let start = self
                .next_chunk
                .fetch_add(1, Ordering::Relaxed)
                .saturating_mul(chunk);
            if start >= limit {
                break;
            }
            if hang_ns > 0 {
                // Fault injection: hang while holding a chunk, the worst case
                // for the protocol (step 5), then render it as usual.
                sleep_until(now_ns().saturating_add(hang_ns));
                hang_ns = 0;
            }
            let end = start.saturating_add(chunk).min(limit);
            // SAFETY: fetch_add handed this range to us alone (protocol step
            // 3); once the driver closed the cycle no claim reaches this
            // point (step 5), and no new cycle resets the counter while we
            // are still in this one (step 2).
            let view = unsafe { self.view(start, end) };
            self.render_extra_passes(kernel, &view, extra, frames);
            let stats = xrunlab_dsp::render(kernel, view, self.coeff, left, right);
            work.computed += stats.computed;
            work.sines += end.min(active).saturating_sub(start) as u32;
            work.chunks += 1;
        }
        if hang_ns > 0 {
            // No chunk was left for this worker: hang before finishing instead.
            sleep_until(now_ns().saturating_add(hang_ns));
        }
        work
    }

    /// The kernel slowdown (test hook): renders `view` `slowdown - 1` more
    /// times, each from a copy of its phases and amplitudes into the slot's
    /// throw-away output, so the chunk costs `slowdown` renders while the
    /// partials' state and the mix see exactly one. Does nothing when the
    /// slowdown is off or the scratch is too small (it never is: it is sized
    /// for the bank and the largest buffer).
    #[inline]
    fn render_extra_passes(
        &self,
        kernel: Kernel,
        view: &PartialsMut<'_>,
        extra: &mut Extra,
        frames: usize,
    ) {
        let n = view.len();
        if self.slowdown <= 1
            || n > extra.phase.len()
            || n > extra.amp.len()
            || frames > extra.left.len()
            || frames > extra.right.len()
        {
            return;
        }
        let (out_l, out_r) = (&mut extra.left[..frames], &mut extra.right[..frames]);
        for _ in 1..self.slowdown {
            extra.phase[..n].copy_from_slice(&view.phase[..n]);
            extra.amp[..n].copy_from_slice(&view.amp[..n]);
            out_l.fill(0.0);
            out_r.fill(0.0);
            let copy = PartialsMut {
                phase: &mut extra.phase[..n],
                inc: &view.inc[..n],
                amp: &mut extra.amp[..n],
                target: &view.target[..n],
                gain_l: &view.gain_l[..n],
                gain_r: &view.gain_r[..n],
            };
            xrunlab_dsp::render(kernel, copy, self.coeff, out_l, out_r);
            // The passes' output is never read: keep the optimizer from proving it.
            std::hint::black_box((&*out_l, &*out_r));
        }
    }

    /// Sets (or clears, with `None`) the worker slot that hangs for `ns` in the next cycle.
    ///
    /// # Safety
    /// Driver only, between cycles (protocol step 1).
    pub(crate) unsafe fn set_hang(&self, hang: Option<(usize, u64)>) {
        let (slot, ns) = hang.unwrap_or((NO_SLOT, 0));
        self.hang_slot.store(slot, Ordering::Relaxed);
        self.hang_ns.store(ns, Ordering::Relaxed);
    }

    /// Publishes the next cycle to `workers` workers and wakes them (protocol
    /// step 2); returns its generation.
    ///
    /// Driver only, between cycles, after it stored the cycle's parameters
    /// (Relaxed: the Release bump of `generation` publishes them).
    pub(crate) fn publish(&self, workers: u32) -> u32 {
        self.next_chunk.store(0, Ordering::Relaxed);
        // Added, not stored: a late worker may still owe its decrement (protocol step 4).
        self.remaining.fetch_add(workers, Ordering::Relaxed);
        let generation = self
            .generation
            .fetch_add(1, Ordering::Release)
            .wrapping_add(1);
        if workers > 0 {
            self.generation.wake_all();
        }
        generation
    }

    /// Worker: sleeps until a generation other than `seen` is published
    /// (a cycle, or the stop of protocol step 6) and returns it.
    #[inline]
    pub(crate) fn wait_for_cycle(&self, seen: u32) -> u32 {
        loop {
            let generation = self.generation.load(Ordering::Acquire);
            if generation != seen {
                return generation;
            }
            self.generation.wait(seen);
        }
    }

    /// Control thread, after the device stopped calling the driver: tells
    /// every worker to leave (protocol step 6), whether it sleeps or is still
    /// in a cycle.
    pub(crate) fn stop_workers(&self) {
        self.stop.store(true, Ordering::Release);
        self.generation.fetch_add(1, Ordering::Release);
        self.generation.wake_all();
    }

    /// Driver: waits until the worker slots `first..first + count` finished
    /// cycle `generation` or the clock `now` reaches `limit_ns`; returns the
    /// mask of workers that had not (0 when all did, as [`Self::unfinished`]).
    /// Spins for `spin_ns` first, then sleeps on `remaining` with a timeout,
    /// so the wait never outlasts the limit by more than a wake-up.
    pub(crate) fn wait_for_workers(
        &self,
        first: usize,
        count: usize,
        generation: u32,
        spin_ns: u64,
        limit_ns: u64,
        now: impl Fn() -> u64,
    ) -> u64 {
        let spin_until_ns = now().saturating_add(spin_ns);
        loop {
            // Read the futex word before checking the slots: a worker stores
            // `done` before it decrements, so if the check misses its `done`, the
            // value read here predates its decrement and the futex returns at once.
            let r = self.remaining.load(Ordering::Acquire);
            let unfinished = self.unfinished(first, count, generation);
            if unfinished == 0 {
                return 0;
            }
            let t = now();
            if t >= limit_ns {
                return unfinished;
            }
            if t < spin_until_ns {
                std::hint::spin_loop();
                continue;
            }
            self.remaining.wait_timeout(r, limit_ns - t);
        }
    }

    /// Marks `slot` finished with cycle `generation` and leaves the cycle
    /// (protocol step 4); the last thread out wakes the driver. After this
    /// call the caller must not touch the slot or any partial until the next
    /// generation.
    #[inline]
    pub(crate) fn finish(&self, slot: usize, generation: u32) {
        if let Some(s) = self.slots.get(slot) {
            s.done.store(generation, Ordering::Release);
        }
        if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.remaining.wake_all();
        }
    }

    /// Marks the driver's own slot finished with `generation` (it never leaves through `remaining`).
    #[inline]
    pub(crate) fn finish_driver_slot(&self, slot: usize, generation: u32) {
        if let Some(s) = self.slots.get(slot) {
            s.done.store(generation, Ordering::Release);
        }
    }

    /// The worker slots `first..first + count` that have not finished cycle
    /// `generation`, as a mask with bit `i` for slot `first + i` (`count` is
    /// at most 64: see `MAX_WORKERS` in `driver.rs`). The Acquire loads make a
    /// finished thread's writes visible (protocol steps 1 and 4).
    #[inline]
    pub(crate) fn unfinished(&self, first: usize, count: usize, generation: u32) -> u64 {
        let mut mask = 0u64;
        for i in 0..count.min(64) {
            let done = match self.slots.get(first + i) {
                Some(s) => s.done.load(Ordering::Acquire) == generation,
                None => true,
            };
            if !done {
                mask |= 1 << i;
            }
        }
        mask
    }

    /// Closes the current cycle: no chunk can be claimed from now on (protocol step 5).
    #[inline]
    pub(crate) fn close_cycle(&self) {
        self.next_chunk.store(CLOSED, Ordering::Relaxed);
    }

    /// Adds the first `frames` frames of every slot that finished cycle
    /// `generation` into `out_l` / `out_r` (which are overwritten), except the
    /// worker slots named in `left_out` (bit `i` = slot `first_worker + i`,
    /// the mask the driver's wait returned). Slots that did not finish are
    /// left alone (protocol step 5); a worker that finished after the wait
    /// gave up on it is left out too, so the buffer's record, which names it,
    /// says what the mix holds (the loom model found the mismatch).
    ///
    /// # Safety
    /// Driver only, after publishing cycle `generation` and ending its wait.
    pub(crate) unsafe fn mix(
        &self,
        generation: u32,
        first_worker: usize,
        left_out: u64,
        out_l: &mut [f32],
        out_r: &mut [f32],
    ) {
        out_l.fill(0.0);
        out_r.fill(0.0);
        for (i, s) in self.slots.iter().enumerate() {
            let named = i
                .checked_sub(first_worker)
                .is_some_and(|w| w < 64 && left_out & (1 << w) != 0);
            if named {
                continue;
            }
            // Acquire: pairs with the Release store in `finish`, so everything
            // that thread wrote to its slot in this cycle is visible.
            if s.done.load(Ordering::Acquire) != generation {
                continue;
            }
            let (l, r) = (s.left.get(), s.right.get());
            // SAFETY: the slot's thread finished this cycle (checked just
            // above) and writes it again only in a later cycle, which the
            // caller publishes after this call (protocol steps 4 and 5).
            let (l, r) = unsafe { (l.deref(), r.deref()) };
            for (o, v) in out_l.iter_mut().zip(l.iter()) {
                *o += *v;
            }
            for (o, v) in out_r.iter_mut().zip(r.iter()) {
                *o += *v;
            }
        }
    }
}

#[cfg(all(test, loom))]
impl CycleShared {
    /// The partials' phases (the model checks that each cycle advanced each
    /// rendered partial exactly once). Between cycles only (protocol step 1).
    pub(crate) fn phases(&self) -> &[u32] {
        &self._bank_owner.phase
    }
}

/// Runs one thread's share of a cycle and fills its record (except `seq` and `wake_ns`).
///
/// # Safety
/// As [`CycleShared::process`].
pub(crate) unsafe fn work_and_record(
    shared: &CycleShared,
    slot: Option<usize>,
    record: &mut ThreadRecord,
) {
    let cpu0 = thread_cpu_ns();
    record.cpu_start = current_cpu();
    let work = match slot {
        // SAFETY: forwarded caller contract.
        Some(s) => unsafe { shared.process(s) },
        None => Work::default(),
    };
    record.sines = work.sines;
    record.computed = work.computed;
    record.chunks = work.chunks;
    record.cpu_end = current_cpu();
    record.end_ns = now_ns();
    record.cpu_ns = thread_cpu_ns().saturating_sub(cpu0);
}
