//! Autostart: finding the `octld` program (`$OCTLD_BIN`, beside this executable, on PATH),
//! starting it detached in its own session, and waiting until it answers: what `Client::call`
//! does when the socket does not answer, and what `daemon start` and `daemon restart` do.

use std::ffi::OsString;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use octl_proto::method;
use octl_proto::{AppError, ErrorKind};

use super::{CallError, Client, POLL_INTERVAL, START_DEADLINE};

/// Is autostart turned off by `OCTL_NO_AUTOSTART` (`1`, `true` or `yes`)?
pub fn autostart_disabled(value: Option<OsString>) -> bool {
    match value {
        Some(v) => matches!(
            v.to_string_lossy().trim().to_ascii_lowercase().as_str(),
            "1" | "true" | "yes" | "on"
        ),
        None => false,
    }
}

impl Client {
    /// Starts the daemon detached and waits (≤ 3 s) until it answers `daemon.status`.
    pub async fn start(&self) -> Result<(), AppError> {
        let program = find_octld()?;
        // What the daemon logs from here on is this start's.
        let log = self.home.log();
        let log_from = std::fs::metadata(&log).map_or(0, |m| m.len());
        let mut child = spawn_detached(&program, self.home.dir()).map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                self.unreachable(format!(
                    "cannot start octld: program {} not found",
                    program.display()
                ))
            } else {
                self.unreachable(format!("cannot start {}: {e}", program.display()))
            }
        })?;
        let deadline = Instant::now() + START_DEADLINE;
        let mut last_failure = String::new();
        loop {
            // Bounded by the deadline even if something accepts connections but never answers.
            let left = deadline
                .saturating_duration_since(Instant::now())
                .max(POLL_INTERVAL);
            let probe = self.try_call_method::<method::DaemonStatus>(&method::NoParams {});
            match tokio::time::timeout(left, probe).await {
                Ok(Ok(_)) => return Ok(()),
                Ok(Err(CallError::NotRunning(_) | CallError::Dropped(_))) | Err(_) => {}
                // A daemon in the middle of starting may drop a connection: try again.
                Ok(Err(CallError::Failed(e))) if e.kind == ErrorKind::Internal => {
                    last_failure = format!("; last error: {}", e.message);
                }
                Ok(Err(CallError::Failed(e))) => return Err(e),
            }
            if Instant::now() >= deadline {
                // A first start on a home from before the run index builds it from every
                // log: it says so, and is waited for while it is alive.
                let building = matches!(child.try_wait(), Ok(None))
                    && logged_since(&log, log_from)
                        .iter()
                        .any(|l| l.message == BUILDING_INDEX);
                if !building {
                    break;
                }
            }
            if let Ok(Some(_)) = child.try_wait() {
                // Another start won the lock (two commands, or two followers, started one
                // at once): that daemon is the one to wait for.
                if self
                    .daemon_alive()
                    .is_none_or(|pid| pid == u64::from(child.id()))
                {
                    break;
                }
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
        // Why it stopped, from its log (a detached daemon's stderr goes nowhere).
        let why = logged_since(&log, log_from)
            .into_iter()
            .rev()
            .find(|l| l.level == "ERROR")
            .map(|l| format!(": {}", l.error.unwrap_or(l.message)))
            .unwrap_or_default();
        let other = self
            .daemon_alive()
            .filter(|pid| *pid != u64::from(child.id()));
        if let (Ok(Some(status)), None) = (child.try_wait(), other) {
            return Err(self.unreachable(format!(
                "started {} but it stopped before it answered ({status}){why}{last_failure}",
                program.display(),
            )));
        }
        Err(self.unreachable(format!(
            "started {} but it did not answer on {} within {} s{why}{last_failure}",
            program.display(),
            self.home.socket().display(),
            START_DEADLINE.as_secs()
        )))
    }
}

/// What octld logs while it builds the run index from the logs (`store::open`).
const BUILDING_INDEX: &str = "building the run index from the runs' logs";

/// One line of octld.log, as far as a start needs it.
#[derive(Debug, Default)]
struct Logged {
    level: String,
    message: String,
    error: Option<String>,
}

/// The lines octld.log gained after `from` (at most its last 64 KiB).
fn logged_since(log: &Path, from: u64) -> Vec<Logged> {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut file) = std::fs::File::open(log) else {
        return Vec::new();
    };
    let len = file.metadata().map_or(0, |m| m.len());
    let start = from.max(len.saturating_sub(64 * 1024));
    let mut text = String::new();
    if file.seek(SeekFrom::Start(start)).is_err() || file.read_to_string(&mut text).is_err() {
        return Vec::new();
    }
    text.lines()
        .filter_map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).ok()?;
            let field = |k: &str| v["fields"][k].as_str().map(str::to_string);
            Some(Logged {
                level: v["level"].as_str()?.to_string(),
                message: field("message")?,
                error: field("error"),
            })
        })
        .collect()
}

