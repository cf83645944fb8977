//! A Slurm cluster as a runner (`kind = "slurm"`): one batch job per attempt, named
//! `octl.<run>.<node>.<attempt>`, running `slurm_shim.sh`, which clones the node's base from the
//! exchange repository, runs the agent and pushes its work back to the attempt's refs; the
//! daemon fetches the copy that finished ([`Runner::collect`](super::Runner::collect)).
//! The design, and what is not built yet, is docs/RUNNERS.md.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

mod cluster;
mod exchange;

pub use cluster::{check_cluster, cluster_cap};

use super::{AgentHandle, AgentSpec, AgentStatus, Observation, Requeue, Result, Started};
use crate::config::SlurmConfig;
use crate::git::Git;
use octl_proto::{AppError, ErrorKind};

/// How long a Slurm client command may take: a controller that does not answer makes them
/// wait out its `MessageTimeout`, which must not hold up the supervisor.
const COMMAND_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Runs a Slurm client command (`sinfo`, `squeue`, `sbatch`, `scancel`) within
/// [`COMMAND_TIMEOUT`]; its stdout.
pub fn slurm(program: &str, args: &[&str]) -> Result<String> {
    let mut cmd = Command::new(program);
    cmd.args(args);
    let out = super::ssh::bounded(cmd, None, COMMAND_TIMEOUT)
        .map_err(|e| {
            AppError::new(ErrorKind::ToolMissing, e.message).with_hint(
                "install Slurm's client commands (Debian: slurm-client) on the daemon's machine",
            )
        })?
        .ok_or_else(|| {
            AppError::new(
                ErrorKind::ToolFailed,
                format!(
                    "{program} did not answer within {} s (the Slurm controller does not answer?)",
                    COMMAND_TIMEOUT.as_secs()
                ),
            )
        })?;
    if !out.status.success() {
        return Err(AppError::new(
            ErrorKind::ToolFailed,
            format!(
                "{program} failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The job script: clone, resume, run the agent, push checkpoints (see its header).
const SHIM: &str = include_str!("../slurm_shim.sh");

/// The job script's exit code when a push of its result was refused.
const REFUSED: i32 = 92;

/// Seconds between an agent's checkpoints (`OCTL_SLURM_CHECKPOINT_S` overrides it, for tests).
const CHECKPOINT_S: u64 = 60;

/// Tries of the fetch of a finished job's work beyond the first (see `collect`).
const FETCH_TRIES: u64 = 8;

/// The attach step's script (`$1`: the job's tmux socket name, see slurm_shim.sh).
const ATTACH_STEP: &str = "unset TMUX TMUX_PANE; for _ in $(seq 300); do \
    tmux -L \"$1\" has-session -t agent 2>/dev/null && exec tmux -L \"$1\" attach-session -t agent; \
    sleep 0.1; done; echo \"octl: the job's agent did not start within 30 s\" >&2; exit 1";

/// Job names: `octl.<run>.<node>.<attempt>` (run ids and node names have no '.').
const JOB_PREFIX: &str = "octl.";

/// The one place of this runner ([`Runner::place_of`](super::Runner::place_of)): every job is
/// known through the controller.
const CONTROLLER: &str = "slurmctld";

/// How long `squeue` must have failed before the controller counts as unreachable (its
/// nodes `lost`); before that a failed look leaves every node as it is.
const UNREACHABLE_AFTER: std::time::Duration = std::time::Duration::from_secs(10);

/// The job name of an attempt.
fn job_name(run: &str, node: &str, attempt: u32) -> String {
    format!("{JOB_PREFIX}{run}.{node}.{attempt}")
}

/// [`Runner`](super::Runner) over a Slurm cluster: one batch job per attempt, observed by one
/// `squeue` per tick. Jobs are told apart from other daemons' by their comment (a tag of this
/// daemon's home).
#[derive(Debug)]
pub struct SlurmRunner {
    config: SlurmConfig,
    /// `$OCTL_HOME/exchange`: one bare repository per source repository.
    exchange: PathBuf,
    /// Marks this daemon's jobs (`--comment`).
    tag: String,
    seen: Mutex<Seen>,
    /// Held while an `octl-open` file changes.
    open_lock: Mutex<()>,
    /// Held while an exchange repository, its hook or the job script is made (starts go at
    /// once).
    make_lock: Mutex<()>,
}

/// A job as `squeue` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Job {
    id: String,
    name: String,
    state: String,
    comment: String,
    /// How often Slurm requeued it (the copy that runs now).
    restarts: u32,
    /// The node its batch script runs on; empty while pending.
    host: String,
    /// Why it waits, while pending (`Resources`, `Priority`, …).
    reason: String,
}

/// `squeue -O`: every field as it is (no width given: none is cut), each ending in '|'.
const SQUEUE_FIELDS: &str = "JobID:|,Name:|,State:|,Comment:|,RestartCnt:|,BatchHost:|,Reason:|";

/// The states of a job that waits in the queue (it holds nothing and its agent does not run).
fn queued(state: &str) -> bool {
    matches!(
        state,
        "PENDING" | "REQUEUED" | "REQUEUE_HOLD" | "REQUEUE_FED"
    )
}

/// What the runner remembers between looks, to say where a requeued job's lost copy ran.
#[derive(Debug, Default)]
struct Seen {
    /// Job id → the copy last seen running and its node.
    hosts: HashMap<String, (u32, String)>,
    /// Job id → its latest requeue, as first reported.
    requeues: HashMap<String, Requeue>,
    /// Ended jobs whose attempt was closed for pushes.
    closed: std::collections::HashSet<String>,
    /// Exit codes of ended jobs, asked of `scontrol` once each (ended jobs stay listed by
    /// `squeue` for `MinJobAge`, and their code does not change).
    exits: HashMap<String, Option<i32>>,
    /// `squeue` fails since then (also as a time of day), with its last error.
    failing: Option<(std::time::Instant, u64, String)>,
    /// Jobs the engine gave up on (`abandon`) to cancel once the controller answers.
    cancel: std::collections::HashSet<String>,
}

/// `slurm:<jobid>:<attempt>`, the handle the log keeps as the node's `pane`.
fn handle_of(job: &str, attempt: u32) -> AgentHandle {
    AgentHandle::new(format!("slurm:{job}:{attempt}"))
}

pub(crate) fn parse_handle(h: &AgentHandle) -> Option<(&str, u32)> {
    let rest = h.as_str().strip_prefix("slurm:")?;
    let (job, attempt) = rest.split_once(':')?;
    Some((job, attempt.parse().ok()?))
}

/// `(run, node, attempt)` of a job name of ours.
fn parse_name(name: &str) -> Option<(&str, &str, u32)> {
    let mut parts = name.strip_prefix(JOB_PREFIX)?.split('.');
    let (run, node, attempt) = (parts.next()?, parts.next()?, parts.next()?);
    Some((run, node, attempt.parse().ok()?))
}

pub use super::exchange::ref_prefix;

/// Alive, or how it ended: `None` alive, `Some(Some(code))`, `Some(None)` ended, code unknown.
fn ended(state: &str) -> Option<Option<i32>> {
    match state {
        "PENDING" | "CONFIGURING" | "RUNNING" | "COMPLETING" | "REQUEUED" | "REQUEUE_HOLD"
        | "REQUEUE_FED" | "RESIZING" | "SUSPENDED" | "STOPPED" | "SIGNALING" | "STAGE_OUT" => None,
        "COMPLETED" => Some(Some(0)),
        _ => Some(None),
    }
}

/// FNV-1a of the home's path: a short stable tag (Rust's own hasher may change between builds).
fn tag_of(home: &Path) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in home.as_os_str().as_encoded_bytes() {
        h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("octl:{h:016x}")
}

impl SlurmRunner {
    pub fn new(config: SlurmConfig, home: &Path) -> SlurmRunner {
        SlurmRunner {
            config,
            exchange: home.join("exchange"),
            tag: tag_of(home),
            seen: Mutex::default(),
            open_lock: Mutex::default(),
            make_lock: Mutex::default(),
        }
    }

    /// This daemon's jobs, ended ones included (they stay listed for `MinJobAge`).
    fn jobs(&self) -> Result<Vec<Job>> {
        let text = slurm("squeue", &["-h", "-t", "all", "-O", SQUEUE_FIELDS])?;
        Ok(text
            .lines()
            .filter_map(|l| {
                let mut f = l.split('|').map(str::trim);
                Some(Job {
                    id: f.next()?.to_string(),
                    name: f.next()?.to_string(),
                    state: f.next()?.to_string(),
                    comment: f.next()?.to_string(),
                    restarts: f.next()?.parse().unwrap_or(0),
                    host: f.next()?.to_string(),
                    reason: f.next().unwrap_or_default().to_string(),
                })
            })
            .filter(|j| j.comment == self.tag && j.name.starts_with(JOB_PREFIX))
            .collect())
    }

    /// [`SlurmRunner::jobs`] for the supervisor: a failure is remembered (since when, why), an
    /// answer clears it and cancels the jobs given up on that still run.
    fn look(&self) -> Result<Vec<Job>> {
        let jobs = self.jobs();
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        match &jobs {
            Ok(list) => {
                if seen.failing.take().is_some() {
                    tracing::info!("the Slurm controller answers again");
                }
                let cancel: Vec<String> = std::mem::take(&mut seen.cancel)
                    .into_iter()
                    .filter(|id| {
                        list.iter()
                            .any(|j| &j.id == id && ended(&j.state).is_none())
                    })
                    .collect();
                drop(seen);
                for id in cancel {
                    if let Err(e) = Self::cancel(&id) {
                        tracing::warn!(job = %id, error = %e.message, "cannot cancel a job given up on");
                        self.seen
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .cancel
                            .insert(id);
                    }
                }
            }
            Err(e) => {
                let now = (std::time::Instant::now(), crate::store::writer::now_ms());
                let since = seen.failing.as_ref().map_or(now, |f| (f.0, f.1));
                seen.failing = Some((since.0, since.1, e.message.clone()));
            }
        }
        jobs
    }

    /// Why the controller counts as unreachable now, if it does: `(since ms, reason)`.
    fn unreachable(&self) -> Option<(u64, String)> {
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let (t, since, why) = seen.failing.as_ref()?;
        (t.elapsed() >= UNREACHABLE_AFTER).then(|| {
            (
                *since,
                format!(
                    "the Slurm controller stopped answering {:.0} s ago (squeue: {why})",
                    t.elapsed().as_secs_f64()
                ),
            )
        })
    }

    /// The exit code of an ended job (`scontrol`'s `ExitCode=N:S`; a signal counts as 128+S).
    fn exit_code(id: &str) -> Option<i32> {
        let text = slurm("scontrol", &["-o", "show", "job", id]).ok()?;
        let field = text
            .split_whitespace()
            .find_map(|w| w.strip_prefix("ExitCode="))?;
        let (code, signal) = field.split_once(':')?;
        match (code.parse::<i32>().ok()?, signal.parse::<i32>().ok()?) {
            (0, s) if s > 0 => Some(128 + s),
            (c, _) => Some(c),
        }
    }

    /// The requeue of `job` to report, if Slurm restarted it: where the lost copy ran (as
    /// last seen running) and why (that node's state and reason in `sinfo`, asked once per
    /// requeue). Remembers where each job runs now for the next one.
    fn requeue_of(&self, job: &Job) -> Option<Requeue> {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let known = seen
            .requeues
            .get(&job.id)
            .filter(|r| r.copy == job.restarts);
        let requeue = match (job.restarts, known) {
            (0, _) => None,
            (_, Some(r)) => Some(r.clone()),
            (copy, None) => {
                let from = seen
                    .hosts
                    .get(&job.id)
                    .filter(|(c, _)| *c < copy)
                    .map(|(_, h)| h.clone());
                let why = from.as_deref().and_then(|h| {
                    let s = slurm("sinfo", &["-h", "-n", h, "-o", "%T|%E"]).ok()?;
                    let (state, reason) = s.lines().next()?.split_once('|')?;
                    Some(format!(" ({state}: {})", reason.trim()))
                });
                let r = Requeue {
                    copy,
                    reason: match &from {
                        Some(h) => format!(
                            "Slurm requeued job {} after losing its node {h}{}",
                            job.id,
                            why.unwrap_or_default()
                        ),
                        None => format!("Slurm requeued job {} (restart {copy})", job.id),
                    },
                    from,
                };
                seen.requeues.insert(job.id.clone(), r.clone());
                Some(r)
            }
        };
        if job.state == "RUNNING" && !job.host.is_empty() {
            seen.hosts
                .insert(job.id.clone(), (job.restarts, job.host.clone()));
        }
        requeue
    }

    /// [`SlurmRunner::exit_code`], asked once per ended job.
    fn exit_code_of(&self, id: &str) -> Option<i32> {
        if let Some(code) = self
            .seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .exits
            .get(id)
        {
            return *code;
        }
        let code = Self::exit_code(id);
        // An unknown code may be the controller's hiccup: asked again next time.
        if code.is_some() {
            let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
            seen.exits.insert(id.to_string(), code);
        }
        code
    }

    fn cancel(id: &str) -> Result<()> {
        slurm("scancel", &[id]).map(|_| ())
    }
}

impl super::Runner for SlurmRunner {
    fn check(&self) -> Result<()> {
        check_cluster(self.config.partition.as_deref()).map(|_| ())
    }

    fn start(&self, spec: &AgentSpec<'_>) -> Result<Started> {
        let exchange = self.exchange_of(spec.cwd)?;
        let exchange_s = exchange.display().to_string();
        let prefix = ref_prefix(spec.run, spec.node, spec.attempt);
        // The base goes to the exchange first: the job clones from there, never from here.
        let base = format!("refs/octl/base/{}/{}/{}", spec.run, spec.node, spec.attempt);
        let pushed = Command::new("git")
            .current_dir(spec.cwd)
            .env("OCTL_EXCHANGE_DAEMON", "1")
            .args([
                "push",
                "-q",
                "--force",
                &exchange_s,
                &format!("HEAD:{base}"),
            ])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| AppError::new(ErrorKind::ToolMissing, format!("cannot run git: {e}")))?;
        if !pushed.status.success() {
            return Err(AppError::new(
                ErrorKind::ToolFailed,
                format!(
                    "cannot push the base to {exchange_s}: {}",
                    String::from_utf8_lossy(&pushed.stderr).trim()
                ),
            ));
        }
        // Agents of this attempt may push from now on, until its job is seen ended.
        self.set_open(Some(&exchange), &prefix, true)?;
        let branch = Git::new(spec.cwd).plumbing(&["rev-parse", "--abbrev-ref", "HEAD"])?;
        // The job's output goes there from its first byte: a missing directory fails the launch.
        if let Some(dir) = spec.log.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| AppError::internal(format!("cannot create {}: {e}", dir.display())))?;
        }
        // Written once, whole (write, rename): another start's sbatch may be reading it. The
        // temporary name is this start's own (starts go in parallel: two in one millisecond
        // shared a name, and the second rename found the file gone).
        static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let script = self.exchange.join("slurm_shim.sh");
        if std::fs::read_to_string(&script).ok().as_deref() != Some(SHIM) {
            let tmp = self.exchange.join(format!(
                "slurm_shim.sh.{}.{}",
                std::process::id(),
                WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            ));
            std::fs::write(&tmp, SHIM)
                .and_then(|()| std::fs::rename(&tmp, &script))
                .map_err(|e| {
                    AppError::internal(format!("cannot write {}: {e}", script.display()))
                })?;
        }
        let every = std::env::var("OCTL_SLURM_CHECKPOINT_S")
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(CHECKPOINT_S)
            .to_string();
        let name = job_name(spec.run, spec.node, spec.attempt);
        let mut cmd = Command::new("sbatch");
        cmd.arg("--parsable")
            .arg(format!("--job-name={name}"))
            .arg(format!("--comment={}", self.tag))
            .arg(format!("--output={}", spec.log.display()))
            .arg("--open-mode=append")
            .arg("--requeue")
            .arg("--signal=B:USR1@120");
        if let Some(p) = &self.config.partition {
            cmd.arg(format!("--partition={p}"));
        }
        if let Some(a) = &self.config.account {
            cmd.arg(format!("--account={a}"));
        }
        cmd.args(&self.config.sbatch_args)
            .arg(&script)
            .args([&exchange_s, &base, &prefix, branch.trim(), &every, "--"])
            .args(spec.argv)
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .env("OCTL_JOB_LOG", spec.log)
            .stdin(Stdio::null());
        let out = cmd.output().map_err(|e| {
            AppError::new(ErrorKind::ToolMissing, format!("cannot run sbatch: {e}"))
        })?;
        if !out.status.success() {
            return Err(AppError::new(
                ErrorKind::ToolFailed,
                format!(
                    "sbatch refused the job: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
            ));
        }
        let id = String::from_utf8_lossy(&out.stdout);
        let id = id.trim().split(';').next().unwrap_or_default().to_string();
        Ok(Started {
            handle: handle_of(&id, spec.attempt),
            // No process of this machine: the job is the cluster's.
            pid: 0,
        })
    }

    fn observe(&self) -> Result<Observation> {
        let jobs = match self.look() {
            Ok(j) => j,
            Err(e) => {
                return match self.unreachable() {
                    Some((since_ms, reason)) => Ok(Observation {
                        unreachable: vec![super::Unreachable {
                            place: CONTROLLER.to_string(),
                            since_ms,
                            reason,
                        }],
                        ..Observation::default()
                    }),
                    // A failure or two: every node stays as it is.
                    None => Err(e),
                };
            }
        };
        // An attempt takes pushes until no job of it is alive (a second job of one attempt,
        // as a crash used to leave, must not close it for the first).
        let alive: std::collections::HashSet<&str> = jobs
            .iter()
            .filter(|j| ended(&j.state).is_none())
            .map(|j| j.name.as_str())
            .collect();
        let mut agents = Vec::new();
        for job in &jobs {
            let Some((run, node, attempt)) = parse_name(&job.name) else {
                continue;
            };
            let end = ended(&job.state);
            if end.is_some() && !alive.contains(job.name.as_str()) {
                self.close(&job.id, &ref_prefix(run, node, attempt));
            }
            let exit_status = match end {
                Some(Some(code)) => Some(code),
                Some(None) => self.exit_code_of(&job.id),
                None => None,
            };
            agents.push(AgentStatus {
                run: run.to_string(),
                node: node.to_string(),
                handle: handle_of(&job.id, attempt),
                pid: None,
                alive: end.is_none(),
                exit_status,
                exit_signal: None,
                requeue: self.requeue_of(job),
                // An ended job that never had a batch host never ran.
                queued: (queued(&job.state) || (end.is_some() && job.host.is_empty()))
                    .then(|| job.reason.clone()),
            });
        }
        Ok(Observation {
            agents,
            ..Observation::default()
        })
    }

    fn owned(&self) -> Result<Vec<AgentStatus>> {
        // Only the live ones: an ended job is no place the daemon keeps anything.
        Ok(self
            .observe()?
            .agents
            .into_iter()
            .filter(|a| a.alive)
            .collect())
    }

    fn place_of(&self, _handle: &AgentHandle) -> Option<String> {
        Some(CONTROLLER.to_string())
    }

    fn reachable(&self, _handle: &AgentHandle) -> bool {
        self.seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .failing
            .is_none()
    }

    fn reserve(&self, run: &str, node: &str, attempt: u32) -> Result<super::Room> {
        // Pending jobs hold nothing: the cluster's queue is the room, as long as it answers.
        Ok(match self.unreachable() {
            Some((_, why)) => super::Room::Full(why),
            None => super::Room::Free {
                place: Some(job_name(run, node, attempt)),
            },
        })
    }

    fn has_room(&self) -> bool {
        let failing = self
            .seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .failing
            .is_some();
        !failing || self.look().is_ok()
    }

    fn find(&self, spec: &AgentSpec<'_>) -> Result<Option<Started>> {
        // By name: a controller restarted with a clean state numbers jobs from 1 again. A job
        // that ended meanwhile is adopted too: its end is judged like any other.
        let name = job_name(spec.run, spec.node, spec.attempt);
        let mut jobs: Vec<Job> = self
            .jobs()?
            .into_iter()
            .filter(|j| j.name == name)
            .collect();
        jobs.sort_by_key(|j| (ended(&j.state).is_none(), j.id.parse::<u64>().unwrap_or(0)));
        Ok(jobs.pop().map(|j| Started {
            handle: handle_of(&j.id, spec.attempt),
            pid: 0,
        }))
    }

    fn abandon(&self, run: &str, node: &str, handle: &AgentHandle) -> Result<()> {
        let Some((id, attempt)) = parse_handle(handle) else {
            return Ok(());
        };
        // No push of it is taken any more; the job is cancelled once the controller answers.
        self.close(id, &ref_prefix(run, node, attempt));
        self.seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .cancel
            .insert(id.to_string());
        Ok(())
    }

    fn stop(&self, run: &str, node: &str, handle: &AgentHandle) -> Result<bool> {
        let Some((id, _)) = parse_handle(handle) else {
            return Ok(false);
        };
        let job = self.jobs()?.into_iter().find(|j| j.id == id);
        match job {
            Some(j)
                if ended(&j.state).is_none()
                    && parse_name(&j.name).is_some_and(|(r, n, _)| r == run && n == node) =>
            {
                Self::cancel(&j.id)?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    fn stop_run(&self, run: &str) -> Result<bool> {
        let mut any = false;
        for j in self.jobs()? {
            if ended(&j.state).is_none() && parse_name(&j.name).is_some_and(|(r, _, _)| r == run) {
                Self::cancel(&j.id)?;
                any = true;
            }
        }
        Ok(any)
    }

    fn attach(&self, run: &str, node: &str, handle: &AgentHandle) -> Result<Vec<String>> {
        let refused = |why: String| Err(AppError::new(ErrorKind::InvalidTransition, why));
        let Some((id, _)) = parse_handle(handle) else {
            return refused(format!("node {node} of run {run} has no Slurm job"));
        };
        let job = self.jobs()?.into_iter().find(|j| {
            j.id == id && parse_name(&j.name).is_some_and(|(r, n, _)| r == run && n == node)
        });
        match job {
            // The agent's tmux inside the job (slurm_shim.sh), reached by a step that shares
            // the job's resources. A job just RUNNING may still be cloning: the step waits
            // (up to 30 s) for the agent's session. $TMUX is the user's terminal's, not this.
            Some(j) if j.state == "RUNNING" => Ok([
                "srun",
                &format!("--jobid={id}"),
                "--overlap",
                "--pty",
                "--quiet",
                "/bin/sh",
                "-c",
                ATTACH_STEP,
                "octl-attach",
                &format!("octl-{id}"),
            ]
            .map(str::to_string)
            .to_vec()),
            Some(j) => refused(format!(
                "the Slurm job {id} of node {node} is {}: only a running job's agent can be attached to",
                j.state
            )),
            None => refused(format!(
                "the Slurm job {id} of node {node} has ended: its agent is gone (see `orchestratectl run logs {run} --node {node}`)"
            )),
        }
    }

    fn collect(&self, run: &str, node: &str, handle: &AgentHandle, worktree: &Path) -> Result<()> {
        let Some((_, attempt)) = parse_handle(handle) else {
            return Ok(());
        };
        let exchange = self.exchange_of(worktree)?.display().to_string();
        let prefix = ref_prefix(run, node, attempt);
        let git = Git::new(exchange.as_str());
        // The copy that finished is the newest: Slurm ends a job only as its latest restart.
        let listed =
            git.plumbing(&["for-each-ref", "--format=%(refname)", &format!("{prefix}/")])?;
        let newest = listed
            .lines()
            .filter_map(|r| r.strip_prefix(&format!("{prefix}/"))?.split_once('/'))
            .filter_map(|(copy, _)| copy.parse::<u32>().ok())
            .max();
        let refused = std::fs::read_to_string(
            Path::new(&exchange)
                .join("octl-refused")
                .join(format!("{run}.{node}.{attempt}")),
        )
        .ok()
        .and_then(|t| t.lines().last().map(str::to_string))
        .or_else(|| {
            // The shim's own word for a push git refused (another copy moved the ref: its
            // lease failed), when the hook recorded none.
            let (id, _) = parse_handle(handle)?;
            // Asked of `scontrol` already when the job was seen failed.
            let code = self
                .seen
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .exits
                .get(id)
                .copied()
                .flatten();
            (code == Some(REFUSED)).then(|| {
                format!(
                    "the cluster refused the agent's push (job {id} exited {REFUSED}: another copy of attempt {attempt} pushed first; see the node's log)"
                )
            })
        });
        let Some(copy) = newest else {
            return Err(AppError::new(
                ErrorKind::ToolFailed,
                refused.unwrap_or_else(|| {
                    format!("the job pushed nothing to {prefix} (see the node's log)")
                }),
            ));
        };
        let wt = Git::new(worktree);
        let head = format!("{prefix}/{copy}/head");
        let wip = format!("{prefix}/{copy}/wip");
        // What this copy pushed, as listed: a fetch that fails is an error, never taken for a
        // copy that pushed no `wip` (so retried, its uncommitted work is not dropped).
        let mut fetch = vec!["fetch", "-q", "--no-tags", exchange.as_str()];
        let specs: Vec<String> = [&head, &wip]
            .into_iter()
            .filter(|r| listed.lines().any(|l| l == r.as_str()))
            .map(|r| format!("+{r}:{r}"))
            .collect();
        fetch.extend(specs.iter().map(String::as_str));
        // git fails a fetch while another worktree of the repository is half made ("failed to
        // read …/worktrees/<name>/commondir": a parallel start's `git worktree add`): such a
        // failure passes once that add is done, so the fetch is made again a few times.
        let mut tries = 0;
        loop {
            match wt.plumbing(&fetch) {
                Ok(_) => break,
                Err(e) if tries < FETCH_TRIES => {
                    tries += 1;
                    tracing::debug!(run, node, tries, error = %e, "fetching a job's work again");
                    std::thread::sleep(std::time::Duration::from_millis(50 * tries));
                }
                Err(e) => return Err(e.into()),
            }
        }
        // The branch moves to what the agent committed; what it left uncommitted comes back
        // as changes in the worktree, as a local agent's would be.
        super::exchange::apply(worktree, &head, &wip)?;
        // What came back is in the worktree; a push the exchange refused fails the node with
        // git's (the hook's) message.
        if let Some(why) = refused {
            return Err(AppError::new(
                ErrorKind::ToolFailed,
                format!("{why} (what it pushed before is in the node's branch and worktree)"),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_names_and_handles_read_back() {
        assert_eq!(parse_name("octl.R1.api.2"), Some(("R1", "api", 2)));
        assert_eq!(parse_name("other.R1.api.2"), None);
        let h = handle_of("17", 3);
        assert_eq!(parse_handle(&h), Some(("17", 3)));
    }
}
