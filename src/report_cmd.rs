//! `xrunlab report`: reads run, experiment and compare result files (experiment and compare
//! results typed, through xrunlab-results, a compare result's distributions turned into CCDF
//! points here) and writes one
//! self-contained HTML page that draws them, with the dashboard's chart module and the report's
//! drawing code inlined (no network); runs on the main thread.

use crate::cli::report::ReportArgs;
use crate::{files, Failure};
use serde_json::Value;
use xrunlab_results::compare::{CompareResult, SCHEMA as COMPARE_SCHEMA};
use xrunlab_results::experiment::parse_experiment;
use xrunlab_results::explain_cost::{parse_explain_cost, KIND as EXPLAIN_COST_KIND};
use xrunlab_results::lab::{kind_of, SCHEMA as LAB_SCHEMA};
use xrunlab_results::read::parse_typed;
use xrunlab_results::run::{RunFile, SCHEMA as RUN_SCHEMA};
use xrunlab_results::wakeup::{parse_wakeup, KIND as WAKEUP_KIND};
use xrunlab_results::EncodedHistogram;

/// The report page's own drawing code.
const REPORT_JS: &str = include_str!("report/report.js");

/// Result layouts the report draws.
/// (`xrunlab.lab/1`, experiments from before they kept histograms, is drawn as written.)
const SCHEMAS: &[&str] = &[RUN_SCHEMA, "xrunlab.lab/1", LAB_SCHEMA, COMPARE_SCHEMA];

/// Text that can sit inside a `<script>` element: `</script` (any case) cannot end it early.
/// In JS and JSON, `<\/` means the same as `</` inside strings, and comments are unaffected.
fn script_safe(text: &str) -> String {
    text.replace("</", "<\\/")
}

pub fn report(a: &ReportArgs) -> Result<(), Failure> {
    files::check_writable("--out", &a.out)?;
    let mut entries = Vec::new();
    for path in &a.files {
        let text =
            xrunlab_results::read::read_text(path).map_err(|e| Failure::Usage(e.to_string()))?;
        let value: Value = serde_json::from_str(&text).map_err(|e| {
            Failure::Usage(format!(
                "{} is not a result file: {e} (allowed: JSON written by --json of run, probe, sweep, capacity, compare or ab)",
                path.display()
            ))
        })?;
        let schema = value.get("schema").and_then(Value::as_str).unwrap_or("");
        if !SCHEMAS.contains(&schema) {
            return Err(Failure::Usage(format!(
                "{}: field schema is '{schema}': allowed {}",
                path.display(),
                SCHEMAS.join(", ")
            )));
        }
        let file = path.display().to_string();
        if schema == COMPARE_SCHEMA {
            entries.push(compare_entry(path, &text, file)?);
        } else if schema == LAB_SCHEMA {
            let ccdf = experiment_ccdf(path, &text)?;
            entries.push(serde_json::json!({ "file": file, "result": value, "ccdf": ccdf }));
        } else {
            if schema == RUN_SCHEMA {
                // Read as its type, so a field the page would misdraw is a usage error naming
                // the file and field; the page gets the file as written.
                parse_typed::<RunFile>(path, &text, RUN_SCHEMA)
                    .map_err(|e| Failure::Usage(e.to_string()))?;
            }
            entries.push(serde_json::json!({ "file": file, "result": value }));
        }
    }
    let data = serde_json::to_string(&entries)
        .map_err(|e| Failure::Runtime(format!("cannot serialize the results: {e}")))?;
    let page = page(&data)?;
    files::write_atomically(&a.out, page.as_bytes())?;
    println!(
        "report: {} result(s) drawn in {}",
        entries.len(),
        a.out.display()
    );
    Ok(())
}

