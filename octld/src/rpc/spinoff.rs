//! `spinoff.propose`, `spinoff.list`, `spinoff.accept`, `spinoff.reject`: separate work an
//! agent noticed. Accepting one starts a spinoff run in the parent's repository and base;
//! the two runs name each other (`spinoff.accepted` in the parent, `parent_run` in the child).

use std::sync::Arc;

use serde_json::{json, Map, Value};

use octl_proto::rpc::{AcceptParams, ListParams, ProposeParams, RejectParams};
use octl_proto::{AppError, ErrorKind, RunKind};

use super::discussion::{open_record, runs, text};
use super::{params, to_value};
use crate::daemon::Daemon;
use crate::engine::append;
use crate::engine::spawn::{spawn, SpawnRequest, MAX_TASK};
use crate::store::{Draft, RunHandle};

pub async fn propose(daemon: &Arc<Daemon>, p: Value) -> Result<Value, AppError> {
    let p: ProposeParams = params(p)?;
    text("task", &p.task, MAX_TASK)?;
    if let Some(w) = &p.why {
        text("why", w, 16 * 1024)?;
    }
    let mut data = Map::new();
    data.insert("task".into(), json!(p.task));
    if let Some(w) = p.why {
        data.insert("why".into(), json!(w));
    }
    open_record(daemon, &p.run, p.node, "spinoff.proposed", data).await
}

pub fn list(daemon: &Arc<Daemon>, p: Value) -> Result<Value, AppError> {
    let p: ListParams = params(p)?;
    let mut out = Vec::new();
    for h in runs(daemon, p.run.as_deref())? {
        for s in h.view().spinoffs.iter() {
            let mut v = to_value(s)?;
            v["run"] = json!(h.id);
            out.push(v);
        }
    }
    Ok(Value::Array(out))
}

/// The proposal and its run, whatever its status.
fn find(
    daemon: &Daemon,
    id: &str,
) -> Result<(Arc<RunHandle>, octl_proto::state::Spinoff), AppError> {
    daemon
        .store
        .handles()
        .into_iter()
        .find_map(|h| {
            let s = h.view().spinoffs.iter().find(|s| s.id == id).cloned()?;
            Some((h, s))
        })
        .ok_or_else(|| {
            AppError::not_found(format!("no spin-off proposal {id:?}"))
                .with_hint("list them with `orchestratectl spinoff list`")
        })
}

/// A decision on a proposal already decided the other way is refused; the same decision
/// again reports the existing one (true).
fn decided(s: &octl_proto::state::Spinoff, wanted: &str) -> Result<bool, AppError> {
    match s.status.as_str() {
        "proposed" => Ok(false),
        st if st == wanted => Ok(true),
        st => Err(AppError::new(
            ErrorKind::InvalidTransition,
            format!("spin-off proposal {:?} is already {st}", s.id),
        )),
    }
}

fn proposal_json(run: &str, s: &octl_proto::state::Spinoff) -> Result<Value, AppError> {
    let mut v = to_value(s)?;
    v["run"] = json!(run);
    Ok(v)
}

pub async fn accept(daemon: &Arc<Daemon>, p: Value) -> Result<Value, AppError> {
    let p: AcceptParams = params(p)?;
    let (parent, proposal) = find(daemon, &p.id)?;
    if decided(&proposal, "accepted")? {
        let child = daemon
            .store
            .resolve("run", proposal.child_run.as_deref().unwrap_or_default())?;
        return Ok(
            json!({"proposal": proposal_json(&parent.id, &proposal)?, "run": to_value(&child.summary())?}),
        );
    }
    let view = parent.view();
    let repo = view.manifest.repo.clone().ok_or_else(|| {
        AppError::invalid(format!(
            "run {} has no repository to start a spinoff in",
            parent.id
        ))
    })?;
    let child = spawn(
        daemon,
        SpawnRequest {
            kind: RunKind::Spinoff,
            task: proposal.task.clone(),
            repo: repo.into(),
            base: view.manifest.base.clone(),
            agent: p.agent,
            node: None,
            gate: None,
            parent: Some((parent.id.clone(), proposal.id.clone())),
        },
    )
    .await?;
    // Recorded even after the parent run ended: the decision is a human's.
    append(
        daemon,
        &parent,
        proposal.node.as_deref(),
        "spinoff.accepted",
        json!({"id": proposal.id, "run": child.id}),
    )
    .await?;
    let updated = parent
        .view()
        .spinoffs
        .iter()
        .find(|s| s.id == p.id)
        .cloned()
        .unwrap_or(proposal);
    Ok(
        json!({"proposal": proposal_json(&parent.id, &updated)?, "run": to_value(&child.summary())?}),
    )
}

pub async fn reject(daemon: &Arc<Daemon>, p: Value) -> Result<Value, AppError> {
    let p: RejectParams = params(p)?;
    text("reason", &p.reason, 16 * 1024)?;
    let (parent, proposal) = find(daemon, &p.id)?;
    if !decided(&proposal, "rejected")? {
        let draft = Draft::daemon(
            proposal.node.as_deref(),
            "spinoff.rejected",
            json!({"id": proposal.id, "reason": p.reason}),
        );
        daemon.store.append(&parent, draft, false).await?;
    }
    let updated = parent
        .view()
        .spinoffs
        .iter()
        .find(|s| s.id == p.id)
        .cloned()
        .unwrap_or(proposal);
    proposal_json(&parent.id, &updated)
}
