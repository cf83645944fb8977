//! The JSON-RPC methods. One file per family; each method is declared once, beside its
//! types in the family's file of the same name in `octl_proto::rpc` (`octl-proto/src/rpc/`),
//! and answered by its [`Handle`] impl in its family's file here; [`dispatch`] is generated
//! from the declarations.
//!
//! - [`daemon`]: `daemon.status`, `daemon.shutdown`.
//! - [`run`]: `run.create`, `run.list`, `run.show`, `run.rebuild`, `run.cancel`, `run.retry`,
//!   `run.quarantine`.
//! - [`event`]: `event.append`, `event.list`.
//! - [`spawn`]: `spawn.spinoff`, `spawn.code`.
//! - [`node`]: `node.done`, `node.fail`, `node.progress` (an agent's reports), `node.send`,
//!   `node.screen`.
//! - [`merge`]: `merge` (code runs, retries, an orchestrate run's integration branch).
//! - [`fanout`]: `fanout.start`, `fanout.manifest`, `orchestrate.start`.
//! - [`discussion`]: `discussion.ask`, `discussion.list`, `discussion.answer`.
//! - [`spinoff`]: `spinoff.propose`, `spinoff.list`, `spinoff.accept`, `spinoff.reject`.
//! - [`gc`]: `run.gc`, `recover` (garbage and recovery).
//! - [`doctor`]: `doctor.runs`, `doctor.orphans`, `doctor.agents`, `doctor.runners` (the daemon's side of doctor).
//! - [`ui`]: `ui.open`, `ui.close` (the web UI).
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
pub mod ui;

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use serde_json::Value;

use octl_proto::method::{self, Method, MethodId};
use octl_proto::{AppError, ErrorKind};

use crate::daemon::Daemon;

/// How the daemon answers method `M`: implemented next to its handler in the family's file,
/// taking the params type `M` declares and returning the result type it declares, which
/// [`dispatch`] serializes. [`dispatch`] calls it for every declared method, so a method
/// without one does not compile, and one whose answer is not its declared type neither.
pub trait Handle: Method {
    fn handle(
        daemon: &Arc<Daemon>,
        p: Self::Params,
    ) -> impl std::future::Future<Output = Result<Self::Result, AppError>> + Send;
}

/// Runs one method: its declared params parsed strictly by [`args`], then its [`Handle`]; the
/// answer is its result as JSON text. The arms are generated from the declarations, so no
/// undeclared name can be dispatched.
pub async fn dispatch(
    daemon: &Arc<Daemon>,
    method: &str,
    params: Value,
) -> Result<Box<RawValue>, AppError> {
    let Some(id) = MethodId::from_name(method) else {
        return Err(AppError::new(
            ErrorKind::MethodNotFound,
            format!("method not found: {method:?}; rpc.discover lists every method"),
        ));
    };
    macro_rules! dispatch {
        ($($ty:ident),*) => {
            $(if id == <method::$ty as Method>::ID {
                let result =
                    <method::$ty as Handle>::handle(daemon, args::<method::$ty>(params)?).await?;
                return serde_json::value::to_raw_value(&result)
                    .map_err(|e| AppError::internal(format!("{method}: cannot write its result: {e}")));
            })*
        };
    }
    octl_proto::for_each_method!(dispatch);
    unreachable!("{method} is declared but in no table")
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
