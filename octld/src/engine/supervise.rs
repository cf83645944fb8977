//! The supervisor: once per tick, one `Runner::observe` per runner in use (one `tmux
//! list-panes` locally), all at once; an agent whose pane died (or vanished) becomes an event,
//! as its profile says. What a remote runner says of a live agent is recorded too: waiting in
//! its queue (`node.queued`, `node.running`), its place not answering (`node.lost`, and
//! `node.found` when it answers again; past `lost_after` the node starts again elsewhere).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use octl_proto::state::Outcome;
use serde_json::Value;

use octl_proto::event::{
    NodeDone, NodeExited, NodeFailed, NodeFound, NodeLost, NodePaused, NodeQueued, NodeRequeued,
    NodeRunning, Nullable, Payload,
};
use octl_proto::projection::ListedStatus;
use octl_proto::projection::RunDetail;
use octl_proto::state::{ExitPolicy, Node};
use octl_proto::{AppError, NodeState};

use super::{append, blocking, Engine};
use crate::daemon::Daemon;
use crate::git::Git;
use crate::runner::{AgentStatus, Requeue};
use crate::store::RunHandle;
use crate::streams::Commands;

/// Ticks a dead pane may go without an exit status before it counts as killed by a signal
/// (tmux may mark a pane dead a moment before it reaps the process).
const UNREAPED_TICKS: u32 = 5;

/// The supervisor's first look after a start, done before the daemon answers anyone: the
/// local agents that exited while it was down become events first, so no answer shows them
/// running. Remote runners are not waited for (a host that does not answer would hold up the
/// start): the ticks look at them.
pub async fn first_look(daemon: &Arc<Daemon>) {
    for step in look(daemon, false).await {
        let _ = step.await;
    }
    close_cancelled(daemon).await;
    end_outlived(daemon).await;
}

/// Agents' processes that outlived their window — the tmux server killed while the daemon
/// was down, a process that ignored SIGHUP, a crash between a node's end and its window's
/// close — are ended; those of a live node whose window is still there are adopted as they
/// are. Judged after the first look recorded every exit, so a node still live here has an
/// agent the supervisor watches.
async fn end_outlived(daemon: &Arc<Daemon>) {
    use octl_proto::NodeState::{Running, Starting, Waiting};
    let live: std::collections::HashSet<(String, String)> = daemon
        .store
        .handles()
        .into_iter()
        .flat_map(|h| {
            let id = h.id.clone();
            h.view()
                .nodes
                .iter()
                .filter(|n| matches!(n.state, Starting | Running | Waiting))
                .map(|n| (id.clone(), n.id.clone()))
                .collect::<Vec<_>>()
        })
        .collect();
    let runner = daemon.runner.clone();
    let swept = blocking(move || {
        let found = runner.processes()?;
        if found.is_empty() {
            return Ok(());
        }
        let windows: std::collections::HashSet<(String, String)> = runner
            .observe()?
            .agents
            .into_iter()
            .map(|a| (a.run, a.node))
            .collect();
        for f in found {
            let key = (f.run.clone(), f.node.clone());
            if live.contains(&key) && windows.contains(&key) {
                continue;
            }
            let ended = runner.end_processes(&f.run, &f.node)?;
            tracing::info!(run = %f.run, node = %f.node, processes = ended, "ended the processes of an agent that outlived its window");
        }
        Ok(())
    })
    .await;
    if let Err(e) = swept {
        tracing::warn!(error = %e.message, "could not look for agents' processes that outlived their window");
    }
}

/// A cancel is decided in the log before its windows are closed: windows of a cancelled run
/// that a crash left running are closed now. Found from the windows there are (a cancelled
/// run may be finished already, known to the index only).
async fn close_cancelled(daemon: &Arc<Daemon>) {
    let runner = daemon.runner.clone();
    let Ok(observed) = blocking(move || runner.observe()).await else {
        return;
    };
    let mut sessions: Vec<String> = observed.agents.into_iter().map(|a| a.run).collect();
    sessions.sort();
    sessions.dedup();
    let cancelled: Vec<String> = sessions
        .into_iter()
        .filter(|run| {
            daemon
                .store
                .get(run)
                .ok()
                .flatten()
                .is_some_and(|h| h.view().manifest.status == ListedStatus::Cancelled)
        })
        .collect();
    if cancelled.is_empty() {
        return;
    }
    let runner = daemon.runner.clone();
    let _ = blocking(move || {
        for run in &cancelled {
            tracing::info!(run = %run, "closing the windows of a cancelled run a crash left open");
            let _ = runner.stop_run(run);
        }
        Ok(())
    })
    .await;
}

/// One look at every agent; returns the exit-handling steps it started.
pub async fn tick(daemon: &Arc<Daemon>) -> Vec<tokio::task::JoinHandle<()>> {
    look(daemon, true).await
}

/// What one runner's look said, for the nodes on it.
struct Looked {
    runner: Arc<dyn crate::runner::Runner>,
    agents: HashMap<String, AgentStatus>,
    unsure: std::collections::HashSet<String>,
    unreachable: HashMap<String, crate::runner::Unreachable>,
    /// `[runners.NAME] lost_after`, ms.
    lost_after: u64,
}

