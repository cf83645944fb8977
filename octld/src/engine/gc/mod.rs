//! Garbage and recovery: `run gc` removes what finished runs left behind and what no run
//! owns ([`super::orphans`]), saving every worktree's content and every unmerged branch tip
//! under `refs/octl/snapshots/<RUN>/<NODE>` first; `recover` turns such a snapshot back into
//! a branch.
//!
//! What `run gc` does, run by run:
//! - a completed, failed or cancelled run: each node not cleaned up yet goes through the
//!   cleanup path ([`super::cleanup`]: window closed, worktree snapshotted then removed,
//!   `cleanup.done` recorded with the snapshot ref); its branch is deleted when its tip is in
//!   what it was merged into or in the snapshot (an unmerged branch without a worktree has its
//!   tip saved under the snapshot ref first). An orchestrate run's integration branch goes
//!   only when it is contained in base; otherwise it is kept and said so.
//! - orphans: worktree directories are snapshotted under the run and node their path names
//!   (`worktrees/<RUN>/<NODE>` → `refs/octl/snapshots/<RUN>/<NODE>`, in the repository the
//!   worktree belongs to) and then removed; a directory that is not a git worktree cannot be
//!   snapshotted and is kept. Registrations of worktrees whose directory is gone are dropped
//!   (`git worktree remove` of that one path). Branches have their tip saved the same way,
//!   then are deleted. Windows are closed; agents' processes that outlived their window are
//!   ended.
//! - a finished run's refs in remote runners' exchange repositories: a merged or cleaned-up
//!   node's go when their commit is in a branch, tag or snapshot of the run's repository
//!   ([`exchange`]); others are kept.
//! - a corrupt run is never touched.
//! - the worktree pool ([`crate::pool`]): entries left half-made, of a repository that is
//!   gone, or beyond `[pool] size` are removed (they never held work: no snapshot).
//!
//! With `dry_run`, the same judgement lists what would go and changes nothing.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use octl_proto::rpc::{GcItem, GcResult, Orphan};
use octl_proto::AppError;

use super::orphans;
use crate::daemon::Daemon;

mod aged;
pub(crate) mod branches;
mod exchange;
mod left_behind;
mod recover;
mod remove;
#[cfg(test)]
mod tests;

#[cfg(test)]
use recover::default_branch;
pub use recover::recover;

use aged::delete_old_kept;
use left_behind::left_behind;
use remove::{end_processes, remove_orphan_branch, remove_orphan_worktree, remove_window};

/// One collection at a time: two would snapshot and remove the same things.
static GC: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn item(kind: &str, why: impl Into<String>) -> GcItem {
    GcItem {
        kind: kind.into(),
        path: None,
        refname: None,
        target: None,
        repo: None,
        run: None,
        node: None,
        why: why.into(),
        snapshot_ref: None,
        snapshot_commit: None,
        kept_dir: None,
        kept_files: None,
        reason: None,
    }
}

fn from_orphan(o: &Orphan) -> GcItem {
    GcItem {
        path: o.path.clone(),
        refname: o.refname.clone(),
        target: o.target.clone(),
        repo: o.repo.clone(),
        run: o.run.clone(),
        node: o.node.clone(),
        ..item(&o.kind, o.why.clone())
    }
}

fn kept(mut i: GcItem, reason: impl Into<String>) -> GcItem {
    i.reason = Some(reason.into());
    i
}

/// `older_than` (milliseconds): also delete the kept ignored files of runs ended longer ago.
pub async fn gc(
    daemon: &Arc<Daemon>,
    dry_run: bool,
    older_than: Option<u64>,
) -> Result<GcResult, AppError> {
    let _one_at_a_time = GC.lock().await;
    let mut out = GcResult {
        dry_run,
        removed: Vec::new(),
        kept: Vec::new(),
    };
    // Worktrees this collection removes: a branch checked out there does not keep it.
    let mut going: BTreeSet<PathBuf> = BTreeSet::new();
    // Every active run, and the finished ones whose index entry says something may be left
    // (a node not cleaned up, a remote node's refs) or that are corrupt: folded one at a time.
    let mut ids: Vec<String> = daemon
        .store
        .handles()
        .iter()
        .map(|h| h.id.clone())
        .collect();
    daemon.store.each_finished(|e| {
        if e.flags.left || e.status == octl_proto::projection::ListedStatus::Corrupt {
            ids.push(e.id);
        }
        true
    })?;
    ids.sort();
    ids.dedup();
    for id in ids {
        let Some(handle) = daemon.store.get(&id)? else {
            continue;
        };
        if handle.corrupt().is_some() {
            let dir = daemon.home.worktrees().join(&handle.id);
            if dir.exists() {
                let mut i = item("worktree", format!("run {} is corrupt", handle.id));
                i.path = Some(dir.display().to_string());
                i.run = Some(handle.id.clone());
                out.kept.push(kept(
                    i,
                    "its log cannot say what it made, so nothing under its name is touched",
                ));
            }
            continue;
        }
        if handle.view().manifest.status.is_terminal() {
            left_behind(daemon, &handle, dry_run, &mut going, &mut out).await;
            exchange::exchange_refs(daemon, &handle, dry_run, &mut out).await;
        }
    }
    let found = orphans::find(daemon).await?;
    for o in found {
        let i = from_orphan(&o);
        match o.kind.as_str() {
            "window" | "job" => remove_window(daemon, &o, i, dry_run, &mut out).await,
            "process" => end_processes(daemon, &o, i, dry_run, &mut out).await,
            "worktree" => {
                remove_orphan_worktree(daemon, &o, i, dry_run, &mut going, &mut out).await
            }
            "branch" => remove_orphan_branch(&o, i, dry_run, &going, &mut out).await,
            _ => out.kept.push(kept(i, "not a kind gc knows")),
        }
    }
    // The worktree pool's entries hold no work: what is half-made, of a repository that is
    // gone, or beyond `pool.size` goes without a snapshot.
    let (home, config) = (daemon.home.clone(), daemon.config.clone());
    let pooled = super::blocking(move || Ok(crate::pool::collect(&home, &config, dry_run)))
        .await
        .unwrap_or_default();
    for u in pooled {
        let mut i = item("pool", format!("a worktree pool entry {}", u.why));
        i.path = Some(u.path.display().to_string());
        i.repo = u.repo.map(|r| r.display().to_string());
        out.removed.push(i);
    }
    if let Some(age) = older_than {
        delete_old_kept(daemon, age, dry_run, &mut out).await;
    }
    Ok(out)
}
