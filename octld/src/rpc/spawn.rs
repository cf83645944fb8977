//! `spawn.spinoff`, `spawn.code`.

use std::sync::Arc;

use octl_proto::method;
use octl_proto::rpc::{SpawnParams, Spawned};
use octl_proto::{AppError, RunKind};

use super::Handle;
use crate::daemon::Daemon;
use crate::engine::spawn::{spawn as spawn_run, SpawnRequest};

pub async fn spawn(
    daemon: &Arc<Daemon>,
    kind: RunKind,
    p: SpawnParams,
) -> Result<Spawned, AppError> {
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
            permissions: p.permissions,
            review: p.review,
            sandbox: p.sandbox,
            parent: None,
        },
    )
    .await?;
    let view = handle.view();
    Ok(Spawned {
        run: view.manifest.clone(),
        node: view.nodes.first().cloned(),
    })
}

impl Handle for method::SpawnSpinoff {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        spawn(daemon, RunKind::Spinoff, p).await
    }
}

impl Handle for method::SpawnCode {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        spawn(daemon, RunKind::Code, p).await
    }
}