/// One look at the agents of the local runner and (`remote`) of every other in use, all at
/// once; returns the exit-handling steps it started.
async fn look(daemon: &Arc<Daemon>, remote: bool) -> Vec<tokio::task::JoinHandle<()>> {
    let mut steps = Vec::new();
    // Each watched node by its place in its run's view: nothing is copied per tick but for
    // the steps a look starts (at a thousand agents, cloning every node each tick was most of
    // an idle daemon's time).
    let watched: Vec<(Arc<RunHandle>, Arc<RunDetail>, usize)> = daemon
        .store
        .handles()
        .into_iter()
        .flat_map(|h| {
            let view = h.view();
            let at: Vec<usize> = view
                .nodes
                .iter()
                .enumerate()
                .filter(|(_, n)| n.state.is_alive() && n.pane.is_some())
                .filter(|(_, n)| remote || n.runner.as_deref().is_none_or(is_local))
                .map(|(i, _)| i)
                .collect();
            at.into_iter()
                .map(move |i| (h.clone(), view.clone(), i))
                .collect::<Vec<_>>()
        })
        .collect();
    if watched.is_empty() {
        return steps;
    }
    // One look per runner the watched nodes use (local: one `tmux list-panes`; slurm: one
    // `squeue`), all at once. A runner that cannot be looked at leaves its nodes as they are
    // this tick.
    let names: std::collections::BTreeSet<Option<&str>> = watched
        .iter()
        .map(|(_, v, i)| v.nodes[*i].runner.as_deref().filter(|r| !is_local(r)))
        .collect();
    let looks: Vec<_> = names
        .into_iter()
        .map(|name| {
            let name = name.map(str::to_string);
            let d = daemon.clone();
            let n = name.clone();
            let observed = tokio::task::spawn_blocking(move || {
                let runner = d.runners.of(n.as_deref())?;
                let lost_after = match n.as_deref() {
                    Some(n) => d
                        .config
                        .get()
                        .and_then(|c| c.runner(n))
                        .map(|r| r.lost_after_ms())
                        .unwrap_or(crate::config::DEFAULT_LOST_AFTER_MS),
                    None => crate::config::DEFAULT_LOST_AFTER_MS,
                };
                let o = runner.observe()?;
                Ok::<_, AppError>((runner, lost_after, o))
            });
            (name, observed)
        })
        .collect();
    let mut looked: HashMap<Option<String>, Looked> = HashMap::new();
    for (name, observed) in looks {
        let observed = observed
            .await
            .map_err(|e| AppError::internal(format!("a look panicked: {e}")))
            .and_then(|o| o);
        match observed {
            Ok((runner, lost_after, o)) => {
                if name.is_none() {
                    let local = watched
                        .iter()
                        .filter(|(_, v, i)| v.nodes[*i].runner.as_deref().is_none_or(is_local))
                        .count();
                    note_server(daemon, o.host, local);
                }
                looked.insert(
                    name,
                    Looked {
                        runner,
                        agents: o
                            .agents
                            .into_iter()
                            .map(|a| (a.handle.as_str().to_string(), a))
                            .collect(),
                        unsure: o.unsure.into_iter().collect(),
                        unreachable: o
                            .unreachable
                            .into_iter()
                            .map(|u| (u.place.clone(), u))
                            .collect(),
                        lost_after,
                    },
                );
            }
            Err(e) => {
                tracing::warn!(runner = name.as_deref().unwrap_or("local"), error = %e.message, "cannot observe the agents of a runner");
            }
        }
    }
    // Read once per tick, and only when an agent runs (its profile's silence limit).
    let mut silences = Silences::default();
    super::stream_activity::forget_others(daemon, || {
        watched
            .iter()
            .map(|(h, v, i)| (h.id.clone(), v.nodes[*i].id.clone()))
            .collect()
    });
    let now = crate::store::writer::now_ms();
    for (handle, view, i) in watched {
        let node = &view.nodes[i];
        let pane_id = node.pane.as_deref().expect("filtered on pane");
        let runner = runner_name(node);
        let Some(seen) = looked.get(&runner) else {
            continue;
        };
        // The pane must still be this node's: ids restart with a new tmux server.
        let mine = seen
            .agents
            .get(pane_id)
            .filter(|p| p.run == handle.id && p.node == node.id);
        let lost_over = node
            .lost
            .as_ref()
            .and_then(|l| octl_proto::time::parse_millis(&l.since))
            .is_some_and(|since| now.saturating_sub(since) >= seen.lost_after);
        if mine.is_none() {
            let place = seen
                .runner
                .place_of(&crate::runner::AgentHandle::new(pane_id));
            if place.as_ref().is_some_and(|p| seen.unsure.contains(p)) {
                continue;
            }
            let unreachable = place.as_ref().and_then(|p| seen.unreachable.get(p));
            // Lost long enough (whatever its place says now): started again elsewhere.
            if lost_over {
                let reason = node
                    .lost
                    .as_ref()
                    .map(|l| l.reason.clone())
                    .unwrap_or_default();
                if let Some(slot) =
                    Engine::claim(daemon, &handle.id, super::StepKey::node(&node.id))
                {
                    let (d, r, node) = (daemon.clone(), seen.runner.clone(), node.clone());
                    steps.push(tokio::spawn(async move {
                        start_again(&d, &handle, &node, r, &reason).await;
                        drop(slot);
                    }));
                }
                continue;
            }
            if let Some(u) = unreachable {
                if node.state != NodeState::Lost {
                    note(
                        daemon,
                        &handle,
                        node,
                        NodeLost {
                            reason: u.reason.clone(),
                            since: Some(octl_proto::time::format_millis(u.since_ms)),
                        },
                    );
                }
                continue;
            }
        }
        let status = match mine {
            Some(_) if node.state == NodeState::Lost => {
                note(
                    daemon,
                    &handle,
                    node,
                    NodeFound {
                        reason: Some("its place answers again and the agent is there".into()),
                    },
                );
                continue;
            }
            Some(p) if p.alive => {
                match (&p.queued, node.state) {
                    (Some(why), NodeState::Running) => note(
                        daemon,
                        &handle,
                        node,
                        NodeQueued {
                            reason: Some(why.clone()).filter(|w| !w.is_empty()),
                        },
                    ),
                    (None, NodeState::Queued) => note(daemon, &handle, node, NodeRunning {}),
                    _ => {}
                }
                super::stream_activity::record(daemon, &handle, node, false).await;
                if let Some(r) = p
                    .requeue
                    .as_ref()
                    .filter(|r| r.copy > node.requeued.as_ref().map_or(0, |q| q.copy))
                {
                    note_requeue(daemon, &handle, node, r.clone());
                }
                if node.report.is_none() {
                    if let Some(reason) = silent(daemon, &mut silences, &handle, node) {
                        if let Some(slot) =
                            Engine::claim(daemon, &handle.id, super::StepKey::node(&node.id))
                        {
                            let (d, node) = (daemon.clone(), node.clone());
                            steps.push(tokio::spawn(async move {
                                stop_silent(&d, &handle, &node, reason).await;
                                drop(slot);
                            }));
                        }
                        continue;
                    }
                }
                if node.report.is_some() && overdue(&node.updated_at) {
                    // It reported but does not leave: close its window; the exit that follows
                    // turns the report into the node's event.
                    tracing::info!(run = %handle.id, node = %node.id, "agent reported but did not exit within the grace period; closing its window");
                    super::close_window(daemon, &handle.id, &node.id, Some(pane_id)).await;
                }
                continue;
            }
            Some(p) => match (p.exit_status, p.exit_signal) {
                (Some(code), _) => Some(code),
                (None, Some(sig)) => Some(128 + sig),
                (None, None) => {
                    let mut unreaped = daemon.engine.unreaped.lock().expect("unreaped lock");
                    let seen = unreaped.entry(pane_id.to_string()).or_insert(0);
                    *seen += 1;
                    if *seen < UNREAPED_TICKS {
                        continue;
                    }
                    None
                }
            },
            // The window is gone (killed by hand, or the tmux server died).
            None => None,
        };
        daemon
            .engine
            .unreaped
            .lock()
            .expect("unreaped lock")
            .remove(pane_id);
        // A queued job that started and ended between two looks ran all the same: its start
        // is recorded before its end, so its time counts and the log says what happened.
        let ran_unseen =
            node.state == NodeState::Queued && mine.is_some_and(|p| p.queued.is_none());
        if let Some(slot) = Engine::claim(daemon, &handle.id, super::StepKey::node(&node.id)) {
            let (d, node) = (daemon.clone(), node.clone());
            steps.push(tokio::spawn(async move {
                // The look was decided on a view from before the claim: a step of the tick
                // before may have handled this exit already (its `node.done` written, its
                // window closed). Only a node the log still shows as it was is judged; else
                // a remote runner's second collect would fail a node already done.
                let current = handle.view().nodes.iter().find(|n| n.id == node.id).cloned();
                if current.is_none_or(|c| c.state != node.state || c.pane != node.pane) {
                    drop(slot);
                    return;
                }
                let judged = match runner {
                    Some(_) => collect(&d, &handle, &node, status).await,
                    None => Ok(()),
                };
                let exited = match judged {
                    Ok(()) if ran_unseen => {
                        match append(&d, &handle, Some(&node.id), NodeRunning {}).await {
                            Ok(_) => {
                                let view = handle.view();
                                let now = view.nodes.iter().find(|n| n.id == node.id);
                                on_exit(&d, &handle, now.unwrap_or(&node), status).await
                            }
                            Err(e) => Err(e),
                        }
                    }
                    Ok(()) => on_exit(&d, &handle, &node, status).await,
                    // Its place stopped answering while its work was fetched: nothing is
                    // known of it; the next look judges it again (or finds it lost).
                    Err(reason) if !reachable(&d, &node) => {
                        tracing::warn!(run = %handle.id, node = %node.id, %reason, "the agent's end is judged again once its place answers");
                        Ok(())
                    }
                    Err(reason) => {
                        let failed = NodeFailed {
                            reason: Some(reason),
                            exit_status: Some(Nullable(status.map(i64::from))),
                            ..NodeFailed::default()
                        };
                        append(&d, &handle, Some(&node.id), failed).await.map(|_| ())
                    }
                };
                if let Err(e) = exited {
                    tracing::warn!(run = %handle.id, node = %node.id, error = %e.message, "handling an agent's exit");
                }
                drop(slot);
            }));
        }
    }
    steps
}

