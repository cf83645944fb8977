//! What a finished run left behind: its nodes not cleaned up yet, their branches, and its
//! integration branch.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use octl_proto::event::{CleanupDone, Nullable};

use octl_proto::rpc::{GcItem, GcResult};
use octl_proto::NodeState;

use super::branches::{remove_branch, tip, tip_of_ref, BranchGone};
use super::{item, kept};
use crate::daemon::Daemon;
use crate::engine::{append, blocking, cleanup, merge, orphans};
use crate::git::{snapshot_ref, BranchDelete, Git};
use crate::store::RunHandle;

/// A finished run's nodes that were not cleaned up, and its integration branch.
pub(super) async fn left_behind(
    daemon: &Arc<Daemon>,
    handle: &Arc<RunHandle>,
    dry_run: bool,
    going: &mut BTreeSet<PathBuf>,
    out: &mut GcResult,
) {
    let view = handle.view();
    let run = handle.id.clone();
    let why = format!("run {run} is {}", view.manifest.status);
    let repo = view.manifest.repo.clone();
    let target = merge::target_of(&view);
    let own = daemon.home.worktrees();
    for node in view.nodes.iter().filter(|n| !n.cleaned) {
        let wt = node
            .worktree
            .as_ref()
            .map(PathBuf::from)
            .filter(|w| w.starts_with(&own) && w.exists());
        // The branch, if it is still there, and what a merged node was merged into (its
        // target, or base once an integration branch is gone).
        let (branch, merged_into) = match &repo {
            Some(r) => {
                let (r, b) = (r.clone(), node.branch.clone());
                let merged = node.state == NodeState::Merged;
                let candidates = [target.clone(), view.manifest.base.clone()];
                blocking(move || {
                    let git = Git::new(&r);
                    let branch = match b {
                        Some(b) if tip(&git, &b)?.is_some() => Some(b),
                        _ => None,
                    };
                    let into = candidates
                        .into_iter()
                        .flatten()
                        .filter(|_| merged)
                        .find(|c| tip(&git, c).ok().flatten().is_some());
                    Ok((branch, into))
                })
                .await
                .unwrap_or((None, None))
            }
            None => (None, None),
        };
        if wt.is_none() && branch.is_none() {
            continue;
        }
        let snap = snapshot_ref(&run, &node.id);
        let base_item = |kind: &str| GcItem {
            run: Some(run.clone()),
            node: Some(node.id.clone()),
            repo: repo.clone(),
            ..item(kind, why.clone())
        };
        let wt_item = wt.as_ref().map(|w| GcItem {
            path: Some(w.display().to_string()),
            snapshot_ref: Some(snap.clone()),
            ..base_item("worktree")
        });
        let br_item = branch.as_ref().map(|b| GcItem {
            refname: Some(format!("refs/heads/{b}")),
            ..base_item("branch")
        });

        if dry_run {
            if let (Some(w), Some(i)) = (&wt, wt_item) {
                going.insert(w.clone());
                out.removed.push(i);
            }
            if let (Some(b), Some(i), Some(r)) = (&branch, br_item, &repo) {
                plan_branch(r, b, &snap, merged_into.as_deref(), going, i, out).await;
            }
            continue;
        }

        let mut recorded = false;
        if let (Some(w), Some(mut i)) = (&wt, wt_item) {
            match cleanup::cleanup(daemon, handle, node, merged_into.as_deref()).await {
                Ok(()) => {
                    recorded = true;
                    let now = handle.view();
                    let n = now.nodes.iter().find(|n| n.id == node.id);
                    i.snapshot_ref = n.and_then(|n| n.snapshot_ref.clone()).or(i.snapshot_ref);
                    if let Some(k) = n.and_then(|n| n.kept.get(node.kept.len())) {
                        i.kept_dir = Some(k.dir.clone());
                        i.kept_files = Some(k.files);
                    }
                    if let (Some(r), Some(s)) = (&repo, &i.snapshot_ref) {
                        let (r, s) = (r.clone(), s.clone());
                        i.snapshot_commit = blocking(move || Ok(tip_of_ref(&Git::new(&r), &s)?))
                            .await
                            .ok()
                            .flatten();
                    }
                    going.insert(w.clone());
                    out.removed.push(i);
                }
                Err(e) => {
                    out.kept
                        .push(kept(i, format!("cleanup failed: {}", e.message)));
                    continue;
                }
            }
        }
        let (Some(b), Some(mut i), Some(r)) = (branch, br_item, repo.clone()) else {
            continue;
        };
        let (s, into) = (snap.clone(), merged_into.clone());
        let gone = blocking(move || remove_branch(&Git::new(&r), &b, &s, into.as_deref())).await;
        match gone {
            Ok(BranchGone::Deleted(commit)) => {
                if let Some(c) = &commit {
                    i.snapshot_ref = Some(snap.clone());
                    i.snapshot_commit = Some(c.clone());
                }
                if !recorded {
                    let _ = append(
                        daemon,
                        handle,
                        Some(&node.id),
                        CleanupDone {
                            snapshot_ref: Some(Nullable(i.snapshot_ref.clone())),
                            snapshot_commit: Some(Nullable(i.snapshot_commit.clone())),
                            worktree_removed: Some(false),
                            branch_deleted: Some(true),
                            by: Some("gc".into()),
                            ..CleanupDone::default()
                        },
                    )
                    .await;
                }
                if let (Some(t), None) = (&merged_into, &commit) {
                    i.why = format!("{why}; merged into {t}");
                }
                out.removed.push(i);
            }
            // The cleanup deleted it.
            Ok(BranchGone::Absent) => {
                i.why = format!("{why}; deleted with its worktree");
                out.removed.push(i);
            }
            Ok(BranchGone::Kept(reason)) => out.kept.push(kept(i, reason)),
            Err(e) => out.kept.push(kept(i, e.message)),
        }
    }
    if let (Some(integration), Some(r), Some(base)) = (
        view.manifest.settings.integration.clone(),
        repo.clone(),
        view.manifest.base.clone(),
    ) {
        let mut i = GcItem {
            refname: Some(format!("refs/heads/{integration}")),
            run: Some(run.clone()),
            repo: repo.clone(),
            ..item("branch", format!("{why}; its integration branch"))
        };
        let (b, t) = (integration.clone(), base.clone());
        let outcome = blocking(move || {
            let git = Git::new(&r);
            let Some(tip) = tip(&git, &b)? else {
                return Ok(None);
            };
            if !git.is_ancestor(&tip, &t)? {
                return Ok(Some(Err(format!(
                    "it holds work merged from the run's nodes that is not in {t}: merge it into {t}, or delete it by hand (git branch -D {b})"
                ))));
            }
            if dry_run {
                return Ok(Some(Ok(())));
            }
            Ok(Some(match git.delete_merged_branch(&b, &t)? {
                BranchDelete::Deleted | BranchDelete::Absent => Ok(()),
                BranchDelete::CheckedOut { worktree } => Err(format!(
                    "it is checked out in {}",
                    worktree.display()
                )),
                BranchDelete::NotMerged => Err(format!("it moved and is no longer contained in {t}")),
            }))
        })
        .await;
        match outcome {
            Ok(None) => {}
            Ok(Some(Ok(()))) => {
                i.why = format!("{why}; its integration branch is merged into {base}");
                out.removed.push(i);
            }
            Ok(Some(Err(reason))) => out.kept.push(kept(i, reason)),
            Err(e) => out.kept.push(kept(i, e.message)),
        }
    }
    if !dry_run {
        let _ = std::fs::remove_dir(own.join(&run));
    }
}

