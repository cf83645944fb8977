//! Branches: names, the checked-out one, creating, and deleting only what is merged.

use std::path::PathBuf;

use super::command::failure;
use super::{Git, GitError, Result};

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

impl Git {
    /// Whether `name` is a valid branch name that git takes as it is (`@{-1}` and the like,
    /// which git would expand, are refused).
    pub fn is_branch_name(&self, name: &str) -> Result<bool> {
        let (out, _, _) = self
            .call(["check-ref-format", "--branch", name])
            .output(None)?;
        Ok(out.status.success()
            && String::from_utf8_lossy(&out.stdout).trim_end_matches('\n') == name)
    }

    /// The branch checked out here (short name); [`GitError::DetachedHead`] if none.
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
        Err(failure(argv, dir, out.status, &out.stderr))
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
                return Err(failure(argv, dir, out.status, &out.stderr));
            }
        }
        Ok(BranchDelete::NotMerged)
    }
}
