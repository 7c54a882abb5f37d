//! What differs between two sides' machines (their fingerprints) and workloads (buffer, rate,
//! sines, preset, DSP kernel), as data; the CLI words it. Main thread.

use xrunlab_results::compare::FingerprintChange;
use xrunlab_results::run::RunFile;
use xrunlab_results::Fingerprint;

/// Fingerprint fields left out of the diff: they differ from run to run on one machine and
/// are shown per machine instead.
const VARYING: &[&str] = &["steal_pct"];

/// The distinct values of each field on each side, for the fields whose sets differ.
pub fn diff_fields(
    a: &[serde_json::Map<String, serde_json::Value>],
    b: &[serde_json::Map<String, serde_json::Value>],
) -> Vec<FingerprintChange> {
    let Some(first) = a.first().or(b.first()) else {
        return Vec::new();
    };
    let values = |side: &[serde_json::Map<String, serde_json::Value>], key: &str| {
        let mut out: Vec<String> = Vec::new();
        for m in side {
            let v = match m.get(key) {
                Some(serde_json::Value::String(s)) => s.clone(),
                Some(serde_json::Value::Null) | None => "none".to_owned(),
                Some(other) => other.to_string(),
            };
            if !out.contains(&v) {
                out.push(v);
            }
        }
        out
    };
    first
        .keys()
        .filter(|k| !VARYING.contains(&k.as_str()))
        .filter_map(|k| {
            let (va, vb) = (values(a, k), values(b, k));
            let same = va.len() == vb.len() && va.iter().all(|v| vb.contains(v));
            (!same).then(|| FingerprintChange {
                field: k.clone(),
                a: va,
                b: vb,
            })
        })
        .collect()
}

fn as_map(v: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    match v {
        serde_json::Value::Object(m) => m,
        _ => serde_json::Map::new(),
    }
}

/// Fingerprint fields that differ between the sides.
pub fn fingerprint_diff(a: &[&RunFile], b: &[&RunFile]) -> Vec<FingerprintChange> {
    let pa: Vec<&Fingerprint> = a.iter().map(|r| &r.fingerprint).collect();
    let pb: Vec<&Fingerprint> = b.iter().map(|r| &r.fingerprint).collect();
    fingerprint_diff_of(&pa, &pb)
}

/// Fingerprint fields that differ between two sides' fingerprints (of any kind of result).
pub fn fingerprint_diff_of(a: &[&Fingerprint], b: &[&Fingerprint]) -> Vec<FingerprintChange> {
    let maps = |side: &[&Fingerprint]| -> Vec<_> {
        side.iter()
            .map(|f| as_map(serde_json::to_value(f).unwrap_or_default()))
            .collect()
    };
    diff_fields(&maps(a), &maps(b))
}

/// The workload settings a comparison must hold equal.
pub fn workload_of(r: &RunFile) -> serde_json::Map<String, serde_json::Value> {
    let mut m = serde_json::Map::new();
    m.insert("buffer_frames".into(), r.device.buffer_frames.into());
    m.insert("sample_rate".into(), r.device.sample_rate.into());
    m.insert("sines".into(), r.workload.sines.into());
    m.insert("burst_sines".into(), r.workload.burst_sines.into());
    m.insert("preset".into(), r.preset.clone().into());
    m.insert("dsp_kernel".into(), r.workload.kernel.clone().into());
    m.insert("device".into(), r.device.kind.clone().into());
    m
}

/// Workload settings that differ between (or within) the sides: every file on both sides
/// must share them for the figures to be comparable.
pub fn workload_diff(a: &[&RunFile], b: &[&RunFile]) -> Vec<FingerprintChange> {
    let wa: Vec<_> = a.iter().map(|r| workload_of(r)).collect();
    let wb: Vec<_> = b.iter().map(|r| workload_of(r)).collect();
    workload_diff_of(&wa, &wb)
}

/// [`workload_diff`] over each file's settings as a map (any kind of result).
pub fn workload_diff_of(
    wa: &[serde_json::Map<String, serde_json::Value>],
    wb: &[serde_json::Map<String, serde_json::Value>],
) -> Vec<FingerprintChange> {
    let all: Vec<_> = wa.iter().chain(wb).collect();
    let mut out = diff_fields(wa, wb);
    // Within one side too: a side mixing buffer sizes is no one setting.
    for key in all
        .first()
        .map(|m| m.keys().cloned().collect::<Vec<_>>())
        .unwrap_or_default()
    {
        if out.iter().any(|c| c.field == key) {
            continue;
        }
        let side_values = |side: &[serde_json::Map<String, serde_json::Value>]| {
            let mut v: Vec<String> = side
                .iter()
                .map(|m| {
                    m.get(&key)
                        .map_or_else(|| "none".to_owned(), |v| v.to_string())
                })
                .collect();
            v.sort();
            v.dedup();
            v
        };
        let (va, vb) = (side_values(wa), side_values(wb));
        if va.len() > 1 || vb.len() > 1 {
            out.push(FingerprintChange {
                field: key,
                a: va,
                b: vb,
            });
        }
    }
    out
}
