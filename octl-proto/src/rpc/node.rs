//! The `node.*` family: what an agent reports about its own node (`node.done`, `node.fail`,
//! `node.progress`), a human's line of input to a live interactive agent and its screen
//! (`node.send`, `node.screen`), and the command that reaches the agent from a terminal
//! (`node.attach`), and an agent's permission requests and their decisions
//! (`node.permission_ask`, `node.permission_wait`, `node.permission_decide`) — each method's params and result types beside its
//! declaration. A new method of the family is declared here; the compiler then asks for its
//! daemon `Handle` (`octld/src/rpc/node.rs`), and the client calls it as `method::Name`.

use serde::{Deserialize, Serialize};

use crate::rpc::AppendResult;

/// `node.done`: an agent's report that its node is done.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NodeReportParams {
    #[schemars(schema_with = "crate::schema::run_ref")]
    pub run: String,
    #[schemars(schema_with = "crate::schema::node_id")]
    pub node: String,
    /// A one-line summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::short_text")]
    pub message: Option<String>,
    /// Why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::short_text")]
    pub reason: Option<String>,
}

/// `node.fail`: an agent's report that it cannot finish, and why.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NodeFailParams {
    #[schemars(schema_with = "crate::schema::run_ref")]
    pub run: String,
    #[schemars(schema_with = "crate::schema::node_id")]
    pub node: String,
    /// Why it cannot finish.
    #[schemars(schema_with = "crate::schema::short_text")]
    pub reason: String,
    /// A one-line summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::short_text")]
    pub message: Option<String>,
}

/// `node.progress`: what an agent says it is doing.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NodeProgressParams {
    #[schemars(schema_with = "crate::schema::run_ref")]
    pub run: String,
    #[schemars(schema_with = "crate::schema::node_id")]
    pub node: String,
    /// What it is doing, in one line.
    #[schemars(schema_with = "crate::schema::short_text")]
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::short_text")]
    pub reason: Option<String>,
}

/// `node.show`: one node of a run.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NodeShowParams {
    #[schemars(schema_with = "crate::schema::run_ref")]
    pub run: String,
    #[schemars(schema_with = "crate::schema::node_id")]
    pub node: String,
}

/// `node.send`: a line of input to a live node's interactive agent (Enter is pressed after).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NodeSendParams {
    #[schemars(schema_with = "crate::schema::run_ref")]
    pub run: String,
    #[schemars(schema_with = "crate::schema::node_id")]
    pub node: String,
    /// One line: 1 to 4096 bytes, no newline or other control character but tab.
    #[schemars(length(min = 1, max = 4096))]
    pub text: String,
}

/// `node.send` result: what was typed where.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NodeSent {
    pub run: String,
    pub node: String,
    /// Bytes of text typed (Enter not counted).
    pub bytes: usize,
}

/// `node.screen`: the agent's terminal as it is now.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NodeScreenParams {
    #[schemars(schema_with = "crate::schema::run_ref")]
    pub run: String,
    #[schemars(schema_with = "crate::schema::node_id")]
    pub node: String,
    /// At most this many of the last lines (1 to 10000; default 200).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10000))]
    pub lines: Option<u32>,
}

/// `node.screen` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Screen {
    pub run: String,
    pub node: String,
    /// The last lines of the agent's terminal (scrollback included), trailing blank lines
    /// left out, each ending with a newline.
    pub screen: String,
}

/// `node.attach`: how a terminal reaches the node's agent.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NodeAttachParams {
    #[schemars(schema_with = "crate::schema::run_ref")]
    pub run: String,
    #[schemars(schema_with = "crate::schema::node_id")]
    pub node: String,
}

/// `node.attach` result: the program and arguments a terminal runs to show the agent and
/// take keys for it (`tmux … attach-session` for the local runner, `srun --pty …` on Slurm),
/// run by the client on the daemon's machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Attach {
    pub run: String,
    pub node: String,
    pub argv: Vec<String>,
}

