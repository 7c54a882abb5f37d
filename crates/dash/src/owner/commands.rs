//! The engine-owner thread's handling of the server's commands: config changes (applied live, by a
//! restart or by a device switch), bursts, stall injection, "Explain dropouts" and trace snapshots;
//! runs on the engine-owner thread.

use super::{Command, Owner};
use crate::api::{merge_config, ApiError};
use crate::status::{to_json, BurstView};
use crate::trace::TraceSnapshot;
use crate::{DeviceFactory, FactoryError, Fault};
use serde_json::Value;
use std::time::Duration;
use xrunlab_engine::config::{limit, Limit};
use xrunlab_engine::rt::clock::now_ns;
use xrunlab_engine::{Engine, EngineConfig, EngineError};

impl Owner {
    fn put_explain(&mut self, body: &Value) -> Result<Value, ApiError> {
        let on = match body.get("enabled") {
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                return Err(ApiError::invalid(
                    "enabled",
                    other.to_string(),
                    "true or false",
                ))
            }
            None => {
                return Err(ApiError::bad_request(
                    "the body must be a JSON object: {\"enabled\": true}",
                ))
            }
        };
        self.set_explain(on);
        Ok(self.explain_view())
    }

    /// What the trace of the last `seconds` is built from: the kept buffers (drained just
    /// now), the explain collector's dropouts and the kernel events still in its tracer's window.
    fn trace_snapshot(&mut self, seconds: u64) -> TraceSnapshot {
        self.drain();
        let to_ns = now_ns();
        let from_ns = to_ns.saturating_sub(seconds * 1_000_000_000);
        let (buffers, threads) = self.history.since(from_ns);
        let dropouts = self.explain.as_ref().map(|e| {
            e.dropouts()
                .filter(|d| d.period_start_ns >= from_ns)
                .cloned()
                .collect()
        });
        let kernel = match self.explain.as_ref() {
            None => Err("no kernel events: \"Explain dropouts\" is off".to_owned()),
            Some(e) => match e.tracer() {
                Some(t) => Ok((t.snapshot(from_ns, to_ns), e.cpus().to_vec())),
                None => Err(format!(
                    "no kernel events: {}",
                    e.unavailable().unwrap_or("kernel tracing stopped")
                )),
            },
        };
        TraceSnapshot {
            seconds,
            from_ns,
            to_ns,
            buffers,
            threads,
            dropouts,
            kernel,
            counters: self.history.counters_since(
                from_ns,
                self.explain.as_ref().and_then(|e| e.traces_cpu_frequency()),
            ),
        }
    }

    pub(super) fn handle(&mut self, cmd: Command) {
        match cmd {
            Command::GetConfig(reply) => {
                let _ = reply.send(self.config_view());
            }
            Command::PutConfig(body, reply) => {
                let result = self.put_config(&body);
                if let Err(e) = &result {
                    self.last_error = Some(e.error.clone());
                    self.config_version += 1;
                }
                let _ = reply.send(result);
            }
            Command::Burst(reply) => {
                if let Some(engine) = self.engine() {
                    engine.trigger_burst();
                }
                let burst_sines = self.engine().map_or(0, |e| e.config().burst_sines);
                let _ = reply.send(to_json(&BurstView {
                    burst_sines,
                    seconds: xrunlab_engine::BURST_SECONDS,
                }));
            }
            Command::Status(reply) => {
                self.refresh_counts();
                let _ = reply.send(self.status());
            }
            Command::Fault(body, reply) => {
                let result = self.put_fault(&body);
                self.config_version += u64::from(result.is_ok());
                let _ = reply.send(result);
            }
            Command::GetExplain(reply) => {
                let _ = reply.send(self.explain_view());
            }
            Command::PutExplain(body, reply) => {
                let result = self.put_explain(&body);
                self.config_version += u64::from(result.is_ok());
                let _ = reply.send(result);
            }
            Command::Dropout(epoch, seq, reply) => {
                let _ = reply.send(self.dropout_view(epoch, seq));
            }
            Command::Trace(seconds, reply) => {
                let _ = reply.send(self.trace_snapshot(seconds));
            }
            Command::Stop => {}
        }
    }

    fn put_config(&mut self, body: &Value) -> Result<Value, ApiError> {
        let engine = self
            .engine()
            .ok_or_else(|| ApiError::failed(503, "no engine is running"))?;
        let request = merge_config(engine.config(), body)?;
        let current_kind = engine.device_info().kind;
        // A device reads "input" when it is made (the simulated one generates its test tone
        // then), so toggling input makes the device anew, like a device switch.
        let input_changed = request.config.input != engine.config().input;
        let target = request
            .device
            .filter(|k| *k != current_kind)
            .or_else(|| input_changed.then(|| current_kind.clone()));
        let restarted = match target {
            Some(kind) => {
                self.switch_device(&kind, request.config)?;
                true
            }
            None => {
                let (agg, history) = (&mut self.agg, &mut self.history);
                let applied = self
                    .collector
                    .apply(request.config, |b| {
                        agg.add(b);
                        history.push(b);
                    })
                    .map_err(|e| match e {
                        EngineError::Config(c) => ApiError::from_config(c),
                        other => ApiError::failed(
                            503,
                            format!("the engine could not apply the config: {other}"),
                        ),
                    })?;
                applied.restarted
            }
        };
        self.last_error = None;
        self.engine_changed();
        Ok(self.config_view_restarted(Some(restarted)))
    }

    /// Stops the engine, starts one on a `kind` device; on failure goes back to the old device
    /// and config. Only when that fails too is the dashboard left without an engine.
    fn switch_device(&mut self, kind: &str, config: EngineConfig) -> Result<(), ApiError> {
        if !self.kinds.iter().any(|k| k == kind) {
            return Err(ApiError::invalid(
                "device",
                format!("{kind:?}"),
                format!("one of {:?}", self.kinds),
            ));
        }
        let Some(old) = self.engine() else {
            return Err(ApiError::failed(503, "no engine is running"));
        };
        let (old_kind, old_config) = (old.device_info().kind, old.config().clone());
        // The old engine stops before the new one starts (one JACK server per process); its
        // counts stay in the collector's totals.
        let (agg, history) = (&mut self.agg, &mut self.history);
        self.collector.stop(|b| {
            agg.add(b);
            history.push(b);
        });
        let start = |factory: &DeviceFactory, kind: &str, config: EngineConfig| {
            let device = factory(kind, &config)?;
            Engine::start(config, device).map_err(SwitchError::Engine)
        };
        match start(&self.factory, kind, config) {
            // Stopped above: no buffers are left to collect from an engine before it.
            Ok(engine) => {
                self.collector.set_engine(engine, |_| {});
                Ok(())
            }
            Err(why) => match start(&self.factory, &old_kind, old_config) {
                Ok(engine) => {
                    self.collector.set_engine(engine, |_| {});
                    self.engine_changed();
                    Err(ApiError::failed(
                        503,
                        format!("could not switch to the {kind} device: {why}; still on the {old_kind} device"),
                    ))
                }
                Err(back) => {
                    self.engine_changed();
                    Err(ApiError::failed(
                        503,
                        format!("could not switch to the {kind} device ({why}) nor go back to {old_kind} ({back})"),
                    ))
                }
            },
        }
    }

    fn put_fault(&mut self, body: &Value) -> Result<Value, ApiError> {
        let field = |name: &str, range: Limit<f64>, default: f64| -> Result<f64, ApiError> {
            match body.get(name) {
                None => Ok(default),
                Some(v) => v
                    .as_f64()
                    .filter(|x| range.contains(*x))
                    .ok_or_else(|| ApiError::invalid(name, v.to_string(), range.to_string())),
            }
        };
        if !body.is_object() {
            return Err(ApiError::bad_request(
                "the body must be a JSON object: {\"stall_ms\": 4, \"every_ms\": 500}",
            ));
        }
        let current = self.fault.unwrap_or(Fault {
            stall: Duration::ZERO,
            every: Duration::from_millis(500),
        });
        let stall_ms = field(
            "stall_ms",
            limit::STALL_MS,
            current.stall.as_secs_f64() * 1e3,
        )?;
        let every_ms = field(
            "every_ms",
            limit::STALL_EVERY_MS,
            current.every.as_secs_f64() * 1e3,
        )?;
        let fault = Fault {
            stall: Duration::from_secs_f64(stall_ms / 1e3),
            every: Duration::from_secs_f64(every_ms / 1e3),
        };
        self.set_fault((!fault.stall.is_zero()).then_some(fault));
        Ok(to_json(&self.fault_view()))
    }
}

/// Why a device switch could not start an engine: no device, or an engine that did not start
/// on it. Said in the page's error message.
#[derive(Debug, thiserror::Error)]
enum SwitchError {
    #[error(transparent)]
    Device(#[from] FactoryError),
    #[error(transparent)]
    Engine(EngineError),
}
