//! The engine: what moves agent runs forward once they exist.
//!
//! It is level-triggered: whenever a run's state changes (the store says so) or the
//! supervisor's tick sees an agent exit, [`reconcile`] looks at the run as it is now and starts
//! whatever step is due — a gate and merge for a done node, the run's end when every node is
//! finished. A set of steps in flight keeps one step per node at a time, so an event seen twice
//! never does the work twice.
//!
//! - [`spawn`]: create a run, its node, branch, worktree and tmux window.
//! - [`supervise`]: one `tmux list-panes` per tick; an agent's exit becomes an event.
//! - [`finish`]: done → gate → merge → clean up.
//! - [`merge`]: merging a branch without losing anything.
//! - [`cleanup`]: snapshot, then remove window, worktree and branch.
//! - [`heal`]: finishing starts and merges a crash interrupted, from their intent events.
//! - [`cancel`]: stop a run, keeping or discarding (after a snapshot) its worktrees.
//! - [`schedule`]: fan-out and DAG nodes started under the parallelism cap, deps first.
//! - [`retry`]: a failed node of any agent run starts over (its old attempt cleaned first).
//! - [`spinoff`]: the run of an accepted spin-off proposal, created after the decision.
//! - [`trust`]: answering Claude Code's workspace-trust question in a new window.
//! - [`orphans`]: worktrees, branches and windows under the daemon's names that no run owns.
//! - [`gc`]: `run gc` (what finished runs left behind, and orphans, after a snapshot) and
//!   `recover` (a snapshot back into a branch).

pub mod cancel;
pub mod cleanup;
pub mod finish;
pub mod gc;
pub mod heal;
pub mod machine;
pub mod merge;
pub mod orphans;
pub mod retry;
pub mod schedule;
pub mod spawn;
pub mod spinoff;
pub mod supervise;
pub mod trust;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc;

use octl_proto::projection::RunDetail;
use octl_proto::{AppError, NodeState, RunKind};

use crate::daemon::Daemon;
use crate::store::{Draft, RunHandle};

/// How often the supervisor looks at the panes.
pub const TICK: Duration = Duration::from_millis(200);

/// The engine's in-memory bookkeeping; everything durable is in the runs' logs.
#[derive(Default)]
pub struct Engine {
    /// (run, node) pairs with a step running, each with whether a claim was turned away
    /// meanwhile (the state changed while the step ran).
    in_flight: Mutex<HashMap<(String, String), bool>>,
    /// One merge at a time per repository (keyed by its git common dir).
    repo_locks: Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<()>>>>,
    /// Dead panes seen without an exit status yet, and how many ticks ago.
    pub(crate) unreaped: Mutex<HashMap<String, u32>>,
    /// The pid of the last tmux server the supervisor logged as gone (once per server).
    pub(crate) tmux_gone: std::sync::atomic::AtomicU32,
    /// git and tmux were found recent enough; checked again only after a failure.
    tools_ok: std::sync::atomic::AtomicBool,
}

/// Held while a step runs for a node; frees the slot when dropped.
pub struct Slot {
    daemon: Arc<Daemon>,
    key: (String, String),
    /// Look at the run again when the step ends (its last event may call for the next).
    notify: bool,
}

impl Slot {
    /// Ends a pass unless someone asked for the slot while it ran; then it keeps the slot
    /// and says so, and the caller goes round again. Checked and released under one lock,
    /// so no request falls between the last look and the release.
    pub fn release_or_again(&self) -> bool {
        let mut in_flight = self.daemon.engine.in_flight.lock().expect("in_flight lock");
        match in_flight.get_mut(&self.key) {
            Some(asked) if *asked => {
                *asked = false;
                true
            }
            _ => false,
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let asked = self
            .daemon
            .engine
            .in_flight
            .lock()
            .expect("in_flight lock")
            .remove(&self.key)
            .unwrap_or(false);
        // Someone wanted this node (or the run's end) while the step ran: look again now.
        // Only then — a step that fails without a trace must not wake itself for ever.
        if asked && self.notify {
            self.daemon.store.notify(&self.key.0);
        }
    }
}

impl Engine {
    /// Claims the node for one step; `None` when a step is already running for it.
    pub fn claim(daemon: &Arc<Daemon>, run: &str, node: &str) -> Option<Slot> {
        let key = (run.to_string(), node.to_string());
        let mut in_flight = daemon.engine.in_flight.lock().expect("in_flight lock");
        let fresh = match in_flight.get_mut(&key) {
            Some(asked) => {
                *asked = true;
                false
            }
            None => {
                in_flight.insert(key.clone(), false);
                true
            }
        };
        drop(in_flight);
        fresh.then(|| Slot {
            daemon: daemon.clone(),
            key,
            notify: true,
        })
    }

