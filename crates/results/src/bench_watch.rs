//! The result of `xrunlab bench watch` (schema [`SCHEMA`]): per mode (not watched, watched
//! without and with the kernel's events), what watch reported about a culprit of our own and
//! what watching cost, and the starved-server mode (an RT hog on the server's own thread's CPU)
//! with its recall and right roots; written by the binary, read back typed. Used on the main
//! thread.

use crate::read::{parse_typed, read_typed, ReadError};
use serde::{Deserialize, Serialize};
use std::path::Path;
use xrunlab_sys::Provenance;

/// Version of the bench watch result layout; bump on incompatible change.
pub const SCHEMA: &str = "xrunlab.bench.watch/1";

/// One mode's figures. A figure with nothing to measure (no cards, no bystander file) is
/// absent, not zero.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModeFigures {
    /// "not watched", "without (--no-kernel)" or "with kernel events".
    pub mode: String,
    /// Whether watch ran in this mode (the baseline has the culprit alone).
    pub watching: bool,
    /// Watch's own user+system CPU time over the watch, % of one CPU.
    pub cpu_pct: f64,
    /// The culprit's stalls inside the watch (each one an induced xrun).
    pub induced: usize,
    /// xruns watch reported (cards).
    pub cards: usize,
    /// Cards naming the culprit.
    pub named: usize,
    /// Cards naming a node (not driver-side, not unattributed).
    pub with_node: usize,
    /// Induced stalls with at least one card of theirs: the recall (cards matched to the stalls
    /// by the offset between the culprit's clock and watch's that puts the most stalls on a card;
    /// absent in files written before it, and where watch did not run).
    #[serde(default)]
    pub stalls_with_card: Option<usize>,
    /// Cards of xruns during a stall (from 10 ms before it to 30 ms after its start).
    #[serde(default)]
    pub cards_in_stalls: Option<usize>,
    /// Of those, the cards naming the culprit: the right share is this over `cards_in_stalls`.
    #[serde(default)]
    pub named_in_stalls: Option<usize>,
    /// Cards of xruns outside every stall (the machine's own, which watch is right to card).
    #[serde(default)]
    pub other_cards: Option<usize>,
    /// From an xrun's deadline to its card, ms: the median.
    pub delay_p50_ms: Option<f64>,
    /// See `delay_p50_ms`: the longest.
    pub delay_max_ms: Option<f64>,
    /// Kernel events the tracer lost.
    pub lost: u64,
    /// "recorded", or why the kernel's events were not.
    pub kernel_note: String,
    /// A well-behaved client's render load (its render time / period), p50, %: watch's
    /// effect on the graph.
    pub bystander_load_p50_pct: Option<f64>,
    /// See `bystander_load_p50_pct`: p99.
    pub bystander_load_p99_pct: Option<f64>,
}

/// The starved-server mode: a SCHED_FIFO 95 hog spinning on the CPU the server's own real-time
/// thread was pinned to, beside one calm client; watch with the kernel's events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StarvedFigures {
    /// The server's thread that was starved: `data-loop.0 (pid 120, tid 123, SCHED_FIFO 88)`.
    pub server_thread: String,
    /// The CPU it and the hog shared.
    pub cpu: usize,
    /// How long each spin lasted, ms.
    pub spin_ms: f64,
    /// How often the hog spun, ms.
    pub every_ms: f64,
    /// Spins inside the watch.
    pub spins: usize,
    /// Spins with at least one card during them: the recall.
    pub spins_with_card: usize,
    /// Every card of the watch.
    pub cards: usize,
    /// Cards of xruns during a spin (from 30 ms before its start to 40 ms after its end).
    pub cards_in_spins: usize,
    /// Of those, the cards whose root is the driver woken late behind the hog.
    pub right_root: usize,
    /// Of those, the cards that blame the calm client as the root.
    pub on_calm: usize,
    /// The verdicts of the cards during spins that do not name the hog, so that a reader can
    /// judge each one (the machine's own xruns land in a spin's window too).
    #[serde(default)]
    pub not_naming_hog: Vec<String>,
    /// Watch's own user+system CPU time over the watch, % of one CPU.
    pub cpu_pct: f64,
    /// Kernel events the tracer lost.
    pub lost: u64,
    /// "recorded", or why the kernel's events were not.
    pub kernel_note: String,
    /// The graph's mean period over the watch, ms: the watch's length over its cycles, a little
    /// long (its start-up counts); `None` when it ran no cycle. A period no shorter than a spin leaves the server's thread time to
    /// catch up: no xrun is expected, and recall and right root say nothing.
    #[serde(default)]
    pub period_ms: Option<f64>,
}

