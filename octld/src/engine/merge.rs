//! Merging a node's branch into its target without losing anything (DESIGN.md §6): one merge
//! at a time per repository; the merge is computed with `git merge-tree` (no worktree is
//! touched); the target moves by compare-and-swap, or by `--ff-only` through the worktree that
//! has it checked out when that worktree is clean on the paths the merge changes.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::json;

use octl_proto::projection::RunDetail;
use octl_proto::{AppError, ErrorKind, NodeState};

use super::{append, blocking};
use crate::daemon::Daemon;
use crate::git::{Git, MergePlan, MoveOutcome};
use crate::store::{Draft, RunHandle};

/// Attempts when another writer moves the target between computing and moving.
const RACE_RETRIES: usize = 5;

#[derive(Debug, Clone)]
pub struct Merged {
    pub node: String,
    pub target: String,
    pub commit: String,
}

enum Outcome {
    Moved {
        old: String,
        new: String,
        fast_forward: bool,
    },
    Conflict(Vec<String>),
    Dirty {
        worktree: PathBuf,
        paths: Vec<String>,
    },
}

/// The branch a run's nodes merge into: the integration branch of an orchestrate run, the
/// base otherwise.
pub fn target_of(view: &RunDetail) -> Option<String> {
    super::spawn::setting(view, "integration")
        .map(str::to_string)
        .or_else(|| view.manifest.base.clone())
}

