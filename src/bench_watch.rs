//! `xrunlab bench watch`: what watch reports and what it costs on a running server, measured with
//! a culprit of our own (an xrunlab JACK client that stalls on purpose); runs on the main thread,
//! the culprit and watch as child processes.

use crate::cli::bench::WatchBenchArgs;
use crate::cli::parse::WatchServer;
use crate::watch_source::pipewire_answers;
use crate::Failure;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;
use xrunlab_results::bench_watch::{BenchWatchResult, ModeFigures, SCHEMA};
use xrunlab_results::read::read_typed;
use xrunlab_results::run::{self, RunFile};
use xrunlab_results::watch::{read_xrun_lines, KernelNote};
use xrunlab_sys::Provenance;

/// CPU time of a finished child, from wait4's resource usage: seconds.
fn wait_cpu(pid: i32) -> Result<(f64, i32), Failure> {
    let mut status = 0;
    // SAFETY: a zeroed rusage is valid for the kernel to fill; `pid` is our child, not reaped.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    if rc != pid {
        return Err(Failure::Runtime(format!(
            "waiting for watch: {}",
            std::io::Error::last_os_error()
        )));
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Ok((secs(usage.ru_utime) + secs(usage.ru_stime), status))
}

fn one_mode(
    args: &WatchBenchArgs,
    pipewire: bool,
    watching: bool,
    kernel: bool,
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
    // An xrunlab JACK client (under pw-jack on PipeWire) for as long as the watch and a second
    // on each side.
    let client = |name: &str, json: &Path| {
        let mut c = if pipewire {
            Command::new("pw-jack")
        } else {
            Command::new(&exe)
        };
        if pipewire {
            c.arg(&exe);
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
    };
    // The culprit stalls on purpose; the bystander does not, and its load shows what watching
    // costs the graph.
    let mut culprit = client("bench-culprit", &run_json);
    culprit
        .args(["--stall", "12ms", "--stall-every"])
        .arg(format!("{}ms", args.stall_every.as_millis()));
    let mut culprit = culprit
        .spawn()
        .map_err(|e| Failure::Runtime(format!("the culprit: {e}")))?;
    let mut bystander = client("bench-bystander", &bystander_json)
        .spawn()
        .map_err(|e| Failure::Runtime(format!("the bystander: {e}")))?;
    std::thread::sleep(Duration::from_secs(1));
    let mut watch = Command::new(&exe);
    watch
        .args([
            "watch",
            "--batch",
            "--server",
            if pipewire { "pipewire" } else { "jack" },
        ])
        .arg("--duration")
        .arg(format!("{}ms", (secs * 1000.0) as u64))
        .arg("--json-lines")
        .arg(&lines)
        .arg("--json")
        .arg(&json)
        .stdout(Stdio::null());
    if !kernel {
        watch.arg("--no-kernel");
    }
    if let (false, Some(s)) = (pipewire, &args.jack_server) {
        watch.args(["--jack-server", s]);
    }
    let (cpu_s, status) = if watching {
        let child = watch
            .spawn()
            .map_err(|e| Failure::Runtime(format!("watch: {e}")))?;
        wait_cpu(child.id() as i32)?
    } else {
        // The baseline: the culprit alone for as long, to see what watching costs the graph.
        std::thread::sleep(args.duration);
        std::fs::write(&lines, "").map_err(|e| Failure::Runtime(e.to_string()))?;
        (0.0, 0)
    };
    let _ = culprit.wait();
    let _ = bystander.wait();
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
    let induced = run
        .events
        .iter()
        .filter(|e| e.kind.contains("stall"))
        .filter(|e| e.t_s > 1.3 && e.t_s < 1.0 + secs - 0.3)
        .count();
    let with_node = records
        .iter()
        .filter(|r| r.card.xrun.node.is_some())
        .count();
    let named = records
        .iter()
        .filter(|r| {
            r.card
                .xrun
                .node
                .as_ref()
                .is_some_and(|n| n.name.contains("bench-culprit"))
        })
        .count();
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
        delay_p50_ms: xrunlab_stats::median_interpolated(&delays),
        delay_max_ms: delays.last().copied(),
        lost: kernel_events.lost,
        kernel_note: kernel_events.note,
        bystander_load_p50_pct: Some(bystander.summary.load_pct.p50),
        bystander_load_p99_pct: Some(bystander.summary.load_pct.p99),
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
    let pipewire = match args.server {
        WatchServer::Pipewire => true,
        WatchServer::Jack => false,
        WatchServer::Auto => pipewire_answers(),
    };
    println!(
        "watch on {} for {} per mode; the culprit (JACK client \"bench-culprit\") stalls 12 ms every {}",
        if pipewire { "PipeWire" } else { "JACK" },
        humantime::format_duration(args.duration),
        humantime::format_duration(args.stall_every)
    );
    println!(
        "{:<22} {:>7} {:>8} {:>6} {:>6} {:>8} {:>10} {:>10} {:>5}  bystander load p50/p99",
        "mode", "CPU %", "induced", "cards", "named", "right %", "delay p50", "delay max", "lost"
    );
    let mut modes = Vec::new();
    for (watching, kernel) in [(false, false), (true, false), (true, true)] {
        let f = one_mode(args, pipewire, watching, kernel)?;
        // Of the cards that name a node, the share that names the culprit: driver-side cards
        // (the device was late, every client in time) name none and are not counted wrong.
        let named_pct = if f.with_node == 0 {
            0.0
        } else {
            f.named as f64 * 100.0 / f.with_node as f64
        };
        let pct = |p: Option<f64>| p.map_or("-".to_owned(), |p| format!("{p:.2}"));
        let ms = |p: Option<f64>| p.map_or("-".to_owned(), |p| format!("{p:.0}ms"));
        let load = format!(
            "{}/{} %",
            pct(f.bystander_load_p50_pct),
            pct(f.bystander_load_p99_pct)
        );
        if watching {
            println!(
                "{:<22} {:>7.2} {:>8} {:>6} {:>6} {:>8.1} {:>10} {:>10} {:>5}  {load}",
                f.mode,
                f.cpu_pct,
                f.induced,
                f.cards,
                f.named,
                named_pct,
                ms(f.delay_p50_ms),
                ms(f.delay_max_ms),
                f.lost,
            );
        } else {
            println!(
                "{:<22} {:>7} {:>8} {:>6} {:>6} {:>8} {:>10} {:>10} {:>5}  {load}",
                f.mode, "-", f.induced, "-", "-", "-", "-", "-", "-"
            );
        }
        if kernel && f.kernel_note != "recorded" {
            println!("  kernel events were not recorded: {}", f.kernel_note);
        }
        modes.push(f);
    }
    println!(
        "CPU %: watch's own user+system time over the watch, of one CPU. induced: the culprit's \
         stalls inside the watch; cards: xruns reported; named: cards naming the culprit; right: \
         of the cards naming a node, the share naming the culprit (driver-side cards name no \
         node). delay: \
         from the xrun's deadline to its card. bystander load: a second client's render \
         time per period (its BUSY), which does not stall, not watched and watched: watch's \
         effect on the graph (one run each: a difference within this machine's 10-20 % \
         run-to-run noise shows nothing)."
    );
    if let Some(p) = &args.json {
        provenance.finish();
        let result = BenchWatchResult {
            schema: SCHEMA.to_owned(),
            provenance,
            server: if pipewire { "PipeWire" } else { "JACK" }.to_owned(),
            duration_s: args.duration.as_secs_f64(),
            stall_every_s: args.stall_every.as_secs_f64(),
            modes,
        };
        xrunlab_results::write::write_json(p, &result)?;
    }
    Ok(())
}
