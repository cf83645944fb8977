//! The command line, as clap derive definitions: the global flags and the enum of command
//! groups. Each group's own clap types (its `Args` and `Subcommand`s, its examples) live beside
//! its `execute` in `commands/<group>.rs`, so a command is read in one file.
//! Groups are declared in the order a newcomer needs them; that is the order `--help` shows.
//! To add a group: a variant in [`Group`], and a file in `commands/` with its clap types.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::commands::{
    daemon, demo, discussion, doctor, event, fanout, merge, node, orchestrate, recover, review,
    run, shell, skill, spawn, spinoff,
};

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
5 daemon unreachable, 6 external tool failed, 7 storage full or failing.";

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
    #[command(subcommand, after_help = spawn::SPAWN_EXAMPLES)]
    Spawn(spawn::SpawnCmd),

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
        after_help = fanout::FANOUT_EXAMPLES,
        args_conflicts_with_subcommands = true,
        subcommand_negates_reqs = true
    )]
    FanOut(fanout::FanOutArgs),

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
    #[command(after_help = orchestrate::ORCHESTRATE_EXAMPLES)]
    Orchestrate(orchestrate::OrchestrateArgs),

    /// Create, list, inspect, watch, wait for, retry, cancel and attach to runs, read their
    /// agents' logs (a run is one piece of orchestrated work)
    #[command(subcommand, after_help = run::RUN_EXAMPLES)]
    Run(run::RunCmd),

    /// A terminal UI over every run: those that need you first, a run's nodes as a tree with
    /// each agent's screen, log, diff and events, the inbox of questions, proposals and
    /// merges, and the actions that clear them
    ///
    /// Reads the same state as `run list` (and starts the daemon as it does); with the daemon
    /// down it shows the runs read-only from their logs on disk and says so, and it shows
    /// when it is reconnecting. Honours NO_COLOR. Needs a terminal of at least 80×24.
    #[command(after_help = crate::tui::TUI_EXAMPLES)]
    Tui(crate::tui::TuiArgs),

    /// The web UI in a browser: every run, the inbox and every action, from a desktop or a
    /// phone
    ///
    /// Asks the daemon to serve it on [ui] listen (default 127.0.0.1:7420; beyond loopback
    /// only with TLS), prints its address and a login link that works once within 10 minutes,
    /// and opens a browser when there is one. The daemon serves it again after a restart
    /// until `ui --stop`. See docs/UI.md.
    #[command(after_help = crate::commands::ui::UI_EXAMPLES)]
    Ui(crate::commands::ui::UiArgs),

    /// Merge a node's branch into its base branch (code runs, and retries after a conflict or a
    /// blocked merge)
    ///
    /// The daemon computes the merge without touching any worktree (`git merge-tree`), moves
    /// the base branch only if it is clean for the changed paths, then removes the node's
    /// window, worktree and branch. A conflict or a dirty base moves nothing (exit 4).
    #[command(after_help = merge::MERGE_EXAMPLES)]
    Merge(merge::MergeArgs),

    /// Pick the winning attempt of a best-of-N run (spawn --attempts); the others are set
    /// aside, kept under their snapshot refs (`recover` brings any back)
    ///
    /// Recorded as `node.judged` by a human. Once per run: after the judge (or another pick)
    /// it is refused (exit 4), naming the winner.
    #[command(after_help = crate::commands::pick::PICK_EXAMPLES)]
    Pick(crate::commands::pick::PickArgs),

    /// Review a node's work: comments go back to its agent as its next message, or approve it
    ///
    /// Recorded as `node.review` in the run's log. The agent gets the comments (and the
    /// --file text, also written to $OCTL_REVIEW_FILE) typed into its live session in a code
    /// run, else its Claude Code conversation goes on with them (`claude --resume`) or, for
    /// other agents, a new attempt starts with them after its task, in the same worktree and
    /// branch. It reports done again and is gated and merged as before. `--approve` accepts a
    /// done node as it is: a code run's is merged. Of two reviews at once, one is recorded
    /// and the other is refused (exit 4). `run show` lists every round.
    #[command(after_help = review::REVIEW_EXAMPLES)]
    Review(review::ReviewArgs),

    /// Report from inside an agent: done, failed, or progress (run and node come from the
    /// environment)
    #[command(subcommand, after_help = node::NODE_EXAMPLES)]
    Node(node::NodeCmd),

    /// Questions from agents to a human: ask (and wait for the answer), list, answer
    #[command(subcommand, after_help = discussion::DISCUSSION_EXAMPLES)]
    Discussion(discussion::DiscussionCmd),

    /// Spin-off proposals: an agent proposes separate work, a human accepts it (a new linked
    /// spinoff run starts) or rejects it
    #[command(subcommand, after_help = spinoff::SPINOFF_EXAMPLES)]
    Spinoff(spinoff::SpinoffCmd),

    /// The bundled Claude Code skills: list them, print one, install them into Claude Code
    #[command(subcommand, after_help = skill::SKILL_EXAMPLES)]
    Skill(skill::SkillCmd),

    /// Turn a node's snapshot (refs/octl/snapshots/RUN/NODE) back into a branch
    ///
    /// A snapshot is taken whenever a node's worktree is removed (after a merge, `run cancel
    /// --discard`, `run retry`, `run gc`): a commit holding everything the worktree had,
    /// uncommitted and untracked files included, on top of the node's last commit. `recover`
    /// creates a new branch there (default recovered/<RUN>/<NODE>, RUN cut to the shortest
    /// prefix no other run has, at least 10 characters) and prints it with its commit. Files
    /// git ignores (.env, *.local, target/) are not in a
    /// snapshot: they were moved to $OCTL_HOME/kept/<RUN>/<NODE>/<N>/, and --worktree PATH
    /// checks the new branch out there and moves them back in (without it, the answer says
    /// where they are). --ref REF --repo PATH recovers a snapshot no run owns (an orphan's, as
    /// `run gc` names it). It never overwrites a branch or files (exit 4), a second --worktree
    /// of the same kept files is refused (exit 4, nothing changed), and it exits 3 when the
    /// node has no snapshot. `run show RUN` lists the nodes' snapshot refs and kept files.
    #[command(after_help = recover::RECOVER_EXAMPLES)]
    Recover(recover::RecoverArgs),

    /// See it work without Claude Code or an API key: four shell agents in a throwaway
    /// repository, one of them conflicting
    ///
    /// Makes a git repository in a temporary directory, spawns four spinoffs with the `shell`
    /// agent on its `main` branch (two add a file, two rewrite greeting.txt differently), shows
    /// their progress, and then where every result is: three merged into main, one waiting on
    /// a conflict with its branch and worktree kept. Exits 0 when it ended that way. It runs
    /// on a throwaway daemon of its own, removed with the repository at the end, so nothing
    /// reaches your run list; `--keep` runs it on your daemon and keeps everything.
    #[command(after_help = demo::DEMO_EXAMPLES)]
    Demo(demo::DemoArgs),

    /// Append to and read a run's event log
    #[command(subcommand, after_help = event::EVENT_EXAMPLES)]
    Event(event::EventCmd),

    /// Start, stop, restart and inspect the octld daemon (it also starts by itself when needed)
    #[command(subcommand, after_help = daemon::DAEMON_EXAMPLES)]
    Daemon(daemon::DaemonCmd),

    /// Check the tools, the daemon, permissions, free disk space, runs, orphans, skills and the service unit
    ///
    /// One line per check (ok, warn or FAIL, its id, what was found), with a hint under every
    /// warning and failure, then a summary. Exits 1 when a check fails, else 0 (warnings
    /// included). Never starts the daemon: with it down, the checks that need it fail.
    #[command(after_help = doctor::DOCTOR_EXAMPLES)]
    Doctor(doctor::DoctorArgs),

    /// Record what a Claude Code hook says as the agent's activity (run by the hooks octld
    /// gives every Claude Code agent; reads the hook's JSON on stdin)
    ///
    /// Appends one node.activity event for $OCTL_RUN/$OCTL_NODE: working (with the tool),
    /// needs_permission or waiting_input (with the message), idle. Prints nothing and exits 0
    /// in every case — with the daemon down at once, without starting it — so an agent is
    /// never held up or broken by it.
    #[command(after_help = crate::hook::HOOK_EXAMPLES)]
    Hook(crate::hook::HookArgs),

    /// Print the version of orchestratectl and of its protocol
    #[command(after_help = "Examples:\n  orchestratectl version\n  orchestratectl --json version")]
    Version,

    /// Print a completion script for bash, zsh or fish; run ids, node names, profiles,
    /// discussions and proposals are completed from the daemon when it is up
    ///
    /// Generated from the same definitions as --help, so it knows every command and flag.
    /// Where a command takes a run (`run show RUN`, `--run RUN`), a node (`--node`, from the
    /// run on the line), a profile (`--agent`), an open discussion (`discussion answer`) or a
    /// pending proposal (`spinoff accept|reject`), the script asks the daemon; it never
    /// starts the daemon. `install.sh` installs all three.
    #[command(after_help = shell::COMPLETIONS_EXAMPLES)]
    Completions(shell::CompletionsArgs),

    /// Print the man page orchestratectl(1), or write one page per command with --dir
    #[command(after_help = shell::MAN_EXAMPLES)]
    Man(shell::ManArgs),
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
    use crate::commands::event::EventCmd;
    use crate::commands::fanout::{FanOutArgs, FanOutCmd, FANOUT_EXAMPLES};
    use crate::commands::orchestrate::ORCHESTRATE_EXAMPLES;
    use clap::CommandFactory;

    #[test]
    fn the_definitions_are_consistent() {
        Cli::command().debug_assert();
    }

    /// Every exit code of docs/PROTOCOL.md's table, and of every error kind it names, is in
    /// `--help`.
    #[test]
    fn help_lists_every_exit_code() {
        let doc = include_str!("../../docs/PROTOCOL.md");
        let table = doc
            .split("## Errors and exit codes")
            .nth(1)
            .expect("the exit code table");
        let mut codes = 0;
        let rows = table.lines().skip_while(|l| !l.starts_with('|'));
        for row in rows.take_while(|l| l.starts_with('|')).skip(2) {
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            let code: i32 = cells[1].parse().expect("an exit code");
            for kind in cells[3].split(',').map(|k| k.trim().trim_matches('`')) {
                if !kind.is_empty() {
                    let k = octl_proto::ErrorKind::from_str_lossy(kind);
                    assert_eq!(k.as_str(), kind, "a kind of the table");
                    assert_eq!(k.exit_code(), code, "{kind}");
                }
            }
            let listed = TOP_EXAMPLES.split("Exit codes:").nth(1).unwrap_or_default();
            assert!(
                listed
                    .split(',')
                    .any(|c| c.trim().starts_with(&format!("{code} "))),
                "{code}"
            );
            codes += 1;
        }
        assert_eq!(codes, 8, "0 to 7");
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
                "tui",
                "ui",
                "merge",
                "pick",
                "review",
                "node",
                "discussion",
                "spinoff",
                "skill",
                "recover",
                "demo",
                "event",
                "daemon",
                "doctor",
                "hook",
                "version",
                "completions",
                "man"
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
