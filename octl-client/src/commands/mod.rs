//! One module per command group. Each exposes `execute(ctx, cmd)`, which talks to the daemon
//! through [`Ctx::client`] and prints through [`Ctx::out`]; errors are returned, not printed.

pub mod daemon;
pub mod event;
pub mod run;
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

/// Runs the chosen command.
pub async fn dispatch(ctx: &Ctx, group: Group) -> Result<(), AppError> {
    match group {
        Group::Run(cmd) => run::execute(ctx, cmd).await,
        Group::Event(cmd) => event::execute(ctx, cmd).await,
        Group::Daemon(cmd) => daemon::execute(ctx, cmd).await,
        Group::Version => version::execute(ctx),
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
