//! `run gc --older-than`: deleting the kept ignored files of runs that ended long enough ago.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use octl_proto::event::KeptDeleted;

use octl_proto::rpc::{GcItem, GcResult};
use octl_proto::AppError;

use super::{item, kept};
use crate::daemon::Daemon;
use crate::engine::{append, blocking};

/// `run gc --older-than`: the kept ignored files of runs that ended (and last changed)
/// longer ago than `age` ms, each `kept.deleted` in the run's log before its directory goes;
/// and kept directories no run records (an unknown run's orphan worktree, or a cleanup cut
/// short before it was recorded), once that old themselves and their run, if known, ended.
pub(super) async fn delete_old_kept(
    daemon: &Arc<Daemon>,
    age: u64,
    dry_run: bool,
    out: &mut GcResult,
) {
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
    // The runs that can have kept files: the active ones and those named under kept/ (every
    // kept set lives there), folded one at a time.
    let mut ids: BTreeSet<String> = daemon
        .store
        .handles()
        .iter()
        .map(|h| h.id.clone())
        .collect();
    let root = daemon.home.kept();
    ids.extend(
        std::fs::read_dir(&root)
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|name| octl_proto::ids::is_full_run_id(name)),
    );
    for id in ids {
        let handle = match daemon.store.get(&id) {
            Ok(Some(h)) => h,
            Ok(None) => continue,
            Err(e) => {
                tracing::warn!(run = %id, error = %e.message, "gc: cannot read a run; its kept files stay");
                leave.insert(id);
                continue;
            }
        };
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
        if !view.manifest.status.is_terminal() || !old {
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
                    KeptDeleted { dir: k.dir.clone() },
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
