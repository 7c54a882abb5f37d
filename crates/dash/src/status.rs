//! The JSON views of the API as typed structs (status, config, explain, fault, idle, burst): what
//! `GET /api/status` and its siblings answer, in the shape `static/types.js` declares for the page
//! (a test keeps the two in step); built on the engine-owner thread.

use crate::telemetry::Counts;
use serde::Serialize;
use serde_json::{Map, Value};
use xrunlab_engine::config::Limits;
use xrunlab_engine::explain::{trace::blame::Cause, ExplainReport};
use xrunlab_engine::{ChordInfo, DeviceInfo, EngineConfig, ProcessRt, ThreadInfo};
use xrunlab_sys::{CpuInfo, CpuTopology, IdleUsage, PowerSample};

/// Serializes a view for a reply. The views hold only strings, numbers and lists, which
/// always serialize; should one ever not, the reply says so instead of the thread panicking.
pub(crate) fn to_json(view: &impl Serialize) -> Value {
    serde_json::to_value(view).unwrap_or_else(|e| {
        let mut m = Map::new();
        m.insert(
            "error".into(),
            format!("the view does not serialize: {e}").into(),
        );
        Value::Object(m)
    })
}

/// `GET /api/status`: what runs, what the machine granted, and the ranges of the controls.
#[derive(Debug, Serialize)]
pub(crate) struct Status<'a> {
    /// "running", or why not.
    pub audio: &'static str,
    /// Device kinds the page can switch to.
    pub devices: &'a [String],
    /// Running counts since the dashboard started.
    pub counts: Counts,
    /// Where power figures come from, and the last one.
    pub power: PowerView<'a>,
    /// Each online CPU.
    pub cpus: &'a [CpuInfo],
    /// Where each CPU sits.
    pub topology: &'a [CpuTopology],
    /// Idle states and their entries since the dashboard started.
    pub idle: IdleView,
    /// Whether per-CPU frequencies are in the frames.
    pub freq: FreqView,
    /// The stalls being injected.
    pub fault: FaultView,
    /// "Explain dropouts" on or off, and whether the kernel tracer could start.
    pub explain: ExplainStatus<'a>,
    /// Bumped on every change shown here that frames do not carry, so pages re-read only then.
    pub config_version: u64,
    /// The last refused PUT's message.
    pub last_error: Option<&'a str>,
    /// What only a running engine has; absent while there is none.
    #[serde(flatten)]
    pub engine: Option<EngineStatus<'a>>,
}

/// The part of the status a running engine supplies.
#[derive(Debug, Serialize)]
pub(crate) struct EngineStatus<'a> {
    /// The device in use.
    pub device: DeviceInfo,
    /// The settings in force.
    pub config: &'a EngineConfig,
    /// The preset they match ("custom" for none).
    pub preset: &'static str,
    /// Each audio thread (driver first) with the scheduling it obtained.
    pub threads: Vec<ThreadInfo>,
    /// Process-wide real-time outcomes (mlock, PM QoS).
    pub process_rt: &'a ProcessRt,
    /// Busy threads running.
    pub busy_threads: usize,
    /// The chord in play.
    pub chord: ChordInfo,
    /// A server device's own DSP load, when it reports one.
    pub server_load_pct: Option<f32>,
    /// Ranges for the page's controls.
    pub limits: StatusLimits,
}

/// The engine's ranges, the sine maxima at the current chord and rate, and the dashboard's own.
#[derive(Debug, Serialize)]
pub(crate) struct StatusLimits {
    /// All sines accepted, xrunlab's own extra chord copies included.
    pub sines_max: usize,
    /// AudioPerfLab's maximum: its chord once per physical core (the sine sliders' span).
    pub sines_apl_max: usize,
    /// Sines (and burst sines) accepted: `[0, sines_max]`.
    pub sines: (usize, usize),
    /// The priority offered when real-time scheduling is turned back on: the engine's default.
    pub priority_default: Option<u8>,
    /// Seconds `GET /api/trace` covers at most.
    pub trace_seconds: (u64, u64),
    /// The engine's fixed ranges.
    #[serde(flatten)]
    pub engine: Limits,
}

/// The power meter.
#[derive(Debug, Serialize)]
pub(crate) struct PowerView<'a> {
    /// RAPL, or "estimate: ..." saying how.
    pub source: &'a str,
    /// Whether the figures are estimates.
    pub estimated: bool,
    /// The last sample.
    pub last: Option<PowerSample>,
}

/// cpufreq's presence.
#[derive(Debug, Serialize)]
pub(crate) struct FreqView {
    /// Whether frames carry frequencies.
    pub available: bool,
    /// Where they come from, or why there are none.
    pub note: &'static str,
}

/// `GET /api/fault`: the stalls being injected.
#[derive(Debug, Serialize)]
pub(crate) struct FaultView {
    /// Stall length (0 = off).
    pub stall_ms: f64,
    /// Time between stalls; null when off.
    pub every_ms: Option<f64>,
}

/// The cpuidle driver and, per CPU and state, the entries since the dashboard started.
#[derive(Debug, Serialize)]
pub(crate) struct IdleView {
    /// The cpuidle driver, where there is one.
    pub driver: Option<String>,
    /// Per CPU and state.
    pub states: Vec<IdleUsage>,
    /// What the entries count, or why there are none.
    pub note: &'static str,
}

