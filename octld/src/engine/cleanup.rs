//! Cleaning up after a node: its window killed, the files git ignores in its worktree moved
//! to `$OCTL_HOME/kept/<RUN>/<NODE>/<N>/` ([`crate::kept`]), its uncommitted and untracked
//! files saved under `refs/octl/snapshots/<RUN>/<NODE>`, the worktree removed, and the branch
//! deleted only when its tip is contained in what it was merged into (or in the snapshot; with
//! no worktree left to snapshot, the branch's tip is saved under the snapshot ref first).
//!
//! One cleanup of a node at a time, whoever asks (a merge, `run cancel --discard`, `run
//! retry`, `run gc`, healing): each waits for the node's lock and then looks at the log
//! again, so the second finds `cleanup.done` recorded and does nothing. `<N>` is one more
//! than the node's recorded kept sets, so a cleanup cut short by a crash and done again
//! keeps into the same directory, and a retried node's next cleanup into a new one.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, LazyLock, Mutex};

use octl_proto::event::{CleanupDone, KeptRecord, Nullable};

use octl_proto::state::Node;
use octl_proto::AppError;

use super::gc::branches::{remove_branch, BranchGone};
use super::{append, blocking};
use crate::daemon::Daemon;
use crate::git::{snapshot_ref, BranchDelete, Git};
use crate::store::RunHandle;

type NodeLocks = Mutex<HashMap<(String, String), Arc<tokio::sync::Mutex<()>>>>;
static CLEANING: LazyLock<NodeLocks> = LazyLock::new(Default::default);

fn node_lock(run: &str, node: &str) -> Arc<tokio::sync::Mutex<()>> {
    CLEANING
        .lock()
        .expect("cleanup locks")
        .entry((run.to_string(), node.to_string()))
        .or_default()
        .clone()
}

/// The `cleanup.done` record of what [`crate::kept::keep`] moved.
pub fn kept_record(dir: &std::path::Path, t: crate::kept::Tally) -> KeptRecord {
    KeptRecord {
        dir: dir.display().to_string(),
        files: t.files,
        bytes: t.bytes,
    }
}

/// Removes a node's window, worktree and branch. `merged_into` is the branch that holds the
/// node's work (after a merge); without one (a discard) the branch goes only because the
/// snapshot holds its tip.
pub async fn cleanup(
    daemon: &Arc<Daemon>,
    handle: &Arc<RunHandle>,
    node: &Node,
    merged_into: Option<&str>,
) -> Result<(), AppError> {
    let lock = node_lock(&handle.id, &node.id);
    let _one_at_a_time = lock.lock().await;
    let view = handle.view();
    let Some(node) = view.nodes.iter().find(|n| n.id == node.id && !n.cleaned) else {
        // Cleaned meanwhile by another step.
        return Ok(());
    };
    let kept_dir = daemon
        .home
        .kept_of(&handle.id, &node.id)
        .join((node.kept.len() + 1).to_string());
    let repo = view.manifest.repo.clone();
    // The node's own runner (a remote agent is not the local tmux server's).
    let (d, named) = (daemon.clone(), node.runner.clone());
    let pane = node.pane.clone();
    let (run, node_id) = (handle.id.clone(), node.id.clone());
    let worktree = node.worktree.clone().map(PathBuf::from);
    let branch = node.branch.clone();
    let merged_into = merged_into.map(str::to_string);
    let worktrees_of_run = daemon.home.worktrees().join(&handle.id);
    let own_worktrees = daemon.home.worktrees();
    let node_ref = node.clone();
    let done = blocking(move || {
        if let (Some(p), Ok(runner)) = (pane, d.runners.of(named.as_deref())) {
            let _ = runner.stop(&run, &node_id, &crate::runner::AgentHandle::new(p));
        }
        let Some(repo) = repo else {
            return Ok(CleanupDone::default());
        };
        let git = Git::new(&repo);
        let mut snapshot = None;
        let mut kept = None;
        // What a sandboxed agent committed in its copy of its branch, kept as the rest is.
        crate::sandbox::harvest_node(&d.home, &run, &node_ref);
        // Only worktrees the daemon made are ever removed, whatever a log says.
        if let Some(wt) = worktree
            .as_ref()
            .filter(|w| w.exists() && w.starts_with(&own_worktrees))
        {
            let unsaved = git.at(wt).unsaved_paths()?;
            kept = crate::kept::keep(wt, &unsaved, &kept_dir)
                .map_err(|e| {
                    AppError::internal(format!(
                        "keeping the ignored files of {} in {}: {e}",
                        wt.display(),
                        kept_dir.display()
                    ))
                })?
                .map(|t| kept_record(&kept_dir, t));
            let snap = git.snapshot(wt, &run, &node_id)?;
            git.worktree_remove_snapshotted(wt, &snap)?;
            snapshot = Some(snap);
        }
        let _ = std::fs::remove_dir(&worktrees_of_run);
        // The branch's tip saved under the snapshot ref when there was no worktree to save.
        let mut saved_tip = None;
        let deleted = match (&branch, &merged_into, &snapshot) {
            (Some(b), Some(into), _) => git.delete_merged_branch(b, into)? == BranchDelete::Deleted,
            (Some(b), None, Some(s)) => {
                git.delete_merged_branch(b, &s.commit)? == BranchDelete::Deleted
            }
            // No worktree (removed by hand, or never made): without this the branch would
            // stay, and a retry's `worktree add -b` of the same name would fail for ever.
            // Its tip goes under the snapshot ref first, so nothing of it is lost.
            (Some(b), None, None) => {
                let snap = snapshot_ref(&run, &node_id);
                match remove_branch(&git, b, &snap, None)? {
                    BranchGone::Deleted(commit) => {
                        saved_tip = commit.map(|c| (snap, c));
                        true
                    }
                    BranchGone::Absent | BranchGone::Kept(_) => false,
                }
            }
            _ => false,
        };
        let (snapshot_ref, snapshot_commit) = match (&snapshot, saved_tip) {
            (Some(s), _) => (Some(s.refname.clone()), Some(s.commit.clone())),
            (None, Some((r, c))) => (Some(r), Some(c)),
            (None, None) => (None, None),
        };
        Ok(CleanupDone {
            snapshot_ref: Some(Nullable(snapshot_ref)),
            snapshot_commit: Some(Nullable(snapshot_commit)),
            snapshot_dirty: Some(Nullable(snapshot.as_ref().map(|s| s.dirty))),
            worktree_removed: Some(snapshot.is_some()),
            branch_deleted: Some(deleted),
            kept: Some(Nullable(kept)),
            by: None,
        })
    })
    .await?;
    append(daemon, handle, Some(&node.id), done).await?;
    // Its sandbox goes with its worktree: the copies it was given, its own socket.
    let ctl = daemon
        .home
        .agent_ctl(&crate::sandbox::ctl_key(&handle.id, &node.id));
    let scope = crate::server::agent::Scope {
        run: handle.id.clone(),
        node: node.id.clone(),
    };
    daemon.agent_sockets.close(&scope, &ctl);
    daemon.network_proxies.close(
        daemon,
        &scope,
        &crate::sandbox::proxy::dir_of(&daemon.home, &handle.id, &node.id),
    );
    crate::sandbox::remove(&daemon.home, &handle.id, &node.id);
    Ok(())
}
