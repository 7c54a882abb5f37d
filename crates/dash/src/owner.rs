//! The engine-owner thread: the one std thread that holds the `Engine`, drains its rings every 10 ms, publishes telemetry frames at display rate, samples power and frequencies, and carries out commands (config, burst, device switch, fault injection) sent by the server.
//!
//! Nothing here waits for a page: frames go out through a `tokio::sync::broadcast` channel,
//! whose send never blocks; a page that reads too slowly loses frames (counted) instead of
//! slowing this thread, and this thread never blocks the audio threads (it only drains
//! wait-free rings and sets atomics).

use crate::api::{max_sines, merge_config, ApiError};
use crate::telemetry::{Aggregator, FrameExtras};
use crate::trace::{History, TraceSnapshot};
use crate::{DeviceFactory, Fault};
use axum::extract::ws::Utf8Bytes;
use serde_json::{json, Value};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};
use tokio::sync::{broadcast, oneshot};
use xrunlab_engine::config::{
    BUFFER_FRAMES_RANGE, BUSY_COUNT_RANGE, BUSY_PERIOD_MS_RANGE, CHORDS_RANGE, CHUNK_SIZE_RANGE,
    DRIVER_SPIN_US_RANGE, SAMPLE_RATE_RANGE, THREADS_RANGE,
};
use xrunlab_engine::explain::{audio_cpus, ExplainOptions, Explainer};
use xrunlab_engine::rt::clock::now_ns;
use xrunlab_engine::{Engine, EngineConfig, EngineError};
use xrunlab_sys::{cpu_infos, read_cur_freqs_khz, CpuInfo, PowerMeter, PowerSample};

/// How often the rings are drained: well inside their ~10 s capacity, and often enough that
/// a frame carries fresh buffers.
const DRAIN_EVERY: Duration = Duration::from_millis(10);
/// Display rate of telemetry frames (~30 per second).
const FRAME_EVERY: Duration = Duration::from_micros(33_333);
/// Power is averaged over this interval: shorter makes the CPU-time estimate jumpy.
const POWER_EVERY: Duration = Duration::from_millis(250);
/// cpufreq is re-read at this interval; frequencies change slower than frames.
const FREQ_EVERY: Duration = Duration::from_millis(500);
/// Longest wait for a restarted engine's threads to register.
const THREADS_WAIT: Duration = Duration::from_millis(500);
/// Allowed fault injection: a stall longer than a second only freezes the page.
const STALL_MS_RANGE: (f64, f64) = (0.0, 1000.0);
const STALL_EVERY_MS_RANGE: (f64, f64) = (10.0, 60_000.0);

/// Culprits listed by `GET /api/explain`.
const TOP_CULPRITS: usize = 10;
/// Latest dropouts listed by `GET /api/explain` (all kept ones are fetchable by id).
const RECENT_DROPOUTS: usize = 20;

/// A reply channel to the server task that asked.
pub(crate) type Reply<T> = oneshot::Sender<T>;

/// What the server asks of the engine-owner thread.
pub(crate) enum Command {
    /// GET /api/config.
    GetConfig(Reply<Value>),
    /// PUT /api/config with the request body.
    PutConfig(Value, Reply<Result<Value, ApiError>>),
    /// POST /api/burst.
    Burst(Reply<Value>),
    /// GET /api/status.
    Status(Reply<Value>),
    /// PUT /api/fault with the request body.
    Fault(Value, Reply<Result<Value, ApiError>>),
    /// GET /api/explain.
    GetExplain(Reply<Value>),
    /// PUT /api/explain with the request body.
    PutExplain(Value, Reply<Result<Value, ApiError>>),
    /// GET /api/dropouts/{epoch}/{seq}.
    Dropout(u32, u64, Reply<Result<Value, ApiError>>),
    /// GET /api/trace?seconds=N (N already checked): what the trace of the last N s is built from.
    Trace(u64, Reply<TraceSnapshot>),
    /// Stop the engine and end the thread.
    Stop,
}

