//! `watch` on PipeWire: the profiler's records become watch's cycles, the registry's nodes its
//! node list, and the server's process (found through the socket's peer credentials) is where
//! the driver's real-time thread lives. Runs on watch's main thread (the profiler's loop runs on
//! its own).

use crate::{Block, Event, Options, Profiler, ProfilerRecord, Status};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::mpsc::TryRecvError;
use std::time::Duration;
use xrunlab_watch::{Cycle, NodeInfo, NodeStatus, NodeTiming, Source, SourceEvent};

/// A PipeWire server watched through its profiler.
pub struct PipeWireSource {
    profiler: Profiler,
    socket: Option<PathBuf>,
    cycles: Cycles,
    /// How long [`PipeWireSource::next`] sleeps when nothing is queued: the profiler's loop
    /// thread's batch interval ([`crate::READ_EVERY`] says why). Waiting on the channel woke this
    /// thread once per record of each batch (a futex wake and a switch each, 375 a second at 128
    /// frames), where a sleep takes the whole batch at one wake-up.
    poll: Duration,
}

/// PipeWire's socket as its clients find it: `PIPEWIRE_REMOTE` (a name, or an absolute path)
/// in `PIPEWIRE_RUNTIME_DIR`, else `XDG_RUNTIME_DIR`; `pipewire-0` by default.
pub fn socket_path() -> Option<PathBuf> {
    let name = std::env::var("PIPEWIRE_REMOTE").unwrap_or_else(|_| "pipewire-0".into());
    if name.starts_with('/') {
        return Some(PathBuf::from(name));
    }
    let dir =
        std::env::var_os("PIPEWIRE_RUNTIME_DIR").or_else(|| std::env::var_os("XDG_RUNTIME_DIR"))?;
    Some(PathBuf::from(dir).join(name))
}

/// Whether a PipeWire server answers on its socket (what `--server auto` asks first).
pub fn answers() -> bool {
    socket_path().is_some_and(|p| std::os::unix::net::UnixStream::connect(p).is_ok())
}

/// The process listening on the Unix socket `path`, from the kernel's peer credentials.
fn peer_pid(path: &std::path::Path) -> Option<i32> {
    let stream = std::os::unix::net::UnixStream::connect(path).ok()?;
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: the descriptor is a connected Unix socket owned by `stream`; `cred` and `len` are
    // valid out pointers of the size given.
    let r = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (r == 0 && cred.pid > 0).then_some(cred.pid)
}

impl PipeWireSource {
    /// Connects to the server the environment names and binds its profiler, read every
    /// `read_every` (a batch: a card waits at most that long for its cycle).
    pub fn open(read_every: Duration) -> Result<PipeWireSource, crate::Error> {
        let profiler = Profiler::connect(&Options {
            read_every: Some(read_every),
            ..Options::default()
        })?;
        Ok(PipeWireSource {
            profiler,
            socket: socket_path(),
            cycles: Cycles::default(),
            poll: read_every,
        })
    }
}

fn ns(t: i64) -> u64 {
    u64::try_from(t).unwrap_or(0)
}

fn timing(b: &Block) -> NodeTiming {
    NodeTiming {
        id: u32::try_from(b.id).unwrap_or(u32::MAX),
        name: b.name.clone(),
        signal_ns: ns(b.signal),
        awake_ns: ns(b.awake),
        finish_ns: ns(b.finish),
        status: match b.status {
            Status::NotTriggered => NodeStatus::NotTriggered,
            Status::Triggered => NodeStatus::Triggered,
            Status::Awake => NodeStatus::Awake,
            Status::Finished => NodeStatus::Finished,
            Status::Inactive => NodeStatus::Inactive,
            Status::Other(v) => NodeStatus::Unknown(v),
        },
        xruns: b.xrun_count.and_then(|n| u32::try_from(n).ok()),
    }
}

