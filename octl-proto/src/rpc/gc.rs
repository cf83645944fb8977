//! Garbage and its way back: `run.gc` removes what ended runs and orphans left (after a
//! snapshot), `recover` makes a branch (and worktree) of a snapshot again — each method's
//! params and result types beside its declaration. A new method of the family is declared
//! here; the compiler then asks for its daemon `Handle` (`octld/src/rpc/gc.rs`), and the client
//! calls it as `method::Name`.

use serde::{Deserialize, Serialize};

/// `run.gc`
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GcParams {
    /// List what would be removed and change nothing.
    #[serde(default)]
    pub dry_run: bool,
    /// Also delete the kept ignored files of runs that ended longer ago than this (`7d`,
    /// `12h`, `30m`, `45s`); without it they are kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "^[0-9]+[dhms]$"))]
    pub older_than: Option<String>,
}

/// One thing `run.gc` removed (or, in a dry run, would remove), or kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GcItem {
    /// `worktree`, `branch`, `window`, `job` (a remote runner's, cancelled), `exchange_ref` (a
    /// finished run's ref in an exchange repository, deleted only when its commit is
    /// reachable in the run's repository), `pool` (a warm pool's worktree), or `kept` (a kept
    /// directory of ignored files, deleted by `older_than`).
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(rename = "ref", default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "^refs/octl/snapshots/[^/]+/[^/]+$"))]
    pub refname: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Why it goes: `run failed`, or the orphan's reason.
    pub why: String,
    /// Where its content was saved first (worktrees and unmerged branches).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_ref: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_commit: Option<String>,
    /// Worktrees: where the files git ignored in it were moved (`$OCTL_HOME/kept/…`), and
    /// how many.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept_dir: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept_files: Option<u64>,
    /// Kept items only: why it stays.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `run.gc` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GcResult {
    pub dry_run: bool,
    /// What was removed (in a dry run: what would be).
    pub removed: Vec<GcItem>,
    /// What stays, each with its `reason`.
    pub kept: Vec<GcItem>,
}

/// `recover`
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecoverParams {
    /// The run and node whose snapshot to recover; or else `ref` and `repo`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::run_ref")]
    pub run: Option<String>,
    /// The node whose snapshot to recover.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::node_id")]
    pub node: Option<String>,
    /// A snapshot ref `refs/octl/snapshots/<RUN>/<NODE>` in `repo`, for one no run owns
    /// (an orphan's, as `run gc` names it).
    #[serde(rename = "ref", default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "^refs/octl/snapshots/[^/]+/[^/]+$"))]
    pub refname: Option<String>,
    /// The repository holding ref (absolute)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo: Option<String>,
    /// The branch to create (default `recovered/<RUN-short>/<NODE>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// Also check the new branch out in a new worktree here and move the node's kept
    /// ignored files back into it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<String>,
}

/// `recover` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RecoverResult {
    pub run: String,
    pub node: String,
    pub repo: String,
    pub branch: String,
    pub commit: String,
    pub snapshot_ref: String,
    /// The worktree made with `worktree`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<String>,
    /// Files git ignored that were moved back into that worktree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored_files: Option<u64>,
    /// Where the node's kept ignored files still are (without `worktree`, or what could not
    /// go back because the new worktree already has that path), and how many.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept_dir: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept_files: Option<u64>,
}

crate::methods! {
    $;
    each: each_gc_method;
    RunGc(GcParams) -> GcResult {
        name: "run.gc",
        summary: "Remove what completed, failed and cancelled runs left behind (worktrees, windows, branches) and what no run owns, snapshotting every worktree and unmerged branch tip under refs/octl/snapshots/<RUN>/<NODE> first and moving the files git ignores to $OCTL_HOME/kept/<RUN>/<NODE>/<N>/.",
    },
    Recover(RecoverParams) -> RecoverResult {
        name: "recover",
        summary: "Create a branch at a node's snapshot (refs/octl/snapshots/<RUN>/<NODE>), and with worktree a worktree of it holding the node's kept ignored files; never overwrites a branch or files.",
    },
}
