//! `node.activity`: what a node's agent says it is doing, from its own hooks (Claude Code's
//! `PreToolUse`, `Notification`, `Stop`, …). It never moves the node: only the agent's process
//! and its reports do that. It is the agent's to say, and only while its process may be alive.

use crate::error::{AppError, ErrorKind};
use crate::event::{Actor, Event, NodeActivity};
use crate::state::{Activity, ActivityState, RunState};

use super::transition;

impl RunState {
    pub(super) fn fold_activity(&mut self, ev: &Event) -> Result<(), AppError> {
        let id = ev.node.as_deref().ok_or_else(|| {
            AppError::invalid("node.activity needs a node: give node".to_string())
        })?;
        if ev.actor != Actor::Agent {
            return Err(AppError::new(
                ErrorKind::Forbidden,
                format!(
                    "invalid actor {:?}: node.activity is said only by the node's own agent (actor agent)",
                    actor_name(ev.actor)
                ),
            ));
        }
        let node = self.nodes.get(id).ok_or_else(|| {
            AppError::not_found(format!("node {id:?} does not exist in run {}", self.id))
        })?;
        if !node.state.is_alive() {
            return Err(transition(format!(
                "node {id:?} is {}; node.activity is accepted only when it is {}",
                node.state.as_str(),
                crate::state::NodeState::alive_names()
            )));
        }
        let said: NodeActivity = ev.payload()?;
        let given = said.state;
        let state = ActivityState::parse(&given).ok_or_else(|| {
            AppError::invalid(format!(
                "invalid data.state {given:?}: use working, needs_permission, waiting_input, idle or unknown"
            ))
        })?;
        let (detail, session) = (said.detail, said.session_id);

        let node = self.nodes.get_mut(id).expect("checked above");
        // `since` is when it entered the state: another tool while working keeps it.
        let since = match &node.activity {
            Some(a) if a.state == state => a.since.clone(),
            _ => ev.ts.clone(),
        };
        node.activity = Some(Activity {
            state,
            since,
            detail,
        });
        // The conversation to resume is the one the agent is in now (`/clear` starts another).
        if session.is_some() {
            node.session_id = session;
        }
        Ok(())
    }
}

fn actor_name(actor: Actor) -> &'static str {
    match actor {
        Actor::Daemon => "daemon",
        Actor::Agent => "agent",
        Actor::Human => "human",
        Actor::Tool => "tool",
    }
}
