//! Orphans: things under the daemon's own names that no run owns. Only ever reported here;
//! `run gc` ([`super::gc`]) is what removes them, after a snapshot.
//!
//! - worktree directories `$OCTL_HOME/worktrees/<RUN>/<NODE>` whose run is unknown, whose
//!   node is not recorded, or whose node was cleaned up already (`cleanup.done`);
//! - git worktrees registered under that folder whose directory is gone (prunable);
//! - branches `octl/<RUN>/…` in the repositories the runs name (and those the orphan
//!   worktrees belong to) whose run is unknown, or whose node is not recorded or was cleaned;
//! - windows on the private tmux server whose session is not an unfinished run, or whose
//!   node is not recorded, finished or cleaned;
//! - agents' processes on this machine (their cgroup, their marker: [`crate::contain`]) whose
//!   node is so, or whose window is gone: what outlived its window (a restart ends them).
//!
//! A corrupt run owns everything under its id: its log cannot say what it made.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use octl_proto::projection::ListedStatus;
use octl_proto::rpc::Orphan;
use octl_proto::state::Node;
use octl_proto::AppError;

use super::blocking;
use crate::daemon::Daemon;
use crate::git::Git;
use crate::store::RunHandle;

/// What the orphan search needs to know of one run.
#[derive(Debug, Clone)]
pub struct RunFacts {
    pub corrupt: bool,
    pub status: ListedStatus,
    pub repo: Option<String>,
    /// The integration branch of an orchestrate run.
    pub integration: Option<String>,
    pub nodes: BTreeMap<String, Node>,
}

impl RunFacts {
    pub fn terminal(&self) -> bool {
        self.status.is_terminal()
    }
}

impl RunFacts {
    fn of(h: &RunHandle) -> RunFacts {
        let view = h.view();
        RunFacts {
            corrupt: h.corrupt().is_some(),
            status: view.manifest.status,
            repo: view.manifest.repo.clone(),
            integration: view.manifest.settings.integration.clone(),
            nodes: view
                .nodes
                .iter()
                .map(|n| (n.id.clone(), n.clone()))
                .collect(),
        }
    }
}

/// Where the orphan rules look a run up.
pub trait Runs {
    /// The run of this id as it is now; `None` when no run has it.
    fn facts(&self, run: &str) -> Option<Arc<RunFacts>>;
    /// The repositories the runs name.
    fn repos(&self) -> Vec<PathBuf>;
}

impl Runs for BTreeMap<String, RunFacts> {
    fn facts(&self, run: &str) -> Option<Arc<RunFacts>> {
        self.get(run).cloned().map(Arc::new)
    }

    fn repos(&self) -> Vec<PathBuf> {
        self.values()
            .filter_map(|f| f.repo.as_ref().map(PathBuf::from))
            .collect()
    }
}

/// Every run the daemon knows, looked up as the search needs it: a finished run is folded
/// from its log the first time something under its name is found (most are never needed).
pub struct Known {
    daemon: Arc<Daemon>,
    seen: std::sync::Mutex<BTreeMap<String, Option<Arc<RunFacts>>>>,
}

impl Known {
    pub fn new(daemon: &Arc<Daemon>) -> Known {
        Known {
            daemon: daemon.clone(),
            seen: Default::default(),
        }
    }
}

impl Runs for Known {
    fn facts(&self, run: &str) -> Option<Arc<RunFacts>> {
        if let Some(f) = self.seen.lock().expect("seen lock").get(run) {
            return f.clone();
        }
        let found = match self.daemon.store.get(run) {
            Ok(h) => h.map(|h| Arc::new(RunFacts::of(&h))),
            Err(e) => {
                // Unreadable now: counted as owning what is under its name, never as gone.
                tracing::warn!(run, error = %e.message, "orphans: cannot read a run; what it may own is left alone");
                Some(Arc::new(RunFacts {
                    corrupt: true,
                    status: ListedStatus::Corrupt,
                    repo: None,
                    integration: None,
                    nodes: BTreeMap::new(),
                }))
            }
        };
        self.seen
            .lock()
            .expect("seen lock")
            .insert(run.to_string(), found.clone());
        found
    }

