//! Real-time setup of the calling thread (policy, SCHED_DEADLINE, uclamp, affinity), memory
//! locking and the CPU wake-up latency request. The setup functions run once at thread start,
//! never per audio cycle; only [`current_cpu`] and [`gettid`] are cheap enough for the audio path.

use crate::cpu::format_cpu_list;
use crate::outcome::Outcome;
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

/// Which fixed-priority real-time policy to request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RtPolicy {
    /// SCHED_FIFO: runs until it blocks or a higher priority preempts it.
    #[default]
    Fifo,
    /// SCHED_RR: like FIFO, but equal priorities share the CPU in time slices.
    RoundRobin,
}

/// SCHED_DEADLINE reservation: `runtime_ns` of CPU every `period_ns`, finished by `deadline_ns`
/// after each period starts. A `period_ns` of 0 means "same as `deadline_ns`", as in the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadlineParams {
    /// CPU time reserved per period, in nanoseconds (at least 1024).
    pub runtime_ns: u64,
    /// Relative deadline, in nanoseconds (runtime <= deadline <= period).
    pub deadline_ns: u64,
    /// Period, in nanoseconds; typically one audio buffer (128 frames at 48 kHz = 2666666 ns).
    pub period_ns: u64,
}

/// What the calling thread should get. Every field is independent; each one gets its own
/// [`Outcome`] in the [`ThreadSchedReport`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RtRequest {
    /// Real-time priority 1..=99; `None` keeps the thread SCHED_OTHER.
    pub priority: Option<u8>,
    /// FIFO or round-robin, used with `priority`.
    pub policy: RtPolicy,
    /// SCHED_DEADLINE instead of FIFO/RR; when refused, `priority` (if given) is the fallback.
    pub deadline: Option<DeadlineParams>,
    /// Minimum utilization clamp 0..=1024, applied on top of whatever policy the thread has.
    pub uclamp_min: Option<u32>,
    /// CPUs to pin the thread to; `None` leaves the affinity alone.
    pub cpus: Option<Vec<usize>>,
}

/// What [`apply_to_current_thread`] asked for and what the thread really got.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadSchedReport {
    /// Kernel thread id of the thread the request was applied to.
    pub tid: i32,
    /// The policy read back from the kernel afterwards, e.g. "SCHED_FIFO 70".
    pub obtained: String,
    /// SCHED_FIFO / SCHED_RR priority.
    pub priority: Outcome,
    /// SCHED_DEADLINE reservation.
    pub deadline: Outcome,
    /// Minimum utilization clamp.
    pub uclamp: Outcome,
    /// CPU affinity.
    pub affinity: Outcome,
}

/// Reason given when both SCHED_DEADLINE and pinning are requested: the kernel refuses
/// SCHED_DEADLINE for threads pinned narrower than their root domain and refuses affinity
/// changes once it is set, so the two cannot combine and the deadline wins.
pub const DEADLINE_PIN_CONFLICT: &str =
    "SCHED_DEADLINE threads cannot be pinned (kernel refuses narrower affinity)";

const SCHED_FLAG_RESET_ON_FORK: u64 = 0x01;
const SCHED_FLAG_KEEP_POLICY: u64 = 0x08;
const SCHED_FLAG_KEEP_PARAMS: u64 = 0x10;
const SCHED_FLAG_UTIL_CLAMP_MIN: u64 = 0x20;
const UCLAMP_MAX: u32 = 1024;
/// The kernel rejects smaller runtimes (DL_SCALE precision of its bandwidth arithmetic).
const DL_MIN_RUNTIME_NS: u64 = 1 << 10;
const SCHED_OTHER: u32 = libc::SCHED_OTHER as u32;
const SCHED_FIFO: u32 = libc::SCHED_FIFO as u32;
const SCHED_RR: u32 = libc::SCHED_RR as u32;
const SCHED_BATCH: u32 = libc::SCHED_BATCH as u32;
const SCHED_IDLE: u32 = libc::SCHED_IDLE as u32;
const SCHED_DEADLINE: u32 = libc::SCHED_DEADLINE as u32;

/// The kernel's `struct sched_attr` in its SCHED_ATTR_SIZE_VER1 layout (56 bytes). libc's
/// struct stops before the util clamp fields, and the kernel ignores uclamp unless `size`
/// covers them.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct SchedAttr {
    size: u32,
    policy: u32,
    flags: u64,
    nice: i32,
    priority: u32,
    runtime_ns: u64,
    deadline_ns: u64,
    period_ns: u64,
    util_min: u32,
    util_max: u32,
}

const SCHED_ATTR_SIZE: u32 = 56;
const _: () = assert!(std::mem::size_of::<SchedAttr>() == SCHED_ATTR_SIZE as usize);

fn last_errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Reads the calling thread's scheduling attributes; `Err(errno)` on failure.
fn get_attr() -> Result<SchedAttr, i32> {
    let mut attr = SchedAttr::default();
    // SAFETY: pid 0 is the calling thread; `attr` is a live, writable repr(C) struct of exactly
    // SCHED_ATTR_SIZE bytes, and the kernel writes at most that many.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            0 as libc::pid_t,
            &mut attr as *mut SchedAttr,
            SCHED_ATTR_SIZE as libc::c_uint,
            0 as libc::c_uint,
        )
    };
    if rc == 0 {
        Ok(attr)
    } else {
        Err(last_errno())
    }
}

