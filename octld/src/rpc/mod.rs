//! The JSON-RPC methods. One file per family; each method is declared once, in
//! [`octl_proto::method`], and [`dispatch`] matches every declared method exhaustively.
//!
//! - [`daemon`]: `daemon.status`, `daemon.shutdown`.
//! - [`run`]: `run.create`, `run.list`, `run.show`, `run.rebuild`, `run.cancel`, `run.retry`,
//!   `run.quarantine`.
//! - [`event`]: `event.append`, `event.list`.
//! - [`spawn`]: `spawn.spinoff`, `spawn.code`.
//! - [`node`]: `node.done`, `node.fail`, `node.progress` (an agent's reports).
//! - [`merge`]: `merge` (code runs, retries, an orchestrate run's integration branch).
//! - [`fanout`]: `fanout.start`, `fanout.manifest`, `orchestrate.start`.
//! - [`discussion`]: `discussion.ask`, `discussion.list`, `discussion.answer`.
//! - [`spinoff`]: `spinoff.propose`, `spinoff.list`, `spinoff.accept`, `spinoff.reject`.
//! - [`gc`]: `run.gc`, `recover` (garbage and recovery).
//! - [`doctor`]: `doctor.runs`, `doctor.orphans`, `doctor.agents` (the daemon's side of doctor).
//! - [`discover`]: the OpenRPC document of `rpc.discover`.

pub mod daemon;
pub mod discover;
pub mod discussion;
pub mod doctor;
pub mod event;
pub mod fanout;
pub mod gc;
pub mod merge;
pub mod node;
pub mod run;
pub mod spawn;
pub mod spinoff;

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use serde_json::Value;

use octl_proto::method::{self, Method, MethodId};
use octl_proto::{AppError, ErrorKind, RunKind};

use crate::daemon::Daemon;

/// A method's result: a value, or JSON text written beforehand (`run.list` copies each run's
/// summary, serialized when the run last changed, instead of building values per call).
pub enum Answer {
    Value(Value),
    Raw(Box<RawValue>),
}

/// Runs one method. The match is exhaustive over the declared methods, so a method declared
/// in [`octl_proto::method`] cannot go undispatched and no undeclared name can be dispatched;
/// each handler takes the params type its declaration names (parsed strictly by [`args`]).
pub async fn dispatch(
    daemon: &Arc<Daemon>,
    method: &str,
    params: Value,
) -> Result<Answer, AppError> {
    let Some(id) = MethodId::from_name(method) else {
        return Err(AppError::new(
            ErrorKind::MethodNotFound,
            format!("method not found: {method:?}; rpc.discover lists every method"),
        ));
    };
    let value = match id {
        MethodId::RunList => {
            return run::list(daemon, args::<method::RunList>(params)?).map(Answer::Raw)
        }
        MethodId::DaemonStatus => daemon::status(daemon, args::<method::DaemonStatus>(params)?),
        MethodId::DaemonShutdown => {
            daemon::shutdown(daemon, args::<method::DaemonShutdown>(params)?)
        }
        MethodId::RunCreate => run::create(daemon, args::<method::RunCreate>(params)?).await,
        MethodId::RunShow => run::show(daemon, args::<method::RunShow>(params)?),
        MethodId::RunRebuild => run::rebuild(daemon, args::<method::RunRebuild>(params)?).await,
        MethodId::RunQuarantine => run::quarantine(daemon, args::<method::RunQuarantine>(params)?),
        MethodId::EventAppend => event::append(daemon, args::<method::EventAppend>(params)?).await,
        MethodId::EventList => event::list(daemon, args::<method::EventList>(params)?).await,
        MethodId::RunCancel => run::cancel(daemon, args::<method::RunCancel>(params)?).await,
        MethodId::SpawnSpinoff => {
            spawn::spawn(
                daemon,
                RunKind::Spinoff,
                args::<method::SpawnSpinoff>(params)?,
            )
            .await
        }
        MethodId::SpawnCode => {
            spawn::spawn(daemon, RunKind::Code, args::<method::SpawnCode>(params)?).await
        }
        // The three reports share their params type.
        MethodId::NodeDone | MethodId::NodeFail | MethodId::NodeProgress => {
            node::report(daemon, id, args::<method::NodeDone>(params)?).await
        }
        MethodId::Merge => merge::merge(daemon, args::<method::Merge>(params)?).await,
        MethodId::RunRetry => run::retry(daemon, args::<method::RunRetry>(params)?).await,
        MethodId::FanoutStart => fanout::start(daemon, args::<method::FanoutStart>(params)?).await,
        MethodId::FanoutManifest => {
            fanout::manifest(daemon, args::<method::FanoutManifest>(params)?).await
        }
        MethodId::OrchestrateStart => {
            fanout::orchestrate(daemon, args::<method::OrchestrateStart>(params)?).await
        }
        MethodId::DiscussionAsk => {
            discussion::ask(daemon, args::<method::DiscussionAsk>(params)?).await
        }
        MethodId::DiscussionList => {
            discussion::list(daemon, args::<method::DiscussionList>(params)?)
        }
        MethodId::DiscussionAnswer => {
            discussion::answer(daemon, args::<method::DiscussionAnswer>(params)?).await
        }
        MethodId::SpinoffPropose => {
            spinoff::propose(daemon, args::<method::SpinoffPropose>(params)?).await
        }
        MethodId::SpinoffList => spinoff::list(daemon, args::<method::SpinoffList>(params)?),
        MethodId::SpinoffAccept => {
            spinoff::accept(daemon, args::<method::SpinoffAccept>(params)?).await
        }
        MethodId::SpinoffReject => {
            spinoff::reject(daemon, args::<method::SpinoffReject>(params)?).await
        }
        MethodId::RunGc => gc::gc(daemon, args::<method::RunGc>(params)?).await,
        MethodId::Recover => gc::recover(daemon, args::<method::Recover>(params)?).await,
        MethodId::DoctorRuns => doctor::runs(daemon, args::<method::DoctorRuns>(params)?).await,
        MethodId::DoctorOrphans => {
            doctor::orphans(daemon, args::<method::DoctorOrphans>(params)?).await
        }
        MethodId::DoctorAgents => {
            doctor::agents(daemon, args::<method::DoctorAgents>(params)?).await
        }
        MethodId::RpcDiscover => discover::discover(args::<method::RpcDiscover>(params)?),
    }?;
    Ok(Answer::Value(value))
}

/// Parses method `M`'s params as it declares them.
fn args<M: Method>(p: Value) -> Result<M::Params, AppError> {
    params(p)
}

/// Parses named params strictly: unknown fields are refused and errors name the field.
pub fn params<T: DeserializeOwned>(params: Value) -> Result<T, AppError> {
    serde_path_to_error::deserialize(params).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        if path == "." {
            AppError::invalid(format!("invalid params: {inner}"))
        } else {
            AppError::invalid(format!("invalid params: {path}: {inner}"))
        }
    })
}

/// Methods that take no parameters still refuse unknown ones.
pub use octl_proto::method::NoParams;

pub fn to_value<T: serde::Serialize>(v: &T) -> Result<Value, AppError> {
    serde_json::to_value(v).map_err(|e| AppError::internal(e.to_string()))
}
