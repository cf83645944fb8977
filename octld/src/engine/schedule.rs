//! Scheduling the nodes of fan-out and orchestrate runs: at most `max_parallel` agents alive
//! at once (a paused node resumed after its limit's reset counts like any start); in a DAG a node starts from the integration tip once all its dependencies are
//! merged into it, and a node that failed or could not merge blocks its dependents.
//!
//! One scheduling pass per run at a time (a slot keyed [`StepKey::Schedule`]), and starts are
//! awaited one by one, so the count of live agents is exact. What to start and what to block
//! are pure functions of the run ([`next_to_start`], [`to_block`], [`to_unblock`]).

use std::collections::HashSet;
use std::sync::Arc;

use octl_proto::event::{NodeBlocked, NodeFailed, NodeUnblocked, RunBudgetSpent};

use octl_proto::projection::RunDetail;
use octl_proto::state::Node;
use octl_proto::{AppError, NodeState};

use super::decide::limits;
use super::{append, spawn, Engine, Slot, StepKey};
use crate::agents::{self, Extra, Mode};
use crate::daemon::Daemon;
use crate::store::RunHandle;

/// The run's cap on live agents.
pub fn cap(view: &RunDetail) -> usize {
    view.manifest.settings.max_parallel.unwrap_or(1).max(1) as usize
}

/// The order nodes start in: the manifest's or plan's, as recorded at creation.
fn order(view: &RunDetail) -> Vec<String> {
    match &view.manifest.settings.order {
        Some(ids) => ids.clone(),
        None => view.nodes.iter().map(|n| n.id.clone()).collect(),
    }
}

/// Deps of `node` not yet merged.
pub fn waiting_for(view: &RunDetail, node: &Node) -> Vec<String> {
    node.deps
        .iter()
        .filter(|d| {
            view.nodes
                .iter()
                .find(|n| &n.id == *d)
                .is_none_or(|n| n.state != NodeState::Merged)
        })
        .cloned()
        .collect()
}

/// Scheduling passes for the run, holding its schedule slot, until no one asked for one
/// while the last ran.
pub async fn passes(d: &Arc<Daemon>, h: &Arc<RunHandle>, slot: Slot) {
    loop {
        if let Err(e) = pass(d, h).await {
            tracing::warn!(run = %h.id, error = %e.message, "scheduling");
        }
        if !slot.release_or_again() {
            break;
        }
    }
    drop(slot);
}

/// The node to start next, ignoring usage limits: the first pending one in order whose
/// dependencies all merged, unless `max_parallel` agents are alive already.
#[cfg(test)]
pub fn next_to_start(view: &RunDetail) -> Option<&Node> {
    next_startable(view, &Default::default(), 0)
}

/// The node to start next at `now_ms`, unless `max_parallel` agents are alive already: a
/// paused node whose limit has reset first (it resumes in its worktree, and counts against
/// the cap like any start), else [`next_to_start`]'s, skipping nodes whose agent profile is
/// paused by a usage limit (`pauses`: [`limits::profile_pauses`] of every run).
pub fn next_startable<'a>(
    view: &'a RunDetail,
    pauses: &std::collections::BTreeMap<String, u64>,
    now_ms: u64,
) -> Option<&'a Node> {
    let alive = view.nodes.iter().filter(|n| n.state.is_alive()).count();
    if alive >= cap(view) {
        return None;
    }
    let order = order(view);
    let in_order = || {
        order
            .iter()
            .filter_map(|id| view.nodes.iter().find(|n| &n.id == id))
    };
    in_order()
        .find(|n| limits::resume_due(n, now_ms))
        .or_else(|| {
            // A retried node whose old attempt is not cleaned up yet waits for that step.
            in_order().find(|n| {
                n.state == NodeState::Pending
                    && !n.stale_attempt()
                    && waiting_for(view, n).is_empty()
                    && limits::may_start(n, pauses)
            })
        })
}

async fn pass(daemon: &Arc<Daemon>, handle: &Arc<RunHandle>) -> Result<(), AppError> {
    loop {
        let view = handle.view();
        if view.manifest.status.is_terminal() {
            return Ok(());
        }
        block_dependents(daemon, handle, &view).await?;
        let now = crate::store::writer::now_ms();
        let views: Vec<_> = daemon.store.handles().iter().map(|h| h.view()).collect();
        let pauses = limits::profile_pauses(views.iter().map(|v| &**v), now);
        let Some(node) = next_startable(&view, &pauses, now).cloned() else {
            return Ok(());
        };
        let paused = node.state == NodeState::Paused;
        // A spent budget starts no new node, and says so once.
        if let Some((spent, budget)) = limits::budget_spent(&view).filter(|_| !paused) {
            if !view.manifest.budget_spent {
                tracing::info!(run = %handle.id, spent, budget, "the run's budget is spent; no new node starts");
                append(
                    daemon,
                    handle,
                    None,
                    RunBudgetSpent {
                        spent_usd: spent,
                        budget_usd: budget,
                        next: node.id.clone(),
                    },
                )
                .await?;
            }
            return Ok(());
        }
        // A step on the node itself (a retry's cleanup) goes first.
        let Some(node_slot) = Engine::claim(daemon, &handle.id, StepKey::node(&node.id)) else {
            return Ok(());
        };
        if paused {
            super::resume::resume(daemon, handle, &node.id).await;
            drop(node_slot);
        } else {
            start(daemon, handle, &view, &node, node_slot).await;
        }
        // A start that changed nothing (it waits for a free port) is not tried again at once.
        let unmoved = handle
            .view()
            .nodes
            .iter()
            .any(|n| n.id == node.id && n.state == node.state);
        if unmoved {
            return Ok(());
        }
    }
}

