//! The engine's decisions, apart from its actions: [`due`] is a pure function from a run as
//! it is now (and the few facts outside its log it needs) to the steps due; the engine
//! ([`super::reconcile`]) claims each step's [`StepKey`] and performs the steps it won
//! ([`super::act`]).

use octl_proto::projection::RunDetail;
use octl_proto::state::{Node, Spinoff, SpinoffStatus};
use octl_proto::{NodeState, RunKind};

/// What a step holds while it runs: one step per key and run at a time.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum StepKey {
    /// A step on one node (start, heal, finish, exit, merge by hand, retry's cleanup).
    Node(String),
    /// Merging an orchestrate run's integration branch.
    RunMerge,
    /// Ending the run (`run.completed` / `run.failed`).
    RunEnd,
    /// A scheduling pass of a fan-out or orchestrate run.
    Schedule,
    /// Creating the run of an accepted spin-off proposal, by that run's id.
    SpinoffRun(String),
    /// Ranking a best-of-N run's attempts.
    Judge,
}

impl StepKey {
    pub fn node(id: &str) -> StepKey {
        StepKey::Node(id.to_string())
    }

    /// Whether the step is a node's (what the run's end waits for).
    pub fn is_node(&self) -> bool {
        matches!(self, StepKey::Node(_))
    }
}

/// How a run ends by itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunEnd {
    Completed,
    Failed,
}

impl RunEnd {
    /// The event that records it.
    #[cfg(test)]
    pub fn event(self) -> &'static str {
        use octl_proto::event::Payload;
        match self {
            RunEnd::Completed => <octl_proto::event::RunCompleted as Payload>::TYPE,
            RunEnd::Failed => <octl_proto::event::RunFailed as Payload>::TYPE,
        }
    }
}

/// A step due for a run.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// An accepted proposal whose run does not exist: create it under the recorded id.
    CreateSpinoffRun { proposal: Spinoff, child: String },
    /// A start a crash cut short.
    HealStart { node: Node },
    /// A merge (or the cleanup after one) a crash cut short.
    HealMerge { node: Node },
    /// A retried node's old attempt, to clean up before it starts again.
    CleanStaleAttempt { node: String },
    /// A pending node of a spinoff or code run (retried): start it again from base.
    StartPending { node: String },
    /// A node paused by a usage limit that has reset: start it again in its worktree,
    /// continuing its conversation (spinoff and code runs; the scheduler resumes the rest).
    Resume { node: String },
    /// An orchestrate run's merge a crash cut short (`merge.started` without its end).
    ResumeRunMerge,
    /// A done node of a run that merges by itself: gate, merge, clean up.
    Finish { node: String },
    /// A done attempt of a best-of-N run: its gate, then it waits for the judge.
    Gate { node: String },
    /// A best-of-N run's attempts to rank (every one settled, or the first passed with
    /// `first_passing`).
    Judge,
    /// A best-of-N attempt that did not win: stopped, snapshotted and cleaned up.
    SetAside { node: String },
    /// A scheduling pass (fan-out and orchestrate runs).
    Schedule,
    /// An auto-merge orchestrate run whose nodes all merged: merge the run.
    AutoMergeRun,
    /// Every node finished: end the run — once no node step runs (the engine checks).
    EndRun(RunEnd),
}

impl Step {
    pub fn key(&self) -> StepKey {
        match self {
            Step::CreateSpinoffRun { child, .. } => StepKey::SpinoffRun(child.clone()),
            Step::HealStart { node } | Step::HealMerge { node } => StepKey::node(&node.id),
            Step::CleanStaleAttempt { node }
            | Step::StartPending { node }
            | Step::Resume { node }
            | Step::Finish { node }
            | Step::Gate { node }
            | Step::SetAside { node } => StepKey::node(node),
            Step::Judge => StepKey::Judge,
            Step::ResumeRunMerge | Step::AutoMergeRun => StepKey::RunMerge,
            Step::Schedule => StepKey::Schedule,
            Step::EndRun(_) => StepKey::RunEnd,
        }
    }

    /// A step that only reacts to state: its own events wake the engine, so ending it must
    /// not, or passes would wake each other for ever.
    pub fn quiet(&self) -> bool {
        matches!(self, Step::Schedule | Step::EndRun(_))
    }
}

