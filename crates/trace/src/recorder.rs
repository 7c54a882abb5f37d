//! The flight recorder: [`Tracer`] opens the tracepoints of the audio CPUs and runs one
//! non-real-time reader thread ("xrl-trace") that drains the kernel rings every few
//! milliseconds into a bounded rolling window. Callers (the engine's collector thread, the
//! Perfetto writer) take snapshots of that window; nothing here touches the audio threads.
//! In overwrite mode ([`TraceOptions::overwrite`], `xrunlab record`'s) the kernel keeps the
//! newest events in each CPU's ring and nothing is read until a snapshot is asked for: the
//! caller's thread then reads the window straight from the rings, and the reader thread only
//! samples the CPUs' steal and idle counters.

use crate::cpu_context::{CpuContext, CpuSampler, SAMPLE_EVERY_MS};
use crate::decode::Decoder;
use crate::event::{EventKind, TraceEvent};
use crate::overwrite::{open_backward, BackwardRing};
use crate::perf::{open_cpu, CpuRing};
use crate::procinfo::SeenTasks;
use crate::setup::{prepare, Roots, TraceUnavailable};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

/// How the tracer runs. [`TraceOptions::default`] suits a live `--explain` run.
#[derive(Debug, Clone)]
pub struct TraceOptions {
    /// Where procfs, sysfs and tracefs are.
    pub roots: Roots,
    /// How far back the window reaches, in ms (events older than this are dropped).
    pub window_ms: u64,
    /// Hard cap on events kept, whatever their age, so memory stays bounded under an event
    /// storm (about 80 bytes each).
    pub max_events: usize,
    /// Size of each CPU's kernel ring, in KiB (rounded up to a power of two pages).
    pub ring_kib_per_cpu: usize,
    /// How often the reader drains the rings, in ms.
    pub poll_ms: u64,
    /// Also record the events no card uses (hrtimer expiry, `power:cpu_idle`): shown in the
    /// Perfetto trace, and a quarter to a half of all events on an audio run, so off by default
    /// (see [`crate::EVENTS`]).
    pub extra_events: bool,
    /// Overwrite mode: the rings keep the newest `ring_kib_per_cpu` of events and are read only
    /// when [`Tracer::snapshot`] asks (no draining, no rolling window, no streaming:
    /// [`Tracer::read_new`] yields nothing). For a recorder that needs the kernel's events only
    /// around an xrun; `poll_ms`, `window_ms` and `max_events` do not apply.
    pub overwrite: bool,
}

impl Default for TraceOptions {
    fn default() -> TraceOptions {
        TraceOptions {
            roots: Roots::default(),
            // 2 s: a card is built about 20 ms after its buffer, but on a loaded machine the
            // thread that builds it can be held back for hundreds of ms (a 500 ms window left a
            // CI run's card without its buffer's start).
            window_ms: 2000,
            max_events: 200_000,
            ring_kib_per_cpu: 1024,
            poll_ms: 10,
            extra_events: false,
            overwrite: false,
        }
    }
}

/// What the tracer set up, for results files and the run summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceInfo {
    /// How events are collected.
    pub backend: String,
    /// Clock of the event timestamps.
    pub clock: String,
    /// The tracefs whose event formats were read.
    pub tracefs: PathBuf,
    /// True when this run mounted tracefs (left mounted for other tools).
    pub mounted_tracefs: bool,
    /// CPUs traced.
    pub cpus: Vec<usize>,
    /// Events traced, as `system:name`.
    pub events: Vec<String>,
    /// Optional events this kernel lacks.
    pub missing_optional_events: Vec<String>,
    /// Opt-in events not recorded because they were not asked for (hrtimer expiry, cpu_idle).
    pub events_left_out: Vec<String>,
    /// Where the reader thread runs: off the traced CPUs when the process may use another.
    pub reader_placement: String,
    /// Rolling window length, ms.
    pub window_ms: u64,
    /// Event cap of the window.
    pub max_events: usize,
    /// Kernel ring size per CPU, KiB.
    pub ring_kib_per_cpu: usize,
    /// Overwrite mode: the rings are read only when a window is asked for.
    #[serde(default)]
    pub overwrite: bool,
}

