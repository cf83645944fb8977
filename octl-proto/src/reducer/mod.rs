//! The pure fold from events to [`RunState`]. It is the state machine: an event that is not a
//! legal transition is refused here, and the daemon writes nothing it refuses.
//!
//! Every check in [`RunState::apply`] runs before the first mutation, so a refused event leaves
//! the state exactly as it was.

use serde_json::{Map, Value};

use crate::error::{AppError, ErrorKind};
use crate::event::{is_custom_type, Actor, Event};
use crate::ids::is_node_id;
use crate::state::{
    Discussion, Kept, KeptStatus, Node, NodeState, RunKind, RunState, RunStatus, Spinoff,
    SpinoffStatus,
};

use NodeState::*;

/// May a client (an agent, a human, another tool) append this type to a run of this kind?
/// Everything else is the daemon's to say.
pub fn client_may_append(kind: RunKind, t: &str) -> bool {
    if is_custom_type(t) {
        return true;
    }
    let agent_kinds = matches!(
        t,
        "node.progress"
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

fn opt_string(data: &Map<String, Value>, key: &str) -> Result<Option<String>, AppError> {
    match data.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(AppError::invalid(format!(
            "invalid data.{key}: a string is accepted"
        ))),
    }
}

fn req_string(data: &Map<String, Value>, key: &str, ty: &str) -> Result<String, AppError> {
    opt_string(data, key)?
        .ok_or_else(|| AppError::invalid(format!("missing data.{key}: {ty} needs a string {key}")))
}

fn opt_i64(data: &Map<String, Value>, key: &str) -> Result<Option<i64>, AppError> {
    match data.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_i64().map(Some).ok_or_else(|| {
            AppError::invalid(format!("invalid data.{key}: an integer is accepted"))
        }),
    }
}

fn string_list(data: &Map<String, Value>, key: &str) -> Result<Vec<String>, AppError> {
    match data.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_str().map(str::to_string).ok_or_else(|| {
                    AppError::invalid(format!(
                        "invalid data.{key}: an array of strings is accepted"
                    ))
                })
            })
            .collect(),
        Some(_) => Err(AppError::invalid(format!(
            "invalid data.{key}: an array of strings is accepted"
        ))),
    }
}

fn record_id(data: &Map<String, Value>, ty: &str) -> Result<String, AppError> {
    let id = req_string(data, "id", ty)?;
    if is_node_id(&id) {
        Ok(id)
    } else {
        Err(AppError::invalid(format!(
            "invalid data.id {id:?}: use 1-63 of a-z, 0-9 and '-', starting with a letter or digit"
        )))
    }
}

/// What an event does to a node's kept sets of ignored files.
enum KeptChange {
    New(Kept),
    /// The set at this index is now restored (to this worktree) or deleted.
    Status(usize, KeptStatus, Option<String>),
}

