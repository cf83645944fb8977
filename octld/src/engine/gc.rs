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
//!   then are deleted. Windows are closed.
//! - a corrupt run is never touched.
//!
//! With `dry_run`, the same judgement lists what would go and changes nothing.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::json;

use octl_proto::rpc::{GcItem, GcResult, Orphan, RecoverParams, RecoverResult};
use octl_proto::{AppError, ErrorKind, NodeState};

use super::orphans::{self, git_stdout, main_worktree};
use super::{append, blocking, cleanup, merge};
use crate::daemon::Daemon;
use crate::git::{snapshot_ref, BranchDelete, Git, GitError};
use crate::store::RunHandle;

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

fn terminal(status: &str) -> bool {
    matches!(status, "completed" | "failed" | "cancelled")
}

/// What happened to a branch.
enum BranchGone {
    /// Deleted; its tip was saved under this snapshot commit first (`None`: it was merged).
    Deleted(Option<String>),
    /// There was no such branch.
    Absent,
    Kept(String),
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
    for handle in daemon.store.handles() {
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
        if terminal(&handle.view().manifest.status) {
            left_behind(daemon, &handle, dry_run, &mut going, &mut out).await;
        }
    }
    let found = orphans::find(daemon).await?;
    for o in found {
        let i = from_orphan(&o);
        match o.kind.as_str() {
            "window" => remove_window(daemon, &o, i, dry_run, &mut out).await,
            "worktree" => {
                remove_orphan_worktree(daemon, &o, i, dry_run, &mut going, &mut out).await
            }
            "branch" => remove_orphan_branch(&o, i, dry_run, &going, &mut out).await,
            _ => out.kept.push(kept(i, "not a kind gc knows")),
        }
    }
    if let Some(age) = older_than {
        delete_old_kept(daemon, age, dry_run, &mut out).await;
    }
    Ok(out)
}

/// A finished run's nodes that were not cleaned up, and its integration branch.
async fn left_behind(
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
                        "cleanup.done",
                        json!({
                            "snapshot_ref": i.snapshot_ref,
                            "snapshot_commit": i.snapshot_commit,
                            "worktree_removed": false,
                            "branch_deleted": true,
                            "by": "gc",
                        }),
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
        super::spawn::setting(&view, "integration").map(str::to_string),
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
async fn plan_branch(
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

async fn remove_window(
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
    let tmux = daemon.tmux.clone();
    match blocking(move || Ok(tmux.kill_window_of_pane_in(&pane, &run, &node)?)).await {
        Ok(_) => out.removed.push(i),
        Err(e) => out.kept.push(kept(i, e.message)),
    }
}

async fn remove_orphan_worktree(
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
                    "cleanup.done",
                    json!({
                        "snapshot_ref": snap.refname,
                        "snapshot_commit": snap.commit,
                        "snapshot_dirty": snap.dirty,
                        "worktree_removed": true,
                        "branch_deleted": false,
                        "kept": kept_set.map(|(d, t)| cleanup::kept_record(&d, t)),
                        "by": "gc",
                    }),
                )
                .await;
            }
            going.insert(path);
            out.removed.push(i);
        }
        Err(e) => out.kept.push(kept(i, e.message)),
    }
}

