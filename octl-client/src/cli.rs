//! The command line, as clap derive definitions: global flags, then one enum per command group.
//! Groups are declared in the order a newcomer needs them; that is the order `--help` shows.
//! To add a group: a variant in [`Group`], its command enum here, a file in `commands/`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

const TOP_EXAMPLES: &str = "\
Examples:
  orchestratectl demo                                   # see the whole loop, no AI needed
  orchestratectl spawn spinoff 'add a --verbose flag to the CLI' --wait
  orchestratectl spawn code 'refactor the parser'       # then: run attach RUN, merge RUN
  orchestratectl fan-out --manifest units.toml --max-parallel auto
  orchestratectl orchestrate --plan plan.toml           # a DAG through an integration branch
  orchestratectl run list
  orchestratectl run watch 01JDXJ5R
  orchestratectl run wait 01JDXJ5R
  orchestratectl merge 01JDXJ5R
  orchestratectl discussion list --open                 # questions agents are waiting on
  orchestratectl skill install                          # the /worktree-* skills for Claude Code
  orchestratectl --json run show 01JDXJ5R

The daemon (octld) starts by itself on the first command that needs it.
State lives in --home, else $OCTL_HOME, else ~/.orchestratectl.
Exit codes: 0 ok, 1 internal, 2 invalid input, 3 not found, 4 refused by state,
5 daemon unreachable, 6 external tool failed.";

/// Orchestrate AI coding agents in git worktrees, through the octld daemon.
#[derive(Debug, Parser)]
#[command(
    name = "orchestratectl",
    version,
    after_help = TOP_EXAMPLES,
    arg_required_else_help = true,
    disable_help_subcommand = true
)]
pub struct Cli {
    /// Print exactly one JSON document on stdout (streams: one JSON object per line), and
    /// errors as {"error":{"kind","message","hint"}} on stderr
    #[arg(long, global = true, help_heading = "Global options")]
    pub json: bool,

    /// State directory (socket, log, runs); default $OCTL_HOME, else ~/.orchestratectl
    #[arg(
        long,
        global = true,
        value_name = "DIR",
        help_heading = "Global options"
    )]
    pub home: Option<PathBuf>,

    #[command(subcommand)]
    pub group: Group,
}

#[derive(Debug, Subcommand)]
pub enum Group {
    /// Start one AI agent in its own git worktree and branch (spinoff: merges itself; code: a
    /// human attaches and merges)
    #[command(subcommand, after_help = SPAWN_EXAMPLES)]
    Spawn(SpawnCmd),

    /// Run N disjoint units from one manifest in parallel, each in its own worktree, at most
    /// --max-parallel agents alive at once; each unit merges into base as it finishes
    ///
    /// The manifest (TOML or JSON, by its extension) has a `prompt` template with {var}
    /// placeholders, optional `agent` and `gate`, and [[units]], each with an `id` and its
    /// `vars`. The daemon checks it whole and reports every problem at once (exit 2), creating
    /// nothing. Each unit merges into base as soon as it is done (one merge at a time); a unit
    /// that fails or conflicts stops only itself. Every agent can read the manifest
    /// ($OCTL_MANIFEST, or `orchestratectl fan-out manifest`).
    #[command(
        name = "fan-out",
        after_help = FANOUT_EXAMPLES,
        args_conflicts_with_subcommands = true,
        subcommand_negates_reqs = true
    )]
    FanOut(FanOutArgs),

    /// Run a DAG of tasks: each node starts from a shared integration branch once its
    /// dependencies are merged into it; at the end the integration branch is merged into base
    ///
    /// The plan (TOML or JSON, by its extension) lists nodes with `id`, `task`, `deps`, and
    /// optional `agent` and `gate`. The daemon checks it whole (unknown deps, duplicate ids,
    /// the reserved id `integration`, cycles naming their nodes) and reports every problem at
    /// once (exit 2), creating nothing. The integration branch octl/<RUN>/integration starts
    /// from base; a node that fails or conflicts blocks only its dependents (`run retry` starts
    /// it again). When every node is merged, `orchestratectl merge RUN` (or --auto-merge)
    /// merges integration into base.
    #[command(after_help = ORCHESTRATE_EXAMPLES)]
    Orchestrate(OrchestrateArgs),

    /// Create, list, inspect, watch, wait for, retry, cancel and attach to runs, read their
    /// agents' logs (a run is one piece of orchestrated work)
    #[command(subcommand, after_help = RUN_EXAMPLES)]
    Run(RunCmd),

    /// Merge a node's branch into its base branch (code runs, and retries after a conflict or a
    /// blocked merge)
    ///
    /// The daemon computes the merge without touching any worktree (`git merge-tree`), moves
    /// the base branch only if it is clean for the changed paths, then removes the node's
    /// window, worktree and branch. A conflict or a dirty base moves nothing (exit 4).
    #[command(after_help = MERGE_EXAMPLES)]
    Merge(MergeArgs),

    /// Report from inside an agent: done, failed, or progress (run and node come from the
    /// environment)
    #[command(subcommand, after_help = NODE_EXAMPLES)]
    Node(NodeCmd),

    /// Questions from agents to a human: ask (and wait for the answer), list, answer
    #[command(subcommand, after_help = DISCUSSION_EXAMPLES)]
    Discussion(DiscussionCmd),

    /// Spin-off proposals: an agent proposes separate work, a human accepts it (a new linked
    /// spinoff run starts) or rejects it
    #[command(subcommand, after_help = SPINOFF_EXAMPLES)]
    Spinoff(SpinoffCmd),

    /// The bundled Claude Code skills: list them, print one, install them into Claude Code
    #[command(subcommand, after_help = SKILL_EXAMPLES)]
    Skill(SkillCmd),

    /// Turn a node's snapshot (refs/octl/snapshots/RUN/NODE) back into a branch
    ///
    /// A snapshot is taken whenever a node's worktree is removed (after a merge, `run cancel
    /// --discard`, `run retry`, `run gc`): a commit holding everything the worktree had,
    /// uncommitted and untracked files included, on top of the node's last commit. `recover`
    /// creates a new branch there (default recovered/<first 8 characters of RUN>/<NODE>) and
    /// prints it with its commit. Files git ignores (.env, *.local, target/) are not in a
    /// snapshot: they were moved to $OCTL_HOME/kept/<RUN>/<NODE>/<N>/, and --worktree PATH
    /// checks the new branch out there and moves them back in (without it, the answer says
    /// where they are). --ref REF --repo PATH recovers a snapshot no run owns (an orphan's, as
    /// `run gc` names it). It never overwrites a branch or files (exit 4), a second --worktree
    /// of the same kept files is refused (exit 4, nothing changed), and it exits 3 when the
    /// node has no snapshot. `run show RUN` lists the nodes' snapshot refs and kept files.
    #[command(after_help = crate::commands::recover::RECOVER_EXAMPLES)]
    Recover(crate::commands::recover::RecoverArgs),

    /// See it work without Claude Code or an API key: four shell agents in a throwaway
    /// repository, one of them conflicting
    ///
    /// Makes a git repository in a temporary directory, spawns four spinoffs with the `shell`
    /// agent on its `main` branch (two add a file, two rewrite greeting.txt differently), shows
    /// their progress, and then where every result is: three merged into main, one waiting on
    /// a conflict with its branch and worktree kept. Exits 0 when it ended that way.
    #[command(after_help = DEMO_EXAMPLES)]
    Demo(DemoArgs),

    /// Append to and read a run's event log
    #[command(subcommand, after_help = EVENT_EXAMPLES)]
    Event(EventCmd),

    /// Start, stop, restart and inspect the octld daemon (it also starts by itself when needed)
    #[command(subcommand, after_help = DAEMON_EXAMPLES)]
    Daemon(DaemonCmd),

    /// Check the tools, the daemon, permissions, free disk space, runs, orphans, skills and the service unit
    ///
    /// One line per check (ok, warn or FAIL, its id, what was found), with a hint under every
    /// warning and failure, then a summary. Exits 1 when a check fails, else 0 (warnings
    /// included). Never starts the daemon: with it down, the checks that need it fail.
    #[command(after_help = crate::commands::doctor::DOCTOR_EXAMPLES)]
    Doctor(crate::commands::doctor::DoctorArgs),

    /// Print the version of orchestratectl and of its protocol
    #[command(after_help = "Examples:\n  orchestratectl version\n  orchestratectl --json version")]
    Version,
}

