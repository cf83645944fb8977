//! `merge`: merge a node of a run (a `code` run, or a retry after a conflict or a blocked
//! merge; with `accept_failed`, a failed or exited node as committed), then clean it up.
//! Merging a node that is already merged answers with that merge.

use std::sync::Arc;

use octl_proto::ids::validate_node_id;
use octl_proto::method;
use octl_proto::rpc::{MergeParams, MergeResult};
use octl_proto::{AppError, NodeState, RunKind};

use super::Handle;
use crate::daemon::Daemon;
use crate::engine::{cleanup, merge, Engine, StepKey};

pub async fn merge(daemon: &Arc<Daemon>, p: MergeParams) -> Result<MergeResult, AppError> {
    if let Some(n) = &p.node {
        validate_node_id("node", n)?;
    }
    let handle = daemon.store.resolve("run", &p.run)?;
    handle.ensure_writable()?;
    let view = handle.view();
    if p.accept_failed && p.node.is_none() && view.manifest.kind == Some(RunKind::Orchestrate) {
        return Err(AppError::invalid(
            "invalid accept_failed: it merges one failed or exited node; name it with node (--node)",
        ));
    }
    let node = match (&p.node, view.manifest.kind) {
        (Some(n), _) => n.clone(),
        // An orchestrate run without a node: its integration branch into base.
        (None, Some(RunKind::Orchestrate)) => {
            let merged = crate::engine::merge::merge_run(daemon, &handle).await?;
            return Ok(MergeResult {
                run: handle.id.clone(),
                node: None,
                state: NodeState::Merged,
                target: merged.target,
                merge_commit: merged.commit,
            });
        }
        (None, _) => match view.nodes.as_slice() {
            [one] => one.id.clone(),
            nodes => {
                return Err(AppError::invalid(format!(
                    "run {} has {} nodes: name one with --node ({})",
                    handle.id,
                    nodes.len(),
                    nodes
                        .iter()
                        .map(|n| n.id.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )))
            }
        },
    };
    // Wait for any step already running on this node (e.g. the daemon's own merge).
    let slot = loop {
        if let Some(slot) = Engine::claim(daemon, &handle.id, StepKey::node(&node)) {
            break slot;
        }
        tokio::time::sleep(crate::engine::TICK).await;
    };
    let merged = merge::merge_node(daemon, &handle, &node, p.accept_failed).await?;
    let after = handle.view();
    if let Some(n) = after.nodes.iter().find(|n| n.id == node && !n.cleaned) {
        cleanup::cleanup(daemon, &handle, n, Some(&merged.target)).await?;
    }
    drop(slot);
    let state = handle
        .view()
        .nodes
        .iter()
        .find(|n| n.id == node)
        .map(|n| n.state)
        .unwrap_or(NodeState::Merged);
    Ok(MergeResult {
        run: handle.id.clone(),
        node: Some(node),
        state,
        target: merged.target,
        merge_commit: merged.commit,
    })
}

impl Handle for method::Merge {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        merge(daemon, p).await
    }
}
