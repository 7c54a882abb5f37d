//! What the engine-owner thread answers about its state, built from the typed views in
//! `crate::status` for the server: status (with the limits), config, explain report, dropout cards,
//! stall setting and idle states; runs on the engine-owner thread.

use super::Owner;
use crate::api::{max_sines, ApiError};
use crate::status::{
    to_json, ConfigView, EngineStatus, ExplainOn, ExplainStatus, ExplainView, FaultView, FreqView,
    IdleView, PowerView, RecentDropout, Status, StatusLimits,
};
use crate::trace::SECONDS_RANGE;
use serde_json::{Map, Value};
use std::path::Path;
use xrunlab_engine::config::Limits;

/// Culprits listed by `GET /api/explain`.
const TOP_CULPRITS: usize = 10;
/// Latest dropouts listed by `GET /api/explain` (all kept ones are fetchable by id).
const RECENT_DROPOUTS: usize = 20;

impl Owner {
    pub(super) fn explain_view(&self) -> Value {
        let Some(e) = self.explain.as_ref() else {
            return to_json(&ExplainView {
                enabled: false,
                on: None,
            });
        };
        let base = self.agg.base_ns();
        let recent = e
            .dropouts()
            .rev()
            .take(RECENT_DROPOUTS)
            .map(|d| RecentDropout {
                epoch: d.epoch,
                seq: d.seq,
                t_ms: d.period_start_ns.saturating_sub(base) as f64 / 1e6,
                kind: &d.kind,
                late_by_us: d.late_by_us,
                verdict: d.verdict(),
                cause: d.blame.as_ref().map(|c| c.cause),
            })
            .collect();
        to_json(&ExplainView {
            enabled: true,
            on: Some(ExplainOn {
                report: e.report(TOP_CULPRITS),
                cpus: e.cpus(),
                recent,
            }),
        })
    }

    pub(super) fn dropout_view(&self, epoch: u32, seq: u64) -> Result<Value, ApiError> {
        let Some(e) = self.explain.as_ref() else {
            return Err(ApiError::failed(
                404,
                "no blame cards: \"Explain dropouts\" is off (PUT /api/explain {\"enabled\": true})",
            ));
        };
        match e.find(epoch, seq) {
            Some(d) => Ok(to_json(d)),
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
        self.config_view_restarted(None)
    }

    /// The config in force; `restarted` is said in a PUT's answer.
    pub(super) fn config_view_restarted(&self, restarted: Option<bool>) -> Value {
        let Some(engine) = self.engine() else {
            return Value::Object(Map::new());
        };
        to_json(&ConfigView {
            config: engine.config(),
            preset: engine.config().preset().name(),
            device: engine.device_info().kind,
            restarted,
        })
    }

    /// The cpuidle driver and, per CPU and state, its exit latency and the entries since
    /// the dashboard started (a few small sysfs reads: status is asked for, not streamed).
    pub(super) fn idle_view(&self) -> IdleView {
        let now = xrunlab_sys::idle_states(Path::new(xrunlab_sys::DEFAULT_SYS_ROOT));
        IdleView {
            driver: self.idle_driver.clone(),
            states: xrunlab_sys::idle_usage_delta(&self.idle_at_start, &now),
            note: if now.is_empty() {
                "no cpuidle states on this machine"
            } else {
                "entries since the dashboard started"
            },
        }
    }

    pub(super) fn fault_view(&self) -> FaultView {
        match self.fault {
            Some(f) => FaultView {
                stall_ms: f.stall.as_secs_f64() * 1e3,
                every_ms: Some(f.every.as_secs_f64() * 1e3),
            },
            None => FaultView {
                stall_ms: 0.0,
                every_ms: None,
            },
        }
    }

    pub(super) fn status(&self) -> Value {
        let engine = self.engine().map(|engine| {
            let config = engine.config();
            let chord = engine.chord_info();
            let sines_max = max_sines(config);
            EngineStatus {
                device: engine.device_info(),
                config,
                preset: config.preset().name(),
                threads: engine.threads(),
                process_rt: engine.process_rt(),
                busy_threads: engine.busy_threads(),
                server_load_pct: engine.signals().server_load(),
                limits: StatusLimits {
                    sines_max,
                    sines_apl_max: chord.apl_max_sines,
                    sines: (0, sines_max),
                    priority_default: xrunlab_engine::RtConfig::default().priority,
                    trace_seconds: (*SECONDS_RANGE.start(), *SECONDS_RANGE.end()),
                    engine: Limits::get(),
                },
                chord,
            }
        });
        to_json(&Status {
            audio: if engine.is_some() {
                "running"
            } else {
                "stopped: no engine (a device switch failed; pick a device to start one)"
            },
            devices: &self.kinds,
            counts: self.agg.counts(),
            power: PowerView {
                source: &self.power_source,
                estimated: self.power_source.starts_with("estimate"),
                last: self.last_power,
            },
            cpus: &self.cpus,
            topology: &self.topology,
            idle: self.idle_view(),
            freq: FreqView {
                available: self.freq_available,
                note: if self.freq_available {
                    "scaling_cur_freq from cpufreq"
                } else {
                    "not available on this machine (no cpufreq)"
                },
            },
            fault: self.fault_view(),
            explain: ExplainStatus {
                enabled: self.explain.is_some(),
                available: self.explain.as_ref().map(|e| e.unavailable().is_none()),
                unavailable: self.explain.as_ref().and_then(|e| e.unavailable()),
            },
            config_version: self.config_version,
            last_error: self.last_error.as_deref(),
            engine,
        })
    }
}