/// What a dry run says of a branch: removed (merged, or its tip to be saved) or kept.
pub(super) async fn plan_branch(
    repo: &str,
    branch: &str,
    snap: &str,
    merged_into: Option<&str>,
    going: &BTreeSet<PathBuf>,
    mut i: GcItem,
    out: &mut GcResult,
) {
    let (r, b, into, going) = (
        repo.to_string(),
        branch.to_string(),
        merged_into.map(str::to_string),
        going.clone(),
    );
    let judged = blocking(move || {
        let git = Git::new(&r);
        let Some(tip) = tip(&git, &b)? else {
            return Ok(None);
        };
        if let Some(wt) = git.worktree_for_branch(&b)? {
            if !wt.prunable && !going.iter().any(|g| orphans::same_dir(g, &wt.path)) {
                return Ok(Some(Err(format!(
                    "it is checked out in {}",
                    wt.path.display()
                ))));
            }
        }
        if let Some(into) = into {
            if git.is_ancestor(&tip, &into)? {
                return Ok(Some(Ok(format!("merged into {into}"))));
            }
        }
        Ok(Some(Ok(String::new())))
    })
    .await;
    match judged {
        Ok(None) => {}
        Ok(Some(Ok(merged))) => {
            if merged.is_empty() {
                i.snapshot_ref = Some(snap.to_string());
            } else {
                i.why = format!("{}; {merged}", i.why);
            }
            out.removed.push(i);
        }
        Ok(Some(Err(reason))) => out.kept.push(kept(i, reason)),
        Err(e) => out.kept.push(kept(i, e.message)),
    }
}
