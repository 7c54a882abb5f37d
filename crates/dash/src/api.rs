//! The JSON API's pure parts: merging a partial config onto the current one (RFC 7396), naming the
//! field and range of anything refused, and the error body; called from the engine-owner thread, no
//! I/O.

use serde::Serialize;
use serde_json::{Map, Value};
use serde_path_to_error::Segment;
use xrunlab_engine::config::{limit, ChordNotes};
use xrunlab_engine::{ConfigError, EngineConfig, Preset};

/// A refused request, as the API answers it: the status code and a body naming the field.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApiError {
    /// HTTP status: 400 for malformed requests, 422 for values out of range, 5xx for failures.
    #[serde(skip)]
    pub status: u16,
    /// One line for people.
    pub error: String,
    /// The field as the engine names it (e.g. "busy_threads"), when one field is at fault.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// Where the field sits in the config JSON (e.g. "busy.count").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The rejected value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// What is allowed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed: Option<String>,
}

impl ApiError {
    /// A request the server cannot read at all.
    pub fn bad_request(error: impl Into<String>) -> ApiError {
        ApiError {
            status: 400,
            error: error.into(),
            field: None,
            path: None,
            value: None,
            allowed: None,
        }
    }

    /// A failure on the server's side (the device, the engine thread).
    pub fn failed(status: u16, error: impl Into<String>) -> ApiError {
        ApiError {
            status,
            ..ApiError::bad_request(error)
        }
    }

    /// The engine's own refusal, with the field's path added.
    pub fn from_config(e: ConfigError) -> ApiError {
        let mut err = ApiError::invalid(&path_of_field(&e.field), e.value, e.allowed);
        err.field = Some(e.field);
        err
    }

    /// A value outside what `path` allows.
    pub fn invalid(path: &str, value: impl Into<String>, allowed: impl Into<String>) -> ApiError {
        let (value, allowed) = (value.into(), allowed.into());
        let field = field_of_path(path).to_owned();
        ApiError {
            status: 422,
            error: format!("invalid {field}: {value} (allowed: {allowed})"),
            field: Some(field),
            path: Some(path.to_owned()),
            value: Some(value),
            allowed: Some(allowed),
        }
    }
}

/// Config paths, the name `EngineConfig::validate` gives each, and what each allows in JSON.
/// One table so that type errors and range errors name fields the same way; the ranges are
/// the engine's own ([`xrunlab_engine::config::Limits`]).
fn fields() -> Vec<(&'static str, &'static str, String)> {
    let sines = "a whole number of sines (0 up to the chord's partials)";
    let bool = || "true or false".to_owned();
    vec![
        ("sample_rate", "sample_rate", limit::SAMPLE_RATE.to_string()),
        (
            "buffer_frames",
            "buffer_frames",
            limit::BUFFER_FRAMES.to_string(),
        ),
        ("chord", "chord", ChordNotes::allowed()),
        ("chords", "chords", limit::CHORDS.to_string()),
        ("sines", "sines", sines.into()),
        ("burst_sines", "burst_sines", sines.into()),
        ("kernel", "kernel", "\"reference\" or \"fast\"".into()),
        ("chunk_size", "chunk_size", limit::CHUNK_SIZE.to_string()),
        ("threads", "threads", limit::THREADS.to_string()),
        (
            "driver_mode",
            "driver_mode",
            "\"processes_sines\" or \"waits_for_workers\"".into(),
        ),
        ("min_load_pct", "min_load", limit::MIN_LOAD_PCT.to_string()),
        (
            "driver_spin_us",
            "driver_spin_us",
            limit::DRIVER_SPIN_US.to_string(),
        ),
        (
            "busy",
            "busy",
            "an object with count, period_ms, duty_pct".into(),
        ),
        ("busy.count", "busy_threads", limit::BUSY_COUNT.to_string()),
        (
            "busy.period_ms",
            "busy_period_ms",
            limit::BUSY_PERIOD_MS.to_string(),
        ),
        (
            "busy.duty_pct",
            "busy_duty",
            limit::BUSY_DUTY_PCT.to_string(),
        ),
        ("work_interval", "work_interval", bool()),
        ("rt", "rt", "an object of real-time options".into()),
        (
            "rt.priority",
            "priority",
            format!("{}, or null for SCHED_OTHER", limit::PRIORITY),
        ),
        ("rt.policy", "policy", "\"fifo\" or \"round_robin\"".into()),
        ("rt.deadline", "deadline", bool()),
        (
            "rt.deadline_runtime_pct",
            "deadline_runtime",
            limit::DEADLINE_RUNTIME_PCT.to_string(),
        ),
        ("rt.uclamp_min", "uclamp_min", limit::UCLAMP_MIN.to_string()),
        (
            "rt.cpus",
            "cpus",
            "a list of CPU numbers, or null for all".into(),
        ),
        ("rt.pin", "pin", bool()),
        ("rt.mlock", "mlock", bool()),
        ("rt.pm_qos", "pm_qos", bool()),
        ("input", "input", bool()),
        (
            "kernel_slowdown",
            "kernel_slowdown",
            format!("{} (a test hook; 1 = off)", limit::KERNEL_SLOWDOWN),
        ),
    ]
}

