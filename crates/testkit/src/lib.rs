//! Test support shared by xrunlab's tests: a forked child that hogs one CPU at SCHED_FIFO and
//! reaping it (the kernel tracing tests), and fixture trees for tests that read /proc, /sys or
//! tracefs files; runs on test threads.
#![deny(missing_docs)]

use std::ffi::CStr;

/// Exit status of a hog whose `sched_setscheduler` was refused.
pub const HOG_POLICY_REFUSED: i32 = 3;
/// Exit status of a hog whose `sched_setaffinity` was refused.
pub const HOG_AFFINITY_REFUSED: i32 = 4;

/// What a hog does: its name (as `ps` and procfs show it), the CPU it pins itself to, its
/// SCHED_FIFO priority and how long it spins.
#[derive(Debug, Clone, Copy)]
pub struct RtHog<'a> {
    /// The child's command name (`PR_SET_NAME`, at most 15 bytes).
    pub name: &'a CStr,
    /// The one CPU it may run on.
    pub cpu: usize,
    /// Its SCHED_FIFO priority.
    pub priority: i32,
    /// How long it spins, in CLOCK_MONOTONIC nanoseconds.
    pub spin_ns: u64,
}

impl RtHog<'_> {
    /// Forks the hog and returns its pid. The child exits 0 after spinning, or at once with
    /// [`HOG_AFFINITY_REFUSED`] or [`HOG_POLICY_REFUSED`]. Reap it with [`reap`]; until then it
    /// stays in procfs (a zombie) with its name and policy, which a test that builds blame
    /// cards after the fact relies on.
    pub fn fork(&self) -> i32 {
        // SAFETY: the child only makes raw system calls (prctl, sched_setaffinity,
        // sched_setscheduler, clock_gettime, _exit) on memory it owns or that was mapped before
        // the fork: no allocation or lock that another thread of this process could have held
        // at fork time.
        unsafe {
            let pid = libc::fork();
            assert!(pid >= 0, "fork failed");
            if pid == 0 {
                libc::prctl(
                    libc::PR_SET_NAME,
                    self.name.as_ptr() as libc::c_ulong,
                    0,
                    0,
                    0,
                );
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(self.cpu, &mut set);
                if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                    libc::_exit(HOG_AFFINITY_REFUSED);
                }
                let param = libc::sched_param {
                    sched_priority: self.priority,
                };
                if libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) != 0 {
                    libc::_exit(HOG_POLICY_REFUSED);
                }
                let start = monotonic_ns();
                while monotonic_ns() < start + self.spin_ns {}
                libc::_exit(0);
            }
            pid
        }
    }
}

/// CLOCK_MONOTONIC in nanoseconds, with nothing but the system call (it runs in a forked child).
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Waits for the child `pid` to end and returns its raw wait status (0: it exited 0).
pub fn reap(pid: i32) -> i32 {
    let mut status = 0;
    // SAFETY: waiting for a child of this process; `status` is a valid out pointer.
    let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(rc, pid, "waitpid({pid})");
    status
}

/// A fixture tree for tests that read /proc, /sys or tracefs files: a directory of its own
/// under the system temp dir (unique per process and tree), removed when dropped.
pub struct FixtureTree {
    root: std::path::PathBuf,
}

impl FixtureTree {
    /// An empty tree; `name` tells trees apart in the temp dir.
    pub fn new(name: &str) -> FixtureTree {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let root =
            std::env::temp_dir().join(format!("xrunlab-fixture-{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).expect("creating a fixture tree in the temp dir");
        FixtureTree { root }
    }

    /// The tree's root.
    pub fn path(&self) -> &std::path::Path {
        &self.root
    }

    /// Writes `contents` to `rel` under the root, creating its directories.
    pub fn write(&self, rel: &str, contents: &str) -> &FixtureTree {
        let p = self.root.join(rel);
        std::fs::create_dir_all(p.parent().expect("a file path has a parent"))
            .expect("creating fixture directories");
        std::fs::write(&p, contents).expect("writing a fixture file");
        self
    }
}

impl Drop for FixtureTree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}
