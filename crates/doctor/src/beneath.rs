//! Reading and writing a setting's file only where it lives: beneath its tree (procfs or sysfs,
//! or the fixture directory standing in for it), never through a symlink out of it, never a
//! symlink itself, a hard link or anything but a regular file. Used on the main thread by
//! `--apply` and `--undo`, which may run as root on a tree another user can write
//! (`--fs-root`, `--sys-root`...).
//!
//! openat2(2) with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS` resolves the whole path in the
//! kernel, in one step, so a symlink swapped in between a check and the open cannot lead out.
//! Symlinks that stay beneath the root are followed: a real sysfs reaches `scaling_governor`
//! through `cpuN/cpufreq -> ../cpufreq/policyN`.

use nix::fcntl::{openat2, OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::{fstat, SFlag};
use nix::sys::statfs::{fstatfs, PROC_SUPER_MAGIC, SYSFS_MAGIC};
use std::fs::File;
use std::io::{Read, Write};
use std::path::Path;

/// Opens `path`, which must lie under `root`, for reading or writing; the io error says why
/// not (a symlink, a path out of the root, not a regular file, another name for the file).
fn open(root: &Path, path: &Path, write: bool) -> std::io::Result<File> {
    let refuse = |why: String| std::io::Error::new(std::io::ErrorKind::PermissionDenied, why);
    let rel = path.strip_prefix(root).map_err(|_| {
        refuse(format!(
            "it is not under {}, the tree the setting lives in",
            root.display()
        ))
    })?;
    let dir = File::open(root)?;
    let access = if write {
        OFlag::O_WRONLY
    } else {
        OFlag::O_RDONLY
    };
    // No O_CREAT: a setting's file exists or the setting is not there. No O_TRUNC before the
    // checks below. O_NONBLOCK: a FIFO planted in its place must not hang the doctor.
    let how = OpenHow::new()
        .flags(access | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NOCTTY | OFlag::O_NONBLOCK)
        .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    let fd = openat2(&dir, rel, how).map_err(|e| match e {
        nix::errno::Errno::ELOOP => refuse("it is a symlink".into()),
        nix::errno::Errno::EXDEV => refuse(format!(
            "its path leads out of {} (through a symlink or \"..\")",
            root.display()
        )),
        e => std::io::Error::from(e),
    })?;
    let stat = fstat(&fd).map_err(std::io::Error::from)?;
    let kind = SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT;
    if kind == SFlag::S_IFDIR {
        return Err(std::io::Error::from_raw_os_error(libc::EISDIR));
    }
    if kind != SFlag::S_IFREG {
        return Err(refuse("it is not a regular file".into()));
    }
    if stat.st_nlink > 1 {
        return Err(refuse(format!(
            "it has {} names (a hard link to another file)",
            stat.st_nlink
        )));
    }
    Ok(File::from(fd))
}

/// The text of `path` beneath `root` (see the module's rules).
pub fn read(root: &Path, path: &Path) -> std::io::Result<String> {
    let mut text = String::new();
    open(root, path, false)?.read_to_string(&mut text)?;
    Ok(text)
}

/// Replaces the content of `path` beneath `root` with `text` (see the module's rules).
pub fn write(root: &Path, path: &Path, text: &str) -> std::io::Result<()> {
    let mut file = open(root, path, true)?;
    // procfs and sysfs take one write as the whole new value (and refuse a truncate); a
    // fixture tree's file is truncated first, as std::fs::write would.
    let fs = fstatfs(&file)
        .map_err(std::io::Error::from)?
        .filesystem_type();
    if fs != PROC_SUPER_MAGIC && fs != SYSFS_MAGIC {
        file.set_len(0)?;
    }
    file.write_all(text.as_bytes())
}