/// The engine's name for the field at `path`; the path itself when the table does not know it.
pub fn field_of_path(path: &str) -> &str {
    fields()
        .into_iter()
        .find(|(p, _, _)| *p == path)
        .map_or(path, |(_, f, _)| f)
}

fn path_of_field(field: &str) -> String {
    fields()
        .into_iter()
        .find(|(_, f, _)| *f == field)
        .map_or_else(|| field.to_owned(), |(p, _, _)| p.to_owned())
}

fn allowed_at(path: &str) -> String {
    fields()
        .into_iter()
        .find(|(p, _, _)| *p == path)
        .map_or_else(|| "see API.md".to_owned(), |(_, _, a)| a)
}

/// What a PUT asks for besides config fields.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigRequest {
    /// The complete new config, already validated.
    pub config: EngineConfig,
    /// A device kind to switch to, when the request names one.
    pub device: Option<String>,
}

/// Merges `patch` (an object with any subset of the config's fields, plus optional
/// `"preset"` and `"device"`) onto `current` as a JSON merge patch (RFC 7396) and validates
/// the result. The preset is applied first so the request's own fields win over it. Unknown
/// fields are refused rather than ignored, so a typo cannot look like a setting that took
/// effect; a `null` is taken only by a field that can be null (`rt.priority`, `rt.cpus`), never
/// as "back to the default".
pub fn merge_config(current: &EngineConfig, patch: &Value) -> Result<ConfigRequest, ApiError> {
    let Value::Object(patch) = patch else {
        return Err(ApiError::bad_request(
            "the body must be a JSON object of config fields (see API.md)",
        ));
    };
    let mut base = current.clone();
    let mut fields = patch.clone();
    if let Some(p) = fields.remove("preset") {
        let preset = p.as_str().and_then(Preset::from_name).ok_or_else(|| {
            let mut e = ApiError::invalid(
                "preset",
                p.to_string(),
                "\"standard\", \"optimal\" or \"custom\"",
            );
            e.field = Some("preset".into());
            e
        })?;
        base.apply_preset(preset);
    }
    let device = match fields.remove("device") {
        None => None,
        Some(Value::String(kind)) => Some(kind),
        Some(other) => {
            return Err(ApiError::invalid(
                "device",
                other.to_string(),
                "a device kind name such as \"sim\"",
            ))
        }
    };
    let base_value = serde_json::to_value(&base)
        .map_err(|e| ApiError::failed(500, format!("config does not serialize: {e}")))?;
    check_known(&base_value, &fields, "")?;
    check_nulls(&base_value, &fields, "")?;
    let mut merged = base_value;
    json_patch::merge(&mut merged, &Value::Object(fields));
    let config: EngineConfig = serde_path_to_error::deserialize(&merged).map_err(|e| {
        let path = config_path(e.path());
        let value = value_at(&merged, e.path()).map_or_else(String::new, Value::to_string);
        let mut err = ApiError::invalid(&path, value, allowed_at(&path));
        err.error = format!("{}: {e}", err.error);
        err
    })?;
    config.validate().map_err(ApiError::from_config)?;
    Ok(ConfigRequest { config, device })
}

