//! Who a thread id is: its process id, name, scheduling policy and parent, read from procfs when
//! a blame card is built (on the caller's non-real-time thread), or remembered from when the
//! tracer first saw the task ([`SeenTasks`], filled by the tracer's reader thread), because a
//! short-lived culprit is often gone by the time its card is made.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// What procfs says about a task right now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskIdentity {
    /// Process id (thread group id) the thread belongs to.
    pub pid: i32,
    /// Its current name.
    pub comm: String,
    /// Policy and priority, e.g. `SCHED_FIFO 90` or `SCHED_OTHER nice 0`.
    pub policy: String,
    /// Its parent process: pid, name and policy, where known.
    pub parent: Option<(i32, String, String)>,
}

/// Looks up a thread id; blame cards use it to name the policy of the tasks they blame.
pub trait TaskLookup {
    /// The task with thread id `tid`, or `None` if it is gone or cannot be read.
    fn lookup(&self, tid: i32) -> Option<TaskIdentity>;
}

/// Answers nothing: cards fall back to the priority seen in the trace.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoLookup;

impl TaskLookup for NoLookup {
    fn lookup(&self, _tid: i32) -> Option<TaskIdentity> {
        None
    }
}

/// Reads `<proc_root>/<tid>/{stat,status}` (procfs resolves any thread id there).
#[derive(Debug, Clone)]
pub struct ProcLookup {
    proc_root: PathBuf,
}

impl ProcLookup {
    /// A lookup in procfs mounted at `proc_root` (normally `/proc`).
    pub fn new(proc_root: &Path) -> ProcLookup {
        ProcLookup {
            proc_root: proc_root.to_owned(),
        }
    }
}

impl TaskLookup for ProcLookup {
    fn lookup(&self, tid: i32) -> Option<TaskIdentity> {
        if tid <= 0 {
            return None;
        }
        let dir = self.proc_root.join(tid.to_string());
        let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
        let status = std::fs::read_to_string(dir.join("status")).ok()?;
        let (comm, policy) = parse_stat(&stat)?;
        let ppid: Option<i32> = status
            .lines()
            .find_map(|l| l.strip_prefix("PPid:"))
            .and_then(|p| p.trim().parse().ok())
            .filter(|&p| p > 1);
        let parent = ppid.and_then(|p| {
            let stat =
                std::fs::read_to_string(self.proc_root.join(p.to_string()).join("stat")).ok()?;
            let (name, policy) = parse_stat(&stat)?;
            Some((p, name, policy))
        });
        let pid = status
            .lines()
            .find_map(|l| l.strip_prefix("Tgid:"))?
            .trim()
            .parse()
            .ok()?;
        Some(TaskIdentity {
            pid,
            comm,
            policy,
            parent,
        })
    }
}

/// Name and "POLICY prio" from a stat line: fields after the last ')' start at field 3
/// (state); nice is field 19, rt_priority 40, policy 41.
fn parse_stat(stat: &str) -> Option<(String, String)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = stat.get(open + 1..close)?.to_owned();
    let rest: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
    let field = |n: usize| rest.get(n - 3).and_then(|s| s.parse::<i64>().ok());
    let nice = field(19)?;
    let rt_priority = field(40)?;
    let policy = field(41)?;
    Some((comm, describe_policy(policy, rt_priority, nice)))
}

/// `SCHED_FIFO 90`, `SCHED_OTHER nice -5`... from the numbers procfs gives.
pub fn describe_policy(policy: i64, rt_priority: i64, nice: i64) -> String {
    match policy {
        1 => format!("SCHED_FIFO {rt_priority}"),
        2 => format!("SCHED_RR {rt_priority}"),
        6 => "SCHED_DEADLINE".to_owned(),
        0 => format!("SCHED_OTHER nice {nice}"),
        3 => format!("SCHED_BATCH nice {nice}"),
        5 => "SCHED_IDLE".to_owned(),
        other => format!("policy {other}"),
    }
}

