//! The `run.*` family: create, list, show, rebuild, quarantine, cancel and retry runs, change
//! their budget — each
//! method's params and result types beside its declaration (`run.gc` is with `recover` in
//! `gc.rs`). A new method of the family is declared here; the compiler then asks for its
//! daemon `Handle` (`octld/src/rpc/run.rs`), and the client calls it as `method::Name`.

use serde::{Deserialize, Serialize};

use crate::projection::RunSummary;
use crate::rpc::{Prewritten, RunParams};

/// `run.create`
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunCreateParams {
    /// The kind of run.
    #[schemars(extend("enum" = ["generic"]))]
    pub kind: String,
    /// A title for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub title: Option<String>,
}

/// `run.list`: every run, or those that pass every filter given.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunListParams {
    /// Only runs in this status, or in one of these (`"active"` or `["active","waiting"]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::statuses")]
    pub status: Option<Statuses>,
    /// Only runs on the repository at or containing this absolute path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo: Option<String>,
    /// Only the newest this many of those (still listed oldest first); at least 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub limit: Option<u64>,
}

/// One status name or a list of them, as given (the daemon checks each).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum Statuses {
    One(String),
    Many(Vec<String>),
}

impl Statuses {
    pub fn names(&self) -> &[String] {
        match self {
            Statuses::One(s) => std::slice::from_ref(s),
            Statuses::Many(v) => v,
        }
    }
}

/// `run.show` result: the run as projected, and what is true only at the moment it is asked
/// (each node's elapsed time, what it waits for, what its agent holds; where a corrupt log
/// breaks).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunShown {
    pub manifest: RunSummary,
    pub nodes: Vec<NodeShown>,
    pub discussions: Vec<crate::state::Discussion>,
    pub spinoffs: Vec<crate::state::Spinoff>,
    /// The agents' permission requests and their decisions, in the order asked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub permissions: Vec<crate::state::Permission>,
    /// Tool patterns allowed for the rest of the run by `always` decisions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed: Vec<String>,
    /// A best-of-N run's judgement, once made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judged: Option<crate::state::Judged>,
    /// Why its judge command gave no ranking: a person picks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_failed: Option<String>,
    /// Only for a corrupt run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corrupt: Option<CorruptLog>,
}

/// A run as projected, without read-time facts.
impl From<crate::projection::RunDetail> for RunShown {
    fn from(d: crate::projection::RunDetail) -> RunShown {
        RunShown {
            manifest: d.manifest,
            nodes: d.nodes.into_iter().map(NodeShown::from).collect(),
            discussions: d.discussions,
            spinoffs: d.spinoffs,
            permissions: d.permissions,
            allowed: d.allowed,
            judged: d.judged,
            judge_failed: d.judge_failed,
            corrupt: None,
        }
    }
}

/// One node of `run.show`: its projection and the read-time facts beside it. It derefs to
/// the [`Node`](crate::state::Node), so code that shows a node takes either.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NodeShown {
    #[serde(flatten)]
    pub node: crate::state::Node,
    /// Seconds since it started, or from start to finish; absent if it never started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elapsed_s: Option<u64>,
    /// What it waits for, in words: dependencies not merged, a port, its runner's room or
    /// queue, its lost place.
    #[serde(default)]
    pub waiting_for: Vec<String>,
    /// What a live local agent's processes hold, as last measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Memory>,
    /// Its `worktree` is no longer there (cleaned up, or removed by hand).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub worktree_removed: bool,
    /// Its `branch` is no longer in the repository (deleted after its merge or cleanup — its
    /// tip is under the snapshot ref — or by hand).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub branch_removed: bool,
}

impl std::ops::Deref for NodeShown {
    type Target = crate::state::Node;
    fn deref(&self) -> &crate::state::Node {
        &self.node
    }
}

impl From<crate::state::Node> for NodeShown {
    fn from(node: crate::state::Node) -> NodeShown {
        NodeShown {
            node,
            elapsed_s: None,
            waiting_for: Vec::new(),
            memory: None,
            worktree_removed: false,
            branch_removed: false,
        }
    }
}

/// A live agent's memory, in bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Memory {
    pub resident_bytes: u64,
    pub peak_bytes: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_bytes: Option<u64>,
}

