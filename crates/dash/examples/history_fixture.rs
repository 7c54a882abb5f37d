//! Writes a flight-recorder history of the last hour for the History view's browser tests
//! (tests/browser/history.test.js) through the history's own writer: real watch cards (built as
//! watch builds them, summarized in watch's own words) of four kinds, one of a node named like a
//! script, drift events, and a gap when the server was away. Single-threaded.
//!
//! `cargo run -p xrunlab-dash --example history_fixture -- FILE [N]` (FILE must not exist yet):
//! with N, also N more xruns spread over the 30 days before, to measure a month of history.

use serde_json::json;
use std::path::Path;
use std::time::SystemTime;
use xrunlab_history::{unix_ns, DriftEntry, History, XrunEntry};
use xrunlab_watch::card::{Card, KernelAccount, KernelCulprit, Kind, RootAccount};
use xrunlab_watch::{
    words, Confidence, Evidence, Finding, Mapping, NodeStatus, NodeTiming, Role, RtThread, Step,
    Xrun,
};

const MIN: i64 = 60_000_000_000;
const PERIOD_NS: u64 = 5_333_333;

/// The node names; the last is what a hostile client could call itself.
pub const SCRIPT_NODE: &str = "<script>window.pwned=1</script><img src=x onerror=window.pwned=2>";

fn step(role: Role, name: &str, finding: Finding, excess_ns: u64) -> Step {
    Step {
        role,
        id: if role == Role::Driver { 30 } else { 61 },
        name: name.into(),
        finding,
        excess_ns,
        signal_ns: 1_000,
        awake_ns: 2_000,
        finish_ns: 3_000,
    }
}

fn task(name: &str, pid: i32, policy: &str, us: f64) -> KernelCulprit {
    KernelCulprit {
        kind: "task".into(),
        name: name.into(),
        pid: Some(pid),
        policy: policy.into(),
        cpu: 1,
        us,
    }
}

fn account(verdict: &str, main: Option<KernelCulprit>, waited_us: f64) -> KernelAccount {
    KernelAccount {
        verdict: verdict.into(),
        culprits: main.iter().cloned().collect(),
        main_culprit: main,
        waited_us,
        ran_us: 1_200.0,
        blocked_us: 0.0,
        interrupt_us: 35.0,
        migrations: 1,
        lost_events: 0,
        window_complete: true,
    }
}

fn card(number: u64, node: Option<&str>, kind: Kind, path: Vec<Step>) -> Card {
    let timing = node.map(|name| NodeTiming {
        id: 61,
        name: name.into(),
        signal_ns: 1_000,
        awake_ns: 2_000,
        finish_ns: 9_000_000,
        status: NodeStatus::Finished,
        xruns: Some(number as u32),
    });
    Card {
        xrun: Xrun {
            number,
            cycle: 1000 * number,
            node: timing,
            evidence: Evidence::FinishedLate,
            cycle_start_ns: 0,
            deadline_ns: PERIOD_NS,
            quantum: 256,
            rate: 48_000,
            median_wait_ns: Some(40_000),
            median_busy_ns: Some(1_100_000),
            path: path.clone(),
            driver_late_ns: None,
            signaller_path: Vec::new(),
        },
        kind,
        path,
        app_name: node.map(|_| "fixture".into()),
        mapping: node.map(|_| Mapping {
            pid: Some(4242),
            thread: Some(RtThread {
                tid: 4243,
                comm: "data-loop.0".into(),
                policy: "SCHED_FIFO 83".into(),
            }),
            confidence: Confidence::High,
            reason: "the kernel showed it switching in".into(),
        }),
        wait_us: Some(40.0),
        busy_us: Some(6_400.0),
        busy_at_least: false,
        period_us: PERIOD_NS as f64 / 1000.0,
        kernel: None,
        kernel_missing: None,
        root: None,
        unexplained: None,
        faults: None,
    }
}

