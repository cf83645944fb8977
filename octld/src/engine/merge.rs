//! Merging a node's branch into its target without losing anything (docs/MERGING.md, "Merging
//! without losing anything"): one merge at a time per repository; the merge is computed with
//! `git merge-tree` (no worktree is touched); the target moves by compare-and-swap, or by
//! `--ff-only` through the worktree that has it checked out when that worktree is clean on the
//! paths the merge changes.

use std::path::PathBuf;
use std::sync::Arc;

use octl_proto::event::{
    DiscussionOpened, DiscussionResolved, MergeBlocked, MergeConflict, MergeStarted,
    MergeSucceeded, RunCompleted,
};

use octl_proto::projection::RunDetail;
use octl_proto::state::{Node, RunKind};
use octl_proto::{AppError, ErrorKind, NodeState};

use super::{append, blocking};
use crate::daemon::Daemon;
use crate::git::{Git, MergePlan, MoveOutcome};
use crate::store::{Draft, RunHandle};

/// Attempts when another writer moves the target between computing and moving.
const RACE_RETRIES: usize = 5;

#[derive(Debug, Clone)]
pub struct Merged {
    pub target: String,
    pub commit: String,
}

enum Outcome {
    Moved {
        old: String,
        new: String,
        fast_forward: bool,
        /// The branch as merged: in the target now (checked).
        head: String,
    },
    Conflict(Vec<String>),
    Dirty {
        worktree: PathBuf,
        paths: Vec<String>,
    },
}

/// A test-only crash point: when `OCTL_FAILPOINTS` names `point`, the daemon kills itself
/// with SIGKILL right there, as a power cut would. Used by the crash tests.
pub fn failpoint(point: &str) {
    crate::failpoint::crash(point);
}

/// Merges `branch` into `target` in the repository at `repo`: computes the merge, then moves
/// the target (compare-and-swap, or fast-forward through the worktree that has it checked
/// out), computing again when another writer moved it meanwhile.
fn merge_into(repo: &str, target: &str, branch: &str, message: &str) -> Result<Outcome, AppError> {
    let git = Git::new(repo);
    // Merged means in the target: the branch as it was merged must be an ancestor of what
    // the target is afterwards, or nothing is recorded merged.
    let merged = |old: String, new: String, fast_forward: bool, head: String| {
        if git.is_ancestor(&head, &new)? {
            Ok(Outcome::Moved {
                old,
                new,
                fast_forward,
                head,
            })
        } else {
            Err(AppError::new(
                ErrorKind::ToolFailed,
                format!("{branch} at {head} is not in {target} at {new} after the merge; it is not recorded merged"),
            ))
        }
    };
    for _ in 0..RACE_RETRIES {
        let head = git.resolve_commit(branch)?;
        let (old, new, fast_forward) = match git.plan_merge(target, &head, message)? {
            MergePlan::Conflict { files } => return Ok(Outcome::Conflict(files)),
            MergePlan::UpToDate { target: tip } => return merged(tip.clone(), tip, true, head),
            MergePlan::FastForward { old, new } => (old, new, true),
            MergePlan::Merge { old, new } => (old, new, false),
        };
        match git.move_branch(target, &old, &new, message)? {
            MoveOutcome::Moved => {
                failpoint("merge:after-move");
                return merged(old, new, fast_forward, head);
            }
            MoveOutcome::TargetDirty { worktree, paths } => {
                return Ok(Outcome::Dirty { worktree, paths })
            }
            MoveOutcome::LostRace { .. } => continue,
        }
    }
    Err(AppError::new(
        ErrorKind::ToolFailed,
        format!("{target} kept moving while merging {branch}; try again"),
    ))
}

/// Ids of the open discussions the daemon opened about a conflict of `node`.
fn open_merge_questions<'a>(
    view: &'a RunDetail,
    node: &'a str,
) -> impl Iterator<Item = String> + 'a {
    view.discussions
        .iter()
        .filter(move |d| d.open && d.node.as_deref() == Some(node) && d.id.starts_with("merge-"))
        .map(|d| d.id.clone())
}

