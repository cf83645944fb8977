//! Panes: listing them all (what the supervisor polls), typing into one, reading its screen.

use super::control::CONTROL_SESSION;
use super::error::invalid;
use super::{Result, Tmux, SEP};

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

impl Tmux {
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
            .unwrap_or_else(std::sync::PoisonError::into_inner)
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

    pub(super) fn read_panes(&self) -> Result<(Vec<PaneInfo>, Option<u32>)> {
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

    /// Types `text` into the pane literally (no key names, no `Enter`).
    pub fn send_keys_literal(&self, pane_id: &str, text: &str) -> Result<()> {
        check_pane_id(pane_id)?;
        self.run1(&["send-keys", "-t", pane_id, "-l", "--", text])
            .map(|_| ())
    }

    /// Puts `text` into a pane as one paste — bracketed, when the program there asked for
    /// that — rather than as keys: a program that tells typing from pasting by how fast keys
    /// come (Claude Code) would otherwise take an `Enter` right after a long line for a
    /// newline in it, not the end of the message. Through a buffer of this call's own.
    pub fn paste_literal(&self, pane_id: &str, text: &str) -> Result<()> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        check_pane_id(pane_id)?;
        let buffer = format!(
            "octl-paste-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        self.run1(&["set-buffer", "-b", &buffer, "--", text])?;
        self.run1(&["paste-buffer", "-p", "-d", "-b", &buffer, "-t", pane_id])
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

pub(super) fn is_pane_id(id: &str) -> bool {
    id.strip_prefix('%')
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

pub(super) fn check_pane_id(id: &str) -> Result<()> {
    if is_pane_id(id) {
        Ok(())
    } else {
        Err(invalid("pane id", id, "use a tmux pane id such as %3"))
    }
}

fn parse_pane(line: &str) -> Option<PaneInfo> {
    // Polled every tick for every pane: no allocation but the fields kept.
    let mut fields = line.split(SEP);
    let mut next = || fields.next();
    let (pane_id, pid, dead, status, signal) = (next()?, next()?, next()?, next()?, next()?);
    let (window_id, session, window) = (next()?, next()?, next()?);
    if next().is_some() {
        return None;
    }
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
