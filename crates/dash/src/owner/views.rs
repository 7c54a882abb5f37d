//! What the engine-owner thread answers about its state, as JSON for the server: status (with the limits), config, explain report, dropout cards, stall setting and idle states; runs on the engine-owner thread.

use super::{Owner, STALL_MS_RANGE};
use crate::api::{max_sines, ApiError};
use serde_json::{json, Value};
use std::path::Path;
use xrunlab_engine::config::{
    BUFFER_FRAMES_RANGE, BUSY_COUNT_RANGE, BUSY_PERIOD_MS_RANGE, CHORDS_RANGE, CHUNK_SIZE_RANGE,
    DRIVER_SPIN_US_RANGE, SAMPLE_RATE_RANGE, THREADS_RANGE,
};

/// Culprits listed by `GET /api/explain`.
const TOP_CULPRITS: usize = 10;
/// Latest dropouts listed by `GET /api/explain` (all kept ones are fetchable by id).
const RECENT_DROPOUTS: usize = 20;

impl Owner {
    pub(super) fn explain_view(&self) -> Value {
        let Some(e) = self.explain.as_ref() else {
            return json!({ "enabled": false });
        };
        let base = self.agg.base_ns();
        let recent: Vec<Value> = e
            .dropouts()
            .rev()
            .take(RECENT_DROPOUTS)
            .map(|d| {
                json!({
                    "epoch": d.epoch,
                    "seq": d.seq,
                    "t_ms": d.period_start_ns.saturating_sub(base) as f64 / 1e6,
                    "kind": d.kind,
                    "late_by_us": d.late_by_us,
                    "verdict": d.verdict(),
                    "cause": d.blame.as_ref().map(|c| c.cause),
                })
            })
            .collect();
        let mut v = serde_json::to_value(e.report(TOP_CULPRITS)).unwrap_or_else(|_| json!({}));
        if let Value::Object(m) = &mut v {
            m.insert("enabled".into(), json!(true));
            m.insert("cpus".into(), json!(e.cpus()));
            m.insert("recent".into(), json!(recent));
        }
        v
    }

    pub(super) fn dropout_view(&self, epoch: u32, seq: u64) -> Result<Value, ApiError> {
        let Some(e) = self.explain.as_ref() else {
            return Err(ApiError::failed(
                404,
                "no blame cards: \"Explain dropouts\" is off (PUT /api/explain {\"enabled\": true})",
            ));
        };
        match e.find(epoch, seq) {
            Some(d) => Ok(json!(d)),
            None => Err(ApiError::failed(
                404,
                format!(
                    "no card for dropout {epoch}/{seq}: not a dropout seen while explaining, its card \
                     is still being built (about 50 ms after the buffer), or it is older than the \
                     {} kept",
                    e.report(0).max_kept
                ),
            )),
        }
    }

    pub(super) fn config_view(&self) -> Value {
        let Some(engine) = self.engine() else {
            return json!({});
        };
        let mut v = serde_json::to_value(engine.config()).unwrap_or_else(|_| json!({}));
        if let Value::Object(m) = &mut v {
            m.insert("preset".into(), json!(engine.config().preset().name()));
            m.insert("device".into(), json!(engine.device_info().kind));
        }
        v
    }

    /// The cpuidle driver and, per CPU and state, its exit latency and the entries since
    /// the dashboard started (a few small sysfs reads: status is asked for, not streamed).
    fn idle_view(&self) -> Value {
        let now = xrunlab_sys::idle_states(Path::new(xrunlab_sys::DEFAULT_SYS_ROOT));
        json!({
            "driver": self.idle_driver,
            "states": xrunlab_sys::idle_usage_delta(&self.idle_at_start, &now),
            "note": if now.is_empty() { "no cpuidle states on this machine" } else { "entries since the dashboard started" },
        })
    }

    pub(super) fn fault_view(&self) -> Value {
        match self.fault {
            Some(f) => {
                json!({ "stall_ms": f.stall.as_secs_f64() * 1e3, "every_ms": f.every.as_secs_f64() * 1e3 })
            }
            None => json!({ "stall_ms": 0, "every_ms": null }),
        }
    }

    pub(super) fn status(&self) -> Value {
        let counts = self.agg.counts();
        let freq_note = if self.freq_available {
            "scaling_cur_freq from cpufreq".to_owned()
        } else {
            "not available on this machine (no cpufreq)".to_owned()
        };
        let common = json!({
            "devices": self.kinds,
            "counts": counts,
            "power": {
                "source": self.power_source,
                "estimated": self.power_source.starts_with("estimate"),
                "last": self.last_power,
            },
            "cpus": self.cpus,
            "topology": self.topology,
            "idle": self.idle_view(),
            "freq": { "available": self.freq_available, "note": freq_note },
            "fault": self.fault_view(),
            "explain": {
                "enabled": self.explain.is_some(),
                "available": self.explain.as_ref().map(|e| e.unavailable().is_none()),
                "unavailable": self.explain.as_ref().and_then(|e| e.unavailable()),
            },
            "config_version": self.config_version,
            "last_error": self.last_error,
        });
        let Some(engine) = self.engine() else {
            let mut v = common;
            v["audio"] =
                json!("stopped: no engine (a device switch failed; pick a device to start one)");
            return v;
        };
        let config = engine.config();
        let chord = engine.chord_info();
        let mut v = common;
        let m = v.as_object_mut().expect("json! object literal");
        m.insert("audio".into(), json!("running"));
        m.insert("device".into(), json!(engine.device_info()));
        m.insert("config".into(), json!(config));
        m.insert("preset".into(), json!(config.preset().name()));
        m.insert("threads".into(), json!(engine.threads()));
        m.insert("process_rt".into(), json!(engine.process_rt()));
        m.insert("busy_threads".into(), json!(engine.busy_threads()));
        m.insert("chord".into(), json!(chord));
        m.insert(
            "server_load_pct".into(),
            json!(engine.signals().server_load()),
        );
        m.insert(
            "limits".into(),
            json!({
                "sines_max": max_sines(config),
                "sines_apl_max": chord.apl_max_sines,
                "chords": CHORDS_RANGE,
                "sample_rate": SAMPLE_RATE_RANGE,
                "buffer_frames": BUFFER_FRAMES_RANGE,
                "threads": THREADS_RANGE,
                "chunk_size": CHUNK_SIZE_RANGE,
                "busy_count": BUSY_COUNT_RANGE,
                "busy_period_ms": BUSY_PERIOD_MS_RANGE,
                "busy_duty_pct": [0, 100],
                "min_load_pct": [0, 100],
                "driver_spin_us": DRIVER_SPIN_US_RANGE,
                "priority": [1, 99],
                "uclamp_min": [0, 1024],
                "stall_ms": STALL_MS_RANGE,
            }),
        );
        v
    }
}
