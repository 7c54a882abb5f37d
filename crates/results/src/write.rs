//! The one atomic writer of result files: [`PartialFile`] streams into `FILE.PID.partial`
//! beside the target, and its commit flushes, fsyncs, renames it over the target and fsyncs
//! the directory, so a reader (or a crash, or `kill -9`) sees the old file or the whole new
//! one, and what a killed writer wrote stays in the partial file. Whole files
//! ([`write_atomically`], [`write_json`]) go through the same type. Runs on the main thread.

use serde::Serialize;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// The directory `path` lives in ("." for a bare file name).
pub fn dir_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// A temporary file in `path`'s directory, named after `path` so that one left behind by a
/// crash says what it was for; removed when dropped (a probe that the directory takes a file).
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

/// The in-progress file of a result bound for `target`: `FILE.PID.partial` (PID: this
/// process), so two processes writing the same target never share one, and one left behind
/// says what it was for and who wrote it.
///
/// The name can be guessed, so [`PartialFile`] creates it only if nothing has that name yet
/// (`O_EXCL`), never through a symlink (`O_NOFOLLOW`): another user who plants a symlink there
/// cannot make this process write over a file of their choosing.
pub fn partial_path(target: &Path) -> PathBuf {
    let mut name = target.as_os_str().to_owned();
    name.push(format!(".{}.partial", std::process::id()));
    PathBuf::from(name)
}

/// A result file being written: buffered writes go to [`partial_path`] beside the target,
/// which is not touched until [`PartialFile::commit`] renames the whole file over it.
///
/// Dropped without a commit (an error, a signal the caller does not catch), it leaves the
/// partial file where it is, holding what was flushed: nothing measured is lost, and the
/// earlier target stays intact. `kill -9` leaves it the same way, with what was flushed.
#[derive(Debug)]
pub struct PartialFile {
    out: BufWriter<File>,
    target: PathBuf,
    partial: PathBuf,
}

impl PartialFile {
    /// Creates (truncates) the partial file of `target` with a default-sized buffer.
    pub fn create(target: &Path) -> Result<PartialFile, WriteError> {
        PartialFile::with_capacity(target, 8 * 1024)
    }

    /// Creates (truncates) the partial file of `target`, buffering `capacity` bytes between
    /// writes to it. The error names `target`.
    pub fn with_capacity(target: &Path, capacity: usize) -> Result<PartialFile, WriteError> {
        use std::os::unix::fs::OpenOptionsExt;
        let partial = partial_path(target);
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .mode(0o666)
            .open(&partial)
            .map_err(|source| match source.kind() {
                std::io::ErrorKind::AlreadyExists => WriteError::PartialExists {
                    path: target.to_path_buf(),
                    what: what_is_there(&partial),
                    partial: partial.clone(),
                    source,
                },
                _ => WriteError::Io {
                    path: target.to_path_buf(),
                    source,
                },
            })?;
        Ok(PartialFile {
            out: BufWriter::with_capacity(capacity, file),
            target: target.to_path_buf(),
            partial,
        })
    }

    /// The file being written.
    pub fn partial(&self) -> &Path {
        &self.partial
    }

    /// The file the commit replaces.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Flushes, fsyncs and renames the partial file over the target, then fsyncs the
    /// directory so that the rename itself survives a power loss. On an error the partial
    /// file stays (the error names it) and the target is as it was, unless only the
    /// directory's fsync failed.
    pub fn commit(mut self) -> Result<(), WriteError> {
        let result = self.commit_steps();
        result.map_err(|source| WriteError::Kept {
            path: self.target.clone(),
            partial: self.partial.clone(),
            source,
        })
    }

    fn commit_steps(&mut self) -> std::io::Result<()> {
        self.out.flush()?;
        // On disk before the rename, so that even a power loss leaves one whole file.
        self.out.get_ref().sync_all()?;
        std::fs::rename(&self.partial, &self.target)?;
        File::open(dir_of(&self.target))?.sync_all()
    }

