//! `node.done`, `node.fail`, `node.progress`: what an agent says about its own node; and
//! `node.send`, `node.screen`: a line of input to a live interactive agent, its screen now.
//!
//! An agent whose outcome is read from its output when it ends (Claude Code in stream-json)
//! has its done/fail report held as a `node.progress` with `report`; the supervisor turns it
//! into `node.done`/`node.failed`, with the session's cost and turns, once the process ends.

use std::sync::Arc;

use octl_proto::event::{NodeDone, NodeFailed, NodeProgress, Report as Held};
use octl_proto::ids::validate_node_id;
use octl_proto::method;
use octl_proto::rpc::AppendResult;
use octl_proto::rpc::{
    Attach, DiffShown, LogShown, NodeAttachParams, NodeDiffParams, NodeLogParams, NodeReportParams,
    NodeScreenParams, NodeSendParams, NodeSent, Screen,
};
use octl_proto::{Actor, AppError, ErrorKind, NodeState, RunKind};

use super::Handle;
use crate::daemon::Daemon;
use crate::engine::blocking;
use crate::runner::{AgentHandle, Runner};
use crate::store::Draft;

const MAX_TEXT: usize = 4096;

fn text(field: &str, v: Option<String>, required: bool) -> Result<Option<String>, AppError> {
    match v {
        None if required => Err(AppError::invalid(format!(
            "missing {field}: give a short text"
        ))),
        Some(t) if t.len() > MAX_TEXT || t.trim().is_empty() => Err(AppError::invalid(format!(
            "invalid {field}: give 1 to {MAX_TEXT} bytes of text"
        ))),
        other => Ok(other),
    }
}

/// Which report an agent makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Report {
    Done,
    Fail,
    Progress,
}

pub async fn report(
    daemon: &Arc<Daemon>,
    method: Report,
    p: NodeReportParams,
) -> Result<AppendResult, AppError> {
    validate_node_id("node", &p.node)?;
    let handle = daemon.store.resolve("run", &p.run)?;
    let (message, reason) = match method {
        Report::Fail => (
            text("message", p.message, false)?,
            text("reason", p.reason, true)?,
        ),
        Report::Progress => (
            text("message", p.message, true)?,
            text("reason", p.reason, false)?,
        ),
        _ => (
            text("message", p.message, false)?,
            text("reason", p.reason, false)?,
        ),
    };
    let node = handle.view().nodes.iter().find(|n| n.id == p.node).cloned();
    let held = node
        .as_ref()
        .is_some_and(|n| n.report_on_exit && n.state.is_alive())
        && method != Report::Progress;
    // A held report waits in a node.progress until the agent's process exits.
    let progress = |report| NodeProgress {
        message: message.clone(),
        reason: reason.clone(),
        report,
        ..NodeProgress::default()
    };
    let node = Some(p.node);
    let draft = match (method, held) {
        (Report::Done, true) => Draft::said(node, Actor::Agent, progress(Some(Held::Done))),
        (Report::Fail, true) => Draft::said(node, Actor::Agent, progress(Some(Held::Failed))),
        (Report::Done, false) => Draft::said(
            node,
            Actor::Agent,
            NodeDone {
                message,
                reason,
                ..NodeDone::default()
            },
        ),
        (Report::Fail, false) => Draft::said(
            node,
            Actor::Agent,
            NodeFailed {
                message,
                reason,
                ..NodeFailed::default()
            },
        ),
        _ => Draft::said(node, Actor::Agent, progress(None)),
    };
    daemon.store.append(&handle, draft, true).await
}

impl Handle for method::NodeProgress {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        let p = NodeReportParams {
            run: p.run,
            node: p.node,
            message: Some(p.message),
            reason: p.reason,
        };
        report(daemon, Report::Progress, p).await
    }
}

impl Handle for method::NodeDone {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        report(daemon, Report::Done, p).await
    }
}

impl Handle for method::NodeFail {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        let p = NodeReportParams {
            run: p.run,
            node: p.node,
            message: p.message,
            reason: Some(p.reason),
        };
        report(daemon, Report::Fail, p).await
    }
}