    /// A slot for a pass that only reacts to state (scheduling): its own events wake the
    /// engine, so ending it must not, or passes would wake each other for ever.
    pub fn claim_quiet(daemon: &Arc<Daemon>, run: &str, key: &str) -> Option<Slot> {
        Self::claim(daemon, run, key).map(|mut s| {
            s.notify = false;
            s
        })
    }

    /// Whether a node step of the run is running; each such step is asked to wake the engine
    /// when it ends, so what waits for it (the run's end) is looked at again.
    fn busy(&self, run: &str) -> bool {
        let mut busy = false;
        for ((r, step), asked) in self.in_flight.lock().expect("in_flight lock").iter_mut() {
            if r == run && !step.starts_with('~') {
                *asked = true;
                busy = true;
            }
        }
        busy
    }

    /// Checks the git and tmux versions once per daemon (each check is a process).
    pub fn check_tools(
        &self,
        git: &crate::git::Git,
        tmux: &crate::tmux::Tmux,
    ) -> Result<(), AppError> {
        use std::sync::atomic::Ordering;
        if !self.tools_ok.load(Ordering::Acquire) {
            git.check_version()?;
            tmux.check_version()?;
            self.tools_ok.store(true, Ordering::Release);
        }
        Ok(())
    }

    pub fn repo_lock(&self, common_dir: PathBuf) -> Arc<tokio::sync::Mutex<()>> {
        self.repo_locks
            .lock()
            .expect("repo_locks lock")
            .entry(common_dir)
            .or_default()
            .clone()
    }
}

/// Runs the engine until shutdown: reconciles every run once at start, then each run that
/// changes, and lets the supervisor look at the panes every tick.
pub async fn drive(daemon: Arc<Daemon>, mut changes: mpsc::UnboundedReceiver<String>) {
    for handle in daemon.store.handles() {
        reconcile(&daemon, &handle);
    }
    let stop = daemon.shutdown_requested();
    tokio::pin!(stop);
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            Some(run) = changes.recv() => {
                if let Ok(handle) = daemon.store.resolve("run", &run) {
                    reconcile(&daemon, &handle);
                }
            }
            _ = tick.tick() => { supervise::tick(&daemon).await; }
            _ = &mut stop => return,
        }
    }
}

/// Whether the daemon merges this kind's done nodes by itself.
fn merges_by_itself(kind: Option<RunKind>) -> bool {
    matches!(
        kind,
        Some(RunKind::Spinoff | RunKind::Fanout | RunKind::Orchestrate)
    )
}

/// Starts whatever step is due for the run as it is now.
pub fn reconcile(daemon: &Arc<Daemon>, handle: &Arc<RunHandle>) {
    let view = handle.view();
    let kind = view.manifest.kind;
    // Humans decide on proposals in any run, ended or not.
    if handle.corrupt().is_none() {
        spinoff::heal(daemon, handle, &view);
    }
    if handle.corrupt().is_some() || matches!(kind, None | Some(RunKind::Generic)) {
        return;
    }
    if view.manifest.status.is_terminal() {
        return;
    }
    // A step announced in the log but running nowhere was cut short by a crash. (While a
    // step runs, its node's slot is held, so the claim fails.)
    for node in view.nodes.iter() {
        let stuck = match node.state {
            NodeState::Starting => true,
            NodeState::Merging => true,
            NodeState::Merged => !node.cleaned,
            _ => false,
        };
        if !stuck {
            continue;
        }
        if let Some(slot) = Engine::claim(daemon, &handle.id, &node.id) {
            let (d, h, n) = (daemon.clone(), handle.clone(), node.clone());
            tokio::spawn(async move {
                if n.state == NodeState::Starting {
                    heal::start(&d, &h, &n, slot).await;
                } else {
                    heal::merge_and_clean(&d, &h, &n, slot).await;
                }
            });
        }
    }
    // A retry won: its old attempt is cleaned up (holding the node) before it starts again.
    for node in view.nodes.iter().filter(|n| n.stale_attempt()) {
        if let Some(slot) = Engine::claim(daemon, &handle.id, &node.id) {
            let (d, h, n) = (daemon.clone(), handle.clone(), node.id.clone());
            tokio::spawn(async move {
                retry::clean_old_attempt(&d, &h, &n).await;
                drop(slot);
            });
        }
    }
    // A retried spinoff or code node starts again from base (fan-out and DAG nodes wait for
    // the scheduler).
    if matches!(kind, Some(RunKind::Spinoff | RunKind::Code)) {
        for node in view
            .nodes
            .iter()
            .filter(|n| n.state == NodeState::Pending && !n.stale_attempt())
        {
            if let Some(slot) = Engine::claim(daemon, &handle.id, &node.id) {
                let (d, h, n) = (daemon.clone(), handle.clone(), node.id.clone());
                tokio::spawn(async move {
                    let now = h.view();
                    if let Some(n) = now
                        .nodes
                        .iter()
                        .find(|x| x.id == n && x.state == NodeState::Pending && !x.stale_attempt())
                    {
                        schedule::start(&d, &h, &now, n).await;
                    }
                    drop(slot);
                });
            }
        }
    }
    if kind == Some(RunKind::Orchestrate) && view.manifest.merge.as_deref() == Some("merging") {
        if let Some(slot) = Engine::claim(daemon, &handle.id, "~merge") {
            let (d, h) = (daemon.clone(), handle.clone());
            tokio::spawn(async move {
                let _ = merge::merge_run(&d, &h).await;
                drop(slot);
            });
        }
    }
    if merges_by_itself(kind) {
        for node in view.nodes.iter().filter(|n| n.state == NodeState::Done) {
            if let Some(slot) = Engine::claim(daemon, &handle.id, &node.id) {
                let (d, h, n) = (daemon.clone(), handle.clone(), node.id.clone());
                tokio::spawn(async move {
                    finish::finish(&d, &h, &n).await;
                    drop(slot);
                });
            }
        }
    }
    if matches!(kind, Some(RunKind::Fanout | RunKind::Orchestrate)) {
        schedule::schedule(daemon, handle);
    }
    if kind == Some(RunKind::Orchestrate) && wants_auto_merge(&view) {
        if let Some(slot) = Engine::claim(daemon, &handle.id, "~merge") {
            let (d, h) = (daemon.clone(), handle.clone());
            tokio::spawn(async move {
                if let Err(e) = merge::merge_run(&d, &h).await {
                    tracing::info!(run = %h.id, error = %e.message, "integration not merged");
                }
                drop(slot);
            });
        }
    }
    if matches!(
        kind,
        Some(RunKind::Spinoff | RunKind::Code | RunKind::Fanout)
    ) && !daemon.engine.busy(&handle.id)
    {
        if let Some(end) = run_end(&view) {
            if let Some(slot) = Engine::claim_quiet(daemon, &handle.id, "~end") {
                let (d, h) = (daemon.clone(), handle.clone());
                tokio::spawn(async move {
                    // Judged again: another pass may have ended the run meanwhile.
                    let now = h.view();
                    if run_end(&now) == Some(end) && !ended(&now) {
                        let _ = append(&d, &h, None, end, Value::Null).await;
                    }
                    drop(slot);
                });
            }
        }
    }
}

