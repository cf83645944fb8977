//! How a child process (git, tmux) ended, in words for people: `exit 128`, `killed by signal
//! 7 (SIGBUS)` — never a bare "killed by a signal".

use std::os::unix::process::ExitStatusExt;

/// The exit code and the killing signal of `status`, as the error types keep them.
pub fn of(status: std::process::ExitStatus) -> (Option<i32>, Option<i32>) {
    (status.code(), status.signal())
}

/// `status` as a shell says it: the exit code, or 128 + the signal that killed it (so a
/// supervisor tells an agent the OOM killer ended from one that exited); 1 when unknown.
pub fn shell_status(status: std::io::Result<std::process::ExitStatus>) -> i32 {
    match status {
        Ok(s) => s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0)),
        Err(_) => 1,
    }
}

/// How a process ended, for people: `exit 128`, `killed by signal 7 (SIGBUS)`.
pub fn display(code: Option<i32>, signal: Option<i32>) -> String {
    match (code, signal) {
        (Some(c), _) => format!("exit {c}"),
        (None, Some(sig)) => match signal_name(sig) {
            Some(name) => format!("killed by signal {sig} ({name})"),
            None => format!("killed by signal {sig}"),
        },
        (None, None) => "ended without an exit status".to_string(),
    }
}

/// `SIGKILL` for 9: the signals a process is commonly ended by.
pub fn signal_name(sig: i32) -> Option<&'static str> {
    Some(match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_end_in_words() {
        assert_eq!(display(Some(1), None), "exit 1");
        assert_eq!(
            display(None, Some(libc::SIGKILL)),
            "killed by signal 9 (SIGKILL)"
        );
        assert_eq!(display(None, Some(64)), "killed by signal 64");
        assert_eq!(display(None, None), "ended without an exit status");
    }
}