/// `cleanup.done` may record a new kept set (`data.kept: {dir, files, bytes}`);
/// `kept.restored` (`data.dir`, `data.worktree`) and `kept.deleted` (`data.dir`) move one
/// that is still kept, and only such a one: whoever comes second lost the race.
fn kept_change(
    t: &str,
    d: &Map<String, Value>,
    node: &Node,
    ev: &Event,
) -> Result<Option<KeptChange>, AppError> {
    match t {
        "cleanup.done" => {
            let Some(k) = d.get("kept").filter(|v| !v.is_null()) else {
                return Ok(None);
            };
            let bad = || {
                AppError::invalid(
                    "invalid data.kept: an object {dir: string, files: integer, bytes: integer} is accepted",
                )
            };
            let o = k.as_object().ok_or_else(bad)?;
            let dir = o.get("dir").and_then(Value::as_str).ok_or_else(bad)?;
            let files = o.get("files").and_then(Value::as_u64).ok_or_else(bad)?;
            let bytes = o.get("bytes").and_then(Value::as_u64).ok_or_else(bad)?;
            if node.kept.iter().any(|k| k.dir == dir) {
                return Err(transition(format!(
                    "node {:?} already recorded kept files in {dir}",
                    node.id
                )));
            }
            Ok(Some(KeptChange::New(Kept {
                dir: dir.to_string(),
                files,
                bytes,
                snapshot_commit: opt_string(d, "snapshot_commit")?,
                kept_at: ev.ts.clone(),
                status: KeptStatus::Kept,
                restored_to: None,
            })))
        }
        "kept.restored" | "kept.deleted" => {
            let dir = req_string(d, "dir", t)?;
            let to = if t == "kept.restored" {
                Some(req_string(d, "worktree", t)?)
            } else {
                None
            };
            let i = node.kept.iter().position(|k| k.dir == dir).ok_or_else(|| {
                AppError::not_found(format!("node {:?} has no kept files in {dir}", node.id))
            })?;
            let k = &node.kept[i];
            if k.status != KeptStatus::Kept {
                let whither = k
                    .restored_to
                    .as_deref()
                    .map(|w| format!(" to {w}"))
                    .unwrap_or_default();
                return Err(transition(format!(
                    "the kept files of node {:?} in {dir} are {}{whither}; {t} is accepted only while they are kept",
                    node.id,
                    k.status.as_str()
                )));
            }
            let status = if to.is_some() {
                KeptStatus::Restored
            } else {
                KeptStatus::Deleted
            };
            Ok(Some(KeptChange::Status(i, status, to)))
        }
        _ => Ok(None),
    }
}

/// A `merge.started` that merges a failed or exited node as committed (`data.accept_failed`).
fn accepts_failed(ev: &Event) -> bool {
    ev.actor == Actor::Daemon && ev.data.get("accept_failed") == Some(&Value::Bool(true))
}

