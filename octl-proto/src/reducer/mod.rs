//! The pure fold from events to [`RunState`]. It is the state machine: an event that is not a
//! legal transition is refused here, and the daemon writes nothing it refuses.
//!
//! Every check in [`RunState::apply`] runs before the first mutation, so a refused event leaves
//! the state exactly as it was.

use crate::error::{AppError, ErrorKind};
use crate::event::{
    is_custom_type, Actor, Event, NodeReview, Payload, RunBudgetChanged, RunBudgetSpent, RunCreated,
};
use crate::ids::is_node_id;
use crate::state::{Node, RunKind, RunState, RunStatus};

mod activity;
mod attempts;
mod network;
mod nodes;
mod permissions;
mod reach;
mod records;
mod requeued;
mod reviews;
#[cfg(test)]
mod tests;

use nodes::accepts_failed;
pub use permissions::{rule_allows, rule_for};

/// May a client (an agent, a human, another tool) append this type to a run of this kind?
/// Everything else is the daemon's to say.
pub fn client_may_append(kind: RunKind, t: &str) -> bool {
    if is_custom_type(t) {
        return true;
    }
    let agent_kinds = matches!(
        t,
        "node.progress"
            | "node.activity"
            | "node.waiting"
            | "node.done"
            | "node.failed"
            | "discussion.opened"
            | "discussion.resolved"
            | "spinoff.proposed"
    );
    match kind {
        RunKind::Generic => {
            agent_kinds || matches!(t, "node.added" | "run.completed" | "run.failed")
        }
        _ => agent_kinds,
    }
}

/// The types a client may append to a run of this kind, for error messages and docs.
pub fn client_types(kind: RunKind) -> Vec<&'static str> {
    crate::event::KNOWN_TYPES
        .iter()
        .copied()
        .filter(|t| client_may_append(kind, t))
        .chain(std::iter::once("x.<name>"))
        .collect()
}

fn transition(msg: String) -> AppError {
    AppError::new(ErrorKind::InvalidTransition, msg)
}

/// A discussion's or proposal's id, checked for its form.
fn record_id(id: String) -> Result<String, AppError> {
    if is_node_id(&id) {
        Ok(id)
    } else {
        Err(AppError::invalid(format!(
            "invalid data.id {id:?}: use 1-63 of a-z, 0-9 and '-', starting with a letter or digit"
        )))
    }
}

/// The budget a `run.budget_changed` leaves: `add` more than `budget`, or `set` — exactly
/// one, a finite amount above 0 — and above what the run has `spent`, else nothing starts.
/// `names` are the two amounts' names in errors (`data.add_usd`, `data.budget_usd` here; the
/// method's and the command's own where they check first).
pub fn budget_after(
    budget: Option<f64>,
    spent: f64,
    add: Option<f64>,
    set: Option<f64>,
    names: [&str; 2],
) -> Result<f64, AppError> {
    let [add_name, set_name] = names;
    let positive = |key: &str, v: f64| {
        if v.is_finite() && v > 0.0 {
            Ok(v)
        } else {
            Err(AppError::invalid(format!(
                "invalid {key} {v}: give an amount in USD above 0, e.g. 2.50"
            )))
        }
    };
    let (new, key) = match (add, set) {
        (Some(add), None) => {
            let add = positive(add_name, add)?;
            let Some(budget) = budget else {
                return Err(AppError::invalid(format!(
                    "invalid {add_name}: the run has no budget to add to; give {set_name} instead"
                )));
            };
            (budget + add, add_name)
        }
        (None, Some(set)) => (positive(set_name, set)?, set_name),
        _ => {
            return Err(AppError::invalid(format!(
                "give exactly one of {add_name} and {set_name}, an amount in USD above 0, e.g. 2.50"
            )))
        }
    };
    if new <= spent {
        return Err(AppError::invalid(format!(
            "invalid {key}: a budget of {} is not above the {} the run has spent, so no node would start; give more",
            usd(new),
            usd(spent)
        )));
    }
    Ok(new)
}

