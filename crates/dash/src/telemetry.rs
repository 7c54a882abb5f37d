//! Telemetry frames: per-buffer reports gathered between two display frames into columns (load,
//! dropouts, per-thread sines, CPUs, wake-ups) plus running counts, serialized once for every page;
//! runs on the engine-owner thread.

use serde::Serialize;
use xrunlab_engine::collector::Totals;
use xrunlab_engine::BufferReport;
use xrunlab_sys::PowerSample;

/// Running counts since the dashboard started; never reset by restarts, so the page's
/// counters only go up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// The run collector's totals over every engine the dashboard ran (buffers, dropouts,
    /// ring drops, skipped periods, device xruns, audio starts), flattened into the counts.
    #[serde(flatten)]
    pub run: Totals,
    /// Telemetry frames published.
    pub frames: u64,
    /// Frames a slow page did not get (summed over pages): the engine never waits for a page.
    pub frames_dropped: u64,
}

/// One thread's columns in a frame; slots exist for every real-time thread (0 = driver).
#[derive(Debug, Default, Serialize)]
struct ThreadColumns {
    /// Active sines it processed, per buffer.
    sines: Vec<u32>,
    /// CPU it ended its work on, per buffer (-1: unknown or no record).
    cpu: Vec<i16>,
    /// Period start to the thread running, in microseconds (-1: no record).
    wake_us: Vec<i32>,
    /// Its real work, in microseconds.
    busy_us: Vec<u32>,
}

impl ThreadColumns {
    fn clear(&mut self) {
        self.sines.clear();
        self.cpu.clear();
        self.wake_us.clear();
        self.busy_us.clear();
    }

    fn with_capacity(n: usize) -> ThreadColumns {
        ThreadColumns {
            sines: Vec::with_capacity(n),
            cpu: Vec::with_capacity(n),
            wake_us: Vec::with_capacity(n),
            busy_us: Vec::with_capacity(n),
        }
    }

    fn capacity(&self) -> usize {
        self.sines
            .capacity()
            .min(self.cpu.capacity())
            .min(self.wake_us.capacity())
            .min(self.busy_us.capacity())
    }

    fn bytes(&self) -> usize {
        self.sines.capacity() * 4
            + self.cpu.capacity() * 2
            + self.wake_us.capacity() * 4
            + self.busy_us.capacity() * 4
    }

    fn shrink_to(&mut self, n: usize) {
        self.sines.shrink_to(n);
        self.cpu.shrink_to(n);
        self.wake_us.shrink_to(n);
        self.busy_us.shrink_to(n);
    }

    fn push_missing(&mut self) {
        self.sines.push(0);
        self.cpu.push(-1);
        self.wake_us.push(-1);
        self.busy_us.push(0);
    }
}

/// Columns are sized for this many buffers per frame: at 16 frames and 384 kHz a 33 ms frame
/// holds about 800 buffers.
const COLUMN_CAPACITY: usize = 1024;

/// Gathers buffers between frames. Column vectors are kept between frames so a steady
/// stream does not allocate except for the serialized text; after a frame that gathered far
/// more (the owner was held up, e.g. by a restart) they shrink back, so the dashboard's memory
/// stays flat however long it runs. Nothing is kept across frames but counts.
#[derive(Debug)]
pub struct Aggregator {
    base_ns: u64,
    ts_ms: Vec<f64>,
    load_pct: Vec<f32>,
    dropout: Vec<u8>,
    /// `[ts_ms, epoch, seq]` of each dropout in the frame, to fetch its blame card.
    drops: Vec<(f64, u32, u64)>,
    active: Vec<u32>,
    threads: Vec<ThreadColumns>,
    thread_slots: usize,
    input_peak: Option<f32>,
    burst: bool,
    buffer_ms: f64,
    counts: Counts,
    seq: u64,
}

/// What the owner adds to a frame besides the buffers.
#[derive(Debug, Clone, Default)]
pub struct FrameExtras {
    /// Time now, CLOCK_MONOTONIC ns.
    pub now_ns: u64,
    /// Bumped whenever the config, device or threads changed, so pages re-read /api/status.
    pub config_version: u64,
    /// A fresh power sample, when one was taken since the last frame.
    pub power: Option<PowerSample>,
    /// Fresh per-CPU frequencies in kHz (0 = unknown), when read since the last frame.
    pub freq_khz: Option<Vec<u64>>,
    /// Idle-state entries on all CPUs since the dashboard started, when re-counted since the
    /// last frame (every few seconds).
    pub idle_entries: Option<u64>,
}