    /// Removes the partial file: for a whole file whose bytes the caller still holds.
    fn discard(self) {
        let partial = self.partial.clone();
        drop(self);
        // Best effort: the error being reported is the write's, not this one.
        let _ = std::fs::remove_file(partial);
    }
}

/// What already has a partial file's name, for the message that refuses to touch it.
fn what_is_there(partial: &Path) -> &'static str {
    match std::fs::symlink_metadata(partial) {
        Ok(m) if m.file_type().is_symlink() => "a symlink, which is not followed",
        Ok(m) if m.is_file() => {
            "a file an earlier run with this process id left: it may hold what that run measured"
        }
        Ok(_) => "not a regular file",
        Err(_) => "something that vanished when looked at",
    }
}

impl Write for PartialFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.out.write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.out.write_all(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// Why a result file could not be written; its message names the file.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// Making, writing, syncing or renaming the file failed (no space, no permission, no
    /// such directory...).
    #[error("cannot write {}: {source}", path.display())]
    Io {
        /// The file asked for.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// Writing, syncing or renaming a partial file failed: what was written stays in it.
    #[error("cannot write {}: {source}; what was written is in {}", path.display(), partial.display())]
    Kept {
        /// The file asked for.
        path: PathBuf,
        /// The partial file that holds what was written.
        partial: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// Something already has the partial file's name (a symlink, a file left by an earlier
    /// run with the same process id): it is left alone and nothing is written.
    #[error(
        "cannot write {}: {} already exists ({what}); it is left alone: move it away or delete it, \
         then run again",
        path.display(),
        partial.display()
    )]
    PartialExists {
        /// The file asked for.
        path: PathBuf,
        /// The partial file's name.
        partial: PathBuf,
        /// What is there.
        what: &'static str,
        /// What the operating system said (EEXIST).
        #[source]
        source: std::io::Error,
    },
    /// The value could not be turned into JSON (a map with non-string keys...).
    #[error("cannot serialize {}: {source}", path.display())]
    Serialize {
        /// The file asked for.
        path: PathBuf,
        /// What serde_json said.
        #[source]
        source: serde_json::Error,
    },
}

impl WriteError {
    /// The file that could not be written.
    pub fn path(&self) -> &Path {
        match self {
            WriteError::Io { path, .. }
            | WriteError::Kept { path, .. }
            | WriteError::PartialExists { path, .. }
            | WriteError::Serialize { path, .. } => path,
        }
    }
}

/// Replaces `path` with `bytes` atomically (through a [`PartialFile`]): readers (and a crash
/// at any moment) see either the previous file or the complete new one. A write that fails
/// removes its partial file, since the caller still holds the bytes.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    let mut out = PartialFile::create(path)?;
    if let Err(source) = out.write_all(bytes) {
        out.discard();
        return Err(WriteError::Io {
            path: path.to_path_buf(),
            source,
        });
    }
    let partial = out.partial().to_path_buf();
    out.commit().map_err(|e| {
        let _ = std::fs::remove_file(&partial);
        match e {
            WriteError::Kept { path, source, .. } => WriteError::Io { path, source },
            other => other,
        }
    })
}

