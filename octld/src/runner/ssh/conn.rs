//! One SSH host as the runner reaches it: a master connection per host (`ControlMaster`, its
//! socket under `$OCTL_HOME/ssh/`, `ControlPersist`), every call through it in batch mode
//! (never a prompt) and under a deadline of ours, so a host that stops answering costs one
//! bounded wait, never a hung supervisor.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use octl_proto::{AppError, ErrorKind};

use super::super::Result;
use crate::tmux::sh_quote;

/// Seconds `ssh` may take to connect.
pub const CONNECT_TIMEOUT_S: u32 = 5;

/// How long a master connection outlives its last use.
const PERSIST: &str = "600";

/// A host and the socket of its master connection.
#[derive(Debug, Clone)]
pub struct Conn {
    /// As `ssh` names it (`host`, `user@host`, a `Host` of the ssh config).
    pub host: String,
    control: PathBuf,
    /// Held while a master connection is started: two at once would race for its socket.
    starting: std::sync::Arc<std::sync::Mutex<()>>,
    /// Calls in a row that got no answer in time (see [`Conn::timed_out`]).
    late: std::sync::Arc<std::sync::atomic::AtomicU32>,
}

/// Calls in a row without an answer in time after which the master connection is dropped.
const LATE_BEFORE_DROP: u32 = 2;

