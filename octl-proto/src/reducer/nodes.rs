//! Node rules: which states each node event is legal from and leads to, and folding node
//! and run-level merge events.

use serde_json::{Map, Value};

use crate::error::AppError;
use crate::event::field::flat;
use crate::event::payload::{self, *};
use crate::event::{Actor, Event, Payload};
use crate::ids::is_node_id;
use crate::state::{Node, NodeState, RunKind, RunState};

use super::records::{kept_change, KeptChange};
use super::transition;
use NodeState::*;

/// A `merge.started` that merges a failed or exited node as committed (`data.accept_failed`).
pub(super) fn accepts_failed(ev: &Event) -> bool {
    ev.actor == Actor::Daemon
        && ev.kind == MergeStarted::TYPE
        && ev
            .payload::<MergeStarted>()
            .is_ok_and(|p| p.accept_failed == Some(true))
}

/// What a node event says about its node, read from its type's payload.
#[derive(Default)]
pub(super) struct Said {
    pub message: Option<String>,
    pub reason: Option<String>,
    pub exit_status: Option<i64>,
    pub outcome: Option<crate::state::Outcome>,
    pub report: Option<Report>,
    /// `node.starting`: the attempt's branch and worktree.
    pub branch: Option<String>,
    pub worktree: Option<String>,
    /// `node.started`.
    pub pane: Option<String>,
    pub on_exit: Option<String>,
    pub report_on_exit: Option<bool>,
    /// `merge.succeeded`, `merge.conflict`.
    pub commit: Option<String>,
    pub files: Vec<String>,
    /// `cleanup.done`.
    pub snapshot_ref: Option<String>,
    pub snapshot_commit: Option<String>,
    pub kept: Option<KeptRecord>,
    /// `kept.restored` (with the worktree) and `kept.deleted`.
    pub kept_dir: Option<(String, Option<String>)>,
    /// `node.starting`, `node.retried`: the conversation, and whether this attempt continues it.
    pub session_id: Option<String>,
    pub resume: bool,
    /// `node.starting`: the port the node holds while live, where its runner starts it.
    pub port: Option<u64>,
    pub place: Option<String>,
    /// `node.paused`: when its usage limit resets.
    pub until: Option<String>,
}

/// Only `node.progress` carries a report; the others' clients are told so.
fn no_report(ty: &str, rest: &Map<String, Value>) -> Result<(), AppError> {
    match rest.get("report") {
        None | Some(Value::Null) => Ok(()),
        Some(r) => Err(AppError::invalid(format!(
            "invalid data.report {r}: only node.progress carries a report, done or failed; {ty} does not"
        ))),
    }
}

