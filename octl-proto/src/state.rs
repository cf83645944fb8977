//! The folded state of one run: its kind, status, nodes, discussions and spin-off proposals.
//! Built only by [`crate::reducer`]; read by projections and by the daemon's scheduler.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// What a run is for.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum RunKind {
    /// Records events only; its nodes and status belong to the client that made it.
    #[default]
    Generic,
    /// One autonomous agent, merged and cleaned up when done.
    Spinoff,
    /// One interactive agent, merged when a human says so.
    Code,
    /// N units from one manifest under a parallelism cap.
    Fanout,
    /// A DAG of nodes through an integration branch.
    Orchestrate,
}

impl RunKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RunKind::Generic => "generic",
            RunKind::Spinoff => "spinoff",
            RunKind::Code => "code",
            RunKind::Fanout => "fanout",
            RunKind::Orchestrate => "orchestrate",
        }
    }

    pub fn parse(s: &str) -> Option<RunKind> {
        serde_json::from_value(Value::String(s.to_string())).ok()
    }
}

/// The life of a node (docs/ARCHITECTURE.md, "Node life").
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum NodeState {
    Pending,
    Ready,
    Starting,
    Running,
    Waiting,
    Done,
    Merging,
    Merged,
    Failed,
    Exited,
    Blocked,
    Cancelled,
    Conflict,
    MergeBlocked,
    /// Stopped by a usage or rate limit until its reset (`Node::paused_until`); the daemon
    /// starts it again then, continuing its conversation.
    Paused,
    /// Started, but waiting in its runner's queue (a pending Slurm job, `Node::queued`).
    Queued,
    /// Its agent's place (an SSH host, the Slurm controller) stopped answering (`Node::lost`):
    /// the agent is not known to be gone; it is re-adopted when the place answers again.
    Lost,
}

impl NodeState {
    /// Every state, in the order of a node's life (the order counts are shown in).
    pub const ALL: [NodeState; 17] = [
        NodeState::Pending,
        NodeState::Ready,
        NodeState::Starting,
        NodeState::Queued,
        NodeState::Running,
        NodeState::Waiting,
        NodeState::Lost,
        NodeState::Done,
        NodeState::Merging,
        NodeState::Merged,
        NodeState::Failed,
        NodeState::Exited,
        NodeState::Blocked,
        NodeState::Cancelled,
        NodeState::Conflict,
        NodeState::MergeBlocked,
        NodeState::Paused,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            NodeState::Pending => "pending",
            NodeState::Ready => "ready",
            NodeState::Starting => "starting",
            NodeState::Running => "running",
            NodeState::Waiting => "waiting",
            NodeState::Done => "done",
            NodeState::Merging => "merging",
            NodeState::Merged => "merged",
            NodeState::Failed => "failed",
            NodeState::Exited => "exited",
            NodeState::Blocked => "blocked",
            NodeState::Cancelled => "cancelled",
            NodeState::Conflict => "conflict",
            NodeState::MergeBlocked => "merge_blocked",
            NodeState::Paused => "paused",
            NodeState::Queued => "queued",
            NodeState::Lost => "lost",
        }
    }

    /// Merged, failed, exited and cancelled: nothing moves such a node again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            NodeState::Merged | NodeState::Failed | NodeState::Exited | NodeState::Cancelled
        )
    }

    /// An agent process may be alive in this state.
    pub fn is_alive(self) -> bool {
        matches!(
            self,
            NodeState::Starting
                | NodeState::Queued
                | NodeState::Running
                | NodeState::Waiting
                | NodeState::Lost
        )
    }

    /// The states an agent process may be alive in, for messages ("starting, queued, …").
    pub fn alive_names() -> String {
        let names: Vec<&str> = NodeState::ALL
            .into_iter()
            .filter(|s| s.is_alive())
            .map(NodeState::as_str)
            .collect();
        names.join(", ")
    }
}

