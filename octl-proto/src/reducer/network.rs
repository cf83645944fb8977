//! `node.network_refused`: the daemon's network proxy refused a sandboxed agent a target that
//! `[sandbox] allow` does not list. Only the daemon says it, of a node of the run; it records
//! what happened and never moves the node (a refusal counted after the agent exited is still
//! that node's).

use crate::error::{AppError, ErrorKind};
use crate::event::{Actor, Event, NodeNetworkRefused};
use crate::state::RunState;

impl RunState {
    pub(super) fn fold_network_refused(&mut self, ev: &Event) -> Result<(), AppError> {
        let id = ev.node.as_deref().ok_or_else(|| {
            AppError::invalid("node.network_refused needs a node: give node".to_string())
        })?;
        if ev.actor != Actor::Daemon {
            return Err(AppError::new(
                ErrorKind::Forbidden,
                "node.network_refused is the daemon's to say (actor daemon): its proxy refused the target",
            ));
        }
        if !self.nodes.contains_key(id) {
            return Err(AppError::not_found(format!(
                "node {id:?} does not exist in run {}",
                self.id
            )));
        }
        let p: NodeNetworkRefused = ev.payload()?;
        if p.target.is_empty() || p.count == 0 {
            return Err(AppError::invalid(
                "node.network_refused needs a target (host:port) and a count of at least 1",
            ));
        }
        Ok(())
    }
}