/// A profiler record as watch's server-neutral cycle.
pub fn cycle(r: &ProfilerRecord) -> Cycle {
    let (num, denom) = r.clock.rate;
    Cycle {
        seq: ns(r.info.counter),
        rate: denom / num.max(1),
        quantum: u32::try_from(r.clock.duration).unwrap_or(0),
        driver: timing(&r.driver),
        followers: r.followers.iter().map(timing).collect(),
        driver_xruns: u32::try_from(r.info.xrun_count).ok(),
        // The clock's time is the one its driver was set to wake at (the timer's expiry); its
        // signal is when it really started the cycle.
        expected_start_ns: (r.clock.nsec > 0).then(|| ns(r.clock.nsec)),
    }
}

/// Profiler records made into watch's cycles in the order they come, so that a cycle's expected
/// start can also come from the cycle before it: the driver was due one period after its last
/// start, whatever the clock says.
///
/// PipeWire 1.4.2's Dummy-Driver, held off its CPU for 15 ms (an RT hog, 256 frames at 48 kHz,
/// recorded here): the profiler writes the last cycle again, its driver `Triggered` and its clock
/// already two periods on (`nsec` +10.67 ms, the driver's own stamps unchanged); then the driver
/// starts, 18 ms after its last start, and catches up with back-to-back cycles. The late start's
/// clock `nsec` is the skipped-to time, so its lateness against `nsec` alone is 4.8-12.9 ms
/// depending on where in its period the hog began, and under a period (no xrun) in 2 of 13
/// recorded spins; against its last start plus a period it is 9.99 ms in the one kept as a
/// fixture (tests/fixtures/pw-1.4.2-starved-driver.pods).
#[derive(Debug, Default)]
pub struct Cycles {
    /// The last record's counter and its driver's signal.
    previous: Option<(i64, u64)>,
}

impl Cycles {
    /// The cycle of the next record: [`cycle`], with the expected start the earlier of the
    /// clock's `nsec` and the driver's last start plus a period, when the records are
    /// consecutive (the counter one on; after a gap the last start says nothing).
    pub fn next(&mut self, r: &ProfilerRecord) -> Cycle {
        let mut c = cycle(r);
        if let Some((counter, last_start)) = self.previous {
            if r.info.counter == counter.wrapping_add(1) && last_start > 0 {
                let due = last_start.saturating_add(c.period_ns());
                c.expected_start_ns = Some(c.expected_start_ns.map_or(due, |e| e.min(due)));
            }
        }
        self.previous = Some((r.info.counter, c.driver.signal_ns));
        c
    }
}

impl Source for PipeWireSource {
    fn next(&mut self, timeout: Duration) -> Option<SourceEvent> {
        let event = match self.profiler.events().try_recv() {
            Err(TryRecvError::Empty) => {
                std::thread::sleep(timeout.min(self.poll));
                self.profiler.events().try_recv()
            }
            got => got,
        };
        match event {
            Ok(Event::Cycle(r)) => Some(SourceEvent::Cycle(self.cycles.next(&r))),
            Ok(Event::Node(n)) => Some(SourceEvent::Node(NodeInfo {
                id: n.id,
                name: n.name,
                app_name: n.app_name,
                pid: n.pid,
            })),
            Ok(Event::NodeRemoved(id)) => Some(SourceEvent::NodeRemoved(id)),
            Ok(Event::Gap { missed }) => Some(SourceEvent::Gap(missed)),
            Ok(Event::BadPod(e)) => Some(SourceEvent::Note(format!(
                "a profiler record was skipped: {e}"
            ))),
            Ok(Event::RawPod(_)) => None,
            Ok(Event::Disconnected(why)) => Some(SourceEvent::Ended(why)),
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => Some(SourceEvent::Ended(
                "the PipeWire connection's thread ended".into(),
            )),
        }
    }

    fn describe(&self) -> String {
        format!("PipeWire {} (profiler)", self.profiler.server_version())
    }

    fn server_pid(&mut self) -> Option<i32> {
        peer_pid(self.socket.as_deref()?)
    }

    fn server_name(&self) -> &str {
        "pipewire"
    }
}
