//! Gives back the JACK2 server's shared segments that libjack locks into every client. libjack
//! `mlock`s each segment it attaches (the graph manager is about 100 MB: every port's buffer of
//! the largest size), so that a process callback never page-faults on it; the passive watch
//! client has no process callback, reads a few pages of it, and would otherwise carry the whole
//! segment in its resident set for as long as it runs (a month, for `record`). Runs on the
//! thread that opens the watch client.

use std::path::Path;

/// How JACK2 names its POSIX shared memory (`jack-UID-N`, `jack-shm-registry`) under /dev/shm.
const JACK_SHM_PREFIX: &str = "/dev/shm/jack-";

/// The mappings of JACK2's shared segments in `maps` (a `/proc/PID/maps` text): start, length.
pub(crate) fn jack_segments(maps: &str) -> Vec<(usize, usize)> {
    maps.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let range = fields.next()?;
            let path = fields.nth(4)?;
            if !path.starts_with(JACK_SHM_PREFIX) {
                return None;
            }
            let (from, to) = range.split_once('-')?;
            let from = usize::from_str_radix(from, 16).ok()?;
            let to = usize::from_str_radix(to, 16).ok()?;
            (to > from).then_some((from, to - from))
        })
        .collect()
}

/// Unlocks JACK2's segments in this process and drops their pages from its page tables: the
/// segment stays whole in shared memory (the server keeps it locked), and the few pages this
/// client reads come back on access. Returns the bytes released; a failure only leaves the
/// segment resident, so it is not an error.
pub(crate) fn release_segments() -> usize {
    let Ok(maps) = std::fs::read_to_string(Path::new("/proc/self/maps")) else {
        return 0;
    };
    let mut released = 0;
    for (start, len) in jack_segments(&maps) {
        let addr = start as *mut libc::c_void;
        // SAFETY: `start..start + len` is a whole mapping of this process, as the kernel listed
        // it; munlock changes no contents. MADV_DONTNEED on a shared mapping only unmaps its
        // pages here: later reads fault them back from the shared segment, which keeps its
        // contents (unlike a private mapping, nothing is zeroed).
        let ok = unsafe {
            libc::munlock(addr, len) == 0 && libc::madvise(addr, len, libc::MADV_DONTNEED) == 0
        };
        if ok {
            released += len;
        }
    }
    released
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_jacks_shared_segments_are_picked() {
        let maps = "\
7f0000000000-7f0006666000 rw-s 00000000 00:19 12   /dev/shm/jack-0-0
7f0006666000-7f0006667000 rw-s 00000000 00:19 13   /dev/shm/jack-shm-registry
7f0007000000-7f0007100000 rw-s 00000000 00:10 1038 anon_inode:[perf_event]
7f0008000000-7f0008001000 rw-s 00000000 00:19 14   /dev/shm/pipewire-memfd (deleted)
55d000000000-55d000001000 r--p 00000000 08:01 99   /usr/bin/xrunlab
7f0009000000-7f0009001000 rw-p 00000000 00:00 0
";
        assert_eq!(
            jack_segments(maps),
            [(0x7f00_0000_0000, 0x666_6000), (0x7f00_0666_6000, 0x1000)]
        );
    }
}
