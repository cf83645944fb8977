//! The private tmux server that hosts the agents: one session per run, one window per node.
//!
//! Every tmux process is `tmux -S <socket> -f /dev/null …` from an argv, so neither the user's
//! own tmux server nor their `~/.tmux.conf` is ever involved. tmux has three traps for text
//! passed through it, all handled here:
//!
//! - an argument *ending* in `;` is split into a command separator ([`tmux_arg`] escapes it;
//!   a line for the control client quotes every argument instead, see `control::quote`);
//! - `-c`, `-n` and the `pipe-pane` command are format-expanded (`#{…}`), so `#` is doubled in
//!   paths and names are restricted to `[A-Za-z0-9_-]`;
//! - a pane's program is a string for `sh -c`: every argv element is single-quoted
//!   ([`sh_quote`]), and the server's `default-shell` is pinned to `/bin/sh` so a user's
//!   `$SHELL` (fish, …) never reads that string.
//!
//! The pane's shell runs the program, then lingers a tenth of a second before exiting with
//! the program's status: tmux 3.3a can otherwise close the terminal on the exit before it has
//! read the program's last output, which then never reaches the screen or the log. So
//! `#{pane_pid}` is that shell, `#{pane_dead_status}` is the program's exit status (128+N
//! for a program killed by signal N), and windows keep `remain-on-exit on` to show it.
//!
//! A command goes through a control-mode client kept attached to the server (`control.rs`):
//! a line on a pipe, where a process costs 2–4 ms. The process path remains for the call that
//! starts the server (its `new-session` sets the server-wide options), for `tmux -V`,
//! `kill-server`, and whenever the client cannot be used; either way the caller sees the same
//! output and errors. The client's hidden session, [`CONTROL_SESSION`], is left out of
//! everything this module reports.
//!
//! The server-wide options go with every `new-session` until one has answered with the
//! identity of the server it ran on (pid and start time); after that they are left out only
//! of a `new-session` sent through a control client attached to that same server. A process
//! always sends them, as it may be the one that starts a server.
//!
//! The calls are synchronous; the daemon runs them in `spawn_blocking`.

use std::borrow::Cow;
use std::ffi::OsString;
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
#[cfg(test)]
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use octl_proto::ErrorKind;

mod control;

pub use control::CONTROL_SESSION;
use control::{Control, Outcome, ServerId, SERVER_ID_FORMAT};

/// `new-window -e` and argv-style commands appeared in 3.0.
pub const MIN_VERSION: Version = Version { major: 3, minor: 0 };

/// Columns and rows of every window (`-x`/`-y`, `default-size`, `window-size manual`).
pub const DEFAULT_SIZE: (u16, u16) = (200, 50);

/// Separates fields in list output; names are validated so it cannot occur in them.
const SEP: char = '\x1f';

/// tmux refuses a command line above about 16 KiB ("command too long"); longer launches go
/// through a script file.
const INLINE_LIMIT: usize = 12 * 1024;

/// A tmux version, `tmux 3.3a` → 3.3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Parses `tmux -V`: `tmux 3.3a`, `tmux next-3.5`, `tmux 3.4-rc2`. Builds from a development
/// branch (`tmux master`, `tmux openbsd-7.5`) count as newer than any release.
pub fn parse_version(output: &str) -> Option<Version> {
    let v = output.trim().strip_prefix("tmux ")?.trim();
    if v.starts_with("master") || v.starts_with("openbsd-") {
        return Some(Version {
            major: u32::MAX,
            minor: 0,
        });
    }
    let v = v.strip_prefix("next-").unwrap_or(v);
    let (major, rest) = v.split_once('.')?;
    let major = major.parse().ok()?;
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let minor = rest[..end].parse().ok()?;
    Some(Version { major, minor })
}

/// Quotes one word for POSIX `sh` so that it reaches the program exactly as given: words of
/// only safe characters stay bare, everything else is single-quoted (`'` becomes `'\''`).
pub fn sh_quote(word: &str) -> Cow<'_, str> {
    let safe = |b: u8| b.is_ascii_alphanumeric() || b"_-+:,./@%".contains(&b);
    if !word.is_empty() && word.bytes().all(safe) {
        return Cow::Borrowed(word);
    }
    let mut quoted = String::with_capacity(word.len() + 2);
    quoted.push('\'');
    for c in word.chars() {
        if c == '\'' {
            quoted.push_str("'\\''");
        } else {
            quoted.push(c);
        }
    }
    quoted.push('\'');
    Cow::Owned(quoted)
}

/// Quotes and joins an argv for `sh`.
pub fn sh_join<S: AsRef<str>>(argv: &[S]) -> String {
    argv.iter()
        .map(|a| sh_quote(a.as_ref()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Escapes one argument for tmux's command line, where a trailing `;` ends the command:
/// `a;` is passed as `a\;`, which tmux turns back into `a;`.
pub fn tmux_arg(arg: &str) -> Cow<'_, str> {
    match arg.strip_suffix(';') {
        Some(head) => Cow::Owned(format!("{head}\\;")),
        None => Cow::Borrowed(arg),
    }
}

/// Escapes text that tmux expands as a format (`#{…}`).
fn format_literal(text: &str) -> String {
    text.replace('#', "##")
}

pub type Result<T, E = TmuxError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum TmuxError {
    /// The tmux program could not be found (maps to kind `tool_missing`).
    #[error("`{program}` was not found: install tmux {MIN_VERSION} or newer")]
    Missing { program: String },
    #[error("could not run `{}`: {source}", argv.join(" "))]
    Spawn {
        argv: Vec<String>,
        #[source]
        source: std::io::Error,
    },
    /// tmux ran and exited unsuccessfully in a way this module does not interpret.
    #[error("`{}` failed ({}): {}", argv.join(" "), display_code(*code), stderr.trim())]
    Failed {
        argv: Vec<String>,
        code: Option<i32>,
        stderr: String,
    },
    #[error("unexpected output from `{}`: {detail}", argv.join(" "))]
    Parse { argv: Vec<String>, detail: String },
    /// The command was sent to the control client, which then gave no answer: it may or may
    /// not have run, so it was not run again.
    #[error("no answer from tmux to `{}`: {detail}", argv.join(" "))]
    NoAnswer { argv: Vec<String>, detail: String },
    #[error("tmux {found} is too old: {MIN_VERSION} or newer is needed")]
    TooOld { found: Version },
    #[error("invalid {what} {value:?}: {accepted}")]
    Invalid {
        what: &'static str,
        value: String,
        accepted: &'static str,
    },
    /// Writing the launch script or creating the log's directory failed.
    #[error("preparing the window: {0}")]
    Io(#[source] std::io::Error),
}

impl TmuxError {
    /// The stable error kind the daemon reports for this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            TmuxError::Missing { .. } | TmuxError::TooOld { .. } => ErrorKind::ToolMissing,
            TmuxError::Invalid { .. } => ErrorKind::InvalidParams,
            TmuxError::Spawn { .. }
            | TmuxError::Failed { .. }
            | TmuxError::Parse { .. }
            | TmuxError::NoAnswer { .. }
            | TmuxError::Io(_) => ErrorKind::ToolFailed,
        }
    }

    fn stderr_contains(&self, needle: &str) -> bool {
        matches!(self, TmuxError::Failed { stderr, .. } if stderr.contains(needle))
    }

    /// Nothing listens on the socket, or the server is exiting with no session left:
    /// "not running" rather than a failure.
    fn is_no_server(&self) -> bool {
        self.stderr_contains("no server running")
            || self.stderr_contains("error connecting to")
            || self.stderr_contains("no current target")
            || self.is_server_gone()
    }

    /// The server went away while answering, as it does when a kill removes its last
    /// session.
    fn is_server_gone(&self) -> bool {
        self.stderr_contains("server exited unexpectedly") || self.stderr_contains("lost server")
    }

    fn is_not_found(&self) -> bool {
        self.stderr_contains("can't find")
    }
}

fn display_code(code: Option<i32>) -> String {
    match code {
        Some(c) => format!("exit {c}"),
        None => "killed by a signal".to_string(),
    }
}

/// What to start in a new window; see [`Tmux::spawn_window`].
#[derive(Debug, Clone)]
pub struct WindowSpec<'a> {
    /// The run's session (`[A-Za-z0-9_-]`, created on first use).
    pub session: &'a str,
    /// The node's window name (`[A-Za-z0-9_-]`).
    pub window: &'a str,
    /// Absolute working directory; the program does not start if it cannot enter it.
    pub cwd: &'a Path,
    /// Extra environment for the program (names `[A-Za-z_][A-Za-z0-9_]*`).
    pub env: &'a [(String, String)],
    /// The program and its arguments, passed exactly.
    pub argv: &'a [String],
    /// The pane's output is appended here; its directory is created if needed.
    pub log: &'a Path,
}

/// The pane a new window runs in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spawned {
    /// `%N`: stable for the life of the server; use it as the target for later calls.
    pub pane_id: String,
    /// The pane's shell; the program is its child.
    pub pane_pid: u32,
    /// Whether this call created the run's session.
    pub created_session: bool,
}

