//! Spawning: a run with one node (spinoff, code), and starting a node's agent. Each side
//! effect is preceded by the event that announces it (`node.starting` names the branch and
//! worktree before they exist), so a crash mid-spawn leaves a log that says what to heal.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use octl_proto::event::{
    NodeAdded, NodeFailed, NodeStarted, NodeStarting, RunCreated, RunSettings,
};
use octl_proto::ids::validate_node_id;
use octl_proto::rules::PermissionRules;
use octl_proto::{AppError, ErrorKind, RunKind};

use super::merge::failpoint;
use super::{append, blocking};
use crate::agents::{self, Launch, Mode, Profile, Session};
use crate::bootstrap::{self, Bootstrap};
use crate::config::{Config, RunnerKind};
use crate::daemon::Daemon;
use crate::git::Git;
use crate::runner::{AgentHandle, AgentSpec, Room};
use crate::store::{Draft, NewRun, RunHandle};

/// Largest accepted task text.
pub const MAX_TASK: usize = 32 * 1024;

/// What `spawn spinoff` and `spawn code` ask for.
#[derive(Debug, Clone)]
pub struct SpawnRequest {
    pub kind: RunKind,
    pub task: String,
    pub repo: PathBuf,
    pub base: Option<String>,
    pub agent: Option<String>,
    pub node: Option<String>,
    pub gate: Option<String>,
    /// The run's budget (USD), passed to its Claude Code session.
    pub max_budget_usd: Option<f64>,
    /// The runner asked for (`--runner`); else the profile's, `[defaults] runner`, `local`.
    pub runner: Option<String>,
    /// The run's permission rules for its Claude Code agent (`--allow`, `--ask`, `--deny`).
    pub permissions: PermissionRules,
    /// Its done node waits for a person's review before it merges (`--review`).
    pub review: bool,
    /// What its agent runs in (`--sandbox`), over its profile's and config.toml's.
    pub sandbox: Option<octl_proto::sandbox::SandboxKind>,
    /// The run and spin-off proposal this run was accepted from.
    pub parent: Option<(String, String)>,
}

/// Everything checked before a spawn creates anything.
pub struct Checked {
    pub repo: PathBuf,
    pub base: String,
    pub profile: Profile,
    pub launch: Launch,
    pub node: String,
    /// The runner the node starts on, checked to be configured and usable.
    pub runner: String,
    pub bootstrap: Bootstrap,
}

pub fn validate_task(task: &str) -> Result<(), AppError> {
    if task.trim().is_empty() {
        return Err(AppError::invalid(
            "invalid task: give the agent something to do (a non-empty text)",
        ));
    }
    if task.len() > MAX_TASK || task.contains('\0') {
        return Err(AppError::invalid(format!(
            "invalid task: use at most {MAX_TASK} bytes of text without NUL characters"
        )));
    }
    Ok(())
}

/// A node name from the task: its first words, lower-cased, joined by '-'.
pub fn slug(task: &str) -> String {
    let mut out = String::new();
    for word in task
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let w = word.to_ascii_lowercase();
        if out.len() + w.len() + 1 > 40 {
            break;
        }
        if !out.is_empty() {
            out.push('-');
        }
        out.push_str(&w);
    }
    if out.is_empty() {
        "agent".to_string()
    } else {
        out
    }
}

/// The repository, base branch, git and tmux versions, and the agent program: all checked
/// before anything is written.
pub fn check(daemon: &Daemon, req: &SpawnRequest, mode: Mode) -> Result<Checked, AppError> {
    validate_task(&req.task)?;
    if let Some(n) = &req.node {
        validate_node_id("node", n)?;
    }
    if req.review && req.kind == RunKind::Code {
        return Err(AppError::invalid(
            "invalid review: a code run's node waits for a person to review and merge it anyway; give review with spawn.spinoff",
        ));
    }
    check_gate(req.gate.as_deref())?;
    octl_proto::rpc::check_budget("max_budget_usd", req.max_budget_usd)?;
    let config = daemon.config.get()?;
    let profile = check_profile(&config, req.agent.as_deref(), mode)?;
    check_rules(&profile, &req.permissions, "")?;
    let per_node = agents::node_budget(&config, &profile);
    let session = matches!(profile.kind, agents::ProfileKind::Claude { .. }).then(Session::new);
    let launch = profile
        .launch(mode, &req.task, session.as_ref())?
        .with(&agents::Extra {
            gate: req.gate.as_deref(),
            max_budget_usd: match (req.max_budget_usd, per_node) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
            permissions: Some(&req.permissions),
        });
    let runner = check_runner(daemon, &config, req.runner.as_deref(), &profile.name)?;
    let (repo, base) = check_repo(daemon, &req.repo, req.base.as_deref())?;
    let bootstrap = Bootstrap::resolve(&config, &repo)?;
    let node = req.node.clone().unwrap_or_else(|| slug(&req.task));
    Ok(Checked {
        repo,
        base,
        profile,
        launch,
        node,
        runner,
        bootstrap,
    })
}

/// A node's own permission rules: in Claude Code's syntax, and for a Claude Code agent (the
/// only one that reads them). `at` prefixes the field in messages (a plan node's place).
pub fn check_rules(profile: &Profile, rules: &PermissionRules, at: &str) -> Result<(), AppError> {
    rules.check(&format!("{at}permissions."))?;
    if !rules.is_empty() && !matches!(profile.kind, agents::ProfileKind::Claude { .. }) {
        return Err(AppError::invalid(format!(
            "invalid {at}permissions: profile {:?} does not take permission rules; allow, ask and deny are Claude Code's (profile claude), other agents decide with their own settings (docs/AGENTS.md, \"Permission policy\")",
            profile.name
        )));
    }
    Ok(())
}

