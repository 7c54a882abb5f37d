//! State shared by the driver and the workers, and the chunk-claiming loop both run; used on audio threads.
//!
//! The cycle protocol, which every `unsafe` block below relies on:
//! 1. Between cycles (`remaining == 0`) only the driver touches the cycle
//!    parameters, the partials' targets and the scratch buffers.
//! 2. The driver publishes a cycle by storing its parameters, then
//!    `generation.fetch_add(Release)`; workers read `generation` with Acquire.
//! 3. During a cycle, partial ranges are handed out by `next_chunk.fetch_add`,
//!    so no two threads ever touch the same partial; each thread writes only
//!    its own scratch slot.
//! 4. A worker finishes with `remaining.fetch_sub(AcqRel)`; the driver reads
//!    `remaining == 0` with Acquire before it reads any scratch slot.

use super::clock::{current_cpu, now_ns, thread_cpu_ns};
use super::records::ThreadRecord;
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use xrunlab_dsp::{Chord, Kernel, PartialBank, PartialsMut};

/// One thread's private stereo accumulation buffer.
pub(crate) struct Slot {
    left: UnsafeCell<Box<[f32]>>,
    right: UnsafeCell<Box<[f32]>>,
}

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
    pub generation: AtomicU32,
    /// Futex word: workers still busy with the current cycle.
    pub remaining: AtomicU32,
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
    pub coeff: f32,
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
    pub(crate) fn new(chord: &Chord, slots: usize, max_frames: usize) -> Self {
        let mut bank = PartialBank::new(chord);
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
            })
            .collect();
        Self {
            generation: AtomicU32::new(0),
            remaining: AtomicU32::new(0),
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
            coeff: xrunlab_dsp::smoothing_coeff(chord.sample_rate()),
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
        // SAFETY: the slot is exclusively this thread's during the cycle (caller's contract).
        let (left, right) = unsafe { (&mut *s.left.get(), &mut *s.right.get()) };
        let frames = frames.min(left.len());
        let (left, right) = (&mut left[..frames], &mut right[..frames]);
        left.fill(0.0);
        right.fill(0.0);
        let limit = self.render_limit.load(Ordering::Relaxed).min(self.bank.len);
        let active = self.active.load(Ordering::Relaxed);
        let chunk = self.chunk_size.load(Ordering::Relaxed).max(1);
        let kernel = if self.kernel.load(Ordering::Relaxed) == 1 {
            Kernel::Fast
        } else {
            Kernel::Reference
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
            let end = start.saturating_add(chunk).min(limit);
            // SAFETY: fetch_add handed this range to us alone (protocol step 3).
            let view = unsafe { self.view(start, end) };
            let stats = xrunlab_dsp::render(kernel, view, self.coeff, left, right);
            work.computed += stats.computed;
            work.sines += end.min(active).saturating_sub(start) as u32;
            work.chunks += 1;
        }
        work
    }

    /// Adds every slot's first `frames` frames into `out_l` / `out_r` (which are overwritten).
    ///
    /// # Safety
    /// Driver only, after `remaining` reached 0 (protocol step 4).
    pub(crate) unsafe fn mix(&self, out_l: &mut [f32], out_r: &mut [f32]) {
        out_l.fill(0.0);
        out_r.fill(0.0);
        for s in self.slots.iter() {
            // SAFETY: all threads are done with their slots (caller's contract).
            let (l, r) = unsafe { (&*s.left.get(), &*s.right.get()) };
            for (o, v) in out_l.iter_mut().zip(l.iter()) {
                *o += *v;
            }
            for (o, v) in out_r.iter_mut().zip(r.iter()) {
                *o += *v;
            }
        }
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
