//! The process handler: runs on JACK's process thread, which is the engine's driver thread;
//! real-time path.
//!
//! Rules (those of `xrunlab_engine::rt`): after the first call, no
//! allocation, no locks, no printing, no blocking. JACK calls are limited to
//! reads of the server's shared memory (cycle times, port buffers, DSP load).
//! The one exception is the first call, which registers the thread with the
//! engine (it reads back the scheduling JACK gave the thread and its /proc
//! counters); that call renders silence instead of a buffer, so its cost is
//! never measured as a render.
//!
//! libjack ends this thread with an *asynchronous* `pthread_cancel` when the
//! client is deactivated. A cancellation that lands inside Rust code aborts
//! the process, so the device closes the [`Gate`] first and deactivates only
//! once no callback is inside the engine.

// The real-time rules, checked against clippy.toml's list.
#![deny(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    clippy::disallowed_macros
)]

use crate::clock::JackClock;
use jack::{AudioIn, AudioOut, Client, Control, Frames, Port, ProcessHandler, ProcessScope};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use xrunlab_engine::rt::clock::now_ns;
use xrunlab_engine::{Cycle, DeviceSignals, Renderer};

/// The client's ports; registered once, kept across starts.
pub(crate) struct Ports {
    pub out_l: Port<AudioOut>,
    pub out_r: Port<AudioOut>,
    /// Present when the engine runs with input.
    pub input: Option<(Port<AudioIn>, Port<AudioIn>)>,
}

/// Keeps the process callback out of the engine while the device stops.
///
/// The callback sets `busy`, then reads `closed`; the device sets `closed`,
/// then waits for `busy` to clear. Both sides use SeqCst, so either the
/// callback sees `closed` and leaves at once, or the device sees `busy` and
/// waits for that render to end.
///
/// It also counts process callbacks, so that the watchdog can tell a server
/// that stopped calling us (PipeWire's libjack does not report its own death).
#[derive(Debug, Default)]
pub(crate) struct Gate {
    closed: AtomicBool,
    busy: AtomicBool,
    callbacks: AtomicU64,
}

impl Gate {
    /// Process callbacks so far.
    pub(crate) fn callbacks(&self) -> u64 {
        self.callbacks.load(Ordering::Relaxed)
    }

    /// Whether the device is stopping.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Stops renders from starting; true once none is in progress (false if one still is after `timeout`).
    /// Runs on the control thread that stops the device, where waiting is allowed.
    #[allow(clippy::disallowed_methods)]
    pub(crate) fn close(&self, timeout: std::time::Duration) -> bool {
        self.closed.store(true, Ordering::SeqCst);
        let t0 = std::time::Instant::now();
        while self.busy.load(Ordering::SeqCst) {
            if t0.elapsed() > timeout {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        true
    }
}

/// The engine's renderer, called once per JACK cycle.
pub(crate) struct Process {
    pub renderer: Renderer,
    pub ports: Ports,
    pub signals: Arc<DeviceSignals>,
    pub clock: JackClock,
    pub sample_rate: u32,
    pub gate: Arc<Gate>,
    /// Set once the thread has been registered with the engine.
    thread_registered: bool,
}

impl Process {
    pub(crate) fn new(
        renderer: Renderer,
        ports: Ports,
        signals: Arc<DeviceSignals>,
        clock: JackClock,
        sample_rate: u32,
        gate: Arc<Gate>,
    ) -> Self {
        Self {
            renderer,
            ports,
            signals,
            clock,
            sample_rate,
            gate,
            thread_registered: false,
        }
    }

    /// One cycle: registers the thread on the first, renders a buffer on every later one.
    fn render(&mut self, client: &Client, ps: &ProcessScope, wake_ns: u64) {
        let Ports {
            out_l,
            out_r,
            input,
        } = &mut self.ports;
        let (out_l, out_r) = (out_l.as_mut_slice(ps), out_r.as_mut_slice(ps));
        if !self.thread_registered {
            // JACK's thread-init callback runs before libjack raises the
            // thread to real-time priority, so the scheduling is read back
            // here, on the first cycle, where it is what every later cycle gets.
            self.renderer.driver_thread_started(false);
            self.thread_registered = true;
            out_l.fill(0.0);
            out_r.fill(0.0);
            return;
        }
        // current_usecs is the server's (DLL-smoothed) time of this cycle's
        // start; next_usecs its estimate of the next cycle's start, by which
        // this buffer must be complete. Both are on JACK's clock.
        let (period_start_ns, deadline_ns) = match ps.cycle_times() {
            Ok(t) => {
                let offset = self.clock.offset_now_ns(client);
                (
                    JackClock::to_monotonic_ns(t.current_usecs, offset),
                    JackClock::to_monotonic_ns(t.next_usecs, offset),
                )
            }
            Err(_) => (
                wake_ns,
                wake_ns.saturating_add(period_ns(ps.n_frames(), self.sample_rate)),
            ),
        };
        let input = input
            .as_ref()
            .map(|(l, r)| (l.as_slice(ps), r.as_slice(ps)));
        self.renderer.render(Cycle {
            period_start_ns,
            deadline_ns,
            wake_ns,
            out_l,
            out_r,
            input,
        });
        // A read of the server's shared engine state: no syscall, no lock.
        self.signals.set_server_load(client.cpu_load());
    }
}

/// Period length for `frames` at `rate`, used when the server cannot give cycle times.
fn period_ns(frames: Frames, rate: u32) -> u64 {
    u64::from(frames) * 1_000_000_000 / u64::from(rate.max(1))
}

impl ProcessHandler for Process {
    fn process(&mut self, client: &Client, ps: &ProcessScope) -> Control {
        let wake_ns = now_ns();
        self.gate.callbacks.fetch_add(1, Ordering::Relaxed);
        self.gate.busy.store(true, Ordering::SeqCst);
        if self.gate.closed.load(Ordering::SeqCst) {
            self.ports.out_l.as_mut_slice(ps).fill(0.0);
            self.ports.out_r.as_mut_slice(ps).fill(0.0);
            self.gate.busy.store(false, Ordering::SeqCst);
            return Control::Continue;
        }
        self.render(client, ps, wake_ns);
        self.gate.busy.store(false, Ordering::SeqCst);
        Control::Continue
    }

    fn buffer_size(&mut self, _: &Client, frames: Frames) -> Control {
        // The renderer takes the buffer length from each cycle's port buffers
        // (up to the engine's maximum), so following the server only needs
        // the engine to know the new size for its reports.
        self.signals.set_buffer_frames(frames);
        Control::Continue
    }
}