pub fn check_gate(gate: Option<&str>) -> Result<(), AppError> {
    match gate {
        Some(g) if g.trim().is_empty() || g.contains('\0') => Err(AppError::invalid(
            "invalid gate: give a shell command, e.g. \"cargo test\"",
        )),
        _ => Ok(()),
    }
}

/// The runner a node of `profile` starts on (see [`Config::resolve_runner`]), checked to be one
/// this daemon can start agents on.
pub fn check_runner(
    daemon: &Daemon,
    config: &Config,
    asked: Option<&str>,
    profile: &str,
) -> Result<String, AppError> {
    let name = config.resolve_runner(asked, profile)?;
    let runner = daemon.runners.get(config, &name)?;
    // A remote runner must answer now (`sinfo` for Slurm), before anything is created; the
    // local one's tools are checked with the repository's.
    if name != crate::config::LOCAL_RUNNER && config.runner(&name)?.kind() != RunnerKind::Local {
        runner.check()?;
    }
    Ok(name)
}

/// The profile by name (or the default), with its program present on the daemon's PATH.
pub fn check_profile(config: &Config, name: Option<&str>, mode: Mode) -> Result<Profile, AppError> {
    let profile = agents::resolve(config, name)?;
    profile.launch(mode, "", None)?;
    agents::require_program(&profile, mode, std::env::var_os("PATH").as_deref())?;
    Ok(profile)
}

/// The repository's top level (symlinks resolved) and the base branch: the one given, which
/// must exist, or the one checked out. Also checks git and tmux once per daemon.
pub fn check_repo(
    daemon: &Daemon,
    repo: &Path,
    base: Option<&str>,
) -> Result<(PathBuf, String), AppError> {
    let shown = repo.display().to_string();
    if !repo.is_absolute() {
        return Err(AppError::invalid(format!(
            "invalid repo {shown:?}: give an absolute path"
        )));
    }
    let repo_dir = repo
        .canonicalize()
        .map_err(|e| AppError::invalid(format!("invalid repo {shown:?}: {e}")))?;
    let git = Git::new(&repo_dir);
    daemon.engine.check_tools(&git, &*daemon.runner)?;
    let (top, current) = git.toplevel_and_branch().map_err(|e| match e {
        crate::git::GitError::NotARepo { .. } | crate::git::GitError::Failed { .. } => {
            // Agents need a working tree to branch from: say so when it is the one thing
            // missing, instead of a git error from deep inside worktree creation.
            match git.without_worktree() {
                Some(true) => AppError::invalid(format!(
                    "invalid repo {shown:?}: a bare repository (it has no working tree); give a clone of it or one of its worktrees"
                ))
                .with_hint(format!(
                    "e.g. `git clone {shown} DIR` or `git -C {shown} worktree add DIR BRANCH`, then --repo DIR"
                )),
                Some(false) => AppError::invalid(format!(
                    "invalid repo {shown:?}: inside a .git directory; give the repository's working tree"
                )),
                None => AppError::invalid(format!(
                    "invalid repo {shown:?}: not inside a git repository with at least one commit"
                )),
            }
        }
        other => other.into(),
    })?;
    let git = Git::new(&top);
    let base = match (base, current) {
        (Some(b), current) => {
            if current.as_deref() != Some(b) && !git.branch_exists(b)? {
                return Err(
                    AppError::not_found(format!("no branch {b:?} in {}", top.display()))
                        .with_hint("name an existing local branch with --base"),
                );
            }
            b.to_string()
        }
        (None, Some(current)) => current,
        (None, None) => {
            return Err(AppError::invalid(format!(
                "HEAD is detached in {}: name the base branch with --base",
                top.display()
            )))
        }
    };
    Ok((top, base))
}

/// The first line of the task, shortened: the run's title.
pub fn title(task: &str) -> String {
    let line = task
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    if line.chars().count() > 80 {
        format!("{}…", line.chars().take(79).collect::<String>())
    } else {
        line.to_string()
    }
}

/// Creates a spinoff or code run and starts its agent.
pub async fn spawn(daemon: &Arc<Daemon>, req: SpawnRequest) -> Result<Arc<RunHandle>, AppError> {
    let t0 = std::time::Instant::now();
    let checked = check_request(daemon, &req).await?;
    tracing::debug!(check_ms = t0.elapsed().as_secs_f64() * 1e3, "spawn checked");
    create(daemon, req, checked, octl_proto::ids::new_ulid()).await
}

/// [`check`] off the async threads, in the mode the request's kind runs its agent in.
pub async fn check_request(daemon: &Arc<Daemon>, req: &SpawnRequest) -> Result<Checked, AppError> {
    let mode = if req.kind == RunKind::Code {
        Mode::Interactive
    } else {
        Mode::Autonomous
    };
    let (d, r) = (daemon.clone(), req.clone());
    blocking(move || check(&d, &r, mode)).await
}

