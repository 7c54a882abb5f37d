//! The words of a card and a summary: the only place watch's English is made; runs on the
//! collector thread (or whoever prints).

use crate::card::{Card, Case};
use crate::mapping::Confidence;

fn ms(us: f64) -> String {
    format!("{:.2} ms", us / 1000.0)
}

/// The card's one line: which node, which case, the figures, and the kernel's culprit.
pub fn verdict(card: &Card) -> String {
    let x = &card.xrun;
    let Some(node) = &x.node else {
        return format!(
            "xrun {} (cycle {}): driver-side: every node finished in time, so the device or its \
             driver was late",
            x.number, x.cycle
        );
    };
    let who = match card.mapping.as_ref().and_then(|m| m.pid) {
        Some(pid) => format!("\"{}\" (pid {pid})", node.name),
        None => format!("\"{}\"", node.name),
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
        Case::DriverSide => unreachable!("a driver-side card has no node"),
    };
    let kernel = match (&card.kernel, &card.kernel_missing) {
        (Some(k), _) => match &k.main_culprit {
            Some(c) if c.kind == "task" => {
                format!(
                    "; kernel: {} {} on CPU{} ({}{})",
                    if card.case == Case::RanLong {
                        "preempted by"
                    } else {
                        "behind"
                    },
                    c.name,
                    c.cpu,
                    c.pid.map(|p| format!("pid {p}, ")).unwrap_or_default(),
                    if c.policy.is_empty() {
                        "policy unknown".into()
                    } else {
                        c.policy.clone()
                    }
                ) + &format!(", {}", ms(c.us))
            }
            Some(c) => format!(
                "; kernel: {} {} on CPU{}, {}",
                c.kind,
                c.name,
                c.cpu,
                ms(c.us)
            ),
            None => format!("; kernel: {}", k.verdict),
        },
        (None, Some(why)) => format!(" (no kernel events: {why})"),
        (None, None) => String::new(),
    };
    let confidence = match card.mapping.as_ref().map(|m| m.confidence) {
        Some(Confidence::Low) if card.kernel.is_some() => " [thread mapping: low confidence]",
        _ => "",
    };
    format!(
        "xrun {} (cycle {}): {what}{kernel}{confidence}",
        x.number, x.cycle
    )
}
