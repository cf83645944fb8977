//! The runner seam: where agents run. The engine starts, observes and stops agents only
//! through [`Runner`]; [`tmux::TmuxRunner`] (the private tmux server) is the one the daemon
//! uses, and `fake` (tests only) keeps agents in memory so the engine's logic can be tested
//! without tmux.
//!
//! The contract speaks of an [`AgentHandle`], not of a tmux pane: the handle is the string
//! the log records as a node's `pane` (a tmux pane id such as `%3` today), so old logs still
//! replay. Only the runner that issued a handle may read meaning into it.
//!
//! The calls are synchronous; the engine runs them in `blocking(...)`.
//!
//! Which runner a node uses is chosen when it is added (`--runner`, the manifest or plan, the
//! profile's `runner`, `[defaults] runner`, else `local`) and recorded in its `node.added`;
//! [`Runners`] gives the runner of that name.
//!
//! `orchestratectl run attach` asks the node's runner for the command that reaches its agent
//! ([`Runner::attach`], over `node.attach`) and execs it in the user's terminal.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use octl_proto::{AppError, ErrorKind};

use crate::config::{Config, RunnerConfig, RunnerKind};

pub mod exchange;
#[cfg(test)]
pub mod fake;
pub mod slurm;
pub mod ssh;
pub mod tmux;

pub type Result<T> = std::result::Result<T, AppError>;

/// An agent as its runner knows it (a tmux pane id for [`tmux::TmuxRunner`]). Opaque to
/// everything but the runner that issued it; the log keeps it as the node's `pane`, byte for
/// byte.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AgentHandle(String);

impl AgentHandle {
    pub fn new(id: impl Into<String>) -> AgentHandle {
        AgentHandle(id.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

impl fmt::Display for AgentHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What to start: one agent for one node of a run.
#[derive(Debug, Clone)]
pub struct AgentSpec<'a> {
    /// The run (`[A-Za-z0-9_-]`).
    pub run: &'a str,
    /// The node (`[A-Za-z0-9_-]`).
    pub node: &'a str,
    /// Absolute working directory (the node's worktree).
    pub cwd: &'a Path,
    /// Extra environment for the program.
    pub env: &'a [(String, String)],
    /// The program and its arguments, passed exactly.
    pub argv: &'a [String],
    /// The agent's output is appended here from its first byte (the engine names the file).
    pub log: &'a Path,
    /// Most likely the run's first agent (a hint: the runner may prepare the run's place).
    pub first: bool,
    /// How many attempts of the node came before this one (remote runners name their refs
    /// and jobs by it).
    pub attempt: u32,
    /// The memory the agent may hold, swap included (its profile's `memory_max`): a runner
    /// that can bound it does (the local one: the agent's cgroup).
    pub memory_max: Option<u64>,
    /// The processes and threads it may have at once (a sandboxed agent's `[sandbox]
    /// pids_max`): a runner that can bound it does (the local one: the agent's cgroup).
    pub pids_max: Option<u64>,
    /// Where the start goes, as [`Runner::reserve`] chose it and the node's `node.starting`
    /// recorded (an SSH host, a Slurm job's name); `None` for runners with one place.
    pub place: Option<&'a str>,
}

/// An agent just started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Started {
    pub handle: AgentHandle,
    /// The process the runner started for it (recorded as the node's `pid`).
    pub pid: u32,
}

/// One agent the runner hosts, from [`Runner::observe`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentStatus {
    pub run: String,
    pub node: String,
    pub handle: AgentHandle,
    pub pid: Option<u32>,
    /// The program still runs.
    pub alive: bool,
    /// Exit status of an ended agent that exited normally. An ended agent with neither status
    /// nor signal may get one on the next look (the runner has not reaped it yet); only when
    /// that persists is it taken as killed.
    pub exit_status: Option<i32>,
    /// Signal that killed an ended agent, where the runner can tell.
    pub exit_signal: Option<i32>,
    /// The runner started this attempt again by itself (Slurm requeued its job): which copy
    /// runs now and why. `None` for the first copy and for runners that never do.
    pub requeue: Option<Requeue>,
    /// The agent waits in the runner's queue (a pending Slurm job), with the runner's
    /// reason; `None` once it runs, and for runners without a queue. An ended agent keeps it
    /// when it never left the queue (a pending job cancelled), so an end seen without a look
    /// at it running still tells whether it ran.
    pub queued: Option<String>,
}

