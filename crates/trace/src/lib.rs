//! Why was a buffer late? Kernel scheduler and interrupt events for xrunlab's `--explain`:
//! a flight recorder of the audio CPUs ([`Tracer`]), the blame card of a late buffer
//! ([`blame()`]), top culprits over a run ([`Culprits`]) and a Perfetto trace writer
//! ([`PerfettoWriter`]). Nothing here runs on an audio thread: the tracer has its own
//! non-real-time reader thread, and the rest runs on the caller's collector thread.
//!
//! # How events are collected, and why this way
//!
//! Two kernel interfaces deliver binary scheduler/IRQ events without the text `trace` file:
//!
//! - **A private tracefs instance** (`instances/xrunlab-PID`, reading
//!   `per_cpu/cpuN/trace_pipe_raw`): lowest per-event cost, `trace_clock mono`, an overrun
//!   counter in `per_cpu/cpuN/stats`. But the instance is global kernel state that outlives the
//!   process: a `kill -9` leaves it (and its buffers) behind until someone removes it, and no Rust
//!   crate parses the ring-buffer page format, so the page/event-header decoder (time extends,
//!   absolute stamps, padding, the missed-events flags) would be hand-written.
//! - **perf_event_open tracepoints** (chosen): one event per tracepoint and CPU, all of a CPU
//!   redirected into one mmap ring (`PERF_EVENT_IOC_SET_OUTPUT`) so each ring is in time order;
//!   `PERF_SAMPLE_RAW|TIME|CPU|TID` with `use_clockid = CLOCK_MONOTONIC`, the engine's clock;
//!   lost events arrive as `PERF_RECORD_LOST` records. The kernel frees everything when the
//!   descriptors close, so cleanup holds after Ctrl-C, SIGTERM and even `kill -9`, and nothing
//!   touches the global trace buffer other tools use. The ring handling is `perf-event2`, the
//!   maintained continuation of `perf-event` (with `perf-event-data` to parse records).
//!   Compared: `perf-event` 0.4 (the original; no sampling ring and no clockid), `perf-event-open`
//!   0.7 (full-featured too, but younger and with a smaller user base), and
//!   `linux-perf-event-reader` (parses records only, opens nothing).
//!
//! Kernels differ in what they report: the development VM's kernel (6.18, a Firecracker guest)
//! emits no `sched_switch` out of the idle task (ftrace shows the same), and perf drops most
//! events made in idle context, such as the timer wake-up of a thread sleeping on an idle CPU.
//! The blame card infers such a thread's run from its next event and the engine's own wake
//! stamp, and counts it ([`ThreadBlame::unseen_switch_ins`]).
//!
//! tracefs is still needed read-only: each event's numeric id and its `format` file, which
//! drives all record decoding ([`mod@format`], [`decode`]), so nothing depends on a kernel's
//! field offsets. [`Tracer::start`] mounts tracefs when it is missing and, when tracing is
//! impossible, returns a [`TraceUnavailable`] whose text says exactly why.
//!
//! Cost: the kernel writes each event on the CPU where it happens, often inside an audio
//! thread's render, so [`EVENTS`] holds only what a card needs (one record per wake-up; hrtimer
//! expiry and idle states are opt-in, [`TraceOptions::extra_events`]), and samples carry only the
//! raw record and its
//! time. Measured with `xrunlab bench explain` on the 2-core development VM at 1,000 sines:
//! 2.4-6 k events/s, the reader thread 0.3-0.6 % of one CPU, about 1.1 µs of kernel time per
//! recorded event, no events lost with the default 1 MiB ring per CPU. The reader pins itself off
//! the traced CPUs when the process may use
//! another ([`TraceInfo::reader_placement`]). Start the tracer from a non-real-time thread: its
//! reader inherits the caller's scheduling policy.
//!
//! # Using it from a run
//!
//! ```no_run
//! use xrunlab_trace::{blame, AudioThread, BlameInput, ProcLookup, TraceOptions, Tracer};
//! let tracer = Tracer::start(&[0, 1], &TraceOptions::default()).expect("tracing");
//! // ... for each late buffer, shortly after it was drained:
//! # let (period_start, deadline, render_end) = (0u64, 0u64, 0u64);
//! # let threads: Vec<AudioThread> = Vec::new();
//! let window = tracer.snapshot(
//!     period_start - xrunlab_trace::blame::LEAD_IN_NS,
//!     deadline.max(render_end) + xrunlab_trace::blame::MARGIN_NS,
//! );
//! let card = blame(
//!     &BlameInput { period_start_ns: period_start, deadline_ns: deadline,
//!                   render_end_ns: render_end, threads: &threads, window: &window, notes: &[] },
//!     &ProcLookup::new(std::path::Path::new("/proc")),
//! );
//! println!("{}", card.verdict);
//! ```
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod blame;
pub mod cpu_context;
pub mod culprits;
pub mod decode;
pub mod event;
pub mod format;
mod overwrite;
mod perf;
pub mod perfetto;
pub mod procinfo;
pub mod recorder;
pub mod setup;
pub mod wake;

pub use blame::{
    blame, AudioThread, BlameCard, BlameInput, Cause, Culprit, CulpritKind, IdleCause, Migration,
    ParentTask, Sleep, ThreadBlame, Who,
};
pub use cpu_context::{CpuContext, IdleEntry};
pub use culprits::{CulpritTotal, Culprits};
pub use decode::{EventSpec, EVENTS};
pub use event::{still_runnable, Comm, EventKind, TraceEvent};
pub use perfetto::{PerfettoOptions, PerfettoSummary, PerfettoWriter, Track};
pub use procinfo::{NoLookup, ProcLookup, SeenTasks, TaskIdentity, TaskLookup};
pub use recorder::{now_ns, Cursor, TraceInfo, TraceOptions, TraceStats, Tracer, Window};
pub use setup::{Roots, TraceUnavailable};
pub use wake::{first_wake, last_wake, Wake, WakeSource};