    fn repos(&self) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = self
            .daemon
            .store
            .handles()
            .iter()
            .filter_map(|h| h.view().manifest.repo.clone().map(PathBuf::from))
            .collect();
        #[derive(serde::Deserialize)]
        struct RepoOnly {
            #[serde(default)]
            repo: Option<String>,
        }
        let mut finished = BTreeSet::new();
        let _ = self.daemon.store.each_finished(|e| {
            if let Some(r) = serde_json::from_str::<RepoOnly>(&e.summary)
                .ok()
                .and_then(|r| r.repo)
            {
                finished.insert(r);
            }
            true
        });
        out.extend(finished.into_iter().map(PathBuf::from));
        out
    }
}

/// Why the worktree directory `worktrees/<run>/<node>` is an orphan; `None` when a run owns it.
pub fn worktree_orphan(runs: &dyn Runs, run: &str, node: &str) -> Option<String> {
    let Some(facts) = runs.facts(run) else {
        return Some(format!("run {run} is not known to this daemon"));
    };
    if facts.corrupt {
        return None;
    }
    match facts.nodes.get(node) {
        None => Some(format!("run {run} has no node {node:?}")),
        Some(n) if n.cleaned => Some(format!(
            "node {node} ({}) was cleaned up but its worktree is still there",
            n.state.as_str()
        )),
        Some(_) => None,
    }
}

/// Why the branch `octl/<run>/<rest>` is an orphan; `None` when a run owns it.
pub fn branch_orphan(runs: &dyn Runs, run: &str, rest: &str) -> Option<String> {
    let Some(facts) = runs.facts(run) else {
        return Some(format!("run {run} is not known to this daemon"));
    };
    if facts.corrupt || facts.integration.as_deref() == Some(&format!("octl/{run}/{rest}")) {
        return None;
    }
    match facts.nodes.get(rest) {
        None => Some(format!("run {run} has no node {rest:?}")),
        Some(n) if n.cleaned => Some(format!(
            "node {rest} ({}) was cleaned up but its branch is still there",
            n.state.as_str()
        )),
        Some(_) => None,
    }
}

/// Why the window `<session>:<window>` is an orphan; `None` when a live node owns it.
pub fn window_orphan(runs: &dyn Runs, session: &str, window: &str) -> Option<String> {
    let Some(facts) = runs.facts(session) else {
        return Some(format!(
            "session {session} is not a run known to this daemon"
        ));
    };
    if facts.corrupt {
        return None;
    }
    if facts.terminal() {
        return Some(format!("run {session} is {}", facts.status));
    }
    match facts.nodes.get(window) {
        None => Some(format!("run {session} has no node {window:?}")),
        Some(n) if n.cleaned => Some(format!("node {window} was cleaned up")),
        Some(n) if n.state.is_terminal() => Some(format!("node {window} is {}", n.state.as_str())),
        Some(_) => None,
    }
}

/// Why an agent's processes are orphans (`windowed`: its window is still there); `None` while
/// a live node's window holds them.
pub fn process_orphan(runs: &dyn Runs, run: &str, node: &str, windowed: bool) -> Option<String> {
    window_orphan(runs, run, node).or_else(|| {
        let facts = runs.facts(run)?;
        let n = facts.nodes.get(node)?;
        (!windowed && !facts.corrupt).then(|| {
            format!(
                "node {node} ({}) has no window: they outlived it",
                n.state.as_str()
            )
        })
    })
}

/// Finds every orphan. Reads only: nothing is created, moved or deleted.
pub async fn find(daemon: &Arc<Daemon>) -> Result<Vec<Orphan>, AppError> {
    let runs = Known::new(daemon);
    let own = daemon.home.worktrees();
    let d = daemon.clone();
    blocking(move || {
        let mut out = find_in(&runs, &own, &*d.runner)?;
        out.extend(remote_jobs(&d, &runs, &BTreeSet::new()));
        Ok(out)
    })
    .await
}