/// Records what the runner says of a live node's agent (`node.queued`, `node.running`,
/// `node.lost`, `node.found`), off the tick and holding the node, so a second tick does not
/// say it again meanwhile; a note the log no longer fits (the node moved on) is refused by
/// the reducer and changes nothing.
fn note<P: Payload + Send + 'static>(
    daemon: &Arc<Daemon>,
    handle: &Arc<RunHandle>,
    node: &Node,
    said: P,
) {
    let Some(slot) = Engine::claim(daemon, &handle.id, super::StepKey::node(&node.id)) else {
        return;
    };
    let (d, handle, node) = (daemon.clone(), handle.clone(), node.clone());
    tokio::spawn(async move {
        let current = handle
            .view()
            .nodes
            .iter()
            .find(|n| n.id == node.id)
            .cloned();
        if current.is_some_and(|c| c.state == node.state && c.pane == node.pane)
            && append(&d, &handle, Some(&node.id), said).await.is_ok()
        {
            tracing::info!(run = %handle.id, node = %node.id, event = P::TYPE, "recorded what the runner says of the agent");
        }
        drop(slot);
    });
}

/// Records that the runner started the node's attempt again by itself (`node.requeued`), off
/// the tick. Two looks racing to record the same copy: the reducer takes the first, refuses
/// the other, and nothing else changes.
fn note_requeue(daemon: &Arc<Daemon>, handle: &Arc<RunHandle>, node: &Node, r: Requeue) {
    let (d, handle, id) = (daemon.clone(), handle.clone(), node.id.clone());
    tokio::spawn(async move {
        let copy = r.copy;
        let said = NodeRequeued {
            copy,
            from: r.from,
            reason: Some(r.reason),
        };
        if append(&d, &handle, Some(&id), said).await.is_ok() {
            tracing::info!(run = %handle.id, node = %id, copy, "the runner requeued the node's agent");
        }
    });
}

