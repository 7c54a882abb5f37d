//! The engine-owner thread: the one std thread that holds the engine (in its `RunCollector`),
//! drains its rings every 10 ms, publishes telemetry frames at display rate, samples power and
//! frequencies, and carries out commands (config, burst, device switch, fault injection) sent by
//! the server.
//!
//! Nothing here waits for a page: frames go out through a `tokio::sync::broadcast` channel,
//! whose send never blocks; a page that reads too slowly loses frames (counted) instead of
//! slowing this thread, and this thread never blocks the audio threads (it only drains
//! wait-free rings and sets atomics).

//!
//! This file spawns the thread and runs its loop; `commands` carries out what the server
//! asks, `views` builds the JSON the server answers with.

mod commands;
mod views;

use crate::api::ApiError;
use crate::telemetry::{Aggregator, FrameExtras};
use crate::trace::{History, TraceSnapshot};
use crate::{DeviceFactory, Fault};
use axum::extract::ws::Utf8Bytes;
use serde_json::Value;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};
use tokio::sync::{broadcast, oneshot};
use xrunlab_engine::collector::advance;
use xrunlab_engine::explain::{audio_cpus, ExplainOptions, Explainer};
use xrunlab_engine::rt::clock::now_ns;
use xrunlab_engine::{Engine, Injection, InjectionKind, Repeat, RunCollector};
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
/// Idle-state entries are re-counted at this interval (a few sysfs reads per CPU and state).
const IDLE_EVERY: Duration = Duration::from_secs(5);
/// Longest wait for a restarted engine's threads to register.
const THREADS_WAIT: Duration = Duration::from_millis(500);

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
    /// The engine, its totals over restarts and device switches, and the stall schedule.
    collector: RunCollector,
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
    /// Idle-state entries on all CPUs since start, when re-counted since the last frame.
    fresh_idle_entries: Option<u64>,
    /// Bumped on every change the status shows that frames do not carry (config, device,
    /// threads, fault, explain, a refusal), so pages re-read the status only then.
    config_version: u64,
    /// The stalls as the page (or the command line) set them; the collector's schedule
    /// carries them out (see `set_fault`).
    fault: Option<Fault>,
    last_error: Option<String>,
    /// Blame cards for dropouts, while "Explain dropouts" is on.
    explain: Option<Explainer>,
    /// Record the events no card uses too (`--explain-all`).
    explain_all: bool,
    /// The last buffers, for `GET /api/trace` (bounded; see `trace`).
    history: History,
}

/// What the page can change later, as the command line set it.
pub(crate) struct Initial {
    /// Stalls to inject from the start.
    pub fault: Option<Fault>,
    /// "Explain dropouts" on from the start.
    pub explain: bool,
    /// Also record the events no card uses (hrtimer expiry, idle states) when explaining.
    pub explain_all: bool,
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
) -> std::io::Result<(mpsc::SyncSender<Command>, std::thread::JoinHandle<Exit>)> {
    let Initial {
        fault,
        explain,
        explain_all,
    } = initial;
    // Bounded: the server answers 503 when it is full rather than queueing without limit.
    let (tx, rx) = mpsc::sync_channel(crate::server::COMMAND_QUEUE);
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
                collector: RunCollector::new(engine),
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
                fresh_idle_entries: None,
                config_version: 1,
                fault: None,
                last_error: None,
                explain: None,
                explain_all,
                history: History::default(),
            };
            owner.set_fault(fault);
            if explain {
                owner.set_explain(true);
            }
            owner.engine_changed();
            owner.run(rx)
        })?;
    Ok((tx, handle))
}

impl Owner {
    /// The engine, while one runs (a failed device switch can leave none).
    fn engine(&self) -> Option<&Engine> {
        self.collector.engine()
    }

    fn run(mut self, rx: mpsc::Receiver<Command>) -> Exit {
        let start = Instant::now();
        let (mut next_drain, mut next_frame) = (start, start + FRAME_EVERY);
        let (mut next_power, mut next_freq) = (start, start);
        let mut next_idle = start + IDLE_EVERY;
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
                self.collector.inject_due(now);
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
            if now >= next_idle {
                next_idle = advance(next_idle, IDLE_EVERY, now);
                let states = self.idle_view().states;
                self.fresh_idle_entries = Some(states.iter().map(|s| s.entries).sum());
            }
            if now >= next_frame {
                next_frame = advance(next_frame, FRAME_EVERY, now);
                self.publish();
            }
        };
        let agg = &mut self.agg;
        self.collector.stop(|b| agg.add(b));
        exit
    }

    fn drain(&mut self) {
        let (agg, explain, history) = (&mut self.agg, &mut self.explain, &mut self.history);
        self.collector.drain(|b| {
            agg.add(b);
            history.push(b);
            if let Some(e) = explain.as_mut() {
                e.observe(b);
            }
        });
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
                    .engine()
                    .map(|e| audio_cpus(e.config()))
                    .unwrap_or_default();
                let mut options = ExplainOptions::default();
                options.trace.extra_events = self.explain_all;
                let mut e = Explainer::start(&cpus, options);
                if let Some(engine) = self.engine() {
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

    /// Sets the stalls as the page sees them and has the collector inject them, the first one
    /// now (none while the stall is zero).
    fn set_fault(&mut self, fault: Option<Fault>) {
        self.fault = fault;
        let schedule = self.collector.schedule_mut();
        match fault.filter(|f| !f.stall.is_zero()) {
            Some(f) => schedule.set(
                Repeat {
                    injection: Injection::Stall(f.stall),
                    every: f.every,
                },
                Instant::now(),
            ),
            None => schedule.cancel(InjectionKind::Stall),
        }
    }

    fn device_exit(&self) -> Option<Exit> {
        let engine = self.engine()?;
        let reason = engine.device_ended()?;
        Some(if engine.signals().failed() {
            Exit::DeviceFailed(reason)
        } else {
            Exit::DeviceEnded(reason)
        })
    }

    /// Copies the collector's totals (over every engine the dashboard ran) into the counts
    /// frames and status carry.
    fn refresh_counts(&mut self) {
        let run = self.collector.totals();
        let dropped = self.shared.frames_dropped.load(Ordering::Relaxed);
        let c = self.agg.counts_mut();
        c.run = run;
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
            idle_entries: self.fresh_idle_entries.take(),
        };
        let text = self.agg.take_frame(&extras);
        // No receiver (no page open) is not an error: the frame is simply not needed.
        let _ = self.frames.send(Utf8Bytes::from(text));
    }

    /// After a start, restart or switch: pages re-read the status, frames size their thread slots.
    fn engine_changed(&mut self) {
        self.config_version += 1;
        if let Some(engine) = self.collector.engine() {
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
}
