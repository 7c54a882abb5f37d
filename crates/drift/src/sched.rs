//! A thread's scheduling as the kernel reports it in `/proc/PID/task/TID/stat` (field 40,
//! `rt_priority`, and 41, `policy`, per proc(5)); read on the drift thread.

use std::fmt;
use std::path::Path;

/// A scheduling policy and real-time priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sched {
    /// The policy number (SCHED_OTHER 0, FIFO 1, RR 2, BATCH 3, IDLE 5, DEADLINE 6).
    pub policy: u32,
    /// The real-time priority (0 for the non-real-time policies).
    pub priority: u32,
}

impl Sched {
    /// Whether it is a real-time policy (FIFO, RR or DEADLINE).
    pub fn is_realtime(self) -> bool {
        matches!(self.policy, 1 | 2 | 6)
    }
}

impl fmt::Display for Sched {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self.policy {
            0 => "SCHED_OTHER",
            1 => "SCHED_FIFO",
            2 => "SCHED_RR",
            3 => "SCHED_BATCH",
            5 => "SCHED_IDLE",
            6 => "SCHED_DEADLINE",
            _ => return write!(f, "policy {}", self.policy),
        };
        if matches!(self.policy, 1 | 2) {
            write!(f, "{name} {}", self.priority)
        } else {
            f.write_str(name)
        }
    }
}

/// Reads thread `tid` of process `pid` under `root` (`/` on the machine); `None` when the thread
/// is gone or its stat is not as proc(5) says.
pub fn read_sched(root: &Path, pid: i32, tid: i32) -> Option<Sched> {
    let text = std::fs::read_to_string(root.join(format!("proc/{pid}/task/{tid}/stat"))).ok()?;
    parse_stat(&text)
}

/// Fields 40 and 41 of a stat line. The command name (field 2) may hold spaces and
/// parentheses, so fields are counted from its last `)`.
fn parse_stat(text: &str) -> Option<Sched> {
    let after_comm = &text[text.rfind(')')? + 1..];
    // After the comm comes field 3; field N is at index N - 3.
    let mut fields = after_comm.split_ascii_whitespace().skip(40 - 3);
    let priority = fields.next()?.parse().ok()?;
    let policy = fields.next()?.parse().ok()?;
    Some(Sched { policy, priority })
}

/// A stat line for thread `comm` with `priority` and `policy`, as the kernel writes it: the
/// fixture trees of the tests use it.
#[doc(hidden)]
pub fn stat_line(tid: i32, comm: &str, priority: u32, policy: u32) -> String {
    let mut fields: Vec<String> = vec![tid.to_string(), format!("({comm})"), "S".into()];
    // Fields 4 to 39: zeros are as good as any for these tests.
    fields.extend((4..=39).map(|_| "0".to_owned()));
    fields.push(priority.to_string());
    fields.push(policy.to_string());
    fields.extend((42..=52).map(|_| "0".to_owned()));
    fields.join(" ") + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_gives_policy_and_priority_even_with_a_strange_comm() {
        let line = stat_line(7447, "data) loop (x", 88, 1);
        assert_eq!(
            parse_stat(&line),
            Some(Sched {
                policy: 1,
                priority: 88
            })
        );
        assert_eq!(parse_stat("12 (short) S 1 2"), None);
    }

    #[test]
    fn this_threads_own_stat_reads_as_the_kernel_has_it() {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        let s = read_sched(Path::new("/"), std::process::id() as i32, tid).unwrap();
        // SAFETY: sched_getscheduler on our own thread id.
        let policy = unsafe { libc::sched_getscheduler(tid) };
        assert_eq!(s.policy as i32, policy);
    }

    #[test]
    fn policies_read_as_chrt_names_them() {
        let s = |policy, priority| Sched { policy, priority }.to_string();
        assert_eq!(s(1, 88), "SCHED_FIFO 88");
        assert_eq!(s(0, 0), "SCHED_OTHER");
        assert_eq!(s(9, 0), "policy 9");
    }
}
