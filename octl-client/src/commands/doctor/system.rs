//! The checks of this machine: git and tmux on PATH with their versions, the modes of the home
//! and the daemon's socket, and the free space of the home's filesystem.

use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Stdio};

use super::Check;
use crate::client::find_on_path;

/// The oldest git with `merge-tree --write-tree`.
pub(super) const GIT_MIN: (u32, u32) = (2, 38);
pub(super) const TMUX_MIN: (u32, u32) = (3, 0);

// -------------------------------------------------------------------------------------------
// tools

/// `git version 2.47.3` → (2, 47); `tmux 3.3a` → (3, 3); `tmux next-3.5` → (3, 5).
pub fn parse_version(text: &str) -> Option<(u32, u32)> {
    let word = text.split_whitespace().find(|w| {
        let w = w.trim_start_matches(|c: char| c.is_ascii_alphabetic() || c == '-');
        w.chars().next().is_some_and(|c| c.is_ascii_digit()) && w.contains('.')
    })?;
    let word = word.trim_start_matches(|c: char| c.is_ascii_alphabetic() || c == '-');
    let mut parts = word.split('.').map(|p| {
        let end = p.find(|c: char| !c.is_ascii_digit()).unwrap_or(p.len());
        p[..end].parse::<u32>().ok()
    });
    Some((parts.next()??, parts.next()??))
}

fn tool_check(
    id: &'static str,
    program: &str,
    args: &[&str],
    min: (u32, u32),
    install: &str,
) -> Check {
    let Some(path) = find_on_path(program) else {
        return Check::fail(
            id,
            format!("{program} is not installed (no {program} program on PATH)"),
            format!("install {program} {}.{} or newer ({install})", min.0, min.1),
        );
    };
    let out = Command::new(&path)
        .args(args)
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .output();
    let text = match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        Ok(o) => {
            return Check::fail(
                id,
                format!(
                    "`{} {}` failed: {}",
                    path.display(),
                    args.join(" "),
                    String::from_utf8_lossy(&o.stderr).trim()
                ),
                format!("reinstall {program} ({install})"),
            )
        }
        Err(e) => {
            return Check::fail(
                id,
                format!("cannot run {}: {e}", path.display()),
                format!("reinstall {program} ({install})"),
            )
        }
    };
    match parse_version(&text) {
        Some(v) if v >= min => Check::ok(id, text),
        Some(_) => Check::fail(
            id,
            format!("{text} is too old: {}.{} or newer is needed", min.0, min.1),
            format!("upgrade {program} ({install})"),
        ),
        None => Check::warn(
            id,
            format!("cannot read a version in {text:?}"),
            format!(
                "make sure {} is {program} {}.{} or newer",
                path.display(),
                min.0,
                min.1
            ),
        ),
    }
}

pub(super) fn check_git() -> Check {
    tool_check(
        "git",
        "git",
        &["version"],
        GIT_MIN,
        "merge-tree --write-tree appeared in 2.38; e.g. apt install git, brew install git",
    )
}

pub(super) fn check_tmux() -> Check {
    tool_check(
        "tmux",
        "tmux",
        &["-V"],
        TMUX_MIN,
        "e.g. apt install tmux, brew install tmux",
    )
}

// -------------------------------------------------------------------------------------------
// permissions

fn my_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

pub(super) fn check_home(home: &Path) -> Check {
    let id = "home-mode";
    let meta = match std::fs::metadata(home) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Check::skip(
            id,
            format!("skipped ({} does not exist yet)", home.display()),
            "the daemon creates it (mode 0700) when it first starts: `orchestratectl daemon start`",
        ),
        Err(e) => {
            return Check::fail(
                id,
                format!("cannot read {}: {e}", home.display()),
                "check the permissions of its parent directories",
            )
        }
    };
    if !meta.is_dir() {
        return Check::fail(
            id,
            format!("{} is not a directory", home.display()),
            "move it away, or choose another home with --home or OCTL_HOME",
        );
    }
    let mode = meta.permissions().mode() & 0o777;
    if meta.uid() != my_uid() {
        return Check::fail(
            id,
            format!(
                "{} belongs to uid {}, not to you (uid {})",
                home.display(),
                meta.uid(),
                my_uid()
            ),
            "use a home of your own (--home or OCTL_HOME)",
        );
    }
    if mode != 0o700 {
        return Check::fail(
            id,
            format!("{} has mode {mode:04o}; want 0700", home.display()),
            format!(
                "chmod 700 {} (the daemon's socket and runs must be private)",
                crate::output::shell_word(&home.display().to_string())
            ),
        );
    }
    Check::ok(id, format!("{} is yours, mode 0700", home.display()))
}

/// Below the first, the home's filesystem is nearly full; below the second (a small one
/// mostly free), it has little room.
const DISK_LOW_FRACTION: f64 = 0.05;
const DISK_LOW_BYTES: u64 = 100 << 20;