/// A runner's own restart of an attempt, as [`AgentStatus::requeue`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requeue {
    /// The copy running now (1 for the first restart).
    pub copy: u32,
    /// Where the lost copy ran, when the runner saw it.
    pub from: Option<String>,
    pub reason: String,
}

/// One look at every agent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observation {
    /// The agents of the places that answered.
    pub agents: Vec<AgentStatus>,
    /// The pid of the process hosting the agents that answered (the tmux server), if any.
    pub host: Option<u32>,
    /// Places ([`Runner::place_of`]) whose agents are not known this time (a host not asked
    /// yet since the daemon started): their nodes stay as they are.
    pub unsure: Vec<String>,
    /// Places that stopped answering: their agents are not known to be gone, and their nodes
    /// are `lost` until the place answers again (or `lost_after` passes).
    pub unreachable: Vec<Unreachable>,
}

/// A place of a runner that does not answer, from [`Observation::unreachable`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreachable {
    /// As [`Runner::place_of`] names it (an SSH host, `slurmctld`).
    pub place: String,
    /// Since when it does not answer (ms since the epoch).
    pub since_ms: u64,
    /// Names the place and what its last answer was.
    pub reason: String,
}

/// Whether a runner has room for one more start now, from [`Runner::reserve`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Room {
    /// Yes: the start goes to `place` (recorded in the node's `node.starting`), held for it
    /// until [`Runner::start`] or [`Runner::release`].
    Free { place: Option<String> },
    /// Not now (every host full, none answering): why. The node waits, pending, until
    /// [`Runner::has_room`] says so.
    Full(String),
}

/// Where agents run. Adding one is a module implementing this trait (see
/// docs/ARCHITECTURE.md, "A runner").
pub trait Runner: Send + Sync {
    /// Checks the runner's tools (e.g. the tmux version); the engine calls it once per daemon.
    fn check(&self) -> Result<()>;

