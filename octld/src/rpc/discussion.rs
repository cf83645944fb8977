//! `discussion.ask`, `discussion.list`, `discussion.answer`: questions agents put to humans.
//! Ids are lowercase ULIDs, unique across runs, so an answer needs only the id.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use octl_proto::ids::validate_node_id;
use octl_proto::rpc::{AnswerParams, AskParams, ListParams};
use octl_proto::{ids, Actor, AppError, ErrorKind};

use super::{params, to_value};
use crate::daemon::Daemon;
use crate::store::{Draft, RunHandle};

const MAX_TITLE: usize = 500;
const MAX_BODY: usize = 16 * 1024;

pub fn text(field: &str, value: &str, max: usize) -> Result<(), AppError> {
    if value.trim().is_empty() || value.len() > max {
        return Err(AppError::invalid(format!(
            "invalid {field}: give 1 to {max} bytes of text"
        )));
    }
    Ok(())
}

pub fn new_id() -> String {
    ids::new_ulid().to_ascii_lowercase()
}

/// The runs to look in: one (by id or prefix) or all.
pub fn runs(daemon: &Daemon, run: Option<&str>) -> Result<Vec<Arc<RunHandle>>, AppError> {
    match run {
        Some(r) => Ok(vec![daemon.store.resolve("run", r)?]),
        None => Ok(daemon.store.handles()),
    }
}

pub async fn ask(daemon: &Arc<Daemon>, p: Value) -> Result<Value, AppError> {
    let p: AskParams = params(p)?;
    text("title", &p.title, MAX_TITLE)?;
    if let Some(b) = &p.body {
        text("body", b, MAX_BODY)?;
    }
    let mut data = Map::new();
    data.insert("title".into(), json!(p.title));
    if let Some(b) = p.body {
        data.insert("body".into(), json!(b));
    }
    open_record(daemon, &p.run, p.node, "discussion.opened", data).await
}

/// Appends a new record (a question, a proposal) under a fresh id, said by the node's agent
/// when a node is named, else by a human; answers `{id, run}`.
pub async fn open_record(
    daemon: &Arc<Daemon>,
    run: &str,
    node: Option<String>,
    kind: &str,
    mut data: Map<String, Value>,
) -> Result<Value, AppError> {
    if let Some(n) = &node {
        validate_node_id("node", n)?;
    }
    let handle = daemon.store.resolve("run", run)?;
    let id = new_id();
    data.insert("id".into(), json!(id));
    let actor = if node.is_some() {
        Actor::Agent
    } else {
        Actor::Human
    };
    let draft = Draft {
        node,
        kind: kind.into(),
        actor,
        data,
        idempotency_key: None,
    };
    daemon.store.append(&handle, draft, true).await?;
    Ok(json!({"id": id, "run": handle.id}))
}

fn with_run(run: &str, record: &impl serde::Serialize) -> Result<Value, AppError> {
    let mut v = to_value(record)?;
    v["run"] = json!(run);
    Ok(v)
}

pub fn list(daemon: &Arc<Daemon>, p: Value) -> Result<Value, AppError> {
    let p: ListParams = params(p)?;
    let mut out = Vec::new();
    for h in runs(daemon, p.run.as_deref())? {
        for d in h
            .view()
            .discussions
            .iter()
            .filter(|d| p.open.is_none_or(|o| d.open == o))
        {
            out.push(with_run(&h.id, d)?);
        }
    }
    Ok(Value::Array(out))
}

pub async fn answer(daemon: &Arc<Daemon>, p: Value) -> Result<Value, AppError> {
    let p: AnswerParams = params(p)?;
    text("text", &p.text, MAX_BODY)?;
    let (handle, disc) = daemon
        .store
        .handles()
        .into_iter()
        .find_map(|h| {
            let d = h
                .view()
                .discussions
                .iter()
                .find(|d| d.id == p.id)
                .cloned()?;
            Some((h, d))
        })
        .ok_or_else(|| {
            AppError::not_found(format!("no discussion {:?}", p.id))
                .with_hint("list them with `orchestratectl discussion list --open`")
        })?;
    if !disc.open {
        // The same answer again is a retry: report it. Another answer is refused.
        if disc.answer.as_deref() == Some(p.text.as_str()) {
            return with_run(&handle.id, &disc);
        }
        return Err(AppError::new(
            ErrorKind::InvalidTransition,
            format!(
                "discussion {:?} is already answered: {:?}",
                p.id,
                disc.answer.clone().unwrap_or_default()
            ),
        ));
    }
    let draft = Draft {
        node: disc.node.clone(),
        kind: "discussion.resolved".into(),
        actor: Actor::Human,
        data: json!({"id": p.id, "answer": p.text})
            .as_object()
            .cloned()
            .unwrap_or_default(),
        idempotency_key: None,
    };
    daemon.store.append(&handle, draft, true).await?;
    let updated = handle
        .view()
        .discussions
        .iter()
        .find(|d| d.id == p.id)
        .cloned();
    with_run(&handle.id, &updated)
}
