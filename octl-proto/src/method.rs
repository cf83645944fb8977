//! One declaration per JSON-RPC method: its name, parameter and result types, summary and
//! the JSON Schemas of `rpc.discover`. The daemon's dispatch is generated from these
//! declarations ([`for_each_method!`]: a declared method without a handler does not compile)
//! and parses each method's params as its declared type; its OpenRPC document is built from
//! [`ALL`]; the CLI calls through the [`Method`] types. So the three cannot disagree on a name
//! or a params type.
//!
//! To add a method: declare it in its family's file under `crate::rpc` (`rpc/node.rs`), beside
//! its params and result types; the compiler then asks for the daemon's `Handle` impl next to
//! its handler. The methods not yet moved to a family are declared in the core table here,
//! their types in `rpc.rs`; a new family is one `methods!` table plus its line in [`TABLES`]
//! and [`for_each_method!`].

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::event::Event;
use crate::projection::{RunDetail, RunSummary};
use crate::rpc;

/// A method's name and types; one zero-sized type per method below.
pub trait Method {
    const ID: MethodId;
    const NAME: &'static str = Self::ID.name();
    type Params: Serialize + DeserializeOwned;
    type Result: DeserializeOwned;
}

/// One parameter of a method, as `rpc.discover` describes it: name, required, JSON Schema
/// (as JSON text), description.
#[derive(Debug)]
pub struct ParamSpec {
    pub name: &'static str,
    pub required: bool,
    pub schema: &'static str,
    pub doc: &'static str,
}

/// One method, as `rpc.discover` describes it.
#[derive(Debug)]
pub struct MethodInfo {
    pub id: MethodId,
    pub name: &'static str,
    pub summary: &'static str,
    pub params: &'static [ParamSpec],
    /// The result's JSON Schema, as JSON text.
    pub result: &'static str,
}

/// The params of a method that takes none: still an object, and unknown fields are refused.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoParams {}

/// A method, by its declared name (`M::ID` for method type `M`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MethodId(&'static str);

impl MethodId {
    /// This method's declaration.
    pub fn info(self) -> &'static MethodInfo {
        ALL.iter()
            .copied()
            .find(|m| m.id == self)
            .expect("every MethodId comes from a declaration")
    }

    pub const fn name(self) -> &'static str {
        self.0
    }

    /// The method of a request's `method` string, if there is one.
    pub fn from_name(name: &str) -> Option<MethodId> {
        ALL.iter().find(|m| m.name == name).map(|m| m.id)
    }
}

/// Declares one table of methods — the core's below, or a family's beside its params and
/// result types (`crate::rpc::node`): for each, a zero-sized type implementing [`Method`];
/// `METHODS`, the table; and the exported macro named after `each:`, which calls
/// `$m! { TypeA, TypeB, … }` with the table's type names.
#[macro_export]
macro_rules! methods {
    ($d:tt; each: $each:ident; $(
        $ty:ident($params:ty) -> $result:ty {
            name: $name:literal,
            summary: $summary:expr,
            params: $pspec:expr,
            result: $rspec:expr $(,)?
        }
    ),* $(,)?) => {
        $(
            #[doc = concat!("`", $name, "`")]
            #[derive(Debug, Clone, Copy)]
            pub struct $ty;
            impl $crate::method::Method for $ty {
                const ID: $crate::method::MethodId = $crate::method::MethodId::declared($name);
                type Params = $params;
                type Result = $result;
            }
        )*

        #[doc(hidden)]
        #[macro_export]
        macro_rules! $each {
            ($d m:ident) => { $d m! { $($ty),* } };
        }

        /// This table's declarations, in the order `rpc.discover` lists them.
        pub const METHODS: &[$crate::method::MethodInfo] = &[$(
            $crate::method::MethodInfo {
                id: $crate::method::MethodId::declared($name),
                name: $name,
                summary: $summary,
                params: $pspec,
                result: $rspec,
            }
        ),*];
    };
}

impl MethodId {
    /// For [`methods!`] only: a name it declares.
    #[doc(hidden)]
    pub const fn declared(name: &'static str) -> MethodId {
        MethodId(name)
    }
}

/// Every table: the core's, then each family's (a new family adds its line here and in
/// [`for_each_method!`]; a new method in a family touches neither).
const TABLES: &[&[MethodInfo]] = &[METHODS, crate::rpc::node::METHODS];