    /// Starts an agent for `spec.node` of `spec.run`. An error of kind `timeout` means no
    /// room after all (the place it went to stopped answering, the others are full): the
    /// node waits, starting, until [`Runner::has_room`]; any other fails it.
    fn start(&self, spec: &AgentSpec<'_>) -> Result<Started>;

    /// Every agent the runner hosts, ended ones included, in one call: the supervisor calls
    /// it once per tick for all runs.
    fn observe(&self) -> Result<Observation>;

    /// The agents the runner hosts, one entry per place it keeps them (a tmux window), for
    /// finding those no run owns.
    fn owned(&self) -> Result<Vec<AgentStatus>>;

    /// The pid of the host process the daemon last started agents in, to tell when it is
    /// gone; `None` if there is none (yet).
    fn host(&self) -> Option<u32> {
        None
    }

    /// Stops the agent `handle` if it still is `node` of `run` (handles may be reused by a
    /// restarted host: a stale one must never stop another agent). `false` if it was not.
    fn stop(&self, run: &str, node: &str, handle: &AgentHandle) -> Result<bool>;

    /// Stops every agent of `run`. `false` if it had none.
    fn stop_run(&self, run: &str) -> Result<bool>;

    /// The agent's screen (scrollback included), for answering an interactive question.
    /// Optional: a runner without a screen says so.
    fn capture(&self, handle: &AgentHandle) -> Result<String> {
        let _ = handle;
        Err(AppError::internal("this runner has no agent screen"))
    }

    /// The command (program and arguments) a terminal on the daemon's machine runs to show
    /// the agent `handle` of `node` of `run` and type into it, for `run attach`. Optional: a
    /// runner without one says so.
    fn attach(&self, run: &str, node: &str, handle: &AgentHandle) -> Result<Vec<String>> {
        let _ = (run, node, handle);
        Err(AppError::new(
            ErrorKind::InvalidTransition,
            "this runner has no way to attach to an agent",
        ))
    }

    /// Brings the work of the ended agent `handle` into its node's `worktree`, before the
    /// engine judges its exit: a remote runner fetches what the attempt pushed (its commits
    /// onto the node's branch, what it left uncommitted as changes). Local agents worked in
    /// the worktree itself: nothing to do.
    fn collect(&self, run: &str, node: &str, handle: &AgentHandle, worktree: &Path) -> Result<()> {
        let _ = (run, node, handle, worktree);
        Ok(())
    }

    /// The place the agent `handle` is at, as [`Observation::unsure`] and
    /// [`Observation::unreachable`] name places; `None` for a runner with one place that
    /// always answers.
    fn place_of(&self, handle: &AgentHandle) -> Option<String> {
        let _ = handle;
        None
    }

    /// Whether the place of the agent `handle` answered its last look: a call that failed
    /// while it does not (a fetch cut off) says nothing of the agent, and is tried again.
    fn reachable(&self, handle: &AgentHandle) -> bool {
        let _ = handle;
        true
    }

    /// Gives up on the agent `handle` of `node` of `run`, whose place did not answer for the
    /// runner's `lost_after`: nothing of it is brought back or adopted again (what was
    /// fetched before stays), and it is stopped once its place answers. The engine then
    /// starts the node again from its last checkpoint.
    fn abandon(&self, run: &str, node: &str, handle: &AgentHandle) -> Result<()> {
        let _ = (run, node, handle);
        Ok(())
    }

    /// Room for starting `node` of `run` now, held until [`Runner::start`] takes it or
    /// [`Runner::release`] gives it back. A runner without limits always has room.
    fn reserve(&self, run: &str, node: &str, attempt: u32) -> Result<Room> {
        let _ = (run, node, attempt);
        Ok(Room::Free { place: None })
    }

    /// Gives back room [`Runner::reserve`] held for `node` of `run` (its start was not made).
    fn release(&self, run: &str, node: &str) {
        let _ = (run, node);
    }

    /// Whether [`Runner::reserve`] would find room now (a cheap look, for nodes waiting).
    fn has_room(&self) -> bool {
        true
    }

    /// The agent of `spec`'s attempt that a start cut short by a crash left behind, found by
    /// its name where `spec.place` says it went, to adopt instead of starting another.
    /// `Ok(None)`: there is none, start it. An error: its place cannot be asked now.
    fn find(&self, spec: &AgentSpec<'_>) -> Result<Option<Started>> {
        Ok(self
            .observe()?
            .agents
            .into_iter()
            .find(|a| a.run == spec.run && a.node == spec.node && a.alive)
            .map(|a| Started {
                handle: a.handle,
                pid: a.pid.unwrap_or(0),
            }))
    }

    /// The daemon stops: connections it keeps open to remote places are closed (agents go on).
    fn shutdown(&self) {}

    /// Presses one named key (`Enter`, `Down`, …) in the agent's terminal. Optional.
    fn send_key(&self, handle: &AgentHandle, key: &str) -> Result<()> {
        let _ = (handle, key);
        Err(AppError::internal("this runner cannot type into an agent"))
    }

    /// Types `text` literally, then Enter, into the agent's terminal if `handle` still is
    /// `node` of `run` (as [`Runner::stop`] checks). `false` if it was not. Optional.
    fn send_line(&self, run: &str, node: &str, handle: &AgentHandle, text: &str) -> Result<bool> {
        let _ = (run, node, handle, text);
        Err(AppError::internal("this runner cannot type into an agent"))
    }

    /// The memory each agent on this machine holds now (its whole process tree), for
    /// admission. Optional: agents elsewhere take none of this machine's.
    fn usage(&self) -> Result<Vec<Usage>> {
        Ok(Vec::new())
    }

    /// Whether the kernel killed processes of `node` of `run` for going over its memory
    /// limit, asked before its exit is judged. Optional.
    fn memory_kill(&self, run: &str, node: &str) -> Option<MemoryKill> {
        let _ = (run, node);
        None
    }

    /// Every agent whose processes (or cgroup) this runner still finds, window or not: what
    /// outlived its window is ended on restart and reported as an orphan. Optional.
    fn processes(&self) -> Result<Vec<Found>> {
        Ok(Vec::new())
    }

    /// Ends every process of `node` of `run` whatever became of its window ([`Runner::stop`]
    /// does so too); gives how many there were. Optional.
    fn end_processes(&self, run: &str, node: &str) -> Result<usize> {
        let _ = (run, node);
        Ok(0)
    }
}

pub use crate::contain::{Found, MemoryKill, Usage};

/// The daemon's runners by name: `local` (the tmux runner) always, the others of config.toml's
/// `[runners]` built on first use and rebuilt when their configuration changes.
pub struct Runners {
    local: std::sync::Arc<dyn Runner>,
    home: std::path::PathBuf,
    config: std::sync::Arc<crate::config::Live>,
    built: std::sync::Mutex<BTreeMap<String, Built>>,
}

/// A remote runner and the configuration it was built from.
type Built = (RunnerConfig, std::sync::Arc<dyn Runner>);

impl Runners {
    pub fn new(
        local: std::sync::Arc<dyn Runner>,
        home: &Path,
        config: std::sync::Arc<crate::config::Live>,
    ) -> Runners {
        Runners {
            local,
            home: home.to_path_buf(),
            config,
            built: Default::default(),
        }
    }

