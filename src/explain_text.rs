//! The `--explain` and `--trace` lines of the run summary: the tracer, lost kernel events, the
//! dropouts' verdicts, the top-culprits table and the card that accounts for the most time; runs on
//! the main thread.

use crate::run_file::RunResult;
use std::fmt::Write;
use xrunlab_engine::explain::trace::{BlameCard, Culprit, CulpritKind, CulpritTotal, Who};
use xrunlab_engine::explain::Dropout;
use xrunlab_sys::printable;

/// Verdict lines listed in the summary (all are in the JSON).
const VERDICTS_SHOWN: usize = 8;

fn ms(us: f64) -> String {
    format!("{:.2} ms", us / 1000.0)
}

/// `xrl-hog (pid 4711, SCHED_FIFO 90)`, `notahog (was python3) (pid ...)`, `irq 11 virtio0`,
/// `softirq NET_RX`. Names come from other programs: their control characters are escaped.
fn who(who: &Who) -> String {
    let words = match who.kind {
        CulpritKind::Task => xrunlab_engine::explain::trace::blame::task_words(who),
        CulpritKind::Irq => match who.irq {
            Some(n) => format!("irq {n} {}", who.name),
            None => format!("irq {}", who.name),
        },
        CulpritKind::Softirq => format!("softirq {}", who.name),
    };
    printable(&words).into_owned()
}

fn culprit(c: &Culprit) -> String {
    format!("{} {} x{}", who(&c.who), ms(c.us), c.count)
}

fn total(c: &CulpritTotal) -> String {
    if c.processes > 1 {
        // `children of notahog: 9 processes (bash, sleep), SCHED_FIFO 85`
        return format!(
            "{}: {} processes ({}), {}",
            printable(&c.who.name),
            c.processes,
            printable(&c.who.earlier_names.join(", ")),
            c.who.policy
        );
    }
    who(&c.who)
}

/// The card, thread by thread, as indented lines.
pub fn card_lines(s: &mut String, d: &Dropout, card: &BlameCard) {
    let _ = writeln!(
        s,
        "card      buffer {} ({}, {} past the deadline): {}",
        d.seq,
        d.kind,
        ms(d.late_by_us),
        printable(&card.verdict)
    );
    for t in &card.threads {
        let woken = t.woken_at_us.map_or("wake-up not seen".to_owned(), |w| {
            format!("woken +{}", ms(w))
        });
        let median = t
            .median_us
            .map_or("no median yet".to_owned(), |m| format!("median {}", ms(m)));
        let freq = t
            .cpu_khz
            .map(|k| format!(" at {:.2} GHz", k as f64 / 1e6))
            .unwrap_or_default();
        let cpus: Vec<String> = t.cpus.iter().map(u16::to_string).collect();
        let _ = writeln!(
            s,
            "          {} (tid {}) on CPU {}: {woken}{}, waited {} ({:.0} % accounted), ran {} ({median}){freq}, interrupts {}",
            t.role,
            t.tid,
            if cpus.is_empty() { "?".to_owned() } else { cpus.join(",") },
            if t.busy_at_period_start { " (still busy at the period start)" } else { "" },
            ms(t.waited_us),
            t.wait_accounted * 100.0,
            ms(t.ran_us),
            ms(t.interrupt_us),
        );
        if !t.ran_instead.is_empty() {
            let list: Vec<String> = t.ran_instead.iter().take(4).map(culprit).collect();
            let _ = writeln!(s, "            ran instead: {}", list.join("; "));
        }
        if t.not_preempted_us > 0.0 {
            let _ = writeln!(
                s,
                "            not preempted: {} of the wait behind tasks of a lower priority (kernel code on a kernel without full preemption, preemption off, or RT throttling)",
                ms(t.not_preempted_us)
            );
        }
        if let Some(cause) = &t.idle_cause {
            let _ = writeln!(
                s,
                "            idle CPU: waited {} {}",
                ms(t.idle_wait_us),
                xrunlab_engine::explain::trace::blame::idle_words(cause)
            );
        }
        if !t.interrupts.is_empty() {
            let list: Vec<String> = t.interrupts.iter().take(4).map(culprit).collect();
            let _ = writeln!(s, "            interrupts: {}", list.join("; "));
        }
        if !t.migrations.is_empty() {
            let list: Vec<String> = t
                .migrations
                .iter()
                .map(|m| format!("CPU{}->CPU{} at +{}", m.from_cpu, m.to_cpu, ms(m.at_us)))
                .collect();
            let _ = writeln!(s, "            migrations: {}", list.join(", "));
        }
        if !t.sleeps.is_empty() {
            let list: Vec<String> = t
                .sleeps
                .iter()
                .take(4)
                .map(|z| {
                    format!(
                        "{} {} at +{}{}",
                        z.state,
                        ms(z.us),
                        ms(z.at_us),
                        z.woken_by
                            .as_ref()
                            .map(|w| format!(", woken by {}", printable(w)))
                            .unwrap_or_default()
                    )
                })
                .collect();
            let _ = writeln!(s, "            sleeps: {}", list.join("; "));
        }
    }
}

