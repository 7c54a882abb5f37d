//! A passive JACK client for `xrunlab watch`: xruns, the client list and the server's settings,
//! without joining the processing graph. Opened and queried on a control thread; its callbacks
//! run on libjack's notification thread (not real-time), which only sends on a channel.
//!
//! Why raw libjack calls instead of the `jack` crate's `activate_async`: that always installs a
//! process callback, and a client with one is scheduled in every cycle (JACK2 starts a real-time
//! thread for it and the server waits for it). `watch` promises not to change the graph it
//! watches, so this client registers only notification callbacks, has no ports, and is never
//! part of a cycle.
//!
//! PipeWire's libjack never calls the shutdown callback when its daemon dies, so a watchdog
//! thread (the engine device's, [`crate::watchdog`]) reads the server's frame clock and reports
//! the server gone when it stops moving.

use crate::open::open_client;
use jack::jack_sys as j;
use jack::{Client, PortFlags};
use std::collections::BTreeSet;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use xrunlab_engine::rt::clock::now_ns;
use xrunlab_engine::{DeviceError, DeviceErrorKind};

/// What the server told the watching client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JackEvent {
    /// The server reported an xrun; CLOCK_MONOTONIC ns when the notification arrived (JACK2
    /// sends it after the cycle that ran late, from its notification thread).
    Xrun {
        /// When the notification arrived, CLOCK_MONOTONIC ns.
        at_ns: u64,
    },
    /// Clients or connections changed: re-read [`JackWatch::clients`].
    GraphChanged,
    /// The server closed the connection (it stopped or crashed).
    Shutdown {
        /// The server's reason, as libjack gives it.
        reason: String,
    },
    /// The server's frame clock stopped moving without a word: it died or hung (PipeWire's
    /// libjack does not call the shutdown callback).
    ClockStopped {
        /// How long it has not moved.
        silence: Duration,
    },
}

/// Callback state: owned by [`JackWatch`], read by libjack's notification thread.
struct Notify {
    events: Sender<JackEvent>,
}

/// A passive connection to a JACK server. Dropping it closes the client.
pub struct JackWatch {
    // Field order matters: the client closes (and libjack stops calling back) before the
    // callback state it points to is freed; `Drop` ends the watchdog, which shares the
    // client, before either.
    client: Arc<Client>,
    _notify: Box<Notify>,
    server: Option<String>,
    watchdog: Option<JoinHandle<()>>,
    closing: Arc<AtomicBool>,
}

/// What the watchdog reads: the server's frame clock, which moves every cycle while it runs.
struct Clock {
    client: Arc<Client>,
    closing: Arc<AtomicBool>,
    events: Sender<JackEvent>,
}

impl crate::watchdog::Watched for Clock {
    fn progress(&self) -> u64 {
        // SAFETY: the client stays open while this runs (`JackWatch::drop` ends the watchdog
        // before the client closes); jack_last_frame_time only reads the server's clock.
        u64::from(unsafe { j::jack_last_frame_time(self.client.raw()) })
    }

    fn period(&self) -> Duration {
        crate::watchdog::period(self.client.buffer_size(), self.client.sample_rate())
    }

    fn finished(&self) -> bool {
        self.closing.load(Ordering::Acquire)
    }

    fn silent(&self, silence: Duration) {
        let _ = self.events.send(JackEvent::ClockStopped { silence });
    }
}

impl Drop for JackWatch {
    fn drop(&mut self) {
        self.closing.store(true, Ordering::Release);
        if let Some(w) = self.watchdog.take() {
            // It sees the flag within one poll.
            let _ = w.join();
        }
    }
}

unsafe extern "C" fn on_xrun(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the `Notify` boxed in `JackWatch`, which outlives the client.
    let notify = unsafe { &*(arg as *const Notify) };
    let _ = notify.events.send(JackEvent::Xrun { at_ns: now_ns() });
    0
}

unsafe extern "C" fn on_graph_order(arg: *mut c_void) -> c_int {
    // SAFETY: as in `on_xrun`.
    let notify = unsafe { &*(arg as *const Notify) };
    let _ = notify.events.send(JackEvent::GraphChanged);
    0
}

