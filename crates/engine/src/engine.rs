//! The engine: builds the render cycle for a device, starts and restarts audio, applies settings,
//! and collects records; every method runs on a control thread.

use crate::busy::BusyThreads;
use crate::config::{ConfigError, EngineConfig};
use crate::device::{Device, DeviceError, DeviceInfo, DeviceSignals};
use crate::report::{BufferReport, ThreadReport, ThreadRole};
use crate::rt::controls::LiveControls;
use crate::rt::cycle::CycleShared;
use crate::rt::driver::Renderer;
use crate::rt::records::{record_ring, BufferRecord, RecordRx, ThreadRecord};
use crate::rt::worker;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use xrunlab_dsp::Chord;
use xrunlab_sys::outcome::Outcome;
use xrunlab_sys::procfs::ThreadStat;
use xrunlab_sys::sched::{self, DeadlineParams, PmQosGuard, RtRequest, ThreadSchedReport};

/// Largest buffer the render cycle supports, in frames.
pub const MAX_FRAMES: usize = crate::config::limit::BUFFER_FRAMES.max as usize;

/// How long start and restart wait for the device's driver thread to report in.
const DRIVER_REGISTRATION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

/// Why the engine could not do what was asked. Config and Device say their own message (and
/// are their own source's text); Thread keeps the operating system's error as source.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// A setting is out of range; nothing was changed.
    #[error("{0}")]
    Config(#[from] ConfigError),
    /// The device failed.
    #[error("{0}")]
    Device(#[from] DeviceError),
    /// A worker thread could not be started.
    #[error("could not start worker thread {index}: {source}")]
    Thread {
        /// The worker's index (1.., 0 is the driver).
        index: usize,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// No engine is running (a collector whose engine was stopped).
    #[error("no engine is running")]
    NotRunning,
}

/// One audio thread: who it is and what scheduling it obtained.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThreadInfo {
    /// 0 = driver, 1.. = workers.
    pub index: usize,
    /// Driver or worker.
    pub role: ThreadRole,
    /// Kernel thread id.
    pub tid: i32,
    /// What was asked and what took effect.
    pub sched: ThreadSchedReport,
    /// /proc counters when the thread started (for deltas at the end).
    #[serde(skip)]
    pub stat_at_start: Option<ThreadStat>,
}

/// Process-wide real-time settings and what took effect.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProcessRt {
    /// mlockall.
    pub mlock: Outcome,
    /// /dev/cpu_dma_latency held at 0 us.
    pub pm_qos: Outcome,
}

/// The chord in play, as reported in results and the dashboard.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChordInfo {
    /// "apl" (four notes, AudioPerfLab since October 2020) or "apl-2020" (three notes).
    pub name: String,
    /// MIDI notes.
    pub notes: Vec<u8>,
    /// Partials in one chord at the device's sample rate.
    pub partials_per_chord: usize,
    /// AudioPerfLab plays the chord once per physical core: how many times here.
    pub apl_chords: usize,
    /// AudioPerfLab's sine maximum: `apl_chords × partials_per_chord`.
    pub apl_max_sines: usize,
    /// The largest sine count accepted, xrunlab's own extra copies included.
    pub max_sines: usize,
    /// xrunlab's own copies (fresh detunes) built beyond AudioPerfLab's range.
    pub extra_copies_built: usize,
    /// How many of those the sines and burst reach into.
    pub extra_copies_in_play: usize,
}

/// What [`Engine::apply`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ConfigApplied {
    /// Audio was restarted (threads, buffer, driver mode, real-time options, or more sines than built).
    pub restarted: bool,
}

struct Audio {
    shared: Arc<CycleShared>,
    workers: Vec<JoinHandle<()>>,
    buffers: RecordRx<BufferRecord>,
    threads: Vec<RecordRx<ThreadRecord>>,
    chord: Chord,
}

/// The running engine and its device.
pub struct Engine {
    config: EngineConfig,
    device: Box<dyn Device>,
    info: DeviceInfo,
    controls: Arc<LiveControls>,
    signals: Arc<DeviceSignals>,
    busy: BusyThreads,
    threads: Arc<Mutex<Vec<ThreadInfo>>>,
    process_rt: ProcessRt,
    _pm_qos: Option<PmQosGuard>,
    audio: Option<Audio>,
    epoch: u32,
    drops_before: u64,
    /// Server xrun times not yet attributed to a buffer (none was drained since).
    pending_xruns: Vec<u64>,
}

