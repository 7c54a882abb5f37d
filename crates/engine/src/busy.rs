//! Busy threads: low-priority threads that alternate between blocking on a condition variable and low-energy work; each runs on its own SCHED_OTHER thread, managed from the control thread.

use crate::config::BusyConfig;
use crate::rt::clock::{now_ns, spin_until};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

struct BusyShared {
    period_us: AtomicU32,
    duty_ppm: AtomicU32,
    stop: Mutex<bool>,
    wake: Condvar,
}

struct BusyThread {
    shared: Arc<BusyShared>,
    handle: JoinHandle<()>,
}

/// The set of running busy threads; changes apply live.
#[derive(Default)]
pub struct BusyThreads {
    threads: Vec<BusyThread>,
    tids: Arc<Mutex<Vec<i32>>>,
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
                stop: Mutex::new(false),
                wake: Condvar::new(),
            });
            publish(&shared, config);
            let s = shared.clone();
            let tids = self.tids.clone();
            let index = self.threads.len();
            match std::thread::Builder::new()
                .name(format!("xrl-busy-{index}"))
                .spawn(move || {
                    if let Ok(mut t) = tids.lock() {
                        t.push(xrunlab_sys::sched::gettid());
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
    if let Ok(mut stop) = t.shared.stop.lock() {
        *stop = true;
    }
    t.shared.wake.notify_all();
    let _ = t.handle.join();
}

fn busy_loop(s: &BusyShared) {
    loop {
        let period_ns = u64::from(s.period_us.load(Ordering::Relaxed)) * 1000;
        let duty = f64::from(s.duty_ppm.load(Ordering::Relaxed)) / 1_000_000.0;
        let work_ns = (period_ns as f64 * duty) as u64;
        let block = Duration::from_nanos(period_ns - work_ns.min(period_ns));
        // Block first, like AudioPerfLab: the wait doubles as the stop check.
        let Ok(guard) = s.stop.lock() else { return };
        let Ok((guard, _)) = s.wake.wait_timeout_while(guard, block, |stop| !*stop) else {
            return;
        };
        if *guard {
            return;
        }
        drop(guard);
        spin_until(now_ns() + work_ns);
    }
}