impl StarvedFigures {
    /// Whether the spins could make the graph miss a cycle at all: its period was shorter than
    /// a spin (unknown counts as not).
    pub fn spins_can_starve(&self) -> bool {
        self.period_ms.is_some_and(|p| p < self.spin_ms)
    }
}

/// `xrunlab bench watch --json`'s file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchWatchResult {
    /// [`SCHEMA`].
    pub schema: String,
    /// Where it came from.
    pub provenance: Provenance,
    /// "PipeWire" or "JACK".
    pub server: String,
    /// How long each mode watched, seconds.
    pub duration_s: f64,
    /// How often the culprit stalled, seconds.
    pub stall_every_s: f64,
    /// The modes, baseline first (none with `--cause server`).
    pub modes: Vec<ModeFigures>,
    /// The starved-server mode, when it ran (`--cause server` or `both`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starved: Option<StarvedFigures>,
    /// Why the starved-server mode did not run, when it was asked for and could not.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub starved_note: String,
}

/// Reads a bench watch result file back; a field that does not fit is named.
pub fn read_bench_watch(path: &Path) -> Result<BenchWatchResult, ReadError> {
    read_typed(path, SCHEMA)
}

/// [`read_bench_watch`] over text already read from `path`.
pub fn parse_bench_watch(path: &Path, text: &str) -> Result<BenchWatchResult, ReadError> {
    parse_typed(path, text, SCHEMA)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bench_watch_result_reads_back_the_same_with_its_absent_figures() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bench-watch.json");
        let mode = |watching: bool| ModeFigures {
            mode: if watching {
                "with kernel events"
            } else {
                "not watched"
            }
            .to_owned(),
            watching,
            cpu_pct: if watching { 2.0 } else { 0.0 },
            induced: 5,
            cards: usize::from(watching) * 5,
            named: usize::from(watching) * 5,
            with_node: usize::from(watching) * 5,
            stalls_with_card: watching.then_some(5),
            cards_in_stalls: watching.then_some(5),
            named_in_stalls: watching.then_some(5),
            other_cards: watching.then_some(0),
            delay_p50_ms: watching.then_some(3.9),
            delay_max_ms: watching.then_some(11.3),
            lost: 0,
            kernel_note: "recorded".to_owned(),
            bystander_load_p50_pct: Some(1.8),
            bystander_load_p99_pct: None,
        };
        let written = BenchWatchResult {
            schema: SCHEMA.to_owned(),
            provenance: Provenance::collect("0", Path::new("/proc"), Path::new("/sys")),
            server: "JACK".to_owned(),
            duration_s: 3.0,
            stall_every_s: 0.5,
            modes: vec![mode(false), mode(true)],
            starved: Some(StarvedFigures {
                server_thread: "data-loop.0 (pid 7440, tid 7447, SCHED_FIFO 88)".to_owned(),
                cpu: 1,
                spin_ms: 15.0,
                every_ms: 700.0,
                spins: 12,
                spins_with_card: 12,
                cards: 14,
                cards_in_spins: 13,
                right_root: 12,
                on_calm: 0,
                not_naming_hog: vec!["xrun 9 (cycle 466): every node finished in time, but the \
                                      driver \"driver\" woke 6.16 ms late, behind kdamond.0"
                    .to_owned()],
                cpu_pct: 2.5,
                lost: 0,
                kernel_note: "recorded".to_owned(),
                period_ms: Some(5.33),
            }),
            starved_note: String::new(),
        };
        crate::write::write_json(&path, &written).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.contains("\"delay_p50_ms\": null"),
            "absent, not zero: {text}"
        );
        assert_eq!(parse_bench_watch(&path, &text).unwrap(), written);
        assert_eq!(read_bench_watch(&path).unwrap(), written);
    }
}
