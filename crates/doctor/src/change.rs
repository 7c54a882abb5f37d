//! One reversible change of a system setting, the leaf that `--apply` and the undo journal
//! share: the settings doctor knows (where their files are, which values they take), writing a
//! value beneath its tree, and the one restore loop. Used on the main thread.

use crate::roots::{shown, Roots};
use serde::Serialize;
use std::path::{Path, PathBuf};

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

/// Writes `value` and a newline to `path`, which must lie beneath `root` (see
/// [`crate::beneath`]).
pub(crate) fn write(root: &Path, path: &Path, value: &str) -> Result<(), WriteFailed> {
    crate::beneath::write(root, path, &format!("{value}\n")).map_err(|source| WriteFailed {
        path: path.to_path_buf(),
        value: value.to_owned(),
        source,
    })
}

/// Writes every change's old value back beneath `setting`'s tree, the last change first (so a
/// file changed twice ends with its first value); the writes that failed, the others done.
pub(crate) fn restore(setting: Setting, roots: &Roots, changes: &[Change]) -> Vec<WriteFailed> {
    let root = setting.root(roots);
    changes
        .iter()
        .rev()
        .filter_map(|c| write(root, &c.path, &c.old).err())
        .collect()
}