/// What a node's merge commit is about. A fan-out unit or plan node is one part of its
/// run, whose title is the whole plan's: its own name and the first line of its task. A
/// single-agent run's node is the run: the run's title.
fn subject(kind: Option<RunKind>, run_title: Option<&str>, node: &Node) -> String {
    if !matches!(kind, Some(RunKind::Fanout | RunKind::Orchestrate)) {
        return run_title.unwrap_or_default().to_string();
    }
    const WIDTH: usize = 72;
    let line = node
        .task
        .as_deref()
        .and_then(|t| t.lines().map(str::trim).find(|l| !l.is_empty()));
    match line {
        Some(l) if l.chars().count() > WIDTH => {
            let cut: String = l.chars().take(WIDTH - 1).collect();
            format!("{}: {}…", node.id, cut.trim_end())
        }
        Some(l) => format!("{}: {l}", node.id),
        None => node.id.clone(),
    }
}

/// The branch a run's nodes merge into: the integration branch of an orchestrate run, the
/// base otherwise.
pub fn target_of(view: &RunDetail) -> Option<String> {
    view.manifest
        .settings
        .integration
        .clone()
        .or_else(|| view.manifest.base.clone())
}

/// Merges `node` into its target. A node already merged answers with its merge.
/// `accept_failed`: a failed or exited node is merged too, as its branch is committed.
pub async fn merge_node(
    daemon: &Arc<Daemon>,
    handle: &Arc<RunHandle>,
    node_id: &str,
    accept_failed: bool,
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
                target,
                commit: node.merge_commit.unwrap_or_default(),
            })
        }
        // Merging: a merge a crash interrupted; computing it again cannot apply it twice
        // (a branch already contained in its target is "up to date").
        NodeState::Done | NodeState::Conflict | NodeState::MergeBlocked | NodeState::Merging => {}
        NodeState::Failed | NodeState::Exited if accept_failed => {}
        NodeState::Failed | NodeState::Exited => {
            return Err(AppError::new(
                ErrorKind::InvalidTransition,
                format!(
                    "node {node_id:?} is {}; merge needs it done, conflict or merge_blocked",
                    node.state.as_str()
                ),
            )
            .with_hint(format!(
                "`orchestratectl run retry {} --node {node_id}` starts it again; `orchestratectl merge {} --node {node_id} --accept-failed` merges what it committed as it is",
                handle.id, handle.id
            )))
        }
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
    if node.state != NodeState::Merging {
        brought_back(daemon, handle, &node).await?;
        append(
            daemon,
            handle,
            Some(node_id),
            MergeStarted {
                target: Some(target.clone()),
                branch: Some(branch.clone()),
                // Only ever written as true.
                accept_failed: accept_failed.then_some(true),
            },
        )
        .await?;
    }
    failpoint("merge:after-started");

    let message = format!(
        "Merge {branch}: {}",
        subject(view.manifest.kind, view.manifest.title.as_deref(), &node)
    );
    let (r, t, b) = (repo.clone(), target.clone(), branch.clone());
    let outcome = blocking(move || merge_into(&r, &t, &b, &message)).await;

    match outcome {
        Ok(Outcome::Moved {
            old,
            new,
            fast_forward,
            head,
        }) => {
            // The merge and the settling of this node's conflict questions land together, so
            // nobody sees the run waiting on a question the merge answered.
            let mut drafts = vec![Draft::daemon(
                Some(node_id),
                MergeSucceeded {
                    commit: Some(new.clone()),
                    target: Some(target.clone()),
                    old: Some(old),
                    fast_forward: Some(fast_forward),
                    head: Some(head),
                },
            )];
            drafts.extend(open_merge_questions(&view, node_id).map(|id| {
                Draft::daemon(
                    Some(node_id),
                    DiscussionResolved {
                        id,
                        answer: Some(format!("merged into {target} at {new}")),
                        ..DiscussionResolved::default()
                    },
                )
            }));
            daemon.store.append_all(handle, drafts).await?;
            Ok(Merged {
                target,
                commit: new,
            })
        }
        Ok(Outcome::Conflict(files)) => {
            let worktree = node.worktree.clone().unwrap_or_default();
            // The conflict and the question to a human land together: whoever sees the
            // node in conflict also sees the discussion.
            let question = format!("merge-{}", octl_proto::ids::new_ulid().to_ascii_lowercase());
            // One open question per conflicted node, however often the merge is tried.
            let asked = open_merge_questions(&view, node_id).next().is_some();
            daemon
                .store
                .append_all(
                    handle,
                    std::iter::once(Draft::daemon(Some(node_id), MergeConflict { files: files.clone() }))
                        .chain((!asked).then(|| {
                        Draft::daemon(
                            Some(node_id),
                            DiscussionOpened {
                                id: question,
                                title: format!("Merge conflict: {branch} into {target}"),
                                body: Some(format!(
                                    "Conflicting files: {}. The branch and its worktree ({worktree}) are kept and {target} is untouched. Resolve it there (for example: git merge {target}, fix the files, commit), then run: orchestratectl merge {} --node {node_id}",
                                    files.join(", "), handle.id
                                )),
                                ..DiscussionOpened::default()
                            },
                        )
                        }))
                        .collect(),
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
                MergeBlocked::target_dirty(worktree.display().to_string(), paths.clone()),
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
                MergeBlocked::error(e.message.clone()),
            )
            .await;
            Err(e)
        }
    }
}