/// What [`due`] needs to know beyond the run's log.
pub struct Facts<'a> {
    /// The run's log could not be read whole.
    pub corrupt: bool,
    /// Whether a run of this id exists.
    pub run_exists: &'a dyn Fn(&str) -> bool,
    /// The time now (ms since the epoch): paused nodes start again after their reset.
    pub now_ms: u64,
}

/// Whether the daemon merges this kind's done nodes by itself.
pub fn merges_by_itself(kind: Option<RunKind>) -> bool {
    matches!(
        kind,
        Some(RunKind::Spinoff | RunKind::Fanout | RunKind::Orchestrate)
    )
}

/// Whether the run's nodes are started by the scheduler (fan-out and DAG), under its cap.
pub fn schedules(kind: Option<RunKind>) -> bool {
    matches!(kind, Some(RunKind::Fanout | RunKind::Orchestrate))
}

/// Whether this run's nodes are started by the scheduler: a fan-out's, a DAG's, and a
/// best-of-N run's attempts (under its cap and budget).
pub fn scheduled(view: &RunDetail) -> bool {
    schedules(view.manifest.kind) || view.manifest.settings.best_of.is_some()
}

/// The steps due for the run as it is now, in the order the engine claims them.
pub fn due(view: &RunDetail, facts: &Facts) -> Vec<Step> {
    let mut steps = Vec::new();
    let kind = view.manifest.kind;
    // Humans decide on proposals in any run, ended or not.
    if !facts.corrupt {
        // The missing run of every accepted proposal of the parent (a crash cut its creation
        // short; one under way holds its key, so the claim fails).
        for proposal in view
            .spinoffs
            .iter()
            .filter(|s| s.status == SpinoffStatus::Accepted)
        {
            let Some(child) = proposal.child_run.clone() else {
                continue;
            };
            if !octl_proto::ids::is_full_run_id(&child) || (facts.run_exists)(&child) {
                continue;
            }
            steps.push(Step::CreateSpinoffRun {
                proposal: proposal.clone(),
                child,
            });
        }
    }
    if facts.corrupt || matches!(kind, None | Some(RunKind::Generic)) {
        return steps;
    }
    if ended(view) {
        return steps;
    }
    // A step announced in the log but running nowhere was cut short by a crash. (While a
    // step runs, its node's slot is held, so the claim fails.)
    for node in view.nodes.iter() {
        let stuck = match node.state {
            NodeState::Starting => true,
            NodeState::Merging => true,
            NodeState::Merged => !node.cleaned,
            _ => false,
        };
        if !stuck {
            continue;
        }
        steps.push(if node.state == NodeState::Starting {
            Step::HealStart { node: node.clone() }
        } else {
            Step::HealMerge { node: node.clone() }
        });
    }
    // A retry won: its old attempt is cleaned up (holding the node) before it starts again.
    for node in view.nodes.iter().filter(|n| n.stale_attempt()) {
        steps.push(Step::CleanStaleAttempt {
            node: node.id.clone(),
        });
    }
    // A retried spinoff or code node starts again from base (fan-out and DAG nodes wait for
    // the scheduler).
    if matches!(kind, Some(RunKind::Spinoff | RunKind::Code)) && !scheduled(view) {
        for node in view
            .nodes
            .iter()
            .filter(|n| n.state == NodeState::Pending && !n.stale_attempt())
        {
            steps.push(Step::StartPending {
                node: node.id.clone(),
            });
        }
    }
    // A paused spinoff or code node starts again once its limit has reset (in a fan-out or
    // DAG the scheduler resumes it, counting it against the cap like any start).
    if !scheduled(view) {
        for node in view
            .nodes
            .iter()
            .filter(|n| limits::resume_due(n, facts.now_ms))
        {
            steps.push(Step::Resume {
                node: node.id.clone(),
            });
        }
    }
    if kind == Some(RunKind::Orchestrate) && view.manifest.merge.as_deref() == Some("merging") {
        steps.push(Step::ResumeRunMerge);
    }
    if let Some(best) = &view.manifest.settings.best_of {
        best_of_steps(view, best, &mut steps);
    } else if merges_by_itself(kind) {
        // Unless the run holds its done nodes for a person's review, until approved.
        let held =
            |n: &&octl_proto::state::Node| view.manifest.settings.holds_for_review() && !n.approved;
        for node in view
            .nodes
            .iter()
            .filter(|n| n.state == NodeState::Done && !held(n))
        {
            steps.push(Step::Finish {
                node: node.id.clone(),
            });
        }
    }
    if scheduled(view) {
        steps.push(Step::Schedule);
    }
    if kind == Some(RunKind::Orchestrate) && wants_auto_merge(view) {
        steps.push(Step::AutoMergeRun);
    }
    if matches!(
        kind,
        Some(RunKind::Spinoff | RunKind::Code | RunKind::Fanout)
    ) {
        if let Some(end) = run_end(view) {
            steps.push(Step::EndRun(end));
        }
    }
    steps
}