/// Why the owner thread ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Exit {
    /// Asked to stop, or the server went away.
    Stopped,
    /// The device failed (server gone, write failed); the reason says what to do.
    DeviceFailed(String),
    /// The device ended on its own without an error (a finite device ran out).
    DeviceEnded(String),
}

/// State shared with the server's tasks.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    /// Frames pages did not get because they read too slowly.
    pub frames_dropped: AtomicU64,
}

struct Owner {
    engine: Option<Engine>,
    factory: DeviceFactory,
    kinds: Vec<String>,
    agg: Aggregator,
    frames: broadcast::Sender<Utf8Bytes>,
    shared: Arc<Shared>,
    power: PowerMeter,
    power_source: String,
    last_power: Option<PowerSample>,
    fresh_power: Option<PowerSample>,
    cpus: Vec<CpuInfo>,
    /// Where each CPU sits (SMT siblings, package, cluster, core type), read once.
    topology: Vec<xrunlab_sys::CpuTopology>,
    /// The cpuidle driver and each state at start, so status can count entries since.
    idle_driver: Option<String>,
    idle_at_start: Vec<xrunlab_sys::IdleState>,
    cpu_ids: Vec<usize>,
    freq_available: bool,
    freqs: Vec<Option<u64>>,
    fresh_freqs: bool,
    config_version: u64,
    fault: Option<Fault>,
    next_stall: Instant,
    last_error: Option<String>,
    /// Counts of engines replaced by a device switch, so totals keep running.
    before: Before,
    /// Blame cards for dropouts, while "Explain dropouts" is on.
    explain: Option<Explainer>,
    /// The last buffers, for `GET /api/trace` (bounded; see `trace`).
    history: History,
}

#[derive(Default)]
struct Before {
    ring_drops: u64,
    skipped: u64,
    xruns: u64,
    starts: u64,
}

/// What the page can change later, as the command line set it.
pub(crate) struct Initial {
    /// Stalls to inject from the start.
    pub fault: Option<Fault>,
    /// "Explain dropouts" on from the start.
    pub explain: bool,
}

/// Starts the owner thread with `engine`; returns the command channel and the thread.
/// `done` is dropped when the thread ends.
pub(crate) fn spawn(
    engine: Engine,
    factory: DeviceFactory,
    kinds: Vec<String>,
    initial: Initial,
    frames: broadcast::Sender<Utf8Bytes>,
    shared: Arc<Shared>,
    done: oneshot::Sender<()>,
) -> std::io::Result<(mpsc::Sender<Command>, std::thread::JoinHandle<Exit>)> {
    let Initial { fault, explain } = initial;
    let (tx, rx) = mpsc::channel();
    let handle = std::thread::Builder::new()
        .name("xrl-dash-engine".into())
        .spawn(move || {
            // Dropped when this thread ends, however it ends: that is the server's signal.
            let _done = done;
            let sys = Path::new(xrunlab_sys::DEFAULT_SYS_ROOT);
            let power = PowerMeter::new(sys, Path::new(xrunlab_sys::DEFAULT_PROC_ROOT));
            let cpus = cpu_infos(sys);
            let topology = xrunlab_sys::cpu_topology(sys);
            let idle_driver = xrunlab_sys::cpuidle::idle_driver(sys);
            let idle_at_start = xrunlab_sys::idle_states(sys);
            let cpu_ids: Vec<usize> = cpus.iter().map(|c| c.id).collect();
            let freq_available = cpus.iter().any(|c| c.cur_freq_khz.is_some());
            let mut owner = Owner {
                agg: Aggregator::new(now_ns()),
                engine: Some(engine),
                factory,
                kinds,
                frames,
                shared,
                power_source: power.source(),
                power,
                last_power: None,
                fresh_power: None,
                cpus,
                topology,
                idle_driver,
                idle_at_start,
                cpu_ids,
                freq_available,
                freqs: Vec::new(),
                fresh_freqs: false,
                config_version: 1,
                fault,
                next_stall: Instant::now(),
                last_error: None,
                before: Before::default(),
                explain: None,
                history: History::default(),
            };
            if explain {
                owner.set_explain(true);
            }
            owner.engine_changed();
            owner.run(rx)
        })?;
    Ok((tx, handle))
}

