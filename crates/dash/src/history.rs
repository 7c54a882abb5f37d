//! The History view's API: `GET /api/history` (the xruns, drift events and server gaps of a
//! span, filtered by node, culprit and kind) and `GET /api/history/xruns/{id}` (one xrun with
//! its whole card), read from the flight recorder's SQLite history. The handlers run on the
//! server's tokio threads; the file is opened strictly read-only, per request, on tokio's
//! blocking threads (a recorder may be writing it meanwhile: WAL welcomes readers).

use crate::api::ApiError;
use serde::Serialize;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;
use tokio::sync::Semaphore;
use xrunlab_history::{
    parse_when, unix_ns, Facets, Filter, History, HistoryError, StoredDrift, XrunHead,
};

/// The most xruns (and the most drift events) one answer carries: the latest ones, and the
/// answer says when it cut.
pub const MAX_ROWS: u32 = 2000;

/// The most values of each filter offered (nodes, culprits, kinds), most xruns first.
const MAX_FACETS: u32 = 200;

/// History reads at once; past that a request is answered 503 at once (a flood must not take
/// every blocking thread, nor the disk).
const MAX_READERS: usize = 4;

/// The longest node, culprit or kind a filter takes, in bytes.
const MAX_NAME_BYTES: usize = 256;

/// The parameters `GET /api/history` takes.
const PARAMETERS: &str = "since, until, node, culprit, kind, limit";

/// What a time parameter allows.
const WHEN_ALLOWED: &str =
    "a span back from now (30m, 1h, 2d) or a UTC time (2026-11-25T14:00:00Z or 2026-11-25 14:00:00)";

/// How to start recording, said wherever there is no history to show.
const HOW_TO_RECORD: &str = "start the flight recorder with `xrunlab record` (or as a service: \
     `sudo systemctl enable --now xrunlab-record@$USER`, then start the dashboard with \
     --history /var/lib/xrunlab/$USER/history.db)";

/// Where the history is, and the permits of its readers; shared by the handlers.
pub(crate) struct HistorySource {
    /// The file; `None` when there is no default place (no HOME) and none was given.
    path: Option<PathBuf>,
    readers: Arc<Semaphore>,
}

impl HistorySource {
    pub(crate) fn new(path: Option<PathBuf>) -> HistorySource {
        HistorySource {
            path,
            readers: Arc::new(Semaphore::new(MAX_READERS)),
        }
    }

    /// Runs `read` on the history, opened read-only, on a blocking thread.
    async fn read<T: Send + 'static>(
        &self,
        read: impl FnOnce(&History) -> Result<T, HistoryError> + Send + 'static,
    ) -> Result<Result<T, HistoryError>, ApiError> {
        let Some(path) = self.path.clone() else {
            return Ok(Err(HistoryError::Missing(PathBuf::new())));
        };
        let Ok(permit) = self.readers.clone().try_acquire_owned() else {
            return Err(ApiError::failed(
                503,
                format!(
                    "the history is busy: {MAX_READERS} reads of it are already under way; \
                     try again shortly"
                ),
            ));
        };
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            History::open_read_only(&path).and_then(|h| read(&h))
        })
        .await
        .map_err(|e| ApiError::failed(500, format!("reading the history failed: {e}")))
    }

    /// Why there is nothing to show, for the page; `None` when the error is not about that.
    fn unavailable(&self, e: &HistoryError) -> Option<Value> {
        let why = match (e, &self.path) {
            (_, None) => "there is no default history file (HOME is not set): start the \
                          dashboard with --history FILE"
                .to_owned(),
            (HistoryError::Missing(p), Some(_)) => format!(
                "no history at {}: nothing has been recorded there yet",
                p.display()
            ),
            (HistoryError::TooNew { .. } | HistoryError::Outdated { .. }, Some(_)) => e.to_string(),
            _ => return None,
        };
        Some(json!({
            "available": false,
            "db": self.path.as_deref().map(Path::to_string_lossy),
            "why": why,
            "how": HOW_TO_RECORD,
        }))
    }
}

/// A bad parameter: 400, naming it, what was given and what is allowed.
fn bad_parameter(name: &str, value: &str, allowed: impl Into<String>) -> ApiError {
    let allowed = allowed.into();
    ApiError {
        error: format!("invalid {name}: {value:?} (allowed: {allowed})"),
        field: Some(name.to_owned()),
        value: Some(value.to_owned()),
        allowed: Some(allowed),
        ..ApiError::bad_request("")
    }
}

/// What `GET /api/history` asks for.
#[derive(Debug, Clone)]
pub(crate) struct Question {
    pub filter: Filter,
    pub limit: u32,
}

