//! `node.review`: a person's review of a node's work. An approval lets a done node merge as
//! it is; a review that asks for changes sends the node back to its agent — `typed` into its
//! live session (the node is `running` again), or `resumed` / a new `attempt` in the same
//! worktree and branch (the node is `pending`, started again with the review as its prompt).
//! One decision per state: of two reviews at once the second finds the node moved on and is
//! refused, so it changes nothing.

use crate::error::AppError;
use crate::event::{Actor, Event, NodeReview};
use crate::state::{NodeState, Review, ReviewWay, RunState};

use super::transition;

/// The states a review that asks for changes is taken from, by the way it goes back.
fn from(way: ReviewWay) -> &'static [NodeState] {
    match way {
        // Only a done node's live agent waits for its next message.
        ReviewWay::Typed => &[NodeState::Done],
        // A finished attempt whose worktree and branch are kept.
        ReviewWay::Resumed | ReviewWay::Attempt => {
            &[NodeState::Done, NodeState::Failed, NodeState::Exited]
        }
    }
}

impl RunState {
    pub(super) fn fold_review(&mut self, ev: &Event) -> Result<(), AppError> {
        let id = ev
            .node
            .as_deref()
            .ok_or_else(|| AppError::invalid("node.review needs a node: give node"))?;
        if ev.actor == Actor::Agent {
            return Err(AppError::invalid(
                "node.review is a person's: an agent cannot review its own work",
            ));
        }
        let p: NodeReview = ev.payload()?;
        let approve = p.approve == Some(true);
        let asks = !p.comments.is_empty() || p.text.is_some();
        if approve == asks {
            return Err(AppError::invalid(
                "invalid data: a review either asks for changes (comments, text, with way) or approves (approve: true), one of the two",
            ));
        }
        if let Some(bad) = p.comments.iter().find(|c| c.trim().is_empty()) {
            return Err(AppError::invalid(format!(
                "invalid data.comments entry {bad:?}: each comment is a non-empty remark"
            )));
        }
        let node = self.nodes.get(id).ok_or_else(|| {
            AppError::not_found(format!("node {id:?} does not exist in run {}", self.id))
        })?;
        let state = node.state;
        let names = |states: &[NodeState]| {
            states
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(" or ")
        };
        let to = if approve {
            if p.way.is_some() {
                return Err(AppError::invalid(
                    "invalid data.way: an approval goes back to no agent; give no way",
                ));
            }
            if state != NodeState::Done {
                return Err(transition(format!(
                    "node {id:?} is {}; an approval is accepted only when it is done",
                    state.as_str()
                )));
            }
            if node.approved {
                return Err(transition(format!("node {id:?} is approved already")));
            }
            None
        } else {
            let way = p.way.ok_or_else(|| {
                AppError::invalid(
                    "missing data.way: how the review reaches the agent, \"typed\", \"resumed\" or \"attempt\"",
                )
            })?;
            if !from(way).contains(&state) {
                return Err(transition(format!(
                    "node {id:?} is {}; a review {} is accepted only when it is {}",
                    state.as_str(),
                    way.as_str(),
                    names(from(way))
                )));
            }
            if way != ReviewWay::Typed && node.cleaned {
                return Err(transition(format!(
                    "node {id:?}'s worktree is cleaned up: its work has nowhere to go on"
                )));
            }
            if way == ReviewWay::Resumed && node.session_id.is_none() {
                return Err(AppError::invalid(format!(
                    "invalid data.way \"resumed\": node {id:?} has no conversation to resume; use \"attempt\""
                )));
            }
            Some(way)
        };
        let node = self.nodes.get_mut(id).expect("checked above");
        let round = node.reviews.len() as u32 + 1;
        node.reviews.push(Review {
            round,
            comments: p.comments,
            text: p.text,
            by: p.by,
            at: ev.ts.clone(),
            way: to,
            head: p.head,
            approve,
        });
        node.updated_at = ev.ts.clone();
        match to {
            None => node.approved = true,
            Some(ReviewWay::Typed) => {
                node.approved = false;
                node.state = NodeState::Running;
                node.finished_at = None;
            }
            Some(ReviewWay::Resumed | ReviewWay::Attempt) => {
                node.approved = false;
                node.state = NodeState::Pending;
                // The next attempt goes on in this one's worktree and branch.
                node.resume = true;
                node.review_due = Some(round);
                node.report = None;
                node.reason = None;
                node.exit_status = None;
                node.outcome = None;
                node.started_at = None;
                node.finished_at = None;
            }
        }
        Ok(())
    }
}
