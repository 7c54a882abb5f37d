//! How a command failed, and the one place that turns a failure into an exit code: usage errors
//! exit 2, everything else 1. The library crates' error enums say what kind of error they are;
//! the `From` impls here decide which kind is the user's fault. Runs on the main thread.

use std::process::ExitCode;

/// How a command failed.
#[derive(Debug)]
pub enum Failure {
    /// The user asked for something invalid: exit code 2.
    Usage(String),
    /// Something failed while running: exit code 1.
    Runtime(String),
}

/// `xrunlab debug-backtrace`: prints a backtrace of this call as a panic would (forced, whatever
/// RUST_BACKTRACE says), so a user or the package's test can see whether frames name their
/// files and lines. Never inlined, so that its own frame is there to name.
#[inline(never)]
pub fn print_backtrace() -> Result<(), Failure> {
    println!("{}", std::backtrace::Backtrace::force_capture());
    Ok(())
}

/// Prints the failure (if any) on stderr and gives the process's exit code.
pub fn exit_code(outcome: Result<(), Failure>) -> ExitCode {
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(msg)) => {
            eprintln!("error: {msg}");
            ExitCode::from(2)
        }
        Err(Failure::Runtime(msg)) => {
            eprintln!("error: {msg}");
            ExitCode::from(1)
        }
    }
}

/// An engine that refused its config is a usage error (the message names the field and what
/// is allowed); anything else failed while starting.
impl From<xrunlab_engine::EngineError> for Failure {
    fn from(e: xrunlab_engine::EngineError) -> Failure {
        match e {
            xrunlab_engine::EngineError::Config(c) => Failure::Usage(c.to_string()),
            other => Failure::Runtime(other.to_string()),
        }
    }
}

/// A device that could not be opened (no JACK server, a build without JACK) is found while
/// running; its message says what to do.
impl From<xrunlab_engine::DeviceError> for Failure {
    fn from(e: xrunlab_engine::DeviceError) -> Failure {
        Failure::Runtime(e.to_string())
    }
}

/// A result file that cannot be written is the machine's problem (space, permissions), found
/// while running.
impl From<xrunlab_results::write::WriteError> for Failure {
    fn from(e: xrunlab_results::write::WriteError) -> Failure {
        Failure::Runtime(e.to_string())
    }
}

/// An experiment's invalid parameter is a usage error; every other kind (a device, the
/// engine, the machine's counters, a result file) failed while running.
impl From<xrunlab_lab::LabError> for Failure {
    fn from(e: xrunlab_lab::LabError) -> Failure {
        match e {
            xrunlab_lab::LabError::Usage(m) => Failure::Usage(m),
            other => Failure::Runtime(other.to_string()),
        }
    }
}

/// Every way a comparison fails is in the files or metrics the user named (unreadable,
/// different workloads, an empty side, a gate naming no metric of the files).
impl From<xrunlab_compare::CompareError> for Failure {
    fn from(e: xrunlab_compare::CompareError) -> Failure {
        use xrunlab_compare::CompareError;
        match e {
            CompareError::Read(_)
            | CompareError::Workload(_)
            | CompareError::EmptySide(_)
            | CompareError::Gate(_)
            | CompareError::Histograms(..) => Failure::Usage(e.to_string()),
        }
    }
}

/// The dashboard fails while running (a port in use, the device failing): exit code 1, as
/// before; its usage errors (`--token`) are clap's.
impl From<xrunlab_dash::DashError> for Failure {
    fn from(e: xrunlab_dash::DashError) -> Failure {
        Failure::Runtime(e.to_string())
    }
}

/// `doctor --apply` could not change the machine (no cpufreq, a write refused, a pending
/// undo): found while running.
impl From<xrunlab_doctor::apply::ApplyError> for Failure {
    fn from(e: xrunlab_doctor::apply::ApplyError) -> Failure {
        Failure::Runtime(e.to_string())
    }
}

/// The undo journal could not be read, written or removed: found while running.
impl From<xrunlab_doctor::journal::JournalError> for Failure {
    fn from(e: xrunlab_doctor::journal::JournalError) -> Failure {
        Failure::Runtime(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_errors_exit_2_and_everything_else_1() {
        assert_eq!(exit_code(Ok(())), ExitCode::SUCCESS);
        assert_eq!(
            exit_code(Err(Failure::Usage("bad".into()))),
            ExitCode::from(2)
        );
        assert_eq!(
            exit_code(Err(Failure::Runtime("failed".into()))),
            ExitCode::from(1)
        );
    }

    #[test]
    fn library_errors_keep_their_message_and_get_their_kind() {
        let empty = xrunlab_compare::CompareError::EmptySide("--vs");
        let message = empty.to_string();
        assert!(matches!(Failure::from(empty), Failure::Usage(m) if m == message));

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing-dir").join("r.json");
        let write = xrunlab_results::write::write_atomically(&path, b"x").unwrap_err();
        let message = write.to_string();
        assert!(message.contains(&path.display().to_string()), "{message}");
        assert!(matches!(Failure::from(write), Failure::Runtime(m) if m == message));

        let lab = xrunlab_lab::LabError::Usage("invalid value".into());
        assert!(matches!(Failure::from(lab), Failure::Usage(m) if m == "invalid value"));
        let lab = xrunlab_lab::LabError::Io {
            context: "zstd failed".into(),
            source: std::io::Error::other("broken"),
        };
        assert!(matches!(Failure::from(lab), Failure::Runtime(m) if m == "zstd failed: broken"));

        let device = xrunlab_engine::DeviceError::new(
            xrunlab_engine::DeviceErrorKind::Unavailable,
            "no JACK server",
        );
        assert!(matches!(Failure::from(device), Failure::Runtime(m) if m == "no JACK server"));
    }
}
