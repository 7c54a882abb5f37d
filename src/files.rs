//! Result files on disk: checks that a path can be written without touching it, and writes whole
//! files atomically (through results' `PartialFile`: a partial file beside the target, fsynced,
//! then renamed); runs on the main thread.

use crate::Failure;
use std::path::Path;

use xrunlab_results::write::temp_beside;
pub use xrunlab_results::write::{dir_of, write_atomically};

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
