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
  orchestratectl run list
  orchestratectl run wait 01JDXJ5R
  orchestratectl merge 01JDXJ5R
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

    /// Create, list, inspect, wait for, cancel and attach to runs (a run is one piece of
    /// orchestrated work)
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

    /// The bundled Claude Code skills: list them, print one, install them into Claude Code
    #[command(subcommand, after_help = SKILL_EXAMPLES)]
    Skill(SkillCmd),

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

    /// Start, stop and inspect the octld daemon (it also starts by itself when needed)
    #[command(subcommand, after_help = DAEMON_EXAMPLES)]
    Daemon(DaemonCmd),

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
  orchestratectl --json spawn spinoff \"$(cat task.md)\"    # a long task, sent as written
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
  orchestratectl run attach 01JDXJ5R          # then, when the work is ready:
  orchestratectl merge 01JDXJ5R")]
    Code(SpawnArgs),
}

#[derive(Debug, Args)]
pub struct SpawnArgs {
    /// What the agent should do: its prompt (for `--agent shell`, a shell script run in the
    /// worktree). Sent exactly as given; put `--` before it if it starts with a dash
    #[arg(value_name = "TASK")]
    pub task: String,

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
  orchestratectl --json merge 01JDXJ5R     # {run, node, state, merge_commit, target}

After a conflict (exit 4, kind merge_conflict): resolve it in the node's worktree
(git merge <BASE>, fix the files, commit), then run the same merge again.
After target_dirty (exit 4): commit or stash the changes in the checkout of the base
branch, then run the same merge again.";

#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The run: its full id (a ULID) or a unique prefix of at least 6 characters
    #[arg(value_name = "RUN")]
    pub run: String,

    /// The node to merge; default: the run's only node (needed when it has several)
    #[arg(long, value_name = "NODE")]
    pub node: Option<String>,
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
  orchestratectl run wait 01JDXJ5R --timeout 600
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
    #[command(after_help = "\
Examples:
  orchestratectl run show 01JDXJ5R8Q4M0ZK7P2W9TB3C6E
  orchestratectl run show 01jdxj5r          # a unique prefix of 6+ characters is enough
  orchestratectl --json run show 01JDXJ5R")]
    Show(RunArg),

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

    /// Stop a run: its agents are stopped; its branches and worktrees are kept unless --discard
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
  orchestratectl daemon stop";

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

    /// Show whether octld is running: pid, version, protocol, home, uptime (exit 5 if not)
    #[command(after_help = "\
Examples:
  orchestratectl daemon status
  orchestratectl --json daemon status")]
    Status,
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
            vec!["spawn", "run", "merge", "node", "skill", "demo", "event", "daemon", "version"]
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
