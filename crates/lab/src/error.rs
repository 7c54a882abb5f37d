//! How an experiment fails, and the usage errors that name a flag and what it allows; built on
//! the caller's thread.

use xrunlab_engine::{DeviceError, EngineError};
use xrunlab_results::write::WriteError;

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
}
