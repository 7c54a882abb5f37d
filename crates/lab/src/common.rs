//! What every experiment shares: the run context (stop flag, progress bar), the result envelope
//! with provenance, CSV tables and usage errors; runs on the caller's thread.

use indicatif::ProgressBar;
use serde::Serialize;
use xrunlab_engine::{DeviceError, EngineError};
use xrunlab_results::write::WriteError;
use xrunlab_sys::{Fingerprint, Provenance};

pub use xrunlab_results::lab::{LabResult, SCHEMA};

/// How an experiment failed. Only [`LabError::Usage`] is the user's fault (exit code 2, see the
/// binary's failure.rs); every other kind failed while running (exit code 1). Kinds that wrap
/// an underlying error keep it as their `source()`; the message says what was being done.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// An invalid parameter: names the flag and the allowed values.
    #[error("{0}")]
    Usage(String),
    /// Something failed while running with no underlying error to keep (the device ended, a
    /// measuring thread panicked, kernel tracing is unavailable and why).
    #[error("{0}")]
    Runtime(String),
    /// The device could not be opened.
    #[error("{context}: {source}")]
    Device {
        /// What was being opened ("cannot open the device", "side A: ...").
        context: String,
        /// The device's error, which says what to do.
        #[source]
        source: DeviceError,
    },
    /// The engine did not start (other than a refused setting, which is [`LabError::Usage`]).
    #[error("{context}: {source}")]
    Engine {
        /// What was being started ("the engine did not start").
        context: String,
        /// The engine's error.
        #[source]
        source: EngineError,
    },
    /// Reading the machine's counters or running a workload failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being read or done, naming the file or thread.
        context: String,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// A result file could not be written.
    #[error("{0}")]
    Write(#[from] WriteError),
}

impl LabError {
    /// The engine did not start, keeping its error as source.
    pub fn engine_start(source: EngineError) -> LabError {
        LabError::Engine {
            context: "the engine did not start".into(),
            source,
        }
    }
}

/// A usage error for `flag` with `value`, saying what is allowed.
pub fn invalid(flag: &str, value: impl std::fmt::Display, allowed: &str) -> LabError {
    LabError::Usage(format!(
        "invalid value '{value}' for {flag}: allowed {allowed}"
    ))
}

/// Checks that `value` lies in `lo..=hi`, naming `flag` otherwise.
pub fn check_range<T: PartialOrd + std::fmt::Display + Copy>(
    flag: &str,
    value: T,
    lo: T,
    hi: T,
    unit: &str,
) -> Result<(), LabError> {
    if value < lo || value > hi {
        return Err(invalid(flag, value, &format!("{lo}..={hi}{unit}")));
    }
    Ok(())
}

/// What an experiment needs from its caller: when to stop early, and where to show progress.
pub struct Ctx<'a> {
    /// Returns true once the experiment should stop (Ctrl-C, SIGTERM); polled from the caller's thread only.
    pub stop: &'a (dyn Fn() -> bool + Sync),
    /// Progress display; [`ProgressBar::hidden`] shows nothing.
    pub progress: ProgressBar,
}