/// Creates the checked run under `id` (chosen by the caller, who may have recorded it
/// already: an accepted spin-off names its run before it exists) and starts its agent. An
/// agent that cannot start fails its node, so after an error the run may exist or not.
pub async fn create(
    daemon: &Arc<Daemon>,
    req: SpawnRequest,
    checked: Checked,
    id: String,
) -> Result<Arc<RunHandle>, AppError> {
    let t0 = std::time::Instant::now();
    let (parent_run, proposal) = req.parent.clone().unzip();
    let created = RunCreated {
        kind: req.kind,
        title: Some(title(&req.task)),
        repo: Some(checked.repo.display().to_string()),
        base: Some(checked.base.clone()),
        settings: RunSettings {
            agent: Some(checked.profile.name.clone()),
            gate: req.gate.clone(),
            max_budget_usd: req.max_budget_usd,
            review: req.review.then_some(true),
            sandbox: req.sandbox,
            parent_run,
            proposal,
            ..RunSettings::default()
        },
    };
    // The node, and the intent to give it a branch and worktree named after the new run,
    // go into the run's first write — where its runner has room (a remote runner's place
    // recorded with it) and this machine has room for its agent; else the node waits,
    // pending, as for a port.
    let worktrees = daemon.home.worktrees();
    let room = reserve(daemon, &checked.runner, &id, &checked.node, 0).await?;
    // The port is chosen, and the agent admitted, under one lock, so no other start takes
    // them meanwhile.
    let starts = STARTS.lock().await;
    let waits = match &room {
        Room::Full(why) => Some(super::Wait::Runner {
            runner: checked.runner.clone(),
            why: why.clone(),
        }),
        Room::Free { .. } => super::admission::check(
            daemon,
            &id,
            &checked.node,
            &checked.profile.name,
            Some(checked.runner.as_str()),
        )
        .err()
        .map(super::Wait::Room),
    };
    let port = match (&waits, checked.bootstrap.ports) {
        (None, Some(range)) => match free_port(daemon, range, None) {
            Ok(p) => Some(p),
            Err(e) => {
                release(daemon, &checked.runner, &id, &checked.node).await;
                return Err(e);
            }
        },
        _ => None,
    };
    let intent = match (&room, &waits) {
        (Room::Free { place }, None) => Some(starting(
            &id,
            &checked.node,
            &worktrees,
            checked.launch.session.as_ref(),
            port,
            place.clone(),
        )),
        _ => None,
    };
    if matches!((&room, &waits), (Room::Free { .. }, Some(_))) {
        // Room on the runner, none on this machine: the reservation goes back.
        release(daemon, &checked.runner, &id, &checked.node).await;
    }
    // Said before the run exists: the engine may look at its pending node at once.
    if let Some(what) = &waits {
        daemon.engine.wait_for(&id, &checked.node, what.clone());
    }
    // A test-only pause here widens the window in which the engine sees the wait but not
    // the run (tests/tests/admission.rs).
    if crate::failpoint::fires("spawn:slow-create") {
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    }
    // Written before the worktree and window exist; synced while they are made.
    let begun = daemon
        .store
        .begin_run(NewRun {
            initial: vec![Draft::daemon(
                Some(&checked.node),
                NodeAdded {
                    agent: Some(checked.profile.name.clone()),
                    task: Some(req.task.clone()),
                    gate: req.gate.clone(),
                    runner: Some(checked.runner.clone()),
                    permissions: Some(req.permissions.clone()).filter(|r| !r.is_empty()),
                    ..NodeAdded::default()
                },
            )]
            .into_iter()
            .chain(intent)
            .collect(),
            id: id.clone(),
            created,
            files: Vec::new(),
        })
        .await;
    drop(starts);
    let (handle, syncing) = match begun {
        Ok(b) => b,
        Err(e) => {
            daemon.engine.wait_over(&id, &checked.node);
            if waits.is_none() {
                release(daemon, &checked.runner, &id, &checked.node).await;
            }
            return Err(e);
        }
    };
    if waits.is_some() {
        syncing.wait().await?;
        // The engine looks at the waiting node now that its run exists: a wake-up pass that
        // ran in between may have found no run and let the wait go, which would strand it.
        daemon.store.notify(&handle.id);
        return Ok(handle);
    }
    let t_create = t0.elapsed();
    // The node is being started: the engine must not take it for a start a crash cut short.
    let slot = super::Engine::claim(daemon, &handle.id, super::StepKey::node(&checked.node));
    let started = start_node(
        daemon,
        &handle,
        &checked.node,
        &checked.repo,
        &checked.base,
        &checked.launch,
        slot,
    )
    .await;
    let synced = syncing.wait().await;
    started?;
    synced?;
    tracing::debug!(run = %handle.id, created_ms = t_create.as_secs_f64() * 1e3, started_ms = t0.elapsed().as_secs_f64() * 1e3, "spawned");
    Ok(handle)
}

/// `node.starting`: the intent, recorded before the branch and worktree exist, with the
/// agent's conversation (Claude Code's session id, and whether it is resumed) and the port
/// the node holds while it is live.
pub fn starting(
    run: &str,
    node: &str,
    worktrees: &Path,
    session: Option<&Session>,
    port: Option<u16>,
    place: Option<String>,
) -> Draft {
    let worktree = worktrees.join(run).join(node);
    Draft::daemon(
        Some(node),
        NodeStarting {
            branch: Some(branch_name(run, node)),
            worktree: Some(worktree.display().to_string()),
            session_id: session.map(|s| s.id.clone()),
            resume: session.and_then(|s| s.resume.then_some(true)),
            port: port.map(u64::from),
            place,
        },
    )
}

/// Room on the runner `name` for starting `node` of `run` (see `Runner::reserve`).
async fn reserve(
    daemon: &Arc<Daemon>,
    name: &str,
    run: &str,
    node: &str,
    attempt: u32,
) -> Result<Room, AppError> {
    let (d, name, run, node) = (
        daemon.clone(),
        name.to_string(),
        run.to_string(),
        node.to_string(),
    );
    blocking(move || d.runners.of(Some(&name))?.reserve(&run, &node, attempt)).await
}

