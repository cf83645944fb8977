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
//!
//! The module, file by file:
//!
//! - `mod.rs`: the [`Tmux`] handle, its settings, and the names the rest of the daemon uses;
//! - `run.rs`: running a command line, through the control client or as a process;
//! - `control.rs`: the control-mode client itself;
//! - `server.rs`: the server-wide options sent with a `new-session`, and `kill-server`;
//! - `windows.rs`: sessions and windows, [`Tmux::spawn_window`] and the kills;
//! - `launch.rs`: the `sh` text a new pane runs (inline, or a script file when too long);
//! - `panes.rs`: [`Tmux::list_panes`] (what the supervisor polls), keys, captures;
//! - `quote.rs`: quoting for `sh` and for tmux's command line;
//! - `version.rs`: `tmux -V` and [`MIN_VERSION`];
//! - `error.rs`: [`TmuxError`] and what tmux's messages mean;
//! - `tests/`: the unit tests, against a real tmux server on a private socket.
//!
//! The timings of these calls (by process and through the client) are `bench tmux`, in
//! `tests/src/bin/bench.rs`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
#[cfg(test)]
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

mod control;
mod error;
mod launch;
mod panes;
mod quote;
mod run;
mod server;
mod version;
mod windows;

#[cfg(test)]
mod tests;

use control::{Control, ServerId};

pub use control::CONTROL_SESSION;
pub use error::{Result, TmuxError};
pub use panes::PaneInfo;
pub use quote::{sh_join, sh_quote, tmux_arg};
pub use version::{parse_version, Version, MIN_VERSION};
pub use windows::{Spawned, WindowSpec};

/// Columns and rows of every window (`-x`/`-y`, `default-size`, `window-size manual`).
pub const DEFAULT_SIZE: (u16, u16) = (200, 50);

/// Separates fields in list output; names are validated so it cannot occur in them.
const SEP: char = '\x1f';

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

    /// The tmux program commands run (`tmux` from `PATH` unless [`Tmux::with_program`]).
    pub fn program(&self) -> &std::ffi::OsStr {
        &self.program
    }
}
