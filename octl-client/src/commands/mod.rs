//! One module per command group. Each exposes `execute(ctx, cmd)`, which talks to the daemon
//! through [`Ctx::client`] and prints through [`Ctx::out`]; errors are returned, not printed.
//! A command that ends with a non-zero exit code without an error (`run wait` on a failed run:
//! its summary is the result) returns that code.

pub mod complete;
pub mod daemon;
pub mod demo;
pub mod discussion;
pub mod doctor;
pub mod event;
pub mod fanout;
pub mod logs;
pub mod merge;
pub mod node;
pub mod orchestrate;
pub mod pick;
pub mod recover;
pub mod review;
pub mod run;
pub mod shell;
pub mod skill;
pub mod spawn;
pub mod spinoff;
pub mod ui;
pub mod version;

use octl_proto::method::Method;
use octl_proto::{AppError, ErrorKind};

use crate::cli::Group;
pub use crate::client::result_of;
use crate::client::Client;
use crate::output::Output;

/// What every command gets: how to print, and the daemon's client (which knows the home).
pub struct Ctx {
    pub out: Output,
    pub client: Client,
}

/// Runs the chosen command and returns its exit code (errors are printed by the caller).
pub async fn dispatch(ctx: &Ctx, group: Group) -> Result<i32, AppError> {
    match group {
        Group::Spawn(cmd) => spawn::execute(ctx, cmd).await,
        Group::FanOut(args) => fanout::execute(ctx, args).await,
        Group::Orchestrate(args) => orchestrate::execute(ctx, args).await,
        Group::Run(cmd) => run::execute(ctx, cmd).await,
        Group::Tui(args) => crate::tui::execute(ctx, args).await,
        Group::Ui(args) => ui::execute(ctx, args).await.map(|()| 0),
        Group::Merge(args) => merge::execute(ctx, args).await.map(|()| 0),
        Group::Pick(args) => pick::execute(ctx, args).await.map(|()| 0),
        Group::Review(args) => review::execute(ctx, args).await.map(|()| 0),
        Group::Node(cmd) => node::execute(ctx, cmd).await.map(|()| 0),
        Group::Discussion(cmd) => discussion::execute(ctx, cmd).await,
        Group::Spinoff(cmd) => spinoff::execute(ctx, cmd).await.map(|()| 0),
        Group::Skill(cmd) => skill::execute(ctx, cmd).map(|()| 0),
        Group::Demo(args) => demo::execute(ctx, args).await,
        Group::Event(cmd) => event::execute(ctx, cmd).await.map(|()| 0),
        Group::Daemon(cmd) => daemon::execute(ctx, cmd).await.map(|()| 0),
        Group::Version => version::execute(ctx).map(|()| 0),
        Group::Hook(args) => Ok(crate::hook::run(args.event.as_deref())),
        Group::Recover(args) => recover::execute(ctx, args).await.map(|()| 0),
        Group::Doctor(args) => doctor::execute(ctx, args).await,
        Group::Completions(args) => shell::completions(&args).map(|()| 0),
        Group::Man(args) => shell::man(&args).map(|()| 0),
    }
}

/// Reads a result from the daemon into a typed shape, for the human output.
pub fn decode<T: serde::de::DeserializeOwned>(
    what: &str,
    value: &serde_json::Value,
) -> Result<T, AppError> {
    serde_json::from_value(value.clone()).map_err(|e| {
        AppError::internal(format!(
            "octld's answer to {what} has an unexpected shape: {e}"
        ))
    })
}

/// Calls method `M` (its answer as the daemon wrote it, for printing unchanged; [`result_of`]
/// types it), making `method_not_found` from a daemon older than this CLI say what to do.
pub async fn call<M: Method>(ctx: &Ctx, params: &M::Params) -> Result<serde_json::Value, AppError> {
    ctx.client
        .call_value::<M>(params)
        .await
        .map_err(|e| explain_missing_method(e, M::NAME))
}

/// A daemon that predates a method answers `method_not_found`; say so plainly.
pub fn explain_missing_method(err: AppError, method: &str) -> AppError {
    if err.kind != ErrorKind::MethodNotFound {
        return err;
    }
    let message = format!(
        "{} (the running octld does not know {method}; it is older than this orchestratectl)",
        err.message
    );
    AppError { message, ..err }.with_hint(
        "restart it with the matching version: `orchestratectl daemon restart`, then run the command again",
    )
}
