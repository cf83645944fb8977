//! `orchestratectl`, the command-line client of the octld daemon.
//!
//! - [`cli`]: the command line (clap derive): global flags and the enum of command groups;
//!   each group's clap types live beside its `execute` in [`commands`].
//! - [`home`]: where the state lives (`--home` > `$OCTL_HOME` > `~/.orchestratectl`) and its paths.
//! - [`client`]: JSON-RPC over the Unix socket (hyper, one connection per call), the event
//!   stream, autostart.
//! - [`output`]: human and JSON printing, error printing, exit codes, tables.
//! - [`log_file`]: reading and following a run's `events.jsonl` when the daemon is down.
//! - [`run_index`]: the daemon's run index read from disk when it is down (the TUI).
//! - [`follow`]: following runs: until they settle (`run wait`, `… --wait`, `demo`) with live
//!   progress on stderr; until they end (`run watch`, a redrawn view or plain lines); and the
//!   event stream across daemon restarts (also for `discussion ask --wait`).
//! - [`text_file`]: text given as a file or on stdin (`--task-file`, `--body-file`).
//! - [`hook`]: `orchestratectl hook EVENT`, the fast path Claude Code's hooks run (no clap, no
//!   runtime; `src/main.rs` takes it first).
//! - [`skills`]: the bundled Claude Code skills (embedded by `build.rs`), their frontmatter,
//!   and installing them without overwriting edited files.
//! - [`commands`]: one module per command group (`spawn`, `fanout`, `orchestrate`, `run`,
//!   `merge`, `node`, `discussion`, `spinoff`, `skill`, `recover` (and `run gc`), `demo`,
//!   `event`, `daemon`, `doctor`, `version`).
//! - [`tui`]: `orchestratectl tui`, the terminal UI over every run (ratatui + crossterm).
//!
//! [`main`] is the whole program; `src/main.rs` only calls it.

pub mod cli;
pub mod client;
pub mod commands;
pub mod follow;
pub mod home;
pub mod hook;
pub mod log_file;
pub mod output;
pub mod run_index;
pub mod skills;
pub mod text_file;
pub mod tui;

use std::ffi::OsString;

use clap::error::ErrorKind as ClapErrorKind;
use clap::Parser;
use octl_proto::AppError;

use crate::cli::{wants_json, Cli};
use crate::client::{autostart_disabled, Client};
use crate::commands::Ctx;
use crate::home::Home;
use crate::output::{missing_command_error, print_error, usage_error, Output};

/// Runs the CLI with these arguments and returns the process exit code.
pub fn main(args: Vec<OsString>) -> i32 {
    // Not a command of the CLI (so no completion script offers it): what those scripts call.
    if args.get(1).is_some_and(|a| {
        a == commands::complete::COMPLETE || a == commands::complete::COMPLETE_RUNS
    }) {
        return commands::complete::answer(&args[1..]);
    }
    let json = wants_json(&args);
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(err) => return clap_failure(json, err),
    };
    let home = match Home::from_env(cli.home.as_deref()) {
        Ok(home) => home,
        Err(err) => return print_error(cli.json, &err),
    };
    let ctx = Ctx {
        out: Output::new(cli.json),
        client: Client::new(
            home,
            !autostart_disabled(std::env::var_os("OCTL_NO_AUTOSTART")),
        ),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let err = AppError::internal(format!("cannot start the async runtime: {e}"));
            return print_error(cli.json, &err);
        }
    };
    match runtime.block_on(commands::dispatch(&ctx, cli.group)) {
        Ok(code) => code,
        Err(err) => print_error(cli.json, &err),
    }
}

/// Help and version requests print and succeed; usage errors exit 2, as JSON with `--json`.
fn clap_failure(json: bool, err: clap::Error) -> i32 {
    match err.kind() {
        ClapErrorKind::DisplayHelp | ClapErrorKind::DisplayVersion => {
            let _ = err.print();
            0
        }
        ClapErrorKind::DisplayHelpOnMissingArgumentOrSubcommand if json => {
            print_error(true, &missing_command_error(&err.render().to_string()))
        }
        _ if json => print_error(true, &usage_error(&err.render().to_string())),
        _ => {
            let _ = err.print();
            2
        }
    }
}
