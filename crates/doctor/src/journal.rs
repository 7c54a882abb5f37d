//! The undo journal of `doctor --apply`: written before any setting changes, so a doctor killed
//! with `kill -9` (or a power cut) leaves a record of what to restore, which the next doctor finds
//! and `doctor --undo` restores. Read and written on the main thread.
//!
//! It lives at `<fs root>/run/xrunlab/doctor-undo.json` (`/run` is emptied at boot, and a journal
//! from an earlier boot is discarded anyway: the kernel settings it names were reset by the
//! reboot). Whether its owner still runs is judged by the live `/proc` (pid, and the process's
//! start time so a reused pid is not taken for the owner) and the boot id.
//!
//! `doctor --undo` may run as root on a tree another user can write (`--fs-root`), so a journal
//! is trusted only when it is a regular file (not a symlink) owned by the user running the
//! doctor and writable by nobody else, and then it may only restore the files its setting
//! writes, at their own paths under the roots, to values of that setting.

use crate::change::{Change, Setting, WriteFailed};
use crate::roots::{shown, Roots};
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::PathBuf;

/// The journal file's schema.
pub const SCHEMA: &str = "xrunlab.doctor-undo/1";

/// What a running `--apply` has changed or is about to change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Journal {
    /// [`SCHEMA`].
    pub schema: String,
    /// The setting's name.
    pub setting: String,
    /// The doctor's pid.
    pub pid: i32,
    /// Its start time in clock ticks after boot (`/proc/PID/stat` field 22).
    pub start_ticks: u64,
    /// `/proc/sys/kernel/random/boot_id` when it was written.
    pub boot_id: String,
    /// Every file the setting writes, with the value to restore.
    pub changes: Vec<Change>,
}

/// A journal found by a later doctor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// Its doctor is gone and the settings may still be in force: `doctor --undo` restores them.
    Orphaned(Journal),
    /// Its doctor still runs (it will undo on exit).
    OwnerRunning(Journal),
    /// Written before the last boot: nothing it names is in force any more; discarded.
    EarlierBoot(Journal),
}

/// Where the journal lives under `roots`.
pub fn path(roots: &Roots) -> PathBuf {
    roots.fs("run/xrunlab/doctor-undo.json")
}

fn live_boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

/// Start time of live process `pid`, clock ticks after boot.
fn start_ticks(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.get(stat.rfind(')')? + 1..)?
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()
}

impl Journal {
    /// A journal for this process applying `setting`.
    pub fn for_this_process(setting: &str, changes: Vec<Change>) -> Journal {
        let pid = std::process::id() as i32;
        Journal {
            schema: SCHEMA.into(),
            setting: setting.into(),
            pid,
            start_ticks: start_ticks(pid).unwrap_or(0),
            boot_id: live_boot_id(),
            changes,
        }
    }

    /// Writes it atomically (xrunlab-results' writer: temporary file, fsync, rename),
    /// creating the directory.
    pub fn write(&self, roots: &Roots) -> Result<(), JournalError> {
        let target = path(roots);
        let dir = target.parent().expect("the journal has a directory");
        std::fs::create_dir_all(dir).map_err(|source| JournalError::CreateDir {
            path: dir.to_path_buf(),
            source,
        })?;
        xrunlab_results::write::write_json(&target, self).map_err(JournalError::Write)?;
        // Whatever the umask: a journal others may write is refused by `find`.
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).map_err(
            |source| JournalError::Read {
                path: target.clone(),
                source,
            },
        )
    }

    fn owner_runs(&self) -> bool {
        start_ticks(self.pid).is_some_and(|t| t == self.start_ticks)
    }
}

/// Removes the journal (after a clean undo, a deliberate `--keep`, or a discard).
pub fn remove(roots: &Roots) -> Result<(), JournalError> {
    match std::fs::remove_file(path(roots)) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(JournalError::Remove {
            path: path(roots),
            source,
        }),
    }
}