/// The config path a serde path names, without list indices (`rt.cpus[2]` is `rt.cpus`).
fn config_path(path: &serde_path_to_error::Path) -> String {
    let keys: Vec<String> = path
        .iter()
        .filter_map(|s| match s {
            Segment::Map { key } => Some(key.clone()),
            _ => None,
        })
        .collect();
    keys.join(".")
}

/// The value a serde path points at in `v`.
fn value_at<'a>(v: &'a Value, path: &serde_path_to_error::Path) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, s| match s {
        Segment::Map { key } => v.get(key),
        Segment::Seq { index } => v.get(index),
        _ => None,
    })
}

/// Joins a key to the path of its object.
fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_owned()
    } else {
        format!("{prefix}.{key}")
    }
}

/// Refuses keys the config does not have, naming the full path.
fn check_known(base: &Value, patch: &Map<String, Value>, prefix: &str) -> Result<(), ApiError> {
    for (key, value) in patch {
        let path = join(prefix, key);
        match base.get(key) {
            None => {
                let mut e = ApiError::bad_request(format!(
                    "unknown config field {path:?} (see API.md for the fields)"
                ));
                e.path = Some(path);
                return Err(e);
            }
            Some(Value::Object(inner)) => {
                if let Value::Object(value) = value {
                    check_known(&Value::Object(inner.clone()), value, &path)?;
                }
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// In a merge patch `null` removes a field, which would quietly put a default in its place;
/// only a field that takes null itself may be given null (then removing it means the same).
/// `config` is the whole config, `patch` the part of the body at `prefix`.
fn check_nulls(config: &Value, patch: &Map<String, Value>, prefix: &str) -> Result<(), ApiError> {
    for (key, value) in patch {
        let path = join(prefix, key);
        match value {
            Value::Object(inner) => check_nulls(config, inner, &path)?,
            Value::Null => {
                let mut trial = config.clone();
                if let Some(slot) = trial.pointer_mut(&format!("/{}", path.replace('.', "/"))) {
                    *slot = Value::Null;
                }
                if serde_json::from_value::<EngineConfig>(trial).is_err() {
                    return Err(ApiError::invalid(&path, "null", allowed_at(&path)));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// The largest sine count the engine accepts at the config's sample rate. Found by asking
/// `validate` (a binary search over a cheap check) so the dashboard needs no chord maths of its own.
pub fn max_sines(config: &EngineConfig) -> usize {
    let mut probe = config.clone();
    probe.burst_sines = 0;
    let ok = |s: usize, probe: &mut EngineConfig| {
        probe.sines = s;
        probe
            .validate()
            .map(|_| true)
            .unwrap_or_else(|e| e.field != "sines")
    };
    let (mut lo, mut hi) = (0usize, 1usize << 32);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if ok(mid, &mut probe) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    lo
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn merge(patch: Value) -> Result<ConfigRequest, ApiError> {
        merge_config(&EngineConfig::default(), &patch)
    }

    #[test]
    fn partial_patch_changes_only_its_fields() {
        let r = merge(json!({"sines": 300, "busy": {"duty_pct": 20.0}})).unwrap();
        let mut want = EngineConfig {
            sines: 300,
            ..EngineConfig::default()
        };
        want.busy.duty_pct = 20.0;
        assert_eq!(r.config, want);
        assert_eq!(r.device, None);
    }

    #[test]
    fn preset_applies_first_and_fields_win() {
        let r = merge(json!({"preset": "optimal"})).unwrap();
        assert_eq!(r.config.preset(), Preset::Optimal);
        let r = merge(json!({"preset": "optimal", "threads": 3})).unwrap();
        assert_eq!(r.config.threads, 3);
        assert_eq!(r.config.preset(), Preset::Custom);
        let e = merge(json!({"preset": "fastest"})).unwrap_err();
        assert_eq!((e.status, e.field.as_deref()), (422, Some("preset")));
    }

    #[test]
    fn out_of_range_names_field_path_and_range() {
        let e = merge(json!({"busy": {"count": 5}})).unwrap_err();
        assert_eq!(e.status, 422);
        assert_eq!(e.field.as_deref(), Some("busy_threads"));
        assert_eq!(e.path.as_deref(), Some("busy.count"));
        assert_eq!(e.allowed.as_deref(), Some("0..=4"));
        assert!(
            e.error.contains("busy_threads") && e.error.contains("0..=4"),
            "{}",
            e.error
        );

        let e = merge(json!({"min_load_pct": 150})).unwrap_err();
        assert_eq!(
            (e.field.as_deref(), e.path.as_deref()),
            (Some("min_load"), Some("min_load_pct"))
        );
        let e = merge(json!({"sines": 10_000_000})).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("sines"));
        assert!(e.allowed.unwrap().contains("48000 Hz"));
    }

    #[test]
    fn wrong_types_name_the_field() {
        let e = merge(json!({"rt": {"priority": 150}})).unwrap_err();
        assert_eq!(
            (e.status, e.path.as_deref(), e.field.as_deref()),
            (422, Some("rt.priority"), Some("priority"))
        );
        assert!(e.allowed.unwrap().contains("1..=99"));
        let e = merge(json!({"sines": "many"})).unwrap_err();
        assert_eq!(e.path.as_deref(), Some("sines"));
        let e = merge(json!({"driver_mode": "sideways"})).unwrap_err();
        assert_eq!(e.path.as_deref(), Some("driver_mode"));
        let e = merge(json!({"busy": 3})).unwrap_err();
        assert_eq!(e.path.as_deref(), Some("busy"));
        let e = merge(json!({"rt": {"priority": 0}})).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("priority"));
    }

    #[test]
    fn type_errors_carry_the_serde_path_of_the_bad_field() {
        let e = merge(json!({"busy": {"count": "two"}})).unwrap_err();
        assert_eq!(
            (e.status, e.path.as_deref(), e.field.as_deref()),
            (422, Some("busy.count"), Some("busy_threads"))
        );
        assert!(
            e.error.contains("busy.count: invalid type: string \"two\""),
            "{}",
            e.error
        );
        assert_eq!(e.value.as_deref(), Some("\"two\""));
        assert_eq!(e.allowed.as_deref(), Some("0..=4"));
        let e = merge(json!({"rt": {"cpus": [0, "x"]}})).unwrap_err();
        assert_eq!(e.path.as_deref(), Some("rt.cpus"));
        assert!(e.error.contains("rt.cpus[1]: invalid type"), "{}", e.error);
    }

    #[test]
    fn null_is_taken_only_where_a_field_can_be_null() {
        let mut current = EngineConfig {
            sines: 123,
            ..EngineConfig::default()
        };
        current.rt.cpus = Some(vec![0]);
        let r = merge_config(&current, &json!({"rt": {"cpus": null}})).unwrap();
        assert_eq!((r.config.rt.cpus, r.config.sines), (None, 123));
        for (body, path) in [
            (json!({"sines": null}), "sines"),
            (json!({"busy": null}), "busy"),
            (json!({"rt": {"policy": null}}), "rt.policy"),
        ] {
            let e = merge_config(&current, &body).unwrap_err();
            assert_eq!(
                (e.status, e.path.as_deref(), e.value.as_deref()),
                (422, Some(path), Some("null")),
                "{body}: a null must not reset the field to its default"
            );
        }
    }

    #[test]
    fn unknown_fields_and_non_objects_are_refused() {
        let e = merge(json!({"sine": 3})).unwrap_err();
        assert_eq!((e.status, e.path.as_deref()), (400, Some("sine")));
        let e = merge(json!({"rt": {"prio": 3}})).unwrap_err();
        assert_eq!(e.path.as_deref(), Some("rt.prio"));
        assert_eq!(merge(json!([1, 2])).unwrap_err().status, 400);
        assert_eq!(merge(json!(null)).unwrap_err().status, 400);
    }

    #[test]
    fn device_and_nullable_fields() {
        let r = merge(json!({"device": "sim", "rt": {"priority": null}})).unwrap();
        assert_eq!(r.device.as_deref(), Some("sim"));
        assert_eq!(r.config.rt.priority, None);
        assert_eq!(merge(json!({"device": 3})).unwrap_err().status, 422);
    }

    #[test]
    fn max_sines_matches_validate() {
        let c = EngineConfig::default();
        let max = max_sines(&c);
        let mut probe = c.clone();
        probe.burst_sines = 0;
        probe.sines = max;
        probe.validate().unwrap();
        probe.sines = max + 1;
        assert_eq!(probe.validate().unwrap_err().field, "sines");
    }
}
