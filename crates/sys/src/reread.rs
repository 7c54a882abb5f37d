//! A procfs or sysfs file kept open and read again from its start, for counters sampled many
//! times a second for hours (the tracer's steal and idle counters, watch's page-fault samples).
//! Called by those samplers' threads, never on an audio thread.
//!
//! Why: opening is most of such a read. In `record` on PipeWire 1.4.2 (128 frames, an idle
//! graph), `perf` put the path walks of `open` (`/proc/stat`, each CPU's cpuidle `usage`,
//! `/proc/PID/task/TID/stat`) at about a fifth of the recorder's CPU; the kernel makes the text
//! again on every read from offset 0, so a kept descriptor reads the current value.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// The most a re-read file may hold: `/proc/stat` on a machine with many CPUs and interrupts
/// is well under this; anything longer is not the counter file it was opened as.
const MAX_BYTES: u64 = 4 << 20;

/// One file, opened on first use and read from its start each time.
#[derive(Debug)]
pub struct Reread {
    path: PathBuf,
    file: Option<File>,
    buf: Vec<u8>,
}

impl Reread {
    /// A reader of `path`; nothing is opened until the first [`Reread::read`].
    pub fn new(path: impl Into<PathBuf>) -> Reread {
        Reread {
            path: path.into(),
            file: None,
            buf: Vec::new(),
        }
    }

    /// The file this reads.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's whole text now. A file that could not be opened is tried again on the next
    /// call (it may appear later); one whose read fails (a thread that exited) is closed, and
    /// the error names it.
    pub fn read(&mut self) -> io::Result<&str> {
        let named = |e: io::Error, path: &Path| {
            io::Error::new(e.kind(), format!("{}: {e}", path.display()))
        };
        if self.file.is_none() {
            self.file = Some(File::open(&self.path).map_err(|e| named(e, &self.path))?);
        }
        let file = self.file.as_mut().expect("opened above");
        self.buf.clear();
        let read = file
            .seek(SeekFrom::Start(0))
            .and_then(|_| file.take(MAX_BYTES + 1).read_to_end(&mut self.buf));
        match read {
            Err(e) => {
                self.file = None;
                Err(named(e, &self.path))
            }
            Ok(n) if n as u64 > MAX_BYTES => {
                self.file = None;
                Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{}: longer than {MAX_BYTES} bytes", self.path.display()),
                ))
            }
            Ok(_) => std::str::from_utf8(&self.buf).map_err(|_| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{}: not UTF-8", self.path.display()),
                )
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Fixture;

    #[test]
    fn reads_the_current_text_through_one_descriptor_and_reopens_after_a_failure() {
        let f = Fixture::new("reread");
        let mut r = Reread::new(f.path().join("usage"));
        let missing = r.read().expect_err("no file yet");
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
        assert!(missing.to_string().contains("usage"), "{missing}");

        f.write("usage", "100\n");
        assert_eq!(r.read().unwrap(), "100\n", "opened once it exists");
        // Rewritten in place (as the kernel's counters are): the kept descriptor sees it.
        f.write("usage", "104\n");
        assert_eq!(r.read().unwrap(), "104\n");
        f.write("usage", "7\n");
        assert_eq!(
            r.read().unwrap(),
            "7\n",
            "a shorter text leaves nothing of the longer"
        );
    }

    #[test]
    fn a_live_proc_file_gives_a_new_value_at_each_read() {
        let mut r = Reread::new("/proc/thread-self/schedstat");
        // The first field: this thread's time on a CPU, ns.
        let mut ran_ns = || -> u64 {
            let text = r.read().unwrap();
            text.split_whitespace().next().unwrap().parse().unwrap()
        };
        let first = ran_ns();
        let t = std::time::Instant::now();
        while t.elapsed() < std::time::Duration::from_millis(20) {}
        let second = ran_ns();
        assert!(
            second > first,
            "this thread ran 20 ms between the reads: {first} then {second} ns"
        );
    }

    #[test]
    fn a_file_over_the_limit_is_refused_not_read_forever() {
        let mut r = Reread::new("/dev/zero");
        let e = r.read().expect_err("/dev/zero never ends");
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("longer than"), "{e}");
    }
}
