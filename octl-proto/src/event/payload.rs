//! The `data` of every event type, declared once: a struct per type, bound to its name.
//! The daemon builds these to write an event ([`Payload::to_data`]) and the reducer reads them
//! back ([`Event::payload`](super::Event::payload)); [`KNOWN_TYPES`](super::KNOWN_TYPES) is this
//! list. Custom `x.<name>` events have no payload type: their data is the client's.
//!
//! Each struct writes exactly the bytes the `json!` it replaced wrote (the data is a sorted
//! `Map`, so only which keys appear and their values matter): `Option` fields the daemon
//! leaves out are `skip_serializing_if`, those it writes as `null` are not, and
//! [`Nullable`] marks the few that are sometimes absent and sometimes `null`
//! (`tests/corpus.rs` replays recorded logs to check it). Events a client may append keep
//! the rest of the client's object in `rest`; reading never refuses a key it does not name.
//!
//! Adding an event type: a declaration here, its fold in `reducer/`, and the Events section of
//! docs/PROTOCOL.md (docs/ARCHITECTURE.md, "Adding an event type").

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::field::{Bad, Field, Nullable};
use super::settings::RunSettings;
use crate::state::RunKind;

/// The kept set of ignored files a cleanup moved aside: `cleanup.done`'s `kept`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct KeptRecord {
    pub dir: String,
    pub files: u64,
    pub bytes: u64,
}

impl Field for KeptRecord {
    fn decode(v: Option<&Value>) -> Result<Self, Bad> {
        const FORM: &str = "an object {dir: string, files: integer, bytes: integer}";
        let o = v.and_then(Value::as_object).ok_or(Bad::Invalid(FORM))?;
        let get = |k: &str| o.get(k);
        Ok(KeptRecord {
            dir: String::decode(get("dir")).map_err(|_| Bad::Invalid(FORM))?,
            files: u64::decode(get("files")).map_err(|_| Bad::Invalid(FORM))?,
            bytes: u64::decode(get("bytes")).map_err(|_| Bad::Invalid(FORM))?,
        })
    }
}

/// What an agent reports with `node.progress`: it is done or failed, but its process goes on
/// (the daemon settles the node when it exits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Report {
    Done,
    Failed,
}

impl Report {
    pub fn as_str(self) -> &'static str {
        match self {
            Report::Done => "done",
            Report::Failed => "failed",
        }
    }
}

impl Field for Report {
    fn decode(v: Option<&Value>) -> Result<Self, Bad> {
        const FORM: &str = "\"done\" or \"failed\"";
        match v.and_then(Value::as_str) {
            Some("done") => Ok(Report::Done),
            Some("failed") => Ok(Report::Failed),
            _ => Err(Bad::Invalid(FORM)),
        }
    }
}

