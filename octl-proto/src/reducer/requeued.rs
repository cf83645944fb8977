//! `node.requeued`: the runner started a node's attempt again by itself (Slurm requeues a job
//! whose compute node was lost). The daemon records it so the log says where the work went on;
//! it never moves the node (the same attempt goes on from its last checkpoint), and each copy
//! is recorded once: a copy not newer than the last recorded one is refused.

use crate::error::{AppError, ErrorKind};
use crate::event::{Actor, Event, NodeRequeued};
use crate::state::{Requeued, RunState};

use super::transition;

impl RunState {
    pub(super) fn fold_requeued(&mut self, ev: &Event) -> Result<(), AppError> {
        let id = ev.node.as_deref().ok_or_else(|| {
            AppError::invalid("node.requeued needs a node: give node".to_string())
        })?;
        if ev.actor != Actor::Daemon {
            return Err(AppError::new(
                ErrorKind::Forbidden,
                "node.requeued is the daemon's to say (actor daemon): it reads it from the runner",
            ));
        }
        let node = self.nodes.get(id).ok_or_else(|| {
            AppError::not_found(format!("node {id:?} does not exist in run {}", self.id))
        })?;
        if !node.state.is_alive() {
            return Err(transition(format!(
                "node {id:?} is {}; node.requeued is accepted only when it is {}",
                node.state.as_str(),
                crate::state::NodeState::alive_names()
            )));
        }
        let p: NodeRequeued = ev.payload()?;
        let last = node.requeued.as_ref().map_or(0, |r| r.copy);
        if p.copy <= last {
            return Err(transition(format!(
                "node {id:?} already runs copy {last}; node.requeued is accepted only for a newer copy (data.copy {} given)",
                p.copy
            )));
        }
        let node = self.nodes.get_mut(id).expect("checked above");
        node.requeued = Some(Requeued {
            copy: p.copy,
            from: p.from,
            reason: p.reason,
            at: ev.ts.clone(),
        });
        node.updated_at = ev.ts.clone();
        Ok(())
    }
}
