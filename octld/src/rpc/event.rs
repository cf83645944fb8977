//! `event.append`, `event.list`.

use std::sync::Arc;

use serde_json::Value;

use octl_proto::event::{validate_data, validate_type};
use octl_proto::ids::{validate_idempotency_key, validate_node_id};
use octl_proto::method;
use octl_proto::rpc::AppendResult;
use octl_proto::rpc::{EventAppendParams, EventListParams};
use octl_proto::Event;
use octl_proto::{Actor, AppError, ErrorKind};

use super::Handle;
use crate::daemon::Daemon;
use crate::store::{fault, log, Draft};

/// Largest `event.list` answer; page with `since` for more.
const MAX_LIST: u64 = 100_000;

pub async fn append(daemon: &Arc<Daemon>, p: EventAppendParams) -> Result<AppendResult, AppError> {
    // Validate everything before touching the run, so bad input changes nothing.
    let run_ref = octl_proto::ids::parse_run_ref("run", &p.run)?;
    if let Some(node) = &p.node {
        validate_node_id("node", node)?;
    }
    validate_type(&p.kind)?;
    let data = validate_data(p.data)?;
    if let Some(key) = &p.idempotency_key {
        validate_idempotency_key(key)?;
    }
    let actor = p.actor.unwrap_or_default();
    if actor == Actor::Daemon {
        return Err(AppError::new(
            ErrorKind::Forbidden,
            "invalid actor \"daemon\": clients speak as agent, human or tool",
        ));
    }
    let handle = daemon.store.resolve("run", run_ref.as_str())?;
    if p.kind == "discussion.resolved" {
        let view = handle.view();
        let id = data.get("id").and_then(Value::as_str);
        if let Some(disc) = view
            .discussions
            .iter()
            .find(|d| Some(d.id.as_str()) == id && d.open)
        {
            super::discussion::refuse_merge_question(&handle.id, &view, disc)?;
        }
    }
    let draft = Draft {
        node: p.node,
        kind: p.kind,
        actor,
        data,
        idempotency_key: p.idempotency_key,
    };
    daemon.store.append(&handle, draft, true).await
}

pub async fn list(daemon: &Arc<Daemon>, p: EventListParams) -> Result<Vec<Event>, AppError> {
    let handle = daemon.store.resolve("run", &p.run)?;
    if let Some(reason) = handle.corrupt() {
        return Err(AppError::new(
            ErrorKind::RunCorrupt,
            format!("run {} is corrupt: {reason}", handle.id),
        ));
    }
    let limit = p.limit.unwrap_or(MAX_LIST);
    if limit == 0 || limit > MAX_LIST {
        return Err(AppError::invalid(format!(
            "invalid limit {limit}: use 1 to {MAX_LIST}, and page with since"
        )));
    }
    let since = p.since.unwrap_or(0);
    let upto = handle.committed();
    let path = handle.log_path();
    let read = path.clone();
    let events =
        tokio::task::spawn_blocking(move || log::read_range(&read, since, upto, limit as usize))
            .await
            .map_err(|e| AppError::internal(e.to_string()))?
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::InvalidData => {
                    AppError::internal(format!("cannot read the log: {e}"))
                }
                _ => fault::storage_error("cannot read the log", &path, &e),
            })?;
    Ok(events)
}

impl Handle for method::EventAppend {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        append(daemon, p).await
    }
}

impl Handle for method::EventList {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        list(daemon, p).await
    }
}