/// Merges `node` into its target. A node already merged answers with its merge.
pub async fn merge_node(
    daemon: &Arc<Daemon>,
    handle: &Arc<RunHandle>,
    node_id: &str,
) -> Result<Merged, AppError> {
    let view = handle.view();
    let repo = view
        .manifest
        .repo
        .clone()
        .ok_or_else(|| AppError::invalid(format!("run {} has no repository", handle.id)))?;
    let target = target_of(&view)
        .ok_or_else(|| AppError::invalid(format!("run {} has no target branch", handle.id)))?;
    let r = repo.clone();
    let common = blocking(move || Ok(Git::new(&r).common_dir()?)).await?;
    let lock = daemon.engine.repo_lock(common);
    let _held = lock.lock().await;

    // Judge the node again under the lock: another merge may have finished meanwhile.
    let view = handle.view();
    let node = view
        .nodes
        .iter()
        .find(|n| n.id == node_id)
        .ok_or_else(|| {
            AppError::not_found(format!(
                "node {node_id:?} does not exist in run {}",
                handle.id
            ))
        })?
        .clone();
    match node.state {
        NodeState::Merged => {
            return Ok(Merged {
                node: node.id,
                target,
                commit: node.merge_commit.unwrap_or_default(),
            })
        }
        NodeState::Done | NodeState::Conflict | NodeState::MergeBlocked => {}
        other => {
            return Err(AppError::new(
                ErrorKind::InvalidTransition,
                format!(
                    "node {node_id:?} is {}; merge needs it done, conflict or merge_blocked",
                    other.as_str()
                ),
            ))
        }
    }
    let branch = node
        .branch
        .clone()
        .ok_or_else(|| AppError::invalid(format!("node {node_id:?} has no branch")))?;
    append(
        daemon,
        handle,
        Some(node_id),
        "merge.started",
        json!({"target": target, "branch": branch}),
    )
    .await?;

    let title = view.manifest.title.clone().unwrap_or_default();
    let message = format!("Merge {branch}: {title}");
    let (r, t, b) = (repo.clone(), target.clone(), branch.clone());
    let outcome = blocking(move || {
        let git = Git::new(&r);
        for _ in 0..RACE_RETRIES {
            let (old, new, fast_forward) = match git.plan_merge(&t, &b, &message)? {
                MergePlan::Conflict { files } => return Ok(Outcome::Conflict(files)),
                MergePlan::UpToDate { target } => {
                    return Ok(Outcome::Moved {
                        old: target.clone(),
                        new: target,
                        fast_forward: true,
                    })
                }
                MergePlan::FastForward { old, new } => (old, new, true),
                MergePlan::Merge { old, new } => (old, new, false),
            };
            match git.move_branch(&t, &old, &new, &message)? {
                MoveOutcome::Moved => {
                    return Ok(Outcome::Moved {
                        old,
                        new,
                        fast_forward,
                    })
                }
                MoveOutcome::TargetDirty { worktree, paths } => {
                    return Ok(Outcome::Dirty { worktree, paths })
                }
                MoveOutcome::LostRace { .. } => continue,
            }
        }
        Err(AppError::new(
            ErrorKind::ToolFailed,
            format!("{t} kept moving while merging {b}; try again"),
        ))
    })
    .await;

    match outcome {
        Ok(Outcome::Moved {
            old,
            new,
            fast_forward,
        }) => {
            let ack = append(
                daemon,
                handle,
                Some(node_id),
                "merge.succeeded",
                json!({"commit": new, "target": target, "old": old, "fast_forward": fast_forward}),
            )
            .await?;
            let _ = ack;
            // A conflict discussion about this node is settled by the merge.
            for d in view.discussions.iter().filter(|d| {
                d.open && d.node.as_deref() == Some(node_id) && d.id.starts_with("merge-")
            }) {
                let _ = append(
                    daemon,
                    handle,
                    Some(node_id),
                    "discussion.resolved",
                    json!({"id": d.id, "answer": format!("merged into {target} at {new}")}),
                )
                .await;
            }
            Ok(Merged {
                node: node_id.to_string(),
                target,
                commit: new,
            })
        }
        Ok(Outcome::Conflict(files)) => {
            let worktree = node.worktree.clone().unwrap_or_default();
            // The conflict and the question to a human land together: whoever sees the
            // node in conflict also sees the discussion.
            let question = format!("merge-{}", octl_proto::ids::new_ulid().to_ascii_lowercase());
            daemon
                .store
                .append_all(
                    handle,
                    vec![
                        Draft::daemon(Some(node_id), "merge.conflict", json!({"files": files})),
                        Draft::daemon(
                            Some(node_id),
                            "discussion.opened",
                            json!({
                                "id": question,
                                "title": format!("Merge conflict: {branch} into {target}"),
                                "body": format!(
                                    "Conflicting files: {}. The branch and its worktree ({worktree}) are kept and {target} is untouched. Resolve it there (for example: git merge {target}, fix the files, commit), then run: orchestratectl merge {} --node {node_id}",
                                    files.join(", "), handle.id
                                ),
                            }),
                        ),
                    ],
                )
                .await?;
            Err(AppError::new(
                ErrorKind::MergeConflict,
                format!(
                    "merging node {node_id:?} ({branch}) into {target} conflicts in: {}",
                    files.join(", ")
                ),
            )
            .with_hint(format!(
                "nothing moved; resolve in the node's worktree {worktree} (e.g. git merge {target}), commit, then run `orchestratectl merge {} --node {node_id}`",
                handle.id
            )))
        }
        Ok(Outcome::Dirty { worktree, paths }) => {
            append(
                daemon,
                handle,
                Some(node_id),
                "merge.blocked",
                json!({"reason": "target_dirty", "target_worktree": worktree.display().to_string(), "paths": paths}),
            )
            .await?;
            Err(AppError::new(
                ErrorKind::TargetDirty,
                format!(
                    "{target} is checked out in {} with uncommitted changes to {}; nothing was moved",
                    worktree.display(),
                    paths.join(", ")
                ),
            )
            .with_hint(format!(
                "commit or stash those changes there, then run `orchestratectl merge {} --node {node_id}`",
                handle.id
            )))
        }
        Err(e) => {
            // Record that the merge did not happen, so the node can be merged again.
            let _ = append(
                daemon,
                handle,
                Some(node_id),
                "merge.blocked",
                json!({"reason": "error", "error": e.message}),
            )
            .await;
            Err(e)
        }
    }
}