// ---------------------------------------------------------------------------------------------
// spawn

const SPAWN_EXAMPLES: &str = "\
Examples:
  orchestratectl spawn spinoff 'fix the typo in README.md'
  orchestratectl spawn code 'add pagination to /users' --node pagination
  orchestratectl spawn spinoff --agent shell 'date > now.txt' --wait";

#[derive(Debug, Subcommand)]
pub enum SpawnCmd {
    /// Start an autonomous agent in a new worktree; when it reports done, its branch is merged
    /// into base and its window, worktree and branch are removed
    ///
    /// Creates a run of kind `spinoff` with one node, the branch octl/<RUN>/<NODE> from the tip
    /// of base, the worktree $OCTL_HOME/worktrees/<RUN>/<NODE>, and a window on the daemon's
    /// private tmux server running the agent. Prints the run and where its work happens.
    #[command(after_help = "\
Examples:
  orchestratectl spawn spinoff 'fix the off-by-one in src/page.rs; add a test'
  orchestratectl spawn spinoff --node typo --gate 'cargo test' 'fix the typo in src/net.rs'
  orchestratectl spawn spinoff --agent shell 'printf hi > hi.txt' --wait
  orchestratectl spawn spinoff --task-file task.md       # a long task, sent as written
  generate-task | orchestratectl spawn spinoff --task-file -
  orchestratectl spawn spinoff -- '-x is a task starting with a dash'")]
    Spinoff(SpawnArgs),

    /// Start an interactive agent in a new worktree, for a human to attach to, review and merge
    ///
    /// Like `spawn spinoff`, but nothing is merged by itself: attach with
    /// `orchestratectl run attach RUN`, and merge with `orchestratectl merge RUN` when the work
    /// is ready (the run waits for that once the agent reports done).
    #[command(after_help = "\
Examples:
  orchestratectl spawn code 'refactor the config loader'
  orchestratectl spawn code --repo ~/src/api --base develop --node loader 'split config.rs'
  orchestratectl spawn code --task-file notes/settings-page.md
  orchestratectl run attach 01JDXJ5R          # then, when the work is ready:
  orchestratectl merge 01JDXJ5R")]
    Code(SpawnArgs),
}

#[derive(Debug, Args)]
pub struct SpawnArgs {
    /// What the agent should do: its prompt (for `--agent shell`, a shell script run in the
    /// worktree). Sent exactly as given; put `--` before it if it starts with a dash. At most
    /// 32 KiB (32768 bytes) of UTF-8; or give it with --task-file
    #[arg(
        value_name = "TASK",
        required_unless_present = "task_file",
        conflicts_with = "task_file"
    )]
    pub task: Option<String>,

    /// Read the task from this file, or from standard input with `-`, instead of TASK: sent
    /// exactly as read, at most 32 KiB (32768 bytes) of UTF-8
    #[arg(long, value_name = "PATH|-")]
    pub task_file: Option<PathBuf>,

    /// The git repository to work in (any directory inside it); default: the current directory
    #[arg(long, value_name = "DIR")]
    pub repo: Option<PathBuf>,

    /// The branch to start from and to merge into; default: the repository's current branch
    #[arg(long, value_name = "BRANCH")]
    pub base: Option<String>,

    /// The agent profile: `claude`, `shell`, or a profile [agents.NAME] from
    /// $OCTL_HOME/config.toml; default: the configured default, else `claude`
    #[arg(long, value_name = "PROFILE")]
    pub agent: Option<String>,

    /// The node's name, also the end of its branch name (1-63 of a-z, 0-9 and '-');
    /// default: chosen by the daemon
    #[arg(long, value_name = "NAME")]
    pub node: Option<String>,

    /// A shell command run in the worktree after the agent reports done and before the merge
    /// (e.g. 'cargo test'); if it fails the node fails and its branch is kept
    #[arg(long, value_name = "CMD")]
    pub gate: Option<String>,

    /// Then wait like `run wait`: show progress until the run completes, fails, is cancelled
    /// or waits for a human, and exit as `run wait` does (0 completed, 4 otherwise)
    #[arg(long)]
    pub wait: bool,
}

// ---------------------------------------------------------------------------------------------
// merge

const MERGE_EXAMPLES: &str = "\
Examples:
  orchestratectl merge 01JDXJ5R
  orchestratectl merge 01JDXJ5R --node api
  orchestratectl merge 01JDXJ5R            # an orchestrate run: its integration branch into base
  orchestratectl --json merge 01JDXJ5R     # {run, node, state, merge_commit, target}
  orchestratectl merge 01JDXJ5R --node api --accept-failed   # a failed node, as committed

After a conflict (exit 4, kind merge_conflict): resolve it in the node's worktree
(git merge <BASE>, fix the files, commit), then run the same merge again.
After target_dirty (exit 4): commit or stash the changes in the checkout of the base
branch, then run the same merge again.";

#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The run: its full id (a ULID) or a unique prefix of at least 6 characters
    #[arg(value_name = "RUN")]
    pub run: String,

    /// The node to merge; default: the run's only node (needed when it has several). For an
    /// orchestrate run, leave it out to merge the integration branch into base
    #[arg(long, value_name = "NODE")]
    pub node: Option<String>,

    /// Merge a failed or exited node anyway: its branch as it is committed (uncommitted files
    /// are kept in its snapshot). Only on a human's say-so; `run retry` starts it over instead
    #[arg(long)]
    pub accept_failed: bool,
}

// ---------------------------------------------------------------------------------------------
// fan-out

const FANOUT_EXAMPLES: &str = "\
Examples:
  orchestratectl fan-out --manifest units.toml
  orchestratectl fan-out --manifest units.json --max-parallel 3 --agent shell --wait
  orchestratectl fan-out --manifest units.toml --max-parallel auto --gate 'cargo test'
  orchestratectl --json fan-out --manifest units.toml    # the run summary
  orchestratectl fan-out manifest                        # inside a unit's agent window

