//! Merging: merge-tree, [`Git::plan_merge`], compare-and-swap ref updates and
//! [`Git::move_branch`], which never moves a branch under a worktree's uncommitted changes.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::command::{failure, split_z};
use super::{Git, GitError, Result};

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

impl Git {
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
                signal: None,
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

    /// `git commit-tree <tree> -p <parent>… -m <message>`: the new commit.
    pub fn commit_tree(&self, tree: &str, parents: &[String], message: &str) -> Result<String> {
        self.commit_tree_with(tree, parents, message, &[])
    }

    pub(super) fn commit_tree_with(
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
        Err(failure(argv, dir, out.status, &out.stderr))
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
        Err(failure(argv, dir, out.status, &out.stderr))
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

/// Whether changing `changed` would touch the dirty path `dirty`: the same path, or one
/// inside the other (a file replaced by a directory, or the reverse).
pub(super) fn paths_overlap(changed: &str, dirty: &str) -> bool {
    let dirty = dirty.trim_end_matches('/');
    changed == dirty
        || changed
            .strip_prefix(dirty)
            .is_some_and(|rest| rest.starts_with('/'))
        || dirty
            .strip_prefix(changed)
            .is_some_and(|rest| rest.starts_with('/'))
}