/// Applies `attr` to the calling thread; `Err(errno)` on failure.
fn set_attr(mut attr: SchedAttr) -> Result<(), i32> {
    attr.size = SCHED_ATTR_SIZE;
    // SAFETY: pid 0 is the calling thread; `attr` is a live repr(C) struct whose `size` field
    // matches its real size, and the kernel only reads it.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_sched_setattr,
            0 as libc::pid_t,
            &attr as *const SchedAttr,
            0 as libc::c_uint,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(last_errno())
    }
}

/// One-line description of a policy as the kernel reports it, e.g. "SCHED_FIFO 70".
fn describe(attr: &SchedAttr) -> String {
    let mut s = match attr.policy {
        SCHED_OTHER => format!("SCHED_OTHER nice {}", attr.nice),
        SCHED_BATCH => format!("SCHED_BATCH nice {}", attr.nice),
        SCHED_IDLE => "SCHED_IDLE".to_owned(),
        SCHED_FIFO => format!("SCHED_FIFO {}", attr.priority),
        SCHED_RR => format!("SCHED_RR {}", attr.priority),
        SCHED_DEADLINE => {
            let mut d = format!(
                "SCHED_DEADLINE runtime {} ns / period {} ns",
                attr.runtime_ns, attr.period_ns
            );
            if attr.deadline_ns != attr.period_ns {
                d.push_str(&format!(" (deadline {} ns)", attr.deadline_ns));
            }
            d
        }
        other => format!("scheduling policy {other}"),
    };
    if attr.util_min > 0 {
        s.push_str(&format!(", uclamp_min {}", attr.util_min));
    }
    s
}

/// What was being asked for, so an errno can be explained in that request's terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Request {
    Priority,
    Deadline,
    Uclamp,
    Affinity,
    MemoryLock,
    PmQos,
    Query,
}

/// The errno's symbolic name ("EPERM"), from nix's table rather than one kept by hand.
fn errno_name(errno: i32) -> String {
    match nix::errno::Errno::from_raw(errno) {
        nix::errno::Errno::UnknownErrno => format!("errno {errno}"),
        e => format!("{e:?}"),
    }
}

/// Explains an errno in terms of the request that got it: "NAME: what it means (what to do)".
pub(crate) fn errno_reason(errno: i32, request: Request) -> String {
    use Request::*;
    let text = match (errno, request) {
        (libc::EPERM, Priority) => {
            "operation not permitted (need CAP_SYS_NICE or an RLIMIT_RTPRIO)".to_owned()
        }
        (libc::EPERM, Deadline) => "operation not permitted (need CAP_SYS_NICE, and the \
             thread's affinity must span its whole root domain)"
            .to_owned(),
        (libc::EPERM, Uclamp) => {
            "operation not permitted (raising uclamp_min needs CAP_SYS_NICE)".to_owned()
        }
        (libc::EPERM, MemoryLock) => {
            "operation not permitted (need CAP_IPC_LOCK or a larger RLIMIT_MEMLOCK)".to_owned()
        }
        (libc::EBUSY, Deadline) => {
            "bandwidth exceeds the root domain's limit (deadline admission control)".to_owned()
        }
        (libc::EBUSY, Affinity) => {
            "the affinity of a SCHED_DEADLINE thread cannot be changed".to_owned()
        }
        (libc::EINVAL, Priority) => {
            "invalid argument (SCHED_FIFO/SCHED_RR priorities are 1..=99)".to_owned()
        }
        (libc::EINVAL, Deadline) => "invalid argument (need 1024 ns <= runtime <= deadline \
             <= period, with the period inside kernel.sched_deadline_period_{min,max}_us)"
            .to_owned(),
        (libc::EINVAL, Uclamp) => "invalid argument (uclamp_min is 0..=1024)".to_owned(),
        (libc::EINVAL, Affinity) => {
            "invalid argument (none of the requested CPUs is online and allowed by the cpuset)"
                .to_owned()
        }
        (libc::EOPNOTSUPP, Uclamp) => {
            "not supported by this kernel (CONFIG_UCLAMP_TASK missing)".to_owned()
        }
        (libc::E2BIG, Uclamp) => {
            "not supported by this kernel (its sched_attr predates util clamps)".to_owned()
        }
        (libc::ENOMEM, MemoryLock) => "cannot allocate memory (RLIMIT_MEMLOCK is smaller than \
             the process; raise it or run with CAP_IPC_LOCK)"
            .to_owned(),
        (libc::EACCES, PmQos) | (libc::EPERM, PmQos) => {
            "permission denied (the PM QoS device is writable by root only)".to_owned()
        }
        _ => {
            let msg = io::Error::from_raw_os_error(errno).to_string();
            // std appends " (os error N)"; the errno name already carries that information.
            let msg = msg.split(" (os error").next().unwrap_or(&msg).to_owned();
            msg.to_lowercase()
        }
    };
    format!("{}: {}", errno_name(errno), text)
}

fn refused(reason: String) -> Outcome {
    // The fallback describes the final state, so it is filled in once every step has run.
    Outcome::Refused {
        reason,
        fallback: String::new(),
    }
}