/// The agents of every remote runner config.toml names that no live node owns — a Slurm job
/// or an SSH host's window of this daemon whose run ended or forgot it, or that is not the
/// copy its node runs now (an earlier attempt's, one a crash left twice) — by the same rule as
/// windows; one entry per job or window, however many runners list it (two `slurm` runners
/// see one cluster), named by job id or `host:run:node`. A runner that cannot be asked (its
/// cluster down, a kind not built) is left out, with a warning.
fn remote_jobs(daemon: &Daemon, runs: &dyn Runs, skip: &BTreeSet<String>) -> Vec<Orphan> {
    let Ok(config) = daemon.config.get() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for (name, wanted) in &config.runners {
        if wanted.kind() == crate::config::RunnerKind::Local || skip.contains(name) {
            continue;
        }
        let owned = daemon.runners.get(&config, name).and_then(|r| r.owned());
        let owned = match owned {
            Ok(o) => o,
            Err(e) => {
                tracing::warn!(runner = %name, error = %e.message, "cannot list a runner's agents for orphans");
                continue;
            }
        };
        for a in owned {
            if !seen.insert(a.handle.as_str().to_string()) {
                continue;
            }
            let Some(why) = remote_orphan(runs, &a.run, &a.node, a.handle.as_str()) else {
                continue;
            };
            let (kind, target) = match crate::runner::ssh::parse_handle(&a.handle) {
                Some((host, ..)) => ("window", format!("{host}:{}:{}", a.run, a.node)),
                None => (
                    "job",
                    crate::runner::slurm::parse_handle(&a.handle)
                        .map_or_else(|| a.handle.to_string(), |(id, _)| format!("job {id}")),
                ),
            };
            out.push(Orphan {
                kind: kind.into(),
                path: None,
                refname: None,
                target: Some(target),
                pane: Some(a.handle.into_string()),
                runner: Some(name.clone()),
                repo: None,
                run: Some(a.run),
                node: Some(a.node),
                why,
            });
        }
    }
    out
}

/// Ends the remote agents the log says are over — a job or window of an ended run, of a node
/// cleaned up since, or not the copy its node runs now — and returns how many stops were
/// made. What a stop promised to do once a host answers lives in the daemon's memory; this
/// asks the runners again, so a window left on a host cut off at its node's cleanup, or by a
/// daemon since restarted, goes once the host answers. Agents of runs this daemon does not
/// know are left to `gc --orphans` (a host or cluster may serve other homes too).
pub fn reap_remote(daemon: &Arc<Daemon>) -> usize {
    // Only runners no unfinished node uses: a look of this one beside the supervisor's, or
    // beside a start under way, could miss a window being made and free its slot twice
    // (tests/tests/ssh.rs saw 3 agents on a host of 2 slots). A busy runner's leftovers go
    // once it is idle, or with `run gc`.
    let busy: BTreeSet<String> = daemon
        .store
        .handles()
        .iter()
        .flat_map(|h| {
            h.view()
                .nodes
                .iter()
                .filter(|n| !n.state.is_terminal())
                .filter_map(|n| n.runner.clone())
                .collect::<Vec<_>>()
        })
        .collect();
    let runs = Known::new(daemon);
    let mut stopped = 0;
    for o in remote_jobs(daemon, &runs, &busy) {
        let (Some(run), Some(node), Some(pane)) = (&o.run, &o.node, &o.pane) else {
            continue;
        };
        let Some(facts) = runs.facts(run).filter(|f| !f.corrupt) else {
            continue;
        };
        let over = facts.terminal()
            || facts.nodes.get(node).is_some_and(|n| {
                n.cleaned || n.pane.as_deref().is_some_and(|p| p != pane.as_str())
            });
        if !over {
            continue;
        }
        let Ok(runner) = daemon.runners.of(o.runner.as_deref()) else {
            continue;
        };
        match runner.stop(run, node, &crate::runner::AgentHandle::new(pane.clone())) {
            Ok(_) => {
                tracing::info!(run, node, agent = %pane, why = %o.why, "a remote agent left behind was stopped");
                stopped += 1;
            }
            Err(e) => {
                tracing::debug!(run, node, agent = %pane, error = %e.message, "a remote agent left behind was not stopped yet")
            }
        }
    }
    stopped
}

