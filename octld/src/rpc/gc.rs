//! `run.gc` and `recover`: garbage and recovery ([`crate::engine::gc`]).

use std::sync::Arc;

use serde_json::Value;

use octl_proto::rpc::{GcParams, RecoverParams};
use octl_proto::AppError;

use super::{params, to_value};
use crate::daemon::Daemon;

pub async fn gc(daemon: &Arc<Daemon>, p: Value) -> Result<Value, AppError> {
    let p: GcParams = params(p)?;
    to_value(&crate::engine::gc::gc(daemon, p.dry_run).await?)
}

pub async fn recover(daemon: &Arc<Daemon>, p: Value) -> Result<Value, AppError> {
    let p: RecoverParams = params(p)?;
    octl_proto::ids::validate_node_id("node", &p.node)?;
    let handle = daemon.store.resolve("run", &p.run)?;
    to_value(&crate::engine::gc::recover(&handle, &p.node, p.branch).await?)
}