fn fill_fallback(outcome: &mut Outcome, what_runs: &str) {
    if let Outcome::Refused { fallback, .. } = outcome {
        if fallback.is_empty() {
            *fallback = what_runs.to_owned();
        }
    }
}

fn set_deadline(d: &DeadlineParams) -> Outcome {
    let period = if d.period_ns == 0 {
        d.deadline_ns
    } else {
        d.period_ns
    };
    if d.runtime_ns < DL_MIN_RUNTIME_NS || d.runtime_ns > d.deadline_ns || d.deadline_ns > period {
        return refused(format!(
            "EINVAL: runtime {} ns / deadline {} ns / period {} ns is not a valid reservation \
             (need 1024 ns <= runtime <= deadline <= period; rejected before calling the kernel)",
            d.runtime_ns, d.deadline_ns, d.period_ns
        ));
    }
    let attr = SchedAttr {
        policy: SCHED_DEADLINE,
        runtime_ns: d.runtime_ns,
        deadline_ns: d.deadline_ns,
        period_ns: d.period_ns,
        ..SchedAttr::default()
    };
    match set_attr(attr) {
        Ok(()) => Outcome::Applied {
            detail: format!(
                "SCHED_DEADLINE runtime {} ns / deadline {} ns / period {} ns",
                d.runtime_ns, d.deadline_ns, period
            ),
        },
        Err(e) => refused(errno_reason(e, Request::Deadline)),
    }
}

fn set_rt_priority(policy: RtPolicy, priority: u8) -> Outcome {
    let (policy_id, name) = match policy {
        RtPolicy::Fifo => (SCHED_FIFO, "SCHED_FIFO"),
        RtPolicy::RoundRobin => (SCHED_RR, "SCHED_RR"),
    };
    let attr = SchedAttr {
        policy: policy_id,
        priority: u32::from(priority),
        ..SchedAttr::default()
    };
    match set_attr(attr) {
        Ok(()) => Outcome::Applied {
            detail: format!("{name} priority {priority}"),
        },
        Err(e) => refused(errno_reason(e, Request::Priority)),
    }
}

fn set_uclamp_min(value: u32) -> Outcome {
    if value > UCLAMP_MAX {
        return refused(format!(
            "EINVAL: uclamp_min {value} is above {UCLAMP_MAX} (rejected before calling the kernel)"
        ));
    }
    // The kernel validates the policy fields even with KEEP_POLICY|KEEP_PARAMS (an RT thread
    // passing priority 0 gets EINVAL), so start from the thread's current attributes.
    let current = match get_attr() {
        Ok(a) => a,
        Err(e) => return refused(errno_reason(e, Request::Query)),
    };
    let attr = SchedAttr {
        flags: (current.flags & SCHED_FLAG_RESET_ON_FORK)
            | SCHED_FLAG_KEEP_POLICY
            | SCHED_FLAG_KEEP_PARAMS
            | SCHED_FLAG_UTIL_CLAMP_MIN,
        util_min: value,
        util_max: 0,
        ..current
    };
    match set_attr(attr) {
        Ok(()) => Outcome::Applied {
            detail: format!("uclamp_min {value} of {UCLAMP_MAX}"),
        },
        Err(e @ (libc::EOPNOTSUPP | libc::E2BIG | libc::ENOSYS)) => {
            let reason = errno_reason(e, Request::Uclamp);
            // The reason already names the errno; an unsupported feature reads best as prose.
            let prose = reason.split_once(": ").map_or(reason.as_str(), |(_, t)| t);
            Outcome::Unsupported {
                reason: prose.to_owned(),
            }
        }
        Err(e) => refused(errno_reason(e, Request::Uclamp)),
    }
}

/// The CPUs the calling thread may run on (its affinity mask), or the errno of
/// `sched_getaffinity`.
pub fn allowed_cpus() -> Result<Vec<usize>, i32> {
    get_affinity()
}

/// The calling thread's allowed CPUs, or an errno.
fn get_affinity() -> Result<Vec<usize>, i32> {
    // SAFETY: cpu_set_t is a plain bit array for which all-zero is a valid (empty) value.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: pid 0 is the calling thread; `set` is a live cpu_set_t and we pass its real size.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(last_errno());
    }
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: `cpu` is below CPU_SETSIZE, so CPU_ISSET stays inside `set`.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect())
}

fn set_affinity(cpus: &[usize]) -> Outcome {
    if cpus.is_empty() {
        return refused("EINVAL: empty CPU list (rejected before calling the kernel)".to_owned());
    }
    let max = libc::CPU_SETSIZE as usize;
    if let Some(bad) = cpus.iter().find(|&&c| c >= max) {
        return refused(format!(
            "EINVAL: CPU {bad} is beyond the {max} CPUs a cpu_set_t can name \
             (rejected before calling the kernel)"
        ));
    }
    // SAFETY: cpu_set_t is a plain bit array for which all-zero is a valid (empty) value.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus {
        // SAFETY: every `cpu` was checked above to be below CPU_SETSIZE, so CPU_SET stays
        // inside `set`.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: pid 0 is the calling thread; `set` is a live cpu_set_t and we pass its real size.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return refused(errno_reason(last_errno(), Request::Affinity));
    }
    match get_affinity() {
        Ok(now) => Outcome::Applied {
            detail: format!("pinned to CPUs {}", format_cpu_list(&now)),
        },
        Err(_) => Outcome::Applied {
            detail: format!("pinned to CPUs {}", format_cpu_list(cpus)),
        },
    }
}

