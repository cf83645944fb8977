//! The `spawn.*` family: one agent in a new worktree, autonomous (`spawn.spinoff`) or
//! interactive (`spawn.code`) — the params type beside the declarations. A new method of the
//! family is declared here; the compiler then asks for its daemon `Handle`
//! (`octld/src/rpc/spawn.rs`), and the client calls it as `method::Name`.

use serde::{Deserialize, Serialize};

use crate::method::ParamSpec;
use crate::projection::RunSummary;

/// `spawn.spinoff`, `spawn.code`
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpawnParams {
    pub task: String,
    /// Absolute path inside the repository (the CLI sends its working directory).
    pub repo: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<String>,
    /// The run's budget in USD: no new node starts once its agents have cost this much;
    /// each Claude Code session gets what is left (`--max-budget-usd`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_budget_usd: Option<f64>,
    /// Where the agent runs: a runner of config.toml, or `local`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner: Option<String>,
}

/// `spawn.spinoff`, `spawn.code` result: the new run's summary, and its one node as it stood
/// when the run was made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spawned {
    #[serde(flatten)]
    pub run: RunSummary,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<crate::state::Node>,
}

const SPAWN_PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "task",
        required: true,
        schema: r#"{"type":"string","maxLength":32768}"#,
        doc: "what the agent should do (for the shell profile: a shell script)",
    },
    ParamSpec {
        name: "repo",
        required: true,
        schema: r#"{"type":"string","description":"an absolute path inside the repository"}"#,
        doc: "the repository",
    },
    ParamSpec {
        name: "base",
        required: false,
        schema: r#"{"type":"string"}"#,
        doc: "the branch to start from and merge into (default: the repository's current branch)",
    },
    ParamSpec {
        name: "agent",
        required: false,
        schema: r#"{"type":"string"}"#,
        doc: "the agent profile (default: [defaults] agent in config.toml, else claude)",
    },
    ParamSpec {
        name: "node",
        required: false,
        schema: r#"{"type":"string","pattern":"^[a-z0-9][a-z0-9-]{0,62}$"}"#,
        doc: "the node's name (default: from the task's first words)",
    },
    ParamSpec {
        name: "gate",
        required: false,
        schema: r#"{"type":"string"}"#,
        doc: "a shell command run in the worktree after done and before merge; failing fails the node",
    },
];

crate::methods! {
    $;
    each: each_spawn_method;
    SpawnSpinoff(SpawnParams) -> Spawned {
        name: "spawn.spinoff",
        summary: "Start an autonomous agent in a new worktree; merged into base when done.",
        params: SPAWN_PARAMS,
        result: r##"{"$ref":"#/components/schemas/RunSummary"}"##,
    },
    SpawnCode(SpawnParams) -> Spawned {
        name: "spawn.code",
        summary: "Start an interactive agent in a new worktree; merged when a human runs merge.",
        params: SPAWN_PARAMS,
        result: r##"{"$ref":"#/components/schemas/RunSummary"}"##,
    },
}