impl Engine {
    /// Validates `config`, configures `device`, and starts audio.
    pub fn start(config: EngineConfig, mut device: Box<dyn Device>) -> Result<Engine, EngineError> {
        config.validate()?;
        let info = device.configure(config.sample_rate, config.buffer_frames)?;
        let mut config = config;
        config.sample_rate = info.sample_rate;
        config.buffer_frames = info.buffer_frames;
        let mlock = if config.rt.mlock {
            sched::lock_memory()
        } else {
            Outcome::NotRequested
        };
        let (pm_guard, pm_qos) = if config.rt.pm_qos {
            sched::hold_cpu_dma_latency(Path::new("/dev/cpu_dma_latency"), 0)
        } else {
            (None, Outcome::NotRequested)
        };
        let mut busy = BusyThreads::default();
        busy.apply(&config.busy);
        let mut engine = Engine {
            controls: Arc::new(LiveControls::new(&config)),
            config,
            device,
            info,
            signals: Arc::new(DeviceSignals::default()),
            busy,
            threads: Arc::new(Mutex::new(Vec::new())),
            process_rt: ProcessRt { mlock, pm_qos },
            _pm_qos: pm_guard,
            audio: None,
            epoch: 0,
            drops_before: 0,
            pending_xruns: Vec::new(),
        };
        engine.start_audio()?;
        Ok(engine)
    }

    fn rt_request(&self, index: usize) -> RtRequest {
        let rt = &self.config.rt;
        let period_ns = u64::from(self.info.buffer_frames) * 1_000_000_000
            / u64::from(self.info.sample_rate.max(1));
        let deadline = rt.deadline.then(|| DeadlineParams {
            runtime_ns: (period_ns as f64 * f64::from(rt.deadline_runtime_pct) / 100.0) as u64,
            deadline_ns: period_ns,
            period_ns,
        });
        let cpus = if rt.pin {
            let all: Vec<usize> = rt
                .cpus
                .clone()
                .unwrap_or_else(|| xrunlab_sys::cpu_set(xrunlab_sys::default_sys_root()));
            Some(vec![all[index % all.len()]])
        } else {
            rt.cpus.clone()
        };
        RtRequest {
            priority: rt.priority,
            policy: rt.policy,
            deadline,
            uclamp_min: self.config.work_interval.then_some(rt.uclamp_min),
            cpus,
        }
    }