fn names(states: &[NodeState]) -> String {
    states
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join(", ")
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
        let kind_str = req_string(&ev.data, "kind", "run.created")?;
        let kind = RunKind::parse(&kind_str).ok_or_else(|| {
            AppError::invalid(format!(
                "invalid data.kind {kind_str:?}: use generic, spinoff, code, fanout or orchestrate"
            ))
        })?;
        let mut settings = ev.data.clone();
        for k in ["kind", "title", "repo", "base"] {
            settings.remove(k);
        }
        Ok(RunState {
            id: ev.run.clone(),
            kind,
            title: opt_string(&ev.data, "title")?,
            repo: opt_string(&ev.data, "repo")?,
            base: opt_string(&ev.data, "base")?,
            settings,
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
            && ev.actor == Actor::Daemon
            && (t == "node.retried" || (t == "merge.started" && accepts_failed(ev)));
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
                self.ended = Some(match t {
                    "run.completed" => RunStatus::Completed,
                    "run.failed" => RunStatus::Failed,
                    _ => RunStatus::Cancelled,
                });
                Ok(())
            }
            "node.added" => self.fold_node_added(ev),
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

    fn fold_node_added(&mut self, ev: &Event) -> Result<(), AppError> {
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
        let deps = string_list(&ev.data, "deps")?;
        if let Some(bad) = deps.iter().find(|d| !is_node_id(d)) {
            return Err(AppError::invalid(format!(
                "invalid data.deps entry {bad:?}: use node ids (1-63 of a-z, 0-9 and '-')"
            )));
        }
        let node = Node {
            id: id.clone(),
            state: Pending,
            branch: opt_string(&ev.data, "branch")?,
            worktree: opt_string(&ev.data, "worktree")?,
            agent: opt_string(&ev.data, "agent")?,
            deps,
            task: opt_string(&ev.data, "task")?,
            gate: opt_string(&ev.data, "gate")?,
            message: None,
            reason: None,
            exit_status: None,
            merge_commit: None,
            conflict_files: Vec::new(),
            snapshot_ref: None,
            snapshot_refs: Vec::new(),
            outcome: None,
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
        let live = |extra: &[NodeState]| {
            let mut v = vec![Starting, Running, Waiting];
            if lax {
                v.extend([Pending, Ready]);
            }
            v.extend_from_slice(extra);
            v
        };
        let rule = match t {
            "node.ready" => (vec![Pending, Blocked], Some(Ready)),
            "node.starting" => (vec![Pending, Ready], Some(Starting)),
            "node.started" => (vec![Starting], Some(Running)),
            "node.progress" => (live(&[]), Some(Running)),
            "node.waiting" => (live(&[]), Some(Waiting)),
            "node.done" => (live(&[]), Some(Done)),
            // A gate that fails after done fails the node; only the daemon runs gates.
            "node.failed" if actor == Actor::Daemon => (live(&[Done]), Some(Failed)),
            "node.failed" => (live(&[]), Some(Failed)),
            "node.exited" => (vec![Starting, Running, Waiting], Some(Exited)),
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

    fn fold_node_transition(&mut self, ev: &Event) -> Result<(), AppError> {
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
        let d = &ev.data;
        let message = opt_string(d, "message")?;
        let reason = opt_string(d, "reason")?;
        let exit_status = opt_i64(d, "exit_status")?;
        let branch = opt_string(d, "branch")?;
        let worktree = opt_string(d, "worktree")?;
        let commit = opt_string(d, "commit")?;
        let snapshot = opt_string(d, "snapshot_ref")?;
        let files = string_list(d, "files")?;
        let pane = opt_string(d, "pane")?;
        let on_exit = opt_string(d, "on_exit")?;
        let report = opt_string(d, "report")?;
        if let Some(r) = &report {
            if t != "node.progress" || !matches!(r.as_str(), "done" | "failed") {
                return Err(AppError::invalid(format!(
                    "invalid data.report {r:?}: only node.progress carries a report, done or failed"
                )));
            }
        }
        let kept = kept_change(t, d, node, ev)?;
        let report_on_exit = match d.get("report_on_exit") {
            None | Some(Value::Null) => None,
            Some(Value::Bool(b)) => Some(*b),
            Some(_) => {
                return Err(AppError::invalid(
                    "invalid data.report_on_exit: a boolean is accepted",
                ))
            }
        };
        let outcome = match d.get("outcome") {
            None | Some(Value::Null) => None,
            Some(Value::Object(o)) => Some(o.clone()),
            Some(_) => {
                return Err(AppError::invalid(
                    "invalid data.outcome: an object is accepted",
                ))
            }
        };

        let node = self.nodes.get_mut(id).expect("checked above");
        if let Some(to) = to {
            node.state = to;
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
        if report.is_some() {
            node.report = report;
        }
        match t {
            "node.retried" => {
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
                node.pane = None;
                node.cleaned = false;
            }
            "node.started" => node.started_at = Some(ev.ts.clone()),
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

    fn fold_run_merge(&mut self, ev: &Event) -> Result<(), AppError> {
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
        if t == "merge.succeeded" {
            self.merge_commit = opt_string(&ev.data, "commit")?;
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

    fn fold_discussion(&mut self, ev: &Event) -> Result<(), AppError> {
        let t = ev.kind.as_str();
        let id = record_id(&ev.data, t)?;
        self.require_node_exists(ev)?;
        if t == "discussion.opened" {
            if self.discussions.contains_key(&id) {
                return Err(transition(format!("discussion {id:?} already exists")));
            }
            let title = req_string(&ev.data, "title", t)?;
            let body = opt_string(&ev.data, "body")?;
            if let Some(n) = ev.node.as_ref().and_then(|n| self.nodes.get_mut(n)) {
                if matches!(n.state, Starting | Running) {
                    n.state = Waiting;
                    n.updated_at = ev.ts.clone();
                }
            }
            self.discussions.insert(
                id.clone(),
                Discussion {
                    id,
                    node: ev.node.clone(),
                    title,
                    body,
                    open: true,
                    answer: None,
                    opened_at: ev.ts.clone(),
                    resolved_at: None,
                },
            );
            return Ok(());
        }
        let answer = opt_string(&ev.data, "answer")?;
        let disc = self
            .discussions
            .get(&id)
            .ok_or_else(|| AppError::not_found(format!("discussion {id:?} does not exist")))?;
        if !disc.open {
            return Err(transition(format!(
                "discussion {id:?} is already answered: {:?}",
                disc.answer.as_deref().unwrap_or_default()
            )));
        }
        let asker = disc.node.clone();
        let disc = self.discussions.get_mut(&id).expect("checked above");
        disc.open = false;
        disc.answer = answer;
        disc.resolved_at = Some(ev.ts.clone());
        if let Some(asker) = asker {
            let still_open = self
                .discussions
                .values()
                .any(|d| d.open && d.node.as_deref() == Some(asker.as_str()));
            if let Some(n) = self.nodes.get_mut(&asker) {
                if n.state == Waiting && !still_open {
                    n.state = Running;
                    n.updated_at = ev.ts.clone();
                }
            }
        }
        Ok(())
    }

    fn fold_spinoff(&mut self, ev: &Event) -> Result<(), AppError> {
        let t = ev.kind.as_str();
        let id = record_id(&ev.data, t)?;
        self.require_node_exists(ev)?;
        if t == "spinoff.proposed" {
            if self.spinoffs.contains_key(&id) {
                return Err(transition(format!(
                    "spin-off proposal {id:?} already exists"
                )));
            }
            let task = req_string(&ev.data, "task", t)?;
            let why = opt_string(&ev.data, "why")?;
            self.spinoffs.insert(
                id.clone(),
                Spinoff {
                    id,
                    node: ev.node.clone(),
                    task,
                    why,
                    status: SpinoffStatus::Proposed,
                    child_run: None,
                    agent: None,
                    reason: None,
                    proposed_at: ev.ts.clone(),
                    decided_at: None,
                },
            );
            return Ok(());
        }
        let child = opt_string(&ev.data, "run")?;
        let reason = opt_string(&ev.data, "reason")?;
        let agent = opt_string(&ev.data, "agent")?;
        let sp = self.spinoffs.get_mut(&id).ok_or_else(|| {
            AppError::not_found(format!("spin-off proposal {id:?} does not exist"))
        })?;
        // One decision per proposal: the first to be written wins, and a decision that lost
        // is told what it lost to.
        let to = match t {
            "spinoff.failed" => {
                if sp.status != SpinoffStatus::Accepted || child.is_none() || sp.child_run != child
                {
                    return Err(transition(format!(
                        "spin-off proposal {id:?} is {}{}; spinoff.failed is accepted only for the run it was accepted as",
                        sp.status.as_str(),
                        sp.child_run.as_deref().map(|r| format!(" (run {r})")).unwrap_or_default()
                    )));
                }
                if reason.is_none() {
                    return Err(AppError::invalid(
                        "missing data.reason: spinoff.failed needs a string reason",
                    ));
                }
                SpinoffStatus::Failed
            }
            _ if !sp.status.is_open() => {
                return Err(transition(format!(
                    "spin-off proposal {id:?} is already {}{}",
                    sp.status.as_str(),
                    match (&sp.child_run, sp.status) {
                        (Some(r), SpinoffStatus::Accepted) => format!(" (run {r})"),
                        _ => String::new(),
                    }
                )));
            }
            "spinoff.accepted" => SpinoffStatus::Accepted,
            _ => SpinoffStatus::Rejected,
        };
        sp.status = to;
        sp.reason = reason;
        sp.decided_at = Some(ev.ts.clone());
        match to {
            SpinoffStatus::Accepted => {
                sp.child_run = child;
                sp.agent = agent;
            }
            // The run never came to be: nothing is named after it.
            SpinoffStatus::Failed => sp.child_run = None,
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
