//! A best-of-N run's attempts: `node.gated` (an attempt passed its gate and waits for the
//! judge) and `node.judged` (the ranking; its first merges). One judgement per run: of a
//! judge and a person's `pick` at once, the second is refused and changes nothing.

use crate::error::AppError;
use crate::event::{Actor, Event, NodeJudged};
use crate::state::{Judged, NodeState, RunState};

use super::transition;

impl RunState {
    fn best_of_node(&self, ev: &Event) -> Result<String, AppError> {
        if self.settings.best_of.is_none() {
            return Err(AppError::invalid(format!(
                "{} is a best-of-N run's (spawn --attempts): run {} has one attempt",
                ev.kind, self.id
            )));
        }
        ev.node
            .clone()
            .ok_or_else(|| AppError::invalid(format!("{} needs a node: give node", ev.kind)))
    }

    pub(super) fn fold_gated(&mut self, ev: &Event) -> Result<(), AppError> {
        let id = self.best_of_node(ev)?;
        if ev.actor != Actor::Daemon {
            return Err(AppError::invalid(
                "node.gated is the daemon's: only it runs gates",
            ));
        }
        let node = self.nodes.get_mut(&id).ok_or_else(|| {
            AppError::not_found(format!("node {id:?} does not exist in run {}", self.id))
        })?;
        if node.state != NodeState::Done || node.gated {
            return Err(transition(format!(
                "node {id:?} is {}{}: only a done attempt is gated, once",
                node.state.as_str(),
                if node.gated { " and gated" } else { "" }
            )));
        }
        node.gated = true;
        node.updated_at = ev.ts.clone();
        Ok(())
    }

    pub(super) fn fold_judge_failed(&mut self, ev: &Event) -> Result<(), AppError> {
        if self.settings.best_of.is_none() || ev.node.is_some() || ev.actor != Actor::Daemon {
            return Err(AppError::invalid(
                "run.judge_failed is the daemon's, of a best-of-N run, with no node",
            ));
        }
        let p: crate::event::RunJudgeFailed = ev.payload()?;
        self.judge_failed = Some(p.message);
        Ok(())
    }

    pub(super) fn fold_judged(&mut self, ev: &Event) -> Result<(), AppError> {
        let id = self.best_of_node(ev)?;
        if ev.actor == Actor::Agent {
            return Err(AppError::invalid(
                "node.judged is the judge's or a person's: an agent cannot pick its own attempt",
            ));
        }
        if let Some(j) = &self.judged {
            return Err(transition(format!(
                "run {} is judged already: {} won ({})",
                self.id,
                j.ranking.first().map_or("-", String::as_str),
                j.by
            )));
        }
        let p: NodeJudged = ev.payload()?;
        if p.ranking.first() != Some(&id) {
            return Err(AppError::invalid(format!(
                "data.ranking: its first must be the event's node {id:?} (the winner)"
            )));
        }
        if p.reasons.len() != p.ranking.len() {
            return Err(AppError::invalid(
                "data.reasons: one per ranked attempt, in the ranking's order",
            ));
        }
        for r in &p.ranking {
            match self.nodes.get(r) {
                Some(n) if n.state == NodeState::Done && n.gated => {}
                Some(n) => {
                    return Err(transition(format!(
                        "node {r:?} is {}{}: only a done attempt that passed its gate is ranked",
                        n.state.as_str(),
                        if n.gated { "" } else { " and not gated" }
                    )))
                }
                None => {
                    return Err(AppError::not_found(format!(
                        "data.ranking: node {r:?} does not exist in run {}",
                        self.id
                    )))
                }
            }
        }
        self.judged = Some(Judged {
            ranking: p.ranking,
            reasons: p.reasons,
            by: p.by,
            at: ev.ts.clone(),
        });
        Ok(())
    }
}