    fn start_audio(&mut self) -> Result<(), EngineError> {
        let c = &self.config;
        let sines_needed = c.sines + c.burst_sines;
        let chord =
            Chord::with_capacity_for(self.info.sample_rate, c.chord_layout(), sines_needed.max(1));
        let worker_count = c.worker_threads();
        let driver_slot = match c.driver_mode {
            crate::config::DriverMode::ProcessesSines => Some(0),
            crate::config::DriverMode::WaitsForWorkers => None,
        };
        let first_worker_slot = usize::from(driver_slot.is_some());
        let shared = Arc::new(CycleShared::new(
            &chord,
            c.threads,
            MAX_FRAMES,
            c.kernel_slowdown,
        ));
        if let Ok(mut t) = self.threads.lock() {
            t.clear();
        }
        let (buf_tx, buf_rx) = record_ring::<BufferRecord>();
        let (drv_tx, drv_rx) = record_ring::<ThreadRecord>();
        let mut thread_rx = vec![drv_rx];
        let mut workers = Vec::with_capacity(worker_count);
        let (ready_tx, ready_rx) = mpsc::channel::<()>();
        for w in 0..worker_count {
            let (tx, rx) = record_ring::<ThreadRecord>();
            thread_rx.push(rx);
            let index = w + 1;
            let request = self.rt_request(index);
            let (shared, threads, ready) = (shared.clone(), self.threads.clone(), ready_tx.clone());
            let slot = first_worker_slot + w;
            // Read now, before the device starts and can publish a cycle (see worker::run).
            let generation = shared.generation.load(Ordering::Acquire);
            let handle = std::thread::Builder::new()
                .name(format!("xrl-worker-{index}"))
                .spawn(move || {
                    register_thread(&threads, index, ThreadRole::Worker, &request, true);
                    let _ = ready.send(());
                    worker::run(&shared, slot, tx, generation);
                })
                .map_err(|source| EngineError::Thread { index, source })?;
            workers.push(handle);
        }
        drop(ready_tx);
        for _ in 0..worker_count {
            let _ = ready_rx.recv();
        }
        let driver_request = self.rt_request(0);
        let threads = self.threads.clone();
        let init = Box::new(move |apply: bool| {
            register_thread(&threads, 0, ThreadRole::Driver, &driver_request, apply)
        });
        let renderer = Renderer::new(
            shared.clone(),
            self.controls.clone(),
            buf_tx,
            drv_tx,
            driver_slot,
            worker_count as u32,
            self.info.sample_rate,
            MAX_FRAMES,
            init,
        );
        let audio = Audio {
            shared,
            workers,
            buffers: buf_rx,
            threads: thread_rx,
            chord,
        };
        self.audio = Some(audio);
        if let Err(e) = self.device.start(renderer, self.signals.clone()) {
            self.stop_audio();
            return Err(e.into());
        }
        // The driver thread registers on its first period; wait for it (bounded,
        // a server may be slow to call back) so that `threads()` is complete
        // when start or apply returns.
        let expected = worker_count + 1;
        let deadline = std::time::Instant::now() + DRIVER_REGISTRATION_TIMEOUT;
        while self.threads.lock().map_or(0, |t| t.len()) < expected
            && std::time::Instant::now() < deadline
            && self.signals.ended().is_none()
        {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        Ok(())
    }

    fn stop_audio(&mut self) {
        self.device.stop();
        if let Some(audio) = self.audio.take() {
            audio.shared.stop_workers();
            for w in audio.workers {
                let _ = w.join();
            }
            self.drops_before +=
                audio.buffers.drops() + audio.threads.iter().map(|t| t.drops()).sum::<u64>();
        }
    }

    /// Applies `new`: live where possible, restarting audio where needed.
    /// Invalid settings are rejected whole; nothing is partially applied.
    pub fn apply(
        &mut self,
        new: EngineConfig,
        sink: impl FnMut(&BufferReport),
    ) -> Result<ConfigApplied, EngineError> {
        new.validate()?;
        let capacity = self.audio.as_ref().map_or(0, |a| a.shared.partials());
        let restart = self.config.needs_restart(&new) || new.sines + new.burst_sines > capacity;
        self.busy.apply(&new.busy);
        if !restart {
            self.controls.set_from(&new);
            self.config = new;
            return Ok(ConfigApplied { restarted: false });
        }
        self.drain(sink);
        self.stop_audio();
        let old = std::mem::replace(&mut self.config, new);
        match self
            .device
            .configure(self.config.sample_rate, self.config.buffer_frames)
        {
            Ok(info) => self.info = info,
            Err(e) => {
                self.config = old;
                self.start_audio()?;
                return Err(e.into());
            }
        }
        self.config.sample_rate = self.info.sample_rate;
        self.config.buffer_frames = self.info.buffer_frames;
        self.controls.set_from(&self.config);
        self.epoch += 1;
        self.start_audio()?;
        Ok(ConfigApplied { restarted: true })
    }

    /// Moves every complete buffer out of the rings into `sink`, in order;
    /// returns how many. Call it often (the rings hold about 10 s at 128 frames).
    /// Runs collect through [`crate::RunCollector`], which calls this and keeps the totals.
    ///
    /// Server xruns are attributed to the last drained buffer that started at
    /// or before the xrun was noted; one noted before every buffer of this
    /// drain goes to its first buffer (the buffer it belongs to was delivered
    /// already); one noted while no buffer is waiting is kept until the next
    /// drain that has a buffer. So every xrun is counted in some buffer's
    /// `server_xruns` unless the engine stops first.
    pub fn drain(&mut self, mut sink: impl FnMut(&BufferReport)) -> usize {
        self.pending_xruns.extend(self.signals.take_xrun_times());
        let Some(audio) = self.audio.as_mut() else {
            return 0;
        };
        let rate = self.info.sample_rate;
        let server_load_pct = self.signals.server_load();
        let mut batch: Vec<BufferReport> = Vec::new();
        while let Some(b) = audio.buffers.pop() {
            let mut threads = Vec::with_capacity(audio.threads.len());
            for (index, rx) in audio.threads.iter_mut().enumerate() {
                while let Some(t) = rx.peek() {
                    if t.seq > b.seq {
                        break;
                    }
                    let t = *t;
                    rx.pop();
                    if t.seq == b.seq {
                        threads.push(ThreadReport {
                            index,
                            cpu_start: t.cpu_start,
                            cpu_end: t.cpu_end,
                            sines: t.sines,
                            computed: t.computed,
                            chunks: t.chunks,
                            wake_latency_ns: t.wake_ns.saturating_sub(b.period_start_ns),
                            busy_ns: t.end_ns.saturating_sub(t.wake_ns),
                            cpu_ns: t.cpu_ns,
                        });
                    }
                }
            }
            batch.push(BufferReport {
                epoch: self.epoch,
                record: b,
                sample_rate: rate,
                device_xrun: false,
                server_xruns: 0,
                server_load_pct,
                threads,
            });
        }
        if !batch.is_empty() {
            for t in self.pending_xruns.drain(..) {
                let i = batch
                    .iter()
                    .rposition(|b| b.period_start_ns <= t)
                    .unwrap_or(0);
                batch[i].server_xruns = batch[i].server_xruns.saturating_add(1);
                batch[i].device_xrun = true;
            }
        }
        for b in &batch {
            sink(b);
        }
        batch.len()
    }

    /// Starts a burst (or restarts its 0.25 s countdown).
    pub fn trigger_burst(&self) {
        self.controls.trigger_burst();
    }

    /// Makes the next buffer's render busy-wait for `ns` first (fault injection).
    pub fn inject_stall(&self, ns: u64) {
        self.controls.inject_stall(ns);
    }

    /// Makes worker `worker` (thread index, 1..) hang for `ns` inside its next
    /// cycle while holding a chunk (fault injection); see
    /// [`LiveControls::inject_worker_hang`].
    pub fn inject_worker_hang(&self, worker: usize, ns: u64) {
        self.controls.inject_worker_hang(worker, ns);
    }

    /// The settings in force (rate and buffer as the device gave them).
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// The device's current settings.
    pub fn device_info(&self) -> DeviceInfo {
        let mut info = self.info.clone();
        let frames = self.signals.buffer_frames();
        if frames != 0 {
            info.buffer_frames = frames;
        }
        info
    }

    /// The live controls (for scripted changes from another control thread).
    pub fn controls(&self) -> Arc<LiveControls> {
        self.controls.clone()
    }

    /// Device signals: xruns, skipped periods, server load, end of stream.
    pub fn signals(&self) -> &DeviceSignals {
        &self.signals
    }

    /// Why the device stopped on its own, if it did.
    pub fn device_ended(&self) -> Option<String> {
        self.signals.ended()
    }

    /// Audio threads and their scheduling, driver first.
    pub fn threads(&self) -> Vec<ThreadInfo> {
        let mut t = self.threads.lock().map(|t| t.clone()).unwrap_or_default();
        t.sort_by_key(|t| t.index);
        t
    }

    /// Process-wide real-time outcomes.
    pub fn process_rt(&self) -> &ProcessRt {
        &self.process_rt
    }

    /// Records dropped because a ring was full, over all audio starts.
    pub fn ring_drops(&self) -> u64 {
        self.drops_before
            + self.audio.as_ref().map_or(0, |a| {
                a.buffers.drops() + a.threads.iter().map(|t| t.drops()).sum::<u64>()
            })
    }

    /// The chord as built: AudioPerfLab's part and xrunlab's extra copies, and
    /// how far the current sines (with a burst) reach into the extras.
    pub fn chord_info(&self) -> ChordInfo {
        let c = &self.config;
        let layout = c.chord_layout();
        let rate = self.info.sample_rate;
        let (built, in_play) = self.audio.as_ref().map_or((0, 0), |a| {
            (
                a.chord.extra_copies(),
                a.chord.extra_copies_in_play(c.sines + c.burst_sines),
            )
        });
        ChordInfo {
            name: c.chord.name().to_owned(),
            notes: c.chord.notes().to_vec(),
            partials_per_chord: layout.partials_per_chord(rate),
            apl_chords: c.chords,
            apl_max_sines: layout.apl_max_sines(rate),
            max_sines: layout.max_sines(rate),
            extra_copies_built: built,
            extra_copies_in_play: in_play,
        }
    }

    /// Audio starts so far (1 + restarts).
    pub fn audio_starts(&self) -> u32 {
        self.epoch + 1
    }

    /// Busy threads running.
    pub fn busy_threads(&self) -> usize {
        self.busy.count()
    }

    /// Each busy thread's tid and the priority it obtained (nice 19).
    pub fn busy_thread_info(&self) -> Vec<crate::busy::BusyThreadInfo> {
        self.busy.threads()
    }

    /// Share of time the busy threads spent working (their achieved duty).
    pub fn busy_achieved_duty(&self) -> Option<f64> {
        self.busy.achieved_duty()
    }

    /// Stops audio, delivering the last buffers to `sink`.
    pub fn stop(mut self, sink: impl FnMut(&BufferReport)) {
        self.device.stop();
        self.drain(sink);
        self.stop_audio();
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.stop_audio();
    }
}

/// Applies (or only reads back) real-time settings on the calling thread and records the outcome.
fn register_thread(
    threads: &Mutex<Vec<ThreadInfo>>,
    index: usize,
    role: ThreadRole,
    request: &RtRequest,
    apply: bool,
) {
    let report = if apply {
        sched::apply_to_current_thread(request)
    } else {
        // A server's thread (JACK's process thread): its priority is the server's to set and
        // is only read back, but the affinity asked for (--pin, --cpus) is applied, or a
        // pinned worker can end up sharing a CPU with the driver it waits for.
        sched::apply_to_current_thread(&RtRequest {
            cpus: request.cpus.clone(),
            ..RtRequest::default()
        })
    };
    let tid = sched::gettid();
    let stat = xrunlab_sys::procfs::read_thread_stat(
        Path::new(xrunlab_sys::DEFAULT_PROC_ROOT),
        std::process::id() as i32,
        tid,
    )
    .ok();
    if let Ok(mut t) = threads.lock() {
        t.retain(|t| t.index != index);
        t.push(ThreadInfo {
            index,
            role,
            tid,
            sched: report,
            stat_at_start: stat,
        });
    }
}
