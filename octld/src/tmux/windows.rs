//! Sessions and windows: starting a program in a new window (and its run's session), and
//! killing windows and sessions.

use std::path::Path;

use super::control::{CONTROL_SESSION, SERVER_ID_FORMAT};
use super::error::invalid;
use super::launch::{launch_script, launch_script_path, write_private, INLINE_LIMIT};
use super::panes::{check_pane_id, is_pane_id};
use super::quote::{format_literal, sh_quote};
use super::run::strings;
use super::{Result, Tmux, TmuxError, SEP};

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

impl Tmux {
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

    /// Kills the window that holds `pane_id`. `false` if there was none.
    pub fn kill_window_of_pane(&self, pane_id: &str) -> Result<bool> {
        check_pane_id(pane_id)?;
        self.kill(&["kill-window", "-t", pane_id])
    }

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

    /// Kills the window named `window` in `session`. `false` if there was none; an error if
    /// several windows there have that name.
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

    fn kill(&self, args: &[&str]) -> Result<bool> {
        kill_answer(self.run1(args))
    }
}

/// What a kill command's result means: `true` if it killed something, `false` if there was
/// nothing to kill.
pub(super) fn kill_answer(result: Result<Vec<u8>>) -> Result<bool> {
    match result {
        Ok(_) => Ok(true),
        Err(e) if e.is_server_gone() => Ok(true),
        Err(e) if e.is_no_server() || e.is_not_found() => Ok(false),
        Err(e) => Err(e),
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
