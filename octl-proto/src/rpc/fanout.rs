//! Runs of many nodes: `fanout.start`, `fanout.manifest` and `orchestrate.start` (a DAG
//! through an integration branch) — each method's params and result types beside its
//! declaration. A new method of the family is declared here; the compiler then asks for its
//! daemon `Handle` (`octld/src/rpc/fanout.rs`), and the client calls it as `method::Name`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::method::ParamSpec;
use crate::projection::RunSummary;
use crate::rpc::{RunParams, AGENT_PARAM, RUN_PARAM};

/// `fanout.start`
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FanoutParams {
    /// The manifest's text.
    pub manifest: String,
    /// `toml` or `json`.
    pub format: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest_path: Option<String>,
    pub repo: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<String>,
    /// A number, or the string `auto`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_parallel: Option<Value>,
    /// The run's budget in USD: no new node starts once its agents have cost this much;
    /// each Claude Code session gets what is left (`--max-budget-usd`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_budget_usd: Option<f64>,
    /// Where every unit's agent runs, over the manifest's `runner`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner: Option<String>,
}

/// `fanout.manifest` result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ManifestDoc {
    pub run: Option<String>,
    pub format: String,
    pub path: String,
    pub text: String,
}

/// `orchestrate.start`
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OrchestrateParams {
    pub plan: String,
    pub format: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_path: Option<String>,
    pub repo: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_parallel: Option<Value>,
    #[serde(default)]
    pub auto_merge: bool,
    /// The run's budget in USD: no new node starts once its agents have cost this much;
    /// each Claude Code session gets what is left (`--max-budget-usd`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_budget_usd: Option<f64>,
    /// Where the agents of the nodes the plan gives no `runner` run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner: Option<String>,
}

const REPO_PARAM: ParamSpec = ParamSpec {
    name: "repo",
    required: true,
    schema: r#"{"type":"string","description":"an absolute path inside the repository"}"#,
    doc: "the repository",
};

const BASE_PARAM: ParamSpec = ParamSpec {
    name: "base",
    required: false,
    schema: r#"{"type":"string"}"#,
    doc: "the branch to start from and merge into (default: the repository's current branch)",
};

const MAX_PARALLEL_PARAM: ParamSpec = ParamSpec {
    name: "max_parallel",
    required: false,
    schema: r#"{"oneOf":[{"type":"integer","minimum":1,"maximum":1000},{"const":"auto"}]}"#,
    doc: "at most this many agents alive at once; auto (the default) derives it from cores and memory",
};

crate::methods! {
    $;
    each: each_fanout_method;
    FanoutStart(FanoutParams) -> RunSummary {
        name: "fanout.start",
        summary: "Start N units from one manifest, at most max_parallel alive at once, each merged into base as it finishes.",
        params: &[
            ParamSpec { name: "manifest", required: true, schema: r#"{"type":"string"}"#, doc: "the manifest's text: prompt template, optional agent and gate, [[units]] with id and vars" },
            ParamSpec { name: "format", required: true, schema: r#"{"type":"string","enum":["toml","json"]}"#, doc: "the manifest's format" },
            ParamSpec { name: "manifest_path", required: false, schema: r#"{"type":"string"}"#, doc: "where it came from, for messages" },
            REPO_PARAM, BASE_PARAM, AGENT_PARAM,
            ParamSpec { name: "gate", required: false, schema: r#"{"type":"string"}"#, doc: "a shell command each unit must pass before its merge" },
            MAX_PARALLEL_PARAM,
        ],
        result: r##"{"$ref":"#/components/schemas/RunSummary"}"##,
    },
    FanoutManifest(RunParams) -> ManifestDoc {
        name: "fanout.manifest",
        summary: "The manifest of a fan-out run, as given.",
        params: &[RUN_PARAM],
        result: r#"{"type":"object","required":["run","format","path","text"]}"#,
    },
    OrchestrateStart(OrchestrateParams) -> RunSummary {
        name: "orchestrate.start",
        summary: "Start a DAG of nodes through an integration branch; each node starts once its deps are merged into it.",
        params: &[
            ParamSpec { name: "plan", required: true, schema: r#"{"type":"string"}"#, doc: "the plan's text: [[nodes]] with id, task, deps, optional agent and gate" },
            ParamSpec { name: "format", required: true, schema: r#"{"type":"string","enum":["toml","json"]}"#, doc: "the plan's format" },
            ParamSpec { name: "plan_path", required: false, schema: r#"{"type":"string"}"#, doc: "where it came from, for messages" },
            REPO_PARAM, BASE_PARAM, AGENT_PARAM, MAX_PARALLEL_PARAM,
            ParamSpec { name: "auto_merge", required: false, schema: r#"{"type":"boolean"}"#, doc: "merge the integration branch into base as soon as every node is merged" },
        ],
        result: r##"{"$ref":"#/components/schemas/RunSummary"}"##,
    },
}