/// Run status, derived from the nodes unless a run-level event ended the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Active,
    Waiting,
    Completed,
    Failed,
    Cancelled,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Active => "active",
            RunStatus::Waiting => "waiting",
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
        }
    }

    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            RunStatus::Completed | RunStatus::Failed | RunStatus::Cancelled
        )
    }
}

/// What an agent's process ending means when the agent did not report: a node's `on_exit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ExitPolicy {
    /// A shell task: judged by its exit status.
    Shell,
    /// The end of the process means the work is done.
    Done,
    /// The end of the process means the agent exited unfinished.
    Exited,
    /// Judged by the final result in the agent's output stream (and its exit status): a
    /// success is committed, then done; anything else fails with the reason.
    Stream,
}

impl ExitPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            ExitPolicy::Shell => "shell",
            ExitPolicy::Done => "done",
            ExitPolicy::Exited => "exited",
            ExitPolicy::Stream => "stream",
        }
    }

    pub fn parse(s: &str) -> Option<ExitPolicy> {
        [
            ExitPolicy::Shell,
            ExitPolicy::Done,
            ExitPolicy::Exited,
            ExitPolicy::Stream,
        ]
        .into_iter()
        .find(|p| p.as_str() == s)
    }
}

/// How an agent's session ended, as its output said (Claude Code's final `result` line, or
/// another CLI's stream folded by the daemon): written by the daemon into the node's done,
/// failed, exited or paused event, folded into [`Node::outcome`]. Fields are in name order,
/// which is the order the map they replace wrote them in; keys a client of a generic run
/// adds are kept in `other`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Outcome {
    /// The agent CLI whose stream was read (streams other than Claude Code's).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient"
    )]
    pub agent: Option<String>,
    /// Claude Code's `api_error`, as it wrote it (`usage_limit_reached`, …).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient"
    )]
    pub api_error: Option<Value>,
    /// Tools the agent asked for and was not allowed, as `Tool(input)`: the way to grant one
    /// is to add it to `allowed_tools`.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "lenient_list"
    )]
    pub denied: Vec<String>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient"
    )]
    pub duration_ms: Option<u64>,
    /// The stream's last error (at most 2,000 characters).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient"
    )]
    pub error: Option<String>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient"
    )]
    pub input_tokens: Option<u64>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient"
    )]
    pub is_error: Option<bool>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient"
    )]
    pub num_turns: Option<u64>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient"
    )]
    pub output_tokens: Option<u64>,
    /// The agent's final text (at most 2,000 characters).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient"
    )]
    pub result: Option<String>,
    /// The conversation, so a later attempt can continue it.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient"
    )]
    pub session_id: Option<String>,
    /// `success`, `error_max_turns`, … (Claude Code).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient"
    )]
    pub subtype: Option<String>,
    /// What the session cost (USD); summed into [`Node::cost_usd`].
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient"
    )]
    pub total_cost_usd: Option<f64>,
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// A known outcome key of another type than its own (a generic run's client may write
/// anything) reads as absent, so the node still reads; the reducer keeps such an outcome whole.
fn lenient<'de, D: serde::Deserializer<'de>, T: serde::de::DeserializeOwned>(
    d: D,
) -> Result<Option<T>, D::Error> {
    Ok(serde_json::from_value(Value::deserialize(d)?).ok())
}

fn lenient_list<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    Ok(lenient(d)?.unwrap_or_default())
}

