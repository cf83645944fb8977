//! Worktrees: add, list, remove (forced only with a snapshot), prune, and the per-repository
//! lock that keeps git's worktree bookkeeping consistent.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

use super::command::failure;
use super::{Git, Result, Snapshot};

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

impl Git {
    /// Runs `f` while no other command of this process that reads or writes the
    /// repository's worktree bookkeeping does. `git worktree add` writes
    /// `.git/worktrees/<name>/` file by file, and a git command reading every worktree
    /// meanwhile (`worktree list`, `worktree remove`, `branch`, another `worktree add`) fails
    /// with "failed to read .git/worktrees/<name>/commondir" (seen in fan-outs of 50 units).
    /// Keyed by the directory given to [`Git::new`], which the daemon makes the top level.
    pub(super) fn one_at_a_time<T>(&self, f: impl FnOnce() -> T) -> T {
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

    /// In a worktree just checked out: do its files match its index (`git diff --quiet`)?
    /// git compares what the index says of each file (and reads back those written in the
    /// index's last second), so this costs about a stat per file. A file git wrote sparse on a
    /// full tmpfs cannot be read back (git is killed by SIGBUS): an error naming the signal.
    pub fn checkout_matches_index(&self) -> Result<bool> {
        let (code, _) = self.call(["diff", "--quiet"]).run_allowing(&[0, 1], None)?;
        Ok(code == 0)
    }

    /// The bytes a checkout of `rev` writes: the sizes of its files (`git ls-tree -r -l`).
    pub fn tree_size(&self, rev: &str) -> Result<u64> {
        let out = self
            .call(["ls-tree", "-r", "-l", "-z", "--end-of-options", rev])
            .stdout()?;
        // `<mode> <type> <object> <size>\t<path>`; a submodule's size is `-`.
        Ok(out
            .split(|b| *b == 0)
            .filter_map(|entry| {
                let meta = entry.split(|b| *b == b'\t').next()?;
                let size = std::str::from_utf8(meta).ok()?.split_whitespace().nth(3)?;
                size.parse::<u64>().ok()
            })
            .sum())
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

    /// `git worktree add --no-checkout --detach <path> <commit>`: registered at once, its
    /// files checked out afterwards by [`Git::checkout_all_until`] outside the bookkeeping
    /// lock (a checkout of a big repository takes seconds; spawns must not wait for it).
    pub fn worktree_add_unchecked(&self, path: &Path, commit: &str) -> Result<()> {
        self.one_at_a_time(|| {
            self.call([
                OsStr::new("worktree"),
                OsStr::new("add"),
                OsStr::new("--no-checkout"),
                OsStr::new("--detach"),
                OsStr::new("--"),
                path.as_os_str(),
                OsStr::new(commit),
            ])
            .stdout()
        })?;
        Ok(())
    }

    /// In a worktree made by [`Git::worktree_add_unchecked`]: `git reset --hard -q`, its index
    /// and files written; stopped (the process killed, an error returned) as soon as
    /// `stop()` says so.
    pub fn checkout_all_until(&self, stop: &dyn Fn() -> bool) -> Result<()> {
        self.call(["reset", "--hard", "-q"]).run_until(stop)
    }

    /// In a worktree just checked out at `commit`: its post-checkout hook, as `git worktree
    /// add` runs it (nothing when there is none); stopped as [`Git::checkout_all_until`] is.
    pub fn post_checkout_hook_until(&self, commit: &str, stop: &dyn Fn() -> bool) -> Result<()> {
        let none = "0".repeat(commit.len());
        self.call([
            "hook",
            "run",
            "--ignore-missing",
            "post-checkout",
            "--",
            &none,
            commit,
            "1",
        ])
        .run_until(stop)
    }

    /// `git worktree repair <path>`: the repository's record of a worktree whose directory
    /// was renamed (a pool entry taken by a rename) points at it again.
    pub fn worktree_repair(&self, path: &Path) -> Result<()> {
        self.one_at_a_time(|| {
            self.call([
                OsStr::new("worktree"),
                OsStr::new("repair"),
                OsStr::new("--"),
                path.as_os_str(),
            ])
            .stdout()
        })?;
        Ok(())
    }

    /// `git worktree remove --force <path>` of a worktree that never held anyone's work (a
    /// pool entry: a clean checkout no agent was given): nothing in it needs saving.
    pub fn worktree_remove_pristine(&self, path: &Path) -> Result<()> {
        self.remove_worktree(path, true)
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
            _ => Err(failure(argv, dir, out.status, &out.stderr)),
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