impl<'a> Ctx<'a> {
    /// A context that never stops and shows nothing (tests, libraries).
    pub fn silent(stop: &'a (dyn Fn() -> bool + Sync)) -> Ctx<'a> {
        Ctx {
            stop,
            progress: ProgressBar::hidden(),
        }
    }

    /// Whether the experiment should stop now.
    pub fn stopped(&self) -> bool {
        (self.stop)()
    }
}

/// Rows for `--csv`: a header and one row per measured point.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Table {
    /// Column names.
    pub header: Vec<String>,
    /// One entry per column in each row.
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these columns and no rows.
    pub fn new(header: &[&str]) -> Table {
        Table {
            header: header.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row (one value per column).
    pub fn push(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }

    /// The table as CSV text (quoted where the csv crate needs it).
    pub fn to_csv(&self) -> Result<Vec<u8>, csv::Error> {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(&self.header)?;
        for r in &self.rows {
            w.write_record(r)?;
        }
        w.into_inner().map_err(|e| e.into_error().into())
    }
}

/// Formats an optional figure for a CSV cell (empty when absent).
pub fn cell(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.3}")).unwrap_or_default()
}

/// An experiment's figures, as the envelope and the CSV need them.
pub trait Experiment: Serialize {
    /// The result kind, e.g. "probe.wakeup".
    const KIND: &'static str;
    /// One CSV row per measured point.
    fn table(&self) -> Table;
    /// A human-readable summary for the terminal.
    fn text(&self) -> String;
    /// What did not take effect, and what was used instead.
    fn warnings(&self) -> Vec<String>;
    /// Whether some planned points were not measured (stopped early).
    fn incomplete(&self) -> bool;
}

/// Wraps `result` in its file's envelope; `provenance` and `fingerprint` (collected before the
/// experiment) are finished here: the end time, and the steal over the experiment.
pub fn lab_result<T: Experiment>(
    mut provenance: Provenance,
    mut fingerprint: Fingerprint,
    quick: bool,
    result: T,
    stop_reason: Option<&str>,
) -> LabResult<T> {
    provenance.finish();
    fingerprint.finish(xrunlab_sys::default_proc_root());
    let incomplete = result.incomplete() || stop_reason.is_some();
    let end_reason = match stop_reason {
        Some(s) => format!("interrupted by {s}; every point finished before it is kept"),
        None if incomplete => "stopped early; every finished point is kept".into(),
        None => "completed".into(),
    };
    LabResult {
        schema: SCHEMA.to_owned(),
        kind: T::KIND.to_owned(),
        provenance,
        fingerprint,
        quick,
        incomplete,
        end_reason,
        warnings: result.warnings(),
        result,
    }
}

/// Progress bar style shared by the experiments: position, length and a message.
pub fn start_progress(ctx: &Ctx, len: u64, what: &str) {
    ctx.progress.set_length(len);
    ctx.progress.set_position(0);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{prefix} [{bar:30}] {pos}/{len} {msg} ({elapsed}, eta {eta})",
    ) {
        ctx.progress.set_style(style.progress_chars("=> "));
    }
    ctx.progress.set_prefix(what.to_string());
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error;

    #[test]
    fn lab_errors_say_what_was_done_and_keep_the_underlying_error_as_source() {
        let device = LabError::Device {
            context: "side A: cannot open the device".into(),
            source: DeviceError::new(
                xrunlab_engine::DeviceErrorKind::Unavailable,
                "no JACK server is running",
            ),
        };
        assert_eq!(
            device.to_string(),
            "side A: cannot open the device: no JACK server is running"
        );
        assert!(device.source().unwrap().is::<DeviceError>());

        let engine = LabError::engine_start(EngineError::Thread {
            index: 2,
            source: std::io::Error::from(std::io::ErrorKind::WouldBlock),
        });
        let message = engine.to_string();
        assert!(
            message.starts_with("the engine did not start: could not start worker thread 2: "),
            "{message}"
        );
        let source = engine.source().unwrap();
        assert!(source.is::<EngineError>());
        // The chain reaches the operating system's error.
        assert!(source.source().unwrap().is::<std::io::Error>());

        let io = LabError::Io {
            context: "cannot read /proc counters of thread 7".into(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        };
        assert!(io.to_string().contains("thread 7"), "{io}");
        assert_eq!(
            io.source()
                .unwrap()
                .downcast_ref::<std::io::Error>()
                .unwrap()
                .kind(),
            std::io::ErrorKind::NotFound
        );

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing").join("a.json");
        let write = LabError::from(xrunlab_results::write::write_json(&path, &1).unwrap_err());
        assert!(write.to_string().contains("a.json"), "{write}");
        assert!(write.source().is_some());

        assert!(invalid("--rounds", 0, "1..=100").source().is_none());
    }

    #[test]
    fn a_table_is_csv_with_its_header() {
        let mut t = Table::new(&["a", "b"]);
        t.push(vec!["1".into(), "x,y".into()]);
        assert_eq!(t.to_csv().unwrap(), b"a,b\n1,\"x,y\"\n");
    }
}
