//! The daemon lock: an exclusive `flock` on `octld.lock`, held for the daemon's whole life, with
//! the holder's pid and version inside so a second daemon can say who is in the way.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("another octld (pid {}) holds {path}", pid.map(|p| p.to_string()).unwrap_or_else(|| "unknown".into()))]
    Held { pid: Option<u32>, path: String },
    #[error("cannot open {path}: {source}")]
    Io { path: String, source: io::Error },
}

/// Held while the daemon runs; the flock goes with the file when this is dropped.
#[derive(Debug)]
pub struct DaemonLock {
    _file: File,
}

/// Reads the pid written by the holder of `path`, if any.
pub fn holder_pid(path: &Path) -> Option<u32> {
    let mut text = String::new();
    File::open(path).ok()?.read_to_string(&mut text).ok()?;
    text.split_whitespace().next()?.parse().ok()
}

pub fn acquire(path: &Path) -> Result<DaemonLock, LockError> {
    let io_err = |source| LockError::Io {
        path: path.display().to_string(),
        source,
    };
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(io_err)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            return Err(LockError::Held {
                pid: holder_pid(path),
                path: path.display().to_string(),
            })
        }
        Err(TryLockError::Error(e)) => return Err(io_err(e)),
    }
    file.set_len(0).map_err(io_err)?;
    file.seek(SeekFrom::Start(0)).map_err(io_err)?;
    writeln!(file, "{} {}", std::process::id(), env!("CARGO_PKG_VERSION")).map_err(io_err)?;
    Ok(DaemonLock { _file: file })
}