impl Handle for method::NodeShow {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        validate_node_id("node", &p.node)?;
        let handle = daemon.store.resolve("run", &p.run)?;
        let view = handle.view();
        let node = view.nodes.iter().find(|n| n.id == p.node).ok_or_else(|| {
            AppError::not_found(format!("run {} has no node {:?}", handle.id, p.node))
        })?;
        let now = crate::store::writer::now_ms();
        let (d, node) = (daemon.clone(), node.clone());
        // It asks git which branches are left: off the async threads.
        crate::engine::blocking(move || {
            let branches = super::run::branches_of(&view);
            Ok(super::run::shown(
                &d,
                &handle.id,
                &view,
                &node,
                now,
                branches.as_ref(),
            ))
        })
        .await
    }
}

/// Largest line `node.send` types.
const MAX_LINE: usize = 4096;
/// Lines `node.screen` returns unless told otherwise, and at most.
const SCREEN_LINES: u32 = 200;
const SCREEN_LINES_MAX: u32 = 10_000;

/// The live agent of `node`: its run, the node's agent handle, and the runner it runs on.
/// Refused, naming the state, when the node is not running or waiting (`interactive`: or its
/// agent reads no input — only a `code` run's agent works with a human).
fn live_agent(
    daemon: &Arc<Daemon>,
    run: &str,
    node: &str,
    interactive: bool,
) -> Result<(String, AgentHandle, Arc<dyn Runner>), AppError> {
    validate_node_id("node", node)?;
    let handle = daemon.store.resolve("run", run)?;
    let view = handle.view();
    let Some(n) = view.nodes.iter().find(|n| n.id == node) else {
        return Err(
            AppError::not_found(format!("run {} has no node {node:?}", handle.id))
                .with_hint(format!("see `orchestratectl run show {}`", handle.id)),
        );
    };
    let live = matches!(n.state, NodeState::Running | NodeState::Waiting);
    let (true, Some(pane)) = (live, n.pane.as_ref()) else {
        return Err(AppError::new(
            ErrorKind::InvalidTransition,
            format!(
                "node {node} of run {} is {}: only a running or waiting node's agent takes input or has a screen",
                handle.id,
                n.state.as_str()
            ),
        ));
    };
    if interactive && view.manifest.kind != Some(RunKind::Code) {
        let kind = view.manifest.kind.map_or("unknown", RunKind::as_str);
        return Err(AppError::new(
            ErrorKind::InvalidTransition,
            format!(
                "node {node} of run {} is {} in a {kind} run, whose agent works alone and reads no input: only a code run's agent is interactive",
                handle.id,
                n.state.as_str()
            ),
        ));
    }
    let runner = daemon.runners.of(n.runner.as_deref())?;
    Ok((handle.id.clone(), AgentHandle::new(pane.clone()), runner))
}

/// Types one line into an interactive agent. Not recorded in the run's log: the line may
/// hold a secret (the log is permanent and readable by anyone who can read the home), and it
/// changes nothing the daemon decides — like typing after `run attach`; what the agent does
/// with it, it reports itself. A send racing the agent's end lands in the pane or is refused
/// by the runner's check that the handle still is this node's.
pub async fn send(daemon: &Arc<Daemon>, p: NodeSendParams) -> Result<NodeSent, AppError> {
    let bad = |why: &str| {
        AppError::invalid(format!(
            "invalid text: {why}; give one line of 1 to {MAX_LINE} bytes without newlines or control characters (tab allowed)"
        ))
    };
    if p.text.is_empty() {
        return Err(bad("it is empty"));
    }
    if p.text.len() > MAX_LINE {
        return Err(bad(&format!("it is {} bytes", p.text.len())));
    }
    if let Some(c) = p.text.chars().find(|c| c.is_control() && *c != '\t') {
        return Err(bad(&format!("it holds the control character {c:?}")));
    }
    let (run, agent, runner) = live_agent(daemon, &p.run, &p.node, true)?;
    let (r, n, text) = (run.clone(), p.node.clone(), p.text.clone());
    let sent = blocking(move || runner.send_line(&r, &n, &agent, &text)).await?;
    if !sent {
        return Err(AppError::new(
            ErrorKind::InvalidTransition,
            format!(
                "node {} of run {run} has no agent any more (it just ended): nothing was typed",
                p.node
            ),
        ));
    }
    Ok(NodeSent {
        run,
        node: p.node,
        bytes: p.text.len(),
    })
}

