//! Git plumbing: the one place where the daemon runs `git`.
//!
//! Every command is `git -C <dir> …` from an argv (never a shell string), with `LC_ALL=C` (so
//! the few messages we recognise are stable), no pager, no editor and no credential prompt.
//! Variables that would point git at another repository (`GIT_DIR`, `GIT_INDEX_FILE`, …) are
//! removed, so a daemon started from inside a git hook still works on the directory it names.
//! The user's git configuration (identity, hooks, signing) is inherited on purpose; callers add
//! variables with [`Git::with_env`].
//!
//! The calls are synchronous; the daemon runs them in `spawn_blocking`. The merge rules (the
//! docs/MERGING.md, "Merging without losing anything") are built from: [`Git::plan_merge`] (merge-tree, fast-forward when possible),
//! [`Git::move_branch`] (compare-and-swap, or `--ff-only` through the worktree that has the
//! target checked out), and [`Git::snapshot`] (nothing an agent wrote is lost before its
//! worktree goes).
//!
//! Map (most modules add methods to [`Git`]; its type and environment live here):
//! - `command`: one prepared git command, run to completion; failures as [`GitError`].
//! - `error`: [`GitError`] and the error kind each maps to.
//! - `version`: [`Git::version`], [`MIN_VERSION`].
//! - `repo`: where a directory is in its repository; revisions resolved, ancestry.
//! - `branches`: create, delete (only when merged), the checked-out branch.
//! - `worktrees`: add, list, remove, prune, one bookkeeping change at a time per repository.
//! - `changes`: status, paths changed between commits, what a snapshot would miss, commit all.
//! - `snapshot`: [`Git::snapshot`] under [`SNAPSHOT_REF_PREFIX`].
//! - `merge`: merge-tree, [`Git::plan_merge`], compare-and-swap refs, [`Git::move_branch`].

mod branches;
mod changes;
mod command;
mod error;
mod merge;
mod repo;
mod snapshot;
mod version;
mod worktrees;

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;

pub use branches::BranchDelete;
use command::Call;
pub use error::{GitError, Result};
pub use merge::{CasOutcome, MergePlan, MoveOutcome};
pub use snapshot::{snapshot_ref, Snapshot, SNAPSHOT_REF_PREFIX};
pub use version::{Version, MIN_VERSION};
/// What only the tests name.
#[cfg(test)]
use {merge::MergeTree, version::parse_version};

/// Inherited variables that would make `-C <dir>` point somewhere else.
const REPO_LOCATION_VARS: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
];

/// How long a git step of the daemon waits for a ref lock held by another git.
const REF_LOCK_WAIT: &str = "core.filesRefLockTimeout=3000";

/// A git handle on one directory (a repository or any of its worktrees).
#[derive(Debug, Clone)]
pub struct Git {
    dir: PathBuf,
    program: OsString,
    env: Vec<(OsString, OsString)>,
}

impl Git {
    /// A handle on `dir`, which must be inside a repository for every call but
    /// [`Git::version`].
    pub fn new(dir: impl Into<PathBuf>) -> Git {
        Git {
            dir: dir.into(),
            program: OsString::from("git"),
            env: Vec::new(),
        }
    }

    /// Adds a variable to every command (e.g. an identity in tests).
    pub fn with_env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Git {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Runs `program` instead of `git` from `PATH`.
    pub fn with_program(mut self, program: impl Into<OsString>) -> Git {
        self.program = program.into();
        self
    }

    /// The same settings on another directory (typically one of the repository's worktrees).
    pub fn at(&self, dir: impl Into<PathBuf>) -> Git {
        Git {
            dir: dir.into(),
            ..self.clone()
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn base_command(&self) -> Command {
        let mut cmd = Command::new(&self.program);
        for var in REPO_LOCATION_VARS {
            cmd.env_remove(var);
        }
        cmd.env("LC_ALL", "C")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_PAGER", "cat")
            .env("GIT_EDITOR", "true")
            .env("GIT_MERGE_AUTOEDIT", "no");
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }

    fn call<I, S>(&self, args: I) -> Call
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = self.base_command();
        cmd.arg("--no-pager").arg("-C").arg(&self.dir);
        // git waits 100 ms for a ref another git holds, made for a person who can run the
        // command again; the daemon's steps (a cancel's branch deletion while the agent's
        // last `git commit` is being stopped, a merge beside the user's own git) wait longer.
        cmd.arg("-c").arg(REF_LOCK_WAIT);
        let mut argv = vec![
            self.program.to_string_lossy().into_owned(),
            "-C".to_string(),
            self.dir.to_string_lossy().into_owned(),
        ];
        for arg in args {
            argv.push(arg.as_ref().to_string_lossy().into_owned());
            cmd.arg(arg);
        }
        Call {
            cmd,
            argv,
            dir: Some(self.dir.clone()),
            program: self.program.to_string_lossy().into_owned(),
        }
    }
}

#[cfg(test)]
mod tests;
