//! `xrunlab history`: reads the flight recorder's history and prints the xruns in a span with
//! their causes, the top culprits, the drift events among them and the recorder's gaps (text or
//! JSON), or writes one xrun's stored Perfetto snapshot; runs on the main thread.

use crate::cli::history::HistoryArgs;
use crate::files::{check_writable, write_atomically};
use crate::Failure;
use serde::Serialize;
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;
use xrunlab_drift::date_time_local;
use xrunlab_history::{
    CulpritCount, Filter, History, HistoryError, Session, StoredDrift, StoredXrun,
};

/// How many culprits the table lists.
const TOP_CULPRITS: u32 = 10;

impl From<HistoryError> for Failure {
    /// A history that is not there, or not ours to read, is the user's --db; SQLite failing
    /// on a good file is the machine's.
    fn from(e: HistoryError) -> Failure {
        match e {
            HistoryError::Missing(_) | HistoryError::TooNew { .. } => Failure::Usage(e.to_string()),
            other => Failure::Runtime(other.to_string()),
        }
    }
}

/// `--since`/`--until`: a span back from now, or a UTC time.
fn parse_when(flag: &str, text: &str, now: SystemTime) -> Result<i64, Failure> {
    xrunlab_history::parse_when(text, now).map_err(|e| Failure::Usage(format!("{flag} {e}")))
}

fn db_path(args: &HistoryArgs) -> Result<PathBuf, Failure> {
    args.db
        .clone()
        .or_else(xrunlab_history::default_path)
        .ok_or_else(|| {
            Failure::Usage("no default history file (HOME is not set): give --db FILE".into())
        })
}

#[derive(Serialize)]
struct Report<'a> {
    db: &'a Path,
    since_ns: Option<i64>,
    until_ns: Option<i64>,
    /// All the xruns that match, of which `xruns` are the latest.
    matching: u64,
    xruns: Vec<StoredXrun>,
    top_culprits: Vec<CulpritCount>,
    drift: Vec<StoredDrift>,
    sessions: Vec<Session>,
}

pub fn history(args: &HistoryArgs) -> Result<(), Failure> {
    let db = db_path(args)?;
    if let Some(trace) = &args.trace {
        return write_trace(&db, &trace[0], Path::new(&trace[1]));
    }
    let now = SystemTime::now();
    let since_ns = args
        .since
        .as_deref()
        .map(|s| parse_when("--since", s, now))
        .transpose()?;
    let until_ns = args
        .until
        .as_deref()
        .map(|s| parse_when("--until", s, now))
        .transpose()?;
    if let (Some(s), Some(u)) = (since_ns, until_ns) {
        if s >= u {
            return Err(Failure::Usage(format!(
                "--since {} is not before --until {}: the span is empty",
                args.since.as_deref().unwrap_or_default(),
                args.until.as_deref().unwrap_or_default()
            )));
        }
    }
    let filter = Filter {
        since_ns,
        until_ns,
        node: args.node.clone(),
        culprit: args.culprit.clone(),
        kind: args.kind.clone(),
    };
    let h = History::open_reader(&db)?;
    let report = Report {
        db: &db,
        since_ns,
        until_ns,
        matching: h.count_xruns(&filter)?,
        xruns: h.xruns(&filter, args.limit)?,
        top_culprits: h.top_culprits(&filter, TOP_CULPRITS)?,
        drift: h.drift(since_ns, until_ns, args.limit)?,
        sessions: h.sessions(since_ns, until_ns)?,
    };
    if args.json {
        let text = serde_json::to_string_pretty(&report)
            .map_err(|e| Failure::Runtime(format!("writing the JSON: {e}")))?;
        println!("{text}");
    } else {
        print!("{}", text(&report));
    }
    Ok(())
}

fn write_trace(db: &Path, id: &str, out: &Path) -> Result<(), Failure> {
    let id: i64 = id.parse().map_err(|_| {
        Failure::Usage(format!(
            "--trace {id:?}: not an xrun ID (the number in history's ID column)"
        ))
    })?;
    check_writable("--trace", out)?;
    let h = History::open_reader(db)?;
    if !h.has_xrun(id)? {
        return Err(Failure::Usage(format!(
            "--trace {id}: there is no xrun {id} in {} (it may have been trimmed by retention)",
            db.display()
        )));
    }
    let Some(trace) = h.snapshot(id)? else {
        return Err(Failure::Usage(format!(
            "--trace {id}: xrun {id} has no stored trace (the recorder keeps one per root cause \
             per --snapshot-every, 30 s by default, and only with kernel events; `history` \
             marks those with one)"
        )));
    };
    write_atomically(out, &trace)?;
    eprintln!(
        "wrote {} ({} bytes): open it in ui.perfetto.dev",
        out.display(),
        trace.len()
    );
    Ok(())
}

fn span_words(report: &Report<'_>) -> String {
    match (report.since_ns, report.until_ns) {
        (None, None) => "everything on file".into(),
        (Some(s), None) => format!("since {}", date_time_local(s)),
        (None, Some(u)) => format!("until {}", date_time_local(u)),
        (Some(s), Some(u)) => format!("{} to {}", date_time_local(s), date_time_local(u)),
    }
}

fn text(r: &Report<'_>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}: {} xrun{} ({})",
        r.db.display(),
        r.matching,
        if r.matching == 1 { "" } else { "s" },
        span_words(r)
    );
    if r.matching > r.xruns.len() as u64 {
        let _ = writeln!(
            out,
            "the latest {} shown; --limit N or --since/--until for others",
            r.xruns.len()
        );
    }
    if !r.xruns.is_empty() {
        let _ = writeln!(
            out,
            "\n{:>6}  {:19}  {:8}  {:24}  CAUSE",
            "ID", "TIME", "SERVER", "KIND"
        );
    }
    for x in &r.xruns {
        let e = &x.entry;
        let _ = writeln!(
            out,
            "{:>6}  {:19}  {:8}  {:24}  {}{}",
            x.id,
            date_time_local(e.time_ns),
            e.server,
            e.kind,
            e.summary,
            if x.has_snapshot { "  [trace]" } else { "" }
        );
        for line in e.card["drift_before"].as_array().into_iter().flatten() {
            if let Some(line) = line.as_str() {
                let _ = writeln!(out, "{:>6}  after: {line}", "");
            }
        }
    }
    if !r.top_culprits.is_empty() {
        let _ = writeln!(out, "\ntop culprits:");
        for c in &r.top_culprits {
            let _ = writeln!(out, "{:>6}  {}", c.xruns, c.culprit);
        }
    }
    let _ = writeln!(out, "\ndrift ({}):", r.drift.len());
    if r.drift.is_empty() {
        let _ = writeln!(out, "  nothing changed on the machine in this span");
    }
    for d in &r.drift {
        let _ = writeln!(
            out,
            "        {:19}  {}",
            date_time_local(d.entry.time_ns),
            d.entry.words
        );
    }
    for s in &r.sessions {
        for g in &s.gaps {
            let _ = writeln!(
                out,
                "gap: the {} server was away from {} to {}: {}",
                s.server,
                date_time_local(g.from_ns),
                g.to_ns
                    .map(date_time_local)
                    .unwrap_or_else(|| "the end of the session".into()),
                g.reason
            );
        }
    }
    out
}