/// The query's pairs as a [`Question`]: every parameter at most once, none unknown; an empty
/// node, culprit or kind is no filter (the page's "all").
pub(crate) fn parse_question(
    pairs: &[(String, String)],
    now: SystemTime,
) -> Result<Question, ApiError> {
    let mut q = Question {
        filter: Filter::default(),
        limit: MAX_ROWS,
    };
    let mut seen: Vec<&str> = Vec::new();
    for (key, value) in pairs {
        if seen.contains(&key.as_str()) {
            return Err(ApiError::bad_request(format!(
                "{key} is given twice: each of {PARAMETERS} at most once"
            )));
        }
        seen.push(key);
        let name = |slot: &mut Option<String>| -> Result<(), ApiError> {
            if value.len() > MAX_NAME_BYTES {
                return Err(bad_parameter(
                    key,
                    &value.chars().take(40).collect::<String>(),
                    format!("a name of at most {MAX_NAME_BYTES} bytes; empty for all"),
                ));
            }
            *slot = Some(value.clone()).filter(|v| !v.is_empty());
            Ok(())
        };
        match key.as_str() {
            "since" | "until" => {
                let t =
                    parse_when(value, now).map_err(|_| bad_parameter(key, value, WHEN_ALLOWED))?;
                if key == "since" {
                    q.filter.since_ns = Some(t);
                } else {
                    q.filter.until_ns = Some(t);
                }
            }
            "node" => name(&mut q.filter.node)?,
            "culprit" => name(&mut q.filter.culprit)?,
            "kind" => name(&mut q.filter.kind)?,
            "limit" => {
                q.limit = value
                    .parse::<u32>()
                    .ok()
                    .filter(|n| (1..=MAX_ROWS).contains(n))
                    .ok_or_else(|| {
                        bad_parameter(
                            key,
                            value,
                            format!("a whole number of xruns, 1..={MAX_ROWS}"),
                        )
                    })?;
            }
            other => {
                return Err(ApiError::bad_request(format!(
                    "unknown parameter {other:?}: /api/history takes {PARAMETERS}"
                )))
            }
        }
    }
    if let (Some(s), Some(u)) = (q.filter.since_ns, q.filter.until_ns) {
        if s >= u {
            return Err(ApiError::bad_request(
                "since is not before until: the span is empty (a span counts back from now, so \
                 since=2h&until=1h is the hour before the last)",
            ));
        }
    }
    Ok(q)
}

/// A time the server was away, within a recorder session.
#[derive(Debug, Serialize)]
struct GapView {
    server: String,
    from_ns: i64,
    /// Absent while it is away (or when the recorder was stopped meanwhile).
    to_ns: Option<i64>,
    reason: String,
}

/// The answer of `GET /api/history` when there is a history.
#[derive(Debug, Serialize)]
struct HistoryView {
    available: bool,
    db: String,
    since_ns: Option<i64>,
    until_ns: Option<i64>,
    /// The server's clock when it answered: the right edge of a span without `until`.
    now_ns: i64,
    limit: u32,
    /// Every xrun that matches, of which `xruns` are the latest `limit`.
    matching: u64,
    truncated: bool,
    xruns: Vec<XrunHead>,
    /// Every drift event in the span, of which `drift` are the latest `limit`.
    drift_matching: u64,
    drift_truncated: bool,
    drift: Vec<StoredDrift>,
    gaps: Vec<GapView>,
    /// The nodes, culprits and kinds of the span's xruns, whatever the filters: the choices.
    facets: Facets,
}

fn answer_of(h: &History, q: Question, now_ns: i64) -> Result<HistoryView, HistoryError> {
    let Question { filter, limit } = q;
    let (since, until) = (filter.since_ns, filter.until_ns);
    let matching = h.count_xruns(&filter)?;
    let xruns = h.xrun_heads(&filter, limit)?;
    let drift_matching = h.count_drift(since, until)?;
    let drift = h.drift(since, until, limit)?;
    let mut gaps = Vec::new();
    for s in h.sessions(since, until)? {
        for g in s.gaps {
            let ends_after_since = since.is_none_or(|t| g.to_ns.is_none_or(|to| to >= t));
            let starts_before_until = until.is_none_or(|t| g.from_ns < t);
            if ends_after_since && starts_before_until {
                gaps.push(GapView {
                    server: s.server.clone(),
                    from_ns: g.from_ns,
                    to_ns: g.to_ns,
                    reason: g.reason,
                });
            }
        }
    }
    Ok(HistoryView {
        available: true,
        db: h.path().to_string_lossy().into_owned(),
        since_ns: since,
        until_ns: until,
        now_ns,
        limit,
        truncated: matching > xruns.len() as u64,
        matching,
        xruns,
        drift_truncated: drift_matching > drift.len() as u64,
        drift_matching,
        drift,
        gaps,
        facets: h.facets(since, until, MAX_FACETS)?,
    })
}

