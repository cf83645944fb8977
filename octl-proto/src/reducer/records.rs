//! Records a run keeps beside its nodes' states: discussions, spin-off proposals, and each
//! node's kept sets of ignored files.

use crate::error::AppError;
use crate::event::*;
use crate::state::{
    Discussion, Kept, KeptStatus, Node, NodeState, RunState, Spinoff, SpinoffStatus,
};

use super::{record_id, transition};
use NodeState::*;

/// What an event does to a node's kept sets of ignored files.
pub(super) enum KeptChange {
    New(Kept),
    /// The set at this index is now restored (to this worktree) or deleted.
    Status(usize, KeptStatus, Option<String>),
}

/// `cleanup.done` may record a new kept set (`data.kept: {dir, files, bytes}`);
/// `kept.restored` (`data.dir`, `data.worktree`) and `kept.deleted` (`data.dir`) move one
/// that is still kept, and only such a one: whoever comes second lost the race.
pub(super) fn kept_change(
    t: &str,
    kept: Option<KeptRecord>,
    snapshot_commit: Option<String>,
    kept_dir: Option<(String, Option<String>)>,
    node: &Node,
    ev: &Event,
) -> Result<Option<KeptChange>, AppError> {
    if let Some(k) = kept {
        if node.kept.iter().any(|old| old.dir == k.dir) {
            return Err(transition(format!(
                "node {:?} already recorded kept files in {}",
                node.id, k.dir
            )));
        }
        return Ok(Some(KeptChange::New(Kept {
            dir: k.dir,
            files: k.files,
            bytes: k.bytes,
            snapshot_commit,
            kept_at: ev.ts.clone(),
            status: KeptStatus::Kept,
            restored_to: None,
        })));
    }
    let Some((dir, to)) = kept_dir else {
        return Ok(None);
    };
    let i = node.kept.iter().position(|k| k.dir == dir).ok_or_else(|| {
        AppError::not_found(format!("node {:?} has no kept files in {dir}", node.id))
    })?;
    let k = &node.kept[i];
    if k.status != KeptStatus::Kept {
        let whither = k
            .restored_to
            .as_deref()
            .map(|w| format!(" to {w}"))
            .unwrap_or_default();
        return Err(transition(format!(
            "the kept files of node {:?} in {dir} are {}{whither}; {t} is accepted only while they are kept",
            node.id,
            k.status.as_str()
        )));
    }
    let status = if to.is_some() {
        KeptStatus::Restored
    } else {
        KeptStatus::Deleted
    };
    Ok(Some(KeptChange::Status(i, status, to)))
}

impl RunState {
    pub(super) fn fold_discussion(&mut self, ev: &Event) -> Result<(), AppError> {
        if ev.kind == DiscussionOpened::TYPE {
            let p: DiscussionOpened = ev.payload()?;
            let id = record_id(p.id)?;
            self.require_node_exists(ev)?;
            if self.discussions.contains_key(&id) {
                return Err(transition(format!("discussion {id:?} already exists")));
            }
            let (title, body) = (p.title, p.body);
            if let Some(n) = ev.node.as_ref().and_then(|n| self.nodes.get_mut(n)) {
                if matches!(n.state, Starting | Running) {
                    n.state = Waiting;
                    n.updated_at = ev.ts.clone();
                }
            }
            self.discussions.insert(
                id.clone(),
                Discussion {
                    id,
                    node: ev.node.clone(),
                    title,
                    body,
                    open: true,
                    answer: None,
                    opened_at: ev.ts.clone(),
                    resolved_at: None,
                },
            );
            return Ok(());
        }
        let p: DiscussionResolved = ev.payload()?;
        let (id, answer) = (record_id(p.id)?, p.answer);
        self.require_node_exists(ev)?;
        let disc = self
            .discussions
            .get(&id)
            .ok_or_else(|| AppError::not_found(format!("discussion {id:?} does not exist")))?;
        if !disc.open {
            return Err(transition(format!(
                "discussion {id:?} is already answered: {:?}",
                disc.answer.as_deref().unwrap_or_default()
            )));
        }
        let asker = disc.node.clone();
        let disc = self.discussions.get_mut(&id).expect("checked above");
        disc.open = false;
        disc.answer = answer;
        disc.resolved_at = Some(ev.ts.clone());
        if let Some(asker) = asker {
            let still_open = self
                .discussions
                .values()
                .any(|d| d.open && d.node.as_deref() == Some(asker.as_str()));
            if let Some(n) = self.nodes.get_mut(&asker) {
                if n.state == Waiting && !still_open {
                    n.state = Running;
                    n.updated_at = ev.ts.clone();
                }
            }
        }
        Ok(())
    }