/// One node as projected to `nodes/<NODE>.json` and returned by `run show`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Node {
    pub id: String,
    pub state: NodeState,
    pub branch: Option<String>,
    pub worktree: Option<String>,
    pub agent: Option<String>,
    pub deps: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_status: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge_commit: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conflict_files: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_ref: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub snapshot_refs: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    /// `OCTL_PORT` of the node's agent, from the configured range; held while the node is
    /// starting, running or waiting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// The tmux pane of the agent (`%N`), once started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pane: Option<String>,
    /// What the agent's exit means when it did not report: `done`, `exited` or `shell`
    /// ([`ExitPolicy`]). Kept as the log recorded it, so any log replays byte for byte; read
    /// it through [`Node::exit_policy`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_exit: Option<String>,
    /// The agent's report is held until its process ends, so the session's outcome (cost,
    /// turns) can go into the node's done or failed event.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub report_on_exit: bool,
    /// A held report: `done` or `failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cleaned: bool,
    /// What each cleanup kept of the files git ignores (`.env`, build output), oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kept: Vec<Kept>,
    /// What the agent last said it is doing, from its hooks (`node.activity`); absent when it
    /// never said (shown as `unknown`, never guessed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activity: Option<Activity>,
    /// The agent's conversation (Claude Code's session id), chosen by the daemon when it
    /// starts the agent, so a later attempt can continue it (`--resume`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Until when a `paused` node waits for its usage limit to reset (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_until: Option<String>,
    /// What the agent's sessions cost so far, every attempt summed (USD, from each
    /// outcome's `total_cost_usd`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// The runner its agent runs on (`[runners.NAME]` of config.toml), from `node.added`;
    /// absent means `local`, the daemon's own tmux server (and every log older than runners).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner: Option<String>,
    /// The run's own permission rules for this node's Claude Code agent (`--allow`, `--ask`,
    /// `--deny`, a plan node's), from `node.added`; config.toml's are added at each start.
    #[serde(
        default,
        skip_serializing_if = "crate::rules::PermissionRules::is_empty"
    )]
    pub permissions: crate::rules::PermissionRules,
    /// Its own sandbox (a plan node's `sandbox`), over the run's `--sandbox`, its profile's
    /// and config.toml's; from `node.added`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<crate::sandbox::SandboxKind>,
    /// This attempt continues the conversation `session_id` in the old attempt's worktree
    /// (`node.retried` / `node.starting` with `"resume": true`) instead of starting over.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub resume: bool,
    /// The runner's last requeue of this attempt (`node.requeued`); cleared when a new
    /// attempt starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requeued: Option<Requeued>,
    /// Why and since when a `queued` node waits in its runner's queue (`node.queued`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued: Option<Queued>,
    /// Why and since when a `lost` node's place does not answer (`node.lost`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost: Option<Lost>,
    /// Where a remote runner starts this attempt's agent (`node.starting`'s `place`: the SSH
    /// host, the Slurm job's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub place: Option<String>,
    /// Each review of the node's work, oldest first (`node.review`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reviews: Vec<Review>,
    /// The round of the review its agent is given when it next starts (resumed, or a new
    /// attempt in the same worktree); cleared once it has started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review_due: Option<u32>,
    /// A person approved the work as it is (`review --approve`): a run that holds its done
    /// nodes for review merges it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub approved: bool,
    /// A best-of-N attempt that passed its gate (`node.gated`) and waits for the judge.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub gated: bool,
}

/// How a review that asks for changes reaches the node's agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReviewWay {
    /// Typed into its live interactive session, as its next message.
    Typed,
    /// Its conversation continued (`claude --resume`) in the same worktree and branch.
    Resumed,
    /// A new agent process in the same worktree and branch, the review in its prompt (agents
    /// that cannot continue a conversation).
    Attempt,
}

impl ReviewWay {
    pub const ALL: [ReviewWay; 3] = [ReviewWay::Typed, ReviewWay::Resumed, ReviewWay::Attempt];

    pub fn as_str(self) -> &'static str {
        match self {
            ReviewWay::Typed => "typed",
            ReviewWay::Resumed => "resumed",
            ReviewWay::Attempt => "attempt",
        }
    }
}

/// One review of a node's work (`node.review`): changes asked for, or an approval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Review {
    /// 1 for the node's first review.
    pub round: u32,
    /// One remark each, as given (`src/x.rs:42: use the existing helper`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub comments: Vec<String>,
    /// A longer review (`--file`), as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    pub by: String,
    pub at: String,
    /// How the changes asked for reach the agent; absent for an approval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub way: Option<ReviewWay>,
    /// The branch's tip the review was made on: what the agent did since is the diff from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub approve: bool,
}