/// Starts one node's agent (interactive in a code run); a node that cannot start fails (its
/// error is in the event). The node's slot is held until its start ended (with a worktree
/// setup command, in the background: the pass goes on once the node is `starting`).
pub async fn start(
    daemon: &Arc<Daemon>,
    handle: &Arc<RunHandle>,
    view: &RunDetail,
    node: &Node,
    slot: Slot,
) {
    let Some(repo) = view.manifest.repo.clone() else {
        return;
    };
    let mode = if view.manifest.kind == Some(octl_proto::RunKind::Code) {
        Mode::Interactive
    } else {
        Mode::Autonomous
    };
    let start_point = super::merge::target_of(view).unwrap_or_default();
    let launch = daemon.config.get().and_then(|config| {
        let profile = agents::resolve(&config, node.agent.as_deref())?;
        agents::require_program(&profile, mode, std::env::var_os("PATH").as_deref())?;
        let session = profile.session_for(node);
        let launch = profile
            .launch(
                mode,
                &agents::review::prompt(&profile, node, session.as_ref(), &handle.dir),
                session.as_ref(),
            )?
            .with(&Extra {
                gate: node
                    .gate
                    .as_deref()
                    .or(view.manifest.settings.gate.as_deref()),
                max_budget_usd: limits::node_budget(view, agents::node_budget(&config, &profile)),
                permissions: Some(&node.permissions),
            });
        Ok(launch)
    });
    let result = match launch {
        Ok(launch) => {
            spawn::start_node(
                daemon,
                handle,
                &node.id,
                std::path::Path::new(&repo),
                &start_point,
                &launch,
                Some(slot),
            )
            .await
        }
        Err(e) => append(
            daemon,
            handle,
            Some(&node.id),
            NodeFailed::because(format!("cannot start: {}", e.message)),
        )
        .await
        .map(|_| ()),
    };
    if let Err(e) = result {
        tracing::warn!(run = %handle.id, node = %node.id, error = %e.message, "node did not start");
    }
}

/// In a DAG, a pending node whose dependency failed, exited, could not merge, was cancelled
/// or is itself blocked becomes `blocked`; independent nodes go on.
async fn block_dependents(
    daemon: &Arc<Daemon>,
    handle: &Arc<RunHandle>,
    view: &RunDetail,
) -> Result<(), AppError> {
    for (n, dep) in to_block(view) {
        append(
            daemon,
            handle,
            Some(&n.id),
            NodeBlocked {
                reason: Some(format!("dependency {dep} cannot merge")),
            },
        )
        .await?;
    }
    for n in to_unblock(view) {
        append(
            daemon,
            handle,
            Some(&n.id),
            NodeUnblocked {
                cause: Some("its dependencies can merge again".into()),
            },
        )
        .await?;
    }
    Ok(())
}

/// Nodes that cannot merge, so their dependents cannot start.
fn stuck(view: &RunDetail) -> HashSet<&str> {
    view.nodes
        .iter()
        .filter(|n| {
            matches!(
                n.state,
                NodeState::Failed
                    | NodeState::Exited
                    | NodeState::Conflict
                    | NodeState::MergeBlocked
                    | NodeState::Cancelled
                    | NodeState::Blocked
            )
        })
        .map(|n| n.id.as_str())
        .collect()
}

/// Pending nodes to block, each with the dependency that blocks it.
pub fn to_block(view: &RunDetail) -> Vec<(&Node, &str)> {
    let stuck = stuck(view);
    view.nodes
        .iter()
        .filter(|n| n.state == NodeState::Pending)
        .filter_map(|n| {
            let dep = n.deps.iter().find(|d| stuck.contains(d.as_str()))?;
            Some((n, dep.as_str()))
        })
        .collect()
}

/// Blocked nodes to free: a dependency that got unstuck (merged by hand after a conflict, or
/// retried) frees the nodes it blocked.
pub fn to_unblock(view: &RunDetail) -> Vec<&Node> {
    let stuck = stuck(view);
    view.nodes
        .iter()
        .filter(|n| n.state == NodeState::Blocked)
        .filter(|n| !n.deps.iter().any(|d| stuck.contains(d.as_str())))
        .collect()
}

/// Nodes blocked (directly or through others) by `node`, to unblock on its retry.
pub fn blocked_by(view: &RunDetail, node: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut frontier = vec![node.to_string()];
    while let Some(cur) = frontier.pop() {
        for n in view
            .nodes
            .iter()
            .filter(|n| n.state == NodeState::Blocked && n.deps.contains(&cur))
        {
            if !out.contains(&n.id) {
                out.push(n.id.clone());
                frontier.push(n.id.clone());
            }
        }
    }
    out
}
