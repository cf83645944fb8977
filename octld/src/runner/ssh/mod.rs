//! SSH hosts as a runner (`kind = "ssh"`, docs/RUNNERS.md "SSH hosts"): a private tmux server
//! per daemon on each host, one session per run and one window per node, reached through one
//! master connection per host ([`conn`]). The daemon pushes the node's base to a bare
//! repository of its own on the host; the agent works in a clone of it (the Slurm runner's job
//! script, `slurm_shim.sh`, which also pushes its checkpoints back into that repository); the
//! daemon fetches those refs itself, every checkpoint interval and when the agent ends, so
//! hosts need no credentials anywhere.
//!
//! A host that fails [`LOST_AFTER`] looks in a row makes its agents lost
//! ([`Observation::lost`]): the engine ends their nodes and starts them again (another host),
//! resuming from the last checkpoint fetched; the lost copy is marked in the daemon's
//! repository (`…/<copy>/lost`) and nothing of it is fetched again.
//!
//! Modules: [`conn`] (the master connections), `host` (placing, starting, fetching, looking
//! at hosts), `look` (taking a look's answer in), `script` (the shell sent to a host).

mod conn;
mod host;
mod look;
mod script;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::exchange::{self, has_commit, ref_prefix};
use super::{AgentHandle, AgentSpec, AgentStatus, Lost, Observation, Result, Runner, Started};
use crate::config::{RunnerConfig, DEFAULT_SSH_SLOTS};
use crate::git::Git;
use crate::tmux::sh_quote;
use conn::Conn;
use look::*;
use octl_proto::{AppError, ErrorKind};
use script::*;

/// `ssh` options for a command that must never wait for a human: no password prompt, no
/// host-key question, a bounded connect.
pub const BATCH: &[&str] = &["-o", "BatchMode=yes", "-o", "ConnectTimeout=5"];

/// The job script, shared with the Slurm runner: clone, resume, run the agent, checkpoints.
const SHIM: &str = include_str!("../slurm_shim.sh");

/// Seconds between checkpoints, the agent's pushes and the daemon's fetches alike
/// (`OCTL_SSH_CHECKPOINT_S` overrides it, for tests).
const CHECKPOINT_S: u64 = 60;

/// Failed looks in a row after which a host's agents are lost. With [`LOOK_TIMEOUT`] and a
/// tick of 0.2 s, a host whose link went down is given up 8–15 s after the cut.
pub const LOST_AFTER: u32 = 3;

/// How long one look at a host may take.
const LOOK_TIMEOUT: Duration = Duration::from_secs(4);

/// How long a start, stop or fetch may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// How often a host given up is looked at again.
const PROBE_EVERY: Duration = Duration::from_secs(5);

/// Most bytes of an agent's output brought back per look.
const LOG_CHUNK: u64 = 256 * 1024;

/// Separates fields in what the host prints: printable, since tmux prints control characters
/// of a format as `_`; no name, id or path of ours contains it.
const SEP: &str = "|~|";

/// [`Runner`] over SSH hosts.
pub struct SshRunner {
    name: String,
    hosts: Vec<Conn>,
    slots: u32,
    /// Names this daemon's place on each host (a hash of its home).
    tag: String,
    every: Duration,
    state: Arc<Mutex<State>>,
}

#[derive(Debug, Default)]
struct State {
    hosts: BTreeMap<String, HostState>,
    /// Agents given up on, by handle; reported at every look, never fetched again.
    lost: BTreeMap<String, Lost>,
}

#[derive(Debug, Default)]
struct HostState {
    /// The daemon's directory on the host (absolute), once known.
    root: Option<String>,
    /// Looks failed in a row, since when, and the last error.
    failed: u32,
    failing_since: Option<Instant>,
    error: String,
    /// Answered at least once since the runner was built (its agents are known).
    answered: bool,
    agents: BTreeMap<String, Placed>,
    /// Starts under way (they hold a slot).
    starting: u32,
    last_fetch: Option<Instant>,
    fetching: bool,
    /// A given-up host's background look (see `probe_in_background`).
    probing: bool,
    last_probe: Option<Instant>,
}

