//! Runs of many nodes: `fanout.start`, `fanout.manifest` and `orchestrate.start` (a DAG
//! through an integration branch) — each method's params and result types beside its
//! declaration. A new method of the family is declared here; the compiler then asks for its
//! daemon `Handle` (`octld/src/rpc/fanout.rs`), and the client calls it as `method::Name`.

use serde::{Deserialize, Serialize};

use crate::projection::RunSummary;
use crate::rpc::RunParams;

/// `fanout.start`
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FanoutParams {
    /// The manifest's text.
    pub manifest: String,
    /// `toml` or `json`.
    #[schemars(schema_with = "crate::schema::format")]
    pub format: String,
    /// Where it came from, for messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest_path: Option<String>,
    /// The repository.
    pub repo: String,
    /// The branch to start from and merge into (default: the repository's current branch)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    /// The agent profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// A shell command each unit must pass before its merge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<String>,
    /// A number, or the string `auto`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::max_parallel")]
    pub max_parallel: Option<crate::plan::MaxParallel>,
    /// The run's budget in USD: no new node starts once its agents have cost this much;
    /// each Claude Code session gets what is left (`--max-budget-usd`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_budget_usd: Option<f64>,
    /// Where every unit's agent runs, over the manifest's `runner`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner: Option<String>,
    /// Each done node waits for a person's review (`review --approve`, or comments that send
    /// it back) before it is gated and merged.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub review: bool,
    /// The sandbox the run's agents run in (`bwrap`, `none`), over their profile's and
    /// config.toml's `[sandbox] kind`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<crate::sandbox::SandboxKind>,
    /// Permission rules for every node's Claude Code agent, after config.toml's and the
    /// document's.
    #[serde(
        default,
        skip_serializing_if = "crate::rules::PermissionRules::is_empty"
    )]
    pub permissions: crate::rules::PermissionRules,
}

/// `fanout.manifest` result.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ManifestDoc {
    pub run: Option<String>,
    pub format: String,
    pub path: String,
    pub text: String,
}

/// `orchestrate.start`
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OrchestrateParams {
    /// The plan's text: [[nodes]] with id, task, deps, optional agent and gate.
    pub plan: String,
    /// The plan's format.
    #[schemars(schema_with = "crate::schema::format")]
    pub format: String,
    /// Where it came from, for messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_path: Option<String>,
    /// The repository.
    pub repo: String,
    /// The branch to start from and merge into (default: the repository's current branch)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    /// The agent profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// At most this many agents alive at once; auto (the default) derives it from cores and memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::max_parallel")]
    pub max_parallel: Option<crate::plan::MaxParallel>,
    /// Merge the integration branch into base as soon as every node is merged.
    #[serde(default)]
    pub auto_merge: bool,
    /// The run's budget in USD: no new node starts once its agents have cost this much;
    /// each Claude Code session gets what is left (`--max-budget-usd`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_budget_usd: Option<f64>,
    /// Where the agents of the nodes the plan gives no `runner` run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner: Option<String>,
    /// Each done node waits for a person's review (`review --approve`, or comments that send
    /// it back) before it is gated and merged.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub review: bool,
    /// The sandbox the run's agents run in (`bwrap`, `none`), over their profile's and
    /// config.toml's `[sandbox] kind`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<crate::sandbox::SandboxKind>,
    /// Permission rules for every node's Claude Code agent, after config.toml's and the
    /// document's.
    #[serde(
        default,
        skip_serializing_if = "crate::rules::PermissionRules::is_empty"
    )]
    pub permissions: crate::rules::PermissionRules,
}

crate::methods! {
    $;
    each: each_fanout_method;
    FanoutStart(FanoutParams) -> RunSummary {
        name: "fanout.start",
        summary: "Start N units from one manifest, at most max_parallel alive at once, each merged into base as it finishes.",
    },
    FanoutManifest(RunParams) -> ManifestDoc {
        name: "fanout.manifest",
        summary: "The manifest of a fan-out run, as given.",
    },
    OrchestrateStart(OrchestrateParams) -> RunSummary {
        name: "orchestrate.start",
        summary: "Start a DAG of nodes through an integration branch; each node starts once its deps are merged into it.",
    },
}