/// What a kernel priority from a sched event says without procfs: `RT 90` (FIFO or RR cannot be
/// told apart), `normal nice 0`, or `SCHED_DEADLINE`.
pub fn describe_kernel_prio(prio: i32) -> String {
    match prio {
        p if p < 0 => "SCHED_DEADLINE".to_owned(),
        // The kernel's priority cannot tell FIFO from RR: one form says both, everywhere.
        p if p < 100 => format!("SCHED_FIFO/RR {}", 99 - p),
        p => format!("normal nice {}", p - 120),
    }
}

/// Tasks as the tracer first saw them, while they were alive, plus procfs for the rest. Shared
/// between the tracer's reader thread (which adds real-time tasks as they appear) and the thread
/// that builds cards. Bounded: it forgets everything past [`SeenTasks::CAPACITY`] entries.
#[derive(Debug, Clone)]
pub struct SeenTasks {
    seen: Arc<Mutex<HashMap<i32, TaskIdentity>>>,
    procfs: ProcLookup,
}

impl SeenTasks {
    /// Entries kept before the cache starts over (a few hundred bytes each).
    pub const CAPACITY: usize = 4096;

    /// An empty cache over procfs at `proc_root`.
    pub fn new(proc_root: &Path) -> SeenTasks {
        SeenTasks {
            seen: Arc::new(Mutex::new(HashMap::new())),
            procfs: ProcLookup::new(proc_root),
        }
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<i32, TaskIdentity>> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Remembers `tid` as procfs shows it now, unless it is known already (reader thread).
    pub fn note(&self, tid: i32) {
        if tid <= 0 || self.map().contains_key(&tid) {
            return;
        }
        if let Some(t) = self.procfs.lookup(tid) {
            let mut map = self.map();
            if map.len() >= Self::CAPACITY {
                map.clear();
            }
            map.insert(tid, t);
        }
    }

    /// How many tasks are remembered.
    pub fn len(&self) -> usize {
        self.map().len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl TaskLookup for SeenTasks {
    fn lookup(&self, tid: i32) -> Option<TaskIdentity> {
        // Seen during this trace: the same task, even if it has exited or renamed itself since.
        let seen = self.map().get(&tid).cloned();
        match (seen, self.procfs.lookup(tid)) {
            // Alive and unchanged, or renamed: procfs has its newest name and policy.
            (Some(old), Some(now)) if old.pid == now.pid => Some(now),
            (Some(old), _) => Some(old),
            (None, now) => now,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_and_name_come_from_stat_even_with_spaces_in_the_name() {
        let stat = "4711 (xrl hog) R 1 4711 1 0 -1 4194560 0 0 0 0 0 0 0 0 -91 0 1 0 \
                    100 1000 10 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 90 1 0 0 0";
        let (comm, policy) = parse_stat(stat).unwrap();
        assert_eq!(comm, "xrl hog");
        assert_eq!(policy, "SCHED_FIFO 90");
    }

    #[test]
    fn kernel_prio_maps_to_rt_and_nice() {
        assert_eq!(describe_kernel_prio(9), "SCHED_FIFO/RR 90");
        assert_eq!(describe_kernel_prio(120), "normal nice 0");
        assert_eq!(describe_kernel_prio(115), "normal nice -5");
        assert_eq!(describe_kernel_prio(-1), "SCHED_DEADLINE");
        assert_eq!(describe_policy(0, 0, 5), "SCHED_OTHER nice 5");
    }

    #[test]
    fn this_thread_is_found_in_the_real_procfs() {
        let tid = xrunlab_sys::gettid();
        let me = ProcLookup::new(Path::new("/proc")).lookup(tid).unwrap();
        assert_eq!(me.pid, std::process::id() as i32);
        assert!(me.policy.starts_with("SCHED_"), "{}", me.policy);
        assert!(ProcLookup::new(Path::new("/proc")).lookup(-3).is_none());
    }
}
