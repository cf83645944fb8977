//! The server as a whole: the server-wide options that go with the `new-session` that may
//! start it, and stopping it.

use std::sync::PoisonError;

use super::control::ServerId;
use super::run::strings;
use super::windows::kill_answer;
use super::{Result, Tmux, SEP};

impl Tmux {
    /// Runs `commands`, whose first is a `new-session` that prints the server's identity
    /// ([`SERVER_ID_FORMAT`]) as the last field of its line, after the server-wide options
    /// (they come first so that they hold before the first program can exit). The options are
    /// left out only when the line goes through a control client attached to the server that
    /// last answered such a line: a client never starts a server (`tmux -N`), and stays with
    /// the one it attached to. A process always sends them: no server may be running, or
    /// another than the one configured (someone killed and started it).
    ///
    /// [`SERVER_ID_FORMAT`]: super::control::SERVER_ID_FORMAT
    pub(super) fn new_session(&self, commands: &[Vec<String>]) -> Result<Vec<u8>> {
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
