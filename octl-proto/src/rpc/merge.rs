//! `merge`: a node's branch into its target, or an orchestrate run's integration branch into
//! base — its params and result types beside its declaration; the daemon's `Handle` is in
//! `octld/src/rpc/merge.rs`.

use serde::{Deserialize, Serialize};

/// `merge`
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MergeParams {
    #[schemars(schema_with = "crate::schema::run_ref")]
    pub run: String,
    /// The node (default: the run's only node)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::node_id")]
    pub node: Option<String>,
    /// Merge a failed or exited node's branch as it is committed (a human's say-so).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub accept_failed: bool,
}

/// `merge` result.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MergeResult {
    pub run: String,
    /// `None` for an orchestrate run's integration branch merged into base.
    pub node: Option<String>,
    /// The node's state after the merge (`merged`; for a run, `merged` too).
    pub state: crate::state::NodeState,
    pub target: String,
    pub merge_commit: String,
}

crate::methods! {
    $;
    each: each_merge_method;
    Merge(MergeParams) -> MergeResult {
        name: "merge",
        summary: "Merge a node's branch into its target (code runs, retries after a conflict or a blocked merge).",
    },
}
