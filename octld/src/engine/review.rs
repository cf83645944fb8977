//! `review`: a person's review of a node's work goes back to its agent, or accepts it.
//!
//! One decision, then the acts: `node.review` is written first (the reducer takes it only
//! from a state the review can act on, so of two reviews at once the second is refused and
//! changes nothing), naming how it reaches the agent, chosen here from what is true now:
//! `typed` into a code run's live interactive session (the node is `running` again); else
//! `resumed`, Claude Code's conversation continued (`claude --resume`) in the same worktree
//! and branch; else a new `attempt` there with the review after the task in its prompt. Both
//! make the node `pending`, and the engine starts it as any start, with
//! `$OCTL_REVIEW_FILE` (see [`crate::agents::review`]). Once it reports done again it is
//! gated and merged as before. An approval merges a code run's done node (`merge RUN`).

use std::sync::Arc;

use octl_proto::event::NodeReview;
use octl_proto::ids::validate_node_id;
use octl_proto::rpc::{MergeParams, ReviewParams, Reviewed, REVIEW_COMMENT_MAX, REVIEW_TEXT_MAX};
use octl_proto::state::{Node, ReviewWay};
use octl_proto::{Actor, AppError, ErrorKind, NodeState, RunKind};

use super::blocking;
use crate::agents::{self, ProfileKind};
use crate::daemon::Daemon;
use crate::git::Git;
use crate::runner::AgentHandle;
use crate::store::{Draft, RunHandle};

/// The longest line typed into a session (as `node.send` takes).
const LINE_MAX: usize = 4096;

pub async fn review(daemon: &Arc<Daemon>, p: ReviewParams) -> Result<Reviewed, AppError> {
    check(&p)?;
    let handle = daemon.store.resolve("run", &p.run)?;
    handle.ensure_writable()?;
    let view = handle.view();
    let node = pick(&handle, &view.nodes, p.node.as_deref())?;
    let code = view.manifest.kind == Some(RunKind::Code);
    let head = match (&view.manifest.repo, &node.branch) {
        (Some(repo), Some(branch)) if !node.cleaned => {
            let (repo, rev) = (repo.clone(), format!("refs/heads/{branch}"));
            blocking(move || Ok(Git::new(std::path::Path::new(&repo)).resolve_commit(&rev)?))
                .await
                .ok()
        }
        _ => None,
    };
    let way = if p.approve {
        None
    } else if code && node.state == NodeState::Done && alive(daemon, &handle, &node).await {
        Some(ReviewWay::Typed)
    } else if node.session_id.is_some() && is_claude(daemon, &node) {
        Some(ReviewWay::Resumed)
    } else {
        Some(ReviewWay::Attempt)
    };
    let draft = Draft::said(
        Some(node.id.clone()),
        Actor::Human,
        NodeReview {
            comments: p.comments.clone(),
            text: p.text.clone(),
            by: "human".into(),
            way,
            head,
            approve: p.approve.then_some(true),
        },
    );
    daemon.store.append(&handle, draft, false).await?;
    let after = handle.view();
    let review = after
        .nodes
        .iter()
        .find(|n| n.id == node.id)
        .and_then(|n| n.reviews.last().cloned())
        .ok_or_else(|| AppError::internal("the review was recorded but is not in the run"))?;
    tracing::info!(run = %handle.id, node = %node.id, round = review.round, way = way.map_or("approve", ReviewWay::as_str), "a review");
    let mut file = None;
    match way {
        Some(ReviewWay::Typed) => {
            let path = agents::review::write(&handle.dir, &node.id, &review)
                .map_err(|e| AppError::internal(format!("writing the review: {e}")))?;
            let line = agents::review::line(&review, &path, LINE_MAX);
            file = Some(path.display().to_string());
            let pane = AgentHandle::new(node.pane.clone().unwrap_or_default());
            let runner = daemon.runners.of(node.runner.as_deref())?;
            let (r, n) = (handle.id.clone(), node.id.clone());
            let typed = blocking(move || runner.send_line(&r, &n, &pane, &line)).await;
            if !matches!(typed, Ok(true)) {
                // Recorded, so the node is running: its agent just ended, and the supervisor
                // records that; the review is given when it is started again.
                return Err(AppError::new(
                    ErrorKind::Internal,
                    format!(
                        "review {} of node {} is recorded, but its agent took no input (it just ended)",
                        review.round, node.id
                    ),
                )
                .with_hint(format!(
                    "once it shows exited, review it again: `orchestratectl review {} --node {} --file {}`",
                    handle.id,
                    node.id,
                    path.display()
                )));
            }
        }
        Some(ReviewWay::Resumed | ReviewWay::Attempt) => {
            file = Some(
                agents::review::file(&handle.dir, &node.id, review.round)
                    .display()
                    .to_string(),
            );
        }
        None if code => {
            crate::rpc::merge::merge(
                daemon,
                MergeParams {
                    run: handle.id.clone(),
                    node: Some(node.id.clone()),
                    accept_failed: false,
                },
            )
            .await?;
        }
        None => {}
    }
    let state = handle
        .view()
        .nodes
        .iter()
        .find(|n| n.id == node.id)
        .map_or(NodeState::Pending, |n| n.state);
    Ok(Reviewed {
        run: handle.id.clone(),
        node: node.id,
        review,
        state,
        file,
    })
}

