//! The recorder's counters, as Prometheus reads them: xruns by server, node, card kind and
//! culprit; cycles by server; a histogram of the driver's wake-up delay; drift events by kind.
//! Updated on the recorder's store thread, read by the metrics endpoint; one mutex, held for a
//! few map updates or one render, never on an audio thread.

use crate::exposition::{header, sample};
use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

/// The most (server, node, kind, culprit) series kept apart; past that, new combinations are
/// counted under node and culprit `other`, so a month of changing names cannot grow the
/// recorder's memory or the scrape without bound.
pub const MAX_XRUN_SERIES: usize = 2000;

/// The wake-up delay histogram's upper bounds, seconds: from 50 µs (a good RT kernel) to
/// 50 ms (several periods at 48 kHz / 256).
pub const WAKE_DELAY_BUCKETS: [f64; 10] = [
    50e-6, 100e-6, 200e-6, 500e-6, 1e-3, 2e-3, 5e-3, 10e-3, 20e-3, 50e-3,
];

#[derive(Default)]
struct Histogram {
    /// Per bucket (not cumulative), then the overflow.
    counts: [u64; WAKE_DELAY_BUCKETS.len() + 1],
    sum: f64,
}

#[derive(Default)]
struct State {
    xruns: BTreeMap<[String; 4], u64>,
    cycles: BTreeMap<String, u64>,
    wake: BTreeMap<String, Histogram>,
    drift: BTreeMap<String, u64>,
    servers_up: BTreeMap<String, bool>,
}

/// The counters.
#[derive(Default)]
pub struct Metrics {
    state: Mutex<State>,
}