/// The explain and trace lines (empty without the flags).
pub fn render(r: &RunResult) -> String {
    let mut s = String::new();
    if let Some(e) = &r.details.explain {
        match (&e.tracer, &e.unavailable) {
            (Some(t), _) => {
                let stats = e.stats.as_ref();
                let _ = writeln!(
                    s,
                    "explain   kernel events of CPUs {} ({}, {}): {} events, {} lost (ring overruns){}; reader CPU {:.0} ms",
                    xrunlab_sys::format_cpu_list(&t.cpus),
                    t.backend,
                    t.clock,
                    stats.map_or(0, |s| s.events_total),
                    e.lost_events,
                    if e.lost_events > 0 {
                        ": cards of windows with lost events say so"
                    } else {
                        ""
                    },
                    stats.map_or(0.0, |s| s.reader_cpu_ms)
                );
                let _ = writeln!(
                    s,
                    "          reader {}{}",
                    t.reader_placement,
                    if t.events_left_out.is_empty() {
                        String::new()
                    } else {
                        format!(
                            "; not recorded: {} (--explain-all records them)",
                            t.events_left_out.join(", ")
                        )
                    }
                );
            }
            (None, Some(why)) => {
                let _ = writeln!(
                    s,
                    "explain   unavailable: {why}; the run went on without blame cards"
                );
            }
            (None, None) => {}
        }
        let _ = writeln!(
            s,
            "dropouts  {} explained: {} cards, {} without a card; {} kept in the JSON (the last {} at most{})",
            e.dropouts,
            e.cards,
            e.without_card,
            e.kept,
            e.max_kept,
            if e.forgotten > 0 {
                format!(", {} older forgotten", e.forgotten)
            } else {
                String::new()
            }
        );
        let dropouts = r.details.dropouts.as_deref().unwrap_or_default();
        for d in dropouts.iter().take(VERDICTS_SHOWN) {
            let _ = writeln!(
                s,
                "          buffer {:<7} {}",
                d.seq,
                printable(&d.verdict())
            );
        }
        if dropouts.len() > VERDICTS_SHOWN {
            let _ = writeln!(
                s,
                "          ... {} more in the JSON",
                dropouts.len() - VERDICTS_SHOWN
            );
        }
        if !e.top_culprits.is_empty() {
            let _ = writeln!(
                s,
                "culprits  stolen ms  dropouts  main culprit of  max ms  who (time taken from audio threads in late buffers)"
            );
            for c in &e.top_culprits {
                let _ = writeln!(
                    s,
                    "          {:>9.2}  {:>8}  {:>15}  {:>6.2}  {}",
                    c.stolen_us / 1000.0,
                    c.dropouts,
                    c.main_culprit_of,
                    c.max_us / 1000.0,
                    total(c)
                );
            }
        }
        // The most telling card: the one whose verdict accounts for the most time.
        if let Some((d, card)) = dropouts
            .iter()
            .filter_map(|d| Some((d, d.blame.as_ref()?)))
            .max_by(|a, b| a.1.cause_us.total_cmp(&b.1.cause_us))
        {
            card_lines(&mut s, d, card);
        }
    }
    if let Some(t) = &r.details.trace {
        let _ = writeln!(
            s,
            "trace     {}: {} events{}{}{}",
            t.path.display(),
            t.events_written,
            if t.every_nth_buffer > 1 {
                format!(", one buffer in {}", t.every_nth_buffer)
            } else {
                String::new()
            },
            if t.events_dropped_by_cap > 0 {
                format!(
                    ", {} left out by --trace-max-events",
                    t.events_dropped_by_cap
                )
            } else {
                String::new()
            },
            match &t.warning {
                Some(w) => format!("; INCOMPLETE: {w}"),
                None => String::new(),
            }
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_culprits_names_reach_the_summary_with_their_control_characters_escaped() {
        // Any process can set its comm (prctl PR_SET_NAME) to an escape sequence.
        let w = Who {
            kind: CulpritKind::Task,
            name: "\x1b]0;owned\x07hog".into(),
            pid: Some(4711),
            tid: Some(4711),
            irq: None,
            policy: "SCHED_FIFO 90".into(),
            earlier_names: vec!["py\u{9b}2J".into()],
            parent: None,
        };
        let text = who(&w);
        assert_eq!(
            text,
            "\\x1b]0;owned\\x07hog (was py\\u{9b}2J) (pid 4711, SCHED_FIFO 90)"
        );
        let irq = who(&Who {
            kind: CulpritKind::Irq,
            name: "virtio\x1b[2J".into(),
            irq: Some(11),
            ..w
        });
        assert_eq!(irq, "irq 11 virtio\\x1b[2J");
    }
}