/// One pane of the server, from [`Tmux::list_panes`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaneInfo {
    pub session: String,
    pub window: String,
    /// `@N`.
    pub window_id: String,
    /// `%N`.
    pub pane_id: String,
    pub pane_pid: Option<u32>,
    /// The program has exited (the pane stays because of `remain-on-exit`).
    pub dead: bool,
    /// Exit status of a dead pane that exited normally.
    ///
    /// tmux marks a pane dead when its terminal closes, which can be a moment before it has
    /// reaped the process: a dead pane without a status (and without a signal) may get one
    /// on the next poll. Only when that persists (tmux < 3.4 reports no signals) should it be
    /// taken as "killed by a signal".
    pub dead_status: Option<i32>,
    /// Signal that killed a dead pane, where tmux reports it (≥ 3.4); on older tmux a pane
    /// killed by a signal is dead with neither status nor signal.
    pub dead_signal: Option<i32>,
}

/// A handle on the private tmux server at one socket. Clones share one control client.
#[derive(Debug, Clone)]
pub struct Tmux {
    socket: PathBuf,
    program: OsString,
    size: (u16, u16),
    control: Arc<Control>,
    /// The last server known to have the server-wide options (see `Tmux::new_session`).
    configured: Arc<Mutex<Option<ServerId>>>,
    /// How many tmux command lines ran as a process.
    #[cfg(test)]
    processes: Arc<AtomicU64>,
}

/// Separates commands in one tmux invocation.
const THEN: &str = ";";

impl Tmux {
    /// A handle on the server at `socket` (usually `$OCTL_HOME/tmux.sock`; keep the path under
    /// about 100 bytes, the limit of a Unix socket address).
    ///
    /// Commands go through a control client once the server runs. `OCTL_TMUX_CONTROL=0` (or
    /// `false`, `no`, `off`) in the environment, read here once, makes every command a process
    /// instead: the way tmux was driven before the client, kept to rule it out when something
    /// goes wrong.
    pub fn new(socket: impl Into<PathBuf>) -> Tmux {
        let control = std::env::var_os("OCTL_TMUX_CONTROL").is_none_or(|v| {
            !matches!(
                v.to_string_lossy().trim().to_ascii_lowercase().as_str(),
                "0" | "false" | "no" | "off"
            )
        });
        Tmux {
            socket: socket.into(),
            program: OsString::from("tmux"),
            size: DEFAULT_SIZE,
            control: Arc::new(Control::new(control)),
            configured: Arc::default(),
            #[cfg(test)]
            processes: Arc::default(),
        }
    }

    /// Runs `program` instead of `tmux` from `PATH`.
    pub fn with_program(mut self, program: impl Into<OsString>) -> Tmux {
        self.program = program.into();
        // A client already attached would be the other program's.
        self.control = Arc::new(Control::new(self.control.enabled()));
        self
    }

    /// Whether commands may go through a control client (see [`Tmux::new`]).
    pub fn with_control(mut self, enabled: bool) -> Tmux {
        self.control = Arc::new(Control::new(enabled));
        self
    }

    /// How many commands the control client has answered; the others were processes.
    pub fn control_answers(&self) -> u64 {
        self.control.answered()
    }