    /// The runner called `name` in `config`, or why agents cannot be started on it.
    pub fn get(&self, config: &Config, name: &str) -> Result<std::sync::Arc<dyn Runner>> {
        let wanted = config.runner(name)?;
        if wanted.kind() == RunnerKind::Local {
            return Ok(self.local.clone());
        }
        let mut built = self.built.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((had, runner)) = built.get(name) {
            if *had == wanted {
                return Ok(runner.clone());
            }
        }
        let runner = build(name, &wanted, &self.home)?;
        built.insert(name.to_string(), (wanted, runner.clone()));
        Ok(runner)
    }

    /// The runner a node's agent runs on (its `node.added` names it; none is `local`): the
    /// one built already, even if config.toml changed since (it still hosts that agent), else
    /// the one config.toml describes now.
    pub fn of(&self, name: Option<&str>) -> Result<std::sync::Arc<dyn Runner>> {
        let Some(name) = name.filter(|n| *n != crate::config::LOCAL_RUNNER) else {
            return Ok(self.local.clone());
        };
        let built = self.built.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, runner)) = built.get(name) {
            return Ok(runner.clone());
        }
        drop(built);
        self.get(&*self.config.get()?, name)
    }

    /// The runners built so far besides `local`, by name (the supervisor observes each).
    pub fn remote(&self) -> Vec<(String, std::sync::Arc<dyn Runner>)> {
        let built = self.built.lock().unwrap_or_else(|e| e.into_inner());
        built
            .iter()
            .map(|(n, (_, r))| (n.clone(), r.clone()))
            .collect()
    }
}

/// A remote runner from its configuration.
fn build(name: &str, config: &RunnerConfig, home: &Path) -> Result<std::sync::Arc<dyn Runner>> {
    match config {
        RunnerConfig::Slurm(c) => Ok(std::sync::Arc::new(slurm::SlurmRunner::new(
            c.clone(),
            home,
        ))),
        RunnerConfig::Ssh(c) => Ok(std::sync::Arc::new(ssh::SshRunner::new(name, c, home))),
        RunnerConfig::Local => Err(AppError::internal(format!(
            "runner {name:?} is local: it is the daemon's own tmux runner, not built"
        ))),
    }
}

/// The refs (`refs/octl/remote/<run>/<node>/<attempt>/<copy>`) of the copy of a remote
/// agent `handle` whose work comes back, in the repository of `git`: the copy an SSH handle
/// names, the newest copy fetched of a Slurm job's attempt; `None` for a local agent.
pub fn last_copy(
    git: &crate::git::Git,
    run: &str,
    node: &str,
    handle: &AgentHandle,
) -> Option<String> {
    if let Some((_, attempt, copy, _)) = ssh::parse_handle(handle) {
        return Some(format!(
            "{}/{copy}",
            exchange::ref_prefix(run, node, attempt)
        ));
    }
    let (_, attempt) = slurm::parse_handle(handle)?;
    let prefix = exchange::ref_prefix(run, node, attempt);
    let listed = git
        .plumbing(&["for-each-ref", "--format=%(refname)", &format!("{prefix}/")])
        .ok()?;
    let newest = listed
        .lines()
        .filter_map(|r| r.strip_prefix(&format!("{prefix}/"))?.split_once('/'))
        .filter_map(|(copy, _)| copy.parse::<u32>().ok())
        .max()?;
    Some(format!("{prefix}/{newest}"))
}

/// Whether the runner `config` describes answers (for `doctor`): the local tmux, every SSH
/// host, Slurm's `sinfo`. Ok: what answered.
pub fn probe(local: &dyn Runner, config: &RunnerConfig) -> Result<String> {
    match config {
        RunnerConfig::Local => local
            .check()
            .map(|()| "this machine's tmux server".to_string()),
        RunnerConfig::Ssh(c) => ssh::check_hosts(&c.hosts),
        RunnerConfig::Slurm(c) => slurm::check_cluster(c.partition.as_deref()),
    }
}