/// Whether the place of `node`'s agent answers (see `Runner::reachable`).
fn reachable(daemon: &Daemon, node: &Node) -> bool {
    let (Some(pane), Ok(runner)) = (
        node.pane.as_deref(),
        daemon.runners.of(node.runner.as_deref()),
    ) else {
        return true;
    };
    runner.reachable(&crate::runner::AgentHandle::new(pane))
}

/// Whether a runner's name is the local one.
fn is_local(name: &str) -> bool {
    name == crate::config::LOCAL_RUNNER
}

/// The runner a node's agent runs on; `None` is `local`.
fn runner_name(node: &Node) -> Option<String> {
    node.runner.clone().filter(|r| !is_local(r))
}

/// A remote agent ended: its work is brought into the node's worktree before its exit is
/// judged, so the exit is handled as a local agent's. What cannot be brought back (the job
/// pushed nothing, the exchange refused its push) fails the node with the runner's reason
/// (`Err`), its branch holding what did come back.
async fn collect(
    daemon: &Arc<Daemon>,
    handle: &Arc<RunHandle>,
    node: &Node,
    status: Option<i32>,
) -> Result<(), String> {
    let (Some(worktree), Some(pane)) = (node.worktree.clone(), node.pane.clone()) else {
        return Ok(());
    };
    let (d, run, id, runner) = (
        daemon.clone(),
        handle.id.clone(),
        node.id.clone(),
        node.runner.clone(),
    );
    let brought = blocking(move || {
        d.runners.of(runner.as_deref())?.collect(
            &run,
            &id,
            &crate::runner::AgentHandle::new(pane),
            Path::new(&worktree),
        )
    })
    .await;
    brought.map_err(|e| {
        tracing::warn!(run = %handle.id, node = %node.id, status = ?status, error = %e.message, "cannot bring the remote agent's work back");
        e.message
    })
}

/// A node `lost` for longer than its runner's `lost_after`: the runner gives its agent up
/// (nothing of it is brought back later; it is stopped once its place answers), what was
/// fetched of its work comes into the worktree, then the node fails with the reason and is
/// retried in the same write, so nothing sees it failed; the retry's new attempt resumes from
/// that checkpoint elsewhere. Giving up first is safe to repeat: a crash before the write
/// leaves the node lost, and the next tick gives it up again.
async fn start_again(
    daemon: &Arc<Daemon>,
    handle: &Arc<RunHandle>,
    node: &Node,
    runner: Arc<dyn crate::runner::Runner>,
    reason: &str,
) {
    // Judged again under the slot: a look before may have started it again already.
    let still = handle
        .view()
        .nodes
        .iter()
        .any(|n| n.id == node.id && n.pane == node.pane && n.state == NodeState::Lost);
    let Some(pane) = node.pane.clone().filter(|_| still) else {
        return;
    };
    let (run, id) = (handle.id.clone(), node.id.clone());
    let given_up =
        blocking(move || runner.abandon(&run, &id, &crate::runner::AgentHandle::new(pane))).await;
    if let Err(e) = given_up {
        tracing::warn!(run = %handle.id, node = %node.id, error = %e.message, "could not give up a lost agent; tried again next tick");
        return;
    }
    let _ = collect(daemon, handle, node, None).await;
    tracing::warn!(run = %handle.id, node = %node.id, reason, "the agent is lost for longer than lost_after; starting its node again");
    let failed = NodeFailed {
        reason: Some(format!("{reason}; started again from its last checkpoint")),
        exit_status: Some(Nullable(None)),
        ..NodeFailed::default()
    };
    let retried = octl_proto::event::NodeRetried {
        cause: Some(reason.to_string()),
        ..Default::default()
    };
    let drafts = vec![
        crate::store::Draft::daemon(Some(&node.id), failed),
        crate::store::Draft::daemon(Some(&node.id), retried),
    ];
    if let Err(e) = daemon.store.append_all(handle, drafts).await {
        tracing::warn!(run = %handle.id, node = %node.id, error = %e.message, "a lost agent's node was not started again");
    }
}

