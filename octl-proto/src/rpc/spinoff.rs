//! The `spinoff.*` family: an agent proposes separate work, a human accepts (a new run) or
//! rejects it — each method's params and result types beside its declaration. A new method of
//! the family is declared here; the compiler then asks for its daemon `Handle`
//! (`octld/src/rpc/spinoff.rs`), and the client calls it as `method::Name`.

use serde::{Deserialize, Serialize};

use crate::method::ParamSpec;
use crate::rpc::{ListParams, Opened, AGENT_PARAM, RUN_PARAM};

/// One proposal as `spinoff.list`, `spinoff.accept` and `spinoff.reject` return it: the
/// folded record, and the run that holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Proposal {
    pub run: String,
    #[serde(flatten)]
    pub spinoff: crate::state::Spinoff,
}

impl std::ops::Deref for Proposal {
    type Target = crate::state::Spinoff;
    fn deref(&self) -> &crate::state::Spinoff {
        &self.spinoff
    }
}

/// `spinoff.accept` result: the proposal and the new run's summary.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Accepted {
    pub proposal: Proposal,
    pub run: crate::projection::RunSummary,
}

/// `spinoff.propose`
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProposeParams {
    pub run: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    pub task: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// `spinoff.accept`
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AcceptParams {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
}

/// `spinoff.reject`
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RejectParams {
    pub id: String,
    pub reason: String,
}

crate::methods! {
    $;
    each: each_spinoff_method;
    SpinoffPropose(ProposeParams) -> Opened {
        name: "spinoff.propose",
        summary: "An agent proposes separate work it noticed.",
        params: &[
            RUN_PARAM,
            ParamSpec { name: "node", required: false, schema: r#"{"type":"string"}"#, doc: "the proposing node" },
            ParamSpec { name: "task", required: true, schema: r#"{"type":"string"}"#, doc: "the work" },
            ParamSpec { name: "why", required: false, schema: r#"{"type":"string"}"#, doc: "why it is separate" },
        ],
        result: r#"{"type":"object","required":["id","run"]}"#,
    },
    SpinoffList(ListParams) -> Vec<Proposal> {
        name: "spinoff.list",
        summary: "Spin-off proposals of one run or of all.",
        params: &[ParamSpec { name: "run", required: false, schema: r#"{"type":"string"}"#, doc: "only this run" }],
        result: r#"{"type":"array"}"#,
    },
    SpinoffAccept(AcceptParams) -> Accepted {
        name: "spinoff.accept",
        summary: "Accept a proposal: start a spinoff run for it, linked to the parent run both ways (once: the first decision written wins; a loser starts nothing). The agent defaults to the proposing node's.",
        params: &[
            ParamSpec { name: "id", required: true, schema: r#"{"type":"string"}"#, doc: "the proposal: its id or a unique prefix of at least 6 characters" },
            AGENT_PARAM,
        ],
        result: r#"{"type":"object","required":["proposal","run"]}"#,
    },
    SpinoffReject(RejectParams) -> Proposal {
        name: "spinoff.reject",
        summary: "Reject a proposal, saying why.",
        params: &[
            ParamSpec { name: "id", required: true, schema: r#"{"type":"string"}"#, doc: "the proposal: its id or a unique prefix of at least 6 characters" },
            ParamSpec { name: "reason", required: true, schema: r#"{"type":"string"}"#, doc: "why" },
        ],
        result: r#"{"type":"object"}"#,
    },
}
