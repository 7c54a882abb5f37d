//! The words of a card and a summary: the only place watch's English is made; runs on watch's
//! main thread (or whoever prints).

use crate::card::{Card, KernelAccount, Kind, RootAccount};
use crate::chain::{Finding, Role, Step};
use crate::mapping::Confidence;
// Names come from the server's clients and the kernel: escaped for the terminal.
use xrunlab_sys::printable;

/// A duration given in µs, in the unit that keeps its digits: `12 µs`, `0.35 ms`, `5.31 ms`.
pub fn dur(us: f64) -> String {
    // A sum of nothing can come out as -0.0.
    let us = us.max(0.0);
    if us < 100.0 {
        format!("{us:.0} µs")
    } else {
        format!("{:.2} ms", us / 1000.0)
    }
}

fn ms(us: f64) -> String {
    dur(us)
}

fn ns_dur(ns: u64) -> String {
    dur(ns as f64 / 1000.0)
}

/// What took the thread's time, in a few words: `behind busyjanitor (pid 7466, SCHED_FIFO 95)
/// on CPU1`, `behind irq 24 (xhci_hcd) on CPU0`; `None` when nothing but an idle CPU did.
fn culprit_words(k: &KernelAccount) -> Option<String> {
    let c = k.main_culprit.as_ref().filter(|c| c.kind != "idle")?;
    Some(if c.kind == "task" {
        format!(
            "behind {} ({}{}) on CPU{}",
            printable(&c.name),
            c.pid.map(|p| format!("pid {p}, ")).unwrap_or_default(),
            if c.policy.is_empty() {
                "policy unknown".to_owned()
            } else {
                c.policy.clone()
            },
            c.cpu
        )
    } else {
        format!("behind {} {} on CPU{}", c.kind, printable(&c.name), c.cpu)
    })
}

/// The driver, named as the user knows it: `the driver (pipewire's data-loop.0, tid 7447)`.
fn driver_words(r: &RootAccount) -> String {
    match r.mapping.as_ref().and_then(|m| m.thread.as_ref()) {
        Some(t) => format!(
            "the driver \"{}\" (thread {}, tid {})",
            printable(&r.name),
            printable(&t.comm),
            t.tid
        ),
        None => format!("the driver \"{}\"", printable(&r.name)),
    }
}