/// Applies `req` to the calling thread and reads back what it really got.
///
/// Order: SCHED_DEADLINE (when requested) before any pinning, because the kernel refuses it for
/// pinned threads; otherwise affinity first, then the FIFO/RR priority; uclamp last, on top of
/// whatever policy resulted. Invalid values (priority 0 or 100, uclamp above 1024, an empty CPU
/// list) are refused with an EINVAL reason before any syscall. Every `Refused` carries the
/// state the thread actually runs with as its fallback.
///
/// ```
/// use xrunlab_sys::{apply_to_current_thread, RtRequest};
/// let report = std::thread::spawn(|| {
///     apply_to_current_thread(&RtRequest { priority: Some(0), ..RtRequest::default() })
/// })
/// .join()
/// .unwrap();
/// assert!(!report.priority.took_effect());
/// assert!(report.priority.summary().starts_with("refused: EINVAL: priority 0"));
/// ```
pub fn apply_to_current_thread(req: &RtRequest) -> ThreadSchedReport {
    let tid = gettid();
    let mut deadline = match &req.deadline {
        None => Outcome::NotRequested,
        Some(d) => set_deadline(d),
    };
    let deadline_on = deadline.took_effect();
    let mut affinity = match &req.cpus {
        None => Outcome::NotRequested,
        Some(_) if deadline_on => refused(DEADLINE_PIN_CONFLICT.to_owned()),
        Some(cpus) => set_affinity(cpus),
    };
    let mut priority = match req.priority {
        None => Outcome::NotRequested,
        Some(p) if !(1..=99).contains(&p) => refused(format!(
            "EINVAL: priority {p} is outside 1..=99 (rejected before calling the kernel)"
        )),
        Some(_) if deadline_on => refused(
            "superseded: SCHED_DEADLINE was applied (the priority is only its fallback)".to_owned(),
        ),
        Some(p) => set_rt_priority(req.policy, p),
    };
    let mut uclamp = match req.uclamp_min {
        None => Outcome::NotRequested,
        Some(v) => set_uclamp_min(v),
    };

    let obtained = match get_attr() {
        Ok(attr) => describe(&attr),
        Err(e) => format!(
            "unknown (sched_getattr failed: {})",
            errno_reason(e, Request::Query)
        ),
    };
    fill_fallback(&mut priority, &obtained);
    fill_fallback(&mut deadline, &obtained);
    fill_fallback(&mut uclamp, &format!("no utilization clamp ({obtained})"));
    let cpus_now = match get_affinity() {
        Ok(cpus) => format!("runs on CPUs {}", format_cpu_list(&cpus)),
        Err(e) => format!("affinity unknown ({})", errno_reason(e, Request::Affinity)),
    };
    fill_fallback(&mut affinity, &cpus_now);

    ThreadSchedReport {
        tid,
        obtained,
        priority,
        deadline,
        uclamp,
        affinity,
    }
}

/// Lowers the calling thread to `nice` within SCHED_OTHER (Linux nice values are per
/// thread). Raising the nice value needs no privilege; the outcome says what is in effect.
pub fn set_current_thread_nice(nice: i32) -> Outcome {
    let tid = gettid();
    // SAFETY: setpriority takes plain integers; PRIO_PROCESS with a tid addresses one thread.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) };
    if rc == 0 {
        return Outcome::Applied {
            detail: format!("SCHED_OTHER nice {nice}"),
        };
    }
    let errno = last_errno();
    // SAFETY: getpriority takes plain integers and touches no memory.
    let now = unsafe { libc::getpriority(libc::PRIO_PROCESS, tid as libc::id_t) };
    Outcome::Refused {
        reason: format!("{}: setpriority(nice {nice}) failed", errno_name(errno)),
        fallback: format!("SCHED_OTHER nice {now}"),
    }
}

/// Kernel thread id of the calling thread (what `/proc/<pid>/task/<tid>` and `ps -L` show).
pub fn gettid() -> i32 {
    // SAFETY: gettid takes no arguments, cannot fail and touches no memory.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) };
    tid as i32
}

/// The CPU the calling thread is running on right now, `None` if the kernel cannot say.
/// Real-time safe: a vDSO/rseq read, no allocation, no lock.
#[inline]
pub fn current_cpu() -> Option<usize> {
    // SAFETY: sched_getcpu takes no arguments and only returns a value.
    let cpu = unsafe { libc::sched_getcpu() };
    usize::try_from(cpu).ok()
}

/// Number of CPUs online now (at least 1). A count, not the ids: they may have gaps, so a
/// list of CPUs comes from [`crate::cpu::cpu_set`].
pub fn online_cpu_count() -> usize {
    // SAFETY: sysconf only reads a configuration value.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).unwrap_or(1).max(1)
}

