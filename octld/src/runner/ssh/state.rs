//! What the SSH runner knows of its hosts and agents, and the names it gives them: a host's
//! setup and looks, the agents placed there, copies given up on, room reserved; handles, host
//! paths, and where a new copy resumes from.

use super::*;

/// What one host has of this daemon's, made once and kept: its directory, the job script,
/// the tmux server (kept up when empty) and a bare repository per source repository.
#[derive(Debug, Default)]
pub(super) struct Setup {
    pub(super) root: Option<String>,
    pub(super) repos: BTreeSet<String>,
}

#[derive(Debug, Default)]
pub(super) struct State {
    pub(super) hosts: BTreeMap<String, HostState>,
    /// Copies the engine gave up on, by handle: never fetched or adopted again, stopped once
    /// their host answers.
    pub(super) abandoned: BTreeMap<String, Abandoned>,
    /// Room held for starts, by (run, node): the host and since when.
    pub(super) reserved: BTreeMap<(String, String), (String, Instant)>,
    /// Runs cancelled while a host did not answer: their windows there are stopped once it
    /// does, by host.
    pub(super) stop_later: BTreeMap<String, BTreeSet<String>>,
}

/// A copy given up on, as its window's identity on its host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Abandoned {
    pub(super) run: String,
    pub(super) node: String,
    pub(super) pane: String,
    /// `<attempt>.<copy>`.
    pub(super) ac: String,
    /// A stop of its window is under way.
    pub(super) stopping: bool,
}

impl Abandoned {
    /// The copy `attempt.copy` of `run`'s `node` in `pane`, whose window is to be stopped
    /// once its host answers.
    pub(super) fn new(run: &str, node: &str, pane: &str, attempt: u32, copy: u32) -> Abandoned {
        Abandoned {
            run: run.to_string(),
            node: node.to_string(),
            pane: pane.to_string(),
            ac: format!("{attempt}.{copy}"),
            stopping: false,
        }
    }
}

#[derive(Debug, Default)]
pub(super) struct HostState {
    /// The daemon's directory on the host (absolute), once known.
    pub(super) root: Option<String>,
    /// Looks failed in a row, since when (and as a time of day), and the last error.
    pub(super) failed: u32,
    pub(super) failing_since: Option<(Instant, u64)>,
    pub(super) error: String,
    /// Answered at least once since the runner was built (its agents are known).
    pub(super) answered: bool,
    pub(super) agents: BTreeMap<String, Placed>,
    /// Windows of this daemon's that no known node owns and that cannot be adopted (their
    /// worktree is gone), by handle, for orphans.
    pub(super) strays: BTreeMap<String, Pane>,
    /// Starts under way (they hold a slot).
    pub(super) starting: u32,
    pub(super) last_fetch: Option<Instant>,
    pub(super) fetching: bool,
    /// A look is under way; when the last one ended, and how many have.
    pub(super) looking: bool,
    pub(super) looked_at: Option<Instant>,
    pub(super) looks: u64,
}

impl HostState {
    /// Its looks failed long enough for its agents' nodes to count as lost.
    pub(super) fn unreachable(&self) -> bool {
        self.failed >= LOST_AFTER
            && self
                .failing_since
                .is_some_and(|(t, _)| t.elapsed() >= UNREACHABLE_AFTER)
    }

    /// Agents alive, agents whose end the engine has not yet taken (their window is still
    /// there, for [`DEAD_HOLDS_SLOT`] at most), and starts under way: what holds its slots
    /// (besides reserved room). An agent that just ended keeps its slot until the engine has
    /// recorded its end and closed its window, so the log never shows more agents on a host
    /// than its slots.
    pub(super) fn used(&self) -> u32 {
        self.agents.values().filter(|a| a.holds_slot()).count() as u32 + self.starting
    }
}

/// An agent on a host, as the runner last saw it.
#[derive(Debug, Clone)]
pub(super) struct Placed {
    pub(super) run: String,
    pub(super) node: String,
    pub(super) attempt: u32,
    pub(super) copy: u32,
    pub(super) pane: String,
    /// The node's worktree on the daemon's machine (its repository gets the fetched refs).
    pub(super) worktree: PathBuf,
    /// The node's log on the daemon's machine, and the agent's on the host.
    pub(super) log: PathBuf,
    pub(super) remote_log: String,
    /// Bytes of the remote log brought back so far.
    pub(super) offset: u64,
    /// The host's bare repository the agent pushes to.
    pub(super) remote_git: String,
    pub(super) pid: Option<u32>,
    pub(super) alive: bool,
    /// When a look first saw it ended.
    pub(super) ended_at: Option<Instant>,
    pub(super) exit_status: Option<i32>,
    pub(super) exit_signal: Option<i32>,
    /// When the runner started (or adopted) it.
    pub(super) placed: Instant,
}

