//! `run retry`: a node that failed, exited or could not merge starts over, in a run of any
//! agent kind — from the current integration tip in a DAG, from base otherwise. A spinoff or
//! code run that ended `failed` is opened again by it.
//!
//! One decision, then the acts: `node.retried` goes through the run's writer first, and the
//! reducer refuses a second one (the node is `pending` by then), so of two retries at once
//! exactly one wins and the loser touches nothing. The old attempt's window, worktree and
//! branch are then cleaned up (snapshot first) as an engine step holding the node
//! ([`clean_old_attempt`], started by `reconcile` for every [`Node::stale_attempt`]), before
//! the scheduler may start the node again; a crash in between is finished on restart the same
//! way, since the log still says the old attempt is not cleaned.

use std::sync::Arc;

use octl_proto::event::{NodeFailed, NodeRetried, NodeUnblocked};

use octl_proto::state::Node;
use octl_proto::{AppError, ErrorKind, NodeState, RunKind};

use super::{append, cleanup, schedule};
use crate::daemon::Daemon;
use crate::store::{Draft, RunHandle};

pub async fn retry(
    daemon: &Arc<Daemon>,
    handle: &Arc<RunHandle>,
    node_id: &str,
) -> Result<(), AppError> {
    let view = handle.view();
    if view.manifest.kind == Some(RunKind::Generic) {
        return Err(AppError::new(
            ErrorKind::InvalidTransition,
            format!(
                "run {} is a generic run; its nodes belong to the client that records them (append node.progress to start one again)",
                handle.id
            ),
        ));
    }
    if !view.nodes.iter().any(|n| n.id == node_id) {
        return Err(AppError::not_found(format!(
            "node {node_id:?} does not exist in run {}",
            handle.id
        )));
    }
    // Subscribed before the decision, so no event of the cleanup is missed.
    let mut events = handle.subscribe();
    // The decision: the reducer accepts it only from failed, exited, conflict or
    // merge_blocked (and in a run that has not ended, or ended failed).
    daemon
        .store
        .append(
            handle,
            Draft::daemon(Some(node_id), NodeRetried::default()),
            false,
        )
        .await?;
    // The nodes it blocked wait for it again. Best effort: the scheduler frees them anyway
    // once their dependency is no longer stuck.
    let unblocked: Vec<Draft> = schedule::blocked_by(&handle.view(), node_id)
        .into_iter()
        .map(|n| {
            Draft::daemon(
                Some(&n),
                NodeUnblocked {
                    cause: Some(format!("{node_id} is retried")),
                },
            )
        })
        .collect();
    if !unblocked.is_empty() {
        let _ = daemon.store.append_all(handle, unblocked).await;
    }
    // Answer once the old attempt is saved under its snapshot ref (the engine's step), so
    // whoever retried can rely on it; bounded, since the step goes on regardless.
    let saved = async {
        while fresh(handle, node_id).is_some_and(|n| n.stale_attempt()) {
            if events
                .recv()
                .await
                .is_err_and(|e| matches!(e, tokio::sync::broadcast::error::RecvError::Closed))
            {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(CLEANUP_WAIT, saved).await;
    Ok(())
}

/// How long `run retry` waits for the old attempt to be saved before answering.
const CLEANUP_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// The engine step after a retry won: the old attempt's window closed, its worktree
/// snapshotted and removed, its branch deleted (its tip is in the snapshot). Called with the
/// node's slot held; judged again from the log, since the view it was started from may be old.
pub async fn clean_old_attempt(daemon: &Arc<Daemon>, handle: &Arc<RunHandle>, node_id: &str) {
    let Some(node) = fresh(handle, node_id).filter(Node::stale_attempt) else {
        return;
    };
    tracing::info!(run = %handle.id, node = node_id, "cleaning up the attempt before a retry");
    super::merge::failpoint("retry:before-cleanup");
    if let Err(e) = cleanup::cleanup(daemon, handle, &node, None).await {
        // Not a dead end: the node fails with the reason and can be retried again.
        tracing::warn!(run = %handle.id, node = node_id, error = %e.message, "cleaning up before a retry");
        let _ = append(
            daemon,
            handle,
            Some(node_id),
            NodeFailed::because(format!(
                "could not clean up the previous attempt: {}",
                e.message
            )),
        )
        .await;
    }
}

/// `run retry --resume` (and the automatic resume of an autonomous agent that died): the
/// node starts again in its own worktree and branch, kept as they are, continuing its Claude
/// Code conversation (`claude --resume`). `node.retried` with `{"resume": true,
/// "session_id"}` is the decision; the reducer refuses a second one as for any retry.
pub async fn resume(
    daemon: &Arc<Daemon>,
    handle: &Arc<RunHandle>,
    node_id: &str,
    cause: &str,
) -> Result<(), AppError> {
    let node = fresh(handle, node_id).ok_or_else(|| {
        AppError::not_found(format!(
            "node {node_id:?} does not exist in run {}",
            handle.id
        ))
    })?;
    let refuse = |why: String| Err(AppError::new(ErrorKind::InvalidTransition, why));
    let Some(session) = node.session_id.clone() else {
        return refuse(format!(
            "node {node_id:?} has no Claude Code session to resume (its agent is not Claude Code, or it never started); retry it without --resume"
        ));
    };
    if !matches!(node.state, NodeState::Exited | NodeState::Failed) {
        return refuse(format!(
            "node {node_id:?} is {}; only an exited or failed node is resumed",
            node.state.as_str()
        ));
    }
    let kept = node
        .worktree
        .as_deref()
        .is_some_and(|w| std::path::Path::new(w).is_dir());
    if node.cleaned || !kept {
        return refuse(format!(
            "node {node_id:?}'s worktree is gone (cleaned up), so its conversation has nowhere to go on; retry it without --resume"
        ));
    }
    daemon
        .store
        .append(
            handle,
            Draft::daemon(
                Some(node_id),
                NodeRetried {
                    session_id: Some(session.to_string()),
                    resume: Some(true),
                    cause: Some(cause.to_string()),
                },
            ),
            false,
        )
        .await?;
    Ok(())
}

fn fresh(handle: &RunHandle, node_id: &str) -> Option<Node> {
    handle
        .view()
        .nodes
        .iter()
        .find(|n| n.id == node_id)
        .cloned()
}
