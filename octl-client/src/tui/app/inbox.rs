//! The inbox: every open question, proposal and merge of every run, most urgent first, and
//! what to do next about each. A module of its own because the inbox view and the keys that
//! act on an inbox item both read it, while it depends only on the runs.

use octl_proto::state::{Discussion, Spinoff};
use octl_proto::{NodeState, RunKind, RunStatus};

use crate::tui::model::{answerable, RunEntry, Runs};

/// One thing a human should look at.
#[derive(Debug, Clone, PartialEq)]
pub enum InboxItem {
    Question {
        run: String,
        d: Discussion,
    },
    Proposal {
        run: String,
        s: Spinoff,
    },
    /// A node (or, with `node` None, an orchestrate run's integration merge) that conflicted,
    /// was blocked, or waits for `merge`.
    Merge {
        run: String,
        node: Option<String>,
        state: String,
        files: Vec<String>,
        worktree: Option<String>,
    },
}

/// What an inbox item is about, whatever its place in the list: the selection follows it when
/// other items arrive or go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InboxKey {
    Question(String),
    Proposal(String),
    Merge { run: String, node: Option<String> },
}

impl InboxItem {
    pub fn key(&self) -> InboxKey {
        match self {
            InboxItem::Question { d, .. } => InboxKey::Question(d.id.clone()),
            InboxItem::Proposal { s, .. } => InboxKey::Proposal(s.id.clone()),
            InboxItem::Merge { run, node, .. } => InboxKey::Merge {
                run: run.clone(),
                node: node.clone(),
            },
        }
    }

    pub fn run(&self) -> &str {
        match self {
            InboxItem::Question { run, .. }
            | InboxItem::Proposal { run, .. }
            | InboxItem::Merge { run, .. } => run,
        }
    }

    /// What to do next, said plainly.
    pub fn next_step(&self) -> String {
        match self {
            InboxItem::Question { .. } => "a: answer".into(),
            InboxItem::Proposal { .. } => "y: accept (starts a spinoff run) · n: reject".into(),
            InboxItem::Merge {
                state, worktree, ..
            } => match state.as_str() {
                "conflict" => format!(
                    "resolve the conflict in {} (o: editor, !: shell), commit, then m: merge",
                    worktree.as_deref().unwrap_or("its worktree")
                ),
                "merge_blocked" => {
                    "commit or stash the base's changes to those paths, then m: merge".into()
                }
                _ => "review (d: diff), then m: merge".into(),
            },
        }
    }
}

/// The inbox of every run, most urgent first (questions, proposals, then merges).
pub fn inbox(runs: &Runs) -> Vec<InboxItem> {
    let mut questions = Vec::new();
    let mut proposals = Vec::new();
    let mut merges = Vec::new();
    for id in &runs.order {
        let Some(s) = runs.get(id).and_then(RunEntry::current) else {
            continue;
        };
        // A merge conflict's question is the node's merge item below: it is settled by merging.
        for d in s.discussions.values().filter(|d| answerable(s, d)) {
            questions.push(InboxItem::Question {
                run: id.clone(),
                d: d.clone(),
            });
        }
        for sp in s.spinoffs.values().filter(|sp| sp.status.is_open()) {
            proposals.push(InboxItem::Proposal {
                run: id.clone(),
                s: sp.clone(),
            });
        }
        if s.status().is_terminal() {
            continue;
        }
        for n in s.nodes_in_order() {
            let awaiting = n.state == NodeState::Done && s.kind == RunKind::Code;
            if matches!(n.state, NodeState::Conflict | NodeState::MergeBlocked) || awaiting {
                merges.push(InboxItem::Merge {
                    run: id.clone(),
                    node: Some(n.id.clone()),
                    state: if awaiting {
                        "awaiting merge".into()
                    } else {
                        n.state.as_str().into()
                    },
                    files: n.conflict_files.clone(),
                    worktree: n.worktree.clone(),
                });
            }
        }
        let all_merged = s.kind == RunKind::Orchestrate
            && !s.nodes.is_empty()
            && s.nodes.values().all(|n| n.state == NodeState::Merged);
        if all_merged && s.status() == RunStatus::Waiting {
            merges.push(InboxItem::Merge {
                run: id.clone(),
                node: None,
                state: s.merge.clone().unwrap_or_else(|| "awaiting merge".into()),
                files: Vec::new(),
                worktree: None,
            });
        }
    }
    questions.extend(proposals);
    questions.extend(merges);
    questions
}
