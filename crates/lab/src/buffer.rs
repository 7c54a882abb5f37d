//! `sweep buffer`: the CPU cost of the audio threads against the buffer size at a fixed sine count
//! on the simulated device, per thread user and system CPU % (like `pidstat -t`), wake-ups per
//! second, dropouts and energy where RAPL exists; the engine's threads do the audio, the caller's
//! thread runs the points in turn, reads /proc, shows progress and polls the stop flag.

use crate::context::{start_progress, Ctx};
use crate::envelope::Experiment;
use crate::error::{check_range, invalid, LabError};
use crate::table::Table;
use serde::Serialize;
use std::fmt::Write as _;
use std::time::{Duration, Instant};
use xrunlab_engine::config::limit;
use xrunlab_engine::device::sim::SimDevice;
use xrunlab_engine::{BufferReport, DrainEnd, Engine, EngineConfig, RunStats, Span, ThreadRole};
use xrunlab_results::run::RunHistograms;
use xrunlab_sys::procfs::{read_thread_stat, ThreadStat};

/// Time each point runs before its counters are read, so start-up is not measured.
pub const SETTLE: Duration = Duration::from_millis(200);

/// What to sweep.
#[derive(Debug, Clone, Serialize)]
pub struct BufferParams {
    /// Buffer sizes in frames (powers of two in the engine's range, 16..=8192).
    pub buffers: Vec<u32>,
    /// Sustained sines at every point.
    pub sines: usize,
    /// Measured wall time per point (after [`SETTLE`]).
    pub per_point: Duration,
    /// Sample rate of the simulated device.
    pub sample_rate: u32,
}

impl BufferParams {
    /// Every power of two from 16 to 4096, 500 sines, 3 s per point.
    pub fn full() -> BufferParams {
        BufferParams {
            buffers: (4..=12).map(|p| 1u32 << p).collect(),
            sines: 500,
            per_point: Duration::from_secs(3),
            sample_rate: 48_000,
        }
    }

    /// Three sizes (32, 256, 2048), 1 s each.
    pub fn quick() -> BufferParams {
        BufferParams {
            buffers: vec![32, 256, 2048],
            per_point: Duration::from_secs(1),
            ..BufferParams::full()
        }
    }

    /// Checks every range, naming the flag.
    pub fn validate(&self) -> Result<(), LabError> {
        if self.buffers.is_empty() {
            return Err(invalid(
                "--buffers",
                "",
                &format!("a list of powers of two {}", limit::BUFFER_FRAMES),
            ));
        }
        for &b in &self.buffers {
            // The engine's own range (config.rs's one table), in powers of two.
            if !b.is_power_of_two() || !limit::BUFFER_FRAMES.contains(b) {
                let allowed = format!("powers of two {}", limit::BUFFER_FRAMES);
                return Err(invalid("--buffers", b, &allowed));
            }
        }
        check_range(
            "--per-point",
            self.per_point.as_millis() as u64,
            200,
            600_000,
            " ms (200ms..=600s)",
        )?;
        let config = self.config(self.buffers[0]);
        if let Err(e) = config.validate() {
            if e.field == "sines" {
                return Err(invalid("--sines", self.sines, &e.allowed));
            }
            return Err(LabError::Usage(e.to_string()));
        }
        Ok(())
    }

    /// The engine settings of one point: the standard preset, no burst.
    pub fn config(&self, buffer: u32) -> EngineConfig {
        let mut c = EngineConfig {
            sines: self.sines,
            buffer_frames: buffer,
            sample_rate: self.sample_rate,
            ..EngineConfig::default()
        };
        c.burst_sines = 0;
        c
    }
}

pub use xrunlab_results::sweep::{BufferPoint, ThreadCpu, BUFFER_KIND};

/// The sweep's result, with its parameters.
pub type BufferResult = xrunlab_results::sweep::BufferResult<BufferParams>;

/// Runs the sweep.
pub fn run(p: &BufferParams, ctx: &Ctx) -> Result<BufferResult, LabError> {
    p.validate()?;
    let mut rapl = xrunlab_sys::RaplMeter::open(xrunlab_sys::default_sys_root());
    let energy = match &rapl {
        Ok(_) => "RAPL".to_string(),
        Err(e) => e.to_string(),
    };
    start_progress(ctx, p.buffers.len() as u64, "buffer");
    let mut points = Vec::new();
    let mut sched_warnings = Vec::new();
    let mut stopped_early = false;
    for &b in &p.buffers {
        if ctx.stopped() {
            stopped_early = true;
            break;
        }
        ctx.progress.set_message(format!("{b} frames"));
        match point(p, b, rapl.as_mut().ok(), ctx, &mut sched_warnings)? {
            Some(pt) => points.push(pt),
            None => {
                stopped_early = true;
                break;
            }
        }
        ctx.progress.inc(1);
    }
    ctx.progress.finish_and_clear();
    Ok(BufferResult {
        params: p.clone(),
        points,
        energy,
        sched_warnings,
        stopped_early,
    })
}