/// An experiment result read as its kind's type, so a field the page would misdraw is a usage
/// error naming the file and field (the page then gets the file as written), and the CCDF
/// points of every distribution it kept: per family (oversleep, load, ...), one series per
/// point or thread.
fn experiment_ccdf(path: &std::path::Path, text: &str) -> Result<Vec<Value>, Failure> {
    let usage = |e: xrunlab_results::ReadError| Failure::Usage(e.to_string());
    let kept: Vec<(&str, String, EncodedHistogram)> =
        if kind_of(text).as_deref() == Some(WAKEUP_KIND) {
            let w = parse_wakeup(path, text).map_err(usage)?;
            w.result
                .threads
                .into_iter()
                .map(|t| {
                    (
                        "wake-up latency",
                        format!("thread {}", t.index),
                        t.latency_us,
                    )
                })
                .collect()
        } else if kind_of(text).as_deref() == Some(EXPLAIN_COST_KIND) {
            // Its figures are per run and per mode: no distribution kept to draw as a CCDF.
            parse_explain_cost(path, text).map_err(usage)?;
            Vec::new()
        } else {
            let e = parse_experiment(path, text).map_err(usage)?;
            e.kept()
                .into_iter()
                .map(|(family, series, h)| (family, series, h.clone()))
                .collect()
        };
    let mut charts: Vec<(&str, String, Vec<Value>)> = Vec::new();
    for (family, series, h) in &kept {
        let points = h.ccdf().map_err(|e| {
            Failure::Usage(format!("{}: {family} of {series}: {e}", path.display()))
        })?;
        let one = serde_json::json!({ "name": series, "points": points });
        match charts.iter_mut().find(|c| c.0 == *family) {
            Some(c) => c.2.push(one),
            None => charts.push((family, h.unit.clone(), vec![one])),
        }
    }
    Ok(charts
        .into_iter()
        .map(|(name, unit, series)| serde_json::json!({ "name": name, "unit": unit, "series": series }))
        .collect())
}

/// A compare result read as its type (a field that does not fit is a usage error naming the
/// file and field), with each overlaid distribution's CCDF on both sides for the page: it
/// cannot decode HdrHistogram text itself without a library the page does not carry.
fn compare_entry(path: &std::path::Path, text: &str, file: String) -> Result<Value, Failure> {
    let result: CompareResult =
        parse_typed(path, text, COMPARE_SCHEMA).map_err(|e| Failure::Usage(e.to_string()))?;
    let mut ccdf = Vec::new();
    for (i, d) in result.distributions.iter().enumerate() {
        let points = |side: &str, h: &xrunlab_results::EncodedHistogram| {
            h.ccdf().map_err(|e| {
                Failure::Usage(format!(
                    "{}: field distributions[{i}].{side}: {e}",
                    path.display()
                ))
            })
        };
        ccdf.push(serde_json::json!({
            "name": d.name,
            "unit": d.a.unit,
            "a": points("a", &d.a)?,
            "b": points("b", &d.b)?,
        }));
    }
    Ok(serde_json::json!({ "file": file, "result": result, "ccdf": ccdf }))
}

/// The page: the dashboard's stylesheet, the results as JSON, the dashboard's charts.js as text
/// (the report turns it into a module through a blob: URL) and the report's module.
fn page(data: &str) -> Result<String, Failure> {
    let asset = |name: &str| {
        xrunlab_dash::assets::get(name)
            .map(|(body, _)| body)
            .ok_or_else(|| Failure::Runtime(format!("the dashboard's {name} is not built in")))
    };
    let style = asset("style.css")?;
    let charts = asset("charts.js")?;
    Ok(format!(
        r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline' blob:; style-src 'unsafe-inline'; img-src data:">
<title>xrunlab report</title>
<style>{style}</style>
<style>
body {{ padding: 12px; }}
section {{ background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 10px 12px; margin: 0 0 12px; }}
figure {{ display: inline-block; margin: 6px 12px 6px 0; }}
figcaption {{ font-weight: 600; margin-bottom: 2px; }}
.prov {{ color: var(--muted); margin: 0 0 4px; }}
.warn {{ color: var(--bad); margin: 0 0 4px; }}
</style>
</head>
<body>
<h1>xrunlab report</h1>
<div id="report"></div>
<script type="application/json" id="xrunlab-data">{data}</script>
<script type="text/plain" id="xrunlab-charts-js">{charts}</script>
<script type="module">{report}</script>
</body>
</html>
"#,
        style = style.replace("</", "<\\/"),
        data = script_safe(data),
        charts = script_safe(charts),
        report = script_safe(REPORT_JS),
    ))
}