fn said(ev: &Event) -> Result<Said, AppError> {
    let s = match ev.kind.as_str() {
        NodeStarting::TYPE => {
            let p: NodeStarting = ev.payload()?;
            Said {
                branch: p.branch,
                worktree: p.worktree,
                session_id: p.session_id,
                resume: p.resume == Some(true),
                port: p.port,
                place: p.place,
                ..Said::default()
            }
        }
        NodeRetried::TYPE => {
            let p: NodeRetried = ev.payload()?;
            Said {
                session_id: p.session_id,
                resume: p.resume == Some(true),
                ..Said::default()
            }
        }
        NodeStarted::TYPE => {
            let p: NodeStarted = ev.payload()?;
            Said {
                pane: p.pane,
                on_exit: p.on_exit,
                report_on_exit: p.report_on_exit,
                ..Said::default()
            }
        }
        NodeProgress::TYPE => {
            let p: NodeProgress = ev.payload()?;
            Said {
                message: p.message,
                reason: p.reason,
                exit_status: flat(&p.exit_status),
                outcome: p.outcome,
                report: p.report,
                ..Said::default()
            }
        }
        NodeWaiting::TYPE => {
            let p: NodeWaiting = ev.payload()?;
            no_report(NodeWaiting::TYPE, &p.rest)?;
            Said {
                message: p.message,
                reason: p.reason,
                exit_status: flat(&p.exit_status),
                outcome: p.outcome,
                ..Said::default()
            }
        }
        NodeDone::TYPE => {
            let p: NodeDone = ev.payload()?;
            no_report(NodeDone::TYPE, &p.rest)?;
            Said {
                message: p.message,
                reason: p.reason,
                exit_status: flat(&p.exit_status),
                outcome: p.outcome,
                ..Said::default()
            }
        }
        NodeFailed::TYPE => {
            let p: NodeFailed = ev.payload()?;
            no_report(NodeFailed::TYPE, &p.rest)?;
            Said {
                message: p.message,
                reason: p.reason,
                exit_status: flat(&p.exit_status),
                outcome: p.outcome,
                ..Said::default()
            }
        }
        NodeExited::TYPE => {
            let p: NodeExited = ev.payload()?;
            Said {
                exit_status: p.exit_status,
                outcome: p.outcome,
                reason: p.reason,
                ..Said::default()
            }
        }
        NodePaused::TYPE => {
            let p: NodePaused = ev.payload()?;
            Said {
                until: Some(p.until),
                reason: p.reason,
                exit_status: p.exit_status,
                outcome: p.outcome,
                ..Said::default()
            }
        }
        NodeBlocked::TYPE => Said {
            reason: ev.payload::<NodeBlocked>()?.reason,
            ..Said::default()
        },
        MergeSucceeded::TYPE => Said {
            commit: ev.payload::<MergeSucceeded>()?.commit,
            ..Said::default()
        },
        MergeConflict::TYPE => Said {
            files: ev.payload::<MergeConflict>()?.files,
            ..Said::default()
        },
        payload::MergeBlocked::TYPE => Said {
            reason: ev.payload::<payload::MergeBlocked>()?.reason,
            ..Said::default()
        },
        CleanupDone::TYPE => {
            let p: CleanupDone = ev.payload()?;
            Said {
                snapshot_ref: flat(&p.snapshot_ref),
                snapshot_commit: flat(&p.snapshot_commit),
                kept: flat(&p.kept),
                ..Said::default()
            }
        }
        KeptRestored::TYPE => {
            let p: KeptRestored = ev.payload()?;
            Said {
                kept_dir: Some((p.dir, Some(p.worktree))),
                ..Said::default()
            }
        }
        KeptDeleted::TYPE => Said {
            kept_dir: Some((ev.payload::<KeptDeleted>()?.dir, None)),
            ..Said::default()
        },
        // node.ready, node.unblocked, node.cancelled, merge.started: nothing
        // about the node beyond their transition.
        _ => Said::default(),
    };
    Ok(s)
}

