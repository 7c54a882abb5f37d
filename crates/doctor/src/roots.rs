//! Where the doctor reads the machine from: procfs, sysfs and the rest of the filesystem
//! (/etc, /boot, /usr, /dev) as three roots, so fixture trees can stand in for a machine.
//! Used on the main thread.

use std::path::Path;

pub use xrunlab_results::doctor::Roots;

/// Reads a text file for a check. `Err` is the reason it could not be read, in words that
/// name the file ("/proc/cmdline is missing", "... is unreadable: permission denied"), ready
/// to become an "unknown" finding.
pub fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!("{} is missing", path.display()),
        _ => format!("{} is unreadable: {}", path.display(), io_words(&e)),
    })
}

/// Like [`read`], trimmed, and `Ok(None)` when the file does not exist (absent attributes
/// are normal: no cpufreq, no RAPL).
pub fn read_optional(path: &Path) -> Result<Option<String>, String> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(Some(s.trim().to_owned())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!(
            "{} is unreadable: {}",
            path.display(),
            io_words(&e)
        )),
    }
}

/// Reads and parses a one-value file; `Err` says what was wrong (missing, unreadable, or
/// "... holds \"x\", not a number").
pub fn read_value<T: std::str::FromStr>(path: &Path) -> Result<T, String> {
    let text = read(path)?;
    let t = text.trim();
    t.parse()
        .map_err(|_| format!("{} holds {t:?}, which does not parse", path.display()))
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
