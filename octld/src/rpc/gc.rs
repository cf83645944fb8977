//! `run.gc` and `recover`: garbage and recovery ([`crate::engine::gc`]).

use std::sync::Arc;

use octl_proto::method;
use octl_proto::rpc::{GcParams, RecoverParams};
use octl_proto::rpc::{GcResult, RecoverResult};
use octl_proto::AppError;

use super::Handle;
use crate::daemon::Daemon;

pub async fn gc(daemon: &Arc<Daemon>, p: GcParams) -> Result<GcResult, AppError> {
    let older_than = match &p.older_than {
        Some(age) => Some(octl_proto::time::parse_age("older_than", age)?),
        None => None,
    };
    crate::engine::gc::gc(daemon, p.dry_run, older_than).await
}

pub async fn recover(daemon: &Arc<Daemon>, p: RecoverParams) -> Result<RecoverResult, AppError> {
    crate::engine::gc::recover(daemon, p).await
}

impl Handle for method::RunGc {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        gc(daemon, p).await
    }
}

impl Handle for method::Recover {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        recover(daemon, p).await
    }
}
