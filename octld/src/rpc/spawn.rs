//! `spawn.spinoff`, `spawn.code`.

use std::sync::Arc;

use serde_json::Value;

use octl_proto::method;
use octl_proto::rpc::SpawnParams;
use octl_proto::{AppError, RunKind};

use super::{to_value, Answer, Handle};
use crate::daemon::Daemon;
use crate::engine::spawn::{spawn as spawn_run, SpawnRequest};

pub async fn spawn(daemon: &Arc<Daemon>, kind: RunKind, p: SpawnParams) -> Result<Value, AppError> {
    let handle = spawn_run(
        daemon,
        SpawnRequest {
            kind,
            task: p.task,
            repo: p.repo.into(),
            base: p.base,
            agent: p.agent,
            node: p.node,
            gate: p.gate,
            max_budget_usd: p.max_budget_usd,
            runner: p.runner,
            parent: None,
        },
    )
    .await?;
    let view = handle.view();
    let mut out = to_value(&view.manifest)?;
    if let Some(node) = view.nodes.first() {
        out["node"] = to_value(node)?;
    }
    Ok(out)
}

impl Handle for method::SpawnSpinoff {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Answer, AppError> {
        spawn(daemon, RunKind::Spinoff, p).await.map(Answer::Value)
    }
}

impl Handle for method::SpawnCode {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Answer, AppError> {
        spawn(daemon, RunKind::Code, p).await.map(Answer::Value)
    }
}
