//! Whether a live node's agent can be reached where its runner put it: `node.queued` (it
//! waits in the runner's queue: a pending Slurm job) and `node.running` (it runs now);
//! `node.lost` (its place, an SSH host or the Slurm controller, stopped answering: not known
//! to be gone) and `node.found` (the place answers and the agent is there). Only the daemon
//! says them, from what its runners see; none of them ends the node.

use crate::error::{AppError, ErrorKind};
use crate::event::{Actor, Event, NodeFound, NodeLost, NodeQueued, NodeRunning, Payload};
use crate::state::{Lost, NodeState, Queued, RunState};

use super::transition;
use NodeState::*;

impl RunState {
    pub(super) fn fold_reach(&mut self, ev: &Event) -> Result<(), AppError> {
        let t = ev.kind.as_str();
        let id = ev
            .node
            .as_deref()
            .ok_or_else(|| AppError::invalid(format!("{t} needs a node: give node")))?;
        if ev.actor != Actor::Daemon {
            return Err(AppError::new(
                ErrorKind::Forbidden,
                format!("{t} is the daemon's to say (actor daemon): it reads it from the runner"),
            ));
        }
        let node = self.nodes.get(id).ok_or_else(|| {
            AppError::not_found(format!("node {id:?} does not exist in run {}", self.id))
        })?;
        // The states each is legal from: only a started agent (it has a pane) is queued or
        // lost; a lost one is found back in the state it was lost from.
        let from: &[NodeState] = match t {
            NodeQueued::TYPE => &[Running],
            NodeRunning::TYPE => &[Queued],
            NodeLost::TYPE => &[Queued, Running, Waiting],
            _ => &[Lost],
        };
        if !from.contains(&node.state) || node.pane.is_none() {
            let names: Vec<&str> = from.iter().map(|s| s.as_str()).collect();
            return Err(transition(format!(
                "node {id:?} is {}{}; {t} is accepted only for a started node that is {}",
                node.state.as_str(),
                if node.pane.is_none() {
                    " without an agent"
                } else {
                    ""
                },
                names.join(", ")
            )));
        }
        let was = node.state;
        let lost_was = node.lost.as_ref().map_or(Running, |l| l.was);
        let (state, queued, lost) = match t {
            NodeQueued::TYPE => {
                let p: NodeQueued = ev.payload()?;
                let q = Queued {
                    reason: p.reason,
                    since: ev.ts.clone(),
                };
                (Queued, Some(q), None)
            }
            NodeRunning::TYPE => {
                ev.payload::<NodeRunning>()?;
                (Running, None, None)
            }
            NodeLost::TYPE => {
                let p: NodeLost = ev.payload()?;
                if let Some(since) = &p.since {
                    crate::time::parse_millis(since).ok_or_else(|| {
                        AppError::invalid(format!(
                            "invalid data.since {since:?}: an RFC 3339 time, e.g. 2026-12-01T10:00:00.000Z"
                        ))
                    })?;
                }
                let l = Lost {
                    reason: p.reason,
                    since: p.since.unwrap_or_else(|| ev.ts.clone()),
                    was,
                };
                (Lost, node.queued.clone(), Some(l))
            }
            _ => {
                ev.payload::<NodeFound>()?;
                (lost_was, None, None)
            }
        };
        let node = self.nodes.get_mut(id).expect("checked above");
        node.state = state;
        // A queued node lost and found again is queued still: its reason stays with it.
        node.queued = match state {
            Queued | Lost => queued.or_else(|| node.queued.clone()),
            _ => None,
        };
        node.lost = lost;
        match t {
            // How long it has run counts from when it began to run, not from its submission.
            NodeQueued::TYPE => node.started_at = None,
            NodeRunning::TYPE => node.started_at = Some(ev.ts.clone()),
            _ => {}
        }
        node.updated_at = ev.ts.clone();
        Ok(())
    }
}
