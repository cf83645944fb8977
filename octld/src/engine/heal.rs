//! Healing what a crash interrupted, from the intent events in the log: a node whose start
//! was announced (`node.starting`) but never confirmed is brought up (its live window adopted,
//! or its branch, worktree and window made); a merge that was announced (`merge.started`)
//! is computed again — it cannot apply twice — and a merged node not yet cleaned up is
//! cleaned. Agents whose windows outlived the daemon need nothing: the supervisor finds them
//! on its next tick.

use std::path::Path;
use std::sync::Arc;

use octl_proto::event::NodeFailed;

use octl_proto::state::Node;
use octl_proto::{AppError, NodeState, RunKind};

use super::{append, cleanup, merge, spawn, Slot};
use crate::agents::{self, Mode};
use crate::daemon::Daemon;
use crate::store::RunHandle;

/// Brings up a node left in `starting`.
pub async fn start(daemon: &Arc<Daemon>, handle: &Arc<RunHandle>, node: &Node, slot: Slot) {
    let view = handle.view();
    // Judged again under the slot: the step was decided on a view from before the claim, and
    // the start it took for one a crash cut short may have ended since (its `node.started`
    // written, its slot just let go). Healing that would start it twice, and its refusal
    // would fail a running node.
    if !still_starting(&view, node) {
        drop(slot);
        return;
    }
    let mode = if view.manifest.kind == Some(RunKind::Code) {
        Mode::Interactive
    } else {
        Mode::Autonomous
    };
    // In the conversation its `node.starting` recorded.
    let session = agents::Session::recorded(node);
    let launch = daemon.config.get().and_then(|config| {
        let profile = agents::resolve(&config, node.agent.as_deref())?;
        Ok(profile
            .launch(
                mode,
                &agents::review::prompt(&profile, node, session.as_ref(), &handle.dir),
                session.as_ref(),
            )?
            .with(&agents::Extra {
                gate: node
                    .gate
                    .as_deref()
                    .or(view.manifest.settings.gate.as_deref()),
                max_budget_usd: super::decide::limits::node_budget(
                    &view,
                    agents::node_budget(&config, &profile),
                ),
                permissions: Some(&node.permissions),
            }))
    });
    let result = match (launch, view.manifest.repo.clone(), merge::target_of(&view)) {
        (Ok(launch), Some(repo), Some(start_point)) => {
            tracing::info!(run = %handle.id, node = %node.id, "healing a start a crash interrupted");
            spawn::bring_up(
                daemon,
                handle,
                &node.id,
                Path::new(&repo),
                &start_point,
                &launch,
                true,
            )
            .await
        }
        (Err(e), _, _) => Err(e),
        _ => Err(AppError::invalid("the run names no repository or target")),
    };
    // Only a node still left as it was fails: one that moved on meanwhile lost nothing.
    let failed = result
        .err()
        .filter(|_| still_starting(&handle.view(), node));
    if let Some(e) = failed {
        let _ = append(
            daemon,
            handle,
            Some(&node.id),
            NodeFailed::because(format!("could not restart after a crash: {}", e.message)),
        )
        .await;
    }
    drop(slot);
}

/// The node is `starting` as `node` shows it (the same start: the same place and port).
fn still_starting(view: &octl_proto::projection::RunDetail, node: &Node) -> bool {
    view.nodes.iter().any(|n| {
        n.id == node.id
            && n.state == NodeState::Starting
            && n.place == node.place
            && n.branch == node.branch
            && n.snapshot_refs.len() == node.snapshot_refs.len()
    })
}

/// Finishes a merge a crash interrupted, then cleans up; or cleans up a merged node.
pub async fn merge_and_clean(
    daemon: &Arc<Daemon>,
    handle: &Arc<RunHandle>,
    node: &Node,
    slot: Slot,
) {
    let merged = if node.state == NodeState::Merging {
        tracing::info!(run = %handle.id, node = %node.id, "finishing a merge a crash interrupted");
        merge::merge_node(daemon, handle, &node.id, false)
            .await
            .map(|m| m.target)
    } else {
        merge::target_of(&handle.view()).ok_or_else(|| AppError::invalid("no target"))
    };
    if let Ok(target) = merged {
        let fresh = handle
            .view()
            .nodes
            .iter()
            .find(|n| n.id == node.id)
            .cloned();
        if let Some(n) = fresh.filter(|n| n.state == NodeState::Merged && !n.cleaned) {
            if let Err(e) = cleanup::cleanup(daemon, handle, &n, Some(&target)).await {
                tracing::warn!(run = %handle.id, node = %n.id, error = %e.message, "cleanup after a crash");
            }
        }
    }
    drop(slot);
}
