//! The activity of the built-in agent CLIs (`codex`, `gemini`, `opencode`, `aider`), read from
//! their streams: they have no hooks, but their output says when a tool call starts, a message
//! comes and the turn ends. Each supervisor tick reads what a live agent's log gained; each
//! change of what it is doing becomes a `node.activity` (actor `agent`: the agent said it, in
//! its stream), never one event per line.

use std::collections::HashSet;
use std::sync::Arc;

use octl_proto::event::{Actor, NodeActivity};
use octl_proto::state::{ExitPolicy, Node};

use super::blocking;
use crate::agents::Builtin;
use crate::daemon::Daemon;
use crate::store::{Draft, RunHandle};
use crate::streams::{Doing, Follow, Stream};

/// The stream a node's agent reports in: a built-in CLI's, run autonomously (`on_exit`
/// `stream`).
pub fn stream_of(node: &Node) -> Option<Stream> {
    (node.exit_policy() == Some(ExitPolicy::Stream))
        .then(|| node.agent.as_deref().and_then(Builtin::parse))
        .flatten()
        .map(Builtin::stream)
}

/// Records what `node`'s agent started doing since the last look. `ended`: its process
/// ended; the rest of its stream is read, and it is no longer followed.
pub async fn record(daemon: &Arc<Daemon>, handle: &RunHandle, node: &Node, ended: bool) {
    let Some(stream) = stream_of(node) else {
        return;
    };
    let key = (handle.id.clone(), node.id.clone());
    let log = handle.dir.join("logs").join(format!("{}.log", node.id));
    let recorded = node.activity.as_ref().map(|a| Doing {
        state: a.state,
        detail: a.detail.clone(),
    });
    let d = daemon.clone();
    let changes = blocking(move || {
        let mut follows = d.engine.follows.lock().expect("follows lock");
        let follow = follows
            .entry(key.clone())
            .or_insert_with(|| Follow::new(stream, recorded));
        let changes = follow.read(&log);
        if ended {
            follows.remove(&key);
        }
        Ok(changes)
    })
    .await
    .unwrap_or_default();
    if changes.is_empty() {
        return;
    }
    let drafts = changes
        .into_iter()
        .map(|doing| {
            let said = NodeActivity {
                state: doing.state.as_str().to_string(),
                detail: doing.detail,
                ..NodeActivity::default()
            };
            Draft::said(Some(node.id.clone()), Actor::Agent, said)
        })
        .collect();
    if let Err(e) = daemon.store.append_all(handle, drafts).await {
        // The node moved on first (its end is recorded): what it said last no longer counts.
        tracing::debug!(run = %handle.id, node = %node.id, error = %e.message, "stream activity not recorded");
    }
}

/// Stops following the streams of agents that are no longer watched (cancelled, gone);
/// `watched` is asked only when some stream is followed.
pub fn forget_others(daemon: &Daemon, watched: impl FnOnce() -> HashSet<(String, String)>) {
    let mut follows = daemon.engine.follows.lock().expect("follows lock");
    if follows.is_empty() {
        return;
    }
    let watched = watched();
    follows.retain(|key, _| watched.contains(key));
}
