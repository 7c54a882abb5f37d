//! [`JackDevice`]: a JACK client that drives the engine from its process callback; every method
//! runs on a control thread.
//!
//! Life cycle: [`JackDevice::connect`] opens the client (never starting a
//! server) and registers its ports; [`Device::start`] activates it with the
//! engine's renderer as process handler; [`Device::stop`] deactivates it and
//! gets the ports back for the next start. Sample rate and buffer size are
//! the server's: the device asks the server for a buffer size only when the
//! user asked for one, and reports what the server runs with.

use crate::clock::JackClock;
use crate::notify::Notifications;
use crate::open::open_client;
use crate::process::{Gate, Ports, Process};
use crate::watchdog::{self, Watch};
use jack::{AsyncClient, AudioIn, AudioOut, Client, ClientStatus, PortFlags};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;
use xrunlab_engine::{Device, DeviceError, DeviceErrorKind, DeviceInfo, DeviceSignals, Renderer};

/// How long [`Device::stop`] waits for libjack to deactivate the client. A
/// healthy server answers within a cycle; a dead one may never answer, and a
/// run must end anyway.
const DEACTIVATE_TIMEOUT: Duration = Duration::from_secs(2);

/// The JACK port type of mono float audio.
const AUDIO_PORT_TYPE: &str = "32 bit float mono audio";

/// How to reach the server and what to register.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JackOptions {
    /// Server name (what `jackd -n NAME` set); `None` = the default server,
    /// or `JACK_DEFAULT_SERVER` when that is set.
    pub server: Option<String>,
    /// Client name; JACK appends a suffix when the name is taken.
    pub client_name: String,
    /// Connect the outputs (and inputs) to the server's physical ports on start.
    pub connect_ports: bool,
    /// Register stereo inputs too (the engine meters them).
    pub input: bool,
    /// Buffer size the user asked the server for; `None` keeps the server's.
    pub buffer_request: Option<u32>,
}

impl Default for JackOptions {
    fn default() -> Self {
        Self {
            server: None,
            client_name: "xrunlab".into(),
            connect_ports: false,
            input: false,
            buffer_request: None,
        }
    }
}

enum State {
    /// Open, ports registered, not processing.
    Idle { client: Client, ports: Ports },
    /// The engine renders from the process callback.
    Running(
        AsyncClient<Notifications, Process>,
        Arc<Gate>,
        Option<JoinHandle<()>>,
    ),
    /// The client is gone (server shut down, or activation failed).
    Closed,
}

/// The engine's device on a JACK server.
pub struct JackDevice {
    opts: JackOptions,
    server_label: String,
    client_name: String,
    port_names: PortNames,
    state: State,
    sample_rate: u32,
    buffer_frames: u32,
    clock: JackClock,
    /// What the last [`Device::configure`] returned: a later call asking for
    /// another size is a user request; asking for the same size only carries
    /// the engine's copy of it, and the server's current size is kept.
    adopted_frames: Option<u32>,
    notes: Vec<String>,
    server_gone: Arc<AtomicBool>,
}

/// Full names of our ports, for connecting them.
struct PortNames {
    outputs: [String; 2],
    inputs: Option<[String; 2]>,
}

impl JackDevice {
    /// Opens the client on a running server and registers its ports; fails at
    /// once, saying how to start a server, when none is running.
    pub fn connect(opts: JackOptions) -> Result<JackDevice, DeviceError> {
        let server_name = opts
            .server
            .clone()
            .or_else(|| std::env::var("JACK_DEFAULT_SERVER").ok());
        let server_label = format!("server \"{}\"", server_name.as_deref().unwrap_or("default"));
        let (client, status) = open_client(&opts.client_name, opts.server.as_deref())
            .map_err(|e| e.into_device_error(&server_label, server_name.as_deref()))?;
        let client_name = client.name().to_owned();
        let register_err = |port: &str, e: jack::Error| {
            let message = format!("could not register JACK port {client_name}:{port}: {e}");
            DeviceError::caused_by(DeviceErrorKind::Refused, message, e)
        };
        let out_l = client
            .register_port("out_l", AudioOut::default())
            .map_err(|e| register_err("out_l", e))?;
        let out_r = client
            .register_port("out_r", AudioOut::default())
            .map_err(|e| register_err("out_r", e))?;
        let input = if opts.input {
            let in_l = client
                .register_port("in_l", AudioIn::default())
                .map_err(|e| register_err("in_l", e))?;
            let in_r = client
                .register_port("in_r", AudioIn::default())
                .map_err(|e| register_err("in_r", e))?;
            Some((in_l, in_r))
        } else {
            None
        };
        let full = |short: &str| format!("{client_name}:{short}");
        let port_names = PortNames {
            outputs: [full("out_l"), full("out_r")],
            inputs: opts.input.then(|| [full("in_l"), full("in_r")]),
        };
        let clock = JackClock::identify(&client);
        let mut notes = vec![
            clock.describe(),
            "period start and deadline: the server's DLL estimates of this and the next cycle start \
             (jack_get_cycle_times); a render ending after the deadline is late; when the server's \
             timing jitters, a thread can run before the estimated start and its wake latency reads 0"
                .into(),
            "dropouts: server xrun notifications and late renders are counted separately".into(),
            "server DSP load: JACK's own smoothed average (jack_cpu_load), beside the engine's per-buffer load".into(),
            "driver thread: JACK's process thread with the scheduling the server gave it (read back, not changed); \
             real-time settings apply to the workers"
                .into(),
        ];
        if status.contains(ClientStatus::NAME_NOT_UNIQUE) {
            notes.push(format!(
                "client name \"{}\" was taken; JACK named this client \"{client_name}\"",
                opts.client_name
            ));
        }
        Ok(JackDevice {
            sample_rate: client.sample_rate(),
            buffer_frames: client.buffer_size(),
            state: State::Idle {
                client,
                ports: Ports {
                    out_l,
                    out_r,
                    input,
                },
            },
            opts,
            server_label,
            client_name,
            port_names,
            clock,
            adopted_frames: None,
            notes,
            server_gone: Arc::new(AtomicBool::new(false)),
        })
    }