/// Bad input is refused naming the field, before anything is looked at.
fn check(p: &ReviewParams) -> Result<(), AppError> {
    if let Some(n) = &p.node {
        validate_node_id("node", n)?;
    }
    if p.comments.len() > 100 {
        return Err(AppError::invalid(format!(
            "invalid comments: {} of them; give at most 100 (or put the review in text, --file)",
            p.comments.len()
        )));
    }
    for c in &p.comments {
        let bad = |why: &str| {
            AppError::invalid(format!(
                "invalid comments entry {:?}: {why}; give a remark of 1 to {REVIEW_COMMENT_MAX} bytes, no control characters but newline and tab",
                c.chars().take(60).collect::<String>()
            ))
        };
        if c.trim().is_empty() {
            return Err(bad("it is empty"));
        }
        if c.len() > REVIEW_COMMENT_MAX {
            return Err(bad(&format!("it is {} bytes", c.len())));
        }
        if let Some(ch) = c
            .chars()
            .find(|ch| ch.is_control() && !matches!(ch, '\n' | '\t'))
        {
            return Err(bad(&format!("it holds the control character {ch:?}")));
        }
    }
    if let Some(t) = &p.text {
        if t.trim().is_empty() || t.len() > REVIEW_TEXT_MAX {
            return Err(AppError::invalid(format!(
                "invalid text: {} bytes; give 1 to {REVIEW_TEXT_MAX} bytes of review",
                t.len()
            )));
        }
        if let Some(ch) = t
            .chars()
            .find(|ch| ch.is_control() && !matches!(ch, '\n' | '\t' | '\r'))
        {
            return Err(AppError::invalid(format!(
                "invalid text: it holds the control character {ch:?}; give Markdown text"
            )));
        }
    }
    let asks = !p.comments.is_empty() || p.text.is_some();
    match (p.approve, asks) {
        (true, true) => Err(AppError::invalid(
            "invalid approve: it accepts the work as it is, so it goes without comments or text; ask for changes or approve",
        )),
        (false, false) => Err(AppError::invalid(
            "missing comments: give at least one comment (--comment), a text (--file), or approve",
        )),
        _ => Ok(()),
    }
}

/// The node reviewed: the one named, or the run's only one.
fn pick(handle: &RunHandle, nodes: &[Node], name: Option<&str>) -> Result<Node, AppError> {
    match (name, nodes) {
        (Some(n), _) => nodes.iter().find(|x| x.id == n).cloned().ok_or_else(|| {
            AppError::not_found(format!("run {} has no node {n:?}", handle.id))
                .with_hint(format!("see `orchestratectl run show {}`", handle.id))
        }),
        (None, [one]) => Ok(one.clone()),
        (None, nodes) => Err(AppError::invalid(format!(
            "missing node: run {} has {} nodes; name one with --node ({})",
            handle.id,
            nodes.len(),
            nodes
                .iter()
                .map(|n| n.id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// Whether the node's agent still runs in its window (an interactive one waits there after
/// reporting done).
async fn alive(daemon: &Arc<Daemon>, handle: &RunHandle, node: &Node) -> bool {
    let Some(pane) = node.pane.clone() else {
        return false;
    };
    let Ok(runner) = daemon.runners.of(node.runner.as_deref()) else {
        return false;
    };
    let (run, id) = (handle.id.clone(), node.id.clone());
    blocking(move || runner.owned()).await.is_ok_and(|agents| {
        agents
            .iter()
            .any(|a| a.run == run && a.node == id && a.alive && a.handle.as_str() == pane)
    })
}

/// Whether the node's agent is Claude Code, which can continue its conversation.
fn is_claude(daemon: &Daemon, node: &Node) -> bool {
    daemon.config.get().is_ok_and(|c| {
        agents::resolve(&c, node.agent.as_deref())
            .is_ok_and(|p| matches!(p.kind, ProfileKind::Claude { .. }))
    })
}
