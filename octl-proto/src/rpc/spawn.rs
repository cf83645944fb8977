//! The `spawn.*` family: one agent in a new worktree, autonomous (`spawn.spinoff`) or
//! interactive (`spawn.code`) — the params type beside the declarations. A new method of the
//! family is declared here; the compiler then asks for its daemon `Handle`
//! (`octld/src/rpc/spawn.rs`), and the client calls it as `method::Name`.

use serde::{Deserialize, Serialize};

use crate::projection::RunSummary;

/// `spawn.spinoff`, `spawn.code`
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SpawnParams {
    /// What the agent should do (for the shell profile: a shell script)
    #[schemars(length(max = 32768))]
    pub task: String,
    /// Absolute path inside the repository (the CLI sends its working directory).
    pub repo: String,
    /// The branch to start from and merge into (default: the repository's current branch)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    /// The agent profile (default: [defaults] agent in config.toml, else claude)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The node's name (default: from the task's first words)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::node_id")]
    pub node: Option<String>,
    /// A shell command run in the worktree after done and before merge; failing fails the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<String>,
    /// The run's budget in USD: no new node starts once its agents have cost this much;
    /// each Claude Code session gets what is left (`--max-budget-usd`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_budget_usd: Option<f64>,
    /// Where the agent runs: a runner of config.toml, or `local`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner: Option<String>,
    /// A spinoff's done node waits for a person's review (`review --approve`, or comments
    /// that send it back) before it is gated and merged.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub review: bool,
    /// The sandbox the run's agents run in (`bwrap`, `none`), over their profile's and
    /// config.toml's `[sandbox] kind`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<crate::sandbox::SandboxKind>,
    /// The run's permission rules for its Claude Code agent, after config.toml's.
    #[serde(
        default,
        skip_serializing_if = "crate::rules::PermissionRules::is_empty"
    )]
    pub permissions: crate::rules::PermissionRules,
    /// Best of N: this many attempts at the task (2 to 10), each in its own worktree
    /// (nodes `NODE-1` … `NODE-N`); each is gated, a judge ranks those that passed, the best
    /// merges and the rest are kept under their snapshot refs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 2, max = 10))]
    pub attempts: Option<u32>,
    /// The profiles the attempts are spread over, in turn (default: `agent` for all).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<String>,
    /// Who ranks the attempts: `builtin` (default), `command` (`judge_command`) or `human`
    /// (`orchestratectl pick`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<crate::event::Judge>,
    /// With `judge: command`: a shell command given the task and every passing attempt's
    /// diff as JSON on stdin, answering `{"ranking": [NODE, …], "reasons": [TEXT, …]}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 4096))]
    pub judge_command: Option<String>,
    /// The first attempt that passes its gate wins; the others are stopped.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub first_passing: bool,
    /// With `attempts`: at most this many attempts alive at once (default: all of them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10))]
    pub max_parallel: Option<u64>,
    /// The built-in judge's criteria in the order they decide (`diff`, `files`, `cost`,
    /// `time`; default all four in that order).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rank: Vec<crate::event::Criterion>,
}

/// Attempts of a best-of-N run at most.
pub const ATTEMPTS_MAX: u32 = 10;

/// `spawn.spinoff`, `spawn.code` result: the new run's summary, and its one node as it stood
/// when the run was made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Spawned {
    #[serde(flatten)]
    pub run: RunSummary,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<crate::state::Node>,
}

crate::methods! {
    $;
    each: each_spawn_method;
    SpawnSpinoff(SpawnParams) -> Spawned {
        name: "spawn.spinoff",
        summary: "Start an autonomous agent in a new worktree; merged into base when done.",
    },
    SpawnCode(SpawnParams) -> Spawned {
        name: "spawn.code",
        summary: "Start an interactive agent in a new worktree; merged when a human runs merge.",
    },
}