/// The last lines of a live node's agent terminal, for a preview: refused, like a send,
/// once the handle is no longer that node's agent.
pub async fn screen(daemon: &Arc<Daemon>, p: NodeScreenParams) -> Result<Screen, AppError> {
    let lines = p.lines.unwrap_or(SCREEN_LINES);
    if !(1..=SCREEN_LINES_MAX).contains(&lines) {
        return Err(AppError::invalid(format!(
            "invalid lines {lines}: give 1 to {SCREEN_LINES_MAX}"
        )));
    }
    let (run, agent, runner) = live_agent(daemon, &p.run, &p.node, false)?;
    let (r, n) = (run.clone(), p.node.clone());
    let captured = blocking(move || capture_of(&*runner, &r, &n, &agent)).await?;
    let Some(captured) = captured else {
        return Err(AppError::new(
            ErrorKind::InvalidTransition,
            format!(
                "node {} of run {run} has no agent any more (it just ended): no screen to show",
                p.node
            ),
        ));
    };
    Ok(Screen {
        run,
        node: p.node,
        screen: last_lines(&captured, lines as usize),
    })
}

/// The screen of the agent `handle` if it still is `node` of `run` (as
/// [`Runner::send_line`] checks): a handle the log recorded may have been reused by a
/// restarted host for another agent, whose screen is not this node's to show. `None` if it
/// was not.
fn capture_of(
    runner: &dyn Runner,
    run: &str,
    node: &str,
    handle: &AgentHandle,
) -> Result<Option<String>, AppError> {
    let owned = runner
        .observe()?
        .agents
        .iter()
        .any(|a| &a.handle == handle && a.run == run && a.node == node);
    if !owned {
        return Ok(None);
    }
    runner.capture(handle).map(Some)
}

/// The last `n` lines of `text` after its trailing blank ones, each with its newline.
fn last_lines(text: &str, n: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    let end = all
        .iter()
        .rposition(|l| !l.trim().is_empty())
        .map_or(0, |i| i + 1);
    let start = end.saturating_sub(n);
    all[start..end].iter().map(|l| format!("{l}\n")).collect()
}

impl Handle for method::NodeSend {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        send(daemon, p).await
    }
}

impl Handle for method::NodeScreen {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        screen(daemon, p).await
    }
}

/// The command a terminal runs to reach `node`'s agent, from the runner it runs on. Refused,
/// naming the state, when the node has no agent to show (not started yet, or its place is
/// gone: merged, cancelled, cleaned up).
pub async fn attach(daemon: &Arc<Daemon>, p: NodeAttachParams) -> Result<Attach, AppError> {
    validate_node_id("node", &p.node)?;
    let handle = daemon.store.resolve("run", &p.run)?;
    let view = handle.view();
    let Some(n) = view.nodes.iter().find(|n| n.id == p.node) else {
        return Err(
            AppError::not_found(format!("run {} has no node {:?}", handle.id, p.node))
                .with_hint(format!("see `orchestratectl run show {}`", handle.id)),
        );
    };
    let gone = n.cleaned || matches!(n.state, NodeState::Merged | NodeState::Cancelled);
    let agent = match &n.pane {
        Some(pane) if !gone => crate::runner::AgentHandle::new(pane.clone()),
        _ => {
            return Err(AppError::new(
                ErrorKind::InvalidTransition,
                format!(
                    "node {} of run {} is {}: {}",
                    n.id,
                    handle.id,
                    n.state.as_str(),
                    if gone {
                        "its agent's place is gone"
                    } else {
                        "its agent has not started"
                    }
                ),
            ))
        }
    };
    let (d, runner) = (daemon.clone(), n.runner.clone());
    let (run, node) = (handle.id.clone(), p.node);
    let (r, nd) = (run.clone(), node.clone());
    let argv = blocking(move || d.runners.of(runner.as_deref())?.attach(&r, &nd, &agent)).await?;
    Ok(Attach { run, node, argv })
}

