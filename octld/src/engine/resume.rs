//! A node paused by a usage limit starts again once the limit has reset
//! ([`super::decide::limits::resume_due`]): `node.starting` (the intent, naming the same
//! branch and worktree), then its agent in the worktree it left, continuing its conversation
//! (`claude --resume <session>`) when the session is known.

use std::path::Path;
use std::sync::Arc;

use octl_proto::event::NodeFailed;
use octl_proto::state::Node;
use octl_proto::{AppError, RunKind};

use super::{append, merge, spawn};
use crate::agents::{self, Extra, Mode, Session};
use crate::bootstrap::Bootstrap;
use crate::daemon::Daemon;
use crate::store::RunHandle;

/// The conversation a later attempt of `node` continues: the one the daemon chose at launch,
/// else the one its last session reported.
pub fn session_of(node: &Node) -> Option<String> {
    node.session_id
        .clone()
        .or_else(|| node.outcome.as_ref().and_then(|o| o.session_id.clone()))
}

/// Resumes `node` if it is still paused and due (judged again under its slot).
pub async fn resume(daemon: &Arc<Daemon>, handle: &Arc<RunHandle>, node: &str) {
    let view = handle.view();
    let now = crate::store::writer::now_ms();
    let Some(node) = view
        .nodes
        .iter()
        .find(|n| n.id == node && super::decide::limits::resume_due(n, now))
        .cloned()
    else {
        return;
    };
    if let Err(e) = start_again(daemon, handle, &view, &node).await {
        tracing::warn!(run = %handle.id, node = %node.id, error = %e.message, "a paused node did not start again");
    }
}

async fn start_again(
    daemon: &Arc<Daemon>,
    handle: &Arc<RunHandle>,
    view: &octl_proto::projection::RunDetail,
    node: &Node,
) -> Result<(), AppError> {
    let mode = if view.manifest.kind == Some(RunKind::Code) {
        Mode::Interactive
    } else {
        Mode::Autonomous
    };
    let launch = daemon.config.get().and_then(|config| {
        let profile = agents::resolve(&config, node.agent.as_deref())?;
        agents::require_program(&profile, mode, std::env::var_os("PATH").as_deref())?;
        // Claude Code continues its conversation; one that never reported its session
        // starts a new one (in the same worktree, where its work is).
        let session = profile
            .session_for(node)
            .map(|fresh| match session_of(node) {
                Some(id) => Session { id, resume: true },
                None => fresh,
            });
        let gate = node
            .gate
            .as_deref()
            .or(view.manifest.settings.gate.as_deref());
        let launch = profile
            .launch(
                mode,
                &agents::review::prompt(&profile, node, session.as_ref(), &handle.dir),
                session.as_ref(),
            )?
            .with(&Extra {
                gate,
                max_budget_usd: super::decide::limits::node_budget(
                    view,
                    agents::node_budget(&config, &profile),
                ),
                permissions: Some(&node.permissions),
            });
        Ok((launch, session))
    });
    let (repo, start_point) = match (view.manifest.repo.clone(), merge::target_of(view)) {
        (Some(r), Some(t)) => (r, t),
        _ => return Err(AppError::invalid("the run names no repository or target")),
    };
    let (launch, session) = match launch {
        Ok(l) => l,
        Err(e) => {
            let reason = format!("cannot start again after its usage limit: {}", e.message);
            append(daemon, handle, Some(&node.id), NodeFailed::because(reason)).await?;
            return Err(e);
        }
    };
    tracing::info!(run = %handle.id, node = %node.id, session = ?session.as_ref().map(|s| &s.id), "the usage limit has reset; starting the paused node again");
    let boot = daemon
        .config
        .get()
        .and_then(|c| Bootstrap::resolve(&c, Path::new(&repo)));
    spawn::write_intent(
        daemon,
        handle,
        &node.id,
        boot.as_ref().map_err(Clone::clone),
        session.as_ref(),
    )
    .await?;
    // Its branch and worktree are still there: reused, as after a crash.
    spawn::bring_up(
        daemon,
        handle,
        &node.id,
        Path::new(&repo),
        &start_point,
        &launch,
        true,
    )
    .await
}