/// Why the remote agent `handle` of `run`'s `node` is an orphan; `None` when its node runs it
/// (or is being started, and will adopt it).
pub fn remote_orphan(runs: &dyn Runs, run: &str, node: &str, handle: &str) -> Option<String> {
    if let Some(why) = window_orphan(runs, run, node) {
        return Some(why);
    }
    let facts = runs.facts(run)?;
    let n = facts.nodes.get(node)?;
    match n.pane.as_deref() {
        Some(pane) if pane != handle => Some(format!(
            "node {node} of run {run} runs another copy ({pane}), not this one"
        )),
        _ => None,
    }
}

fn find_in(
    runs: &dyn Runs,
    own: &Path,
    runner: &dyn crate::runner::Runner,
) -> Result<Vec<Orphan>, AppError> {
    let mut out = Vec::new();
    // Repositories to look at: those the runs name, then those orphan worktrees belong to.
    let mut repos: Vec<PathBuf> = runs.repos();

    for (run, node, path) in worktree_dirs(own) {
        let Some(why) = worktree_orphan(runs, &run, &node) else {
            continue;
        };
        let repo = main_worktree(&path);
        if let Some(r) = &repo {
            repos.push(r.clone());
        }
        out.push(Orphan {
            kind: "worktree".into(),
            path: Some(path.display().to_string()),
            refname: None,
            target: None,
            pane: None,
            runner: None,
            repo: repo.map(|r| r.display().to_string()),
            run: Some(run),
            node: Some(node),
            why,
        });
    }

    repos.sort();
    repos.dedup();
    let mut seen = BTreeSet::new();
    for repo in repos {
        if !repo.is_dir() {
            continue;
        }
        let git = Git::new(&repo);
        // One repository named from several of its worktrees is looked at once.
        match git.common_dir() {
            Ok(common) if seen.insert(common.clone()) => {}
            _ => continue,
        }
        let repo_s = repo.display().to_string();
        for wt in git.worktree_list().unwrap_or_default() {
            if !wt.prunable || !wt.path.starts_with(own) {
                continue;
            }
            let (run, node) = run_and_node(own, &wt.path);
            out.push(Orphan {
                kind: "worktree".into(),
                path: Some(wt.path.display().to_string()),
                refname: None,
                target: None,
                pane: None,
                runner: None,
                repo: Some(repo_s.clone()),
                run,
                node,
                why: "git still lists this worktree but its directory is gone".into(),
            });
        }
        let branches = octl_branches(&repo).unwrap_or_else(|e| {
            tracing::warn!(repo = %repo_s, error = %e.message, "cannot list the octl branches");
            Vec::new()
        });
        for refname in branches {
            let Some((run, rest)) = parse_branch(&refname) else {
                continue;
            };
            let Some(why) = branch_orphan(runs, run, rest) else {
                continue;
            };
            out.push(Orphan {
                kind: "branch".into(),
                path: None,
                refname: Some(refname.clone()),
                target: None,
                pane: None,
                runner: None,
                repo: Some(repo_s.clone()),
                run: Some(run.to_string()),
                node: Some(rest.to_string()),
                why,
            });
        }
    }

    let owned = runner.owned()?;
    let windows: BTreeSet<(String, String)> = owned
        .iter()
        .map(|a| (a.run.clone(), a.node.clone()))
        .collect();
    for f in runner.processes()? {
        if f.pids.is_empty() {
            continue;
        }
        let key = (f.run.clone(), f.node.clone());
        let Some(why) = process_orphan(runs, &f.run, &f.node, windows.contains(&key)) else {
            continue;
        };
        let pids: Vec<String> = f.pids.iter().map(u32::to_string).collect();
        out.push(Orphan {
            kind: "process".into(),
            path: None,
            refname: None,
            target: Some(format!("{}:{}", f.run, f.node)),
            pane: None,
            runner: None,
            repo: None,
            run: Some(f.run),
            node: Some(f.node),
            why: format!(
                "{} process{} (pid {}) still run{}: {why}",
                pids.len(),
                if pids.len() == 1 { "" } else { "es" },
                pids.join(", "),
                if pids.len() == 1 { "s" } else { "" },
            ),
        });
    }
    for a in owned {
        let Some(why) = window_orphan(runs, &a.run, &a.node) else {
            continue;
        };
        out.push(Orphan {
            kind: "window".into(),
            path: None,
            refname: None,
            target: Some(format!("{}:{}", a.run, a.node)),
            pane: Some(a.handle.into_string()),
            runner: None,
            repo: None,
            run: Some(a.run),
            node: Some(a.node),
            why,
        });
    }
    Ok(out)
}