/// An agent on a host, as the runner last saw it.
#[derive(Debug, Clone)]
struct Placed {
    run: String,
    node: String,
    attempt: u32,
    copy: u32,
    pane: String,
    /// The node's worktree on the daemon's machine (its repository gets the fetched refs).
    worktree: PathBuf,
    /// The node's log on the daemon's machine, and the agent's on the host.
    log: PathBuf,
    remote_log: String,
    /// Bytes of the remote log brought back so far.
    offset: u64,
    /// The host's bare repository the agent pushes to.
    remote_git: String,
    pid: Option<u32>,
    alive: bool,
    exit_status: Option<i32>,
    exit_signal: Option<i32>,
    /// When the runner started (or adopted) it.
    placed: Instant,
}

impl Placed {
    fn prefix(&self) -> String {
        format!(
            "{}/{}",
            ref_prefix(&self.run, &self.node, self.attempt),
            self.copy
        )
    }

    fn status(&self, host: &str) -> AgentStatus {
        AgentStatus {
            run: self.run.clone(),
            node: self.node.clone(),
            handle: handle_of(host, self.attempt, self.copy, &self.pane),
            pid: self.pid,
            alive: self.alive,
            exit_status: self.exit_status,
            exit_signal: self.exit_signal,
            // A lost host's agent is started again by the engine (a retry), never by the
            // runner itself.
            requeue: None,
        }
    }
}

/// `ssh:<attempt>:<copy>:<pane>:<host>`, the handle the log keeps as the node's `pane`.
fn handle_of(host: &str, attempt: u32, copy: u32, pane: &str) -> AgentHandle {
    AgentHandle::new(format!("ssh:{attempt}:{copy}:{pane}:{host}"))
}

/// `(host, attempt, copy, pane)` of a handle of this runner.
fn parse_handle(h: &AgentHandle) -> Option<(&str, u32, u32, &str)> {
    let mut f = h.as_str().strip_prefix("ssh:")?.splitn(4, ':');
    let attempt = f.next()?.parse().ok()?;
    let copy = f.next()?.parse().ok()?;
    let pane = f.next()?;
    let host = f.next()?;
    Some((host, attempt, copy, pane))
}

/// A host name as a directory name.
fn dir_name(host: &str) -> String {
    host.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn q(s: &str) -> String {
    sh_quote(s).into_owned()
}

/// Where a node's clone and logs go on the host, under `root`.
fn clone_dir(root: &str, run: &str, node: &str, attempt: u32, copy: u32) -> String {
    format!("{root}/work/{run}/{node}/{attempt}.{copy}")
}

/// What a new copy starts from when the copy before it was lost.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Resume {
    /// The lost copy's refs (`refs/octl/remote/<run>/<node>/<attempt>/<copy>`).
    from: String,
    /// Its branch as last fetched (else its base).
    head: String,
    /// Its uncommitted work as last fetched, if any.
    wip: Option<String>,
}

/// The copy a start of `attempt` is, and what it resumes from: copies of an attempt that were
/// lost (`…/<copy>/lost`) count up the copy and the newest of them is resumed; else the
/// attempt before, if its last copy was lost (the engine's retry of a lost node is a new
/// attempt).
fn resume_point(git: &Git, run: &str, node: &str, attempt: u32) -> (u32, Option<Resume>) {
    let prefix = ref_prefix(run, node, attempt);
    let lost = |p: &str, c: u32| has_commit(git, &format!("{p}/{c}/lost"));
    let mut copy = 0;
    while lost(&prefix, copy) {
        copy += 1;
    }
    let from = if copy > 0 {
        Some(format!("{prefix}/{}", copy - 1))
    } else if attempt > 0 {
        let before = ref_prefix(run, node, attempt - 1);
        let mut last = None;
        let mut c = 0;
        while has_commit(git, &format!("{before}/{c}/base")) {
            last = Some(c);
            c += 1;
        }
        last.filter(|c| lost(&before, *c))
            .map(|c| format!("{before}/{c}"))
    } else {
        None
    };
    let resume = from.and_then(|from| {
        let head = [format!("{from}/head"), format!("{from}/base")]
            .into_iter()
            .find(|r| has_commit(git, r))?;
        let wip = Some(format!("{from}/wip")).filter(|r| has_commit(git, r));
        Some(Resume { from, head, wip })
    });
    (copy, resume)
}

