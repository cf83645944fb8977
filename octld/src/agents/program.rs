//! Finding an agent's program, and the version it prints (for `doctor`).

use std::path::{Path, PathBuf};

use octl_proto::{AppError, ErrorKind};

use super::{Mode, Profile};

/// Finds `program` the way a shell would: a path is taken as is, a bare name is looked up
/// in `PATH`.
pub fn find_program(program: &str, path_var: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        p.metadata()
            .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false)
    };
    if program.contains('/') {
        let p = PathBuf::from(program);
        return executable(&p).then_some(p);
    }
    std::env::split_paths(path_var?)
        .map(|dir| dir.join(program))
        .find(|p| executable(p))
}

/// The first line `program --version` prints (within 20 s; agent CLIs on node or python
/// take seconds to start), or why it did not.
pub fn version(program: &str) -> Result<String, String> {
    use std::process::{Command, Stdio};
    let mut child = Command::new(program)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        match child.try_wait().map_err(|e| e.to_string())? {
            Some(_) => break,
            None if std::time::Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err("no answer within 20 s".into());
            }
            None => std::thread::sleep(std::time::Duration::from_millis(50)),
        }
    }
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout);
    let first = text.lines().map(str::trim).find(|l| !l.is_empty());
    match (out.status.success(), first) {
        (true, Some(line)) => Ok(line.to_string()),
        (_, _) => Err(format!(
            "{}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    }
}

/// A missing agent program: kind `tool_missing` (exit 6), before anything is created.
pub fn require_program(
    profile: &Profile,
    mode: Mode,
    path_var: Option<&std::ffi::OsStr>,
) -> Result<PathBuf, AppError> {
    let program = profile.program(mode)?;
    find_program(&program, path_var).ok_or_else(|| {
        AppError::new(
            ErrorKind::ToolMissing,
            format!(
                "the agent program {program:?} of profile {:?} was not found on the daemon's PATH",
                profile.name
            ),
        )
        .with_hint("install it, or choose another profile with --agent (shell needs no AI)")
    })
}