/// Every `worktrees/<RUN>/<NODE>` directory, sorted.
pub fn worktree_dirs(own: &Path) -> Vec<(String, String, PathBuf)> {
    let mut out = Vec::new();
    for run in sorted_dirs(own) {
        let run_dir = own.join(&run);
        for node in sorted_dirs(&run_dir) {
            let path = run_dir.join(&node);
            out.push((run.clone(), node, path));
        }
    }
    out
}

fn sorted_dirs(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        // Symlinks are not followed: only real directories are ours.
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    names
}

/// The run and node a path under our worktree folder is named after.
pub fn run_and_node(own: &Path, path: &Path) -> (Option<String>, Option<String>) {
    let mut parts = path
        .strip_prefix(own)
        .ok()
        .into_iter()
        .flat_map(|rest| rest.components())
        .map(|c| c.as_os_str().to_string_lossy().into_owned());
    (parts.next(), parts.next())
}

/// `refs/heads/octl/<RUN>/<REST>` → (RUN, REST), for RUN a full run id.
pub fn parse_branch(refname: &str) -> Option<(&str, &str)> {
    let rest = refname.strip_prefix("refs/heads/octl/")?;
    let (run, rest) = rest.split_once('/')?;
    (octl_proto::ids::is_full_run_id(run) && !rest.is_empty()).then_some((run, rest))
}

/// The main worktree of the repository `path` is a worktree of, if `path` is the top of a
/// git worktree (not merely a directory inside some other repository).
pub fn main_worktree(path: &Path) -> Option<PathBuf> {
    let git = Git::new(path);
    let top = git.toplevel().ok()?;
    if !same_dir(&top, path) {
        return None;
    }
    git.worktree_list()
        .ok()?
        .into_iter()
        .next()
        .map(|wt| wt.path)
}

pub fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// The full names of the branches under `refs/heads/octl/`.
pub fn octl_branches(repo: &Path) -> Result<Vec<String>, AppError> {
    let out = git_stdout(
        repo,
        &["for-each-ref", "--format=%(refname)", "refs/heads/octl/"],
    )?;
    Ok(out
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect())
}

