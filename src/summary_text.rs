//! The human-readable run summary printed at the end of `run` and `render`; runs on the main
//! thread.

use crate::run_file::{thread_name, RunResult};
use std::fmt::Write;
use xrunlab_engine::Percentiles;

fn pct(p: &Percentiles) -> String {
    format!("p50 {:.1} %  p99 {:.1} %  max {:.1} %", p.p50, p.p99, p.max)
}

fn us(p: &Percentiles) -> String {
    if p.count == 0 {
        return "no samples".into();
    }
    format!(
        "p50 {:.0} us  p99 {:.0} us  max {:.0} us",
        p.p50, p.p99, p.max
    )
}

/// Which Linux counterparts of a work interval took effect, option by option.
fn rt_line(r: &RunResult) -> String {
    use xrunlab_sys::Outcome;
    let ours: Vec<_> = r
        .details
        .scheduling
        .threads
        .iter()
        .filter(|t| t.index > 0 || r.device.driver_thread_is_ours)
        .collect();
    let per_thread =
        |name: &str, pick: &dyn Fn(&xrunlab_sys::sched::ThreadSchedReport) -> &Outcome| {
            let outcomes: Vec<&Outcome> = ours.iter().map(|t| pick(&t.sched)).collect();
            let applied = outcomes.iter().filter(|o| o.took_effect()).count();
            if outcomes.iter().all(|o| matches!(o, Outcome::NotRequested)) {
                format!("{name} not requested")
            } else if applied == outcomes.len() {
                format!("{name} on {applied}/{} threads", outcomes.len())
            } else {
                let why = outcomes
                    .iter()
                    .find(|o| !o.took_effect())
                    .map(|o| o.summary())
                    .unwrap_or_default();
                format!("{name} on {applied}/{} threads ({why})", outcomes.len())
            }
        };
    let process = |name: &str, o: &Outcome| match o {
        Outcome::NotRequested => format!("{name} not requested"),
        o if o.took_effect() => format!("{name} on"),
        o => format!("{name} {}", o.summary()),
    };
    [
        per_thread("priority", &|s| &s.priority),
        per_thread("SCHED_DEADLINE", &|s| &s.deadline),
        per_thread("uclamp.min", &|s| &s.uclamp),
        per_thread("affinity", &|s| &s.affinity),
        process("mlockall", &r.details.scheduling.process.mlock),
        process("PM QoS", &r.details.scheduling.process.pm_qos),
    ]
    .join("; ")
}

/// The driver's spin before it sleeps on the workers, said plainly: a spin is a
/// minimum load of its own, which must not hide in results.
fn driver_spin(us: u32) -> String {
    if us == 0 {
        "driver spin before sleeping: 0 µs (AudioPerfLab blocks at once)".into()
    } else {
        format!(
            "driver spin before sleeping: {us} µs (busy-waits on the driver's core each buffer; AudioPerfLab blocks at once)"
        )
    }
}

