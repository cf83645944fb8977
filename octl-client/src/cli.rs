//! The command line, as clap derive definitions: global flags, then one enum per command group.
//! Groups are declared in the order a newcomer needs them; that is the order `--help` shows.
//! To add a group: a variant in [`Group`], its command enum here, a file in `commands/`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

const TOP_EXAMPLES: &str = "\
Examples:
  orchestratectl run create --kind generic --title 'nightly build'
  orchestratectl run list
  orchestratectl event append --run 01JDXJ5R --type x.step --data '{\"step\":\"compile\"}'
  orchestratectl event tail --run 01JDXJ5R --follow
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
    /// Create, list and inspect runs (a run is one piece of orchestrated work)
    #[command(subcommand, after_help = RUN_EXAMPLES)]
    Run(RunCmd),

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
// run

const RUN_EXAMPLES: &str = "\
Examples:
  orchestratectl run create --kind generic --title 'nightly build'
  orchestratectl run list --status active
  orchestratectl run show 01JDXJ5R";

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
        assert_eq!(names, vec!["run", "event", "daemon", "version"]);
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