#[derive(Serialize)]
struct FrameOut<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    seq: u64,
    /// Now, in ms since the dashboard started (same base as `ts`).
    t: f64,
    buffer_ms: f64,
    /// Period start of each buffer, in ms since the dashboard started.
    ts: &'a [f64],
    /// Render time of each buffer in % of the buffer duration (0.1 % steps).
    load: &'a [f32],
    /// 1 where the buffer was a dropout.
    dropout: &'a [u8],
    /// `[ts_ms, epoch, seq]` of each dropout, for `GET /api/dropouts/{epoch}/{seq}`.
    drops: &'a [(f64, u32, u64)],
    /// Sines sounding in each buffer.
    active: &'a [u32],
    threads: &'a [ThreadColumns],
    input_peak: Option<f32>,
    burst: bool,
    counts: &'a Counts,
    config_version: u64,
    power: Option<PowerSample>,
    freq_khz: Option<&'a [u64]>,
    idle_entries: Option<u64>,
}

impl Aggregator {
    /// Times in frames are milliseconds since `base_ns` (CLOCK_MONOTONIC).
    pub fn new(base_ns: u64) -> Aggregator {
        Aggregator {
            base_ns,
            ts_ms: Vec::with_capacity(COLUMN_CAPACITY),
            load_pct: Vec::with_capacity(COLUMN_CAPACITY),
            dropout: Vec::with_capacity(COLUMN_CAPACITY),
            drops: Vec::new(),
            active: Vec::with_capacity(COLUMN_CAPACITY),
            threads: Vec::new(),
            thread_slots: 0,
            input_peak: None,
            burst: false,
            buffer_ms: 0.0,
            counts: Counts::default(),
            seq: 0,
        }
    }

    /// CLOCK_MONOTONIC of time 0 in frames.
    pub fn base_ns(&self) -> u64 {
        self.base_ns
    }

    /// The running counts.
    pub fn counts(&self) -> Counts {
        self.counts
    }

    /// Mutable counts: the owner sets them from its run collector's totals (buffers, dropouts,
    /// ring drops, restarts) and the frames pages dropped; this counts only the frames.
    pub fn counts_mut(&mut self) -> &mut Counts {
        &mut self.counts
    }

    /// Sets how many thread slots each frame carries (the engine's real-time threads).
    pub fn set_thread_slots(&mut self, slots: usize) {
        self.thread_slots = slots;
        self.grow_slots(slots);
    }

    fn grow_slots(&mut self, slots: usize) {
        let have = self.ts_ms.len();
        while self.threads.len() < slots {
            let mut cols = ThreadColumns::with_capacity(COLUMN_CAPACITY.max(have));
            for _ in 0..have {
                cols.push_missing();
            }
            self.threads.push(cols);
        }
    }

    /// Adds one buffer.
    pub fn add(&mut self, b: &BufferReport) {
        let slots = b
            .threads
            .iter()
            .map(|t| t.index + 1)
            .max()
            .unwrap_or(0)
            .max(self.thread_slots);
        self.grow_slots(slots);
        let ts_ms = b.period_start_ns.saturating_sub(self.base_ns) as f64 / 1e6;
        self.ts_ms.push(ts_ms);
        if b.dropout() {
            self.drops.push((ts_ms, b.epoch, b.seq));
        }
        self.load_pct
            .push(((b.load() * 1000.0).round() / 10.0) as f32);
        self.dropout.push(u8::from(b.dropout()));
        self.active.push(b.active_sines);
        self.buffer_ms = b.buffer_ns() / 1e6;
        for (slot, cols) in self.threads.iter_mut().enumerate() {
            match b.threads.iter().find(|t| t.index == slot) {
                Some(t) => {
                    cols.sines.push(t.sines);
                    cols.cpu.push(if t.cpu_end >= 0 {
                        t.cpu_end
                    } else {
                        t.cpu_start
                    });
                    cols.wake_us
                        .push(i32::try_from(t.wake_latency_ns / 1000).unwrap_or(i32::MAX));
                    cols.busy_us
                        .push(u32::try_from(t.busy_ns / 1000).unwrap_or(u32::MAX));
                }
                None => cols.push_missing(),
            }
        }
        if let Some(p) = b.input_peak {
            self.input_peak = Some(self.input_peak.map_or(p, |q| q.max(p)));
        }
        self.burst |= b.burst;
    }

