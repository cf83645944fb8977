//! The runs of accepted spin-off proposals. A decision on a proposal is won in the parent
//! run's log before anything happens: `spinoff.accepted` names the new run's id before that
//! run exists, and only the request whose decision was written creates it. A crash between
//! the two leaves an accepted proposal without its run; every reconcile of the parent (so at
//! every start) creates it under the recorded id ([`super::decide::Step::CreateSpinoffRun`]).
//! A run that cannot be created (the repository is gone, the agent program is missing)
//! becomes `spinoff.failed` on the parent with the reason, and is not tried again: a human
//! may accept the proposal again (a new run) or reject it.

use std::path::PathBuf;
use std::sync::Arc;

use octl_proto::event::SpinoffFailed;

use octl_proto::projection::RunDetail;
use octl_proto::state::Spinoff;
use octl_proto::{AppError, ErrorKind, RunKind};

use super::spawn::{check_request, create, Checked, SpawnRequest};
use crate::daemon::Daemon;
use crate::store::RunHandle;

/// The agent a proposal's run gets when none is named: the proposing node's profile, else
/// the parent run's.
pub fn default_agent(parent: &RunDetail, proposal: &Spinoff) -> Option<String> {
    proposal
        .node
        .as_deref()
        .and_then(|id| parent.nodes.iter().find(|n| n.id == id))
        .and_then(|n| n.agent.clone())
        .or_else(|| parent.manifest.settings.agent.clone())
}

/// The spinoff run of a proposal: its task, in the parent's repository and base.
pub fn request(
    parent_id: &str,
    parent: &RunDetail,
    proposal: &Spinoff,
    agent: Option<String>,
) -> Result<SpawnRequest, AppError> {
    let repo = parent.manifest.repo.clone().ok_or_else(|| {
        AppError::invalid(format!(
            "run {parent_id} has no repository to start a spinoff in"
        ))
    })?;
    let agent_of = agent.clone();
    Ok(SpawnRequest {
        kind: RunKind::Spinoff,
        task: proposal.task.clone(),
        repo: PathBuf::from(repo),
        base: parent.manifest.base.clone(),
        agent,
        node: None,
        gate: None,
        max_budget_usd: None,
        runner: None,
        // The proposing node's rules go with its work, to an agent of its own profile.
        permissions: proposal
            .node
            .as_deref()
            .and_then(|id| parent.nodes.iter().find(|n| n.id == id))
            .filter(|n| n.agent == agent_of)
            .map(|n| n.permissions.clone())
            .unwrap_or_default(),
        review: false,
        // A sandboxed run's proposal is sandboxed as its parent was.
        sandbox: parent.manifest.settings.sandbox,
        parent: Some((parent_id.to_string(), proposal.id.clone())),
    })
}

/// Creates run `child` of the accepted `proposal` (checking the request first unless the
/// caller did). When no run could be made, records why on the parent (`spinoff.failed`), so
/// it is not tried again and the human sees the reason.
pub async fn create_child(
    daemon: &Arc<Daemon>,
    parent: &Arc<RunHandle>,
    proposal: &Spinoff,
    child: &str,
    checked: Option<(SpawnRequest, Checked)>,
) -> Result<Arc<RunHandle>, AppError> {
    let made = async {
        let (req, checked) = match checked {
            Some(c) => c,
            None => {
                let req = request(&parent.id, &parent.view(), proposal, proposal.agent.clone())?;
                let checked = check_request(daemon, &req).await?;
                (req, checked)
            }
        };
        create(daemon, req, checked, child.to_string()).await
    }
    .await;
    let err = match made {
        Ok(run) => return Ok(run),
        Err(e) => e,
    };
    // A run that exists (its agent could not start, so its node failed) is the proposal's
    // run; a daemon going down leaves the creation to the next start.
    if !daemon.store.exists(child) && err.kind != ErrorKind::ShuttingDown {
        tracing::warn!(run = %parent.id, proposal = %proposal.id, child, error = %err.message, "the run of an accepted spin-off could not be created");
        let _ = super::append(
            daemon,
            parent,
            proposal.node.as_deref(),
            SpinoffFailed {
                id: proposal.id.clone(),
                run: Some(child.to_string()),
                reason: Some(err.message.clone()),
            },
        )
        .await;
    }
    Err(err)
}
