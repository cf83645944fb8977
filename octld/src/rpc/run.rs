//! `run.create`, `run.list`, `run.show`, `run.rebuild`, `run.quarantine`, `run.cancel`,
//! `run.retry`, `run.budget`.

use std::collections::BTreeSet;
use std::sync::Arc;

use octl_proto::event::RunCreated;
use octl_proto::method;
use octl_proto::projection::RunSummary;
use octl_proto::rpc::{
    BudgetParams, CancelParams, Quarantined, RetryParams, RunCreateParams, RunListParams, RunParams,
};
use octl_proto::rpc::{CorruptLog, Memory, NodeShown, Prewritten, RebuildResult, RunShown};

use crate::store::ListFilter;
use octl_proto::{AppError, NodeState, RunKind};

use super::Handle;
use crate::daemon::Daemon;
use crate::store::{NewRun, RunHandle};
use octl_proto::projection::{self, ListedStatus};

const MAX_TITLE: usize = 1024;

pub async fn create(daemon: &Arc<Daemon>, p: RunCreateParams) -> Result<RunSummary, AppError> {
    match RunKind::parse(&p.kind) {
        Some(RunKind::Generic) => {}
        Some(other) => {
            return Err(AppError::invalid(format!(
                "invalid kind {:?}: run.create makes generic runs; {} runs are started by their own command",
                p.kind,
                other.as_str()
            )))
        }
        None => {
            return Err(AppError::invalid(format!(
                "invalid kind {:?}: use generic",
                p.kind
            )))
        }
    }
    let mut created = RunCreated::default();
    if let Some(title) = p.title {
        if title.chars().count() > MAX_TITLE || title.chars().any(char::is_control) {
            return Err(AppError::invalid(format!(
                "invalid title: use at most {MAX_TITLE} characters without control characters"
            )));
        }
        created.title = Some(title);
    }
    let handle = daemon
        .store
        .create_run(NewRun {
            id: octl_proto::ids::new_ulid(),
            created,
            initial: Vec::new(),
            files: Vec::new(),
        })
        .await?;
    Ok(handle.summary())
}

