//! The running kernel's build configuration: `/boot/config-RELEASE` (Debian, Fedora, Ubuntu)
//! or `/proc/config.gz` (CONFIG_IKCONFIG_PROC). Read once on the main thread.

use crate::roots::{read, ReadError, Roots};
use std::collections::BTreeMap;
use std::io::Read;

/// The most /proc/config.gz may inflate to: a kernel's configuration is a few hundred
/// kilobytes.
pub const MAX_CONFIG_BYTES: u64 = 16 << 20;

/// No kernel configuration could be read: why, for every place looked at.
#[derive(Debug, thiserror::Error)]
#[error("{}", self.tried.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct KconfigError {
    /// Each place looked at, in order, and why it did not do.
    pub tried: Vec<ReadError>,
}

/// The `CONFIG_*` options of the running kernel and the file they came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelConfig {
    /// The file read.
    pub source: String,
    options: BTreeMap<String, String>,
}

impl KernelConfig {
    /// Finds and reads the configuration of the kernel whose release is in
    /// `/proc/sys/kernel/osrelease`. `Err` lists every place looked at.
    pub fn load(roots: &Roots) -> Result<KernelConfig, KconfigError> {
        let mut tried = Vec::new();
        match read(&roots.proc("sys/kernel/osrelease")) {
            Ok(release) => {
                let path = roots.fs(&format!("boot/config-{}", release.trim()));
                match read(&path) {
                    Ok(text) => return Ok(KernelConfig::parse(&path.display().to_string(), &text)),
                    Err(e) => tried.push(e),
                }
            }
            Err(e) => tried.push(e),
        }
        let gz = roots.proc("config.gz");
        match std::fs::File::open(&gz) {
            Ok(file) => {
                let mut text = String::new();
                // Bounded: a few kilobytes of gzip can inflate to gigabytes.
                match flate2::read::GzDecoder::new(file)
                    .take(MAX_CONFIG_BYTES + 1)
                    .read_to_string(&mut text)
                {
                    Ok(n) if n as u64 > MAX_CONFIG_BYTES => tried.push(ReadError::Decompress {
                        path: gz,
                        source: std::io::Error::other(format!(
                            "inflates past {} MiB, more than a kernel configuration holds",
                            MAX_CONFIG_BYTES >> 20
                        )),
                    }),
                    Ok(_) => return Ok(KernelConfig::parse(&gz.display().to_string(), &text)),
                    Err(source) => tried.push(ReadError::Decompress { path: gz, source }),
                }
            }
            Err(e) => tried.push(ReadError::io(&gz, e)),
        }
        Err(KconfigError { tried })
    }

    /// Parses config text: `CONFIG_X=value` lines and `# CONFIG_X is not set` (stored as "n").
    pub fn parse(source: &str, text: &str) -> KernelConfig {
        let mut options = BTreeMap::new();
        for line in text.lines() {
            let line = line.trim();
            if let Some(rest) = line.strip_prefix("# ") {
                if let Some(name) = rest.strip_suffix(" is not set") {
                    options.insert(name.to_owned(), "n".to_owned());
                }
            } else if let Some((name, value)) = line.split_once('=') {
                if name.starts_with("CONFIG_") {
                    options.insert(name.to_owned(), value.trim_matches('"').to_owned());
                }
            }
        }
        KernelConfig {
            source: source.to_owned(),
            options,
        }
    }

    /// The value of an option ("y", "m", "250"...); `None` when the file does not mention it.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.options.get(name).map(String::as_str)
    }

    /// Whether a bool option is built in (`=y`).
    pub fn enabled(&self, name: &str) -> bool {
        self.get(name) == Some("y")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_values_and_unset_options() {
        let c = KernelConfig::parse(
            "x",
            "# comment\nCONFIG_HZ=250\nCONFIG_PREEMPT_RT=y\n# CONFIG_NO_HZ_FULL is not set\nCONFIG_LOCALVERSION=\"-rt\"\n",
        );
        assert_eq!(c.get("CONFIG_HZ"), Some("250"));
        assert!(c.enabled("CONFIG_PREEMPT_RT"));
        assert_eq!(c.get("CONFIG_NO_HZ_FULL"), Some("n"));
        assert!(!c.enabled("CONFIG_NO_HZ_FULL"));
        assert_eq!(c.get("CONFIG_LOCALVERSION"), Some("-rt"));
        assert_eq!(c.get("CONFIG_MISSING"), None);
    }
}