/// Drains the engine for `d` into `each` ([`xrunlab_engine::drain_loop`]); false when stopped.
fn drive(engine: &mut Engine, d: Duration, ctx: &Ctx, mut each: impl FnMut(&BufferReport)) -> bool {
    let end = xrunlab_engine::drain_loop(engine, Span::For(d), || ctx.stopped(), &mut each);
    end != DrainEnd::Stopped
}

fn stats(tids: &[i32]) -> Result<Vec<ThreadStat>, LabError> {
    let pid = std::process::id() as i32;
    tids.iter()
        .map(|&t| {
            read_thread_stat(xrunlab_sys::default_proc_root(), pid, t).map_err(|source| {
                LabError::Io {
                    context: format!("cannot read /proc counters of thread {t}"),
                    source,
                }
            })
        })
        .collect()
}

/// Measures one buffer size; `None` when stopped before it finished.
fn point(
    p: &BufferParams,
    buffer: u32,
    mut rapl: Option<&mut xrunlab_sys::RaplMeter>,
    ctx: &Ctx,
    sched_warnings: &mut Vec<String>,
) -> Result<Option<BufferPoint>, LabError> {
    let c = p.config(buffer);
    let mut run_stats = RunStats::new(c.realtime_threads());
    let dev = SimDevice::new(c.sample_rate, c.buffer_frames, false);
    let mut engine = Engine::start(c, Box::new(dev)).map_err(LabError::engine_start)?;
    if !drive(&mut engine, SETTLE, ctx, |_| {}) {
        engine.stop(|_| {});
        return Ok(None);
    }
    let infos = engine.threads();
    let tids: Vec<i32> = infos.iter().map(|t| t.tid).collect();
    let before = stats(&tids)?;
    let e0 = rapl.as_mut().and_then(|m| m.read_uj().ok());
    let t0 = Instant::now();
    let (mut buffers, mut dropouts) = (0u64, 0u64);
    let finished = drive(&mut engine, p.per_point, ctx, |r| {
        buffers += 1;
        dropouts += u64::from(r.dropout());
        run_stats.add(r);
    });
    let after = stats(&tids)?;
    let secs = t0.elapsed().as_secs_f64();
    let e1 = rapl.as_mut().and_then(|m| m.read_uj().ok());
    engine.stop(|_| {});
    if !finished {
        return Ok(None);
    }
    let pct = |ns: u64| ns as f64 / 1e9 / secs * 100.0;
    let threads: Vec<ThreadCpu> = infos
        .iter()
        .zip(before.iter().zip(&after))
        .map(|(info, (a, b))| ThreadCpu {
            index: info.index,
            role: match info.role {
                ThreadRole::Driver => "driver",
                ThreadRole::Worker => "worker",
            }
            .to_owned(),
            tid: info.tid,
            sched: info.sched.obtained.clone(),
            user_pct: pct(b.utime_ns.saturating_sub(a.utime_ns)),
            system_pct: pct(b.stime_ns.saturating_sub(a.stime_ns)),
            run_pct: (a.has_schedstat && b.has_schedstat)
                .then(|| pct(b.run_ns.saturating_sub(a.run_ns))),
            voluntary_per_s: b.voluntary_switches.saturating_sub(a.voluntary_switches) as f64
                / secs,
            involuntary_per_s: b
                .involuntary_switches
                .saturating_sub(a.involuntary_switches) as f64
                / secs,
        })
        .collect();
    for info in &infos {
        if !info.sched.obtained.starts_with("SCHED_FIFO")
            && !info.sched.obtained.starts_with("SCHED_RR")
        {
            let w = format!(
                "{} thread {} ran with {} (no real-time class)",
                if info.index == 0 { "driver" } else { "worker" },
                info.index,
                info.sched.obtained
            );
            if !sched_warnings.contains(&w) {
                sched_warnings.push(w);
            }
        }
    }
    let user_pct = threads.iter().map(|t| t.user_pct).sum();
    let system_pct = threads.iter().map(|t| t.system_pct).sum();
    Ok(Some(BufferPoint {
        buffer,
        sample_rate: p.sample_rate,
        seconds: secs,
        buffers_per_s: buffers as f64 / secs,
        expected_buffers_per_s: f64::from(p.sample_rate) / f64::from(buffer),
        dropouts,
        buffers,
        cpu_pct: user_pct + system_pct,
        cpu_us_per_buffer: if buffers > 0 {
            (user_pct + system_pct) / 100.0 * secs * 1e6 / buffers as f64
        } else {
            0.0
        },
        user_pct,
        system_pct,
        run_pct: threads.iter().map(|t| t.run_pct).sum(),
        voluntary_per_s: threads.iter().map(|t| t.voluntary_per_s).sum(),
        package_watts: e0
            .zip(e1)
            .map(|(a, b)| b.saturating_sub(a) as f64 / 1e6 / secs),
        threads,
        histograms: RunHistograms::of(&run_stats),
    }))
}

