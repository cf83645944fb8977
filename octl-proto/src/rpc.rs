//! JSON-RPC 2.0 over the daemon's socket: method names, parameter and result types, and the
//! error object. Parameters are by name, named like the CLI's flags, and unknown ones are refused.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::error::{AppError, ErrorKind};
use crate::event::Actor;

pub mod node;

/// The families' types (and method types) under `rpc::` as well.
pub use node::*;

pub const JSONRPC_VERSION: &str = "2.0";
/// The HTTP path of JSON-RPC requests.
pub const RPC_PATH: &str = "/rpc";
/// Largest accepted request body.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// `run.create`
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunCreateParams {
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

/// `run.show`, `run.rebuild`: one run by id or unique prefix.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunParams {
    pub run: String,
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

/// `event.append`
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventAppendParams {
    pub run: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<Actor>,
}

/// `event.append` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppendResult {
    pub seq: u64,
    pub id: String,
}

/// `event.list`
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventListParams {
    pub run: String,
    /// Only events with a greater `seq` (default 0: all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<u64>,
    /// At most this many events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
}

/// `run.rebuild` result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RebuildResult {
    pub run: String,
    pub events: u64,
    pub files: usize,
}

/// `daemon.status` result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DaemonStatus {
    pub pid: u32,
    pub version: String,
    pub protocol: u32,
    pub home: String,
    pub uptime_s: u64,
    pub runs: usize,
}

/// The `error` member of a JSON-RPC response for an [`AppError`].
pub fn error_object(err: &AppError) -> Value {
    let mut data = json!({ "kind": err.kind.as_str() });
    if let Some(hint) = &err.hint {
        data["hint"] = Value::String(hint.clone());
    }
    json!({ "code": err.kind.rpc_code(), "message": err.message, "data": data })
}

/// Reads an [`AppError`] back from a JSON-RPC `error` member.
pub fn error_from_object(v: &Value) -> AppError {
    let message = v
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("the daemon reported an error without a message")
        .to_string();
    let data = v.get("data");
    let kind = data
        .and_then(|d| d.get("kind"))
        .and_then(Value::as_str)
        .map(ErrorKind::from_str_lossy)
        .unwrap_or_else(|| match v.get("code").and_then(Value::as_i64) {
            Some(-32700) => ErrorKind::ParseError,
            Some(-32600) => ErrorKind::InvalidRequest,
            Some(-32601) => ErrorKind::MethodNotFound,
            Some(-32602) => ErrorKind::InvalidParams,
            _ => ErrorKind::Internal,
        });
    AppError {
        kind,
        message,
        hint: data
            .and_then(|d| d.get("hint"))
            .and_then(Value::as_str)
            .map(str::to_string),
    }
}

/// A full response object for a request id.
pub fn error_response(id: Value, err: &AppError) -> Value {
    json!({ "jsonrpc": JSONRPC_VERSION, "id": id, "error": error_object(err) })
}

pub fn result_response(id: Value, result: Value) -> Value {
    json!({ "jsonrpc": JSONRPC_VERSION, "id": id, "result": result })
}

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

/// `run.cancel`
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CancelParams {
    pub run: String,
    #[serde(default)]
    pub discard: bool,
}

/// `merge`
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MergeParams {
    pub run: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Merge a failed or exited node's branch as it is committed (a human's say-so).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub accept_failed: bool,
}

/// `merge` result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MergeResult {
    pub run: String,
    /// `None` for an orchestrate run's integration branch merged into base.
    pub node: Option<String>,
    pub state: String,
    pub target: String,
    pub merge_commit: String,
}

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

/// A budget as given: a finite amount above zero, or an error naming the field.
pub fn check_budget(field: &str, usd: Option<f64>) -> Result<(), crate::AppError> {
    match usd {
        Some(u) if !(u.is_finite() && u > 0.0) => Err(crate::AppError::invalid(format!(
            "invalid {field} {u}: give an amount in USD above 0, e.g. 2.50"
        ))),
        _ => Ok(()),
    }
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

/// `discussion.ask`
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AskParams {
    pub run: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    pub title: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
}

/// `discussion.list`, `spinoff.list`
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open: Option<bool>,
}

/// One discussion as `discussion.list` and `discussion.answer` return it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DiscussionItem {
    pub id: String,
    pub run: String,
    pub node: Option<String>,
    pub title: String,
    pub body: Option<String>,
    pub open: bool,
    pub answer: Option<String>,
    pub opened_at: String,
    pub resolved_at: Option<String>,
}

/// `{id, run}`: what `discussion.ask` and `spinoff.propose` return.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Opened {
    pub id: String,
    pub run: String,
}

/// One proposal as `spinoff.list`, `spinoff.accept` and `spinoff.reject` return it: the
/// folded record, and the run that holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Proposal {
    pub run: String,
    #[serde(flatten)]
    pub spinoff: crate::state::Spinoff,
}

/// `spinoff.accept` result: the proposal and the new run's summary.
#[derive(Debug, Clone, Deserialize)]
pub struct Accepted {
    pub proposal: Proposal,
    pub run: crate::projection::RunSummary,
}

