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
    let req = SpawnRequest {
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
    };
    let handle = match p.attempts {
        Some(n) => {
            let attempts = crate::engine::attempts::Attempts::check(
                n,
                p.agents,
                p.judge,
                p.judge_command,
                p.first_passing,
                p.rank,
                p.max_parallel,
            )?;
            crate::engine::attempts::spawn(daemon, req, attempts).await?
        }
        None => {
            if !p.agents.is_empty()
                || p.judge.is_some()
                || p.judge_command.is_some()
                || p.first_passing
                || !p.rank.is_empty()
                || p.max_parallel.is_some()
            {
                return Err(AppError::invalid(
                    "agents, judge, judge_command, first_passing, rank and max_parallel go with attempts (--attempts N)",
                ));
            }
            spawn_run(daemon, req).await?
        }
    };
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
