//! One xrun in Perfetto's trace format: the mark of its card (what watch's `--trace` writes per
//! card into its run-long trace) and the whole self-contained snapshot of its window that
//! `record` stores (its cycle's path, the card's threads, the kernel's events). Runs on the
//! caller's thread (watch's or record's main thread), never on an audio thread.

use crate::card::Card;
use crate::chain::Role;
use serde_json::json;
use std::io::Write;
use std::path::Path;
use xrunlab_trace::perfetto::KERNEL_PID;
use xrunlab_trace::{EventKind, PerfettoOptions, PerfettoWriter, Track, Window};

/// The process under which the cycle's nodes (and the driver) get a track each: most nodes'
/// processes are not known in a snapshot, and their tracks must not collide with real threads.
const GRAPH_PID: i32 = KERNEL_PID + 1;

/// A window holds a few thousand events; this bounds a snapshot of a pathological one (an
/// interrupt storm) to a few MB before compression.
const SNAPSHOT_MAX_EVENTS: u64 = 50_000;

/// Writes a card's xrun mark (an instant carrying its verdict and the whole card) on `track`,
/// and the kernel's events of its window on `cpus`: what each card adds to a trace.
pub fn write_card<W: Write>(
    w: &mut PerfettoWriter<W>,
    card: &Card,
    verdict: &str,
    track: Track,
    window: Option<&Window>,
    cpus: &[usize],
) {
    w.dropout(track, card.xrun.deadline_ns, verdict, json!(card));
    if let Some(window) = window {
        w.kernel_events(&window.events, cpus);
    }
}

/// The graph track of a step of the cycle (a node, or the driver).
fn step_track(role: Role, id: u32) -> Track {
    let base = match role {
        Role::Node => 1 << 29,
        Role::Driver => 1 << 28,
    };
    Track {
        pid: GRAPH_PID,
        tid: base + id as i32,
    }
}

/// A stored snapshot of one xrun, as a complete Chrome JSON trace (opens in ui.perfetto.dev):
/// - the cycle's path from the late node to the root, each step's WAIT (signal to awake) and
///   BUSY (awake to finish) as slices on a track of its own;
/// - the card's threads (the late node's, the root's) with a `running` slice for each time the
///   kernel's switches show them on a CPU in the window (a run whose switch-in the window lacks
///   from that CPU's switch before, marked `switch_in_not_seen`);
/// - the xrun's mark with its verdict and card, and the window's kernel events on `cpus`.
pub fn snapshot(card: &Card, verdict: &str, window: &Window, cpus: &[usize]) -> Vec<u8> {
    let mut w = PerfettoWriter::to_writer(
        Vec::with_capacity(64 * 1024),
        Path::new("the xrun's snapshot"),
        PerfettoOptions {
            max_events: Some(SNAPSHOT_MAX_EVENTS),
            every_nth_buffer: 1,
        },
    );
    w.other_data("xrunlab_card_kind", json!(card.kind.name()));
    w.other_data("xrunlab_window_ns", json!([window.t0_ns, window.t1_ns]));
    w.other_data("xrunlab_window_complete", json!(window.complete));
    w.other_data("xrunlab_kernel_events_lost", json!(window.lost_events));
    w.process_name(GRAPH_PID, "the graph's cycle");
    let mut late_track = None;
    // The late node first (when it is not on its own path), then the path to the root.
    let late = card.xrun.node.as_ref().map(|n| {
        (
            Role::Node,
            n.id,
            n.name.as_str(),
            n.signal_ns,
            n.awake_ns,
            n.finish_ns,
        )
    });
    let path = card.path.iter().map(|s| {
        (
            s.role,
            s.id,
            s.name.as_str(),
            s.signal_ns,
            s.awake_ns,
            s.finish_ns,
        )
    });
    let mut named = Vec::new();
    for (role, id, name, signal, awake, finish) in late.into_iter().chain(path) {
        let track = step_track(role, id);
        if named.contains(&track) {
            continue;
        }
        named.push(track);
        late_track.get_or_insert(track);
        let label = match role {
            Role::Node => format!("node {name}"),
            Role::Driver => format!("driver {name}"),
        };
        w.thread_name(track, &label);
        let args = json!({"cycle": card.xrun.cycle});
        if signal > 0 && awake >= signal {
            w.slice(track, "wait", "node", signal, awake - signal, args.clone());
        }
        if awake > 0 && finish >= awake {
            w.slice(track, "busy", "node", awake, finish - awake, args);
        }
    }
    let late_track = late_track.unwrap_or(Track {
        pid: KERNEL_PID,
        tid: 0,
    });
    // The card's threads: when the kernel ran them.
    let threads = card
        .mapping
        .iter()
        .chain(card.root.as_ref().and_then(|r| r.mapping.as_ref()))
        .filter_map(|m| Some((m.pid?, m.thread.as_ref()?)));
    for (pid, thread) in threads {
        let track = Track {
            pid,
            tid: thread.tid,
        };
        if named.contains(&track) {
            continue;
        }
        named.push(track);
        w.thread_name(track, &format!("{} ({})", thread.comm, thread.policy));
        let mut since = None;
        // Each CPU's last switch: where a run whose switch-in is not in the window began at the
        // latest (perf drops some switches made from an idle CPU's context, and a run may have
        // begun before the window).
        let mut last_switch: Vec<(u16, u64)> = Vec::new();
        for e in &window.events {
            let EventKind::Switch {
                prev_tid, next_tid, ..
            } = &e.kind
            else {
                continue;
            };
            if *prev_tid == thread.tid {
                match since.take() {
                    Some((from, cpu)) => w.slice(
                        track,
                        "running",
                        "sched",
                        from,
                        e.ts_ns.saturating_sub(from),
                        json!({ "cpu": cpu }),
                    ),
                    None => {
                        let from = last_switch
                            .iter()
                            .find(|(cpu, _)| *cpu == e.cpu)
                            .map_or(window.t0_ns, |(_, t)| *t);
                        w.slice(
                            track,
                            "running",
                            "sched",
                            from,
                            e.ts_ns.saturating_sub(from),
                            json!({ "cpu": e.cpu, "switch_in_not_seen": true }),
                        );
                    }
                }
            }
            match last_switch.iter_mut().find(|(cpu, _)| *cpu == e.cpu) {
                Some(last) => last.1 = e.ts_ns,
                None => last_switch.push((e.cpu, e.ts_ns)),
            }
            if *next_tid == thread.tid {
                since = Some((e.ts_ns, e.cpu));
            }
        }
        if let Some((from, cpu)) = since {
            // Still running when the window ends.
            w.slice(
                track,
                "running",
                "sched",
                from,
                window.t1_ns.saturating_sub(from),
                json!({ "cpu": cpu, "until_window_end": true }),
            );
        }
    }
    write_card(&mut w, card, verdict, late_track, Some(window), cpus);
    match w.finish_into() {
        (_, Some(bytes)) => bytes,
        // Writing into memory does not fail.
        (_, None) => Vec::new(),
    }
}