/// Writes `value` as pretty JSON (one trailing newline) to `path` atomically.
pub fn write_json(path: &Path, value: &impl Serialize) -> Result<(), WriteError> {
    let text = serde_json::to_string_pretty(value).map_err(|source| WriteError::Serialize {
        path: path.to_path_buf(),
        source,
    })?;
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

    #[test]
    fn a_failed_write_names_the_file_and_keeps_the_io_error_as_its_source() {
        use std::error::Error;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("no-such-dir").join("r.json");
        let e = write_json(&path, &[1]).unwrap_err();
        assert!(matches!(e, WriteError::Io { .. }), "{e:?}");
        assert_eq!(e.path(), path);
        let message = e.to_string();
        assert!(message.contains(&path.display().to_string()), "{message}");
        let io = e
            .source()
            .and_then(|s| s.downcast_ref::<std::io::Error>())
            .expect("the source is the io::Error");
        assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
    }

    fn names_in(dir: &Path) -> Vec<String> {
        let mut names: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_commit_puts_the_whole_file_in_place_of_the_target() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.csv");
        std::fs::write(&path, "old").unwrap();
        let mut out = PartialFile::create(&path).unwrap();
        assert_eq!(out.partial(), partial_path(&path));
        assert_eq!(out.target(), path);
        out.write_all(b"a,b\n").unwrap();
        out.flush().unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "old",
            "the target is untouched until the commit"
        );
        out.write_all(b"1,2\n").unwrap();
        out.commit().unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "a,b\n1,2\n");
        assert_eq!(names_in(dir.path()), ["r.csv"], "no partial file is left");
    }

    #[test]
    fn a_partial_file_dropped_without_a_commit_stays_and_the_target_is_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.csv");
        std::fs::write(&path, "old").unwrap();
        let mut out = PartialFile::create(&path).unwrap();
        let partial = out.partial().to_path_buf();
        out.write_all(b"measured\n").unwrap();
        drop(out);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old");
        assert_eq!(
            std::fs::read_to_string(&partial).unwrap(),
            "measured\n",
            "what was written is kept in the partial file"
        );
        assert_eq!(
            names_in(dir.path()),
            [
                "r.csv".to_owned(),
                format!("r.csv.{}.partial", std::process::id())
            ]
        );
    }

    #[test]
    fn a_symlink_planted_at_the_partial_files_name_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let dangling = dir.path().join("created-by-us");
        for aim in [&victim, &dangling] {
            let _ = std::fs::remove_file(partial_path(&path));
            std::os::unix::fs::symlink(aim, partial_path(&path)).unwrap();
            let e = write_json(&path, &[1]).unwrap_err();
            assert!(matches!(e, WriteError::PartialExists { .. }), "{e:?}");
            let message = e.to_string();
            assert!(
                message.contains("already exists (a symlink, which is not followed)")
                    && message.contains(&partial_path(&path).display().to_string()),
                "{message}"
            );
            assert!(
                std::fs::symlink_metadata(partial_path(&path))
                    .unwrap()
                    .file_type()
                    .is_symlink(),
                "the symlink is left alone"
            );
        }
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert!(
            !dangling.exists(),
            "no file was made where the symlink points"
        );
        assert!(!path.exists());
    }

    #[test]
    fn a_partial_file_left_by_a_run_with_the_same_pid_is_kept_and_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.csv");
        std::fs::write(partial_path(&path), "what a killed run measured\n").unwrap();
        let e = PartialFile::create(&path).unwrap_err();
        assert!(
            e.to_string()
                .contains("an earlier run with this process id left"),
            "{e}"
        );
        assert_eq!(e.path(), path);
        assert_eq!(
            std::fs::read_to_string(partial_path(&path)).unwrap(),
            "what a killed run measured\n"
        );
    }

    #[test]
    fn a_partial_file_in_an_unwritable_directory_names_the_target_and_keeps_the_io_error() {
        use std::error::Error;
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let locked = dir.path().join("locked");
        std::fs::create_dir(&locked).unwrap();
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o500)).unwrap();
        // Mode bits do not hold back root (CAP_DAC_OVERRIDE); /sys refuses new files to it.
        let privileged = std::fs::write(locked.join("probe"), "").is_ok();
        let path = if privileged {
            Path::new("/sys/r.csv").to_path_buf()
        } else {
            locked.join("r.csv")
        };
        let e = PartialFile::create(&path).unwrap_err();
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert!(matches!(e, WriteError::Io { .. }), "{e:?}");
        assert_eq!(e.path(), path);
        let message = e.to_string();
        assert!(message.contains(&path.display().to_string()), "{message}");
        let io = e
            .source()
            .and_then(|s| s.downcast_ref::<std::io::Error>())
            .expect("the source is the io::Error");
        assert_eq!(io.kind(), std::io::ErrorKind::PermissionDenied);
        assert!(!partial_path(&path).exists());
    }
}