crate::declare_payloads! {
    /// `run.created`, a run's first event: its kind, title, repository and base, and its
    /// settings (every other key).
    RunCreated = "run.created" {
        kind: RunKind,
        #[serde(skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        repo: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        base: Option<String>,
        ..settings: RunSettings
    }

    /// `run.completed`; an orchestrate run's names the merge of its integration branch. A
    /// generic run's client may append it with data of its own.
    RunCompleted = "run.completed" {
        #[serde(skip_serializing_if = "Option::is_none")]
        merge_commit: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        integration_deleted: Option<bool>,
        ..rest: Map<String, Value>
    }

    /// `run.failed` (by the daemon, or a generic run's client).
    RunFailed = "run.failed" {
        ..rest: Map<String, Value>
    }

    /// `run.cancelled`: `discard` when the nodes' work was thrown away.
    RunCancelled = "run.cancelled" {
        #[serde(skip_serializing_if = "Option::is_none")]
        discard: Option<bool>,
    }

    /// `run.budget_spent`, once per run: its agents have cost `spent_usd` of its
    /// `max_budget_usd` (`budget_usd`), so `next` and every node after it do not start.
    RunBudgetSpent = "run.budget_spent" {
        spent_usd: f64,
        budget_usd: f64,
        next: String,
    }

    /// `run.budget_changed`: a person changed the run's budget (`run budget`) — by `add_usd`
    /// more, or to `budget_usd` (exactly one of the two); the new budget is above what the
    /// run has spent, so a spent budget is no longer spent and its pending nodes start again.
    RunBudgetChanged = "run.budget_changed" {
        #[serde(skip_serializing_if = "Option::is_none")]
        add_usd: Option<f64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        budget_usd: Option<f64>,
    }

    /// `node.added`: a node, its agent, task, gate and dependencies. The daemon always writes
    /// `gate` (`null` without one); a generic run's client may add nodes with data of its own.
    NodeAdded = "node.added" {
        #[serde(skip_serializing_if = "Option::is_none")]
        agent: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        task: Option<String>,
        gate: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        deps: Option<Vec<String>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        branch: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        worktree: Option<String>,
        /// The runner the node starts on (`[runners.NAME]`); absent in logs from before runners.
        #[serde(skip_serializing_if = "Option::is_none")]
        runner: Option<String>,
        /// The run's permission rules for the node's agent (`--allow`, `--ask`, `--deny`).
        #[serde(skip_serializing_if = "Option::is_none")]
        permissions: Option<crate::rules::PermissionRules>,
        /// The node's own sandbox (a plan node's `sandbox`), over the run's `--sandbox`.
        #[serde(skip_serializing_if = "Option::is_none")]
        sandbox: Option<crate::sandbox::SandboxKind>,
        ..rest: Map<String, Value>
    }

    /// `node.ready`.
    NodeReady = "node.ready" {}

    /// `node.starting`: the intent to start an agent on this branch in this worktree, written
    /// before either exists.
    NodeStarting = "node.starting" {
        #[serde(skip_serializing_if = "Option::is_none")]
        branch: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        worktree: Option<String>,
        /// A Claude Code agent's conversation, chosen by the daemon (`--session-id`).
        #[serde(skip_serializing_if = "Option::is_none")]
        session_id: Option<String>,
        /// Only ever `true`: this attempt continues `session_id` in the old worktree.
        #[serde(skip_serializing_if = "Option::is_none")]
        resume: Option<bool>,
        /// The port (`OCTL_PORT`) the node holds while it is live (`[worktree] ports`).
        #[serde(skip_serializing_if = "Option::is_none")]
        port: Option<u64>,
        /// Where a remote runner will start the agent, chosen before the start is made: the
        /// SSH host, or the Slurm job's name. A start a crash cut short adopts the agent it
        /// finds there instead of starting another.
        #[serde(skip_serializing_if = "Option::is_none")]
        place: Option<String>,
    }

    /// `node.started`: the agent runs, in this window (`pane`, its runner handle) as process
    /// `pid`; what its exit means, and whether its reports wait for it.
    NodeStarted = "node.started" {
        #[serde(skip_serializing_if = "Option::is_none")]
        pane: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pid: Option<u32>,
        #[serde(skip_serializing_if = "Option::is_none")]
        on_exit: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        report_on_exit: Option<bool>,
    }

    /// `node.progress`: what an agent says while working; `report` holds a done or failed
    /// until its process exits.
    NodeProgress = "node.progress" {
        #[serde(skip_serializing_if = "Option::is_none")]
        message: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        exit_status: Option<Nullable<i64>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        outcome: Option<crate::state::Outcome>,
        #[serde(skip_serializing_if = "Option::is_none")]
        report: Option<Report>,
        ..rest: Map<String, Value>
    }

    /// `node.activity`: what the agent says it is doing, from its own hooks: `state` (working,
    /// needs_permission, waiting_input, idle, unknown), the tool or message, the hook, the
    /// conversation it is in. It never moves the node.
    NodeActivity = "node.activity" {
        state: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        hook: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        session_id: Option<String>,
        ..rest: Map<String, Value>
    }

    /// `node.permission_asked`: the node's agent asks for a tool its permissions put under
    /// `ask` (Claude Code's `PermissionRequest` hook in a `-p` run) and waits for a decision:
    /// `request` (its id in the run), `tool`, the tool's `input` as the agent gave it (shown,
    /// never run by the daemon), `detail` (one line: `Bash: python3 x.py`).
    NodePermissionAsked = "node.permission_asked" {
        request: String,
        tool: String,
        input: Map<String, Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
    }

    /// `node.permission_decided`: the one answer to an open `node.permission_asked`:
    /// `behavior` `allow` or `deny`, `by` whom (`human`, or `timeout` when no one answered
    /// within `[permissions] wait`), `always` (allow the tool's pattern for the rest of the
    /// run), the `reason` the agent is told.
    NodePermissionDecided = "node.permission_decided" {
        request: String,
        behavior: String,
        by: String,
        always: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    }

    /// `node.review`: a person's review of a node's work (`review`), made on the branch's
    /// tip `head`. With `comments` and/or `text`, changes are asked for and go back to the
    /// agent `way` (`typed` into its live session, its conversation `resumed`, or a new
    /// `attempt` in the same worktree and branch); with `approve`, the work merges as it is.
    NodeReview = "node.review" {
        #[serde(skip_serializing_if = "Vec::is_empty")]
        comments: Vec<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        by: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        way: Option<crate::state::ReviewWay>,
        #[serde(skip_serializing_if = "Option::is_none")]
        head: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        approve: Option<bool>,
    }

    /// `node.waiting`: the agent waits for an answer.
    NodeWaiting = "node.waiting" {
        #[serde(skip_serializing_if = "Option::is_none")]
        message: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        exit_status: Option<Nullable<i64>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        outcome: Option<crate::state::Outcome>,
        ..rest: Map<String, Value>
    }

    /// `node.done`: by the agent, or by the daemon when its process exits (then with its
    /// exit status, the outcome Claude Code printed, and the commit of its work).
    NodeDone = "node.done" {
        #[serde(skip_serializing_if = "Option::is_none")]
        message: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        exit_status: Option<Nullable<i64>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        outcome: Option<crate::state::Outcome>,
        #[serde(skip_serializing_if = "Option::is_none")]
        commit: Option<Nullable<String>>,
        ..rest: Map<String, Value>
    }

    /// `node.failed`: by the agent, or by the daemon (a start, a gate or a commit failed).
    NodeFailed = "node.failed" {
        #[serde(skip_serializing_if = "Option::is_none")]
        message: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        exit_status: Option<Nullable<i64>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        outcome: Option<crate::state::Outcome>,
        ..rest: Map<String, Value>
    }

    /// `node.exited`: the agent's process ended without a report; `null` when killed.
    NodeExited = "node.exited" {
        exit_status: Option<i64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        outcome: Option<crate::state::Outcome>,
        /// Why, when the process died without reporting (its conversation can be resumed).
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    }

    /// `node.paused`: the agent stopped at a usage or rate limit and waits for its reset
    /// (`until`, RFC 3339) instead of failing; written with the exit status (`null`: killed).
    NodePaused = "node.paused" {
        until: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        exit_status: Option<i64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        outcome: Option<crate::state::Outcome>,
    }

    /// `node.blocked`: a dependency cannot merge.
    NodeBlocked = "node.blocked" {
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    }

    /// `node.unblocked`: why the block no longer holds.
    NodeUnblocked = "node.unblocked" {
        #[serde(skip_serializing_if = "Option::is_none")]
        cause: Option<String>,
    }

    /// `node.retried`: the node starts over.
    NodeRetried = "node.retried" {
        /// The conversation the retry continues, when it resumes (`resume`, only ever `true`).
        #[serde(skip_serializing_if = "Option::is_none")]
        session_id: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        resume: Option<bool>,
        /// Why it resumes ("its agent died", or a person's retry).
        #[serde(skip_serializing_if = "Option::is_none")]
        cause: Option<String>,
    }

    /// `node.requeued`: the runner started the node's attempt again by itself (Slurm requeued
    /// its job when its compute node was lost); `copy` is the new copy (Slurm's restart
    /// count), `from` where the lost copy ran, when known. It never moves the node: the same
    /// attempt goes on from its last checkpoint.
    NodeRequeued = "node.requeued" {
        copy: u32,
        #[serde(skip_serializing_if = "Option::is_none")]
        from: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    }

    /// `node.queued`: the node's agent waits in its runner's queue (a pending Slurm job),
    /// with the runner's reason (`Resources`, `Priority`, …). Only the daemon says it.
    NodeQueued = "node.queued" {
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    }

    /// `node.running`: the queued node's agent runs now.
    NodeRunning = "node.running" {}

    /// `node.lost`: the place of the node's agent (an SSH host, the Slurm controller) stopped
    /// answering since `since` (RFC 3339): the agent is not known to be gone, and the node
    /// waits for the place, or for `[runners.NAME] lost_after`, whichever comes first.
    NodeLost = "node.lost" {
        reason: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        since: Option<String>,
    }

    /// `node.found`: the lost node's place answers again and its agent is there.
    NodeFound = "node.found" {
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    }

    /// `node.cancelled`; in a best-of-N run, an attempt set aside once another won
    /// (`because`: the winner).
    NodeCancelled = "node.cancelled" {
        #[serde(skip_serializing_if = "Option::is_none")]
        because: Option<String>,
    }

    /// `run.judge_failed`: a best-of-N run's judge command answered no valid ranking, twice
    /// (`message`: what was wrong); the run waits for a person's `pick`.
    RunJudgeFailed = "run.judge_failed" {
        message: String,
    }

    /// `node.gated`: a done attempt of a best-of-N run passed its gate (or has none) and
    /// waits for the judge. Only the daemon says it.
    NodeGated = "node.gated" {}

    /// `node.judged`: the attempts of a best-of-N run ranked, best first; the event's node is
    /// the winner (`ranking`'s first), which merges by the usual rules; `reasons[i]` is why
    /// `ranking[i]` is there; `by`: `builtin`, `command`, `first_passing` or `human`. Once
    /// per run: a second is refused, naming the winner.
    NodeJudged = "node.judged" {
        ranking: Vec<String>,
        reasons: Vec<String>,
        by: String,
    }

    /// `node.network_refused`: the node's sandboxed agent (`[sandbox] network = "allow"`)
    /// asked the daemon's proxy for `target` (`host:port`, as it asked), which `[sandbox]
    /// allow` does not list, `count` times since the last such event of that target (the
    /// first refusal of a target is recorded at once, later ones at most once a minute;
    /// `target` `*` counts the targets past the first 50 of the node). Only the daemon says
    /// it; it never moves the node.
    NodeNetworkRefused = "node.network_refused" {
        target: String,
        count: u64,
    }

    /// `merge.started`, of a node (its branch into the target) or of a run (its integration
    /// branch into the base); `accept_failed` (only ever `true`) merges a failed node as
    /// committed.
    MergeStarted = "merge.started" {
        #[serde(skip_serializing_if = "Option::is_none")]
        target: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        branch: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        accept_failed: Option<bool>,
    }

    /// `merge.succeeded`: the target moved from `old` to `commit`; `head` is the node's
    /// branch as merged, checked to be in the target before this is written.
    MergeSucceeded = "merge.succeeded" {
        #[serde(skip_serializing_if = "Option::is_none")]
        commit: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        target: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        old: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        fast_forward: Option<bool>,
        #[serde(skip_serializing_if = "Option::is_none")]
        head: Option<String>,
    }

    /// `merge.conflict`: nothing moved; these files conflict.
    MergeConflict = "merge.conflict" {
        files: Vec<String>,
    }

    /// `merge.blocked`: nothing moved; `reason` is `target_dirty` (with the target's worktree
    /// and its changed paths) or `error`.
    MergeBlocked = "merge.blocked" {
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        target_worktree: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        paths: Option<Vec<String>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    }

    /// `cleanup.done`: the node's window, worktree and branch are gone; what was saved
    /// (snapshot ref, kept ignored files) and what was removed. `by` is `gc` when gc did it.
    CleanupDone = "cleanup.done" {
        #[serde(skip_serializing_if = "Option::is_none")]
        snapshot_ref: Option<Nullable<String>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        snapshot_commit: Option<Nullable<String>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        snapshot_dirty: Option<Nullable<bool>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        worktree_removed: Option<bool>,
        #[serde(skip_serializing_if = "Option::is_none")]
        branch_deleted: Option<bool>,
        #[serde(skip_serializing_if = "Option::is_none")]
        kept: Option<Nullable<KeptRecord>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        by: Option<String>,
    }

    /// `kept.restored`: a kept set of ignored files moved back into a worktree.
    KeptRestored = "kept.restored" {
        dir: String,
        worktree: String,
    }

    /// `kept.deleted`: gc deleted a kept set.
    KeptDeleted = "kept.deleted" {
        dir: String,
    }

    /// `discussion.opened`: a question, by an agent (its node waits) or the daemon.
    DiscussionOpened = "discussion.opened" {
        id: String,
        title: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        body: Option<String>,
        ..rest: Map<String, Value>
    }

    /// `discussion.resolved`: its answer.
    DiscussionResolved = "discussion.resolved" {
        id: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        answer: Option<String>,
        ..rest: Map<String, Value>
    }

    /// `spinoff.proposed`: an agent proposes a task for a run of its own.
    SpinoffProposed = "spinoff.proposed" {
        id: String,
        task: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        why: Option<String>,
        ..rest: Map<String, Value>
    }

    /// `spinoff.accepted`: the proposal becomes run `run` with this agent.
    SpinoffAccepted = "spinoff.accepted" {
        id: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        run: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        agent: Option<String>,
    }

    /// `spinoff.rejected`.
    SpinoffRejected = "spinoff.rejected" {
        id: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    }

    /// `spinoff.failed`: the accepted run `run` could not be made.
    SpinoffFailed = "spinoff.failed" {
        id: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        run: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    }
}