/// Before a remote node is merged, its agent's work is in its branch: a failed or exited
/// node's latest checkpoint is fetched first (its host, if it answers; else what was fetched
/// before) — a done node's came back when its agent ended — and the last copy's branch must
/// then be in the node's branch, or nothing is merged.
async fn brought_back(
    daemon: &Arc<Daemon>,
    handle: &Arc<RunHandle>,
    node: &octl_proto::state::Node,
) -> Result<(), AppError> {
    let (Some(runner), Some(pane), Some(worktree), Some(branch), Some(repo)) = (
        node.runner
            .clone()
            .filter(|r| r != crate::config::LOCAL_RUNNER),
        node.pane.clone(),
        node.worktree.clone(),
        node.branch.clone(),
        handle.view().manifest.repo.clone(),
    ) else {
        return Ok(());
    };
    let (d, run, id) = (daemon.clone(), handle.id.clone(), node.id.clone());
    let fetch = matches!(node.state, NodeState::Failed | NodeState::Exited);
    blocking(move || {
        let agent = crate::runner::AgentHandle::new(pane);
        let wt = std::path::Path::new(&worktree);
        if fetch && wt.is_dir() {
            let r = d.runners.of(Some(&runner))?;
            if let Err(e) = r.collect(&run, &id, &agent, wt) {
                tracing::warn!(run = %run, node = %id, error = %e.message, "the latest checkpoint of a remote node was not brought back before its merge");
            }
        }
        let git = Git::new(&repo);
        let Some(last) = crate::runner::last_copy(&git, &run, &id, &agent) else {
            return Ok(());
        };
        let head = format!("{last}/head");
        if !crate::runner::exchange::has_commit(&git, &head) || git.is_ancestor(&head, &branch)? {
            return Ok(());
        }
        Err(AppError::new(
            ErrorKind::InvalidTransition,
            format!(
                "node {id}'s agent committed {head}, which is not in its branch {branch}: nothing was merged"
            ),
        )
        .with_hint(format!(
            "bring it in by hand (git -C {worktree} merge {head}), then merge again",
        )))
    })
    .await
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
    let integration =
        view.manifest.settings.integration.clone().ok_or_else(|| {
            AppError::invalid(format!("run {} has no integration branch", handle.id))
        })?;
    let r = repo.clone();
    let common = blocking(move || Ok(Git::new(&r).common_dir()?)).await?;
    let lock = daemon.engine.repo_lock(common);
    let _held = lock.lock().await;

    let view = handle.view();
    if view.manifest.merge.as_deref() == Some("merged") {
        let commit = view.manifest.merge_commit.clone().unwrap_or_default();
        return Ok(Merged {
            target: base,
            commit,
        });
    }
    if let Some(n) = view
        .nodes
        .iter()
        .find(|n| n.state != NodeState::Merged || !n.cleaned)
    {
        return Err(AppError::new(
            ErrorKind::InvalidTransition,
            format!(
                "node {:?} is {}{}; the integration branch is merged into {base} once every node is merged into it and cleaned up",
                n.id,
                n.state.as_str(),
                if n.state == NodeState::Merged { " but not cleaned up yet" } else { "" }
            ),
        ));
    }
    if view.manifest.merge.as_deref() != Some("merging") {
        append(
            daemon,
            handle,
            None,
            MergeStarted {
                target: Some(base.clone()),
                branch: Some(integration.clone()),
                accept_failed: None,
            },
        )
        .await?;
    }
    failpoint("merge:after-started");
    let message = format!(
        "Merge {integration}: {}",
        view.manifest.title.clone().unwrap_or_default()
    );
    let (r, t, b) = (repo.clone(), base.clone(), integration.clone());
    let outcome = blocking(move || merge_into(&r, &t, &b, &message)).await;
    match outcome {
        Ok(Outcome::Moved { old, new, head, .. }) => {
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
                            MergeSucceeded {
                                commit: Some(new.clone()),
                                target: Some(base.clone()),
                                old: Some(old),
                                fast_forward: None,
                                head: Some(head),
                            },
                        ),
                        Draft::daemon(
                            None,
                            RunCompleted {
                                merge_commit: Some(new.clone()),
                                integration_deleted: Some(deleted),
                                ..RunCompleted::default()
                            },
                        ),
                    ],
                )
                .await?;
            Ok(Merged {
                target: base,
                commit: new,
            })
        }
        Ok(Outcome::Conflict(files)) => {
            append(
                daemon,
                handle,
                None,
                MergeConflict {
                    files: files.clone(),
                },
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
                MergeBlocked::target_dirty(worktree.display().to_string(), paths.clone()),
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
            let _ = append(daemon, handle, None, MergeBlocked::error(e.message.clone())).await;
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, task: Option<&str>) -> Node {
        let mut v = serde_json::json!({"id": id, "state": "done", "deps": [],
            "created_at": "2026-12-01T10:00:00.000Z", "updated_at": "2026-12-01T10:00:00.000Z"});
        if let Some(t) = task {
            v["task"] = t.into();
        }
        serde_json::from_value(v).expect("a node")
    }

    #[test]
    fn a_plan_nodes_merge_names_the_node_and_a_single_agent_runs_names_the_run() {
        let api = node("api", Some("\n  Add the /users endpoint\nwith tests\n"));
        let plan = Some("the whole plan");
        assert_eq!(
            subject(Some(RunKind::Orchestrate), plan, &api),
            "api: Add the /users endpoint"
        );
        assert_eq!(
            subject(Some(RunKind::Fanout), plan, &node("u1", None)),
            "u1"
        );
        let long = "x".repeat(100);
        let s = subject(Some(RunKind::Fanout), plan, &node("u2", Some(&long)));
        assert_eq!(s.chars().count(), "u2: ".len() + 72);
        assert!(s.ends_with('…'));
        assert_eq!(
            subject(Some(RunKind::Spinoff), Some("fix the parser"), &api),
            "fix the parser"
        );
    }
}
