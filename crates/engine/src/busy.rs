//! Busy threads: low-priority threads that alternate between blocking on a condition variable and
//! low-energy work, as AudioPerfLab's `Base/BusyThreads.cpp` does; each runs on its own SCHED_OTHER
//! nice-19 thread, managed from the control thread.
//!
//! AudioPerfLab lowers its busy threads to the minimum SCHED_OTHER priority. On
//! Linux the nearest equivalent is nice 19: the lowest weight the normal class
//! gives (15 against 1024 for nice 0), while the thread still gets its turn
//! whenever a CPU is free. SCHED_IDLE (weight 3) would be weaker still, so a
//! busy thread would no longer keep its core busy on a loaded machine, which is
//! its whole purpose; nice 19 is the closer effect.

use crate::config::BusyConfig;
use crate::rt::clock::now_ns;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;
use xrunlab_sys::outcome::Outcome;

/// The nice value busy threads run at.
pub const BUSY_NICE: i32 = 19;

struct BusyShared {
    period_us: AtomicU32,
    duty_ppm: AtomicU32,
    /// Read while working, so that a stop (or a duty of 100 %) ends the work at once.
    stopping: AtomicBool,
    stop: Mutex<bool>,
    wake: Condvar,
    /// Set by the thread once it has lowered its priority.
    info: Mutex<Option<BusyThreadInfo>>,
    /// Wall-clock time spent working and in whole iterations, for the achieved duty.
    worked_ns: AtomicU64,
    iterations_ns: AtomicU64,
}

struct BusyThread {
    shared: Arc<BusyShared>,
    handle: JoinHandle<()>,
}

/// One busy thread and the priority it obtained.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BusyThreadInfo {
    /// Kernel thread id.
    pub tid: i32,
    /// Lowering to nice 19: what took effect.
    pub priority: Outcome,
}

/// The set of running busy threads; changes apply live.
#[derive(Default)]
pub struct BusyThreads {
    threads: Vec<BusyThread>,
}

impl BusyThreads {
    /// Starts or stops threads to match `config.count`, and publishes period and duty.
    pub fn apply(&mut self, config: &BusyConfig) {
        while self.threads.len() > config.count as usize {
            if let Some(t) = self.threads.pop() {
                stop(t);
            }
        }
        for t in &self.threads {
            publish(&t.shared, config);
        }
        while self.threads.len() < config.count as usize {
            let shared = Arc::new(BusyShared {
                period_us: AtomicU32::new(0),
                duty_ppm: AtomicU32::new(0),
                stopping: AtomicBool::new(false),
                stop: Mutex::new(false),
                wake: Condvar::new(),
                info: Mutex::new(None),
                worked_ns: AtomicU64::new(0),
                iterations_ns: AtomicU64::new(0),
            });
            publish(&shared, config);
            let s = shared.clone();
            let index = self.threads.len();
            match std::thread::Builder::new()
                .name(format!("xrl-busy-{index}"))
                .spawn(move || {
                    let info = BusyThreadInfo {
                        tid: xrunlab_sys::sched::gettid(),
                        priority: xrunlab_sys::sched::set_current_thread_nice(BUSY_NICE),
                    };
                    if let Ok(mut slot) = s.info.lock() {
                        *slot = Some(info);
                    }
                    busy_loop(&s)
                }) {
                Ok(handle) => self.threads.push(BusyThread { shared, handle }),
                Err(_) => break,
            }
        }
    }

    /// Busy threads running.
    pub fn count(&self) -> usize {
        self.threads.len()
    }

    /// Share of wall-clock time the busy threads spent working, over all their
    /// completed iterations (`None` before the first one ends).
    pub fn achieved_duty(&self) -> Option<f64> {
        let (worked, total) = self.threads.iter().fold((0u64, 0u64), |(w, t), b| {
            (
                w + b.shared.worked_ns.load(Ordering::Relaxed),
                t + b.shared.iterations_ns.load(Ordering::Relaxed),
            )
        });
        (total > 0).then(|| worked as f64 / total as f64)
    }

    /// Each running busy thread's tid and priority outcome (threads that have not
    /// started yet are left out).
    pub fn threads(&self) -> Vec<BusyThreadInfo> {
        self.threads
            .iter()
            .filter_map(|t| t.shared.info.lock().ok().and_then(|i| i.clone()))
            .collect()
    }
}

impl Drop for BusyThreads {
    fn drop(&mut self) {
        for t in self.threads.drain(..) {
            stop(t);
        }
    }
}

