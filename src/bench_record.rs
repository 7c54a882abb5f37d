//! `xrunlab bench record`: what the flight recorder costs against `watch`, both running at once
//! on the same graph, through an idle phase (a calm xrunlab JACK client) and an xrun storm (the
//! client stalls on purpose): CPU from /proc/PID/stat, resident memory from /proc/PID/status,
//! and the xruns each saw. Runs on the main thread; the client, record and watch are child
//! processes.

use crate::cli::bench::RecordBenchArgs;
use crate::cli::parse::WatchServer;
use crate::Failure;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use xrunlab_results::bench_record::{BenchRecordResult, CostRow, SCHEMA};
use xrunlab_sys::Provenance;

/// The tools' start-up (the kernel tracer, the server's client, the database), left out of
/// what is counted.
const WARM_UP: Duration = Duration::from_secs(2);
/// How often resident memory is sampled.
const SAMPLE_EVERY: Duration = Duration::from_millis(250);
/// How long a tool may take to end after SIGTERM before it is killed.
const END_WITHIN: Duration = Duration::from_secs(10);

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

/// The process's user+system CPU time so far, clock ticks (`/proc/PID/stat` fields 14 and 15).
fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command's closing parenthesis, from field 3 (the state).
    let rest: Vec<&str> = stat
        .get(stat.rfind(')')? + 1..)?
        .split_whitespace()
        .collect();
    let utime: u64 = rest.get(11)?.parse().ok()?;
    let stime: u64 = rest.get(12)?.parse().ok()?;
    Some(utime + stime)
}

fn ticks_per_s() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// A tool under measurement: its child process and what was sampled of it.
struct Measured {
    tool: &'static str,
    child: Child,
    ticks_from: u64,
    rss_peak_kb: u64,
}

impl Measured {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Ends it with SIGTERM (both tools end cleanly on it), or kills it when it does not end.
    fn stop(&mut self) -> Result<(), Failure> {
        // SAFETY: signalling our own child, not yet reaped.
        unsafe { libc::kill(self.pid() as i32, libc::SIGTERM) };
        let t0 = Instant::now();
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) if status.success() => return Ok(()),
                Ok(Some(status)) => {
                    return Err(Failure::Runtime(format!(
                        "{} failed ({status}) during the bench",
                        self.tool
                    )))
                }
                Ok(None) if t0.elapsed() < END_WITHIN => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                _ => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    return Err(Failure::Runtime(format!(
                        "{} did not end within {} s of SIGTERM",
                        self.tool,
                        END_WITHIN.as_secs()
                    )));
                }
            }
        }
    }
}