/// One look at a host: its directory, its panes, the new output of the agents asked about.
#[derive(Debug, Default)]
struct Look {
    root: String,
    panes: Vec<Pane>,
    logs: BTreeMap<String, Vec<u8>>,
}

#[derive(Debug, Clone)]
struct Pane {
    server_pid: Option<u32>,
    pane: String,
    pid: Option<u32>,
    dead: bool,
    status: Option<i32>,
    signal: Option<i32>,
    run: String,
    node: String,
    /// `<attempt>.<copy>`, empty for a window the runner did not make.
    ac: String,
    worktree: String,
    log: String,
    remote_log: String,
    remote_git: String,
}

impl Pane {
    fn attempt_copy(&self) -> Option<(u32, u32)> {
        let (a, c) = self.ac.split_once('.')?;
        Some((a.parse().ok()?, c.parse().ok()?))
    }
}

/// What a look asks besides the panes: output of agents (`pane`, remote log, bytes had), and
/// windows of lost copies to close (`pane`, `<attempt>.<copy>|<run>|<node>` it must still be).
#[derive(Debug, Default, Clone)]
struct Ask {
    logs: Vec<(String, String, u64)>,
    close: Vec<(String, String)>,
}

impl Runner for SshRunner {
    fn check(&self) -> Result<()> {
        let probe = "command -v tmux >/dev/null 2>&1 || { echo 'tmux is not installed' >&2; exit 3; }; \
                     command -v git >/dev/null 2>&1 || { echo 'git is not installed' >&2; exit 3; }";
        let answers: Vec<(String, Result<Vec<u8>>)> = std::thread::scope(|s| {
            let running: Vec<_> = self
                .hosts
                .iter()
                .map(|c| (c, s.spawn(move || c.run(probe, None, LOOK_TIMEOUT))))
                .collect();
            running
                .into_iter()
                .map(|(c, j)| {
                    let r = j
                        .join()
                        .unwrap_or_else(|_| Err(AppError::internal("a check panicked")));
                    (c.host.clone(), r)
                })
                .collect()
        });
        if answers.iter().any(|(_, r)| r.is_ok()) {
            return Ok(());
        }
        let why: Vec<String> = answers
            .into_iter()
            .filter_map(|(h, r)| r.err().map(|e| format!("{h}: {}", e.message)))
            .collect();
        Err(AppError::new(
            ErrorKind::ToolFailed,
            format!(
                "no host of runner {:?} answers over ssh ({})",
                self.name,
                why.join("; ")
            ),
        ))
    }

