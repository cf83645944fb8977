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

mod conn;

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
use octl_proto::{AppError, ErrorKind};

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

fn parse_look(out: &[u8]) -> Option<Look> {
    let mut look = Look::default();
    let mut rest = out;
    let line = |rest: &mut &[u8]| -> Option<String> {
        let end = rest.iter().position(|b| *b == b'\n')?;
        let l = String::from_utf8_lossy(&rest[..end]).into_owned();
        *rest = &rest[end + 1..];
        Some(l)
    };
    look.root = line(&mut rest).unwrap_or_default();
    let mut ended = false;
    while let Some(l) = line(&mut rest) {
        if l == format!("{SEP}END") {
            ended = true;
            break;
        }
        let f: Vec<&str> = l.split(SEP).collect();
        if f.len() < 13 {
            continue;
        }
        look.panes.push(Pane {
            server_pid: f[0].parse().ok(),
            pane: f[1].to_string(),
            pid: f[2].parse().ok(),
            dead: f[3] == "1",
            status: f[4].parse().ok(),
            signal: f[5].parse().ok(),
            run: f[6].to_string(),
            node: f[7].to_string(),
            ac: f[8].to_string(),
            worktree: f[9].to_string(),
            log: f[10].to_string(),
            remote_log: f[11].to_string(),
            remote_git: f[12].to_string(),
        });
    }
    while let Some(l) = line(&mut rest) {
        let f: Vec<&str> = l.split(SEP).collect();
        let (Some("L"), Some(pane), Some(n)) = (f.first().copied(), f.get(1), f.get(2)) else {
            break;
        };
        let n = n.parse::<usize>().unwrap_or(0).min(rest.len());
        look.logs.insert(pane.to_string(), rest[..n].to_vec());
        rest = &rest[n..];
    }
    // A list cut short is no list: taking it would drop every agent after the cut.
    ended.then_some(look)
}

/// The start of every script: `R`, this daemon's directory on the host, and `S`, its tmux
/// server's socket.
fn preamble(tag: &str, host: &str) -> String {
    format!(
        "R=\"$HOME/.octl-remote/{tag}/{}\"; S=\"$R/tmux.sock\"; t() {{ tmux -S \"$S\" -f /dev/null \"$@\"; }}\n",
        dir_name(host)
    )
}

/// The look script: the panes (the tmux server made to reap exited agents first, as the
/// local runner does), then the agents' new output, then closing lost copies' windows.
fn look_script(pre: &str, ask: &Ask) -> String {
    let fields = [
        "#{pid}",
        "#{pane_id}",
        "#{pane_pid}",
        "#{pane_dead}",
        "#{pane_dead_status}",
        "#{pane_dead_signal}",
        "#{session_name}",
        "#{window_name}",
        "#{@octl_ac}",
        "#{@octl_wt}",
        "#{@octl_log}",
        "#{@octl_rlog}",
        "#{@octl_git}",
    ]
    .join(SEP);
    let mut s = format!(
        "{pre}printf '%s\\n' \"$R\"\nF={}\nL=$(t list-panes -a -F \"$F\" 2>/dev/null)\n\
         if printf '%s\\n' \"$L\" | awk -F'[|]~[|]' '$4==\"1\" && $5==\"\" && $6==\"\" {{f=1}} END {{exit !f}}'; then\n\
           kill -CHLD \"$(printf '%s\\n' \"$L\" | awk -F'[|]~[|]' 'NR==1 {{print $1}}')\" 2>/dev/null; sleep 0.05; L=$(t list-panes -a -F \"$F\" 2>/dev/null)\nfi\n\
         [ -z \"$L\" ] || printf '%s\\n' \"$L\"\nprintf '%s\\n' '{SEP}END'\n\
         lg() {{ [ -f \"$2\" ] || return 0; s=$(wc -c < \"$2\"); n=$((s - $3)); [ \"$n\" -gt {LOG_CHUNK} ] && n={LOG_CHUNK}; \
         [ \"$n\" -gt 0 ] || return 0; printf 'L{SEP}%s{SEP}%s\\n' \"$1\" \"$n\"; tail -c +$(($3 + 1)) \"$2\" | head -c \"$n\"; }}\n",
        q(&fields)
    );
    for (pane, log, offset) in &ask.logs {
        s.push_str(&format!("lg {} {} {offset}\n", q(pane), q(log)));
    }
    for (pane, what) in &ask.close {
        s.push_str(&format!(
            "[ \"$(t display -p -t {p} '#{{@octl_ac}}|#{{session_name}}|#{{window_name}}' 2>/dev/null)\" = {w} ] && t kill-window -t {p}\n",
            p = q(pane),
            w = q(what)
        ));
    }
    s.push_str("exit 0\n");
    s
}

