//! The single-writer rule: an exclusive `flock` on `FILE.lock` beside the database, held for the
//! writer's life (the kernel drops it when the process dies, even by `kill -9`), with the
//! holder's pid inside so that a refused recorder can name it. Taken on the recorder's thread
//! that opens the history.

use crate::HistoryError;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

/// The lock file of the database at `db`.
pub fn lock_path(db: &Path) -> PathBuf {
    let mut name = db.file_name().unwrap_or_default().to_os_string();
    name.push(".lock");
    db.with_file_name(name)
}

/// Takes the writer's lock of `db`, or says who holds it.
pub fn take(db: &Path) -> Result<File, HistoryError> {
    let path = lock_path(db);
    let io = |source| HistoryError::Io {
        path: path.clone(),
        source,
    };
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(io)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let mut text = String::new();
            let _ = file.read_to_string(&mut text);
            return Err(HistoryError::Busy {
                path: db.to_path_buf(),
                pid: text.trim().parse().ok(),
            });
        }
        Err(TryLockError::Error(e)) => return Err(io(e)),
    }
    file.set_len(0).map_err(io)?;
    file.rewind().map_err(io)?;
    writeln!(file, "{}", std::process::id()).map_err(io)?;
    Ok(file)
}