    fn start(&self, spec: &AgentSpec<'_>) -> Result<Started> {
        let git = Git::new(spec.cwd);
        let common = git.plumbing(&["rev-parse", "--path-format=absolute", "--git-common-dir"])?;
        let repo_id = conn::hash(common.trim().as_bytes());
        let (copy, resume) = resume_point(&git, spec.run, spec.node, spec.attempt);
        if let Some(r) = &resume {
            // The new worktree takes the lost copy's branch; its uncommitted work goes with
            // the base to the host.
            git.plumbing(&["reset", "-q", "--keep", &r.head])?;
        }
        let head = git.plumbing(&["rev-parse", "HEAD"])?.trim().to_string();
        let branch = git
            .plumbing(&["rev-parse", "--abbrev-ref", "HEAD"])?
            .trim()
            .to_string();
        let mine = format!("{}/{copy}", ref_prefix(spec.run, spec.node, spec.attempt));
        // Holds the copy's number, and is what it resumes from if it is lost before its
        // first checkpoint.
        git.plumbing(&["update-ref", &format!("{mine}/base"), &head])?;
        let mut tried = Vec::new();
        let mut errors: Vec<String> = Vec::new();
        loop {
            let host = match self.place(&tried) {
                Ok(h) => h,
                Err(e) if errors.is_empty() => return Err(e),
                Err(_) => {
                    return Err(AppError::new(
                        ErrorKind::ToolFailed,
                        format!(
                            "no host of runner {:?} took the agent: {}",
                            self.name,
                            errors.join("; ")
                        ),
                    ))
                }
            };
            tried.push(host.clone());
            let started = self.start_on(&host, spec, &repo_id, copy, resume.as_ref(), &branch);
            let mut state = self.state();
            let h = state.hosts.entry(host.clone()).or_default();
            h.starting = h.starting.saturating_sub(1);
            match started {
                Ok((placed, started)) => {
                    h.agents.insert(started.handle.as_str().to_string(), placed);
                    drop(state);
                    let from = match &resume {
                        Some(r) => format!(
                            ", resuming from the checkpoint of {} ({})",
                            r.from,
                            r.wip.as_deref().unwrap_or(&r.head)
                        ),
                        None => String::new(),
                    };
                    let _ = append_log(
                        spec.log,
                        format!(
                            "octl: attempt {} copy {copy} on ssh host {host}{from}\n",
                            spec.attempt
                        )
                        .as_bytes(),
                    );
                    return Ok(started);
                }
                Err(e) => {
                    drop(state);
                    tracing::warn!(host = %host, run = spec.run, node = spec.node, error = %e.message, "could not start an agent on an ssh host");
                    self.note_failure(&host, &e);
                    errors.push(format!("{host}: {}", e.message));
                }
            }
        }
    }

    fn observe(&self) -> Result<Observation> {
        let sure = self.look_all();
        let state = self.state();
        if !sure {
            let why: Vec<String> = state
                .hosts
                .iter()
                .filter(|(_, h)| !h.answered && h.failed > 0)
                .map(|(n, h)| format!("{n}: {}", h.error))
                .collect();
            return Err(AppError::new(
                ErrorKind::ToolFailed,
                format!("not every host answered yet ({})", why.join("; ")),
            ));
        }
        Ok(Observation {
            agents: state
                .hosts
                .iter()
                .flat_map(|(host, h)| h.agents.values().map(|a| a.status(host)))
                .collect(),
            host: None,
            lost: state.lost.values().cloned().collect(),
        })
    }

    fn owned(&self) -> Result<Vec<AgentStatus>> {
        Ok(self
            .observe()?
            .agents
            .into_iter()
            .filter(|a| a.alive)
            .collect())
    }

    fn stop(&self, run: &str, node: &str, handle: &AgentHandle) -> Result<bool> {
        let Some((host, attempt, copy, pane)) = parse_handle(handle) else {
            return Ok(false);
        };
        if self.state().lost.contains_key(handle.as_str()) {
            return Ok(false);
        }
        let conn = self.conn(host)?;
        let want = format!("{attempt}.{copy}|{run}|{node}");
        let out = conn.run(
            &stop_script(&self.pre(host), pane, &want),
            None,
            CALL_TIMEOUT,
        )?;
        let stopped = String::from_utf8_lossy(&out).trim() == "yes";
        // Only this node's entry: a pane id comes again once a host's tmux server restarted.
        let placed = {
            let mut state = self.state();
            let h = state.hosts.get_mut(host);
            let mine = h
                .as_ref()
                .and_then(|h| h.agents.get(handle.as_str()))
                .is_some_and(|p| p.run == run && p.node == node);
            h.filter(|_| mine)
                .and_then(|h| h.agents.remove(handle.as_str()))
        };
        // What its trap pushed last comes back now: also when a look in between already saw
        // the agent end (the TERM is what ended it), so its entry is no longer alive.
        if let Some(p) = placed.filter(|_| stopped) {
            if let Err(e) = Self::fetch(conn, &p, CALL_TIMEOUT) {
                tracing::warn!(host, run, node, error = %e.message, "the stopped agent's last checkpoint was not fetched");
            }
        }
        Ok(stopped)
    }