/// A node waiting in its runner's queue (`node.queued`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Queued {
    /// The runner's reason (Slurm's: `Resources`, `Priority`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub since: String,
}

/// A node whose agent's place stopped answering (`node.lost`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Lost {
    pub reason: String,
    /// Since when the place does not answer (RFC 3339): `lost_after` counts from here.
    pub since: String,
    /// The state it was lost from, which `node.found` returns it to.
    pub was: NodeState,
}

/// A requeue of a node's attempt by its runner (`node.requeued`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Requeued {
    /// The copy of the attempt that runs since (Slurm's restart count).
    pub copy: u32,
    /// Where the lost copy ran, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub at: String,
}

/// What an agent is doing, as its own hooks report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ActivityState {
    Working,
    NeedsPermission,
    WaitingInput,
    Idle,
    Unknown,
}

impl ActivityState {
    pub const ALL: [ActivityState; 5] = [
        ActivityState::Working,
        ActivityState::NeedsPermission,
        ActivityState::WaitingInput,
        ActivityState::Idle,
        ActivityState::Unknown,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ActivityState::Working => "working",
            ActivityState::NeedsPermission => "needs_permission",
            ActivityState::WaitingInput => "waiting_input",
            ActivityState::Idle => "idle",
            ActivityState::Unknown => "unknown",
        }
    }

    pub fn parse(s: &str) -> Option<ActivityState> {
        ActivityState::ALL.into_iter().find(|a| a.as_str() == s)
    }
}

/// A node's activity: its state, since when (RFC 3339), and what it said (the tool, the
/// prompt's message).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Activity {
    pub state: ActivityState,
    pub since: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// The files git ignored in a node's worktree, moved out of it by one cleanup to
/// `$OCTL_HOME/kept/<RUN>/<NODE>/<N>/` (relative paths kept) instead of being deleted with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Kept {
    /// The directory that holds them (absolute).
    pub dir: String,
    pub files: u64,
    pub bytes: u64,
    /// The snapshot this cleanup took, which holds the rest of the worktree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_commit: Option<String>,
    pub kept_at: String,
    pub status: KeptStatus,
    /// Where `recover --worktree` moved them back to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored_to: Option<String>,
}

/// Where a kept set is: still kept, moved back into a worktree, or deleted by
/// `run gc --older-than`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum KeptStatus {
    Kept,
    Restored,
    Deleted,
}

impl KeptStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            KeptStatus::Kept => "kept",
            KeptStatus::Restored => "restored",
            KeptStatus::Deleted => "deleted",
        }
    }
}

impl Node {
    /// The node's exit policy; `None` if it has none or the log recorded one this version
    /// does not know.
    pub fn exit_policy(&self) -> Option<ExitPolicy> {
        self.on_exit.as_deref().and_then(ExitPolicy::parse)
    }

    /// What the node's agent is doing as the log knows it: what its hooks last said, else
    /// `unknown` since the node started (or was added) — never guessed from its state.
    pub fn activity_or_unknown(&self) -> Activity {
        self.activity.clone().unwrap_or_else(|| Activity {
            state: ActivityState::Unknown,
            since: self
                .started_at
                .clone()
                .unwrap_or_else(|| self.created_at.clone()),
            detail: None,
        })
    }

    /// Retried, but its old attempt (window, worktree, branch) not cleaned up yet: the engine
    /// does that, holding the node, before the node may start again. Only `node.starting`
    /// names a branch, so a node that never started has none. A resumed node keeps its
    /// attempt: the conversation continues in the same worktree.
    pub fn stale_attempt(&self) -> bool {
        self.state == NodeState::Pending && self.branch.is_some() && !self.cleaned && !self.resume
    }
}

