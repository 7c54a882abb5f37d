//! Culprits: who took time from an audio thread (a task, an IRQ handler, a softirq), each
//! summed into one entry per identity, and why an idle CPU did not run it. Pure; runs on the
//! caller's thread (the engine's explain collector, watch's main thread), never on an audio
//! thread.

use super::card::{Culprit, CulpritKind, IdleCause, ParentTask, Who};
use super::timeline::{IrqSpan, Occupancy};
use super::us;
use crate::procinfo::{describe_kernel_prio, TaskLookup};

/// Adds `ns` to the culprit with the same identity in `list`, or appends a new one.
pub(super) fn add_culprit(list: &mut Vec<Culprit>, mut c: Culprit, ns: u64) {
    if ns == 0 {
        return;
    }
    // A task is one culprit whatever names it went by (a process may rename itself); an
    // interrupt is its handler's name.
    let same = |x: &Culprit| {
        x.cpu == c.cpu
            && x.who.kind == c.who.kind
            && match c.who.kind {
                CulpritKind::Task => x.who.tid == c.who.tid,
                _ => x.who.name == c.who.name && x.who.irq == c.who.irq,
            }
    };
    match list.iter_mut().find(|x| same(x)) {
        Some(x) => {
            x.us += us(ns);
            x.count += 1;
            merge_names(&mut x.who, &c.who);
        }
        None => {
            c.us = us(ns);
            c.count = 1;
            list.push(c);
        }
    }
}

/// Keeps the newest name in `into` and every other name it went by in `earlier_names`.
pub(crate) fn merge_names(into: &mut Who, other: &Who) {
    for name in other
        .earlier_names
        .iter()
        .chain(std::iter::once(&other.name))
    {
        if *name != into.name && !into.earlier_names.contains(name) {
            into.earlier_names.push(name.clone());
        }
    }
}

/// The task that occupied a CPU, or `None` for the idle task (which takes no one's time).
pub(super) fn task_culprit(o: &Occupancy, cpu: u16, lookup: &dyn TaskLookup) -> Option<Culprit> {
    if o.tid == 0 {
        return None;
    }
    let found = lookup.lookup(o.tid);
    // The trace's name is what the task was called then; procfs (or the tracer's first sight)
    // has its newest name. Both are kept, so a renamed task stays one culprit.
    let name = found
        .as_ref()
        .map_or_else(|| o.comm.clone(), |t| t.comm.clone());
    let earlier_names = if name != o.comm {
        vec![o.comm.clone()]
    } else {
        Vec::new()
    };
    Some(new_culprit(
        Who {
            kind: CulpritKind::Task,
            name,
            pid: Some(found.as_ref().map_or(o.tid, |t| t.pid)),
            tid: Some(o.tid),
            irq: None,
            policy: found
                .as_ref()
                .map_or_else(|| describe_kernel_prio(o.prio), |t| t.policy.clone()),
            earlier_names,
            parent: found
                .and_then(|t| t.parent)
                .map(|(pid, name, policy)| ParentTask { pid, name, policy }),
        },
        cpu,
    ))
}

pub(super) fn irq_culprit(i: &IrqSpan, cpu: u16) -> Culprit {
    new_culprit(
        Who {
            kind: i.kind,
            name: i.name.clone(),
            pid: None,
            tid: None,
            irq: i.irq,
            policy: String::new(),
            earlier_names: Vec::new(),
            parent: None,
        },
        cpu,
    )
}

/// Why a CPU that was idle did not run a runnable thread: steal on it, else the deepest idle
/// state cpuidle's counters saw it enter around the wait, else nothing.
pub(super) fn explain_idle(cpu: u16, context: &crate::cpu_context::CpuContext) -> IdleCause {
    // Steal counts in 10 ms ticks: any tick is a real stretch of the vCPU not running.
    if let Some(&steal) = context.steal_ns.get(&cpu).filter(|&&s| s > 0) {
        return IdleCause::Steal {
            cpu,
            steal_us: us(steal),
            span_ms: context.span_ms,
        };
    }
    // The deepest state with an exit latency that cpuidle's counters saw the CPU enter. (A
    // recorded cpu_idle event gives a state's index, whose name and latency are the same.)
    let deepest = context.idle_entered.get(&cpu).and_then(|list| {
        list.iter()
            .filter(|e| e.exit_latency_us > 0)
            .max_by_key(|e| e.exit_latency_us)
    });
    match deepest {
        Some(e) => IdleCause::IdleExit {
            cpu,
            state: e.name.clone(),
            exit_latency_us: e.exit_latency_us,
        },
        None => IdleCause::Unexplained { cpu },
    }
}

/// A culprit on `cpu` that has taken no time yet ([`add_culprit`] adds it).
fn new_culprit(who: Who, cpu: u16) -> Culprit {
    Culprit {
        who,
        cpu,
        us: 0.0,
        count: 0,
    }
}

pub(super) fn sort_desc(list: &mut [Culprit]) {
    list.sort_by(|a, b| b.us.total_cmp(&a.us));
}
