//! The snapshots' rate limit, as ChromeOS's CRAS has it: at most one Perfetto snapshot per root
//! cause per interval. Asked on record's main thread before a snapshot is built, so that a trace
//! the limit would drop is never serialized; the store loop only counts what it decided.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// What an xrun carries of its window: a stored trace, or why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Snapshot {
    /// No kernel events were read for it (`--no-kernel`, or none could be), or snapshots are
    /// off: nothing to keep.
    None,
    /// Its root cause had a snapshot within the interval: counted, not built.
    RateLimited,
    /// The Perfetto trace of its window (Chrome JSON), compressed by the store.
    Trace(Vec<u8>),
}

/// Root causes followed at once: the store's roots are a handful of words (`driver`, `node`,
/// `none`…); past this, the oldest is forgotten, so that a month of odd roots stays bounded.
const MAX_ROOTS: usize = 64;

/// Decides which xruns get a snapshot: the first of each root cause, then the first after
/// `every` has passed since that root's last one.
#[derive(Debug)]
pub struct SnapshotGate {
    every: Option<Duration>,
    last: HashMap<String, Instant>,
}

impl SnapshotGate {
    /// At most one snapshot per root cause per `every`; `Duration::ZERO` keeps none.
    pub fn new(every: Duration) -> SnapshotGate {
        SnapshotGate {
            every: (!every.is_zero()).then_some(every),
            last: HashMap::new(),
        }
    }

    /// Whether snapshots are kept at all.
    pub fn enabled(&self) -> bool {
        self.every.is_some()
    }

    /// Whether an xrun of `root` now gets a snapshot; when it does, its interval starts now.
    pub fn admit(&mut self, root: &str) -> bool {
        let Some(every) = self.every else {
            return false;
        };
        let now = Instant::now();
        if self
            .last
            .get(root)
            .is_some_and(|t| now.duration_since(*t) < every)
        {
            return false;
        }
        if !self.last.contains_key(root) && self.last.len() >= MAX_ROOTS {
            if let Some(oldest) = self
                .last
                .iter()
                .min_by_key(|(_, t)| **t)
                .map(|(k, _)| k.clone())
            {
                self.last.remove(&oldest);
            }
        }
        self.last.insert(root.to_owned(), now);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_per_root_per_interval_and_zero_keeps_none() {
        let mut g = SnapshotGate::new(Duration::from_millis(200));
        assert!(g.admit("driver"));
        assert!(!g.admit("driver"), "the same root within the interval");
        assert!(g.admit("node"), "another root has its own interval");
        std::thread::sleep(Duration::from_millis(250));
        assert!(g.admit("driver"), "after the interval");
        let mut never = SnapshotGate::new(Duration::ZERO);
        assert!(!never.enabled());
        assert!(!never.admit("driver"));
    }

    #[test]
    fn the_roots_followed_stay_bounded() {
        let mut g = SnapshotGate::new(Duration::from_secs(3600));
        for i in 0..1000 {
            assert!(g.admit(&format!("root{i}")));
        }
        assert!(g.last.len() <= MAX_ROOTS);
    }
}