impl Drop for Measured {
    fn drop(&mut self) {
        // A bench that failed midway leaves nothing running.
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The phase's client, killed when the phase ends, however it ends.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The server's flags for record and watch alike.
fn server_flags(cmd: &mut Command, args: &RecordBenchArgs, pipewire: bool) {
    cmd.args(["--server", if pipewire { "pipewire" } else { "jack" }]);
    if let (false, Some(s)) = (pipewire, &args.jack_server) {
        cmd.args(["--jack-server", s]);
    }
    if args.no_kernel {
        cmd.arg("--no-kernel");
    }
}

/// The phase's xrunlab JACK client (under pw-jack on PipeWire), for the phase and a few
/// seconds on each side; `stall`: stalling 12 ms every `--stall-every`.
fn client(exe: &Path, args: &RecordBenchArgs, pipewire: bool, stall: bool) -> Command {
    let mut c = if pipewire {
        let mut c = Command::new("pw-jack");
        c.arg(exe);
        c
    } else {
        Command::new(exe)
    };
    c.args(["run", "--device", "jack", "--jack-client"])
        .arg(if stall {
            "bench-record-storm"
        } else {
            "bench-record-calm"
        })
        .args(["--sines", "50", "-q", "--duration"])
        .arg(format!("{}ms", args.duration.as_millis() + 4000))
        .stdout(Stdio::null());
    if stall {
        c.args(["--stall", "12ms", "--stall-every"])
            .arg(format!("{}ms", args.stall_every.as_millis()));
    }
    if let (false, Some(s)) = (pipewire, &args.jack_server) {
        c.args(["--jack-server", s]);
    }
    c
}

fn spawn(tool: &'static str, mut cmd: Command) -> Result<Child, Failure> {
    cmd.stdout(Stdio::null())
        .spawn()
        .map_err(|e| Failure::Runtime(format!("{tool} does not start: {e}")))
}

/// One phase: the client, then record and watch at once for `--duration`.
fn phase(
    args: &RecordBenchArgs,
    pipewire: bool,
    name: &str,
    stall: bool,
) -> Result<Vec<CostRow>, Failure> {
    let exe = std::env::current_exe().map_err(|e| Failure::Runtime(e.to_string()))?;
    let dir = tempfile::tempdir().map_err(|e| Failure::Runtime(e.to_string()))?;
    let db: PathBuf = dir.path().join("history.db");
    let lines = dir.path().join("watch.jsonl");
    let client = Reaped(spawn(
        "the bench's client",
        client(&exe, args, pipewire, stall),
    )?);
    std::thread::sleep(Duration::from_secs(1));
    let mut record = Command::new(&exe);
    record.arg("record").arg("--db").arg(&db);
    server_flags(&mut record, args, pipewire);
    let mut watch = Command::new(&exe);
    watch.args(["watch", "--batch", "--json-lines"]).arg(&lines);
    server_flags(&mut watch, args, pipewire);
    let started = Instant::now();
    let mut tools = Vec::new();
    for (tool, cmd) in [("record", record), ("watch", watch)] {
        let child = spawn(tool, cmd)?;
        tools.push(Measured {
            tool,
            child,
            ticks_from: 0,
            rss_peak_kb: 0,
        });
    }
    std::thread::sleep(WARM_UP);
    let from = Instant::now();
    for t in &mut tools {
        t.ticks_from = cpu_ticks(t.pid())
            .ok_or_else(|| Failure::Runtime(format!("{} ended during its start-up", t.tool)))?;
    }
    let mut ended = None;
    while started.elapsed() < args.duration {
        for t in &mut tools {
            match status_kb(t.pid(), "VmRSS") {
                Some(kb) => t.rss_peak_kb = t.rss_peak_kb.max(kb),
                None => ended = Some(t.tool),
            }
        }
        if let Some(tool) = ended {
            return Err(Failure::Runtime(format!("{tool} ended during the bench")));
        }
        std::thread::sleep(SAMPLE_EVERY);
    }
    let span_s = from.elapsed().as_secs_f64();
    let mut rows = Vec::new();
    for t in &mut tools {
        let pid = t.pid();
        let gone = || Failure::Runtime(format!("{} ended during the bench", t.tool));
        let cpu_s = cpu_ticks(pid)
            .ok_or_else(gone)?
            .saturating_sub(t.ticks_from) as f64
            / ticks_per_s();
        let rss_end = status_kb(pid, "VmRSS").ok_or_else(gone)?;
        let hwm = status_kb(pid, "VmHWM").ok_or_else(gone)?;
        let mb = |kb: u64| kb as f64 * 1024.0 / 1e6;
        rows.push(CostRow {
            phase: name.to_owned(),
            tool: t.tool.to_owned(),
            cpu_s,
            span_s,
            cpu_pct: cpu_s / span_s * 100.0,
            cpu_s_per_hour: cpu_s / span_s * 3600.0,
            rss_peak_mb: mb(t.rss_peak_kb.max(rss_end)),
            rss_end_mb: mb(rss_end),
            hwm_mb: mb(hwm),
            xruns: 0,
        });
    }
    for t in &mut tools {
        t.stop()?;
    }
    drop(client);
    let recorded = xrunlab_history::History::open_reader(&db)?
        .count_xruns(&xrunlab_history::Filter::default())?;
    let cards = xrunlab_results::watch::read_xrun_lines(&lines)
        .map_err(|e| Failure::Runtime(e.to_string()))?
        .len() as u64;
    rows[0].xruns = recorded;
    rows[1].xruns = cards;
    Ok(rows)
}

fn print_row(r: &CostRow) {
    println!(
        "{:<6} {:<7} {:>7.3} {:>9.1} {:>12.1} {:>11.1} {:>8.1} {:>6}",
        r.phase,
        r.tool,
        r.cpu_pct,
        r.cpu_s_per_hour,
        r.rss_peak_mb,
        r.rss_end_mb,
        r.hwm_mb,
        r.xruns
    );
}

/// Runs `xrunlab bench record`.
pub fn bench(args: &RecordBenchArgs) -> Result<(), Failure> {
    if args.duration < WARM_UP * 2 {
        return Err(Failure::Usage(format!(
            "--duration {}: each phase needs 4s or more (its first {} s are the tools' start-up)",
            humantime::format_duration(args.duration),
            WARM_UP.as_secs()
        )));
    }
    if let Some(p) = &args.json {
        crate::files::check_writable("--json", p)?;
    }
    let mut provenance = Provenance::collect(
        env!("CARGO_PKG_VERSION"),
        xrunlab_sys::default_proc_root(),
        xrunlab_sys::default_sys_root(),
    );
    let pipewire = crate::watch_source::is_pipewire(args.server);
    let server = if pipewire {
        WatchServer::Pipewire
    } else {
        WatchServer::Jack
    };
    // The server must be there before anything starts: the recorder would wait for it.
    drop(
        crate::watch_source::open(
            server,
            args.jack_server.as_deref(),
            crate::watch_source::LIVE,
        )
        .map_err(Failure::Runtime)?,
    );
    println!(
        "record and watch side by side on {}, {} per phase (counted after their first {} s), \
         kernel events {}; the storm's client stalls 12 ms every {}",
        if pipewire { "PipeWire" } else { "JACK" },
        humantime::format_duration(args.duration),
        WARM_UP.as_secs(),
        if args.no_kernel { "off" } else { "on" },
        humantime::format_duration(args.stall_every)
    );
    println!(
        "{:<6} {:<7} {:>7} {:>9} {:>12} {:>11} {:>8} {:>6}",
        "phase", "tool", "CPU %", "CPU s/h", "RSS peak MB", "RSS end MB", "HWM MB", "xruns"
    );
    let mut rows = Vec::new();
    for (name, stall) in [("idle", false), ("storm", true)] {
        for r in phase(args, pipewire, name, stall)? {
            print_row(&r);
            rows.push(r);
        }
    }
    println!(
        "CPU %: user+system time from /proc/PID/stat (in {}-per-second clock ticks) over the \
         counted span, of one core; CPU s/h: the same as CPU-seconds per hour. RSS: VmRSS \
         sampled every {} ms over the span (peak) and at its end; HWM: VmHWM, the peak since \
         the tool started, its start-up included. xruns: record's rows in its history, watch's \
         cards. Both tools run at once, so each also shares the machine with the other. \
         Goals (issue 22): record at most 0.3 % idle and 1 % in a storm, 32 MB resident.",
        ticks_per_s(),
        SAMPLE_EVERY.as_millis()
    );
    if let Some(p) = &args.json {
        provenance.finish();
        let result = BenchRecordResult {
            schema: SCHEMA.to_owned(),
            provenance,
            server: if pipewire { "PipeWire" } else { "JACK" }.to_owned(),
            phase_s: args.duration.as_secs_f64(),
            stall_every_s: args.stall_every.as_secs_f64(),
            kernel: !args.no_kernel,
            rows,
        };
        xrunlab_results::write::write_json(p, &result)?;
    }
    Ok(())
}
