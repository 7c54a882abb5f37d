//! Per-thread telemetry from `/proc/<pid>/task/<tid>/{stat,status,schedstat,sched}` and a process's
//! resident memory from `/proc/<pid>/status`. Read by the
//! non-real-time collector thread; it allocates and does file I/O, so never call it on the
//! audio path.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io;
use std::path::Path;

/// Counters for one thread, as the kernel reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ThreadStat {
    /// CPU the thread last ran on (stat field 39).
    pub last_cpu: Option<usize>,
    /// User CPU time in ns (stat field 14; clock-tick resolution).
    pub utime_ns: u64,
    /// System CPU time in ns (stat field 15; clock-tick resolution).
    pub stime_ns: u64,
    /// Times the thread blocked (status `voluntary_ctxt_switches`).
    pub voluntary_switches: u64,
    /// Times the thread was preempted (status `nonvoluntary_ctxt_switches`).
    pub involuntary_switches: u64,
    /// Time on a CPU in ns (schedstat field 1; 0 without schedstat).
    pub run_ns: u64,
    /// Time runnable but waiting for a CPU in ns (schedstat field 2; 0 without schedstat).
    pub runqueue_wait_ns: u64,
    /// Number of times it got a CPU (schedstat field 3; 0 without schedstat).
    pub timeslices: u64,
    /// Whether schedstat existed, i.e. whether the three fields above are real zeros.
    pub has_schedstat: bool,
    /// Migrations between CPUs (`se.nr_migrations` in `sched`, only with CONFIG_SCHED_DEBUG).
    pub migrations: Option<u64>,
    /// Page faults served without I/O (stat field 10).
    pub minor_faults: u64,
    /// Page faults that needed I/O (stat field 12).
    pub major_faults: u64,
}

fn invalid(path: &Path, what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{}: {what}", path.display()),
    )
}

/// The text of a procfs file; an error keeps its kind (`NotFound` for a thread that exited)
/// and names the file.
fn read_named(path: &Path) -> io::Result<String> {
    std::fs::read_to_string(path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

/// Reads the counters of thread `tid` of process `pid` from procfs mounted at `proc_root`
/// (normally "/proc"). A thread that has exited gives `NotFound`; a file that does not parse
/// gives `InvalidData` naming the file. `schedstat` and `sched` are optional.
pub fn read_thread_stat(proc_root: &Path, pid: i32, tid: i32) -> io::Result<ThreadStat> {
    let dir = proc_root.join(format!("{pid}/task/{tid}"));
    let mut out = ThreadStat::default();

    let stat_path = dir.join("stat");
    let stat = read_named(&stat_path)?;
    let (utime_ticks, stime_ticks, last_cpu, (minor, major)) =
        parse_stat(&stat).ok_or_else(|| invalid(&stat_path, "unexpected stat line format"))?;
    out.minor_faults = minor;
    out.major_faults = major;
    let tck = clock_ticks_per_second();
    out.utime_ns = ticks_to_ns(utime_ticks, tck);
    out.stime_ns = ticks_to_ns(stime_ticks, tck);
    out.last_cpu = last_cpu;

    let status_path = dir.join("status");
    let status = read_named(&status_path)?;
    out.voluntary_switches = status_field(&status, "voluntary_ctxt_switches").ok_or_else(|| {
        invalid(
            &status_path,
            "voluntary_ctxt_switches missing or not a number",
        )
    })?;
    out.involuntary_switches =
        status_field(&status, "nonvoluntary_ctxt_switches").ok_or_else(|| {
            invalid(
                &status_path,
                "nonvoluntary_ctxt_switches missing or not a number",
            )
        })?;

    let schedstat_path = dir.join("schedstat");
    match read_named(&schedstat_path) {
        Ok(s) => {
            let [run, wait, slices] = parse_schedstat(&s)
                .ok_or_else(|| invalid(&schedstat_path, "expected three numbers"))?;
            out.run_ns = run;
            out.runqueue_wait_ns = wait;
            out.timeslices = slices;
            out.has_schedstat = true;
        }
        // Kernels without CONFIG_SCHEDSTATS lack the file; that is not an error.
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }

    out.migrations = std::fs::read_to_string(dir.join("sched"))
        .ok()
        .and_then(|s| sched_field(&s, "se.nr_migrations"));
    Ok(out)
}

/// Resident memory of process `pid` (`"self"` for this one) in bytes: `VmRSS` of
/// `<proc_root>/<pid>/status`. `InvalidData` names the file when the line is missing or not
/// "N kB" (kernel threads have no VmRSS).
pub fn read_rss_bytes(proc_root: &Path, pid: &str) -> io::Result<u64> {
    let path = proc_root.join(pid).join("status");
    let status = read_named(&path)?;
    status_kib(&status, "VmRSS")
        .map(|kib| kib.saturating_mul(1024))
        .ok_or_else(|| invalid(&path, "VmRSS missing or not \"N kB\""))
}

/// A "Name:\t  N kB" line of /proc/.../status as a number of KiB.
fn status_kib(status: &str, name: &str) -> Option<u64> {
    status.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        (key == name).then(|| value.trim().strip_suffix(" kB")?.trim().parse().ok())?
    })
}