/// The summary as lines of text.
pub fn render(r: &RunResult) -> String {
    let mut s = String::new();
    let d = &r.device;
    let period_ms = f64::from(d.buffer_frames) * 1e3 / f64::from(d.sample_rate.max(1));
    let _ = writeln!(
        s,
        "device    {} ({}), {} Hz, {} frames ({period_ms:.3} ms); driver thread: {}",
        d.kind,
        // The device's name can come from the audio server (a JACK server's name).
        xrunlab_sys::printable(&d.name),
        d.sample_rate,
        d.buffer_frames,
        d.driver_thread
    );
    let w = &r.workload;
    let ch = &w.chord;
    let _ = writeln!(
        s,
        "workload  {} sines (+{} in bursts), {} kernel",
        w.sines, w.burst_sines, w.kernel
    );
    let _ = writeln!(
        s,
        "chord     {:?} (notes {}, {} partials) x {}: AudioPerfLab's one chord per physical core, up to {} sines; \
         xrunlab's own extra copies in play: {} of {} built",
        ch.name,
        ch.notes
            .iter()
            .map(u8::to_string)
            .collect::<Vec<_>>()
            .join(" "),
        ch.partials_per_chord,
        ch.apl_chords,
        ch.apl_max_sines,
        ch.extra_copies_in_play,
        ch.extra_copies_built
    );
    let c = &r.config;
    let _ = writeln!(
        s,
        "settings  preset {}; {} processing threads, driver {}, min load {} %, busy threads {} ({} ms, {} %), work interval {}",
        r.preset,
        c.threads,
        c.driver_mode.name(),
        c.min_load_pct,
        c.busy.count,
        c.busy.period_ms,
        c.busy.duty_pct,
        if c.work_interval { "on" } else { "off" }
    );
    if !r.details.scheduling.busy_threads.is_empty() {
        let _ = writeln!(
            s,
            "busy      {} thread(s): {}; achieved duty {}",
            r.details.scheduling.busy_threads.len(),
            r.details
                .scheduling
                .busy_threads
                .iter()
                .map(|b| format!("tid {} {}", b.tid, b.priority.summary()))
                .collect::<Vec<_>>()
                .join(", "),
            r.details
                .scheduling
                .busy_achieved_duty_pct
                .map_or("not measured yet".to_owned(), |d| format!("{d:.1} %"))
        );
    }
    let _ = writeln!(s, "spin      {}", driver_spin(c.driver_spin_us));
    if c.kernel_slowdown != 1 {
        let _ = writeln!(
            s,
            "slowdown  kernel slowed {k}x on purpose (--kernel-slowdown {k}, a test hook): loads are for a kernel {k} times as costly as this machine's",
            k = c.kernel_slowdown
        );
    }
    for t in &r.details.scheduling.threads {
        let _ = writeln!(
            s,
            "thread    {:<9} tid {:<7} {}",
            thread_name(t.index),
            t.tid,
            t.sched.obtained
        );
    }
    let _ = writeln!(s, "rt        {}", rt_line(r));
    for w in &r.details.scheduling.warnings {
        let _ = writeln!(s, "warning   {w}");
    }
    let m = &r.summary;
    let dc = &r.device_counters;
    let _ = writeln!(
        s,
        "buffers   {} ({:.1} s of audio)  dropouts {} (late renders {}, incomplete renders {}, server xruns {}, skipped periods {})  ring drops {}",
        m.buffers, m.audio_seconds, m.dropouts, m.late_renders, m.incomplete_renders, dc.server_xruns, dc.skipped_periods, r.ring_drops
    );
    for t in m.threads.iter().filter(|t| t.unfinished_buffers > 0) {
        let _ = writeln!(
            s,
            "incomplete {}: {} buffers without its part (not finished by the deadline plus a margin, or still busy with an earlier buffer: those are silent)",
            thread_name(t.index),
            t.unfinished_buffers
        );
    }
    let _ = writeln!(s, "load      {}", pct(&m.load_pct));
    if let Some(server) = &m.server_load_pct {
        let _ = writeln!(
            s,
            "server    DSP load {} (the server's own smoothed average)",
            pct(server)
        );
    }
    let _ = writeln!(s, "wake-up   driver {}", us(&m.driver_wake_latency_us));
    let _ = writeln!(s, "          workers {}", us(&m.worker_wake_latency_us));
    let _ = writeln!(s, "threads   #  role      share    cpus (buffers)          migrations  wake p50/p99/max us   cpu ms");
    for t in &m.threads {
        let cpus: Vec<String> = t
            .cpus
            .iter()
            .map(|(cpu, n)| format!("{cpu}({n})"))
            .collect();
        let os = r
            .details
            .scheduling
            .os_stats
            .iter()
            .find(|o| o.index == t.index);
        let migrations = match os.and_then(|o| o.kernel_migrations) {
            Some(k) => format!("{} ({k} kernel)", t.observed_migrations),
            None => t.observed_migrations.to_string(),
        };
        let _ = writeln!(
            s,
            "          {:<2} {:<9} {:>5.1} %  {:<23} {:<11} {:.0}/{:.0}/{:.0}{:>14.1}",
            t.index,
            thread_name(t.index),
            t.share_pct,
            cpus.join(" "),
            migrations,
            t.wake_latency_us.p50,
            t.wake_latency_us.p99,
            t.wake_latency_us.max,
            t.cpu_time_ms
        );
    }
    for o in &r.details.scheduling.os_stats {
        let _ = writeln!(
            s,
            "os        {:<9} context switches {} voluntary, {} involuntary; run-queue wait {:.1} ms",
            thread_name(o.index),
            o.voluntary_switches,
            o.involuntary_switches,
            o.runqueue_wait_ms
        );
    }
    if let Some(p) = m.input_peak {
        let _ = writeln!(
            s,
            "input     peak {:.1} dBFS",
            20.0 * f64::from(p.max(1e-10)).log10()
        );
    }
    s.push_str(&crate::explain_text::render(r));
    let _ = writeln!(s, "end       {}", r.end.reason);
    s
}
