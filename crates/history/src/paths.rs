//! Where the history lives by default: the service's state directory, `/var/lib/xrunlab` for
//! root, or the user's XDG state directory; read on the main thread.

use std::path::{Path, PathBuf};

/// The file name of the history in its directory.
pub const FILE_NAME: &str = "history.db";

/// The default history file for this process: `$STATE_DIRECTORY/history.db` under systemd's
/// `StateDirectory=` (the recorder's unit), `/var/lib/xrunlab/history.db` for root,
/// otherwise `$XDG_STATE_HOME/xrunlab/history.db` (or `~/.local/state/xrunlab/history.db`).
/// `None` when none of these can be found (no `HOME` either).
pub fn default_path() -> Option<PathBuf> {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    choose(
        env("STATE_DIRECTORY").as_deref().map(Path::new),
        root,
        env("XDG_STATE_HOME").as_deref().map(Path::new),
        env("HOME").as_deref().map(Path::new),
    )
}

fn choose(
    state_directory: Option<&Path>,
    root: bool,
    xdg_state: Option<&Path>,
    home: Option<&Path>,
) -> Option<PathBuf> {
    if let Some(dirs) = state_directory {
        // systemd gives a colon-separated list when the unit names several; ours names one.
        let first = dirs
            .to_str()
            .and_then(|s| s.split(':').next())
            .map(Path::new);
        if let Some(dir) = first.filter(|d| d.is_absolute()) {
            return Some(dir.join(FILE_NAME));
        }
    }
    if root {
        return Some(Path::new("/var/lib/xrunlab").join(FILE_NAME));
    }
    // The XDG spec: a relative XDG_STATE_HOME is invalid and ignored.
    let base = match xdg_state.filter(|p| p.is_absolute()) {
        Some(dir) => dir.to_path_buf(),
        None => home?.join(".local/state"),
    };
    Some(base.join("xrunlab").join(FILE_NAME))
}

#[cfg(test)]
mod tests {
    use super::choose;
    use std::path::Path;

    #[test]
    fn the_default_follows_systemd_then_root_then_xdg() {
        fn p(s: &str) -> Option<&Path> {
            Some(Path::new(s))
        }
        assert_eq!(
            choose(p("/var/lib/xrunlab/ada"), false, p("/x"), p("/home/ada")).unwrap(),
            Path::new("/var/lib/xrunlab/ada/history.db")
        );
        assert_eq!(
            choose(None, true, p("/x"), p("/root")).unwrap(),
            Path::new("/var/lib/xrunlab/history.db")
        );
        assert_eq!(
            choose(None, false, p("/st"), p("/home/ada")).unwrap(),
            Path::new("/st/xrunlab/history.db")
        );
        assert_eq!(
            choose(None, false, p("rel"), p("/home/ada")).unwrap(),
            Path::new("/home/ada/.local/state/xrunlab/history.db")
        );
        assert_eq!(choose(None, false, None, None), None);
    }
}