/// (utime ticks, stime ticks, last cpu) from a stat line. The comm field may contain spaces
/// and parentheses, so fields are counted after the last ')'.
/// utime and stime in ticks, the last CPU, and the minor and major page faults.
type StatFields = (u64, u64, Option<usize>, (u64, u64));

fn parse_stat(line: &str) -> Option<StatFields> {
    let after_comm = &line[line.rfind(')')? + 1..];
    // After the comm, the first field is field 3 (state).
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3).copied();
    let utime = field(14)?.parse().ok()?;
    let stime = field(15)?.parse().ok()?;
    // Old kernels end the line before field 39; that only loses the CPU.
    let cpu = field(39).and_then(|f| f.parse().ok());
    let faults = (field(10)?.parse().ok()?, field(12)?.parse().ok()?);
    Some((utime, stime, cpu, faults))
}

/// A "Name:\tvalue" line of /proc/.../status as a number.
fn status_field(status: &str, name: &str) -> Option<u64> {
    status.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        (key == name).then(|| value.trim().parse().ok())?
    })
}

/// A "name   :   value" line of /proc/.../sched as a number.
fn sched_field(sched: &str, name: &str) -> Option<u64> {
    sched.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        (key.trim() == name).then(|| value.trim().parse().ok())?
    })
}

fn parse_schedstat(s: &str) -> Option<[u64; 3]> {
    let mut it = s.split_whitespace().map(|f| f.parse::<u64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}

/// USER_HZ, the unit of stat's utime/stime (100 on every common configuration).
pub(crate) fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf only reads a configuration value.
    let tck = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(tck).ok().filter(|&t| t > 0).unwrap_or(100)
}

pub(crate) fn ticks_to_ns(ticks: u64, ticks_per_second: u64) -> u64 {
    let ns = u128::from(ticks) * 1_000_000_000 / u128::from(ticks_per_second.max(1));
    u64::try_from(ns).unwrap_or(u64::MAX)
}

/// The minor and major page faults of thread `tid` of process `pid` so far (stat fields 10 and
/// 12): a cheap read of one file, for sampling often.
pub fn read_thread_faults(proc_root: &Path, pid: i32, tid: i32) -> io::Result<(u64, u64)> {
    let mut file = thread_faults_file(proc_root, pid, tid);
    reread_thread_faults(&mut file)
}

/// The file [`reread_thread_faults`] reads for thread `tid` of process `pid`, kept open by a
/// caller that samples it often.
pub fn thread_faults_file(proc_root: &Path, pid: i32, tid: i32) -> crate::Reread {
    crate::Reread::new(proc_root.join(format!("{pid}/task/{tid}/stat")))
}

