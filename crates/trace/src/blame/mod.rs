//! The blame card: why one buffer was late, reconstructed from the kernel's scheduler and
//! interrupt events around it. [`blame`] is a pure function of its input (plus a task lookup
//! for policy names); the engine's collector thread calls it after a late buffer is drained.
//!
//! How the accounting works, per audio thread, over `[period start, the thread's end]`:
//! - A state machine follows the thread through switch-in, switch-out (preempted = still
//!   runnable, otherwise asleep), wake-ups and migrations, starting from the lead-in events
//!   before the period start so its state at the start is known.
//! - Each CPU's occupancy (who ran when, from `sched_switch`) and interrupt intervals (IRQ and
//!   softirq entry/exit) are rebuilt; every runnable-but-not-running interval of the thread is
//!   split between the tasks that ran on its CPU meanwhile and the interrupts there.
//! - Its own on-CPU time (minus interrupts) is compared with its median for the same load.
//! - Sleeps after it started its work are listed with who woke it.
//!
//! The verdict names the largest single cause across all threads.
//!
//! The parts, one file each: the card's types (`card`), each CPU's timeline (`timeline`), the
//! thread tracker's state machine (`track`), culprits and idle causes (`culprit`), one thread's
//! account (`account`), the verdict's candidates (`verdict`) and the words (`words`). All of it
//! runs on the caller's thread (the engine's explain collector, watch's main thread), never on
//! an audio thread.

mod account;
mod card;
mod culprit;
mod timeline;
mod track;
mod verdict;
mod words;

pub use card::{
    AudioThread, BlameCard, Cause, Culprit, CulpritKind, IdleCause, Migration, ParentTask, Sleep,
    ThreadBlame, Who,
};
pub(crate) use culprit::merge_names;
pub use words::{idle_words, task_words};

use crate::procinfo::TaskLookup;
use crate::recorder::Window;

/// History to include before the period start in the window passed to [`blame`], so that
/// each CPU's occupant and each thread's state at the period start are known.
pub const LEAD_IN_NS: u64 = 20_000_000;
/// How far past the deadline (or the render end, if later) the window should reach.
pub const MARGIN_NS: u64 = 2_000_000;

/// Everything [`blame`] needs about one late buffer.
#[derive(Debug, Clone, Copy)]
pub struct BlameInput<'a> {
    /// When the device period began.
    pub period_start_ns: u64,
    /// When the buffer had to be ready.
    pub deadline_ns: u64,
    /// When the render really ended.
    pub render_end_ns: u64,
    /// The audio threads of this buffer.
    pub threads: &'a [AudioThread],
    /// Kernel events from [`crate::Tracer::snapshot`] over
    /// `[period_start - LEAD_IN_NS, max(deadline, render_end) + MARGIN_NS]`.
    pub window: &'a Window,
    /// Causes the engine knows itself (e.g. `injected stall`), appended to the verdict.
    pub notes: &'a [String],
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

/// Builds the blame card of one late buffer. Pure: the same input gives the same card (the
/// lookup only names policies of tasks that are still alive).
pub fn blame(input: &BlameInput<'_>, lookup: &dyn TaskLookup) -> BlameCard {
    let scope = account::Scope::new(input, lookup);
    let mut threads = Vec::new();
    let mut candidates = Vec::new();
    for (index, at) in input.threads.iter().enumerate() {
        let account = scope.account(at);
        // Candidates for the verdict, each with the time it explains.
        candidates.extend(verdict::candidates(&scope, index, at, &account));
        threads.push(account.thread_blame(at, scope.start));
    }
    verdict::card(input, candidates, threads)
}
