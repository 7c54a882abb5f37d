//! `xrunlab watch` end to end, on a real PipeWire daemon (dummy driver, client under pw-jack) and
//! a real `jackd -d dummy`: a client that runs long on purpose, a SCHED_FIFO hog on a client's
//! CPU, and a clean run. Runs the binary from the test thread; the tests take turns (they share
//! two CPUs and pin threads to them).
#![cfg(all(feature = "jack", feature = "pipewire"))]

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use xrunlab_jack_testkit::{late_client, take_turn, PipeWireBuild, TestPipeWire, TestServer};
use xrunlab_results::bench_record::read_bench_record;
use xrunlab_results::bench_watch::read_bench_watch;
use xrunlab_results::watch::{parse_xrun_lines, read_watch, WatchResult};
use xrunlab_testkit::{reap, RtHog};

const PERIOD_NS: u64 = 5_333_333; // 256 frames at 48 kHz

fn now_ns() -> u64 {
    xrunlab_engine::rt::clock::now_ns()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("xrunlab-watch-{name}-{}", std::process::id()));
    // Empty: a test that runs on two PipeWire builds must not read the first one's files.
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// Kills the child when dropped, also when the test fails.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A running late client: its RT thread, and the CLOCK_MONOTONIC times of its overruns and of
/// the xruns its server told it of so far.
struct Client {
    _child: Reaped,
    tid: i32,
    late: mpsc::Receiver<u64>,
    xruns: mpsc::Receiver<u64>,
}

impl Client {
    /// How many xruns the server told this client of between `from` and `to` (CLOCK_MONOTONIC
    /// ns), waiting up to half a second for the client's last lines.
    fn server_xruns_between(&self, from: u64, to: u64) -> usize {
        let mut n = 0;
        while let Ok(ns) = self.xruns.recv_timeout(Duration::from_millis(500)) {
            if (from..=to).contains(&ns) {
                n += 1;
            }
            if ns > to {
                break;
            }
        }
        n
    }
}

fn start_client(mut cmd: Command) -> Client {
    let mut child = cmd
        .stdout(Stdio::piped())
        .spawn()
        .expect("late client starts");
    let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
    let child = Reaped(child);
    let first = lines.next().and_then(Result::ok).unwrap_or_default();
    let tid = first
        .strip_prefix("tid ")
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("the late client never ran: {first:?}"));
    let (tx, late) = mpsc::channel();
    let (xrun_tx, xruns) = mpsc::channel();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            if let Some(ns) = line.strip_prefix("late ").and_then(|n| n.parse().ok()) {
                let _ = tx.send(ns);
            } else if let Some(ns) = line.strip_prefix("xrun ").and_then(|n| n.parse().ok()) {
                let _ = xrun_tx.send(ns);
            }
        }
    });
    Client {
        _child: child,
        tid,
        late,
        xruns,
    }
}