fn publish(s: &BusyShared, c: &BusyConfig) {
    s.period_us
        .store(c.period_ms.saturating_mul(1000), Ordering::Relaxed);
    s.duty_ppm
        .store((f64::from(c.duty_pct) * 10_000.0) as u32, Ordering::Relaxed);
}

fn stop(t: BusyThread) {
    t.shared.stopping.store(true, Ordering::Release);
    if let Ok(mut stop) = t.shared.stop.lock() {
        *stop = true;
    }
    t.shared.wake.notify_all();
    let _ = t.handle.join();
}

/// Share of the iteration so far spent working: `work / (work + wait)`.
fn duty_so_far(iteration_start_ns: u64, work_start_ns: u64, now: u64) -> f64 {
    let total = now.saturating_sub(iteration_start_ns);
    if total == 0 {
        return 0.0;
    }
    now.saturating_sub(work_start_ns) as f64 / total as f64
}

fn busy_loop(s: &BusyShared) {
    loop {
        let period_ns = u64::from(s.period_us.load(Ordering::Relaxed)) * 1000;
        let duty = f64::from(s.duty_ppm.load(Ordering::Relaxed)) / 1_000_000.0;
        let iteration_start = now_ns();
        let wait = Duration::from_nanos((period_ns as f64 * (1.0 - duty)).max(0.0) as u64);
        // Block first, like AudioPerfLab: the wait doubles as the stop check.
        let Ok(guard) = s.stop.lock() else { return };
        let Ok((guard, _)) = s.wake.wait_timeout_while(guard, wait, |stop| !*stop) else {
            return;
        };
        if *guard {
            return;
        }
        drop(guard);
        // Work until the iteration's duty is reached rather than for a fixed time:
        // a wait that overslept is made up for, as AudioPerfLab does. At 100 % the
        // thread works until it is stopped.
        let work_start = now_ns();
        while duty_so_far(iteration_start, work_start, now_ns()) < duty
            && !s.stopping.load(Ordering::Acquire)
        {
            for _ in 0..16 {
                std::hint::spin_loop();
            }
        }
        let end = now_ns();
        s.worked_ns
            .fetch_add(end.saturating_sub(work_start), Ordering::Relaxed);
        s.iterations_ns
            .fetch_add(end.saturating_sub(iteration_start), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duty_counts_work_against_the_whole_iteration() {
        // 10 ms wait that overslept to 14 ms, then 6 ms of work: 6 / 20.
        let d = duty_so_far(0, 14_000_000, 20_000_000);
        assert!((d - 0.3).abs() < 1e-12);
        assert_eq!(duty_so_far(5, 5, 5), 0.0);
    }

    #[test]
    fn busy_threads_run_at_nice_19_and_work_their_duty() {
        let mut busy = BusyThreads::default();
        busy.apply(&BusyConfig {
            count: 1,
            period_ms: 10,
            duty_pct: 50.0,
        });
        let until = std::time::Instant::now() + Duration::from_secs(2);
        while busy.threads().is_empty() && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        let info = busy.threads();
        assert_eq!(info.len(), 1, "the busy thread reported in");
        assert_eq!(
            info[0].priority,
            Outcome::Applied {
                detail: "SCHED_OTHER nice 19".into()
            }
        );
        let stat_path = format!("/proc/self/task/{}/stat", info[0].tid);
        let stat = std::fs::read_to_string(&stat_path).unwrap();
        // Field 19 is nice; parse after the last ')' (the comm may hold spaces).
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        let nice: i32 = after.split(' ').nth(16).unwrap().parse().unwrap();
        assert_eq!(nice, 19, "{stat_path}");

        // Each iteration works until work / (work + wait) reaches the duty, so the
        // achieved duty is at least 50 % whatever the wait overslept; it exceeds it
        // by the spin step, or (wall-clock, as AudioPerfLab measures) by however long
        // a loaded machine preempts the nice-19 thread while it works. It still waits.
        std::thread::sleep(Duration::from_millis(500));
        let achieved = busy.achieved_duty().expect("iterations completed");
        assert!(
            (0.499..0.999).contains(&achieved),
            "a 50 % busy thread achieved {:.1} %",
            achieved * 100.0
        );
        busy.apply(&BusyConfig {
            count: 0,
            ..BusyConfig::default()
        });
        assert_eq!(busy.count(), 0);
    }
}