/// `$1.5`, `$0.00001`: an amount as people read it, without float noise.
pub fn usd(v: f64) -> String {
    let s = format!("{v:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("${s}")
}

impl RunState {
    /// Starts a run's state from its first event, which must be `run.created` with `seq` 1.
    pub fn from_created(ev: &Event) -> Result<RunState, AppError> {
        if ev.kind != "run.created" || ev.seq != 1 {
            return Err(transition(format!(
                "the first event of a run must be run.created with seq 1, got {} with seq {}",
                ev.kind, ev.seq
            )));
        }
        let created: RunCreated = ev.payload()?;
        Ok(RunState {
            id: ev.run.clone(),
            kind: created.kind,
            title: created.title,
            repo: created.repo,
            base: created.base,
            settings: created.settings,
            created_at: ev.ts.clone(),
            updated_at: ev.ts.clone(),
            last_seq: 1,
            ended: None,
            merge: None,
            merge_commit: None,
            nodes: Default::default(),
            node_order: Vec::new(),
            discussions: Default::default(),
            spinoffs: Default::default(),
            idempotency: Default::default(),
            budget_spent: false,
            permissions: Default::default(),
            allowed: Vec::new(),
            judged: None,
            judge_failed: None,
        })
    }

    /// Folds a whole log. The error carries the `seq` of the event that did not fit.
    pub fn replay<'a>(
        events: impl IntoIterator<Item = &'a Event>,
    ) -> Result<RunState, (u64, AppError)> {
        let mut iter = events.into_iter();
        let first = iter
            .next()
            .ok_or((0, transition("the log is empty".to_string())))?;
        let mut state = RunState::from_created(first).map_err(|e| (first.seq, e))?;
        for ev in iter {
            state.apply(ev).map_err(|e| (ev.seq, e))?;
        }
        Ok(state)
    }

    /// Checks `ev` against the state and folds it in, or refuses it and changes nothing.
    pub fn apply(&mut self, ev: &Event) -> Result<(), AppError> {
        if ev.run != self.id {
            return Err(AppError::invalid(format!(
                "event for run {} given to run {}",
                ev.run, self.id
            )));
        }
        if ev.seq != self.last_seq + 1 {
            return Err(transition(format!(
                "seq {} does not follow {}",
                ev.seq, self.last_seq
            )));
        }
        if let Some(key) = &ev.idempotency_key {
            if self.idempotency.contains_key(key) {
                return Err(transition(format!(
                    "idempotency key {key:?} was already used"
                )));
            }
        }
        self.check_and_fold(ev)?;
        self.last_seq = ev.seq;
        self.updated_at = ev.ts.clone();
        if let Some(key) = &ev.idempotency_key {
            self.idempotency
                .insert(key.clone(), (ev.seq, ev.id.clone()));
        }
        Ok(())
    }

    fn check_and_fold(&mut self, ev: &Event) -> Result<(), AppError> {
        let t = ev.kind.as_str();
        if is_custom_type(t) {
            return self.require_node_exists(ev).map(|_| ());
        }
        // A failed agent run is no dead end: retrying a node (or merging a failed node as
        // committed, on a human's say-so) opens it again.
        let reopens = self.ended == Some(RunStatus::Failed)
            && self.kind != RunKind::Generic
            && ((ev.actor == Actor::Daemon
                && (t == "node.retried" || (t == "merge.started" && accepts_failed(ev))))
                || (t == NodeReview::TYPE && ev.actor == Actor::Human));
        if let Some(end) = self.ended.filter(|_| !reopens) {
            // Cleaning up, and humans deciding on what an agent asked or proposed, go on
            // after a run ended; nothing else does.
            let after_end = matches!(
                t,
                "cleanup.done"
                    | "kept.restored"
                    | "kept.deleted"
                    | "discussion.resolved"
                    | "spinoff.accepted"
                    | "spinoff.rejected"
                    | "spinoff.failed"
            );
            if !after_end {
                return Err(transition(format!(
                    "run {} is {}; {t} is not accepted after a run has ended",
                    self.id,
                    end.as_str()
                )));
            }
        }
        match t {
            "run.created" => Err(transition(format!("run {} already exists", self.id))),
            "run.completed" | "run.failed" | "run.cancelled" => {
                if ev.node.is_some() {
                    return Err(AppError::invalid(format!(
                        "{t} is a run-level event: give no node"
                    )));
                }
                // An agent run ends by itself only once every node has finished: a retry that
                // won meanwhile (the node pending again) beats an end judged before it.
                if t != "run.cancelled" && self.kind != RunKind::Generic {
                    if let Some(n) = self.nodes_in_order().find(|n| !n.state.is_terminal()) {
                        return Err(transition(format!(
                            "node {:?} is {}; {t} is accepted only once every node has finished",
                            n.id,
                            n.state.as_str()
                        )));
                    }
                }
                self.ended = Some(match t {
                    "run.completed" => RunStatus::Completed,
                    "run.failed" => RunStatus::Failed,
                    _ => RunStatus::Cancelled,
                });
                Ok(())
            }
            // Once per run: the daemon stops starting nodes when the run's budget is spent.
            RunBudgetSpent::TYPE => {
                if ev.node.is_some() {
                    return Err(AppError::invalid(
                        "run.budget_spent is a run-level event: give no node",
                    ));
                }
                if self.budget_spent {
                    return Err(transition(format!(
                        "run {} already spent its budget",
                        self.id
                    )));
                }
                ev.payload::<RunBudgetSpent>()?;
                self.budget_spent = true;
                Ok(())
            }
            // A person's new budget: the spending so far is under it, so nodes start again.
            RunBudgetChanged::TYPE => {
                if ev.node.is_some() {
                    return Err(AppError::invalid(
                        "run.budget_changed is a run-level event: give no node",
                    ));
                }
                let change = ev.payload::<RunBudgetChanged>()?;
                let budget = budget_after(
                    self.settings.max_budget_usd,
                    self.cost_usd().unwrap_or(0.0),
                    change.add_usd,
                    change.budget_usd,
                    ["data.add_usd", "data.budget_usd"],
                )?;
                self.settings.max_budget_usd = Some(budget);
                self.budget_spent = false;
                Ok(())
            }
            "node.added" => self.fold_node_added(ev),
            "node.activity" => self.fold_activity(ev),
            "node.permission_asked" | "node.permission_decided" => self.fold_permission(ev),
            NodeReview::TYPE => {
                self.fold_review(ev)?;
                if reopens {
                    self.ended = None;
                }
                Ok(())
            }
            "node.requeued" => self.fold_requeued(ev),
            "node.gated" => self.fold_gated(ev),
            "node.judged" => self.fold_judged(ev),
            "run.judge_failed" => self.fold_judge_failed(ev),
            "node.network_refused" => self.fold_network_refused(ev),
            "node.queued" | "node.running" | "node.lost" | "node.found" => self.fold_reach(ev),
            "discussion.opened" | "discussion.resolved" => self.fold_discussion(ev),
            "spinoff.proposed" | "spinoff.accepted" | "spinoff.rejected" | "spinoff.failed" => {
                self.fold_spinoff(ev)
            }
            "merge.started" | "merge.succeeded" | "merge.conflict" | "merge.blocked"
                if ev.node.is_none() =>
            {
                self.fold_run_merge(ev)
            }
            _ => {
                self.fold_node_transition(ev)?;
                if reopens {
                    self.ended = None;
                }
                Ok(())
            }
        }
    }

    fn require_node_exists(&self, ev: &Event) -> Result<Option<&Node>, AppError> {
        match &ev.node {
            None => Ok(None),
            Some(id) => self.nodes.get(id).map(Some).ok_or_else(|| {
                AppError::not_found(format!("node {id:?} does not exist in run {}", self.id))
            }),
        }
    }
}
