//! The open-file limit (`RLIMIT_NOFILE`). The daemon holds no descriptor per run (a log is
//! opened for each group commit, a finished run holds nothing), so what it needs grows with
//! its connections and the git and tmux processes it runs at once, not with its runs; it
//! still raises its soft limit to the hard one at start, as far as the system allows (what
//! Go's runtime and most servers do), and an error that hits the limit names it.

use std::io;

/// Descriptors kept back from connections for logs, projections, git, tmux and the agents'
/// launch: a fan-out starting several agents at once opens a few pipes for each.
const RESERVE: u64 = 96;
/// Connections served at once, at most.
const MAX_CONNECTIONS: u64 = 512;

/// The soft and hard limits now.
pub fn limits() -> (u64, u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid out-parameter.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return (1024, 1024);
    }
    // `rlim_t` is 32 bits wide on some 32-bit systems.
    #[allow(clippy::unnecessary_cast)]
    (lim.rlim_cur as u64, lim.rlim_max as u64)
}

/// Raises the soft limit to the hard one (on macOS at most `OPEN_MAX`, 10,240, which is what
/// its kernel takes for an unlimited hard limit). Returns the soft limit before and after.
pub fn raise() -> (u64, u64) {
    let (soft, hard) = limits();
    if soft >= hard {
        return (soft, soft);
    }
    for want in [hard, hard.min(10_240)] {
        let lim = libc::rlimit {
            rlim_cur: want as libc::rlim_t,
            rlim_max: hard as libc::rlim_t,
        };
        // SAFETY: `lim` is a valid rlimit.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } == 0 {
            return (soft, want);
        }
    }
    (soft, soft)
}

/// How many connections the server keeps open at once under the limit now.
pub fn connections() -> usize {
    let (soft, _) = limits();
    soft.saturating_sub(RESERVE).clamp(16, MAX_CONNECTIONS) as usize
}

/// Whether `e` says the process (EMFILE) or the system (ENFILE) is out of descriptors.
pub fn exhausted(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE))
}

/// What to tell a person about an error that hit the limit; `None` for any other error.
pub fn explain(e: &io::Error) -> Option<String> {
    match e.raw_os_error() {
        Some(libc::EMFILE) => {
            let (soft, hard) = limits();
            Some(format!(
                "octld has as many files open as its limit allows ({soft}; hard limit {hard}): raise it with `ulimit -n` (or LimitNOFILE= in the service unit) before starting octld"
            ))
        }
        Some(libc::ENFILE) => Some(
            "the system's table of open files is full (fs.file-max): close programs, or raise the limit".to_string(),
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_is_named_only_for_its_errors() {
        let hit = io::Error::from_raw_os_error(libc::EMFILE);
        assert!(exhausted(&hit));
        let said = explain(&hit).unwrap();
        assert!(said.contains("ulimit -n"), "{said}");
        assert!(said.contains(&limits().0.to_string()), "{said}");
        assert!(explain(&io::Error::from_raw_os_error(libc::ENOENT)).is_none());
        assert!(connections() >= 16);
    }
}