    /// Buffers gathered since the last frame.
    pub fn pending(&self) -> usize {
        self.ts_ms.len()
    }

    /// Buffers the columns can hold without allocating (the smallest over all columns).
    pub fn column_capacity(&self) -> usize {
        let threads = self.threads.iter().map(ThreadColumns::capacity);
        [
            self.ts_ms.capacity(),
            self.load_pct.capacity(),
            self.dropout.capacity(),
            self.active.capacity(),
        ]
        .into_iter()
        .chain(threads)
        .min()
        .unwrap_or(0)
    }

    /// Bytes the columns hold allocated (their capacities), for checking that memory stays flat.
    pub fn column_bytes(&self) -> usize {
        let threads: usize = self.threads.iter().map(ThreadColumns::bytes).sum();
        self.ts_ms.capacity() * 8
            + self.load_pct.capacity() * 4
            + self.dropout.capacity()
            + self.active.capacity() * 4
            + threads
    }

    fn shrink_columns(&mut self) {
        self.ts_ms.shrink_to(COLUMN_CAPACITY);
        self.load_pct.shrink_to(COLUMN_CAPACITY);
        self.dropout.shrink_to(COLUMN_CAPACITY);
        self.active.shrink_to(COLUMN_CAPACITY);
        for c in &mut self.threads {
            c.shrink_to(COLUMN_CAPACITY);
        }
    }

    /// Serializes everything gathered since the last frame and starts the next one.
    pub fn take_frame(&mut self, extras: &FrameExtras) -> String {
        self.seq += 1;
        self.counts.frames += 1;
        let frame = FrameOut {
            kind: "frame",
            seq: self.seq,
            t: extras.now_ns.saturating_sub(self.base_ns) as f64 / 1e6,
            buffer_ms: self.buffer_ms,
            ts: &self.ts_ms,
            load: &self.load_pct,
            dropout: &self.dropout,
            drops: &self.drops,
            active: &self.active,
            threads: &self.threads,
            input_peak: self.input_peak,
            burst: self.burst,
            counts: &self.counts,
            config_version: extras.config_version,
            power: extras.power,
            freq_khz: extras.freq_khz.as_deref(),
            idle_entries: extras.idle_entries,
        };
        // Serializing plain numbers and vectors cannot fail; an empty frame is the fallback.
        let text = serde_json::to_string(&frame).unwrap_or_default();
        self.ts_ms.clear();
        self.load_pct.clear();
        self.dropout.clear();
        self.drops.clear();
        self.active.clear();
        for c in &mut self.threads {
            c.clear();
        }
        if self.ts_ms.capacity() > COLUMN_CAPACITY {
            self.shrink_columns();
        }
        // Slots of threads that no longer exist (fewer after a restart) stop being sent.
        self.threads.truncate(self.thread_slots);
        self.input_peak = None;
        self.burst = false;
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use xrunlab_engine::ThreadReport;

    fn buffer(seq: u64, load: f64, threads: &[(usize, u32, i16)]) -> BufferReport {
        let buffer_ns = 128.0 * 1e9 / 48_000.0;
        let start = 1_000_000_000 + seq * buffer_ns as u64;
        BufferReport {
            record: xrunlab_engine::BufferRecord {
                seq,
                frames: 128,
                period_start_ns: start,
                deadline_ns: start + buffer_ns as u64,
                driver_wake_ns: start + 10_000,
                render_start_ns: start + 10_000,
                render_end_ns: start + 10_000 + (load * buffer_ns) as u64,
                active_sines: 100,
                late: load > 1.0,
                ..Default::default()
            },
            sample_rate: 48_000,
            threads: threads
                .iter()
                .map(|&(index, sines, cpu)| ThreadReport {
                    index,
                    cpu_start: cpu,
                    cpu_end: cpu,
                    sines,
                    computed: sines,
                    chunks: 1,
                    wake_latency_ns: 12_345,
                    busy_ns: 500_000,
                    cpu_ns: 400_000,
                })
                .collect(),
            ..BufferReport::default()
        }
    }

    #[test]
    fn frame_carries_columns_and_counts() {
        let mut agg = Aggregator::new(1_000_000_000);
        agg.set_thread_slots(2);
        agg.add(&buffer(0, 0.25, &[(0, 60, 0), (1, 40, 1)]));
        agg.add(&buffer(1, 1.5, &[(0, 100, 1)]));
        // The owner sets the totals from its run collector.
        *agg.counts_mut() = Counts {
            run: Totals {
                buffers: 2,
                dropouts: 1,
                ..Totals::default()
            },
            ..Counts::default()
        };
        let text = agg.take_frame(&FrameExtras {
            now_ns: 1_010_000_000,
            config_version: 3,
            idle_entries: Some(7),
            ..Default::default()
        });
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["type"], "frame");
        assert_eq!(v["load"], serde_json::json!([25.0, 150.0]));
        assert_eq!(v["dropout"], serde_json::json!([0, 1]));
        assert_eq!(
            v["drops"],
            serde_json::json!([[v["ts"][1].clone(), 0, 1]]),
            "the dropout's time, epoch and sequence number, to fetch its card"
        );
        assert_eq!(v["threads"][0]["sines"], serde_json::json!([60, 100]));
        assert_eq!(v["threads"][1]["cpu"], serde_json::json!([1, -1]));
        assert_eq!(v["threads"][1]["wake_us"], serde_json::json!([12, -1]));
        assert_eq!(v["counts"]["dropouts"], 1);
        assert_eq!(v["counts"]["buffers"], 2);
        assert_eq!(v["counts"]["frames"], 1, "the aggregator counts its frames");
        assert_eq!(v["config_version"], 3);
        assert_eq!(v["idle_entries"], 7);
        assert_eq!(v["t"], 10.0);
        assert_eq!(v["ts"][0], 0.0);
        assert_eq!(agg.pending(), 0);
        let next: Value = serde_json::from_str(&agg.take_frame(&FrameExtras::default())).unwrap();
        assert_eq!(next["load"], serde_json::json!([]));
        assert_eq!(next["drops"], serde_json::json!([]));
        assert_eq!(next["idle_entries"], Value::Null, "only when re-counted");
        assert_eq!(next["counts"]["dropouts"], 1, "counts outlive the frame");
        assert_eq!(next["counts"]["frames"], 2);
    }