/// Gives back the room [`reserve`] held (the start was not made).
async fn release(daemon: &Arc<Daemon>, name: &str, run: &str, node: &str) {
    let (d, name, run, node) = (
        daemon.clone(),
        name.to_string(),
        run.to_string(),
        node.to_string(),
    );
    let _ = blocking(move || {
        d.runners.of(Some(&name))?.release(&run, &node);
        Ok(())
    })
    .await;
}

/// Held from choosing a port and admitting a node ([`super::admission::check`]) until the
/// `node.starting` naming it is in the run's state: no two starts take the same port or room.
static STARTS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The lowest port of `range` that no live node of any run holds (`except`: the node being
/// started again). Every live node's port is in its run's state, read from the log, so the
/// choice survives restarts. Call with [`STARTS`] held.
fn free_port(
    daemon: &Daemon,
    range: bootstrap::PortRange,
    except: Option<(&str, &str)>,
) -> Result<u16, AppError> {
    range.free(&held_ports(daemon, except)).ok_or_else(|| {
        AppError::new(
            ErrorKind::InvalidTransition,
            format!(
                "no free port in worktree.ports {range}: all {} are held by live nodes",
                u32::from(range.last - range.first) + 1
            ),
        )
        .with_hint("wait for a node to end, or widen worktree.ports")
    })
}

/// The ports live nodes of every run hold (`except`: one node, not counted).
pub fn held_ports(
    daemon: &Daemon,
    except: Option<(&str, &str)>,
) -> std::collections::BTreeSet<u16> {
    use octl_proto::NodeState::{Running, Starting, Waiting};
    let mut taken = std::collections::BTreeSet::new();
    for h in daemon.store.handles() {
        for n in &h.view().nodes {
            let this = except.is_some_and(|(run, node)| h.id == run && n.id == node);
            if !this && matches!(n.state, Starting | Running | Waiting) {
                taken.extend(n.port);
            }
        }
    }
    taken
}

pub fn branch_name(run: &str, node: &str) -> String {
    format!("octl/{run}/{node}")
}

/// Writes the intent `node.starting` with where the node's runner starts it (room reserved
/// on it, the SSH host or Slurm job it goes to) and the port the node holds while live (the
/// lowest free one of `[worktree] ports`, if the bootstrap names a range), once this machine
/// has room for its agent ([`super::admission`]). A node whose runner has no room, that this
/// machine has no memory for, or that cannot get a port because live nodes hold them all,
/// waits, unchanged, as for the cap: the engine looks at its run again once what it waits for
/// frees ([`super::Engine::wait_for`]); one whose bootstrap is bad fails with the reason.
pub(super) async fn write_intent(
    daemon: &Arc<Daemon>,
    handle: &Arc<RunHandle>,
    node: &str,
    boot: Result<&Bootstrap, AppError>,
    session: Option<&Session>,
) -> Result<(), AppError> {
    let view = handle.view();
    let this = view.nodes.iter().find(|n| n.id == node);
    let runner = this
        .and_then(|n| n.runner.clone())
        .unwrap_or_else(|| crate::config::LOCAL_RUNNER.to_string());
    let attempt = this.map_or(0, |n| n.snapshot_refs.len() as u32);
    let place = match reserve(daemon, &runner, &handle.id, node, attempt).await {
        Ok(Room::Free { place }) => place,
        Ok(Room::Full(why)) => {
            let e = AppError::new(
                ErrorKind::InvalidTransition,
                format!("runner {runner} has no room now: {why}"),
            );
            daemon
                .engine
                .wait_for(&handle.id, node, super::Wait::Runner { runner, why });
            return Err(e);
        }
        Err(e) => {
            append(
                daemon,
                handle,
                Some(node),
                NodeFailed::because(format!("cannot start: {}", e.message)),
            )
            .await?;
            return Err(e);
        }
    };
    let starts = STARTS.lock().await;
    if let Some(n) = this {
        if let Err(why) = super::admission::check_node(daemon, &handle.id, n) {
            drop(starts);
            release(daemon, &runner, &handle.id, node).await;
            let e = no_room(&why);
            daemon
                .engine
                .wait_for(&handle.id, node, super::Wait::Room(why));
            return Err(e);
        }
    }
    let port = match boot {
        Ok(Bootstrap {
            ports: Some(range), ..
        }) => match free_port(daemon, *range, Some((&handle.id, node))) {
            Ok(p) => Ok(Some(p)),
            Err(e) => {
                drop(starts);
                release(daemon, &runner, &handle.id, node).await;
                daemon
                    .engine
                    .wait_for(&handle.id, node, super::Wait::Port(*range));
                return Err(e);
            }
        },
        Ok(_) => Ok(None),
        Err(e) => Err(e),
    };
    let port = match port {
        Ok(p) => p,
        Err(e) => {
            drop(starts);
            release(daemon, &runner, &handle.id, node).await;
            append(
                daemon,
                handle,
                Some(node),
                NodeFailed::because(format!("cannot start: {}", e.message)),
            )
            .await?;
            return Err(e);
        }
    };
    let intent = starting(
        &handle.id,
        node,
        &daemon.home.worktrees(),
        session,
        port,
        place,
    );
    if let Err(e) = daemon.store.append(handle, intent, false).await {
        drop(starts);
        release(daemon, &runner, &handle.id, node).await;
        return Err(e);
    }
    daemon.engine.wait_over(&handle.id, node);
    Ok(())
}

/// The error of a start turned away for want of room (the node waits; nothing failed).
fn no_room(why: &super::decide::room::Shortfall) -> AppError {
    AppError::new(
        ErrorKind::InvalidTransition,
        format!("no room to start: waiting for {why}"),
    )
    .with_hint("it starts by itself once there is room; see [limits] in docs/CONFIGURATION.md")
}

/// Starts the agent of an added node: `node.starting` (the intent), the branch and worktree
/// from `start_point`, the tmux window, then `node.started`. A failed step fails the node.
pub async fn start_node(
    daemon: &Arc<Daemon>,
    handle: &Arc<RunHandle>,
    node: &str,
    repo: &Path,
    start_point: &str,
    launch: &Launch,
    slot: Option<super::Slot>,
) -> Result<(), AppError> {
    let view = handle.view();
    let planned = view
        .nodes
        .iter()
        .any(|n| n.id == node && n.state == octl_proto::NodeState::Starting);
    // A node sent back by a review goes on in its worktree and branch, whatever its agent.
    let continues = view.nodes.iter().any(|n| n.id == node && n.resume);
    let boot = daemon
        .config
        .get()
        .and_then(|c| Bootstrap::resolve(&c, repo));
    if !planned {
        write_intent(
            daemon,
            handle,
            node,
            boot.as_ref().map_err(Clone::clone),
            launch.session.as_ref(),
        )
        .await?;
    }
    failpoint("spawn:after-starting");
    // A resumed conversation goes on in the worktree and branch its attempt left.
    let resume = continues || launch.session.as_ref().is_some_and(|s| s.resume);
    // A remote start is a push and a submission or a window over the network: the next node
    // of a fan-out or plan does not wait for it (starts go at once, bounded per runner).
    let view = handle.view();
    let remote = view.nodes.iter().any(|n| {
        n.id == node
            && n.runner
                .as_deref()
                .is_some_and(|r| r != crate::config::LOCAL_RUNNER)
    });
    let scheduled = super::decide::scheduled(&view);
    if boot.is_ok_and(|b| b.setup.is_some()) || (remote && scheduled) {
        // A setup command may take minutes: the caller (a spawn's answer, the next node of a
        // fan-out) does not wait for it; the node is `starting` until it ends, then `running`,
        // or `failed` with the reason. The slot goes with it.
        let (d, h, n, r, p, l) = (
            daemon.clone(),
            handle.clone(),
            node.to_string(),
            repo.to_path_buf(),
            start_point.to_string(),
            launch.clone(),
        );
        tokio::spawn(async move {
            let _ = bring_up(&d, &h, &n, &r, &p, &l, resume).await;
            drop(slot);
        });
        return Ok(());
    }
    let started = bring_up(daemon, handle, node, repo, start_point, launch, resume).await;
    drop(slot);
    started
}

/// The side effects of starting a node, then `node.started`. Safe to repeat after a crash
/// (`healing`): a live window of the node is adopted, an existing branch or worktree reused.
pub async fn bring_up(
    daemon: &Arc<Daemon>,
    handle: &Arc<RunHandle>,
    node: &str,
    repo: &Path,
    start_point: &str,
    launch: &Launch,
    healing: bool,
) -> Result<(), AppError> {
    let branch = branch_name(&handle.id, node);
    let worktree = daemon.home.worktrees().join(&handle.id).join(node);
    let runner_of = handle
        .view()
        .nodes
        .iter()
        .find(|n| n.id == node)
        .and_then(|n| n.runner.clone())
        .filter(|r| r != crate::config::LOCAL_RUNNER);
    // Starts under way on one remote runner are bounded.
    let _permit = match &runner_of {
        Some(r) => daemon.engine.start_permits(r).acquire_owned().await.ok(),
        None => None,
    };
    let started = {
        let (d, h, n, repo, start_point, launch) = (
            daemon.clone(),
            handle.clone(),
            node.to_string(),
            repo.to_path_buf(),
            start_point.to_string(),
            launch.clone(),
        );
        let (branch, worktree) = (branch.clone(), worktree.clone());
        blocking(move || {
            let t0 = std::time::Instant::now();
            let git = Git::new(&repo);
            if healing {
                let registered = git.worktree_list()?.iter().any(|w| w.path == worktree && !w.prunable);
                if crate::pool::unfinished_take(&git, &worktree, &branch, registered) {
                    // A pool entry was taken (renamed here) but not made the node's yet.
                    let tip = git.resolve_commit(&start_point)?;
                    crate::pool::finish(&repo, &worktree, &branch, &tip)?;
                } else if !registered {
                    if git.branch_exists(&branch)? {
                        git.worktree_prune()?;
                        git.worktree_add_existing(&worktree, &branch)?;
                    } else {
                        check_out(&git, (&h.id, &n), &worktree, &branch, &start_point)?;
                    }
                }
                // The agent a start cut short left (found by its name where the start went)
                // is adopted, not started again. Its place not answering: the start waits.
                match find_agent(&d, &h, &n, &worktree, &launch) {
                    Ok(Some(found)) => {
                        tracing::info!(run = %h.id, node = %n, pane = %found.0, "adopted the agent of a half-started node");
                        return Ok(Some(found));
                    }
                    Ok(None) => {}
                    Err(e) => {
                        tracing::warn!(run = %h.id, node = %n, error = %e.message, "the place of a half-started node does not answer; its start waits");
                        let runner = runner_name(&h, &n);
                        d.engine.wait_for(&h.id, &n, super::Wait::Runner { runner, why: e.message });
                        return Ok(None);
                    }
                }
            } else if !crate::pool::take(&d.home, &d.config, &repo, &worktree, &branch, &start_point) {
                check_out(&git, (&h.id, &n), &worktree, &branch, &start_point)?;
                crate::pool::note_checkout(&d.home, &d.config, &repo, &worktree);
            }
            prepare(&d, &h, &n, &repo, &worktree)?;
            let t_worktree = t0.elapsed();
            let window = open_window(&d, &h, &n, &worktree, &launch);
            tracing::debug!(run = %h.id, node = %n, worktree_ms = t_worktree.as_secs_f64() * 1e3, window_ms = (t0.elapsed() - t_worktree).as_secs_f64() * 1e3, "side effects");
            window.map(Some)
        })
        .await
    };
    // The agent runs; a crash here leaves `starting` with an agent to adopt.
    failpoint("spawn:after-agent");
    match started {
        // Waits for its runner's place (the engine looks again once it answers).
        Ok(None) => Ok(()),
        Ok(Some((pane, pid))) => {
            if launch.answers_trust {
                let d = daemon.clone();
                let named = runner_of.clone();
                if let Ok(r) = blocking(move || d.runners.of(named.as_deref())).await {
                    super::trust::answer(r, AgentHandle::new(pane.clone()));
                }
            }
            let confirmed = append(
                daemon,
                handle,
                Some(node),
                NodeStarted {
                    pane: Some(pane.clone()),
                    pid: Some(pid),
                    on_exit: Some(launch.on_exit.as_str().to_string()),
                    report_on_exit: Some(launch.hold_reports),
                },
            )
            .await;
            if confirmed.is_err() {
                // The node moved on meanwhile (a cancel won): no agent runs for it.
                super::close_window(daemon, &handle.id, node, Some(&pane)).await;
            }
            // The next spawn in a pooled repository finds a worktree ready.
            crate::pool::refill(daemon, repo, start_point);
            confirmed.map(|_| ())
        }
        // A remote runner found no room after all: the node waits, starting, and its start
        // is made again (as after a crash: what it may have left is looked for first) once
        // the runner has room.
        Err(e) if e.kind == ErrorKind::Timeout && runner_of.is_some() => {
            tracing::warn!(run = %handle.id, node, error = %e.message, "no room for the agent after all; its start waits");
            daemon.engine.wait_for(
                &handle.id,
                node,
                super::Wait::Runner {
                    runner: runner_of.clone().unwrap_or_default(),
                    why: e.message,
                },
            );
            Ok(())
        }
        Err(e) => {
            tracing::error!(run = %handle.id, node, error = %e.message, "could not start the agent");
            let _ = append(
                daemon,
                handle,
                Some(node),
                NodeFailed {
                    reason: Some(format!("could not start the agent: {}", e.message)),
                    ..NodeFailed::default()
                },
            )
            .await;
            let kind = match e.kind {
                // A full or failing disk is said as such (exit 7, with what to free).
                k @ (ErrorKind::ToolMissing | ErrorKind::StorageFull | ErrorKind::IoError) => k,
                _ => ErrorKind::ToolFailed,
            };
            let mut err = AppError::new(kind, e.message);
            err.hint = e.hint;
            Err(err)
        }
    }
}

/// Less free space than this left by a checkout is a full filesystem: the agent could write
/// nothing there (and on a tmpfs git cannot even read back a file it wrote sparse).
const CHECKOUT_MIN_FREE: u64 = 1 << 20;

/// `git worktree add -b` of a node's new branch, verified. git may exit 0 from a checkout its
/// disk could not hold: on a full tmpfs it writes a file sparse that nothing can map afterwards
/// (the next git to read it is killed by SIGBUS). So the new worktree must leave
/// [`CHECKOUT_MIN_FREE`] and its files must read back against its index (`git diff --quiet`;
/// files that merely differ, as line-ending rules can make them, are no failure). A checkout
/// that fails either is removed again (nothing was done in it, and its branch stays at the
/// start point, so no work is lost) and the start fails: `storage_full`, with what to free,
/// when its filesystem is full or has not the room the checkout needs.
fn check_out(
    git: &Git,
    (run, node): (&str, &str),
    worktree: &Path,
    branch: &str,
    start_point: &str,
) -> Result<(), AppError> {
    use crate::store::fault::{free_space, mib};
    let full = |room: Option<(u64, u64)>| room.is_some_and(|(free, _)| free < CHECKOUT_MIN_FREE);
    let (what, storage, err) = match git.worktree_add(worktree, branch, start_point) {
        Err(e) => {
            let said = e.to_string();
            let write = [
                "unable to write",
                "No space left",
                "Disk quota",
                "write error",
            ]
            .iter()
            .any(|w| said.contains(w));
            // Said by git of a checkout the filesystem had not the room for.
            let lacks_room = match (git.tree_size(start_point), free_space(worktree)) {
                (Ok(needed), Some((free, _))) => needed > free || free < CHECKOUT_MIN_FREE,
                _ => false,
            };
            let storage = (write || e.signal() == Some(libc::SIGBUS)) && lacks_room;
            (said, storage, Some(AppError::from(e)))
        }
        Ok(()) => {
            let room = free_space(worktree);
            let what = match Git::new(worktree).checkout_matches_index() {
                Ok(_) if !full(room) => return Ok(()),
                Ok(_) => format!(
                    "the checkout left its filesystem full ({} free)",
                    mib(room.map_or(0, |(free, _)| free))
                ),
                Err(e) => format!("git exited 0, but the files it wrote cannot be read back: {e}"),
            };
            let storage = full(room) || what.contains("SIGBUS");
            // Nothing was done in it yet: it goes, so no half-made worktree is taken for work.
            if let Err(e) = git.worktree_remove_pristine(worktree) {
                tracing::warn!(worktree = %worktree.display(), error = %e, "could not remove an incomplete checkout");
            }
            (what, storage, None)
        }
    };
    if storage {
        let room = match free_space(worktree) {
            Some((free, total)) => format!("{} free of {}", mib(free), mib(total)),
            None => "free space unknown".to_string(),
        };
        let needs = git
            .tree_size(start_point)
            .map(|n| format!("its files take {}; ", mib(n)))
            .unwrap_or_default();
        return Err(AppError::new(
            ErrorKind::StorageFull,
            format!(
                "could not check out {branch} in {}: {what}; {needs}the filesystem has {room}",
                worktree.display()
            ),
        )
        .with_hint(format!(
            "the filesystem of {} is full: free space (`orchestratectl run gc` removes what ended runs left behind, after snapshotting it), then `orchestratectl run retry {run} --node {node}`",
            worktree.display()
        )));
    }
    Err(err.unwrap_or_else(|| {
        AppError::new(
            ErrorKind::ToolFailed,
            format!(
                "could not check out {branch} in {}: {what}",
                worktree.display()
            ),
        )
    }))
}

/// The worktree made ready before its agent starts ([`crate::bootstrap`]): the included
/// ignored files, the links, then the setup command, its output in the node's log. Done again
/// when healing: what the worktree already has is left as it is.
fn prepare(
    daemon: &Daemon,
    handle: &RunHandle,
    node: &str,
    repo: &Path,
    worktree: &Path,
) -> Result<(), AppError> {
    let boot = Bootstrap::resolve(&*daemon.config.get()?, repo)?;
    let copied = boot.prepare(repo, worktree)?;
    if copied > 0 {
        tracing::info!(run = %handle.id, node, copied, "copied the files .worktreeinclude names");
    }
    if let Some(setup) = &boot.setup {
        let log = handle.dir.join("logs").join(format!("{node}.log"));
        let env = agent_env(daemon, handle, node, worktree);
        // A cancel (or anything else that moved the node on) stops it.
        let abandoned = || {
            !handle
                .view()
                .nodes
                .iter()
                .any(|n| n.id == node && n.state == octl_proto::NodeState::Starting)
        };
        bootstrap::run_setup(setup, worktree, &env, &log, boot.setup_timeout, &abandoned)?;
    }
    Ok(())
}

/// What an agent (and its worktree's setup command) finds in its environment.
fn agent_env(
    daemon: &Daemon,
    handle: &RunHandle,
    node: &str,
    worktree: &Path,
) -> Vec<(String, String)> {
    let exe = std::env::current_exe().ok();
    // orchestratectl is installed next to octld; agents call it.
    let mut path = exe
        .as_deref()
        .and_then(Path::parent)
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    if let Some(p) = std::env::var_os("PATH") {
        path.push(':');
        path.push_str(&p.to_string_lossy());
    }
    agents::helpers::prepend(&mut path, daemon, &handle.view(), node);
    let mut env = vec![
        (
            "OCTL_HOME".to_string(),
            daemon.home.root().display().to_string(),
        ),
        ("OCTL_RUN".to_string(), handle.id.clone()),
        ("OCTL_NODE".to_string(), node.to_string()),
        ("OCTL_WORKTREE".to_string(), worktree.display().to_string()),
        ("PATH".to_string(), path),
    ];
    // For agents whose shell tool runs a login shell, which resets PATH (Codex).
    if let Some(exe) = &exe {
        env.push((
            "OCTL_CLI".to_string(),
            exe.with_file_name("orchestratectl").display().to_string(),
        ));
    }
    let view = handle.view();
    if let Some(port) = view
        .nodes
        .iter()
        .find(|n| n.id == node)
        .and_then(|n| n.port)
    {
        env.push(("OCTL_PORT".to_string(), port.to_string()));
    }
    // A node sent back by a review reads it whole there (written from the log).
    if let Some((n, r)) = view
        .nodes
        .iter()
        .find(|n| n.id == node)
        .and_then(|n| Some((n, agents::review::due(n)?)))
    {
        match agents::review::write(&handle.dir, &n.id, r) {
            Ok(path) => env.push(("OCTL_REVIEW_FILE".to_string(), path.display().to_string())),
            Err(e) => tracing::warn!(run = %handle.id, node, error = %e, "writing the review file"),
        }
    }
    // Every fan-out child can read the manifest it is a unit of.
    if let Some(file) = &view.manifest.settings.manifest_file {
        env.push((
            "OCTL_MANIFEST".to_string(),
            handle.dir.join(file).display().to_string(),
        ));
    }
    env
}

/// The runner a node's `node.added` names (`local` if none).
fn runner_name(handle: &RunHandle, node: &str) -> String {
    handle
        .view()
        .nodes
        .iter()
        .find(|n| n.id == node)
        .and_then(|n| n.runner.clone())
        .unwrap_or_else(|| crate::config::LOCAL_RUNNER.to_string())
}

/// The tmux window of a node: the agent's argv with the octl environment, its output kept.
fn open_window(
    daemon: &Arc<Daemon>,
    handle: &RunHandle,
    node: &str,
    worktree: &Path,
    launch: &Launch,
) -> Result<(String, u32), AppError> {
    with_spec(daemon, handle, node, worktree, launch, |runner, spec| {
        let started = runner.start(spec)?;
        Ok((started.handle.into_string(), started.pid))
    })
}

/// The agent a start cut short by a crash left behind, asked of the node's runner (see
/// `Runner::find`).
fn find_agent(
    daemon: &Arc<Daemon>,
    handle: &RunHandle,
    node: &str,
    worktree: &Path,
    launch: &Launch,
) -> Result<Option<(String, u32)>, AppError> {
    with_spec(daemon, handle, node, worktree, launch, |runner, spec| {
        Ok(runner.find(spec)?.map(|s| (s.handle.into_string(), s.pid)))
    })
}

/// The sandbox a node's agent runs in: its own (a plan node's `sandbox`), else its run's
/// (`--sandbox`), else its profile's, else config.toml's `[sandbox] kind`.
pub fn sandbox_kind(
    config: &crate::config::Config,
    settings: &octl_proto::event::settings::RunSettings,
    node: Option<&octl_proto::state::Node>,
) -> octl_proto::sandbox::SandboxKind {
    let profile = node
        .and_then(|n| n.agent.as_deref())
        .or(settings.agent.as_deref())
        .and_then(|p| config.agents.get(p))
        .and_then(|a| a.sandbox.as_deref())
        .and_then(|k| octl_proto::sandbox::SandboxKind::parse("sandbox", k).ok());
    let run = node.and_then(|n| n.sandbox).or(settings.sandbox);
    crate::sandbox::kind_of(run, profile, &config.sandbox)
}

/// `argv` as the node's sandbox runs it (as is without one). bwrap is this machine's: a
/// node on an SSH or Slurm runner is refused it rather than run unconfined.
fn sandboxed(
    daemon: &Arc<Daemon>,
    handle: &RunHandle,
    this: Option<&octl_proto::state::Node>,
    node: &str,
    worktree: &Path,
    env: &[(String, String)],
    argv: Vec<String>,
) -> Result<Vec<String>, AppError> {
    let config = daemon.config.get()?;
    let view = handle.view();
    if sandbox_kind(&config, &view.manifest.settings, this)
        == octl_proto::sandbox::SandboxKind::None
    {
        return Ok(argv);
    }
    if let Some(r) = this
        .and_then(|n| n.runner.as_deref())
        .filter(|r| *r != crate::config::LOCAL_RUNNER)
    {
        return Err(AppError::invalid(format!(
            "node {node} runs on runner {r}, and the bwrap sandbox is this machine's only"
        ))
        .with_hint("give --sandbox none for a node on an SSH or Slurm runner"));
    }
    crate::sandbox::wrap(
        daemon,
        &config.sandbox,
        &crate::sandbox::Node {
            run: &handle.id,
            node,
            worktree,
            branch: &branch_name(&handle.id, node),
            env,
            argv: &argv,
        },
    )
}

/// Calls `f` with the node's runner and the spec of its agent: the agent's argv with the
/// octl environment, its output kept, in its sandbox if it has one.
fn with_spec<T>(
    daemon: &Arc<Daemon>,
    handle: &RunHandle,
    node: &str,
    worktree: &Path,
    launch: &Launch,
    f: impl FnOnce(&dyn crate::runner::Runner, &AgentSpec<'_>) -> Result<T, AppError>,
) -> Result<T, AppError> {
    let logs = handle.dir.join("logs");
    let log = logs.join(format!("{node}.log"));
    let exe = std::env::current_exe()
        .map_err(|e| AppError::internal(format!("cannot find octld's own path: {e}")))?;
    let env = agent_env(daemon, handle, node, worktree);
    let view = handle.view();
    let this = view.nodes.iter().find(|n| n.id == node);
    // In its sandbox, if it has one; the wrapper below stays outside, with the node's log.
    let agent = sandboxed(
        daemon,
        handle,
        this,
        node,
        worktree,
        &env,
        launch.argv.clone(),
    )?;
    // A stream-json agent is wrapped: its raw lines go to the node's log, the pane shows a
    // readable rendering (kept in <node>.pane.log).
    let (argv, pane_log) = if launch.stream_json {
        let mut argv = vec![
            exe.display().to_string(),
            "agent-wrap".to_string(),
            "--raw-log".to_string(),
            log.display().to_string(),
            "--".to_string(),
        ];
        argv.extend(agent);
        (argv, logs.join(format!("{node}.pane.log")))
    } else {
        (agent, log)
    };
    let spec = AgentSpec {
        run: &handle.id,
        node,
        cwd: worktree,
        env: &env,
        argv: &argv,
        log: &pane_log,
        first: view.nodes.iter().all(|n| n.pane.is_none()),
        // Each retry's cleanup kept the attempt before it as a snapshot.
        attempt: this.map_or(0, |n| n.snapshot_refs.len() as u32),
        memory_max: daemon.config.get().ok().and_then(|c| {
            let profile = this.and_then(|n| n.agent.as_deref())?;
            super::admission::memory_max(&c, profile)
        }),
        // A fork bomb in a sandbox stops at its limit, not at the machine's.
        pids_max: daemon.config.get().ok().and_then(|c| {
            (sandbox_kind(&c, &view.manifest.settings, this)
                != octl_proto::sandbox::SandboxKind::None)
                .then_some(c.sandbox.pids_max)
        }),
        place: this.and_then(|n| n.place.as_deref()),
    };
    let runner = daemon.runners.of(this.and_then(|n| n.runner.as_deref()))?;
    f(&*runner, &spec)
}
