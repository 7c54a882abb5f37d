//! The drift monitor: remembers the last value of everything it follows and turns each change
//! into a [`DriftEvent`] stamped with the poll's wall time. The first reading of a value is its
//! baseline, not a change. Polled on the recorder's drift thread (about once a second);
//! the graph's changes are fed in by the caller on the same thread.

use crate::clocks::{ClockSample, SUSPEND_MIN_NS};
use crate::event::{DriftEvent, DriftKind};
use crate::sched::{read_sched, Sched};
use crate::sysfs;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// A real-time thread to follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchedThread {
    /// Its process.
    pub pid: i32,
    /// The thread.
    pub tid: i32,
    /// What it is, in the words the events use (`pipewire's data loop`, `jackd`…).
    pub name: String,
}

impl WatchedThread {
    fn subject(&self) -> String {
        format!("{} (tid {})", self.name, self.tid)
    }
}

/// Follows the machine's settings and the watched threads' scheduling.
pub struct DriftMonitor {
    root: PathBuf,
    threads: Vec<(WatchedThread, Option<Sched>)>,
    /// `policyN governor` / `policyN epp` → value.
    cpufreq: Option<BTreeMap<String, String>>,
    profile: Option<String>,
    online: Option<String>,
    throttle: Option<BTreeMap<String, u64>>,
    suspended_ns: Option<i64>,
    quantum: Option<u32>,
    rate: Option<u32>,
}

/// `before` → `after` as an event at `time_ns`.
fn event(time_ns: i64, kind: DriftKind, subject: &str, before: &str, after: &str) -> DriftEvent {
    DriftEvent {
        time_ns,
        kind,
        subject: subject.to_owned(),
        before: before.to_owned(),
        after: after.to_owned(),
    }
}

impl DriftMonitor {
    /// A monitor of the machine under `root` (`/` for this machine, a fixture tree in tests).
    pub fn new(root: impl Into<PathBuf>) -> DriftMonitor {
        DriftMonitor {
            root: root.into(),
            threads: Vec::new(),
            cpufreq: None,
            profile: None,
            online: None,
            throttle: None,
            suspended_ns: None,
            quantum: None,
            rate: None,
        }
    }

    /// Follows these threads from now on (the server's and the nodes' real-time threads); a
    /// thread already followed keeps its last reading, a new one is read at the next poll as
    /// its baseline.
    pub fn watch_threads(&mut self, threads: Vec<WatchedThread>) {
        let mut old = std::mem::take(&mut self.threads);
        self.threads = threads
            .into_iter()
            .map(|t| {
                let last = old
                    .iter_mut()
                    .find(|(o, _)| o.pid == t.pid && o.tid == t.tid)
                    .and_then(|(_, s)| s.take());
                (t, last)
            })
            .collect();
    }

    /// Reads everything now; returns the changes since the last poll.
    pub fn poll(&mut self) -> Vec<DriftEvent> {
        self.poll_at(ClockSample::now())
    }

    /// [`DriftMonitor::poll`] with the clocks read by the caller (tests give made-up ones).
    pub fn poll_at(&mut self, clock: ClockSample) -> Vec<DriftEvent> {
        let now = clock.wall_ns;
        let mut out = Vec::new();

        let suspended = clock.suspended_ns();
        if let Some(before) = self.suspended_ns {
            let slept = suspended - before;
            if slept >= SUSPEND_MIN_NS {
                out.push(event(
                    now,
                    DriftKind::Resume,
                    "machine",
                    "awake",
                    &format!("{:.1} s", slept as f64 / 1e9),
                ));
            }
        }
        self.suspended_ns = Some(suspended);

        let root = self.root.clone();
        self.threads.retain_mut(|(thread, last)| {
            match (read_sched(&root, thread.pid, thread.tid), *last) {
                (Some(now_s), Some(was)) if now_s != was => {
                    out.push(event(
                        now,
                        DriftKind::Sched,
                        &thread.subject(),
                        &was.to_string(),
                        &now_s.to_string(),
                    ));
                    *last = Some(now_s);
                    true
                }
                (Some(now_s), _) => {
                    *last = Some(now_s);
                    true
                }
                (None, Some(was)) => {
                    out.push(event(
                        now,
                        DriftKind::ThreadGone,
                        &thread.subject(),
                        &was.to_string(),
                        "gone",
                    ));
                    false // Gone for good: a tid is not reused for the same thread.
                }
                (None, None) => true,
            }
        });

        let cpufreq = sysfs::cpufreq(&root);
        if let Some(old) = &self.cpufreq {
            for (key, value) in &cpufreq {
                let Some(was) = old.get(key).filter(|w| *w != value) else {
                    continue;
                };
                let (policy, what) = key.split_once(' ').unwrap_or((key, ""));
                let kind = if what == "epp" {
                    DriftKind::Epp
                } else {
                    DriftKind::Governor
                };
                out.push(event(now, kind, policy, was, value));
            }
        }
        self.cpufreq = Some(cpufreq);

        let changed = |kind, subject: &str, old: &mut Option<String>, new: Option<String>| {
            let e = match (&*old, &new) {
                (Some(was), Some(is)) if was != is => Some(event(now, kind, subject, was, is)),
                _ => None,
            };
            if new.is_some() {
                *old = new;
            }
            e
        };
        out.extend(changed(
            DriftKind::PlatformProfile,
            "platform",
            &mut self.profile,
            sysfs::platform_profile(&root),
        ));
        out.extend(changed(
            DriftKind::CpuOnline,
            "cpus",
            &mut self.online,
            sysfs::online(&root),
        ));

        let throttle = sysfs::throttle(&root);
        if let Some(old) = &self.throttle {
            for (key, &n) in &throttle {
                if let Some(&was) = old.get(key).filter(|&&w| n > w) {
                    out.push(event(
                        now,
                        DriftKind::Throttle,
                        key,
                        &was.to_string(),
                        &n.to_string(),
                    ));
                }
            }
        }
        self.throttle = Some(throttle);
        out
    }

    /// The server's graph now runs at `quantum` frames and `rate` Hz (seen at `time_ns`):
    /// the changes since the last call.
    pub fn graph(&mut self, quantum: u32, rate: u32, time_ns: i64) -> Vec<DriftEvent> {
        let mut out = Vec::new();
        for (kind, last, new) in [
            (DriftKind::Quantum, &mut self.quantum, quantum),
            (DriftKind::Rate, &mut self.rate, rate),
        ] {
            if let Some(was) = last.filter(|&w| w != new) {
                out.push(event(
                    time_ns,
                    kind,
                    "graph",
                    &was.to_string(),
                    &new.to_string(),
                ));
            }
            *last = Some(new);
        }
        out
    }

    /// A node appeared (`added`) or went away, at `time_ns`.
    pub fn node(&self, name: &str, added: bool, time_ns: i64) -> DriftEvent {
        let kind = if added {
            DriftKind::NodeAdded
        } else {
            DriftKind::NodeRemoved
        };
        let (b, a) = if added {
            ("", "present")
        } else {
            ("present", "")
        };
        event(time_ns, kind, name, b, a)
    }
}
