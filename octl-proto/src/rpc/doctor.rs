//! The `doctor.*` family: the daemon's side of `orchestratectl doctor` (runs, orphans, agent
//! profiles, runners, the sandbox; reads only) — each method's result types beside its
//! declaration. A new method of the family is declared here; the compiler then asks for its
//! daemon `Handle` (`octld/src/rpc/doctor.rs`), and the client calls it as `method::Name`.

use serde::{Deserialize, Serialize};

use crate::method::NoParams;

/// One thing under the daemon's own names that no run owns (docs/PROTOCOL.md, "State on disk"): a worktree
/// directory under `$OCTL_HOME/worktrees/`, a branch `octl/<RUN>/…`, a git worktree
/// registration under that folder, a window on the private tmux server, or a remote runner's
/// job. Reported by `doctor.orphans`, `doctor` and `run gc --dry-run`; never deleted without `run gc`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
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

/// `doctor.orphans` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DoctorOrphansResult {
    pub orphans: Vec<Orphan>,
}

/// One run as `doctor.runs` judged it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DoctorRunsResult {
    pub runs: Vec<DoctorRun>,
}

/// One agent profile as `doctor.agents` found it on the daemon's PATH.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
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

/// `doctor.agents` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DoctorAgentsResult {
    pub agents: Vec<DoctorAgent>,
    /// Set when config.toml cannot be read or parsed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_error: Option<String>,
}

/// One runner as `doctor.runners` found it: `local`, and each `[runners.NAME]` of config.toml.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DoctorRunnersResult {
    pub runners: Vec<DoctorRunner>,
    /// Set when config.toml cannot be read or parsed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_error: Option<String>,
}

/// `doctor.sandbox` result: whether the daemon can start an agent in bubblewrap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DoctorSandboxResult {
    /// `bwrap` as the daemon finds it on its own PATH; absent when it is not there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bwrap: Option<String>,
    /// What `bwrap --version` printed (`bubblewrap 0.8.0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// A minimal sandbox ran (`bwrap --unshare-all`, the system read-only, `-- true`).
    pub ok: bool,
    /// What ran, or why it did not: bwrap's own message (a kernel that refuses unprivileged
    /// user namespaces, say).
    pub message: String,
    /// What asks for `bwrap`: `[sandbox] kind`, `[agents.NAME] sandbox`, an unfinished run's
    /// `--sandbox`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wanted_by: Vec<String>,
}

crate::methods! {
    $;
    each: each_doctor_method;
    DoctorRuns(NoParams) -> DoctorRunsResult {
        name: "doctor.runs",
        summary: "Per run: whether its log replays and its projection files match what the log derives (reads only).",
    },
    DoctorOrphans(NoParams) -> DoctorOrphansResult {
        name: "doctor.orphans",
        summary: "Worktrees, branches and windows under the daemon's names that no run owns (reads only).",
    },
    DoctorAgents(NoParams) -> DoctorAgentsResult {
        name: "doctor.agents",
        summary: "Every agent profile, its program, and whether the daemon finds it on its PATH.",
    },
    DoctorRunners(NoParams) -> DoctorRunnersResult {
        name: "doctor.runners",
        summary: "Every runner (local and those of config.toml) and whether it answers: SSH hosts reached, Slurm's sinfo answering.",
    },
    DoctorSandbox(NoParams) -> DoctorSandboxResult {
        name: "doctor.sandbox",
        summary: "Whether bubblewrap is on the daemon's PATH and runs a minimal sandbox, and what asks for it.",
    },
}