/// `node.permission_ask`: the node's agent asks for a tool its permissions put under `ask`
/// (its `PermissionRequest` hook). Allowed at once by a rule an `always` decision added;
/// else recorded as `node.permission_asked`, and answered by `node.permission_wait`.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PermissionAskParams {
    #[schemars(schema_with = "crate::schema::run_ref")]
    pub run: String,
    #[schemars(schema_with = "crate::schema::node_id")]
    pub node: String,
    /// The tool, as the agent names it (`Bash`, `WebFetch`).
    #[schemars(length(min = 1, max = 200))]
    pub tool: String,
    /// The tool's input as the agent gave it (at most 64 KiB as JSON): shown, never run.
    #[serde(default)]
    pub input: serde_json::Map<String, serde_json::Value>,
    /// One line for a person: `Bash: python3 x.py`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::short_text")]
    pub detail: Option<String>,
}

/// `node.permission_wait`: wait (at most 20 s a call) for the decision on a request.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PermissionWaitParams {
    #[schemars(schema_with = "crate::schema::run_ref")]
    pub run: String,
    #[schemars(schema_with = "crate::schema::node_id")]
    pub node: String,
    /// The request's id, from `node.permission_ask`.
    #[schemars(length(min = 1, max = 63))]
    pub request: String,
}

/// `node.permission_ask` and `node.permission_wait` result: the request and its decision
/// once there is one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PermissionAnswer {
    pub run: String,
    pub node: String,
    /// The request recorded (absent when a rule allowed the tool at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
    /// The decision; absent while no one has decided (ask `node.permission_wait` again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<crate::state::PermissionDecision>,
    /// How long after it was asked an undecided request is denied (`[permissions] wait`).
    pub wait_ms: u64,
}

/// A decision on a permission request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PermissionBehavior {
    Allow,
    Deny,
}

impl PermissionBehavior {
    pub fn as_str(self) -> &'static str {
        match self {
            PermissionBehavior::Allow => "allow",
            PermissionBehavior::Deny => "deny",
        }
    }
}

/// `node.permission_decide`: a person answers a node's permission request.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PermissionDecideParams {
    #[schemars(schema_with = "crate::schema::run_ref")]
    pub run: String,
    #[schemars(schema_with = "crate::schema::node_id")]
    pub node: String,
    /// The request's id; absent: the node's only open request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub request: Option<String>,
    pub behavior: PermissionBehavior,
    /// With allow: the tool's pattern (`Bash(python3 *)`) is allowed for the rest of the run.
    #[serde(default)]
    pub always: bool,
    /// What the agent is told.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::short_text")]
    pub reason: Option<String>,
}

/// `node.permission_decide` result: the request and the decision that answers it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PermissionDecided {
    pub run: String,
    pub node: String,
    pub request: String,
    pub decision: crate::state::PermissionDecision,
}

/// Longest review comment, and longest review text (bytes).
pub const REVIEW_COMMENT_MAX: usize = 4096;
pub const REVIEW_TEXT_MAX: usize = 65536;

/// `node.review`: a person reviews a node's work. Comments (and a longer `text`) ask for
/// changes, which go back to its agent as its next message; `approve` accepts the work as it
/// is, and merges it where the run waits for a person to (a code run).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReviewParams {
    #[schemars(schema_with = "crate::schema::run_ref")]
    pub run: String,
    /// The node (default: the run's only node).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::node_id")]
    pub node: Option<String>,
    /// One remark each (`src/x.rs:42: use the existing helper`), 1 to 4096 bytes, at most 100.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 100))]
    pub comments: Vec<String>,
    /// A longer review (Markdown), at most 64 KiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 65536))]
    pub text: Option<String>,
    /// Accept the work as it is (no comments, no text).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub approve: bool,
}

/// `node.review` result: the review as recorded, how it reaches the agent, and the node's
/// state after it (`running`: typed into its session; `pending`: it starts again; `merged`:
/// approved and merged).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Reviewed {
    pub run: String,
    pub node: String,
    pub review: crate::state::Review,
    pub state: crate::state::NodeState,
    /// Where the whole review is written for the agent (`$OCTL_REVIEW_FILE`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

/// `node.diff`: what a node's agent changed, as `git diff` in its worktree says it.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NodeDiffParams {
    #[schemars(schema_with = "crate::schema::run_ref")]
    pub run: String,
    #[schemars(schema_with = "crate::schema::node_id")]
    pub node: String,
    /// A review round's tip (its `tip`): what changed since that review instead of against
    /// the merge base.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 4, max = 64))]
    pub since: Option<String>,
}

