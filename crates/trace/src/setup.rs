//! Getting to the kernel's tracepoints: finding (or mounting) tracefs, reading the event
//! formats, and saying exactly why tracing is impossible when it is. Runs once, on the thread
//! that calls [`crate::Tracer::start`].

use crate::decode::{EventSpec, EVENTS};
use crate::format::EventFormat;
use serde::Serialize;
use std::ffi::CString;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// Why kernel tracing cannot run here. The `Display` text is one sentence for the run summary:
/// what is missing, what was found instead, and what would fix it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TraceUnavailable {
    /// The process is not root, and the step named in `needed_for` requires it.
    NotRoot {
        /// Effective user id of the process.
        euid: u32,
        /// What needed root, e.g. "mounting tracefs".
        needed_for: String,
    },
    /// The kernel has no tracefs, or it is not mounted and could not be.
    NoTracefs {
        /// What was looked for and what happened.
        reason: String,
    },
    /// Kernel lockdown forbids reading trace data.
    LockedDown {
        /// The lockdown file's content, e.g. `none integrity [confidentiality]`.
        mode: String,
    },
    /// An event the blame card needs does not exist or its format does not parse.
    MissingEvent {
        /// `system:name`, e.g. `sched:sched_switch`.
        event: String,
        /// What went wrong.
        reason: String,
    },
    /// perf_event_open refused a tracepoint.
    PerfRefused {
        /// `system:name`.
        event: String,
        /// The CPU it was opened for.
        cpu: usize,
        /// errno and the relevant setting.
        reason: String,
    },
    /// The CPU list was empty or named a CPU that does not exist.
    BadCpus {
        /// What was wrong with it.
        reason: String,
    },
}

impl fmt::Display for TraceUnavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TraceUnavailable::NotRoot { euid, needed_for } => write!(
                f,
                "kernel tracing needs root for {needed_for} (running as uid {euid}); \
                 `xrunlab doctor` names the least privilege that does, or run without --explain"
            ),
            TraceUnavailable::NoTracefs { reason } => {
                write!(f, "kernel tracing unavailable: {reason}")
            }
            TraceUnavailable::LockedDown { mode } => write!(
                f,
                "kernel tracing is forbidden by kernel lockdown (/sys/kernel/security/lockdown: \
                 {mode}); boot with lockdown=none or integrity to trace"
            ),
            TraceUnavailable::MissingEvent { event, reason } => {
                write!(f, "kernel event {event} unavailable: {reason}")
            }
            TraceUnavailable::PerfRefused { event, cpu, reason } => write!(
                f,
                "perf_event_open refused tracepoint {event} on CPU {cpu}: {reason}"
            ),
            TraceUnavailable::BadCpus { reason } => write!(f, "cannot trace CPUs: {reason}"),
        }
    }
}

impl std::error::Error for TraceUnavailable {}

/// Where the tracer looks for things; fixtures replace these in tests.
#[derive(Debug, Clone)]
pub struct Roots {
    /// procfs, normally `/proc`.
    pub proc_root: PathBuf,
    /// sysfs, normally `/sys`.
    pub sys_root: PathBuf,
    /// tracefs to use as is; `None` finds it through `<proc_root>/mounts` or mounts it at
    /// `<sys_root>/kernel/tracing`.
    pub tracefs: Option<PathBuf>,
    /// Whether to mount tracefs when it is not mounted (only ever at `<sys_root>/kernel/tracing`).
    pub mount_if_needed: bool,
}

impl Default for Roots {
    fn default() -> Roots {
        Roots {
            proc_root: PathBuf::from(xrunlab_sys::DEFAULT_PROC_ROOT),
            sys_root: PathBuf::from(xrunlab_sys::DEFAULT_SYS_ROOT),
            tracefs: None,
            mount_if_needed: true,
        }
    }
}

/// What setup found: the tracefs in use, whether we mounted it, and the event formats.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The tracefs directory whose `events/` was read.
    pub tracefs: PathBuf,
    /// True when this process mounted it (it stays mounted: other tools expect it there).
    pub mounted_by_us: bool,
    /// Formats of the events found, required and optional.
    pub formats: Vec<(EventSpec, EventFormat)>,
    /// Optional events this kernel lacks, as `system:name`.
    pub missing_optional: Vec<String>,
    /// Opt-in events not asked for, as `system:name`.
    pub left_out: Vec<String>,
}

pub(crate) fn euid() -> u32 {
    // SAFETY: geteuid takes no arguments and cannot fail.
    unsafe { libc::geteuid() }
}

