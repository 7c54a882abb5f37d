//! Which drift precedes a card, in words: the settings still in effect when the xrun happened
//! (a demoted thread, a governor, an energy preference, a platform profile) and the recent
//! events around it (a resume, throttling, hotplug, a new quantum or rate, nodes coming and
//! going). Run where the card is made, on the recorder's store thread.

use crate::event::{DriftEvent, DriftKind};
use std::collections::BTreeMap;

/// How far back the passing events count for a card.
#[derive(Debug, Clone, Copy)]
pub struct Lookback {
    /// A resume, throttling, hotplug, a quantum, rate or node change this recent (ns before the
    /// card) is mentioned.
    pub recent_ns: i64,
    /// A demotion this soon after a resume is said to date from the resume.
    pub resume_link_ns: i64,
}

impl Default for Lookback {
    fn default() -> Lookback {
        Lookback {
            recent_ns: 60_000_000_000,
            resume_link_ns: 120_000_000_000,
        }
    }
}

fn local_tm(time_ns: i64) -> Option<libc::tm> {
    let secs: libc::time_t = time_ns.div_euclid(1_000_000_000);
    // SAFETY: an all-zero tm is a valid value for localtime_r to overwrite.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are valid for the call; localtime_r is the thread-safe form.
    let ok = !unsafe { libc::localtime_r(&secs, &mut tm) }.is_null();
    ok.then_some(tm)
}

/// `time_ns` (ns since the Unix epoch) as the local clock time, `14:02:11`.
pub fn clock_time_local(time_ns: i64) -> String {
    match local_tm(time_ns) {
        Some(tm) => format!("{:02}:{:02}:{:02}", tm.tm_hour, tm.tm_min, tm.tm_sec),
        None => format!("{} s after the epoch", time_ns / 1_000_000_000),
    }
}

/// `time_ns` as the local date and time, `2026-11-25 14:02:11`.
pub fn date_time_local(time_ns: i64) -> String {
    match local_tm(time_ns) {
        Some(tm) => format!(
            "{:04}-{:02}-{:02} {:02}:{:02}:{:02}",
            tm.tm_year + 1900,
            tm.tm_mon + 1,
            tm.tm_mday,
            tm.tm_hour,
            tm.tm_min,
            tm.tm_sec
        ),
        None => format!("{} s after the epoch", time_ns / 1_000_000_000),
    }
}

/// The drift that precedes a card at `card_ns`, one sentence per point, the ones still in
/// effect first. `events` is any slice of events (in any order); those after the card are
/// ignored. `clock` writes a time (tests give a fixed one; the recorder
/// [`clock_time_local`]).
pub fn before_card(
    events: &[DriftEvent],
    card_ns: i64,
    lookback: Lookback,
    clock: &dyn Fn(i64) -> String,
) -> Vec<String> {
    let mut past: Vec<&DriftEvent> = events.iter().filter(|e| e.time_ns <= card_ns).collect();
    past.sort_by_key(|e| e.time_ns);

    // The last state of each (kind, subject) for the settings that stay in effect.
    let mut last: BTreeMap<(&str, &str), &DriftEvent> = BTreeMap::new();
    for e in &past {
        if matches!(
            e.kind,
            DriftKind::Sched | DriftKind::Governor | DriftKind::Epp | DriftKind::PlatformProfile
        ) {
            last.insert((e.kind.name(), e.subject.as_str()), e);
        }
    }
    let resume_before = |t: i64| {
        past.iter()
            .rev()
            .find(|r| {
                r.kind == DriftKind::Resume
                    && r.time_ns <= t
                    && t - r.time_ns <= lookback.resume_link_ns
            })
            .map(|r| r.time_ns)
    };
    let since = |t: i64| match resume_before(t) {
        Some(r) => format!("since the resume at {}", clock(r)),
        None => format!("since {}", clock(t)),
    };

    let mut out = Vec::new();
    for e in last.values() {
        match e.kind {
            DriftKind::Sched if !is_realtime(&e.after) => out.push(format!(
                "{} has run {} {} (it had {})",
                e.subject,
                e.after,
                since(e.time_ns),
                e.before
            )),
            DriftKind::Governor => out.push(format!(
                "cpufreq {} has used the {} governor {} (it was {})",
                e.subject,
                e.after,
                since(e.time_ns),
                e.before
            )),
            DriftKind::Epp => out.push(format!(
                "cpufreq {} has preferred {} {} (it was {})",
                e.subject,
                e.after,
                since(e.time_ns),
                e.before
            )),
            DriftKind::PlatformProfile => out.push(format!(
                "the platform profile has been {} {} (it was {})",
                e.after,
                since(e.time_ns),
                e.before
            )),
            _ => {}
        }
    }

    // Passing events close before the card, latest first; throttling summed per counter.
    let recent: Vec<&&DriftEvent> = past
        .iter()
        .filter(|e| card_ns - e.time_ns <= lookback.recent_ns)
        .collect();
    let ago = |t: i64| format!("{:.0} s before", (card_ns - t) as f64 / 1e9);
    let mut throttled: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for e in recent.iter().rev() {
        match e.kind {
            DriftKind::Resume => out.push(format!(
                "the machine resumed from suspend at {}, {}",
                clock(e.time_ns),
                ago(e.time_ns)
            )),
            DriftKind::CpuOnline => out.push(format!(
                "the online CPUs changed from {} to {} at {}, {}",
                e.before,
                e.after,
                clock(e.time_ns),
                ago(e.time_ns)
            )),
            DriftKind::Quantum | DriftKind::Rate => out.push(format!(
                "the {} changed from {} to {} at {}, {}",
                if e.kind == DriftKind::Quantum {
                    "quantum"
                } else {
                    "sample rate"
                },
                e.before,
                e.after,
                clock(e.time_ns),
                ago(e.time_ns)
            )),
            DriftKind::NodeAdded | DriftKind::NodeRemoved => out.push(format!(
                "node {} {} at {}, {}",
                e.subject,
                if e.kind == DriftKind::NodeAdded {
                    "appeared"
                } else {
                    "went away"
                },
                clock(e.time_ns),
                ago(e.time_ns)
            )),
            DriftKind::Throttle => {
                let (Ok(b), Ok(a)) = (e.before.parse::<u64>(), e.after.parse::<u64>()) else {
                    continue;
                };
                let entry = throttled.entry(e.subject.as_str()).or_insert((a, a));
                entry.0 = entry.0.min(b);
            }
            _ => {}
        }
    }
    for (subject, (from, to)) in throttled {
        out.push(format!(
            "{subject} was thermally throttled {} times in the {:.0} s before",
            to - from,
            lookback.recent_ns as f64 / 1e9
        ));
    }
    out
}

fn is_realtime(sched: &str) -> bool {
    sched.starts_with("SCHED_FIFO") || sched.starts_with("SCHED_RR") || sched == "SCHED_DEADLINE"
}