async fn remove_orphan_branch(
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

/// The tip of `refs/heads/<branch>`, if it exists.
fn tip(git: &Git, branch: &str) -> Result<Option<String>, GitError> {
    tip_of_ref(git, &format!("refs/heads/{branch}"))
}

fn tip_of_ref(git: &Git, refname: &str) -> Result<Option<String>, GitError> {
    match git.resolve_commit(refname) {
        Ok(c) => Ok(Some(c)),
        Err(GitError::UnknownRevision { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Deletes `branch` once nothing of it can be lost: merged into `merged_into`, or its tip
/// saved under `snap` first.
fn remove_branch(
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
fn save_tip(git: &Git, snap: &str, tip: &str, branch: &str) -> Result<String, AppError> {
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

/// `run gc --older-than`: the kept ignored files of runs that ended (and last changed)
/// longer ago than `age` ms, each `kept.deleted` in the run's log before its directory goes;
/// and kept directories no run records (an unknown run's orphan worktree, or a cleanup cut
/// short before it was recorded), once that old themselves and their run, if known, ended.
async fn delete_old_kept(daemon: &Arc<Daemon>, age: u64, dry_run: bool, out: &mut GcResult) {
    let cutoff = crate::store::writer::now_ms().saturating_sub(age);
    let ago = |ms: u64| {
        let (n, unit) = match ms {
            m if m % 86_400_000 == 0 => (m / 86_400_000, "d"),
            m if m % 3_600_000 == 0 => (m / 3_600_000, "h"),
            m if m % 60_000 == 0 => (m / 60_000, "m"),
            m => (m / 1000, "s"),
        };
        format!("{n}{unit}")
    };
    let mut recorded: BTreeSet<PathBuf> = BTreeSet::new();
    let mut leave: BTreeSet<String> = BTreeSet::new();
    for handle in daemon.store.handles() {
        if handle.corrupt().is_some() {
            leave.insert(handle.id.clone());
            continue;
        }
        let view = handle.view();
        recorded.extend(
            view.nodes
                .iter()
                .flat_map(|n| n.kept.iter().map(|k| PathBuf::from(&k.dir))),
        );
        let old =
            octl_proto::time::parse_millis(&view.manifest.updated_at).is_some_and(|t| t <= cutoff);
        if !terminal(&view.manifest.status) || !old {
            leave.insert(handle.id.clone());
            continue;
        }
        for node in &view.nodes {
            for k in node
                .kept
                .iter()
                .filter(|k| k.status == octl_proto::state::KeptStatus::Kept)
            {
                let mut i = GcItem {
                    path: Some(k.dir.clone()),
                    run: Some(handle.id.clone()),
                    node: Some(node.id.clone()),
                    repo: view.manifest.repo.clone(),
                    kept_files: Some(k.files),
                    ..item(
                        "kept",
                        format!(
                            "run {} is {} and ended more than {} ago",
                            handle.id,
                            view.manifest.status,
                            ago(age)
                        ),
                    )
                };
                if dry_run {
                    out.removed.push(i);
                    continue;
                }
                // Recorded first: a `recover` that comes later finds them deleted.
                let won = append(
                    daemon,
                    &handle,
                    Some(&node.id),
                    "kept.deleted",
                    json!({"dir": k.dir}),
                )
                .await;
                if let Err(e) = won {
                    out.kept.push(kept(i, e.message));
                    continue;
                }
                let dir = PathBuf::from(&k.dir);
                match blocking(move || Ok(remove_kept(&dir))).await {
                    Ok(Ok(())) => out.removed.push(i),
                    Ok(Err(e)) | Err(AppError { message: e, .. }) => {
                        i.why = format!("{}; removing it failed: {e}", i.why);
                        out.kept
                            .push(kept(i, "recorded as deleted, but still on disk"));
                    }
                }
            }
        }
    }
    // What no log records, by the age of its directory.
    let root = daemon.home.kept();
    let unrecorded = blocking(move || {
        let mut found = Vec::new();
        for (run, node, dir) in numbered_dirs(&root) {
            if recorded.contains(&dir) || leave.contains(&run) {
                continue;
            }
            let made = std::fs::symlink_metadata(&dir)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map(|d| d.as_millis() as u64);
            if made.is_some_and(|t| t <= cutoff) {
                found.push((run, node, dir));
            }
        }
        Ok(found)
    })
    .await
    .unwrap_or_default();
    for (run, node, dir) in unrecorded {
        let mut i = GcItem {
            path: Some(dir.display().to_string()),
            run: Some(run),
            node: Some(node),
            kept_files: crate::kept::tally(&dir).ok().map(|t| t.files),
            ..item(
                "kept",
                format!(
                    "no run records these kept files, and they are older than {}",
                    ago(age)
                ),
            )
        };
        if dry_run {
            out.removed.push(i);
            continue;
        }
        match blocking(move || Ok(remove_kept(&dir))).await {
            Ok(Ok(())) => out.removed.push(i),
            Ok(Err(e)) | Err(AppError { message: e, .. }) => {
                i.reason = Some(format!("removing it failed: {e}"));
                out.kept.push(i);
            }
        }
    }
}

/// Removes a kept directory (links inside are removed, never followed) and then its node's
/// and run's directories if they are left empty.
fn remove_kept(dir: &std::path::Path) -> Result<(), String> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e.to_string()),
    }
    if let Some(node) = dir.parent() {
        let _ = std::fs::remove_dir(node);
        if let Some(run) = node.parent() {
            let _ = std::fs::remove_dir(run);
        }
    }
    Ok(())
}

/// Every `kept/<RUN>/<NODE>/<N>` directory: (run, node, path).
fn numbered_dirs(root: &std::path::Path) -> Vec<(String, String, PathBuf)> {
    let names = |p: &std::path::Path| -> Vec<(String, PathBuf)> {
        std::fs::read_dir(p)
            .map(|rd| {
                rd.filter_map(|e| {
                    let e = e.ok()?;
                    e.file_type().ok()?.is_dir().then_some(())?;
                    Some((e.file_name().to_str()?.to_string(), e.path()))
                })
                .collect()
            })
            .unwrap_or_default()
    };
    let mut out = Vec::new();
    for (run, rp) in names(root) {
        for (node, np) in names(&rp) {
            for (_, dir) in names(&np) {
                out.push((run.clone(), node.clone(), dir));
            }
        }
    }
    out
}

/// The branch a recovered snapshot gets by default: `recovered/<RUN-short>/<NODE>`.
pub fn default_branch(run: &str, node: &str) -> String {
    format!("recovered/{}/{node}", &run[..run.len().min(8)])
}

/// What `recover` works on: a snapshot ref in a repository, and the kept ignored files that
/// go with it.
struct Source {
    run: String,
    node: String,
    repo: String,
    snap: String,
    /// The run that records the node, if one does.
    handle: Option<Arc<RunHandle>>,
    /// Whether the log says the node exists (for the not-found message).
    known_node: bool,
}

/// Finds what `recover` was asked for: `run` + `node`, or a snapshot `ref` + `repo` (an
/// orphan's; a ref of a node some run records is treated as that node's).
fn source(daemon: &Arc<Daemon>, p: &RecoverParams) -> Result<Source, AppError> {
    match (&p.run, &p.refname) {
        (Some(_), Some(_)) => Err(AppError::invalid(
            "give either RUN with --node, or --ref with --repo, not both",
        )),
        (None, None) => Err(AppError::invalid(
            "give RUN with --node NODE, or --ref refs/octl/snapshots/<RUN>/<NODE> with --repo PATH",
        )),
        (Some(run), None) => {
            let node = p.node.clone().ok_or_else(|| {
                AppError::invalid("missing --node: give the node whose snapshot to recover")
            })?;
            octl_proto::ids::validate_node_id("node", &node)?;
            let handle = daemon.store.resolve("run", run)?;
            let view = handle.view();
            let repo = view.manifest.repo.clone().ok_or_else(|| {
                AppError::invalid(format!(
                    "run {} has no repository, so it has no snapshots",
                    handle.id
                ))
            })?;
            Ok(Source {
                snap: snapshot_ref(&handle.id, &node),
                run: handle.id.clone(),
                known_node: view.nodes.iter().any(|n| n.id == node),
                node,
                repo,
                handle: Some(handle),
            })
        }
        (None, Some(refname)) => {
            if p.node.is_some() {
                return Err(AppError::invalid(
                    "--node goes with RUN; a --ref names its node itself",
                ));
            }
            let bad = || {
                AppError::invalid(format!(
                    "invalid ref {refname:?}: give a snapshot ref refs/octl/snapshots/<RUN>/<NODE>"
                ))
                .with_hint("`orchestratectl run gc` names each snapshot it made")
            };
            let rest = refname
                .strip_prefix(crate::git::SNAPSHOT_REF_PREFIX)
                .ok_or_else(bad)?;
            let (run, node) = rest.split_once('/').ok_or_else(bad)?;
            octl_proto::ids::validate_node_id("ref", node).map_err(|_| bad())?;
            if !octl_proto::ids::is_full_run_id(run) {
                return Err(bad());
            }
            let repo = p.repo.clone().ok_or_else(|| {
                AppError::invalid("missing --repo: give the repository that holds --ref")
            })?;
            if !std::path::Path::new(&repo).is_absolute() {
                return Err(AppError::invalid(format!(
                    "invalid repo {repo:?}: an absolute path is accepted"
                )));
            }
            let handle = daemon
                .store
                .resolve("run", run)
                .ok()
                .filter(|h| h.id == run && h.corrupt().is_none());
            let known_node = handle
                .as_ref()
                .is_some_and(|h| h.view().nodes.iter().any(|n| n.id == node));
            Ok(Source {
                run: run.to_string(),
                node: node.to_string(),
                repo,
                snap: refname.clone(),
                handle: handle.filter(|_| known_node),
                known_node,
            })
        }
    }
}

/// The kept set `recover` gives back: the node's latest one in its log; for a node no run
/// records, the highest-numbered directory under `kept/<RUN>/<NODE>/`.
enum KeptSource {
    None,
    Logged(octl_proto::state::Kept),
    Unlogged(PathBuf),
}

/// `recover`: a new branch at the node's snapshot, and with `worktree` a new worktree of it
/// with the node's kept ignored files moved back in. Never moves an existing branch. Runs
/// under the collection's lock, so a `run gc` and another `recover` wait: the first to look
/// wins, and whoever comes second finds the files restored (or deleted) and gets
/// `invalid_transition` without changing anything.
pub async fn recover(daemon: &Arc<Daemon>, p: RecoverParams) -> Result<RecoverResult, AppError> {
    let src = source(daemon, &p)?;
    let worktree = match &p.worktree {
        Some(w) => Some(new_worktree_path(daemon, w)?),
        None => None,
    };
    let _one_at_a_time = GC.lock().await;
    let kept_src = match &src.handle {
        Some(h) => {
            let view = h.view();
            let latest = view
                .nodes
                .iter()
                .find(|n| n.id == src.node)
                .and_then(|n| n.kept.last().cloned());
            match latest {
                Some(k) if k.status != octl_proto::state::KeptStatus::Kept => {
                    if worktree.is_some() {
                        let whither = k
                            .restored_to
                            .as_deref()
                            .map(|w| format!(" to {w}"))
                            .unwrap_or_default();
                        return Err(AppError::new(
                            ErrorKind::InvalidTransition,
                            format!(
                                "the kept ignored files of node {} of run {} ({}) are {}{whither}; nothing was changed",
                                src.node,
                                src.run,
                                k.dir,
                                k.status.as_str()
                            ),
                        )
                        .with_hint("recover without --worktree still makes a branch of the snapshot"));
                    }
                    KeptSource::None
                }
                Some(k) => KeptSource::Logged(k),
                None => KeptSource::None,
            }
        }
        None => match crate::kept::latest_numbered(&daemon.home.kept_of(&src.run, &src.node)) {
            Some(d) => KeptSource::Unlogged(d),
            None => KeptSource::None,
        },
    };
    let branch = p
        .branch
        .clone()
        .unwrap_or_else(|| default_branch(&src.run, &src.node));
    let (run, node, snap, repo) = (
        src.run.clone(),
        src.node.clone(),
        src.snap.clone(),
        src.repo.clone(),
    );
    let known_node = src.known_node;
    let wt = worktree.clone();
    let made = blocking(move || {
        let git = Git::new(&repo);
        check_branch_name(&git, &branch)?;
        let Some(commit) = tip_of_ref(&git, &snap)? else {
            let what = if known_node {
                format!("node {node} of run {run} has no snapshot ({snap} does not exist in {repo})")
            } else {
                format!("run {run} has no node {node:?} and no snapshot {snap} in {repo}")
            };
            return Err(AppError::not_found(what).with_hint(
                "a snapshot is taken when a node's worktree is removed (merge, run cancel --discard, run retry, run gc); `orchestratectl run show RUN` lists a node's snapshot refs, `run gc` names those of orphans",
            ));
        };
        let refname = format!("refs/heads/{branch}");
        let exists = |at: Option<String>| {
            AppError::new(
                ErrorKind::Forbidden,
                format!(
                    "branch {branch} already exists{} in {repo}; recover never overwrites a branch",
                    at.map(|c| format!(" (at {c})")).unwrap_or_default()
                ),
            )
            .with_hint(format!(
                "name another with --branch, e.g. --branch {branch}-2"
            ))
        };
        if let Some(at) = tip_of_ref(&git, &refname)? {
            return Err(exists(Some(at)));
        }
        match git.cas_update_ref(&refname, &commit, None, &format!("octl recover {run}/{node}"))? {
            crate::git::CasOutcome::Updated => {}
            crate::git::CasOutcome::Stale { current } => return Err(exists(current)),
        }
        if let Some(w) = &wt {
            git.worktree_add_existing(w, &branch)?;
        }
        Ok(RecoverResult {
            run,
            node,
            repo,
            branch,
            commit,
            snapshot_ref: snap,
            worktree: wt.map(|w| w.display().to_string()),
            restored_files: None,
            kept_dir: None,
            kept_files: None,
        })
    })
    .await?;
    let mut result = made;
    let dir = match &kept_src {
        KeptSource::None => return Ok(result),
        KeptSource::Logged(k) => PathBuf::from(&k.dir),
        KeptSource::Unlogged(d) => d.clone(),
    };
    let Some(w) = worktree else {
        result.kept_dir = Some(dir.display().to_string());
        result.kept_files = crate::kept::tally(&dir).ok().map(|t| t.files);
        return Ok(result);
    };
    if let (KeptSource::Logged(k), Some(h)) = (&kept_src, &src.handle) {
        append(
            daemon,
            h,
            Some(&src.node),
            "kept.restored",
            json!({"dir": k.dir, "worktree": w.display().to_string()}),
        )
        .await?;
    }
    let (d, to) = (dir.clone(), w.clone());
    let (moved, left) = blocking(move || {
        crate::kept::restore(&d, &to).map_err(|e| {
            AppError::internal(format!(
                "moving the kept files in {} back into {}: {e}",
                d.display(),
                to.display()
            ))
        })
    })
    .await?;
    result.restored_files = Some(moved.files);
    if left.files > 0 {
        result.kept_dir = Some(dir.display().to_string());
        result.kept_files = Some(left.files);
    }
    Ok(result)
}

/// A path for the new worktree of `recover --worktree`: absolute, not there yet (or an
/// empty directory), and outside the daemon's own worktree folder (where it would be
/// taken for an orphan).
fn new_worktree_path(daemon: &Arc<Daemon>, w: &str) -> Result<PathBuf, AppError> {
    let path = PathBuf::from(w);
    let invalid = |why: &str| AppError::invalid(format!("invalid worktree {w:?}: {why}"));
    if !path.is_absolute() {
        return Err(invalid("an absolute path is accepted"));
    }
    if path.starts_with(daemon.home.root()) {
        return Err(invalid(
            "it is inside the daemon's home; choose a place of your own",
        ));
    }
    match std::fs::read_dir(&path).map(|mut entries| entries.next().is_none()) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(path),
        Ok(true) => Ok(path),
        Ok(false) => Err(AppError::new(
            ErrorKind::Forbidden,
            format!("{w} already exists and is not empty; recover never writes over files"),
        )
        .with_hint("give a new path with --worktree")),
        Err(e) => Err(invalid(&e.to_string())),
    }
}

/// A branch name git accepts as it is (`git check-ref-format --branch`, whose answer must be
/// the name itself: `@{-1}` and the like are refused), outside the daemon's own namespace.
fn check_branch_name(git: &Git, branch: &str) -> Result<(), AppError> {
    let invalid = |why: &str| {
        AppError::invalid(format!("invalid branch {branch:?}: {why}"))
            .with_hint("give a name such as recovered/api-fix (see `git help check-ref-format`)")
    };
    if branch.is_empty() || branch.starts_with('-') {
        return Err(invalid("a branch name cannot be empty or start with '-'"));
    }
    if branch.starts_with("octl/") {
        return Err(invalid(
            "octl/ is the daemon's own branch namespace; choose a name outside it",
        ));
    }
    if !git.is_branch_name(branch)? {
        return Err(invalid("git does not accept it as a branch name"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_branch_names() {
        assert_eq!(
            default_branch("01JDXJ5R8Q4M0ZK7P2W9TB3C6E", "api"),
            "recovered/01JDXJ5R/api"
        );
    }

    fn repo() -> (tempfile::TempDir, Git) {
        let dir = tempfile::tempdir().unwrap();
        let git = Git::new(dir.path())
            .with_env("GIT_AUTHOR_NAME", "t")
            .with_env("GIT_AUTHOR_EMAIL", "t@t.invalid")
            .with_env("GIT_COMMITTER_NAME", "t")
            .with_env("GIT_COMMITTER_EMAIL", "t@t.invalid")
            .with_env("GIT_CONFIG_NOSYSTEM", "1")
            .with_env("GIT_CONFIG_GLOBAL", "/dev/null");
        let run = |args: &[&str]| {
            let ok = std::process::Command::new("git")
                .arg("-C")
                .arg(dir.path())
                .args(args)
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .env("GIT_AUTHOR_NAME", "t")
                .env("GIT_AUTHOR_EMAIL", "t@t.invalid")
                .env("GIT_COMMITTER_NAME", "t")
                .env("GIT_COMMITTER_EMAIL", "t@t.invalid")
                .status()
                .unwrap()
                .success();
            assert!(ok, "git {args:?}");
        };
        run(&["init", "-q", "-b", "main"]);
        run(&["commit", "-q", "--allow-empty", "-m", "one"]);
        run(&["branch", "octl/R/a"]);
        run(&["commit", "-q", "--allow-empty", "-m", "two"]);
        (dir, git)
    }

    #[test]
    fn branch_names_are_checked() {
        let (_d, git) = repo();
        assert!(check_branch_name(&git, "recovered/x/api").is_ok());
        for bad in ["", "-x", "a..b", "@{-1}", "octl/R/a", "a b", "x.lock"] {
            assert!(check_branch_name(&git, bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_branch_tip_is_saved_before_the_branch_goes() {
        let (_d, git) = repo();
        let a = git.resolve_commit("octl/R/a").unwrap();
        let main = git.resolve_commit("main").unwrap();
        // No snapshot yet: the ref is made at the tip, then the branch goes.
        match remove_branch(&git, "octl/R/a", "refs/octl/snapshots/R/a", None).unwrap() {
            BranchGone::Deleted(Some(c)) => assert_eq!(c, a),
            _ => panic!("not deleted"),
        }
        assert!(!git.branch_exists("octl/R/a").unwrap());
        // A snapshot holding other work: both are kept, in a commit that reaches both.
        git.create_branch("octl/R/a", &main).unwrap();
        let snap = match remove_branch(&git, "octl/R/a", "refs/octl/snapshots/R/a", None).unwrap() {
            BranchGone::Deleted(Some(c)) => c,
            _ => panic!("not deleted"),
        };
        assert!(git.is_ancestor(&a, &snap).unwrap());
        assert!(git.is_ancestor(&main, &snap).unwrap());
        // Merged: deleted without a snapshot.
        git.create_branch("octl/R/b", &a).unwrap();
        assert!(matches!(
            remove_branch(&git, "octl/R/b", "refs/octl/snapshots/R/b", Some("main")).unwrap(),
            BranchGone::Deleted(None)
        ));
        assert!(matches!(
            remove_branch(&git, "octl/R/b", "refs/octl/snapshots/R/b", None).unwrap(),
            BranchGone::Absent
        ));
    }
}