/// Locks all current and future pages of the process in RAM, so the audio path never waits
/// on a page fault served from disk. Process-wide; call once before real-time threads start.
pub fn lock_memory() -> Outcome {
    // SAFETY: mlockall takes flags only and touches no memory of ours.
    let rc = unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) };
    if rc == 0 {
        Outcome::Applied {
            detail: "mlockall(MCL_CURRENT|MCL_FUTURE): all pages locked in RAM".to_owned(),
        }
    } else {
        Outcome::Refused {
            reason: errno_reason(last_errno(), Request::MemoryLock),
            fallback: "memory not locked: page faults can stall real-time threads".to_owned(),
        }
    }
}

/// Undoes [`lock_memory`]: unlocks every page of the process (munlockall). For callers that
/// compare runs with and without the lock in one process.
pub fn unlock_memory() -> Outcome {
    // SAFETY: munlockall takes no arguments and touches no memory of ours.
    let rc = unsafe { libc::munlockall() };
    if rc == 0 {
        Outcome::Applied {
            detail: "munlockall: pages may be swapped or faulted again".to_owned(),
        }
    } else {
        Outcome::Refused {
            reason: errno_reason(last_errno(), Request::MemoryLock),
            fallback: "memory stays locked".to_owned(),
        }
    }
}

/// Keeps a CPU wake-up latency request (PM QoS) in force while it lives. The kernel ties the
/// request to the open file descriptor: dropping the guard closes it and releases the request.
#[derive(Debug)]
pub struct PmQosGuard {
    // Never read: the open descriptor itself is the request.
    _file: File,
    latency_us: i32,
}

impl PmQosGuard {
    /// The wake-up latency limit being held, in microseconds.
    pub fn latency_us(&self) -> i32 {
        self.latency_us
    }
}

