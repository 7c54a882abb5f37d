//! `watch` on JACK2: a passive client for xruns and the client list; the clients' processes and
//! real-time threads from procfs, for rebuilding their timing from the kernel's wake chain, and
//! the server's own process thread, which runs the driver. Runs on watch's main thread
//! (libjack's notification thread only feeds a channel).

use crate::{procs, JackEvent, JackWatch};
use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;
use xrunlab_watch::jack_chain::Period;
use xrunlab_watch::{mapping, NodeInfo, Source, SourceEvent, WakeChain};

/// A JACK2 server watched by a passive client.
pub struct JackSource {
    watch: JackWatch,
    events: Receiver<JackEvent>,
    server: String,
    /// Client name → (node id, pid); ids are watch's own, stable for a name.
    clients: BTreeMap<String, (u32, Option<i32>)>,
    next_id: u32,
    pending: VecDeque<SourceEvent>,
    /// The server's frame clock when cycles were last counted, and frames short of a period.
    frame_mark: (u32, u64),
}

/// Connects to `server` (or JACK_DEFAULT_SERVER, or `default`) without joining its graph.
pub fn open(server: Option<&str>) -> Result<JackSource, String> {
    let (watch, events) = JackWatch::open("xrunlab-watch", server).map_err(|e| e.to_string())?;
    let name = server
        .map(str::to_owned)
        .or_else(|| std::env::var("JACK_DEFAULT_SERVER").ok())
        .unwrap_or_else(|| "default".into());
    let frame_mark = (watch.last_frame_time(), 0);
    let mut jack = JackSource {
        frame_mark,
        watch,
        events,
        server: name,
        clients: BTreeMap::new(),
        next_id: 1,
        pending: VecDeque::new(),
    };
    jack.refresh();
    Ok(jack)
}

impl JackSource {
    /// Re-reads the client list and their processes; queues what changed.
    fn refresh(&mut self) {
        let proc_root = Path::new("/proc");
        let names = self.watch.clients();
        let server_pid = procs::find_server(proc_root, &self.server).map(|p| p.pid);
        let mut except = vec![std::process::id() as i32];
        except.extend(server_pid);
        let users = procs::client_processes(proc_root, &self.server, &except);
        let paired = procs::match_clients(&names, &users);
        let gone: Vec<String> = self
            .clients
            .keys()
            .filter(|n| !names.contains(n))
            .cloned()
            .collect();
        for name in gone {
            if let Some((id, _)) = self.clients.remove(&name) {
                self.pending.push_back(SourceEvent::NodeRemoved(id));
            }
        }
        for name in names.iter().filter(|n| *n != "system") {
            let pid = paired.get(name).map(|p| p.0);
            let id = match self.clients.get(name) {
                Some((_, old)) if *old == pid => continue,
                Some((id, _)) => *id,
                None => {
                    self.next_id += 1;
                    self.next_id
                }
            };
            self.clients.insert(name.clone(), (id, pid));
            self.pending.push_back(SourceEvent::Node(NodeInfo {
                id,
                name: name.clone(),
                app_name: None,
                pid,
            }));
        }
    }
}

impl Source for JackSource {
    fn next(&mut self, timeout: Duration) -> Option<SourceEvent> {
        if let Some(e) = self.pending.pop_front() {
            return Some(e);
        }
        match self.events.recv_timeout(timeout) {
            Ok(JackEvent::Xrun { at_ns }) => Some(SourceEvent::ServerXrun(at_ns)),
            Ok(JackEvent::GraphChanged) => {
                self.refresh();
                self.pending.pop_front()
            }
            Ok(JackEvent::Shutdown { reason }) => Some(SourceEvent::Ended(format!(
                "the JACK server \"{}\" shut down: {reason}",
                self.server
            ))),
            Ok(JackEvent::ClockStopped { silence }) => Some(SourceEvent::Ended(format!(
                "the JACK server \"{}\" stopped running cycles: its clock has not moved for \
                 {:.1} s (it died or hung; PipeWire's libjack does not report a server's death)",
                self.server,
                silence.as_secs_f64()
            ))),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => Some(SourceEvent::Ended(
                "the JACK client's notifications stopped".into(),
            )),
        }
    }

    fn describe(&self) -> String {
        format!("JACK server \"{}\"", self.server)
    }

    fn reports_timing(&self) -> bool {
        false
    }

    fn server_pid(&mut self) -> Option<i32> {
        procs::find_server(Path::new("/proc"), &self.server).map(|p| p.pid)
    }

    fn server_name(&self) -> &str {
        "jackd"
    }

    fn cycles_run(&mut self) -> Option<u64> {
        let now = self.watch.last_frame_time();
        let (before, rest) = self.frame_mark;
        let frames = u64::from(now.wrapping_sub(before)) + rest;
        let period = u64::from(self.watch.buffer_size().max(1));
        self.frame_mark = (now, frames % period);
        Some(frames / period)
    }

    fn chain(&mut self) -> Option<WakeChain> {
        let proc_root = Path::new("/proc");
        let server = procs::find_server(proc_root, &self.server)?;
        // The server's real-time thread runs the driver: its highest-priority one.
        let server_tid = mapping::top_rt_thread(proc_root, server.pid)?.tid;
        let clients = self
            .clients
            .iter()
            .filter_map(|(name, (id, pid))| {
                let tids: Vec<i32> = mapping::rt_threads(proc_root, (*pid)?)
                    .into_iter()
                    .map(|t| t.tid)
                    .collect();
                (!tids.is_empty()).then(|| (*id, name.clone(), tids))
            })
            .collect();
        Some(WakeChain {
            server_pid: server.pid,
            server_tid,
            clients,
            period: Period {
                frames: self.watch.buffer_size(),
                rate: self.watch.sample_rate(),
            },
        })
    }
}
