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
    #[error("`{}` failed ({}): {}", display_argv(argv), display_code(*code), stderr.trim())]
    Failed {
        argv: Vec<String>,
        /// `None` when git was killed by a signal.
        code: Option<i32>,
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

fn display_code(code: Option<i32>) -> String {
    match code {
        Some(c) => format!("exit {c}"),
        None => "killed by a signal".to_string(),
    }
}