/// Asks the kernel to keep CPUs out of idle states whose exit latency exceeds `latency_us`
/// (0 = shallowest idle only) by writing it as a binary i32 to `dev_path`, normally
/// `/dev/cpu_dma_latency`. Returns the guard that holds the request, and what happened.
pub fn hold_cpu_dma_latency(dev_path: &Path, latency_us: i32) -> (Option<PmQosGuard>, Outcome) {
    const FALLBACK: &str = "no wake-up latency limit: CPUs may enter deep idle states";
    if latency_us < 0 {
        let reason = format!(
            "EINVAL: latency {latency_us} us is negative (rejected before opening {})",
            dev_path.display()
        );
        let fallback = FALLBACK.to_owned();
        return (None, Outcome::Refused { reason, fallback });
    }
    let mut file = match OpenOptions::new().write(true).open(dev_path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let reason = format!("not available on this machine (no {})", dev_path.display());
            return (None, Outcome::Unsupported { reason });
        }
        Err(e) => {
            let reason = errno_reason(e.raw_os_error().unwrap_or(0), Request::PmQos);
            let fallback = FALLBACK.to_owned();
            return (None, Outcome::Refused { reason, fallback });
        }
    };
    if let Err(e) = file.write_all(&latency_us.to_ne_bytes()) {
        let reason = errno_reason(e.raw_os_error().unwrap_or(0), Request::PmQos);
        let fallback = FALLBACK.to_owned();
        return (None, Outcome::Refused { reason, fallback });
    }
    let detail = format!(
        "CPU wake-up latency held at {latency_us} us via {}",
        dev_path.display()
    );
    let guard = PmQosGuard {
        _file: file,
        latency_us,
    };
    (Some(guard), Outcome::Applied { detail })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_names_come_from_nix() {
        assert_eq!(errno_name(libc::EPERM), "EPERM");
        assert_eq!(errno_name(libc::EOPNOTSUPP), "EOPNOTSUPP");
        assert_eq!(errno_name(libc::EBUSY), "EBUSY");
        assert_eq!(errno_name(100_000), "errno 100000");
    }
    use std::sync::Mutex;

    /// SCHED_DEADLINE admission is shared by the whole machine; tests that reserve bandwidth
    /// take this lock so they do not refuse each other.
    static DEADLINE_LOCK: Mutex<()> = Mutex::new(());

    const CHILD_ENV: &str = "XRUNLAB_SYS_UNPRIVILEGED_PROBE";

    fn is_root() -> bool {
        // SAFETY: geteuid only returns a value.
        unsafe { libc::geteuid() == 0 }
    }

    /// Runs `f` in a fresh thread, so the harness thread never becomes real-time or pinned.
    /// What an untouched thread of this process runs with: SCHED_OTHER at the nice it inherited
    /// (test.sh runs some test binaries at nice 19).
    fn other_now() -> String {
        // SAFETY: getpriority reads the calling thread's nice; no pointers.
        let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
        format!("SCHED_OTHER nice {nice}")
    }

    fn in_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        std::thread::spawn(f).join().unwrap()
    }

    fn audio_deadline() -> DeadlineParams {
        // One 128-frame buffer at 48 kHz, 1 ms of it reserved.
        DeadlineParams {
            runtime_ns: 1_000_000,
            deadline_ns: 2_666_666,
            period_ns: 2_666_666,
        }
    }

    fn reason(o: &Outcome) -> &str {
        match o {
            Outcome::Refused { reason, .. } | Outcome::Unsupported { reason } => reason,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    fn fallback(o: &Outcome) -> &str {
        match o {
            Outcome::Refused { fallback, .. } => fallback,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn errno_reasons_are_readable() {
        assert_eq!(
            errno_reason(libc::EPERM, Request::Priority),
            "EPERM: operation not permitted (need CAP_SYS_NICE or an RLIMIT_RTPRIO)"
        );
        assert_eq!(
            errno_reason(libc::EBUSY, Request::Deadline),
            "EBUSY: bandwidth exceeds the root domain's limit (deadline admission control)"
        );
        assert!(errno_reason(libc::EPERM, Request::Deadline).contains("affinity"));
        assert!(errno_reason(libc::EINVAL, Request::Deadline).starts_with("EINVAL: "));
        assert_eq!(
            errno_reason(libc::EOPNOTSUPP, Request::Uclamp),
            "EOPNOTSUPP: not supported by this kernel (CONFIG_UCLAMP_TASK missing)"
        );
        assert!(errno_reason(libc::ENOMEM, Request::MemoryLock).contains("RLIMIT_MEMLOCK"));
        assert!(errno_reason(libc::EACCES, Request::PmQos).contains("root"));
        // Unexpected errnos still read as words, without std's "(os error N)" suffix.
        let other = errno_reason(libc::ESRCH, Request::Priority);
        assert_eq!(other, "ESRCH: no such process");
        assert_eq!(
            errno_reason(4000, Request::Query).split(':').next(),
            Some("errno 4000")
        );
    }

    #[test]
    fn describes_policies_like_the_kernel_reports_them() {
        let fifo = SchedAttr {
            policy: SCHED_FIFO,
            priority: 70,
            ..SchedAttr::default()
        };
        assert_eq!(describe(&fifo), "SCHED_FIFO 70");
        let other = SchedAttr {
            nice: -5,
            ..SchedAttr::default()
        };
        assert_eq!(describe(&other), "SCHED_OTHER nice -5");
        let dl = SchedAttr {
            policy: SCHED_DEADLINE,
            runtime_ns: 1_000_000,
            deadline_ns: 2_000_000,
            period_ns: 2_666_666,
            util_min: 512,
            ..SchedAttr::default()
        };
        assert_eq!(
            describe(&dl),
            "SCHED_DEADLINE runtime 1000000 ns / period 2666666 ns (deadline 2000000 ns), \
             uclamp_min 512"
        );
    }

    #[test]
    fn invalid_values_are_refused_before_any_syscall() {
        let report = in_thread(|| {
            let bad = RtRequest {
                priority: Some(0),
                uclamp_min: Some(2000),
                cpus: Some(vec![]),
                ..RtRequest::default()
            };
            let zero = apply_to_current_thread(&bad);
            let hundred = apply_to_current_thread(&RtRequest {
                priority: Some(100),
                ..RtRequest::default()
            });
            (zero, hundred)
        });
        let (zero, hundred) = report;
        assert!(reason(&zero.priority).starts_with("EINVAL: priority 0 is outside 1..=99"));
        assert!(reason(&hundred.priority).starts_with("EINVAL: priority 100 is outside"));
        assert!(reason(&zero.uclamp).starts_with("EINVAL: uclamp_min 2000"));
        assert!(reason(&zero.affinity).starts_with("EINVAL: empty CPU list"));
        // Nothing changed, and the fallbacks say what the thread still runs with.
        assert_eq!(zero.obtained, other_now());
        assert_eq!(fallback(&zero.priority), other_now());
        assert!(fallback(&zero.affinity).starts_with("runs on CPUs "));
        assert_eq!(zero.deadline, Outcome::NotRequested);

        let bad_dl = in_thread(|| {
            apply_to_current_thread(&RtRequest {
                deadline: Some(DeadlineParams {
                    runtime_ns: 3_000_000,
                    deadline_ns: 2_000_000,
                    period_ns: 2_666_666,
                }),
                ..RtRequest::default()
            })
        });
        assert!(reason(&bad_dl.deadline).starts_with("EINVAL: runtime 3000000 ns"));
    }

    #[test]
    fn empty_request_changes_nothing() {
        let (before, report) = in_thread(|| {
            let before = get_attr().map(|a| describe(&a));
            (before, apply_to_current_thread(&RtRequest::default()))
        });
        assert_eq!(before.unwrap(), report.obtained);
        assert!(report.tid > 0);
        for o in [
            &report.priority,
            &report.deadline,
            &report.uclamp,
            &report.affinity,
        ] {
            assert_eq!(*o, Outcome::NotRequested);
        }
    }

    #[test]
    #[ignore = "needs root (SCHED_FIFO, SCHED_DEADLINE, affinity); test.sh runs it as root"]
    fn fifo_and_pinning_apply_as_root() {
        assert!(is_root(), "needs root");
        let (report, cpu, affinity) = in_thread(|| {
            let r = apply_to_current_thread(&RtRequest {
                priority: Some(70),
                cpus: Some(vec![0]),
                ..RtRequest::default()
            });
            (r, current_cpu(), get_affinity().unwrap())
        });
        assert_eq!(
            report.priority,
            Outcome::Applied {
                detail: "SCHED_FIFO priority 70".into()
            }
        );
        assert_eq!(report.obtained, "SCHED_FIFO 70");
        assert_eq!(
            report.affinity,
            Outcome::Applied {
                detail: "pinned to CPUs 0".into()
            }
        );
        assert_eq!(cpu, Some(0));
        assert_eq!(affinity, vec![0]);

        let rr = in_thread(|| {
            apply_to_current_thread(&RtRequest {
                priority: Some(10),
                policy: RtPolicy::RoundRobin,
                ..RtRequest::default()
            })
        });
        assert_eq!(rr.obtained, "SCHED_RR 10");
    }

    #[test]
    #[ignore = "needs root (SCHED_FIFO, SCHED_DEADLINE, affinity); test.sh runs it as root"]
    fn deadline_applies_and_wins_over_pinning() {
        assert!(is_root(), "needs root");
        let _serial = DEADLINE_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let online = online_cpu_count();
        let (report, affinity) = in_thread(|| {
            let r = apply_to_current_thread(&RtRequest {
                priority: Some(70),
                deadline: Some(audio_deadline()),
                cpus: Some(vec![0]),
                ..RtRequest::default()
            });
            (r, get_affinity().unwrap())
        });
        assert_eq!(
            report.deadline,
            Outcome::Applied {
                detail: "SCHED_DEADLINE runtime 1000000 ns / deadline 2666666 ns / period \
                         2666666 ns"
                    .into()
            }
        );
        assert_eq!(
            report.obtained,
            "SCHED_DEADLINE runtime 1000000 ns / period 2666666 ns"
        );
        assert_eq!(reason(&report.affinity), DEADLINE_PIN_CONFLICT);
        assert_eq!(
            fallback(&report.affinity),
            format!("runs on CPUs {}", format_cpu_list(&affinity))
        );
        assert_eq!(
            affinity.len(),
            online,
            "the thread must not have been pinned"
        );
        assert!(reason(&report.priority).starts_with("superseded"));
        assert_eq!(fallback(&report.priority), report.obtained);
    }

    #[test]
    #[ignore = "needs root (SCHED_FIFO, SCHED_DEADLINE, affinity); test.sh runs it as root"]
    fn deadline_admission_control_answers_ebusy() {
        assert!(is_root(), "needs root");
        let _serial = DEADLINE_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        // One full-CPU reservation per CPU cannot fit under the 95 % per-CPU limit, so at least
        // one is refused. The holders keep their reservations until all have asked.
        let whole_cpu = DeadlineParams {
            runtime_ns: 10_000_000,
            deadline_ns: 10_000_000,
            period_ns: 10_000_000,
        };
        let cpus = online_cpu_count();
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(cpus + 1));
        let (tx, rx) = std::sync::mpsc::channel();
        let holders: Vec<_> = (0..cpus)
            .map(|_| {
                let (barrier, tx) = (barrier.clone(), tx.clone());
                std::thread::spawn(move || {
                    let r = apply_to_current_thread(&RtRequest {
                        deadline: Some(whole_cpu),
                        ..RtRequest::default()
                    });
                    tx.send(r).unwrap();
                    barrier.wait();
                })
            })
            .collect();
        let reports: Vec<ThreadSchedReport> = (0..cpus).map(|_| rx.recv().unwrap()).collect();
        barrier.wait();
        for h in holders {
            h.join().unwrap();
        }
        let refused: Vec<_> = reports
            .iter()
            .filter(|r| !r.deadline.took_effect())
            .collect();
        assert!(!refused.is_empty(), "{reports:?}");
        for r in refused {
            assert_eq!(
                reason(&r.deadline),
                errno_reason(libc::EBUSY, Request::Deadline)
            );
            assert_eq!(fallback(&r.deadline), other_now());
            assert_eq!(r.obtained, other_now());
        }
    }

    #[test]
    #[ignore = "needs root (SCHED_FIFO, SCHED_DEADLINE, affinity); test.sh runs it as root"]
    fn refused_deadline_falls_back_to_fifo_and_pins() {
        assert!(is_root(), "needs root");
        let report = in_thread(|| {
            apply_to_current_thread(&RtRequest {
                priority: Some(70),
                // Valid shape, but a 3 us period is below kernel.sched_deadline_period_min_us.
                deadline: Some(DeadlineParams {
                    runtime_ns: 1_024,
                    deadline_ns: 2_000,
                    period_ns: 3_000,
                }),
                cpus: Some(vec![0]),
                ..RtRequest::default()
            })
        });
        assert!(
            reason(&report.deadline).starts_with("EINVAL: "),
            "{report:?}"
        );
        assert_eq!(fallback(&report.deadline), "SCHED_FIFO 70");
        assert!(report.priority.took_effect());
        assert_eq!(
            report.affinity,
            Outcome::Applied {
                detail: "pinned to CPUs 0".into()
            }
        );
    }

    #[test]
    fn uclamp_reports_what_the_kernel_says() {
        let report = in_thread(|| {
            apply_to_current_thread(&RtRequest {
                uclamp_min: Some(512),
                ..RtRequest::default()
            })
        });
        let supported = Path::new("/proc/sys/kernel/sched_util_clamp_min").exists();
        if supported {
            assert!(report.uclamp.took_effect(), "{report:?}");
            assert!(report.obtained.ends_with("uclamp_min 512"));
        } else {
            assert_eq!(
                report.uclamp,
                Outcome::Unsupported {
                    reason: "not supported by this kernel (CONFIG_UCLAMP_TASK missing)".into()
                }
            );
        }
        // uclamp on top of FIFO keeps the policy (KEEP_POLICY|KEEP_PARAMS).
        if is_root() {
            let fifo = in_thread(|| {
                apply_to_current_thread(&RtRequest {
                    priority: Some(60),
                    uclamp_min: Some(1024),
                    ..RtRequest::default()
                })
            });
            assert!(fifo.obtained.starts_with("SCHED_FIFO 60"), "{fifo:?}");
            assert_eq!(fifo.uclamp.took_effect(), supported);
        }
    }

    #[test]
    fn memory_lock_and_pm_qos() {
        let locked = lock_memory();
        if is_root() {
            assert!(locked.took_effect(), "{locked:?}");
        }
        // Undoing the lock keeps other tests ordinary.
        assert!(unlock_memory().took_effect());

        let f = crate::testutil::Fixture::new("pmqos");
        let dev = f.path().join("cpu_dma_latency");
        let (guard, missing) = hold_cpu_dma_latency(&dev, 0);
        assert!(guard.is_none());
        assert!(reason(&missing).starts_with("not available on this machine (no "));

        std::fs::write(&dev, b"").unwrap();
        let (guard, held) = hold_cpu_dma_latency(&dev, 20);
        assert!(held.took_effect(), "{held:?}");
        assert_eq!(guard.unwrap().latency_us(), 20);
        assert_eq!(std::fs::read(&dev).unwrap(), 20i32.to_ne_bytes());

        let (guard, negative) = hold_cpu_dma_latency(&dev, -1);
        assert!(guard.is_none());
        assert!(reason(&negative).starts_with("EINVAL"));

        let live = Path::new("/dev/cpu_dma_latency");
        if is_root() && live.exists() {
            let (guard, held) = hold_cpu_dma_latency(live, 0);
            assert!(held.took_effect(), "{held:?}");
            drop(guard);
        }
    }

    #[test]
    fn cheap_queries() {
        let tid = gettid();
        assert!(Path::new(&format!("/proc/self/task/{tid}")).exists());
        assert_ne!(tid, in_thread(gettid));
        let cpus = online_cpu_count();
        assert!(current_cpu().unwrap() < cpus.max(1));
        assert_eq!(RtPolicy::default(), RtPolicy::Fifo);
    }

    /// As root, runs itself again as nobody (uid 65534, no RLIMIT_RTPRIO), which asks for
    /// SCHED_FIFO and SCHED_DEADLINE and prints its report for this to read.
    #[test]
    #[ignore = "needs root (runs itself again as nobody); test.sh runs it as root"]
    fn unprivileged_user_gets_eperm() {
        if std::env::var_os(CHILD_ENV).is_some() {
            let report = apply_to_current_thread(&RtRequest {
                priority: Some(70),
                deadline: Some(audio_deadline()),
                ..RtRequest::default()
            });
            println!("PROBE {}", serde_json::to_string(&report).unwrap());
            return;
        }
        assert!(is_root(), "needs root: it runs its child as nobody");
        use std::os::unix::fs::PermissionsExt;
        use std::os::unix::process::CommandExt;
        // A copy where nobody may run it: the build's own directory may be root's alone (a
        // clone under /root).
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("probe");
        std::fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
        for path in [dir.path(), exe.as_path()] {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let mut child = std::process::Command::new(&exe);
        child
            .args([
                "--exact",
                "sched::tests::unprivileged_user_gets_eperm",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, "1")
            .uid(65534)
            .gid(65534);
        // SAFETY: setrlimit is async-signal-safe and touches only the child's own limits. A
        // nonzero RLIMIT_RTPRIO would rightly let the child become SCHED_FIFO: it gets none.
        unsafe {
            child.pre_exec(|| {
                let none = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                match libc::setrlimit(libc::RLIMIT_RTPRIO, &none) {
                    0 => Ok(()),
                    _ => Err(std::io::Error::last_os_error()),
                }
            });
        }
        let output = child.output().unwrap_or_else(|e| {
            panic!(
                "cannot run the test binary's copy {} as nobody: {e}",
                exe.display()
            )
        });
        let stdout = String::from_utf8_lossy(&output.stdout);
        // The harness prints the test's name on the same line (`test ... ... PROBE {...}`).
        let json = stdout
            .lines()
            .find_map(|l| l.split_once("PROBE ").map(|(_, json)| json))
            .unwrap_or_else(|| {
                panic!(
                    "the unprivileged probe printed no report ({}): {stdout}{}",
                    output.status,
                    String::from_utf8_lossy(&output.stderr)
                )
            });
        let report: ThreadSchedReport = serde_json::from_str(json).unwrap();
        assert_eq!(
            report.priority,
            Outcome::Refused {
                reason: "EPERM: operation not permitted (need CAP_SYS_NICE or an RLIMIT_RTPRIO)"
                    .into(),
                fallback: other_now(),
            }
        );
        assert!(reason(&report.deadline).starts_with("EPERM: "));
        assert_eq!(report.obtained, other_now());
    }
}
