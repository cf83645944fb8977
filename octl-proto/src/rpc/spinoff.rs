//! The `spinoff.*` family: an agent proposes separate work, a human accepts (a new run) or
//! rejects it — each method's params and result types beside its declaration. A new method of
//! the family is declared here; the compiler then asks for its daemon `Handle`
//! (`octld/src/rpc/spinoff.rs`), and the client calls it as `method::Name`.

use serde::{Deserialize, Serialize};

use crate::rpc::{ListParams, Opened};

/// One proposal as `spinoff.list`, `spinoff.accept` and `spinoff.reject` return it: the
/// folded record, and the run that holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Accepted {
    pub proposal: Proposal,
    pub run: crate::projection::RunSummary,
    /// It was accepted before (by another request, or this one sent again): `run` is the run
    /// that accept started; nothing was started now.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub already: bool,
}

/// `spinoff.propose`
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProposeParams {
    #[schemars(schema_with = "crate::schema::run_ref")]
    pub run: String,
    /// The proposing node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::node_id")]
    pub node: Option<String>,
    /// The work.
    pub task: String,
    /// Why it is separate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// `spinoff.accept`
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AcceptParams {
    /// The proposal: its id or a unique prefix of at least 6 characters.
    #[schemars(schema_with = "crate::schema::record_ref")]
    pub id: String,
    /// The agent profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
}

/// `spinoff.reject`
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RejectParams {
    /// The proposal: its id or a unique prefix of at least 6 characters.
    #[schemars(schema_with = "crate::schema::record_ref")]
    pub id: String,
    /// Why.
    pub reason: String,
}

crate::methods! {
    $;
    each: each_spinoff_method;
    SpinoffPropose(ProposeParams) -> Opened {
        name: "spinoff.propose",
        summary: "An agent proposes separate work it noticed.",
    },
    SpinoffList(ListParams) -> Vec<Proposal> {
        name: "spinoff.list",
        summary: "Spin-off proposals of one run or of all.",
    },
    SpinoffAccept(AcceptParams) -> Accepted {
        name: "spinoff.accept",
        summary: "Accept a proposal: start a spinoff run for it, linked to the parent run both ways (once: the first decision written wins; a loser starts nothing). The agent defaults to the proposing node's.",
    },
    SpinoffReject(RejectParams) -> Proposal {
        name: "spinoff.reject",
        summary: "Reject a proposal, saying why.",
    },
}
