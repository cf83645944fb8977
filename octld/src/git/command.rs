//! One git command: its argv kept for error messages, run to completion, exit codes judged.

use std::ffi::OsStr;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use super::{GitError, Result};

/// A prepared git command and its argv, kept for error messages.
pub(super) struct Call {
    pub(super) cmd: Command,
    pub(super) argv: Vec<String>,
    pub(super) dir: Option<PathBuf>,
    pub(super) program: String,
}

impl Call {
    pub(super) fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.cmd.env(key, value);
        self
    }

    pub(super) fn output(
        mut self,
        stdin: Option<&[u8]>,
    ) -> Result<(Output, Vec<String>, Option<PathBuf>)> {
        self.cmd
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = match self.cmd.spawn() {
            Ok(child) => child,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(GitError::Missing {
                    program: self.program,
                })
            }
            Err(source) => {
                return Err(GitError::Spawn {
                    argv: self.argv,
                    source,
                })
            }
        };
        if let Some(input) = stdin {
            // The inputs are small path lists; git reads them before writing much output.
            let mut pipe = child.stdin.take().expect("stdin is piped");
            if let Err(source) = pipe.write_all(input) {
                let _ = child.kill();
                let _ = child.wait();
                return Err(GitError::Spawn {
                    argv: self.argv,
                    source,
                });
            }
        }
        match child.wait_with_output() {
            Ok(out) => Ok((out, self.argv, self.dir)),
            Err(source) => Err(GitError::Spawn {
                argv: self.argv,
                source,
            }),
        }
    }

    /// Runs with no output kept, polling `stop()`; when it says so the process is killed
    /// with everything it started (a hook) and the error says it was stopped. A non-zero exit
    /// is an error.
    pub(super) fn run_until(mut self, stop: &dyn Fn() -> bool) -> Result<()> {
        use std::os::unix::process::CommandExt;
        self.cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = match self.cmd.spawn() {
            Ok(child) => child,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(GitError::Missing {
                    program: self.program,
                })
            }
            Err(source) => {
                return Err(GitError::Spawn {
                    argv: self.argv,
                    source,
                })
            }
        };
        loop {
            match child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if stop() => {
                    // SAFETY: kill(2) on the process group the child leads.
                    unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
                    let _ = child.wait();
                    return Err(GitError::Failed {
                        argv: self.argv,
                        code: None,
                        signal: Some(libc::SIGKILL),
                        stderr: "stopped: the daemon is shutting down".into(),
                    });
                }
                Ok(None) => std::thread::sleep(std::time::Duration::from_millis(20)),
                Err(source) => {
                    return Err(GitError::Spawn {
                        argv: self.argv,
                        source,
                    })
                }
            }
        }
        // Its stderr is small (errors only), so the pipe does not fill while it runs.
        let out = child.wait_with_output().map_err(|source| GitError::Spawn {
            argv: self.argv.clone(),
            source,
        })?;
        if out.status.success() {
            Ok(())
        } else {
            Err(failure(self.argv, self.dir, out.status, &out.stderr))
        }
    }

    /// Runs to completion; any exit status listed in `ok` is returned, others are errors.
    pub(super) fn run_allowing(self, ok: &[i32], stdin: Option<&[u8]>) -> Result<(i32, Output)> {
        let (out, argv, dir) = self.output(stdin)?;
        match out.status.code() {
            Some(code) if ok.contains(&code) => Ok((code, out)),
            _ => Err(failure(argv, dir, out.status, &out.stderr)),
        }
    }

    /// Runs to completion and returns stdout; a non-zero exit is an error.
    pub(super) fn stdout(self) -> Result<Vec<u8>> {
        Ok(self.run_allowing(&[0], None)?.1.stdout)
    }

    /// Like [`Call::stdout`], trimmed to one line of UTF-8.
    pub(super) fn line(self) -> Result<String> {
        let argv = self.argv.clone();
        let out = self.stdout()?;
        let text = String::from_utf8(out).map_err(|_| GitError::Parse {
            argv,
            detail: "output is not UTF-8".into(),
        })?;
        Ok(text.trim_end_matches(['\n', '\r']).to_string())
    }
}

pub(super) fn failure(
    argv: Vec<String>,
    dir: Option<PathBuf>,
    status: std::process::ExitStatus,
    stderr: &[u8],
) -> GitError {
    let (code, signal) = crate::ended::of(status);
    let stderr = String::from_utf8_lossy(stderr).into_owned();
    if let Some(dir) = dir {
        if stderr.contains("not a git repository") || stderr.contains("cannot change to") {
            return GitError::NotARepo { dir };
        }
    }
    GitError::Failed {
        argv,
        code,
        signal,
        stderr,
    }
}

pub(super) fn split_z(bytes: &[u8]) -> impl Iterator<Item = String> + '_ {
    bytes
        .split(|b| *b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
}