    pub(super) fn fold_spinoff(&mut self, ev: &Event) -> Result<(), AppError> {
        let t = ev.kind.as_str();
        if t == SpinoffProposed::TYPE {
            let p: SpinoffProposed = ev.payload()?;
            let id = record_id(p.id)?;
            self.require_node_exists(ev)?;
            if self.spinoffs.contains_key(&id) {
                return Err(transition(format!(
                    "spin-off proposal {id:?} already exists"
                )));
            }
            let (task, why) = (p.task, p.why);
            self.spinoffs.insert(
                id.clone(),
                Spinoff {
                    id,
                    node: ev.node.clone(),
                    task,
                    why,
                    status: SpinoffStatus::Proposed,
                    child_run: None,
                    agent: None,
                    reason: None,
                    proposed_at: ev.ts.clone(),
                    decided_at: None,
                },
            );
            return Ok(());
        }
        // The decision: the run it was accepted as, why it was rejected or failed.
        let (id, child, reason, agent) = match t {
            SpinoffAccepted::TYPE => {
                let p: SpinoffAccepted = ev.payload()?;
                (p.id, p.run, None, p.agent)
            }
            SpinoffRejected::TYPE => {
                let p: SpinoffRejected = ev.payload()?;
                (p.id, None, p.reason, None)
            }
            _ => {
                let p: SpinoffFailed = ev.payload()?;
                (p.id, p.run, p.reason, None)
            }
        };
        let id = record_id(id)?;
        self.require_node_exists(ev)?;
        let sp = self.spinoffs.get_mut(&id).ok_or_else(|| {
            AppError::not_found(format!("spin-off proposal {id:?} does not exist"))
        })?;
        // One decision per proposal: the first to be written wins, and a decision that lost
        // is told what it lost to.
        let to = match t {
            "spinoff.failed" => {
                if sp.status != SpinoffStatus::Accepted || child.is_none() || sp.child_run != child
                {
                    return Err(transition(format!(
                        "spin-off proposal {id:?} is {}{}; spinoff.failed is accepted only for the run it was accepted as",
                        sp.status.as_str(),
                        sp.child_run.as_deref().map(|r| format!(" (run {r})")).unwrap_or_default()
                    )));
                }
                if reason.is_none() {
                    return Err(AppError::invalid(
                        "missing data.reason: spinoff.failed needs reason, a string",
                    ));
                }
                SpinoffStatus::Failed
            }
            _ if !sp.status.is_open() => {
                return Err(transition(format!(
                    "spin-off proposal {id:?} is already {}{}",
                    sp.status.as_str(),
                    match (&sp.child_run, sp.status) {
                        (Some(r), SpinoffStatus::Accepted) => format!(" (run {r})"),
                        _ => String::new(),
                    }
                )));
            }
            "spinoff.accepted" => SpinoffStatus::Accepted,
            _ => SpinoffStatus::Rejected,
        };
        sp.status = to;
        sp.reason = reason;
        sp.decided_at = Some(ev.ts.clone());
        match to {
            SpinoffStatus::Accepted => {
                sp.child_run = child;
                sp.agent = agent;
            }
            // The run never came to be: nothing is named after it.
            SpinoffStatus::Failed => sp.child_run = None,
            _ => {}
        }
        Ok(())
    }
}