    fn stop_run(&self, run: &str) -> Result<bool> {
        let mut any = false;
        for conn in &self.hosts {
            let host = &conn.host;
            let lost = self
                .state()
                .hosts
                .get(host)
                .is_some_and(|h| h.failed >= LOST_AFTER);
            if lost {
                continue;
            }
            let script = format!(
                "{pre}n=0; pids=\n\
                 for P in $(t list-panes -s -t ={run} -F '#{{pane_id}}' 2>/dev/null); do\n\
                   [ \"$(t display -p -t \"$P\" '#{{pane_dead}}')\" = 1 ] || pids=\"$pids $(t display -p -t \"$P\" '#{{pane_pid}}')\"\n\
                   n=$((n + 1))\ndone\n\
                 [ -z \"$pids\" ] || kill -TERM $pids 2>/dev/null\n\
                 i=0; while [ $i -lt 100 ]; do a=; for p in $pids; do kill -0 $p 2>/dev/null && a=1; done\n\
                   [ -z \"$a\" ] && break; sleep 0.1; i=$((i + 1)); done\n\
                 [ $n -eq 0 ] || t kill-session -t ={run}\necho $n\n",
                pre = self.pre(host)
            );
            let stopped = match conn.run(&script, None, CALL_TIMEOUT) {
                Ok(out) => String::from_utf8_lossy(&out)
                    .trim()
                    .parse::<u32>()
                    .unwrap_or(0),
                Err(e) => {
                    tracing::warn!(host = %host, run, error = %e.message, "could not stop a run's agents on an ssh host");
                    continue;
                }
            };
            any |= stopped > 0;
            let placed: Vec<Placed> = {
                let mut state = self.state();
                let h = state.hosts.entry(host.clone()).or_default();
                let (of_run, rest) = std::mem::take(&mut h.agents)
                    .into_iter()
                    .partition(|(_, a)| a.run == run);
                h.agents = rest;
                of_run.into_values().collect()
            };
            for p in placed.iter().filter(|p| p.alive) {
                if let Err(e) = Self::fetch(conn, p, CALL_TIMEOUT) {
                    tracing::warn!(host = %host, run, node = %p.node, error = %e.message, "a cancelled agent's last checkpoint was not fetched");
                }
            }
        }
        Ok(any)
    }

