//! Who the doctor runs as, read from files: uid, groups and capabilities from
//! `/proc/self/status`, resource limits from `/proc/self/limits`, names from /etc/passwd and
//! /etc/group, and the kernel command line. Used on the main thread.

use crate::roots::{read, ReadError, Roots};

/// CAP_DAC_OVERRIDE: read, write and search any file.
pub const CAP_DAC_OVERRIDE: u32 = 1;
/// CAP_DAC_READ_SEARCH: read any file and search any directory.
pub const CAP_DAC_READ_SEARCH: u32 = 2;
/// CAP_IPC_LOCK: lock memory regardless of RLIMIT_MEMLOCK.
pub const CAP_IPC_LOCK: u32 = 14;
/// CAP_SYS_ADMIN.
pub const CAP_SYS_ADMIN: u32 = 21;
/// CAP_SYS_NICE: real-time priorities regardless of RLIMIT_RTPRIO.
pub const CAP_SYS_NICE: u32 = 23;
/// CAP_PERFMON: perf events (tracepoints with raw samples) regardless of perf_event_paranoid.
pub const CAP_PERFMON: u32 = 38;

/// Identity and capabilities of the doctor's own process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessStatus {
    /// Effective uid.
    pub uid: u32,
    /// Effective gid (also in `gids`).
    pub gid: u32,
    /// Supplementary group ids plus the effective gid.
    pub gids: Vec<u32>,
    /// Effective capability mask.
    pub cap_eff: u64,
}

impl ProcessStatus {
    /// Parses `/proc/self/status` under `roots`; `Err` names the file and what was wrong.
    pub fn read(roots: &Roots) -> Result<ProcessStatus, ReadError> {
        let path = roots.proc("self/status");
        let text = read(&path)?;
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .map(str::trim)
        };
        let bad = |what: &str| ReadError::NoLine {
            path: path.clone(),
            line: what.to_owned(),
        };
        // "Uid: real effective saved fs": the effective id decides permissions.
        let second = |line: &str| line.split_whitespace().nth(1)?.parse::<u32>().ok();
        let uid = field("Uid").and_then(second).ok_or_else(|| bad("Uid"))?;
        let gid = field("Gid").and_then(second).ok_or_else(|| bad("Gid"))?;
        let mut gids: Vec<u32> = field("Groups")
            .unwrap_or("")
            .split_whitespace()
            .filter_map(|g| g.parse().ok())
            .collect();
        gids.push(gid);
        gids.sort_unstable();
        gids.dedup();
        let cap_eff = field("CapEff")
            .and_then(|v| u64::from_str_radix(v, 16).ok())
            .ok_or_else(|| bad("CapEff"))?;
        Ok(ProcessStatus {
            uid,
            gid,
            gids,
            cap_eff,
        })
    }

    /// Whether the effective capability set holds capability number `cap`.
    pub fn has_cap(&self, cap: u32) -> bool {
        cap < 64 && self.cap_eff & (1u64 << cap) != 0
    }
}

/// A resource limit's soft value; `None` = unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// The value in force (the soft limit); `None` = unlimited.
    pub soft: Option<u64>,
    /// The ceiling the process may raise it to; `None` = unlimited.
    pub hard: Option<u64>,
}

impl Limit {
    /// "95", "unlimited", "8388608 bytes" for messages.
    pub fn show_soft(&self, unit: &str) -> String {
        Limit::show(self.soft, unit)
    }

    /// The hard limit, shown like [`Limit::show_soft`].
    pub fn show_hard(&self, unit: &str) -> String {
        Limit::show(self.hard, unit)
    }

    fn show(value: Option<u64>, unit: &str) -> String {
        match value {
            None => "unlimited".to_owned(),
            Some(v) if unit.is_empty() => v.to_string(),
            Some(v) => format!("{v} {unit}"),
        }
    }
}

/// Finds one limit in `/proc/self/limits` text by its label, e.g. "Max realtime priority".
pub fn parse_limit(text: &str, label: &str) -> Option<Limit> {
    let line = text.lines().find(|l| l.starts_with(label))?;
    let mut values = line[label.len()..].split_whitespace();
    let value = |v: &str| -> Option<Option<u64>> {
        if v == "unlimited" {
            Some(None)
        } else {
            v.parse().ok().map(Some)
        }
    };
    Some(Limit {
        soft: value(values.next()?)?,
        hard: value(values.next()?)?,
    })
}

/// One group of /etc/group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// Group name.
    pub name: String,
    /// Group id.
    pub gid: u32,
    /// Users listed as members.
    pub members: Vec<String>,
}

/// Parses /etc/group text; lines that do not parse are skipped.
pub fn parse_groups(text: &str) -> Vec<Group> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split(':');
            let name = f.next()?.trim();
            let _password = f.next()?;
            let gid = f.next()?.trim().parse().ok()?;
            let members = f
                .next()
                .unwrap_or("")
                .split(',')
                .map(str::trim)
                .filter(|m| !m.is_empty())
                .map(str::to_owned)
                .collect();
            (!name.is_empty() && !name.starts_with('#')).then(|| Group {
                name: name.to_owned(),
                gid,
                members,
            })
        })
        .collect()
}

/// The user name of `uid` in /etc/passwd text.
pub fn user_name(passwd: &str, uid: u32) -> Option<String> {
    passwd.lines().find_map(|l| {
        let mut f = l.split(':');
        let name = f.next()?;
        let _password = f.next()?;
        (f.next()?.trim().parse::<u32>().ok()? == uid).then(|| name.to_owned())
    })
}

/// The kernel command line: kept in xrunlab-sys, where result fingerprints also read it.
pub use xrunlab_sys::cmdline::Cmdline;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_limits_groups_and_the_command_line() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max locked memory         8388608              8388608              bytes\n\
                      Max realtime priority     0                    0\n\
                      Max realtime timeout      unlimited            unlimited            us\n";
        let rtprio = parse_limit(limits, "Max realtime priority").unwrap();
        assert_eq!((rtprio.soft, rtprio.hard), (Some(0), Some(0)));
        let memlock = parse_limit(limits, "Max locked memory").unwrap();
        assert_eq!(memlock.show_soft("bytes"), "8388608 bytes");
        let rttime = parse_limit(limits, "Max realtime timeout").unwrap();
        assert_eq!(rttime.show_soft("us"), "unlimited");
        assert_eq!(parse_limit(limits, "Max nice priority"), None);
        assert_eq!(
            parse_limit("Max realtime priority  x  y", "Max realtime priority"),
            None
        );

        let groups = parse_groups("root:x:0:\naudio:x:29:pulse, alice\nbroken\n#c:x:1:\n");
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[1].members, vec!["pulse", "alice"]);
        assert_eq!(
            user_name(
                "root:x:0:0::/root:/bin/sh\nalice:x:1000:1000::/h:/bin/sh",
                1000
            )
            .as_deref(),
            Some("alice")
        );

        let c = Cmdline::parse(
            "quiet preempt=full threadirqs preempt=voluntary -- threadirqs2 nohz_full=1",
        );
        assert!(c.has("threadirqs") && !c.has("threadirqs2"));
        assert_eq!(c.value("preempt"), Some("voluntary"));
        assert_eq!(c.value("nohz_full"), None, "words after -- belong to init");
    }
}
