//! A done node in a run the daemon merges by itself: wait for its agent to leave, run the
//! gate, merge, clean up. A failing gate fails the node and keeps its branch and worktree.

use std::sync::Arc;
use std::time::{Duration, Instant};

use octl_proto::event::{NodeFailed, Nullable};

use octl_proto::{AppError, NodeState};

use super::{append, blocking, cleanup, merge};
use crate::daemon::Daemon;
use crate::store::RunHandle;

/// How long an agent that reported done may take to leave before its window is closed.
const EXIT_GRACE: Duration = Duration::from_secs(30);

pub async fn finish(daemon: &Arc<Daemon>, handle: &Arc<RunHandle>, node_id: &str) {
    if let Err(e) = steps(daemon, handle, node_id).await {
        tracing::info!(run = %handle.id, node = node_id, kind = %e.kind, error = %e.message, "node not merged");
    }
}

async fn steps(
    daemon: &Arc<Daemon>,
    handle: &Arc<RunHandle>,
    node_id: &str,
) -> Result<(), AppError> {
    let view = handle.view();
    let Some(node) = view.nodes.iter().find(|n| n.id == node_id).cloned() else {
        return Ok(());
    };
    if node.state != NodeState::Done {
        return Ok(());
    }
    // A best-of-N attempt that won was gated before it was judged.
    if !node.gated && !settle_and_gate(daemon, handle, &node).await? {
        return Ok(());
    }
    let merged = merge::merge_node(daemon, handle, node_id, false).await?;
    let node = handle
        .view()
        .nodes
        .iter()
        .find(|n| n.id == node_id)
        .cloned()
        .unwrap_or(node);
    cleanup::cleanup(daemon, handle, &node, Some(&merged.target)).await
}

/// Waits for a done node's agent to leave, brings a sandboxed agent's commits back, and runs
/// the gate (the node's, else the run's), recording its failure (`node.failed`): whether it
/// passed (or there is none).
pub(super) async fn settle_and_gate(
    daemon: &Arc<Daemon>,
    handle: &Arc<RunHandle>,
    node: &octl_proto::state::Node,
) -> Result<bool, AppError> {
    wait_for_exit(daemon, &handle.id, node, node.pane.clone()).await;
    // A sandboxed agent's commits are in its copy of its branch until brought back.
    let (home, run, n) = (daemon.home.clone(), handle.id.clone(), node.clone());
    let _ = blocking(move || Ok(crate::sandbox::harvest_node(&home, &run, &n))).await;
    let gate = node
        .gate
        .clone()
        .or_else(|| handle.view().manifest.settings.gate.clone());
    if let Some(gate) = gate {
        let failure = run_gate(daemon, handle, node, &gate).await?;
        // What the gate committed in a sandbox is in the node's copy of its branch.
        let (home, run, n) = (daemon.home.clone(), handle.id.clone(), node.clone());
        let _ = blocking(move || Ok(crate::sandbox::harvest_node(&home, &run, &n))).await;
        if let Some(failure) = failure {
            append(daemon, handle, Some(&node.id), failure).await?;
            return Ok(false);
        }
    }
    Ok(true)
}

/// Waits (bounded) for the agent's pane to die, then closes its window.
/// Asks the node's own runner: a remote agent is not in the local runner's look.
async fn wait_for_exit(
    daemon: &Arc<Daemon>,
    run: &str,
    node: &octl_proto::state::Node,
    pane: Option<String>,
) {
    let Some(pane) = pane else { return };
    // Its exit was judged already (done at its end, with its status): nothing to wait for.
    if node.exit_status.is_some() {
        super::close_window(daemon, run, &node.id, Some(&pane)).await;
        return;
    }
    let deadline = Instant::now() + EXIT_GRACE;
    let named = node.runner.clone();
    let node = node.id.as_str();
    loop {
        let (d, named, p, r, n) = (
            daemon.clone(),
            named.clone(),
            pane.clone(),
            run.to_string(),
            node.to_string(),
        );
        let alive = blocking(move || {
            Ok(d.runners
                .of(named.as_deref())?
                .observe()?
                .agents
                .into_iter()
                .any(|a| a.handle.as_str() == p && a.run == r && a.node == n && a.alive))
        })
        .await
        .unwrap_or(false);
        if !alive || Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(super::TICK).await;
    }
    super::close_window(daemon, run, node, Some(&pane)).await;
}

/// Runs the gate in the node's worktree, its output appended to the node's log; in the
/// node's sandbox when its agent had one (the gate runs the agent's code: its build scripts,
/// its tests). `Some(data)` for a `node.failed` when it fails.
async fn run_gate(
    daemon: &Arc<Daemon>,
    handle: &Arc<RunHandle>,
    node: &octl_proto::state::Node,
    gate: &str,
) -> Result<Option<NodeFailed>, AppError> {
    let Some(worktree) = node.worktree.clone() else {
        return Ok(None);
    };
    let log = handle.dir.join("logs").join(format!("{}.log", node.id));
    let gate = gate.to_string();
    let sh = vec!["sh".to_string(), "-c".to_string(), gate.clone()];
    let config = daemon.config.get()?;
    let argv = if super::spawn::sandbox_kind(&config, &handle.view().manifest.settings, Some(node))
        == octl_proto::sandbox::SandboxKind::None
    {
        sh
    } else {
        let env: Vec<(String, String)> = std::env::vars().collect();
        let branch = super::spawn::branch_name(&handle.id, &node.id);
        crate::sandbox::wrap(
            daemon,
            &config.sandbox,
            &crate::sandbox::Node {
                run: &handle.id,
                node: &node.id,
                worktree: std::path::Path::new(&worktree),
                branch: &branch,
                env: &env,
                argv: &sh,
            },
        )?
    };
    blocking(move || {
        use std::io::Write;
        let mut out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(|e| AppError::internal(format!("cannot open {}: {e}", log.display())))?;
        let _ = writeln!(out, "\n== gate: {gate}");
        let err = out
            .try_clone()
            .map_err(|e| AppError::internal(e.to_string()))?;
        let status = std::process::Command::new(&argv[0])
            .args(&argv[1..])
            .current_dir(&worktree)
            .stdin(std::process::Stdio::null())
            .stdout(
                out.try_clone()
                    .map_err(|e| AppError::internal(e.to_string()))?,
            )
            .stderr(err)
            .status()
            .map_err(|e| {
                AppError::new(
                    octl_proto::ErrorKind::ToolFailed,
                    format!("cannot run the gate: {e}"),
                )
            })?;
        let _ = writeln!(out, "== gate exited with {status}");
        Ok((!status.success()).then(|| NodeFailed {
            reason: Some(format!(
                "the gate `{gate}` failed ({status}); its output is in the node's log"
            )),
            exit_status: Some(Nullable(status.code().map(i64::from))),
            ..NodeFailed::default()
        }))
    })
    .await
}