impl Handle for method::NodeAttach {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        attach(daemon, p).await
    }
}

impl Handle for method::NodePermissionAsk {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        crate::engine::permissions::ask(daemon, p).await
    }
}

impl Handle for method::NodePermissionWait {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        crate::engine::permissions::wait(daemon, p).await
    }
}

impl Handle for method::NodeReview {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        crate::engine::review::review(daemon, p).await
    }
}

impl Handle for method::NodePermissionDecide {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        crate::engine::permissions::decide(daemon, p).await
    }
}

/// Files git does not know yet that `node.diff` shows as new files: at most this many, of at
/// most [`UNTRACKED_MAX_BYTES`] each (what a merge of the snapshot would bring).
const UNTRACKED_MAX: usize = 50;
const UNTRACKED_MAX_BYTES: u64 = 256 * 1024;

/// The node's projection, or `not_found` naming the run's nodes' command.
fn node_of(
    daemon: &Arc<Daemon>,
    run: &str,
    node: &str,
) -> Result<(Arc<crate::store::RunHandle>, octl_proto::state::Node), AppError> {
    validate_node_id("node", node)?;
    let handle = daemon.store.resolve("run", run)?;
    let found = handle.view().nodes.iter().find(|n| n.id == node).cloned();
    match found {
        Some(n) => Ok((handle, n)),
        None => Err(
            AppError::not_found(format!("run {} has no node {node:?}", handle.id))
                .with_hint(format!("see `orchestratectl run show {}`", handle.id)),
        ),
    }
}

pub async fn diff(daemon: &Arc<Daemon>, p: NodeDiffParams) -> Result<DiffShown, AppError> {
    if let Some(since) = &p.since {
        if !(4..=64).contains(&since.len()) || !since.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(AppError::invalid(format!(
                "invalid since {since:?}: give a review round's tip, 4 to 64 hex digits"
            )));
        }
    }
    let (handle, node) = node_of(daemon, &p.run, &p.node)?;
    let view = handle.view();
    let base = view
        .manifest
        .settings
        .diff_base(view.manifest.kind, view.manifest.base.as_deref())
        .ok_or_else(|| {
            AppError::new(
                ErrorKind::InvalidTransition,
                format!("run {} has no base branch to compare with", handle.id),
            )
        })?;
    let gone = || {
        AppError::new(
            ErrorKind::InvalidTransition,
            format!(
                "node {} of run {} is {}: its worktree is gone (`orchestratectl recover {} --node {}` brings its snapshot back)",
                node.id,
                handle.id,
                node.state.as_str(),
                handle.id,
                node.id
            ),
        )
    };
    let worktree = match &node.worktree {
        Some(w) if std::path::Path::new(w).is_dir() => std::path::PathBuf::from(w),
        _ => return Err(gone()),
    };
    let (run, node_id) = (handle.id.clone(), node.id.clone());
    blocking(move || {
        let git = crate::git::Git::new(&worktree);
        let failed = |e: crate::git::GitError| AppError::new(ErrorKind::IoError, e.to_string());
        let from = match &p.since {
            Some(tip) => git.resolve_commit(tip).map_err(|_| {
                AppError::invalid(format!(
                    "since: {tip} is not a commit of run {run}'s repository"
                ))
            })?,
            None => git
                .plumbing(&["merge-base", &base, "HEAD"])
                .map_err(failed)?
                .trim()
                .to_string(),
        };
        let mut diff = git
            .plumbing(&["diff", "--no-color", "--no-ext-diff", &from])
            .map_err(failed)?;
        for path in git
            .untracked_files()
            .map_err(failed)?
            .iter()
            .take(UNTRACKED_MAX)
        {
            let small = std::fs::symlink_metadata(worktree.join(path))
                .is_ok_and(|m| m.is_file() && m.len() <= UNTRACKED_MAX_BYTES);
            if small {
                diff.push_str(&git.diff_new_file(path).map_err(failed)?);
            }
        }
        let truncated = diff.len() > octl_proto::rpc::DIFF_MAX_BYTES;
        if truncated {
            let cut = diff[..octl_proto::rpc::DIFF_MAX_BYTES]
                .rfind('\n')
                .map_or(0, |i| i + 1);
            diff.truncate(cut);
        }
        Ok(DiffShown {
            run,
            node: node_id,
            base,
            from,
            diff,
            truncated,
        })
    })
    .await
}

