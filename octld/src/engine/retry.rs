//! `run retry`: a node of a DAG or fan-out that failed, exited or could not merge starts
//! over from the current integration tip (or base). Its old branch and worktree are saved
//! under its snapshot ref first, then removed; the nodes it blocked wait for it again.

use std::sync::Arc;

use serde_json::json;

use octl_proto::{AppError, ErrorKind, NodeState};

use super::{cleanup, schedule, Engine};
use crate::daemon::Daemon;
use crate::store::{Draft, RunHandle};

pub async fn retry(
    daemon: &Arc<Daemon>,
    handle: &Arc<RunHandle>,
    node_id: &str,
) -> Result<(), AppError> {
    let view = handle.view();
    if !matches!(view.manifest.kind.as_str(), "orchestrate" | "fanout") {
        return Err(AppError::new(
            ErrorKind::InvalidTransition,
            format!(
                "run {} is a {} run; retry is for orchestrate and fan-out runs (spawn a new run instead)",
                handle.id, view.manifest.kind
            ),
        ));
    }
    if matches!(
        view.manifest.status.as_str(),
        "completed" | "failed" | "cancelled"
    ) {
        return Err(AppError::new(
            ErrorKind::InvalidTransition,
            format!(
                "run {} is {}; only a run that has not ended can retry a node",
                handle.id, view.manifest.status
            ),
        ));
    }
    let node = view
        .nodes
        .iter()
        .find(|n| n.id == node_id)
        .cloned()
        .ok_or_else(|| {
            AppError::not_found(format!(
                "node {node_id:?} does not exist in run {}",
                handle.id
            ))
        })?;
    if !matches!(
        node.state,
        NodeState::Failed | NodeState::Exited | NodeState::Conflict | NodeState::MergeBlocked
    ) {
        return Err(AppError::new(
            ErrorKind::InvalidTransition,
            format!(
                "node {node_id:?} is {}; retry needs it failed, exited, conflict or merge_blocked",
                node.state.as_str()
            ),
        ));
    }
    let slot = loop {
        if let Some(slot) = Engine::claim(daemon, &handle.id, node_id) {
            break slot;
        }
        tokio::time::sleep(super::TICK).await;
    };
    if !node.cleaned {
        cleanup::cleanup(daemon, handle, &node, None).await?;
    }
    let mut drafts = vec![Draft::daemon(Some(node_id), "node.retried", json!({}))];
    drafts.extend(
        schedule::blocked_by(&handle.view(), node_id)
            .into_iter()
            .map(|n| {
                Draft::daemon(
                    Some(&n),
                    "node.unblocked",
                    json!({"cause": format!("{node_id} is retried")}),
                )
            }),
    );
    daemon.store.append_all(handle, drafts).await?;
    drop(slot);
    Ok(())
}
