//! The inbox: every pending permission request, open question, proposal and merge of every
//! run, most urgent first, and what to do next about each. A module of its own because the
//! inbox view and the keys that act on an inbox item both read it, while it depends only on
//! the runs.

use octl_proto::reducer::rule_for;
use octl_proto::state::{Discussion, Permission, Spinoff};
use octl_proto::{NodeState, RunKind, RunStatus};
use serde_json::Value;

use crate::tui::detail::text_lines;
use crate::tui::model::{answerable, pending, RunEntry, Runs};

/// One thing a human should look at.
#[derive(Debug, Clone, PartialEq)]
pub enum InboxItem {
    /// A node's agent asked for a tool and waits for the decision. What the agent wrote (the
    /// tool, its input) is kept as lines a terminal can show: control characters and escape
    /// sequences removed.
    Permission {
        run: String,
        node: String,
        request: String,
        tool: String,
        /// The whole input, one `field: value` per field (a value's own lines follow it).
        input: Vec<String>,
        /// What `A` (allow always) allows for the rest of the run: `Bash(python3 *)`.
        rule: String,
    },
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
    /// Request ids (`p1`) are a run's own.
    Permission {
        run: String,
        request: String,
    },
    Question(String),
    Proposal(String),
    Merge {
        run: String,
        node: Option<String>,
    },
}

impl InboxItem {
    pub fn key(&self) -> InboxKey {
        match self {
            InboxItem::Permission { run, request, .. } => InboxKey::Permission {
                run: run.clone(),
                request: request.clone(),
            },
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
            InboxItem::Permission { run, .. }
            | InboxItem::Question { run, .. }
            | InboxItem::Proposal { run, .. }
            | InboxItem::Merge { run, .. } => run,
        }
    }

    /// What to do next, said plainly.
    pub fn next_step(&self) -> String {
        match self {
            InboxItem::Permission { rule, .. } => {
                format!("y: allow · n: deny · A: allow always ({rule} for the rest of the run)")
            }
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

/// Text an agent wrote, as one line a terminal can show.
fn one_line(text: &str) -> String {
    text_lines(text.as_bytes()).join(" ").trim().to_string()
}

/// A permission request's input as lines: each field `name: value` (a string as it is, else
/// its JSON), the fields that say what runs (a command, a path, a URL) first; a value's own
/// lines (a script) follow its first. Nothing is cut: what is allowed is all shown.
pub fn input_lines(input: &serde_json::Map<String, Value>) -> Vec<String> {
    const FIRST: [&str; 5] = ["command", "file_path", "path", "url", "pattern"];
    let mut fields: Vec<(&String, &Value)> = input.iter().collect();
    fields.sort_by_key(|(k, _)| FIRST.iter().position(|f| f == k).unwrap_or(FIRST.len()));
    let mut out = Vec::new();
    for (k, v) in fields {
        let text = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let mut lines = text_lines(text.as_bytes()).into_iter();
        out.push(format!(
            "{}: {}",
            one_line(k),
            lines.next().unwrap_or_default()
        ));
        out.extend(lines);
    }
    out
}

fn permission_item(run: &str, p: &Permission) -> InboxItem {
    InboxItem::Permission {
        run: run.to_string(),
        node: p.node.clone(),
        request: p.request.clone(),
        tool: one_line(&p.tool),
        input: input_lines(&p.input),
        rule: one_line(&rule_for(&p.tool, &p.input)),
    }
}

/// The inbox of every run, most urgent first (permission requests, whose agents are blocked
/// until a decision or its timeout; questions; proposals; then merges).
pub fn inbox(runs: &Runs) -> Vec<InboxItem> {
    let mut permissions = Vec::new();
    let mut questions = Vec::new();
    let mut proposals = Vec::new();
    let mut merges = Vec::new();
    for id in &runs.order {
        let Some(s) = runs.get(id).and_then(RunEntry::current) else {
            continue;
        };
        // In the order asked (ids sort p10 before p2).
        let mut asked: Vec<&Permission> =
            s.permissions.values().filter(|p| pending(s, p)).collect();
        asked.sort_by(|a, b| (&a.asked_at, a.request.len()).cmp(&(&b.asked_at, b.request.len())));
        permissions.extend(asked.into_iter().map(|p| permission_item(id, p)));
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
    permissions.extend(questions);
    permissions.extend(proposals);
    permissions.extend(merges);
    permissions
}