fn ended(view: &RunDetail) -> bool {
    view.manifest.status.is_terminal()
}

/// An orchestrate run started with auto_merge whose nodes all merged, not merged itself yet.
fn wants_auto_merge(view: &RunDetail) -> bool {
    view.manifest.run_settings().auto_merge()
        && view.manifest.merge.is_none()
        && !view.nodes.is_empty()
        && view
            .nodes
            .iter()
            .all(|n| n.state == NodeState::Merged && n.cleaned)
}

/// `run.completed` when every node merged, `run.failed` when every node finished and one did
/// not merge; `None` while a node can still move.
fn run_end(view: &RunDetail) -> Option<&'static str> {
    if view.nodes.is_empty() || !view.nodes.iter().all(|n| n.state.is_terminal()) {
        return None;
    }
    if view.nodes.iter().all(|n| n.state == NodeState::Merged) {
        Some("run.completed")
    } else if view.nodes.iter().any(|n| n.state == NodeState::Cancelled)
        || view.manifest.kind == Some(RunKind::Fanout)
    {
        // A fan-out with failed units waits for `run retry` (or a cancel).
        None
    } else {
        Some("run.failed")
    }
}

/// Appends a daemon event.
pub async fn append(
    daemon: &Arc<Daemon>,
    handle: &RunHandle,
    node: Option<&str>,
    kind: &str,
    data: Value,
) -> Result<octl_proto::rpc::AppendResult, AppError> {
    let result = daemon
        .store
        .append(handle, Draft::daemon(node, kind, data), false)
        .await;
    if let Err(e) = &result {
        tracing::warn!(run = %handle.id, node = ?node, kind, error = %e.message, "daemon event refused");
    }
    result
}

/// Closes a node's window, if the pane still is that node's.
pub async fn close_window(daemon: &Arc<Daemon>, run: &str, node: &str, pane: Option<&str>) {
    let Some(pane) = pane.map(str::to_string) else {
        return;
    };
    let (tmux, run, node) = (daemon.tmux.clone(), run.to_string(), node.to_string());
    let _ = blocking(move || Ok(tmux.kill_window_of_pane_in(&pane, &run, &node)?)).await;
}

/// Runs blocking work (git, tmux, files) off the async threads.
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, AppError> + Send + 'static,
) -> Result<T, AppError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| AppError::internal(format!("a blocking step panicked: {e}")))?
}

impl From<crate::git::GitError> for AppError {
    fn from(e: crate::git::GitError) -> AppError {
        AppError::new(e.kind(), e.to_string())
    }
}

impl From<crate::tmux::TmuxError> for AppError {
    fn from(e: crate::tmux::TmuxError) -> AppError {
        AppError::new(e.kind(), e.to_string())
    }
}