pub async fn log(daemon: &Arc<Daemon>, p: NodeLogParams) -> Result<LogShown, AppError> {
    use std::io::{Read, Seek, SeekFrom};
    let (handle, node) = node_of(daemon, &p.run, &p.node)?;
    let logs = handle.dir.join("logs");
    // An interactive agent's pane is its log; an autonomous one writes its own.
    let pane = logs.join(format!("{}.pane.log", node.id));
    let path = if pane.exists() {
        pane
    } else {
        logs.join(format!("{}.log", node.id))
    };
    let (run, node_id) = (handle.id.clone(), node.id);
    blocking(move || {
        let mut f = std::fs::File::open(&path).map_err(|e| {
            AppError::not_found(format!(
                "node {node_id} of run {run} has no log at {}: {e}",
                path.display()
            ))
        })?;
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        let start = len.saturating_sub(octl_proto::rpc::LOG_TAIL_BYTES);
        let mut buf = Vec::new();
        f.seek(SeekFrom::Start(start))
            .and_then(|_| f.read_to_end(&mut buf))
            .map_err(|e| {
                AppError::new(
                    ErrorKind::IoError,
                    format!("cannot read {}: {e}", path.display()),
                )
            })?;
        let mut lines = octl_proto::text::text_lines(&buf);
        if start > 0 && !lines.is_empty() {
            // The first line is cut.
            lines.remove(0);
        }
        let mut log = lines.join("\n");
        if !log.is_empty() {
            log.push('\n');
        }
        Ok(LogShown {
            run,
            node: node_id,
            path: path.display().to_string(),
            log,
            truncated: start > 0,
        })
    })
    .await
}

impl Handle for method::NodeDiff {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        diff(daemon, p).await
    }
}

impl Handle for method::NodeLog {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        log(daemon, p).await
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{capture_of, last_lines};
    use crate::runner::fake::FakeRunner;
    use crate::runner::{AgentSpec, Runner};

    #[test]
    fn a_screen_is_shown_only_while_the_handle_still_is_that_nodes_agent() {
        let r = FakeRunner::new();
        let argv = vec!["true".to_string()];
        let start = |run, node| {
            r.start(&AgentSpec {
                run,
                node,
                cwd: Path::new("/"),
                env: &[],
                argv: &argv,
                log: Path::new("/dev/null"),
                first: false,
                attempt: 0,
                memory_max: None,
                pids_max: None,
                place: None,
            })
            .unwrap()
            .handle
        };
        let a = start("r1", "a");
        let b = start("r2", "b");
        assert_eq!(
            capture_of(&r, "r1", "a", &a).unwrap().as_deref(),
            Some("screen of r1/a\n")
        );
        // A handle that is another agent's now (a restarted host reuses them) shows nothing.
        assert_eq!(capture_of(&r, "r1", "a", &b).unwrap(), None);
        assert_eq!(capture_of(&r, "r1", "b", &a).unwrap(), None);
        assert!(r.stop("r1", "a", &a).unwrap());
        assert_eq!(capture_of(&r, "r1", "a", &a).unwrap(), None, "gone");
    }

    #[test]
    fn the_screen_is_its_last_lines_without_the_blank_tail() {
        assert_eq!(last_lines("a\nb\nc\n\n  \n", 2), "b\nc\n");
        assert_eq!(last_lines("a\nb\n", 10), "a\nb\n");
        assert_eq!(last_lines("\n\n", 3), "");
    }
}