impl Metrics {
    /// Empty counters.
    pub fn new() -> Metrics {
        Metrics::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding it left plain counters, still worth serving.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts one xrun.
    pub fn count_xrun(&self, server: &str, node: &str, kind: &str, culprit: &str) {
        let mut s = self.state();
        let key = [server, node, kind, culprit].map(str::to_owned);
        if let Some(n) = s.xruns.get_mut(&key) {
            *n += 1;
        } else if s.xruns.len() < MAX_XRUN_SERIES {
            s.xruns.insert(key, 1);
        } else {
            *s.xruns
                .entry([server, "other", kind, "other"].map(str::to_owned))
                .or_insert(0) += 1;
        }
    }

    /// Counts `n` cycles of `server`'s graph.
    pub fn count_cycles(&self, server: &str, n: u64) {
        let mut s = self.state();
        match s.cycles.get_mut(server) {
            Some(c) => *c += n,
            None => {
                s.cycles.insert(server.to_owned(), n);
            }
        }
    }

    /// Records one driver wake-up `delay_s` seconds after its expected time.
    pub fn observe_wake_delay(&self, server: &str, delay_s: f64) {
        let mut s = self.state();
        if !s.wake.contains_key(server) {
            s.wake.insert(server.to_owned(), Histogram::default());
        }
        let h = s.wake.get_mut(server).expect("inserted above");
        let i = WAKE_DELAY_BUCKETS
            .iter()
            .position(|&le| delay_s <= le)
            .unwrap_or(WAKE_DELAY_BUCKETS.len());
        h.counts[i] += 1;
        h.sum += delay_s;
    }

    /// Counts one drift event of `kind`.
    pub fn count_drift(&self, kind: &str) {
        *self.state().drift.entry(kind.to_owned()).or_insert(0) += 1;
    }

    /// Whether the recorder sees `server` now.
    pub fn set_server_up(&self, server: &str, up: bool) {
        self.state().servers_up.insert(server.to_owned(), up);
    }

    /// Everything in the Prometheus text format.
    pub fn render(&self) -> String {
        let s = self.state();
        let mut out = String::new();
        header(
            &mut out,
            "xrunlab_xruns_total",
            "counter",
            "Xruns recorded, by server, late node, card kind and culprit.",
        );
        for ([server, node, kind, culprit], n) in &s.xruns {
            sample(
                &mut out,
                "xrunlab_xruns_total",
                &[
                    ("server", server),
                    ("node", node),
                    ("kind", kind),
                    ("culprit", culprit),
                ],
                n,
            );
        }
        header(
            &mut out,
            "xrunlab_cycles_total",
            "counter",
            "Graph cycles seen, by server.",
        );
        for (server, n) in &s.cycles {
            sample(&mut out, "xrunlab_cycles_total", &[("server", server)], n);
        }
        header(
            &mut out,
            "xrunlab_driver_wake_delay_seconds",
            "histogram",
            "How late the driver woke after its expected cycle start.",
        );
        for (server, h) in &s.wake {
            let mut cumulative = 0;
            for (i, le) in WAKE_DELAY_BUCKETS.iter().enumerate() {
                cumulative += h.counts[i];
                sample(
                    &mut out,
                    "xrunlab_driver_wake_delay_seconds_bucket",
                    &[("server", server), ("le", &le.to_string())],
                    cumulative,
                );
            }
            let count = cumulative + h.counts[WAKE_DELAY_BUCKETS.len()];
            sample(
                &mut out,
                "xrunlab_driver_wake_delay_seconds_bucket",
                &[("server", server), ("le", "+Inf")],
                count,
            );
            sample(
                &mut out,
                "xrunlab_driver_wake_delay_seconds_sum",
                &[("server", server)],
                h.sum,
            );
            sample(
                &mut out,
                "xrunlab_driver_wake_delay_seconds_count",
                &[("server", server)],
                count,
            );
        }
        header(
            &mut out,
            "xrunlab_drift_events_total",
            "counter",
            "Drift events (what changed on the machine), by kind.",
        );
        for (kind, n) in &s.drift {
            sample(&mut out, "xrunlab_drift_events_total", &[("kind", kind)], n);
        }
        header(
            &mut out,
            "xrunlab_server_up",
            "gauge",
            "1 while the recorder sees the audio server, 0 during a gap.",
        );
        for (server, up) in &s.servers_up {
            sample(
                &mut out,
                "xrunlab_server_up",
                &[("server", server)],
                u8::from(*up),
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_histogram_is_cumulative_with_an_inf_bucket_sum_and_count() {
        let m = Metrics::new();
        for d in [40e-6, 40e-6, 3e-3, 1.0] {
            m.observe_wake_delay("jack", d);
        }
        let text = m.render();
        for line in [
            "xrunlab_driver_wake_delay_seconds_bucket{server=\"jack\",le=\"0.00005\"} 2",
            "xrunlab_driver_wake_delay_seconds_bucket{server=\"jack\",le=\"0.002\"} 2",
            "xrunlab_driver_wake_delay_seconds_bucket{server=\"jack\",le=\"0.005\"} 3",
            "xrunlab_driver_wake_delay_seconds_bucket{server=\"jack\",le=\"0.05\"} 3",
            "xrunlab_driver_wake_delay_seconds_bucket{server=\"jack\",le=\"+Inf\"} 4",
            "xrunlab_driver_wake_delay_seconds_count{server=\"jack\"} 4",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
        assert!(text.contains("xrunlab_driver_wake_delay_seconds_sum{server=\"jack\"} 1.00308"));
    }

    #[test]
    fn series_past_the_cap_are_counted_as_other() {
        let m = Metrics::new();
        for i in 0..MAX_XRUN_SERIES + 5 {
            m.count_xrun("pipewire", &format!("n{i}"), "node_ran_long", "c");
        }
        let text = m.render();
        assert!(text.contains(
            "xrunlab_xruns_total{server=\"pipewire\",node=\"other\",kind=\"node_ran_long\",culprit=\"other\"} 5"
        ));
        assert_eq!(
            text.lines()
                .filter(|l| l.starts_with("xrunlab_xruns_total{"))
                .count(),
            MAX_XRUN_SERIES + 1
        );
    }
}