/// Counters over the whole run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TraceStats {
    /// Events decoded, by event type (`switch`, `wakeup`, `irq_entry`...).
    pub events_by_type: BTreeMap<String, u64>,
    /// All events decoded.
    pub events_total: u64,
    /// Events the kernel dropped because its ring was full (PERF_RECORD_LOST), by CPU.
    pub lost_by_cpu: BTreeMap<usize, u64>,
    /// Sum of `lost_by_cpu`.
    pub lost_total: u64,
    /// Events dropped from the window by the `max_events` cap before they aged out.
    pub evicted_by_cap: u64,
    /// Overwrite mode: samples in an asked-for window that did not decode (a torn record would
    /// be one; none is expected).
    pub undecoded: u64,
    /// Events in the window now.
    pub window_events: usize,
    /// CPU time the reader thread used so far, ms.
    pub reader_cpu_ms: f64,
    /// Wall time since start, ms.
    pub elapsed_ms: f64,
}

/// A cut of the window: the events in `[t0_ns, t1_ns]` in time order.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Window {
    /// Start, CLOCK_MONOTONIC ns.
    pub t0_ns: u64,
    /// End, CLOCK_MONOTONIC ns.
    pub t1_ns: u64,
    /// The events, sorted by time.
    pub events: Vec<TraceEvent>,
    /// Events the kernel lost in a gap that overlaps the window.
    pub lost_events: u64,
    /// False when the window no longer reached back to `t0_ns` (aged out or capped) or the
    /// reader had not yet caught up with `t1_ns`: the events are then incomplete.
    pub complete: bool,
    /// Steal and idle-state entries per CPU around the window (sampled, not traced).
    pub cpu: CpuContext,
}

/// Where a streaming consumer ([`Tracer::read_new`]) is in the event sequence.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cursor(u64);

struct WindowState {
    events: VecDeque<TraceEvent>,
    /// Sequence number of `events[0]`.
    first_seq: u64,
    /// Newest timestamp dropped from the window: snapshots before it are incomplete.
    dropped_until_ns: u64,
    /// Decoded events by type name (kept apart from `stats` so counting never allocates).
    counts: BTreeMap<&'static str, u64>,
    stats: TraceStats,
}

impl WindowState {
    fn new() -> WindowState {
        WindowState {
            events: VecDeque::new(),
            first_seq: 0,
            dropped_until_ns: 0,
            counts: BTreeMap::new(),
            stats: TraceStats::default(),
        }
    }

    /// Appends a time-ordered batch, counts it, then drops events older than `window_ns`
    /// before `now` and, past `max_events`, the oldest ones.
    fn absorb(
        &mut self,
        batch: &mut Vec<TraceEvent>,
        lost: &[(usize, u64)],
        now: u64,
        window_ns: u64,
        max_events: usize,
    ) {
        self.count(batch, lost);
        self.events.extend(batch.drain(..));
        let oldest_kept = now.saturating_sub(window_ns);
        while let Some(front) = self.events.front() {
            let over_cap = self.events.len() > max_events;
            if front.ts_ns >= oldest_kept && !over_cap {
                break;
            }
            if front.ts_ns >= oldest_kept {
                self.stats.evicted_by_cap += 1;
            }
            self.dropped_until_ns = self.dropped_until_ns.max(front.ts_ns);
            self.events.pop_front();
            self.first_seq += 1;
        }
        self.stats.window_events = self.events.len();
    }

