//! The result of `xrunlab probe sleep` (kind [`KIND`] in the experiments' envelope): per
//! interval, sleep call, timer slack and class, the CPU a sleeping thread costs and how much it
//! overslept, its oversleep kept whole as an HdrHistogram, and the cheapest call per interval.
//! Written by the lab crate, read by `compare` and `report`, on the main thread.

use crate::histogram::EncodedHistogram;
use crate::lab::{Params, SchedObtained};
use serde::{Deserialize, Serialize};

/// The experiment's kind.
pub const KIND: &str = "probe.sleep";

/// A way to wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SleepCall {
    /// nanosleep (relative), what std::thread::sleep and usleep do.
    Nanosleep,
    /// clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME) to deadlines one interval apart.
    ClockNanosleepAbs,
    /// A timed wait on a condition variable nobody signals (futex with a timeout).
    CondvarWait,
    /// epoll_pwait2 on an empty epoll set with a nanosecond timeout.
    EpollWait,
    /// No sleep at all: spin on the clock until the deadline (the control).
    BusyPoll,
}

impl SleepCall {
    /// Every call, in the order they are measured.
    pub const ALL: [SleepCall; 5] = [
        SleepCall::Nanosleep,
        SleepCall::ClockNanosleepAbs,
        SleepCall::CondvarWait,
        SleepCall::EpollWait,
        SleepCall::BusyPoll,
    ];

    /// The call's name in results.
    pub fn name(self) -> &'static str {
        match self {
            SleepCall::Nanosleep => "nanosleep",
            SleepCall::ClockNanosleepAbs => "clock_nanosleep_abs",
            SleepCall::CondvarWait => "condvar_wait",
            SleepCall::EpollWait => "epoll_wait",
            SleepCall::BusyPoll => "busy_poll",
        }
    }
}

/// One combination's figures.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SleepPoint {
    /// Requested interval in µs.
    pub interval_us: f64,
    /// The call.
    pub call: SleepCall,
    /// Timer slack asked for, ns.
    pub slack_ns: u64,
    /// Whether PR_SET_TIMERSLACK took it (false: the value it kept is in `slack_obtained_ns`).
    pub slack_obtained_ns: Option<u64>,
    /// The class, and what took effect.
    pub sched: SchedObtained,
    /// Thread CPU time / wall time, in percent of one CPU.
    pub cpu_pct: f64,
    /// Wake-ups per second achieved.
    pub wakeups_per_s: f64,
    /// Wake-ups per second asked for (1 / interval).
    pub target_per_s: f64,
    /// Oversleep (wake time - intended wake time), µs: median, 99th percentile, maximum.
    pub oversleep_p50_us: f64,
    /// See `oversleep_p50_us`.
    pub oversleep_p99_us: f64,
    /// See `oversleep_p50_us`.
    pub oversleep_max_us: f64,
    /// Every wake-up's oversleep in µs (1 ns steps) as HdrHistogram interchange text.
    pub oversleep_us: EncodedHistogram,
}

impl SleepPoint {
    /// The point's settings in words: "1000 us nanosleep slack 1 ns other-nice0".
    pub fn label(&self) -> String {
        format!(
            "{} us {} slack {} ns {}",
            self.interval_us,
            self.call.name(),
            self.slack_ns,
            self.sched.requested
        )
    }
}

/// The cheapest way to wait for one interval.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Verdict {
    /// Interval, µs.
    pub interval_us: f64,
    /// The accuracy bound used, µs.
    pub bound_us: f64,
    /// The chosen combination: "call, slack, class".
    pub cheapest: Option<String>,
    /// Its CPU %.
    pub cpu_pct: Option<f64>,
    /// Its oversleep p99, µs.
    pub oversleep_p99_us: Option<f64>,
    /// How it was chosen.
    pub why: String,
}

/// The sweep's result; `P` is the writer's parameter type, [`Params`] for a reader.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SleepResult<P = Params> {
    /// What was asked.
    pub params: P,
    /// Finished combinations.
    pub points: Vec<SleepPoint>,
    /// Per interval, the cheapest call within the accuracy bound.
    pub verdicts: Vec<Verdict>,
    /// True when stopped before every combination ran.
    pub stopped_early: bool,
}