/// Logs, once per server, that the tmux server the agents ran in is gone (no server
/// answers, or another one does), with what can be told of why: whether its process still
/// exists and whether its socket is still there.
fn note_server(daemon: &Daemon, server: Option<u32>, watched: usize) {
    use std::sync::atomic::Ordering;
    let Some(ours) = daemon.runner.host() else {
        return;
    };
    if server == Some(ours) || daemon.engine.tmux_gone.swap(ours, Ordering::Relaxed) == ours {
        return;
    }
    // SAFETY: kill(2) with signal 0 only checks that the process exists.
    let alive = unsafe { libc::kill(ours as libc::pid_t, 0) } == 0;
    let socket = daemon.home.tmux_socket().exists();
    let cause = match (alive, socket) {
        (true, _) => "its process still runs but no longer answers on the socket (the socket was replaced?)",
        (false, true) => "its process ended: it was killed (e.g. `tmux kill-server`, or the OOM killer) or crashed",
        (false, false) => "its process ended and its socket is gone",
    };
    tracing::warn!(tmux_pid = ours, now_answering = ?server, agents = watched, cause, "the tmux server is gone; its agents' windows went with it");
}

/// The profiles' silence limits, looked up once per tick and profile.
#[derive(Default)]
struct Silences {
    config: Option<Arc<crate::config::Config>>,
    /// By profile name as a node gives it: the limit (s) and the profile's name.
    limits: HashMap<Option<String>, Option<(u64, String)>>,
}

/// Why `node`'s agent counts as stuck: it wrote nothing to its log for longer than its
/// profile's silence limit (`None`: it did not, or it has no limit, or it waits for a
/// person's decision).
fn silent(
    daemon: &Daemon,
    silences: &mut Silences,
    handle: &RunHandle,
    node: &Node,
) -> Option<String> {
    if !node.report_on_exit {
        return None; // a human works with interactive agents
    }
    let Silences { config, limits } = silences;
    let (limit, name) = limits
        .entry(node.agent.clone())
        .or_insert_with(|| {
            let config = config.get_or_insert_with(|| daemon.config.get_or_default());
            let profile = crate::agents::resolve(config, node.agent.as_deref()).ok()?;
            Some((profile.silence_limit_secs?, profile.name))
        })
        .clone()?;
    let log = handle.dir.join("logs").join(format!("{}.log", node.id));
    let written = std::fs::metadata(&log)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_millis() as u64);
    let started = node
        .started_at
        .as_deref()
        .and_then(octl_proto::time::parse_millis);
    // Waiting for a person's decision on a permission request is not being stuck (however
    // long `[permissions] wait` is); the silence counts again from the decision.
    let view = handle.view();
    let asked = view.permissions.iter().filter(|p| p.node == node.id);
    if asked.clone().any(|p| p.decision.is_none()) {
        return None;
    }
    let decided = asked
        .filter_map(|p| p.decision.as_ref())
        .filter_map(|d| octl_proto::time::parse_millis(&d.decided_at))
        .max();
    let last = written.max(started).max(decided)?;
    let silent_ms = crate::store::writer::now_ms().saturating_sub(last);
    (silent_ms > limit * 1000).then(|| {
        format!(
            "the agent was silent (no output) for {} s, longer than its limit of {limit} s (agents.{}.silence_limit_secs): stopped as stuck",
            silent_ms / 1000,
            name
        )
    })
}

/// A stuck agent: its failure is decided in the log first, then its window is closed.
async fn stop_silent(daemon: &Arc<Daemon>, handle: &Arc<RunHandle>, node: &Node, reason: String) {
    tracing::warn!(run = %handle.id, node = %node.id, %reason, "stopping a silent agent");
    let failed = NodeFailed {
        reason: Some(reason),
        ..NodeFailed::default()
    };
    match append(daemon, handle, Some(&node.id), failed).await {
        Ok(_) => super::close_window(daemon, &handle.id, &node.id, node.pane.as_deref()).await,
        Err(e) => {
            tracing::info!(run = %handle.id, node = %node.id, error = %e.message, "a silent agent's node moved on first")
        }
    }
}

/// How long an agent that reported done or failed may take to leave.
pub const REPORT_GRACE_MS: u64 = 30_000;

fn overdue(since: &str) -> bool {
    let now = crate::store::writer::now_ms();
    octl_proto::time::parse_millis(since).is_some_and(|t| now.saturating_sub(t) > REPORT_GRACE_MS)
}