/// A plumbing call through [`Git`], for the few commands it has no method for.
pub fn git_stdout(dir: &Path, args: &[&str]) -> Result<String, AppError> {
    Ok(Git::new(dir).plumbing(args)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use octl_proto::NodeState;

    fn node(id: &str, state: NodeState, cleaned: bool) -> Node {
        Node {
            id: id.into(),
            state,
            branch: None,
            worktree: None,
            agent: None,
            deps: vec![],
            task: None,
            gate: None,
            message: None,
            reason: None,
            exit_status: None,
            merge_commit: None,
            conflict_files: vec![],
            snapshot_ref: None,
            snapshot_refs: vec![],
            outcome: None,
            port: None,
            pane: None,
            on_exit: None,
            report_on_exit: false,
            report: None,
            created_at: String::new(),
            updated_at: String::new(),
            started_at: None,
            finished_at: None,
            cleaned,
            kept: vec![],
            activity: None,
            session_id: None,
            paused_until: None,
            cost_usd: None,
            runner: None,
            permissions: Default::default(),
            sandbox: None,
            resume: false,
            requeued: None,
            queued: None,
            lost: None,
            place: None,
            reviews: Vec::new(),
            review_due: None,
            approved: false,
            gated: false,
        }
    }

    fn runs() -> BTreeMap<String, RunFacts> {
        let mut m = BTreeMap::new();
        let nodes = |list: Vec<Node>| list.into_iter().map(|n| (n.id.clone(), n)).collect();
        m.insert(
            "LIVE".to_string(),
            RunFacts {
                corrupt: false,
                status: ListedStatus::Active,
                repo: None,
                integration: Some("octl/LIVE/integration".into()),
                nodes: nodes(vec![
                    node("a", NodeState::Running, false),
                    node("b", NodeState::Merged, true),
                    node("c", NodeState::Failed, false),
                ]),
            },
        );
        m.insert(
            "DONE".to_string(),
            RunFacts {
                corrupt: false,
                status: ListedStatus::Failed,
                repo: None,
                integration: None,
                nodes: nodes(vec![node("x", NodeState::Failed, false)]),
            },
        );
        m.insert(
            "BAD".to_string(),
            RunFacts {
                corrupt: true,
                status: ListedStatus::Corrupt,
                repo: None,
                integration: None,
                nodes: BTreeMap::new(),
            },
        );
        m
    }

    #[test]
    fn ownership_rules() {
        let r = runs();
        assert!(worktree_orphan(&r, "LIVE", "a").is_none());
        assert!(
            worktree_orphan(&r, "LIVE", "c").is_none(),
            "a failed node keeps its worktree"
        );
        assert!(worktree_orphan(&r, "LIVE", "b")
            .unwrap()
            .contains("cleaned"));
        assert!(worktree_orphan(&r, "LIVE", "zz")
            .unwrap()
            .contains("no node"));
        assert!(worktree_orphan(&r, "GONE", "a")
            .unwrap()
            .contains("not known"));
        assert!(
            worktree_orphan(&r, "DONE", "x").is_none(),
            "left behind, not orphaned"
        );
        assert!(
            worktree_orphan(&r, "BAD", "x").is_none(),
            "a corrupt run owns its names"
        );

        assert!(branch_orphan(&r, "LIVE", "integration").is_none());
        assert!(branch_orphan(&r, "LIVE", "b").is_some());
        assert!(branch_orphan(&r, "LIVE", "a").is_none());
        assert!(branch_orphan(&r, "GONE", "a").is_some());

        assert!(window_orphan(&r, "LIVE", "a").is_none());
        assert!(window_orphan(&r, "LIVE", "c").unwrap().contains("failed"));
        assert!(window_orphan(&r, "DONE", "x").unwrap().contains("failed"));
        assert!(window_orphan(&r, "main", "x")
            .unwrap()
            .contains("not a run"));
        assert!(window_orphan(&r, "BAD", "x").is_none());

        // Processes: a live node's while its window is there; otherwise they outlived it.
        assert!(process_orphan(&r, "LIVE", "a", true).is_none());
        assert!(process_orphan(&r, "LIVE", "a", false)
            .unwrap()
            .contains("outlived"));
        assert!(process_orphan(&r, "LIVE", "c", true)
            .unwrap()
            .contains("failed"));
        assert!(process_orphan(&r, "GONE", "a", true).is_some());
        assert!(process_orphan(&r, "BAD", "x", false).is_none());
    }

    #[test]
    fn branch_and_path_names() {
        let id = octl_proto::ids::new_ulid();
        let r = format!("refs/heads/octl/{id}/api");
        assert_eq!(parse_branch(&r), Some((id.as_str(), "api")));
        assert_eq!(parse_branch("refs/heads/octl/feature/x"), None);
        assert_eq!(parse_branch(&format!("refs/heads/octl/{id}")), None);
        let own = Path::new("/h/worktrees");
        assert_eq!(
            run_and_node(own, Path::new("/h/worktrees/R/n")),
            (Some("R".into()), Some("n".into()))
        );
        assert_eq!(run_and_node(own, Path::new("/elsewhere")), (None, None));
    }
}
