//! One module per command group. Each exposes `execute(ctx, cmd)`, which talks to the daemon
//! through [`Ctx::client`] and prints through [`Ctx::out`]; errors are returned, not printed.
//! A command that ends with a non-zero exit code without an error (`run wait` on a failed run:
//! its summary is the result) returns that code.

pub mod daemon;
pub mod demo;
pub mod event;
pub mod merge;
pub mod node;
pub mod run;
pub mod skill;
pub mod spawn;
pub mod version;

use octl_proto::AppError;

use crate::cli::Group;
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
        Group::Run(cmd) => run::execute(ctx, cmd).await,
        Group::Merge(args) => merge::execute(ctx, args).await.map(|()| 0),
        Group::Node(cmd) => node::execute(ctx, cmd).await.map(|()| 0),
        Group::Skill(cmd) => skill::execute(ctx, cmd).map(|()| 0),
        Group::Demo(args) => demo::execute(ctx, args).await,
        Group::Event(cmd) => event::execute(ctx, cmd).await.map(|()| 0),
        Group::Daemon(cmd) => daemon::execute(ctx, cmd).await.map(|()| 0),
        Group::Version => version::execute(ctx).map(|()| 0),
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