/// A best-of-N run's steps: each done attempt gated; once every attempt settled (or, with
/// `first_passing`, one passed) the judge; then the winner finished as any node (merged by
/// the daemon in a spinoff run, by a person in a code run) and every other attempt that can
/// still move set aside.
fn best_of_steps(view: &RunDetail, best: &octl_proto::event::BestOf, steps: &mut Vec<Step>) {
    use octl_proto::event::Judge;
    let Some(judged) = &view.judged else {
        for n in view
            .nodes
            .iter()
            .filter(|n| n.state == NodeState::Done && !n.gated)
        {
            steps.push(Step::Gate { node: n.id.clone() });
        }
        let passed = view.nodes.iter().any(|n| n.gated);
        let settled = view
            .nodes
            .iter()
            .all(|n| n.state.is_terminal() || (n.state == NodeState::Done && n.gated));
        let judges = best.judge != Judge::Human && view.judge_failed.is_none();
        if judges && passed && (settled || best.first_passing) {
            steps.push(Step::Judge);
        }
        return;
    };
    let winner = judged.ranking.first();
    for n in view.nodes.iter() {
        if Some(&n.id) == winner {
            if merges_by_itself(view.manifest.kind) && n.state == NodeState::Done {
                steps.push(Step::Finish { node: n.id.clone() });
            }
        } else if (!n.state.is_terminal() && n.state != NodeState::Merging)
            || (n.state == NodeState::Cancelled && !n.cleaned)
        {
            steps.push(Step::SetAside { node: n.id.clone() });
        }
    }
}

/// Whether the run has ended (completed, failed or cancelled).
pub fn ended(view: &RunDetail) -> bool {
    view.manifest.status.is_terminal()
}

/// An orchestrate run started with auto_merge whose nodes all merged, not merged itself yet.
pub fn wants_auto_merge(view: &RunDetail) -> bool {
    view.manifest.settings.auto_merges()
        && view.manifest.merge.is_none()
        && !view.nodes.is_empty()
        && view
            .nodes
            .iter()
            .all(|n| n.state == NodeState::Merged && n.cleaned)
}

/// `run.completed` when every node merged, `run.failed` when every node finished and one did
/// not merge; `None` while a node can still move.
pub fn run_end(view: &RunDetail) -> Option<RunEnd> {
    if view.nodes.is_empty() || !view.nodes.iter().all(|n| n.state.is_terminal()) {
        return None;
    }
    // Best of N: the winner merged, the others set aside, failed or cancelled.
    if view.manifest.settings.best_of.is_some() {
        let merged = view.nodes.iter().any(|n| n.state == NodeState::Merged);
        let cleaned = view
            .nodes
            .iter()
            .all(|n| n.state != NodeState::Cancelled || n.cleaned);
        return match (merged, cleaned) {
            (true, true) => Some(RunEnd::Completed),
            (true, false) => None,
            (false, _) => Some(RunEnd::Failed),
        };
    }
    if view.nodes.iter().all(|n| n.state == NodeState::Merged) {
        Some(RunEnd::Completed)
    } else if view.nodes.iter().any(|n| n.state == NodeState::Cancelled)
        || view.manifest.kind == Some(RunKind::Fanout)
    {
        // A fan-out with failed units waits for `run retry` (or a cancel).
        None
    } else {
        Some(RunEnd::Failed)
    }
}

pub mod limits;
pub mod room;
#[cfg(test)]
mod tests;