/// The agent's process ended with `status` (`None`: killed, or its window vanished).
async fn on_exit(
    daemon: &Arc<Daemon>,
    handle: &Arc<RunHandle>,
    node: &Node,
    status: Option<i32>,
) -> Result<(), AppError> {
    let log = handle.dir.join("logs").join(format!("{}.log", node.id));
    // A built-in CLI profile is judged by its stream; others keep Claude's result line.
    let stream = super::stream_activity::stream_of(node);
    // What it said last (its turn ended) goes before its end.
    super::stream_activity::record(daemon, handle, node, true).await;
    let (lines, outcome, end, commands) = blocking(move || {
        Ok(match stream {
            Some(s) => {
                let o = crate::streams::read(&log, s);
                (Vec::new(), Some(o.fields), o.end, o.commands)
            }
            None => {
                let lines = read_tail(&log);
                let outcome = outcome_of(&lines);
                (lines, outcome, None, Commands::default())
            }
        })
    })
    .await?;
    // Killed by the kernel at its cgroup's memory limit: that is its end, whatever it said
    // (and not a death to resume from: it would only grow again).
    if let Some(reason) = over_memory(daemon, &handle.id, node).await {
        tracing::warn!(run = %handle.id, node = %node.id, %reason, "the agent went over its memory limit");
        let failed = NodeFailed {
            reason: Some(reason),
            exit_status: Some(Nullable(status.map(i64::from))),
            outcome,
            ..NodeFailed::default()
        };
        append(daemon, handle, Some(&node.id), failed).await?;
        super::close_window(daemon, &handle.id, &node.id, node.pane.as_deref()).await;
        return Ok(());
    }
    // A session stopped by a usage limit waits for the reset instead of failing; one that
    // reported before (done, or failed on purpose) is judged by its report.
    let now = crate::store::writer::now_ms();
    if let (None, Some(limit)) = (
        node.report.as_deref(),
        super::decide::limits::rate_limit(&lines, now),
    ) {
        let until = octl_proto::time::format_millis(limit.until_ms);
        tracing::info!(run = %handle.id, node = %node.id, until = %until, "agent stopped at a usage limit; paused until its reset");
        let paused = NodePaused {
            until,
            reason: Some(limit.reason),
            exit_status: status.map(i64::from),
            outcome,
        };
        append(daemon, handle, Some(&node.id), paused).await?;
        super::close_window(daemon, &handle.id, &node.id, node.pane.as_deref()).await;
        return Ok(());
    }
    // Written even when there is none (`null`: killed, or the window vanished).
    let exit_status = Some(Nullable(status.map(i64::from)));
    // What the agent said before it exited, when its report was held until now.
    let said = || (node.message.clone(), node.reason.clone());
    let failed = |reason| NodeFailed {
        reason: Some(reason),
        exit_status: exit_status.clone(),
        outcome: outcome.clone(),
        ..NodeFailed::default()
    };
    let done = |message, reason, commit| NodeDone {
        message,
        reason,
        exit_status: exit_status.clone(),
        outcome: outcome.clone(),
        commit,
        ..NodeDone::default()
    };
    let id = Some(node.id.as_str());
    let verdict = if node.exit_policy() == Some(ExitPolicy::Stream) {
        stream_verdict(node, status, stream.is_some(), end)
    } else {
        exit_verdict(node, status)
    };
    let vanished =
        matches!(verdict, Verdict::Unreported(t) if t != NodeDone::TYPE) && died(node, status);
    match verdict {
        Verdict::CommitThenDone => match commit_work(&daemon.home, &handle.id, node).await {
            // A success that changed nothing while its commands failed is not one.
            Ok(None) if commands.failed > 0 && !changed(handle, node).await => {
                let reason = no_op_failure(false, &commands).unwrap_or_default();
                tracing::info!(run = %handle.id, node = %node.id, %reason, "an agent that said it succeeded changed nothing");
                append(daemon, handle, id, failed(reason)).await?
            }
            Ok(commit) => {
                let (message, reason) = said();
                append(
                    daemon,
                    handle,
                    id,
                    done(message, reason, Some(Nullable(commit))),
                )
                .await?
            }
            // Not left running for ever: the node fails with the reason, and can be
            // retried or merged as committed.
            Err(e) => {
                let reason = format!("could not commit its work: {}", e.message);
                append(daemon, handle, id, failed(reason)).await?
            }
        },
        Verdict::ShellFailed(reason) | Verdict::Failed(reason) => {
            append(daemon, handle, id, failed(reason)).await?
        }
        Verdict::Reported(NodeDone::TYPE) => {
            let (message, reason) = said();
            append(daemon, handle, id, done(message, reason, None)).await?
        }
        Verdict::Reported(_) => {
            let (message, reason) = said();
            let report = NodeFailed {
                message,
                reason,
                exit_status: exit_status.clone(),
                outcome: outcome.clone(),
                ..NodeFailed::default()
            };
            append(daemon, handle, id, report).await?
        }
        Verdict::Unreported(NodeDone::TYPE) => {
            append(daemon, handle, id, done(None, None, None)).await?
        }
        Verdict::Unreported(_) => {
            let exited = NodeExited {
                exit_status: status.map(i64::from),
                outcome: outcome.clone(),
                reason: vanished.then(|| {
                    "the agent's process died before it reported (its window or tmux server is gone, or a signal killed it); `run retry --resume` continues its conversation".to_string()
                }),
            };
            append(daemon, handle, id, exited).await?
        }
    };
    // The output is in the node's log; the dead window has nothing more to show.
    super::close_window(daemon, &handle.id, &node.id, node.pane.as_deref()).await;
    // An autonomous agent goes on by itself, once: not again if the resumed one dies too.
    let autonomous = handle.view().manifest.kind != Some(octl_proto::RunKind::Code);
    if vanished && autonomous && !node.resume {
        tracing::info!(run = %handle.id, node = %node.id, "resuming the conversation of an agent that died");
        if let Err(e) = super::retry::resume(daemon, handle, &node.id, "its agent died").await {
            tracing::warn!(run = %handle.id, node = %node.id, error = %e.message, "could not resume");
        }
    }
    Ok(())
}

