//! Git plumbing: the one place where the daemon runs `git`.
//!
//! Every command is `git -C <dir> …` from an argv (never a shell string), with `LC_ALL=C` (so
//! the few messages we recognise are stable), no pager, no editor and no credential prompt.
//! Variables that would point git at another repository (`GIT_DIR`, `GIT_INDEX_FILE`, …) are
//! removed, so a daemon started from inside a git hook still works on the directory it names.
//! The user's git configuration (identity, hooks, signing) is inherited on purpose; callers add
//! variables with [`Git::with_env`].
//!
//! The calls are synchronous; the daemon runs them in `spawn_blocking`. The merge rules of
//! DESIGN.md §6 are built from: [`Git::plan_merge`] (merge-tree, fast-forward when possible),
//! [`Git::move_branch`] (compare-and-swap, or `--ff-only` through the worktree that has the
//! target checked out), and [`Git::snapshot`] (nothing an agent wrote is lost before its
//! worktree goes).

use std::collections::{BTreeSet, HashMap};
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

use octl_proto::ErrorKind;

/// `merge-tree --write-tree` appeared in 2.38.
pub const MIN_VERSION: Version = Version {
    major: 2,
    minor: 38,
    patch: 0,
};

/// Where snapshots live: `refs/octl/snapshots/<RUN>/<NODE>`.
pub const SNAPSHOT_REF_PREFIX: &str = "refs/octl/snapshots/";

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

/// A git version, `git version 2.47.3` → 2.47.3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// Parses the output of `git version`, including vendor suffixes such as
/// `git version 2.39.3 (Apple Git-146)` or `2.45.1.windows.1`.
pub fn parse_version(output: &str) -> Option<Version> {
    let number = output.trim().strip_prefix("git version ")?;
    let number = number.split_whitespace().next()?;
    let mut parts = number.split(['.', '-']).map(leading_number);
    let major = parts.next()??;
    let minor = parts.next()??;
    let patch = parts.next().flatten().unwrap_or(0);
    Some(Version {
        major,
        minor,
        patch,
    })
}

fn leading_number(s: &str) -> Option<u32> {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    s[..end].parse().ok()
}

/// The snapshot ref of one node.
pub fn snapshot_ref(run: &str, node: &str) -> String {
    format!("{SNAPSHOT_REF_PREFIX}{run}/{node}")
}

pub type Result<T, E = GitError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// The git program could not be found (maps to kind `tool_missing`).
    #[error("`{program}` was not found: install git {MIN_VERSION} or newer")]
    Missing { program: String },
    /// The program exists but could not be started.
    #[error("could not run `{}`: {source}", display_argv(argv))]
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

/// One worktree as `git worktree list --porcelain` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Worktree {
    pub path: PathBuf,
    /// `None` for a bare repository entry.
    pub head: Option<String>,
    /// Short branch name (`main`, not `refs/heads/main`); `None` when detached or bare.
    pub branch: Option<String>,
    pub bare: bool,
    pub detached: bool,
    pub locked: bool,
    /// Its directory is gone; `git worktree prune` would drop it.
    pub prunable: bool,
}

/// One entry of `git status --porcelain=v1`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusEntry {
    /// Index status (`X`): `?` for untracked, `M`, `A`, `D`, `R`, `U`, …
    pub index: char,
    /// Worktree status (`Y`).
    pub worktree: char,
    pub path: String,
    /// The source of a rename or copy.
    pub orig_path: Option<String>,
}

impl StatusEntry {
    /// Every path this entry makes dirty (both sides of a rename).
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.path.as_str()).chain(self.orig_path.as_deref())
    }
}

/// Result of [`Git::snapshot`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// `refs/octl/snapshots/<RUN>/<NODE>`.
    pub refname: String,
    /// What the ref points at now.
    pub commit: String,
    /// The worktree's HEAD when the snapshot was taken.
    pub head: String,
    /// Whether there were uncommitted or untracked files.
    pub dirty: bool,
}

/// Result of [`Git::delete_branch`] and [`Git::delete_merged_branch`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BranchDelete {
    Deleted,
    /// Refused: the branch has commits that are not merged.
    NotMerged,
    /// Refused: the branch is checked out in this worktree.
    CheckedOut {
        worktree: PathBuf,
    },
    /// There was no such branch (already deleted).
    Absent,
}

/// Result of [`Git::merge_tree`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MergeTree {
    Clean { tree: String },
    Conflict { files: Vec<String> },
}

/// What merging `branch` into `target` amounts to; see [`Git::plan_merge`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MergePlan {
    /// `branch` is already contained in `target`: nothing to move.
    UpToDate {
        target: String,
    },
    /// `target` can simply move forward to `new` (the branch tip).
    FastForward {
        old: String,
        new: String,
    },
    /// A merge commit `new` (parents: `old`, then the branch tip) was built.
    Merge {
        old: String,
        new: String,
    },
    Conflict {
        files: Vec<String>,
    },
}

/// Result of [`Git::cas_update_ref`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CasOutcome {
    Updated,
    /// The ref no longer had the expected value (`current`, `None` if it is gone): the caller
    /// lost a race and should recompute and retry.
    Stale {
        current: Option<String>,
    },
}

/// Result of [`Git::move_branch`] and [`Git::fast_forward_checked_out`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MoveOutcome {
    Moved,
    /// The branch was no longer at `old`: recompute the merge and retry.
    LostRace {
        current: Option<String>,
    },
    /// The branch is checked out in `worktree`, which has uncommitted or untracked changes on
    /// `paths` that the move would change. Nothing was moved.
    TargetDirty {
        worktree: PathBuf,
        paths: Vec<String>,
    },
}

/// A git handle on one directory (a repository or any of its worktrees).
#[derive(Debug, Clone)]
pub struct Git {
    dir: PathBuf,
    program: OsString,
    env: Vec<(OsString, OsString)>,
}

/// A prepared git command and its argv, kept for error messages.
struct Call {
    cmd: Command,
    argv: Vec<String>,
    dir: Option<PathBuf>,
    program: String,
}

impl Call {
    fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.cmd.env(key, value);
        self
    }

    fn output(mut self, stdin: Option<&[u8]>) -> Result<(Output, Vec<String>, Option<PathBuf>)> {
        self.cmd
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = match self.cmd.spawn() {
            Ok(child) => child,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(GitError::Missing {
                    program: self.program,
                })
            }
            Err(source) => {
                return Err(GitError::Spawn {
                    argv: self.argv,
                    source,
                })
            }
        };
        if let Some(input) = stdin {
            // The inputs are small path lists; git reads them before writing much output.
            let mut pipe = child.stdin.take().expect("stdin is piped");
            if let Err(source) = pipe.write_all(input) {
                let _ = child.kill();
                let _ = child.wait();
                return Err(GitError::Spawn {
                    argv: self.argv,
                    source,
                });
            }
        }
        match child.wait_with_output() {
            Ok(out) => Ok((out, self.argv, self.dir)),
            Err(source) => Err(GitError::Spawn {
                argv: self.argv,
                source,
            }),
        }
    }

    /// Runs to completion; any exit status listed in `ok` is returned, others are errors.
    fn run_allowing(self, ok: &[i32], stdin: Option<&[u8]>) -> Result<(i32, Output)> {
        let (out, argv, dir) = self.output(stdin)?;
        match out.status.code() {
            Some(code) if ok.contains(&code) => Ok((code, out)),
            code => Err(failure(argv, dir, code, &out.stderr)),
        }
    }

    /// Runs to completion and returns stdout; a non-zero exit is an error.
    fn stdout(self) -> Result<Vec<u8>> {
        Ok(self.run_allowing(&[0], None)?.1.stdout)
    }

    /// Like [`Call::stdout`], trimmed to one line of UTF-8.
    fn line(self) -> Result<String> {
        let argv = self.argv.clone();
        let out = self.stdout()?;
        let text = String::from_utf8(out).map_err(|_| GitError::Parse {
            argv,
            detail: "output is not UTF-8".into(),
        })?;
        Ok(text.trim_end_matches(['\n', '\r']).to_string())
    }
}