/// Every method's declaration, in the order `rpc.discover` lists them.
pub static ALL: std::sync::LazyLock<Vec<&'static MethodInfo>> =
    std::sync::LazyLock::new(|| TABLES.iter().flat_map(|t| t.iter()).collect());

/// Calls `$m! { DaemonStatus, DaemonShutdown, … }` once per table with its method type names
/// (all reachable as `method::Name`): for code that must handle each declared method (the
/// daemon's dispatch).
#[macro_export]
macro_rules! for_each_method {
    ($m:ident) => {{
        $crate::each_core_method!($m);
        $crate::each_node_method!($m);
    }};
}

/// The family tables' method types, so every method is `method::Name` (the glob also brings
/// the families' params and result types along, under the same names as in `rpc`).
pub use crate::rpc::node::*;

pub(crate) const RUN_PARAM: ParamSpec = ParamSpec {
    name: "run",
    required: true,
    schema: r#"{"type":"string","description":"a run id (ULID) or a unique prefix of at least 6 characters"}"#,
    doc: "the run",
};

pub(crate) const NODE_PARAM: ParamSpec = ParamSpec {
    name: "node",
    required: true,
    schema: r#"{"type":"string","pattern":"^[a-z0-9][a-z0-9-]{0,62}$"}"#,
    doc: "the node",
};

const RESUME_PARAM: ParamSpec = ParamSpec {
    name: "resume",
    required: false,
    schema: r#"{"type":"boolean","default":false}"#,
    doc: "continue the node's Claude Code conversation in its kept worktree",
};

pub(crate) const MESSAGE_PARAM: ParamSpec = ParamSpec {
    name: "message",
    required: false,
    schema: r#"{"type":"string","maxLength":4096}"#,
    doc: "a one-line summary",
};

pub(crate) const APPEND_RESULT: &str = r#"{"type":"object","required":["seq","id"]}"#;

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

const AGENT_PARAM: ParamSpec = ParamSpec {
    name: "agent",
    required: false,
    schema: r#"{"type":"string"}"#,
    doc: "the agent profile",
};

const MAX_PARALLEL_PARAM: ParamSpec = ParamSpec {
    name: "max_parallel",
    required: false,
    schema: r#"{"oneOf":[{"type":"integer","minimum":1,"maximum":256},{"const":"auto"}]}"#,
    doc: "at most this many agents alive at once; auto (the default) derives it from cores and memory",
};

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