    fn capture(&self, handle: &AgentHandle) -> Result<String> {
        let (host, _, _, pane) = parse_handle(handle)
            .ok_or_else(|| AppError::internal(format!("not an ssh agent: {handle}")))?;
        let script = format!(
            "{}t capture-pane -p -J -S - -t {}\n",
            self.pre(host),
            q(pane)
        );
        let out = self.conn(host)?.run(&script, None, LOOK_TIMEOUT)?;
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    fn collect(&self, run: &str, node: &str, handle: &AgentHandle, worktree: &Path) -> Result<()> {
        let Some((host, attempt, copy, pane)) = parse_handle(handle) else {
            return Ok(());
        };
        let mine = format!("{}/{copy}", ref_prefix(run, node, attempt));
        let lost = self.state().lost.contains_key(handle.as_str());
        if !lost {
            let conn = self.conn(host)?;
            let placed = self
                .state()
                .hosts
                .get(host)
                .and_then(|h| h.agents.get(handle.as_str()).cloned())
                .filter(|p| p.run == run && p.node == node);
            let placed = match placed {
                Some(p) => p,
                None => {
                    return Err(AppError::new(
                        ErrorKind::ToolFailed,
                        format!("the agent's window on {host} is gone; its last checkpoint stays under {mine}"),
                    ))
                }
            };
            // The rest of its output, then what it pushed at its end.
            let ask = Ask {
                logs: vec![(pane.to_string(), placed.remote_log.clone(), placed.offset)],
                close: Vec::new(),
            };
            if let Ok(look) = self.look(host, &ask) {
                if let Some(bytes) = look.logs.get(pane) {
                    if append_log(&placed.log, bytes).is_ok() {
                        if let Some(a) = self
                            .state()
                            .hosts
                            .get_mut(host)
                            .and_then(|h| h.agents.get_mut(handle.as_str()))
                        {
                            a.offset += bytes.len() as u64;
                        }
                    }
                }
            }
            Self::fetch(conn, &placed, CALL_TIMEOUT)?;
        }
        let git = Git::new(worktree);
        let head = format!("{mine}/head");
        if !has_commit(&git, &head) {
            return Err(AppError::new(
                ErrorKind::ToolFailed,
                format!("the agent on {host} pushed nothing to {mine} (see the node's log)"),
            ));
        }
        exchange::apply(worktree, &head, &format!("{mine}/wip"))
    }

    fn attach(&self, run: &str, node: &str, handle: &AgentHandle) -> Result<Vec<String>> {
        let (host, _, _, pane) = parse_handle(handle).ok_or_else(|| {
            AppError::internal(format!("node {node} of {run} has no ssh agent: {handle}"))
        })?;
        if self.state().lost.contains_key(handle.as_str()) {
            return Err(AppError::new(
                ErrorKind::InvalidTransition,
                format!("node {node}'s agent on {host} is lost (the host stopped answering)"),
            ));
        }
        // `$HOME` is the host's: the command is its shell's. A pane target selects the
        // node's window in the run's session.
        let command = format!(
            "tmux -S \"$HOME/.octl-remote/{}/{}/tmux.sock\" attach-session -t {}",
            self.tag,
            dir_name(host),
            q(pane)
        );
        Ok(self.conn(host)?.interactive(&command))
    }

    fn send_key(&self, handle: &AgentHandle, key: &str) -> Result<()> {
        let (host, _, _, pane) = parse_handle(handle)
            .ok_or_else(|| AppError::internal(format!("not an ssh agent: {handle}")))?;
        let script = format!("{}t send-keys -t {} {}\n", self.pre(host), q(pane), q(key));
        self.conn(host)?
            .run(&script, None, LOOK_TIMEOUT)
            .map(|_| ())
    }

    fn send_line(&self, run: &str, node: &str, handle: &AgentHandle, text: &str) -> Result<bool> {
        let Some((host, attempt, copy, pane)) = parse_handle(handle) else {
            return Ok(false);
        };
        let script = format!(
            "{pre}[ \"$(t display -p -t {p} '#{{@octl_ac}}|#{{session_name}}|#{{window_name}}' 2>/dev/null)\" = {w} ] || {{ echo no; exit 0; }}\n\
             t send-keys -t {p} -l -- {text} && t send-keys -t {p} Enter && echo yes\n",
            pre = self.pre(host),
            p = q(pane),
            w = q(&format!("{attempt}.{copy}|{run}|{node}")),
            text = q(text)
        );
        let out = self.conn(host)?.run(&script, None, LOOK_TIMEOUT)?;
        Ok(String::from_utf8_lossy(&out).trim() == "yes")
    }
}

/// Asks every host at once for the tools agents need there (tmux and git); all must answer.
/// Ok: how many answered, with each host's versions.
pub fn check_hosts(hosts: &[String]) -> Result<String> {
    let tries: Vec<_> = hosts
        .iter()
        .map(|h| {
            let child = Command::new("ssh")
                .args(BATCH)
                .arg("--")
                .arg(h)
                .arg("tmux -V && git --version")
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn();
            (h, child)
        })
        .collect();
    let mut failed = Vec::new();
    let mut tools = Vec::new();
    for (host, child) in tries {
        let answer = child.and_then(|c| c.wait_with_output());
        match answer {
            Ok(o) if o.status.success() => {
                let versions: Vec<String> = String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .map(|l| l.trim().to_string())
                    .collect();
                tools.push(format!("{host}: {}", versions.join(", ")));
            }
            Ok(o) => failed.push(format!(
                "{host}: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            )),
            Err(e) => {
                return Err(AppError::new(
                    ErrorKind::ToolMissing,
                    format!("cannot run ssh: {e}"),
                ));
            }
        }
    }
    if failed.is_empty() {
        Ok(format!(
            "{} host{} answered over ssh ({})",
            hosts.len(),
            if hosts.len() == 1 { "" } else { "s" },
            tools.join("; ")
        ))
    } else {
        Err(AppError::new(
            ErrorKind::ToolFailed,
            format!(
                "not reached over ssh, or without tmux and git: {}",
                failed.join("; ")
            ),
        ))
    }
}

#[cfg(test)]
mod tests;