/// The next time on an absolute schedule; after a long stall it resumes from now instead of
/// catching up with a burst of work.
fn advance(at: Instant, every: Duration, now: Instant) -> Instant {
    let next = at + every;
    if next < now {
        now + every
    } else {
        next
    }
}

impl Owner {
    fn run(mut self, rx: mpsc::Receiver<Command>) -> Exit {
        let start = Instant::now();
        let (mut next_drain, mut next_frame) = (start, start + FRAME_EVERY);
        let (mut next_power, mut next_freq) = (start, start);
        let exit = loop {
            let wait = next_drain
                .min(next_frame)
                .saturating_duration_since(Instant::now());
            match rx.recv_timeout(wait) {
                Ok(Command::Stop) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                    break Exit::Stopped
                }
                Ok(cmd) => self.handle(cmd),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
            let now = Instant::now();
            if now >= next_drain {
                next_drain = advance(next_drain, DRAIN_EVERY, now);
                self.drain();
                self.inject_fault(now);
                if let Some(exit) = self.device_exit() {
                    break exit;
                }
            }
            if now >= next_power {
                next_power = advance(next_power, POWER_EVERY, now);
                if let Some(s) = self.power.sample() {
                    self.last_power = Some(s);
                    self.fresh_power = Some(s);
                }
            }
            if self.freq_available && now >= next_freq {
                next_freq = advance(next_freq, FREQ_EVERY, now);
                read_cur_freqs_khz(
                    Path::new(xrunlab_sys::DEFAULT_SYS_ROOT),
                    &self.cpu_ids,
                    &mut self.freqs,
                );
                self.fresh_freqs = true;
            }
            if now >= next_frame {
                next_frame = advance(next_frame, FRAME_EVERY, now);
                self.publish();
            }
        };
        if let Some(engine) = self.engine.take() {
            let agg = &mut self.agg;
            engine.stop(|b| agg.add(b));
        }
        exit
    }

    fn drain(&mut self) {
        if let Some(engine) = self.engine.as_mut() {
            let (agg, explain, history) = (&mut self.agg, &mut self.explain, &mut self.history);
            engine.drain(|b| {
                agg.add(b);
                history.push(b);
                if let Some(e) = explain.as_mut() {
                    e.observe(b);
                }
            });
        }
        if let Some(e) = self.explain.as_mut() {
            // The cards stay in the explainer (bounded); pages fetch them by id.
            e.build_due(false);
        }
    }

    /// Turns "Explain dropouts" on (starting the kernel tracer on the audio CPUs, on this
    /// non-real-time thread) or off (stopping it; the cards go with it).
    fn set_explain(&mut self, on: bool) {
        match (on, self.explain.is_some()) {
            (true, false) => {
                let cpus = self
                    .engine
                    .as_ref()
                    .map(|e| audio_cpus(e.config()))
                    .unwrap_or_default();
                let mut e = Explainer::start(&cpus, ExplainOptions::default());
                if let Some(engine) = self.engine.as_ref() {
                    e.set_threads(&engine.threads());
                }
                self.explain = Some(e);
            }
            (false, true) => {
                if let Some(mut e) = self.explain.take() {
                    e.finish();
                }
            }
            _ => {}
        }
    }