/// `discussion.answer`
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnswerParams {
    pub id: String,
    pub text: String,
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

/// One thing under the daemon's own names that no run owns (the README's "State on disk"): a worktree
/// directory under `$OCTL_HOME/worktrees/`, a branch `octl/<RUN>/…`, a git worktree
/// registration under that folder, a window on the private tmux server, or a remote runner's
/// job. Reported by
/// `doctor.orphans`, `doctor` and `run gc --dry-run`; never deleted without `run gc`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Orphan {
    /// `worktree`, `branch`, `window` (the private tmux server's) or `job` (a remote
    /// runner's agent: a Slurm job of this daemon).
    pub kind: String,
    /// A worktree's directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// A branch's full ref (`refs/heads/octl/<RUN>/<NODE>`).
    #[serde(rename = "ref", default, skip_serializing_if = "Option::is_none")]
    pub refname: Option<String>,
    /// A window's tmux target, `<RUN>:<NODE>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// A window's pane (`%N`); a job's agent handle (`slurm:<jobid>:<attempt>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pane: Option<String>,
    /// A job's runner (`[runners.NAME]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner: Option<String>,
    /// The repository a branch or a worktree belongs to, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo: Option<String>,
    /// The run and node its name says it belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Why no run owns it.
    pub why: String,
}

/// `run.gc`
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GcParams {
    /// List what would be removed and change nothing.
    #[serde(default)]
    pub dry_run: bool,
    /// Also delete the kept ignored files of runs that ended longer ago than this (`7d`,
    /// `12h`, `30m`, `45s`); without it they are kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub older_than: Option<String>,
}

/// One thing `run.gc` removed (or, in a dry run, would remove), or kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GcItem {
    /// `worktree`, `branch`, `window`, `job` (a remote runner's, cancelled), `exchange_ref` (a
    /// finished run's ref in an exchange repository, deleted only when its commit is
    /// reachable in the run's repository), or `kept` (a kept directory of ignored files, deleted
    /// by `older_than`).
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(rename = "ref", default, skip_serializing_if = "Option::is_none")]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GcResult {
    pub dry_run: bool,
    /// What was removed (in a dry run: what would be).
    pub removed: Vec<GcItem>,
    /// What stays, each with its `reason`.
    pub kept: Vec<GcItem>,
}

/// `recover`
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecoverParams {
    /// The run and node whose snapshot to recover; or else `ref` and `repo`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// A snapshot ref `refs/octl/snapshots/<RUN>/<NODE>` in `repo`, for one no run owns
    /// (an orphan's, as `run gc` names it).
    #[serde(rename = "ref", default, skip_serializing_if = "Option::is_none")]
    pub refname: Option<String>,
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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

/// One run as `doctor.runs` judged it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DoctorRun {
    pub run: String,
    /// The log replays and every projection file matches what it derives.
    pub ok: bool,
    /// Events replayed (0 for a corrupt log).
    pub events: u64,
    /// What is wrong, for a run that is not ok.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    /// Projection files whose bytes differ from what the log derives (or that are missing
    /// or extra).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mismatched: Vec<String>,
}

/// `doctor.runs` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DoctorRunsResult {
    pub runs: Vec<DoctorRun>,
}

/// One agent profile as `doctor.agents` found it on the daemon's PATH.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DoctorAgent {
    pub profile: String,
    /// The program the profile starts (`sh` for shell).
    pub program: String,
    /// Where it was found; `None` when missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub found: Option<String>,
    /// `claude` and `shell` are built in; others come from config.toml.
    pub builtin: bool,
    /// The profile `--agent` defaults to.
    pub default: bool,
    /// Unfinished runs with a node on this profile that is not finished.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub used_by: Vec<String>,
    /// A profile that cannot be used as configured (e.g. no argv template).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    /// The first line `PROGRAM --version` printed (built-in agent CLIs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Found, configured, and (for a built-in agent CLI) answered `--version`.
    #[serde(default)]
    pub usable: bool,
    /// A built-in profile nobody needs unless they choose it (codex, gemini, opencode,
    /// aider): its absence is no warning.
    #[serde(default)]
    pub optional: bool,
}

/// One runner as `doctor.runners` found it: `local`, and each `[runners.NAME]` of config.toml.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DoctorRunner {
    pub name: String,
    /// `local`, `ssh` or `slurm`.
    pub kind: String,
    /// The runner nodes get when nothing names one (`[defaults] runner`, else `local`).
    pub default: bool,
    /// It answered: the tmux server can be started, every SSH host ran a command, Slurm's
    /// `sinfo` answered with the partition.
    pub ok: bool,
    /// What answered (ok) or what did not (not ok).
    pub message: String,
    /// Unfinished runs with a node on this runner that is not finished.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub used_by: Vec<String>,
}

/// `doctor.runners` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DoctorRunnersResult {
    pub runners: Vec<DoctorRunner>,
    /// Set when config.toml cannot be read or parsed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_error: Option<String>,
}

/// `doctor.agents` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DoctorAgentsResult {
    pub agents: Vec<DoctorAgent>,
    /// Set when config.toml cannot be read or parsed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_error: Option<String>,
}