/// Checks lockdown, finds or mounts tracefs and reads the formats of [`EVENTS`] (the opt-in
/// ones only with `opt_in`).
pub fn prepare(roots: &Roots, opt_in: bool) -> Result<Prepared, TraceUnavailable> {
    check_lockdown(&roots.sys_root)?;
    let (tracefs, mounted_by_us) = locate_tracefs(roots)?;
    let mut formats = Vec::new();
    let mut missing_optional = Vec::new();
    let mut left_out = Vec::new();
    for spec in EVENTS {
        let name = format!("{}:{}", spec.system, spec.name);
        if spec.opt_in && !opt_in {
            left_out.push(name);
            continue;
        }
        let path = tracefs
            .join("events")
            .join(spec.system)
            .join(spec.name)
            .join("format");
        let parsed = std::fs::read_to_string(&path)
            .map_err(|e| read_error(&path, &e))
            .and_then(|text| {
                EventFormat::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
            });
        match parsed {
            Ok(format) => formats.push((*spec, format)),
            Err(_) if !spec.required => missing_optional.push(name),
            Err(reason) => {
                if path.exists() && euid() != 0 {
                    return Err(TraceUnavailable::NotRoot {
                        euid: euid(),
                        needed_for: "reading tracefs event formats (or CAP_DAC_READ_SEARCH, \
                                     or tracefs mounted with one of this user's groups)"
                            .to_owned(),
                    });
                }
                return Err(TraceUnavailable::MissingEvent {
                    event: name,
                    reason,
                });
            }
        }
    }
    Ok(Prepared {
        tracefs,
        mounted_by_us,
        formats,
        missing_optional,
        left_out,
    })
}

fn read_error(path: &Path, e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::NotFound => format!("{} does not exist", path.display()),
        _ => format!("cannot read {}: {e}", path.display()),
    }
}

fn check_lockdown(sys_root: &Path) -> Result<(), TraceUnavailable> {
    let path = sys_root.join("kernel/security/lockdown");
    // Absent file: no lockdown LSM, nothing forbids tracing.
    let Ok(mode) = std::fs::read_to_string(path) else {
        return Ok(());
    };
    let mode = mode.trim().to_owned();
    if mode.contains("[confidentiality]") {
        return Err(TraceUnavailable::LockedDown { mode });
    }
    Ok(())
}

/// True when `dir` looks like a mounted tracefs (it has the `events` directory).
fn is_tracefs(dir: &Path) -> bool {
    dir.join("events").is_dir()
}

fn locate_tracefs(roots: &Roots) -> Result<(PathBuf, bool), TraceUnavailable> {
    if let Some(dir) = &roots.tracefs {
        return if is_tracefs(dir) {
            Ok((dir.clone(), false))
        } else {
            Err(TraceUnavailable::NoTracefs {
                reason: format!("{} is not a tracefs (no events/ directory)", dir.display()),
            })
        };
    }
    let mounts = std::fs::read_to_string(roots.proc_root.join("mounts")).unwrap_or_default();
    let mounted: Vec<PathBuf> = mounts
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let _dev = it.next()?;
            let dir = it.next()?;
            (it.next()? == "tracefs").then(|| PathBuf::from(dir))
        })
        .collect();
    if let Some(dir) = mounted.iter().find(|d| is_tracefs(d)) {
        return Ok((dir.clone(), false));
    }
    // Mounted, but its root is closed to this user (the kernel makes it 0700 root): say so
    // rather than try to mount it again.
    if let Some(dir) = mounted
        .iter()
        .find(|d| std::fs::read_dir(d).is_err_and(|e| e.kind() == io::ErrorKind::PermissionDenied))
    {
        return Err(TraceUnavailable::NotRoot {
            euid: euid(),
            needed_for: format!(
                "reading tracefs at {} (or CAP_DAC_READ_SEARCH, or tracefs mounted with one \
                 of this user's groups)",
                dir.display()
            ),
        });
    }
    let target = roots.sys_root.join("kernel/tracing");
    if is_tracefs(&target) {
        return Ok((target, false));
    }
    let filesystems_path = roots.proc_root.join("filesystems");
    let filesystems = std::fs::read_to_string(&filesystems_path).unwrap_or_default();
    if !filesystems.split_whitespace().any(|fs| fs == "tracefs") {
        return Err(TraceUnavailable::NoTracefs {
            reason: format!(
                "this kernel has no tracefs ({} does not list it; CONFIG_TRACING is off)",
                filesystems_path.display()
            ),
        });
    }
    if !roots.mount_if_needed {
        return Err(TraceUnavailable::NoTracefs {
            reason: format!(
                "tracefs is not mounted and mounting was not allowed; \
                 run `mount -t tracefs nodev {}`",
                target.display()
            ),
        });
    }
    if euid() != 0 {
        return Err(TraceUnavailable::NotRoot {
            euid: euid(),
            needed_for: format!(
                "mounting tracefs at {} (or CAP_SYS_ADMIN)",
                target.display()
            ),
        });
    }
    mount_tracefs(&target).map_err(|e| TraceUnavailable::NoTracefs {
        reason: format!(
            "tracefs is not mounted and `mount -t tracefs nodev {}` failed: {e}",
            target.display()
        ),
    })?;
    if !is_tracefs(&target) {
        return Err(TraceUnavailable::NoTracefs {
            reason: format!(
                "mounted tracefs at {} but it has no events/ directory",
                target.display()
            ),
        });
    }
    Ok((target, true))
}

