//! [`GitError`]: what can go wrong running git, and the stable error kind each maps to.

use std::path::PathBuf;

use octl_proto::ErrorKind;

use super::{Version, MIN_VERSION};

pub type Result<T, E = GitError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// The git program could not be found (maps to kind `tool_missing`).
    #[error("`{program}` was not found: install git {MIN_VERSION} or newer")]
    Missing { program: String },
    /// The program exists but could not be started.
    #[error("could not run `{}`: {source}{}", display_argv(argv), crate::nofile::explain(source).map(|m| format!(" — {m}")).unwrap_or_default())]
    Spawn {
        argv: Vec<String>,
        #[source]
        source: std::io::Error,
    },
    /// git ran and exited unsuccessfully in a way this module does not interpret.
    #[error("`{}` failed ({}){}", display_argv(argv), crate::ended::display(*code, *signal), said(stderr))]
    Failed {
        argv: Vec<String>,
        /// `None` when git was killed by a signal.
        code: Option<i32>,
        /// The signal that killed it, when one did.
        signal: Option<i32>,
        stderr: String,
    },
    #[error("unexpected output from `{}`: {detail}", display_argv(argv))]
    Parse { argv: Vec<String>, detail: String },
    #[error(
        "git {found} is too old: {MIN_VERSION} or newer is needed (for merge-tree --write-tree)"
    )]
    TooOld { found: Version },
    #[error("{} is not inside a git repository", dir.display())]
    NotARepo { dir: PathBuf },
    #[error("HEAD is detached in {}: check out a branch or name the base branch", dir.display())]
    DetachedHead { dir: PathBuf },
    #[error("unknown revision or branch `{rev}`")]
    UnknownRevision { rev: String },
    #[error("temporary index for a snapshot: {0}")]
    TempIndex(#[source] std::io::Error),
}

impl GitError {
    /// The stable error kind the daemon reports for this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            GitError::Missing { .. } | GitError::TooOld { .. } => ErrorKind::ToolMissing,
            GitError::NotARepo { .. } | GitError::DetachedHead { .. } => ErrorKind::InvalidParams,
            GitError::UnknownRevision { .. } => ErrorKind::NotFound,
            GitError::Spawn { .. }
            | GitError::Failed { .. }
            | GitError::Parse { .. }
            | GitError::TempIndex(_) => ErrorKind::ToolFailed,
        }
    }
}

fn display_argv(argv: &[String]) -> String {
    argv.join(" ")
}

impl GitError {
    /// The signal that killed git, if one did (SIGBUS: a file it mapped could not be read,
    /// as on a full tmpfs).
    pub fn signal(&self) -> Option<i32> {
        match self {
            GitError::Failed { signal, .. } => *signal,
            _ => None,
        }
    }
}

/// `: <what git said>`, or nothing when it said nothing.
fn said(stderr: &str) -> String {
    match stderr.trim() {
        "" => String::new(),
        s => format!(": {s}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_names_the_signal_and_no_empty_stderr() {
        let failed = |code, signal, stderr: &str| GitError::Failed {
            argv: vec!["git".into(), "status".into()],
            code,
            signal,
            stderr: stderr.into(),
        };
        assert_eq!(
            failed(None, Some(libc::SIGBUS), "").to_string(),
            "`git status` failed (killed by signal 7 (SIGBUS))"
        );
        assert_eq!(
            failed(None, Some(libc::SIGKILL), "stopped\n").to_string(),
            "`git status` failed (killed by signal 9 (SIGKILL)): stopped"
        );
        assert_eq!(
            failed(Some(128), None, "fatal: no\n").to_string(),
            "`git status` failed (exit 128): fatal: no"
        );
        assert_eq!(
            failed(None, Some(64), " ").to_string(),
            "`git status` failed (killed by signal 64)"
        );
        assert_eq!(
            failed(None, Some(libc::SIGBUS), "").signal(),
            Some(libc::SIGBUS)
        );
    }
}
