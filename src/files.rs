//! Result files on disk: checks that a path can be written without touching it, and writes whole files atomically (a temporary file beside the target, then a rename); runs on the main thread.

use crate::Failure;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The directory `path` lives in ("." for a bare file name).
pub fn dir_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// A temporary file in `dir`, named after `path` so that one left behind by a
/// crash says what it was for.
fn temp_beside(path: &Path) -> std::io::Result<tempfile::NamedTempFile> {
    use std::os::unix::fs::PermissionsExt;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let prefix = format!(".{name}.");
    tempfile::Builder::new()
        .prefix(&prefix)
        .suffix(".tmp")
        // What File::create gives (the umask applies), not tempfile's private 0600.
        .permissions(std::fs::Permissions::from_mode(0o666))
        .tempfile_in(dir_of(path))
}

/// Checks, before a run starts, that `path` (given with `flag`) can be
/// written, without creating or truncating it: the directory must exist and
/// take a new file (one is created and removed), and `path` must not be a
/// directory. A previous file at `path` stays as it is until the new one replaces it.
pub fn check_writable(flag: &str, path: &Path) -> Result<(), Failure> {
    let dir = dir_of(path);
    let cannot =
        |why: String| Failure::Usage(format!("cannot write {flag} {}: {why}", path.display()));
    if !dir.is_dir() {
        return Err(cannot(format!(
            "the directory {} does not exist",
            dir.display()
        )));
    }
    if path.is_dir() {
        return Err(cannot("it is a directory".into()));
    }
    // Dropping the probe removes it.
    temp_beside(path)
        .map(drop)
        .map_err(|e| cannot(format!("cannot create a file in {}: {e}", dir.display())))
}

/// Replaces `path` with `bytes` atomically: readers (and a crash at any
/// moment) see either the previous file or the complete new one.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let cannot = |e: &dyn std::fmt::Display| format!("cannot write {}: {e}", path.display());
    let mut tmp = temp_beside(path).map_err(|e| cannot(&e))?;
    tmp.write_all(bytes).map_err(|e| cannot(&e))?;
    // On disk before the rename, so that even a power loss leaves one whole file.
    tmp.as_file().sync_all().map_err(|e| cannot(&e))?;
    tmp.persist(path).map_err(|e| cannot(&e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_atomic_write_replaces_the_file_and_leaves_no_temporary_behind() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        std::fs::write(&path, "old").unwrap();
        check_writable("--json", &path).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "old",
            "the check leaves the file alone"
        );
        write_atomically(&path, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["r.json"], "only the target is left");
    }

    #[test]
    fn a_missing_directory_is_named() {
        let Err(Failure::Usage(msg)) =
            check_writable("--json", Path::new("/nonexistent-xrunlab/r.json"))
        else {
            panic!("a missing directory is a usage error");
        };
        assert!(
            msg.contains("--json") && msg.contains("/nonexistent-xrunlab does not exist"),
            "{msg}"
        );
    }
}
