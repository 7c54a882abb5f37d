//! Top culprits over a run: who stole how much time from the audio threads, in how many late
//! buffers. Fed with every blame card by the engine's collector thread; read for the summary
//! table and the dashboard's live table.

use crate::blame::{BlameCard, CulpritKind, Who};
use serde::Serialize;
use std::collections::HashMap;

/// One culprit's totals over the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CulpritTotal {
    /// Who it is, with the policy and priority last seen (serialized as its fields, beside
    /// these).
    #[serde(flatten)]
    pub who: Who,
    /// Time taken from audio threads in late buffers, µs.
    pub stolen_us: f64,
    /// Late buffers it took time in.
    pub dropouts: u64,
    /// Late buffers whose verdict named it.
    pub main_culprit_of: u64,
    /// Most time taken in one late buffer, µs.
    pub max_us: f64,
    /// Processes in this row: 1, or how many children of one parent it groups (their names
    /// are in `who.earlier_names`).
    pub processes: u32,
}

/// What tells culprits apart across cards (a pid or a policy may change, a tid may be reused
/// by another name).
/// One culprit's identity: a task by its thread id (whatever names it went by), an interrupt
/// by its handler.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Task(Option<i32>),
    Interrupt(CulpritKind, String, Option<i32>),
}

impl Key {
    fn of(who: &Who) -> Key {
        match who.kind {
            CulpritKind::Task => Key::Task(who.tid),
            kind => Key::Interrupt(kind, who.name.clone(), who.irq),
        }
    }
}

fn is_real_time(policy: &str) -> bool {
    policy.starts_with("SCHED_FIFO") || policy.starts_with("SCHED_RR")
}

/// Accumulates blame cards into per-culprit totals.
#[derive(Debug, Clone, Default)]
pub struct Culprits {
    totals: HashMap<Key, CulpritTotal>,
    cards: u64,
}

impl Culprits {
    /// An empty table.
    pub fn new() -> Culprits {
        Culprits::default()
    }

    /// Adds one card: every task and interrupt that took time from any of its audio threads.
    pub fn add(&mut self, card: &BlameCard) {
        self.cards += 1;
        let mut in_card: HashMap<Key, (f64, &crate::blame::Culprit)> = HashMap::new();
        for t in &card.threads {
            for c in t.ran_instead.iter().chain(&t.interrupts) {
                in_card.entry(Key::of(&c.who)).or_insert((0.0, c)).0 += c.us;
            }
        }
        let main = card.main_culprit.as_ref().map(|c| Key::of(&c.who));
        for (key, (us, c)) in in_card {
            let is_main = main.as_ref() == Some(&key);
            let total = self.totals.entry(key).or_insert_with(|| CulpritTotal {
                who: c.who.clone(),
                stolen_us: 0.0,
                dropouts: 0,
                main_culprit_of: 0,
                max_us: 0.0,
                processes: 1,
            });
            crate::blame::merge_names(&mut total.who, &c.who);
            if total.who.parent.is_none() {
                total.who.parent = c.who.parent.clone();
            }
            total.stolen_us += us;
            total.dropouts += 1;
            total.main_culprit_of += u64::from(is_main);
            total.max_us = total.max_us.max(us);
            // A policy read from procfs (`SCHED_FIFO 90`) beats the trace's kernel priority
            // (`SCHED_FIFO/RR 90`), which a card falls back to once the task is gone.
            let policy = &c.who.policy;
            let from_procfs = |p: &str| p.starts_with("SCHED_") && !p.starts_with("SCHED_FIFO/RR");
            if !policy.is_empty() && (from_procfs(policy) || !from_procfs(&total.who.policy)) {
                total.who.policy = policy.clone();
            }
        }
    }

    /// Cards added so far.
    pub fn cards(&self) -> u64 {
        self.cards
    }

    /// The `n` culprits that stole the most time, largest first.
    pub fn top(&self, n: usize) -> Vec<CulpritTotal> {
        // Short-lived children that inherited a real-time policy (a shell loop under `chrt`, a
        // hog's helpers) are one row under their parent: two or more processes of one parent.
        let mut by_parent: HashMap<i32, Vec<&CulpritTotal>> = HashMap::new();
        for t in self.totals.values() {
            // Inherited: the same real-time policy as the parent's (a hog's forks); children that
            // set their own (a shell loop running `chrt`) stay rows of their own.
            if let (Some(parent), true) = (&t.who.parent, is_real_time(&t.who.policy)) {
                if Some(parent.pid) != t.who.pid && parent.policy == t.who.policy {
                    by_parent.entry(parent.pid).or_default().push(t);
                }
            }
        }
        let grouped: HashMap<i32, Vec<&CulpritTotal>> = by_parent
            .into_iter()
            .filter(|(_, kids)| {
                let mut pids: Vec<Option<i32>> = kids.iter().map(|k| k.who.pid).collect();
                pids.sort_unstable();
                pids.dedup();
                pids.len() >= 2
            })
            .collect();
        let in_group = |t: &CulpritTotal| {
            t.who.parent.as_ref().is_some_and(|p| {
                grouped
                    .get(&p.pid)
                    .is_some_and(|kids| kids.iter().any(|k| k.who.tid == t.who.tid))
            })
        };
        let mut all: Vec<CulpritTotal> = self
            .totals
            .values()
            .filter(|t| !in_group(t))
            .cloned()
            .collect();
        for (parent_pid, kids) in &grouped {
            let parent = kids[0].who.parent.clone().expect("grouped by parent");
            let mut pids: Vec<Option<i32>> = kids.iter().map(|k| k.who.pid).collect();
            pids.sort_unstable();
            pids.dedup();
            let mut names: Vec<String> = kids.iter().map(|k| k.who.name.clone()).collect();
            names.sort();
            names.dedup();
            all.push(CulpritTotal {
                who: Who {
                    kind: CulpritKind::Task,
                    name: format!("children of {}", parent.name),
                    pid: Some(*parent_pid),
                    tid: None,
                    irq: None,
                    policy: kids[0].who.policy.clone(),
                    earlier_names: names,
                    parent: Some(parent),
                },
                stolen_us: kids.iter().map(|k| k.stolen_us).sum(),
                dropouts: kids.iter().map(|k| k.dropouts).sum(),
                main_culprit_of: kids.iter().map(|k| k.main_culprit_of).sum(),
                max_us: kids.iter().map(|k| k.max_us).fold(0.0, f64::max),
                processes: pids.len() as u32,
            });
        }
        all.sort_by(|a, b| {
            b.stolen_us
                .total_cmp(&a.stolen_us)
                .then_with(|| a.who.name.cmp(&b.who.name))
        });
        all.truncate(n);
        all
    }
}
