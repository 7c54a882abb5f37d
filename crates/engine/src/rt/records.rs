//! What audio threads report about each buffer: fixed-size, copyable records pushed into wait-free
//! SPSC rings; produced on audio threads, consumed by the collector.

use std::sync::atomic::{AtomicU64, Ordering};

/// Records per ring: about 10 s of buffers at 48 kHz / 128 frames, so a
/// collector that stalls for seconds still loses nothing.
pub const RING_CAPACITY: usize = 4_096;

/// One buffer, as the driver saw it.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct BufferRecord {
    /// Sequence number within the current audio start (0, 1, 2...).
    pub seq: u64,
    /// Frames in this buffer.
    pub frames: u32,
    /// When the device's period began (CLOCK_MONOTONIC ns).
    pub period_start_ns: u64,
    /// When the buffer had to be ready.
    pub deadline_ns: u64,
    /// When the driver thread started running for this buffer.
    pub driver_wake_ns: u64,
    /// Render start (after the driver woke).
    pub render_start_ns: u64,
    /// Render end (after mixing, before any minimum-load padding).
    pub render_end_ns: u64,
    /// Sines sounding (sustained plus burst).
    pub active_sines: u32,
    /// Burst in progress.
    pub burst: bool,
    /// The render finished after the deadline.
    pub late: bool,
    /// Workers that had not finished when the driver stopped waiting (bit
    /// `i` = worker `i + 1`); their part is missing from the output. Non-zero
    /// on the buffer whose wait timed out and on every buffer rendered
    /// silent while such a worker was still in that earlier cycle.
    pub unfinished_workers: u64,
    /// Peak of the input, when input is enabled.
    pub input_peak: Option<f32>,
    /// Fault injection: how long this render busy-waited before working (0 = no stall).
    pub injected_stall_ns: u64,
    /// Fault injection: the worker (1..) made to hang in this buffer's cycle (0 = none).
    pub injected_hang_worker: u32,
}

/// One thread's part in one buffer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ThreadRecord {
    /// Buffer sequence number this belongs to.
    pub seq: u64,
    /// CPU when the thread started its work, -1 if unknown.
    pub cpu_start: i16,
    /// CPU when it finished.
    pub cpu_end: i16,
    /// Active (sounding) sines it processed.
    pub sines: u32,
    /// Partials it computed, including fading ones.
    pub computed: u32,
    /// Chunks it claimed.
    pub chunks: u32,
    /// When it started running for this buffer.
    pub wake_ns: u64,
    /// When it finished its real work (before padding).
    pub end_ns: u64,
    /// Thread CPU time spent on the real work.
    pub cpu_ns: u64,
}

/// Producer side of a record ring: never blocks, counts what did not fit.
pub struct RecordTx<T> {
    tx: rtrb::Producer<T>,
    drops: std::sync::Arc<AtomicU64>,
}

/// Consumer side of a record ring.
pub struct RecordRx<T> {
    rx: rtrb::Consumer<T>,
    drops: std::sync::Arc<AtomicU64>,
}

/// A ring of `RING_CAPACITY` records.
pub fn record_ring<T>() -> (RecordTx<T>, RecordRx<T>) {
    let (tx, rx) = rtrb::RingBuffer::new(RING_CAPACITY);
    let drops = std::sync::Arc::new(AtomicU64::new(0));
    (
        RecordTx {
            tx,
            drops: drops.clone(),
        },
        RecordRx { rx, drops },
    )
}

impl<T> RecordTx<T> {
    /// Pushes a record, or drops and counts it when the ring is full. Real-time safe.
    #[inline]
    pub fn push(&mut self, record: T) {
        if self.tx.push(record).is_err() {
            self.drops.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl<T> RecordRx<T> {
    /// The oldest record, if any.
    pub fn pop(&mut self) -> Option<T> {
        self.rx.pop().ok()
    }

    /// The oldest record without removing it.
    pub fn peek(&self) -> Option<&T> {
        self.rx.peek().ok()
    }

    /// Records dropped because the ring was full.
    pub fn drops(&self) -> u64 {
        self.drops.load(Ordering::Relaxed)
    }
}
