//! Cancelling a run: its agents stopped; with `discard`, its worktrees removed after a
//! snapshot of everything in them, and its branches deleted (their tips live on in the
//! snapshot refs). Cancelling a run that already ended only discards what it left behind.

use std::sync::Arc;

use serde_json::json;

use octl_proto::AppError;

use super::{append, blocking, cleanup};
use crate::daemon::Daemon;
use crate::store::RunHandle;

pub async fn cancel(
    daemon: &Arc<Daemon>,
    handle: &Arc<RunHandle>,
    discard: bool,
) -> Result<(), AppError> {
    let view = handle.view();
    let ended = matches!(
        view.manifest.status.as_str(),
        "completed" | "failed" | "cancelled"
    );
    if !ended {
        for node in view.nodes.iter().filter(|n| !n.state.is_terminal()) {
            // The event first, then the window: the log says why the agent stopped.
            append(daemon, handle, Some(&node.id), "node.cancelled", json!({})).await?;
            super::close_window(daemon, &handle.id, &node.id, node.pane.as_deref()).await;
        }
    }
    if discard {
        for node in handle
            .view()
            .nodes
            .iter()
            .filter(|n| !n.cleaned && n.worktree.is_some())
        {
            cleanup::cleanup(daemon, handle, node, None).await?;
        }
    }
    if !ended {
        append(
            daemon,
            handle,
            None,
            "run.cancelled",
            json!({"discard": discard}),
        )
        .await?;
        let (tmux, session) = (daemon.tmux.clone(), handle.id.clone());
        let _ = blocking(move || Ok(tmux.kill_session(&session)?)).await;
    }
    Ok(())
}
