//! `xrunlab bench watch`: what watch reports and what it costs on a running server, measured with
//! culprits of our own: an xrunlab JACK client that stalls on purpose, and an RT hog that starves
//! the server's own thread ([`hog`]); runs on the main thread, the clients and watch as child
//! processes, the hog on a thread of its own.

mod hog;
mod stalls;

use crate::cli::bench::{BenchCause, WatchBenchArgs};
use crate::cli::parse::WatchServer;
use crate::Failure;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use xrunlab_results::bench_watch::{BenchWatchResult, ModeFigures, StarvedFigures, SCHEMA};
use xrunlab_results::read::read_typed;
use xrunlab_results::run::{self, RunFile};
use xrunlab_results::watch::XrunRecord;
use xrunlab_results::watch::{read_xrun_lines, KernelNote};
use xrunlab_sys::Provenance;

/// What a stop signal (Ctrl-C, SIGTERM, SIGHUP) during a mode says.
const STOPPED: &str = "bench watch stopped by a signal before its mode ended: that mode was not \
                       measured; its clients, watch and the hog were stopped, and a server thread \
                       pinned for the starved-server mode has its CPUs back";

/// How often a wait looks at the stop flag.
const POLL: Duration = Duration::from_millis(50);

/// CPU time of a child once it ends, from wait4's resource usage: seconds, and its wait status.
/// A stop signal meanwhile sends it SIGTERM (watch then writes its files and ends), waits for it
/// and gives [`STOPPED`].
fn wait_cpu(pid: i32, stop: &AtomicBool) -> Result<(f64, i32), Failure> {
    let mut status = 0;
    // SAFETY: a zeroed rusage is valid for the kernel to fill; `pid` is our child, not reaped.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let mut stopping = false;
    loop {
        let flags = if stopping { 0 } else { libc::WNOHANG };
        // SAFETY: as above.
        let rc = unsafe { libc::wait4(pid, &mut status, flags, &mut usage) };
        if rc == pid {
            break;
        }
        if rc != 0 {
            return Err(Failure::Runtime(format!(
                "waiting for watch: {}",
                std::io::Error::last_os_error()
            )));
        }
        if stop.load(Ordering::Relaxed) {
            // SAFETY: `pid` is our child, not yet reaped, so the id is still its own.
            unsafe { libc::kill(pid, libc::SIGTERM) };
            stopping = true;
        } else {
            std::thread::sleep(POLL);
        }
    }
    if stopping {
        return Err(Failure::Runtime(STOPPED.into()));
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Ok((secs(usage.ru_utime) + secs(usage.ru_stime), status))
}

/// Sleeps `d`, or less when a stop signal comes: then [`STOPPED`].
fn sleep_or_stop(d: Duration, stop: &AtomicBool) -> Result<(), Failure> {
    let end = Instant::now() + d;
    while let Some(left) = end.checked_duration_since(Instant::now()) {
        if stop.load(Ordering::Relaxed) {
            return Err(Failure::Runtime(STOPPED.into()));
        }
        std::thread::sleep(left.min(POLL));
    }
    Ok(())
}

/// A mode's client processes, ended when dropped: a mode left early (an error, a stop signal)
/// leaves none running. [`Clients::wait`] lets them end on their own first.
struct Clients(Vec<Child>);

impl Clients {
    /// Waits for each to end by itself (their runs outlast the watch by a few seconds).
    fn wait(mut self) {
        for c in &mut self.0 {
            let _ = c.wait();
        }
    }
}

impl Drop for Clients {
    fn drop(&mut self) {
        for c in &mut self.0 {
            if matches!(c.try_wait(), Ok(None)) {
                let _ = c.kill();
            }
            let _ = c.wait();
        }
    }
}

/// An xrunlab JACK client (under pw-jack on PipeWire) for as long as the watch and a second on
/// each side.
fn client(exe: &Path, args: &WatchBenchArgs, pipewire: bool, name: &str, json: &Path) -> Command {
    let secs = args.duration.as_secs_f64();
    let mut c = if pipewire {
        Command::new("pw-jack")
    } else {
        Command::new(exe)
    };
    if pipewire {
        c.arg(exe);
    }
    c.args(["run", "--device", "jack", "--jack-client", name])
        .args(["--sines", "50", "-q", "--duration"])
        .arg(format!("{}ms", (secs * 1000.0) as u64 + 3000))
        .arg("--json")
        .arg(json)
        .stdout(Stdio::null());
    if let (false, Some(s)) = (pipewire, &args.jack_server) {
        c.args(["--jack-server", s]);
    }
    c
}

/// `watch --batch` on the server for the bench's duration, its cards to `lines` and its summary
/// to `json`.
fn watch_command(
    exe: &Path,
    args: &WatchBenchArgs,
    pipewire: bool,
    lines: &Path,
    json: &Path,
) -> Command {
    let mut watch = Command::new(exe);
    watch
        .args([
            "watch",
            "--batch",
            "--server",
            if pipewire { "pipewire" } else { "jack" },
        ])
        .arg("--duration")
        .arg(format!("{}ms", args.duration.as_millis()))
        .arg("--json-lines")
        .arg(lines)
        .arg("--json")
        .arg(json)
        .stdout(Stdio::null());
    if let (false, Some(s)) = (pipewire, &args.jack_server) {
        watch.args(["--jack-server", s]);
    }
    watch
}

fn one_mode(
    args: &WatchBenchArgs,
    pipewire: bool,
    watching: bool,
    kernel: bool,
    stop: &AtomicBool,
) -> Result<ModeFigures, Failure> {
    let exe = std::env::current_exe().map_err(|e| Failure::Runtime(e.to_string()))?;
    let dir = tempfile::tempdir().map_err(|e| Failure::Runtime(e.to_string()))?;
    let (run_json, lines, json) = (
        dir.path().join("run.json"),
        dir.path().join("x.jsonl"),
        dir.path().join("w.json"),
    );
    let secs = args.duration.as_secs_f64();
    let bystander_json = dir.path().join("bystander.json");
    let client = |name: &str, json: &Path| client(&exe, args, pipewire, name, json);
    // The culprit stalls on purpose; the bystander does not, and its load shows what watching
    // costs the graph.
    let mut culprit = client("bench-culprit", &run_json);
    culprit
        .args(["--stall", "12ms", "--stall-every"])
        .arg(format!("{}ms", args.stall_every.as_millis()));
    let mut clients = Clients(vec![culprit
        .spawn()
        .map_err(|e| Failure::Runtime(format!("the culprit: {e}")))?]);
    clients.0.push(
        client("bench-bystander", &bystander_json)
            .spawn()
            .map_err(|e| Failure::Runtime(format!("the bystander: {e}")))?,
    );
    sleep_or_stop(Duration::from_secs(1), stop)?;
    let mut watch = watch_command(&exe, args, pipewire, &lines, &json);
    if !kernel {
        watch.arg("--no-kernel");
    }
    let (cpu_s, status) = if watching {
        let child = watch
            .spawn()
            .map_err(|e| Failure::Runtime(format!("watch: {e}")))?;
        wait_cpu(child.id() as i32, stop)?
    } else {
        // The baseline: the culprit alone for as long, to see what watching costs the graph.
        sleep_or_stop(args.duration, stop)?;
        std::fs::write(&lines, "").map_err(|e| Failure::Runtime(e.to_string()))?;
        (0.0, 0)
    };
    clients.wait();
    if status != 0 {
        return Err(Failure::Runtime(format!(
            "watch failed (wait status {status})"
        )));
    }
    let typed = |e: xrunlab_results::ReadError| Failure::Runtime(e.to_string());
    let records = read_xrun_lines(&lines).map_err(typed)?;
    // The baseline has no watch, so no summary: nothing lost, nothing to note.
    let kernel_events = if watching {
        xrunlab_results::watch::read_watch(&json)
            .map_err(typed)?
            .kernel_events
    } else {
        KernelNote {
            recorded: false,
            note: String::new(),
            lost: 0,
        }
    };
    let run: RunFile = read_typed(&run_json, run::SCHEMA).map_err(typed)?;
    let bystander: RunFile = read_typed(&bystander_json, run::SCHEMA).map_err(typed)?;
    // The stalls that fell inside the watch: it started about 1 s into the culprit's run.
    let stall_times: Vec<f64> = run
        .events
        .iter()
        .filter(|e| e.kind.contains("stall"))
        .map(|e| e.t_s)
        .collect();
    let inside = |t: f64| t > 1.3 && t < 1.0 + secs - 0.3;
    let induced = stall_times.iter().filter(|&&t| inside(t)).count();
    let names_culprit = |r: &XrunRecord| {
        r.card
            .xrun
            .node
            .as_ref()
            .is_some_and(|n| n.name.contains("bench-culprit"))
    };
    // Each card put on the stall it belongs to, if any (stalls.rs says why and how).
    let starts: Vec<u64> = records
        .iter()
        .map(|r| {
            r.card
                .xrun
                .rest
                .get("cycle_start_ns")
                .and_then(serde_json::Value::as_u64)
                .unwrap_or(0)
        })
        .collect();
    let matched = stalls::match_cards(&stall_times, &starts);
    let in_stalls = || {
        records
            .iter()
            .zip(&matched.stall_of_card)
            .filter(|(_, s)| s.is_some())
            .map(|(r, _)| r)
    };
    let stalls_with_card = stall_times
        .iter()
        .zip(&matched.stall_has_card)
        .filter(|(&t, &has)| inside(t) && has)
        .count();
    let with_node = records
        .iter()
        .filter(|r| r.card.xrun.node.is_some())
        .count();
    let named = records.iter().filter(|r| names_culprit(r)).count();
    let mut delays: Vec<f64> = records
        .iter()
        .map(|r| (r.reported_ns as f64 - r.card.xrun.deadline_ns as f64) / 1e6)
        .collect();
    delays.sort_by(f64::total_cmp);
    Ok(ModeFigures {
        mode: match (watching, kernel) {
            (false, _) => "not watched",
            (true, true) => "with kernel events",
            (true, false) => "without (--no-kernel)",
        }
        .to_owned(),
        watching,
        cpu_pct: cpu_s / secs * 100.0,
        induced,
        cards: records.len(),
        named,
        with_node,
        stalls_with_card: watching.then_some(stalls_with_card),
        cards_in_stalls: watching.then(|| in_stalls().count()),
        named_in_stalls: watching.then(|| in_stalls().filter(|r| names_culprit(r)).count()),
        other_cards: watching.then(|| matched.stall_of_card.iter().filter(|s| s.is_none()).count()),
        delay_p50_ms: xrunlab_stats::median_interpolated(&delays),
        delay_max_ms: delays.last().copied(),
        lost: kernel_events.lost,
        kernel_note: kernel_events.note,
        bystander_load_p50_pct: Some(bystander.summary.load_pct.p50),
        bystander_load_p99_pct: Some(bystander.summary.load_pct.p99),
    })
}

/// The client-runs-long modes (not watched, without and with kernel events), each printed as it
/// ends.
fn client_modes(
    args: &WatchBenchArgs,
    pipewire: bool,
    stop: &AtomicBool,
) -> Result<Vec<ModeFigures>, Failure> {
    println!(
        "watch on {} for {} per mode; the culprit (JACK client \"bench-culprit\") stalls 12 ms every {}",
        if pipewire { "PipeWire" } else { "JACK" },
        humantime::format_duration(args.duration),
        humantime::format_duration(args.stall_every)
    );
    println!(
        "{:<22} {:>7} {:>8} {:>7} {:>6} {:>9} {:>7} {:>6} {:>10} {:>10} {:>5}  bystander load p50/p99",
        "mode",
        "CPU %",
        "induced",
        "recall",
        "cards",
        "in stalls",
        "right %",
        "other",
        "delay p50",
        "delay max",
        "lost"
    );
    let mut modes = Vec::new();
    for (watching, kernel) in [(false, false), (true, false), (true, true)] {
        let f = one_mode(args, pipewire, watching, kernel, stop)?;
        let share = |n: Option<usize>, of: usize| match n {
            Some(n) if of > 0 => format!("{:.1}", n as f64 * 100.0 / of as f64),
            _ => "-".to_owned(),
        };
        let recall = share(f.stalls_with_card, f.induced);
        let right = share(f.named_in_stalls, f.cards_in_stalls.unwrap_or(0));
        let count = |n: Option<usize>| n.map_or("-".to_owned(), |n| n.to_string());
        let pct = |p: Option<f64>| p.map_or("-".to_owned(), |p| format!("{p:.2}"));
        let ms = |p: Option<f64>| p.map_or("-".to_owned(), |p| format!("{p:.0}ms"));
        let load = format!(
            "{}/{} %",
            pct(f.bystander_load_p50_pct),
            pct(f.bystander_load_p99_pct)
        );
        if watching {
            println!(
                "{:<22} {:>7.2} {:>8} {:>7} {:>6} {:>9} {:>7} {:>6} {:>10} {:>10} {:>5}  {load}",
                f.mode,
                f.cpu_pct,
                f.induced,
                recall,
                f.cards,
                count(f.cards_in_stalls),
                right,
                count(f.other_cards),
                ms(f.delay_p50_ms),
                ms(f.delay_max_ms),
                f.lost,
            );
        } else {
            println!(
                "{:<22} {:>7} {:>8} {:>7} {:>6} {:>9} {:>7} {:>6} {:>10} {:>10} {:>5}  {load}",
                f.mode, "-", f.induced, "-", "-", "-", "-", "-", "-", "-", "-"
            );
        }
        if kernel && f.kernel_note != "recorded" {
            println!("  kernel events were not recorded: {}", f.kernel_note);
        }
        modes.push(f);
    }
    println!(
        "CPU %: watch's own user+system time over the watch, of one CPU. induced: the culprit's \
         stalls inside the watch; recall: the share of them with a card; cards: xruns reported; \
         in stalls: cards of xruns during a stall (10 ms before it to 30 ms after; the culprit's \
         clock is put on watch's by the offset that puts the most stalls on a card); right: of \
         those, the share naming the culprit; other: cards outside every stall, the machine's own \
         xruns (a loaded machine makes some; watch is right to card them). delay: \
         from the xrun's deadline to its card. bystander load: a second client's render \
         time per period (its BUSY), which does not stall, not watched and watched: watch's \
         effect on the graph (one run each: a difference within this machine's 10-20 % \
         run-to-run noise shows nothing)."
    );
    Ok(modes)
}

/// The starved-server mode's figures, as a table.
fn print_starved(f: &StarvedFigures) {
    let share = |n: usize, of: usize| {
        if of == 0 {
            "-".to_owned()
        } else {
            format!("{:.0} %", n as f64 * 100.0 / of as f64)
        }
    };
    println!(
        "\nstarved server: {} pinned to CPU {}; a SCHED_FIFO 95 hog ({}) spins {:.0} ms every {:.0} ms there",
        f.server_thread,
        f.cpu,
        hog::HOG_COMM,
        f.spin_ms,
        f.every_ms
    );
    println!(
        "{:>7} {:>6} {:>8} {:>6} {:>16} {:>12} {:>16} {:>5}",
        "CPU %",
        "spins",
        "recall",
        "cards",
        "cards in spins",
        "right root",
        "on calm client",
        "lost"
    );
    // No verdict where the spins could not starve the graph.
    let judged = |text: String| match f.spins_can_starve() {
        true => text,
        false => "-".to_owned(),
    };
    println!(
        "{:>7.2} {:>6} {:>8} {:>6} {:>16} {:>12} {:>16} {:>5}",
        f.cpu_pct,
        f.spins,
        judged(share(f.spins_with_card, f.spins)),
        f.cards,
        f.cards_in_spins,
        judged(share(f.right_root, f.cards_in_spins)),
        f.on_calm,
        f.lost
    );
    match f.period_ms {
        Some(p) if p >= f.spin_ms => println!(
            "  the graph's period was about {p:.1} ms, no shorter than the {:.0} ms spin: the server's \
             thread catches up within it, so no xrun is expected and recall and right root are \
             not judged; run the graph at a shorter period (a quantum of 256 at 48 kHz: \
             PIPEWIRE_QUANTUM=256/48000 for a client, or jackd -p 256)",
            f.spin_ms
        ),
        Some(p) => println!("  the graph's period: about {p:.2} ms"),
        None => println!("  the graph ran no cycle while watched: nothing is judged"),
    }
    if f.kernel_note != "recorded" {
        println!("  kernel events were not recorded: {}", f.kernel_note);
    }
    if !f.not_naming_hog.is_empty() {
        println!("cards during spins that do not name the hog:");
        for verdict in &f.not_naming_hog {
            println!("  {verdict}");
        }
    }
    println!(
        "recall: spins with a card during them (30 ms before the spin to 40 ms after it); right \
         root: of the cards during spins, those whose root is the server's thread woken late \
         behind the hog (driver_woke_late naming {}); on calm client: cards during spins that \
         blame the calm client, which never runs long.",
        hog::HOG_COMM
    );
}

/// Whether a card's xrun began during a spin: from 30 ms before its start to 40 ms after its
/// end (the cycles the spin delays, and the one that catches up).
fn during_spin(r: &XrunRecord, starts: &[u64], spin_ns: u64) -> Option<u64> {
    let t = r
        .card
        .xrun
        .rest
        .get("cycle_start_ns")
        .and_then(serde_json::Value::as_u64)?;
    starts
        .iter()
        .copied()
        .find(|&s| t + 30_000_000 >= s && t <= s + spin_ns + 40_000_000)
}

/// Whether a card's root is the server's thread woken late behind the hog.
fn names_hog(r: &XrunRecord, hog_tid: i32) -> bool {
    let root = r.card.rest.get("root");
    let culprit = root.and_then(|root| root.pointer("/account/main_culprit"));
    r.card.kind == "driver_woke_late"
        && root
            .and_then(|root| root.get("role"))
            .and_then(|v| v.as_str())
            == Some("driver")
        && culprit.is_some_and(|c| {
            c.get("pid").and_then(serde_json::Value::as_i64) == Some(i64::from(hog_tid))
                || c.get("name").and_then(|n| n.as_str()) == Some(hog::HOG_COMM)
        })
}

/// Whether a card blames the node `name` as the root of its path.
fn blames_node(r: &XrunRecord, name: &str) -> bool {
    let root = r
        .card
        .rest
        .get("path")
        .and_then(|p| p.as_array())
        .and_then(|p| p.last());
    root.is_some_and(|root| {
        root.get("role").and_then(|v| v.as_str()) == Some("node")
            && root
                .get("name")
                .and_then(|v| v.as_str())
                .is_some_and(|n| n.contains(name))
    })
}

/// The starved-server mode: one calm client, the server's real-time thread pinned to the last
/// online CPU with the hog, watch with the kernel's events.
fn starved_mode(
    args: &WatchBenchArgs,
    pipewire: bool,
    stop: &Arc<AtomicBool>,
) -> Result<StarvedFigures, Failure> {
    const SPIN: Duration = Duration::from_millis(15);
    const EVERY: Duration = Duration::from_millis(700);
    // The first spin once watch's tracing runs; none in its last half second.
    const FIRST: Duration = Duration::from_millis(1500);
    let secs = args.duration.as_secs_f64();
    let spins = ((secs - FIRST.as_secs_f64() - 0.5) / EVERY.as_secs_f64()).floor() + 1.0;
    if spins < 1.0 {
        return Err(Failure::Usage(format!(
            "--duration {} leaves no room for a spin: the starved-server mode needs 2s or more",
            humantime::format_duration(args.duration)
        )));
    }
    let exe = std::env::current_exe().map_err(|e| Failure::Runtime(e.to_string()))?;
    let dir = tempfile::tempdir().map_err(|e| Failure::Runtime(e.to_string()))?;
    let (calm_json, lines, json) = (
        dir.path().join("calm.json"),
        dir.path().join("x.jsonl"),
        dir.path().join("w.json"),
    );
    let server = if pipewire {
        WatchServer::Pipewire
    } else {
        WatchServer::Jack
    };
    let pid = crate::watch_source::open(
        server,
        args.jack_server.as_deref(),
        crate::watch_source::LIVE,
    )
    .map_err(Failure::Runtime)?
    .server_pid()
    .ok_or_else(|| Failure::Runtime("the server's process was not found".into()))?;
    let thread = hog::server_thread(pid).map_err(Failure::Runtime)?;
    let cpu = *xrunlab_sys::cpu_set(xrunlab_sys::default_sys_root())
        .last()
        .ok_or_else(|| Failure::Runtime("no online CPU is listed".into()))?;
    let calm = Clients(vec![client(&exe, args, pipewire, "bench-calm", &calm_json)
        .spawn()
        .map_err(|e| Failure::Runtime(format!("the calm client: {e}")))?]);
    sleep_or_stop(Duration::from_secs(1), stop)?;
    // Dropped on every way out of here (a stop signal included), which gives the server's
    // thread its CPUs back.
    let pinned = hog::pin(thread.tid, cpu)?;
    let hog = hog::start(cpu, SPIN, EVERY, FIRST, spins as usize, stop.clone())?;
    let watched = watch_command(&exe, args, pipewire, &lines, &json)
        .spawn()
        .map_err(|e| Failure::Runtime(format!("watch: {e}")));
    let watched = watched.and_then(|child| wait_cpu(child.id() as i32, stop));
    let spun = hog.join();
    drop(pinned);
    let (cpu_s, status) = watched?;
    calm.wait();
    if status != 0 {
        return Err(Failure::Runtime(format!(
            "watch failed (wait status {status})"
        )));
    }
    let typed = |e: xrunlab_results::ReadError| Failure::Runtime(e.to_string());
    let records = read_xrun_lines(&lines).map_err(typed)?;
    let summary = xrunlab_results::watch::read_watch(&json).map_err(typed)?;
    let spin_ns = SPIN.as_nanos() as u64;
    let in_spins: Vec<(&XrunRecord, u64)> = records
        .iter()
        .filter_map(|r| during_spin(r, &spun.starts_ns, spin_ns).map(|s| (r, s)))
        .collect();
    let mut seen: Vec<u64> = in_spins.iter().map(|(_, s)| *s).collect();
    seen.dedup();
    Ok(StarvedFigures {
        server_thread: format!(
            "{} (pid {}, tid {}, {})",
            thread.comm, thread.pid, thread.tid, thread.policy
        ),
        cpu,
        spin_ms: SPIN.as_secs_f64() * 1e3,
        every_ms: EVERY.as_secs_f64() * 1e3,
        spins: spun.starts_ns.len(),
        spins_with_card: seen.len(),
        cards: records.len(),
        cards_in_spins: in_spins.len(),
        right_root: in_spins
            .iter()
            .filter(|(r, _)| names_hog(r, spun.tid))
            .count(),
        on_calm: in_spins
            .iter()
            .filter(|(r, _)| blames_node(r, "bench-calm"))
            .count(),
        not_naming_hog: in_spins
            .iter()
            .filter(|(r, _)| !names_hog(r, spun.tid))
            .map(|(r, _)| r.verdict.clone())
            .collect(),
        cpu_pct: cpu_s / secs * 100.0,
        lost: summary.kernel_events.lost,
        kernel_note: summary.kernel_events.note,
        period_ms: (summary.summary.cycles > 0).then(|| secs * 1e3 / summary.summary.cycles as f64),
    })
}

/// Runs `xrunlab bench watch`.
pub fn bench(args: &WatchBenchArgs) -> Result<(), Failure> {
    if let Some(p) = &args.json {
        crate::files::check_writable("--json", p)?;
    }
    let mut provenance = Provenance::collect(
        env!("CARGO_PKG_VERSION"),
        xrunlab_sys::default_proc_root(),
        xrunlab_sys::default_sys_root(),
    );
    let pipewire = crate::watch_source::is_pipewire(args.server);
    // Handled, not the default exit: a mode stopped early ends its clients and hog and gives a
    // pinned server thread its CPUs back.
    let stop = crate::signals::stop_flag().map_err(Failure::Runtime)?;
    let modes = if args.cause == BenchCause::Server {
        Vec::new()
    } else {
        client_modes(args, pipewire, &stop)?
    };
    let (starved, starved_note) = if args.cause == BenchCause::Client {
        (None, String::new())
    } else {
        match starved_mode(args, pipewire, &stop) {
            Ok(f) => {
                print_starved(&f);
                (Some(f), String::new())
            }
            // Asked for with the other mode: say why and keep what was measured.
            Err(Failure::Runtime(why))
                if args.cause == BenchCause::Both && !stop.load(Ordering::Relaxed) =>
            {
                println!("\nstarved-server mode not run: {why}");
                (None, why)
            }
            Err(e) => return Err(e),
        }
    };
    if let Some(p) = &args.json {
        provenance.finish();
        let result = BenchWatchResult {
            schema: SCHEMA.to_owned(),
            provenance,
            server: if pipewire { "PipeWire" } else { "JACK" }.to_owned(),
            duration_s: args.duration.as_secs_f64(),
            stall_every_s: args.stall_every.as_secs_f64(),
            modes,
            starved,
            starved_note,
        };
        xrunlab_results::write::write_json(p, &result)?;
    }
    Ok(())
}
