//! `node.done`, `node.fail`, `node.progress`: what an agent says about its own node.
//!
//! An agent whose outcome is read from its output when it ends (Claude Code in stream-json)
//! has its done/fail report held as a `node.progress` with `report`; the supervisor turns it
//! into `node.done`/`node.failed`, with the session's cost and turns, once the process ends.

use std::sync::Arc;

use serde_json::Value;

use octl_proto::event::{NodeDone, NodeFailed, NodeProgress, Report};
use octl_proto::ids::validate_node_id;
use octl_proto::method::{self, MethodId};
use octl_proto::rpc::NodeReportParams;
use octl_proto::{Actor, AppError};

use super::{to_value, Answer, Handle};
use crate::daemon::Daemon;
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

pub async fn report(
    daemon: &Arc<Daemon>,
    method: MethodId,
    p: NodeReportParams,
) -> Result<Value, AppError> {
    validate_node_id("node", &p.node)?;
    let handle = daemon.store.resolve("run", &p.run)?;
    let (message, reason) = match method {
        MethodId::NodeFail => (
            text("message", p.message, false)?,
            text("reason", p.reason, true)?,
        ),
        MethodId::NodeProgress => (
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
        && method != MethodId::NodeProgress;
    // A held report waits in a node.progress until the agent's process exits.
    let progress = |report| NodeProgress {
        message: message.clone(),
        reason: reason.clone(),
        report,
        ..NodeProgress::default()
    };
    let node = Some(p.node);
    let draft = match (method, held) {
        (MethodId::NodeDone, true) => Draft::said(node, Actor::Agent, progress(Some(Report::Done))),
        (MethodId::NodeFail, true) => {
            Draft::said(node, Actor::Agent, progress(Some(Report::Failed)))
        }
        (MethodId::NodeDone, false) => Draft::said(
            node,
            Actor::Agent,
            NodeDone {
                message,
                reason,
                ..NodeDone::default()
            },
        ),
        (MethodId::NodeFail, false) => Draft::said(
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
    to_value(&daemon.store.append(&handle, draft, true).await?)
}

impl Handle for method::NodeProgress {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Answer, AppError> {
        report(daemon, MethodId::NodeProgress, p)
            .await
            .map(Answer::Value)
    }
}

impl Handle for method::NodeDone {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Answer, AppError> {
        report(daemon, MethodId::NodeDone, p)
            .await
            .map(Answer::Value)
    }
}

impl Handle for method::NodeFail {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Answer, AppError> {
        report(daemon, MethodId::NodeFail, p)
            .await
            .map(Answer::Value)
    }
}
