//! `spinoff.propose`, `spinoff.list`, `spinoff.accept`, `spinoff.reject`: separate work an
//! agent noticed. Accepting one starts a spinoff run in the parent's repository and base;
//! the two runs name each other (`spinoff.accepted` in the parent, `parent_run` in the child).
//! Each decision is won in the parent's log first (see [`crate::engine::spinoff`]).

use std::sync::Arc;

use octl_proto::event::{SpinoffAccepted, SpinoffProposed, SpinoffRejected};
use octl_proto::method;
use octl_proto::rpc::{
    AcceptParams, Accepted, ListParams, Opened, Proposal, ProposeParams, RejectParams,
};
use octl_proto::state::{Spinoff, SpinoffStatus};
use octl_proto::{AppError, ErrorKind};

use super::discussion::{find, open_record, runs, text};
use super::Handle;
use crate::daemon::Daemon;
use crate::engine::merge::failpoint;
use crate::engine::spawn::{check_request, MAX_TASK};
use crate::engine::{spinoff, Engine, StepKey};
use crate::store::{Draft, RunHandle};

pub async fn propose(daemon: &Arc<Daemon>, p: ProposeParams) -> Result<Opened, AppError> {
    text("task", &p.task, MAX_TASK)?;
    if let Some(w) = &p.why {
        text("why", w, 16 * 1024)?;
    }
    let (task, why) = (p.task, p.why);
    open_record(daemon, &p.run, p.node, |id| SpinoffProposed {
        id,
        task,
        why,
        ..SpinoffProposed::default()
    })
    .await
}

pub fn list(daemon: &Arc<Daemon>, p: ListParams) -> Result<Vec<Proposal>, AppError> {
    let mut out = Vec::new();
    for h in runs(daemon, p.run.as_deref(), p.open == Some(true))? {
        // Open: still to be decided (proposed).
        for s in h.view().spinoffs.iter().filter(|s| {
            p.open
                .is_none_or(|o| (s.status == SpinoffStatus::Proposed) == o)
        }) {
            out.push(listed(&h.id, s));
        }
    }
    Ok(out)
}

/// A decision on a proposal already decided the other way is refused, naming that decision.
fn refused(s: &Spinoff) -> AppError {
    AppError::new(
        ErrorKind::InvalidTransition,
        format!(
            "spin-off proposal {:?} is already {}{}",
            s.id,
            s.status.as_str(),
            match (&s.child_run, s.status) {
                (Some(r), SpinoffStatus::Accepted) => format!(" (run {r})"),
                _ => String::new(),
            }
        ),
    )
}

fn listed(run: &str, s: &Spinoff) -> Proposal {
    Proposal {
        run: run.to_string(),
        spinoff: s.clone(),
    }
}

/// The proposal as the parent's log says now.
fn current(parent: &RunHandle, s: &Spinoff) -> Spinoff {
    parent
        .view()
        .spinoffs
        .iter()
        .find(|x| x.id == s.id)
        .cloned()
        .unwrap_or_else(|| s.clone())
}