/// Stops one agent the way a cancelled Slurm job is: TERM to the job script (its trap pushes
/// a last checkpoint), up to 10 s for it to end, then its window closed. Prints `yes` if the
/// pane was still `want` (`<attempt>.<copy>|<run>|<node>`).
fn stop_script(pre: &str, pane: &str, want: &str) -> String {
    format!(
        "{pre}P={p}\n[ \"$(t display -p -t \"$P\" '#{{@octl_ac}}|#{{session_name}}|#{{window_name}}' 2>/dev/null)\" = {w} ] || {{ echo no; exit 0; }}\n\
         if [ \"$(t display -p -t \"$P\" '#{{pane_dead}}')\" != 1 ]; then\n\
           pid=$(t display -p -t \"$P\" '#{{pane_pid}}'); kill -TERM \"$pid\" 2>/dev/null; i=0\n\
           while kill -0 \"$pid\" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done\nfi\n\
         t kill-window -t \"$P\"; echo yes\n",
        p = q(pane),
        w = q(want)
    )
}

impl SshRunner {
    pub fn new(name: &str, config: &RunnerConfig, home: &Path) -> SshRunner {
        let dir = home.join("ssh");
        let every = std::env::var("OCTL_SSH_CHECKPOINT_S")
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(CHECKPOINT_S);
        SshRunner {
            name: name.to_string(),
            hosts: config
                .hosts
                .iter()
                .flatten()
                .map(|h| Conn::new(h, &dir))
                .collect(),
            slots: config.slots.unwrap_or(DEFAULT_SSH_SLOTS).max(1),
            tag: conn::hash(home.as_os_str().as_encoded_bytes()),
            every: Duration::from_secs(every.max(1)),
            state: Default::default(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn conn(&self, host: &str) -> Result<&Conn> {
        self.hosts.iter().find(|c| c.host == host).ok_or_else(|| {
            AppError::invalid(format!(
                "host {host:?} is not one of runner {:?}'s hosts (any more)",
                self.name
            ))
        })
    }

    fn pre(&self, host: &str) -> String {
        preamble(&self.tag, host)
    }

    /// The host that should take the next agent, not yet in `tried`: answering (or not looked
    /// at yet), with a free slot, the least loaded first. Holds a slot on it (`starting`).
    fn place(&self, tried: &[String]) -> Result<String> {
        let mut state = self.state();
        let mut full = 0;
        let mut best: Option<(u32, &Conn)> = None;
        for c in &self.hosts {
            if tried.contains(&c.host) {
                continue;
            }
            let h = state.hosts.entry(c.host.clone()).or_default();
            if h.failed > 0 {
                continue;
            }
            let used = h.agents.values().filter(|a| a.alive).count() as u32 + h.starting;
            if used >= self.slots {
                full += 1;
                continue;
            }
            if best.is_none_or(|(u, _)| used < u) {
                best = Some((used, c));
            }
        }
        let Some((_, c)) = best else {
            return Err(AppError::new(
                ErrorKind::ToolFailed,
                if full > 0 {
                    format!(
                        "every answering host of runner {:?} is full ({} agents each: slots); lower the run's max_parallel to hosts × slots",
                        self.name, self.slots
                    )
                } else {
                    let why: Vec<String> = state
                        .hosts
                        .iter()
                        .filter(|(_, h)| h.failed > 0)
                        .map(|(n, h)| format!("{n}: {}", h.error))
                        .collect();
                    format!(
                        "no host of runner {:?} answers ({})",
                        self.name,
                        why.join("; ")
                    )
                },
            ));
        };
        state.hosts.entry(c.host.clone()).or_default().starting += 1;
        Ok(c.host.clone())
    }

    /// A call that failed to reach `host` counts as a failed look.
    fn note_failure(&self, host: &str, e: &AppError) {
        let mut state = self.state();
        let h = state.hosts.entry(host.to_string()).or_default();
        h.failed += 1;
        h.failing_since.get_or_insert_with(Instant::now);
        h.error = e.message.clone();
    }

    /// Starts the agent on `host`.
    #[allow(clippy::too_many_arguments)]
    fn start_on(
        &self,
        host: &str,
        spec: &AgentSpec<'_>,
        repo_id: &str,
        copy: u32,
        resume: Option<&Resume>,
        branch: &str,
    ) -> Result<(Placed, Started)> {
        let conn = self.conn(host)?;
        let pre = self.pre(host);
        let prepare = format!(
            "set -e\n{pre}mkdir -p \"$R/logs\" \"$R/work\"\n\
             command -v tmux >/dev/null 2>&1 || {{ echo 'tmux is not installed on this host' >&2; exit 3; }}\n\
             command -v git >/dev/null 2>&1 || {{ echo 'git is not installed on this host' >&2; exit 3; }}\n\
             [ -d \"$R/{repo_id}.git\" ] || git init -q --bare \"$R/{repo_id}.git\"\n\
             cat > \"$R/shim.sh.$$\" && mv \"$R/shim.sh.$$\" \"$R/shim.sh\"\nprintf '%s\\n' \"$R\"\n"
        );
        let out = conn.run(&prepare, Some(SHIM.as_bytes()), CALL_TIMEOUT)?;
        let root = String::from_utf8_lossy(&out).trim().to_string();
        let remote_git = format!("{root}/{repo_id}.git");
        let url = format!("ssh://{host}{remote_git}");
        let (run, node, attempt) = (spec.run, spec.node, spec.attempt);
        let base = format!("refs/octl/base/{run}/{node}/{attempt}/{copy}");
        let base_wip = format!("refs/octl/basewip/{run}/{node}/{attempt}/{copy}");
        // The base (and the checkpoint resumed from) goes to the host: the agent clones it there.
        let mut push = vec![
            "push".to_string(),
            "-q".into(),
            "--force".into(),
            url.clone(),
            format!("HEAD:{base}"),
        ];
        if let Some(wip) = resume.and_then(|r| r.wip.as_ref()) {
            push.push(format!("{wip}:{base_wip}"));
        }
        let push: Vec<&str> = push.iter().map(String::as_str).collect();
        conn.git(spec.cwd, &push, CALL_TIMEOUT)?;

        let clone = clone_dir(&root, run, node, attempt, copy);
        let remote_log = format!("{root}/logs/{run}.{node}.{attempt}.{copy}.log");
        let go = format!("octl-go-{run}-{node}-{attempt}-{copy}");
        let mut words: Vec<String> = vec![
            "tmux".into(),
            "-S".into(),
            format!("{root}/tmux.sock"),
            "wait-for".into(),
            go.clone(),
        ];
        let mut cmd = words.iter().map(|w| q(w)).collect::<Vec<_>>().join(" ");
        words = vec!["exec".into(), "env".into()];
        // The host's own PATH: the daemon's names this machine's directories.
        words.extend(
            spec.env
                .iter()
                .filter(|(k, _)| k != "PATH")
                .map(|(k, v)| format!("{k}={v}")),
        );
        words.extend([
            format!("OCTL_COPY={copy}"),
            format!("OCTL_CLONE={clone}"),
            format!("OCTL_JOB={host}"),
        ]);
        if resume.is_some_and(|r| r.wip.is_some()) {
            words.push(format!("OCTL_BASE_WIP={base_wip}"));
        }
        words.extend([
            "bash".into(),
            format!("{root}/shim.sh"),
            remote_git.clone(),
            base,
            ref_prefix(run, node, attempt),
            branch.to_string(),
            self.every.as_secs().to_string(),
            "--".into(),
        ]);
        words.extend(spec.argv.iter().cloned());
        cmd.push_str("; ");
        cmd.push_str(&words.iter().map(|w| q(w)).collect::<Vec<_>>().join(" "));
        let ac = format!("{attempt}.{copy}");
        let wt = spec.cwd.display().to_string();
        let log = spec.log.display().to_string();
        let window = format!(
            "{pre}CMD={cmd}\n\
             P=$(t new-window -d -P -F '#{{pane_id}}' -t ={run}: -n {node} -c \"$R\" /bin/sh -c \"$CMD\" 2>/dev/null) ||\n\
             P=$(t new-session -d -P -F '#{{pane_id}}' -s {run} -n {node} -x 200 -y 50 -c \"$R\" /bin/sh -c \"$CMD\" 2>/dev/null) ||\n\
             P=$(t new-window -d -P -F '#{{pane_id}}' -t ={run}: -n {node} -c \"$R\" /bin/sh -c \"$CMD\") || exit 1\n\
             t set-option -w -t \"$P\" remain-on-exit on \\; set-option -w -t \"$P\" @octl_ac {ac} \\; \
             set-option -w -t \"$P\" @octl_wt {wt} \\; set-option -w -t \"$P\" @octl_log {log} \\; \
             set-option -w -t \"$P\" @octl_rlog {rlog} \\; set-option -w -t \"$P\" @octl_git {git} \\; \
             pipe-pane -t \"$P\" -o {pipe} \\; wait-for -S {go}\n\
             t display -p -t \"$P\" '#{{pane_id}} #{{pane_pid}}'\n",
            cmd = q(&cmd),
            wt = q(&wt),
            log = q(&log),
            rlog = q(&remote_log),
            git = q(&remote_git),
            pipe = q(&format!("exec cat >> {}", q(&remote_log))),
            go = q(&go),
        );
        let out = conn.run(&window, None, CALL_TIMEOUT)?;
        let out = String::from_utf8_lossy(&out);
        let mut f = out.split_whitespace();
        let pane = f
            .next()
            .filter(|p| p.starts_with('%'))
            .ok_or_else(|| {
                AppError::new(
                    ErrorKind::ToolFailed,
                    format!("tmux on {host} made no window: {out:?}"),
                )
            })?
            .to_string();
        let pid = f.next().and_then(|p| p.parse().ok());
        let placed = Placed {
            run: run.to_string(),
            node: node.to_string(),
            attempt,
            copy,
            pane: pane.clone(),
            worktree: spec.cwd.to_path_buf(),
            log: spec.log.to_path_buf(),
            remote_log,
            offset: 0,
            remote_git,
            pid,
            alive: true,
            exit_status: None,
            exit_signal: None,
            placed: Instant::now(),
        };
        Ok((
            placed,
            Started {
                handle: handle_of(host, attempt, copy, &pane),
                pid: 0,
            },
        ))
    }

    /// Fetches what `placed` pushed on `host` into refs of the daemon's repository.
    fn fetch(conn: &Conn, placed: &Placed, timeout: Duration) -> Result<()> {
        let mine = placed.prefix();
        let url = format!("ssh://{}{}", conn.host, placed.remote_git);
        conn.git(
            &placed.worktree,
            &[
                "fetch",
                "-q",
                "--no-tags",
                &url,
                &format!("+{mine}/*:{mine}/*"),
            ],
            timeout,
        )
    }

    /// Fetches the checkpoints of `host`'s live agents, in the background (a look never
    /// waits for git), unless it did less than a checkpoint interval ago.
    fn fetch_due(&self, host: &str) {
        let Ok(conn) = self.conn(host).cloned() else {
            return;
        };
        let todo: Vec<Placed> = {
            let mut state = self.state();
            let every = self.every;
            let h = state.hosts.entry(host.to_string()).or_default();
            if h.fetching || h.failed > 0 || h.last_fetch.is_some_and(|t| t.elapsed() < every) {
                return;
            }
            let todo: Vec<Placed> = h.agents.values().filter(|a| a.alive).cloned().collect();
            if todo.is_empty() {
                return;
            }
            h.fetching = true;
            h.last_fetch = Some(Instant::now());
            todo
        };
        let state = self.state.clone();
        let host = host.to_string();
        std::thread::spawn(move || {
            for placed in todo {
                let handle = handle_of(&host, placed.attempt, placed.copy, &placed.pane);
                let given_up = state
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .lost
                    .contains_key(handle.as_str());
                if given_up {
                    continue;
                }
                if let Err(e) = Self::fetch(&conn, &placed, CALL_TIMEOUT) {
                    tracing::info!(host = %host, run = %placed.run, node = %placed.node, error = %e.message, "checkpoint not fetched");
                }
            }
            let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
            state.hosts.entry(host).or_default().fetching = false;
        });
    }

    /// What the next look at `host` asks, from what the runner knows.
    fn ask(&self, host: &str) -> Ask {
        let state = self.state();
        let mut ask = Ask::default();
        if let Some(h) = state.hosts.get(host) {
            for a in h.agents.values() {
                ask.logs
                    .push((a.pane.clone(), a.remote_log.clone(), a.offset));
            }
        }
        for l in state.lost.values() {
            if let Some((lh, attempt, copy, pane)) = parse_handle(&l.handle) {
                if lh == host {
                    ask.close.push((
                        pane.to_string(),
                        format!("{attempt}.{copy}|{}|{}", l.run, l.node),
                    ));
                }
            }
        }
        ask
    }

    /// Takes in one look at `host` (or its failure).
    fn take(&self, host: &str, look: Result<Look>, began: Instant) {
        take(&self.state, host, look, began)
    }

    /// One look at `host`.
    fn look(&self, host: &str, ask: &Ask) -> Result<Look> {
        look(self.conn(host)?, &self.pre(host), ask)
    }

    /// Whether `host` was given up (its agents lost): it is then looked at in the background,
    /// every [`PROBE_EVERY`], so that its bounded but slow failures do not hold up the looks
    /// at the others. Starts that look when due.
    fn probe_in_background(&self, host: &str) -> bool {
        let Ok(conn) = self.conn(host).cloned() else {
            return false;
        };
        {
            let mut state = self.state();
            let h = state.hosts.entry(host.to_string()).or_default();
            if h.failed < LOST_AFTER || !h.agents.is_empty() {
                return false;
            }
            if h.probing || h.last_probe.is_some_and(|t| t.elapsed() < PROBE_EVERY) {
                return true;
            }
            h.probing = true;
            h.last_probe = Some(Instant::now());
        }
        let (state, pre, ask, host) = (
            self.state.clone(),
            self.pre(host),
            self.ask(host),
            host.to_string(),
        );
        std::thread::spawn(move || {
            let began = Instant::now();
            let answer = look(&conn, &pre, &ask);
            take(&state, &host, answer, began);
            let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
            state.hosts.entry(host).or_default().probing = false;
        });
        true
    }

    /// Looks at every host at once, and takes the answers in.
    fn look_all(&self) -> bool {
        let asks: Vec<(String, Ask)> = self
            .hosts
            .iter()
            .filter(|c| !self.probe_in_background(&c.host))
            .map(|c| (c.host.clone(), self.ask(&c.host)))
            .collect();
        let began = Instant::now();
        let looks: Vec<(String, Result<Look>)> = std::thread::scope(|s| {
            let running: Vec<_> = asks
                .iter()
                .map(|(host, ask)| (host, s.spawn(move || self.look(host, ask))))
                .collect();
            running
                .into_iter()
                .map(|(host, j)| {
                    (
                        host.clone(),
                        j.join()
                            .unwrap_or_else(|_| Err(AppError::internal("a look panicked"))),
                    )
                })
                .collect()
        });
        let mut unsure = false;
        for (host, look) in looks {
            self.take(&host, look, began);
            let state = self.state();
            let h = &state.hosts[&host];
            // A host whose agents are not known yet (never answered since this daemon
            // started) makes the look unsure until it is given up.
            if !h.answered && h.failed > 0 && h.failed < LOST_AFTER {
                unsure = true;
            }
            drop(state);
            self.fetch_due(&host);
        }
        !unsure
    }
}

/// Takes in one look at `host` (or its failure).
fn take(state: &Mutex<State>, host: &str, look: Result<Look>, began: Instant) {
    let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
    let State { hosts, lost } = &mut *state;

    let h = hosts.entry(host.to_string()).or_default();
    let look = match look {
        Ok(l) => l,
        Err(e) => {
            tracing::debug!(host, error = %e.message, "an ssh host did not answer a look");
            h.failed += 1;
            let since = *h.failing_since.get_or_insert_with(Instant::now);
            h.error = e.message.clone();
            if h.failed >= LOST_AFTER && !h.agents.is_empty() {
                let reason = format!(
                    "ssh host {host} stopped answering: {} looks in a row failed over {:.0} s (last: {})",
                    h.failed,
                    since.elapsed().as_secs_f64(),
                    e.message
                );
                for (handle, a) in std::mem::take(&mut h.agents) {
                    give_up(&a, &reason);
                    lost.insert(
                        handle.clone(),
                        Lost {
                            run: a.run,
                            node: a.node,
                            handle: AgentHandle::new(handle),
                            reason: reason.clone(),
                        },
                    );
                }
            }
            return;
        }
    };
    tracing::debug!(host, panes = look.panes.len(), known = h.agents.len(), root = %look.root, "looked at an ssh host");
    h.failed = 0;
    h.failing_since = None;
    h.answered = true;
    h.root = Some(look.root.clone());
    let mut seen = BTreeMap::new();
    for p in &look.panes {
        let Some((attempt, copy)) = p.attempt_copy() else {
            continue;
        };
        let handle = handle_of(host, attempt, copy, &p.pane).into_string();
        if lost.contains_key(&handle) {
            continue;
        }
        let entry = match h.agents.remove(&handle) {
            Some(a) => Some(a),
            // A window made before this daemon started: adopted, unless its copy was
            // given up on (the mark in the daemon's repository says so).
            None => adopt(p, attempt, copy),
        };
        let Some(mut a) = entry else {
            continue;
        };
        a.pid = p.pid.or(a.pid);
        a.alive = !p.dead;
        a.exit_status = p.status;
        a.exit_signal = p.signal;
        let _ = p.server_pid;
        if let Some(bytes) = look.logs.get(&p.pane) {
            if append_log(&a.log, bytes).is_ok() {
                a.offset += bytes.len() as u64;
            }
        }
        seen.insert(handle, a);
    }
    // Windows no longer listed are gone (closed, or the server died): not reported.
    // Agents started while the look ran are not in it yet.
    let (newer, _gone): (BTreeMap<_, _>, BTreeMap<_, _>) = std::mem::take(&mut h.agents)
        .into_iter()
        .partition(|(_, a)| a.placed > began);
    seen.extend(newer);
    h.agents = seen;
}

/// One look at a host.
fn look(conn: &Conn, pre: &str, ask: &Ask) -> Result<Look> {
    let out = conn.run(&look_script(pre, ask), None, LOOK_TIMEOUT)?;
    parse_look(&out).ok_or_else(|| {
        AppError::new(
            ErrorKind::ToolFailed,
            format!("on {}: the look's answer was cut short", conn.host),
        )
    })
}

/// Marks a copy given up on in the daemon's repository (`…/<copy>/lost`, at the checkpoint
/// the next copy resumes from), so that nothing of it is fetched again, even after a restart.
fn give_up(a: &Placed, reason: &str) {
    let git = Git::new(&a.worktree);
    let mine = a.prefix();
    let at = [
        format!("{mine}/wip"),
        format!("{mine}/head"),
        format!("{mine}/base"),
    ]
    .into_iter()
    .find(|r| has_commit(&git, r));
    if let Some(at) = at {
        let _ = git.plumbing(&["update-ref", &format!("{mine}/lost"), &at]);
    }
    tracing::warn!(run = %a.run, node = %a.node, %reason, "an agent's host is lost");
    let _ = append_log(&a.log, format!("\noctl: {reason}\n").as_bytes());
}

/// An agent's window found on a host that this runner did not start (a daemon restarted).
fn adopt(p: &Pane, attempt: u32, copy: u32) -> Option<Placed> {
    let worktree = PathBuf::from(&p.worktree);
    if !worktree.is_dir() || p.remote_git.is_empty() {
        return None;
    }
    let placed = Placed {
        run: p.run.clone(),
        node: p.node.clone(),
        attempt,
        copy,
        pane: p.pane.clone(),
        worktree,
        log: PathBuf::from(&p.log),
        remote_log: p.remote_log.clone(),
        // Its output is brought again from the start: repeated lines over lost ones.
        offset: 0,
        remote_git: p.remote_git.clone(),
        pid: p.pid,
        alive: !p.dead,
        exit_status: p.status,
        exit_signal: p.signal,
        placed: Instant::now(),
    };
    let given_up = has_commit(
        &Git::new(&placed.worktree),
        &format!("{}/lost", placed.prefix()),
    );
    (!given_up).then_some(placed)
}

fn append_log(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if bytes.is_empty() {
        return Ok(());
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?
        .write_all(bytes)
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
        // What its trap pushed last comes back now.
        if let Some(p) = placed.filter(|p| stopped && p.alive) {
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
mod tests {
    use super::*;

    #[test]
    fn a_handle_names_host_attempt_copy_and_pane() {
        let h = handle_of("root@build:1", 3, 1, "%12");
        assert_eq!(h.as_str(), "ssh:3:1:%12:root@build:1");
        assert_eq!(parse_handle(&h), Some(("root@build:1", 3, 1, "%12")));
        assert_eq!(parse_handle(&AgentHandle::new("%3")), None);
        assert_eq!(parse_handle(&AgentHandle::new("slurm:4:0")), None);
    }

    #[test]
    fn a_look_is_parsed_with_the_output_it_brings() {
        let s = SEP;
        let mut out = format!(
            "/root/.octl-remote/t/s1\n\
             9{s}%1{s}77{s}0{s}{s}{s}run{s}a{s}0.0{s}/w/a{s}/l/a.log{s}/r/a.log{s}/r/x.git\n\
             9{s}%2{s}78{s}1{s}3{s}{s}run{s}b{s}2.1{s}/w/b{s}/l/b.log{s}/r/b.log{s}/r/x.git\n\
             {s}END\nL{s}%1{s}6\n"
        )
        .into_bytes();
        out.extend_from_slice(b"a\nb\x00c\n");
        out.extend_from_slice(format!("L{s}%2{s}2\nok").as_bytes());
        let look = parse_look(&out).expect("the look ends with its marker");
        assert_eq!(look.root, "/root/.octl-remote/t/s1");
        assert_eq!(look.panes.len(), 2);
        assert!(!look.panes[0].dead && look.panes[1].dead);
        assert_eq!(look.panes[1].status, Some(3));
        assert_eq!(look.panes[1].attempt_copy(), Some((2, 1)));
        assert_eq!(look.logs["%1"], b"a\nb\x00c\n");
        assert_eq!(look.logs["%2"], b"ok");
    }

    /// A repository with commits `a` (the base) and `b`, and a tree for `wip` commits.
    fn repo() -> (tempfile::TempDir, Git, String, String) {
        let dir = tempfile::tempdir().unwrap();
        let git = Git::new(dir.path())
            .with_env("GIT_AUTHOR_NAME", "t")
            .with_env("GIT_AUTHOR_EMAIL", "t@t.invalid")
            .with_env("GIT_COMMITTER_NAME", "t")
            .with_env("GIT_COMMITTER_EMAIL", "t@t.invalid")
            .with_env("GIT_CONFIG_NOSYSTEM", "1")
            .with_env("GIT_CONFIG_GLOBAL", "/dev/null");
        git.plumbing(&["init", "-q"]).unwrap();
        let tree = git.plumbing(&["write-tree"]).unwrap();
        let a = git
            .plumbing(&["commit-tree", "-m", "a", tree.trim()])
            .unwrap()
            .trim()
            .to_string();
        let b = git
            .plumbing(&["commit-tree", "-p", &a, "-m", "b", tree.trim()])
            .unwrap()
            .trim()
            .to_string();
        (dir, git, a, b)
    }

    #[test]
    fn a_start_resumes_only_from_a_copy_given_up_on() {
        let (_dir, git, a, b) = repo();
        let set = |r: &str, c: &str| git.plumbing(&["update-ref", r, c]).unwrap();
        let p0 = ref_prefix("r", "n", 0);
        // Nothing before: copy 0, from the base.
        assert_eq!(resume_point(&git, "r", "n", 0), (0, None));
        set(&format!("{p0}/0/base"), &a);
        set(&format!("{p0}/0/head"), &b);
        // Attempt 0 was not lost (a retry of a failed node, say): attempt 1 starts afresh.
        assert_eq!(resume_point(&git, "r", "n", 1), (0, None));
        // Lost: its own attempt counts the copy up and resumes from it; the next attempt too.
        set(&format!("{p0}/0/lost"), &b);
        let from_lost = Resume {
            from: format!("{p0}/0"),
            head: format!("{p0}/0/head"),
            wip: None,
        };
        assert_eq!(
            resume_point(&git, "r", "n", 0),
            (1, Some(from_lost.clone()))
        );
        assert_eq!(resume_point(&git, "r", "n", 1), (0, Some(from_lost)));
        // With a fetched wip, it goes along; without a head, the base is resumed.
        set(&format!("{p0}/0/wip"), &b);
        assert_eq!(
            resume_point(&git, "r", "n", 1).1.unwrap().wip,
            Some(format!("{p0}/0/wip"))
        );
        let p2 = ref_prefix("r", "n", 2);
        set(&format!("{p2}/0/base"), &a);
        set(&format!("{p2}/0/lost"), &a);
        assert_eq!(
            resume_point(&git, "r", "n", 3).1.unwrap().head,
            format!("{p2}/0/base")
        );
    }
}
