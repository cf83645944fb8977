//! SSH hosts as a runner (`kind = "ssh"`, docs/RUNNERS.md "SSH hosts"): a private tmux server
//! per daemon on each host, one session per run and one window per node, reached through one
//! master connection per host ([`conn`]). The daemon pushes the node's base to a bare
//! repository of its own on the host; the agent works in a clone of it (the Slurm runner's job
//! script, `slurm_shim.sh`, which also pushes its checkpoints back into that repository); the
//! daemon fetches those refs itself, every checkpoint interval and when the agent ends, so
//! hosts need no credentials anywhere.
//!
//! Every host is looked at in the background, one look at a time ([`look`]): a host that does
//! not answer holds up neither the others nor the supervisor. One that fails [`LOST_AFTER`]
//! looks in a row over [`UNREACHABLE_AFTER`] is reported unreachable
//! ([`Observation::unreachable`]): its agents are not gone, and are found again when it
//! answers. Only the engine gives up on one ([`Runner::abandon`], after `lost_after`): that
//! copy is marked in the daemon's repository (`…/<copy>/lost`), nothing of it is fetched or
//! adopted again, and its window is stopped once its host answers.
//!
//! Modules: [`conn`] (the master connections), `host` (room, placing, setting a host up,
//! starting, fetching), `look` (the looks and taking their answers in), `script` (the shell
//! sent to a host), `state` (what the runner knows of hosts and agents, and their names).

mod conn;
mod host;
mod look;
mod script;
mod state;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::exchange::{self, has_commit, ref_prefix};
use super::{
    AgentHandle, AgentSpec, AgentStatus, Observation, Result, Room, Runner, Started, Unreachable,
};
use crate::config::SshConfig;
use crate::git::Git;
use crate::tmux::sh_quote;
use conn::Conn;
use look::*;
use octl_proto::{AppError, ErrorKind};
use script::*;
use state::*;

pub(crate) use conn::bounded;
pub(crate) use state::parse_handle;

/// `ssh` options for a command that must never wait for a human: no password prompt, no
/// host-key question, a bounded connect.
pub const BATCH: &[&str] = &["-o", "BatchMode=yes", "-o", "ConnectTimeout=5"];

/// The job script, shared with the Slurm runner: clone, resume, run the agent, checkpoints.
const SHIM: &str = include_str!("../slurm_shim.sh");

/// Seconds between checkpoints, the agent's pushes and the daemon's fetches alike
/// (`OCTL_SSH_CHECKPOINT_S` overrides it, for tests).
const CHECKPOINT_S: u64 = 60;

/// Failed looks in a row after which a host counts as unreachable (with
/// [`UNREACHABLE_AFTER`]): a host whose link went down is reported 5–13 s after the cut.
pub const LOST_AFTER: u32 = 3;

/// How long a host must have failed its looks before it counts as unreachable, so that a
/// refused connection or two (sshd restarting) do not make its nodes lost.
pub const UNREACHABLE_AFTER: Duration = Duration::from_secs(5);

/// How long one look at a host may take.
const LOOK_TIMEOUT: Duration = Duration::from_secs(4);

/// How long a start, stop or fetch may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// How often a host whose last look failed is looked at again.
const PROBE_EVERY: Duration = Duration::from_secs(1);

/// How long `observe` waits for the looks of hosts that answered last time (a look of one
/// that did not is never waited for).
const OBSERVE_WAIT: Duration = Duration::from_secs(1);

/// Starts under way on one host at once (each is a push and a window over its connection).
const STARTS_PER_HOST: u32 = 8;

/// How long room reserved for a start is held before it counts as given back (a start that
/// never came: its step was cut short).
const RESERVED_FOR: Duration = Duration::from_secs(120);

/// Most bytes of an agent's output brought back per look.
const LOG_CHUNK: u64 = 256 * 1024;

/// Separates fields in what the host prints: printable, since tmux prints control characters
/// of a format as `_`; no name, id or path of ours contains it.
const SEP: &str = "|~|";

/// [`Runner`] over SSH hosts. Cheap to share: the looks and fetches in the background hold
/// the same [`Inner`].
pub struct SshRunner(Arc<Inner>);

impl std::ops::Deref for SshRunner {
    type Target = Arc<Inner>;
    fn deref(&self) -> &Arc<Inner> {
        &self.0
    }
}