    /// Counts decoded events by type, and the kernel's lost ones by CPU.
    fn count(&mut self, events: &[TraceEvent], lost: &[(usize, u64)]) {
        for &(cpu, n) in lost {
            *self.stats.lost_by_cpu.entry(cpu).or_default() += n;
            self.stats.lost_total += n;
        }
        for e in events {
            if !matches!(e.kind, EventKind::Lost { .. }) {
                self.stats.events_total += 1;
                *self.counts.entry(type_name(&e.kind)).or_default() += 1;
            }
        }
    }

    /// See [`Tracer::read_new`].
    fn read_new(&self, cursor: &mut Cursor, out: &mut Vec<TraceEvent>) -> u64 {
        let missed = self.first_seq.saturating_sub(cursor.0);
        let skip = (cursor.0.max(self.first_seq) - self.first_seq) as usize;
        out.extend(self.events.iter().skip(skip).cloned());
        cursor.0 = self.first_seq + self.events.len() as u64;
        missed
    }

    fn stats(&self) -> TraceStats {
        let mut stats = self.stats.clone();
        stats.events_by_type = self
            .counts
            .iter()
            .map(|(k, v)| ((*k).to_owned(), *v))
            .collect();
        stats
    }
}

/// Overwrite mode's rings, read on the thread that asks for a window.
struct Backward {
    rings: Vec<BackwardRing>,
    decoder: Decoder,
    /// When the rings were enabled: a ring that never filled holds everything since.
    enabled_ns: u64,
}