/// The journal left under `roots`, if any, and what it means. A journal that cannot be read
/// is an error naming the file (it is left in place: it may be the only record of what to undo).
pub fn find(roots: &Roots) -> Result<Option<Found>, JournalError> {
    let p = path(roots);
    let untrusted = |why: String| JournalError::Untrusted {
        path: p.clone(),
        why,
    };
    let file = match std::fs::OpenOptions::new()
        .read(true)
        // Not through a symlink; and a FIFO in its place must not hang the doctor.
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&p)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(untrusted("it is a symlink".into()))
        }
        Err(source) => return Err(JournalError::Read { path: p, source }),
    };
    let meta = file.metadata().map_err(|source| JournalError::Read {
        path: p.clone(),
        source,
    })?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    if !meta.is_file() {
        return Err(untrusted("it is not a regular file".into()));
    }
    if meta.uid() != euid {
        return Err(untrusted(format!(
            "it is owned by uid {}, not by uid {euid} who runs this doctor (and whose doctor \
             --apply writes it)",
            meta.uid()
        )));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(untrusted(format!(
            "other users may write it (mode {:04o})",
            meta.mode() & 0o7777
        )));
    }
    let mut text = String::new();
    // A journal is a few hundred bytes per CPU; more is not one.
    if let Err(source) = file.take(MAX_BYTES).read_to_string(&mut text) {
        return Err(JournalError::Read { path: p, source });
    }
    let journal: Journal = match serde_json::from_str(&text) {
        Ok(j) => j,
        Err(source) => return Err(JournalError::Damaged { path: p, source }),
    };
    if journal.schema != SCHEMA {
        return Err(JournalError::Schema {
            path: p,
            schema: journal.schema,
        });
    }
    Ok(Some(if journal.boot_id != live_boot_id() {
        Found::EarlierBoot(journal)
    } else if journal.owner_runs() {
        Found::OwnerRunning(journal)
    } else {
        Found::Orphaned(journal)
    }))
}

/// Longest journal read.
const MAX_BYTES: u64 = 1 << 20;

/// Restores an orphaned journal's old values (last change first) and removes it; the changes
/// restored, or the writes that failed (the journal then stays). A journal that names a
/// setting the doctor does not know, a file its setting does not write (at its own path under
/// `roots`) or a value that is not one of the setting's is refused before anything is written.
pub fn undo(roots: &Roots, journal: &Journal) -> Result<Vec<Change>, UndoError> {
    let setting = Setting::from_name(&journal.setting).map_err(|e| UndoError::Refused {
        path: path(roots),
        why: e.to_string(),
    })?;
    for c in &journal.changes {
        let why = if !setting.owns(roots, &c.path) {
            format!(
                "it names {}, which {} does not write",
                shown(&c.path),
                setting.name()
            )
        } else if !setting.value_ok(&c.old) {
            format!(
                "it would write {:?} to {}, which is not a value of {}",
                c.old,
                shown(&c.path),
                setting.name()
            )
        } else {
            continue;
        };
        return Err(UndoError::Refused {
            path: path(roots),
            why,
        });
    }
    let errors = crate::change::restore(setting, roots, &journal.changes);
    if errors.is_empty() {
        remove(roots)?;
        Ok(journal.changes.clone())
    } else {
        Err(UndoError::Writes(errors))
    }
}

/// Why the undo journal could not be written, read or removed. Each message names the file.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// Its directory could not be made.
    #[error("cannot create {}: {source}", shown(path))]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// It could not be written (the writer's error names the file and keeps the io error).
    #[error("cannot write the undo journal: {0}")]
    Write(#[source] xrunlab_results::write::WriteError),
    /// It could not be removed.
    #[error("cannot remove {}: {source}", shown(path))]
    Remove {
        /// The journal.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// It exists but could not be read.
    #[error("cannot read the undo journal {}: {source}", shown(path))]
    Read {
        /// The journal.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// It is not a journal's JSON; it is left in place.
    #[error(
        "the undo journal {} is damaged ({source}); it is left in place: restore its values by \
         hand, then delete it",
        shown(path)
    )]
    Damaged {
        /// The journal.
        path: PathBuf,
        /// What the JSON parser said.
        #[source]
        source: serde_json::Error,
    },
    /// It is a symlink, not the doctor's user's, or others may write it: it may be forged, so
    /// nothing it says is done; it is left in place.
    #[error(
        "the undo journal {} is not trusted: {why}; it is left in place: check it, restore \
         its values by hand, then delete it",
        shown(path)
    )]
    Untrusted {
        /// The journal.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// It was written by another version of the doctor; it is left in place.
    #[error(
        "the undo journal {} has schema {schema:?}, not {SCHEMA:?}; it is left in place",
        shown(path)
    )]
    Schema {
        /// The journal.
        path: PathBuf,
        /// The schema it names.
        schema: String,
    },
}

/// Why an undo did not finish: writes that failed (the journal then stays), or the journal
/// could not be removed after every value was restored.
#[derive(Debug, thiserror::Error)]
pub enum UndoError {
    /// The journal asks for something `--apply` never does (a file its setting does not
    /// write, a value not of that setting): nothing was written; it is left in place.
    #[error(
        "refused the undo journal {}: {why}; nothing was written and it is left in place",
        shown(path)
    )]
    Refused {
        /// The journal.
        path: PathBuf,
        /// What it asked for.
        why: String,
    },
    /// These writes failed (last change first); the others were restored.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Writes(Vec<WriteFailed>),
    /// Every value was restored but the journal could not be removed.
    #[error(transparent)]
    Journal(#[from] JournalError),
}