impl Experiment for BufferResult {
    const KIND: &'static str = BUFFER_KIND;

    fn table(&self) -> Table {
        let mut t = Table::new(&[
            "buffer",
            "thread",
            "role",
            "tid",
            "user_pct",
            "system_pct",
            "run_pct",
            "voluntary_per_s",
            "involuntary_per_s",
            "buffers_per_s",
            "dropouts",
            "package_watts",
        ]);
        for q in &self.points {
            for th in &q.threads {
                t.push(vec![
                    q.buffer.to_string(),
                    th.index.to_string(),
                    th.role.to_string(),
                    th.tid.to_string(),
                    format!("{:.2}", th.user_pct),
                    format!("{:.2}", th.system_pct),
                    crate::table::cell(th.run_pct),
                    format!("{:.1}", th.voluntary_per_s),
                    format!("{:.1}", th.involuntary_per_s),
                    format!("{:.2}", q.buffers_per_s),
                    q.dropouts.to_string(),
                    crate::table::cell(q.package_watts),
                ]);
            }
        }
        t
    }

    fn text(&self) -> String {
        let mut out = format!(
            "audio-thread CPU against buffer size: {} sines at {} Hz on the simulated device; energy: {}\n",
            self.params.sines, self.params.sample_rate, self.energy
        );
        out.push_str(" buffer  buffers/s  (expected)   %usr  %system   %CPU  us/buffer  %run  wakeups/s  dropouts  watts\n");
        for q in &self.points {
            let _ = writeln!(
                out,
                "{:>7} {:>10.1} {:>11.1} {:>6.1} {:>8.1} {:>6.1} {:>10.1} {:>5} {:>10.0} {:>9} {:>6}",
                q.buffer,
                q.buffers_per_s,
                q.expected_buffers_per_s,
                q.user_pct,
                q.system_pct,
                q.cpu_pct,
                q.cpu_us_per_buffer,
                q.run_pct.map_or("-".into(), |v| format!("{v:.1}")),
                q.voluntary_per_s,
                q.dropouts,
                q.package_watts.map_or("n/a".into(), |w| format!("{w:.2}")),
            );
            for th in &q.threads {
                let _ = writeln!(
                    out,
                    "          {} {} (tid {}, {}): %usr {:.1} %system {:.1} cswch/s {:.0} nvcswch/s {:.0}",
                    th.role, th.index, th.tid, th.sched, th.user_pct, th.system_pct,
                    th.voluntary_per_s, th.involuntary_per_s
                );
            }
        }
        out
    }

    fn warnings(&self) -> Vec<String> {
        let mut w = self.sched_warnings.clone();
        if !self.energy.starts_with("RAPL") {
            w.push(format!("energy: {}", self.energy));
        }
        w
    }

    fn incomplete(&self) -> bool {
        self.stopped_early
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_must_be_powers_of_two_in_range() {
        let mut p = BufferParams::quick();
        p.buffers = vec![48];
        assert!(matches!(p.validate(), Err(LabError::Usage(m)) if m.contains("--buffers")));
        // The engine's range, from its one table: 8192 is its largest buffer, 16384 is past it.
        p.buffers = vec![16384];
        assert!(
            matches!(p.validate(), Err(LabError::Usage(m)) if m.contains("--buffers") && m.contains("16..=8192"))
        );
        p.buffers = vec![8192];
        assert!(p.validate().is_ok());
        p.buffers = vec![64];
        assert!(p.validate().is_ok());
    }
}
