//! The engine: what moves agent runs forward once they exist.
//!
//! It is level-triggered: whenever a run's state changes (the store says so) or the
//! supervisor's tick sees an agent exit, [`reconcile`] looks at the run as it is now and starts
//! whatever step is due ([`decide::due`], a pure function of the run) — a gate and merge for
//! a done node, the run's end when every node is finished. A set of steps in flight keeps one step per [`StepKey`] (a node, or a run-level
//! step) at a time, so an event seen twice never does the work twice.
//!
//! - [`decide`]: the steps due for a run, and the keys they hold.
//! - [`spawn`]: create a run, its node, branch, worktree and tmux window.
//! - [`supervise`]: one `tmux list-panes` per tick; an agent's exit becomes an event.
//! - [`finish`]: done → gate → merge → clean up.
//! - [`merge`]: merging a branch without losing anything.
//! - [`cleanup`]: snapshot, then remove window, worktree and branch.
//! - [`heal`]: finishing starts and merges a crash interrupted, from their intent events.
//! - [`cancel`]: stop a run, keeping or discarding (after a snapshot) its worktrees.
//! - [`schedule`]: fan-out and DAG nodes started under the parallelism cap, deps first.
//! - [`admission`]: a new agent starts only while this machine has room for it (`[limits]`);
//!   its agents measured for what they hold.
//! - [`resume`]: a node paused by a usage limit, started again after the reset.
//! - [`retry`]: a failed node of any agent run starts over (its old attempt cleaned first).
//! - [`attempts`]: best of N — attempts gated, judged once, the winner on, the rest set aside.
//! - [`permissions`]: an agent asks for a tool, a person decides (`node allow|deny`).
//! - [`review`]: a person's review goes back to the node's agent (typed, resumed, a new
//!   attempt in the same worktree), or approves its work.
//! - [`spinoff`]: the run of an accepted spin-off proposal, created after the decision.
//! - [`trust`]: answering Claude Code's workspace-trust question in a new window.
//! - [`orphans`]: worktrees, branches and windows under the daemon's names that no run owns.
//! - [`gc`]: `run gc` (what finished runs left behind, and orphans, after a snapshot) and
//!   `recover` (a snapshot back into a branch).

pub mod admission;
pub mod attempts;
pub mod budget;
pub mod cancel;
pub mod cleanup;
pub mod decide;
pub mod finish;
pub mod gc;
pub mod heal;
pub mod machine;
pub mod merge;
pub mod orphans;
pub mod permissions;
pub mod resume;
pub mod retry;
pub mod review;
pub mod schedule;
pub mod spawn;
pub mod spinoff;
pub mod stream_activity;
pub mod supervise;
pub mod trust;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;

use octl_proto::event::{Payload, RunCompleted, RunFailed};
use octl_proto::{AppError, NodeState};

use crate::daemon::Daemon;
use crate::store::{Draft, RunHandle};
pub use decide::StepKey;
use decide::{Facts, Step};

/// How often the supervisor looks at the panes.
pub const TICK: Duration = Duration::from_millis(200);

/// The engine's in-memory bookkeeping; everything durable is in the runs' logs.
#[derive(Default)]
pub struct Engine {
    /// (run, step key) pairs with a step running, each with whether a claim was turned away
    /// meanwhile (the state changed while the step ran).
    in_flight: Mutex<HashMap<(String, StepKey), bool>>,
    /// One merge at a time per repository (keyed by its git common dir).
    repo_locks: Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<()>>>>,
    /// Dead panes seen without an exit status yet, and how many ticks ago.
    pub(crate) unreaped: Mutex<HashMap<String, u32>>,
    /// The streams of live built-in CLI agents being followed for their activity.
    pub(crate) follows: Mutex<HashMap<(String, String), crate::streams::Follow>>,
    /// The pid of the last tmux server the supervisor logged as gone (once per server).
    pub(crate) tmux_gone: std::sync::atomic::AtomicU32,
    /// git and tmux were found recent enough; checked again only after a failure.
    tools_ok: std::sync::atomic::AtomicBool,
    /// Limit resets up to this time (ms since the epoch) have woken the runs already.
    resets_seen: std::sync::atomic::AtomicU64,
    /// Nodes whose start was turned away, by (run, node), with what they wait for: each
    /// waits, unchanged, until that frees; then its run is looked at again.
    waits: Mutex<HashMap<(String, String), Wait>>,
    /// What the agents on this machine were measured to hold (admission).
    pub(crate) observed: admission::Observed,
    /// Room on remote runners is being looked at (off the async threads: a runner may ask its
    /// place).
    room_looking: std::sync::atomic::AtomicBool,
    /// Starts under way on each remote runner, bounded ([`STARTS_PER_RUNNER`]).
    start_permits: Mutex<HashMap<String, Arc<tokio::sync::Semaphore>>>,
    /// Remote agents left behind are being looked for ([`orphans::reap_remote`]).
    reaping: std::sync::atomic::AtomicBool,
}