pub struct Inner {
    name: String,
    hosts: Vec<Conn>,
    slots: u32,
    /// Names this daemon's place on each host (a hash of its home).
    tag: String,
    every: Duration,
    /// Variables of the daemon's environment given to agents on the hosts (`pass_env`).
    pass_env: Vec<(String, String)>,
    state: Mutex<State>,
    /// Signalled whenever a look ends.
    looked: Condvar,
    /// Signalled whenever a start on a host ends (a slot of [`STARTS_PER_HOST`] frees).
    started: Condvar,
    /// Per host: what is set up there (held while it is set up).
    setup: BTreeMap<String, Mutex<Setup>>,
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
        self.start_agent(spec)
    }

    fn reserve(&self, run: &str, node: &str, _attempt: u32) -> Result<Room> {
        Ok(self.reserve_room(run, node))
    }

    fn release(&self, run: &str, node: &str) {
        self.state()
            .reserved
            .remove(&(run.to_string(), node.to_string()));
    }

    fn has_room(&self) -> bool {
        // Nothing may be looking at the hosts while every node waits: look now.
        self.look_all();
        self.choose(&self.state(), &[]).is_ok()
    }

    fn find(&self, spec: &AgentSpec<'_>) -> Result<Option<Started>> {
        self.find_agent(spec)
    }

    fn observe(&self) -> Result<Observation> {
        self.look_all();
        let state = self.state();
        let mut seen = Observation::default();
        for c in &self.hosts {
            let Some(h) = state.hosts.get(&c.host) else {
                seen.unsure.push(c.host.clone());
                continue;
            };
            if h.unreachable() {
                let (t, since_ms) = h.failing_since.unwrap_or((Instant::now(), 0));
                seen.unreachable.push(Unreachable {
                    place: c.host.clone(),
                    since_ms,
                    reason: format!(
                        "ssh host {} stopped answering: {} looks in a row failed over {:.0} s (last: {})",
                        c.host,
                        h.failed,
                        t.elapsed().as_secs_f64(),
                        h.error
                    ),
                });
            } else if !h.answered {
                seen.unsure.push(c.host.clone());
            } else {
                seen.agents
                    .extend(h.agents.values().map(|a| a.status(&c.host)));
            }
        }
        Ok(seen)
    }

    fn place_of(&self, handle: &AgentHandle) -> Option<String> {
        parse_handle(handle).map(|(host, ..)| host.to_string())
    }

    fn reachable(&self, handle: &AgentHandle) -> bool {
        let Some((host, ..)) = parse_handle(handle) else {
            return true;
        };
        self.state().hosts.get(host).is_none_or(|h| h.failed == 0)
    }

    fn abandon(&self, run: &str, node: &str, handle: &AgentHandle) -> Result<()> {
        let Some((host, attempt, copy, pane)) = parse_handle(handle) else {
            return Ok(());
        };
        let placed = {
            let mut state = self.state();
            state.abandoned.insert(
                handle.as_str().to_string(),
                Abandoned::new(run, node, pane, attempt, copy),
            );
            state
                .hosts
                .get_mut(host)
                .and_then(|h| h.agents.remove(handle.as_str()))
        };
        if let Some(p) = placed {
            give_up(&p, &format!("the daemon gave up on it on ssh host {host}"));
        }
        Ok(())
    }

    fn owned(&self) -> Result<Vec<AgentStatus>> {
        let seen = self.observe()?;
        let state = self.state();
        let strays = state.hosts.iter().flat_map(|(host, h)| {
            h.strays.values().filter_map(|p| {
                let (attempt, copy) = p.attempt_copy()?;
                Some(AgentStatus {
                    run: p.run.clone(),
                    node: p.node.clone(),
                    handle: handle_of(host, attempt, copy, &p.pane),
                    pid: p.pid,
                    alive: !p.dead,
                    exit_status: p.status,
                    exit_signal: p.signal,
                    requeue: None,
                    queued: None,
                })
            })
        });
        let mut out: Vec<AgentStatus> = seen.agents.into_iter().filter(|a| a.alive).collect();
        out.extend(strays);
        Ok(out)
    }

    fn stop(&self, run: &str, node: &str, handle: &AgentHandle) -> Result<bool> {
        let Some((host, attempt, copy, pane)) = parse_handle(handle) else {
            return Ok(false);
        };
        if self.state().abandoned.contains_key(handle.as_str()) {
            // Stopped once its host answers.
            return Ok(false);
        }
        // Not there at its host's last look, nor started since: nothing to stop (a second
        // stop, a cleanup's after the window was closed at the agent's end).
        let gone = self.state().hosts.get(host).is_some_and(|h| {
            h.answered
                && !h.agents.contains_key(handle.as_str())
                && !h.strays.contains_key(handle.as_str())
        });
        if gone {
            return Ok(false);
        }
        let unreachable = self
            .state()
            .hosts
            .get(host)
            .is_some_and(HostState::unreachable);
        if unreachable {
            // Not waited for: its window is stopped once the host answers (the engine gave it
            // up or the run ended).
            let mut state = self.state();
            state.abandoned.insert(
                handle.as_str().to_string(),
                Abandoned::new(run, node, pane, attempt, copy),
            );
            return Ok(false);
        }
        let conn = self.conn(host)?;
        let want = format!("{attempt}.{copy}|{run}|{node}");
        let out = match conn.run(
            &stop_script(&self.pre(host), pane, &want),
            None,
            CALL_TIMEOUT,
        ) {
            Ok(out) => out,
            Err(e) => {
                // Cut off meanwhile: stopped once the host answers again.
                tracing::warn!(host, run, node, error = %e.message, "an agent on an ssh host was not stopped; stopped once it answers");
                self.state().abandoned.insert(
                    handle.as_str().to_string(),
                    Abandoned::new(run, node, pane, attempt, copy),
                );
                return Ok(false);
            }
        };
        let said = String::from_utf8_lossy(&out);
        let stopped = said.trim().starts_with("yes");
        // Whether this stop ended it (its trap pushed a last checkpoint).
        let terminated = said.trim() == "yes live";
        // Only this node's entry: a pane id comes again once a host's tmux server restarted.
        let placed = {
            let mut state = self.state();
            let h = state.hosts.get_mut(host);
            let mine = h
                .as_ref()
                .and_then(|h| h.agents.get(handle.as_str()))
                .is_some_and(|p| p.run == run && p.node == node);
            let removed = h.and_then(|h| {
                h.strays.remove(handle.as_str());
                if mine {
                    h.agents.remove(handle.as_str())
                } else {
                    None
                }
            });
            removed
        };
        // What its trap pushed last comes back now: also when a look in between already saw
        // the agent end (the TERM is what ended it), so its entry is no longer alive. One that
        // ended by itself and was seen so was fetched when its end was judged.
        if let Some(p) = placed.filter(|p| terminated || (stopped && p.alive)) {
            if let Err(e) = Inner::fetch(conn, &p, CALL_TIMEOUT) {
                tracing::warn!(host, run, node, error = %e.message, "the stopped agent's last checkpoint was not fetched");
            }
        }
        Ok(stopped)
    }

    fn stop_run(&self, run: &str) -> Result<bool> {
        let mut any = false;
        for conn in &self.hosts {
            let host = &conn.host;
            let unreachable = self.state().hosts.get(host).is_some_and(|h| h.failed > 0);
            if unreachable {
                self.state()
                    .stop_later
                    .entry(host.clone())
                    .or_default()
                    .insert(run.to_string());
                continue;
            }
            match self.stop_run_on(conn, run) {
                Ok(n) => any |= n > 0,
                Err(e) => {
                    tracing::warn!(host = %host, run, error = %e.message, "could not stop a run's agents on an ssh host; stopped once it answers");
                    self.state()
                        .stop_later
                        .entry(host.clone())
                        .or_default()
                        .insert(run.to_string());
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
        let abandoned = self.state().abandoned.contains_key(handle.as_str());
        let reachable = self.state().hosts.get(host).is_none_or(|h| h.failed == 0);
        let git = Git::new(worktree);
        if !abandoned && !reachable {
            // What was fetched before may not be its last: asked again once the host answers.
            return Err(AppError::new(
                ErrorKind::ToolFailed,
                format!("ssh host {host} does not answer: the work of its agent is fetched once it does"),
            ));
        }
        if !abandoned {
            let conn = self.conn(host)?;
            let placed = self
                .state()
                .hosts
                .get(host)
                .and_then(|h| h.agents.get(handle.as_str()).cloned())
                .filter(|p| p.run == run && p.node == node);
            match placed {
                Some(placed) => {
                    // The rest of its output, then what it pushed at its end.
                    let ask = Ask {
                        logs: vec![(pane.to_string(), placed.remote_log.clone(), placed.offset)],
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
                    Inner::fetch(conn, &placed, CALL_TIMEOUT).map_err(|e| self.failed(host, e))?;
                }
                // Its window is gone (the host's tmux server went, or a restart found no
                // window): what it pushed into the host's repository still comes back.
                None => self
                    .fetch_copy(conn, &git, &mine)
                    .map_err(|e| self.failed(host, e))?,
            }
        }
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
        if self.state().abandoned.contains_key(handle.as_str()) {
            return Err(AppError::new(
                ErrorKind::InvalidTransition,
                format!("node {node}'s agent on {host} was given up (the host stopped answering)"),
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

    fn shutdown(&self) {
        for c in &self.hosts {
            c.drop_master();
        }
    }
}

/// Where a daemon of `home` keeps its things on `host`, relative to the host's `$HOME`:
/// `.octl-remote/<daemon>/<host>` (its tmux socket, job script, bare repositories, clones).
pub fn host_dir(home: &Path, host: &str) -> String {
    format!(
        ".octl-remote/{}/{}",
        conn::hash(home.as_os_str().as_encoded_bytes()),
        dir_name(host)
    )
}

/// The name of the bare repository on every host of the repository whose git directory is
/// `common` (`git rev-parse --git-common-dir`, absolute).
pub fn host_repo(common: &Path) -> String {
    format!("{}.git", conn::hash(common.as_os_str().as_encoded_bytes()))
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