/// A node's agent asked for a tool (`node.permission_asked`), and the answer once there is
/// one (`node.permission_decided`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Permission {
    pub request: String,
    pub node: String,
    pub tool: String,
    /// The tool's input as the agent gave it: shown, never run by the daemon.
    pub input: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    pub asked_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<PermissionDecision>,
}

/// The one answer to a permission request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PermissionDecision {
    /// `allow` or `deny`.
    pub behavior: String,
    /// Who decided: `human`, `timeout` (no one answered within `[permissions] wait`).
    pub by: String,
    /// The tool's pattern is allowed for the rest of the run.
    pub always: bool,
    /// What the agent is told.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub decided_at: String,
}

/// A question an agent put to a human.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Discussion {
    pub id: String,
    pub node: Option<String>,
    pub title: String,
    pub body: Option<String>,
    pub open: bool,
    pub answer: Option<String>,
    pub opened_at: String,
    pub resolved_at: Option<String>,
}

impl Discussion {
    /// Is this the question the daemon opens when a node's merge conflicts (its id
    /// `merge-…`)? Merging the node settles it; the daemon refuses a text answer while the
    /// node can still merge.
    pub fn is_merge_conflict(&self) -> bool {
        self.id.starts_with("merge-")
    }
}

/// Where a spin-off proposal stands. `proposed → accepted | rejected`; an accepted proposal
/// whose run could not be created is `failed` (the reason says why) and may be accepted
/// again or rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SpinoffStatus {
    Proposed,
    Accepted,
    Rejected,
    Failed,
}

impl SpinoffStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            SpinoffStatus::Proposed => "proposed",
            SpinoffStatus::Accepted => "accepted",
            SpinoffStatus::Rejected => "rejected",
            SpinoffStatus::Failed => "failed",
        }
    }

    /// A human may still decide: nothing was decided, or the accepted run could not be made.
    pub fn is_open(self) -> bool {
        matches!(self, SpinoffStatus::Proposed | SpinoffStatus::Failed)
    }
}

/// A piece of separate work an agent noticed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Spinoff {
    pub id: String,
    pub node: Option<String>,
    pub task: String,
    pub why: Option<String>,
    pub status: SpinoffStatus,
    /// The run it was accepted as (its id is chosen and recorded before the run exists).
    pub child_run: Option<String>,
    /// The agent profile of that run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Why it was rejected, or why its run could not be created.
    pub reason: Option<String>,
    pub proposed_at: String,
    pub decided_at: Option<String>,
}

/// Everything the log of one run says, folded.
#[derive(Debug, Clone, PartialEq)]
pub struct RunState {
    pub id: String,
    pub kind: RunKind,
    pub title: Option<String>,
    pub repo: Option<String>,
    pub base: Option<String>,
    /// Other settings given at creation (gate, max_parallel, parent run, …), kept as given.
    pub settings: crate::event::RunSettings,
    pub created_at: String,
    pub updated_at: String,
    pub last_seq: u64,
    /// Set by `run.completed`, `run.failed` or `run.cancelled`.
    pub ended: Option<RunStatus>,
    /// State of a run-level merge (an orchestrate run's integration branch into base).
    pub merge: Option<String>,
    /// The commit base moved to by that merge.
    pub merge_commit: Option<String>,
    pub nodes: BTreeMap<String, Node>,
    /// Node ids in the order their `node.added` came (a plan's or manifest's order): the
    /// order people read them in (`run show`, `run watch`), where `u2` comes before `u10`.
    pub node_order: Vec<String>,
    pub discussions: BTreeMap<String, Discussion>,
    pub spinoffs: BTreeMap<String, Spinoff>,
    /// Idempotency key → (seq, id) of the first append that carried it.
    pub idempotency: HashMap<String, (u64, String)>,
    /// `run.budget_spent`: the run's `max_budget_usd` is spent; no new node starts.
    pub budget_spent: bool,
    /// Every permission request of the run's agents, by request id.
    pub permissions: BTreeMap<String, Permission>,
    /// Tool patterns allowed for the rest of the run (a decision with `always`), in Claude
    /// Code's rule syntax: `Bash(python3 *)`, `WebFetch`.
    pub allowed: Vec<String>,
    /// A best-of-N run's judgement (`node.judged`), once made.
    pub judged: Option<Judged>,
    /// Why its judge command gave no ranking (`run.judge_failed`): a person picks.
    pub judge_failed: Option<String>,
}