/// The four templates: (card, culprit, root).
fn templates() -> Vec<(Card, Option<&'static str>, &'static str)> {
    let mut ran_long = card(
        1,
        Some("synth"),
        Kind::NodeRanLong,
        vec![step(Role::Node, "synth", Finding::RanLong, 5_300_000)],
    );
    ran_long.kernel = Some(account(
        "late: preempted by busyhog",
        Some(task("busyhog", 7466, "SCHED_FIFO 95", 4_800.0)),
        4_800.0,
    ));
    let mut driver = card(
        2,
        Some("synth"),
        Kind::DriverWokeLate,
        vec![
            step(Role::Node, "synth", Finding::NotSignalled, 2_000_000),
            step(
                Role::Driver,
                "alsa_output.pci",
                Finding::DriverLate,
                2_000_000,
            ),
        ],
    );
    driver.root = Some(RootAccount {
        role: Role::Driver,
        name: "alsa_output.pci".into(),
        mapping: None,
        from_ns: 0,
        to_ns: 2_000_000,
        account: Some(account(
            "late: irq 24 xhci_hcd",
            Some(KernelCulprit {
                kind: "irq".into(),
                name: "xhci_hcd".into(),
                pid: None,
                policy: String::new(),
                cpu: 0,
                us: 1_900.0,
            }),
            1_900.0,
        )),
        woken: None,
        missing: None,
        catching_up: false,
        waker: None,
        waker_via: Vec::new(),
    });
    let mut script = card(
        3,
        Some(SCRIPT_NODE),
        Kind::NodeWokeLate,
        vec![step(Role::Node, SCRIPT_NODE, Finding::WokeLate, 3_000_000)],
    );
    script.kernel_missing = Some("recorded with --no-kernel".into());
    let mut unexplained = card(4, Some("reverb"), Kind::Unexplained, Vec::new());
    unexplained.unexplained = Some("every step was in time by its medians".into());
    vec![
        (ran_long, Some("busyhog"), "node"),
        (driver, Some("xhci_hcd"), "driver"),
        (script, None, "node"),
        (unexplained, None, "none"),
    ]
}

fn main() {
    let path = std::env::args_os()
        .nth(1)
        .expect("usage: history_fixture FILE");
    let path = Path::new(&path);
    let extra: i64 = std::env::args()
        .nth(2)
        .map(|n| n.parse().expect("N: a whole number of xruns"))
        .unwrap_or(0);
    assert!(!path.exists(), "{} exists: give a new file", path.display());
    let h = History::open_writer(path).expect("a history");
    let now = unix_ns(SystemTime::now());
    let session = h
        .begin_session(now - 58 * MIN, "pipewire", "fixture")
        .expect("a session");
    let templates = templates();
    // Twelve xruns over the last hour: every template three times, two minutes apart and more.
    for i in 0..12_i64 {
        let (template, culprit, root) = &templates[(i % 4) as usize];
        let mut card = template.clone();
        card.xrun.number = i as u64 + 1;
        card.xrun.cycle = 1000 * (i as u64 + 1);
        let time_ns = now - (55 - 4 * i) * MIN;
        let mut value = serde_json::to_value(&card).expect("a card serializes");
        if i == 5 {
            value["drift_before"] =
                json!(["pipewire's data loop (tid 4243) has run SCHED_OTHER since 14:02:11"]);
        }
        let id = h
            .insert_xrun(
                Some(session),
                &XrunEntry {
                    time_ns,
                    server: "pipewire".into(),
                    node: card.xrun.node.as_ref().map(|n| n.name.clone()),
                    kind: card.kind.name().into(),
                    root: (*root).into(),
                    culprit: culprit.map(Into::into),
                    summary: words::verdict(&card),
                    card: value,
                },
            )
            .expect("an xrun");
        if i == 0 {
            h.insert_snapshot(id, root, b"a perfetto trace")
                .expect("a snapshot");
        }
    }
    let month = 30 * 24 * 60 * MIN;
    for i in 0..extra {
        let (template, culprit, root) = &templates[(i % 4) as usize];
        let time_ns = now - 60 * MIN - month + month / extra.max(1) * i;
        h.insert_xrun(
            Some(session),
            &XrunEntry {
                time_ns,
                server: "pipewire".into(),
                node: template.xrun.node.as_ref().map(|n| n.name.clone()),
                kind: template.kind.name().into(),
                root: (*root).into(),
                culprit: culprit.map(Into::into),
                summary: words::verdict(template),
                card: serde_json::to_value(template).expect("a card serializes"),
            },
        )
        .expect("an xrun");
    }
    for (ago, kind, subject, before, after, what) in [
        (
            50,
            "sched",
            "data-loop.0 (tid 4243)",
            "SCHED_FIFO 83",
            "SCHED_OTHER",
            "pipewire's data loop (tid 4243) lost SCHED_FIFO 83: now SCHED_OTHER",
        ),
        (
            26,
            "governor",
            "policy0",
            "performance",
            "powersave",
            "the governor of CPU 0-1 became powersave (was performance)",
        ),
    ] {
        h.insert_drift(
            Some(session),
            &DriftEntry {
                time_ns: now - ago * MIN,
                kind: kind.into(),
                subject: subject.into(),
                before: before.into(),
                after: after.into(),
                words: what.into(),
            },
        )
        .expect("a drift event");
    }
    h.open_gap(session, now - 33 * MIN, "the server went away (restarted)")
        .expect("a gap");
    h.close_gap(session, now - 30 * MIN).expect("its end");
    println!("{}", path.display());
}