methods! {
    $;
    each: each_core_method;
    DaemonStatus(NoParams) -> rpc::DaemonStatus {
        name: "daemon.status",
        summary: "The daemon's pid, version, protocol, home, uptime and notifiers (`notify`: their last failure).",
        params: &[],
        result: r#"{"type":"object","required":["pid","version","protocol","home","uptime_s"]}"#,
    },
    DaemonShutdown(NoParams) -> Value {
        name: "daemon.shutdown",
        summary: "Finish in-flight appends, remove the socket and exit.",
        params: &[],
        result: r#"{"type":"object","properties":{"stopping":{"type":"boolean"}}}"#,
    },
    RunCreate(rpc::RunCreateParams) -> RunSummary {
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
    RunList(rpc::RunListParams) -> Vec<RunSummary> {
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
    RunShow(rpc::RunParams) -> RunDetail {
        name: "run.show",
        summary: "One run: its summary, nodes, discussions and spin-off proposals.",
        params: &[RUN_PARAM],
        result: r#"{"type":"object","required":["manifest","nodes","discussions","spinoffs"]}"#,
    },
    RunRebuild(rpc::RunParams) -> rpc::RebuildResult {
        name: "run.rebuild",
        summary: "Re-derive a run's projection files from its log alone.",
        params: &[RUN_PARAM],
        result: r#"{"type":"object","required":["run","events","files"]}"#,
    },
    EventAppend(rpc::EventAppendParams) -> rpc::AppendResult {
        name: "event.append",
        summary: "Append one event; answered once it is on disk.",
        params: &[
            RUN_PARAM,
            ParamSpec {
                name: "node",
                required: false,
                schema: r#"{"type":"string","pattern":"^[a-z0-9][a-z0-9-]{0,62}$"}"#,
                doc: "the node the event is about",
            },
            ParamSpec {
                name: "type",
                required: true,
                schema: r#"{"type":"string","description":"an event type a client may append to this kind of run, or x.<name>"}"#,
                doc: "the event type",
            },
            ParamSpec {
                name: "data",
                required: false,
                schema: r#"{"type":"object","description":"at most 64 KiB"}"#,
                doc: "the payload",
            },
            ParamSpec {
                name: "idempotency_key",
                required: false,
                schema: r#"{"type":"string","maxLength":128}"#,
                doc: "a repeat with the same key returns the first append's seq and id and writes nothing",
            },
            ParamSpec {
                name: "actor",
                required: false,
                schema: r#"{"type":"string","enum":["agent","human","tool"]}"#,
                doc: "who says it (default human)",
            },
        ],
        result: r#"{"type":"object","required":["seq","id"],"properties":{"seq":{"type":"integer"},"id":{"type":"string"}}}"#,
    },
    EventList(rpc::EventListParams) -> Vec<Event> {
        name: "event.list",
        summary: "A run's events after a seq.",
        params: &[
            RUN_PARAM,
            ParamSpec {
                name: "since",
                required: false,
                schema: r#"{"type":"integer","minimum":0}"#,
                doc: "only events with a greater seq (default 0)",
            },
            ParamSpec {
                name: "limit",
                required: false,
                schema: r#"{"type":"integer","minimum":1}"#,
                doc: "at most this many events",
            },
        ],
        result: r##"{"type":"array","items":{"$ref":"#/components/schemas/Event"}}"##,
    },
    RunQuarantine(rpc::RunParams) -> Value {
        name: "run.quarantine",
        summary: "Set a corrupt run aside: move its directory to $OCTL_HOME/corrupt/<RUN>; the daemon forgets it, nothing is deleted.",
        params: &[RUN_PARAM],
        result: r#"{"type":"object","required":["run","moved_to"]}"#,
    },
    RunCancel(rpc::CancelParams) -> RunSummary {
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
    SpawnSpinoff(rpc::SpawnParams) -> RunSummary {
        name: "spawn.spinoff",
        summary: "Start an autonomous agent in a new worktree; merged into base when done.",
        params: SPAWN_PARAMS,
        result: r##"{"$ref":"#/components/schemas/RunSummary"}"##,
    },
    SpawnCode(rpc::SpawnParams) -> RunSummary {
        name: "spawn.code",
        summary: "Start an interactive agent in a new worktree; merged when a human runs merge.",
        params: SPAWN_PARAMS,
        result: r##"{"$ref":"#/components/schemas/RunSummary"}"##,
    },
    Merge(rpc::MergeParams) -> rpc::MergeResult {
        name: "merge",
        summary: "Merge a node's branch into its target (code runs, retries after a conflict or a blocked merge).",
        params: &[
            RUN_PARAM,
            ParamSpec {
                name: "node",
                required: false,
                schema: r#"{"type":"string"}"#,
                doc: "the node (default: the run's only node)",
            },
            ParamSpec {
                name: "accept_failed",
                required: false,
                schema: r#"{"type":"boolean"}"#,
                doc: "merge a failed or exited node's branch as it is committed (a human's say-so)",
            },
        ],
        result: r#"{"type":"object","required":["run","node","state","target","merge_commit"]}"#,
    },
    RunRetry(rpc::RetryParams) -> RunSummary {
        name: "run.retry",
        summary: "Start a failed, exited or unmerged node of any agent run again (from the integration tip in a DAG, else from base); a run that ended failed becomes active again. Answers once its old branch and worktree are saved under a snapshot ref. With resume, a node whose agent died continues its Claude Code conversation in its kept worktree and branch instead.",
        params: &[RUN_PARAM, NODE_PARAM, RESUME_PARAM],
        result: r##"{"$ref":"#/components/schemas/RunSummary"}"##,
    },
    FanoutStart(rpc::FanoutParams) -> RunSummary {
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
    FanoutManifest(rpc::RunParams) -> rpc::ManifestDoc {
        name: "fanout.manifest",
        summary: "The manifest of a fan-out run, as given.",
        params: &[RUN_PARAM],
        result: r#"{"type":"object","required":["run","format","path","text"]}"#,
    },
    OrchestrateStart(rpc::OrchestrateParams) -> RunSummary {
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
    DiscussionAsk(rpc::AskParams) -> rpc::Opened {
        name: "discussion.ask",
        summary: "Ask a human a question (opens a discussion; the asking node shows waiting).",
        params: &[
            RUN_PARAM,
            ParamSpec { name: "node", required: false, schema: r#"{"type":"string"}"#, doc: "the asking node" },
            ParamSpec { name: "title", required: true, schema: r#"{"type":"string","maxLength":500}"#, doc: "the question" },
            ParamSpec { name: "body", required: false, schema: r#"{"type":"string"}"#, doc: "details" },
        ],
        result: r#"{"type":"object","required":["id","run"]}"#,
    },
    DiscussionList(rpc::ListParams) -> Vec<rpc::DiscussionItem> {
        name: "discussion.list",
        summary: "Discussions of one run or of all, optionally only open ones.",
        params: &[
            ParamSpec { name: "run", required: false, schema: r#"{"type":"string"}"#, doc: "only this run" },
            ParamSpec { name: "open", required: false, schema: r#"{"type":"boolean"}"#, doc: "only open (true) or answered (false) ones" },
        ],
        result: r#"{"type":"array"}"#,
    },
    DiscussionAnswer(rpc::AnswerParams) -> rpc::DiscussionItem {
        name: "discussion.answer",
        summary: "A human answers a discussion (once: the first answer written wins; a merge-conflict question is settled by merging and refused here).",
        params: &[
            ParamSpec { name: "id", required: true, schema: r#"{"type":"string"}"#, doc: "the discussion: its id or a unique prefix of at least 6 characters" },
            ParamSpec { name: "text", required: true, schema: r#"{"type":"string"}"#, doc: "the answer" },
        ],
        result: r#"{"type":"object"}"#,
    },
    SpinoffPropose(rpc::ProposeParams) -> rpc::Opened {
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
    SpinoffList(rpc::ListParams) -> Vec<rpc::Proposal> {
        name: "spinoff.list",
        summary: "Spin-off proposals of one run or of all.",
        params: &[ParamSpec { name: "run", required: false, schema: r#"{"type":"string"}"#, doc: "only this run" }],
        result: r#"{"type":"array"}"#,
    },
    SpinoffAccept(rpc::AcceptParams) -> rpc::Accepted {
        name: "spinoff.accept",
        summary: "Accept a proposal: start a spinoff run for it, linked to the parent run both ways (once: the first decision written wins; a loser starts nothing). The agent defaults to the proposing node's.",
        params: &[
            ParamSpec { name: "id", required: true, schema: r#"{"type":"string"}"#, doc: "the proposal: its id or a unique prefix of at least 6 characters" },
            AGENT_PARAM,
        ],
        result: r#"{"type":"object","required":["proposal","run"]}"#,
    },
    SpinoffReject(rpc::RejectParams) -> rpc::Proposal {
        name: "spinoff.reject",
        summary: "Reject a proposal, saying why.",
        params: &[
            ParamSpec { name: "id", required: true, schema: r#"{"type":"string"}"#, doc: "the proposal: its id or a unique prefix of at least 6 characters" },
            ParamSpec { name: "reason", required: true, schema: r#"{"type":"string"}"#, doc: "why" },
        ],
        result: r#"{"type":"object"}"#,
    },
    RunGc(rpc::GcParams) -> rpc::GcResult {
        name: "run.gc",
        summary: "Remove what completed, failed and cancelled runs left behind (worktrees, windows, branches) and what no run owns, snapshotting every worktree and unmerged branch tip under refs/octl/snapshots/<RUN>/<NODE> first and moving the files git ignores to $OCTL_HOME/kept/<RUN>/<NODE>/<N>/.",
        params: &[
            ParamSpec {
                name: "dry_run",
                required: false,
                schema: r#"{"type":"boolean"}"#,
                doc: "list what would be removed and change nothing",
            },
            ParamSpec {
                name: "older_than",
                required: false,
                schema: r#"{"type":"string","pattern":"^[0-9]+[dhms]$"}"#,
                doc: "also delete the kept ignored files of runs that ended longer ago than this (7d, 12h, 30m, 45s)",
            },
        ],
        result: r#"{"type":"object","required":["dry_run","removed","kept"],"properties":{"dry_run":{"type":"boolean"},"removed":{"type":"array","items":{"type":"object","required":["kind","why"]}},"kept":{"type":"array","items":{"type":"object","required":["kind","why","reason"]}}}}"#,
    },
    Recover(rpc::RecoverParams) -> rpc::RecoverResult {
        name: "recover",
        summary: "Create a branch at a node's snapshot (refs/octl/snapshots/<RUN>/<NODE>), and with worktree a worktree of it holding the node's kept ignored files; never overwrites a branch or files.",
        params: &[
            ParamSpec { name: "run", required: false, schema: r#"{"type":"string"}"#, doc: "the run (with node), or else ref and repo" },
            ParamSpec { name: "node", required: false, schema: r#"{"type":"string"}"#, doc: "the node whose snapshot to recover" },
            ParamSpec { name: "ref", required: false, schema: r#"{"type":"string","pattern":"^refs/octl/snapshots/[^/]+/[^/]+$"}"#, doc: "a snapshot ref no run owns (an orphan's)" },
            ParamSpec { name: "repo", required: false, schema: r#"{"type":"string"}"#, doc: "the repository holding ref (absolute)" },
            ParamSpec { name: "worktree", required: false, schema: r#"{"type":"string"}"#, doc: "a new worktree of the branch here (absolute, not existing or empty), with the kept ignored files moved back in" },
            ParamSpec {
                name: "branch",
                required: false,
                schema: r#"{"type":"string","description":"a name git check-ref-format --branch accepts, outside octl/"}"#,
                doc: "the branch to create (default recovered/<first 8 characters of RUN>/<NODE>)",
            },
        ],
        result: r#"{"type":"object","required":["run","node","repo","branch","commit","snapshot_ref"]}"#,
    },
    DoctorRuns(NoParams) -> rpc::DoctorRunsResult {
        name: "doctor.runs",
        summary: "Per run: whether its log replays and its projection files match what the log derives (reads only).",
        params: &[],
        result: r#"{"type":"object","required":["runs"],"properties":{"runs":{"type":"array","items":{"type":"object","required":["run","ok","events"]}}}}"#,
    },
    DoctorOrphans(NoParams) -> Value {
        name: "doctor.orphans",
        summary: "Worktrees, branches and windows under the daemon's names that no run owns (reads only).",
        params: &[],
        result: r#"{"type":"object","required":["orphans"],"properties":{"orphans":{"type":"array","items":{"type":"object","required":["kind","why"]}}}}"#,
    },
    DoctorAgents(NoParams) -> rpc::DoctorAgentsResult {
        name: "doctor.agents",
        summary: "Every agent profile, its program, and whether the daemon finds it on its PATH.",
        params: &[],
        result: r#"{"type":"object","required":["agents"]}"#,
    },
    DoctorRunners(NoParams) -> rpc::DoctorRunnersResult {
        name: "doctor.runners",
        summary: "Every runner (local and those of config.toml) and whether it answers: SSH hosts reached, Slurm's sinfo answering.",
        params: &[],
        result: r#"{"type":"object","required":["runners"]}"#,
    },
    RpcDiscover(NoParams) -> Value {
        name: "rpc.discover",
        summary: "This OpenRPC document.",
        params: &[],
        result: r#"{"type":"object"}"#,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_names_and_all_agree_both_ways() {
        for m in ALL.iter() {
            assert_eq!(MethodId::from_name(m.name), Some(m.id), "{}", m.name);
            assert_eq!(m.id.name(), m.name);
        }
        let mut names: Vec<&str> = ALL.iter().map(|m| m.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ALL.len(), "a method is declared twice");
        assert_eq!(MethodId::from_name("run.nope"), None);
        assert_eq!(RunShow::NAME, "run.show");
    }

    #[test]
    fn every_schema_is_json() {
        for m in ALL.iter() {
            serde_json::from_str::<Value>(m.result).unwrap_or_else(|e| panic!("{}: {e}", m.name));
            for p in m.params {
                serde_json::from_str::<Value>(p.schema)
                    .unwrap_or_else(|e| panic!("{} {}: {e}", m.name, p.name));
            }
        }
    }

    #[test]
    fn no_params_is_an_empty_object() {
        assert_eq!(serde_json::to_string(&NoParams {}).unwrap(), "{}");
    }
}
