//! The device interface: what an audio device (simulated, offline, JACK) must do to drive the
//! engine; used on control threads, with [`DeviceSignals`] also written from device threads.

pub mod offline;
pub mod sim;

use crate::rt::driver::Renderer;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// What a device is running with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceInfo {
    /// "sim", "offline" or "jack".
    pub kind: String,
    /// Human name, e.g. the JACK server and client names.
    pub name: String,
    /// Sample rate in Hz.
    pub sample_rate: u32,
    /// Buffer size in frames.
    pub buffer_frames: u32,
    /// Whether [`Device::configure`] can change the sample rate.
    pub can_set_sample_rate: bool,
    /// Whether [`Device::configure`] can change the buffer size.
    pub can_set_buffer: bool,
    /// Which thread calls the engine, e.g. "xrunlab clock thread" or "JACK process thread".
    pub driver_thread: String,
    /// Whether the engine may apply its real-time settings to the driver thread.
    pub driver_thread_is_ours: bool,
    /// Facts worth showing next to results (catch-up policy, server notes...).
    pub notes: Vec<String>,
}

/// What kind of failure a device had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceErrorKind {
    /// The device is in the wrong state for the request (running, closed, not stopped).
    State,
    /// The device or its server is not there: no server running, no client library, no
    /// physical ports, or a build without its support.
    Unavailable,
    /// The server refused a request: a client, its callbacks, activation, a port or a
    /// connection.
    Refused,
    /// The operating system failed a call (a thread, a file).
    Io,
}

/// A device failure: its kind, the words for the user (what failed and what to do about it),
/// and the underlying error when there is one.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct DeviceError {
    kind: DeviceErrorKind,
    message: String,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl DeviceError {
    /// A failure with no underlying error.
    pub fn new(kind: DeviceErrorKind, message: impl Into<String>) -> DeviceError {
        DeviceError {
            kind,
            message: message.into(),
            source: None,
        }
    }

    /// A failure caused by `source`, kept as [`std::error::Error::source`].
    pub fn caused_by(
        kind: DeviceErrorKind,
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> DeviceError {
        DeviceError {
            kind,
            message: message.into(),
            source: Some(Box::new(source)),
        }
    }

    /// Its kind.
    pub fn kind(&self) -> DeviceErrorKind {
        self.kind
    }

    /// The words for the user.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// An audio device that calls the engine's [`Renderer`] once per period from its driver thread.
pub trait Device: Send {
    /// Current settings.
    fn info(&self) -> DeviceInfo;
    /// While stopped: asks for a sample rate and buffer size and returns what
    /// the device will run with (a server may impose its own values).
    fn configure(
        &mut self,
        sample_rate: u32,
        buffer_frames: u32,
    ) -> Result<DeviceInfo, DeviceError>;
    /// Starts calling `renderer` from the driver thread. The device calls
    /// [`Renderer::driver_thread_started`] on that thread first.
    fn start(&mut self, renderer: Renderer, signals: Arc<DeviceSignals>)
        -> Result<(), DeviceError>;
    /// Stops calling the renderer and drops it; returns once no render is in progress.
    fn stop(&mut self);
}

/// What a device tells the engine while running: written from the device's
/// own threads (the driver thread only touches the atomics), read by control threads.
#[derive(Debug, Default)]
pub struct DeviceSignals {
    xruns: AtomicU64,
    skipped_periods: AtomicU64,
    server_load_bits: AtomicU32,
    buffer_frames: AtomicU32,
    ended: AtomicBool,
    failed: AtomicBool,
    end_reason: Mutex<Option<String>>,
    xrun_times_ns: Mutex<Vec<u64>>,
}

impl DeviceSignals {
    /// The server reported an xrun at `when_ns` (not from the driver thread: it takes a lock).
    pub fn note_xrun(&self, when_ns: u64) {
        self.xruns.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut v) = self.xrun_times_ns.lock() {
            v.push(when_ns);
        }
    }

    /// Server xruns so far.
    pub fn xruns(&self) -> u64 {
        self.xruns.load(Ordering::Relaxed)
    }

    /// Takes the times of xruns noted since the last call.
    pub fn take_xrun_times(&self) -> Vec<u64> {
        self.xrun_times_ns
            .lock()
            .map(|mut v| std::mem::take(&mut *v))
            .unwrap_or_default()
    }

    /// Periods the device skipped to catch up after late renders. Real-time safe.
    pub fn add_skipped_periods(&self, n: u64) {
        self.skipped_periods.fetch_add(n, Ordering::Relaxed);
    }

    /// Periods skipped so far.
    pub fn skipped_periods(&self) -> u64 {
        self.skipped_periods.load(Ordering::Relaxed)
    }

    /// The server's own DSP load in percent. Real-time safe.
    pub fn set_server_load(&self, pct: f32) {
        self.server_load_bits
            .store(pct.to_bits(), Ordering::Relaxed);
    }

    /// The server's own DSP load in percent, if the device has a server.
    pub fn server_load(&self) -> Option<f32> {
        let bits = self.server_load_bits.load(Ordering::Relaxed);
        (bits != 0).then(|| f32::from_bits(bits))
    }

    /// The device switched buffer size while running. Real-time safe.
    pub fn set_buffer_frames(&self, frames: u32) {
        self.buffer_frames.store(frames, Ordering::Relaxed);
    }

    /// Buffer size the device last reported, 0 if it never changed it.
    pub fn buffer_frames(&self) -> u32 {
        self.buffer_frames.load(Ordering::Relaxed)
    }

    /// The device stopped on its own (server gone, file complete); not from the driver thread.
    pub fn end(&self, reason: impl Into<String>) {
        if let Ok(mut r) = self.end_reason.lock() {
            r.get_or_insert_with(|| reason.into());
        }
        self.ended.store(true, Ordering::Release);
    }

    /// The device stopped because something went wrong (server gone, write
    /// failed); the run should end with a non-zero exit. Not from the driver thread.
    pub fn fail(&self, reason: impl Into<String>) {
        self.failed.store(true, Ordering::Release);
        self.end(reason);
    }

    /// Whether the device ended through [`DeviceSignals::fail`].
    pub fn failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    /// Why the device stopped on its own, if it did.
    pub fn ended(&self) -> Option<String> {
        if !self.ended.load(Ordering::Acquire) {
            return None;
        }
        self.end_reason.lock().ok().and_then(|r| r.clone())
    }
}

/// A device's own driver thread with its stop flag; dropping it stops and joins the thread.
pub(crate) struct DeviceThread {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl DeviceThread {
    /// Spawns `body`, which must return soon after the flag it is given becomes true.
    pub(crate) fn spawn(
        name: &str,
        body: impl FnOnce(Arc<AtomicBool>) + Send + 'static,
    ) -> Result<Self, DeviceError> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || body(flag))
            .map_err(|e| {
                DeviceError::caused_by(
                    DeviceErrorKind::Io,
                    format!("could not start the device thread {name}: {e}"),
                    e,
                )
            })?;
        Ok(Self {
            stop,
            handle: Some(handle),
        })
    }
}

impl Drop for DeviceThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