    fn explain_view(&self) -> Value {
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

    fn dropout_view(&self, epoch: u32, seq: u64) -> Result<Value, ApiError> {
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

    fn inject_fault(&mut self, now: Instant) {
        let (Some(fault), Some(engine)) = (self.fault, self.engine.as_ref()) else {
            return;
        };
        if fault.stall.is_zero() || now < self.next_stall {
            return;
        }
        engine.inject_stall(u64::try_from(fault.stall.as_nanos()).unwrap_or(u64::MAX));
        self.next_stall = advance(self.next_stall, fault.every, now);
    }

    fn device_exit(&self) -> Option<Exit> {
        let engine = self.engine.as_ref()?;
        let reason = engine.device_ended()?;
        Some(if engine.signals().failed() {
            Exit::DeviceFailed(reason)
        } else {
            Exit::DeviceEnded(reason)
        })
    }

    fn refresh_counts(&mut self) {
        let Some(engine) = self.engine.as_ref() else {
            return;
        };
        let s = engine.signals();
        let (drops, skipped, xruns, starts) = (
            self.before.ring_drops + engine.ring_drops(),
            self.before.skipped + s.skipped_periods(),
            self.before.xruns + s.xruns(),
            self.before.starts + u64::from(engine.audio_starts()),
        );
        let dropped = self.shared.frames_dropped.load(Ordering::Relaxed);
        let c = self.agg.counts_mut();
        c.ring_drops = drops;
        c.skipped_periods = skipped;
        c.device_xruns = xruns;
        c.audio_starts = starts;
        c.frames_dropped = dropped;
    }

    fn publish(&mut self) {
        self.refresh_counts();
        let extras = FrameExtras {
            now_ns: now_ns(),
            config_version: self.config_version,
            power: self.fresh_power.take(),
            freq_khz: std::mem::take(&mut self.fresh_freqs)
                .then(|| self.freqs.iter().map(|f| f.unwrap_or(0)).collect()),
            sines_now: None,
        };
        let text = self.agg.take_frame(&extras);
        // No receiver (no page open) is not an error: the frame is simply not needed.
        let _ = self.frames.send(Utf8Bytes::from(text));
    }

    /// After a start, restart or switch: pages re-read the status, frames size their thread slots.
    fn engine_changed(&mut self) {
        self.config_version += 1;
        if let Some(engine) = self.engine.as_ref() {
            let want = engine.config().realtime_threads();
            let cpus = audio_cpus(engine.config());
            // The driver thread registers itself when the device first runs it, shortly after
            // a (re)start; waiting for it means the reply and the next status list every thread
            // with its scheduling outcome. The rings hold seconds, so this short wait loses nothing.
            let until = Instant::now() + THREADS_WAIT;
            while engine.threads().len() < want && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(2));
            }
            self.agg.set_thread_slots(want);
            let threads = engine.threads();
            // The old engine's buffers are all drained by now: later ones are these threads'.
            self.history.set_threads(
                self.history.newest_ns().map_or(0, |t| t + 1),
                threads.clone(),
            );
            if let Some(e) = self.explain.as_mut() {
                if e.unavailable().is_none() && e.cpus() != cpus.as_slice() {
                    // The audio threads may now run elsewhere: trace those CPUs instead.
                    self.set_explain(false);
                    self.set_explain(true);
                } else {
                    e.set_threads(&threads);
                }
            }
        }
    }

