//! Deleting a branch only once nothing of it can be lost: it is merged, or its tip is saved
//! under a snapshot ref first (which never drops an earlier snapshot).

use octl_proto::{AppError, ErrorKind};

use crate::engine::orphans::git_stdout;
use crate::git::{BranchDelete, Git, GitError};

/// What happened to a branch.
pub(crate) enum BranchGone {
    /// Deleted; its tip was saved under this snapshot commit first (`None`: it was merged).
    Deleted(Option<String>),
    /// There was no such branch.
    Absent,
    Kept(String),
}

/// The tip of `refs/heads/<branch>`, if it exists.
pub(super) fn tip(git: &Git, branch: &str) -> Result<Option<String>, GitError> {
    tip_of_ref(git, &format!("refs/heads/{branch}"))
}

pub(super) fn tip_of_ref(git: &Git, refname: &str) -> Result<Option<String>, GitError> {
    match git.resolve_commit(refname) {
        Ok(c) => Ok(Some(c)),
        Err(GitError::UnknownRevision { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Deletes `branch` once nothing of it can be lost: merged into `merged_into`, or its tip
/// saved under `snap` first.
pub(crate) fn remove_branch(
    git: &Git,
    branch: &str,
    snap: &str,
    merged_into: Option<&str>,
) -> Result<BranchGone, AppError> {
    let Some(tip) = tip(git, branch)? else {
        return Ok(BranchGone::Absent);
    };
    let (into, saved) = match merged_into {
        Some(into) if git.is_ancestor(&tip, into)? => (into.to_string(), None),
        _ => {
            let commit = save_tip(git, snap, &tip, branch)?;
            (commit.clone(), Some(commit))
        }
    };
    Ok(match git.delete_merged_branch(branch, &into)? {
        BranchDelete::Deleted => BranchGone::Deleted(saved),
        BranchDelete::Absent => BranchGone::Absent,
        BranchDelete::CheckedOut { worktree } => {
            BranchGone::Kept(format!("it is checked out in {}", worktree.display()))
        }
        BranchDelete::NotMerged => {
            BranchGone::Kept("it moved while being removed; run gc again".to_string())
        }
    })
}

/// Makes `snap` reach `tip` and returns what it points at: created at the tip, kept when it
/// already contains it, else a commit with the tip's tree whose parents are the tip and the
/// old snapshot (so no earlier snapshot is lost either). Compare-and-swap on the ref.
pub(super) fn save_tip(git: &Git, snap: &str, tip: &str, branch: &str) -> Result<String, AppError> {
    for _ in 0..3 {
        let previous = tip_of_ref(git, snap)?;
        let new = match &previous {
            Some(p) if git.is_ancestor(tip, p)? => return Ok(p.clone()),
            Some(p) => {
                let tree = git_stdout(
                    git.dir(),
                    &["rev-parse", "--verify", &format!("{tip}^{{tree}}")],
                )?;
                let message = format!("octl snapshot of branch {branch}\n\nTip: {tip}\n");
                git_stdout(
                    git.dir(),
                    &[
                        "commit-tree",
                        "--no-gpg-sign",
                        "-p",
                        tip,
                        "-p",
                        p,
                        "-m",
                        &message,
                        tree.trim(),
                    ],
                )?
                .trim()
                .to_string()
            }
            None => tip.to_string(),
        };
        match git.cas_update_ref(snap, &new, previous.as_deref(), "octl gc snapshot")? {
            crate::git::CasOutcome::Updated => return Ok(new),
            crate::git::CasOutcome::Stale { .. } => continue,
        }
    }
    Err(AppError::new(
        ErrorKind::ToolFailed,
        format!("{snap} kept moving while saving {branch}; run gc again"),
    ))
}