fn failed(e: HistoryError) -> ApiError {
    ApiError::failed(500, e.to_string())
}

/// `GET /api/history?…`: the span's xruns (without cards), drift events, gaps and facets; or,
/// with no history to read, `available: false` and how to start recording.
pub(crate) async fn overview(
    source: &HistorySource,
    pairs: &[(String, String)],
) -> Result<Value, ApiError> {
    let now = SystemTime::now();
    let q = parse_question(pairs, now)?;
    let now_ns = unix_ns(now);
    match source.read(move |h| answer_of(h, q, now_ns)).await? {
        Ok(view) => serde_json::to_value(view)
            .map_err(|e| ApiError::failed(500, format!("the history view: {e}"))),
        Err(e) => source.unavailable(&e).ok_or_else(|| failed(e)),
    }
}

/// `GET /api/history/xruns/{id}`: one xrun with its whole card.
pub(crate) async fn xrun(source: &HistorySource, id: &str) -> Result<Value, ApiError> {
    let Some(n) = id.parse::<i64>().ok().filter(|n| *n > 0) else {
        return Err(bad_parameter(
            "id",
            id,
            "an xrun's ID: a whole number from 1 (the `id` of /api/history's xruns)",
        ));
    };
    match source.read(move |h| h.xrun(n)).await? {
        Ok(Some(x)) => serde_json::to_value(x)
            .map_err(|e| ApiError::failed(500, format!("the card of xrun {n}: {e}"))),
        Ok(None) => Err(ApiError::failed(
            404,
            format!("no xrun {n} in the history (it may have been trimmed by retention)"),
        )),
        Err(e) => match source.unavailable(&e) {
            Some(v) => Err(ApiError::failed(
                404,
                format!(
                    "no xrun {n}: {}; {HOW_TO_RECORD}",
                    v["why"].as_str().unwrap_or("no history")
                ),
            )),
            None => Err(failed(e)),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    /// Reads past the limit are refused at once, without opening the file, and a permit given
    /// back lets the next one in.
    #[tokio::test]
    async fn reads_past_the_limit_are_503_at_once() {
        let dir = std::env::temp_dir().join(format!("xrunlab-dash-readers-{}", std::process::id()));
        let source = HistorySource::new(Some(dir.join("none.db")));
        let held = source
            .readers
            .clone()
            .acquire_many_owned(MAX_READERS as u32)
            .await
            .unwrap();
        let e = overview(&source, &[]).await.unwrap_err();
        assert_eq!(e.status, 503);
        assert!(
            e.error.contains("4 reads of it are already under way"),
            "{}",
            e.error
        );
        assert_eq!(xrun(&source, "1").await.unwrap_err().status, 503);
        drop(held);
        let v = overview(&source, &[]).await.unwrap();
        assert_eq!(v["available"], false, "{v}");
    }

    fn pairs(q: &[(&str, &str)]) -> Vec<(String, String)> {
        q.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn parameters_are_read_once_each_and_refused_with_what_is_allowed() {
        let now = UNIX_EPOCH + Duration::from_secs(100_000);
        let q = parse_question(
            &pairs(&[
                ("since", "2h"),
                ("until", "1970-01-02 06:00:00"),
                ("node", "synth"),
                ("culprit", ""),
                ("kind", "node_ran_long"),
                ("limit", "10"),
            ]),
            now,
        )
        .unwrap();
        assert_eq!(q.filter.since_ns, Some((100_000 - 7200) * 1_000_000_000));
        assert_eq!(q.filter.until_ns, Some(108_000 * 1_000_000_000));
        assert_eq!(q.filter.node.as_deref(), Some("synth"));
        assert_eq!(q.filter.culprit, None, "empty is all");
        assert_eq!(q.limit, 10);
        assert_eq!(parse_question(&[], now).unwrap().limit, MAX_ROWS);

        let refused = |q: &[(&str, &str)]| parse_question(&pairs(q), now).unwrap_err();
        let e = refused(&[("since", "yesterday")]);
        assert_eq!((e.status, e.field.as_deref()), (400, Some("since")));
        assert!(e.error.contains("30m, 1h, 2d"), "{}", e.error);
        for limit in ["0", "2001", "-1", "ten"] {
            let e = refused(&[("limit", limit)]);
            assert!(e.error.contains("1..=2000"), "{}", e.error);
        }
        assert!(refused(&[("nodes", "x")])
            .error
            .contains("takes since, until"));
        assert!(refused(&[("node", "a"), ("node", "b")])
            .error
            .contains("given twice"));
        assert!(refused(&[("since", "1h"), ("until", "2h")])
            .error
            .contains("the span is empty"));
        let long = "x".repeat(MAX_NAME_BYTES + 1);
        assert!(refused(&[("culprit", &long)])
            .error
            .contains("at most 256 bytes"));
    }
}