    /// Window size in columns and rows (default [`DEFAULT_SIZE`]).
    pub fn with_size(mut self, columns: u16, rows: u16) -> Tmux {
        self.size = (columns, rows);
        // `default-size` is one of the server-wide options: this handle sends its own.
        self.configured = Arc::default();
        self
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    fn program_name(&self) -> String {
        self.program.to_string_lossy().into_owned()
    }

    fn command(&self) -> Command {
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
    fn run(&self, commands: &[Vec<String>]) -> Result<Vec<u8>> {
        self.run_as(commands, false)
    }

    /// [`Tmux::run`] for commands that only read, and so may be run again.
    fn read(&self, commands: &[Vec<String>]) -> Result<Vec<u8>> {
        self.run_as(commands, true)
    }

    fn run_as(&self, commands: &[Vec<String>], idempotent: bool) -> Result<Vec<u8>> {
        self.run_choosing(|_| commands, commands, idempotent)
    }

    /// Runs `by_client(server)` through the control client, which is attached to `server`,
    /// or else `by_process` as a process.
    fn run_choosing<'c>(
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
    fn run_process(&self, commands: &[Vec<String>]) -> Result<Vec<u8>> {
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
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            });
        }
        Ok(out.stdout)
    }

    fn run1(&self, args: &[&str]) -> Result<Vec<u8>> {
        self.run(&[strings(args)])
    }

    fn read1(&self, args: &[&str]) -> Result<Vec<u8>> {
        self.read(&[strings(args)])
    }

    /// `tmux -V`, parsed. Does not need a server.
    pub fn version(&self) -> Result<Version> {
        let argv = vec![self.program_name(), "-V".into()];
        let out = match self.command().arg("-V").output() {
            Ok(out) => out,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(TmuxError::Missing {
                    program: self.program_name(),
                })
            }
            Err(source) => return Err(TmuxError::Spawn { argv, source }),
        };
        let text = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            return Err(TmuxError::Failed {
                argv,
                code: out.status.code(),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            });
        }
        let version = parse_version(&text).ok_or_else(|| TmuxError::Parse {
            argv,
            detail: format!("cannot read a version in {:?}", text.trim()),
        })?;
        self.control.note_version(version);
        Ok(version)
    }

    /// The version, or [`TmuxError::TooOld`] below [`MIN_VERSION`].
    pub fn check_version(&self) -> Result<Version> {
        let found = self.version()?;
        if found < MIN_VERSION {
            return Err(TmuxError::TooOld { found });
        }
        Ok(found)
    }

    /// Whether the session exists (no server: `false`).
    pub fn has_session(&self, session: &str) -> Result<bool> {
        check_name("session name", session)?;
        if session == CONTROL_SESSION {
            return Ok(false);
        }
        match self.read1(&["has-session", "-t", &format!("={session}")]) {
            Ok(_) => Ok(true),
            Err(e) if e.is_no_server() || e.is_not_found() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Starts `spec.argv` in a new window of the run's session, creating the session (and the
    /// server) if needed: the session's first window is the node's own, no placeholder. The
    /// window keeps its pane after the program exits, has a fixed size, and the pane's output
    /// is appended to `spec.log` from the first byte.
    pub fn spawn_window(&self, spec: &WindowSpec<'_>) -> Result<Spawned> {
        self.spawn(spec, false)
    }

    /// Like [`Tmux::spawn_window`] for a window that is most likely its session's first (a
    /// new run): creating the session is tried first, saving a failed `new-window` call.
    pub fn spawn_first_window(&self, spec: &WindowSpec<'_>) -> Result<Spawned> {
        self.spawn(spec, true)
    }

    fn spawn(&self, spec: &WindowSpec<'_>, fresh_session: bool) -> Result<Spawned> {
        check_name("session name", spec.session)?;
        if spec.session == CONTROL_SESSION {
            return Err(invalid(
                "session name",
                spec.session,
                "use another name: this one is the daemon's own hidden session",
            ));
        }
        check_name("window name", spec.window)?;
        let cwd = utf8_path("working directory", spec.cwd)?;
        if !spec.cwd.is_absolute() {
            return Err(invalid("working directory", cwd, "use an absolute path"));
        }
        let log = utf8_path("log path", spec.log)?;
        let script = launch_script(cwd, spec.env, spec.argv)?;
        if let Some(dir) = spec.log.parent() {
            std::fs::create_dir_all(dir).map_err(TmuxError::Io)?;
        }

        let mut launcher = None;
        let command = if script.len() <= INLINE_LIMIT {
            script
        } else {
            let path = launch_script_path(spec.log);
            write_private(&path, &script).map_err(TmuxError::Io)?;
            let path_str = utf8_path("log path", &path)?.to_string();
            launcher = Some(path);
            format!("exec /bin/sh {}", sh_quote(&path_str))
        };
        let result = self.spawn_with(spec, cwd, log, &command, fresh_session);
        if result.is_err() {
            if let Some(path) = launcher {
                let _ = std::fs::remove_file(path);
            }
        }
        result
    }

    fn spawn_with(
        &self,
        spec: &WindowSpec<'_>,
        cwd: &str,
        log: &str,
        command: &str,
        fresh_session: bool,
    ) -> Result<Spawned> {
        let format = format!("#{{pane_id}}{SEP}#{{pane_pid}}");
        let dir = format_literal(cwd);
        // Applies to the window made by the command just before it, in the same line, so no
        // pane output is read before it has run. `new-window` makes its window the current
        // target, so no target is given then. `new-session -d` does not: from the control
        // client the current target stays the client's own session, so the new window is
        // named through its session, whose only window it is.
        let window_setup = |target: Option<&str>| -> Vec<Vec<String>> {
            let pipe = format_literal(&format!("exec cat >> {}", sh_quote(log)));
            let mut cmds = vec![
                strings(&["set-option", "-w", "window-size", "manual"]),
                strings(&["set-option", "-w", "remain-on-exit", "on"]),
                strings(&["pipe-pane", "-o", &pipe]),
            ];
            if let Some(target) = target {
                for cmd in &mut cmds {
                    cmd.splice(1..1, ["-t".to_string(), target.to_string()]);
                }
            }
            cmds
        };
        let new_window = || -> Vec<Vec<String>> {
            let mut cmds = vec![strings(&[
                "new-window",
                "-t",
                &format!("={}:", spec.session),
                "-n",
                spec.window,
                "-c",
                &dir,
                "-P",
                "-F",
                &format,
                "--",
                command,
            ])];
            cmds.extend(window_setup(None));
            cmds
        };
        let (columns, rows) = (self.size.0.to_string(), self.size.1.to_string());
        // The server's identity follows the pane's, for `Tmux::new_session`.
        let session_format = format!("{format}{SEP}{SERVER_ID_FORMAT}");
        let new_session = || -> Result<Vec<u8>> {
            let mut cmds = vec![strings(&[
                "new-session",
                "-d",
                "-s",
                spec.session,
                "-n",
                spec.window,
                "-x",
                &columns,
                "-y",
                &rows,
                "-c",
                &dir,
                "-P",
                "-F",
                &session_format,
                "--",
                command,
            ])];
            cmds.extend(window_setup(Some(&format!("={}:", spec.session))));
            self.new_session(&cmds)
        };

        // A run's first window creates its session: one tmux call either way.
        if fresh_session {
            match new_session() {
                Ok(out) => return parse_spawned(self, &out, true),
                Err(e) if e.stderr_contains("duplicate session") => {}
                Err(e) => return Err(e),
            }
        }
        // The common case (the run's session exists) costs one tmux call.
        let (out, created_session) = match self.run(&new_window()) {
            Ok(out) => (out, false),
            Err(e) if e.is_no_server() || e.is_not_found() => match new_session() {
                Ok(out) => (out, true),
                // Another spawn for the same run created it meanwhile.
                Err(e) if e.stderr_contains("duplicate session") => {
                    (self.run(&new_window())?, false)
                }
                Err(e) => return Err(e),
            },
            Err(e) => return Err(e),
        };
        parse_spawned(self, &out, created_session)
    }

    /// Runs `commands`, whose first is a `new-session` that prints the server's identity
    /// ([`SERVER_ID_FORMAT`]) as the last field of its line, after the server-wide options
    /// (they come first so that they hold before the first program can exit). The options are
    /// left out only when the line goes through a control client attached to the server that
    /// last answered such a line: a client never starts a server (`tmux -N`), and stays with
    /// the one it attached to. A process always sends them: no server may be running, or
    /// another than the one configured (someone killed and started it).
    fn new_session(&self, commands: &[Vec<String>]) -> Result<Vec<u8>> {
        let configured = || {
            *self
                .configured
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
        };
        let full = [server_options(self.size), commands.to_vec()].concat();
        let out = self.run_choosing(
            |server| {
                if server.is_some() && server == configured() {
                    commands
                } else {
                    &full
                }
            },
            &full,
            false,
        )?;
        // Either way the server that ran it has the options now.
        let text = String::from_utf8_lossy(&out);
        let id = text
            .lines()
            .next()
            .and_then(|line| line.rsplit_once(SEP))
            .and_then(|(_, id)| ServerId::parse(id));
        if let Some(id) = id {
            *self
                .configured
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some(id);
        }
        Ok(out)
    }

    /// Every pane on the server in one call (no server: empty). The supervisor polls this.
    ///
    /// tmux builds linked with libutempter (Debian's, among others) can miss the SIGCHLD of a
    /// pane whose terminal closes at the moment utempter swaps the handler: the program stays
    /// a zombie and its pane dead without a status. When a dead pane has no status, the
    /// server is sent a SIGCHLD, which makes it reap the program, and the list is read again.
    pub fn list_panes(&self) -> Result<Vec<PaneInfo>> {
        Ok(self.list_panes_and_server()?.0)
    }

    /// The pid of the server this daemon last made a session on (where its agents run).
    pub fn our_server_pid(&self) -> Option<u32> {
        self.configured
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .map(|id| id.pid())
    }

    /// [`Tmux::list_panes`], with the pid of the server that answered (`None`: no server).
    pub fn list_panes_and_server(&self) -> Result<(Vec<PaneInfo>, Option<u32>)> {
        let (panes, server_pid) = self.read_panes()?;
        let unresolved = panes
            .iter()
            .any(|p| p.dead && p.dead_status.is_none() && p.dead_signal.is_none());
        match server_pid {
            Some(pid) if unresolved && pid > 1 => {
                // SAFETY: kill(2) has no memory-safety preconditions; SIGCHLD only makes the
                // tmux server (our own child's daemon, same user) reap its exited children.
                let sent = unsafe { libc::kill(pid as libc::pid_t, libc::SIGCHLD) } == 0;
                if sent {
                    return self.read_panes();
                }
                Ok((panes, server_pid))
            }
            _ => Ok((panes, server_pid)),
        }
    }

    fn read_panes(&self) -> Result<(Vec<PaneInfo>, Option<u32>)> {
        let format = [
            "#{pid}",
            "#{pane_id}",
            "#{pane_pid}",
            "#{pane_dead}",
            "#{pane_dead_status}",
            "#{pane_dead_signal}",
            "#{window_id}",
            "#{session_name}",
            "#{window_name}",
        ]
        .join(&SEP.to_string());
        let out = match self.read1(&["list-panes", "-a", "-F", &format]) {
            Ok(out) => out,
            Err(e) if e.is_no_server() => return Ok((Vec::new(), None)),
            Err(e) => return Err(e),
        };
        let mut server_pid = None;
        let panes = String::from_utf8_lossy(&out)
            .lines()
            .filter_map(|line| {
                let (pid, rest) = line.split_once(SEP)?;
                server_pid = pid.parse().ok();
                parse_pane(rest)
            })
            .filter(|pane| pane.session != CONTROL_SESSION)
            .collect();
        Ok((panes, server_pid))
    }

    /// Kills the window that holds `pane_id`. `false` if there was none.
    pub fn kill_window_of_pane(&self, pane_id: &str) -> Result<bool> {
        check_pane_id(pane_id)?;
        self.kill(&["kill-window", "-t", pane_id])
    }

    /// Kills the window named `window` in `session`. `false` if there was none; an error if
    /// several windows there have that name.
    /// Kills the window of `pane_id` only if that pane still belongs to `session`/`window`:
    /// pane ids start again at `%0` when a server restarts, and a stale id must never close
    /// another agent's window.
    pub fn kill_window_of_pane_in(
        &self,
        pane_id: &str,
        session: &str,
        window: &str,
    ) -> Result<bool> {
        let owned = self
            .list_panes()?
            .iter()
            .any(|p| p.pane_id == pane_id && p.session == session && p.window == window);
        if owned {
            self.kill_window_of_pane(pane_id)
        } else {
            Ok(false)
        }
    }

    pub fn kill_window(&self, session: &str, window: &str) -> Result<bool> {
        check_name("session name", session)?;
        check_name("window name", window)?;
        if session == CONTROL_SESSION {
            return Ok(false);
        }
        self.kill(&["kill-window", "-t", &format!("={session}:={window}")])
    }

    /// Kills a session and its windows. `false` if there was none.
    pub fn kill_session(&self, session: &str) -> Result<bool> {
        check_name("session name", session)?;
        if session == CONTROL_SESSION {
            return Ok(false);
        }
        self.kill(&["kill-session", "-t", &format!("={session}")])
    }

    /// Stops the whole private server (tests and cleanup). No server is not an error.
    pub fn kill_server(&self) -> Result<()> {
        // The client would die with the server: dropping it first reaps it now, rather than
        // leaving its end for the next call to find; and a process gets kill-server's usual
        // answer.
        self.control.disconnect();
        *self
            .configured
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = None;
        kill_answer(self.run_process(&[strings(&["kill-server"])])).map(|_| ())
    }

    fn kill(&self, args: &[&str]) -> Result<bool> {
        kill_answer(self.run1(args))
    }

    /// Types `text` into the pane literally (no key names, no `Enter`).
    pub fn send_keys_literal(&self, pane_id: &str, text: &str) -> Result<()> {
        check_pane_id(pane_id)?;
        self.run1(&["send-keys", "-t", pane_id, "-l", "--", text])
            .map(|_| ())
    }

    /// Presses `Enter` in the pane.
    pub fn send_enter(&self, pane_id: &str) -> Result<()> {
        self.send_key(pane_id, "Enter")
    }

    /// Sends one named key (`Enter`, `Down`, `Escape`, …) to a pane.
    pub fn send_key(&self, pane_id: &str, key: &str) -> Result<()> {
        check_pane_id(pane_id)?;
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            return Err(invalid(
                "key",
                key,
                "a tmux key name such as Enter, Down or C-c",
            ));
        }
        self.run1(&["send-keys", "-t", pane_id, key]).map(|_| ())
    }

    /// The pane's text, scrollback included, wrapped lines joined.
    pub fn capture_pane(&self, pane_id: &str) -> Result<String> {
        check_pane_id(pane_id)?;
        let out = self.read1(&["capture-pane", "-p", "-J", "-S", "-", "-t", pane_id])?;
        Ok(String::from_utf8_lossy(&out).into_owned())
    }
}

/// What a kill command's result means: `true` if it killed something, `false` if there was
/// nothing to kill.
fn kill_answer(result: Result<Vec<u8>>) -> Result<bool> {
    match result {
        Ok(_) => Ok(true),
        Err(e) if e.is_server_gone() => Ok(true),
        Err(e) if e.is_no_server() || e.is_not_found() => Ok(false),
        Err(e) => Err(e),
    }
}