/// How long an ended agent whose window the engine has not closed still holds its slot: the
/// engine closes it within a supervisor tick of recording the end; one it never closes (its
/// node had already ended) must not hold the slot for ever.
pub(super) const DEAD_HOLDS_SLOT: Duration = Duration::from_secs(30);

impl Placed {
    pub(super) fn holds_slot(&self) -> bool {
        self.alive || self.ended_at.is_some_and(|t| t.elapsed() < DEAD_HOLDS_SLOT)
    }

    pub(super) fn prefix(&self) -> String {
        format!(
            "{}/{}",
            ref_prefix(&self.run, &self.node, self.attempt),
            self.copy
        )
    }

    pub(super) fn status(&self, host: &str) -> AgentStatus {
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
            queued: None,
        }
    }
}

/// `ssh:<attempt>:<copy>:<pane>:<host>`, the handle the log keeps as the node's `pane`.
pub(super) fn handle_of(host: &str, attempt: u32, copy: u32, pane: &str) -> AgentHandle {
    AgentHandle::new(format!("ssh:{attempt}:{copy}:{pane}:{host}"))
}

/// `(host, attempt, copy, pane)` of a handle of this runner.
pub(crate) fn parse_handle(h: &AgentHandle) -> Option<(&str, u32, u32, &str)> {
    let mut f = h.as_str().strip_prefix("ssh:")?.splitn(4, ':');
    let attempt = f.next()?.parse().ok()?;
    let copy = f.next()?.parse().ok()?;
    let pane = f.next()?;
    let host = f.next()?;
    Some((host, attempt, copy, pane))
}

/// A host name as a directory name.
pub(super) fn dir_name(host: &str) -> String {
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

pub(super) fn q(s: &str) -> String {
    sh_quote(s).into_owned()
}

/// Where a node's clone and logs go on the host, under `root`.
pub(super) fn clone_dir(root: &str, run: &str, node: &str, attempt: u32, copy: u32) -> String {
    format!("{root}/work/{run}/{node}/{attempt}.{copy}")
}

/// The id of the repository `worktree` belongs to (a hash of its git directory): names its
/// bare repository on every host.
pub(super) fn repo_id(git: &Git) -> Result<String> {
    let common = git.plumbing(&["rev-parse", "--path-format=absolute", "--git-common-dir"])?;
    Ok(conn::hash(common.trim().as_bytes()))
}

/// What a new copy starts from when the copy before it was lost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Resume {
    /// The lost copy's refs (`refs/octl/remote/<run>/<node>/<attempt>/<copy>`).
    pub(super) from: String,
    /// Its branch as last fetched (else its base).
    pub(super) head: String,
    /// Its uncommitted work as last fetched, if any.
    pub(super) wip: Option<String>,
}

/// The copy a start of `attempt` is, and what it resumes from: copies of an attempt that were
/// lost (`…/<copy>/lost`) count up the copy and the newest of them is resumed; else the
/// attempt before, if its last copy was lost (the engine's retry of a lost node is a new
/// attempt).
pub(super) fn resume_point(
    git: &Git,
    run: &str,
    node: &str,
    attempt: u32,
) -> (u32, Option<Resume>) {
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
pub(super) struct Look {
    pub(super) root: String,
    pub(super) panes: Vec<Pane>,
    pub(super) logs: BTreeMap<String, Vec<u8>>,
}

#[derive(Debug, Clone)]
pub(super) struct Pane {
    pub(super) server_pid: Option<u32>,
    pub(super) pane: String,
    pub(super) pid: Option<u32>,
    pub(super) dead: bool,
    pub(super) status: Option<i32>,
    pub(super) signal: Option<i32>,
    pub(super) run: String,
    pub(super) node: String,
    /// `<attempt>.<copy>`, empty for a window the runner did not make.
    pub(super) ac: String,
    pub(super) worktree: String,
    pub(super) log: String,
    pub(super) remote_log: String,
    pub(super) remote_git: String,
    /// The daemon's repository (its git directory), where a copy given up on is marked.
    pub(super) repo: String,
}

impl Pane {
    pub(super) fn attempt_copy(&self) -> Option<(u32, u32)> {
        let (a, c) = self.ac.split_once('.')?;
        Some((a.parse().ok()?, c.parse().ok()?))
    }
}

/// What a look asks besides the panes: output of agents (`pane`, remote log, bytes had).
#[derive(Debug, Default, Clone)]
pub(super) struct Ask {
    pub(super) logs: Vec<(String, String, u64)>,
}