struct Shared {
    window: Mutex<WindowState>,
    backward: Option<Mutex<Backward>>,
    /// Steal and idle-state counters, sampled by the reader.
    cpu: Mutex<CpuSampler>,
    stop: AtomicBool,
    /// CLOCK_MONOTONIC at the start of the reader's last completed drain: every event stamped
    /// before it is in the window.
    drained_until_ns: AtomicU64,
    reader_cpu_ns: AtomicU64,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, WindowState> {
        // A panic on the reader thread must not take the caller down with a poisoned lock.
        self.window.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn backward_lock(&self) -> Option<MutexGuard<'_, Backward>> {
        self.backward
            .as_ref()
            .map(|b| b.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn cpu_lock(&self) -> MutexGuard<'_, CpuSampler> {
        self.cpu.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The running flight recorder. Dropping it (or [`Tracer::stop`]) stops the events and joins
/// the reader thread; the kernel frees the perf rings when their descriptors close, also when
/// the process dies, so no tracing state outlives the run.
pub struct Tracer {
    shared: Arc<Shared>,
    reader: Option<JoinHandle<()>>,
    info: TraceInfo,
    tasks: SeenTasks,
    poll: Duration,
    started_ns: u64,
    /// When `stop` was asked for: closing the events takes a while (the kernel unregisters
    /// each tracepoint), which is not tracing time.
    stopped_ns: Option<u64>,
}

/// In overwrite mode, how often the CPUs' steal and idle counters are sampled, ms: a window's
/// context then spans up to this much before it (and a sample taken when it is read closes it).
/// Every 100 ms, as the streaming reader does, was about a third of the recorder's CPU on an
/// idle JACK2 graph here (0.16 % of a core).
const OVERWRITE_SAMPLE_EVERY_MS: u64 = 250;

/// CLOCK_MONOTONIC now, ns: the clock of event timestamps and of the engine's records.
pub fn now_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock ids used here always exist.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn type_name(kind: &EventKind) -> &'static str {
    match kind {
        EventKind::Switch { .. } => "switch",
        EventKind::Wakeup { waking: true, .. } => "waking",
        EventKind::Wakeup { waking: false, .. } => "wakeup",
        EventKind::Migrate { .. } => "migrate",
        EventKind::IrqEntry { .. } => "irq_entry",
        EventKind::IrqExit { .. } => "irq_exit",
        EventKind::SoftirqEntry { .. } => "softirq_entry",
        EventKind::SoftirqExit { .. } => "softirq_exit",
        EventKind::HrtimerEntry { .. } => "hrtimer_entry",
        EventKind::HrtimerExit => "hrtimer_exit",
        EventKind::CpuIdle { .. } => "cpu_idle",
        EventKind::CpuFrequency { .. } => "cpu_frequency",
        EventKind::Lost { .. } => "lost_marker",
    }
}

impl Tracer {
    /// Finds or mounts tracefs, opens the tracepoints of [`crate::EVENTS`] on `cpus` and starts
    /// the reader thread. Call from a non-real-time thread (the reader inherits its policy).
    pub fn start(cpus: &[usize], options: &TraceOptions) -> Result<Tracer, TraceUnavailable> {
        if cpus.is_empty() {
            return Err(TraceUnavailable::BadCpus {
                reason: "the CPU list is empty".into(),
            });
        }
        let online = xrunlab_sys::online_cpus(&options.roots.sys_root);
        if let Some(bad) = cpus
            .iter()
            .find(|c| !online.is_empty() && !online.contains(c))
        {
            return Err(TraceUnavailable::BadCpus {
                reason: format!(
                    "CPU {bad} is not online (online: {})",
                    xrunlab_sys::format_cpu_list(&online)
                ),
            });
        }
        let prepared = prepare(&options.roots, options.extra_events)?;
        let formats: Vec<_> = prepared.formats.iter().map(|(_, f)| f.clone()).collect();
        let new_decoder = || {
            Decoder::new(&formats).map_err(|e| TraceUnavailable::MissingEvent {
                event: "format".into(),
                reason: e.to_string(),
            })
        };
        let ring_bytes = options.ring_kib_per_cpu.max(8) * 1024;
        let enable_failed = |cpu: usize, e: std::io::Error| TraceUnavailable::PerfRefused {
            event: "all".into(),
            cpu,
            reason: format!("enabling the events failed: {e}"),
        };
        let mut rings = Vec::with_capacity(cpus.len());
        let mut backward = None;
        if options.overwrite {
            let mut back = Vec::with_capacity(cpus.len());
            for &cpu in cpus {
                back.push(open_backward(
                    cpu,
                    &prepared.formats,
                    ring_bytes,
                    &options.roots.proc_root,
                )?);
            }
            let enabled_ns = now_ns();
            for ring in &mut back {
                ring.enable().map_err(|e| enable_failed(ring.cpu, e))?;
            }
            backward = Some(Mutex::new(Backward {
                rings: back,
                decoder: new_decoder()?,
                enabled_ns,
            }));
        } else {
            for &cpu in cpus {
                rings.push(open_cpu(
                    cpu,
                    &prepared.formats,
                    ring_bytes,
                    &options.roots.proc_root,
                )?);
            }
            for ring in &mut rings {
                ring.enable().map_err(|e| enable_failed(ring.cpu, e))?;
            }
        }
        let decoder = new_decoder()?;
        let (reader_cpus, reader_placement) = reader_cpus(cpus);
        let mut info = TraceInfo {
            backend: if options.overwrite {
                "perf_event_open tracepoints (one overwrite ring per CPU, read around an xrun)"
            } else {
                "perf_event_open tracepoints (one ring per CPU)"
            }
            .into(),
            clock: "CLOCK_MONOTONIC".into(),
            tracefs: prepared.tracefs.clone(),
            mounted_tracefs: prepared.mounted_by_us,
            cpus: cpus.to_vec(),
            events: prepared
                .formats
                .iter()
                .map(|(s, _)| format!("{}:{}", s.system, s.name))
                .collect(),
            missing_optional_events: prepared.missing_optional.clone(),
            events_left_out: prepared.left_out.clone(),
            reader_placement: String::new(),
            window_ms: options.window_ms,
            max_events: options.max_events,
            ring_kib_per_cpu: ring_bytes / 1024,
            overwrite: options.overwrite,
        };
        info.reader_placement = reader_placement;
        let started_ns = now_ns();
        let shared = Arc::new(Shared {
            window: Mutex::new(WindowState::new()),
            backward,
            cpu: Mutex::new(CpuSampler::new(
                &options.roots.proc_root,
                &options.roots.sys_root,
                cpus,
                options.window_ms * 1_000_000,
            )),
            stop: AtomicBool::new(false),
            drained_until_ns: AtomicU64::new(0),
            reader_cpu_ns: AtomicU64::new(0),
        });
        let tasks = SeenTasks::new(&options.roots.proc_root);
        let reader = Reader {
            shared: shared.clone(),
            rings,
            decoder,
            window_ns: options.window_ms * 1_000_000,
            max_events: options.max_events.max(1),
            // With nothing to drain, the reader only samples the CPUs' counters.
            poll: Duration::from_millis(match options.overwrite {
                true => OVERWRITE_SAMPLE_EVERY_MS,
                false => options.poll_ms.max(1),
            }),
            sample_every_ns: match options.overwrite {
                true => OVERWRITE_SAMPLE_EVERY_MS,
                false => SAMPLE_EVERY_MS,
            } * 1_000_000,
            cpus: reader_cpus,
            tasks: tasks.clone(),
        };
        let handle = std::thread::Builder::new()
            .name("xrl-trace".into())
            .spawn(move || reader.run())
            .map_err(|e| TraceUnavailable::PerfRefused {
                event: "all".into(),
                cpu: cpus[0],
                reason: format!("cannot start the reader thread: {e}"),
            })?;
        Ok(Tracer {
            shared,
            reader: Some(handle),
            info,
            poll: Duration::from_millis(options.poll_ms.max(1)),
            started_ns,
            stopped_ns: None,
            tasks,
        })
    }

    /// Who the tasks in the events are: real-time tasks as the reader first saw them (so a
    /// short-lived culprit is still named, with its policy and parent, after it exits), and
    /// procfs for the rest. Pass it to [`crate::blame()`] as the lookup.
    pub fn tasks(&self) -> SeenTasks {
        self.tasks.clone()
    }

    /// What was set up.
    pub fn info(&self) -> &TraceInfo {
        &self.info
    }

    /// Waits (at most a few poll periods and a quarter second, for a reader held back on a
    /// loaded machine) until the reader has drained past `t_ns`.
    fn wait_drained(&self, t_ns: u64) -> bool {
        let give_up = now_ns() + 4 * self.poll.as_nanos() as u64 + 250_000_000;
        loop {
            if self.shared.drained_until_ns.load(Ordering::Acquire) >= t_ns {
                return true;
            }
            if now_ns() > give_up || self.reader.as_ref().is_none_or(|h| h.is_finished()) {
                return false;
            }
            std::thread::sleep(self.poll / 4);
        }
    }

    /// The events stamped in `[t0_ns, t1_ns]`, in time order, once the reader has drained past
    /// `t1_ns` (waits up to a few poll periods for that). For a blame card, pass a little
    /// lead-in before the period start ([`crate::blame::LEAD_IN_NS`]) so the state of each CPU
    /// at the period start is known.
    pub fn snapshot(&self, t0_ns: u64, t1_ns: u64) -> Window {
        if let Some(back) = self.shared.backward_lock() {
            return self.read_back(back, t0_ns, t1_ns);
        }
        let caught_up = self.wait_drained(t1_ns);
        let state = self.shared.lock();
        let mut events: Vec<TraceEvent> = state
            .events
            .iter()
            .filter(|e| e.ts_ns >= t0_ns && e.ts_ns <= t1_ns)
            .cloned()
            .collect();
        let lost_events = lost_overlapping(&state.events, t0_ns, t1_ns);
        let complete = caught_up && state.dropped_until_ns < t0_ns;
        drop(state);
        events.sort_by_key(|e| e.ts_ns);
        Window {
            t0_ns,
            t1_ns,
            events,
            lost_events,
            complete,
            cpu: self.shared.cpu_lock().context(t0_ns, t1_ns),
        }
    }

    /// Overwrite mode's snapshot: each ring paused in turn and walked back from its newest
    /// record to `t0_ns`. A window that ends in the future is first waited for (at most 50 ms
    /// past its end is not waited: it is then cut at the time of reading, incomplete).
    fn read_back(&self, mut back: MutexGuard<'_, Backward>, t0_ns: u64, t1_ns: u64) -> Window {
        // An event stamped just before t1 may still be on its way into its ring.
        let settle = 1_000_000;
        let wait_until = t1_ns.saturating_add(settle);
        let now = now_ns();
        let caught_up = wait_until <= now || wait_until - now <= 50_000_000;
        if wait_until > now && caught_up {
            std::thread::sleep(Duration::from_nanos(wait_until - now));
        }
        let back = &mut *back;
        let mut events = Vec::new();
        let ever_before_t0 = back.enabled_ns <= t0_ns;
        let mut complete = caught_up;
        let (mut lost, mut undecoded) = (0, 0);
        let mut lost_by_cpu = Vec::new();
        for ring in &mut back.rings {
            let walk = ring.window(&mut back.decoder, t0_ns, t1_ns, ever_before_t0, &mut events);
            complete &= walk.reached_start;
            lost += walk.lost;
            undecoded += walk.undecoded;
            if walk.lost > 0 {
                lost_by_cpu.push((ring.cpu, walk.lost));
            }
        }
        // Each ring's run is in time order; a stable sort merges them cheaply.
        events.sort_by_key(|e| e.ts_ns);
        let window_events = events;
        for e in &window_events {
            note_rt_tasks(&self.tasks, e);
        }
        let mut state = self.shared.lock();
        state.count(&window_events, &lost_by_cpu);
        state.stats.undecoded += undecoded;
        state.stats.window_events = window_events.len();
        drop(state);
        let mut cpu = self.shared.cpu_lock();
        // The sample that closes the window's context (the reader's may be 250 ms away), unless
        // one was taken after the window (by an earlier read of the same xrun's).
        if cpu.newest_ns().is_none_or(|t| t < t1_ns) {
            cpu.sample(now_ns());
        }
        Window {
            t0_ns,
            t1_ns,
            events: window_events,
            lost_events: lost,
            complete,
            cpu: cpu.context(t0_ns, t1_ns),
        }
    }

    /// Appends the events decoded since `cursor` to `out` (in drain order, each CPU in time
    /// order) and moves the cursor; returns how many were dropped from the window before this
    /// consumer saw them. For streaming consumers such as the Perfetto writer.
    pub fn read_new(&self, cursor: &mut Cursor, out: &mut Vec<TraceEvent>) -> u64 {
        self.shared.lock().read_new(cursor, out)
    }

    /// Counters so far.
    pub fn stats(&self) -> TraceStats {
        let mut stats = self.shared.lock().stats();
        stats.reader_cpu_ms = self.shared.reader_cpu_ns.load(Ordering::Relaxed) as f64 / 1e6;
        let until = self.stopped_ns.unwrap_or_else(now_ns);
        stats.elapsed_ms = until.saturating_sub(self.started_ns) as f64 / 1e6;
        stats
    }

    /// Stops the events, joins the reader and returns the final counters.
    pub fn stop(mut self) -> TraceStats {
        self.shutdown();
        self.stats()
    }

    fn shutdown(&mut self) {
        self.stopped_ns.get_or_insert_with(now_ns);
        if let Some(mut back) = self.shared.backward_lock() {
            for ring in &mut back.rings {
                ring.disable();
            }
        }
        self.shared.stop.store(true, Ordering::Release);
        if let Some(h) = self.reader.take() {
            h.thread().unpark();
            let _ = h.join();
        }
    }
}

impl Drop for Tracer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Sum of lost-event markers whose gap (from the marker to the next event of its CPU) overlaps
/// `[t0, t1]`.
fn lost_overlapping(events: &VecDeque<TraceEvent>, t0: u64, t1: u64) -> u64 {
    let mut open: BTreeMap<u16, (u64, u64)> = BTreeMap::new();
    let mut total = 0;
    for e in events {
        if let EventKind::Lost { count } = e.kind {
            let entry = open.entry(e.cpu).or_insert((e.ts_ns, 0));
            entry.1 += count;
            continue;
        }
        if let Some((from, count)) = open.remove(&e.cpu) {
            if from <= t1 && e.ts_ns >= t0 {
                total += count;
            }
        }
    }
    total
        + open
            .values()
            .filter(|(from, _)| *from <= t1)
            .map(|(_, c)| c)
            .sum::<u64>()
}

/// The CPUs the reader thread should run on: those this thread may use that are not traced,
/// so its draining and decoding take no time from the audio CPUs; `None` (with the reason)
/// when every allowed CPU is traced.
fn reader_cpus(traced: &[usize]) -> (Option<Vec<usize>>, String) {
    let allowed = xrunlab_sys::sched::allowed_cpus().unwrap_or_default();
    let off: Vec<usize> = allowed
        .iter()
        .copied()
        .filter(|c| !traced.contains(c))
        .collect();
    if off.is_empty() {
        let text = "on the audio CPUs (every CPU this process may use is traced), \
                    SCHED_OTHER: below the real-time audio threads"
            .to_owned();
        (None, text)
    } else {
        let text = format!(
            "pinned to CPUs {} (off the traced CPUs)",
            xrunlab_sys::format_cpu_list(&off)
        );
        (Some(off), text)
    }
}

/// Notes the real-time tasks of `e` in `tasks` (see [`Tracer::tasks`]).
fn note_rt_tasks(tasks: &SeenTasks, e: &TraceEvent) {
    match e.kind {
        EventKind::Switch {
            next_tid,
            next_prio,
            prev_tid,
            prev_prio,
            ..
        } => {
            if (0..100).contains(&next_prio) {
                tasks.note(next_tid);
            }
            if (0..100).contains(&prev_prio) {
                tasks.note(prev_tid);
            }
        }
        EventKind::Wakeup { tid, prio, .. } if (0..100).contains(&prio) => tasks.note(tid),
        _ => {}
    }
}

struct Reader {
    shared: Arc<Shared>,
    rings: Vec<CpuRing>,
    decoder: Decoder,
    window_ns: u64,
    max_events: usize,
    poll: Duration,
    /// How often the CPUs' steal and idle counters are sampled.
    sample_every_ns: u64,
    /// CPUs to pin to, off the traced ones (see [`reader_cpus`]).
    cpus: Option<Vec<usize>>,
    /// Real-time tasks as first seen, for cards made after they exit.
    tasks: SeenTasks,
}

impl Reader {
    fn run(mut self) {
        if let Some(cpus) = self.cpus.take() {
            // A refusal (a cpuset that changed meanwhile) leaves the inherited affinity, which
            // costs only where the reader runs.
            let _ = xrunlab_sys::apply_to_current_thread(&xrunlab_sys::RtRequest {
                cpus: Some(cpus),
                ..xrunlab_sys::RtRequest::default()
            });
        }
        let mut batch = Vec::new();
        let mut next_sample = 0;
        loop {
            let stopping = self.shared.stop.load(Ordering::Acquire);
            let now = now_ns();
            if now >= next_sample {
                self.shared.cpu_lock().sample(now);
                next_sample = now + self.sample_every_ns;
            }
            if stopping {
                for ring in &mut self.rings {
                    ring.disable();
                }
            }
            let drain_start = now_ns();
            if !self.rings.is_empty() {
                self.drain_once(&mut batch, drain_start);
            }
            self.shared
                .drained_until_ns
                .store(drain_start, Ordering::Release);
            self.shared
                .reader_cpu_ns
                .store(clock_ns(libc::CLOCK_THREAD_CPUTIME_ID), Ordering::Relaxed);
            if stopping {
                break;
            }
            std::thread::park_timeout(self.poll);
        }
    }

    fn drain_once(&mut self, batch: &mut Vec<TraceEvent>, now: u64) {
        batch.clear();
        let mut lost = Vec::new();
        for ring in &mut self.rings {
            let n = ring.drain(&mut self.decoder, batch);
            if n > 0 {
                lost.push((ring.cpu, n));
            }
        }
        // Each ring is in time order; a stable sort merges the runs cheaply.
        batch.sort_by_key(|e| e.ts_ns);
        // A real-time task that preempts audio is often short-lived: read who it is (name,
        // process, policy, parent) while it still exists. Only new tids cost a procfs read.
        for e in batch.iter() {
            note_rt_tasks(&self.tasks, e);
        }
        self.shared
            .lock()
            .absorb(batch, &lost, now, self.window_ns, self.max_events);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lost_at(ts: u64, cpu: u16, count: u64) -> TraceEvent {
        TraceEvent {
            ts_ns: ts,
            cpu,
            kind: EventKind::Lost { count },
        }
    }

    fn idle_at(ts: u64, cpu: u16) -> TraceEvent {
        TraceEvent {
            ts_ns: ts,
            cpu,
            kind: EventKind::CpuIdle { state: 1 },
        }
    }

    #[test]
    fn the_window_ages_out_caps_and_streams_each_event_once() {
        let mut w = WindowState::new();
        let mut cursor = Cursor::default();
        let mut out = Vec::new();
        let mut batch: Vec<_> = (0..10).map(|i| idle_at(100 + i, 0)).collect();
        w.absorb(&mut batch, &[(1, 4)], 200, 1_000, 100);
        assert!(batch.is_empty());
        assert_eq!(w.read_new(&mut cursor, &mut out), 0);
        assert_eq!(out.len(), 10);
        // Ten more, with a cap of 15: the five oldest go, counted as capped.
        let mut batch: Vec<_> = (0..10).map(|i| idle_at(300 + i, 1)).collect();
        w.absorb(&mut batch, &[], 400, 1_000, 15);
        assert_eq!(w.events.len(), 15);
        assert_eq!(w.stats.evicted_by_cap, 5);
        assert_eq!(w.dropped_until_ns, 104);
        out.clear();
        assert_eq!(
            w.read_new(&mut cursor, &mut out),
            0,
            "the streamer had seen those five"
        );
        assert_eq!(out.len(), 10);
        assert_eq!(out[0].ts_ns, 300);
        // Time passes: everything before 1400 - 1000 ages out (not counted as capped).
        let mut batch = vec![idle_at(1400, 0)];
        w.absorb(&mut batch, &[], 1400, 1_000, 15);
        assert_eq!(w.events.len(), 1);
        assert_eq!(w.stats.evicted_by_cap, 5);
        // A consumer that never read misses what aged out, and is told so.
        let mut late = Cursor::default();
        out.clear();
        assert_eq!(w.read_new(&mut late, &mut out), 20);
        assert_eq!(out.len(), 1);
        let stats = w.stats();
        assert_eq!(stats.events_total, 21);
        assert_eq!(stats.events_by_type["cpu_idle"], 21);
        assert_eq!((stats.lost_total, stats.lost_by_cpu[&1]), (4, 4));
    }

    #[test]
    fn lost_markers_count_when_their_gap_overlaps_the_window() {
        let events: VecDeque<_> = vec![
            lost_at(100, 0, 5), // gap 100..200 on CPU0: before the window
            idle_at(200, 0),
            lost_at(900, 1, 7), // gap 900..1500 on CPU1: overlaps 1000..2000
            idle_at(1500, 1),
            lost_at(2500, 0, 11), // after the window
            idle_at(2600, 0),
            lost_at(1800, 1, 3), // open gap from 1800: overlaps
        ]
        .into();
        assert_eq!(lost_overlapping(&events, 1000, 2000), 10);
        assert_eq!(lost_overlapping(&events, 0, 150), 5);
    }
}
