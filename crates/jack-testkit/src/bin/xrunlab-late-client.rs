//! A JACK client for tests that runs long on purpose: every Nth process callback it busy-waits
//! past the quantum, so the server counts an xrun that `xrunlab watch` must blame on this client.
//! The process callback runs on JACK's real-time thread; `main` prints from its own thread.
//!
//! Usage: `xrunlab-late-client NAME EVERY BUSY_US [SECONDS]` (under `pw-jack` for PipeWire).
//! EVERY is a cycle count, or `MIN-MAX` for stalls at irregular times: the gap to the next one is
//! drawn anew each time from MIN..=MAX cycles (a fixed-seed generator, so a run can be repeated). Its
//! ports are `NAME:in` and `NAME:out`: connecting one client's `out` to another's `in` makes a
//! serial chain.
//! It prints `tid TID` once its process thread has run, then `late NS` (CLOCK_MONOTONIC) for each
//! cycle it made long, so a test can match the xruns it induced with the ones reported, and
//! `xrun NS` for each xrun the server told its clients of (JACK's xrun callback, on the client's
//! notification thread), so a test can hold what a watcher reports to what the server counted.
//!
//! Real-time rules for the callback: no allocation, lock, print or blocking; it only spins,
//! stores atomics and pushes into a ring allocated before activation.

use jack::{AudioIn, AudioOut, Client, ClientOptions, Control, ProcessHandler, ProcessScope};
use std::io::Write;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

struct Late {
    /// Unread: it is there so that another client's output can feed this one (a serial chain,
    /// which JACK runs in order).
    _input: jack::Port<AudioIn>,
    out: jack::Port<AudioOut>,
    every: Every,
    /// The cycle of the next long run.
    next: u64,
    busy_ns: u64,
    cycle: u64,
    tid: Arc<AtomicI32>,
    late: rtrb::Producer<u64>,
}

/// The server's xrun callbacks, stamped on the client's notification thread (not a real-time
/// one: a channel's send may allocate there).
struct Xruns(std::sync::mpsc::Sender<u64>);

impl jack::NotificationHandler for Xruns {
    fn xrun(&mut self, _: &Client) -> Control {
        let _ = self.0.send(monotonic_ns());
        Control::Continue
    }
}

impl ProcessHandler for Late {
    fn process(&mut self, _: &Client, ps: &ProcessScope) -> Control {
        if self.cycle == 0 {
            // SAFETY: gettid has no preconditions.
            let tid = unsafe { libc::gettid() };
            self.tid.store(tid, Ordering::Release);
        }
        self.cycle += 1;
        self.out.as_mut_slice(ps).fill(0.0);
        if self.cycle == self.next {
            self.next += self.every.gap();
            let start = monotonic_ns();
            while monotonic_ns() - start < self.busy_ns {
                std::hint::spin_loop();
            }
            // A full ring drops the stamp; the test then sees fewer induced xruns listed, not a stall.
            let _ = self.late.push(start);
        }
        Control::Continue
    }
}

/// The gaps between long runs, in cycles.
struct Every {
    min: u64,
    max: u64,
    /// xorshift64 state: no allocation, no lock, fine on the process thread.
    state: u64,
}

impl Every {
    fn parse(text: &str) -> Option<Every> {
        let (min, max) = match text.split_once('-') {
            Some((a, b)) => (a.parse().ok()?, b.parse().ok()?),
            None => {
                let n = text.parse().ok()?;
                (n, n)
            }
        };
        (min > 0 && min <= max).then_some(Every {
            min,
            max,
            state: 0x9e37_79b9_7f4a_7c15,
        })
    }

    fn gap(&mut self) -> u64 {
        if self.min == self.max {
            return self.min;
        }
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        self.min + self.state % (self.max - self.min + 1)
    }
}

fn usage() -> ! {
    eprintln!("usage: xrunlab-late-client NAME EVERY|MIN-MAX BUSY_US [SECONDS]");
    std::process::exit(2)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !(3..=4).contains(&args.len()) {
        usage();
    }
    let name = &args[0];
    let mut every = Every::parse(&args[1]).unwrap_or_else(|| usage());
    let next = every.gap();
    let busy_us: u64 = args[2].parse().unwrap_or_else(|_| usage());
    let seconds: f64 = args
        .get(3)
        .map(|s| s.parse().unwrap_or_else(|_| usage()))
        .unwrap_or(f64::INFINITY);
    let (client, _) = Client::new(name, ClientOptions::NO_START_SERVER).unwrap_or_else(|e| {
        eprintln!("xrunlab-late-client: no JACK server: {e}");
        std::process::exit(1)
    });
    let out = client
        .register_port("out", AudioOut::default())
        .expect("register port");
    let input = client
        .register_port("in", AudioIn::default())
        .expect("register port");
    let tid = Arc::new(AtomicI32::new(0));
    let (producer, mut consumer) = rtrb::RingBuffer::new(4096);
    let handler = Late {
        _input: input,
        out,
        every,
        next,
        busy_ns: busy_us * 1000,
        cycle: 0,
        tid: tid.clone(),
        late: producer,
    };
    let (xrun_sender, xruns) = std::sync::mpsc::channel();
    let active = client
        .activate_async(Xruns(xrun_sender), handler)
        .expect("activate");
    let t0 = Instant::now();
    let mut told_tid = false;
    let mut stdout = std::io::stdout();
    // A reader that went away (a test that has seen enough) ends the client quietly.
    let mut tell = |line: String| writeln!(stdout, "{line}").is_ok();
    while t0.elapsed().as_secs_f64() < seconds {
        std::thread::sleep(Duration::from_millis(20));
        let t = tid.load(Ordering::Acquire);
        if !told_tid && t != 0 {
            told_tid = true;
            if !tell(format!("tid {t}")) {
                break;
            }
        }
        while let Ok(ns) = consumer.pop() {
            if !tell(format!("late {ns}")) {
                break;
            }
        }
        // Only after `tid`, which readers expect first; until then the stamps wait in the channel.
        if told_tid {
            while let Ok(ns) = xruns.try_recv() {
                if !tell(format!("xrun {ns}")) {
                    break;
                }
            }
        }
    }
    drop(active);
}