impl RunState {
    /// The run's status: its end if it ended; `waiting` when nothing can progress without a
    /// human; otherwise `active`.
    pub fn status(&self) -> RunStatus {
        if let Some(end) = self.ended {
            return end;
        }
        let progressing = self.nodes.values().any(|n| match n.state {
            // A spent budget starts no new node: a human must decide.
            NodeState::Pending | NodeState::Ready => !self.budget_spent,
            NodeState::Starting
            | NodeState::Queued
            | NodeState::Running
            // Re-adopted when its place answers, or started again after `lost_after`.
            | NodeState::Lost
            | NodeState::Merging
            // It starts again by itself after the limit's reset.
            | NodeState::Paused => true,
            // Only spinoff, fan-out and orchestrate runs have a daemon that merges done nodes.
            NodeState::Done => !matches!(self.kind, RunKind::Code | RunKind::Generic),
            _ => false,
        }) || self.merge.as_deref() == Some("merging");
        if progressing {
            return RunStatus::Active;
        }
        // An orchestrate run whose nodes all merged waits for its integration branch to be
        // merged into base (by `merge RUN`, or at once with auto_merge).
        if self.kind == RunKind::Orchestrate
            && !self.nodes.is_empty()
            && self.nodes.values().all(|n| n.state == NodeState::Merged)
            && self.merge.as_deref() != Some("merged")
        {
            // Still cleaning up its last nodes: not for a human yet.
            if self.nodes.values().any(|n| !n.cleaned) {
                return RunStatus::Active;
            }
            let auto = self.settings.auto_merges();
            if auto && self.merge.is_none() {
                return RunStatus::Active;
            }
            return RunStatus::Waiting;
        }
        // In a DAG or a fan-out a failed node can be retried, so the run waits for a human.
        let retryable = matches!(self.kind, RunKind::Orchestrate | RunKind::Fanout)
            && self
                .nodes
                .values()
                .any(|n| matches!(n.state, NodeState::Failed | NodeState::Exited));
        let human = retryable
            || self.budget_spent
            || self.discussions.values().any(|d| d.open)
            || self.nodes.values().any(|n| {
                matches!(
                    n.state,
                    NodeState::Waiting
                        | NodeState::Conflict
                        | NodeState::MergeBlocked
                        | NodeState::Blocked
                ) || (n.state == NodeState::Done && self.kind == RunKind::Code)
            })
            || matches!(self.merge.as_deref(), Some("conflict" | "merge_blocked"));
        if human {
            RunStatus::Waiting
        } else {
            RunStatus::Active
        }
    }

    /// The nodes in the order they were added.
    pub fn nodes_in_order(&self) -> impl Iterator<Item = &Node> {
        self.node_order.iter().filter_map(|id| self.nodes.get(id))
    }

    /// What the run's agents cost so far (USD), if any reported a cost.
    pub fn cost_usd(&self) -> Option<f64> {
        self.nodes
            .values()
            .filter_map(|n| n.cost_usd)
            .reduce(|a, b| a + b)
    }

    /// Node counts by state, only the states that occur.
    pub fn counts(&self) -> BTreeMap<&'static str, usize> {
        let mut counts = BTreeMap::new();
        for n in self.nodes.values() {
            *counts.entry(n.state.as_str()).or_insert(0) += 1;
        }
        counts
    }
}

/// A best-of-N run's judgement: the attempts that passed, best first (the first merges),
/// why each is where it is, and who judged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Judged {
    pub ranking: Vec<String>,
    pub reasons: Vec<String>,
    pub by: String,
    pub at: String,
}