/// The server-wide options: every `new-session` that may start a server sets them first. For
/// windows of `size`. `window-size` is set per window instead: setting it globally before a
/// session exists crashes tmux 3.3a.
fn server_options(size: (u16, u16)) -> Vec<Vec<String>> {
    vec![
        strings(&["set-option", "-g", "default-shell", "/bin/sh"]),
        strings(&[
            "set-option",
            "-g",
            "default-size",
            &format!("{}x{}", size.0, size.1),
        ]),
        strings(&["set-option", "-gw", "remain-on-exit", "on"]),
        // Keep the server (and so its pane numbering) alive between runs.
        strings(&["set-option", "-s", "exit-empty", "off"]),
        strings(&["set-option", "-gw", "allow-rename", "off"]),
        strings(&["set-option", "-gw", "automatic-rename", "off"]),
    ]
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

fn invalid(what: &'static str, value: &str, accepted: &'static str) -> TmuxError {
    TmuxError::Invalid {
        what,
        value: value.to_string(),
        accepted,
    }
}

fn check_name(what: &'static str, name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 128
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(invalid(
            what,
            name,
            "use 1-128 of A-Z, a-z, 0-9, '-' and '_'",
        ))
    }
}

fn is_pane_id(id: &str) -> bool {
    id.strip_prefix('%')
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

fn check_pane_id(id: &str) -> Result<()> {
    if is_pane_id(id) {
        Ok(())
    } else {
        Err(invalid("pane id", id, "use a tmux pane id such as %3"))
    }
}

fn utf8_path<'p>(what: &'static str, path: &'p Path) -> Result<&'p str> {
    path.to_str().ok_or_else(|| TmuxError::Invalid {
        what,
        value: path.to_string_lossy().into_owned(),
        accepted: "use a UTF-8 path",
    })
}

/// Reads `%N<sep>PID` printed by new-window / new-session (which adds a field).
fn parse_spawned(tmux: &Tmux, out: &[u8], created_session: bool) -> Result<Spawned> {
    let text = String::from_utf8_lossy(out);
    let line = text.lines().next().unwrap_or("");
    let mut fields = line.split(SEP);
    let parsed = fields
        .next()
        .zip(fields.next())
        .and_then(|(id, pid)| Some((id.to_string(), pid.trim().parse().ok()?)));
    match parsed {
        Some((pane_id, pane_pid)) if is_pane_id(&pane_id) => Ok(Spawned {
            pane_id,
            pane_pid,
            created_session,
        }),
        _ => Err(TmuxError::Parse {
            argv: vec![tmux.program_name(), "new-window".into()],
            detail: format!("expected `%N<sep>PID`, got {line:?}"),
        }),
    }
}

/// The `sh` text that enters `cwd`, exports `env`, runs `argv` and exits with its status.
fn launch_script(cwd: &str, env: &[(String, String)], argv: &[String]) -> Result<String> {
    let Some(program) = argv.first() else {
        return Err(invalid("argv", "", "give at least the program to run"));
    };
    if program.is_empty() || program.starts_with('-') {
        return Err(invalid(
            "program",
            program,
            "name a program (not empty, not starting with '-')",
        ));
    }
    if let Some(bad) = argv.iter().find(|a| a.contains('\0')) {
        return Err(invalid("argument", bad, "no NUL bytes"));
    }
    // Without this tmux would silently start the program in $HOME.
    let mut script = format!("cd -- {} || exit 126\n", sh_quote(cwd));
    for (name, value) in env {
        let valid_name = name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !valid_name {
            return Err(invalid(
                "environment variable name",
                name,
                "use [A-Za-z_][A-Za-z0-9_]*",
            ));
        }
        if value.contains('\0') {
            return Err(invalid("environment value", value, "no NUL bytes"));
        }
        script.push_str(&format!("export {name}={}\n", sh_quote(value)));
    }
    // A no-op trap (not an ignored signal, which the program would inherit) keeps the shell
    // alive through a Ctrl-C meant for the program, so the status still gets reported.
    script.push_str("trap : INT QUIT\n");
    script.push_str(&sh_join(argv));
    script.push_str("\noctl_status=$?\nsleep 0.1\nexit \"$octl_status\"\n");
    Ok(script)
}

/// `logs/<NODE>.log` → `logs/<NODE>.launch.sh`.
fn launch_script_path(log: &Path) -> PathBuf {
    let stem = log
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "window".into());
    log.with_file_name(format!("{stem}.launch.sh"))
}

/// Writes a launch script (it may hold a prompt) readable only by us; it deletes itself
/// when the shell starts reading it.
fn write_private(path: &Path, script: &str) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let path_str = path.to_string_lossy();
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    writeln!(file, "rm -f -- {}", sh_quote(&path_str))?;
    file.write_all(script.as_bytes())?;
    file.write_all(b"\n")?;
    file.sync_all()
}