/// The root's part of a card's line, when the root is the driver.
fn driver_part(card: &Card, root: &Step, r: &RootAccount) -> String {
    let who = driver_words(r);
    let how_late = if root.finding == Finding::DriverLate {
        format!(" {} late", ns_dur(root.excess_ns))
    } else {
        String::new()
    };
    let no_account = || {
        r.missing
            .as_ref()
            .map(|m| format!(" (no kernel account: {m})"))
            .unwrap_or_default()
    };
    match card.kind {
        // Asleep until a thread it waited for woke it, which was held off meanwhile.
        Kind::DriverWokeLate if r.waker.is_some() => {
            let held = r.waker.as_ref().expect("checked");
            format!(
                "{who} slept {} past its cycle's start, woken only then by {}, which was held \
                 off its CPU for {}, {}",
                ms(r.account.as_ref().map_or(0.0, |k| k.blocked_us)),
                // The driver's waker, and the threads it slept waiting for in turn.
                r.woken
                    .iter()
                    .chain(&r.waker_via)
                    .map(|w| printable(&w.source.words()).into_owned())
                    .collect::<Vec<_>>()
                    .join(", which slept until woken by "),
                ms(held.waited_us + held.interrupt_us),
                culprit_words(held).unwrap_or_default()
            )
        }
        Kind::DriverWokeLate => match r.account.as_ref().and_then(culprit_words) {
            // Asleep with its wake-up due, while a task held its CPU.
            Some(behind)
                if r.account
                    .as_ref()
                    .is_some_and(|k| k.blocked_us > k.waited_us + k.interrupt_us)
                    && !r.catching_up =>
            {
                format!(
                    "{who} slept {} past its cycle's start: its wake-up came only {behind} (work \
                     deferred to a thread, such as a timer's softirq, runs after it)",
                    ms(r.account.as_ref().map_or(0.0, |k| k.blocked_us))
                )
            }
            Some(behind) if root.finding == Finding::DriverLate => {
                format!("{who} woke{how_late}, {behind}")
            }
            Some(behind) if r.catching_up => format!(
                "{who} was held off its CPU for {} just before, {behind}, and the graph was \
                 still catching up",
                ms(r.account
                    .as_ref()
                    .map_or(0.0, |k| k.waited_us + k.interrupt_us))
            ),
            // It started the cycle in time, then lost its CPU before it signalled.
            Some(behind) => format!(
                "{who} was held off its CPU for {} before it signalled, {behind}",
                ms(r.account
                    .as_ref()
                    .map_or(0.0, |k| k.waited_us + k.interrupt_us))
            ),
            None => match (&r.account, &r.woken) {
                (Some(k), Some(w)) if k.blocked_us > k.waited_us => format!(
                    "{who} slept {} past its cycle's start, woken only then by {}",
                    ms(k.blocked_us),
                    printable(&w.source.words())
                ),
                (Some(k), _) => format!(
                    "{who} woke{how_late}: {}",
                    k.verdict.trim_start_matches("late: ")
                ),
                (None, _) => format!("{who} woke{how_late}{}", no_account()),
            },
        },
        Kind::InterruptLate => {
            let by = r
                .woken
                .as_ref()
                .map(|w| format!(" by {} on CPU{}", printable(&w.source.words()), w.cpu))
                .unwrap_or_default();
            let slept = r
                .account
                .as_ref()
                .filter(|k| k.blocked_us > 0.0)
                .map(|k| format!(" (asleep {} of the span)", ms(k.blocked_us)))
                .unwrap_or_default();
            format!(
                "{who} was woken{how_late}{by}{slept}, with nothing else on its CPU: the device or \
                 timer interrupt came late"
            )
        }
        Kind::DriverRanLong => match &r.account {
            Some(k) => format!(
                "{who} ran long: on its CPU {}, preempted {}, blocked {}, interrupts {}",
                ms(k.ran_us),
                ms(k.waited_us),
                ms(k.blocked_us),
                ms(k.interrupt_us)
            ),
            None => format!(
                "{who} ran long: BUSY {} over its median{}",
                ns_dur(root.excess_ns),
                no_account()
            ),
        },
        _ => format!("{who} did not signal it in time{}", no_account()),
    }
}

/// The root's part, when the root is a node upstream of the late one.
fn upstream_part(root: &Step, r: &RootAccount) -> String {
    let who = match r.mapping.as_ref().and_then(|m| m.pid) {
        Some(pid) => format!("\"{}\" (pid {pid})", printable(&root.name)),
        None => format!("\"{}\"", printable(&root.name)),
    };
    let what = match root.finding {
        Finding::RanLong => format!("ran long: BUSY {} over its median", ns_dur(root.excess_ns)),
        Finding::WokeLate => format!("woke late: WAIT {} over its median", ns_dur(root.excess_ns)),
        _ => "was itself not signalled in time".to_owned(),
    };
    let kernel = r
        .account
        .as_ref()
        .and_then(culprit_words)
        .map(|b| format!(", {b}"))
        .unwrap_or_default();
    format!("upstream, {who} {what}{kernel}")
}

/// The path in a few words: `"B" ← "A" ← the driver`.
pub fn path_words(card: &Card) -> String {
    card.path
        .iter()
        .map(|s| match s.role {
            Role::Driver => "the driver".to_owned(),
            Role::Node => format!("\"{}\"", printable(&s.name)),
        })
        .collect::<Vec<_>>()
        .join(" ← ")
}