/// Finds the daemon program: `$OCTLD_BIN`, else `octld` next to this executable, else on PATH.
pub fn find_octld() -> Result<PathBuf, AppError> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|d| d.join("octld")));
    find_octld_in(
        std::env::var_os("OCTLD_BIN"),
        beside,
        std::env::var_os("PATH"),
        &cwd,
    )
}

fn find_octld_in(
    octld_bin: Option<OsString>,
    beside: Option<PathBuf>,
    path_var: Option<OsString>,
    cwd: &Path,
) -> Result<PathBuf, AppError> {
    let not_found = |message: String| {
        AppError::new(ErrorKind::DaemonUnreachable, message)
            .with_hint("install octld next to orchestratectl (`cargo install` puts both in the same directory) or set OCTLD_BIN to its path")
    };
    if let Some(bin) = octld_bin.filter(|v| !v.is_empty()) {
        let bin = PathBuf::from(bin);
        // A bare name is looked up on PATH by exec; a relative path is made absolute because
        // the daemon is started in `/`.
        let bin = if bin.components().count() > 1 && bin.is_relative() {
            cwd.join(bin)
        } else {
            bin
        };
        if bin.components().count() > 1 && !is_executable(&bin) {
            return Err(not_found(format!(
                "cannot start octld: OCTLD_BIN is set to {}, which is not an executable file",
                bin.display()
            )));
        }
        return Ok(bin);
    }
    let mut looked = Vec::new();
    if let Some(candidate) = beside {
        if is_executable(&candidate) {
            return Ok(candidate);
        }
        looked.push(candidate.display().to_string());
    }
    if let Some(path_var) = path_var {
        for dir in std::env::split_paths(&path_var) {
            let candidate = dir.join("octld");
            if is_executable(&candidate) {
                return Ok(candidate);
            }
        }
    }
    looked.push("every directory on PATH".to_string());
    Err(not_found(format!(
        "cannot start octld: no octld program found (OCTLD_BIN is not set; looked at {})",
        looked.join(" and ")
    )))
}

/// Finds a program on PATH (`tmux`, `git`): the first executable file of that name.
pub fn find_on_path(name: &str) -> Option<PathBuf> {
    let path_var = std::env::var_os("PATH")?;
    std::env::split_paths(&path_var)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Starts `octld --home HOME --foreground` in its own session with stdio on /dev/null, in `/`
/// so that it does not hold the caller's working directory.
fn spawn_detached(program: &Path, home: &Path) -> io::Result<std::process::Child> {
    let mut command = Command::new(program);
    command
        .arg("--home")
        .arg(home)
        .arg("--foreground")
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: `setsid` is async-signal-safe and touches no memory of the parent.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() == -1 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    command.spawn()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn autostart_switch() {
        assert!(autostart_disabled(Some("1".into())));
        assert!(autostart_disabled(Some("true".into())));
        assert!(!autostart_disabled(Some("0".into())));
        assert!(!autostart_disabled(Some("".into())));
        assert!(!autostart_disabled(None));
    }

    #[test]
    fn finding_octld() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("octld");
        std::fs::write(&exe, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let cwd = Path::new("/");
        // Beside the CLI.
        assert_eq!(
            find_octld_in(None, Some(exe.clone()), None, cwd).unwrap(),
            exe
        );
        // On PATH.
        let path = std::env::join_paths([Path::new("/nonexistent"), dir.path()]).unwrap();
        assert_eq!(
            find_octld_in(None, Some(PathBuf::from("/nope/octld")), Some(path), cwd).unwrap(),
            exe
        );
        // OCTLD_BIN wins, and a missing one says so.
        let err =
            find_octld_in(Some("/nope/octld".into()), Some(exe.clone()), None, cwd).unwrap_err();
        assert_eq!(err.kind.exit_code(), 5);
        assert!(err.message.contains("OCTLD_BIN"), "{}", err.message);
        // Nowhere: the message says where it looked.
        let err = find_octld_in(None, Some(PathBuf::from("/nope/octld")), None, cwd).unwrap_err();
        assert!(err.message.contains("/nope/octld"), "{}", err.message);
        assert!(err.message.contains("PATH"), "{}", err.message);
        assert_eq!(err.kind, ErrorKind::DaemonUnreachable);
    }
}