/// [`read_thread_faults`] through a kept descriptor ([`thread_faults_file`]).
pub fn reread_thread_faults(file: &mut crate::Reread) -> io::Result<(u64, u64)> {
    let parsed = parse_stat(file.read()?);
    let (_, _, _, faults) =
        parsed.ok_or_else(|| invalid(file.path(), "unexpected stat line format"))?;
    Ok(faults)
}

/// utime + stime of a whole process, in clock ticks, from a `/proc/<pid>/stat` file.
pub(crate) fn process_cpu_ticks(stat_path: &Path) -> io::Result<u64> {
    let stat = std::fs::read_to_string(stat_path)?;
    let (utime, stime, _, _) =
        parse_stat(&stat).ok_or_else(|| invalid(stat_path, "unexpected stat line format"))?;
    Ok(utime.saturating_add(stime))
}

/// Steal ticks per CPU from `/proc/stat` (the 8th number of each `cpuN` line).
pub fn read_steal(proc_root: &Path) -> BTreeMap<u16, u64> {
    std::fs::read_to_string(proc_root.join("stat"))
        .map(|s| parse_steal(&s))
        .unwrap_or_default()
}

/// Steal ticks per CPU in the text of `/proc/stat` (for a caller that keeps it open:
/// [`crate::Reread`]).
pub fn parse_steal(stat: &str) -> BTreeMap<u16, u64> {
    stat.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let cpu: u16 = f.next()?.strip_prefix("cpu")?.parse().ok()?;
            let steal = f.nth(7)?.parse().ok()?;
            Some((cpu, steal))
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testutil::Fixture;

    /// A stat line whose comm contains spaces and parentheses; utime/stime/cpu as given.
    pub(crate) fn stat_line(utime: u64, stime: u64, cpu: usize) -> String {
        let mut fields = vec!["0".to_owned(); 52 - 2];
        fields[0] = "S".to_owned(); // field 3
        fields[14 - 3] = utime.to_string();
        fields[15 - 3] = stime.to_string();
        fields[39 - 3] = cpu.to_string();
        fields[10 - 3] = "311".to_owned();
        fields[12 - 3] = "2".to_owned();
        format!("1234 (my (odd) thread) {}\n", fields.join(" "))
    }

    const STATUS: &str = "Name:\tmy (odd) thread\nState:\tS (sleeping)\n\
        voluntary_ctxt_switches:\t150\nnonvoluntary_ctxt_switches:\t7\n";

    const SCHED: &str = "my (odd) thread (1235, #threads: 2)\n\
        -------------------------------------------------------------------\n\
        se.exec_start                                :       3004819.740515\n\
        se.nr_migrations                             :                   42\n\
        nr_switches                                  :                  157\n";

    #[test]
    fn parses_fixture_thread() {
        let f = Fixture::new("proc");
        let tck = clock_ticks_per_second();
        f.write("1234/task/1235/stat", &stat_line(3 * tck, tck / 2, 1))
            .write("1234/task/1235/status", STATUS)
            .write("1234/task/1235/schedstat", "123 456 7\n")
            .write("1234/task/1235/sched", SCHED);
        let s = read_thread_stat(f.path(), 1234, 1235).unwrap();
        assert_eq!(
            s,
            ThreadStat {
                last_cpu: Some(1),
                utime_ns: 3_000_000_000,
                stime_ns: 500_000_000,
                voluntary_switches: 150,
                involuntary_switches: 7,
                run_ns: 123,
                runqueue_wait_ns: 456,
                timeslices: 7,
                has_schedstat: true,
                migrations: Some(42),
                minor_faults: 311,
                major_faults: 2,
            }
        );
    }

    #[test]
    fn a_threads_page_faults_are_read_from_its_stat_alone() {
        let f = Fixture::new("proc-faults");
        f.write("7/task/8/stat", &stat_line(0, 0, 0));
        assert_eq!(read_thread_faults(f.path(), 7, 8).unwrap(), (311, 2));
        assert!(read_thread_faults(f.path(), 7, 9).is_err(), "a gone thread");
    }

    #[test]
    fn optional_files_may_be_missing() {
        let f = Fixture::new("proc-min");
        f.write("1/task/1/stat", &stat_line(0, 0, 0))
            .write("1/task/1/status", STATUS);
        let s = read_thread_stat(f.path(), 1, 1).unwrap();
        assert!(!s.has_schedstat);
        assert_eq!((s.run_ns, s.runqueue_wait_ns, s.timeslices), (0, 0, 0));
        assert_eq!(s.migrations, None);
        assert_eq!(s.voluntary_switches, 150);
    }

    #[test]
    fn bad_data_is_an_error_not_a_panic() {
        let f = Fixture::new("proc-bad");
        assert_eq!(
            read_thread_stat(f.path(), 9, 9).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        f.write("9/task/9/stat", "9 (truncated) S 1 2\n")
            .write("9/task/9/status", STATUS);
        let err = read_thread_stat(f.path(), 9, 9).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(err.to_string().contains("stat"), "{err}");

        f.write("9/task/9/stat", &stat_line(1, 1, 0))
            .write("9/task/9/status", "voluntary_ctxt_switches:\tlots\n");
        let err = read_thread_stat(f.path(), 9, 9).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);

        f.write("9/task/9/status", STATUS)
            .write("9/task/9/schedstat", "1 2\n");
        assert_eq!(
            read_thread_stat(f.path(), 9, 9).unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
        assert_eq!(parse_stat("no parenthesis at all"), None);
        assert_eq!(parse_stat(""), None);
    }

    #[test]
    fn rss_is_read_from_status_in_bytes() {
        let f = Fixture::new("proc-rss");
        f.write(
            "42/status",
            "Name:\tx\nVmPeak:\t  9000 kB\nVmRSS:\t    5120 kB\nThreads:\t3\n",
        )
        .write("43/status", "Name:\tkthread\nThreads:\t1\n")
        .write("44/status", "VmRSS:\tmany kB\n");
        assert_eq!(read_rss_bytes(f.path(), "42").unwrap(), 5120 * 1024);
        for pid in ["43", "44"] {
            let err = read_rss_bytes(f.path(), pid).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidData);
            assert!(err.to_string().contains("status"), "{err}");
        }
        assert_eq!(
            read_rss_bytes(f.path(), "45").unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        // This test process has at least its code and stack resident.
        let own = read_rss_bytes(Path::new(crate::DEFAULT_PROC_ROOT), "self").unwrap();
        assert!(own > 64 * 1024, "own RSS {own} bytes");
    }

    #[test]
    fn live_own_thread() {
        let proc_root = Path::new(crate::DEFAULT_PROC_ROOT);
        let pid = std::process::id() as i32;
        let tid = crate::sched::gettid();
        // Burn 30 ms of this thread's CPU time (not wall time: on a loaded machine the
        // thread may wait far longer than it runs) so the counters are not all zero.
        let cpu_ns = || {
            let mut ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: `ts` is a live timespec; the clock id is a constant.
            unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
            ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
        };
        let start = cpu_ns();
        let mut x = 0u64;
        while cpu_ns() - start < 30_000_000 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(1));
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
        let s = read_thread_stat(proc_root, pid, tid).unwrap();
        assert!(s.last_cpu.unwrap() < crate::sched::online_cpu_count());
        assert!(s.voluntary_switches >= 1, "{s:?}");
        if s.has_schedstat {
            assert!(s.run_ns >= 20_000_000, "{s:?}");
            assert!(s.timeslices >= 1);
        }
        if proc_root.join(format!("{pid}/task/{tid}/sched")).exists() {
            assert!(s.migrations.is_some());
        }
    }
}