/// The card's one line: which node, what happened to it, the root and its cause.
pub fn verdict(card: &Card) -> String {
    let x = &card.xrun;
    let head = format!("xrun {} (cycle {})", x.number, x.cycle);
    let Some(node) = &x.node else {
        let body = match (card.kind, card.root_step(), card.root.as_ref()) {
            (Kind::Unexplained, _, _) => format!(
                "unexplained: {}{}",
                card.unexplained.as_deref().unwrap_or("nothing explains it"),
                card.kernel_missing
                    .as_ref()
                    .map(|m| format!(" (no kernel events: {m})"))
                    .unwrap_or_default()
            ),
            (_, Some(root), Some(r)) => format!(
                "every node finished in time, but {}",
                driver_part(card, root, r)
            ),
            _ => card.kind.name().to_owned(),
        };
        return format!("{head}: {body}");
    };
    let who = match card.mapping.as_ref().and_then(|m| m.pid) {
        Some(pid) => format!("\"{}\" (pid {pid})", printable(&node.name)),
        None => format!("\"{}\"", printable(&node.name)),
    };
    let median = |m: Option<u64>| {
        m.map(|m| format!(", median {}", ms(m as f64 / 1000.0)))
            .unwrap_or_default()
    };
    let root = card.root_step();
    let own = root.is_none_or(|r| r.role == Role::Node && r.id == node.id);
    let what = if !own {
        let late = match card.path.first().map(|s| s.finding) {
            _ if node.awake_ns == 0 => format!("{who} never started"),
            Some(Finding::NotSignalled) => format!(
                "{who} finished late: its signal came {} late",
                ns_dur(card.path[0].excess_ns)
            ),
            _ => format!("{who} was late"),
        };
        let root_words = match (root, card.root.as_ref()) {
            (Some(r), Some(acc)) if r.role == Role::Driver => driver_part(card, r, acc),
            (Some(r), Some(acc)) => upstream_part(r, acc),
            _ => String::new(),
        };
        format!("{late}: {root_words}")
    } else {
        let main = match card.kind {
            Kind::NodeWokeLate if node.awake_ns == 0 => format!("{who} never started in its cycle"),
            Kind::NodeWokeLate => format!(
                "{who} woke late: WAIT {}{}",
                ms(card.wait_us.unwrap_or(0.0)),
                median(x.median_wait_ns)
            ),
            Kind::NodeRanLong => format!(
                "{who} ran long: BUSY {}{}{} in a {} cycle",
                if card.busy_at_least { "at least " } else { "" },
                ms(card.busy_us.unwrap_or(0.0)),
                median(x.median_busy_ns),
                ms(card.period_us)
            ),
            Kind::Unexplained => format!(
                "{who} was late, unexplained: {}",
                card.unexplained.as_deref().unwrap_or("nothing explains it")
            ),
            other => format!("{who} was late ({})", other.name()),
        };
        let kernel = match (&card.kernel, &card.kernel_missing) {
            (Some(k), _) => match (culprit_words(k), k.main_culprit.as_ref()) {
                (Some(behind), Some(c)) => format!(
                    "; kernel: {} {}, {}",
                    if card.kind == Kind::NodeRanLong && c.kind == "task" {
                        "preempted"
                    } else {
                        "waited"
                    },
                    behind,
                    ms(c.us)
                ),
                _ => format!(
                    "; kernel: on its CPU {}, runnable but waiting {}, blocked {}, interrupts {}",
                    ms(k.ran_us),
                    ms(k.waited_us),
                    ms(k.blocked_us),
                    ms(k.interrupt_us)
                ),
            },
            (None, Some(why)) => format!(" (no kernel events: {why})"),
            (None, None) => String::new(),
        };
        format!("{main}{kernel}")
    };
    // What else a long run may come from: moving between CPUs, and page faults (major ones wait
    // for I/O).
    let mut extra = String::new();
    if card.kind == Kind::NodeRanLong && own {
        if let Some(k) = card.kernel.as_ref().filter(|k| k.migrations > 0) {
            extra += &format!("; migrated {} times", k.migrations);
        }
        if let Some(f) = &card.faults {
            extra += &format!(
                "; page faults {} major, {} minor (its thread's counters over the {} around it)",
                f.major,
                f.minor,
                ms(f.span_ms * 1000.0)
            );
        }
    }
    let confidence = match card.mapping.as_ref().map(|m| m.confidence) {
        Some(Confidence::Low) if card.kernel.is_some() => " [thread mapping: low confidence]",
        _ => "",
    };
    format!("{head}: {what}{extra}{confidence}{}", gaps(card))
}

/// What the line adds when a kernel account on the card may miss causes: events the kernel
/// lost, or a window that did not reach over the whole span.
fn gaps(card: &Card) -> String {
    let accounts = card
        .kernel
        .iter()
        .chain(card.root.as_ref().and_then(|r| r.account.as_ref()));
    let (lost, incomplete) = accounts.fold((0, false), |(lost, incomplete), k| {
        (lost + k.lost_events, incomplete || !k.window_complete)
    });
    match (lost, incomplete) {
        (0, false) => String::new(),
        (0, true) => " [kernel events incomplete: the window did not reach over the whole \
                     cycle; causes may be missing]"
            .to_owned(),
        (n, _) => format!(" [kernel events incomplete: {n} lost; causes may be missing]"),
    }
}
