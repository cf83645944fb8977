//! Removing orphans, what no run owns: windows closed, worktrees snapshotted then removed,
//! branches deleted once their tip is saved.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use octl_proto::event::{CleanupDone, Nullable};

use octl_proto::rpc::{GcItem, GcResult, Orphan};
use octl_proto::AppError;

use super::branches::{remove_branch, BranchGone};
use super::kept;
use super::left_behind::plan_branch;
use crate::daemon::Daemon;
use crate::engine::orphans::main_worktree;
use crate::engine::{append, blocking, cleanup};
use crate::git::{snapshot_ref, Git};

pub(super) async fn remove_window(
    daemon: &Arc<Daemon>,
    o: &Orphan,
    i: GcItem,
    dry_run: bool,
    out: &mut GcResult,
) {
    let (Some(pane), Some(run), Some(node)) = (o.pane.clone(), o.run.clone(), o.node.clone())
    else {
        out.kept.push(kept(i, "no pane to close"));
        return;
    };
    if dry_run {
        out.removed.push(i);
        return;
    }
    // A window on the local tmux server, or a job of the runner it names.
    let (d, named) = (daemon.clone(), o.runner.clone());
    let stopped = blocking(move || {
        d.runners
            .of(named.as_deref())?
            .stop(&run, &node, &crate::runner::AgentHandle::new(pane))
    });
    match stopped.await {
        Ok(_) => out.removed.push(i),
        Err(e) => out.kept.push(kept(i, e.message)),
    }
}

/// Ends an agent's processes that outlived their window (they hold no work of their own: it
/// is in the worktree, kept as the node's).
pub(super) async fn end_processes(
    daemon: &Arc<Daemon>,
    o: &Orphan,
    i: GcItem,
    dry_run: bool,
    out: &mut GcResult,
) {
    let (Some(run), Some(node)) = (o.run.clone(), o.node.clone()) else {
        out.kept.push(kept(i, "no run and node named"));
        return;
    };
    if dry_run {
        out.removed.push(i);
        return;
    }
    let runner = daemon.runner.clone();
    match blocking(move || runner.end_processes(&run, &node)).await {
        Ok(_) => out.removed.push(i),
        Err(e) => out.kept.push(kept(i, e.message)),
    }
}