fn parse_pane(line: &str) -> Option<PaneInfo> {
    let fields: Vec<&str> = line.split(SEP).collect();
    let [pane_id, pid, dead, status, signal, window_id, session, window] = fields[..] else {
        return None;
    };
    Some(PaneInfo {
        session: session.to_string(),
        window: window.to_string(),
        window_id: window_id.to_string(),
        pane_id: pane_id.to_string(),
        pane_pid: pid.parse().ok(),
        dead: dead == "1",
        dead_status: status.parse().ok(),
        dead_signal: signal.parse().ok(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::time::{Duration, Instant};

    /// How a test's commands reach the server.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Mode {
        /// Through the control client, once the server runs.
        Control,
        /// Every command a process.
        Process,
        /// Every command a process, while another handle's control client is attached: its
        /// session is then the default target of command-line clients too.
        ProcessBesideClient,
    }

    const MODES: [Mode; 3] = [Mode::Control, Mode::Process, Mode::ProcessBesideClient];

    /// A private server in a temp dir, killed when the test ends, passing or not.
    struct Server {
        tmux: Tmux,
        /// In [`Mode::ProcessBesideClient`], the handle whose client stays attached.
        beside: Option<Tmux>,
        mode: Mode,
        dir: PathBuf,
        _tmp: tempfile::TempDir,
    }

    impl Server {
        fn new() -> Server {
            Server::with_mode(Mode::Control)
        }

        fn with_mode(mode: Mode) -> Server {
            let tmp = tempfile::Builder::new()
                .prefix("octl-tmux")
                .tempdir()
                .unwrap();
            let dir = tmp.path().canonicalize().unwrap();
            let socket = dir.join("tmux.sock");
            Server {
                tmux: Tmux::new(&socket).with_control(mode == Mode::Control),
                beside: (mode == Mode::ProcessBesideClient)
                    .then(|| Tmux::new(&socket).with_control(true)),
                mode,
                dir,
                _tmp: tmp,
            }
        }

        /// The same server through a handle that only starts processes, with nothing shared
        /// with [`Server::tmux`] (as another program's).
        fn process_only(&self) -> Tmux {
            Tmux {
                processes: Arc::default(),
                configured: Arc::default(),
                ..self.tmux.clone().with_control(false)
            }
        }

        /// Checks that the commands went the way the mode says.
        fn check_mode(&self) {
            let answers = self.tmux.control_answers();
            match self.mode {
                Mode::Control => assert!(answers > 0, "no command went through the client"),
                Mode::Process => assert_eq!(answers, 0),
                Mode::ProcessBesideClient => {
                    assert_eq!(answers, 0);
                    assert!(self.beside.as_ref().unwrap().control_answers() > 0);
                }
            }
        }

        fn spawn(&self, session: &str, window: &str, argv: &[&str]) -> Spawned {
            self.spawn_env(session, window, argv, &[])
        }

        fn spawn_env(
            &self,
            session: &str,
            window: &str,
            argv: &[&str],
            env: &[(String, String)],
        ) -> Spawned {
            let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
            let spawned = self
                .tmux
                .spawn_window(&WindowSpec {
                    session,
                    window,
                    cwd: &self.dir,
                    env,
                    argv: &argv,
                    log: &self.log(window),
                })
                .unwrap();
            self.attach_beside();
            spawned
        }

        /// In [`Mode::ProcessBesideClient`], attaches the other handle's client (once the
        /// server runs).
        fn attach_beside(&self) {
            if let Some(beside) = &self.beside {
                beside.list_panes().unwrap();
            }
        }

        fn log(&self, window: &str) -> PathBuf {
            self.dir.join("logs").join(format!("{window}.log"))
        }

        /// Polls the pane list until the pane is dead with a known status; panics after a
        /// deadline.
        fn wait_dead(&self, pane_id: &str) -> PaneInfo {
            self.attach_beside();
            wait_for(|| {
                self.tmux.list_panes().unwrap().into_iter().find(|p| {
                    p.pane_id == pane_id
                        && p.dead
                        && (p.dead_status.is_some() || p.dead_signal.is_some())
                })
            })
        }
    }

    impl Drop for Server {
        fn drop(&mut self) {
            let _ = self.tmux.kill_server();
        }
    }

    fn wait_for<T>(mut check: impl FnMut() -> Option<T>) -> T {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(v) = check() {
                return v;
            }
            assert!(Instant::now() < deadline, "condition not met within 10 s");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn wait_file(path: &Path, done: impl Fn(&[u8]) -> bool) -> Vec<u8> {
        wait_for(|| fs::read(path).ok().filter(|c| done(c)))
    }

    /// Runs `test` on a fresh server in each [`Mode`].
    fn in_every_mode(test: impl Fn(&Server)) {
        for mode in MODES {
            eprintln!("mode: {mode:?}");
            let server = Server::with_mode(mode);
            test(&server);
            server.check_mode();
        }
    }

    const TRICKY: &[&str] = &[
        "$(rm -rf x)",
        "`rm -rf x`",
        "it's \"quoted\"",
        "line one\nline two\n",
        "back\\slash \\n \\\\",
        "ends with;",
        "\\;",
        ";",
        "#{pane_id} ## #",
        "",
        " ",
        "-n",
        "--",
        "* ? [a] ~ ~/x",
        "tab\there",
        "$HOME ${HOME} $1 $@ !x",
        "a=b",
        "ünïcødé ✓",
        "x; touch pwned; y",
    ];

    #[test]
    fn parses_versions() {
        let v = |s| parse_version(s).unwrap();
        assert_eq!(v("tmux 3.3a\n"), Version { major: 3, minor: 3 });
        assert_eq!(v("tmux 3.0"), Version { major: 3, minor: 0 });
        assert_eq!(v("tmux next-3.5"), Version { major: 3, minor: 5 });
        assert_eq!(v("tmux 3.4-rc2"), Version { major: 3, minor: 4 });
        assert!(v("tmux master") >= MIN_VERSION);
        assert!(v("tmux 2.9a") < MIN_VERSION);
        assert!(parse_version("screen 4.0").is_none());
    }

    #[test]
    fn sh_quote_round_trips_through_sh() {
        let script = r#"for a in "$@"; do printf '%s\0' "$a"; done"#;
        let mut line = format!("set -- {}; {script}", sh_join(TRICKY));
        line.push('\n');
        let out = Command::new("/bin/sh")
            .arg("-c")
            .arg(&line)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let expected: Vec<u8> = TRICKY
            .iter()
            .flat_map(|a| [a.as_bytes(), b"\0"].concat())
            .collect();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&expected)
        );
        assert_eq!(sh_quote("plain-word_1.txt"), "plain-word_1.txt");
        assert_eq!(sh_quote(""), "''");
        assert_eq!(sh_quote("it's"), r"'it'\''s'");
    }

    #[test]
    fn tmux_arg_escapes_only_a_trailing_semicolon() {
        assert_eq!(tmux_arg("a;"), r"a\;");
        assert_eq!(tmux_arg(";"), r"\;");
        assert_eq!(tmux_arg(r"a\;"), r"a\\;");
        assert_eq!(tmux_arg("a;b"), "a;b");
    }

    #[test]
    fn rejects_bad_names_and_env() {
        let tmux = Tmux::new("/nonexistent/tmux.sock");
        let argv = vec!["true".to_string()];
        let spec = |session, window, env| WindowSpec {
            session,
            window,
            cwd: Path::new("/"),
            env,
            argv: &argv,
            log: Path::new("/nonexistent/x.log"),
        };
        for (s, w) in [
            ("a:b", "w"),
            ("s", "w.1"),
            ("", "w"),
            ("s", "#{x}"),
            ("s", "a;"),
        ] {
            let err = tmux.spawn_window(&spec(s, w, &[])).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidParams, "{s} {w}: {err}");
        }
        let env = vec![("BAD-NAME".to_string(), "v".to_string())];
        let err = tmux.spawn_window(&spec("s", "w", &env)).unwrap_err();
        assert!(matches!(err, TmuxError::Invalid { .. }), "{err}");
        assert!(tmux.kill_window_of_pane("1").is_err());
    }

    #[test]
    fn missing_program_is_distinct() {
        let tmux = Tmux::new("/tmp/none.sock").with_program("/nonexistent/octl-no-such-tmux");
        let err = tmux.version().unwrap_err();
        assert!(matches!(err, TmuxError::Missing { .. }), "{err:?}");
        assert_eq!(err.kind(), ErrorKind::ToolMissing);
        assert!(matches!(tmux.list_panes(), Err(TmuxError::Missing { .. })));
    }

    #[test]
    fn no_server_is_not_an_error() {
        let server = Server::new();
        assert!(server.tmux.check_version().unwrap() >= MIN_VERSION);
        assert_eq!(server.tmux.list_panes().unwrap(), vec![]);
        assert!(!server.tmux.has_session("run").unwrap());
        assert!(!server.tmux.kill_session("run").unwrap());
        server.tmux.kill_server().unwrap();
    }

    #[test]
    fn exit_status_and_log() {
        in_every_mode(|server| {
            // Another session first, so the new window is not the server's most recent one.
            let other = server.spawn("other", "idle", &["sleep", "30"]);
            assert!(other.created_session);
            let spawned = server.spawn("run1", "node-a", &["sh", "-c", "echo hi; exit 3"]);
            assert!(spawned.created_session);
            assert!(spawned.pane_pid > 0);
            let pane = server.wait_dead(&spawned.pane_id);
            assert_eq!(pane.dead_status, Some(3));
            assert_eq!(pane.session, "run1");
            assert_eq!(pane.window, "node-a");
            assert_eq!(pane.pane_pid, Some(spawned.pane_pid));
            wait_file(&server.log("node-a"), |c| c.windows(2).any(|w| w == b"hi"));
            assert!(!fs::read_to_string(server.log("idle"))
                .unwrap_or_default()
                .contains("hi"));

            // A second node in the same session: new-window, and its own log.
            let second = server.spawn("run1", "node-b", &["sh", "-c", "echo second; exit 0"]);
            assert!(!second.created_session);
            assert_eq!(server.wait_dead(&second.pane_id).dead_status, Some(0));
            wait_file(&server.log("node-b"), |c| {
                String::from_utf8_lossy(c).contains("second")
            });
            assert!(
                !String::from_utf8_lossy(&fs::read(server.log("node-a")).unwrap())
                    .contains("second")
            );

            let panes = server.tmux.list_panes().unwrap();
            assert_eq!(panes.len(), 3);
            let alive = panes.iter().find(|p| p.pane_id == other.pane_id).unwrap();
            assert!(!alive.dead);
            assert_eq!(alive.dead_status, None);

            // The windows have the fixed size.
            let out = server
                .tmux
                .run1(&[
                    "display-message",
                    "-p",
                    "-t",
                    &second.pane_id,
                    "#{window_width}x#{window_height} #{window-size}",
                ])
                .unwrap();
            assert_eq!(String::from_utf8_lossy(&out).trim(), "200x50 manual");

            assert!(server.tmux.kill_window_of_pane(&spawned.pane_id).unwrap());
            assert!(!server.tmux.kill_window_of_pane(&spawned.pane_id).unwrap());
            assert!(server.tmux.kill_window("run1", "node-b").unwrap());
            assert!(!server.tmux.has_session("run1").unwrap());
            assert!(server.tmux.has_session("other").unwrap());
            assert!(!server.tmux.has_session("oth").unwrap());
            assert!(server.tmux.kill_session("other").unwrap());
            assert_eq!(server.tmux.list_panes().unwrap(), vec![]);
        });
    }

    #[test]
    fn environment_reaches_the_program() {
        in_every_mode(|server| {
            let out = server.dir.join("env.out");
            let env = vec![
                ("OCTL_RUN".to_string(), "01JDXJ".to_string()),
                (
                    "OCTL_TRICKY".to_string(),
                    "va'l $(x) ;\n#{pane_id}".to_string(),
                ),
            ];
            let script = format!(
                r#"printf '%s\0%s' "$OCTL_RUN" "$OCTL_TRICKY" > {}"#,
                sh_quote(out.to_str().unwrap())
            );
            let spawned = server.spawn_env("run", "env", &["sh", "-c", &script], &env);
            assert_eq!(server.wait_dead(&spawned.pane_id).dead_status, Some(0));
            assert_eq!(
                String::from_utf8(fs::read(&out).unwrap()).unwrap(),
                "01JDXJ\0va'l $(x) ;\n#{pane_id}"
            );
        });
    }

    /// The program receives exactly the argv, and the working directory, log path and
    /// arguments survive shell and tmux syntax.
    #[test]
    fn argv_survives_quoting() {
        in_every_mode(|server| {
            let cwd = server.dir.join("work dir #{pane_id} ; $(x)");
            fs::create_dir(&cwd).unwrap();
            fs::write(cwd.join("x"), "must survive").unwrap();
            let log = server.dir.join("logs #1;").join("node.log");
            let script = r#"pwd > argv.cwd; for a in "$@"; do printf '%s\0' "$a"; done > argv.out; echo logged"#;
            let mut argv: Vec<String> =
                vec!["/bin/sh".into(), "-c".into(), script.into(), "sh".into()];
            argv.extend(TRICKY.iter().map(|s| s.to_string()));
            let spawned = server
                .tmux
                .spawn_window(&WindowSpec {
                    session: "run",
                    window: "quoting",
                    cwd: &cwd,
                    env: &[],
                    argv: &argv,
                    log: &log,
                })
                .unwrap();
            assert_eq!(server.wait_dead(&spawned.pane_id).dead_status, Some(0));
            let expected: Vec<u8> = TRICKY
                .iter()
                .flat_map(|a| [a.as_bytes(), b"\0"].concat())
                .collect();
            assert_eq!(
                String::from_utf8_lossy(&fs::read(cwd.join("argv.out")).unwrap()),
                String::from_utf8_lossy(&expected)
            );
            assert_eq!(
                fs::read_to_string(cwd.join("argv.cwd")).unwrap().trim_end(),
                cwd.to_str().unwrap()
            );
            assert_eq!(fs::read_to_string(cwd.join("x")).unwrap(), "must survive");
            assert!(!cwd.join("pwned").exists());
            wait_file(&log, |c| String::from_utf8_lossy(c).contains("logged"));
        });
    }

    #[test]
    fn long_command_goes_through_a_script() {
        in_every_mode(|server| {
            let out = server.dir.join("long.out");
            let long = "x'$(y)\n".repeat(5000);
            let argv: Vec<String> = vec![
                "/bin/sh".into(),
                "-c".into(),
                r#"printf '%s' "$1" > "$2""#.into(),
                "sh".into(),
                long.clone(),
                out.to_str().unwrap().into(),
            ];
            let log = server.log("long");
            let spawned = server
                .tmux
                .spawn_window(&WindowSpec {
                    session: "run",
                    window: "long",
                    cwd: &server.dir,
                    env: &[],
                    argv: &argv,
                    log: &log,
                })
                .unwrap();
            assert_eq!(server.wait_dead(&spawned.pane_id).dead_status, Some(0));
            assert_eq!(fs::read_to_string(&out).unwrap(), long);
            assert!(!launch_script_path(&log).exists());
        });
    }

    #[test]
    fn signal_death_is_reported_as_a_status() {
        in_every_mode(|server| {
            let spawned = server.spawn("run", "killed", &["sh", "-c", "kill -TERM $$"]);
            assert_eq!(
                server.wait_dead(&spawned.pane_id).dead_status,
                Some(128 + 15)
            );
        });
    }

    #[test]
    fn missing_directory_fails_the_program() {
        in_every_mode(|server| {
            let argv = vec!["touch".to_string(), "created".to_string()];
            let spawned = server
                .tmux
                .spawn_window(&WindowSpec {
                    session: "run",
                    window: "nodir",
                    cwd: &server.dir.join("missing"),
                    env: &[],
                    argv: &argv,
                    log: &server.log("nodir"),
                })
                .unwrap();
            assert_eq!(server.wait_dead(&spawned.pane_id).dead_status, Some(126));
        });
    }

    #[test]
    fn send_keys_and_capture() {
        in_every_mode(|server| {
            let spawned = server.spawn("run", "cat", &["cat"]);
            let text = "hello #{pane_id} $(x) ;";
            server
                .tmux
                .send_keys_literal(&spawned.pane_id, text)
                .unwrap();
            server.tmux.send_enter(&spawned.pane_id).unwrap();
            // The terminal echoes the line and cat prints it again.
            wait_for(|| {
                let screen = server.tmux.capture_pane(&spawned.pane_id).unwrap();
                (screen.matches(text).count() >= 2).then_some(())
            });
        });
    }

    #[test]
    fn control_client_takes_over_once_the_server_runs() {
        let server = Server::new();
        assert_eq!(server.tmux.list_panes().unwrap(), vec![]);
        let first = server.spawn("run", "idle", &["sleep", "30"]);
        // The server was started by a process, which set its global options.
        assert_eq!(server.tmux.control_answers(), 0);
        let panes = server.tmux.list_panes().unwrap();
        assert_eq!(server.tmux.control_answers(), 1);
        let ids: Vec<&str> = panes.iter().map(|p| p.pane_id.as_str()).collect();
        assert_eq!(ids, [first.pane_id.as_str()]);

        // The hidden session is there, and nothing reports it.
        let process = server.process_only();
        let sessions = process
            .read1(&["list-sessions", "-F", "#{session_name}"])
            .unwrap();
        assert!(String::from_utf8_lossy(&sessions)
            .lines()
            .any(|s| s == CONTROL_SESSION));
        assert_eq!(process.list_panes().unwrap(), panes);
        assert!(!server.tmux.has_session(CONTROL_SESSION).unwrap());
        assert!(!server.tmux.kill_session(CONTROL_SESSION).unwrap());
        assert!(!server.tmux.kill_window(CONTROL_SESSION, "cat").unwrap());
        let argv = vec!["true".to_string()];
        let err = server
            .tmux
            .spawn_window(&WindowSpec {
                session: CONTROL_SESSION,
                window: "w",
                cwd: &server.dir,
                env: &[],
                argv: &argv,
                log: &server.log("w"),
            })
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidParams, "{err}");

        // The client asked for no pane output and to leave window sizes alone.
        let flags = server
            .tmux
            .run1(&["display-message", "-p", "#{client_flags}"])
            .unwrap();
        let flags = String::from_utf8_lossy(&flags);
        assert!(
            flags.contains("no-output") && flags.contains("ignore-size"),
            "{flags}"
        );

        // Clones share the one client.
        let clone = server.tmux.clone();
        assert_eq!(clone.list_panes().unwrap(), panes);
        assert_eq!(server.tmux.control_answers(), 3);
        let clients = process
            .read1(&["list-clients", "-F", "#{client_control_mode}"])
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&clients), "1\n");
    }

    /// Strings that mean something to tmux's parser, at the start of an argument and inside.
    fn hostile() -> Vec<String> {
        let mut all: Vec<String> = TRICKY.iter().map(|s| s.to_string()).collect();
        all.extend(
            [
                "'",
                "''",
                "x'y",
                "\"",
                "\"\\\"",
                "#",
                "#{pane_id}",
                "#[fg=red]",
                "$HOME",
                "${HOME}",
                "$",
                "~",
                "~/x",
                "~root",
                "{",
                "}",
                "{ a }",
                "\\",
                "\\n",
                "x\\",
                "\\\n",
                "%",
                "%if",
                "%1",
                "%end 1 2 1",
                "\u{1f}",
                "#{pane_id}\u{1f}#{pane_pid}",
                "\r",
                "\n",
                "\r\n",
                "\t",
                "\u{1b}[31m",
                "\u{1}\u{7f}",
                "\u{a0}",
                "😀",
                "A=b",
                "a b=c",
                "-",
                "-t",
            ]
            .map(String::from),
        );
        // Many quotes and newlines, yet within what a command line takes.
        all.push("'\n".repeat(3000));
        all
    }

    /// Every hostile argument reaches the server unchanged through the control client, and
    /// the same as through a process.
    #[test]
    fn hostile_arguments_round_trip() {
        let server = Server::new();
        server.spawn("run", "idle", &["sleep", "30"]);
        let process = server.process_only();
        for (i, value) in hostile().iter().enumerate() {
            let mut shown = Vec::new();
            for (path, tmux) in [("control", &server.tmux), ("process", &process)] {
                let before = tmux.control_answers();
                let mut calls = 2;
                // The bytes as the server has them: it writes the buffer to a file.
                // (set-buffer ignores empty data.)
                if !value.is_empty() {
                    let file = server.dir.join(format!("{path}-{i}"));
                    tmux.run(&[
                        strings(&["set-buffer", "-b", "octl-x", "--", value]),
                        strings(&["save-buffer", "-b", "octl-x", file.to_str().unwrap()]),
                    ])
                    .unwrap_or_else(|e| panic!("{path} {value:?}: {e}"));
                    assert_eq!(fs::read(&file).unwrap(), value.as_bytes(), "{path}");
                    calls += 1;
                }
                tmux.run(&[strings(&["set-option", "-g", "@octl-x", value])])
                    .unwrap_or_else(|e| panic!("{path} {value:?}: {e}"));
                shown.push(
                    tmux.read(&[strings(&["show-options", "-gv", "@octl-x"])])
                        .unwrap(),
                );
                let by_control = if path == "control" { calls } else { 0 };
                assert_eq!(tmux.control_answers(), before + by_control, "{value:?}");
            }
            assert_eq!(shown[0], shown[1], "{value:?}");
        }
        // A NUL cannot be on a command line: the process path reports it, as before.
        let before = server.tmux.control_answers();
        let err = server
            .tmux
            .run(&[strings(&["set-option", "-g", "@octl-x", "a\0b"])])
            .unwrap_err();
        assert!(matches!(err, TmuxError::Spawn { .. }), "{err}");
        assert_eq!(server.tmux.control_answers(), before);
    }

    #[test]
    fn errors_carry_tmux_messages() {
        let server = Server::new();
        let first = server.spawn("run", "a", &["sleep", "30"]);
        let process = server.process_only();
        // The second command fails: the third does not run, on either path.
        let line = [
            strings(&["set-option", "-g", "@octl-x", "one"]),
            strings(&["kill-window", "-t", "%999"]),
            strings(&["set-option", "-g", "@octl-x", "three"]),
        ];
        let mut errors = Vec::new();
        for tmux in [&server.tmux, &process] {
            errors.push(tmux.run(&line).unwrap_err());
            let value = tmux
                .read(&[strings(&["show-options", "-gv", "@octl-x"])])
                .unwrap();
            assert_eq!(String::from_utf8_lossy(&value), "one\n");
        }
        assert_eq!(server.tmux.control_answers(), 2);
        match (&errors[0], &errors[1]) {
            (
                TmuxError::Failed { argv, code, stderr },
                TmuxError::Failed {
                    argv: argv2,
                    code: code2,
                    stderr: stderr2,
                },
            ) => {
                assert_eq!((argv, code, stderr), (argv2, code2, stderr2));
                assert_eq!(stderr, "can't find pane: %999\n");
            }
            other => panic!("{other:?}"),
        }
        assert!(errors[0].is_not_found());

        // The answers read from tmux's messages are the same through the client.
        assert!(!server.tmux.kill_window_of_pane("%999").unwrap());
        assert!(!server.tmux.has_session("nosuch").unwrap());
        assert!(server.tmux.has_session("run").unwrap());
        let argv = vec!["sleep".to_string(), "30".to_string()];
        let before = server.tmux.control_answers();
        // new-session fails with "duplicate session", then new-window.
        let second = server
            .tmux
            .spawn_first_window(&WindowSpec {
                session: "run",
                window: "b",
                cwd: &server.dir,
                env: &[],
                argv: &argv,
                log: &server.log("b"),
            })
            .unwrap();
        assert!(!second.created_session);
        assert_eq!(server.tmux.control_answers(), before + 2);
        let mut ids: Vec<String> = server
            .tmux
            .list_panes()
            .unwrap()
            .into_iter()
            .map(|p| p.pane_id)
            .collect();
        ids.sort();
        let mut expected = vec![first.pane_id, second.pane_id];
        expected.sort();
        assert_eq!(ids, expected);
    }

    #[test]
    fn kill_server_then_the_next_calls_still_work() {
        let server = Server::new();
        server.spawn("run", "a", &["sleep", "30"]);
        server.tmux.list_panes().unwrap();
        let answers = server.tmux.control_answers();
        assert!(answers > 0);
        server.tmux.kill_server().unwrap();
        assert_eq!(server.tmux.list_panes().unwrap(), vec![]);
        assert!(!server.tmux.has_session("run").unwrap());
        let again = server.spawn("run", "b", &["sleep", "30"]);
        assert!(again.created_session);
        // A client attaches again (at once, or after the back-off of an attach that found
        // the old server exiting).
        let panes = wait_for(|| {
            let before = server.tmux.control_answers();
            let panes = server.tmux.list_panes().unwrap();
            (server.tmux.control_answers() > before).then_some(panes)
        });
        assert_eq!(panes.len(), 1);
        assert_eq!(panes[0].pane_id, again.pane_id);
    }

    /// Another client kills the server under the control client: a call that changes things
    /// finds the client gone and runs by process, which starts a new server.
    #[test]
    fn a_server_killed_elsewhere_is_started_again() {
        let server = Server::new();
        server.spawn("run", "a", &["sleep", "30"]);
        server.tmux.list_panes().unwrap();
        assert!(server.tmux.control_answers() > 0);
        server.process_only().kill_server().unwrap();
        let again = server.spawn("run", "b", &["sleep", "30"]);
        assert!(again.created_session);
        let panes = server.tmux.list_panes().unwrap();
        assert_eq!(panes.len(), 1);
        assert_eq!(panes[0].pane_id, again.pane_id);
    }

    /// Someone kills the hidden session: its client ends, and the next one makes it again.
    #[test]
    fn a_lost_control_session_is_made_again() {
        let server = Server::new();
        let first = server.spawn("run", "a", &["sleep", "30"]);
        server.tmux.list_panes().unwrap();
        let process = server.process_only();
        let control_session = format!("={CONTROL_SESSION}");
        process
            .run1(&["kill-session", "-t", &control_session])
            .unwrap();
        wait_for(|| {
            let panes = server.tmux.list_panes().unwrap();
            assert_eq!(panes.len(), 1);
            assert_eq!(panes[0].pane_id, first.pane_id);
            process.read1(&["has-session", "-t", &control_session]).ok()
        });
        let before = server.tmux.control_answers();
        server.tmux.list_panes().unwrap();
        assert_eq!(server.tmux.control_answers(), before + 1);
    }

    /// The client is not tied to the thread that attached it: the daemon's calls come from a
    /// pool whose threads end when idle, and the client is killed when the thread that
    /// started it ends.
    #[test]
    fn the_client_outlives_the_thread_that_attached_it() {
        let server = Server::new();
        server.spawn("run", "a", &["sleep", "30"]);
        let tmux = server.tmux.clone();
        std::thread::spawn(move || tmux.list_panes().unwrap())
            .join()
            .unwrap();
        assert_eq!(server.tmux.control_answers(), 1);
        let clients = || {
            server
                .process_only()
                .read1(&["list-clients", "-F", "#{client_pid}"])
                .unwrap()
        };
        let before = clients();
        assert_eq!(String::from_utf8_lossy(&before).lines().count(), 1);
        server.tmux.list_panes().unwrap();
        assert_eq!(server.tmux.control_answers(), 2);
        assert_eq!(clients(), before);
    }

    /// What `/proc` says of a process's state (`T` stopped, `Z` a zombie), `None` once it is
    /// gone.
    fn process_state(pid: u32) -> Option<char> {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat.rsplit_once(')')?.1.trim_start().chars().next()
    }

    fn signal(pid: u32, signal: libc::c_int) {
        assert!(pid > 1);
        // SAFETY: kill(2) has no memory-safety preconditions; the pid is a tmux process this
        // test started (its server or its control client).
        assert_eq!(
            unsafe { libc::kill(pid as libc::pid_t, signal) },
            0,
            "kill {pid}"
        );
    }

    /// A process stopped (SIGSTOP) until this is dropped, or until a deadline at the latest: a
    /// failing assertion never leaves it stopped, and a call that wrongly waits on it (a
    /// process run again on a hung server) ends, to fail the test, rather than hang it.
    struct Stopped {
        done: Option<std::sync::mpsc::Sender<()>>,
        watchdog: Option<std::thread::JoinHandle<()>>,
    }

    impl Stopped {
        fn new(pid: u32) -> Stopped {
            let (done, wait) = std::sync::mpsc::channel::<()>();
            signal(pid, libc::SIGSTOP);
            let watchdog = std::thread::spawn(move || {
                let _ = wait.recv_timeout(Duration::from_secs(5));
                signal(pid, libc::SIGCONT);
            });
            let stopped = Stopped {
                done: Some(done),
                watchdog: Some(watchdog),
            };
            // The signal is only queued when kill(2) returns.
            wait_for(|| (process_state(pid) == Some('T')).then_some(()));
            stopped
        }
    }

    impl Drop for Stopped {
        fn drop(&mut self) {
            drop(self.done.take());
            if let Some(watchdog) = self.watchdog.take() {
                let _ = watchdog.join();
            }
        }
    }

    /// The pid of `server`'s tmux server.
    fn server_pid(server: &Server) -> u32 {
        server.process_only().read_panes().unwrap().1.unwrap()
    }

    /// Another handle on `server`'s socket, with its own control client and process count.
    fn handle(server: &Server, control: Control) -> Tmux {
        Tmux {
            control: Arc::new(control),
            processes: Arc::default(),
            ..server.tmux.clone()
        }
    }

    fn processes(tmux: &Tmux) -> u64 {
        tmux.processes.load(Ordering::Relaxed)
    }

    /// A hung server: the call fails after the deadline, and is not run again (it may have
    /// run, and a process would hang as well).
    #[test]
    fn no_answer_is_an_error_and_not_run_again() {
        let server = Server::new();
        let cat = server.spawn("run", "cat", &["cat"]);
        let pid = server_pid(&server);
        let tmux = handle(
            &server,
            Control::new(true).with_timeout(Duration::from_millis(300)),
        );
        let change = |tmux: &Tmux| tmux.send_key(&cat.pane_id, "Enter");
        let read = |tmux: &Tmux| tmux.list_panes().map(drop);
        type Call<'a> = &'a dyn Fn(&Tmux) -> Result<()>;
        let calls: [(&str, Call); 2] = [("change", &change), ("read", &read)];
        for (what, call) in calls {
            // The client is attached (again, after the last timeout dropped it).
            let answers = tmux.control_answers();
            assert_eq!(tmux.list_panes().unwrap().len(), 1);
            assert_eq!(tmux.control_answers(), answers + 1, "{what}");
            let processes_before = processes(&tmux);
            let stopped = Stopped::new(pid);
            let err = call(&tmux).unwrap_err();
            assert!(matches!(err, TmuxError::NoAnswer { .. }), "{what}: {err}");
            assert_eq!(err.kind(), ErrorKind::ToolFailed);
            assert_eq!(processes(&tmux), processes_before, "{what} was run again");
            assert_eq!(tmux.control_answers(), answers + 1, "{what}");
            drop(stopped);
        }
    }

    /// The stream ends after a request was written, while the server still runs (someone
    /// killed the client's session): a change is reported rather than risked twice, a read is
    /// run again by process.
    ///
    /// The request is a line that marks that it is running, then waits (`wait-for`), so that
    /// it is in the server, unanswered, when the session is killed. (Stopping the server and
    /// killing the client process would not end the stream: the server holds the client's
    /// input and output itself.)
    #[test]
    fn a_broken_stream_reruns_only_reads() {
        let server = Server::new();
        server.spawn("run", "a", &["sleep", "30"]);
        let tmux = handle(&server, Control::new(true));
        let process = server.process_only();
        let waiting = |mark: &str| {
            let shown = process.read1(&["show-options", "-gqv", mark]).unwrap();
            (String::from_utf8_lossy(&shown).trim() == "running").then_some(())
        };
        let kill_client_session = || {
            process
                .run1(&["kill-session", "-t", &format!("={CONTROL_SESSION}")])
                .unwrap();
        };
        let blocking_call = |mark: &str, idempotent: bool| {
            let (tmux, mark) = (tmux.clone(), mark.to_string());
            std::thread::spawn(move || {
                tmux.run_as(
                    &[
                        strings(&["set-option", "-g", &mark, "running"]),
                        strings(&["wait-for", &mark]),
                    ],
                    idempotent,
                )
            })
        };

        // A change.
        tmux.list_panes().unwrap();
        assert_eq!(tmux.control_answers(), 1);
        let call = blocking_call("@octl-change", false);
        wait_for(|| waiting("@octl-change"));
        kill_client_session();
        // Were it run again by process, it would wait until the server is killed.
        wait_for(|| call.is_finished().then_some(()));
        let err = call.join().unwrap().unwrap_err();
        assert!(matches!(err, TmuxError::NoAnswer { .. }), "{err}");
        assert_eq!(err.kind(), ErrorKind::ToolFailed);
        assert_eq!(processes(&tmux), 0, "the change was run again");
        assert_eq!(tmux.control_answers(), 1);

        // A read, with a new client: run again by process, it waits in turn, until told to
        // go on.
        tmux.list_panes().unwrap();
        assert_eq!(tmux.control_answers(), 2);
        let call = blocking_call("@octl-read", true);
        wait_for(|| waiting("@octl-read"));
        kill_client_session();
        wait_for(|| (processes(&tmux) == 1).then_some(()));
        wait_for(|| {
            process.run1(&["wait-for", "-S", "@octl-read"]).unwrap();
            call.is_finished().then_some(())
        });
        assert!(call.join().unwrap().is_ok());
        assert_eq!(processes(&tmux), 1);
        assert_eq!(tmux.control_answers(), 2);
    }

    /// An attach that fails (here it gets no answer in time: the server is stopped) costs the
    /// call only the try: it runs by process. During the back-off no attach is tried.
    #[test]
    fn a_failed_attach_falls_back() {
        let server = Server::new();
        let first = server.spawn("run", "a", &["sleep", "30"]);
        let pid = server_pid(&server);
        let tmux = handle(
            &server,
            Control::new(true).with_attach(Duration::from_millis(300), Duration::from_secs(60)),
        );
        let probe = &tmux.control.probe;
        let stopped = Stopped::new(pid);
        let call = {
            let tmux = tmux.clone();
            std::thread::spawn(move || tmux.list_panes())
        };
        // The process run after the failed attach waits for the server to go on.
        wait_for(|| (probe.failed_attaches.load(Ordering::Relaxed) == 1).then_some(()));
        drop(stopped);
        let panes = call.join().unwrap().unwrap();
        assert_eq!(panes.len(), 1);
        assert_eq!(panes[0].pane_id, first.pane_id);
        assert_eq!(probe.attaches.load(Ordering::Relaxed), 1);
        assert_eq!(processes(&tmux), 1);

        tmux.send_enter(&first.pane_id).unwrap();
        assert_eq!(tmux.list_panes().unwrap(), panes);
        assert_eq!(probe.attaches.load(Ordering::Relaxed), 1);
        assert_eq!(processes(&tmux), 3);
        assert_eq!(tmux.control_answers(), 0);
    }

    /// A tmux older than the client needs is never asked to attach one.
    #[test]
    fn an_old_tmux_is_driven_by_processes() {
        let server = Server::new();
        let first = server.spawn("run", "a", &["sleep", "30"]);
        let tmux = handle(&server, Control::new(true));
        // As `version()` would note it from a tmux 3.1.
        tmux.control
            .note_version(parse_version("tmux 3.1").unwrap());
        assert_eq!(tmux.list_panes().unwrap()[0].pane_id, first.pane_id);
        tmux.send_enter(&first.pane_id).unwrap();
        assert_eq!(tmux.control.probe.attaches.load(Ordering::Relaxed), 0);
        assert_eq!(processes(&tmux), 2);
        assert_eq!(tmux.control_answers(), 0);
    }

    /// The server-wide options, as the server has them.
    fn server_options_of(server: &Server) -> String {
        let out = server
            .process_only()
            .read(&[
                strings(&["show-options", "-gv", "default-shell"]),
                strings(&["show-options", "-gv", "default-size"]),
                strings(&["show-options", "-gwv", "remain-on-exit"]),
                strings(&["show-options", "-sv", "exit-empty"]),
                strings(&["show-options", "-gwv", "allow-rename"]),
                strings(&["show-options", "-gwv", "automatic-rename"]),
            ])
            .unwrap();
        String::from_utf8_lossy(&out).into_owned()
    }

    const CONFIGURED: &str = "/bin/sh\n200x50\non\noff\noff\noff\n";

    /// A new run's session sends the server-wide options only to a server that does not have
    /// them from this handle: one it starts, or one started by someone else.
    #[test]
    fn server_options_reach_each_server_once() {
        let server = Server::new();
        let spawn_first = |session: &str| {
            let argv = vec!["sleep".to_string(), "30".to_string()];
            let spawned = server
                .tmux
                .spawn_first_window(&WindowSpec {
                    session,
                    window: "w",
                    cwd: &server.dir,
                    env: &[],
                    argv: &argv,
                    log: &server.log(session),
                })
                .unwrap();
            assert!(spawned.created_session);
            spawned
        };
        let process = server.process_only();
        // The process that starts the server sets them.
        spawn_first("run1");
        assert_eq!(processes(&server.tmux), 1);
        assert_eq!(server_options_of(&server), CONFIGURED);

        // Through the client, on that server, they are not sent again: a change made
        // meanwhile stays.
        server.tmux.list_panes().unwrap();
        process
            .run1(&["set-option", "-g", "default-size", "80x24"])
            .unwrap();
        let answers = server.tmux.control_answers();
        spawn_first("run2");
        assert_eq!(server.tmux.control_answers(), answers + 1);
        assert_eq!(processes(&server.tmux), 1);
        assert_eq!(
            server_options_of(&server),
            CONFIGURED.replace("200x50", "80x24")
        );

        // Someone else kills the server and starts another, without them; the client
        // attaches to it, and the options go with the next session.
        let old = server_pid(&server);
        process.kill_server().unwrap();
        // A client that comes while the old server exits gets "server exited unexpectedly".
        wait_for(|| matches!(process_state(old), None | Some('Z')).then_some(()));
        process
            .run1(&["new-session", "-d", "-s", "other", "--", "sleep", "30"])
            .unwrap();
        assert_ne!(server_options_of(&server), CONFIGURED);
        wait_for(|| {
            let before = server.tmux.control_answers();
            server.tmux.list_panes().unwrap();
            (server.tmux.control_answers() > before).then_some(())
        });
        let (answers, processes_before) = (server.tmux.control_answers(), processes(&server.tmux));
        spawn_first("run3");
        assert_eq!(server.tmux.control_answers(), answers + 1);
        assert_eq!(processes(&server.tmux), processes_before);
        assert_eq!(server_options_of(&server), CONFIGURED);

        // After this handle's own kill-server, the process that starts the next server sets
        // them.
        server.tmux.kill_server().unwrap();
        let processes_before = processes(&server.tmux);
        spawn_first("run4");
        assert_eq!(processes(&server.tmux), processes_before + 1);
        assert_eq!(server_options_of(&server), CONFIGURED);
    }

    /// Not a check: the median time of `list_panes` and of spawns, by process and through
    /// the control client, the two taking turns so that the machine's load weighs on both
    /// alike. `cargo test -p octld --release --lib -- --ignored --nocapture tmux_timing`
    #[test]
    #[ignore]
    fn tmux_timing() {
        fn median(mut times: Vec<Duration>) -> Duration {
            times.sort();
            times[times.len() / 2]
        }
        let servers = [
            Server::with_mode(Mode::Process),
            Server::with_mode(Mode::Control),
        ];
        let argv = vec!["sleep".to_string(), "600".to_string()];
        let spawn = |server: &Server, session: &str, window: &str, first: bool| {
            let log = server.log(window);
            let spec = WindowSpec {
                session,
                window,
                cwd: &server.dir,
                env: &[],
                argv: &argv,
                log: &log,
            };
            let start = Instant::now();
            if first {
                server.tmux.spawn_first_window(&spec).unwrap();
            } else {
                server.tmux.spawn_window(&spec).unwrap();
            }
            start.elapsed()
        };
        let list = |server: &Server| {
            let start = Instant::now();
            server.tmux.list_panes().unwrap();
            start.elapsed()
        };
        // Each figure: 50 turns of each server.
        let measure = |f: &dyn Fn(&Server, usize) -> Duration| {
            let mut times = [Vec::new(), Vec::new()];
            for i in 0..50 {
                for (k, server) in servers.iter().enumerate() {
                    times[k].push(f(server, i));
                }
            }
            times.map(median)
        };
        for server in &servers {
            spawn(server, "warm", "w", false);
            list(server);
        }
        let lists_1 = measure(&|s, _| list(s));
        // A node's window in its run's session, then a new run's first window.
        let windows = measure(&|s, i| spawn(s, "run", &format!("n{i}"), false));
        // New runs' first windows, taking turns with ones for which the server-wide options
        // are sent again, as they were before the handle remembered its server.
        let mut sessions = [[Vec::new(), Vec::new()], [Vec::new(), Vec::new()]];
        for i in 0..100 {
            for (k, server) in servers.iter().enumerate() {
                let again = i % 2 == 1;
                if again {
                    *server.tmux.configured.lock().unwrap() = None;
                }
                sessions[k][usize::from(again)].push(spawn(
                    server,
                    &format!("run{i}"),
                    "first",
                    true,
                ));
            }
        }
        let [sessions, sessions_again] = [0, 1].map(|again| {
            [
                median(sessions[0][again].clone()),
                median(sessions[1][again].clone()),
            ]
        });
        let lists_151 = measure(&|s, _| list(s));
        for (k, server) in servers.iter().enumerate() {
            eprintln!(
                "{:?}: list_panes (1 pane) {:?}, spawn_window {:?}, spawn_first_window {:?} \
                 (options sent again: {:?}), list_panes (151 panes) {:?}; control answers {}",
                server.mode,
                lists_1[k],
                windows[k],
                sessions[k],
                sessions_again[k],
                lists_151[k],
                server.tmux.control_answers()
            );
        }
    }
}
