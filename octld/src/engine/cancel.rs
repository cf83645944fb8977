//! Cancelling a run: its agents stopped; with `discard`, its worktrees removed after a
//! snapshot of everything in them, and its branches deleted (their tips live on in the
//! snapshot refs).
//!
//! One decision, then the acts: every `node.cancelled` and the `run.cancelled` are written as
//! one all-or-nothing group before any window is closed or worktree discarded. The reducer
//! refuses `node.cancelled` for a node that is `merging` (that merge won its step and moves
//! the branch), so either the cancel or a merge's `merge.started` wins, and the loser changes
//! nothing. A cancel that finds a merge in progress waits for it to end, then cancels what is
//! left — or, when every node merged, is refused. A cancel of a run that already ended is
//! refused; `--discard` of an ended run only discards what it left behind. Windows a crash
//! left running after the decision are closed at the next start
//! ([`super::supervise::first_look`]).

use std::sync::Arc;

use octl_proto::event::{NodeCancelled, RunCancelled};

use octl_proto::state::Node;
use octl_proto::{AppError, ErrorKind, NodeState, RunKind};

use super::{blocking, cleanup};
use crate::daemon::Daemon;
use crate::store::{Draft, RunHandle};

pub async fn cancel(
    daemon: &Arc<Daemon>,
    handle: &Arc<RunHandle>,
    discard: bool,
) -> Result<(), AppError> {
    let view = handle.view();
    let ended = view.manifest.status.is_terminal();
    if ended && !discard {
        return Err(AppError::new(
            ErrorKind::InvalidTransition,
            format!(
                "run {} already ended ({}); there is nothing to cancel",
                handle.id, view.manifest.status
            ),
        )
        .with_hint(format!(
            "`orchestratectl run cancel {} --discard` removes what it left behind (after a snapshot); `run gc` does so for every ended run",
            handle.id
        )));
    }
    if !ended {
        let live = decide(daemon, handle, discard).await?;
        super::merge::failpoint("cancel:after-decided");
        // The log says why the agents stopped; now stop them.
        for node in &live {
            super::close_window(daemon, &handle.id, &node.id, node.pane.as_deref()).await;
        }
        let (runner, run) = (daemon.runner.clone(), handle.id.clone());
        let _ = blocking(move || runner.stop_run(&run)).await;
        // And on every remote runner built so far (a Slurm job is cancelled, its agent's
        // trap pushes a last checkpoint).
        for (_, remote) in daemon.runners.remote() {
            let run = handle.id.clone();
            let _ = blocking(move || remote.stop_run(&run)).await;
        }
    }
    if discard {
        for node in handle
            .view()
            .nodes
            .iter()
            .filter(|n| !n.cleaned && n.worktree.is_some())
        {
            cleanup::cleanup(daemon, handle, node, None).await?;
        }
    }
    Ok(())
}

/// Writes the cancel (every unfinished node's `node.cancelled`, then `run.cancelled`) as one
/// group, and returns the nodes it cancelled. A group refused because a node finished (or the
/// run ended) after the view was taken is built again from the new view; one refused because a
/// node is merging, or because the run ended, is the answer.
async fn decide(
    daemon: &Arc<Daemon>,
    handle: &Arc<RunHandle>,
    discard: bool,
) -> Result<Vec<Node>, AppError> {
    let mut attempts = 0;
    loop {
        // A merge that has begun has won its node's step: wait for it to end (merged,
        // conflict or merge_blocked), then cancel what is left.
        wait_for_merges(handle).await;
        let view = handle.view();
        let live: Vec<Node> = view
            .nodes
            .iter()
            .filter(|n| !n.state.is_terminal())
            .cloned()
            .collect();
        // Every node merged: the run's completion is due, and nothing is left to stop. (An
        // orchestrate run still waits for its integration merge, which a cancel may forgo.)
        if live.is_empty()
            && view.manifest.kind != Some(RunKind::Orchestrate)
            && view.nodes.iter().all(|n| n.state == NodeState::Merged)
        {
            return Err(AppError::new(
                ErrorKind::InvalidTransition,
                format!(
                    "every node of run {} is merged; the run completes, there is nothing to cancel",
                    handle.id
                ),
            ));
        }
        let drafts = live
            .iter()
            .map(|n| Draft::daemon(Some(&n.id), NodeCancelled { because: None }))
            .chain(std::iter::once(Draft::daemon(
                None,
                RunCancelled {
                    discard: Some(discard),
                },
            )))
            .collect();
        let err = match daemon.store.append_all(handle, drafts).await {
            Ok(_) => return Ok(live),
            Err(e) => e,
        };
        let now = handle.view();
        attempts += 1;
        if err.kind != ErrorKind::InvalidTransition
            || now.manifest.last_seq == view.manifest.last_seq
            || attempts >= 5
        {
            return Err(err);
        }
    }
}

/// How long a cancel waits for the merges in progress to end before it is refused.
const MERGE_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// Waits (bounded) until no node of the run is merging.
async fn wait_for_merges(handle: &RunHandle) {
    let mut events = handle.subscribe();
    let merging = || {
        handle
            .view()
            .nodes
            .iter()
            .any(|n| n.state == NodeState::Merging)
    };
    let settled = async {
        while merging() {
            if let Err(tokio::sync::broadcast::error::RecvError::Closed) = events.recv().await {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(MERGE_WAIT, settled).await;
}