    /// The client name the server gave us (the requested one unless it was taken).
    pub fn client_name(&self) -> &str {
        &self.client_name
    }

    fn client(&self) -> Option<&Client> {
        if self.server_gone.load(Ordering::Acquire) {
            return None;
        }
        match &self.state {
            State::Idle { client, .. } => Some(client),
            State::Running(active, ..) => Some(active.as_client()),
            State::Closed => None,
        }
    }

    fn gone_error(&self) -> DeviceError {
        DeviceError::new(DeviceErrorKind::State, format!(
            "the JACK client \"{}\" on {} is closed (its server shut down, or activation failed); start the server and run again",
            self.client_name, self.server_label
        ))
    }

    /// Connects our ports to the server's physical ports, pairwise.
    fn connect_system_ports(&self, client: &Client) -> Result<(), DeviceError> {
        let playback = client.ports(
            None,
            Some(AUDIO_PORT_TYPE),
            PortFlags::IS_INPUT | PortFlags::IS_PHYSICAL,
        );
        if playback.is_empty() {
            return Err(DeviceError::new(
                DeviceErrorKind::Unavailable,
                format!(
                    "--jack-connect: {} has no physical playback ports",
                    self.server_label
                ),
            ));
        }
        let mut pairs: Vec<(String, String)> = self
            .port_names
            .outputs
            .iter()
            .zip(playback.iter().cycle())
            .map(|(o, p)| (o.clone(), p.clone()))
            .collect();
        if let Some(inputs) = &self.port_names.inputs {
            let capture = client.ports(
                None,
                Some(AUDIO_PORT_TYPE),
                PortFlags::IS_OUTPUT | PortFlags::IS_PHYSICAL,
            );
            if capture.is_empty() {
                return Err(DeviceError::new(
                    DeviceErrorKind::Unavailable,
                    format!(
                        "--jack-connect: {} has no physical capture ports",
                        self.server_label
                    ),
                ));
            }
            pairs.extend(
                capture
                    .iter()
                    .cycle()
                    .zip(inputs.iter())
                    .map(|(c, i)| (c.clone(), i.clone())),
            );
        }
        for (from, to) in pairs {
            client.connect_ports_by_name(&from, &to).map_err(|e| {
                let message = format!("could not connect JACK port {from} to {to}: {e}");
                DeviceError::caused_by(DeviceErrorKind::Refused, message, e)
            })?;
        }
        Ok(())
    }
}

impl Device for JackDevice {
    fn info(&self) -> DeviceInfo {
        let buffer_frames = self
            .client()
            .map_or(self.buffer_frames, |c| c.buffer_size());
        DeviceInfo {
            kind: "jack".into(),
            name: format!(
                "JACK client \"{}\" on {}",
                self.client_name, self.server_label
            ),
            sample_rate: self.sample_rate,
            buffer_frames,
            can_set_sample_rate: false,
            can_set_buffer: true,
            driver_thread: "JACK process thread".into(),
            driver_thread_is_ours: false,
            notes: self.notes.clone(),
        }
    }

