//! Cleaning up after a node: its window killed, its worktree's uncommitted and untracked
//! files saved under `refs/octl/snapshots/<RUN>/<NODE>`, the worktree removed, and the branch
//! deleted only when its tip is contained in what it was merged into (or in the snapshot).

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::json;

use octl_proto::state::Node;
use octl_proto::AppError;

use super::{append, blocking};
use crate::daemon::Daemon;
use crate::git::{BranchDelete, Git};
use crate::store::RunHandle;

/// Removes a node's window, worktree and branch. `merged_into` is the branch that holds the
/// node's work (after a merge); without one (a discard) the branch goes only because the
/// snapshot holds its tip.
pub async fn cleanup(
    daemon: &Arc<Daemon>,
    handle: &Arc<RunHandle>,
    node: &Node,
    merged_into: Option<&str>,
) -> Result<(), AppError> {
    let repo = handle.view().manifest.repo.clone();
    let tmux = daemon.tmux.clone();
    let pane = node.pane.clone();
    let (run, node_id) = (handle.id.clone(), node.id.clone());
    let worktree = node.worktree.clone().map(PathBuf::from);
    let branch = node.branch.clone();
    let merged_into = merged_into.map(str::to_string);
    let worktrees_of_run = daemon.home.worktrees().join(&handle.id);
    let own_worktrees = daemon.home.worktrees();
    let done = blocking(move || {
        if let Some(p) = pane {
            let _ = tmux.kill_window_of_pane_in(&p, &run, &node_id);
        }
        let Some(repo) = repo else {
            return Ok(json!({}));
        };
        let git = Git::new(&repo);
        let mut snapshot = None;
        // Only worktrees the daemon made are ever removed, whatever a log says.
        if let Some(wt) = worktree
            .as_ref()
            .filter(|w| w.exists() && w.starts_with(&own_worktrees))
        {
            let snap = git.snapshot(wt, &run, &node_id)?;
            git.worktree_remove_snapshotted(wt, &snap)?;
            snapshot = Some(snap);
        }
        let _ = std::fs::remove_dir(&worktrees_of_run);
        let deleted = match (&branch, &merged_into, &snapshot) {
            (Some(b), Some(into), _) => git.delete_merged_branch(b, into)?,
            (Some(b), None, Some(s)) => git.delete_merged_branch(b, &s.commit)?,
            _ => BranchDelete::Absent,
        };
        Ok(json!({
            "snapshot_ref": snapshot.as_ref().map(|s| s.refname.clone()),
            "snapshot_commit": snapshot.as_ref().map(|s| s.commit.clone()),
            "snapshot_dirty": snapshot.as_ref().map(|s| s.dirty),
            "worktree_removed": snapshot.is_some(),
            "branch_deleted": deleted == BranchDelete::Deleted,
        }))
    })
    .await?;
    append(daemon, handle, Some(&node.id), "cleanup.done", done).await?;
    Ok(())
}
