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
}

/// What tells culprits apart across cards (a pid or a policy may change, a tid may be reused
/// by another name).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    kind: CulpritKind,
    name: String,
    tid: Option<i32>,
    irq: Option<i32>,
}

impl Key {
    fn of(who: &Who) -> Key {
        Key {
            kind: who.kind,
            name: who.name.clone(),
            tid: who.tid,
            irq: who.irq,
        }
    }
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
            });
            total.stolen_us += us;
            total.dropouts += 1;
            total.main_culprit_of += u64::from(is_main);
            total.max_us = total.max_us.max(us);
            // A policy read from procfs (`SCHED_FIFO 90`) beats the trace's kernel priority
            // (`RT 90`), which a card falls back to once the task is gone.
            let policy = &c.who.policy;
            let from_procfs = policy.starts_with("SCHED_");
            if !policy.is_empty() && (from_procfs || !total.who.policy.starts_with("SCHED_")) {
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
        let mut all: Vec<CulpritTotal> = self.totals.values().cloned().collect();
        all.sort_by(|a, b| {
            b.stolen_us
                .total_cmp(&a.stolen_us)
                .then_with(|| a.who.name.cmp(&b.who.name))
        });
        all.truncate(n);
        all
    }
}