/// Where a corrupt run's log breaks: the bad line, why, and the events before it; or why the
/// log cannot be read at all (`error`, and nothing else).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CorruptLog {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<String>,
    /// The 1-based number of the first bad line; 0 when the log holds no complete event.
    #[serde(default)]
    pub line: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default)]
    pub readable_events: u64,
    /// The last of the readable events.
    #[serde(default)]
    pub events: Vec<crate::event::Event>,
}

/// `run.rebuild` result.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RebuildResult {
    pub run: String,
    pub events: u64,
    pub files: usize,
}

/// `run.cancel`
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelParams {
    #[schemars(schema_with = "crate::schema::run_ref")]
    pub run: String,
    /// Also remove worktrees and branches (their content is kept under refs/octl/snapshots/)
    #[serde(default)]
    pub discard: bool,
}

/// `run.retry`
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RetryParams {
    #[schemars(schema_with = "crate::schema::run_ref")]
    pub run: String,
    #[schemars(schema_with = "crate::schema::node_id")]
    pub node: String,
    /// Continue the node's Claude Code conversation in its kept worktree and branch instead
    /// of starting over (`claude --resume`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub resume: bool,
}

/// `run.pick`: a person picks a best-of-N run's winner.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PickParams {
    #[schemars(schema_with = "crate::schema::run_ref")]
    pub run: String,
    /// The attempt (`NODE-K`): done, and passed its gate.
    #[schemars(schema_with = "crate::schema::node_id")]
    pub node: String,
}

/// `run.pick` result: the judgement recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Picked {
    pub run: String,
    pub judged: crate::state::Judged,
}

/// `run.budget`: give a run more to spend — `add_usd` on top of its budget, or `set_usd` as
/// its budget (exactly one). The new budget must be above what the run has spent; a spent
/// budget is then no longer spent and its pending nodes start again.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BudgetParams {
    #[schemars(schema_with = "crate::schema::run_ref")]
    pub run: String,
    /// USD to add to the run's budget (it must have one), above 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub add_usd: Option<f64>,
    /// The run's new budget in USD, above 0 and above what the run has spent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub set_usd: Option<f64>,
}

/// `run.quarantine` result: where the run's directory went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Quarantined {
    pub run: String,
    pub moved_to: String,
}

crate::methods! {
    $;
    each: each_run_method;
    RunCreate(RunCreateParams) -> RunSummary {
        name: "run.create",
        summary: "Create a run that records events (kind generic).",
    },
    RunList(RunListParams) -> Prewritten<Vec<RunSummary>> {
        name: "run.list",
        summary: "Every run's summary (or those that pass the filters), oldest first.",
    },
    RunShow(RunParams) -> RunShown {
        name: "run.show",
        summary: "One run: its summary, nodes, discussions and spin-off proposals.",
    },
    RunRebuild(RunParams) -> RebuildResult {
        name: "run.rebuild",
        summary: "Re-derive a run's projection files from its log alone.",
    },
    RunBudget(BudgetParams) -> RunSummary {
        name: "run.budget",
        summary: "Change a run's budget: add_usd more, or set_usd as the budget (exactly one), above what it has spent. Recorded as run.budget_changed; a spent budget is no longer spent and the run's pending nodes start again. A bad amount is invalid_params and changes nothing; a run that ended is invalid_transition.",
    },
    RunQuarantine(RunParams) -> Quarantined {
        name: "run.quarantine",
        summary: "Set a corrupt run aside: move its directory to $OCTL_HOME/corrupt/<RUN>; the daemon forgets it, nothing is deleted.",
    },
    RunCancel(CancelParams) -> RunSummary {
        name: "run.cancel",
        summary: "Stop a run's agents; with discard, remove its worktrees and branches after a snapshot. Refused (invalid_transition) for a run that ended, unless discard (then only its leftovers are removed), and while a node is merging.",
    },
    RunPick(PickParams) -> Picked {
        name: "run.pick",
        summary: "A person picks a best-of-N run's winning attempt (done, gate passed), recorded as node.judged by human; the others are set aside under their snapshot refs. Once per run: after the judge (or another pick) it is invalid_transition naming the winner.",
    },
    RunRetry(RetryParams) -> RunSummary {
        name: "run.retry",
        summary: "Start a failed, exited or unmerged node of any agent run again (from the integration tip in a DAG, else from base); a run that ended failed becomes active again. Answers once its old branch and worktree are saved under a snapshot ref. With resume, a node whose agent died continues its Claude Code conversation in its kept worktree and branch instead.",
    },
}