fn mount_tracefs(target: &Path) -> io::Result<()> {
    let path = CString::new(target.as_os_str().as_encoded_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))?;
    // SAFETY: all pointers are NUL-terminated strings that live across the call; data is null,
    // which tracefs accepts (no mount options).
    let rc = unsafe {
        libc::mount(
            c"nodev".as_ptr(),
            path.as_ptr(),
            c"tracefs".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The value of `kernel.perf_event_paranoid`, for error messages.
pub(crate) fn perf_paranoid(proc_root: &Path) -> Option<i32> {
    std::fs::read_to_string(proc_root.join("sys/kernel/perf_event_paranoid"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    use xrunlab_testkit::FixtureTree as Fixture;

    fn roots(fx: &Fixture) -> Roots {
        Roots {
            proc_root: fx.path().join("proc"),
            sys_root: fx.path().join("sys"),
            tracefs: None,
            mount_if_needed: true,
        }
    }

    #[test]
    fn a_kernel_without_tracefs_is_named_as_the_reason() {
        let fx = Fixture::new("notracefs");
        fx.write("proc/filesystems", "nodev\tsysfs\nnodev\tproc\n\text4\n");
        fx.write("proc/mounts", "proc /proc proc rw 0 0\n");
        std::fs::create_dir_all(fx.path().join("sys/kernel/tracing")).unwrap();
        let err = prepare(&roots(&fx), false).unwrap_err();
        assert!(matches!(err, TraceUnavailable::NoTracefs { .. }), "{err:?}");
        let text = err.to_string();
        assert!(text.contains("this kernel has no tracefs"), "{text}");
        assert!(text.contains("CONFIG_TRACING"), "{text}");
    }

    #[test]
    fn lockdown_confidentiality_is_named_with_its_mode() {
        let fx = Fixture::new("lockdown");
        fx.write(
            "sys/kernel/security/lockdown",
            "none integrity [confidentiality]\n",
        );
        let err = prepare(&roots(&fx), false).unwrap_err();
        assert_eq!(
            err,
            TraceUnavailable::LockedDown {
                mode: "none integrity [confidentiality]".into()
            }
        );
        assert!(err.to_string().contains("lockdown"));
    }

    #[test]
    fn unmounted_tracefs_without_permission_to_mount_says_how_to_mount() {
        let fx = Fixture::new("nomount");
        fx.write("proc/filesystems", "nodev\ttracefs\n");
        let mut roots = roots(&fx);
        roots.mount_if_needed = false;
        let err = prepare(&roots, false).unwrap_err().to_string();
        assert!(err.contains("mount -t tracefs nodev"), "{err}");
    }

    #[test]
    fn a_missing_required_event_is_named_and_optional_ones_are_listed() {
        let fx = Fixture::new("events");
        let tfs = fx.path().join("tracefs");
        for spec in EVENTS
            .iter()
            .filter(|s| s.required && s.name != "sched_waking")
        {
            let format = crate::decode::tests::SWITCH.replace("sched_switch", spec.name);
            fx.write(
                &format!("tracefs/events/{}/{}/format", spec.system, spec.name),
                &format,
            );
        }
        let mut roots = roots(&fx);
        roots.tracefs = Some(tfs);
        let err = prepare(&roots, false).unwrap_err();
        match err {
            TraceUnavailable::MissingEvent { event, reason } => {
                assert_eq!(event, "sched:sched_waking");
                assert!(reason.contains("does not exist"), "{reason}");
            }
            other => panic!("expected MissingEvent, got {other:?}"),
        }
        // With the required event present, the optional ones this fixture lacks are listed.
        fx.write(
            "tracefs/events/sched/sched_waking/format",
            &crate::decode::tests::SWITCH.replace("sched_switch", "sched_waking"),
        );
        let ok = prepare(&roots, false).unwrap();
        assert_eq!(
            ok.formats.len(),
            EVENTS.iter().filter(|s| s.required).count()
        );
        assert_eq!(ok.missing_optional, ["power:cpu_frequency"]);
        assert_eq!(
            ok.left_out,
            [
                "timer:hrtimer_expire_entry",
                "timer:hrtimer_expire_exit",
                "power:cpu_idle"
            ],
            "hrtimer expiry and idle states are left out unless asked for"
        );
        // Asked for, the opt-in events this fixture lacks are missing like optional ones.
        let with_extra = prepare(&roots, true).unwrap();
        assert!(with_extra.left_out.is_empty());
        assert_eq!(
            with_extra.missing_optional,
            [
                "timer:hrtimer_expire_entry",
                "timer:hrtimer_expire_exit",
                "power:cpu_idle",
                "power:cpu_frequency"
            ]
        );
        assert!(!ok.mounted_by_us);
    }
}
