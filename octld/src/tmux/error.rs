//! What can go wrong, and what tmux's messages mean.

use octl_proto::ErrorKind;

use super::{Version, MIN_VERSION};

pub type Result<T, E = TmuxError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum TmuxError {
    /// The tmux program could not be found (maps to kind `tool_missing`).
    #[error("`{program}` was not found: install tmux {MIN_VERSION} or newer")]
    Missing { program: String },
    #[error("could not run `{}`: {source}{}", argv.join(" "), crate::nofile::explain(source).map(|m| format!(" — {m}")).unwrap_or_default())]
    Spawn {
        argv: Vec<String>,
        #[source]
        source: std::io::Error,
    },
    /// tmux ran and exited unsuccessfully in a way this module does not interpret.
    #[error("`{}` failed ({}): {}", argv.join(" "), crate::ended::display(*code, *signal), stderr.trim())]
    Failed {
        argv: Vec<String>,
        code: Option<i32>,
        /// The signal that killed it, when one did.
        signal: Option<i32>,
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

    pub(super) fn stderr_contains(&self, needle: &str) -> bool {
        matches!(self, TmuxError::Failed { stderr, .. } if stderr.contains(needle))
    }

    /// Nothing listens on the socket, or the server is exiting with no session left:
    /// "not running" rather than a failure.
    pub(super) fn is_no_server(&self) -> bool {
        self.stderr_contains("no server running")
            || self.stderr_contains("error connecting to")
            || self.stderr_contains("no current target")
            || self.is_server_gone()
    }

    /// The server went away while answering, as it does when a kill removes its last
    /// session.
    pub(super) fn is_server_gone(&self) -> bool {
        self.stderr_contains("server exited unexpectedly") || self.stderr_contains("lost server")
    }

    pub(super) fn is_not_found(&self) -> bool {
        self.stderr_contains("can't find")
    }
}

pub(super) fn invalid(what: &'static str, value: &str, accepted: &'static str) -> TmuxError {
    TmuxError::Invalid {
        what,
        value: value.to_string(),
        accepted,
    }
}