    #[test]
    fn a_new_thread_slot_is_backfilled() {
        let mut agg = Aggregator::new(0);
        agg.set_thread_slots(1);
        agg.add(&buffer(0, 0.1, &[(0, 10, 0)]));
        agg.add(&buffer(1, 0.1, &[(0, 10, 0), (2, 5, 1)]));
        let v: Value = serde_json::from_str(&agg.take_frame(&FrameExtras::default())).unwrap();
        assert_eq!(v["threads"].as_array().unwrap().len(), 3);
        assert_eq!(v["threads"][2]["sines"], serde_json::json!([0, 5]));
        assert_eq!(v["threads"][1]["cpu"], serde_json::json!([-1, -1]));
    }

    #[test]
    fn columns_do_not_grow_frame_after_frame() {
        let mut agg = Aggregator::new(0);
        agg.set_thread_slots(3);
        let buffers_per_frame = 50; // 32 frames at 48 kHz, 30 frames a second
        let frame = |agg: &mut Aggregator, seq: &mut u64, n: usize| {
            for _ in 0..n {
                agg.add(&buffer(*seq, 0.2, &[(0, 10, 0), (1, 10, 1), (2, 10, 0)]));
                *seq += 1;
            }
            agg.take_frame(&FrameExtras::default())
        };
        let mut seq = 0;
        frame(&mut agg, &mut seq, buffers_per_frame);
        let steady = agg.column_bytes();
        assert!(agg.column_capacity() >= buffers_per_frame);
        // An hour of frames: no column grows.
        for _ in 0..108_000 {
            frame(&mut agg, &mut seq, buffers_per_frame);
        }
        assert_eq!(
            agg.column_bytes(),
            steady,
            "an hour of frames leaves the columns as they were"
        );
        // A held-up owner drains 10 s of buffers into one frame; the next frame shrinks back.
        let text = frame(&mut agg, &mut seq, 15_000);
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            v["load"].as_array().unwrap().len(),
            15_000,
            "the big frame carries every buffer"
        );
        frame(&mut agg, &mut seq, buffers_per_frame);
        assert_eq!(
            agg.column_bytes(),
            steady,
            "after the spike the columns shrink back"
        );
        assert_eq!(
            agg.counts().frames,
            108_003,
            "the frame count keeps running"
        );
    }
}