/// Free and total bytes of the filesystem holding `path` (or its nearest existing ancestor).
fn free_space(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    path.ancestors().find_map(|p| {
        let c = std::ffi::CString::new(p.as_os_str().as_bytes()).ok()?;
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: `c` is a NUL-terminated path and `st` a valid out-parameter.
        if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
            return None;
        }
        let frag = st.f_frsize as u64;
        Some((st.f_bavail as u64 * frag, st.f_blocks as u64 * frag))
    })
}

pub(super) fn check_disk(home: &Path) -> Check {
    let id = "disk";
    let Some((free, total)) = free_space(home) else {
        return Check::warn(
            id,
            format!("cannot read the free space of {}", home.display()),
            "check that the home's filesystem is mounted and readable",
        );
    };
    disk_verdict(home, free, total)
}

pub(super) fn disk_verdict(home: &Path, free: u64, total: u64) -> Check {
    let id = "disk";
    let mib = |b: u64| format!("{:.1} MiB", b as f64 / (1024.0 * 1024.0));
    let pct = if total == 0 {
        0.0
    } else {
        free as f64 * 100.0 / total as f64
    };
    let message = format!(
        "{} free of {} ({pct:.1} %) on the filesystem of {}",
        mib(free),
        mib(total),
        home.display()
    );
    let hint = "free space there: `orchestratectl run gc` removes what ended runs left behind (after snapshotting it); on a full disk every append is refused with storage_full and nothing half-written stays";
    if free == 0 {
        Check::fail(id, format!("full: {message}"), hint)
    } else if (free as f64) < total as f64 * DISK_LOW_FRACTION {
        Check::warn(id, format!("nearly full: {message}"), hint)
    } else if free < DISK_LOW_BYTES {
        // A small filesystem (a tmpfs, a quota) can be mostly free and still too small.
        Check::warn(
            id,
            format!(
                "little room: {message}, less than the {} a few runs' worktrees and logs want",
                mib(DISK_LOW_BYTES)
            ),
            hint,
        )
    } else {
        Check::ok(id, message)
    }
}

/// The warm worktree pool (`$OCTL_HOME/pool/<KEY>/<ID>/`, see docs/CONFIGURATION.md, "Worktrees ready
/// to work in"): its entries hold no work, so this only says what disk they take.
pub(super) fn check_pool(home: &Path) -> Check {
    let id = "pool";
    let pool = home.join("pool");
    let dirs = |p: &Path| -> Vec<std::path::PathBuf> {
        std::fs::read_dir(p)
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.path())
            .collect()
    };
    let (mut repos, mut ready, mut other) = (0, 0, 0);
    for key in dirs(&pool) {
        repos += 1;
        for entry in dirs(&key) {
            let name = entry.file_name().unwrap_or_default().to_string_lossy();
            if name.ends_with(".discard") || key.join(format!("{name}.making")).exists() {
                other += 1;
            } else {
                ready += 1;
            }
        }
    }
    if repos == 0 {
        return Check::ok(
            id,
            "worktree pool: empty (a repository is pooled once a spawn in it checked out [pool] min_files files)",
        );
    }
    let mut message = format!(
        "worktree pool: {ready} ready worktree(s) for {repos} repositories in {}",
        pool.display()
    );
    if other > 0 {
        message.push_str(&format!(
            "; {other} being made or left half-made (never handed out: the daemon discards what a crash left at its start, `run gc` too)"
        ));
    }
    Check::ok(id, message)
}

pub(super) fn check_socket(socket: &Path, up: bool) -> Check {
    let id = "socket-mode";
    let shown = crate::output::shell_word(&socket.display().to_string());
    let meta = match std::fs::symlink_metadata(socket) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Check::skip(
                id,
                format!(
                    "skipped (no socket at {} while the daemon is not running)",
                    socket.display()
                ),
                "run doctor again once the daemon runs",
            )
        }
        Err(e) => {
            return Check::fail(
                id,
                format!("cannot read {}: {e}", socket.display()),
                "check the permissions of the home",
            )
        }
    };
    if !meta.file_type().is_socket() {
        return Check::fail(
            id,
            format!("{} is not a socket", socket.display()),
            format!(
                "{}remove it (rm {shown}) and start the daemon again",
                if up { "stop the daemon, " } else { "" }
            ),
        );
    }
    if meta.uid() != my_uid() {
        return Check::fail(
            id,
            format!(
                "{} belongs to uid {}, not to you (uid {})",
                socket.display(),
                meta.uid(),
                my_uid()
            ),
            "stop whatever made it and use a home of your own",
        );
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode != 0o600 {
        return Check::fail(
            id,
            format!("{} has mode {mode:04o}; want 0600", socket.display()),
            format!("chmod 600 {shown}, or restart the daemon (it creates its socket 0600)"),
        );
    }
    Check::ok(id, format!("{} is yours, mode 0600", socket.display()))
}
