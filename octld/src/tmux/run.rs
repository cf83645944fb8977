//! Running tmux command lines: through the control client, or as a `tmux` process.

use std::process::{Command, Stdio};
#[cfg(test)]
use std::sync::atomic::Ordering;

use super::control::{self, Outcome, ServerId};
use super::quote::tmux_arg;
use super::{Result, Tmux, TmuxError};

/// Separates commands in one tmux invocation.
const THEN: &str = ";";

impl Tmux {
    pub(super) fn program_name(&self) -> String {
        self.program.to_string_lossy().into_owned()
    }

    pub(super) fn command(&self) -> Command {
        let mut cmd = Command::new(&self.program);
        // Inside the user's tmux these would point the client (and the panes) at their server.
        cmd.env_remove("TMUX").env_remove("TMUX_PANE");
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    /// The command line `commands` make as a process: for messages, and the process path.
    fn argv(&self, commands: &[Vec<String>]) -> Vec<String> {
        let mut argv = vec![
            self.program_name(),
            "-S".into(),
            self.socket.to_string_lossy().into_owned(),
            "-f".into(),
            "/dev/null".into(),
        ];
        for (i, command) in commands.iter().enumerate() {
            if i > 0 {
                argv.push(THEN.into());
            }
            argv.extend(command.iter().map(|arg| tmux_arg(arg).into_owned()));
        }
        argv
    }

    /// Runs `commands` (each an argv without the separators) as one tmux command line and
    /// returns its output.
    pub(super) fn run(&self, commands: &[Vec<String>]) -> Result<Vec<u8>> {
        self.run_as(commands, false)
    }

    /// [`Tmux::run`] for commands that only read, and so may be run again.
    pub(super) fn read(&self, commands: &[Vec<String>]) -> Result<Vec<u8>> {
        self.run_as(commands, true)
    }

    pub(super) fn run_as(&self, commands: &[Vec<String>], idempotent: bool) -> Result<Vec<u8>> {
        self.run_choosing(|_| commands, commands, idempotent)
    }

    /// Runs `by_client(server)` through the control client, which is attached to `server`,
    /// or else `by_process` as a process.
    pub(super) fn run_choosing<'c>(
        &self,
        by_client: impl FnOnce(Option<ServerId>) -> &'c [Vec<String>],
        by_process: &[Vec<String>],
        idempotent: bool,
    ) -> Result<Vec<u8>> {
        if self.control.enabled() {
            let mut sent = by_process;
            let outcome = self.control.request(
                self.program.as_os_str(),
                &self.socket,
                |server| {
                    sent = by_client(server);
                    control::line(sent)
                },
                idempotent,
            );
            match outcome {
                Outcome::Answered(Ok(stdout)) => return Ok(stdout),
                // As the process would have failed: tmux exits 1 with this text on stderr.
                Outcome::Answered(Err(stderr)) => {
                    return Err(TmuxError::Failed {
                        argv: self.argv(sent),
                        code: Some(1),
                        signal: None,
                        stderr,
                    })
                }
                Outcome::Lost(detail) => {
                    return Err(TmuxError::NoAnswer {
                        argv: self.argv(sent),
                        detail,
                    })
                }
                Outcome::Fallback => {}
            }
        }
        self.run_process(by_process)
    }

    /// Runs `commands` as one `tmux` process.
    pub(super) fn run_process(&self, commands: &[Vec<String>]) -> Result<Vec<u8>> {
        #[cfg(test)]
        self.processes.fetch_add(1, Ordering::Relaxed);
        let argv = self.argv(commands);
        let mut cmd = self.command();
        // The socket as given (it need not be UTF-8), then the rest of the argv.
        cmd.arg("-S").arg(&self.socket).args(&argv[3..]);
        let out = match cmd.output() {
            Ok(out) => out,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(TmuxError::Missing {
                    program: self.program_name(),
                })
            }
            Err(source) => return Err(TmuxError::Spawn { argv, source }),
        };
        if !out.status.success() {
            return Err(TmuxError::Failed {
                argv,
                code: out.status.code(),
                signal: crate::ended::of(out.status).1,
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            });
        }
        Ok(out.stdout)
    }

    pub(super) fn run1(&self, args: &[&str]) -> Result<Vec<u8>> {
        self.run(&[strings(args)])
    }

    pub(super) fn read1(&self, args: &[&str]) -> Result<Vec<u8>> {
        self.read(&[strings(args)])
    }
}

pub(super) fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}