    fn handle(&mut self, cmd: Command) {
        match cmd {
            Command::GetConfig(reply) => {
                let _ = reply.send(self.config_view());
            }
            Command::PutConfig(body, reply) => {
                let result = self.put_config(&body);
                if let Err(e) = &result {
                    self.last_error = Some(e.error.clone());
                }
                let _ = reply.send(result);
            }
            Command::Burst(reply) => {
                if let Some(engine) = self.engine.as_ref() {
                    engine.trigger_burst();
                }
                let burst = self.engine.as_ref().map_or(0, |e| e.config().burst_sines);
                let _ = reply.send(json!({ "burst_sines": burst, "seconds": 0.25 }));
            }
            Command::Status(reply) => {
                self.refresh_counts();
                let _ = reply.send(self.status());
            }
            Command::Fault(body, reply) => {
                let _ = reply.send(self.put_fault(&body));
            }
            Command::GetExplain(reply) => {
                let _ = reply.send(self.explain_view());
            }
            Command::PutExplain(body, reply) => {
                let _ = reply.send(self.put_explain(&body));
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

    fn config_view(&self) -> Value {
        let Some(engine) = self.engine.as_ref() else {
            return json!({});
        };
        let mut v = serde_json::to_value(engine.config()).unwrap_or_else(|_| json!({}));
        if let Value::Object(m) = &mut v {
            m.insert("preset".into(), json!(engine.config().preset().name()));
            m.insert("device".into(), json!(engine.device_info().kind));
        }
        v
    }

    fn put_config(&mut self, body: &Value) -> Result<Value, ApiError> {
        let engine = self
            .engine
            .as_mut()
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
                let applied = engine
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
        let mut v = self.config_view();
        if let Value::Object(m) = &mut v {
            m.insert("restarted".into(), json!(restarted));
        }
        Ok(v)
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
        let Some(old) = self.engine.take() else {
            return Err(ApiError::failed(503, "no engine is running"));
        };
        let (old_kind, old_config) = (old.device_info().kind, old.config().clone());
        let s = old.signals();
        self.before.ring_drops += old.ring_drops();
        self.before.skipped += s.skipped_periods();
        self.before.xruns += s.xruns();
        self.before.starts += u64::from(old.audio_starts());
        let (agg, history) = (&mut self.agg, &mut self.history);
        old.stop(|b| {
            agg.add(b);
            history.push(b);
        });
        let start = |factory: &DeviceFactory, kind: &str, config: EngineConfig| {
            let device = factory(kind, &config)?;
            Engine::start(config, device).map_err(|e| e.to_string())
        };
        match start(&self.factory, kind, config) {
            Ok(engine) => {
                self.engine = Some(engine);
                Ok(())
            }
            Err(why) => match start(&self.factory, &old_kind, old_config) {
                Ok(engine) => {
                    self.engine = Some(engine);
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
        let field = |name: &str, (lo, hi): (f64, f64), default: f64| -> Result<f64, ApiError> {
            match body.get(name) {
                None => Ok(default),
                Some(v) => v
                    .as_f64()
                    .filter(|x| x.is_finite() && (lo..=hi).contains(x))
                    .ok_or_else(|| {
                        ApiError::invalid(name, v.to_string(), format!("{lo}..={hi} ms"))
                    }),
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
            STALL_MS_RANGE,
            current.stall.as_secs_f64() * 1e3,
        )?;
        let every_ms = field(
            "every_ms",
            STALL_EVERY_MS_RANGE,
            current.every.as_secs_f64() * 1e3,
        )?;
        let fault = Fault {
            stall: Duration::from_secs_f64(stall_ms / 1e3),
            every: Duration::from_secs_f64(every_ms / 1e3),
        };
        self.fault = (!fault.stall.is_zero()).then_some(fault);
        self.next_stall = Instant::now();
        Ok(self.fault_view())
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

    fn fault_view(&self) -> Value {
        match self.fault {
            Some(f) => {
                json!({ "stall_ms": f.stall.as_secs_f64() * 1e3, "every_ms": f.every.as_secs_f64() * 1e3 })
            }
            None => json!({ "stall_ms": 0, "every_ms": null }),
        }
    }

    fn status(&self) -> Value {
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
        let Some(engine) = self.engine.as_ref() else {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advance_keeps_an_absolute_schedule_and_skips_after_stalls() {
        let t0 = Instant::now();
        let p = Duration::from_millis(10);
        assert_eq!(advance(t0, p, t0 + Duration::from_millis(3)), t0 + p);
        let late = t0 + Duration::from_millis(95);
        assert_eq!(advance(t0, p, late), late + p);
    }
}
