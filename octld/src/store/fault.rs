//! Errors of the storage under the home: a full disk is `storage_full`, any other failing
//! read, write or sync is `io_error`; both name the path and say how much room is left.

use std::io;
use std::path::Path;

use octl_proto::{AppError, ErrorKind};

/// Free and total bytes of the filesystem holding `path` (what an unprivileged user may use).
/// A path that does not exist (yet, or any more) counts as its nearest existing ancestor.
pub fn free_space(path: &Path) -> Option<(u64, u64)> {
    path.ancestors().find_map(statvfs)
}

fn statvfs(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    if path.as_os_str().is_empty() {
        return None;
    }
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `st` a valid out-parameter.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    let frag = st.f_frsize as u64;
    Some((st.f_bavail as u64 * frag, st.f_blocks as u64 * frag))
}

/// `12.3 MiB`.
pub fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// Whether `e` says that the disk (or the user's quota) is full.
pub fn is_full(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
}

/// The error for `what` (e.g. "could not append to run R") failing on `path` with `e`.
pub fn storage_error(what: &str, path: &Path, e: &io::Error) -> AppError {
    let room = match free_space(path) {
        Some((free, total)) => format!("{} free of {}", mib(free), mib(total)),
        None => "free space unknown".to_string(),
    };
    let message = format!("{what}: {}: {e}", path.display());
    if is_full(e) {
        AppError::new(ErrorKind::StorageFull, message).with_hint(format!(
            "the filesystem of {} is full ({room}): free space (`orchestratectl run gc` removes what ended runs left behind, after snapshotting it), then retry",
            path.display()
        ))
    } else if let Some(why) = crate::nofile::explain(e) {
        AppError::new(ErrorKind::IoError, message).with_hint(why)
    } else if e.raw_os_error() == Some(libc::EROFS) {
        AppError::new(ErrorKind::IoError, message).with_hint(format!(
            "{} is on a read-only filesystem: remount it read-write, or choose another home with --home or OCTL_HOME",
            path.display()
        ))
    } else {
        AppError::new(ErrorKind::IoError, message)
            .with_hint(format!("check the disk (dmesg; {room}), then retry"))
    }
}

/// [`storage_error`] for an append: it says that nothing was recorded and how to retry.
pub fn append_error(run: &str, path: &Path, e: &io::Error) -> AppError {
    let err = storage_error(&format!("could not append to run {run}"), path, e);
    let hint = err.hint.clone().unwrap_or_default();
    err.with_hint(format!(
        "nothing of this append was recorded; {hint} — with the same idempotency key it is recorded once"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_and_hints() {
        let dir = std::env::temp_dir();
        let full = append_error("R", &dir, &io::Error::from_raw_os_error(libc::ENOSPC));
        assert_eq!(full.kind, ErrorKind::StorageFull);
        let hint = full.hint.unwrap();
        assert!(
            hint.starts_with("nothing of this append was recorded"),
            "{hint}"
        );
        assert!(
            hint.contains("MiB free of") && hint.contains("run gc"),
            "{hint}"
        );
        assert!(full.message.contains(&dir.display().to_string()));
        let quota = storage_error("x", &dir, &io::Error::from_raw_os_error(libc::EDQUOT));
        assert_eq!(quota.kind, ErrorKind::StorageFull);
        let ro = storage_error("x", &dir, &io::Error::from_raw_os_error(libc::EROFS));
        assert_eq!(ro.kind, ErrorKind::IoError);
        assert!(ro.hint.unwrap().contains("read-only"));
        let eio = storage_error("x", &dir, &io::Error::from_raw_os_error(libc::EIO));
        assert_eq!(eio.kind, ErrorKind::IoError);
    }

    #[test]
    fn free_space_of_a_path_not_made_yet_is_its_parents() {
        let dir = std::env::temp_dir();
        let (free, total) = free_space(&dir.join("not/made/yet")).unwrap();
        assert!(total > 0 && free <= total);
    }
}