impl NodeFailed {
    /// The daemon's `node.failed` for this reason.
    pub fn because(reason: impl Into<String>) -> NodeFailed {
        NodeFailed {
            reason: Some(reason.into()),
            ..NodeFailed::default()
        }
    }
}

impl MergeBlocked {
    /// The target is checked out in `worktree` with uncommitted changes to `paths`.
    pub fn target_dirty(worktree: String, paths: Vec<String>) -> MergeBlocked {
        MergeBlocked {
            reason: Some("target_dirty".into()),
            target_worktree: Some(worktree),
            paths: Some(paths),
            error: None,
        }
    }

    /// The merge failed with this error.
    pub fn error(message: String) -> MergeBlocked {
        MergeBlocked {
            reason: Some("error".into()),
            error: Some(message),
            ..MergeBlocked::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{retyped, Payload, KNOWN_TYPES};
    use serde_json::json;

    fn data(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn a_wrong_field_is_named_with_the_form_it_accepts() {
        let err = |ty: &str, v: Value| retyped(ty, &data(v)).unwrap().unwrap_err().message;
        assert_eq!(
            err("node.started", json!({"pane": 7})),
            "invalid data.pane: a string is accepted"
        );
        assert_eq!(
            err("discussion.opened", json!({"id": "q1"})),
            "missing data.title: discussion.opened needs title, a string"
        );
        assert_eq!(
            err("run.created", json!({"kind": "batch"})),
            "invalid data.kind: one of generic, spinoff, code, fanout, orchestrate is accepted"
        );
        assert_eq!(
            err("cleanup.done", json!({"kept": {"dir": "/k"}})),
            "invalid data.kept: an object {dir: string, files: integer, bytes: integer} is accepted"
        );
        assert_eq!(
            err("merge.conflict", json!({"files": ["a", 1]})),
            "invalid data.files: an array of strings is accepted"
        );
        assert_eq!(
            err("node.progress", json!({"report": "maybe"})),
            "invalid data.report: \"done\" or \"failed\" is accepted"
        );
        assert!(retyped("x.anything", &Map::new()).is_none());
    }

    /// An outcome a client wrote with a known key of another type is kept whole in the log's
    /// fold, and a node holding it still reads (that key as absent), so `run show` works.
    #[test]
    fn an_outcome_of_odd_types_is_kept_whole_and_still_reads() {
        let odd = json!({"exit_status": 0, "outcome": {"total_cost_usd": "x", "num_turns": 2}});
        assert_eq!(
            retyped(NodeDone::TYPE, &data(odd.clone()))
                .unwrap()
                .unwrap(),
            data(odd.clone())
        );
        let done = NodeDone::from_data(&data(odd)).unwrap();
        let outcome = done.outcome.unwrap();
        assert_eq!(outcome.total_cost_usd, None);
        assert_eq!(outcome.other.len(), 2);
        let read: crate::state::Outcome =
            serde_json::from_value(json!({"total_cost_usd": "x", "num_turns": 2})).unwrap();
        assert_eq!((read.total_cost_usd, read.num_turns), (None, Some(2)));
        let well = NodeDone::from_data(&data(
            json!({"outcome": {"total_cost_usd": 1, "subtype": "success"}}),
        ))
        .unwrap()
        .outcome
        .unwrap();
        assert_eq!(well.total_cost_usd, Some(1.0));
        assert!(well.other.is_empty());
    }

    #[test]
    fn null_absent_and_a_client_s_own_keys_write_back_as_read() {
        for v in [
            json!({}),
            json!({"exit_status": null}),
            json!({"exit_status": 0, "commit": null, "outcome": {"a": 1}}),
            json!({"message": "m", "extra": [1, {"b": null}]}),
        ] {
            assert_eq!(
                retyped(NodeDone::TYPE, &data(v.clone())).unwrap().unwrap(),
                data(v)
            );
        }
        let done = NodeDone::from_data(&data(json!({"exit_status": null, "x": 1}))).unwrap();
        assert_eq!(done.exit_status, Some(Nullable(None)));
        assert_eq!(done.rest, data(json!({"x": 1})));
        // Every known type has a payload, and an empty one is what the daemon writes for
        // an event without data.
        for t in KNOWN_TYPES {
            assert!(retyped(t, &Map::new()).is_some(), "{t}");
        }
        assert!(NodeRetried::default().to_data().is_empty());
    }
}
