//! `bench watch`'s starved-server mode: the audio server's own real-time thread pinned to one CPU
//! for the mode (its affinity put back after), and a SCHED_FIFO 95 thread of this process spinning
//! there at a steady interval, so that the server's thread, not a client, is what runs late. The
//! hog runs on a thread of its own, started and joined by the main thread.

use crate::Failure;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

/// The hog's sleep between spins is cut into steps of this, ns: a stop signal ends it within one.
const STEP_NS: u64 = 50_000_000;

/// The hog thread's name (its comm), by which a card names it.
pub const HOG_COMM: &str = "xrunlab-hog";

/// The server's real-time thread: the highest-priority SCHED_FIFO/RR thread of its process.
#[derive(Debug, Clone)]
pub struct ServerThread {
    /// The server's process.
    pub pid: i32,
    /// The thread.
    pub tid: i32,
    /// Its name.
    pub comm: String,
    /// `SCHED_FIFO 88`...
    pub policy: String,
}

/// Finds the real-time thread of the server whose process is `pid`, or says why there is none.
pub fn server_thread(pid: i32) -> Result<ServerThread, String> {
    xrunlab_watch::mapping::top_rt_thread(Path::new("/proc"), pid)
        .map(|t| ServerThread {
            pid,
            tid: t.tid,
            comm: t.comm,
            policy: t.policy,
        })
        .ok_or_else(|| {
            format!(
                "the server (pid {pid}) has no real-time thread to starve: it runs without \
                 SCHED_FIFO (give it real-time rights: `xrunlab doctor`)"
            )
        })
}

fn cpu_set_of(cpu: usize) -> libc::cpu_set_t {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; the caller keeps `cpu` below
    // CPU_SETSIZE (checked in `pin`).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        set
    }
}

/// A thread's affinity changed for the mode; dropping it puts the old one back.
pub struct Pinned {
    tid: i32,
    old: libc::cpu_set_t,
}

/// Pins thread `tid` to `cpu` until the returned guard is dropped.
pub fn pin(tid: i32, cpu: usize) -> Result<Pinned, Failure> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(Failure::Runtime(format!("CPU {cpu} is past CPU_SETSIZE")));
    }
    // SAFETY: a zeroed cpu_set_t is valid for the kernel to fill; the size is its own.
    let mut old: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: `old` is a valid, writable cpu_set_t of `size` bytes.
    if unsafe { libc::sched_getaffinity(tid, size, &mut old) } != 0 {
        return Err(Failure::Runtime(format!(
            "reading the server thread's (tid {tid}) CPUs: {}",
            std::io::Error::last_os_error()
        )));
    }
    let set = cpu_set_of(cpu);
    // SAFETY: `set` is a valid cpu_set_t of `size` bytes.
    if unsafe { libc::sched_setaffinity(tid, size, &set) } != 0 {
        return Err(Failure::Runtime(format!(
            "pinning the server's thread (tid {tid}) to CPU {cpu}: {} (the starved-server mode \
             needs root or CAP_SYS_NICE)",
            std::io::Error::last_os_error()
        )));
    }
    Ok(Pinned { tid, old })
}

impl Drop for Pinned {
    fn drop(&mut self) {
        // SAFETY: `old` is the valid set read in `pin`. A thread gone since (the server
        // stopped) fails with ESRCH, which leaves nothing to restore.
        unsafe {
            libc::sched_setaffinity(self.tid, std::mem::size_of::<libc::cpu_set_t>(), &self.old)
        };
    }
}

/// What the hog did: its thread id and each spin's start (CLOCK_MONOTONIC ns, the clock of the
/// cards' stamps).
#[derive(Debug, Clone, Default)]
pub struct Spins {
    /// The hog thread.
    pub tid: i32,
    /// Each spin's start, ns.
    pub starts_ns: Vec<u64>,
}

/// A running hog; [`Hog::join`] waits for its last spin.
pub struct Hog {
    handle: JoinHandle<Spins>,
}

impl Hog {
    /// Its spins, once it has ended.
    pub fn join(self) -> Spins {
        self.handle.join().unwrap_or_default()
    }
}

/// Starts a thread pinned to `cpu` at SCHED_FIFO 95 that spins `spin` every `every` (on an
/// absolute schedule), its first spin `first` from now, for `spins` spins or until `stop` is set
/// (within 50 ms, a spin under way cut short); an error says why
/// the kernel refused the priority or the CPU.
pub fn start(
    cpu: usize,
    spin: Duration,
    every: Duration,
    first: Duration,
    spins: usize,
    stop: Arc<AtomicBool>,
) -> Result<Hog, Failure> {
    let (ready_tx, ready) = mpsc::channel::<Result<(), String>>();
    let handle = std::thread::Builder::new()
        .name(HOG_COMM.to_owned())
        .spawn(move || {
            let tid = xrunlab_sys::sched::gettid();
            let set = cpu_set_of(cpu);
            let param = libc::sched_param { sched_priority: 95 };
            // SAFETY: `set` is a valid cpu_set_t; `param` a valid sched_param; 0 is this thread.
            let refused = unsafe {
                if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                    Some(format!("pinning the hog to CPU {cpu}"))
                } else if libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) != 0 {
                    Some("SCHED_FIFO 95 for the hog".to_owned())
                } else {
                    None
                }
            };
            if let Some(what) = refused {
                let e = std::io::Error::last_os_error();
                let _ = ready_tx.send(Err(format!(
                    "{what}: {e} (the starved-server mode needs root or CAP_SYS_NICE)"
                )));
                return Spins::default();
            }
            let _ = ready_tx.send(Ok(()));
            let mut out = Spins {
                tid,
                starts_ns: Vec::with_capacity(spins),
            };
            let mut next = xrunlab_engine::rt::clock::now_ns() + first.as_nanos() as u64;
            for _ in 0..spins {
                // Asleep until the next spin in short steps, to see a stop signal soon.
                while !stop.load(Ordering::Relaxed) {
                    let now = xrunlab_engine::rt::clock::now_ns();
                    if now + STEP_NS >= next {
                        break;
                    }
                    std::thread::sleep(Duration::from_nanos(STEP_NS));
                }
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let ts = libc::timespec {
                    tv_sec: (next / 1_000_000_000) as libc::time_t,
                    tv_nsec: (next % 1_000_000_000) as libc::c_long,
                };
                // SAFETY: `ts` is a valid timespec; the remainder may be null with TIMER_ABSTIME.
                unsafe {
                    libc::clock_nanosleep(
                        libc::CLOCK_MONOTONIC,
                        libc::TIMER_ABSTIME,
                        &ts,
                        std::ptr::null_mut(),
                    )
                };
                let start = xrunlab_engine::rt::clock::now_ns();
                out.starts_ns.push(start);
                let end = start + spin.as_nanos() as u64;
                while xrunlab_engine::rt::clock::now_ns() < end && !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
                next += every.as_nanos() as u64;
            }
            out
        })
        .map_err(|e| Failure::Runtime(format!("the hog thread: {e}")))?;
    match ready.recv() {
        Ok(Ok(())) => Ok(Hog { handle }),
        Ok(Err(why)) => {
            let _ = handle.join();
            Err(Failure::Runtime(why))
        }
        Err(_) => Err(Failure::Runtime("the hog thread ended at once".into())),
    }
}
