//! The one atomic writer of result files: a temporary file beside the target, written,
//! fsynced, then renamed over it, so a reader (or a crash) sees the old file or the whole new
//! one. Runs on the main thread.

use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The directory `path` lives in ("." for a bare file name).
pub fn dir_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// A temporary file in `path`'s directory, named after `path` so that one left behind by a
/// crash says what it was for.
pub fn temp_beside(path: &Path) -> std::io::Result<tempfile::NamedTempFile> {
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

/// Writes `value` as pretty JSON (one trailing newline) to `path` atomically.
pub fn write_json(path: &Path, value: &impl Serialize) -> Result<(), String> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| format!("cannot serialize {}: {e}", path.display()))?;
    write_atomically(path, (text + "\n").as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_atomic_write_replaces_the_file_and_leaves_no_temporary_behind() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        std::fs::write(&path, "old").unwrap();
        write_json(&path, &[1, 2]).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "[\n  1,\n  2\n]\n");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["r.json"], "only the target is left");
    }
}