/// `xrunlab watch ARGS --batch --json-lines F --json J`; the output and both files' contents.
fn watch(args: &[&str], env: &[(&str, PathBuf)], dir: &Path) -> (Output, Vec<Value>, WatchResult) {
    let (lines, json) = (dir.join("xruns.jsonl"), dir.join("watch.json"));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_xrunlab"));
    cmd.arg("watch")
        .args(args)
        .arg("--batch")
        .arg("--json-lines")
        .arg(&lines)
        .arg("--json")
        .arg(&json)
        .arg("--trace")
        .arg(dir.join("watch.trace.json"));
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("xrunlab watch runs");
    let text = std::fs::read_to_string(&lines).unwrap_or_else(|e| {
        panic!(
            "{}: {e}\nstdout:\n{}\nstderr:\n{}",
            lines.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    // Read typed (every record must fit results' XrunRecord), then as JSON for the checks.
    let records = parse_xrun_lines(&lines, &text)
        .unwrap_or_else(|e| panic!("--json-lines read back typed: {e}"))
        .iter()
        .map(|r| serde_json::to_value(r).expect("a record is JSON"))
        .collect();
    let summary = read_watch(&json).unwrap_or_else(|e| panic!("--json read back typed: {e}"));
    (out, records, summary)
}

/// A late client on `server` that runs 8 ms long every 40 cycles, for 30 s.
fn late_every_40_cycles(server: &TestServer) -> Client {
    start_client({
        let mut c = Command::new(late_client());
        c.args(["late", "40", "8000", "30"])
            .env("JACK_DEFAULT_SERVER", server.name());
        c
    })
}

fn node_name(r: &Value) -> &str {
    r["card"]["xrun"]["node"]["name"].as_str().unwrap_or("")
}

/// Every overrun the client made while watch was surely watching has a card naming it.
fn check_every_overrun_named(records: &[Value], induced: &[u64], from: u64, to: u64, out: &Output) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let watched: Vec<u64> = induced
        .iter()
        .copied()
        .filter(|&t| t > from && t < to)
        .collect();
    assert!(
        watched.len() >= 3,
        "only {} overruns inside the watch:\n{stdout}",
        watched.len()
    );
    for t in &watched {
        let hit = records.iter().any(|r| {
            let signal = r["card"]["xrun"]["node"]["signal_ns"].as_u64().unwrap_or(0);
            node_name(r) == "late" && signal.abs_diff(*t) < 3 * PERIOD_NS
        });
        assert!(
            hit,
            "the overrun at {t} ns has no card naming \"late\":\n{stdout}"
        );
    }
    // Of the cards whose root is a node, at least 95 % name the client. A driver-side card names
    // none: the server reported an xrun while every client was in time (JACK2's dummy driver
    // does so now and then after a late client's cycle); those must stay rare. A card rooted
    // in the driver (its late start, its device's or timer's interrupt) names the node that
    // missed only as the one it held back: on this VM the dummy driver's timer interrupt came
    // 5.9 ms late once in three 0.3.65 runs, and the bystander missed that cycle.
    let driver_rooted = |r: &Value| {
        ["driver_woke_late", "interrupt_late", "driver_ran_long"]
            .contains(&r["card"]["kind"].as_str().unwrap_or(""))
    };
    // A second node late in the very cycle of a card naming the client (on 2 CPUs the calm
    // client can wait behind the spinning one: "calm woke late: WAIT 5.47 ms ... runnable but
    // waiting 5.38 ms" in the cycle of late's overrun, once in a quiet run) is a second true
    // card of that cycle, not a misnamed overrun: it is left out of the share.
    let late_cycles: Vec<u64> = records
        .iter()
        .filter(|r| node_name(r) == "late")
        .filter_map(|r| r["card"]["xrun"]["cycle"].as_u64())
        .collect();
    let collateral = |r: &Value| {
        node_name(r) != "late"
            && r["card"]["xrun"]["cycle"]
                .as_u64()
                .is_some_and(|c| late_cycles.contains(&c))
    };
    let named = records
        .iter()
        .filter(|r| !driver_rooted(r) && node_name(r) == "late")
        .count();
    let naming = records
        .iter()
        .filter(|r| !driver_rooted(r) && !node_name(r).is_empty() && !collateral(r))
        .count();
    let rooted_in_driver = records.iter().filter(|r| driver_rooted(r)).count();
    assert!(
        rooted_in_driver * 5 <= records.len(),
        "{rooted_in_driver} of {} cards are rooted in the driver:\n{stdout}",
        records.len()
    );
    assert!(
        named * 100 >= naming * 95,
        "{named} of {naming} cards naming a node name the late client:\n{stdout}"
    );
    let driver_side = records
        .iter()
        .filter(|r| r["card"]["xrun"]["node"].is_null() && r["card"]["kind"] == "unexplained")
        .count();
    assert!(
        driver_side * 10 <= records.len(),
        "{driver_side} of {} cards are driver-side:\n{stdout}",
        records.len()
    );
    let ran_long = records
        .iter()
        .filter(|r| node_name(r) == "late" && r["card"]["kind"] == "node_ran_long")
        .count();
    // On a shared 2-core machine an overrunning cycle can also start late (its card then says
    // "woke late" or "never started", which the kernel's account backs): most say "ran long".
    assert!(
        ran_long * 100 >= named * 90,
        "{ran_long} of {named} cards say ran long:\n{stdout}"
    );
    assert!(
        stdout.contains("\"late\"") && stdout.contains("ran long"),
        "{stdout}"
    );
}

#[test]
#[ignore = "needs pipewire and pipewire-jack (test.sh installs them and runs this with --include-ignored)"]
fn on_pipewire_every_overrun_of_a_client_is_a_card_that_names_it_ran_long() {
    // On the system's PipeWire (0.3.65) and on 1.4 (what most users run).
    for build in PipeWireBuild::all() {
        let _turn = take_turn();
        on_pipewire_every_overrun_of_a_client_is_a_card_that_names_it_ran_long_on(&build);
    }
}

fn on_pipewire_every_overrun_of_a_client_is_a_card_that_names_it_ran_long_on(
    build: &PipeWireBuild,
) {
    let pw = TestPipeWire::start_build(build, 256);
    let client = start_client({
        let mut c = pw.pw_jack(&late_client());
        c.args(["late", "60", "8000", "30"]);
        c
    });
    // A bystander that never runs long: the records around the late client's overruns stamp
    // it with the next cycle's times (0.3.65), which once made it an xrun of every such cycle.
    let _calm = start_client({
        let mut c = pw.pw_jack(&late_client());
        c.args(["calm", "1000000", "0", "30"]);
        c
    });
    // The clients' first cycles run long for real (first touches of their memory): measured,
    // the bystander "ran long: BUSY at least 5.33 ms, on its CPU 3.07 ms" 0.27 s into a watch
    // started at once. This test is about the late client's overruns, on a settled graph.
    std::thread::sleep(Duration::from_secs(1));
    let dir = scratch(&format!("pw-late-{}", build.label()));
    let from = now_ns() + 1_000_000_000;
    let (out, records, summary) = watch(
        &["--server", "pipewire", "--duration", "6s"],
        &pw.env(),
        &dir,
    );
    let to = now_ns() - 500_000_000;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let induced: Vec<u64> = client.late.try_iter().collect();
    check_every_overrun_named(&records, &induced, from, to, &out);
    // The bystander is no card's root. A shared 2-core machine can hold its thread off now and
    // then (a compiler on its CPU), so a few cards may name it; one per overrun or more (what
    // the next cycle's stamps gave) may not.
    let on_calm = records.iter().filter(|r| node_name(r) == "calm").count();
    assert!(
        on_calm * 5 <= induced.len().max(5),
        "{on_calm} cards name the calm bystander, for {} overruns:\n{}",
        induced.len(),
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(summary.schema, xrunlab_results::watch::SCHEMA);
    assert!(!summary.provenance.kernel.is_empty(), "provenance recorded");
    assert_eq!(
        summary.summary.xruns,
        records.len() as u64,
        "one record per xrun"
    );
    assert!(summary.server.starts_with("PipeWire"));
    // CI runs as root, so the kernel's account is there and says the thread was on its CPU.
    assert!(
        summary.kernel_events.recorded,
        "{:?}",
        summary.kernel_events
    );
    let without: Vec<&Value> = records
        .iter()
        // A card with no late node (the driver started a cycle late) has its account on its
        // root, the driver's thread.
        .filter(|r| !r["card"]["kernel"].is_object() && !r["card"]["root"]["account"].is_object())
        .collect();
    assert!(
        without.is_empty(),
        "every card has the kernel's account; these do not: {without:#?}"
    );
    // The thread's page faults around each overrun (procfs counters sampled every 250 ms): the
    // late client touches no new memory while it spins, so no major fault.
    let with_faults: Vec<&Value> = records
        .iter()
        .filter_map(|r| {
            r["card"]["faults"]
                .as_object()
                .map(|_| &r["card"]["faults"])
        })
        .collect();
    assert!(
        with_faults.len() * 10 >= records.len() * 8,
        "{} of {} cards have the thread's page faults",
        with_faults.len(),
        records.len()
    );
    assert!(
        with_faults
            .iter()
            .all(|f| f["major"] == 0 && f["span_ms"].as_f64().unwrap_or(0.0) > 0.0),
        "{with_faults:?}"
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("page faults 0 major"),
        "the ran-long lines say so"
    );
    // The Perfetto trace: a wait and a busy slice per node per cycle, the xruns with their
    // verdicts, and the kernel's events around them.
    let trace: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("watch.trace.json")).expect("--trace written"),
    )
    .expect("the trace is JSON");
    let events = trace["traceEvents"].as_array().expect("traceEvents");
    let named = |n: &str| events.iter().filter(|e| e["name"] == n).count();
    assert!(
        named("busy") > 500 && named("wait") > 500,
        "{} busy slices",
        named("busy")
    );
    assert_eq!(named("dropout"), records.len(), "one xrun mark per card");
    assert!(
        events.iter().any(|e| e["cat"] == "sched"
            || e["name"] == "sched_switch"
            || e["pid"].as_i64() == Some(1 << 30)),
        "kernel events in the trace"
    );
}

#[test]
#[ignore = "needs root: JACK2 names no late client, so watch needs the kernel's wake chain (CI runs as root)"]
fn on_jack_every_overrun_of_a_client_is_a_card_that_names_it_ran_long() {
    let _turn = take_turn();
    let server = TestServer::start("xwatchcli", 256);
    let client = start_client({
        let mut c = Command::new(late_client());
        c.args(["late", "60", "8000", "30"])
            .env("JACK_DEFAULT_SERVER", server.name());
        c
    });
    let dir = scratch("jack-late");
    let from = now_ns() + 1_000_000_000;
    let (out, records, summary) = watch(
        &[
            "--server",
            "jack",
            "--jack-server",
            server.name(),
            "--duration",
            "6s",
        ],
        &[],
        &dir,
    );
    let to = now_ns() - 500_000_000;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let induced: Vec<u64> = client.late.try_iter().collect();
    check_every_overrun_named(&records, &induced, from, to, &out);
    assert!(summary.server.contains("JACK"));
    // The node table has the client's WAIT and BUSY, rebuilt from the wake chain all along (not
    // only around the xruns): most of 6 s of 5.3 ms cycles, and its normal BUSY far below them.
    let nodes = &summary.summary.nodes;
    let late = nodes
        .iter()
        .find(|n| n.name == "late")
        .unwrap_or_else(|| panic!("no node \"late\" in {nodes:?}"));
    assert!(
        late.cycles > 500,
        "cycles rebuilt from the wake chain: {late:?}"
    );
    let busy = late.median_busy_us.expect("a BUSY median");
    let wait = late.median_wait_us.expect("a WAIT median");
    assert!(busy > 0.0 && busy < 2000.0, "normal BUSY: {late:?}");
    assert!(
        wait > 0.0 && wait < 5333.0,
        "WAIT within a period: {late:?}"
    );
    // The cards number their cycles from watch's start, not within their own window.
    let cycles: Vec<u64> = records
        .iter()
        .filter_map(|r| r["card"]["xrun"]["cycle"].as_u64())
        .collect();
    assert!(
        cycles.windows(2).all(|w| w[1] > w[0]),
        "cycle numbers grow with time: {cycles:?}"
    );
}

/// `xrunlab watch` on a terminal (a pseudo-terminal from `script`, 120x40): the live view's text.
fn watch_on_a_terminal(args: &str, env: &[(&str, PathBuf)]) -> (bool, String) {
    let cmd = format!(
        "stty cols 120 rows 40; exec {} watch {args}",
        env!("CARGO_BIN_EXE_xrunlab")
    );
    let mut c = Command::new("script");
    c.args(["-qefc", &cmd, "/dev/null"]);
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().expect("script runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
#[ignore = "needs pipewire and pipewire-jack (test.sh installs them and runs this with --include-ignored)"]
fn on_a_terminal_the_live_view_shows_the_nodes_and_the_xrun_log_then_the_summary() {
    // On the system's PipeWire (0.3.65) and on 1.4 (what most users run).
    for build in PipeWireBuild::all() {
        let _turn = take_turn();
        on_a_terminal_the_live_view_shows_the_nodes_and_the_xrun_log_then_the_summary_on(&build);
    }
}

fn on_a_terminal_the_live_view_shows_the_nodes_and_the_xrun_log_then_the_summary_on(
    build: &PipeWireBuild,
) {
    let pw = TestPipeWire::start_build(build, 256);
    let _client = start_client({
        let mut c = pw.pw_jack(&late_client());
        c.args(["late", "60", "8000", "30"]);
        c
    });
    let (ok, screen) =
        watch_on_a_terminal("--server pipewire --no-kernel --duration 4s", &pw.env());
    assert!(ok, "{screen}");
    // The view (drawn on the alternate screen, so it is in the raw output) ...
    for want in [
        "QUANT", "RATE", "WAIT", "BUSY", "W/Q", "B/Q", "ERR", "XRUNS", "256", "48000",
    ] {
        assert!(
            screen.contains(want),
            "{want:?} not on the screen:\n{screen}"
        );
    }
    assert!(
        screen.contains("Dummy-Driver") && screen.contains("+ late"),
        "the driver, and the client listed under it:\n{screen}"
    );
    assert!(
        screen.contains("\u{1b}[?1049h") && screen.contains("\u{1b}[?1049l"),
        "the alternate screen is entered and left"
    );
    // ... then, on the normal screen, the xruns it logged and the summary.
    let after = &screen[screen.rfind("\u{1b}[?1049l").expect("left")..];
    assert!(
        after.contains("\"late\"") && after.contains("ran long"),
        "the xrun lines after the view:\n{after}"
    );
    assert!(after.contains("watched PipeWire"), "the summary:\n{after}");
}

/// Pins every thread of `pid` to `cpu`.
fn pin_process(pid: i32, cpu: usize) {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("the process's threads");
    for t in tasks.filter_map(Result::ok) {
        let tid: i32 = t.file_name().to_string_lossy().parse().expect("a tid");
        pin(tid, cpu);
    }
}

fn pin(tid: i32, cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET writes inside it; sched_setaffinity reads it.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    assert_eq!(
        rc,
        0,
        "pinning {tid} to CPU {cpu}: {}",
        std::io::Error::last_os_error()
    );
}

/// Hogs on CPU 1 at SCHED_FIFO 95, 9 ms each, every 400 ms until `until` (CLOCK_MONOTONIC ns).
fn hog_cpu1(until: u64) -> Vec<i32> {
    let mut pids = Vec::new();
    while now_ns() < until {
        let pid = RtHog {
            name: c"notahog",
            cpu: 1,
            priority: 95,
            spin_ns: 9_000_000,
        }
        .fork();
        std::thread::sleep(Duration::from_millis(400));
        assert_eq!(
            reap(pid),
            0,
            "the hog could not take SCHED_FIFO on CPU 1 (needs root)"
        );
        pids.push(pid);
    }
    pids
}

/// The cards that blame a hog by name, pid and policy, against the hogs' pids.
fn check_hog_named(records: &[Value], hogs: &[i32], out: &Output) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let named: Vec<&Value> = records
        .iter()
        .filter(|r| r["card"]["kernel"]["main_culprit"]["name"] == "notahog")
        .collect();
    assert!(!named.is_empty(), "no card names the hog:\n{stdout}");
    for r in &named {
        let c = &r["card"]["kernel"]["main_culprit"];
        let pid = c["pid"].as_i64().unwrap_or(0) as i32;
        assert!(
            hogs.contains(&pid),
            "the culprit's pid {pid} is none of the hogs {hogs:?}"
        );
        assert_eq!(c["policy"], "SCHED_FIFO 95", "{c}");
        assert_eq!(node_name(r), "late", "{r}");
    }
    assert!(
        stdout.contains("notahog") && stdout.contains("SCHED_FIFO 95"),
        "{stdout}"
    );
}

#[test]
#[ignore = "needs root (SCHED_FIFO hogs, kernel tracing) and pipewire (test.sh runs it as root in CI)"]
fn on_pipewire_a_fifo_hog_on_the_clients_cpu_is_named_by_comm_pid_and_policy() {
    // On the system's PipeWire (0.3.65) and on 1.4 (what most users run). 1.4.2 records a
    // client held off its CPU in the cycle before, signalled again and not awake since; until
    // that was read so, its cards there said "ran long, BUSY ~6 us" and named no hog.
    for build in PipeWireBuild::all() {
        let _turn = take_turn();
        on_pipewire_a_fifo_hog_on_the_clients_cpu_is_named_by_comm_pid_and_policy_on(&build);
    }
}

fn on_pipewire_a_fifo_hog_on_the_clients_cpu_is_named_by_comm_pid_and_policy_on(
    build: &PipeWireBuild,
) {
    let pw = TestPipeWire::start_build(build, 256);
    // The client never overruns on its own; its thread lives on CPU 1, the server on CPU 0.
    let client = start_client({
        let mut c = pw.pw_jack(&late_client());
        c.args(["late", "1000000", "0", "30"]);
        c
    });
    pin_process(pw.pid(), 0);
    pin(client.tid, 1);
    let dir = scratch(&format!("pw-hog-{}", build.label()));
    let until = now_ns() + 5_000_000_000;
    let hogs = std::thread::spawn(move || hog_cpu1(until));
    let (out, records, _) = watch(
        &["--server", "pipewire", "--duration", "6s"],
        &pw.env(),
        &dir,
    );
    let hogs = hogs.join().expect("hogs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    check_hog_named(&records, &hogs, &out);
}

#[test]
#[ignore = "needs root (SCHED_FIFO hogs, kernel tracing; CI runs it as root)"]
fn on_jack_a_fifo_hog_on_the_clients_cpu_is_named_by_comm_pid_and_policy() {
    let _turn = take_turn();
    let server = TestServer::start("xwatchhog", 256);
    let client = start_client({
        let mut c = Command::new(late_client());
        c.args(["late", "1000000", "0", "30"])
            .env("JACK_DEFAULT_SERVER", server.name());
        c
    });
    pin_process(server.pid(), 0);
    pin(client.tid, 1);
    let dir = scratch("jack-hog");
    let until = now_ns() + 5_000_000_000;
    let hogs = std::thread::spawn(move || hog_cpu1(until));
    let (out, records, _) = watch(
        &[
            "--server",
            "jack",
            "--jack-server",
            server.name(),
            "--duration",
            "6s",
        ],
        &[],
        &dir,
    );
    let hogs = hogs.join().expect("hogs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    check_hog_named(&records, &hogs, &out);
}

#[test]
#[ignore = "needs pipewire (test.sh installs it); a 30 s watch of a clean graph on each build"]
fn a_clean_half_minute_reports_only_xruns_the_servers_own_rule_counts() {
    let _turn = take_turn();
    // The system's PipeWire (0.3.65), 1.4 (what most users run) and JACK2, each a clean graph
    // with one calm client, watched for the same half minute side by side: nothing here loads
    // the CPU, and every card must be one its own server's rule counts whatever the load (one
    // after the other they took a minute of the suite).
    let graphs: Vec<(PipeWireBuild, TestPipeWire, Client)> = PipeWireBuild::all()
        .into_iter()
        .map(|build| {
            let pw = TestPipeWire::start_build(&build, 256);
            let client = start_client({
                let mut c = pw.pw_jack(&late_client());
                c.args(["late", "1000000", "0", "90"]);
                c
            });
            (build, pw, client)
        })
        .collect();
    let server = TestServer::start("xwatchclean", 256);
    let jclient = start_client({
        let mut c = Command::new(late_client());
        c.args(["late", "1000000", "0", "90"])
            .env("JACK_DEFAULT_SERVER", server.name());
        c
    });
    let watch_from = now_ns();
    let (jout, jrecords, _) = std::thread::scope(|s| {
        for (build, pw, _) in &graphs {
            s.spawn(move || clean_pipewire_half_minute(build, pw));
        }
        watch(
            &[
                "--server",
                "jack",
                "--jack-server",
                server.name(),
                "--duration",
                "30s",
            ],
            &[],
            &scratch("jack-clean"),
        )
    });
    assert!(
        jout.status.success(),
        "{}",
        String::from_utf8_lossy(&jout.stderr)
    );
    let watch_to = now_ns();
    // On JACK every card comes from the server's own xrun callback: never more cards than the
    // xruns the server told its clients of while watch ran. (Not a fixed bound: beside the
    // PipeWire graphs' FIFO 88 threads a loaded machine has made jackd miss 39 cycles here.)
    let stdout = String::from_utf8_lossy(&jout.stdout);
    let server_xruns = jclient.server_xruns_between(watch_from, watch_to);
    assert!(
        jrecords.len() <= server_xruns,
        "{} cards on a clean JACK graph in half a minute, but the server told its client of \
         {server_xruns} xruns meanwhile:\n{stdout}",
        jrecords.len()
    );
}

/// A clean half minute on PipeWire: only xruns the server's own rule counts.
fn clean_pipewire_half_minute(build: &PipeWireBuild, pw: &TestPipeWire) {
    let (out, records, summary) = watch(
        &["--server", "pipewire", "--duration", "30s"],
        &pw.env(),
        &scratch(&format!("pw-clean-{}", build.label())),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A machine this noisy can drop a cycle on its own; whatever is reported must be one the
    // server itself counts: a node still running when the next cycle began (PipeWire's
    // update_xrun_stats), or the node's or driver's own count.
    // A node that finished after the next cycle's start (`finished_late`, seen once in five
    // full runs here) was still running when that cycle began: the same rule, read after the
    // fact; its finish must lie past the cycle's start plus one period. A cycle the driver
    // started a whole period late (`driver_late`) lost that period: the device ran dry.
    for r in &records {
        let evidence = r["card"]["xrun"]["evidence"].as_str().unwrap_or("");
        let node = &r["card"]["xrun"]["node"];
        let period_ns = r["card"]["period_us"].as_f64().unwrap_or(f64::MAX) * 1000.0;
        let finished_past_next_start = evidence == "finished_late"
            && node["finish_ns"].as_f64().unwrap_or(0.0)
                > r["card"]["xrun"]["cycle_start_ns"]
                    .as_f64()
                    .unwrap_or(f64::MAX)
                    + period_ns;
        let driver_period_late = evidence == "driver_late"
            && r["card"]["xrun"]["driver_late_ns"].as_f64().unwrap_or(0.0) >= period_ns;
        assert!(
            ["still_running", "node_count", "driver_count"].contains(&evidence)
                || finished_past_next_start
                || driver_period_late,
            "an xrun the server would not count: {r}"
        );
    }
    assert_eq!(summary.summary.xruns, records.len() as u64);
    // 30 s of 5.33 ms cycles is 5,625; a loaded machine may start a few late.
    assert!(summary.summary.cycles > 4_500, "{:?}", summary.summary);
}

#[test]
#[ignore = "needs pipewire and pipewire-jack (test.sh installs them and runs this with --include-ignored)"]
fn a_server_that_dies_mid_watch_ends_it_with_a_clear_message_and_what_was_seen_is_written() {
    // On the system's PipeWire (0.3.65) and on 1.4 (what most users run).
    for build in PipeWireBuild::all() {
        let _turn = take_turn();
        a_server_that_dies_mid_watch_ends_it_with_a_clear_message_and_what_was_seen_is_written_on(
            &build,
        );
    }
}

fn a_server_that_dies_mid_watch_ends_it_with_a_clear_message_and_what_was_seen_is_written_on(
    build: &PipeWireBuild,
) {
    let mut pw = TestPipeWire::start_build(build, 256);
    let _client = start_client({
        let mut c = pw.pw_jack(&late_client());
        c.args(["late", "60", "8000", "30"]);
        c
    });
    let dir = scratch(&format!("pw-dies-{}", build.label()));
    let (lines, json) = (dir.join("xruns.jsonl"), dir.join("watch.json"));
    let child = Command::new(env!("CARGO_BIN_EXE_xrunlab"))
        .args([
            "watch",
            "--server",
            "pipewire",
            "--batch",
            "--no-kernel",
            "--json-lines",
        ])
        .arg(&lines)
        .arg("--json")
        .arg(&json)
        .envs(pw.env())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("watch starts");
    std::thread::sleep(Duration::from_secs(3));
    pw.kill();
    let out = child.wait_with_output().expect("watch ends");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a watch whose server died fails: {stderr}"
    );
    assert!(
        stderr.contains("PipeWire server closed the connection") && stderr.contains("written"),
        "{stderr}"
    );
    let records = std::fs::read_to_string(&lines).expect("--json-lines kept");
    assert!(
        records.lines().count() >= 2,
        "the xruns seen before the death: {records}"
    );
    assert!(
        records.contains("no kernel events: not recorded (--no-kernel)"),
        "{records}"
    );
    let summary = read_watch(&json).unwrap_or_else(|e| panic!("--json read back typed: {e}"));
    assert!(
        summary.end_reason.contains("closed the connection"),
        "{}",
        summary.end_reason
    );
    assert!(!summary.kernel_events.recorded);
}

#[test]
#[ignore = "needs pipewire and pipewire-jack (test.sh installs them and runs this with --include-ignored)"]
fn under_pw_jack_a_jack_server_that_dies_mid_watch_ends_it_with_a_clear_message() {
    let _turn = take_turn();
    let mut pw = TestPipeWire::start(256);
    let _client = start_client({
        let mut c = pw.pw_jack(&late_client());
        c.args(["late", "60", "8000", "30"]);
        c
    });
    let dir = scratch("pw-jack-dies");
    let json = dir.join("watch.json");
    // `watch --server jack` through PipeWire's libjack, which never calls the shutdown callback.
    let mut child = Reaped(
        pw.pw_jack(Path::new(env!("CARGO_BIN_EXE_xrunlab")))
            .args([
                "watch",
                "--server",
                "jack",
                "--batch",
                "--no-kernel",
                "--json",
            ])
            .arg(&json)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("watch starts"),
    );
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        child.0.try_wait().unwrap().is_none(),
        "watch runs while the server does"
    );
    pw.kill();
    let t0 = std::time::Instant::now();
    while child.0.try_wait().unwrap().is_none() {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "watch still runs 20 s after its server died"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = std::mem::replace(
        &mut child.0,
        Command::new("true").spawn().expect("true runs"),
    )
    .wait_with_output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("stopped running cycles: its clock has not moved for"),
        "{stderr}"
    );
    let summary = read_watch(&json).unwrap_or_else(|e| panic!("--json read back typed: {e}"));
    assert!(
        summary.end_reason.contains("stopped running cycles"),
        "{}",
        summary.end_reason
    );
}

#[test]
fn sigterm_ends_a_watch_cleanly_with_its_files() {
    let _turn = take_turn();
    let server = TestServer::start("xwatchterm", 256);
    let dir = scratch("jack-term");
    let (lines, json) = (dir.join("xruns.jsonl"), dir.join("watch.json"));
    let child = Command::new(env!("CARGO_BIN_EXE_xrunlab"))
        .args([
            "watch",
            "--server",
            "jack",
            "--jack-server",
            server.name(),
            "--batch",
            "--no-kernel",
        ])
        .arg("--json-lines")
        .arg(&lines)
        .arg("--json")
        .arg(&json)
        .stdout(Stdio::piped())
        .spawn()
        .expect("watch starts");
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: kill with the pid of a child we spawned and have not reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().expect("watch ends");
    assert!(out.status.success(), "SIGTERM is a clean end");
    let summary = read_watch(&json).unwrap_or_else(|e| panic!("--json read back typed: {e}"));
    assert_eq!(summary.end_reason, "ended by SIGTERM");
    assert!(!summary.checkpoint, "the final file, not a checkpoint");
    assert!(
        lines.exists(),
        "--json-lines is in place, even with no xrun in it"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("watched JACK server"));
}

#[test]
fn json_lines_is_a_log_read_while_watch_runs_and_an_earlier_log_is_appended_to() {
    let _turn = take_turn();
    let server = TestServer::start("xwatchlog", 256);
    let _client = late_every_40_cycles(&server);
    let dir = scratch("jack-log");
    let lines = dir.join("xruns.jsonl");
    // An earlier run's log, its last line cut off by a kill mid-write.
    std::fs::write(&lines, "{\"earlier\":1}\n{\"cut\":").unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_xrunlab"))
        .args([
            "watch",
            "--server",
            "jack",
            "--jack-server",
            server.name(),
            "--batch",
            "--no-kernel",
        ])
        .arg("--json-lines")
        .arg(&lines)
        .stdout(Stdio::piped())
        .spawn()
        .expect("watch starts");
    // While watch runs, the named file itself grows by whole records.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = 0;
    while Instant::now() < deadline {
        let text = std::fs::read_to_string(&lines).unwrap();
        seen = text.lines().skip(2).count();
        if seen >= 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // SAFETY: kill with the pid of a child we spawned and have not reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().expect("watch ends");
    assert!(
        seen >= 2,
        "records appeared in {} while watch ran: {seen}",
        lines.display()
    );
    assert!(out.status.success(), "SIGTERM is a clean end");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("appending to") && stdout.contains("bytes from earlier runs kept"),
        "{stdout}"
    );
    let text = std::fs::read_to_string(&lines).unwrap();
    let all: Vec<&str> = text.lines().collect();
    assert_eq!(
        all[..2],
        ["{\"earlier\":1}", "{\"cut\":"],
        "the earlier log kept"
    );
    for line in &all[2..] {
        let record: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("a whole JSON record a line: {e}: {line}"));
        assert!(record["card"]["kind"].is_string(), "a card: {line}");
    }
    let partials: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".partial"))
        .collect();
    assert!(partials.is_empty(), "no partial file: {partials:?}");
}