/// Ticks between two looks for remote agents left behind (20 s): each asks every remote
/// runner config.toml names (an `squeue`, a look at each SSH host).
const REAP_EVERY: u32 = 100;

/// Starts under way at once on one remote runner (each a push and a submission or a window).
pub const STARTS_PER_RUNNER: usize = 16;

/// What a node whose start was turned away waits for; `run show` lists it under
/// `waiting_for`.
#[derive(Debug, Clone, PartialEq)]
pub enum Wait {
    /// Live nodes hold every port of the range.
    Port(crate::bootstrap::PortRange),
    /// This machine has no memory for its agent now ([`admission`]).
    Room(decide::room::Shortfall),
    /// Its remote runner has no room now (every SSH host full or silent; the Slurm
    /// controller silent): the runner's name, and why.
    Runner { runner: String, why: String },
}

impl std::fmt::Display for Wait {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Wait::Port(range) => write!(f, "a free port in worktree.ports {range}"),
            Wait::Room(why) => write!(f, "{why}"),
            Wait::Runner { runner, why } => write!(f, "room on runner {runner} ({why})"),
        }
    }
}

/// Held while a step runs for a node; frees the slot when dropped.
pub struct Slot {
    daemon: Arc<Daemon>,
    key: (String, StepKey),
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
    /// Claims the key (a node, or a run-level step) for one step; `None` when a step is
    /// already running for it.
    pub fn claim(daemon: &Arc<Daemon>, run: &str, key: StepKey) -> Option<Slot> {
        let key = (run.to_string(), key);
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
    pub fn claim_quiet(daemon: &Arc<Daemon>, run: &str, key: StepKey) -> Option<Slot> {
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
            if r == run && step.is_node() {
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
        runner: &dyn crate::runner::Runner,
    ) -> Result<(), AppError> {
        use std::sync::atomic::Ordering;
        if !self.tools_ok.load(Ordering::Acquire) {
            git.check_version()?;
            runner.check()?;
            self.tools_ok.store(true, Ordering::Release);
        }
        Ok(())
    }

    /// `node` of `run` could not start: it waits for `what`.
    pub fn wait_for(&self, run: &str, node: &str, what: Wait) {
        tracing::info!(run, node, waits_for = %what, "the node waits to start");
        self.waits
            .lock()
            .expect("waits lock")
            .insert((run.to_string(), node.to_string()), what);
    }

    /// `node` of `run` started (or no longer waits to).
    pub fn wait_over(&self, run: &str, node: &str) {
        self.waits
            .lock()
            .expect("waits lock")
            .remove(&(run.to_string(), node.to_string()));
    }

    /// What `node` of `run` waits for to start, if it does.
    pub fn waits_for(&self, run: &str, node: &str) -> Option<Wait> {
        self.waits
            .lock()
            .expect("waits lock")
            .get(&(run.to_string(), node.to_string()))
            .cloned()
    }

    /// The bound on starts under way on the remote runner `name`.
    pub fn start_permits(&self, name: &str) -> Arc<tokio::sync::Semaphore> {
        self.start_permits
            .lock()
            .expect("start_permits lock")
            .entry(name.to_string())
            .or_insert_with(|| Arc::new(tokio::sync::Semaphore::new(STARTS_PER_RUNNER)))
            .clone()
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
    let mut ticks: u32 = 0;
    loop {
        tokio::select! {
            Some(run) = changes.recv() => {
                // Only an active run can have a step due (a finished one is let go of).
                if let Some(handle) = daemon.store.active(&run) {
                    reconcile(&daemon, &handle);
                }
            }
            _ = tick.tick() => {
                supervise::tick(&daemon).await;
                admission::sample(&daemon);
                wake_paused(&daemon);
                wake_waiters(&daemon);
                ticks = ticks.wrapping_add(1);
                if ticks % REAP_EVERY == 1 {
                    reap_remote(&daemon);
                }
            }
            _ = &mut stop => return,
        }
    }
}

/// Looks for remote agents left behind, off the async threads, one look at a time (the
/// first a tick after start: what a daemon killed meanwhile promised to stop).
fn reap_remote(daemon: &Arc<Daemon>) {
    use std::sync::atomic::Ordering;
    if daemon.engine.reaping.swap(true, Ordering::AcqRel) {
        return;
    }
    let d = daemon.clone();
    tokio::task::spawn_blocking(move || {
        orphans::reap_remote(&d);
        d.engine.reaping.store(false, Ordering::Release);
    });
}

/// A limit's reset is no change in any log: once a paused node's reset has passed, every
/// run is looked at again (the paused node resumes; nodes of its profile may start). Once
/// per reset: a resumed node that waits (for the cap, a port) is woken by what it waits for.
fn wake_paused(daemon: &Arc<Daemon>) {
    use std::sync::atomic::Ordering;
    let now = crate::store::writer::now_ms();
    let since = daemon.engine.resets_seen.swap(now, Ordering::AcqRel);
    let handles = daemon.store.handles();
    let due = handles.iter().any(|h| {
        h.view().nodes.iter().any(|n| {
            n.state == NodeState::Paused
                && n.paused_until
                    .as_deref()
                    .and_then(octl_proto::time::parse_millis)
                    .is_some_and(|t| since < t && t <= now)
        })
    });
    if due {
        for h in handles {
            daemon.store.notify(&h.id);
        }
    }
}

/// A port freed or memory freed elsewhere, or room on a runner, is no change in the waiting
/// node's log: each tick, the run of a node whose wait is over (a port of its range is free,
/// there is room for its agent) is looked at again. Room on remote runners is asked off the
/// async threads (a runner may ask its place), one look at a time.
fn wake_waiters(daemon: &Arc<Daemon>) {
    use std::sync::atomic::Ordering;
    let waits: Vec<((String, String), Wait)> = {
        let waits = daemon.engine.waits.lock().expect("waits lock");
        if waits.is_empty() {
            return;
        }
        waits.iter().map(|(k, w)| (k.clone(), w.clone())).collect()
    };
    let held = spawn::held_ports(daemon, None);
    let mut woken = Vec::new();
    let mut rooms: Vec<String> = Vec::new();
    for ((run, node), wait) in waits {
        // A spawn says its node's wait before its run exists: that wait is kept (a failed
        // creation ends it itself). Dropping it here would leave the node pending with nobody
        // to start it once room frees.
        let Some(h) = daemon.store.active(&run) else {
            if daemon.store.exists(&run) {
                daemon.engine.wait_over(&run, &node);
            }
            continue;
        };
        // A node cancelled (or its run set aside) meanwhile waits no more.
        let waiting = h
            .view()
            .nodes
            .iter()
            .find(|n| {
                n.id == node
                    && matches!(
                        n.state,
                        NodeState::Pending | NodeState::Paused | NodeState::Starting
                    )
            })
            .cloned();
        let Some(n) = waiting else {
            daemon.engine.wait_over(&run, &node);
            continue;
        };
        let over = match &wait {
            Wait::Port(range) => range.free(&held).is_some(),
            Wait::Room(_) => admission::check_node(daemon, &run, &n).is_ok(),
            Wait::Runner { runner, .. } => {
                rooms.push(runner.clone());
                false
            }
        };
        if over {
            daemon.engine.wait_over(&run, &node);
            woken.push(run);
        }
    }
    woken.sort();
    woken.dedup();
    for run in woken {
        daemon.store.notify(&run);
    }
    rooms.sort();
    rooms.dedup();
    if rooms.is_empty() || daemon.engine.room_looking.swap(true, Ordering::AcqRel) {
        return;
    }
    let d = daemon.clone();
    tokio::task::spawn_blocking(move || {
        let free: Vec<String> = rooms
            .into_iter()
            .filter(|r| d.runners.of(Some(r)).is_ok_and(|r| r.has_room()))
            .collect();
        let mut runs = Vec::new();
        d.engine
            .waits
            .lock()
            .expect("waits lock")
            .retain(|(run, _), what| match what {
                Wait::Runner { runner, .. } if free.contains(runner) => {
                    runs.push(run.clone());
                    false
                }
                _ => true,
            });
        runs.dedup();
        for run in runs {
            d.store.notify(&run);
        }
        d.engine.room_looking.store(false, Ordering::Release);
    });
}

/// Starts whatever step is due for the run as it is now: each step [`decide::due`] names
/// whose key is free, performed by [`act`].
pub fn reconcile(daemon: &Arc<Daemon>, handle: &Arc<RunHandle>) {
    let view = handle.view();
    let run_exists = |id: &str| daemon.store.exists(id);
    let facts = Facts {
        corrupt: handle.corrupt().is_some(),
        run_exists: &run_exists,
        now_ms: crate::store::writer::now_ms(),
    };
    for step in decide::due(&view, &facts) {
        // The run ends only once no node step runs; each running one is asked to wake the
        // engine when it ends. Judged here, after the claims before it in this pass.
        if matches!(step, Step::EndRun(_)) && daemon.engine.busy(&handle.id) {
            continue;
        }
        // A start waiting for its runner's room is made again once it has some.
        if let Step::HealStart { node } = &step {
            if daemon.engine.waits_for(&handle.id, &node.id).is_some() {
                continue;
            }
        }
        let slot = if step.quiet() {
            Engine::claim_quiet(daemon, &handle.id, step.key())
        } else {
            Engine::claim(daemon, &handle.id, step.key())
        };
        if let Some(slot) = slot {
            tokio::spawn(act(daemon.clone(), handle.clone(), step, slot));
        }
    }
}

/// Performs one step, holding its slot.
pub async fn act(d: Arc<Daemon>, h: Arc<RunHandle>, step: Step, slot: Slot) {
    match step {
        Step::CreateSpinoffRun { proposal, child } => {
            // Judged again under the slot: the accepting request may have made it meanwhile.
            if !d.store.exists(&child) {
                tracing::info!(run = %h.id, proposal = %proposal.id, child = %child, "creating the run of an accepted spin-off a crash cut short");
                let _ = spinoff::create_child(&d, &h, &proposal, &child, None).await;
            }
        }
        Step::HealStart { node } => return heal::start(&d, &h, &node, slot).await,
        Step::HealMerge { node } => return heal::merge_and_clean(&d, &h, &node, slot).await,
        Step::CleanStaleAttempt { node } => retry::clean_old_attempt(&d, &h, &node).await,
        Step::StartPending { node } => {
            let now = h.view();
            if let Some(n) = now
                .nodes
                .iter()
                .find(|x| x.id == node && x.state == NodeState::Pending && !x.stale_attempt())
            {
                return schedule::start(&d, &h, &now, n, slot).await;
            }
        }
        Step::Resume { node } => resume::resume(&d, &h, &node).await,
        Step::ResumeRunMerge => {
            let _ = merge::merge_run(&d, &h).await;
        }
        Step::Finish { node } => finish::finish(&d, &h, &node).await,
        Step::Gate { node } => attempts::gate(&d, &h, &node).await,
        Step::Judge => attempts::judge(&d, &h).await,
        Step::SetAside { node } => attempts::set_aside(&d, &h, &node).await,
        Step::Schedule => return schedule::passes(&d, &h, slot).await,
        Step::AutoMergeRun => {
            if let Err(e) = merge::merge_run(&d, &h).await {
                tracing::info!(run = %h.id, error = %e.message, "integration not merged");
            }
        }
        Step::EndRun(end) => {
            // Judged again: another pass may have ended the run meanwhile.
            let now = h.view();
            if decide::run_end(&now) == Some(end) && !decide::ended(&now) {
                let _ = match end {
                    decide::RunEnd::Completed => {
                        append(&d, &h, None, RunCompleted::default()).await
                    }
                    decide::RunEnd::Failed => append(&d, &h, None, RunFailed::default()).await,
                };
            }
        }
    }
    drop(slot);
}

/// Appends a daemon event.
pub async fn append<P: Payload>(
    daemon: &Arc<Daemon>,
    handle: &RunHandle,
    node: Option<&str>,
    payload: P,
) -> Result<octl_proto::rpc::AppendResult, AppError> {
    let result = daemon
        .store
        .append(handle, Draft::daemon(node, payload), false)
        .await;
    if let Err(e) = &result {
        tracing::warn!(run = %handle.id, node = ?node, kind = P::TYPE, error = %e.message, "daemon event refused");
    }
    result
}

/// Closes a node's window, if the pane still is that node's.
pub async fn close_window(daemon: &Arc<Daemon>, run: &str, node: &str, pane: Option<&str>) {
    let Some(pane) = pane.map(str::to_string) else {
        return;
    };
    // The node's own runner (its `node.added` names it).
    let named = daemon.store.resolve("run", run).ok().and_then(|h| {
        h.view()
            .nodes
            .iter()
            .find(|n| n.id == node)
            .and_then(|n| n.runner.clone())
    });
    let (d, run, node) = (daemon.clone(), run.to_string(), node.to_string());
    let _ = blocking(move || {
        d.runners
            .of(named.as_deref())?
            .stop(&run, &node, &crate::runner::AgentHandle::new(pane))
    })
    .await;
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
