//! What the remote runners share about bringing an attempt's work back (docs/RUNNERS.md,
//! "The same promises everywhere"): the refs an attempt pushes, and how what was fetched of
//! them becomes the node's branch and worktree.

use std::path::Path;

use super::Result;
use crate::git::Git;

/// This attempt's ref namespace: `refs/octl/remote/<run>/<node>/<attempt>`; each copy of the
/// attempt pushes `<copy>/head` (its branch) and `<copy>/wip` (its work tree and index as a
/// commit on top of head).
pub fn ref_prefix(run: &str, node: &str, attempt: u32) -> String {
    format!("refs/octl/remote/{run}/{node}/{attempt}")
}

/// Whether `rev` names a commit in the repository of `git`.
pub fn has_commit(git: &Git, rev: &str) -> bool {
    git.plumbing(&["rev-parse", "-q", "--verify", &format!("{rev}^{{commit}}")])
        .is_ok()
}

/// Brings a copy's fetched refs into the node's worktree: the branch moves (fast-forward) to
/// what the agent committed, `head`; what it left uncommitted, `wip` (if fetched), comes back
/// as changes in the worktree, as a local agent's would be.
pub fn apply(worktree: &Path, head: &str, wip: &str) -> Result<()> {
    let wt = Git::new(worktree);
    wt.plumbing(&["merge", "-q", "--ff-only", head])?;
    if has_commit(&wt, wip) {
        wt.plumbing(&["read-tree", "-u", "-m", "HEAD", wip])?;
    }
    Ok(())
}
