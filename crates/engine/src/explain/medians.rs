//! The "same load" reference of a blame card: each audio thread's median work time per active
//! sine count, over its last normal buffers; fed and read on the control thread that drains the
//! engine (the [`super::Explainer`]'s thread).
//!
//! What it is, exactly: per thread and per active sine count, a ring of the thread CPU time
//! (`ThreadReport::cpu_ns`, what a card's `ran_us` compares with) of its part in the last
//! [`RING`] buffers that had no dropout and no injected fault. At most [`LOADS_PER_THREAD`] sine
//! counts are remembered per thread (the least recently fed is forgotten), so memory is bounded
//! at threads × 8 × 64 values. A median needs [`MIN_SAMPLES`] buffers at that count.

use crate::report::BufferReport;

/// Buffers kept per thread and sine count.
pub const RING: usize = 64;
/// Sine counts remembered per thread.
pub const LOADS_PER_THREAD: usize = 8;
/// Buffers needed before a median is given.
pub const MIN_SAMPLES: usize = 8;

/// One thread's ring at one sine count.
#[derive(Debug, Clone)]
struct LoadRing {
    sines: u32,
    /// Feed counter of the thread when this ring was last fed (for forgetting the stalest).
    last_fed: u64,
    values: [u64; RING],
    len: usize,
    next: usize,
}

impl LoadRing {
    fn new(sines: u32) -> LoadRing {
        LoadRing {
            sines,
            last_fed: 0,
            values: [0; RING],
            len: 0,
            next: 0,
        }
    }

    fn push(&mut self, v: u64) {
        self.values[self.next] = v;
        self.next = (self.next + 1) % RING;
        self.len = (self.len + 1).min(RING);
    }

    fn median(&self) -> Option<u64> {
        if self.len < MIN_SAMPLES {
            return None;
        }
        let mut copy = self.values;
        let part = &mut copy[..self.len];
        let mid = part.len() / 2;
        Some(*part.select_nth_unstable(mid).1)
    }
}

#[derive(Debug, Clone, Default)]
struct ThreadMedians {
    loads: Vec<LoadRing>,
    fed: u64,
}

/// Median work time per thread (by [`crate::ThreadReport::index`]) and active sine count.
#[derive(Debug, Clone, Default)]
pub struct WorkMedians {
    threads: Vec<ThreadMedians>,
}

impl WorkMedians {
    /// An empty estimator.
    pub fn new() -> WorkMedians {
        WorkMedians::default()
    }

    /// Feeds a normal buffer: every thread's CPU time for its part at the buffer's sine count.
    /// Callers leave out dropouts and buffers with injected faults.
    pub fn add(&mut self, b: &BufferReport) {
        for t in &b.threads {
            if self.threads.len() <= t.index {
                self.threads
                    .resize_with(t.index + 1, ThreadMedians::default);
            }
            let th = &mut self.threads[t.index];
            th.fed += 1;
            let fed = th.fed;
            let at = match th.loads.iter().position(|l| l.sines == b.active_sines) {
                Some(i) => i,
                None if th.loads.len() < LOADS_PER_THREAD => {
                    th.loads.push(LoadRing::new(b.active_sines));
                    th.loads.len() - 1
                }
                None => {
                    let stalest = (0..th.loads.len())
                        .min_by_key(|&i| th.loads[i].last_fed)
                        .unwrap_or(0);
                    th.loads[stalest] = LoadRing::new(b.active_sines);
                    stalest
                }
            };
            let ring = &mut th.loads[at];
            ring.last_fed = fed;
            ring.push(t.cpu_ns);
        }
    }

    /// The median CPU time of thread `index` at `sines` active sines, once
    /// [`MIN_SAMPLES`] buffers were seen there.
    pub fn median(&self, index: usize, sines: u32) -> Option<u64> {
        self.threads
            .get(index)?
            .loads
            .iter()
            .find(|l| l.sines == sines)?
            .median()
    }

    /// The estimator in one sentence, for result files.
    pub fn description() -> String {
        format!(
            "per audio thread and active sine count, the median thread CPU time of its part in \
             its last {RING} buffers without a dropout or injected fault ({LOADS_PER_THREAD} sine \
             counts remembered per thread, the least recently seen forgotten; no median before \
             {MIN_SAMPLES} buffers at that count)"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::ThreadReport;

    fn buffer(sines: u32, cpu_ns: &[u64]) -> BufferReport {
        BufferReport {
            record: crate::rt::records::BufferRecord {
                frames: 128,
                deadline_ns: 2_666_666,
                active_sines: sines,
                ..Default::default()
            },
            sample_rate: 48_000,
            threads: cpu_ns
                .iter()
                .enumerate()
                .map(|(index, &cpu_ns)| ThreadReport {
                    index,
                    cpu_start: 0,
                    cpu_end: 0,
                    sines,
                    computed: sines,
                    chunks: 1,
                    wake_latency_ns: 0,
                    busy_ns: cpu_ns,
                    cpu_ns,
                })
                .collect(),
            ..BufferReport::default()
        }
    }

    #[test]
    fn the_median_is_per_thread_and_sine_count_and_needs_enough_buffers() {
        let mut m = WorkMedians::new();
        for i in 0..MIN_SAMPLES as u64 - 1 {
            m.add(&buffer(100, &[1_000 + i, 5_000]));
        }
        assert_eq!(m.median(0, 100), None, "not enough buffers yet");
        // One outlier among eight: the median ignores it.
        m.add(&buffer(100, &[900_000, 5_000]));
        assert_eq!(m.median(0, 100), Some(1_004));
        assert_eq!(m.median(1, 100), Some(5_000));
        assert_eq!(m.median(0, 200), None, "another load has no median yet");
        assert_eq!(m.median(7, 100), None, "no such thread");
    }

    #[test]
    fn the_ring_keeps_the_last_buffers_and_stale_loads_are_forgotten() {
        let mut m = WorkMedians::new();
        for _ in 0..RING {
            m.add(&buffer(100, &[1_000]));
        }
        for _ in 0..RING {
            m.add(&buffer(100, &[2_000]));
        }
        assert_eq!(m.median(0, 100), Some(2_000), "older buffers left the ring");
        // Eight more sine counts: the first one (100) is the stalest and goes.
        for sines in 1..=LOADS_PER_THREAD as u32 {
            for _ in 0..MIN_SAMPLES {
                m.add(&buffer(sines, &[sines as u64]));
            }
        }
        assert_eq!(m.median(0, 100), None);
        assert_eq!(m.median(0, 3), Some(3));
        assert_eq!(m.threads[0].loads.len(), LOADS_PER_THREAD);
    }
}
