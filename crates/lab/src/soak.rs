//! `bench soak`'s measurement: resident-memory samples at the start, every period and the end, the
//! growth from the first periodic sample, and `run`'s path (the engine drained every 20 ms through
//! a run collector keeping its summary, every buffer handed to the caller, e.g. for `run --csv`'s
//! rows); runs on the caller's (main) thread, the engine's threads render.

use crate::error::LabError;
use std::ops::ControlFlow;
use std::time::{Duration, Instant};
use xrunlab_engine::{hooks, BufferReport, DrainEnd, Engine, RunCollector, Span, Summary};
pub use xrunlab_results::soak::{Sample, SoakResult, SCHEMA};

/// Buffer size a soak uses unless `--buffer` says otherwise: the smallest common one, where
/// per-buffer memory would grow fastest (1500 buffers a second at 48 kHz).
pub const SOAK_BUFFER_FRAMES: u32 = 32;
/// Growth from the first periodic sample to the end that the soak counts as flat.
pub const TARGET_GROWTH_BYTES: u64 = 2_000_000;

/// This process's resident memory, bytes.
pub fn rss_bytes() -> Result<u64, LabError> {
    xrunlab_sys::read_rss_bytes(xrunlab_sys::default_proc_root(), "self").map_err(|source| {
        LabError::Io {
            context: "bench soak measures resident memory from /proc/self/status and cannot \
                      read it"
                .into(),
            source,
        }
    })
}

/// Takes samples at the start, every `every` and at the end into `result`, calling `taken`
/// after each (to print the row and rewrite the JSON).
pub struct Sampler<'a> {
    every: Duration,
    next: Duration,
    /// The result so far.
    pub result: SoakResult,
    taken: Box<dyn FnMut(&SoakResult) + 'a>,
}

impl<'a> Sampler<'a> {
    /// A sampler every `every` into `result` (its samples empty).
    pub fn new(
        every: Duration,
        result: SoakResult,
        taken: impl FnMut(&SoakResult) + 'a,
    ) -> Sampler<'a> {
        Sampler {
            every,
            next: every,
            result,
            taken: Box::new(taken),
        }
    }

    /// Whether a sample is due at `t` (the first one always is).
    pub fn due(&self, t: Duration) -> bool {
        self.result.samples.is_empty() || t >= self.next
    }

    /// Samples resident memory at `t` with the progress `count`.
    pub fn take(&mut self, t: Duration, count: u64) -> Result<(), LabError> {
        let rss = rss_bytes()?;
        while self.next <= t {
            self.next += self.every;
        }
        self.result.samples.push(Sample {
            t_s: t.as_secs_f64(),
            rss_bytes: rss,
            count,
        });
        (self.result.growth_from_s, self.result.growth_bytes) = self.growth();
        (self.taken)(&self.result);
        Ok(())
    }

    /// Growth from the first periodic sample (after warm-up: rings, histograms and allocator
    /// arenas are in place by then) to the last; from the start sample on runs shorter than
    /// one period. (from s, bytes).
    pub fn growth(&self) -> (f64, i64) {
        growth(&self.result.samples, self.every)
    }
}

/// See [`Sampler::growth`].
pub fn growth(samples: &[Sample], every: Duration) -> (f64, i64) {
    let last = samples.last();
    let base = samples
        .iter()
        .find(|s| s.t_s >= every.as_secs_f64())
        .filter(|s| last.is_some_and(|l| l.t_s > s.t_s))
        .or(samples.first());
    match (base, last) {
        (Some(b), Some(l)) => (b.t_s, l.rss_bytes as i64 - b.rss_bytes as i64),
        _ => (0.0, 0),
    }
}

/// How a soak path ended, besides its samples.
#[derive(Debug, Clone)]
pub struct PathEnd {
    /// It reached its duration without a failure.
    pub complete: bool,
    /// Why it ended.
    pub end: String,
    /// The run summary (run path).
    pub summary: Option<Summary>,
    /// Telemetry frames read (dashboard path).
    pub frames_received: Option<u64>,
}

/// `h:mm:ss`.
pub fn clock(t: Duration) -> String {
    let s = t.as_secs();
    format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// Whether a soak of `duration` ends at `t`, and how: (complete, reason) when stopped or its
/// duration is reached.
pub fn soak_end(t: Duration, duration: Duration, stopped: bool) -> Option<(bool, String)> {
    if stopped {
        return Some((
            false,
            format!("interrupted after {} (Ctrl-C, SIGTERM or SIGHUP)", clock(t)),
        ));
    }
    (t >= duration).then(|| (true, "duration reached".to_owned()))
}

/// `xrunlab run`'s collection for `duration`: drain every 20 ms through a [`RunCollector`]'s
/// [`RunCollector::run_for`] keeping the summary, every buffer to `buffer`, a sample when due and a last one while the
/// engine still runs (stopping it frees its rings), the summary at the end. `stop` is polled
/// between drains.
pub fn run_path(
    engine: Engine,
    duration: Duration,
    sampler: &mut Sampler,
    stop: &dyn Fn() -> bool,
    buffer: &mut dyn FnMut(&BufferReport),
) -> Result<PathEnd, LabError> {
    let mut collector = RunCollector::new(engine).with_summary();
    let t0 = Instant::now();
    // After each drain: a device that ended on its own ends the path; a sample when due, but
    // not on the final drain, which the last sample below follows at once.
    let after = |c: &mut RunCollector, t: Duration, last: bool| {
        if let Some(reason) = c.engine().and_then(Engine::device_ended) {
            return ControlFlow::Break(Ok((false, format!("device ended: {reason}"))));
        }
        if !last && sampler.due(t) {
            if let Err(e) = sampler.take(t, c.totals().buffers) {
                return ControlFlow::Break(Err(e));
            }
        }
        ControlFlow::Continue(())
    };
    let mut sink = hooks(&mut *buffer, after);
    let (complete, end) = match collector.run_for(Span::For(duration), stop, &mut sink) {
        DrainEnd::Broke(end) => end?,
        DrainEnd::Stopped => {
            soak_end(t0.elapsed(), duration, true).expect("a stopped soak has ended")
        }
        DrainEnd::Elapsed => (true, "duration reached".to_owned()),
    };
    sampler.take(t0.elapsed(), collector.totals().buffers)?;
    collector.stop(&mut *buffer);
    Ok(PathEnd {
        complete,
        end,
        summary: collector.summary(),
        frames_received: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t_s: f64, rss_bytes: u64) -> Sample {
        Sample {
            t_s,
            rss_bytes,
            count: 0,
        }
    }

    #[test]
    fn growth_counts_from_the_first_periodic_sample_or_the_start_on_a_short_soak() {
        let every = Duration::from_secs(60);
        let s = [at(0.0, 100), at(60.0, 500), at(120.0, 520), at(125.0, 530)];
        assert_eq!(growth(&s, every), (60.0, 30), "warm-up is not growth");
        let short = [at(0.0, 100), at(3.0, 130)];
        assert_eq!(growth(&short, every), (0.0, 30));
        assert_eq!(growth(&[], every), (0.0, 0));
    }

    #[test]
    fn a_soak_ends_at_its_duration_or_when_stopped() {
        let d = Duration::from_secs(10);
        assert_eq!(soak_end(Duration::from_secs(3), d, false), None);
        assert_eq!(
            soak_end(Duration::from_secs(10), d, false),
            Some((true, "duration reached".into()))
        );
        let (complete, why) = soak_end(Duration::from_secs(3), d, true).unwrap();
        assert!(!complete && why.contains("0:00:03"), "{why}");
    }
}