/// How long accepting an accepted proposal again waits for the run the first accept is
/// creating.
const CREATE_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// An accepted proposal accepted again — by the loser of two identical accepts, whichever
/// way it lost, or by a request sent twice: the run the first accept started, once it
/// exists, with `already`, so both requests answer alike (exit 0) and neither claims to have
/// started it. A proposal whose run could not be created (or that another decision took) is
/// refused, saying so.
async fn accepted_again(
    parent: &RunHandle,
    daemon: &Daemon,
    id: &str,
) -> Result<Accepted, AppError> {
    let deadline = tokio::time::Instant::now() + CREATE_WAIT;
    loop {
        let view = parent.view();
        let Some(s) = view.spinoffs.iter().find(|x| x.id == id) else {
            return Err(AppError::not_found(format!(
                "no proposal {id:?} in run {}",
                parent.id
            )));
        };
        if s.status != SpinoffStatus::Accepted {
            return Err(refused(s));
        }
        let child = s
            .child_run
            .as_deref()
            .and_then(|c| daemon.store.resolve("run", c).ok());
        if let Some(child) = child {
            return Ok(Accepted {
                proposal: listed(&parent.id, s),
                run: child.summary(),
                already: true,
            });
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(refused(s).with_hint(format!(
                "its run is still being created; see it with `orchestratectl spinoff list --run {}`",
                parent.id
            )));
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// Accepting is won in the parent's log before anything is created: the checks first (bad
/// input changes nothing), then `spinoff.accepted` naming the new run's id, and only if that
/// was written, the run under that id. A request that lost to another decision creates
/// nothing and is refused with what it lost to.
pub async fn accept(daemon: &Arc<Daemon>, p: AcceptParams) -> Result<Accepted, AppError> {
    let (parent, proposal) = find::<Spinoff>(daemon, "id", &p.id)?;
    match proposal.status {
        SpinoffStatus::Accepted => return accepted_again(&parent, daemon, &proposal.id).await,
        SpinoffStatus::Rejected => return Err(refused(&proposal)),
        SpinoffStatus::Proposed | SpinoffStatus::Failed => {}
    }
    let view = parent.view();
    let agent = p.agent.or_else(|| spinoff::default_agent(&view, &proposal));
    let req = spinoff::request(&parent.id, &view, &proposal, agent)?;
    let checked = check_request(daemon, &req).await?;
    let child = octl_proto::ids::new_ulid();
    // Held while the run is created, so the engine does not take it for one a crash cut short.
    let slot = Engine::claim(daemon, &parent.id, StepKey::SpinoffRun(child.clone()));
    // Recorded even after the parent run ended: the decision is a human's.
    let decision = Draft::daemon(
        proposal.node.as_deref(),
        SpinoffAccepted {
            id: proposal.id.clone(),
            run: Some(child.clone()),
            agent: Some(checked.profile.name.clone()),
        },
    );
    // A decision that lost is refused by the reducer, naming the one that won; one that
    // lost to the same decision reports it.
    if let Err(e) = daemon.store.append(&parent, decision, false).await {
        drop(slot);
        let won = current(&parent, &proposal);
        return match won.status {
            SpinoffStatus::Accepted if e.kind == ErrorKind::InvalidTransition => {
                accepted_again(&parent, daemon, &proposal.id).await
            }
            _ => Err(e),
        };
    }
    failpoint("spinoff:after-accepted");
    let decided = current(&parent, &proposal);
    let run = spinoff::create_child(daemon, &parent, &decided, &child, Some((req, checked))).await;
    drop(slot);
    let run = run?;
    Ok(Accepted {
        proposal: listed(&parent.id, &current(&parent, &decided)),
        run: run.summary(),
        already: false,
    })
}

pub async fn reject(daemon: &Arc<Daemon>, p: RejectParams) -> Result<Proposal, AppError> {
    text("reason", &p.reason, 16 * 1024)?;
    let (parent, proposal) = find::<Spinoff>(daemon, "id", &p.id)?;
    match proposal.status {
        // The same decision again reports it.
        SpinoffStatus::Rejected => return Ok(listed(&parent.id, &proposal)),
        SpinoffStatus::Accepted => return Err(refused(&proposal)),
        SpinoffStatus::Proposed | SpinoffStatus::Failed => {}
    }
    let draft = Draft::daemon(
        proposal.node.as_deref(),
        SpinoffRejected {
            id: proposal.id.clone(),
            reason: Some(p.reason.clone()),
        },
    );
    daemon.store.append(&parent, draft, false).await?;
    Ok(listed(&parent.id, &current(&parent, &proposal)))
}

impl Handle for method::SpinoffPropose {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        propose(daemon, p).await
    }
}

impl Handle for method::SpinoffList {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        list(daemon, p)
    }
}

impl Handle for method::SpinoffAccept {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        accept(daemon, p).await
    }
}

impl Handle for method::SpinoffReject {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        reject(daemon, p).await
    }
}
