//! The `run.*` family: create, list, show, rebuild, quarantine, cancel and retry runs — each
//! method's params and result types beside its declaration (`run.gc` is with `recover` in
//! `gc.rs`). A new method of the family is declared here; the compiler then asks for its
//! daemon `Handle` (`octld/src/rpc/run.rs`), and the client calls it as `method::Name`.

use serde::{Deserialize, Serialize};

use crate::method::ParamSpec;
use crate::projection::{RunDetail, RunSummary};
use crate::rpc::{RunParams, NODE_PARAM, RUN_PARAM};

/// `run.create`
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunCreateParams {
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

/// `run.list`: every run, or those that pass every filter given.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunListParams {
    /// Only runs in this status, or in one of these (`"active"` or `["active","waiting"]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Statuses>,
    /// Only runs on the repository at or containing this absolute path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo: Option<String>,
    /// Only the newest this many of those (still listed oldest first); at least 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
}

/// One status name or a list of them, as given (the daemon checks each).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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

/// `run.rebuild` result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RebuildResult {
    pub run: String,
    pub events: u64,
    pub files: usize,
}

/// `run.cancel`
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CancelParams {
    pub run: String,
    #[serde(default)]
    pub discard: bool,
}

/// `run.retry`
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetryParams {
    pub run: String,
    pub node: String,
    /// Continue the node's Claude Code conversation in its kept worktree and branch instead
    /// of starting over (`claude --resume`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub resume: bool,
}

/// `run.quarantine` result: where the run's directory went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Quarantined {
    pub run: String,
    pub moved_to: String,
}

const RESUME_PARAM: ParamSpec = ParamSpec {
    name: "resume",
    required: false,
    schema: r#"{"type":"boolean","default":false}"#,
    doc: "continue the node's Claude Code conversation in its kept worktree",
};

crate::methods! {
    $;
    each: each_run_method;
    RunCreate(RunCreateParams) -> RunSummary {
        name: "run.create",
        summary: "Create a run that records events (kind generic).",
        params: &[
            ParamSpec {
                name: "kind",
                required: true,
                schema: r#"{"type":"string","enum":["generic"]}"#,
                doc: "the kind of run",
            },
            ParamSpec {
                name: "title",
                required: false,
                schema: r#"{"type":"string","maxLength":1024}"#,
                doc: "a title for people",
            },
        ],
        result: r##"{"$ref":"#/components/schemas/RunSummary"}"##,
    },
    RunList(RunListParams) -> Vec<RunSummary> {
        name: "run.list",
        summary: "Every run's summary (or those that pass the filters), oldest first.",
        params: &[
            ParamSpec {
                name: "status",
                required: false,
                schema: r#"{"oneOf":[{"type":"string","enum":["active","waiting","completed","failed","cancelled","corrupt"]},{"type":"array","minItems":1,"items":{"type":"string","enum":["active","waiting","completed","failed","cancelled","corrupt"]}}]}"#,
                doc: "only runs in this status, or in one of these",
            },
            ParamSpec {
                name: "repo",
                required: false,
                schema: r#"{"type":"string","description":"an absolute path"}"#,
                doc: "only runs on the repository at or containing this path",
            },
            ParamSpec {
                name: "limit",
                required: false,
                schema: r#"{"type":"integer","minimum":1}"#,
                doc: "only the newest this many (still listed oldest first)",
            },
        ],
        result: r##"{"type":"array","items":{"$ref":"#/components/schemas/RunSummary"}}"##,
    },
    RunShow(RunParams) -> RunDetail {
        name: "run.show",
        summary: "One run: its summary, nodes, discussions and spin-off proposals.",
        params: &[RUN_PARAM],
        result: r#"{"type":"object","required":["manifest","nodes","discussions","spinoffs"]}"#,
    },
    RunRebuild(RunParams) -> RebuildResult {
        name: "run.rebuild",
        summary: "Re-derive a run's projection files from its log alone.",
        params: &[RUN_PARAM],
        result: r#"{"type":"object","required":["run","events","files"]}"#,
    },
    RunQuarantine(RunParams) -> Quarantined {
        name: "run.quarantine",
        summary: "Set a corrupt run aside: move its directory to $OCTL_HOME/corrupt/<RUN>; the daemon forgets it, nothing is deleted.",
        params: &[RUN_PARAM],
        result: r#"{"type":"object","required":["run","moved_to"]}"#,
    },
    RunCancel(CancelParams) -> RunSummary {
        name: "run.cancel",
        summary: "Stop a run's agents; with discard, remove its worktrees and branches after a snapshot. Refused (invalid_transition) for a run that ended, unless discard (then only its leftovers are removed), and while a node is merging.",
        params: &[
            RUN_PARAM,
            ParamSpec {
                name: "discard",
                required: false,
                schema: r#"{"type":"boolean"}"#,
                doc: "also remove worktrees and branches (their content is kept under refs/octl/snapshots/)",
            },
        ],
        result: r##"{"$ref":"#/components/schemas/RunSummary"}"##,
    },
    RunRetry(RetryParams) -> RunSummary {
        name: "run.retry",
        summary: "Start a failed, exited or unmerged node of any agent run again (from the integration tip in a DAG, else from base); a run that ended failed becomes active again. Answers once its old branch and worktree are saved under a snapshot ref. With resume, a node whose agent died continues its Claude Code conversation in its kept worktree and branch instead.",
        params: &[RUN_PARAM, NODE_PARAM, RESUME_PARAM],
        result: r##"{"$ref":"#/components/schemas/RunSummary"}"##,
    },
}