/// Largest `node.diff` text (bytes); a longer diff is cut at a line and says so.
pub const DIFF_MAX_BYTES: usize = 2 * 1024 * 1024;

/// `node.diff` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DiffShown {
    pub run: String,
    pub node: String,
    /// The branch the node's work merges into.
    pub base: String,
    /// The commit the diff is from: the merge base with `base`, or `since`.
    pub from: String,
    /// A unified diff (`git diff --no-color`) of the worktree against `from`, files git does
    /// not know yet included as new files. Text the agent wrote: untrusted.
    pub diff: String,
    /// Whether `diff` was cut at [`DIFF_MAX_BYTES`].
    pub truncated: bool,
}

/// `node.log`: the end of a node's agent log.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NodeLogParams {
    #[schemars(schema_with = "crate::schema::run_ref")]
    pub run: String,
    #[schemars(schema_with = "crate::schema::node_id")]
    pub node: String,
}

/// Bytes of a log `node.log` returns at most (its end).
pub const LOG_TAIL_BYTES: u64 = 256 * 1024;

/// `node.log` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LogShown {
    pub run: String,
    pub node: String,
    /// Where the log is (`$OCTL_HOME/runs/RUN/logs/NODE.log`).
    pub path: String,
    /// Its last [`LOG_TAIL_BYTES`] at most, from a line's start, terminal escape sequences
    /// and other control characters but tab and newline removed. Untrusted.
    pub log: String,
    /// Whether the log is longer than what is returned.
    pub truncated: bool,
}

crate::methods! {
    $;
    each: each_node_method;
    NodeDone(NodeReportParams) -> AppendResult {
        name: "node.done",
        summary: "An agent reports its node done (commit first).",
    },
    NodeFail(NodeFailParams) -> AppendResult {
        name: "node.fail",
        summary: "An agent reports that it cannot finish.",
    },
    NodeProgress(NodeProgressParams) -> AppendResult {
        name: "node.progress",
        summary: "An agent says what it is doing.",
    },
    NodeSend(NodeSendParams) -> NodeSent {
        name: "node.send",
        summary: "Type a line of input (then Enter) into a live node's interactive agent.",
    },
    NodeShow(NodeShowParams) -> crate::rpc::NodeShown {
        name: "node.show",
        summary: "One node of a run as run.show shows it (its projection, elapsed time, what it waits for), for an agent asking about its own node without reading the whole run.",
    },
    NodeScreen(NodeScreenParams) -> Screen {
        name: "node.screen",
        summary: "A live node's agent screen now: the last lines of its terminal.",
    },
    NodeDiff(NodeDiffParams) -> DiffShown {
        name: "node.diff",
        summary: "What a node's agent changed: git diff in its worktree against the merge base with its base branch (or since a review round's tip), new files included.",
    },
    NodeLog(NodeLogParams) -> LogShown {
        name: "node.log",
        summary: "The end of a node's agent log (its last 256 KiB), control characters removed.",
    },
    NodeAttach(NodeAttachParams) -> Attach {
        name: "node.attach",
        summary: "The command (argv) a terminal runs to reach a node's agent, from its runner.",
    },
    NodePermissionAsk(PermissionAskParams) -> PermissionAnswer {
        name: "node.permission_ask",
        summary: "A node's agent asks for a tool under ask (its PermissionRequest hook): allowed at once by a rule an always decision added, else recorded as node.permission_asked; wait for the decision with node.permission_wait.",
    },
    NodePermissionWait(PermissionWaitParams) -> PermissionAnswer {
        name: "node.permission_wait",
        summary: "Wait at most 20 s for the decision on a permission request; one not decided within [permissions] wait of its asking is denied (node.permission_decided by timeout).",
    },
    NodeReview(ReviewParams) -> Reviewed {
        name: "node.review",
        summary: "A person reviews a node's work: comments ask for changes, recorded as node.review and given to its agent as its next message (typed into its live session, its conversation resumed, or a new attempt in the same worktree and branch); approve accepts it, and merges it in a code run. Of two reviews at once the second is invalid_transition.",
    },
    NodePermissionDecide(PermissionDecideParams) -> PermissionDecided {
        name: "node.permission_decide",
        summary: "A person allows or denies a node's permission request (the only open one when request is absent), recorded as node.permission_decided. One decision per request: a different later one is invalid_transition naming the one that won; the same one again answers it.",
    },
}