pub(super) async fn remove_orphan_worktree(
    daemon: &Arc<Daemon>,
    o: &Orphan,
    mut i: GcItem,
    dry_run: bool,
    going: &mut BTreeSet<PathBuf>,
    out: &mut GcResult,
) {
    let Some(path) = o.path.clone().map(PathBuf::from) else {
        out.kept.push(kept(i, "no path"));
        return;
    };
    // Only ever under our own folder, whatever a name says.
    if !path.starts_with(daemon.home.worktrees()) {
        out.kept
            .push(kept(i, "not under the daemon's worktree folder"));
        return;
    }
    if !path.exists() {
        // A registration whose directory is gone: nothing is left to save.
        let Some(repo) = o.repo.clone() else {
            out.kept.push(kept(i, "its repository is unknown"));
            return;
        };
        if dry_run {
            out.removed.push(i);
            return;
        }
        let p = path.clone();
        match blocking(move || Ok(Git::new(&repo).worktree_remove(&p)?)).await {
            Ok(()) => out.removed.push(i),
            Err(e) => out.kept.push(kept(i, e.message)),
        }
        return;
    }
    let (Some(run), Some(node)) = (o.run.clone(), o.node.clone()) else {
        out.kept.push(kept(i, "its path names no run and node"));
        return;
    };
    let p = path.clone();
    let main = blocking(move || Ok(main_worktree(&p))).await.ok().flatten();
    let Some(main) = main else {
        out.kept.push(kept(
            i,
            format!(
                "not a git worktree, so there is nothing to snapshot it into: look inside, then remove it by hand (rm -r {})",
                path.display()
            ),
        ));
        return;
    };
    i.repo = Some(main.display().to_string());
    i.snapshot_ref = Some(snapshot_ref(&run, &node));
    if dry_run {
        going.insert(path);
        out.removed.push(i);
        return;
    }
    // A known node's next kept set is numbered from its log; an unknown run's takes the
    // first free number.
    let owner = daemon
        .store
        .resolve("run", &run)
        .ok()
        .filter(|h| h.corrupt().is_none())
        .and_then(|h| {
            let sets = h.view().nodes.iter().find(|x| x.id == node)?.kept.len();
            Some((h, sets))
        });
    let kept_of = daemon.home.kept_of(&run, &node);
    let numbered = owner
        .as_ref()
        .map(|(_, sets)| kept_of.join((sets + 1).to_string()));
    let (p, r, n) = (path.clone(), run.clone(), node.clone());
    let done = blocking(move || {
        let unsaved = Git::new(&p).unsaved_paths()?;
        let dir = match numbered {
            Some(d) => Some(d),
            None if unsaved.is_empty() => None,
            None => Some(crate::kept::fresh_numbered(&kept_of).map_err(|e| {
                AppError::internal(format!(
                    "making a kept directory in {}: {e}",
                    kept_of.display()
                ))
            })?),
        };
        let kept_set = match dir {
            Some(dir) => crate::kept::keep(&p, &unsaved, &dir)
                .map_err(|e| {
                    AppError::internal(format!(
                        "keeping the ignored files of {} in {}: {e}",
                        p.display(),
                        dir.display()
                    ))
                })?
                .map(|t| (dir, t)),
            None => None,
        };
        let snap = Git::new(&p).snapshot(&p, &r, &n)?;
        Git::new(&main).worktree_remove_snapshotted(&p, &snap)?;
        if let Some(parent) = p.parent() {
            let _ = std::fs::remove_dir(parent);
        }
        Ok((snap, kept_set))
    })
    .await;
    match done {
        Ok((snap, kept_set)) => {
            i.snapshot_ref = Some(snap.refname.clone());
            i.snapshot_commit = Some(snap.commit.clone());
            if let Some((dir, t)) = &kept_set {
                i.kept_dir = Some(dir.display().to_string());
                i.kept_files = Some(t.files);
            }
            // A known run's node learns where its leftovers went.
            if let Some((handle, _)) = owner {
                let _ = append(
                    daemon,
                    &handle,
                    Some(&node),
                    CleanupDone {
                        snapshot_ref: Some(Nullable(Some(snap.refname.clone()))),
                        snapshot_commit: Some(Nullable(Some(snap.commit.clone()))),
                        snapshot_dirty: Some(Nullable(Some(snap.dirty))),
                        worktree_removed: Some(true),
                        branch_deleted: Some(false),
                        kept: Some(Nullable(kept_set.map(|(d, t)| cleanup::kept_record(&d, t)))),
                        by: Some("gc".into()),
                    },
                )
                .await;
            }
            going.insert(path);
            out.removed.push(i);
        }
        Err(e) => out.kept.push(kept(i, e.message)),
    }
}

pub(super) async fn remove_orphan_branch(
    o: &Orphan,
    mut i: GcItem,
    dry_run: bool,
    going: &BTreeSet<PathBuf>,
    out: &mut GcResult,
) {
    let (Some(repo), Some(refname), Some(run), Some(node)) = (
        o.repo.clone(),
        o.refname.clone(),
        o.run.clone(),
        o.node.clone(),
    ) else {
        out.kept.push(kept(i, "its repository or name is unknown"));
        return;
    };
    let branch = refname
        .strip_prefix("refs/heads/")
        .unwrap_or(&refname)
        .to_string();
    let snap = snapshot_ref(&run, &node);
    if dry_run {
        plan_branch(&repo, &branch, &snap, None, going, i, out).await;
        return;
    }
    let s = snap.clone();
    match blocking(move || remove_branch(&Git::new(&repo), &branch, &s, None)).await {
        Ok(BranchGone::Deleted(commit)) => {
            i.snapshot_ref = Some(snap);
            i.snapshot_commit = commit;
            out.removed.push(i);
        }
        Ok(BranchGone::Absent) => {}
        Ok(BranchGone::Kept(reason)) => out.kept.push(kept(i, reason)),
        Err(e) => out.kept.push(kept(i, e.message)),
    }
}