/// Why `node`'s agent ended, if the kernel killed it at its memory limit (a local agent in a
/// cgroup with the memory controller).
async fn over_memory(daemon: &Arc<Daemon>, run: &str, node: &Node) -> Option<String> {
    if runner_name(node).is_some() {
        return None;
    }
    let (d, run, id) = (daemon.clone(), run.to_string(), node.id.clone());
    let kill = blocking(move || Ok(d.runner.memory_kill(&run, &id)))
        .await
        .ok()
        .flatten()?;
    let profile = node
        .agent
        .as_deref()
        .unwrap_or(crate::agents::DEFAULT_PROFILE);
    let configured = daemon
        .config
        .get()
        .ok()
        .and_then(|c| c.agents.get(profile).and_then(|a| a.memory_max()))
        .is_some();
    let limit = kill
        .limit
        .map(crate::config::limits::show_size)
        .unwrap_or_else(|| "its memory limit".into());
    let whence = if configured {
        format!("agents.{profile}.memory_max")
    } else {
        format!("the machine's memory less limits.min_available; set agents.{profile}.memory_max")
    };
    let processes = if kill.kills == 1 {
        "1 process".to_string()
    } else {
        format!("{} processes", kill.kills)
    };
    Some(format!(
        "the agent went over its memory limit of {limit} ({whence}): the kernel killed {processes} of it"
    ))
}

