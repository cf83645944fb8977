//! `run.gc` and `recover`: garbage and recovery ([`crate::engine::gc`]).

use std::sync::Arc;

use serde_json::Value;

use octl_proto::method;
use octl_proto::rpc::{GcParams, RecoverParams};
use octl_proto::AppError;

use super::{to_value, Answer, Handle};
use crate::daemon::Daemon;

pub async fn gc(daemon: &Arc<Daemon>, p: GcParams) -> Result<Value, AppError> {
    let older_than = match &p.older_than {
        Some(age) => Some(octl_proto::time::parse_age("older_than", age)?),
        None => None,
    };
    to_value(&crate::engine::gc::gc(daemon, p.dry_run, older_than).await?)
}

pub async fn recover(daemon: &Arc<Daemon>, p: RecoverParams) -> Result<Value, AppError> {
    to_value(&crate::engine::gc::recover(daemon, p).await?)
}

impl Handle for method::RunGc {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Answer, AppError> {
        gc(daemon, p).await.map(Answer::Value)
    }
}

impl Handle for method::Recover {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Answer, AppError> {
        recover(daemon, p).await.map(Answer::Value)
    }
}