A manifest (units.toml):
  prompt = \"Port the {module} module to the new logging API; keep its tests green.\"
  [[units]]
  id = \"net\"
  vars = { module = \"net\" }
  [[units]]
  id = \"db\"
  vars = { module = \"db\" }";

#[derive(Debug, Args)]
pub struct FanOutArgs {
    #[command(subcommand)]
    pub cmd: Option<FanOutCmd>,

    #[command(flatten)]
    pub start: FanOutStartArgs,
}

#[derive(Debug, Args)]
pub struct FanOutStartArgs {
    /// The manifest: a .toml or .json file of at most 1 MiB (symlinks and '..' are resolved;
    /// its text is sent to the daemon, which keeps a copy in the run's directory)
    #[arg(long, value_name = "FILE", required = true)]
    pub manifest: Option<PathBuf>,

    #[command(flatten)]
    pub common: StartArgs,

    /// A shell command run in each unit's worktree after its agent reports done and before
    /// the merge (e.g. 'cargo test'); overrides the manifest's `gate`
    #[arg(long, value_name = "CMD")]
    pub gate: Option<String>,
}

/// The flags `fan-out` and `orchestrate` share.
#[derive(Debug, Args)]
pub struct StartArgs {
    /// At most this many agents alive at once: a number from 1 to 256, or `auto`
    /// (max(1, min(2 × cores, available memory in GiB)), at most 32; the chosen number and
    /// what it came from are recorded in the run); default: auto
    #[arg(long, value_name = "N|auto")]
    pub max_parallel: Option<String>,

    /// The git repository to work in (any directory inside it); default: the current directory
    #[arg(long, value_name = "DIR")]
    pub repo: Option<PathBuf>,

    /// The branch to start from and to merge into; default: the repository's current branch
    #[arg(long, value_name = "BRANCH")]
    pub base: Option<String>,

    /// The agent profile for every unit or node that names none: `claude`, `shell`, or a
    /// profile [agents.NAME] from $OCTL_HOME/config.toml; default: the configured default
    #[arg(long, value_name = "PROFILE")]
    pub agent: Option<String>,

    /// Then wait like `run wait`: show progress until the run completes, fails, is cancelled
    /// or waits for a human, and exit as `run wait` does (0 completed, 4 otherwise)
    #[arg(long)]
    pub wait: bool,
}

#[derive(Debug, Subcommand)]
pub enum FanOutCmd {
    /// Print a fan-out run's manifest exactly as it was given (for the units' agents)
    ///
    /// Without --run, inside a unit's agent window, prints the file $OCTL_MANIFEST names
    /// (no daemon needed); otherwise asks the daemon for the manifest of --run, else $OCTL_RUN.
    #[command(after_help = "\
Examples:
  orchestratectl fan-out manifest                    # inside a unit's agent window
  orchestratectl fan-out manifest --run 01JDXJ5R
  orchestratectl --json fan-out manifest --run 01JDXJ5R   # {run, format, path, text}")]
    Manifest(FanOutManifestArgs),
}

#[derive(Debug, Args)]
pub struct FanOutManifestArgs {
    /// The fan-out run: a ULID or a unique prefix of at least 6 characters; default: the file
    /// $OCTL_MANIFEST names, else the run $OCTL_RUN (both set in every unit's window)
    #[arg(long, value_name = "RUN")]
    pub run: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// orchestrate

const ORCHESTRATE_EXAMPLES: &str = "\
Examples:
  orchestratectl orchestrate --plan plan.toml
  orchestratectl orchestrate --plan plan.json --auto-merge --max-parallel 4 --wait
  orchestratectl orchestrate --plan plan.toml --agent shell --base develop
  orchestratectl --json orchestrate --plan plan.toml     # the run summary
  orchestratectl run watch 01JDXJ5R                      # then see it go
  orchestratectl merge 01JDXJ5R                          # when every node is merged

A plan (plan.toml): api and ui start once schema is merged into integration; docs last.
  [[nodes]]
  id = \"schema\"
  task = \"add the orders table and its migration\"
  [[nodes]]
  id = \"api\"
  task = \"add the /orders endpoints\"
  deps = [\"schema\"]
  [[nodes]]
  id = \"ui\"
  task = \"add the orders page\"
  deps = [\"schema\"]
  [[nodes]]
  id = \"docs\"
  task = \"document orders\"
  deps = [\"api\", \"ui\"]";

#[derive(Debug, Args)]
pub struct OrchestrateArgs {
    /// The plan: a .toml or .json file of at most 1 MiB (symlinks and '..' are resolved; its
    /// text is sent to the daemon, which keeps a copy in the run's directory)
    #[arg(long, value_name = "FILE")]
    pub plan: PathBuf,

    /// When every node is merged into the integration branch, merge it into base too
    /// (otherwise the run completes and waits for `orchestratectl merge RUN`)
    #[arg(long)]
    pub auto_merge: bool,

    #[command(flatten)]
    pub common: StartArgs,
}

// ---------------------------------------------------------------------------------------------
// discussion

const DISCUSSION_EXAMPLES: &str = "\
Examples:
  # an agent, inside its window (OCTL_RUN and OCTL_NODE are set):
  answer=$(orchestratectl discussion ask --title 'keep the v1 endpoint?' --body 'clients: …' --wait)
  # a human:
  orchestratectl discussion list --open
  orchestratectl discussion answer q-schema --text 'yes, keep it until June'";

#[derive(Debug, Subcommand)]
pub enum DiscussionCmd {
    /// Ask a human a question; with --wait, block until it is answered and print the answer
    ///
    /// The node shows `waiting` while the question is open. With --wait the answer alone is
    /// printed on stdout (with --json: {id, run, answer}), so an agent can capture it.
    #[command(after_help = "\
Examples:
  orchestratectl discussion ask --title 'which database for tests?'
  orchestratectl discussion ask --title 'drop Python 3.8?' --body 'CI still runs it' --wait
  orchestratectl discussion ask --title 'ok to rename Foo?' --wait --timeout 1800
  orchestratectl discussion ask --title 'which approach?' --body-file options.md --wait
  orchestratectl --json discussion ask --run 01JDXJ5R --title 'release today?'   # {id, run}")]
    Ask(DiscussionAskArgs),

    /// List discussions, of one run or of all runs
    #[command(after_help = "\
Examples:
  orchestratectl discussion list
  orchestratectl discussion list --open
  orchestratectl --json discussion list --run 01JDXJ5R")]
    List(DiscussionListArgs),

    /// Answer an open discussion (the agent waiting on it goes on)
    ///
    /// One answer per discussion: the first recorded wins; another answer is refused (exit 4)
    /// and the same answer again reports it. A merge-conflict question (`merge-…`, opened by
    /// the daemon) is settled by merging, not by text: answering it is refused, with the
    /// commands that resolve it, while its node can still merge.
    #[command(after_help = "\
Examples:
  orchestratectl discussion answer q-db --text 'use sqlite in tests'
  orchestratectl discussion answer 01jdxk7zq3 --text 'yes'     # a unique prefix of the id
  orchestratectl --json discussion answer q-db --text 'yes'   # the discussion")]
    Answer(DiscussionAnswerArgs),
}

#[derive(Debug, Args)]
pub struct DiscussionAskArgs {
    /// The question, in one line
    #[arg(long, value_name = "T")]
    pub title: String,

    /// Details: context, options, what the agent would do by default (at most 16 KiB)
    #[arg(long, value_name = "B", conflicts_with = "body_file")]
    pub body: Option<String>,

    /// Read the details from this file, or from standard input with `-`, instead of --body:
    /// at most 16 KiB (16384 bytes) of UTF-8
    #[arg(long, value_name = "PATH|-")]
    pub body_file: Option<PathBuf>,

    /// Block until a human answers, then print the answer alone on stdout
    #[arg(long)]
    pub wait: bool,

    /// With --wait: give up after S seconds (decimals allowed) with exit 1, kind `timeout`;
    /// the discussion stays open
    #[arg(long, value_name = "S", requires = "wait")]
    pub timeout: Option<f64>,

    /// The run: a ULID or a unique prefix of at least 6 characters; default $OCTL_RUN
    #[arg(long, env = "OCTL_RUN", hide_env_values = true, value_name = "RUN")]
    pub run: Option<String>,

    /// The node asking (optional): 1-63 of a-z, 0-9 and '-'; default $OCTL_NODE
    #[arg(long, env = "OCTL_NODE", hide_env_values = true, value_name = "NODE")]
    pub node: Option<String>,
}

#[derive(Debug, Args)]
pub struct DiscussionListArgs {
    /// Only this run's discussions: a ULID or a unique prefix of at least 6 characters;
    /// default $OCTL_RUN, else every run
    #[arg(long, env = "OCTL_RUN", hide_env_values = true, value_name = "RUN")]
    pub run: Option<String>,

    /// Only the discussions still waiting for an answer
    #[arg(long)]
    pub open: bool,
}

#[derive(Debug, Args)]
pub struct DiscussionAnswerArgs {
    /// The discussion's id, as `discussion list` shows it, or a unique prefix of at least 6
    /// of its characters
    #[arg(value_name = "ID")]
    pub id: String,

    /// The answer, sent as written
    #[arg(long, value_name = "T")]
    pub text: String,
}

// ---------------------------------------------------------------------------------------------
// spinoff

const SPINOFF_EXAMPLES: &str = "\
Examples:
  # an agent that noticed separate work (OCTL_RUN and OCTL_NODE are set):
  orchestratectl spinoff propose --task 'fix the flaky retry test' --why 'fails 1 in 5 on CI'
  # a human:
  orchestratectl spinoff list
  orchestratectl spinoff accept flaky-retry --agent claude
  orchestratectl spinoff reject flaky-retry --reason 'already tracked in #123'";

#[derive(Debug, Subcommand)]
pub enum SpinoffCmd {
    /// Propose a separate piece of work for a human to accept or reject
    #[command(after_help = "\
Examples:
  orchestratectl spinoff propose --task 'upgrade serde to 1.0.200'
  orchestratectl spinoff propose --task 'split utils.rs' --why 'it is 3000 lines'
  orchestratectl spinoff propose --task-file /tmp/proposal.md
  orchestratectl --json spinoff propose --run 01JDXJ5R --task 'x'   # {id, run}")]
    Propose(SpinoffProposeArgs),

    /// List spin-off proposals, of one run or of all runs
    #[command(after_help = "\
Examples:
  orchestratectl spinoff list
  orchestratectl --json spinoff list --run 01JDXJ5R")]
    List(SpinoffListArgs),

    /// Accept a proposal: start it as a new spinoff run, linked to the proposing run
    ///
    /// One decision per proposal: the first recorded wins and starts exactly one run; a
    /// decision that lost starts nothing and is refused (exit 4), and accepting again reports
    /// the existing run. A proposal whose run could not be created shows `failed` with the
    /// reason and may be accepted again or rejected.
    #[command(after_help = "\
Examples:
  orchestratectl spinoff accept flaky-retry
  orchestratectl spinoff accept 01jdxk7zq3           # a unique prefix of the id
  orchestratectl spinoff accept flaky-retry --agent shell
  orchestratectl --json spinoff accept flaky-retry   # {proposal, run}")]
    Accept(SpinoffAcceptArgs),

    /// Reject a proposal, saying why (the proposing agent can read the reason)
    #[command(after_help = "\
Examples:
  orchestratectl spinoff reject flaky-retry --reason 'out of scope for this release'")]
    Reject(SpinoffRejectArgs),
}

#[derive(Debug, Args)]
pub struct SpinoffProposeArgs {
    /// The work to do: the new agent's prompt if it is accepted (at most 32 KiB)
    #[arg(
        long,
        value_name = "T",
        required_unless_present = "task_file",
        conflicts_with = "task_file"
    )]
    pub task: Option<String>,

    /// Read the task from this file, or from standard input with `-`, instead of --task: at
    /// most 32 KiB (32768 bytes) of UTF-8
    #[arg(long, value_name = "PATH|-")]
    pub task_file: Option<PathBuf>,

    /// Why it is separate work, for the human who decides
    #[arg(long, value_name = "W")]
    pub why: Option<String>,

    /// The run: a ULID or a unique prefix of at least 6 characters; default $OCTL_RUN
    #[arg(long, env = "OCTL_RUN", hide_env_values = true, value_name = "RUN")]
    pub run: Option<String>,

    /// The node proposing (optional): 1-63 of a-z, 0-9 and '-'; default $OCTL_NODE
    #[arg(long, env = "OCTL_NODE", hide_env_values = true, value_name = "NODE")]
    pub node: Option<String>,
}

#[derive(Debug, Args)]
pub struct SpinoffListArgs {
    /// Only this run's proposals: a ULID or a unique prefix of at least 6 characters;
    /// default $OCTL_RUN, else every run
    #[arg(long, env = "OCTL_RUN", hide_env_values = true, value_name = "RUN")]
    pub run: Option<String>,
}

#[derive(Debug, Args)]
pub struct SpinoffAcceptArgs {
    /// The proposal's id, as `spinoff list` shows it, or a unique prefix of at least 6 of its
    /// characters
    #[arg(value_name = "ID")]
    pub id: String,

    /// The agent profile of the new run: `claude`, `shell`, or a profile [agents.NAME] from
    /// $OCTL_HOME/config.toml; default: the proposing node's agent, else the proposing run's,
    /// else the configured default
    #[arg(long, value_name = "PROFILE")]
    pub agent: Option<String>,
}

#[derive(Debug, Args)]
pub struct SpinoffRejectArgs {
    /// The proposal's id, as `spinoff list` shows it, or a unique prefix of at least 6 of its
    /// characters
    #[arg(value_name = "ID")]
    pub id: String,

    /// Why it is rejected
    #[arg(long, value_name = "R")]
    pub reason: String,
}

// ---------------------------------------------------------------------------------------------
// node

const NODE_EXAMPLES: &str = "\
Examples:
  # inside an agent window, where OCTL_RUN and OCTL_NODE are set:
  orchestratectl node progress --message 'tests pass, writing docs'
  orchestratectl node done --message 'added the endpoint and its tests'
  orchestratectl node fail --reason 'the API key in .env is missing'
  # from anywhere else, name the run and the node:
  orchestratectl node done --run 01JDXJ5R --node api";

#[derive(Debug, Subcommand)]
pub enum NodeCmd {
    /// Report that the node's work is finished and committed (a spinoff is then merged; a code
    /// run waits for `orchestratectl merge`)
    #[command(after_help = "\
Examples:
  orchestratectl node done
  orchestratectl node done --message 'added /users pagination with tests'
  orchestratectl --json node done --run 01JDXJ5R --node api   # {seq, id}")]
    Done(NodeDoneArgs),

    /// Report that the node cannot finish; its branch and worktree are kept
    #[command(after_help = "\
Examples:
  orchestratectl node fail --reason 'cannot reproduce the bug on main'
  orchestratectl --json node fail --run 01JDXJ5R --node api --reason 'tests need a database'")]
    Fail(NodeFailArgs),

    /// Report what the node is doing, for `run wait` and the event log
    #[command(after_help = "\
Examples:
  orchestratectl node progress --message 'reproduced the bug in a test'
  orchestratectl --json node progress --run 01JDXJ5R --node api --message 'half done'")]
    Progress(NodeProgressArgs),
}

#[derive(Debug, Args)]
pub struct NodeTarget {
    /// The run: a ULID or a unique prefix of at least 6 characters; default $OCTL_RUN (set in
    /// every agent window)
    #[arg(long, env = "OCTL_RUN", hide_env_values = true, value_name = "RUN")]
    pub run: Option<String>,

    /// The node: 1-63 of a-z, 0-9 and '-'; default $OCTL_NODE (set in every agent window)
    #[arg(long, env = "OCTL_NODE", hide_env_values = true, value_name = "NODE")]
    pub node: Option<String>,
}

#[derive(Debug, Args)]
pub struct NodeDoneArgs {
    #[command(flatten)]
    pub target: NodeTarget,

    /// A one-line summary of what was done
    #[arg(long, value_name = "M")]
    pub message: Option<String>,
}

#[derive(Debug, Args)]
pub struct NodeFailArgs {
    #[command(flatten)]
    pub target: NodeTarget,

    /// Why the node cannot finish, for the human who will look at it
    #[arg(long, value_name = "R")]
    pub reason: String,
}

#[derive(Debug, Args)]
pub struct NodeProgressArgs {
    #[command(flatten)]
    pub target: NodeTarget,

    /// What the agent is doing now, in a few words
    #[arg(long, value_name = "M")]
    pub message: String,
}

// ---------------------------------------------------------------------------------------------
// skill

const SKILL_EXAMPLES: &str = "\
Examples:
  orchestratectl skill list
  orchestratectl skill install
  orchestratectl skill print worktree-spinoff";

#[derive(Debug, Subcommand)]
pub enum SkillCmd {
    /// List the bundled skills and whether each is installed, outdated, modified or missing
    ///
    /// installed: the file is the bundled text; outdated: an older version that
    /// `skill install` wrote and nobody edited (install updates it); modified: edited by
    /// someone (install keeps it unless --force); missing: not installed.
    #[command(after_help = "\
Examples:
  orchestratectl skill list
  orchestratectl skill list --dir ./.claude/skills
  orchestratectl --json skill list     # [{name, description, status, path}]")]
    List(SkillDirArg),

    /// Print one bundled skill's SKILL.md exactly as it is installed
    #[command(after_help = "\
Examples:
  orchestratectl skill print worktree-spinoff
  orchestratectl --json skill print fan-out     # {name, description, text}")]
    Print(SkillNameArg),

    /// Write every bundled skill to DIR/<name>/SKILL.md, never overwriting a file someone
    /// edited unless --force
    ///
    /// Next to each SKILL.md it keeps a small marker file, .orchestratectl-installed, with a
    /// hash of what it wrote; that is how an edit is told apart from an older version. Edited
    /// files are skipped and listed, and the command then exits 4 after installing the rest.
    #[command(after_help = "\
Examples:
  orchestratectl skill install
  orchestratectl skill install --force                 # also overwrite edited files
  orchestratectl skill install --dir ./.claude/skills  # project-level skills
  CLAUDE_CONFIG_DIR=~/.claude-work orchestratectl skill install")]
    Install(SkillInstallArgs),
}

#[derive(Debug, Args)]
pub struct SkillDirArg {
    /// The skills directory; default ${CLAUDE_CONFIG_DIR:-$HOME/.claude}/skills
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct SkillNameArg {
    /// The skill's name, as `skill list` shows it
    #[arg(value_name = "NAME")]
    pub name: String,
}

#[derive(Debug, Args)]
pub struct SkillInstallArgs {
    /// Also overwrite SKILL.md files that were edited since they were installed
    #[arg(long)]
    pub force: bool,

    /// The skills directory; default ${CLAUDE_CONFIG_DIR:-$HOME/.claude}/skills
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

// ---------------------------------------------------------------------------------------------
// demo

const DEMO_EXAMPLES: &str = "\
Examples:
  orchestratectl demo
  orchestratectl demo --keep          # keep the repository even when nothing waits on it
  orchestratectl --json demo          # {repo, kept, runs: [{id, task, node, status, state}]}";

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Keep the demo repository at the end (it is always kept while a run still waits on it)
    #[arg(long)]
    pub keep: bool,
}

// ---------------------------------------------------------------------------------------------
// run

const RUN_EXAMPLES: &str = "\
Examples:
  orchestratectl run list --status active
  orchestratectl run show 01JDXJ5R
  orchestratectl run watch 01JDXJ5R
  orchestratectl run logs 01JDXJ5R --node api --follow
  orchestratectl run wait 01JDXJ5R --timeout 600
  orchestratectl run retry 01JDXJ5R --node api
  orchestratectl run attach 01JDXJ5R
  orchestratectl run cancel 01JDXJ5R
  orchestratectl run create --kind generic --title 'nightly build'";

#[derive(Debug, Subcommand)]
pub enum RunCmd {
    /// Create a run and print its id
    #[command(after_help = "\
Examples:
  orchestratectl run create --kind generic
  orchestratectl run create --kind generic --title 'track the release'
  orchestratectl --json run create --kind generic   # prints the run summary")]
    Create(RunCreateArgs),

    /// List runs, oldest first
    #[command(after_help = "\
Examples:
  orchestratectl run list
  orchestratectl run list --status waiting
  orchestratectl --json run list")]
    List(RunListArgs),

    /// Show one run: its summary, nodes, discussions and spin-offs
    ///
    /// Nodes are listed in the order they were added (a plan's or manifest's order). Under
    /// the table, every failed or exited node's reason, exit status and message, and the path
    /// of its log. A corrupt run shows what its log still says: its kind, when it was created,
    /// the events before the bad line, and which line is bad.
    #[command(after_help = "\
Examples:
  orchestratectl run show 01JDXJ5R8Q4M0ZK7P2W9TB3C6E
  orchestratectl run show 01jdxj5r          # a unique prefix of 6+ characters is enough
  orchestratectl --json run show 01JDXJ5R")]
    Show(RunArg),

    /// Print what a node's agent printed (its log under runs/RUN/logs/); --follow keeps printing
    ///
    /// For Claude Code the readable rendering (NODE.pane.log) is shown, and the raw
    /// stream-json (NODE.log) with --raw; for other agents both are the one log. With --follow
    /// it goes on printing as the log grows (waiting for it to appear if the agent has not
    /// started) and ends once the node's agent is gone (the node is done, failed, exited,
    /// cancelled, merged, …). With --json: one object per line of the log,
    /// {"node":"api","line":"…"} (a line that is not UTF-8 is shown with U+FFFD). Exits 3 when
    /// the node is unknown or has no log yet (without --follow).
    #[command(after_help = "\
Examples:
  orchestratectl run logs 01JDXJ5R                    # the run's only node
  orchestratectl run logs 01JDXJ5R --node api --follow
  orchestratectl run logs 01JDXJ5R --node api --raw   # Claude Code's raw stream-json
  orchestratectl --json run logs 01JDXJ5R --node api  # {\"node\",\"line\"} per line")]
    Logs(RunLogsArgs),

    /// Rewrite a run's projection files (manifest.json, nodes/…) from its event log
    #[command(after_help = "\
Examples:
  orchestratectl run rebuild 01JDXJ5R")]
    Rebuild(RunArg),

    /// Wait until a run completes, fails, is cancelled or waits for a human, showing progress
    ///
    /// Exits 0 when the run completed, 4 when it failed, was cancelled or is waiting (a
    /// conflict, a blocked merge, an open discussion, a code run awaiting `merge`). The final
    /// run summary is printed in both cases (with --json: one JSON document). Progress goes to
    /// stderr: a redrawn status line on a terminal, else one line per event.
    #[command(after_help = "\
Examples:
  orchestratectl run wait 01JDXJ5R
  orchestratectl run wait 01JDXJ5R --timeout 300      # exit 1, kind timeout, after 300 s
  orchestratectl --json run wait 01JDXJ5R             # the run summary, once")]
    Wait(RunWaitArgs),

    /// A live view of a run: its nodes, their states, elapsed times and what they wait for,
    /// and the last events; until the run ends
    ///
    /// On a terminal the screen is redrawn on every event (and every second); otherwise one
    /// plain line per event is printed (`SEQ TS TYPE NODE MESSAGE`; with --json, the events as
    /// JSON lines). Ends when the run completes (exit 0), fails or is cancelled (exit 4), or
    /// on Ctrl-C; a run that waits for a human is watched on.
    #[command(after_help = "\
Examples:
  orchestratectl run watch 01JDXJ5R
  orchestratectl run watch 01JDXJ5R | tee run.log      # plain lines
  orchestratectl --json run watch 01JDXJ5R             # events as JSON lines")]
    Watch(RunArg),

    /// Start a failed or conflicting node of any agent run again: an orchestrate node from
    /// the current tip of the integration branch, any other from the tip of base
    ///
    /// The node may be failed, exited, conflict or merge_blocked; a spinoff or code run that
    /// ended failed becomes active again. Its old branch and worktree are saved under
    /// refs/octl/snapshots/<RUN>/<NODE> and removed before it starts; the nodes it blocked
    /// wait for it again. Of two retries at once one wins; the other exits 4
    /// (invalid_transition) and changes nothing.
    #[command(after_help = "\
Examples:
  orchestratectl run retry 01JDXJ5R --node api
  orchestratectl run retry 01JDXJ5R --node fix-the-typo   # a failed spinoff run
  orchestratectl --json run retry 01JDXJ5R --node api   # the run summary")]
    Retry(RunRetryArgs),

    /// Stop a run: its agents are stopped; its branches and worktrees are kept unless --discard
    ///
    /// A run that already ended is refused (exit 4, invalid_transition); with --discard, what
    /// it left behind is removed (after a snapshot). Refused too while a node is merging: the
    /// merge has begun moving the branch; cancel again once it has ended.
    #[command(after_help = "\
Examples:
  orchestratectl run cancel 01JDXJ5R
  orchestratectl run cancel 01JDXJ5R --discard   # work saved under refs/octl/snapshots/, then removed")]
    Cancel(RunCancelArgs),

    /// Attach this terminal to a node's agent window (tmux; detach with Ctrl-b d)
    ///
    /// Replaces this process with `tmux -S $OCTL_HOME/tmux.sock attach-session -t RUN:NODE`
    /// on the daemon's private tmux server. Needs a terminal.
    #[command(after_help = "\
Examples:
  orchestratectl run attach 01JDXJ5R
  orchestratectl run attach 01JDXJ5R --node api")]
    Attach(RunAttachArgs),

    /// Remove what completed, failed and cancelled runs left behind, and orphans, after
    /// saving their content under refs/octl/snapshots/
    ///
    /// For each finished run: every node's worktree still there is saved under
    /// refs/octl/snapshots/<RUN>/<NODE> (uncommitted and untracked files included; what git
    /// ignores moved to $OCTL_HOME/kept/<RUN>/<NODE>/<N>/) and removed,
    /// its window closed, and its branch deleted once its tip is merged or in the snapshot.
    /// Then whatever no run owns (worktrees under $OCTL_HOME/worktrees/, octl/<RUN>/… branches,
    /// windows on the daemon's tmux server; see `orchestratectl doctor`) goes the same way,
    /// snapshots first. Kept, with the reason: directories that are not git worktrees, branches
    /// checked out elsewhere, an integration branch not merged into base, anything of a corrupt
    /// run. Unfinished runs are never touched. Kept ignored files are deleted only with
    /// --older-than AGE (of runs ended longer ago); snapshot refs are never deleted. With
    /// --dry-run: what would go, nothing changed.
    #[command(after_help = crate::commands::recover::GC_EXAMPLES)]
    Gc(crate::commands::recover::GcArgs),

    /// Set a corrupt run aside: move runs/RUN to $OCTL_HOME/corrupt/RUN, so doctor is green again
    ///
    /// Only a run whose log does not replay (status `corrupt`) can be set aside; anything else
    /// is refused (exit 4). Nothing is deleted: the directory is moved whole (its log, with the
    /// intact lines before the bad one, its projections and agents' logs) and the daemon
    /// forgets the run. Its worktrees and branches stay where they are; `doctor` then lists
    /// them as orphans and `run gc` can remove them, snapshotting first.
    #[command(after_help = "\
Examples:
  orchestratectl run show 01JDXJ5R          # what the corrupt log still says
  orchestratectl run quarantine 01JDXJ5R
  orchestratectl --json run quarantine 01JDXJ5R   # {run, moved_to}")]
    Quarantine(RunArg),
}

#[derive(Debug, Args)]
pub struct RunLogsArgs {
    /// The run: its full id (a ULID) or a unique prefix of at least 6 characters
    #[arg(value_name = "RUN")]
    pub run: String,

    /// The node whose log to print; default: the run's only node (needed when it has several)
    #[arg(long, value_name = "NODE")]
    pub node: Option<String>,

    /// Keep printing as the log grows, until the node's agent is gone
    #[arg(long, short = 'f')]
    pub follow: bool,

    /// Claude Code's raw stream-json (NODE.log) instead of its readable rendering
    #[arg(long)]
    pub raw: bool,
}

#[derive(Debug, Args)]
pub struct RunCreateArgs {
    /// Kind of run: `generic` records events only (other kinds come with their own commands)
    #[arg(long, value_name = "KIND")]
    pub kind: String,

    /// A short title shown in `run list`
    #[arg(long, value_name = "TEXT")]
    pub title: Option<String>,
}

#[derive(Debug, Args)]
pub struct RunListArgs {
    /// Only runs in this status: active, waiting, completed, failed or cancelled
    #[arg(long, value_name = "STATUS")]
    pub status: Option<String>,
}

#[derive(Debug, Args)]
pub struct RunWaitArgs {
    /// The run: its full id (a ULID) or a unique prefix of at least 6 characters
    #[arg(value_name = "RUN")]
    pub run: String,

    /// Give up after S seconds (decimals allowed) with exit 1, kind `timeout`; the run goes on
    #[arg(long, value_name = "S")]
    pub timeout: Option<f64>,
}

#[derive(Debug, Args)]
pub struct RunCancelArgs {
    /// The run: its full id (a ULID) or a unique prefix of at least 6 characters
    #[arg(value_name = "RUN")]
    pub run: String,

    /// Also remove the nodes' worktrees and branches; whatever they hold (uncommitted and
    /// untracked files included) is first saved as a commit under
    /// refs/octl/snapshots/<RUN>/<NODE>
    #[arg(long)]
    pub discard: bool,
}

#[derive(Debug, Args)]
pub struct RunAttachArgs {
    /// The run: its full id (a ULID) or a unique prefix of at least 6 characters
    #[arg(value_name = "RUN")]
    pub run: String,

    /// The node whose window to show; default: the only node, else the first one whose agent
    /// is alive (starting, running or waiting)
    #[arg(long, value_name = "NODE")]
    pub node: Option<String>,
}

#[derive(Debug, Args)]
pub struct RunRetryArgs {
    /// The run: its full id (a ULID) or a unique prefix of at least 6 characters
    #[arg(value_name = "RUN")]
    pub run: String,

    /// The node to start again (a failed or conflicting one)
    #[arg(long, value_name = "NODE")]
    pub node: String,
}

#[derive(Debug, Args)]
pub struct RunArg {
    /// The run: its full id (a ULID) or a unique prefix of at least 6 characters
    #[arg(value_name = "RUN")]
    pub run: String,
}

// ---------------------------------------------------------------------------------------------
// event

const EVENT_EXAMPLES: &str = "\
Examples:
  orchestratectl event append --run 01JDXJ5R --type x.note --data '{\"text\":\"hello\"}'
  orchestratectl event list --run 01JDXJ5R --since 10
  orchestratectl event tail --run 01JDXJ5R --follow";

#[derive(Debug, Subcommand)]
pub enum EventCmd {
    /// Append one event to a run's log (acknowledged once it is on disk)
    #[command(after_help = "\
Examples:
  orchestratectl event append --run 01JDXJ5R --type x.build --data '{\"ok\":true}'
  orchestratectl event append --run 01JDXJ5R --type node.added --node api
  orchestratectl event append --run 01JDXJ5R --node api --type node.done \\
      --data '{\"message\":\"added endpoint\"}' --idempotency-key api-done-1
  # inside an agent window OCTL_RUN and OCTL_NODE are set:
  orchestratectl event append --type node.progress --data '{\"message\":\"tests pass\"}'")]
    Append(EventAppendArgs),

    /// List a run's events, oldest first
    #[command(after_help = "\
Examples:
  orchestratectl event list --run 01JDXJ5R
  orchestratectl event list --run 01JDXJ5R --since 100 --limit 20
  orchestratectl --json event list --run 01JDXJ5R")]
    List(EventListArgs),

    /// Print a run's last events; with --follow keep printing new ones until interrupted
    ///
    /// Streams from the daemon when it is running. When it is not, reads
    /// HOME/runs/<RUN>/events.jsonl directly (never starting the daemon) and follows the file;
    /// if the daemon stops while following, it carries on from the file.
    #[command(after_help = "\
Examples:
  orchestratectl event tail --run 01JDXJ5R
  orchestratectl event tail --run 01JDXJ5R --lines 50
  orchestratectl --json event tail --run 01JDXJ5R --follow   # JSON lines")]
    Tail(EventTailArgs),
}

#[derive(Debug, Args)]
pub struct EventAppendArgs {
    /// The run: a ULID or a unique prefix of at least 6 characters
    #[arg(long, env = "OCTL_RUN", hide_env_values = true, value_name = "RUN")]
    pub run: String,

    /// The node the event is about (omit for a run-level event): 1-63 of a-z, 0-9 and '-'
    #[arg(long, env = "OCTL_NODE", hide_env_values = true, value_name = "NODE")]
    pub node: Option<String>,

    /// Event type: node.added, node.progress, node.waiting, node.done, node.failed, … or a
    /// custom x.<name>
    #[arg(long = "type", value_name = "TYPE")]
    pub kind: String,

    /// The event's payload: a JSON object of at most 64 KiB, e.g. '{"message":"done"}'
    #[arg(long, value_name = "JSON")]
    pub data: Option<String>,

    /// Makes retries safe: a repeated key returns the first append's seq and id and writes
    /// nothing (1-128 printable ASCII characters, no spaces)
    #[arg(long, value_name = "KEY")]
    pub idempotency_key: Option<String>,
}

#[derive(Debug, Args)]
pub struct EventListArgs {
    /// The run: a ULID or a unique prefix of at least 6 characters
    #[arg(long, env = "OCTL_RUN", hide_env_values = true, value_name = "RUN")]
    pub run: String,

    /// Only events with a greater seq (default 0: from the start)
    #[arg(long, value_name = "SEQ")]
    pub since: Option<u64>,

    /// At most this many events
    #[arg(long, value_name = "N")]
    pub limit: Option<u64>,
}

#[derive(Debug, Args)]
pub struct EventTailArgs {
    /// The run: a ULID or a unique prefix of at least 6 characters
    #[arg(long, env = "OCTL_RUN", hide_env_values = true, value_name = "RUN")]
    pub run: String,

    /// Keep printing new events as they land, until interrupted
    #[arg(long, short = 'f')]
    pub follow: bool,

    /// How many of the last events to print first
    #[arg(long, short = 'n', value_name = "N", default_value_t = 10)]
    pub lines: u64,
}

// ---------------------------------------------------------------------------------------------
// daemon

const DAEMON_EXAMPLES: &str = "\
Examples:
  orchestratectl daemon status
  orchestratectl daemon start
  orchestratectl daemon stop
  orchestratectl daemon restart                # e.g. after upgrading octld
  orchestratectl daemon install-service        # start it on demand through systemd or launchd";

#[derive(Debug, Subcommand)]
pub enum DaemonCmd {
    /// Start octld for this home if it is not running (detached, in its own session)
    #[command(after_help = "\
Examples:
  orchestratectl daemon start
  orchestratectl --home /tmp/octl-test daemon start
  OCTLD_BIN=./target/debug/octld orchestratectl daemon start   # choose the daemon program")]
    Start,

    /// Stop octld and wait (up to 5 s) until it is gone; succeeds if it was not running
    #[command(after_help = "\
Examples:
  orchestratectl daemon stop
  orchestratectl --json daemon stop")]
    Stop,

    /// Stop octld gracefully, wait until it is gone (up to 5 s), then start it again
    ///
    /// In-flight appends finish first; agents keep running (they live on the daemon's tmux
    /// server) and the new daemon finds their windows. Starts it if it was not running.
    /// Prints what happened (with --json: {was_running, stopped_pid, pid, version}). Exits 1
    /// (kind `timeout`) if the old daemon does not go, 5 if the new one does not answer.
    #[command(after_help = "\
Examples:
  orchestratectl daemon restart
  OCTLD_BIN=./target/debug/octld orchestratectl daemon restart   # after rebuilding octld
  orchestratectl --json daemon restart")]
    Restart,

    /// Show whether octld is running: pid, version, protocol, home, uptime (exit 5 if not)
    #[command(after_help = "\
Examples:
  orchestratectl daemon status
  orchestratectl --json daemon status")]
    Status,

    /// Install octld as a service started on demand: systemd user units on Linux, a LaunchAgent
    /// on macOS (or print them with --print)
    ///
    /// Renders the bundled units with the absolute path of octld (found as autostart finds it:
    /// $OCTLD_BIN, else next to orchestratectl, else on PATH) and this home. On Linux it writes
    /// octld.socket and octld.service to ${XDG_CONFIG_HOME:-~/.config}/systemd/user/; on macOS
    /// dev.orchestratectl.octld.plist to ~/Library/LaunchAgents/. The service manager then owns
    /// the home's socket (octld.sock) and starts octld on the first connection; autostart stays
    /// the fallback. A file that exists with other content is not overwritten without --force
    /// (exit 4, nothing written). Prints the commands to run next; runs none of them.
    #[command(
        name = "install-service",
        after_help = "\
Examples:
  orchestratectl daemon install-service --print          # see the units, write nothing
  orchestratectl daemon install-service                  # then run the commands it prints:
  systemctl --user daemon-reload && systemctl --user enable --now octld.socket
  orchestratectl --home /tmp/octl-test daemon install-service --force
  orchestratectl --json daemon install-service --print   # {\"files\":[{\"path\",\"text\"}]}"
    )]
    InstallService(InstallServiceArgs),
}

#[derive(Debug, Args)]
pub struct InstallServiceArgs {
    /// Print the files (each after a `# PATH` line; with --json as {"files":[{"path","text"}]})
    /// instead of writing them
    #[arg(long)]
    pub print: bool,

    /// Overwrite unit files that exist with other content (e.g. edited by hand)
    #[arg(long, conflicts_with = "print")]
    pub force: bool,
}

/// Is `--json` among the arguments (before a `--`)? Decided before clap runs, so that usage
/// errors can be reported in the chosen form too.
pub fn wants_json<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> bool {
    args.iter()
        .skip(1)
        .map(|a| a.as_ref())
        .take_while(|a| *a != "--")
        .any(|a| a == "--json")
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_definitions_are_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn json_is_found_anywhere_before_double_dash() {
        assert!(wants_json(&["octl", "run", "list", "--json"]));
        assert!(wants_json(&["octl", "--json", "run", "list"]));
        assert!(!wants_json(&["octl", "run", "list"]));
        assert!(!wants_json(&["octl", "--", "--json"]));
    }

    #[test]
    fn groups_are_listed_in_newcomer_order() {
        let cmd = Cli::command();
        let names: Vec<&str> = cmd.get_subcommands().map(|c| c.get_name()).collect();
        assert_eq!(
            names,
            vec![
                "spawn",
                "fan-out",
                "orchestrate",
                "run",
                "merge",
                "node",
                "discussion",
                "spinoff",
                "skill",
                "recover",
                "demo",
                "event",
                "daemon",
                "doctor",
                "version"
            ]
        );
    }

    #[test]
    fn every_command_has_an_example_and_every_flag_a_help() {
        fn walk(cmd: &clap::Command, path: &str) {
            let path = format!("{path} {}", cmd.get_name());
            let after = cmd
                .get_after_help()
                .map(|s| s.to_string())
                .unwrap_or_default();
            assert!(
                after.contains("Examples:"),
                "no examples in `{path} --help`"
            );
            assert!(cmd.get_about().is_some(), "no purpose line for `{path}`");
            for arg in cmd.get_arguments() {
                if arg.get_id() == "help" || arg.get_id() == "version" {
                    continue;
                }
                assert!(
                    arg.get_help().is_some(),
                    "`{path}`: {} has no help",
                    arg.get_id()
                );
            }
            for sub in cmd.get_subcommands() {
                walk(sub, &path);
            }
        }
        let cmd = Cli::command();
        for sub in cmd.get_subcommands() {
            walk(sub, "orchestratectl");
        }
    }

    /// The indented example file after `marker` in a help text.
    fn example_file(help: &str, marker: &str) -> String {
        let start = help.find(marker).expect("the example is there") + marker.len();
        help[start..]
            .lines()
            .skip(1)
            .take_while(|l| l.starts_with("  "))
            .map(|l| format!("{}\n", &l[2..]))
            .collect()
    }

    #[test]
    fn the_example_manifest_and_plan_are_valid() {
        use octl_proto::plan::{parse_manifest, parse_plan, Format};
        let manifest = example_file(FANOUT_EXAMPLES, "A manifest (units.toml):");
        let m = parse_manifest(&manifest, Format::Toml).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(m.units.len(), 2);
        let plan = example_file(ORCHESTRATE_EXAMPLES, "docs last.");
        let p = parse_plan(&plan, Format::Toml).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(p.order(), vec!["schema", "api", "ui", "docs"]);
    }

    #[test]
    fn fan_out_takes_a_manifest_or_a_command() {
        let cli = Cli::try_parse_from([
            "o",
            "fan-out",
            "--manifest",
            "m.toml",
            "--max-parallel",
            "3",
        ])
        .unwrap();
        match cli.group {
            Group::FanOut(a) => {
                assert!(a.cmd.is_none());
                assert_eq!(
                    a.start.manifest.as_deref(),
                    Some(std::path::Path::new("m.toml"))
                );
                assert_eq!(a.start.common.max_parallel.as_deref(), Some("3"));
            }
            other => panic!("{other:?}"),
        }
        let cli = Cli::try_parse_from(["o", "fan-out", "manifest", "--run", "01JDXJ5R"]).unwrap();
        match cli.group {
            Group::FanOut(FanOutArgs {
                cmd: Some(FanOutCmd::Manifest(m)),
                ..
            }) => assert_eq!(m.run.as_deref(), Some("01JDXJ5R")),
            other => panic!("{other:?}"),
        }
        assert!(Cli::try_parse_from(["o", "fan-out"]).is_err());
        assert!(Cli::try_parse_from(["o", "fan-out", "--manifest", "m.toml", "manifest"]).is_err());
        // --timeout only with --wait.
        assert!(
            Cli::try_parse_from(["o", "discussion", "ask", "--title", "t", "--timeout", "5"])
                .is_err()
        );
    }

    #[test]
    fn parsing_event_append() {
        let cli = Cli::try_parse_from([
            "orchestratectl",
            "event",
            "append",
            "--run",
            "01JDXJ5R",
            "--type",
            "x.a",
            "--json",
        ])
        .unwrap();
        assert!(cli.json);
        match cli.group {
            Group::Event(EventCmd::Append(a)) => {
                assert_eq!(a.run, "01JDXJ5R");
                assert_eq!(a.kind, "x.a");
            }
            other => panic!("{other:?}"),
        }
    }
}
