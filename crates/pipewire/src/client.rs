//! The connection to a PipeWire server: binds its profiler as pw-top does and follows its
//! registry's nodes and clients. Everything here runs on one thread of its own, the PipeWire main
//! loop's; the caller reads [`Event`]s from a channel and stops the loop by dropping [`Profiler`].
//!
//! The `pipewire` crate has no Profiler wrapper (`pw_profiler_add_listener` is an inline C
//! function), so the profiler is bound through the registry's raw `bind` method and listened to
//! with `pw_proxy_add_object_listener` and an events struct laid out as
//! `struct pw_profiler_events` (pipewire/extensions/profiler.h).

use crate::record::{parse_profile, PodError, ProfilerRecord};
use pipewire as pw;
use pipewire::spa::sys as spa_sys;
use pipewire::sys as pw_sys;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::fmt;
use std::rc::Rc;
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

/// `PW_TYPE_INTERFACE_Profiler`.
pub const PROFILER_INTERFACE: &str = "PipeWire:Interface:Profiler";
/// `PW_VERSION_PROFILER`.
const PROFILER_VERSION: u32 = 3;

/// How often the loop thread reads the server once connected. The profiler sends a record every
/// cycle (375 a second at 128 frames; PipeWire 1.4 sends each alone): waking for each cost this
/// thread and watch's main thread a context switch apiece, most of watch's CPU on 1.4. The
/// socket holds what comes in between (about 20 records, a few kilobytes), and a card waits at
/// most this long. At 20 ms the two threads' sleeps were a quarter of watch's CPU (`perf`, 1.4.2):
/// each arms a timer and switches (on a VM, exits to the host); a card waits for its kernel
/// window longer than 50 ms anyway. Watch's main thread sleeps as long (watch_source.rs). A
/// caller that prints nothing live (`record`) asks for a longer one ([`Options::read_every`]).
pub const READ_EVERY: Duration = Duration::from_millis(50);

/// A node of the graph, from the registry (its pid from its client's properties).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    /// Global id: the `id` of its profiler blocks.
    pub id: u32,
    /// `node.name`.
    pub name: String,
    /// `application.name` of its client, or of the node.
    pub app_name: Option<String>,
    /// The process behind it: its client's `application.process.id`, else `pipewire.sec.pid`
    /// (the peer credentials the server saw on the socket).
    pub pid: Option<i32>,
    /// `media.class` (`Audio/Sink`, `Stream/Output/Audio`...).
    pub media_class: Option<String>,
}

/// What the server told us, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// One driver cycle.
    Cycle(ProfilerRecord),
    /// A node appeared, or its client's details arrived.
    Node(NodeInfo),
    /// A node went away.
    NodeRemoved(u32),
    /// Cycles the server's profiler ring dropped before this point (its counter jumped).
    Gap {
        /// How many cycles are missing.
        missed: u64,
    },
    /// A profiler pod that could not be read (the server's layout is unknown to this build).
    BadPod(PodError),
    /// The raw pod, when [`Options::keep_raw`] asked for it (to record test fixtures).
    RawPod(Vec<u8>),
    /// The connection ended: the server stopped or crashed. No event follows.
    Disconnected(String),
}

/// How to connect.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The server's socket name (`pipewire-0` by default, or `PIPEWIRE_REMOTE`).
    pub remote: Option<String>,
    /// Also send every raw pod as [`Event::RawPod`].
    pub keep_raw: bool,
    /// How often the loop thread reads the server; `None`: [`READ_EVERY`].
    pub read_every: Option<Duration>,
}

/// Why watching could not start.
#[derive(Debug)]
pub enum Error {
    /// No server answered on the socket.
    Connect(String),
    /// The server has no profiler (module-profiler is not loaded).
    NoProfiler,
    /// Creating the loop or context, binding, or the thread failed.
    Setup(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Connect(e) => write!(
                f,
                "no PipeWire server answered ({e}); is it running for this user? (XDG_RUNTIME_DIR \
                 and PIPEWIRE_REMOTE choose the socket)"
            ),
            Error::NoProfiler => f.write_str(
                "the PipeWire server has no profiler: load libpipewire-module-profiler \
                 (pipewire.conf: `module.profiler = true`, the default)",
            ),
            Error::Setup(e) => write!(f, "PipeWire could not be set up: {e}"),
        }
    }
}

impl std::error::Error for Error {}