#[test]
fn bench_watch_writes_every_modes_figures_typed() {
    let _turn = take_turn();
    let server = TestServer::start("xbenchwatch", 256);
    let dir = scratch("bench-watch");
    let json = dir.join("bench-watch.json");
    let out = Command::new(env!("CARGO_BIN_EXE_xrunlab"))
        .args(["bench", "watch", "--server", "jack", "--jack-server"])
        .arg(server.name())
        .args([
            "--duration",
            "3s",
            "--stall-every",
            "500ms",
            "--cause",
            "client",
        ])
        .arg("--json")
        .arg(&json)
        .output()
        .expect("bench watch runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = read_bench_watch(&json).unwrap_or_else(|e| panic!("--json read back typed: {e}"));
    assert_eq!(r.server, "JACK");
    assert!(r.provenance.end_time.is_some(), "provenance finished");
    let modes: Vec<(&str, bool)> = r
        .modes
        .iter()
        .map(|m| (m.mode.as_str(), m.watching))
        .collect();
    assert_eq!(
        modes,
        [
            ("not watched", false),
            ("without (--no-kernel)", true),
            ("with kernel events", true)
        ]
    );
    for m in &r.modes {
        assert!(m.induced > 0, "the culprit stalled inside the watch: {m:?}");
        assert!(
            m.bystander_load_p50_pct.is_some_and(|p| p > 0.0),
            "the bystander's load: {m:?}"
        );
    }
    for watched in &r.modes[1..] {
        assert!(
            watched.cards > 0 && watched.named <= watched.with_node,
            "watch reported the culprit's xruns: {watched:?}"
        );
        assert!(
            watched.delay_p50_ms.is_some() && watched.cpu_pct > 0.0,
            "{watched:?}"
        );
    }
    // Every card is either one of a stall's or another xrun's, once the two clocks are aligned.
    for watched in &r.modes[1..] {
        let (Some(in_stalls), Some(other), Some(named), Some(recalled)) = (
            watched.cards_in_stalls,
            watched.other_cards,
            watched.named_in_stalls,
            watched.stalls_with_card,
        ) else {
            panic!("a watched mode has its stall-matched figures: {watched:?}");
        };
        assert_eq!(in_stalls + other, watched.cards, "{watched:?}");
        assert!(
            named <= in_stalls && recalled <= watched.induced,
            "{watched:?}"
        );
    }
    // On JACK2 a card names a node only from the kernel's wake chain: there, the stalls' cards
    // name the culprit.
    let kernel = &r.modes[2];
    if kernel.kernel_note == "recorded" {
        assert!(kernel.named > 0, "the culprit named: {kernel:?}");
        assert!(
            kernel.stalls_with_card.unwrap() * 2 >= kernel.induced
                && kernel.named_in_stalls.unwrap() * 2 >= kernel.cards_in_stalls.unwrap(),
            "most stalls have a card, and most of those cards name the culprit: {kernel:?}"
        );
    }
    assert_eq!(r.modes[0].cards, 0, "nothing watched, nothing reported");
    assert_eq!(
        (r.modes[0].cards_in_stalls, r.modes[0].stalls_with_card),
        (None, None),
        "nothing watched, nothing matched"
    );
}

/// The CPUs thread `tid` of `pid` may run on, as /proc lists them.
fn cpus_allowed(pid: i32, tid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/status"))
        .expect("the thread's status")
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .expect("Cpus_allowed_list")
        .trim()
        .to_owned()
}

#[test]
#[ignore = "needs root (SCHED_FIFO 95 hog, the server's thread pinned); test.sh runs it as root"]
fn sigterm_during_bench_watchs_starved_mode_gives_the_servers_thread_its_cpus_back() {
    let _turn = take_turn();
    let server = TestServer::start("xbenchstop", 256);
    let rt = *fifo_threads(server.pid())
        .first()
        .expect("jackd's real-time thread");
    let before = cpus_allowed(server.pid(), rt);
    let mut bench = Command::new(env!("CARGO_BIN_EXE_xrunlab"))
        .args(["bench", "watch", "--server", "jack", "--jack-server"])
        .arg(server.name())
        .args(["--duration", "20s", "--cause", "server"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bench watch starts");
    // Past the calm client's second: the thread is pinned and the hog is spinning.
    let t0 = Instant::now();
    while cpus_allowed(server.pid(), rt) == before {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the server's thread was never pinned"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(2));
    // SAFETY: kill(2) on our own child, not yet reaped.
    unsafe { libc::kill(bench.id() as i32, libc::SIGTERM) };
    let t1 = Instant::now();
    let out = loop {
        if let Some(_status) = bench.try_wait().expect("waiting for bench") {
            break bench.wait_with_output().expect("its output");
        }
        assert!(
            t1.elapsed() < Duration::from_secs(10),
            "bench watch did not end after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("stopped by a signal"), "{err}");
    // Before the fix SIGTERM killed bench at once: the thread stayed on one CPU.
    assert_eq!(cpus_allowed(server.pid(), rt), before, "{err}");
    // And its calm client ended with it.
    let calm = Command::new("pgrep")
        .args(["-f", "bench-calm"])
        .output()
        .expect("pgrep");
    assert!(
        calm.stdout.is_empty(),
        "the calm client still runs: {}",
        String::from_utf8_lossy(&calm.stdout)
    );
}

#[test]
fn bench_record_prints_and_writes_record_and_watch_side_by_side_in_both_phases() {
    let _turn = take_turn();
    let server = TestServer::start("xbenchrecord", 256);
    let dir = scratch("bench-record");
    let json = dir.join("bench-record.json");
    let out = Command::new(env!("CARGO_BIN_EXE_xrunlab"))
        .args(["bench", "record", "--server", "jack", "--jack-server"])
        .arg(server.name())
        .args(["--duration", "4s", "--stall-every", "250ms", "--json"])
        .arg(&json)
        .output()
        .expect("bench record runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The table: a row per phase and tool, in that order.
    let table: Vec<(&str, &str)> = stdout
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            Some((w.next()?, w.next()?))
        })
        .filter(|(p, t)| ["idle", "storm"].contains(p) && ["record", "watch"].contains(t))
        .collect();
    assert_eq!(
        table,
        [
            ("idle", "record"),
            ("idle", "watch"),
            ("storm", "record"),
            ("storm", "watch")
        ],
        "{stdout}"
    );
    let r = read_bench_record(&json).unwrap_or_else(|e| panic!("--json read back typed: {e}"));
    assert_eq!((r.server.as_str(), r.rows.len()), ("JACK", 4));
    for row in &r.rows {
        // Sane, not exact: under a core, and some CPU for watch (which drains the kernel's
        // events all the time); a resident set of a few MB to tens of MB. The recorder may
        // not use one 10 ms clock tick in the 2 s counted (0.3 % of a core is 6 ms).
        assert!(
            row.cpu_pct >= 0.0 && row.cpu_pct < 100.0 && row.span_s > 1.0,
            "{row:?}"
        );
        if row.tool == "watch" {
            assert!(row.cpu_pct > 0.0, "{row:?}");
        }
        assert!(
            (row.cpu_s_per_hour - row.cpu_pct * 36.0).abs() < 1e-6,
            "{row:?}"
        );
        assert!(
            row.rss_peak_mb > 2.0
                && row.rss_peak_mb < 64.0
                && row.rss_end_mb <= row.rss_peak_mb
                && row.hwm_mb >= row.rss_peak_mb,
            "{row:?}"
        );
    }
    // The storm's stalls (one every 250 ms over 4 s) reach both tools.
    for storm in &r.rows[2..] {
        assert!(storm.xruns >= 5, "{storm:?}");
    }
}

#[test]
#[ignore = "needs root (SCHED_FIFO 95 hog, the server's thread pinned, kernel events); test.sh runs it as root"]
fn bench_watch_starved_server_mode_finds_every_spin_and_names_the_hog_as_the_root() {
    let _turn = take_turn();
    let server = TestServer::start("xbenchstarve", 256);
    let dir = scratch("bench-watch-starved");
    let json = dir.join("bench-watch.json");
    let out = Command::new(env!("CARGO_BIN_EXE_xrunlab"))
        .args(["bench", "watch", "--server", "jack", "--jack-server"])
        .arg(server.name())
        .args(["--duration", "5s", "--cause", "server", "--json"])
        .arg(&json)
        .output()
        .expect("bench watch runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = read_bench_watch(&json).unwrap_or_else(|e| panic!("--json read back typed: {e}"));
    assert!(r.modes.is_empty(), "--cause server runs no client mode");
    let f = r.starved.expect("the starved-server figures");
    assert!(f.server_thread.starts_with("jackd"), "{f:?}");
    assert!(f.server_thread.contains("SCHED_FIFO"), "{f:?}");
    assert_eq!(f.kernel_note, "recorded", "{f:?}");
    // 5 s: spins from 1.5 s, every 700 ms, none in the last half second.
    assert!(f.spins >= 4, "{f:?}");
    // The server runs 256 frames at 48 kHz: 5.33 ms periods, shorter than the 15 ms spins, so
    // the figures are judged (at 1024 frames they are not, and the table says why).
    assert!(
        f.period_ms.is_some_and(|p| p > 4.0 && p < 8.0) && f.spins_can_starve(),
        "{f:?}"
    );
    // Measured here: every spin found and every card naming the hog (6 of 6, 36 of 36 quiet or
    // beside kernel-heavy `dd` noise, and 100 % on PipeWire 0.3.65 and 1.4.2 by hand); one spin
    // lost to this shared machine's noise is allowed.
    assert!(f.spins_with_card + 1 >= f.spins, "recall: {f:?}\n{stdout}");
    assert_eq!(
        f.not_naming_hog.len(),
        f.cards_in_spins - f.right_root,
        "each card during a spin that misses the hog is listed: {f:?}"
    );
    // This VM makes xruns of its own (a driver late behind kdamond, on a PREEMPT_NONE kernel),
    // some seconds five in five seconds, and one of them may land in a spin's 85 ms window: one
    // card not naming the hog is allowed only in a run that shows such xruns outside the spins
    // (once in CI: 10 cards, 5 outside the spins, 1 of the 5 in spins on the calm client).
    let noisy = usize::from(f.cards > f.cards_in_spins);
    assert!(
        f.right_root + noisy >= f.cards_in_spins && f.right_root > 0,
        "right root: {f:?}\n{stdout}"
    );
    assert!(f.on_calm <= noisy, "{f:?}\n{stdout}");
    assert!(stdout.contains("right root"), "the table: {stdout}");
}

#[test]
fn bad_watch_input_is_a_usage_error_that_says_what_is_allowed() {
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_xrunlab"))
            .arg("watch")
            .args(args)
            .output()
            .expect("runs")
    };
    let out = run(&["--server", "alsa"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("auto") && err.contains("pipewire") && err.contains("jack"),
        "{err}"
    );
    let out = run(&["--duration", "0s"]);
    assert_eq!(out.status.code(), Some(2));
    let out = run(&["--json", "/nonexistent-dir/w.json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist"));
    // No server at all: a runtime error that says how to start one.
    let out = Command::new(env!("CARGO_BIN_EXE_xrunlab"))
        .args([
            "watch",
            "--server",
            "jack",
            "--jack-server",
            "xrunlab-nobody-here",
        ])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no JACK server is running"));
    // bench watch's cause: a name it knows, and room for a spin.
    let bench = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_xrunlab"))
            .args(["bench", "watch", "--server", "jack"])
            .args(args)
            .output()
            .expect("runs")
    };
    let out = bench(&["--cause", "irq"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("client") && err.contains("server") && err.contains("both"),
        "{err}"
    );
    let out = bench(&["--cause", "server", "--duration", "1s"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no room for a spin") && err.contains("2s"),
        "{err}"
    );
}

/// The real-time threads (tid) of process `pid` at SCHED_FIFO, highest priority first.
fn fifo_threads(pid: i32) -> Vec<i32> {
    let mut found: Vec<(i64, i32)> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("the process's threads")
        .filter_map(Result::ok)
        .filter_map(|t| {
            let tid: i32 = t.file_name().to_string_lossy().parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).ok()?;
            let rest: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
            // Fields 40 (rt_priority) and 41 (policy), counted from 1 with field 3 first.
            let (prio, policy): (i64, i64) =
                (rest.get(37)?.parse().ok()?, rest.get(38)?.parse().ok()?);
            (policy == 1).then_some((prio, tid))
        })
        .collect();
    found.sort();
    found.reverse();
    found.into_iter().map(|(_, t)| t).collect()
}

/// Pins every thread of the server `pid` to CPU0, then its first SCHED_FIFO thread (the one the
/// hog is to starve) to CPU1; `who` names the server in the failure.
fn pin_server_thread_to_cpu1(pid: i32, who: &str) {
    pin_process(pid, 0);
    let rt = fifo_threads(pid);
    assert!(!rt.is_empty(), "{who} has no SCHED_FIFO thread");
    pin(rt[0], 1);
}

/// Whether history row `x` is the card of the driver's late start for the hog's spin at `t`:
/// from the cycle due just before the spin (a spin that began 37 µs after the driver's due
/// time was carded on the cycle 5.37 ms before it) to the cycles it delayed.
fn carded_spin(x: &Value, t: u64) -> bool {
    x["kind"] == "driver_woke_late"
        && x["card"]["xrun"]["cycle_start_ns"]
            .as_u64()
            .is_some_and(|c| c + PERIOD_NS + 1_000_000 >= t && c <= t + 15_000_000 + 2 * PERIOD_NS)
}

/// An RT hog (SCHED_FIFO 95) spinning `spin_us` every `every_ms` on CPU 1, for `seconds`; the
/// CLOCK_MONOTONIC start of each spin as it comes, and its pid.
fn start_hog(spin_us: u64, every_ms: u64, seconds: u64) -> (Reaped, i32, mpsc::Receiver<u64>) {
    let mut child = Command::new(xrunlab_jack_testkit::rt_hog())
        .args(["1", "95", &spin_us.to_string(), &every_ms.to_string()])
        .arg(seconds.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the hog starts");
    let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
    let first = lines.next().and_then(Result::ok).unwrap_or_default();
    let pid = first
        .strip_prefix("hog ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("the hog did not run at SCHED_FIFO 95: {first:?}"));
    let (tx, spins) = mpsc::channel();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            if let Some(ns) = line.strip_prefix("spin ").and_then(|n| n.parse().ok()) {
                let _ = tx.send(ns);
            }
        }
    });
    (Reaped(child), pid, spins)
}

/// The cards of xruns during a hog's spin (from its start to 40 ms after it ends): at least two
/// thirds name the hog as the cause of the driver's lateness, and at most a fifth blame the calm
/// client as the root.
fn check_driver_starved(
    records: &[Value],
    spins: &[u64],
    spin_ns: u64,
    hog: i32,
    calm: &str,
    out: &Output,
) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let during = |r: &&Value| {
        let t = r["card"]["xrun"]["cycle_start_ns"].as_u64().unwrap_or(0);
        spins
            .iter()
            .any(|&s| t + 30_000_000 >= s && t <= s + spin_ns + 40_000_000)
    };
    let in_spins: Vec<&Value> = records.iter().filter(during).collect();
    assert!(
        in_spins.len() >= spins.len() / 2 && !in_spins.is_empty(),
        "{} spins but {} cards during them:\n{stdout}",
        spins.len(),
        in_spins.len()
    );
    let names_hog = |r: &&&Value| {
        let root = &r["card"]["root"];
        let kind = r["card"]["kind"].as_str().unwrap_or("");
        root["role"] == "driver"
            && kind == "driver_woke_late"
            && root["account"]["main_culprit"]["pid"].as_i64() == Some(i64::from(hog))
    };
    let named = in_spins.iter().filter(names_hog).count();
    // The goal is 90 % and none on the calm client; measured here (a 2-core VM) it is
    // met on JACK2 (10 of 10 and 11 of 11) but PipeWire's cards range from 68 % to 100 % a run
    // (the cycles right after a spin, whose stamps and wake-ups are hard to tie to the hog):
    // this asserts the floor that holds, and issue 21 stays open for the rest.
    assert!(
        named * 3 >= in_spins.len() * 2,
        "{named} of {} cards during the hog's spins name it as the driver's delay:\n{stdout}",
        in_spins.len()
    );
    // Outside the spins this shared machine makes xruns of its own (a compiler holding the calm
    // client's CPU, say), which the cards rightly blame on what held it.
    let on_calm = in_spins
        .iter()
        .filter(|r| {
            let root = r["card"]["path"]
                .as_array()
                .and_then(|p| p.last())
                .cloned()
                .unwrap_or_default();
            root["role"] == "node" && root["name"] == calm
        })
        .count();
    assert!(
        on_calm * 5 <= in_spins.len(),
        "{on_calm} of {} cards during the spins blame the calm client:\n{stdout}",
        in_spins.len()
    );
}

#[test]
#[ignore = "needs root (SCHED_FIFO, affinity, kernel events), pipewire and pipewire-jack; test.sh runs it with --include-ignored"]
fn on_pipewire_an_rt_hog_that_starves_the_servers_own_thread_is_named_as_the_drivers_delay() {
    // On the system's PipeWire (0.3.65) and on 1.4 (what most users run).
    for build in PipeWireBuild::all() {
        let _turn = take_turn();
        let pw = TestPipeWire::start_build(&build, 256);
        let _calm = start_client({
            let mut c = pw.pw_jack(&late_client());
            c.args(["calm", "1000000", "0", "30"]);
            c
        });
        // The server's SCHED_FIFO thread (0.3.65's `pipewire`, 1.x's `data-loop.0`) on CPU 1,
        // where the hog spins; everything else of the server on CPU 0.
        pin_server_thread_to_cpu1(pw.pid(), &format!("the server ({})", build.label()));
        let (_hog, hog_pid, spins) = start_hog(15_000, 700, 12);
        let dir = scratch(&format!("pw-starved-{}", build.label()));
        let (out, records, summary) = watch(
            &["--server", "pipewire", "--duration", "8s"],
            &pw.env(),
            &dir,
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let spins: Vec<u64> = spins.try_iter().collect();
        check_driver_starved(&records, &spins, 15_000_000, hog_pid, "calm", &out);
        // The LatencyMon table: the hog leads what delayed the server's threads.
        let top = summary
            .summary
            .server_delays
            .first()
            .expect("a delay table");
        assert_eq!(
            top.pid,
            Some(hog_pid),
            "{:?}",
            summary.summary.server_delays
        );
        assert!(
            summary
                .summary
                .delay_verdict
                .contains("highest delay: xrunlab-rt-hog"),
            "{}",
            summary.summary.delay_verdict
        );
    }
}

#[test]
#[ignore = "needs root (SCHED_FIFO, affinity, kernel events) and jackd; test.sh runs it with --include-ignored"]
fn on_jack_an_rt_hog_that_starves_the_servers_own_thread_is_named_as_the_drivers_delay() {
    let _turn = take_turn();
    let server = TestServer::start("xwatchstarve", 256);
    let _calm = start_client({
        let mut c = Command::new(late_client());
        c.args(["calm", "1000000", "0", "30"])
            .env("JACK_DEFAULT_SERVER", server.name());
        c
    });
    pin_server_thread_to_cpu1(server.pid(), "jackd");
    let (_hog, hog_pid, spins) = start_hog(15_000, 700, 12);
    let dir = scratch("jack-starved");
    let (out, records, _) = watch(
        &[
            "--server",
            "jack",
            "--jack-server",
            server.name(),
            "--duration",
            "8s",
        ],
        &[],
        &dir,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let spins: Vec<u64> = spins.try_iter().collect();
    check_driver_starved(&records, &spins, 15_000_000, hog_pid, "calm", &out);
}

#[test]
#[ignore = "needs root (kernel events) and jackd with jack_connect; test.sh runs it with --include-ignored"]
fn on_jack_lateness_passed_down_a_chain_is_blamed_on_the_client_upstream_that_ran_long() {
    let _turn = take_turn();
    let server = TestServer::start("xwatchchain", 256);
    // A spikes 4.5 ms every 100th cycle; B, fed by A, runs 1.5 ms every cycle: together they
    // pass the 5.33 ms period, and neither alone does.
    let a = start_client({
        let mut c = Command::new(late_client());
        c.args(["upstream", "100", "4500", "30"])
            .env("JACK_DEFAULT_SERVER", server.name());
        c
    });
    let _b = start_client({
        let mut c = Command::new(late_client());
        c.args(["downstream", "1", "1500", "30"])
            .env("JACK_DEFAULT_SERVER", server.name());
        c
    });
    server.tool("jack_connect", &["upstream:out", "downstream:in"]);
    let dir = scratch("jack-chain");
    let (out, records, summary) = watch(
        &[
            "--server",
            "jack",
            "--jack-server",
            server.name(),
            "--duration",
            "8s",
        ],
        &[],
        &dir,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let spikes: Vec<u64> = a.late.try_iter().collect();
    assert!(spikes.len() >= 5, "{} spikes of A", spikes.len());
    // The cycles where A spiked: the one its spike began in, or the next (5.33 ms periods). The
    // machine may drop other cycles on its own (a loaded VM once made B's thread seem to run
    // 5.44 ms in a cycle where A was calm); those cards are not about the chain.
    const PERIOD_NS: u64 = 5_333_333;
    let in_spike_cycle = |r: &Value| {
        r["card"]["xrun"]["cycle_start_ns"]
            .as_u64()
            .is_some_and(|c| {
                spikes
                    .iter()
                    .any(|&s| c <= s + 1_000_000 && s <= c + 2 * PERIOD_NS)
            })
    };
    // The cards that name a node: B's lateness is blamed on A (A ran long, upstream of B).
    let naming: Vec<&Value> = records
        .iter()
        .filter(|r| {
            r["card"]["path"].as_array().is_some_and(|p| !p.is_empty())
                && r["card"]["xrun"]["node"].is_object()
                && in_spike_cycle(r)
        })
        .collect();
    assert!(
        !naming.is_empty(),
        "no card in A's spike cycles names a node:\n{stdout}"
    );
    let root = |r: &Value| {
        r["card"]["path"]
            .as_array()
            .and_then(|p| p.last())
            .map(|s| s["name"].as_str().unwrap_or("").to_owned())
            .unwrap_or_default()
    };
    let on_a = naming.iter().filter(|r| root(r) == "upstream").count();
    assert!(
        on_a * 10 >= naming.len() * 9,
        "{on_a} of {} cards name A (upstream) as the root:\n{stdout}",
        naming.len()
    );
    assert!(
        naming.iter().all(|r| root(r) != "downstream"),
        "a card blames B:\n{stdout}"
    );
    let chained = naming
        .iter()
        .filter(|r| node_name(r) == "downstream" && root(r) == "upstream")
        .count();
    assert!(chained > 0, "no card shows B late because of A:\n{stdout}");
    assert!(stdout.contains("upstream, \"upstream\""), "{stdout}");
    let a_line = summary
        .summary
        .nodes
        .iter()
        .find(|n| n.name == "upstream")
        .expect("A in the summary");
    assert!(
        a_line.xruns > 0,
        "A is blamed in the summary: {:?}",
        summary.summary.nodes
    );
}

/// `xrunlab history --db DB --json`, read back.
fn history_json(db: &Path) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_xrunlab"))
        .args(["history", "--json", "--limit", "1000", "--db"])
        .arg(db)
        .output()
        .expect("xrunlab history runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("history --json is JSON")
}

#[test]
#[ignore = "needs root (SCHED_FIFO, affinity, kernel events), pipewire and pipewire-jack; test.sh runs it with --include-ignored"]
fn record_keeps_every_xrun_of_a_starved_server_with_its_root_and_survives_kill_9() {
    for build in PipeWireBuild::all() {
        let _turn = take_turn();
        let pw = TestPipeWire::start_build(&build, 256);
        let _calm = start_client({
            let mut c = pw.pw_jack(&late_client());
            c.args(["calm", "1000000", "0", "30"]);
            c
        });
        pin_server_thread_to_cpu1(pw.pid(), "the server");
        let (_hog, hog_pid, spins) = start_hog(15_000, 700, 14);
        let dir = scratch(&format!("record-{}", build.label()));
        let db = dir.join("history.db");
        // A recorder killed with SIGKILL mid-run, then another on the same file.
        let first_from = now_ns();
        let mut first = Command::new(env!("CARGO_BIN_EXE_xrunlab"))
            .args(["record", "--server", "pipewire", "--db"])
            .arg(&db)
            .envs(pw.env())
            .stdout(Stdio::null())
            .spawn()
            .expect("record starts");
        std::thread::sleep(Duration::from_secs(4));
        // SAFETY: sending SIGKILL to our own child.
        unsafe { libc::kill(first.id() as i32, libc::SIGKILL) };
        let first_to = now_ns();
        let _ = first.wait();
        let before = history_json(&db);
        let kept = before["xruns"].as_array().map_or(0, Vec::len);
        assert!(kept >= 2, "the killed recorder kept {kept} xruns: {before}");
        let second_from = now_ns();
        let out = Command::new(env!("CARGO_BIN_EXE_xrunlab"))
            .args(["record", "--server", "pipewire", "--duration", "6s", "--db"])
            .arg(&db)
            .envs(pw.env())
            .output()
            .expect("record runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let second_to = now_ns();
        let after = history_json(&db);
        let xruns = after["xruns"].as_array().expect("xruns");
        assert!(
            xruns.len() > kept,
            "{} xruns after, {kept} before",
            xruns.len()
        );
        // Every spin of the hog while a recorder ran left an xrun on file of the driver's late
        // start, most naming the hog: the spins from a recorder's first second and a half (it
        // connects, opens its rings, learns the graph) to its end are each matched, by the
        // cycle the driver started late (its start within the spin or just after it), to such a
        // card. The end: for the recorder that ended itself, 1.7 s before it exited (it reads on
        // for 1.15 s, what the server reported before its --duration ended, and a card waits for
        // its window); for the one killed, a second before (SIGKILL also loses the batch of
        // records not yet read, half a second of them).
        let hog_named = |x: &Value| {
            x["card"]["root"]["account"]["main_culprit"]["pid"].as_i64() == Some(i64::from(hog_pid))
        };
        let (settle, tail, killed_tail) = (1_500_000_000, 1_700_000_000, 1_000_000_000);
        let inside = |t: u64| {
            (first_from + settle..first_to - killed_tail).contains(&t)
                || (second_from + settle..second_to - tail).contains(&t)
        };
        let spins: Vec<u64> = spins.try_iter().filter(|&t| inside(t)).collect();
        let card_of = |t: u64| xruns.iter().find(|x| carded_spin(x, t));
        let missed: Vec<u64> = spins
            .iter()
            .copied()
            .filter(|&t| card_of(t).is_none())
            .collect();
        assert!(
            spins.len() >= 6 && missed.is_empty(),
            "{} spins while a recorder ran, no driver_woke_late card for those at {missed:?} ns: \
             {after}",
            spins.len()
        );
        // Each spin's card names the hog as what held the driver's thread off its CPU, also when
        // the trace lacks the driver's wake-up: this VM records nothing while its second CPU is
        // idle, so a wake-up made there is missing, and the card names the task that held the
        // CPU instead (0 of 9 unnamed in 15 runs on each build; before, 9 of 16 in one hand-made
        // watch on 1.4.2). One is allowed for this shared machine's own xruns.
        let unnamed: Vec<u64> = spins
            .iter()
            .copied()
            .filter(|&t| !card_of(t).is_some_and(hog_named))
            .collect();
        assert!(
            unnamed.len() <= 1,
            "{} spins, the cards of those at {unnamed:?} ns do not name the hog: {after}",
            spins.len()
        );
        // The database is whole after the kill.
        let h = xrunlab_history::History::open_reader(&db).expect("the history opens");
        assert_eq!(h.integrity_check().expect("integrity_check runs"), "ok");
        assert!(
            after["sessions"].as_array().is_some_and(|s| s.len() >= 2),
            "both recorders' sessions on file: {}",
            after["sessions"]
        );
    }
}

#[test]
#[ignore = "needs root (SCHED_FIFO, affinity, kernel events), pipewire 1.4 and pipewire-jack; a 60 s recording; test.sh runs it with --include-ignored"]
fn record_over_a_minute_files_every_irregular_stall_and_every_spin_with_its_root() {
    let _turn = take_turn();
    // PipeWire 1.4, what users run (the kill -9 test above records both builds). A client that
    // stalls 8 ms at irregular times (every 60 to 200 cycles) on CPU0, and an RT hog spinning
    // 15 ms every 700 ms on CPU1, where the server's data loop is pinned: two roots, each
    // xrun to be filed with its own.
    let pw = TestPipeWire::start_build(&PipeWireBuild::newer(), 256);
    let stall = start_client({
        let mut c = pw.pw_jack(&late_client());
        c.args(["stall", "60-200", "8000", "75"]);
        c
    });
    pin_server_thread_to_cpu1(pw.pid(), "the server");
    pin(stall.tid, 0);
    let (_hog, hog_pid, spins) = start_hog(15_000, 700, 66);
    let dir = scratch("record-minute");
    let db = dir.join("history.db");
    let from = now_ns();
    let out = Command::new(env!("CARGO_BIN_EXE_xrunlab"))
        .args([
            "record",
            "--server",
            "pipewire",
            "--duration",
            "60s",
            "--db",
        ])
        .arg(&db)
        .envs(pw.env())
        .output()
        .expect("record runs");
    let to = now_ns();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let after = history_json(&db);
    let xruns = after["xruns"].as_array().expect("xruns");
    // What the recorder surely saw: from its first second and a half to 1.7 s before it
    // ended (as in the kill -9 test).
    let inside = |t: u64| (from + 1_500_000_000..to - 1_700_000_000).contains(&t);
    let spins: Vec<u64> = spins.try_iter().filter(|&t| inside(t)).collect();
    let all_stalls: Vec<u64> = stall.late.try_iter().collect();
    let stalls: Vec<u64> = all_stalls.iter().copied().filter(|&t| inside(t)).collect();
    // A stall and a spin that overlap are two causes at once: either root is right, and one
    // xrun may be carded for both; they are left out of both checks.
    let overlap = |stall: u64, spin: u64| {
        stall + 2 * PERIOD_NS + 8_000_000 >= spin && stall <= spin + 15_000_000 + 2 * PERIOD_NS
    };
    let (stalls, both): (Vec<u64>, Vec<u64>) = stalls
        .into_iter()
        .partition(|&t| !spins.iter().any(|&s| overlap(t, s)));
    let spins: Vec<u64> = spins
        .into_iter()
        .filter(|&s| !all_stalls.iter().any(|&t| overlap(t, s)))
        .collect();
    assert!(
        spins.len() >= 50 && stalls.len() >= 40,
        "{} spins and {} stalls (and {} at once) in the minute",
        spins.len(),
        stalls.len(),
        both.len()
    );
    let cycle = |x: &Value| x["card"]["xrun"]["cycle_start_ns"].as_u64();
    // Each stall's card: the stalling client ran long, as the late node or as the root at the
    // end of the card's path. (A card where it woke late names what held it off instead: under
    // load, `dd` on its CPU.)
    let names_stall = |x: &Value| {
        let root = x["card"]["path"]
            .as_array()
            .and_then(|p| p.last())
            .map_or(node_name(x), |s| s["name"].as_str().unwrap_or(""));
        x["root"] == "node" && x["kind"] == "node_ran_long" && root == "stall"
    };
    let stall_card = |t: u64| {
        xruns.iter().find(|x| {
            cycle(x).is_some_and(|c| c <= t + PERIOD_NS && t <= c + 3 * PERIOD_NS) && names_stall(x)
        })
    };
    let missed_stalls: Vec<u64> = stalls
        .iter()
        .copied()
        .filter(|&t| stall_card(t).is_none())
        .collect();
    // Each spin's card: the driver woke late, behind the hog.
    let spin_card = |t: u64| {
        xruns.iter().find(|x| {
            carded_spin(x, t)
                && x["card"]["root"]["account"]["main_culprit"]["pid"].as_i64()
                    == Some(i64::from(hog_pid))
        })
    };
    let missed_spins: Vec<u64> = spins
        .iter()
        .copied()
        .filter(|&t| spin_card(t).is_none())
        .collect();
    let summaries = |x: &Value| format!("{} {}", x["time_ns"], x["summary"]);
    let listing: Vec<String> = xruns.iter().map(summaries).collect();
    // One of each is allowed for this shared machine's own noise (the kill -9 test's rule).
    assert!(
        missed_stalls.len() <= 1 && missed_spins.len() <= 1,
        "{} stalls, none named on file for those at {missed_stalls:?}; {} spins, none named \
         for those at {missed_spins:?}:\n{}",
        stalls.len(),
        spins.len(),
        listing.join("\n")
    );
    // No card during a spin blames the stalling client, and none away from a stall blames it.
    let wrongly_on_stall: Vec<String> = xruns
        .iter()
        .filter(|x| names_stall(x))
        .filter(|x| {
            cycle(x).is_some_and(|c| {
                !all_stalls
                    .iter()
                    .any(|&t| c <= t + PERIOD_NS && t <= c + 3 * PERIOD_NS)
            })
        })
        .map(summaries)
        .collect();
    assert!(
        wrongly_on_stall.len() <= 1,
        "cards blame the stalling client away from its stalls:\n{}",
        wrongly_on_stall.join("\n")
    );
    // Every node was there before the recorder started: none is filed as having appeared.
    let appeared: Vec<&Value> = after["drift"]
        .as_array()
        .expect("drift")
        .iter()
        .filter(|d| d["kind"] == "node_added")
        .collect();
    assert!(appeared.is_empty(), "{appeared:?}");
    // `history` prints them: each stall's and each spin's card on its own line, under its id,
    // with its kind and its cause.
    let text = Command::new(env!("CARGO_BIN_EXE_xrunlab"))
        .args(["history", "--limit", "1000", "--db"])
        .arg(&db)
        .output()
        .expect("xrunlab history runs");
    assert!(text.status.success());
    let text = String::from_utf8_lossy(&text.stdout);
    let line_of = |x: &Value| {
        let id = x["id"].as_i64().expect("an id");
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(&id.to_string()))
            .unwrap_or_else(|| panic!("xrun {id} is not in `history`:\n{text}"))
    };
    for x in stalls.iter().filter_map(|&t| stall_card(t)) {
        let line = line_of(x);
        assert!(
            line.contains("node_ran_long")
                && line.contains("\"stall\"")
                && line.contains("ran long"),
            "{line}"
        );
    }
    for x in spins.iter().filter_map(|&t| spin_card(t)) {
        let line = line_of(x);
        assert!(
            line.contains("driver_woke_late")
                && line.contains(&format!("behind xrunlab-rt-hog (pid {hog_pid}")),
            "{line}"
        );
    }
}

#[test]
fn record_goes_on_across_a_server_restart_and_files_the_gap() {
    let _turn = take_turn();
    let server = TestServer::start("xrecrestart", 256);
    let name = server.name().to_owned();
    let client = late_every_40_cycles(&server);
    let dir = scratch("record-restart");
    let db = dir.join("history.db");
    let recorder = Command::new(env!("CARGO_BIN_EXE_xrunlab"))
        .args([
            "record",
            "--server",
            "jack",
            "--jack-server",
            &name,
            "--no-kernel",
            "--duration",
            "16s",
            "--db",
        ])
        .arg(&db)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("record starts");
    std::thread::sleep(Duration::from_secs(5));
    // The server goes away (and its client with it), then a new one of the same name comes.
    drop(client);
    drop(server);
    std::thread::sleep(Duration::from_secs(2));
    let server = TestServer::start_named(&name, 256)
        .unwrap_or_else(|e| panic!("a new server under {name}: {e:?}"));
    let _client = late_every_40_cycles(&server);
    let out = recorder.wait_with_output().expect("record ends");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("recording goes on when the server is back"),
        "{stderr}"
    );
    let h = history_json(&db);
    let sessions = h["sessions"].as_array().expect("sessions");
    assert_eq!(sessions.len(), 1, "one recorder, one session: {h}");
    let gaps = sessions[0]["gaps"].as_array().expect("gaps");
    assert_eq!(gaps.len(), 1, "the restart is one gap: {gaps:?}");
    let (from, to) = (
        gaps[0]["from_ns"].as_i64().expect("from_ns"),
        gaps[0]["to_ns"]
            .as_i64()
            .unwrap_or_else(|| panic!("the server came back within the session: {gaps:?}")),
    );
    assert!(to > from, "{gaps:?}");
    assert!(
        !gaps[0]["reason"].as_str().unwrap_or_default().is_empty(),
        "{gaps:?}"
    );
    let times: Vec<i64> = h["xruns"]
        .as_array()
        .expect("xruns")
        .iter()
        .filter_map(|x| x["time_ns"].as_i64())
        .collect();
    assert!(
        times.iter().any(|&t| t < from),
        "xruns before the restart are on file: {times:?}, gap {from}..{to}"
    );
    assert!(
        times.iter().any(|&t| t > to),
        "recording went on after the restart: {times:?}, gap {from}..{to}"
    );
}

#[test]
#[ignore = "needs root: JACK2's server thread is found from the kernel's wake chain, and demoting it takes chrt (CI runs as root)"]
fn record_files_the_servers_thread_losing_sched_fifo_and_the_next_card_mentions_it() {
    let _turn = take_turn();
    let server = TestServer::start("xrecdrift", 256);
    let _client = late_every_40_cycles(&server);
    let before = fifo_threads(server.pid());
    assert!(!before.is_empty(), "jackd runs no SCHED_FIFO thread");
    let dir = scratch("record-drift");
    let db = dir.join("history.db");
    let recorder = Command::new(env!("CARGO_BIN_EXE_xrunlab"))
        .args([
            "record",
            "--server",
            "jack",
            "--jack-server",
            server.name(),
            "--duration",
            "14s",
            "--db",
        ])
        .arg(&db)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("record starts");
    std::thread::sleep(Duration::from_secs(6));
    // What rtkit does after a suspend: the server's real-time threads demoted to SCHED_OTHER.
    let demoted_at = xrunlab_history::unix_ns(std::time::SystemTime::now());
    for tid in &before {
        let st = Command::new("chrt")
            .args(["-o", "-p", "0", &tid.to_string()])
            .status()
            .expect("chrt runs");
        assert!(st.success(), "chrt -o -p 0 {tid}");
    }
    assert!(
        fifo_threads(server.pid()).is_empty(),
        "every FIFO thread demoted"
    );
    let out = recorder.wait_with_output().expect("record ends");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let h = history_json(&db);
    let drift = h["drift"].as_array().expect("drift");
    let lost = drift
        .iter()
        .find(|d| d["kind"] == "sched" && d["before"].as_str().unwrap_or("").contains("FIFO"))
        .unwrap_or_else(|| {
            panic!("no drift event of the server's thread losing SCHED_FIFO: {drift:?}")
        });
    let at = lost["time_ns"].as_i64().expect("time_ns");
    assert!(
        at >= demoted_at - 1_000_000_000,
        "seen after the demotion: {at} vs {demoted_at}"
    );
    let after: Vec<&Value> = h["xruns"]
        .as_array()
        .expect("xruns")
        .iter()
        .filter(|x| x["time_ns"].as_i64().is_some_and(|t| t > at))
        .collect();
    assert!(!after.is_empty(), "xruns after the demotion: {h}");
    // "the server's … thread (…) has run SCHED_OTHER 0 since HH:MM:SS (it had SCHED_FIFO …)"
    let subject = lost["subject"].as_str().expect("subject");
    assert!(
        after.iter().any(|x| {
            let words = x["card"]["drift_before"].to_string();
            words.contains(subject) && words.contains("SCHED_OTHER")
        }),
        "a card after the demotion mentions it ({subject}): {:?}",
        after
            .iter()
            .map(|x| &x["card"]["drift_before"])
            .collect::<Vec<_>>()
    );
}

#[test]
#[ignore = "needs root: JACK2 names no late client, so record needs the kernel's wake chain (CI runs as root)"]
fn record_keeps_a_perfetto_snapshot_per_root_cause_at_most_every_interval_and_history_writes_it() {
    let _turn = take_turn();
    let server = TestServer::start("xrecsnap", 256);
    let _client = late_every_40_cycles(&server);
    let dir = scratch("record-snapshots");
    let db = dir.join("history.db");
    // An xrun about every 213 ms for 8 s: within one 30 s interval (the default).
    let out = Command::new(env!("CARGO_BIN_EXE_xrunlab"))
        .args([
            "record",
            "--server",
            "jack",
            "--jack-server",
            server.name(),
            "--duration",
            "8s",
            "--db",
        ])
        .arg(&db)
        .output()
        .expect("record runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let h = history_json(&db);
    let xruns = h["xruns"].as_array().expect("xruns");
    let with: Vec<&Value> = xruns.iter().filter(|x| x["has_snapshot"] == true).collect();
    assert!(!with.is_empty(), "no snapshot kept: {h}");
    // The rate limit: one per root cause within the 30 s, however many xruns it had.
    for s in &with {
        let root = &s["root"];
        let kept = with.iter().filter(|x| &x["root"] == root).count();
        assert_eq!(kept, 1, "{kept} snapshots of root {root} within 30 s");
    }
    let of_node = xruns.iter().filter(|x| x["root"] == "node").count();
    assert!(
        of_node > 20,
        "{of_node} xruns of the late client in 8 s (one every 213 ms)"
    );
    // The recorder reads JACK2's wake chain only around each xrun: the late client is still
    // the one named, each time, with the medians (learned from the cycles before the xrun)
    // that show how long it ran against its usual.
    for x in xruns.iter().filter(|x| x["root"] == "node") {
        assert_eq!(x["node"], "late", "{x}");
        assert_eq!(x["culprit"], "late", "{x}");
        assert!(
            x["card"]["xrun"]["median_busy_ns"].as_u64().is_some(),
            "no median: {x}"
        );
    }
    // Written by history, it is a trace that parses, with the xrun's slices in it.
    // The late client's first xrun (it ran long, or on a loaded machine woke late).
    let x = with
        .iter()
        .find(|x| x["root"] == "node" && x["node"] == "late")
        .unwrap_or_else(|| panic!("no snapshot of the late client's xrun: {with:?}"));
    let id = x["id"].as_i64().expect("id").to_string();
    let file = dir.join(format!("xrun{id}.perfetto-trace"));
    let wrote = Command::new(env!("CARGO_BIN_EXE_xrunlab"))
        .args(["history", "--trace", &id])
        .arg(&file)
        .arg("--db")
        .arg(&db)
        .output()
        .expect("history --trace runs");
    assert!(
        wrote.status.success(),
        "{}",
        String::from_utf8_lossy(&wrote.stderr)
    );
    let trace: Value = serde_json::from_str(&std::fs::read_to_string(&file).expect("written"))
        .expect("the snapshot is a JSON trace");
    let events = trace["traceEvents"].as_array().expect("traceEvents");
    let dropouts: Vec<&Value> = events.iter().filter(|e| e["name"] == "dropout").collect();
    assert_eq!(dropouts.len(), 1, "one xrun in its snapshot");
    assert_eq!(
        dropouts[0]["args"]["detail"]["kind"], x["card"]["kind"],
        "the mark carries its card"
    );
    // The late node's cycle: its WAIT and BUSY slices, which together outlast the period (it
    // finished past its deadline).
    let late_tracks: Vec<&Value> = events
        .iter()
        .filter(|e| e["name"] == "thread_name" && e["args"]["name"] == "node late")
        .collect();
    assert_eq!(late_tracks.len(), 1, "the late node's track: {events:?}");
    let tid = &late_tracks[0]["tid"];
    let late_us: f64 = events
        .iter()
        .filter(|e| (e["name"] == "busy" || e["name"] == "wait") && &e["tid"] == tid)
        .filter_map(|e| e["dur"].as_f64())
        .sum();
    assert!(
        late_us > PERIOD_NS as f64 / 1000.0,
        "the late node's WAIT and BUSY are {late_us} µs: {events:?}"
    );
    // Its thread, from the kernel's switches, and the kernel's CPU tracks.
    let thread_tid = x["card"]["mapping"]["thread"]["tid"]
        .as_i64()
        .expect("mapped");
    assert!(
        events
            .iter()
            .any(|e| e["name"] == "running" && e["tid"].as_i64() == Some(thread_tid)),
        "the late client's thread runs in its snapshot"
    );
    assert!(
        events
            .iter()
            .any(|e| e["cat"] == "sched" && e["pid"].as_i64() == Some(1 << 30)),
        "the kernel's events in the snapshot"
    );
    assert_eq!(trace["otherData"]["xrunlab_card_kind"], x["kind"]);
}

/// A `/proc/PID/status` field, kB.
fn status_kb(pid: u32, field: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[test]
#[ignore = "needs root: record reads JACK2's wake chain from the kernel's events (CI runs as root)"]
fn record_on_jack2_stays_under_32_mb_resident_through_an_xrun_storm() {
    let _turn = take_turn();
    let server = TestServer::start("xrecmem", 256);
    let _client = late_every_40_cycles(&server);
    let dir = scratch("record-memory");
    let mut recorder = Reaped(
        Command::new(env!("CARGO_BIN_EXE_xrunlab"))
            .args([
                "record",
                "--server",
                "jack",
                "--jack-server",
                server.name(),
                "--duration",
                "7s",
                "--db",
            ])
            .arg(dir.join("history.db"))
            .stdout(Stdio::null())
            .spawn()
            .expect("record starts"),
    );
    let pid = recorder.0.id();
    // From when the client is open (libjack locks the server's ~100 MB graph segment into every
    // client it opens, for a moment) until the end: an xrun every 213 ms meanwhile.
    std::thread::sleep(Duration::from_millis(1500));
    let mut rss = Vec::new();
    while let Some(kb) = status_kb(pid, "VmRSS") {
        rss.push(kb);
        std::thread::sleep(Duration::from_millis(250));
    }
    let status = recorder.0.wait().expect("record ends");
    assert!(status.success(), "record: {status}");
    assert!(rss.len() >= 10, "sampled {} times", rss.len());
    let peak = rss.iter().max().copied().unwrap_or(0);
    assert!(
        peak < 32 * 1024,
        "record's resident set reached {peak} kB (samples {rss:?})"
    );
}

/// The Prometheus text at `port`'s `/metrics`.
fn scrape(port: u16) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("metrics answer");
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
        .expect("request sent");
    let mut body = String::new();
    s.read_to_string(&mut body).expect("response read");
    body
}

#[test]
#[ignore = "needs root: record's kernel events on JACK2 (CI runs as root)"]
fn record_on_jack2_counts_every_cycle_from_the_servers_clock() {
    let _turn = take_turn();
    let server = TestServer::start("xreccycles", 256);
    let dir = scratch("record-cycles");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let _recorder = Reaped(
        Command::new(env!("CARGO_BIN_EXE_xrunlab"))
            .args([
                "record",
                "--server",
                "jack",
                "--jack-server",
                server.name(),
                "--duration",
                "8s",
                "--metrics",
            ])
            .arg(format!("127.0.0.1:{port}"))
            .arg("--db")
            .arg(dir.join("history.db"))
            .stdout(Stdio::null())
            .spawn()
            .expect("record starts"),
    );
    // A calm graph: no xrun, so no wake chain is read; the cycles still count.
    let cycles = |body: &str| -> f64 {
        body.lines()
            .filter(|l| l.starts_with("xrunlab_cycles_total"))
            .filter_map(|l| l.split_whitespace().last()?.parse::<f64>().ok())
            .sum()
    };
    std::thread::sleep(Duration::from_secs(2));
    let (first, t0) = (cycles(&scrape(port)), Instant::now());
    std::thread::sleep(Duration::from_secs(3));
    let (second, span) = (cycles(&scrape(port)), t0.elapsed());
    let expected = span.as_nanos() as f64 / PERIOD_NS as f64;
    // Counted once a second: within two reports (and a loaded machine's slack) of the span's.
    let counted = second - first;
    assert!(
        (counted - expected).abs() < 2.0 * 188.0 + expected * 0.1,
        "{counted} cycles counted in {span:?}, {expected:.0} run"
    );
}

#[test]
#[ignore = "needs root: record reads JACK2's wake chain from the kernel's events (CI runs as root)"]
fn record_on_jack2_names_a_client_that_joined_after_its_first_xrun() {
    let _turn = take_turn();
    let server = TestServer::start("xrecjoin", 256);
    let dir = scratch("record-join");
    let db = dir.join("history.db");
    let late = |name: &str, seconds: &str| {
        start_client({
            let mut c = Command::new(late_client());
            c.args([name, "40", "8000", seconds])
                .env("JACK_DEFAULT_SERVER", server.name());
            c
        })
    };
    let first = late("first", "3");
    let recorder = Command::new(env!("CARGO_BIN_EXE_xrunlab"))
        .args([
            "record",
            "--server",
            "jack",
            "--jack-server",
            server.name(),
            "--duration",
            "10s",
            "--db",
        ])
        .arg(&db)
        .stdout(Stdio::null())
        .spawn()
        .expect("record starts");
    // The recorder has read the wake chain around "first"'s xruns before "second" opens.
    std::thread::sleep(Duration::from_secs(4));
    drop(first);
    let _second = late("second", "5");
    let status = Reaped(recorder).0.wait().expect("record ends");
    assert!(status.success(), "record: {status}");
    let h = history_json(&db);
    let xruns = h["xruns"].as_array().expect("xruns");
    let of = |name: &str| {
        xruns
            .iter()
            .filter(|x| x["node"] == name && x["culprit"] == name)
            .count()
    };
    assert!(of("first") >= 3, "first: {h}");
    // One every 213 ms for 5 s, less the recorder's last second.
    assert!(
        of("second") >= 10,
        "{} of second's xruns named: {h}",
        of("second")
    );
}