/// What an agent's exit means for its node.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// A shell task that succeeded: its work is committed, then the node is done.
    CommitThenDone,
    /// A shell task that failed, with the reason.
    ShellFailed(String),
    /// An agent judged by its stream and exit status failed, with the reason.
    Failed(String),
    /// The agent's held report (`node.done` / `node.failed`), with what it said.
    Reported(&'static str),
    /// No report: what the profile says an unreported exit means.
    Unreported(&'static str),
}

/// How the exit of `node`'s agent with `status` (`None`: killed, or its window vanished) is
/// interpreted.
pub fn exit_verdict(node: &Node, status: Option<i32>) -> Verdict {
    // A shell task is judged by its exit status (and an explicit `node fail`); any other
    // agent by its held report, else by what its profile says an unreported exit means.
    match (node.exit_policy(), node.report.as_deref()) {
        // Exit 0, or closed by us after it reported done.
        (Some(ExitPolicy::Shell), report)
            if report != Some("failed")
                && (status == Some(0) || (status.is_none() && report == Some("done"))) =>
        {
            Verdict::CommitThenDone
        }
        (Some(ExitPolicy::Shell), report) => {
            Verdict::ShellFailed(match (report, &node.reason, status) {
                (Some("failed"), Some(r), _) => r.clone(),
                (_, _, Some(code)) if code != 0 => format!("the task exited with status {code}"),
                (_, _, Some(_)) => "the task reported failure".to_string(),
                (_, _, None) => "the task was killed or its window closed".to_string(),
            })
        }
        (_, Some("done")) => Verdict::Reported("node.done"),
        (_, Some("failed")) => Verdict::Reported("node.failed"),
        // A Claude Code conversation whose process was killed (its window or tmux server
        // gone, a signal) did not end: it exited unfinished and can be resumed.
        (_, None) if died(node, status) => Verdict::Unreported("node.exited"),
        (Some(ExitPolicy::Done), None) => Verdict::Unreported("node.done"),
        _ => Verdict::Unreported("node.exited"),
    }
}

/// Did `node`'s agent die without an end of its own: a resumable conversation whose window
/// vanished (`None`) or whose process a signal killed (128 + N)?
pub fn died(node: &Node, status: Option<i32>) -> bool {
    node.session_id.is_some() && status.is_none_or(|s| s >= 128)
}

/// How the exit of a node whose profile judges it by its stream (`on_exit: stream`) is
/// interpreted: `end` is how its stream ended (`None`: without a final result; `has_stream`
/// false: no stream is known for its agent, and its exit status alone decides). What the agent
/// committed or left uncommitted is committed by the daemon on success.
pub fn stream_verdict(
    node: &Node,
    status: Option<i32>,
    has_stream: bool,
    end: Option<Result<(), String>>,
) -> Verdict {
    match (node.report.as_deref(), status, end) {
        (Some("failed"), _, _) => Verdict::Reported("node.failed"),
        (Some("done"), _, _) => Verdict::CommitThenDone,
        (_, None, _) => Verdict::Failed("the agent was killed or its window closed".into()),
        (_, Some(_), Some(Err(reason))) => Verdict::Failed(reason),
        (_, Some(0), Some(Ok(()))) => Verdict::CommitThenDone,
        (_, Some(0), None) if !has_stream => Verdict::CommitThenDone,
        (_, Some(0), None) => {
            Verdict::Failed("the agent exited with status 0 without a final result".into())
        }
        (_, Some(code), _) => Verdict::Failed(format!("the agent exited with status {code}")),
    }
}

/// Why a node whose agent said it succeeded ends `failed` after all: its work `changed`
/// nothing (no commit, nothing left to commit) while shell commands of it failed — a
/// success that did nothing because its commands could not run (docs/AGENTS.md, "A
/// success that changed nothing"). `None`: it succeeded (with no failed command, a task that
/// changes nothing, an investigation, is one).
pub fn no_op_failure(changed: bool, commands: &Commands) -> Option<String> {
    if changed || commands.failed == 0 {
        return None;
    }
    let count = if commands.ran == 1 {
        "its 1 shell command failed".to_string()
    } else {
        format!(
            "{} of its {} shell commands failed",
            commands.failed, commands.ran
        )
    };
    let first = match (&commands.first_failure, commands.failed) {
        (Some(f), 1) => format!(": {f}"),
        (Some(f), _) => format!("; the first: {f}"),
        (None, _) => String::new(),
    };
    Some(format!(
        "the agent said it succeeded but changed nothing, and {count}{first}"
    ))
}

/// Whether `node`'s branch holds work its target does not (the branch is not contained in
/// the branch it merges into); when that cannot be told, it is taken to have changed.
async fn changed(handle: &Arc<RunHandle>, node: &Node) -> bool {
    let (Some(worktree), Some(target)) = (
        node.worktree.clone(),
        super::merge::target_of(&handle.view()),
    ) else {
        return true;
    };
    blocking(move || Ok(Git::new(&worktree).is_ancestor("HEAD", &target)?))
        .await
        .map_or(true, |contained| !contained)
}

/// A `shell` agent's work: everything in its worktree, committed with the task's first line.
async fn commit_work(
    home: &octl_proto::home::Layout,
    run: &str,
    node: &Node,
) -> Result<Option<String>, AppError> {
    let Some(worktree) = node.worktree.clone() else {
        return Ok(None);
    };
    let message = super::spawn::title(node.task.as_deref().unwrap_or("shell task"));
    let message = if message.is_empty() {
        "shell task".to_string()
    } else {
        message
    };
    // What a sandboxed agent committed in its copy of its branch first: on top of it.
    let (home, run, n) = (home.clone(), run.to_string(), node.clone());
    blocking(move || {
        crate::sandbox::harvest_node(&home, &run, &n);
        Ok(Git::new(&worktree).commit_all(&message)?)
    })
    .await
}

/// The JSON lines at the end of a stream-json log (the last 256 KiB: the result and what
/// led to it; a long session's log need not be read whole), oldest first.
pub fn read_tail(log: &Path) -> Vec<Value> {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(log) else {
        return Vec::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let mut bytes = Vec::new();
    if f.seek(SeekFrom::Start(len.saturating_sub(256 * 1024)))
        .and_then(|_| f.read_to_end(&mut bytes))
        .is_err()
    {
        return Vec::new();
    }
    String::from_utf8_lossy(&bytes)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect()
}

/// The outcome in the last `{"type":"result",…}` line of a stream-json log: cost, turns,
/// how it ended, and the tools it was denied.
pub fn outcome_of(lines: &[Value]) -> Option<Outcome> {
    let result = lines
        .iter()
        .rev()
        .find(|v| v.get("type").and_then(Value::as_str) == Some("result"))?;
    let text = |key: &str| result.get(key).and_then(Value::as_str).map(str::to_string);
    // What the agent asked for and was not allowed, as `Tool(input)`: the way to grant it
    // is to add that to `allowed_tools`.
    let denied = result
        .get("permission_denials")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .take(20)
        .filter_map(|d| {
            let tool = d.get("tool_name")?.as_str()?;
            let input = d.get("tool_input");
            let what = input
                .and_then(|i| i.get("command").or_else(|| i.get("file_path")))
                .and_then(Value::as_str)
                .map(|c| c.chars().take(200).collect::<String>());
            Some(match what {
                Some(w) => format!("{tool}({w})"),
                None => tool.to_string(),
            })
        })
        .collect();
    Some(Outcome {
        subtype: text("subtype"),
        is_error: result.get("is_error").and_then(Value::as_bool),
        total_cost_usd: result.get("total_cost_usd").and_then(Value::as_f64),
        num_turns: result.get("num_turns").and_then(Value::as_u64),
        duration_ms: result.get("duration_ms").and_then(Value::as_u64),
        session_id: text("session_id"),
        api_error: result.get("api_error").cloned(),
        result: text("result").map(|r| r.chars().take(2000).collect()),
        denied,
        ..Default::default()
    })
}
