//! A Slurm cluster as a runner (`kind = "slurm"`): one batch job per attempt, named
//! `octl.<run>.<node>.<attempt>`, running `slurm_shim.sh`, which clones the node's base from the
//! exchange repository, runs the agent and pushes its work back to the attempt's refs; the
//! daemon fetches the copy that finished ([`Runner::collect`](super::Runner::collect)).
//! The design, and what is not built yet, is docs/RUNNERS.md.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::{AgentHandle, AgentSpec, AgentStatus, Observation, Result, Started};
use crate::config::RunnerConfig;
use crate::git::Git;
use octl_proto::{AppError, ErrorKind};

/// Runs a Slurm client command (`sinfo`, `squeue`, `sbatch`, `scancel`); its stdout.
pub fn slurm(program: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            AppError::new(ErrorKind::ToolMissing, format!("cannot run {program}: {e}")).with_hint(
                "install Slurm's client commands (Debian: slurm-client) on the daemon's machine",
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

/// `sinfo` answers, and knows `partition` (or has a default one). Ok: its nodes by state.
pub fn check_cluster(partition: Option<&str>) -> Result<String> {
    // One line per partition: name (the default one ends in '*'), availability, and nodes
    // allocated/idle/other/total.
    let text = slurm("sinfo", &["-h", "-s", "-o", "%P|%a|%F"])?;
    let parts: Vec<(&str, &str, &str)> = text
        .lines()
        .filter_map(|l| {
            let mut f = l.trim().split('|');
            Some((f.next()?, f.next()?, f.next()?))
        })
        .collect();
    let found = parts.iter().find(|(name, _, _)| match partition {
        Some(p) => name.trim_end_matches('*') == p,
        None => name.ends_with('*'),
    });
    let Some((name, avail, nodes)) = found else {
        let known: Vec<&str> = parts.iter().map(|p| p.0).collect();
        return Err(AppError::new(
            ErrorKind::ToolFailed,
            match partition {
                Some(p) => format!(
                    "sinfo knows no partition {p:?} (it has: {})",
                    known.join(", ")
                ),
                None => format!(
                    "the cluster has no default partition (it has: {}); set partition",
                    known.join(", ")
                ),
            },
        ));
    };
    let name = name.trim_end_matches('*');
    if *avail != "up" {
        return Err(AppError::new(
            ErrorKind::ToolFailed,
            format!("partition {name} is {avail}"),
        ));
    }
    Ok(format!(
        "sinfo answers: partition {name} up, nodes allocated/idle/other/total {nodes}"
    ))
}

/// The job script: clone, resume, run the agent, push checkpoints (see its header).
const SHIM: &str = include_str!("slurm_shim.sh");

/// Seconds between an agent's checkpoints (`OCTL_SLURM_CHECKPOINT_S` overrides it, for tests).
const CHECKPOINT_S: u64 = 60;

/// Job names: `octl.<run>.<node>.<attempt>` (run ids and node names have no '.').
const JOB_PREFIX: &str = "octl.";

/// [`Runner`](super::Runner) over a Slurm cluster: one batch job per attempt, observed by one
/// `squeue` per tick. Jobs are told apart from other daemons' by their comment (a tag of this
/// daemon's home).
#[derive(Debug)]
pub struct SlurmRunner {
    config: RunnerConfig,
    /// `$OCTL_HOME/exchange`: one bare repository per source repository.
    exchange: PathBuf,
    /// Marks this daemon's jobs (`--comment`).
    tag: String,
}

/// A job as `squeue` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Job {
    id: String,
    name: String,
    state: String,
    comment: String,
}

/// `slurm:<jobid>:<attempt>`, the handle the log keeps as the node's `pane`.
fn handle_of(job: &str, attempt: u32) -> AgentHandle {
    AgentHandle::new(format!("slurm:{job}:{attempt}"))
}

fn parse_handle(h: &AgentHandle) -> Option<(&str, u32)> {
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
    pub fn new(config: RunnerConfig, home: &Path) -> SlurmRunner {
        SlurmRunner {
            config,
            exchange: home.join("exchange"),
            tag: tag_of(home),
        }
    }

    /// This daemon's jobs, ended ones included (they stay listed for `MinJobAge`).
    fn jobs(&self) -> Result<Vec<Job>> {
        let text = slurm("squeue", &["-h", "-t", "all", "-o", "%i|%j|%T|%k"])?;
        Ok(text
            .lines()
            .filter_map(|l| {
                let mut f = l.trim().splitn(4, '|');
                Some(Job {
                    id: f.next()?.to_string(),
                    name: f.next()?.to_string(),
                    state: f.next()?.to_string(),
                    comment: f.next()?.to_string(),
                })
            })
            .filter(|j| j.comment == self.tag && j.name.starts_with(JOB_PREFIX))
            .collect())
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

    /// The bare exchange repository of the repository `worktree` belongs to, created on first
    /// use: agents clone from it and push into it; the daemon fetches from it.
    fn exchange_of(&self, worktree: &Path) -> Result<PathBuf> {
        let common = Git::new(worktree).plumbing(&[
            "rev-parse",
            "--path-format=absolute",
            "--git-common-dir",
        ])?;
        let dir = self
            .exchange
            .join(format!("{}.git", &tag_of(Path::new(common.trim()))[5..]));
        if !dir.join("HEAD").exists() {
            std::fs::create_dir_all(&dir)
                .map_err(|e| AppError::internal(format!("cannot create {}: {e}", dir.display())))?;
            Git::new(&dir).plumbing(&["init", "-q", "--bare"])?;
        }
        Ok(dir)
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
        Git::new(spec.cwd).plumbing(&[
            "push",
            "-q",
            "--force",
            &exchange_s,
            &format!("HEAD:{base}"),
        ])?;
        let branch = Git::new(spec.cwd).plumbing(&["rev-parse", "--abbrev-ref", "HEAD"])?;
        // The job's output goes there from its first byte: a missing directory fails the launch.
        if let Some(dir) = spec.log.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| AppError::internal(format!("cannot create {}: {e}", dir.display())))?;
        }
        let script = self.exchange.join("slurm_shim.sh");
        std::fs::write(&script, SHIM)
            .map_err(|e| AppError::internal(format!("cannot write {}: {e}", script.display())))?;
        let every = std::env::var("OCTL_SLURM_CHECKPOINT_S")
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(CHECKPOINT_S)
            .to_string();
        let name = format!("{JOB_PREFIX}{}.{}.{}", spec.run, spec.node, spec.attempt);
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
        cmd.args(self.config.sbatch_args.as_deref().unwrap_or_default())
            .arg(&script)
            .args([&exchange_s, &base, &prefix, branch.trim(), &every, "--"])
            .args(spec.argv)
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
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
        let mut agents = Vec::new();
        for job in self.jobs()? {
            let Some((run, node, attempt)) = parse_name(&job.name) else {
                continue;
            };
            let end = ended(&job.state);
            let exit_status = match end {
                Some(Some(code)) => Some(code),
                Some(None) => Self::exit_code(&job.id),
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
        let Some(copy) = newest else {
            return Err(AppError::new(
                ErrorKind::ToolFailed,
                format!("the job pushed nothing to {prefix} (see the node's log)"),
            ));
        };
        let wt = Git::new(worktree);
        let head = format!("{prefix}/{copy}/head");
        let wip = format!("{prefix}/{copy}/wip");
        wt.plumbing(&[
            "fetch",
            "-q",
            "--no-tags",
            &exchange,
            &format!("+{head}:{head}"),
            &format!("+{wip}:{wip}"),
        ])
        .or_else(|_| {
            wt.plumbing(&[
                "fetch",
                "-q",
                "--no-tags",
                &exchange,
                &format!("+{head}:{head}"),
            ])
        })?;
        super::exchange::apply(worktree, &head, &wip)
    }
}