fn names(states: &[NodeState]) -> String {
    states
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

impl RunState {
    pub(super) fn fold_node_added(&mut self, ev: &Event) -> Result<(), AppError> {
        let id = ev
            .node
            .clone()
            .ok_or_else(|| AppError::invalid("node.added needs a node: give node".to_string()))?;
        if self.nodes.contains_key(&id) {
            return Err(transition(format!(
                "node {id:?} already exists in run {}",
                self.id
            )));
        }
        let added: NodeAdded = ev.payload()?;
        let deps = added.deps.unwrap_or_default();
        if let Some(bad) = deps.iter().find(|d| !is_node_id(d)) {
            return Err(AppError::invalid(format!(
                "invalid data.deps entry {bad:?}: use node ids (1-63 of a-z, 0-9 and '-')"
            )));
        }
        let node = Node {
            id: id.clone(),
            state: Pending,
            branch: added.branch,
            worktree: added.worktree,
            agent: added.agent,
            deps,
            task: added.task,
            gate: added.gate,
            message: None,
            reason: None,
            exit_status: None,
            merge_commit: None,
            conflict_files: Vec::new(),
            snapshot_ref: None,
            snapshot_refs: Vec::new(),
            outcome: None,
            port: None,
            pane: None,
            on_exit: None,
            report_on_exit: false,
            report: None,
            created_at: ev.ts.clone(),
            updated_at: ev.ts.clone(),
            started_at: None,
            finished_at: None,
            cleaned: false,
            kept: Vec::new(),
            activity: None,
            session_id: None,
            paused_until: None,
            cost_usd: None,
            runner: added.runner,
            permissions: added.permissions.unwrap_or_default(),
            sandbox: added.sandbox,
            resume: false,
            requeued: None,
            queued: None,
            lost: None,
            place: None,
            reviews: Vec::new(),
            review_due: None,
            approved: false,
            gated: false,
        };
        self.node_order.push(id.clone());
        self.nodes.insert(id, node);
        Ok(())
    }

    /// The states from which each node event is legal, and the state it leads to.
    fn node_rule(&self, ev: &Event) -> Option<(Vec<NodeState>, Option<NodeState>)> {
        let (t, actor) = (ev.kind.as_str(), ev.actor);
        // A generic run's nodes belong to the client, which may report on them from any
        // unfinished state; in agent runs only a started agent can report.
        let lax = self.kind == RunKind::Generic || actor == Actor::Daemon;
        let alive = || -> Vec<NodeState> {
            NodeState::ALL
                .into_iter()
                .filter(|s| s.is_alive())
                .collect()
        };
        let live = |extra: &[NodeState]| {
            let mut v = alive();
            if lax {
                v.extend([Pending, Ready]);
            }
            v.extend_from_slice(extra);
            v
        };
        let rule = match t {
            "node.ready" => (vec![Pending, Blocked], Some(Ready)),
            "node.starting" => (vec![Pending, Ready, Paused], Some(Starting)),
            // An agent may report (`discussion ask` → waiting, progress) before the daemon has
            // recorded its start: the start is still recorded (its window and pid), and the
            // state the agent reported stands.
            // Once only: a node whose start is recorded (it has a window) is not started again.
            "node.started" => {
                let reported = ev
                    .node
                    .as_deref()
                    .and_then(|id| self.nodes.get(id))
                    .is_some_and(|n| matches!(n.state, Running | Waiting) && n.pane.is_none());
                if reported {
                    (vec![Running, Waiting], None)
                } else {
                    (vec![Starting], Some(Running))
                }
            }
            "node.progress" => (live(&[]), Some(Running)),
            "node.waiting" => (live(&[]), Some(Waiting)),
            "node.done" => (live(&[]), Some(Done)),
            // A gate that fails after done fails the node; only the daemon runs gates.
            "node.failed" if actor == Actor::Daemon => (live(&[Done]), Some(Failed)),
            "node.failed" => (live(&[]), Some(Failed)),
            "node.exited" => (alive(), Some(Exited)),
            // Its agent stopped at a usage or rate limit: it waits for the reset, not failed.
            "node.paused" => (alive(), Some(Paused)),
            "node.blocked" => (vec![Pending, Ready], Some(Blocked)),
            // A dependency was retried: the node waits for it again.
            "node.unblocked" => (vec![Blocked], Some(Pending)),
            // `run retry`: a node that failed or could not merge starts over.
            "node.retried" => (vec![Failed, Exited, Conflict, MergeBlocked], Some(Pending)),
            // Not while merging: the merge has won that step and moves the branch; the node
            // ends merged, conflict or merge_blocked, and can be cancelled after that.
            "node.cancelled" => (
                NodeState::ALL
                    .into_iter()
                    .filter(|s| !s.is_terminal() && *s != Merging)
                    .collect(),
                Some(Cancelled),
            ),
            // A failed or exited node merges only on a human's explicit say-so
            // (`merge --accept-failed`): what it committed, as it is.
            "merge.started" if accepts_failed(ev) => (
                vec![Done, Conflict, MergeBlocked, Failed, Exited],
                Some(Merging),
            ),
            "merge.started" => (vec![Done, Conflict, MergeBlocked], Some(Merging)),
            "merge.succeeded" => (vec![Merging], Some(Merged)),
            "merge.conflict" => (vec![Merging], Some(Conflict)),
            "merge.blocked" => (vec![Merging], Some(MergeBlocked)),
            "cleanup.done" => (NodeState::ALL.to_vec(), None),
            // A kept set of ignored files moved back into a worktree, or deleted by gc.
            "kept.restored" | "kept.deleted" => (NodeState::ALL.to_vec(), None),
            _ => return None,
        };
        Some(rule)
    }

    pub(super) fn fold_node_transition(&mut self, ev: &Event) -> Result<(), AppError> {
        let t = ev.kind.as_str();
        let (from, to) = self
            .node_rule(ev)
            .ok_or_else(|| AppError::invalid(format!("unknown event type {t:?}")))?;
        let id = ev
            .node
            .as_deref()
            .ok_or_else(|| AppError::invalid(format!("{t} needs a node: give node")))?;
        let node = self.nodes.get(id).ok_or_else(|| {
            AppError::not_found(format!("node {id:?} does not exist in run {}", self.id))
        })?;
        if !from.contains(&node.state) {
            return Err(transition(format!(
                "node {id:?} is {}; {t} is accepted only when it is {}",
                node.state.as_str(),
                names(&from)
            )));
        }
        let Said {
            message,
            reason,
            exit_status,
            outcome,
            report,
            branch,
            worktree,
            pane,
            on_exit,
            report_on_exit,
            commit,
            files,
            snapshot_ref: snapshot,
            snapshot_commit,
            kept,
            kept_dir,
            session_id: session,
            resume,
            port,
            place,
            until,
        } = said(ev)?;
        let kept = kept_change(t, kept, snapshot_commit, kept_dir, node, ev)?;
        if resume && session.is_none() && node.session_id.is_none() {
            return Err(AppError::invalid(format!(
                "invalid data.resume: node {id:?} has no session to resume; give data.session_id"
            )));
        }
        let port = match port {
            None => None,
            Some(p) => Some(u16::try_from(p).ok().filter(|p| *p > 0).ok_or_else(|| {
                AppError::invalid(format!("invalid data.port {p}: a TCP port, 1 to 65535"))
            })?),
        };

        let node = self.nodes.get_mut(id).expect("checked above");
        if let Some(to) = to {
            node.state = to;
        }
        // Why it waited in a queue or for its place holds only while it does.
        if node.state != Queued {
            node.queued = None;
        }
        if node.state != Lost {
            node.lost = None;
        }
        node.updated_at = ev.ts.clone();
        // Only the daemon's intent to start a node names its branch and worktree; other
        // events may carry paths of their own (a blocked merge names the target's worktree).
        if t == "node.starting" {
            if branch.is_some() {
                node.branch = branch;
            }
            if worktree.is_some() {
                node.worktree = worktree;
            }
        }
        if message.is_some() {
            node.message = message;
        }
        if reason.is_some() {
            node.reason = reason;
        }
        if exit_status.is_some() {
            node.exit_status = exit_status;
        }
        if let Some(cost) = outcome.as_ref().and_then(|o| o.total_cost_usd) {
            node.cost_usd = Some(node.cost_usd.unwrap_or(0.0) + cost);
        }
        if outcome.is_some() {
            node.outcome = outcome;
        }
        if let Some(s) = snapshot {
            if !node.snapshot_refs.contains(&s) {
                node.snapshot_refs.push(s.clone());
            }
            node.snapshot_ref = Some(s);
        }
        if pane.is_some() {
            node.pane = pane;
        }
        if on_exit.is_some() {
            node.on_exit = on_exit;
        }
        if let Some(b) = report_on_exit {
            node.report_on_exit = b;
        }
        if let Some(r) = report {
            node.report = Some(r.as_str().to_string());
        }
        match t {
            "node.retried" => {
                node.resume = resume;
                node.review_due = None;
                node.approved = false;
                if session.is_some() {
                    node.session_id = session;
                }
                node.report = None;
                node.reason = None;
                node.exit_status = None;
                node.conflict_files.clear();
                node.outcome = None;
                node.started_at = None;
                node.finished_at = None;
                // `cleaned` stays as it was: a retried node whose old attempt is not cleaned
                // up yet (see `Node::stale_attempt`) is cleaned before it starts again.
            }
            // A new attempt; the old one's window (kept until then, so the retry's cleanup
            // can close it) is gone, and the new branch and worktree are to be cleaned up in
            // their turn.
            "node.starting" => {
                // Each start holds the port its intent names, or none, and goes where it says.
                node.port = port;
                node.place = place;
                node.pane = None;
                node.cleaned = false;
                node.paused_until = None;
                // What the old attempt's agent last said is not this one's.
                node.activity = None;
                node.requeued = None;
                node.resume = resume;
                if session.is_some() {
                    node.session_id = session;
                }
            }
            "node.paused" => node.paused_until = until,
            // The review it was started for is given.
            "node.started" => {
                node.started_at = Some(ev.ts.clone());
                node.review_due = None;
            }
            // Why it was blocked no longer holds.
            "node.unblocked" => node.reason = None,
            "merge.succeeded" => {
                node.merge_commit = commit;
                node.conflict_files.clear();
            }
            "merge.conflict" => node.conflict_files = files,
            "cleanup.done" => node.cleaned = true,
            _ => {}
        }
        match kept {
            Some(KeptChange::New(k)) => node.kept.push(k),
            Some(KeptChange::Status(i, status, to)) => {
                node.kept[i].status = status;
                node.kept[i].restored_to = to;
            }
            None => {}
        }
        if node.state.is_terminal() && node.finished_at.is_none() {
            node.finished_at = Some(ev.ts.clone());
        }
        Ok(())
    }

    pub(super) fn fold_run_merge(&mut self, ev: &Event) -> Result<(), AppError> {
        let t = ev.kind.as_str();
        let cur = self.merge.as_deref();
        let ok = match t {
            "merge.started" => matches!(cur, None | Some("conflict" | "merge_blocked")),
            _ => cur == Some("merging"),
        };
        if !ok {
            return Err(transition(format!(
                "the run's merge is {}; {t} does not follow",
                cur.unwrap_or("not started")
            )));
        }
        if t == MergeSucceeded::TYPE {
            self.merge_commit = ev.payload::<MergeSucceeded>()?.commit;
        }
        self.merge = Some(
            match t {
                "merge.started" => "merging",
                "merge.succeeded" => "merged",
                "merge.conflict" => "conflict",
                _ => "merge_blocked",
            }
            .to_string(),
        );
        Ok(())
    }
}
