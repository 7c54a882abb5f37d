//! Where the doctor reads the machine from: procfs, sysfs and the rest of the filesystem
//! (/etc, /boot, /usr, /dev) as three roots, so fixture trees can stand in for a machine.
//! Used on the main thread.

use std::path::{Path, PathBuf};

pub use xrunlab_results::doctor::Roots;

/// Why a file the doctor reads could not be used. The message names the file
/// ("/proc/cmdline is missing", "... is unreadable: permission denied"), ready to become an
/// "unknown" finding.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file does not exist.
    #[error("{} is missing", path.display())]
    Missing {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// The file exists but could not be read (permission denied, an I/O error).
    #[error("{} is unreadable: {}", path.display(), io_words(source))]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// The file holds something other than the one value expected.
    #[error("{} holds {text:?}, which does not parse", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// Its trimmed content.
        text: String,
    },
    /// A line the file always has is missing or does not parse.
    #[error("{} has no readable {line} line", path.display())]
    NoLine {
        /// The file.
        path: PathBuf,
        /// The line's label ("Uid", "Max realtime priority"...).
        line: String,
    },
    /// A compressed file (/proc/config.gz) does not decompress.
    #[error("{} does not decompress: {source}", path.display())]
    Decompress {
        /// The file.
        path: PathBuf,
        /// What the decompressor said.
        #[source]
        source: std::io::Error,
    },
}

impl ReadError {
    /// `Missing` for NotFound, else `Unreadable`.
    pub fn io(path: &Path, source: std::io::Error) -> ReadError {
        let path = path.to_path_buf();
        match source.kind() {
            std::io::ErrorKind::NotFound => ReadError::Missing { path, source },
            _ => ReadError::Unreadable { path, source },
        }
    }
}

/// Reads a text file for a check; `Err` says which file and why.
pub fn read(path: &Path) -> Result<String, ReadError> {
    std::fs::read_to_string(path).map_err(|e| ReadError::io(path, e))
}

/// Like [`read`], trimmed, and `Ok(None)` when the file does not exist (absent attributes
/// are normal: no cpufreq, no RAPL).
pub fn read_optional(path: &Path) -> Result<Option<String>, ReadError> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(Some(s.trim().to_owned())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(ReadError::io(path, e)),
    }
}

/// Reads and parses a one-value file; `Err` says what was wrong (missing, unreadable, or
/// "... holds \"x\", which does not parse").
pub fn read_value<T: std::str::FromStr>(path: &Path) -> Result<T, ReadError> {
    let text = read(path)?;
    let t = text.trim();
    t.parse().map_err(|_| ReadError::Parse {
        path: path.to_path_buf(),
        text: t.to_owned(),
    })
}

/// An io::Error without std's " (os error N)" suffix, lowercase.
fn io_words(e: &std::io::Error) -> String {
    let s = e.to_string();
    s.split(" (os error").next().unwrap_or(&s).to_lowercase()
}

/// Paths the doctor shows in findings: `path` as it is.
pub fn shown(path: &Path) -> String {
    path.display().to_string()
}

/// The `*.conf` files in the drop-in directory `dir`, in name order (the order the programs
/// that read them use); none when it is missing or unreadable.
pub fn conf_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "conf"))
        .collect();
    files.sort();
    files
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error;

    #[test]
    fn read_errors_name_the_file_and_keep_the_io_error_as_source() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("cmdline");
        let e = read(&missing).unwrap_err();
        assert!(matches!(e, ReadError::Missing { .. }), "{e:?}");
        assert_eq!(e.to_string(), format!("{} is missing", missing.display()));
        let io = e
            .source()
            .and_then(|s| s.downcast_ref::<std::io::Error>())
            .expect("the source is the io::Error");
        assert_eq!(io.kind(), std::io::ErrorKind::NotFound);

        // A directory where a file should be: unreadable, not missing.
        let e = read(dir.path()).unwrap_err();
        assert!(matches!(e, ReadError::Unreadable { .. }), "{e:?}");
        assert!(
            e.to_string()
                .starts_with(&format!("{} is unreadable: ", dir.path().display())),
            "{e}"
        );
        assert!(e.source().is_some());

        let value = dir.path().join("rt_runtime");
        std::fs::write(&value, "lots\n").unwrap();
        let e = read_value::<i64>(&value).unwrap_err();
        assert!(
            matches!(&e, ReadError::Parse { text, .. } if text == "lots"),
            "{e:?}"
        );
        assert!(e.to_string().contains("which does not parse"), "{e}");
    }
}