    fn configure(
        &mut self,
        _sample_rate: u32,
        buffer_frames: u32,
    ) -> Result<DeviceInfo, DeviceError> {
        if matches!(self.state, State::Running(..)) {
            return Err(DeviceError::new(
                DeviceErrorKind::State,
                "the JACK device must be stopped to be configured",
            ));
        }
        let Some(client) = self.client() else {
            return Err(self.gone_error());
        };
        let current = client.buffer_size();
        let wanted = match self.adopted_frames {
            None => self.opts.buffer_request,
            Some(previous) => (buffer_frames != previous).then_some(buffer_frames),
        };
        let mut note = None;
        if let Some(wanted) = wanted.filter(|&w| w != current) {
            // jack_set_buffer_size returns once every client has seen the new size.
            let refused = client.set_buffer_size(wanted).err();
            let now = client.buffer_size();
            note = Some(match refused {
                Some(e) => format!(
                    "asked the server for {wanted} frames; it refused ({e}) and runs at {now}"
                ),
                None if now != wanted => {
                    format!("asked the server for {wanted} frames; it runs at {now}")
                }
                None => format!("asked the server for {wanted} frames (it ran at {current})"),
            });
        }
        let (rate, frames) = (client.sample_rate(), client.buffer_size());
        self.sample_rate = rate;
        self.buffer_frames = frames;
        self.adopted_frames = Some(frames);
        if let Some(n) = note {
            self.notes.retain(|n| !n.starts_with("asked the server"));
            self.notes.push(n);
        }
        Ok(self.info())
    }

    fn start(
        &mut self,
        renderer: Renderer,
        signals: Arc<DeviceSignals>,
    ) -> Result<(), DeviceError> {
        if self.server_gone.load(Ordering::Acquire) {
            return Err(self.gone_error());
        }
        let (client, ports) = match std::mem::replace(&mut self.state, State::Closed) {
            State::Idle { client, ports } => (client, ports),
            running @ State::Running(..) => {
                self.state = running;
                return Err(DeviceError::new(
                    DeviceErrorKind::State,
                    "the JACK device is already running",
                ));
            }
            State::Closed => return Err(self.gone_error()),
        };
        let rate = self.sample_rate;
        let notifications = Notifications {
            signals: signals.clone(),
            server_label: self.server_label.clone(),
            sample_rate: rate,
            server_gone: self.server_gone.clone(),
        };
        let gate = Arc::new(Gate::default());
        let watch = Watch {
            gate: gate.clone(),
            signals: signals.clone(),
            server_gone: self.server_gone.clone(),
            server_label: self.server_label.clone(),
            sample_rate: rate,
            buffer_frames: self.buffer_frames,
        };
        let process = Process::new(renderer, ports, signals, self.clock, rate, gate.clone());
        let active = client.activate_async(notifications, process).map_err(|e| {
            let message = format!(
                "could not activate the JACK client \"{}\" on {}: {e}",
                self.client_name, self.server_label
            );
            DeviceError::caused_by(DeviceErrorKind::Refused, message, e)
        })?;
        let connected = if self.opts.connect_ports {
            self.connect_system_ports(active.as_client())
        } else {
            Ok(())
        };
        // Without the watchdog the run still works; only a server that dies
        // silently (PipeWire) would then go unnoticed.
        let watchdog = watchdog::spawn("xrl-jack-watch", watch).ok();
        self.state = State::Running(active, gate, watchdog);
        if let Err(e) = connected {
            self.stop();
            return Err(e);
        }
        Ok(())
    }

    fn stop(&mut self) {
        let State::Running(active, gate, watchdog) =
            std::mem::replace(&mut self.state, State::Closed)
        else {
            return;
        };
        let closed = gate.close(DEACTIVATE_TIMEOUT);
        if let Some(w) = watchdog {
            // It sees the closed gate within one poll.
            let _ = w.join();
        }
        if !closed {
            // A render still runs (it cannot block forever, but it has not
            // ended in time); deactivating now would cancel JACK's thread
            // inside it, so the client is left alone until the process exits.
            std::mem::forget(active);
            return;
        }
        // Deactivation waits for the server to take the client out of its
        // graph; when the server died it may never answer, so it runs on a
        // helper thread and the run goes on without it after a timeout (the
        // helper and the client are then left to the process exit).
        let (tx, rx) = mpsc::channel();
        let gone = self.server_gone.clone();
        let deactivate = move || {
            // The renderer comes back inside the process handler and is dropped here.
            let back = active
                .deactivate()
                .ok()
                .map(|(client, _, process)| (client, process.ports));
            // A client whose server is gone is closed here too, off the control thread.
            let back = back.filter(|_| !gone.load(Ordering::Acquire));
            let _ = tx.send(back);
        };
        // If the thread cannot be spawned, the closure is dropped with the
        // client in it, and the client's own drop deactivates and closes it here.
        if std::thread::Builder::new()
            .name("xrl-jack-stop".into())
            .spawn(deactivate)
            .is_ok()
        {
            if let Ok(Some((client, ports))) = rx.recv_timeout(DEACTIVATE_TIMEOUT) {
                self.state = State::Idle { client, ports };
            }
        }
    }
}

impl Drop for JackDevice {
    fn drop(&mut self) {
        self.stop();
        if self.server_gone.load(Ordering::Acquire) {
            // Closing a client whose server is gone can block in libjack;
            // leaking it costs nothing at the end of a run.
            if let State::Idle { client, ports } = std::mem::replace(&mut self.state, State::Closed)
            {
                std::mem::forget(ports);
                std::mem::forget(client);
            }
        }
    }
}