/// A live subscription to a server's profiler and registry. Dropping it stops the loop thread.
pub struct Profiler {
    events: Receiver<Event>,
    quit: pw::channel::Sender<()>,
    thread: Option<JoinHandle<()>>,
    version: String,
}

impl Profiler {
    /// Connects, binds the profiler and starts following the registry; returns once the server
    /// has listed its objects (an error if it has no profiler).
    pub fn connect(options: &Options) -> Result<Profiler, Error> {
        let (ready_tx, ready_rx) = mpsc::channel::<Result<String, Error>>();
        let (events_tx, events_rx) = mpsc::channel();
        let (quit_tx, quit_rx) = pw::channel::channel::<()>();
        let options = options.clone();
        let thread = std::thread::Builder::new()
            .name("xrl-pipewire".into())
            .spawn(move || {
                if let Err(e) = run_loop(&options, events_tx, quit_rx, &ready_tx) {
                    let _ = ready_tx.send(Err(e));
                }
            })
            .map_err(|e| Error::Setup(format!("the loop thread: {e}")))?;
        match ready_rx.recv_timeout(Duration::from_secs(10)) {
            Ok(Ok(version)) => Ok(Profiler {
                events: events_rx,
                quit: quit_tx,
                thread: Some(thread),
                version,
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => {
                let _ = quit_tx.send(());
                Err(Error::Connect(
                    "the server did not list its objects within 10 s".into(),
                ))
            }
        }
    }

    /// The events, in the order the server sent them.
    pub fn events(&self) -> &Receiver<Event> {
        &self.events
    }

    /// The server's version, from its core info (`0.3.65`).
    pub fn server_version(&self) -> &str {
        &self.version
    }
}

impl Drop for Profiler {
    fn drop(&mut self) {
        // The loop may have ended already (server gone); then the send fails, which is fine.
        let _ = self.quit.send(());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// `struct pw_profiler_events`.
#[repr(C)]
struct ProfilerEvents {
    version: u32,
    profile: Option<unsafe extern "C" fn(*mut c_void, *const spa_sys::spa_pod)>,
}

/// What the profile callback needs; lives in a Box on the loop thread until the proxy is gone.
struct Sink {
    events: Sender<Event>,
    last_counter: Option<i64>,
    keep_raw: bool,
}

impl Sink {
    fn pod(&mut self, bytes: &[u8]) {
        if self.keep_raw {
            let _ = self.events.send(Event::RawPod(bytes.to_vec()));
        }
        match parse_profile(bytes) {
            Ok(records) => {
                for r in records {
                    if let Some(last) = self.last_counter {
                        let missed = r.info.counter.wrapping_sub(last).wrapping_sub(1);
                        if missed > 0 {
                            let _ = self.events.send(Event::Gap {
                                missed: missed as u64,
                            });
                        }
                    }
                    self.last_counter = Some(r.info.counter);
                    let _ = self.events.send(Event::Cycle(r));
                }
            }
            Err(e) => {
                let _ = self.events.send(Event::BadPod(e));
            }
        }
    }
}

unsafe extern "C" fn on_profile(data: *mut c_void, pod: *const spa_sys::spa_pod) {
    if data.is_null() || pod.is_null() {
        return;
    }
    // SAFETY: `data` is the boxed `Sink` given with the listener, alive until the proxy is
    // destroyed; the loop thread is the only one that touches it.
    let sink = unsafe { &mut *(data as *mut Sink) };
    // SAFETY: `pod` points to a valid pod for the call: an 8-byte header whose `size` counts
    // the body that follows it.
    let bytes = unsafe {
        let size = (*pod).size as usize + std::mem::size_of::<spa_sys::spa_pod>();
        std::slice::from_raw_parts(pod as *const u8, size)
    };
    sink.pod(bytes);
}

static EVENTS: ProfilerEvents = ProfilerEvents {
    version: 0,
    profile: Some(on_profile),
};

/// The bound profiler: its proxy, listener hook and sink, freed in that order.
struct Binding {
    proxy: *mut pw_sys::pw_proxy,
    _hook: Box<spa_sys::spa_hook>,
    _sink: Box<Sink>,
}

impl Binding {
    fn bind(registry: &pw::registry::RegistryRc, id: u32, sink: Sink) -> Result<Binding, Error> {
        let type_ = CString::new(PROFILER_INTERFACE).expect("no NUL inside");
        // SAFETY: the registry is alive; `bind` is the registry's method with this signature
        // (id, type, version, user data size), as the pipewire crate itself calls it.
        let proxy = unsafe {
            pw::spa::spa_interface_call_method!(
                registry.as_raw_ptr(),
                pw_sys::pw_registry_methods,
                bind,
                id,
                type_.as_ptr(),
                PROFILER_VERSION,
                0
            )
        } as *mut pw_sys::pw_proxy;
        if proxy.is_null() {
            return Err(Error::Setup(
                "binding the profiler returned no proxy".into(),
            ));
        }
        // SAFETY: spa_hook is a plain C struct for which all-zero is the unlinked state.
        let mut hook: Box<spa_sys::spa_hook> = Box::new(unsafe { std::mem::zeroed() });
        let mut sink = Box::new(sink);
        // SAFETY: `proxy` was just created; the hook and sink are boxed (stable addresses) and
        // outlive the proxy (see Drop); EVENTS is static and laid out as pw_profiler_events.
        unsafe {
            pw_sys::pw_proxy_add_object_listener(
                proxy,
                hook.as_mut(),
                &EVENTS as *const ProfilerEvents as *const c_void,
                sink.as_mut() as *mut Sink as *mut c_void,
            )
        };
        Ok(Binding {
            proxy,
            _hook: hook,
            _sink: sink,
        })
    }
}

impl Drop for Binding {
    fn drop(&mut self) {
        // SAFETY: the proxy is ours, destroyed once, before its core (dropped later by the loop
        // function); destroying it unlinks the listener, so the sink is not called afterwards.
        unsafe { pw_sys::pw_proxy_destroy(self.proxy) };
    }
}

/// Registry state on the loop thread: clients' pids and app names, and nodes waiting for theirs.
#[derive(Default)]
struct Graph {
    clients: HashMap<u32, (Option<i32>, Option<String>)>,
    nodes: HashMap<u32, (NodeInfo, Option<u32>)>,
}

fn prop(dict: Option<&pw::spa::utils::dict::DictRef>, key: &str) -> Option<String> {
    dict.and_then(|d| d.get(key)).map(str::to_owned)
}

fn run_loop(
    options: &Options,
    events: Sender<Event>,
    quit: pw::channel::Receiver<()>,
    ready: &Sender<Result<String, Error>>,
) -> Result<(), Error> {
    pw::init();
    let mainloop = pw::main_loop::MainLoopRc::new(None).map_err(|e| Error::Setup(e.to_string()))?;
    let context =
        pw::context::ContextRc::new(&mainloop, None).map_err(|e| Error::Setup(e.to_string()))?;
    // The client side needs the profiler's protocol marshal, which the module brings (pw-top
    // loads it the same way); without it binding returns no proxy.
    let module = CString::new("libpipewire-module-profiler").expect("no NUL inside");
    // SAFETY: the context is alive; the name is NUL-terminated; no args or properties.
    let loaded = unsafe {
        pw_sys::pw_context_load_module(
            context.as_raw_ptr(),
            module.as_ptr(),
            std::ptr::null(),
            std::ptr::null_mut(),
        )
    };
    if loaded.is_null() {
        return Err(Error::Setup(
            "libpipewire-module-profiler could not be loaded in this process".into(),
        ));
    }
    let props = options
        .remote
        .as_ref()
        .map(|r| pw::properties::properties! { "remote.name" => r.as_str() });
    let core = context
        .connect_rc(props)
        .map_err(|e| Error::Connect(e.to_string()))?;
    let registry = core
        .get_registry_rc()
        .map_err(|e| Error::Setup(e.to_string()))?;

    let binding: Rc<RefCell<Option<Binding>>> = Rc::new(RefCell::new(None));
    let bind_error: Rc<RefCell<Option<Error>>> = Rc::new(RefCell::new(None));
    let graph = Rc::new(RefCell::new(Graph::default()));

    // Set when the loop must end (asked to, or the server closed the connection).
    let stopped = Rc::new(Cell::new(false));
    let _quit = quit.attach(mainloop.loop_(), {
        let (mainloop, stopped) = (mainloop.clone(), stopped.clone());
        move |()| {
            stopped.set(true);
            mainloop.quit()
        }
    });

    let _registry_listener = registry
        .add_listener_local()
        .global({
            let (registry, binding, bind_error, graph, events) = (
                registry.clone(),
                binding.clone(),
                bind_error.clone(),
                graph.clone(),
                events.clone(),
            );
            let keep_raw = options.keep_raw;
            move |global| {
                let props = global.props;
                match &global.type_ {
                    pw::types::ObjectType::Profiler => {
                        if binding.borrow().is_some() {
                            return;
                        }
                        let sink = Sink {
                            events: events.clone(),
                            last_counter: None,
                            keep_raw,
                        };
                        match Binding::bind(&registry, global.id, sink) {
                            Ok(b) => *binding.borrow_mut() = Some(b),
                            Err(e) => *bind_error.borrow_mut() = Some(e),
                        }
                    }
                    pw::types::ObjectType::Client => {
                        let pid = prop(props, "application.process.id")
                            .or_else(|| prop(props, "pipewire.sec.pid"))
                            .and_then(|p| p.parse().ok());
                        let app = prop(props, "application.name");
                        let mut g = graph.borrow_mut();
                        g.clients.insert(global.id, (pid, app.clone()));
                        // Nodes announced before their client get its details now.
                        for (node, client) in g.nodes.values_mut() {
                            if *client == Some(global.id) {
                                node.pid = node.pid.or(pid);
                                node.app_name = node.app_name.clone().or(app.clone());
                                let _ = events.send(Event::Node(node.clone()));
                            }
                        }
                    }
                    pw::types::ObjectType::Node => {
                        let client: Option<u32> =
                            prop(props, "client.id").and_then(|c| c.parse().ok());
                        let mut g = graph.borrow_mut();
                        let (pid, app) = client
                            .and_then(|c| g.clients.get(&c).cloned())
                            .unwrap_or((None, None));
                        let node = NodeInfo {
                            id: global.id,
                            name: prop(props, "node.name").unwrap_or_default(),
                            app_name: app.or_else(|| prop(props, "application.name")),
                            pid,
                            media_class: prop(props, "media.class"),
                        };
                        let _ = events.send(Event::Node(node.clone()));
                        g.nodes.insert(global.id, (node, client));
                    }
                    _ => {}
                }
            }
        })
        .global_remove({
            let (graph, events) = (graph.clone(), events.clone());
            move |id| {
                let mut g = graph.borrow_mut();
                g.clients.remove(&id);
                if g.nodes.remove(&id).is_some() {
                    let _ = events.send(Event::NodeRemoved(id));
                }
            }
        })
        .register();

    // The first round trip: once the server answers it, it has listed every global.
    let listed = Rc::new(RefCell::new(false));
    let server_version: Rc<RefCell<Option<String>>> = Rc::new(RefCell::new(None));
    let pending = core.sync(0).map_err(|e| Error::Setup(e.to_string()))?;
    let _core_listener = core
        .add_listener_local()
        .info({
            let server_version = server_version.clone();
            move |info| *server_version.borrow_mut() = Some(info.version().to_owned())
        })
        .done({
            let (listed, mainloop) = (listed.clone(), mainloop.clone());
            move |id, seq| {
                if id == pw::core::PW_ID_CORE && seq == pending {
                    *listed.borrow_mut() = true;
                    mainloop.quit();
                }
            }
        })
        .error({
            let (events, mainloop, stopped) = (events.clone(), mainloop.clone(), stopped.clone());
            move |id, _seq, res, message| {
                if id == pw::core::PW_ID_CORE {
                    stopped.set(true);
                    let _ = events.send(Event::Disconnected(format!(
                        "the PipeWire server closed the connection: {message} ({})",
                        std::io::Error::from_raw_os_error(-res)
                    )));
                    mainloop.quit();
                }
            }
        })
        .register();

    mainloop.run();
    if !*listed.borrow() {
        return Err(Error::Connect(
            "the server went away before listing its objects".into(),
        ));
    }
    if let Some(e) = bind_error.borrow_mut().take() {
        return Err(e);
    }
    if binding.borrow().is_none() {
        return Err(Error::NoProfiler);
    }
    let version = server_version
        .borrow_mut()
        .take()
        .unwrap_or_else(|| "unknown".to_owned());
    let _ = ready.send(Ok(version));
    // Read in batches (READ_EVERY), each drained without blocking until nothing is left.
    let read_every = options.read_every.unwrap_or(READ_EVERY);
    while !stopped.get() {
        std::thread::sleep(read_every);
        while !stopped.get() && mainloop.loop_().iterate(pw::loop_::Timeout::None) > 0 {}
    }
    // The proxy goes before the core that owns its connection.
    binding.borrow_mut().take();
    Ok(())
}