/// Merges an orchestrate run's integration branch into its base once every node is merged
/// into it, then deletes the integration branch (it is contained in base) and completes the
/// run. Repeating it after success answers with the same merge.
pub async fn merge_run(daemon: &Arc<Daemon>, handle: &Arc<RunHandle>) -> Result<Merged, AppError> {
    let view = handle.view();
    let repo = view
        .manifest
        .repo
        .clone()
        .ok_or_else(|| AppError::invalid(format!("run {} has no repository", handle.id)))?;
    let base = view.manifest.base.clone().unwrap_or_default();
    let integration = super::spawn::setting(&view, "integration")
        .ok_or_else(|| AppError::invalid(format!("run {} has no integration branch", handle.id)))?
        .to_string();
    let r = repo.clone();
    let common = blocking(move || Ok(Git::new(&r).common_dir()?)).await?;
    let lock = daemon.engine.repo_lock(common);
    let _held = lock.lock().await;

    let view = handle.view();
    if view.manifest.merge.as_deref() == Some("merged") {
        let commit = view.manifest.merge_commit.clone().unwrap_or_default();
        return Ok(Merged {
            node: String::new(),
            target: base,
            commit,
        });
    }
    if let Some(n) = view.nodes.iter().find(|n| n.state != NodeState::Merged) {
        return Err(AppError::new(
            ErrorKind::InvalidTransition,
            format!(
                "node {:?} is {}; the integration branch is merged into {base} once every node is merged into it",
                n.id,
                n.state.as_str()
            ),
        ));
    }
    append(
        daemon,
        handle,
        None,
        "merge.started",
        json!({"target": base, "branch": integration}),
    )
    .await?;
    let message = format!(
        "Merge {integration}: {}",
        view.manifest.title.clone().unwrap_or_default()
    );
    let (r, t, b) = (repo.clone(), base.clone(), integration.clone());
    let outcome = blocking(move || {
        let git = Git::new(&r);
        for _ in 0..RACE_RETRIES {
            let (old, new) = match git.plan_merge(&t, &b, &message)? {
                MergePlan::Conflict { files } => return Ok(Outcome::Conflict(files)),
                MergePlan::UpToDate { target } => (target.clone(), target),
                MergePlan::FastForward { old, new } | MergePlan::Merge { old, new } => (old, new),
            };
            if old == new {
                return Ok(Outcome::Moved {
                    old,
                    new,
                    fast_forward: true,
                });
            }
            match git.move_branch(&t, &old, &new, &message)? {
                MoveOutcome::Moved => {
                    return Ok(Outcome::Moved {
                        old,
                        new,
                        fast_forward: false,
                    })
                }
                MoveOutcome::TargetDirty { worktree, paths } => {
                    return Ok(Outcome::Dirty { worktree, paths })
                }
                MoveOutcome::LostRace { .. } => continue,
            }
        }
        Err(AppError::new(
            ErrorKind::ToolFailed,
            format!("{t} kept moving while merging {b}; try again"),
        ))
    })
    .await;
    match outcome {
        Ok(Outcome::Moved { old, new, .. }) => {
            let (r, b, t) = (repo.clone(), integration.clone(), base.clone());
            let deleted = blocking(move || Ok(Git::new(&r).delete_merged_branch(&b, &t)?))
                .await
                .map(|d| d == crate::git::BranchDelete::Deleted)
                .unwrap_or(false);
            daemon
                .store
                .append_all(
                    handle,
                    vec![
                        Draft::daemon(
                            None,
                            "merge.succeeded",
                            json!({"commit": new, "target": base, "old": old}),
                        ),
                        Draft::daemon(
                            None,
                            "run.completed",
                            json!({"merge_commit": new, "integration_deleted": deleted}),
                        ),
                    ],
                )
                .await?;
            Ok(Merged {
                node: String::new(),
                target: base,
                commit: new,
            })
        }
        Ok(Outcome::Conflict(files)) => {
            append(
                daemon,
                handle,
                None,
                "merge.conflict",
                json!({"files": files}),
            )
            .await?;
            Err(AppError::new(
                ErrorKind::MergeConflict,
                format!("merging {integration} into {base} conflicts in: {}", files.join(", ")),
            )
            .with_hint(format!(
                "nothing moved; merge {base} into {integration} by hand (git switch {integration} in a worktree, git merge {base}, fix, commit), then run `orchestratectl merge {}`",
                handle.id
            )))
        }
        Ok(Outcome::Dirty { worktree, paths }) => {
            append(
                daemon,
                handle,
                None,
                "merge.blocked",
                json!({"reason": "target_dirty", "target_worktree": worktree.display().to_string(), "paths": paths}),
            )
            .await?;
            Err(AppError::new(
                ErrorKind::TargetDirty,
                format!(
                    "{base} is checked out in {} with uncommitted changes to {}; nothing was moved",
                    worktree.display(),
                    paths.join(", ")
                ),
            )
            .with_hint(format!(
                "commit or stash those changes there, then run `orchestratectl merge {}`",
                handle.id
            )))
        }
        Err(e) => {
            let _ = append(
                daemon,
                handle,
                None,
                "merge.blocked",
                json!({"reason": "error", "error": e.message}),
            )
            .await;
            Err(e)
        }
    }
}