pub fn list(
    daemon: &Arc<Daemon>,
    p: RunListParams,
) -> Result<Prewritten<Vec<RunSummary>>, AppError> {
    let statuses = match &p.status {
        None => None,
        Some(given) => {
            let names = given.names();
            if names.is_empty() {
                return Err(AppError::invalid(format!(
                    "invalid status []: give at least one of {}",
                    ListedStatus::ALL.map(ListedStatus::as_str).join(", ")
                )));
            }
            let parsed = names
                .iter()
                .map(|s| {
                    ListedStatus::parse(s).ok_or_else(|| {
                        AppError::invalid(format!(
                            "invalid status {s:?}: use one of {}",
                            ListedStatus::ALL.map(ListedStatus::as_str).join(", ")
                        ))
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            Some(parsed)
        }
    };
    let repo = match &p.repo {
        None => None,
        Some(r) if !std::path::Path::new(r).is_absolute() => {
            return Err(AppError::invalid(format!(
                "invalid repo {r:?}: give an absolute path (the repository or a directory in it)"
            )))
        }
        // As the runs record it (spawn canonicalizes); a repository gone from disk keeps
        // the path as given.
        Some(r) => Some(std::fs::canonicalize(r).unwrap_or_else(|_| r.into())),
    };
    if p.limit == Some(0) {
        return Err(AppError::invalid(
            "invalid limit 0: give a whole number of runs, at least 1",
        ));
    }
    daemon
        .store
        .list_json(&ListFilter {
            statuses,
            repo,
            limit: p.limit,
        })
        .map(Prewritten::new)
}

pub fn show(daemon: &Arc<Daemon>, p: RunParams) -> Result<RunShown, AppError> {
    let handle = daemon.store.resolve("run", &p.run)?;
    if handle.corrupt().is_some() {
        return show_corrupt(&handle);
    }
    let view = handle.view();
    // Read-time facts, not projections: how long each node has run, what it waits for.
    let now = crate::store::writer::now_ms();
    let branches = branches_of(&view);
    let nodes = view
        .nodes
        .iter()
        .map(|node| shown(daemon, &handle.id, &view, node, now, branches.as_ref()))
        .collect();
    Ok(RunShown {
        manifest: view.manifest.clone(),
        nodes,
        discussions: view.discussions.clone(),
        spinoffs: view.spinoffs.clone(),
        permissions: view.permissions.clone(),
        allowed: view.allowed.clone(),
        judged: view.judged.clone(),
        judge_failed: view.judge_failed.clone(),
        corrupt: None,
    })
}

/// The branches of the run's repository (one `git for-each-ref`), to mark the ones a node
/// names that are gone; `None` when there is no repository to ask (nothing is marked).
pub fn branches_of(view: &octl_proto::projection::RunDetail) -> Option<BTreeSet<String>> {
    if view.nodes.iter().all(|n| n.branch.is_none()) {
        return None;
    }
    let repo = view.manifest.repo.as_deref()?;
    let out = crate::git::Git::new(repo)
        .plumbing(&["for-each-ref", "--format=%(refname:strip=2)", "refs/heads/"])
        .ok()?;
    Some(out.lines().map(str::to_string).collect())
}

/// A node as `run.show` and `node.show` answer it: its projection and the read-time facts
/// (how long it has run, what it waits for, what its agent holds, whether its worktree and
/// branch are still there: `branches`, from [`branches_of`]) at `now`.
pub fn shown(
    daemon: &Arc<Daemon>,
    run: &str,
    view: &octl_proto::projection::RunDetail,
    node: &octl_proto::state::Node,
    now: u64,
    branches: Option<&BTreeSet<String>>,
) -> NodeShown {
    let started = node
        .started_at
        .as_deref()
        .and_then(octl_proto::time::parse_millis);
    let until = node
        .finished_at
        .as_deref()
        .and_then(octl_proto::time::parse_millis)
        .unwrap_or(now);
    let mut waiting_for = crate::engine::schedule::waiting_for(view, node);
    // A start turned away (live nodes hold every port, the runner has no room) waits
    // for what it lacked; a start a crash cut short, for its runner's place.
    let unstarted = matches!(
        node.state,
        NodeState::Pending | NodeState::Paused | NodeState::Starting
    );
    if let Some(what) = daemon.engine.waits_for(run, &node.id).filter(|_| unstarted) {
        waiting_for.push(what.to_string());
    }
    // A live node may wait too: for its turn in its runner's queue, for its place.
    if let Some(q) = &node.queued {
        waiting_for.push(match &q.reason {
            Some(r) => format!("its turn in the runner's queue ({r})"),
            None => "its turn in the runner's queue".to_string(),
        });
    }
    // A done node of a run that holds its work for review waits for a person's.
    if node.state == NodeState::Done && view.manifest.settings.holds_for_review() && !node.approved
    {
        waiting_for.push(format!(
            "a person's review (`orchestratectl review {run} --node {} --approve`, or --comment to send it back)",
            node.id
        ));
    }
    if let Some(l) = node.lost.as_ref().filter(|_| node.state == NodeState::Lost) {
        waiting_for.push(format!("its place to answer (lost since {})", l.since));
    }
    // What its agent's processes hold now, as last measured (a live local agent).
    let memory = daemon
        .engine
        .observed
        .seen(run, &node.id)
        .filter(|_| node.state.is_alive())
        .map(|seen| Memory {
            resident_bytes: seen.resident,
            peak_bytes: seen.peak,
            limit_bytes: seen.limit,
        });
    let made = !matches!(
        node.state,
        NodeState::Pending | NodeState::Ready | NodeState::Blocked | NodeState::Starting
    );
    NodeShown {
        node: node.clone(),
        elapsed_s: started.map(|s| until.saturating_sub(s) / 1000),
        waiting_for,
        memory,
        // Before a start they are not made yet (a retried node's are made again).
        worktree_removed: made
            && node
                .worktree
                .as_deref()
                .is_some_and(|w| !std::path::Path::new(w).exists()),
        branch_removed: made
            && match (&node.branch, branches) {
                (Some(b), Some(all)) => !all.contains(b),
                _ => false,
            },
    }
}

/// A corrupt run as far as its log can be read: the state the lines before the bad one fold
/// to (its status stays `corrupt`), and `corrupt`: where the log is, which line is bad and
/// why, how many events were readable and the last of them.
fn show_corrupt(handle: &RunHandle) -> Result<RunShown, AppError> {
    let mut out = RunShown::from((*handle.view()).clone());
    let salvage = match crate::store::corrupt::salvage(&handle.dir) {
        Ok(s) => s,
        Err(e) => {
            out.corrupt = Some(CorruptLog {
                error: Some(format!("cannot read its log: {e}")),
                ..CorruptLog::default()
            });
            return Ok(out);
        }
    };
    if let Some(state) = &salvage.state {
        let error = out.manifest.error.take();
        out = projection::detail(state).into();
        out.manifest.status = ListedStatus::Corrupt;
        out.manifest.error = error;
    }
    out.corrupt = Some(CorruptLog {
        error: None,
        log: Some(salvage.log.display().to_string()),
        line: salvage.bad_line,
        reason: Some(salvage.reason),
        readable_events: salvage.readable,
        events: salvage.last,
    });
    Ok(out)
}

/// Moves a corrupt run's directory to `$OCTL_HOME/corrupt/<RUN>`; the daemon forgets it.
pub fn quarantine(daemon: &Arc<Daemon>, p: RunParams) -> Result<Quarantined, AppError> {
    let handle = daemon.store.resolve("run", &p.run)?;
    let dest = daemon.store.quarantine(&handle)?;
    Ok(Quarantined {
        run: handle.id.clone(),
        moved_to: dest.display().to_string(),
    })
}

pub async fn rebuild(daemon: &Arc<Daemon>, p: RunParams) -> Result<RebuildResult, AppError> {
    let handle = daemon.store.resolve("run", &p.run)?;
    daemon.store.rebuild(&handle).await
}

pub async fn cancel(daemon: &Arc<Daemon>, p: CancelParams) -> Result<RunSummary, AppError> {
    let handle = daemon.store.resolve("run", &p.run)?;
    handle.ensure_writable()?;
    crate::engine::cancel::cancel(daemon, &handle, p.discard).await?;
    Ok(handle.summary())
}

pub async fn retry(daemon: &Arc<Daemon>, p: RetryParams) -> Result<RunSummary, AppError> {
    octl_proto::ids::validate_node_id("node", &p.node)?;
    let handle = daemon.store.resolve("run", &p.run)?;
    handle.ensure_writable()?;
    if p.resume {
        crate::engine::retry::resume(daemon, &handle, &p.node, "run retry --resume").await?;
    } else {
        crate::engine::retry::retry(daemon, &handle, &p.node).await?;
    }
    Ok(handle.summary())
}

pub async fn budget(daemon: &Arc<Daemon>, p: BudgetParams) -> Result<RunSummary, AppError> {
    let handle = daemon.store.resolve("run", &p.run)?;
    handle.ensure_writable()?;
    crate::engine::budget::change(daemon, &handle, p.add_usd, p.set_usd).await?;
    Ok(handle.summary())
}

impl Handle for method::RunList {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        list(daemon, p)
    }
}

impl Handle for method::RunCreate {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        create(daemon, p).await
    }
}

impl Handle for method::RunShow {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        // It asks git which branches are left: off the async threads.
        let d = daemon.clone();
        crate::engine::blocking(move || show(&d, p)).await
    }
}

impl Handle for method::RunRebuild {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        rebuild(daemon, p).await
    }
}

impl Handle for method::RunQuarantine {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        quarantine(daemon, p)
    }
}

impl Handle for method::RunCancel {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        cancel(daemon, p).await
    }
}

impl Handle for method::RunRetry {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        retry(daemon, p).await
    }
}

impl Handle for method::RunBudget {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        budget(daemon, p).await
    }
}

impl Handle for method::RunPick {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        octl_proto::ids::validate_node_id("node", &p.node)?;
        let handle = daemon.store.resolve("run", &p.run)?;
        crate::engine::attempts::pick(daemon, &handle, &p.node).await?;
        let judged = handle.view().judged.clone().ok_or_else(|| {
            AppError::internal("the pick was recorded but the run shows no judgement")
        })?;
        Ok(octl_proto::rpc::Picked {
            run: handle.id.clone(),
            judged,
        })
    }
}
