//! What a run's log says of git, checked against git ("merged means in main"; docs/MERGING.md,
//! "Merging without losing anything"): every `merge.succeeded` of a node names a commit that
//! is still in its target, and the branch merged (`head`) too; and a remote node that has
//! finished has its agent's work — its last copy's `head` and `wip` as fetched into the
//! repository (`refs/octl/remote/…`, docs/RUNNERS.md) — in the target, in its branch, under
//! its snapshot ref, or still in its worktree: never only where the agent ran.
//!
//! It reads the run's log on disk and git; it writes nothing. `doctor` runs it on every run
//! ([`crate::rpc::doctor`]); the end-to-end tests run it on a home after faults.

use std::collections::BTreeMap;
use std::path::Path;

use octl_proto::event::{MergeSucceeded, Payload};
use octl_proto::{Event, NodeState, RunState};

use crate::git::{snapshot_ref, Git};
use crate::runner::{exchange::has_commit, last_copy, AgentHandle};

/// How many commits of a snapshot ref or merged branch are searched for a checkpoint's tree.
const TREES: &str = "200";

/// What the log of the run in `dir` says that git does not hold, one sentence each. A log
/// that does not replay is one such sentence.
pub fn check(dir: &Path) -> Vec<String> {
    let events: Vec<Event> = match std::fs::read_to_string(dir.join("events.jsonl")) {
        Ok(text) => match text
            .lines()
            .filter(|l| !l.is_empty())
            .map(Event::from_line)
            .collect::<Result<Vec<_>, _>>()
        {
            Ok(evs) => evs,
            Err(e) => return vec![format!("its log does not read: {e}")],
        },
        Err(e) => return vec![format!("its log cannot be read: {e}")],
    };
    match RunState::replay(&events) {
        Ok(state) => check_state(&state, &events),
        Err((seq, e)) => vec![format!(
            "its log does not replay at seq {seq}: {}",
            e.message
        )],
    }
}

/// [`check`] of a run already read.
pub fn check_state(state: &RunState, events: &[Event]) -> Vec<String> {
    let Some(repo) = state.repo.as_deref().filter(|r| Path::new(r).is_dir()) else {
        return Vec::new();
    };
    let git = Git::new(repo);
    let tip = |branch: &str| git.resolve_commit(branch).ok();
    let in_ = |commit: &str, into: &str| git.is_ancestor(commit, into).unwrap_or(false);
    let mut out = Vec::new();
    // Node merges: the commit the target moved to, and the branch merged, are in it still (an
    // integration branch gone after its run's merge: in base).
    let mut merged: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for ev in events.iter().filter(|e| e.kind == MergeSucceeded::TYPE) {
        let (Some(node), Ok(m)) = (ev.node.as_deref(), ev.payload::<MergeSucceeded>()) else {
            continue;
        };
        let target = m
            .target
            .clone()
            .filter(|t| tip(t).is_some())
            .or_else(|| state.base.clone());
        let Some(target) = target else { continue };
        for (what, commit) in [("moved to", &m.commit), ("merged", &m.head)] {
            let Some(c) = commit else { continue };
            if !in_(c, &target) {
                out.push(format!(
                    "node {node}: merge.succeeded (seq {}) says {target} {what} {c}, which {target} does not contain",
                    ev.seq
                ));
            }
        }
        merged.entry(node).or_default().extend(m.head.clone());
    }
    let target = state
        .settings
        .integration
        .clone()
        .filter(|t| tip(t).is_some())
        .or_else(|| state.base.clone());
    for n in state.nodes.values() {
        let remote = n
            .runner
            .as_deref()
            .is_some_and(|r| r != crate::config::LOCAL_RUNNER);
        // Still at work (or waiting for its place): its checkpoints are not final yet.
        if !remote || n.state.is_alive() || n.state == NodeState::Pending {
            continue;
        }
        let Some(pane) = &n.pane else { continue };
        let Some(copy) = last_copy(&git, &state.id, &n.id, &AgentHandle::new(pane.clone())) else {
            continue;
        };
        let snapshot = snapshot_ref(&state.id, &n.id);
        let holders: Vec<String> = [target.clone(), n.branch.clone(), Some(snapshot.clone())]
            .into_iter()
            .flatten()
            .filter(|r| tip(r).is_some())
            .collect();
        let head = format!("{copy}/head");
        if has_commit(&git, &head) && !holders.iter().any(|h| in_(&head, h)) {
            out.push(format!(
                "node {}: its agent's last commit {head} is in none of {}",
                n.id,
                holders.join(", ")
            ));
        }
        let wip = format!("{copy}/wip");
        let wip_tree = git.plumbing(&["rev-parse", "-q", "--verify", &format!("{wip}^{{tree}}")]);
        let head_tree = git.plumbing(&["rev-parse", "-q", "--verify", &format!("{head}^{{tree}}")]);
        let Ok(wip_tree) = wip_tree else { continue };
        if head_tree.is_ok_and(|h| h == wip_tree) {
            continue;
        }
        let worktree = n.worktree.as_deref().filter(|w| Path::new(w).is_dir());
        if !n.cleaned && worktree.is_some() {
            // Not cleaned up yet: what it left uncommitted is in its worktree.
            continue;
        }
        let mut searched: Vec<String> = merged.get(n.id.as_str()).cloned().unwrap_or_default();
        searched.extend(n.branch.clone().filter(|b| tip(b).is_some()));
        searched.extend(tip(&snapshot).map(|_| snapshot.clone()));
        let found = searched.iter().any(|from| {
            git.plumbing(&["log", "--format=%T", "-n", TREES, from, "--"])
                .is_ok_and(|trees| trees.lines().any(|t| t == wip_tree.trim()))
        });
        if !found {
            out.push(format!(
                "node {}: its agent's last checkpoint {wip} (what it left uncommitted) is in none of its merged branch, its branch, its snapshot ref",
                n.id
            ));
        }
    }
    out
}

/// [`check`] of every run under `runs` (`$OCTL_HOME/runs`), by run id; runs it finds nothing
/// wrong with are left out.
pub fn check_all(runs: &Path) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(runs).into_iter().flatten().flatten() {
        let dir = entry.path();
        if !dir.join("events.jsonl").exists() {
            continue;
        }
        let found = check(&dir);
        if !found.is_empty() {
            out.insert(entry.file_name().to_string_lossy().into_owned(), found);
        }
    }
    out
}
