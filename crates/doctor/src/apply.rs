//! Applying one named, reversible system setting: write new values to sysfs/procfs files,
//! remember the old ones, and restore them when the guard is undone or dropped. Used on the
//! main thread; the binary undoes on exit and on SIGINT/SIGTERM/SIGHUP.

use crate::change::write;
pub use crate::change::{Change, Setting, UnknownSetting, WriteFailed};
use crate::journal::{JournalError, UndoError};
use crate::roots::{shown, Roots};
use std::path::PathBuf;
use xrunlab_sys::cpu::online_cpus;

/// A setting in force. [`AppliedSetting::undo`] (or dropping it) writes the old values back, unless
/// [`AppliedSetting::keep`] was called.
#[derive(Debug)]
pub struct AppliedSetting {
    setting: Setting,
    changes: Vec<Change>,
    kept: bool,
    /// Where the undo journal was written (removed once the values are back, or kept).
    roots: Roots,
}

/// Why a setting could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The machine lacks what the setting changes (e.g. no cpufreq): nothing was written.
    #[error("{0}")]
    Unavailable(String),
    /// A file to change could not be read for its old value: nothing was written.
    #[error("cannot read {}: {source}", shown(path))]
    Read {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// A file to change holds something that is not one of the setting's values: nothing
    /// was written.
    #[error(
        "{} holds {text:?}, which is not a value of {setting} (see `xrunlab doctor`'s findings)",
        shown(path)
    )]
    Unexpected {
        /// The file.
        path: PathBuf,
        /// The setting's name.
        setting: &'static str,
        /// What it holds, trimmed.
        text: String,
    },
    /// An earlier apply left settings to undo: nothing was written.
    #[error(
        "an earlier `doctor --apply {setting}` (pid {pid}) left settings to undo: run `xrunlab \
         doctor --undo` first (or wait for it to exit)"
    )]
    PendingUndo {
        /// The setting it applied.
        setting: String,
        /// Its process.
        pid: i32,
    },
    /// The undo journal could not be read or written: nothing was written.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// A write failed; every file written before it was restored.
    #[error(transparent)]
    Write(#[from] WriteFailed),
}

/// The files a setting writes, with the value it writes to each.
fn targets(setting: Setting, roots: &Roots) -> Result<Vec<(PathBuf, String)>, ApplyError> {
    match setting {
        Setting::Governor => {
            let files: Vec<(PathBuf, String)> = online_cpus(&roots.sys)
                .into_iter()
                .map(|cpu| {
                    roots.sys(&format!(
                        "devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor"
                    ))
                })
                .filter(|p| p.exists())
                .map(|p| (p, "performance".to_owned()))
                .collect();
            if files.is_empty() {
                return Err(ApplyError::Unavailable(format!(
                    "cannot apply governor: no CPU has cpufreq on this machine ({} is missing), \
                     so its frequency is not Linux's to set (a virtual machine, or firmware control)",
                    shown(&roots.sys("devices/system/cpu/cpu*/cpufreq/scaling_governor"))
                )));
            }
            Ok(files)
        }
        Setting::RtRuntime => {
            let p = roots.proc("sys/kernel/sched_rt_runtime_us");
            if !p.exists() {
                return Err(ApplyError::Unavailable(format!(
                    "cannot apply rt-runtime: {} is missing",
                    shown(&p)
                )));
            }
            Ok(vec![(p, "-1".to_owned())])
        }
    }
}

/// Applies `setting` under `roots`. Before any file changes, the undo journal (see
/// [`crate::journal`]) records every old value, so a `kill -9` leaves what to restore. On a
/// failed write, restores what was already written.
pub fn apply(setting: Setting, roots: &Roots) -> Result<AppliedSetting, ApplyError> {
    let targets = targets(setting, roots)?;
    let mut planned = Vec::new();
    let root = setting.root(roots);
    for (path, new) in targets {
        let old = crate::beneath::read(root, &path)
            .map_err(|source| ApplyError::Read {
                path: path.clone(),
                source,
            })?
            .trim()
            .to_owned();
        if !setting.value_ok(&old) {
            return Err(ApplyError::Unexpected {
                path,
                setting: setting.name(),
                text: old,
            });
        }
        planned.push(Change { path, old, new });
    }
    // A journal still to undo (or a doctor applying right now) comes first: writing ours over
    // it would lose the only record of the values to restore.
    if let Some(crate::journal::Found::OwnerRunning(j) | crate::journal::Found::Orphaned(j)) =
        crate::journal::find(roots)?
    {
        return Err(ApplyError::PendingUndo {
            setting: j.setting,
            pid: j.pid,
        });
    }
    crate::journal::Journal::for_this_process(setting.name(), planned.clone()).write(roots)?;
    let mut applied = AppliedSetting {
        setting,
        changes: Vec::new(),
        kept: false,
        roots: roots.clone(),
    };
    for c in planned {
        write(root, &c.path, &c.new)?;
        applied.changes.push(c);
    }
    Ok(applied)
}

impl AppliedSetting {
    /// The setting.
    pub fn setting(&self) -> Setting {
        self.setting
    }

    /// The files changed.
    pub fn changes(&self) -> &[Change] {
        &self.changes
    }

    /// Shell commands that restore the old values by hand.
    pub fn undo_commands(&self) -> Vec<String> {
        self.changes
            .iter()
            .map(|c| format!("echo {} | sudo tee {}", c.old, shown(&c.path)))
            .collect()
    }

    /// Leaves the setting in force when this guard goes away.
    pub fn keep(mut self) -> Vec<Change> {
        self.kept = true;
        // Kept on purpose, with the undo commands printed: not something to undo later.
        let _ = crate::journal::remove(&self.roots);
        std::mem::take(&mut self.changes)
    }

    /// Writes every old value back; the errors of the writes that failed.
    pub fn undo(mut self) -> Result<Vec<Change>, UndoError> {
        self.restore()
    }

    fn restore(&mut self) -> Result<Vec<Change>, UndoError> {
        let changes = std::mem::take(&mut self.changes);
        let errors = crate::change::restore(self.setting, &self.roots, &changes);
        if errors.is_empty() {
            crate::journal::remove(&self.roots)?;
            Ok(changes)
        } else {
            Err(UndoError::Writes(errors))
        }
    }
}

impl Drop for AppliedSetting {
    fn drop(&mut self) {
        if !self.kept {
            // Nothing to report to from a drop; undo() is the path that reports errors.
            let _ = self.restore();
        }
    }
}