/// FNV-1a, hex: a short stable name (Rust's own hasher may change between builds).
pub fn hash(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

impl Conn {
    /// `dir` holds the master sockets (`$OCTL_HOME/ssh`); named by a hash of the host, not
    /// ssh's `%C`, to stay within a socket path's 108 bytes under a long home.
    pub fn new(host: &str, dir: &Path) -> Conn {
        Conn {
            host: host.to_string(),
            control: dir.join(hash(host.as_bytes())),
            starting: Default::default(),
            late: Default::default(),
        }
    }

    /// The options of every call: through the master if there is one, batch mode, bounded
    /// connect, a dead link noticed within 15 s.
    fn options(&self) -> Vec<String> {
        let path = self.control.display().to_string().replace('%', "%%");
        [
            "-o".to_string(),
            format!("ControlPath={path}"),
            "-o".into(),
            "BatchMode=yes".into(),
            "-o".into(),
            format!("ConnectTimeout={CONNECT_TIMEOUT_S}"),
            "-o".into(),
            "ServerAliveInterval=5".into(),
            "-o".into(),
            "ServerAliveCountMax=3".into(),
        ]
        .into()
    }

    fn ssh(&self) -> Command {
        let mut cmd = Command::new("ssh");
        cmd.args(self.options());
        cmd
    }

    /// Makes sure a master connection runs (started in the background, `-f`, with its
    /// stdio closed, so no caller waits on a pipe it keeps open).
    fn master(&self, timeout: Duration) -> Result<()> {
        let _one = self.starting.lock().unwrap_or_else(|e| e.into_inner());
        let check = self
            .ssh()
            .args(["-O", "check", "--", &self.host])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if check.is_ok_and(|s| s.success()) {
            return Ok(());
        }
        if let Some(dir) = self.control.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| AppError::internal(format!("cannot create {}: {e}", dir.display())))?;
        }
        let mut cmd = self.ssh();
        cmd.args([
            "-o",
            "ControlMaster=yes",
            "-o",
            &format!("ControlPersist={PERSIST}"),
            "-f",
            "-N",
            "--",
            &self.host,
        ]);
        let out = bounded(cmd, None, timeout)?;
        match out {
            Some(o) if o.status.success() => Ok(()),
            Some(o) => Err(unreachable(
                &self.host,
                String::from_utf8_lossy(&o.stderr).trim(),
            )),
            None => Err(unreachable(&self.host, "no answer in time")),
        }
    }

    /// A call got no answer in time. A link that went down leaves a master that hangs every
    /// call until its keep-alive gives up, so the master is dropped — but only once calls in a
    /// row went unanswered: one slow call on a loaded host would otherwise cut off every
    /// session the master carries (a fetch, a push) along with it.
    fn timed_out(&self) {
        use std::sync::atomic::Ordering;
        if self.late.fetch_add(1, Ordering::AcqRel) + 1 >= LATE_BEFORE_DROP {
            self.late.store(0, Ordering::Release);
            self.drop_master();
        }
    }

    /// A call was answered.
    fn answered(&self) {
        self.late.store(0, std::sync::atomic::Ordering::Release);
    }

    /// Drops the master connection (its sessions end with it).
    pub fn drop_master(&self) {
        let _ = self
            .ssh()
            .args(["-O", "exit", "--", &self.host])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }

    /// Runs `script` with `sh` on the host (its stdin: `input`), within `timeout`; its stdout.
    pub fn run(&self, script: &str, input: Option<&[u8]>, timeout: Duration) -> Result<Vec<u8>> {
        self.master(timeout)?;
        let mut cmd = self.ssh();
        cmd.args(["-o", "ControlMaster=no", "--", &self.host])
            .arg(format!("sh -c {}", sh_quote(script)));
        match bounded(cmd, input, timeout)? {
            Some(o) if o.status.success() => {
                self.answered();
                Ok(o.stdout)
            }
            // 255: ssh's own failure (the host, not the script).
            Some(o) if o.status.code() == Some(255) => Err(unreachable(
                &self.host,
                String::from_utf8_lossy(&o.stderr).trim(),
            )),
            Some(o) => Err(AppError::new(
                ErrorKind::ToolFailed,
                format!(
                    "on {}: {} ({})",
                    self.host,
                    String::from_utf8_lossy(&o.stderr).trim(),
                    o.status
                ),
            )),
            None => {
                self.timed_out();
                Err(unreachable(
                    &self.host,
                    &format!("no answer within {} s", timeout.as_secs_f32()),
                ))
            }
        }
    }

    /// `GIT_SSH_COMMAND` for git's own transport to this host, through the same master.
    pub fn git_ssh(&self) -> String {
        let mut words = vec!["ssh".to_string()];
        words.extend(self.options());
        words.extend(["-o".to_string(), "ControlMaster=no".to_string()]);
        words
            .iter()
            .map(|w| sh_quote(w).into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// A git command of the daemon's against this host (`push`, `fetch`), within `timeout`.
    pub fn git(&self, dir: &Path, args: &[&str], timeout: Duration) -> Result<()> {
        self.master(timeout)?;
        let mut cmd = Command::new("git");
        cmd.current_dir(dir)
            .args(args)
            .env("LC_ALL", "C")
            .env("GIT_SSH_COMMAND", self.git_ssh())
            .env("GIT_TERMINAL_PROMPT", "0");
        match bounded(cmd, None, timeout)? {
            Some(o) if o.status.success() => {
                self.answered();
                Ok(())
            }
            Some(o) if String::from_utf8_lossy(&o.stderr).contains(GIT_UNREACHED) => {
                Err(unreachable(
                    &self.host,
                    &format!(
                        "git {} could not reach it: {}",
                        args.first().unwrap_or(&""),
                        String::from_utf8_lossy(&o.stderr).trim()
                    ),
                ))
            }
            Some(o) => Err(AppError::new(
                ErrorKind::ToolFailed,
                format!(
                    "git {} with {} failed: {}",
                    args.first().unwrap_or(&""),
                    self.host,
                    String::from_utf8_lossy(&o.stderr).trim()
                ),
            )),
            None => {
                self.timed_out();
                Err(unreachable(
                    &self.host,
                    &format!(
                        "git {} did not end within {} s",
                        args.first().unwrap_or(&""),
                        timeout.as_secs_f32()
                    ),
                ))
            }
        }
    }

    /// `ssh -t HOST COMMAND` through the master, for a terminal (attach).
    pub fn interactive(&self, command: &str) -> Vec<String> {
        let mut argv = vec!["ssh".to_string()];
        argv.extend(self.options());
        argv.extend(["-t".to_string(), "--".to_string(), self.host.clone()]);
        argv.push(command.to_string());
        argv
    }
}

/// A host that did not answer: kind `timeout`, which a start takes for "no room now" (the
/// node waits) rather than a failure of the node (see `Runner::start`).
fn unreachable(host: &str, why: &str) -> AppError {
    AppError::new(
        ErrorKind::Timeout,
        format!("ssh host {host} does not answer: {why}"),
    )
}

/// What git prints when its transport (here: ssh to the host) failed, not the command.
const GIT_UNREACHED: &str = "Could not read from remote repository";

/// Runs `cmd` to its end or until `timeout` (then it is killed: `None`).
pub(crate) fn bounded(
    mut cmd: Command,
    input: Option<&[u8]>,
    timeout: Duration,
) -> Result<Option<Output>> {
    cmd.stdin(if input.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| {
        AppError::new(
            ErrorKind::ToolMissing,
            format!("cannot run {:?}: {e}", cmd.get_program()),
        )
    })?;
    if let (Some(bytes), Some(mut stdin)) = (input, child.stdin.take()) {
        let bytes = bytes.to_vec();
        std::thread::spawn(move || {
            let _ = stdin.write_all(&bytes);
        });
    }
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(timeout) {
        Ok(out) => out
            .map(Some)
            .map_err(|e| AppError::internal(format!("waiting for {:?}: {e}", cmd.get_program()))),
        Err(_) => {
            // SAFETY: kill(2) of our own child, which has not been reaped (its waiter is
            // blocked on it); SIGKILL ends it and so its wait.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            Ok(None)
        }
    }
}
