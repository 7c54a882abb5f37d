//! The rows of the history as types: what the recorder writes and what `history` reads back;
//! any thread. Times are nanoseconds since the Unix epoch (wall clock), so a file moved to
//! another machine or read after a reboot still says when.

use serde::{Deserialize, Serialize};
use std::time::{SystemTime, UNIX_EPOCH};

/// `time` as nanoseconds since the Unix epoch (negative before it).
pub fn unix_ns(time: SystemTime) -> i64 {
    match time.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_nanos()).unwrap_or(i64::MAX),
    }
}

/// One xrun as the recorder writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct XrunEntry {
    /// When the cycle that missed its deadline started, ns since the Unix epoch.
    pub time_ns: i64,
    /// `pipewire` or `jack`.
    pub server: String,
    /// The late node, when one was.
    pub node: Option<String>,
    /// The card's kind, as watch names it (`node_ran_long`, `driver_woke_late`…).
    pub kind: String,
    /// The root cause in a few words (the kind of thing that took the time: a node, the
    /// driver, an IRQ, a task…).
    pub root: String,
    /// Who the card names as the culprit (a node, a task, an IRQ handler), when it names one.
    pub culprit: Option<String>,
    /// The card in one line, as watch prints it.
    pub summary: String,
    /// The whole card, as watch's `--json` writes it.
    pub card: serde_json::Value,
}

/// An xrun read back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredXrun {
    /// Its row id: what `history --trace ID` takes.
    pub id: i64,
    /// The recorder session that wrote it.
    pub session: Option<i64>,
    /// Whether a Perfetto snapshot of its window is on file.
    pub has_snapshot: bool,
    /// What was written.
    #[serde(flatten)]
    pub entry: XrunEntry,
}

/// A change on the machine that can explain the crackles that follow it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DriftEntry {
    /// When it was seen, ns since the Unix epoch.
    pub time_ns: i64,
    /// What changed: `sched`, `governor`, `epp`, `platform_profile`, `resume`, `cpu_online`,
    /// `throttle`, `quantum`, `rate`, `node_added`, `node_removed`.
    pub kind: String,
    /// What it changed on (a thread, a cpufreq policy, a node…).
    pub subject: String,
    /// The value before, as read.
    pub before: String,
    /// The value after, as read.
    pub after: String,
    /// The change in one sentence.
    pub words: String,
}

/// A drift event read back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredDrift {
    /// Its row id.
    pub id: i64,
    /// The recorder session that saw it.
    pub session: Option<i64>,
    /// What was written.
    #[serde(flatten)]
    pub entry: DriftEntry,
}

/// A recorder session: from its start to its stop, with the server it followed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Session {
    /// Its row id.
    pub id: i64,
    /// Start, ns since the Unix epoch.
    pub start_ns: i64,
    /// Stop; absent while it runs, or when it was killed.
    pub stop_ns: Option<i64>,
    /// The server it followed.
    pub server: String,
    /// The xrunlab version that recorded it.
    pub version: String,
    /// The times the server was away.
    pub gaps: Vec<Gap>,
}

/// A span when the recorder saw no server (it stopped or restarted).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gap {
    /// When the server went away.
    pub from_ns: i64,
    /// When it came back; absent while it is away.
    pub to_ns: Option<i64>,
    /// Why, as the recorder saw it.
    pub reason: String,
}

/// How many xruns one (server, node, kind, culprit) has on file, as the metrics count them;
/// an absent node or culprit is empty.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct XrunCount {
    /// The server.
    pub server: String,
    /// The late node, or empty.
    pub node: String,
    /// The card kind.
    pub kind: String,
    /// The culprit, or empty.
    pub culprit: String,
    /// Its xruns.
    pub xruns: u64,
}

/// A culprit and how many xruns it caused over a span.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CulpritCount {
    /// The culprit as the cards name it.
    pub culprit: String,
    /// Its xruns.
    pub xruns: u64,
}

/// An xrun read back without its card: what a list or a timeline shows of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct XrunHead {
    /// Its row id.
    pub id: i64,
    /// When its cycle started, ns since the Unix epoch.
    pub time_ns: i64,
    /// `pipewire` or `jack`.
    pub server: String,
    /// The late node, when one was.
    pub node: Option<String>,
    /// The card's kind.
    pub kind: String,
    /// The root cause in a few words.
    pub root: String,
    /// Who the card names as the culprit, when it names one.
    pub culprit: Option<String>,
    /// The card in one line.
    pub summary: String,
    /// Whether a Perfetto snapshot of its window is on file.
    pub has_snapshot: bool,
}

/// One value of a column (a node, a culprit, a card kind) and how many xruns have it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Facet {
    /// The value.
    pub value: String,
    /// Its xruns.
    pub xruns: u64,
}

/// The values xruns in a span have, to choose filters from: most xruns first.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Facets {
    /// Late nodes.
    pub nodes: Vec<Facet>,
    /// Culprits.
    pub culprits: Vec<Facet>,
    /// Card kinds.
    pub kinds: Vec<Facet>,
}