/// "Explain dropouts" in the status.
#[derive(Debug, Serialize)]
pub(crate) struct ExplainStatus<'a> {
    /// Whether it is on.
    pub enabled: bool,
    /// Whether the kernel tracer runs (null while off).
    pub available: Option<bool>,
    /// Why kernel tracing is impossible, when it is.
    pub unavailable: Option<&'a str>,
}

/// `GET /api/explain`: only `enabled` while off.
#[derive(Debug, Serialize)]
pub(crate) struct ExplainView<'a> {
    /// Whether it is on.
    pub enabled: bool,
    /// The rest, while it is on.
    #[serde(flatten)]
    pub on: Option<ExplainOn<'a>>,
}

/// What explaining has found so far.
#[derive(Debug, Serialize)]
pub(crate) struct ExplainOn<'a> {
    /// The explainer's report (tracer, counts, top culprits).
    #[serde(flatten)]
    pub report: ExplainReport,
    /// The CPUs traced.
    pub cpus: &'a [usize],
    /// The latest dropouts, newest first.
    pub recent: Vec<RecentDropout<'a>>,
}

/// One of the latest dropouts, enough to list it and fetch its card.
#[derive(Debug, Serialize)]
pub(crate) struct RecentDropout<'a> {
    /// Audio start the buffer belongs to.
    pub epoch: u32,
    /// Buffer sequence number within the epoch.
    pub seq: u64,
    /// Period start, as frames' `ts`.
    pub t_ms: f64,
    /// `late`, `incomplete`, `device_xrun`, or several joined with `+`.
    pub kind: &'a str,
    /// How late the render ended.
    pub late_by_us: f64,
    /// The card's verdict, or what is known without one.
    pub verdict: String,
    /// The card's main cause, when there is a card.
    pub cause: Option<Cause>,
}

/// `GET /api/config`, and `PUT`'s answer.
#[derive(Debug, Serialize)]
pub(crate) struct ConfigView<'a> {
    /// The settings in force.
    #[serde(flatten)]
    pub config: &'a EngineConfig,
    /// The preset they match.
    pub preset: &'static str,
    /// The device kind.
    pub device: String,
    /// Only in `PUT`'s answer: whether audio was restarted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restarted: Option<bool>,
}

/// `POST /api/burst`'s answer.
#[derive(Debug, Serialize)]
pub(crate) struct BurstView {
    /// Sines added.
    pub burst_sines: usize,
    /// For how long.
    pub seconds: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONTROLS_JS: &str = include_str!("../static/controls.js");
    const INDEX_HTML: &str = include_str!("../static/index.html");

    /// Whether `text` has `key` followed (after spaces and an optional quote) by a digit.
    fn number_after(text: &str, key: &str) -> Option<String> {
        text.match_indices(key).find_map(|(at, _)| {
            let rest = text[at + key.len()..].trim_start();
            let rest = rest.strip_prefix(['\'', '"']).unwrap_or(rest);
            rest.starts_with(|c: char| c.is_ascii_digit())
                .then(|| text[at..(at + key.len() + 12).min(text.len())].to_owned())
        })
    }

    /// Array literals of three or more numbers (a list of rates or sizes kept by the page).
    fn number_lists(text: &str) -> Vec<String> {
        text.match_indices('[')
            .filter_map(|(at, _)| {
                let inner = text[at + 1..].split(']').next()?;
                let items: Vec<&str> = inner.split(',').map(str::trim).collect();
                (items.len() >= 3 && items.iter().all(|i| i.parse::<f64>().is_ok()))
                    .then(|| format!("[{inner}]"))
            })
            .collect()
    }

    #[test]
    fn the_page_takes_every_range_from_status_limits() {
        for key in ["min:", "max:", ".min =", ".max ="] {
            assert_eq!(
                number_after(CONTROLS_JS, key),
                None,
                "controls.js holds a range of its own; take it from status.limits"
            );
        }
        assert_eq!(number_lists(CONTROLS_JS), Vec::<String>::new());
        for attr in ["min=", "max="] {
            assert_eq!(
                number_after(INDEX_HTML, attr),
                None,
                "index.html holds a range"
            );
        }
        // Every range control names a pair that status.limits has.
        let limits = to_json(&StatusLimits {
            sines_max: 2,
            sines_apl_max: 1,
            sines: (0, 2),
            priority_default: None,
            trace_seconds: (1, 2),
            engine: Limits::get(),
        });
        let keys: Vec<&str> = CONTROLS_JS
            .match_indices("limit: '")
            .filter_map(|(at, m)| CONTROLS_JS[at + m.len()..].split('\'').next())
            .collect();
        assert!(keys.len() >= 12, "range controls found: {keys:?}");
        for key in keys {
            let pair = limits[key].as_array();
            assert!(
                pair.is_some_and(|p| p.len() == 2 && p.iter().all(Value::is_number)),
                "controls.js reads limits.{key}, which status.limits has not as [min, max]"
            );
        }
    }

    #[test]
    fn the_scan_finds_ranges_and_lists() {
        assert!(number_after("{ min: 0, max: 4 }", "min:").is_some());
        assert!(number_after("num.max = '99';", ".max =").is_some());
        assert_eq!(number_after("min: l.min", "min:"), None);
        assert_eq!(
            number_lists("const A = [16, 32, 64];"),
            vec!["[16, 32, 64]"]
        );
        assert!(number_lists("[a, b, c] [1, 2]").is_empty());
    }
}
