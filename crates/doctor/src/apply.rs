//! Applying one named, reversible system setting: write new values to sysfs/procfs files,
//! remember the old ones, and restore them when the guard is undone or dropped. Used on the
//! main thread; the binary undoes on exit and on SIGINT/SIGTERM/SIGHUP.

use crate::journal::{JournalError, UndoError};
use crate::roots::{shown, Roots};
use serde::Serialize;
use std::path::{Path, PathBuf};
use xrunlab_sys::cpu::online_cpus;

/// The settings `--apply` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Setting {
    /// The cpufreq governor "performance" on every CPU that has cpufreq.
    Governor,
    /// `kernel.sched_rt_runtime_us = -1`: RT throttling off.
    RtRuntime,
}

impl Setting {
    /// Every setting, with its name on the command line.
    pub const ALL: [(Setting, &'static str); 2] = [
        (Setting::Governor, "governor"),
        (Setting::RtRuntime, "rt-runtime"),
    ];

    /// Parses a command-line name; `Err` lists the allowed names.
    pub fn from_name(name: &str) -> Result<Setting, UnknownSetting> {
        Setting::ALL
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(s, _)| *s)
            .ok_or_else(|| UnknownSetting(name.to_owned()))
    }

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        Setting::ALL
            .iter()
            .find(|(s, _)| *s == self)
            .map_or("?", |(_, n)| n)
    }

    /// What the setting does, for the message printed when it is applied.
    pub fn describe(self) -> &'static str {
        match self {
            Setting::Governor => {
                "cpufreq governor \"performance\" on every CPU with cpufreq: CPUs stay at their highest frequency"
            }
            Setting::RtRuntime => {
                "kernel.sched_rt_runtime_us = -1: RT throttling off, so real-time threads may use every \
                 CPU cycle (a runaway one can then hang its CPU: that is why this is undone on exit)"
            }
        }
    }

    /// The tree its files live in (sysfs or procfs under `roots`): nothing it reads or writes
    /// may lead out of it.
    pub fn root(self, roots: &Roots) -> &Path {
        match self {
            Setting::Governor => &roots.sys,
            Setting::RtRuntime => &roots.proc,
        }
    }

    /// Whether `path` is one of the files this setting writes under `roots`: the only files
    /// an undo journal may name.
    pub fn owns(self, roots: &Roots, path: &Path) -> bool {
        match self {
            Setting::Governor => path
                .strip_prefix(roots.sys("devices/system/cpu"))
                .ok()
                .and_then(|rest| {
                    let mut parts = rest.iter();
                    let cpu = parts.next()?.to_str()?.strip_prefix("cpu")?;
                    let known = !cpu.is_empty() && cpu.bytes().all(|b| b.is_ascii_digit());
                    let tail: Vec<_> = parts.collect();
                    Some(known && tail == ["cpufreq", "scaling_governor"])
                })
                .unwrap_or(false),
            Setting::RtRuntime => path == roots.proc("sys/kernel/sched_rt_runtime_us"),
        }
    }

    /// Whether `value` can be one of this setting's values: a governor's name, or a whole
    /// number of microseconds (-1 for unlimited). What a journal or a file holds is checked
    /// before it is written anywhere or shown in a command to paste.
    pub fn value_ok(self, value: &str) -> bool {
        match self {
            Setting::Governor => {
                !value.is_empty()
                    && value.len() <= 64
                    && value
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            }
            Setting::RtRuntime => value.parse::<i64>().is_ok_and(|v| v >= -1),
        }
    }
}

pub use xrunlab_results::doctor::Change;

/// A setting in force. [`Applied::undo`] (or dropping it) writes the old values back, unless
/// [`Applied::keep`] was called.
#[derive(Debug)]
pub struct Applied {
    setting: Setting,
    changes: Vec<Change>,
    kept: bool,
    /// Where the undo journal was written (removed once the values are back, or kept).
    roots: Roots,
}

/// A setting name that is not one of [`Setting::ALL`] (a usage error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown setting {0:?} (allowed: {allowed})", allowed = Setting::ALL.map(|(_, n)| n).join(", "))]
pub struct UnknownSetting(pub String);

/// One file that could not be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot write {value:?} to {}: {source}", shown(path))]
pub struct WriteFailed {
    /// The file.
    pub path: PathBuf,
    /// The value that was to be written.
    pub value: String,
    /// What the operating system said.
    #[source]
    pub source: std::io::Error,
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

/// Writes `value` and a newline to `path`, which must lie beneath `root` (see
/// [`crate::beneath`]).
pub(crate) fn write(root: &Path, path: &Path, value: &str) -> Result<(), WriteFailed> {
    crate::beneath::write(root, path, &format!("{value}\n")).map_err(|source| WriteFailed {
        path: path.to_path_buf(),
        value: value.to_owned(),
        source,
    })
}

/// Applies `setting` under `roots`. Before any file changes, the undo journal (see
/// [`crate::journal`]) records every old value, so a `kill -9` leaves what to restore. On a
/// failed write, restores what was already written.
pub fn apply(setting: Setting, roots: &Roots) -> Result<Applied, ApplyError> {
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
    let mut applied = Applied {
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

impl Applied {
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
        let root = self.setting.root(&self.roots);
        let errors: Vec<WriteFailed> = changes
            .iter()
            .rev()
            .filter_map(|c| write(root, &c.path, &c.old).err())
            .collect();
        if errors.is_empty() {
            crate::journal::remove(&self.roots)?;
            Ok(changes)
        } else {
            Err(UndoError::Writes(errors))
        }
    }
}

impl Drop for Applied {
    fn drop(&mut self) {
        if !self.kept {
            // Nothing to report to from a drop; undo() is the path that reports errors.
            let _ = self.restore();
        }
    }
}
