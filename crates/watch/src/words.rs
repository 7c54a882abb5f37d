//! The words of a card and a summary: the only place watch's English is made; runs on the
//! collector thread (or whoever prints).

use crate::card::{Card, Case};
use crate::mapping::Confidence;
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

/// The card's one line: which node, which case, the figures, and the kernel's culprit.
pub fn verdict(card: &Card) -> String {
    let x = &card.xrun;
    let Some(node) = &x.node else {
        if card.case == Case::Unattributed {
            return format!(
                "xrun {}: the server reported an xrun but does not say which node was late (no \
                 kernel events: {})",
                x.number,
                card.kernel_missing.as_deref().unwrap_or("not recorded")
            );
        }
        return format!(
            "xrun {} (cycle {}): driver-side: every node finished in time, so the device or its \
             driver was late",
            x.number, x.cycle
        );
    };
    // Names come from the server's clients and the kernel: escaped for the terminal.
    let who = match card.mapping.as_ref().and_then(|m| m.pid) {
        Some(pid) => format!("\"{}\" (pid {pid})", printable(&node.name)),
        None => format!("\"{}\"", printable(&node.name)),
    };
    let median = |m: Option<u64>| {
        m.map(|m| format!(", median {}", ms(m as f64 / 1000.0)))
            .unwrap_or_default()
    };
    let what = match card.case {
        Case::NeverWoke => format!("{who} never started in its cycle"),
        Case::WokeLate => format!(
            "{who} woke late: WAIT {}{}",
            ms(card.wait_us.unwrap_or(0.0)),
            median(x.median_wait_ns)
        ),
        Case::RanLong => format!(
            "{who} ran long: BUSY {}{}{} in a {} cycle",
            if card.busy_at_least { "at least " } else { "" },
            ms(card.busy_us.unwrap_or(0.0)),
            median(x.median_busy_ns),
            ms(card.period_us)
        ),
        Case::DriverSide | Case::Unattributed => format!("{who} was late"),
    };
    let kernel = match (&card.kernel, &card.kernel_missing) {
        (Some(k), _) => match &k.main_culprit {
            // An idle CPU takes no time from anyone; what it means is in the kernel's verdict.
            Some(c) if c.kind == "task" => format!(
                "; kernel: {} {} on CPU{} ({}{}), {}",
                if card.case == Case::RanLong {
                    "preempted by"
                } else {
                    "behind"
                },
                printable(&c.name),
                c.cpu,
                c.pid.map(|p| format!("pid {p}, ")).unwrap_or_default(),
                if c.policy.is_empty() {
                    "policy unknown".into()
                } else {
                    c.policy.clone()
                },
                ms(c.us)
            ),
            Some(c) if c.kind != "idle" => {
                format!(
                    "; kernel: {} {} on CPU{}, {}",
                    c.kind,
                    printable(&c.name),
                    c.cpu,
                    ms(c.us)
                )
            }
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
    // What else a long run may come from: moving between CPUs, and page faults (major ones wait
    // for I/O).
    let mut extra = String::new();
    if card.case == Case::RanLong {
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
    format!(
        "xrun {} (cycle {}): {what}{kernel}{extra}{confidence}",
        x.number, x.cycle
    )
}