fn failure(argv: Vec<String>, dir: Option<PathBuf>, code: Option<i32>, stderr: &[u8]) -> GitError {
    let stderr = String::from_utf8_lossy(stderr).into_owned();
    if let Some(dir) = dir {
        if stderr.contains("not a git repository") || stderr.contains("cannot change to") {
            return GitError::NotARepo { dir };
        }
    }
    GitError::Failed { argv, code, stderr }
}

fn split_z(bytes: &[u8]) -> impl Iterator<Item = String> + '_ {
    bytes
        .split(|b| *b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
}

fn same_path(a: &Path, b: &Path) -> bool {
    if a == b {
        return true;
    }
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Whether changing `changed` would touch the dirty path `dirty`: the same path, or one
/// inside the other (a file replaced by a directory, or the reverse).
fn paths_overlap(changed: &str, dirty: &str) -> bool {
    let dirty = dirty.trim_end_matches('/');
    changed == dirty
        || changed
            .strip_prefix(dirty)
            .is_some_and(|rest| rest.starts_with('/'))
        || dirty
            .strip_prefix(changed)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// Removes the snapshot's temporary index whatever happens.
struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        let mut lock = self.0.clone().into_os_string();
        lock.push(".lock");
        let _ = std::fs::remove_file(lock);
    }
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

    /// Runs `f` while no other command of this process that reads or writes the
    /// repository's worktree bookkeeping does. `git worktree add` writes
    /// `.git/worktrees/<name>/` file by file, and a git command reading every worktree
    /// meanwhile (`worktree list`, `worktree remove`, `branch`, another `worktree add`) fails
    /// with "failed to read .git/worktrees/<name>/commondir" (seen in fan-outs of 50 units).
    /// Keyed by the directory given to [`Git::new`], which the daemon makes the top level.
    fn one_at_a_time<T>(&self, f: impl FnOnce() -> T) -> T {
        static REPOS: LazyLock<Mutex<HashMap<PathBuf, Arc<Mutex<()>>>>> =
            LazyLock::new(Default::default);
        let lock = REPOS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(self.dir.clone())
            .or_default()
            .clone();
        let _held = lock.lock().unwrap_or_else(|e| e.into_inner());
        f()
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

    /// `git version`, parsed. Does not need a repository.
    pub fn version(&self) -> Result<Version> {
        let mut cmd = self.base_command();
        cmd.arg("version");
        let call = Call {
            cmd,
            argv: vec![
                self.program.to_string_lossy().into_owned(),
                "version".into(),
            ],
            dir: None,
            program: self.program.to_string_lossy().into_owned(),
        };
        let argv = call.argv.clone();
        let line = call.line()?;
        parse_version(&line).ok_or_else(|| GitError::Parse {
            argv,
            detail: format!("cannot read a version in {line:?}"),
        })
    }

    /// The version, or [`GitError::TooOld`] below [`MIN_VERSION`].
    pub fn check_version(&self) -> Result<Version> {
        let found = self.version()?;
        if found < MIN_VERSION {
            return Err(GitError::TooOld { found });
        }
        Ok(found)
    }

    /// The top-level directory of the worktree containing this directory.
    pub fn toplevel(&self) -> Result<PathBuf> {
        Ok(PathBuf::from(
            self.call(["rev-parse", "--show-toplevel"]).line()?,
        ))
    }

    /// The repository's common git directory, the same from every worktree: the key for
    /// "one merge at a time per repository".
    pub fn common_dir(&self) -> Result<PathBuf> {
        Ok(PathBuf::from(
            self.call(["rev-parse", "--path-format=absolute", "--git-common-dir"])
                .line()?,
        ))
    }

    /// The branch checked out here (short name); [`GitError::DetachedHead`] if none.
    /// A plumbing command this handle has no method for, run with the same care; its stdout.
    /// A non-zero exit is an error.
    pub fn plumbing(&self, args: &[&str]) -> Result<String> {
        Ok(String::from_utf8_lossy(&self.call(args).stdout()?).into_owned())
    }

    /// Whether `name` is a valid branch name that git takes as it is (`@{-1}` and the like,
    /// which git would expand, are refused).
    pub fn is_branch_name(&self, name: &str) -> Result<bool> {
        let (out, _, _) = self
            .call(["check-ref-format", "--branch", name])
            .output(None)?;
        Ok(out.status.success()
            && String::from_utf8_lossy(&out.stdout).trim_end_matches('\n') == name)
    }

    /// The top-level directory and the checked-out branch (`None` when HEAD is detached) in
    /// one git call: spawning asks for both.
    pub fn toplevel_and_branch(&self) -> Result<(PathBuf, Option<String>)> {
        let out = self
            .call(["rev-parse", "--show-toplevel", "--abbrev-ref", "HEAD"])
            .stdout()?;
        let out = String::from_utf8_lossy(&out);
        let mut lines = out.lines();
        let top = lines.next().unwrap_or_default();
        let branch = lines.next().unwrap_or_default();
        if top.is_empty() {
            return Err(GitError::NotARepo {
                dir: self.dir.clone(),
            });
        }
        let branch = (!branch.is_empty() && branch != "HEAD").then(|| branch.to_string());
        Ok((PathBuf::from(top), branch))
    }

    /// Where in a repository without a working tree this directory is, if it is: `Some(true)`
    /// for a bare repository, `Some(false)` inside a `.git` directory, `None` otherwise (a
    /// working tree, or no repository at all).
    pub fn without_worktree(&self) -> Option<bool> {
        let out = self
            .call(["rev-parse", "--is-bare-repository", "--is-inside-git-dir"])
            .stdout()
            .ok()?;
        let out = String::from_utf8_lossy(&out);
        let mut lines = out.lines();
        match (lines.next(), lines.next()) {
            (Some("true"), _) => Some(true),
            (_, Some("true")) => Some(false),
            _ => None,
        }
    }

    pub fn current_branch(&self) -> Result<String> {
        let (code, out) = self
            .call(["symbolic-ref", "--quiet", "--short", "HEAD"])
            .run_allowing(&[0, 1], None)?;
        if code == 1 {
            return Err(GitError::DetachedHead {
                dir: self.dir.clone(),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim_end().to_string())
    }

    /// The commit `rev` names; [`GitError::UnknownRevision`] if it names none.
    pub fn resolve_commit(&self, rev: &str) -> Result<String> {
        self.try_resolve(&format!("{rev}^{{commit}}"))?
            .ok_or_else(|| GitError::UnknownRevision {
                rev: rev.to_string(),
            })
    }

    /// The object `rev` names, or `None`.
    fn try_resolve(&self, rev: &str) -> Result<Option<String>> {
        let (code, out) = self
            .call(["rev-parse", "--verify", "--quiet", "--end-of-options", rev])
            .run_allowing(&[0, 1], None)?;
        Ok((code == 0).then(|| String::from_utf8_lossy(&out.stdout).trim_end().to_string()))
    }

    pub fn head(&self) -> Result<String> {
        self.resolve_commit("HEAD")
    }

    pub fn branch_exists(&self, branch: &str) -> Result<bool> {
        Ok(self.try_resolve(&format!("refs/heads/{branch}"))?.is_some())
    }

    /// Creates `branch` at `at`; fails if it already exists.
    pub fn create_branch(&self, branch: &str, at: &str) -> Result<()> {
        self.one_at_a_time(|| {
            self.call(["branch", "--no-track", "--end-of-options", branch, at])
                .stdout()
        })?;
        Ok(())
    }

    /// `git branch -d` (never `-D`): git refuses unless the branch is merged into HEAD of this
    /// directory (or into its upstream).
    pub fn delete_branch(&self, branch: &str) -> Result<BranchDelete> {
        let (out, argv, dir) = self.one_at_a_time(|| {
            self.call(["branch", "-d", "--end-of-options", branch])
                .output(None)
        })?;
        if out.status.success() {
            return Ok(BranchDelete::Deleted);
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        if stderr.contains("not fully merged") {
            return Ok(BranchDelete::NotMerged);
        }
        if stderr.contains("not found") {
            return Ok(BranchDelete::Absent);
        }
        if stderr.contains("used by worktree") || stderr.contains("checked out at") {
            if let Some(wt) = self.worktree_for_branch(branch)? {
                return Ok(BranchDelete::CheckedOut { worktree: wt.path });
            }
        }
        Err(failure(argv, dir, out.status.code(), &out.stderr))
    }

    /// Deletes `branch` if its tip is contained in `merged_into`: the safety of
    /// `git branch -d`, but judged against the branch the work was merged into rather than
    /// whatever HEAD the user's checkout happens to be on (`-d` would refuse a branch merged
    /// into `main` while the user sits on another branch). The deletion is a compare-and-swap
    /// on the tip that was checked, so a commit landing meanwhile is never dropped.
    pub fn delete_merged_branch(&self, branch: &str, merged_into: &str) -> Result<BranchDelete> {
        let refname = format!("refs/heads/{branch}");
        let into = self.resolve_commit(merged_into)?;
        // A few rounds: a lost compare-and-swap means the tip moved and must be judged again.
        for _ in 0..3 {
            let Some(tip) = self.try_resolve(&refname)? else {
                return Ok(BranchDelete::Absent);
            };
            if !self.is_ancestor(&tip, &into)? {
                return Ok(BranchDelete::NotMerged);
            }
            if let Some(wt) = self.worktree_for_branch(branch)? {
                return Ok(BranchDelete::CheckedOut { worktree: wt.path });
            }
            let (out, argv, dir) = self
                .call(["update-ref", "-d", &refname, &tip])
                .output(None)?;
            if out.status.success() {
                return Ok(BranchDelete::Deleted);
            }
            if self.try_resolve(&refname)?.as_deref() == Some(tip.as_str()) {
                return Err(failure(argv, dir, out.status.code(), &out.stderr));
            }
        }
        Ok(BranchDelete::NotMerged)
    }

    /// `git worktree add -b <branch> <path> <base>`: a new branch at `base`, checked out at
    /// `path` (parent directories are created).
    pub fn worktree_add(&self, path: &Path, branch: &str, base: &str) -> Result<()> {
        self.one_at_a_time(|| {
            self.call([
                OsStr::new("worktree"),
                OsStr::new("add"),
                OsStr::new("-b"),
                OsStr::new(branch),
                OsStr::new("--"),
                path.as_os_str(),
                OsStr::new(base),
            ])
            .stdout()
        })?;
        Ok(())
    }

    /// `git worktree add <path> <branch>` for a branch that already exists.
    pub fn worktree_add_existing(&self, path: &Path, branch: &str) -> Result<()> {
        self.one_at_a_time(|| {
            self.call([
                OsStr::new("worktree"),
                OsStr::new("add"),
                OsStr::new("--"),
                path.as_os_str(),
                OsStr::new(branch),
            ])
            .stdout()
        })?;
        Ok(())
    }

    /// `git worktree remove <path>`: git refuses if it has uncommitted or untracked files.
    /// Removing a worktree that is already gone succeeds.
    pub fn worktree_remove(&self, path: &Path) -> Result<()> {
        self.remove_worktree(path, false)
    }

    /// `git worktree remove --force <path>`. Taking a [`Snapshot`] is the proof that its
    /// uncommitted and untracked files were saved first.
    pub fn worktree_remove_snapshotted(&self, path: &Path, _saved: &Snapshot) -> Result<()> {
        self.remove_worktree(path, true)
    }

    fn remove_worktree(&self, path: &Path, force: bool) -> Result<()> {
        let mut args = vec![OsStr::new("worktree"), OsStr::new("remove")];
        if force {
            args.push(OsStr::new("--force"));
        }
        args.extend([OsStr::new("--"), path.as_os_str()]);
        let (out, argv, dir) = self.one_at_a_time(|| self.call(args).output(None))?;
        if out.status.success() {
            return Ok(());
        }
        // Healing after a crash may remove twice, or find the directory deleted by hand.
        let listed = self
            .worktree_list()?
            .into_iter()
            .find(|wt| same_path(&wt.path, path));
        match listed {
            None if !path.exists() => Ok(()),
            Some(wt) if wt.prunable || !path.exists() => self.worktree_prune(),
            _ => Err(failure(argv, dir, out.status.code(), &out.stderr)),
        }
    }

    /// `git worktree prune`: forgets worktrees whose directories are gone.
    pub fn worktree_prune(&self) -> Result<()> {
        self.one_at_a_time(|| self.call(["worktree", "prune"]).stdout())?;
        Ok(())
    }

    /// `git worktree list --porcelain -z`, parsed. The first entry is the main worktree.
    pub fn worktree_list(&self) -> Result<Vec<Worktree>> {
        let out = self.one_at_a_time(|| {
            self.call(["worktree", "list", "--porcelain", "-z"])
                .stdout()
        })?;
        Ok(parse_worktree_list(&out))
    }

    /// The worktree that has `branch` checked out, if any.
    pub fn worktree_for_branch(&self, branch: &str) -> Result<Option<Worktree>> {
        Ok(self
            .worktree_list()?
            .into_iter()
            .find(|wt| wt.branch.as_deref() == Some(branch)))
    }

    /// `git status --porcelain=v1` of this directory's worktree, untracked files listed one
    /// by one, ignored files left out. It takes no optional lock, so the user's own git
    /// commands in that worktree are not disturbed.
    pub fn status(&self) -> Result<Vec<StatusEntry>> {
        let call = self
            .call([
                "status",
                "--porcelain=v1",
                "-z",
                "--untracked-files=all",
                "--ignore-submodules=none",
            ])
            .env("GIT_OPTIONAL_LOCKS", "0");
        let argv = call.argv.clone();
        let out = call.stdout()?;
        parse_status(&out).map_err(|detail| GitError::Parse { argv, detail })
    }

    /// Paths that differ between two commits. Renames are not detected, so both the old and
    /// the new name of a moved file are listed.
    pub fn changed_paths(&self, old: &str, new: &str) -> Result<Vec<String>> {
        let out = self
            .call([
                "diff-tree",
                "-r",
                "-z",
                "--name-only",
                "--no-renames",
                "--no-commit-id",
                "--end-of-options",
                old,
                new,
            ])
            .stdout()?;
        Ok(split_z(&out).collect())
    }

    /// What a snapshot of this worktree would not hold, relative to it: what git ignores
    /// (an ignored directory as one entry, `dir/`) and untracked nested repositories (which
    /// a snapshot could only record as a commit id, without their files).
    pub fn unsaved_paths(&self) -> Result<Vec<PathBuf>> {
        use std::os::unix::ffi::OsStrExt;
        let listed = |args: &[&str]| -> Result<Vec<PathBuf>> {
            let out = self.call(args).env("GIT_OPTIONAL_LOCKS", "0").stdout()?;
            Ok(out
                .split(|b| *b == 0)
                .filter(|s| !s.is_empty())
                .map(|s| PathBuf::from(OsStr::from_bytes(s)))
                .collect())
        };
        let mut paths = listed(&[
            "ls-files",
            "-z",
            "--others",
            "--ignored",
            "--exclude-standard",
            "--directory",
        ])?;
        // Without --directory, git lists untracked files one by one and a nested repository
        // as `dir/`, which is the only kind of entry that ends in a slash.
        paths.extend(
            listed(&["ls-files", "-z", "--others", "--exclude-standard"])?
                .into_iter()
                .filter(|p| p.as_os_str().as_bytes().ends_with(b"/")),
        );
        Ok(paths)
    }

    /// Saves everything in the worktree at `worktree` — tracked changes and untracked files,
    /// not ignored ones — under `refs/octl/snapshots/<run>/<node>`, without touching the
    /// worktree, its index or HEAD.
    ///
    /// The ref always has the worktree's content as its tree and reaches both HEAD and every
    /// earlier snapshot of the node: a snapshot commit's first parent is HEAD and, if the ref
    /// already held something HEAD does not contain, its second parent is that old value. A
    /// clean worktree with no older snapshot gets the ref pointed at HEAD itself, so the
    /// branch tip survives the branch.
    pub fn snapshot(&self, worktree: &Path, run: &str, node: &str) -> Result<Snapshot> {
        let wt = self.at(worktree);
        let refname = snapshot_ref(run, node);
        let head = wt.head()?;
        let tree = wt.worktree_tree()?;
        let head_tree = wt.resolve_tree(&head)?;
        let dirty = tree != head_tree;
        let previous = wt.try_resolve(&refname)?;
        let mut parents = vec![head.clone()];
        if let Some(prev) = &previous {
            // Already holds this content and HEAD: a new commit would only add noise.
            if wt.resolve_tree(prev)? == tree && wt.is_ancestor(&head, prev)? {
                return Ok(Snapshot {
                    refname,
                    commit: prev.clone(),
                    head,
                    dirty,
                });
            }
            if !wt.is_ancestor(prev, &head)? {
                parents.push(prev.clone());
            }
        }
        let commit = if !dirty && parents.len() == 1 {
            head.clone()
        } else {
            let message = format!(
                "octl snapshot {run}/{node}\n\nWorktree: {}\nHEAD: {head}\n",
                worktree.display()
            );
            // Signing would prompt for a passphrase the daemon cannot give, and a snapshot is
            // not a commit anyone publishes.
            wt.commit_tree_with(&tree, &parents, &message, &["--no-gpg-sign"])?
        };
        if previous.as_deref() != Some(commit.as_str()) {
            let expected = previous.as_deref().unwrap_or("");
            wt.call([
                "update-ref",
                "-m",
                "octl snapshot",
                &refname,
                &commit,
                expected,
            ])
            .stdout()?;
        }
        Ok(Snapshot {
            refname,
            commit,
            head,
            dirty,
        })
    }

    /// The tree of the worktree's files as `git add -A` would stage them, built in a
    /// temporary index so the real one is not touched.
    fn worktree_tree(&self) -> Result<String> {
        let index = PathBuf::from(
            self.call(["rev-parse", "--path-format=absolute", "--git-path", "index"])
                .line()?,
        );
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let name = format!(
            "octl-snapshot-{}-{nanos}-{}.index",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let temp = TempFile(index.with_file_name(name));
        let env_index = temp.0.as_os_str();
        // Starting from a copy of the real index keeps what was staged but is ignored
        // (`git add -f`) and keeps the stat cache, so `add -A` need not rehash every file.
        let copied = match std::fs::copy(&index, &temp.0) {
            Ok(_) => true,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(e) => return Err(GitError::TempIndex(e)),
        };
        if copied {
            // Entries marked assume-unchanged would hide their edits from `add -A`.
            let listing = self
                .call(["ls-files", "-v", "-z"])
                .env("GIT_INDEX_FILE", env_index)
                .stdout()?;
            let mut hidden = Vec::new();
            for entry in split_z(&listing) {
                if let Some((tag, path)) = entry.split_once(' ') {
                    if tag.chars().all(|c| c.is_ascii_lowercase()) {
                        hidden.extend_from_slice(path.as_bytes());
                        hidden.push(0);
                    }
                }
            }
            if !hidden.is_empty() {
                self.call(["update-index", "--no-assume-unchanged", "-z", "--stdin"])
                    .env("GIT_INDEX_FILE", env_index)
                    .run_allowing(&[0], Some(&hidden))?;
            }
        } else {
            self.call(["read-tree", "HEAD"])
                .env("GIT_INDEX_FILE", env_index)
                .stdout()?;
        }
        self.call(["add", "-A", "--", "."])
            .env("GIT_INDEX_FILE", env_index)
            .stdout()?;
        self.call(["write-tree"])
            .env("GIT_INDEX_FILE", env_index)
            .line()
    }

    fn resolve_tree(&self, commit: &str) -> Result<String> {
        self.try_resolve(&format!("{commit}^{{tree}}"))?
            .ok_or_else(|| GitError::UnknownRevision {
                rev: commit.to_string(),
            })
    }

    /// `git add -A` then `git commit -m <message>` in this directory's worktree. Returns the
    /// new commit, or `None` when there was nothing to commit. The repository's hooks and
    /// signing settings apply, as for any commit the user makes.
    pub fn commit_all(&self, message: &str) -> Result<Option<String>> {
        self.call(["add", "-A", "--", "."]).stdout()?;
        let (code, _) = self
            .call(["diff", "--cached", "--quiet", "--no-ext-diff"])
            .run_allowing(&[0, 1], None)?;
        if code == 0 {
            return Ok(None);
        }
        self.call(["commit", "--quiet", "-m", message]).stdout()?;
        Ok(Some(self.head()?))
    }

    /// `git merge-tree --write-tree` of `branch` into `target`: the merged tree, or the files
    /// in conflict. Nothing is checked out or changed (the tree's objects are written).
    pub fn merge_tree(&self, target: &str, branch: &str) -> Result<MergeTree> {
        let call = self.call([
            "merge-tree",
            "--write-tree",
            "--name-only",
            "--no-messages",
            "-z",
            "--end-of-options",
            target,
            branch,
        ]);
        let argv = call.argv.clone();
        let (code, out) = call.run_allowing(&[0, 1], None)?;
        let mut fields = split_z(&out.stdout);
        // Exit 1 also covers "not something we can merge", which prints no tree.
        let Some(tree) = fields.next().filter(|t| is_hex(t)) else {
            return Err(GitError::Failed {
                argv,
                code: Some(code),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            });
        };
        if code == 0 {
            return Ok(MergeTree::Clean { tree });
        }
        let files: BTreeSet<String> = fields.collect();
        Ok(MergeTree::Conflict {
            files: files.into_iter().collect(),
        })
    }

    /// `git merge-base --is-ancestor a b`: whether `a` is contained in `b` (true if equal).
    pub fn is_ancestor(&self, a: &str, b: &str) -> Result<bool> {
        let (code, _) = self
            .call(["merge-base", "--is-ancestor", "--end-of-options", a, b])
            .run_allowing(&[0, 1], None)?;
        Ok(code == 0)
    }

    /// `git commit-tree <tree> -p <parent>… -m <message>`: the new commit.
    pub fn commit_tree(&self, tree: &str, parents: &[String], message: &str) -> Result<String> {
        self.commit_tree_with(tree, parents, message, &[])
    }

    fn commit_tree_with(
        &self,
        tree: &str,
        parents: &[String],
        message: &str,
        extra: &[&str],
    ) -> Result<String> {
        let mut args: Vec<&str> = vec!["commit-tree"];
        args.extend_from_slice(extra);
        for parent in parents {
            args.extend(["-p", parent.as_str()]);
        }
        args.extend(["-m", message, tree]);
        self.call(args).line()
    }

    /// What merging `branch` into `target` takes (both any commit-ish, usually branch names):
    /// nothing, a fast-forward, a merge commit (built here with `commit-tree`, parents target
    /// then branch), or a conflict. No ref moves; pass the result to [`Git::move_branch`].
    pub fn plan_merge(&self, target: &str, branch: &str, message: &str) -> Result<MergePlan> {
        let old = self.resolve_commit(target)?;
        let tip = self.resolve_commit(branch)?;
        if self.is_ancestor(&tip, &old)? {
            return Ok(MergePlan::UpToDate { target: old });
        }
        if self.is_ancestor(&old, &tip)? {
            return Ok(MergePlan::FastForward { old, new: tip });
        }
        match self.merge_tree(&old, &tip)? {
            MergeTree::Conflict { files } => Ok(MergePlan::Conflict { files }),
            MergeTree::Clean { tree } => {
                let new = self.commit_tree(&tree, &[old.clone(), tip], message)?;
                Ok(MergePlan::Merge { old, new })
            }
        }
    }

    /// `git update-ref -m <reason> <refname> <new> <old>`: moves the ref only if it is still
    /// at `old` (`None`: only if it does not exist yet).
    pub fn cas_update_ref(
        &self,
        refname: &str,
        new: &str,
        old: Option<&str>,
        reason: &str,
    ) -> Result<CasOutcome> {
        let expected = old.unwrap_or("");
        let (out, argv, dir) = self
            .call(["update-ref", "-m", reason, refname, new, expected])
            .output(None)?;
        if out.status.success() {
            return Ok(CasOutcome::Updated);
        }
        let current = self.try_resolve(refname)?;
        if current.as_deref() != old {
            return Ok(CasOutcome::Stale { current });
        }
        Err(failure(argv, dir, out.status.code(), &out.stderr))
    }

    /// Moves `branch` from `old` to `new` (a descendant of `old`) the safe way: if a worktree
    /// has the branch checked out, only through that worktree
    /// ([`Git::fast_forward_checked_out`]); otherwise by compare-and-swap on the ref.
    ///
    /// A worktree whose directory is gone does not count as having it checked out: there are
    /// no files to keep in step.
    pub fn move_branch(
        &self,
        branch: &str,
        old: &str,
        new: &str,
        reason: &str,
    ) -> Result<MoveOutcome> {
        match self.worktree_for_branch(branch)? {
            Some(wt) if !wt.prunable && !wt.bare => {
                self.fast_forward_checked_out(&wt.path, old, new, reason)
            }
            _ => {
                let refname = format!("refs/heads/{branch}");
                match self.cas_update_ref(&refname, new, Some(old), reason)? {
                    CasOutcome::Updated => Ok(MoveOutcome::Moved),
                    CasOutcome::Stale { current } => Ok(MoveOutcome::LostRace { current }),
                }
            }
        }
    }

    /// In `worktree`, whose HEAD should be the branch at `old`: `git merge --ff-only <new>`,
    /// but only if none of the paths that differ between `old` and `new` has uncommitted or
    /// untracked changes there; otherwise [`MoveOutcome::TargetDirty`] and nothing moves.
    /// Changes on other paths are left as they are.
    pub fn fast_forward_checked_out(
        &self,
        worktree: &Path,
        old: &str,
        new: &str,
        reason: &str,
    ) -> Result<MoveOutcome> {
        let wt = self.at(worktree);
        let head = wt.head()?;
        if head != old {
            return Ok(MoveOutcome::LostRace {
                current: Some(head),
            });
        }
        let changed = self.changed_paths(old, new)?;
        let blocking = wt.dirty_among(&changed)?;
        if !blocking.is_empty() {
            return Ok(MoveOutcome::TargetDirty {
                worktree: worktree.to_path_buf(),
                paths: blocking,
            });
        }
        // No autostash: it would lift and replay the user's unrelated edits.
        let (out, argv, dir) = wt
            .call([
                "merge",
                "--ff-only",
                "--no-autostash",
                "--quiet",
                "--end-of-options",
                new,
            ])
            .env("GIT_REFLOG_ACTION", reason)
            .output(None)?;
        if out.status.success() {
            return Ok(MoveOutcome::Moved);
        }
        // The user may have edited or moved the branch between our check and the merge.
        let blocking = wt.dirty_among(&changed)?;
        if !blocking.is_empty() {
            return Ok(MoveOutcome::TargetDirty {
                worktree: worktree.to_path_buf(),
                paths: blocking,
            });
        }
        let head = wt.head()?;
        if head != old {
            return Ok(MoveOutcome::LostRace {
                current: Some(head),
            });
        }
        Err(failure(argv, dir, out.status.code(), &out.stderr))
    }

    /// The dirty paths of this worktree that overlap `changed`.
    fn dirty_among(&self, changed: &[String]) -> Result<Vec<String>> {
        let status = self.status()?;
        let mut blocking = BTreeSet::new();
        for entry in &status {
            for dirty in entry.paths() {
                for path in changed {
                    if paths_overlap(path, dirty) {
                        blocking.insert(path.clone());
                    }
                }
            }
        }
        Ok(blocking.into_iter().collect())
    }
}

fn is_hex(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit())
}

fn parse_worktree_list(bytes: &[u8]) -> Vec<Worktree> {
    let mut list = Vec::new();
    let mut current: Option<Worktree> = None;
    // Records are NUL-terminated lines; an empty line ends a worktree.
    for line in bytes.split(|b| *b == 0) {
        let line = String::from_utf8_lossy(line);
        if line.is_empty() {
            list.extend(current.take());
            continue;
        }
        let (key, value) = line.split_once(' ').unwrap_or((&line, ""));
        if key == "worktree" {
            list.extend(current.take());
            current = Some(Worktree {
                path: PathBuf::from(value),
                head: None,
                branch: None,
                bare: false,
                detached: false,
                locked: false,
                prunable: false,
            });
            continue;
        }
        let Some(wt) = current.as_mut() else { continue };
        match key {
            "HEAD" => wt.head = Some(value.to_string()),
            "branch" => {
                wt.branch = Some(
                    value
                        .strip_prefix("refs/heads/")
                        .unwrap_or(value)
                        .to_string(),
                )
            }
            "bare" => wt.bare = true,
            "detached" => wt.detached = true,
            "locked" => wt.locked = true,
            "prunable" => wt.prunable = true,
            _ => {}
        }
    }
    list.extend(current);
    list
}

fn parse_status(bytes: &[u8]) -> std::result::Result<Vec<StatusEntry>, String> {
    let mut entries = Vec::new();
    let mut fields = bytes.split(|b| *b == 0).filter(|f| !f.is_empty());
    while let Some(field) = fields.next() {
        let text = String::from_utf8_lossy(field);
        let mut chars = text.chars();
        let (Some(index), Some(worktree), Some(' ')) = (chars.next(), chars.next(), chars.next())
        else {
            return Err(format!("bad status entry {text:?}"));
        };
        let path = chars.as_str().to_string();
        // With -z the source of a rename or copy follows as its own field.
        let orig_path = if matches!(index, 'R' | 'C') || matches!(worktree, 'R' | 'C') {
            let orig = fields
                .next()
                .ok_or_else(|| format!("rename without a source: {text:?}"))?;
            Some(String::from_utf8_lossy(orig).into_owned())
        } else {
            None
        };
        entries.push(StatusEntry {
            index,
            worktree,
            path,
            orig_path,
        });
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// A repository in a temp dir, with git isolated from the real user's configuration.
    struct Fixture {
        _tmp: tempfile::TempDir,
        root: PathBuf,
        git: Git,
    }

    fn isolated(dir: &Path, home: &Path) -> Git {
        Git::new(dir)
            .with_env("HOME", home)
            .with_env("XDG_CONFIG_HOME", home)
            .with_env("GIT_CONFIG_NOSYSTEM", "1")
            .with_env("GIT_CONFIG_GLOBAL", "/dev/null")
            .with_env("GIT_AUTHOR_NAME", "Test")
            .with_env("GIT_AUTHOR_EMAIL", "test@example.com")
            .with_env("GIT_COMMITTER_NAME", "Test")
            .with_env("GIT_COMMITTER_EMAIL", "test@example.com")
    }

    impl Fixture {
        fn new() -> Fixture {
            let tmp = tempfile::tempdir().unwrap();
            let root = tmp.path().canonicalize().unwrap();
            let repo = root.join("repo");
            fs::create_dir(&repo).unwrap();
            let git = isolated(&repo, &root);
            git.run(&["init", "-q", "-b", "main"]);
            git.write("README", "hello\n");
            git.write("shared.txt", "one\ntwo\nthree\n");
            git.run(&["add", "-A"]);
            git.run(&["commit", "-q", "-m", "initial"]);
            Fixture {
                _tmp: tmp,
                root,
                git,
            }
        }

        fn repo(&self) -> &Path {
            self.git.dir()
        }

        /// A branch `name` off main with one commit writing `file`.
        fn branch_with(&self, name: &str, file: &str, content: &str) -> String {
            let wt = self.root.join(format!("wt-{name}"));
            self.git.worktree_add(&wt, name, "main").unwrap();
            let g = self.git.at(&wt);
            g.write(file, content);
            g.run(&["add", "-A"]);
            g.run(&["commit", "-q", "-m", name]);
            let tip = g.head().unwrap();
            self.git.worktree_remove(&wt).unwrap();
            tip
        }
    }

    impl Git {
        fn run(&self, args: &[&str]) -> String {
            String::from_utf8(self.call(args).stdout().unwrap()).unwrap()
        }

        fn write(&self, path: &str, content: &str) {
            let p = self.dir().join(path);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, content).unwrap();
        }

        fn read(&self, path: &str) -> String {
            fs::read_to_string(self.dir().join(path)).unwrap()
        }
    }

    /// Worktrees added from several threads while another lists them, as a fan-out does:
    /// without one-at-a-time bookkeeping git fails now and then with "failed to read
    /// .git/worktrees/<name>/commondir".
    #[test]
    fn worktrees_added_and_listed_concurrently() {
        let f = Fixture::new();
        let adding = std::sync::atomic::AtomicUsize::new(4);
        std::thread::scope(|scope| {
            for t in 0..4 {
                let (f, adding) = (&f, &adding);
                scope.spawn(move || {
                    for i in 0..6 {
                        let wt = f.root.join(format!("wt-{t}-{i}"));
                        f.git
                            .worktree_add(&wt, &format!("b/{t}/{i}"), "main")
                            .unwrap();
                    }
                    adding.fetch_sub(1, Ordering::SeqCst);
                });
            }
            let (f, adding) = (&f, &adding);
            scope.spawn(move || {
                while adding.load(Ordering::SeqCst) > 0 {
                    f.git.worktree_list().unwrap();
                }
            });
        });
        assert_eq!(f.git.worktree_list().unwrap().len(), 1 + 4 * 6);
    }

    #[test]
    fn parses_versions() {
        let v = |s| parse_version(s).unwrap();
        assert_eq!(
            v("git version 2.47.3\n"),
            Version {
                major: 2,
                minor: 47,
                patch: 3
            }
        );
        assert_eq!(
            v("git version 2.39.3 (Apple Git-146)"),
            Version {
                major: 2,
                minor: 39,
                patch: 3
            }
        );
        assert_eq!(
            v("git version 2.45.1.windows.1"),
            Version {
                major: 2,
                minor: 45,
                patch: 1
            }
        );
        assert_eq!(
            v("git version 2.50.0-rc1"),
            Version {
                major: 2,
                minor: 50,
                patch: 0
            }
        );
        assert_eq!(
            v("git version 3.0"),
            Version {
                major: 3,
                minor: 0,
                patch: 0
            }
        );
        assert!(parse_version("hg 6.1").is_none());
        assert!(v("git version 2.37.9") < MIN_VERSION);
        assert!(v("git version 2.38.0") >= MIN_VERSION);
    }

    #[test]
    fn parses_status_with_renames() {
        let raw = b"R  new name\0old name\0 M file\0?? dir/untracked\0";
        let entries = parse_status(raw).unwrap();
        assert_eq!(entries.len(), 3);
        assert_eq!(entries[0].path, "new name");
        assert_eq!(entries[0].orig_path.as_deref(), Some("old name"));
        assert_eq!(entries[1].worktree, 'M');
        assert_eq!(entries[2].index, '?');
        assert!(parse_status(b"bad").is_err());
    }

    #[test]
    fn overlapping_paths() {
        assert!(paths_overlap("a/b", "a/b"));
        assert!(paths_overlap("a/b", "a"));
        assert!(paths_overlap("a/b", "a/"));
        assert!(paths_overlap("a", "a/b"));
        assert!(!paths_overlap("a/bc", "a/b"));
        assert!(!paths_overlap("ab", "a"));
    }

    #[test]
    fn missing_program_is_distinct() {
        let git = Git::new("/").with_program("/nonexistent/octl-no-such-git");
        let err = git.version().unwrap_err();
        assert!(matches!(err, GitError::Missing { .. }), "{err:?}");
        assert_eq!(err.kind(), ErrorKind::ToolMissing);
    }

    #[test]
    fn version_and_repository_queries() {
        let f = Fixture::new();
        assert!(f.git.check_version().unwrap() >= MIN_VERSION);
        let sub = f.repo().join("sub");
        fs::create_dir(&sub).unwrap();
        assert_eq!(f.git.at(&sub).toplevel().unwrap(), f.repo());
        assert_eq!(f.git.current_branch().unwrap(), "main");
        assert_eq!(f.git.common_dir().unwrap(), f.repo().join(".git"));
        let head = f.git.head().unwrap();
        assert_eq!(f.git.resolve_commit("main").unwrap(), head);
        assert!(matches!(
            f.git.resolve_commit("no-such-branch"),
            Err(GitError::UnknownRevision { .. })
        ));
        let outside = f.root.join("outside");
        fs::create_dir(&outside).unwrap();
        let err = f.git.at(&outside).toplevel().unwrap_err();
        assert!(matches!(err, GitError::NotARepo { .. }), "{err:?}");

        f.git.run(&["checkout", "-q", "--detach"]);
        assert!(matches!(
            f.git.current_branch(),
            Err(GitError::DetachedHead { .. })
        ));
    }

    #[test]
    fn branches_and_worktrees() {
        let f = Fixture::new();
        let head = f.git.head().unwrap();
        assert!(!f.git.branch_exists("octl/r/a").unwrap());
        f.git.create_branch("octl/r/a", &head).unwrap();
        assert!(f.git.branch_exists("octl/r/a").unwrap());
        assert!(f.git.create_branch("octl/r/a", &head).is_err());

        let wt = f.root.join("worktrees/r/a");
        f.git.worktree_add_existing(&wt, "octl/r/a").unwrap();
        let wt2 = f.root.join("worktrees/r/b");
        f.git.worktree_add(&wt2, "octl/r/b", "main").unwrap();
        let list = f.git.worktree_list().unwrap();
        assert_eq!(list.len(), 3);
        assert_eq!(list[0].branch.as_deref(), Some("main"));
        assert_eq!(list[1].path, wt);
        assert_eq!(list[1].head.as_deref(), Some(head.as_str()));
        assert_eq!(
            f.git.worktree_for_branch("octl/r/b").unwrap().unwrap().path,
            wt2
        );
        assert!(f.git.worktree_for_branch("nobody").unwrap().is_none());

        assert_eq!(
            f.git.delete_branch("octl/r/a").unwrap(),
            BranchDelete::CheckedOut {
                worktree: wt.clone()
            }
        );
        f.git.worktree_remove(&wt).unwrap();
        f.git.worktree_remove(&wt).unwrap();
        assert_eq!(
            f.git.delete_branch("octl/r/a").unwrap(),
            BranchDelete::Deleted
        );
        assert_eq!(
            f.git.delete_branch("octl/r/a").unwrap(),
            BranchDelete::Absent
        );

        // A worktree with untracked files is not removed without a snapshot.
        f.git.at(&wt2).write("new.txt", "x");
        assert!(f.git.worktree_remove(&wt2).is_err());
        assert!(wt2.join("new.txt").exists());
        let snap = f.git.snapshot(&wt2, "r", "b").unwrap();
        f.git.worktree_remove_snapshotted(&wt2, &snap).unwrap();
        assert!(!wt2.exists());

        // A worktree whose directory was deleted by hand is forgotten.
        let wt3 = f.root.join("worktrees/r/c");
        f.git.worktree_add(&wt3, "octl/r/c", "main").unwrap();
        fs::remove_dir_all(&wt3).unwrap();
        f.git.worktree_remove(&wt3).unwrap();
        assert!(f.git.worktree_for_branch("octl/r/c").unwrap().is_none());
    }

    #[test]
    fn delete_refuses_unmerged_branch() {
        let f = Fixture::new();
        let tip = f.branch_with("feature", "f.txt", "feature\n");
        assert_eq!(
            f.git.delete_branch("feature").unwrap(),
            BranchDelete::NotMerged
        );
        assert_eq!(
            f.git.delete_merged_branch("feature", "main").unwrap(),
            BranchDelete::NotMerged
        );
        assert_eq!(f.git.resolve_commit("feature").unwrap(), tip);

        // Merged into `side` while the user's checkout stays on main: `-d` still refuses (it
        // judges against HEAD), the merged-into variant deletes.
        f.git.create_branch("side", "feature").unwrap();
        assert_eq!(
            f.git.delete_branch("feature").unwrap(),
            BranchDelete::NotMerged
        );
        assert_eq!(
            f.git.delete_merged_branch("feature", "side").unwrap(),
            BranchDelete::Deleted
        );
        assert!(!f.git.branch_exists("feature").unwrap());
        assert_eq!(
            f.git.delete_merged_branch("feature", "side").unwrap(),
            BranchDelete::Absent
        );
    }

    #[test]
    fn snapshot_keeps_dirty_and_untracked_files_and_touches_nothing() {
        let f = Fixture::new();
        let wt = f.root.join("wt");
        f.git.worktree_add(&wt, "octl/r/n", "main").unwrap();
        let g = f.git.at(&wt);
        g.write("shared.txt", "changed\n");
        g.write("dir/untracked.txt", "new file\n");
        g.write("staged.txt", "staged\n");
        g.run(&["add", "staged.txt"]);
        g.write(".gitignore", "*.log\n");
        g.write("noise.log", "ignored\n");
        let status_before = g.run(&["status", "--porcelain=v1", "-uall"]);
        let index_before = fs::read(f.repo().join(".git/worktrees/wt/index")).unwrap();
        let head = g.head().unwrap();

        let snap = f.git.snapshot(&wt, "r", "n").unwrap();
        assert_eq!(snap.refname, "refs/octl/snapshots/r/n");
        assert!(snap.dirty);
        assert_eq!(snap.head, head);
        assert_eq!(f.git.resolve_commit(&snap.refname).unwrap(), snap.commit);
        let show = |p: &str| f.git.run(&["show", &format!("{}:{p}", snap.commit)]);
        assert_eq!(show("shared.txt"), "changed\n");
        assert_eq!(show("dir/untracked.txt"), "new file\n");
        assert_eq!(show("staged.txt"), "staged\n");
        assert_eq!(show(".gitignore"), "*.log\n");
        assert!(f
            .git
            .call(["cat-file", "-e", &format!("{}:noise.log", snap.commit)])
            .stdout()
            .is_err());
        assert_eq!(
            f.git
                .run(&["rev-parse", &format!("{}^1", snap.commit)])
                .trim(),
            head
        );

        // Nothing in the worktree moved.
        assert_eq!(g.head().unwrap(), head);
        assert_eq!(g.run(&["status", "--porcelain=v1", "-uall"]), status_before);
        assert_eq!(
            fs::read(f.repo().join(".git/worktrees/wt/index")).unwrap(),
            index_before
        );
        assert_eq!(g.read("shared.txt"), "changed\n");
        let leftovers: Vec<_> = fs::read_dir(f.repo().join(".git/worktrees/wt"))
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with("octl-snapshot"))
            .collect();
        assert!(leftovers.is_empty());

        // A second snapshot keeps the first as its second parent.
        g.write("later.txt", "later\n");
        let second = f.git.snapshot(&wt, "r", "n").unwrap();
        assert_ne!(second.commit, snap.commit);
        assert_eq!(
            f.git
                .run(&["rev-parse", &format!("{}^2", second.commit)])
                .trim(),
            snap.commit
        );
        // Unchanged worktree: the ref stays.
        let third = f.git.snapshot(&wt, "r", "n").unwrap();
        assert_eq!(third.commit, second.commit);
    }

    #[test]
    fn snapshot_sees_assume_unchanged_edits() {
        let f = Fixture::new();
        f.git
            .run(&["update-index", "--assume-unchanged", "shared.txt"]);
        f.git.write("shared.txt", "hidden edit\n");
        let snap = f.git.snapshot(f.repo(), "r", "main").unwrap();
        assert!(snap.dirty);
        assert_eq!(
            f.git.run(&["show", &format!("{}:shared.txt", snap.commit)]),
            "hidden edit\n"
        );
    }

    #[test]
    fn unsaved_paths_are_ignored_files_and_nested_repositories() {
        let f = Fixture::new();
        f.git.write(".gitignore", "*.local\ntarget/\n");
        f.git.run(&["add", "-A"]);
        f.git.run(&["commit", "-q", "-m", "ignores"]);
        let wt = f.root.join("wt");
        f.git.worktree_add(&wt, "octl/r/u", "main").unwrap();
        let g = f.git.at(&wt);
        g.write("notes.local", "n");
        g.write("target/a/b.o", "b");
        g.write("untracked.txt", "u");
        g.write("vendor/lib/x.c", "x");
        g.at(wt.join("vendor/lib")).run(&["init", "-q"]);
        let mut got: Vec<String> = g
            .unsaved_paths()
            .unwrap()
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        got.sort();
        assert_eq!(got, ["notes.local", "target/", "vendor/lib/"]);
    }

    #[test]
    fn snapshot_of_clean_worktree_points_at_head() {
        let f = Fixture::new();
        let tip = f.branch_with("octl/r/clean", "c.txt", "c\n");
        let wt = f.root.join("wt");
        f.git.worktree_add_existing(&wt, "octl/r/clean").unwrap();
        let snap = f.git.snapshot(&wt, "r", "clean").unwrap();
        assert!(!snap.dirty);
        assert_eq!(snap.commit, tip);
        assert_eq!(
            f.git.resolve_commit("refs/octl/snapshots/r/clean").unwrap(),
            tip
        );
    }

    #[test]
    fn commit_all_commits_everything_once() {
        let f = Fixture::new();
        let wt = f.root.join("wt");
        f.git.worktree_add(&wt, "octl/r/s", "main").unwrap();
        let g = f.git.at(&wt);
        assert_eq!(g.commit_all("nothing").unwrap(), None);
        g.write("new.txt", "n\n");
        g.write("shared.txt", "edited\n");
        let commit = g.commit_all("# task\nline two").unwrap().unwrap();
        assert_eq!(g.head().unwrap(), commit);
        assert_eq!(g.run(&["status", "--porcelain"]), "");
        assert_eq!(
            g.run(&["log", "-1", "--format=%B"]).trim_end(),
            "# task\nline two"
        );
    }

    #[test]
    fn merge_tree_clean_and_conflicting() {
        let f = Fixture::new();
        let main_before = f.git.head().unwrap();
        f.branch_with("a", "a.txt", "a\n");
        f.branch_with("b", "b.txt", "b\n");
        let MergeTree::Clean { tree } = f.git.merge_tree("a", "b").unwrap() else {
            panic!("expected a clean merge");
        };
        let listing = f.git.run(&["ls-tree", "--name-only", &tree]);
        assert_eq!(listing, "README\na.txt\nb.txt\nshared.txt\n");

        f.branch_with("c1", "shared.txt", "one\nTWO-c1\nthree\n");
        f.branch_with("c2", "shared.txt", "one\nTWO-c2\nthree\n");
        let wt = f.root.join("wt-c3");
        f.git.worktree_add(&wt, "c3", "c2").unwrap();
        let g = f.git.at(&wt);
        g.write("README", "c3 readme\n");
        g.write("c2-only.txt", "x\n");
        g.run(&["add", "-A"]);
        g.run(&["commit", "-q", "-m", "c3"]);
        f.branch_with("c4", "README", "c4 readme\n");
        assert_eq!(
            f.git.merge_tree("c1", "c2").unwrap(),
            MergeTree::Conflict {
                files: vec!["shared.txt".into()]
            }
        );
        assert_eq!(
            f.git.merge_tree("c3", "c4").unwrap(),
            MergeTree::Conflict {
                files: vec!["README".into()]
            }
        );
        assert!(matches!(
            f.git.merge_tree("c1", "no-such-ref"),
            Err(GitError::Failed { .. })
        ));
        assert_eq!(f.git.head().unwrap(), main_before);
        assert!(matches!(
            f.git.plan_merge("c1", "c2", "m").unwrap(),
            MergePlan::Conflict { .. }
        ));
    }

    #[test]
    fn plan_merge_fast_forwards_or_builds_a_commit() {
        let f = Fixture::new();
        let main = f.git.head().unwrap();
        let a = f.branch_with("a", "a.txt", "a\n");
        assert_eq!(
            f.git.plan_merge("main", "a", "m").unwrap(),
            MergePlan::FastForward {
                old: main.clone(),
                new: a.clone()
            }
        );
        assert_eq!(
            f.git.plan_merge("a", "main", "m").unwrap(),
            MergePlan::UpToDate { target: a.clone() }
        );
        let b = f.branch_with("b", "b.txt", "b\n");
        let MergePlan::Merge { old, new } = f.git.plan_merge("a", "b", "Merge b into a").unwrap()
        else {
            panic!("expected a merge commit");
        };
        assert_eq!(old, a);
        let parents = f.git.run(&["rev-list", "--parents", "-n1", &new]);
        assert_eq!(parents.trim(), format!("{new} {a} {b}"));
        assert_eq!(
            f.git.run(&["log", "-1", "--format=%s", &new]).trim(),
            "Merge b into a"
        );
        // Nothing moved yet.
        assert_eq!(f.git.resolve_commit("a").unwrap(), a);
    }

    #[test]
    fn cas_update_succeeds_and_reports_a_lost_race() {
        let f = Fixture::new();
        let main = f.git.head().unwrap();
        let a = f.branch_with("a", "a.txt", "a\n");
        f.git.create_branch("target", &main).unwrap();
        assert_eq!(
            f.git
                .cas_update_ref("refs/heads/target", &a, Some(&main), "test")
                .unwrap(),
            CasOutcome::Updated
        );
        assert_eq!(f.git.resolve_commit("target").unwrap(), a);
        // `main` is stale now: the ref is left alone and the current value reported.
        assert_eq!(
            f.git
                .cas_update_ref("refs/heads/target", &main, Some(&main), "test")
                .unwrap(),
            CasOutcome::Stale {
                current: Some(a.clone())
            }
        );
        assert_eq!(f.git.resolve_commit("target").unwrap(), a);
        assert_eq!(
            f.git
                .cas_update_ref("refs/heads/target", &main, None, "test")
                .unwrap(),
            CasOutcome::Stale {
                current: Some(a.clone())
            }
        );
        assert_eq!(
            f.git
                .cas_update_ref("refs/heads/fresh", &main, None, "test")
                .unwrap(),
            CasOutcome::Updated
        );

        // Not checked out anywhere: move_branch uses the compare-and-swap.
        let b = f.branch_with("b", "b.txt", "b\n");
        assert_eq!(
            f.git.move_branch("target", &main, &b, "test").unwrap(),
            MoveOutcome::LostRace {
                current: Some(a.clone())
            }
        );
        let MergePlan::Merge { old, new } = f.git.plan_merge("target", "b", "m").unwrap() else {
            panic!("expected a merge");
        };
        assert_eq!(
            f.git.move_branch("target", &old, &new, "test").unwrap(),
            MoveOutcome::Moved
        );
        assert_eq!(f.git.resolve_commit("target").unwrap(), new);
    }

    #[test]
    fn fast_forward_through_the_checked_out_worktree() {
        let f = Fixture::new();
        let main = f.git.head().unwrap();
        let a = f.branch_with("a", "shared.txt", "one\ntwo\nthree\nfour\n");
        // An unrelated dirty file and an unrelated untracked file do not block.
        f.git.write("README", "user's edit\n");
        f.git.write("notes.txt", "user's notes\n");
        assert_eq!(
            f.git.move_branch("main", &main, &a, "octl merge").unwrap(),
            MoveOutcome::Moved
        );
        assert_eq!(f.git.head().unwrap(), a);
        assert_eq!(f.git.read("shared.txt"), "one\ntwo\nthree\nfour\n");
        assert_eq!(f.git.read("README"), "user's edit\n");
        assert_eq!(f.git.read("notes.txt"), "user's notes\n");
        let reflog = f.git.run(&["reflog", "-1", "--format=%gs", "main"]);
        assert!(reflog.starts_with("octl merge"), "{reflog}");
    }

    #[test]
    fn dirty_target_blocks_and_moves_nothing() {
        let f = Fixture::new();
        let main = f.git.head().unwrap();
        let a = f.branch_with("a", "shared.txt", "one\ntwo\nthree\nfour\n");
        f.git.write("shared.txt", "user's uncommitted edit\n");
        assert_eq!(
            f.git.move_branch("main", &main, &a, "test").unwrap(),
            MoveOutcome::TargetDirty {
                worktree: f.repo().to_path_buf(),
                paths: vec!["shared.txt".into()],
            }
        );
        assert_eq!(f.git.head().unwrap(), main);
        assert_eq!(f.git.resolve_commit("main").unwrap(), main);
        assert_eq!(f.git.read("shared.txt"), "user's uncommitted edit\n");

        // An untracked file where the branch adds one blocks too.
        f.git.run(&["checkout", "-q", "--", "shared.txt"]);
        let b = f.branch_with("b", "dir/new.txt", "from branch\n");
        f.git.write("dir/new.txt", "user's untracked file\n");
        assert_eq!(
            f.git.move_branch("main", &main, &b, "test").unwrap(),
            MoveOutcome::TargetDirty {
                worktree: f.repo().to_path_buf(),
                paths: vec!["dir/new.txt".into()],
            }
        );
        assert_eq!(f.git.read("dir/new.txt"), "user's untracked file\n");
        assert_eq!(f.git.head().unwrap(), main);

        // A staged rename whose source the merge changes blocks as well.
        fs::remove_file(f.repo().join("dir/new.txt")).unwrap();
        f.git.run(&["mv", "shared.txt", "moved.txt"]);
        let outcome = f.git.move_branch("main", &main, &a, "test").unwrap();
        assert_eq!(
            outcome,
            MoveOutcome::TargetDirty {
                worktree: f.repo().to_path_buf(),
                paths: vec!["shared.txt".into()],
            }
        );
        assert_eq!(f.git.head().unwrap(), main);

        // A stale `old` is a lost race, not a merge.
        f.git.run(&["mv", "moved.txt", "shared.txt"]);
        assert_eq!(
            f.git.move_branch("main", &a, &b, "test").unwrap(),
            MoveOutcome::LostRace {
                current: Some(main.clone())
            }
        );
    }

    #[test]
    fn changed_paths_lists_both_sides_of_a_rename() {
        let f = Fixture::new();
        let before = f.git.head().unwrap();
        f.git.run(&["mv", "shared.txt", "renamed.txt"]);
        f.git.run(&["commit", "-q", "-m", "rename"]);
        let after = f.git.head().unwrap();
        let mut paths = f.git.changed_paths(&before, &after).unwrap();
        paths.sort();
        assert_eq!(
            paths,
            vec!["renamed.txt".to_string(), "shared.txt".to_string()]
        );
    }
}