unsafe extern "C" fn on_shutdown(_code: j::jack_status_t, reason: *const c_char, arg: *mut c_void) {
    // SAFETY: as in `on_xrun`.
    let notify = unsafe { &*(arg as *const Notify) };
    let reason = if reason.is_null() {
        String::new()
    } else {
        // SAFETY: libjack passes a NUL-terminated string valid for the call.
        unsafe { CStr::from_ptr(reason) }
            .to_string_lossy()
            .into_owned()
    };
    let _ = notify.events.send(JackEvent::Shutdown { reason });
}

impl JackWatch {
    /// Connects to `server` (or the default one) as `name`, without ports or a process callback.
    pub fn open(
        name: &str,
        server: Option<&str>,
    ) -> Result<(JackWatch, Receiver<JackEvent>), DeviceError> {
        let label = match server {
            Some(s) => format!("server \"{s}\""),
            None => "the default server".to_owned(),
        };
        let (client, _) =
            open_client(name, server).map_err(|e| e.into_device_error(&label, server))?;
        let (tx, rx) = channel();
        let mut notify = Box::new(Notify { events: tx.clone() });
        let arg = notify.as_mut() as *mut Notify as *mut c_void;
        let raw = client.raw();
        // SAFETY: `raw` is an open, inactive client; `arg` points to the boxed `Notify` that
        // lives as long as the client (see the field order of `JackWatch`); the callbacks'
        // signatures are libjack's.
        let rc = unsafe {
            j::jack_set_xrun_callback(raw, Some(on_xrun), arg)
                | j::jack_set_graph_order_callback(raw, Some(on_graph_order), arg)
        };
        if rc != 0 {
            return Err(DeviceError::new(
                DeviceErrorKind::Refused,
                format!("the JACK {label} refused the watch client's callbacks (error {rc})"),
            ));
        }
        // SAFETY: as above; jack_on_info_shutdown returns nothing.
        unsafe { j::jack_on_info_shutdown(raw, Some(on_shutdown), arg) };
        // SAFETY: `raw` is open and inactive, its callbacks are set.
        let rc = unsafe { j::jack_activate(raw) };
        if rc != 0 {
            return Err(DeviceError::new(
                DeviceErrorKind::Refused,
                format!("the JACK {label} did not activate the watch client (error {rc})"),
            ));
        }
        // This client never runs in a cycle: the server's segments libjack locked for one
        // need not stay resident here.
        crate::shm::release_segments();
        let client = Arc::new(client);
        let closing = Arc::new(AtomicBool::new(false));
        let clock = Clock {
            client: client.clone(),
            closing: closing.clone(),
            events: tx,
        };
        // Without it the watch still works; only a server that dies silently (PipeWire) would
        // then go unnoticed.
        let watchdog = crate::watchdog::spawn("xrl-jack-wdog", clock).ok();
        Ok((
            JackWatch {
                client,
                _notify: notify,
                server: server.map(str::to_owned),
                watchdog,
                closing,
            },
            rx,
        ))
    }

    /// The clients that own ports, by name (this watching client has none, so it is not listed).
    pub fn clients(&self) -> Vec<String> {
        let ports = self.client.ports(None, None, PortFlags::empty());
        // Listing the ports reads every port slot of the server's graph segment, and the
        // kernel maps the pages around each read in too: given back at once, as at the open.
        crate::shm::release_segments();
        let names: BTreeSet<String> = ports
            .iter()
            .filter_map(|p| p.split_once(':').map(|(c, _)| c.to_owned()))
            .collect();
        names.into_iter().collect()
    }

    /// The frame at the start of the server's current cycle (`jack_last_frame_time`): it grows
    /// by one period with every cycle the server runs, and wraps at 2^32.
    pub fn last_frame_time(&self) -> u32 {
        // SAFETY: the client is open for as long as `self`; this only reads the server's clock.
        unsafe { j::jack_last_frame_time(self.client.raw()) }
    }

    /// The server's period, frames.
    pub fn buffer_size(&self) -> u32 {
        self.client.buffer_size()
    }

    /// The server's sample rate, Hz.
    pub fn sample_rate(&self) -> u32 {
        self.client.sample_rate()
    }

    /// The server's name as asked for (`None`: the default server).
    pub fn server(&self) -> Option<&str> {
        self.server.as_deref()
    }
}
