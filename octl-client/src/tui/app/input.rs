//! What a key press does to the [`App`]: moving the selection, opening a run, the modal
//! boxes (help, a prompt, a confirmation), and the actions, each aimed at what the view has
//! selected (the question, proposal, node or run a key acts on). Apart from `app.rs`, which
//! holds the state and how updates from the daemon change it.

use octl_proto::projection::detail as detail_of;
use octl_proto::rpc::{PermissionBehavior, RunShown};
use octl_proto::state::{Discussion, Node, Spinoff};
use octl_proto::NodeState;

use super::{
    last_review_tip, App, Effect, InboxItem, Lasts, Modal, Pane, Status, Tab, Typing, View,
};
use crate::commands::run::attach::{pick_node, AttachTo};
use crate::tui::actions::{open_worktree, Action};
use crate::tui::detail::{diff_anchor, Loaded};
use crate::tui::keys::Cmd;
use crate::tui::model::answerable;
use crate::tui::source::{Request, READ_ONLY};

impl App {
    /// A key press.
    pub fn key(&mut self, cmd: Option<Cmd>, ch: Option<char>) -> Vec<Effect> {
        self.dirty = true;
        if let Some(modal) = self.modal.take() {
            return self.modal_key(modal, cmd, ch);
        }
        let Some(cmd) = cmd else { return Vec::new() };
        // Said before anything is asked: a confirmation that can only be refused is a trap.
        if cmd.changes_something() && !self.link.is_live() {
            self.status = Some(Status {
                ok: false,
                text: READ_ONLY.to_string(),
                lasts: Lasts::ReadOnly,
            });
            return Vec::new();
        }
        match cmd {
            Cmd::Quit => return vec![Effect::Quit],
            Cmd::Help => self.modal = Some(Modal::Help),
            Cmd::Up | Cmd::Down | Cmd::Top | Cmd::Bottom => return self.move_sel(cmd),
            Cmd::Filter => {
                self.modal = Some(Modal::Input {
                    purpose: Typing::Filter,
                    text: self.filter.clone(),
                })
            }
            Cmd::Inbox => {
                self.view = View::Inbox;
                self.want = None;
            }
            Cmd::NextPane => match &self.view {
                View::Runs => self.view = View::Inbox,
                View::Inbox => self.view = View::Runs,
                View::Run(_) => {
                    self.pane = match self.pane {
                        Pane::List => Pane::Detail,
                        Pane::Detail => Pane::List,
                    }
                }
            },
            Cmd::Back => match &self.view {
                View::Run(_) if self.pane == Pane::Detail => self.pane = Pane::List,
                View::Run(_) | View::Inbox => {
                    self.view = View::Runs;
                    self.want = None;
                    self.detail = None;
                }
                View::Runs => {
                    self.filter.clear();
                    self.changed();
                }
            },
            Cmd::Open => return self.open(),
            // `d` on the diff: what changed since the last review round, or back.
            Cmd::Diff if self.tab == Tab::Diff && matches!(self.view, View::Run(_)) => {
                match self.node_in_view().and_then(|n| {
                    last_review_tip(n).map(|tip| (n.reviews.len(), tip))
                }) {
                    Some((round, tip)) => {
                        self.diff_since = !self.diff_since;
                        let text = if self.diff_since {
                            format!("the diff since review {round} (at {tip:.10}); d again: against the merge base")
                        } else {
                            "the diff against the merge base; d again: since the last review".into()
                        };
                        self.say(true, &text);
                    }
                    None => self.say(
                        false,
                        "no review round yet: the diff is against the merge base (c: review)",
                    ),
                }
                self.pane = Pane::Detail;
                return self.retarget();
            }
            Cmd::Screen | Cmd::Log | Cmd::Diff | Cmd::Events => {
                self.diff_since = false;
                self.tab = match cmd {
                    Cmd::Screen => Tab::Screen,
                    Cmd::Log => Tab::Log,
                    Cmd::Diff => Tab::Diff,
                    _ => Tab::Events,
                };
                if !matches!(self.view, View::Run(_)) {
                    if let Some(e) = self.run_in_view() {
                        let id = e.id().to_string();
                        self.open_run(id);
                    }
                }
                self.pane = Pane::Detail;
                return self.retarget();
            }
            Cmd::Answer => match self.question() {
                Some(d) => {
                    self.modal = Some(Modal::Input {
                        purpose: Typing::Answer {
                            id: d.id.clone(),
                            question: d.title.clone(),
                        },
                        text: String::new(),
                    })
                }
                None if self.conflict_in_view() => self.say(
                false,
                "a merge conflict is not answered: it is settled by merging (resolve it in the node's worktree, o: editor or !: shell, commit, then m: merge)",
            ),
                None => self.say(false, "no open question here"),
            },
            Cmd::Accept | Cmd::Reject | Cmd::AllowAlways if self.permission().is_some() => {
                return self.decide(cmd)
            }
            Cmd::AllowAlways => self.say(
                false,
                "no permission request selected (i: the inbox lists them)",
            ),
            Cmd::Accept => match self.proposal() {
                Some((_, s)) => {
                    return self.act(Action::Accept { id: s.id.clone() });
                }
                None => self.say(false, "no open proposal here"),
            },
            Cmd::Reject => match self.proposal() {
                Some((_, s)) => {
                    self.modal = Some(Modal::Input {
                        purpose: Typing::Reject { id: s.id.clone() },
                        text: String::new(),
                    })
                }
                None => self.say(false, "no open proposal here"),
            },
            Cmd::Merge => match self.merge_target() {
                Some(action) => self.confirm(action, None),
                None => self.say(false, "nothing to merge here"),
            },
            Cmd::Retry => match self.retry_target() {
                Some(action) => self.confirm(action, None),
                None => self.say(false, "no failed or conflicting node to retry here"),
            },
            Cmd::Cancel => match self.run_in_view() {
                Some(e) => {
                    let run = e.id().to_string();
                    self.confirm(
                        Action::Cancel {
                            run: run.clone(),
                            discard: false,
                        },
                        Some(Action::Cancel { run, discard: true }),
                    )
                }
                None => self.say(false, "no run selected"),
            },
            Cmd::Attach => return self.attach(),
            Cmd::Send => match self.live_node() {
                Some((run, node)) => {
                    self.modal = Some(Modal::Input {
                        purpose: Typing::Send { run, node },
                        text: String::new(),
                    })
                }
                None => self.say(false, "no live agent selected"),
            },
            // A finished attempt whose worktree is kept: done (a code run, or held for
            // review), failed or exited.
            Cmd::Review => match self.run_in_view().zip(self.node_in_view()) {
                Some((e, n))
                    if !n.cleaned
                        && matches!(
                            n.state,
                            NodeState::Done | NodeState::Failed | NodeState::Exited
                        ) =>
                {
                    // On a line of the diff, the comment starts by naming it.
                    let text = match (&self.detail, self.tab, self.pane) {
                        (Some(Loaded::Lines(lines)), Tab::Diff, Pane::Detail) => {
                            diff_anchor(lines, self.diff_at)
                                .map(|at| format!("{at}: "))
                                .unwrap_or_default()
                        }
                        _ => String::new(),
                    };
                    self.modal = Some(Modal::Input {
                        purpose: Typing::Review {
                            run: e.id().to_string(),
                            node: n.id.clone(),
                        },
                        text,
                    })
                }
                _ => self.say(false, "no done, failed or exited node with its work here to review"),
            },
            Cmd::Editor | Cmd::Shell => {
                let wt = self
                    .node_in_view()
                    .filter(|n| !n.cleaned)
                    .and_then(|n| n.worktree.clone())
                    .filter(|w| std::path::Path::new(w).is_dir());
                match wt {
                    Some(w) => {
                        return vec![Effect::Handoff(open_worktree(
                            std::path::Path::new(&w),
                            cmd == Cmd::Editor,
                        ))]
                    }
                    None => self.say(false, "this node has no worktree now"),
                }
            }
        }
        Vec::new()
    }

    /// `y` allows the selected permission request at once (as `y` accepts a proposal); `n`
    /// asks why (optional) first; `A` asks first, naming the rule it allows for the rest of
    /// the run.
    fn decide(&mut self, cmd: Cmd) -> Vec<Effect> {
        let Some(InboxItem::Permission {
            run,
            node,
            request,
            rule,
            ..
        }) = self.permission()
        else {
            return Vec::new();
        };
        let allow = |always| Action::Decide {
            run: run.clone(),
            node: node.clone(),
            request: request.clone(),
            behavior: PermissionBehavior::Allow,
            always,
            reason: None,
        };
        match cmd {
            Cmd::Accept => return self.act(allow(None)),
            Cmd::AllowAlways => self.confirm(allow(Some(rule.clone())), None),
            _ => {
                self.modal = Some(Modal::Input {
                    purpose: Typing::Deny { run, node, request },
                    text: String::new(),
                })
            }
        }
        Vec::new()
    }

    pub(super) fn say(&mut self, ok: bool, text: &str) {
        self.status = Some(Status {
            ok,
            text: text.to_string(),
            lasts: Lasts::Replaced,
        });
    }

    fn confirm(&mut self, action: Action, discard: Option<Action>) {
        self.modal = Some(Modal::Confirm { action, discard });
    }

    fn act(&mut self, action: Action) -> Vec<Effect> {
        self.say(true, &format!("{}…", action.describe(&self.runs.short)));
        vec![Effect::Request(Request::Act(action))]
    }

    fn modal_key(&mut self, modal: Modal, cmd: Option<Cmd>, ch: Option<char>) -> Vec<Effect> {
        match modal {
            Modal::Help => {
                if !matches!(cmd, Some(Cmd::Help | Cmd::Back | Cmd::Quit)) {
                    self.modal = Some(Modal::Help);
                }
                Vec::new()
            }
            Modal::Confirm { action, discard } => match ch {
                Some('y') => self.act(action),
                Some('d') if discard.is_some() => {
                    // The second ask: discarding removes worktrees and branches.
                    self.confirm(discard.expect("checked"), None);
                    Vec::new()
                }
                _ => {
                    self.say(true, "nothing done");
                    Vec::new()
                }
            },
            Modal::Input { purpose, mut text } => {
                match (cmd, ch) {
                    (Some(Cmd::Back), _) => {
                        if purpose == Typing::Filter {
                            self.filter.clear();
                            self.changed();
                        }
                        return Vec::new();
                    }
                    (Some(Cmd::Open), _) => return self.submit(purpose, text),
                    (_, Some('\u{8}')) => {
                        text.pop();
                    }
                    (_, Some(c)) if !c.is_control() => text.push(c),
                    _ => {}
                }
                if purpose == Typing::Filter {
                    self.filter = text.clone();
                    self.changed();
                }
                self.modal = Some(Modal::Input { purpose, text });
                Vec::new()
            }
        }
    }

    fn submit(&mut self, purpose: Typing, text: String) -> Vec<Effect> {
        let text_trimmed = text.trim().to_string();
        match purpose {
            Typing::Filter => Vec::new(),
            // A denial's reason is optional.
            Typing::Deny { run, node, request } => self.act(Action::Decide {
                run,
                node,
                request,
                behavior: PermissionBehavior::Deny,
                always: None,
                reason: (!text_trimmed.is_empty()).then_some(text_trimmed),
            }),
            _ if text_trimmed.is_empty() => {
                self.say(false, "nothing sent: the text is empty");
                Vec::new()
            }
            Typing::Answer { id, .. } => self.act(Action::Answer {
                id,
                text: text_trimmed,
            }),
            Typing::Reject { id } => self.act(Action::Reject {
                id,
                reason: text_trimmed,
            }),
            Typing::Send { run, node } => self.act(Action::Send { run, node, text }),
            Typing::Review { run, node } => self.act(Action::Review {
                run,
                node,
                comment: text_trimmed,
            }),
        }
    }

    fn move_sel(&mut self, cmd: Cmd) -> Vec<Effect> {
        fn step(i: usize, len: usize, cmd: Cmd) -> usize {
            match cmd {
                Cmd::Up => i.saturating_sub(1),
                Cmd::Down => (i + 1).min(len.saturating_sub(1)),
                Cmd::Top => 0,
                _ => len.saturating_sub(1),
            }
        }
        match &self.view {
            View::Runs => {
                let i = self
                    .sel_run
                    .as_ref()
                    .and_then(|id| self.visible.iter().position(|v| v == id))
                    .unwrap_or(0);
                self.sel_run = self.visible.get(step(i, self.visible.len(), cmd)).cloned();
            }
            View::Inbox => self.sel_item = step(self.sel_item, self.inbox.len(), cmd),
            View::Run(id) => {
                if self.pane == Pane::Detail {
                    // The diff has a line cursor (what `c` comments on); the other tabs
                    // show their newest lines.
                    if let (Tab::Diff, Some(Loaded::Lines(lines))) = (self.tab, &self.detail) {
                        self.diff_at = step(self.diff_at, lines.len(), cmd);
                    }
                    return Vec::new();
                }
                let Some(s) = self.runs.get(id).and_then(|e| e.state.as_ref()) else {
                    return Vec::new();
                };
                let order = &s.node_order;
                let i = self
                    .sel_node
                    .as_ref()
                    .and_then(|n| order.iter().position(|o| o == n))
                    .unwrap_or(0);
                self.sel_node = order.get(step(i, order.len(), cmd)).cloned();
                return self.retarget();
            }
        }
        Vec::new()
    }

    fn open_run(&mut self, id: String) {
        self.view = View::Run(id);
        self.pane = Pane::List;
        self.sel_node = None;
        self.want = None;
        self.detail = None;
    }

    fn open(&mut self) -> Vec<Effect> {
        match self.view.clone() {
            View::Runs => {
                if let Some(id) = self.sel_run.clone() {
                    self.open_run(id);
                    let mut out = self.retarget();
                    out.extend(self.stat_requests());
                    return out;
                }
            }
            View::Inbox => {
                if let Some(item) = self.inbox.get(self.sel_item).cloned() {
                    self.open_run(item.run().to_string());
                    self.sel_node = match item {
                        InboxItem::Merge { node, .. } => node,
                        InboxItem::Permission { node, .. } => Some(node),
                        InboxItem::Question { d, .. } => d.node,
                        InboxItem::Proposal { s, .. } => s.node,
                    };
                    let mut out = self.retarget();
                    out.extend(self.stat_requests());
                    return out;
                }
            }
            View::Run(_) => {
                self.pane = Pane::Detail;
                return self.retarget();
            }
        }
        Vec::new()
    }

    /// The open question the keys act on: the inbox's selected one, else the selected node's,
    /// else the run's first.
    fn question(&self) -> Option<Discussion> {
        if self.view == View::Inbox {
            return match self.inbox.get(self.sel_item) {
                Some(InboxItem::Question { d, .. }) => Some(d.clone()),
                _ => None,
            };
        }
        let s = self.run_in_view()?.current()?;
        let node = self.node_in_view().map(|n| n.id.clone());
        let open: Vec<&Discussion> = s
            .discussions
            .values()
            .filter(|d| answerable(s, d))
            .collect();
        open.iter()
            .find(|d| matches!(self.view, View::Run(_)) && d.node == node)
            .or_else(|| open.first())
            .map(|d| (*d).clone())
    }

    /// The permission request `y`, `n` and `A` decide: the inbox's selected item. Only there,
    /// where its tool and whole input are on screen: nothing is allowed unseen.
    fn permission(&self) -> Option<InboxItem> {
        if self.view != View::Inbox {
            return None;
        }
        self.inbox
            .get(self.sel_item)
            .filter(|it| matches!(it, InboxItem::Permission { .. }))
            .cloned()
    }

    /// Is what the keys act on a node in conflict (the inbox's item, else the open run's)?
    fn conflict_in_view(&self) -> bool {
        if self.view == View::Inbox {
            return matches!(
                self.inbox.get(self.sel_item),
                Some(InboxItem::Merge { state, .. }) if state == NodeState::Conflict.as_str()
            );
        }
        self.run_in_view()
            .and_then(|e| e.current())
            .is_some_and(|s| s.nodes.values().any(|n| n.state == NodeState::Conflict))
    }

    fn proposal(&self) -> Option<(String, Spinoff)> {
        if self.view == View::Inbox {
            return match self.inbox.get(self.sel_item) {
                Some(InboxItem::Proposal { run, s }) => Some((run.clone(), s.clone())),
                _ => None,
            };
        }
        let s = self.run_in_view()?.current()?;
        s.spinoffs
            .values()
            .find(|p| p.status.is_open())
            .map(|p| (s.id.clone(), p.clone()))
    }

    fn merge_target(&self) -> Option<Action> {
        if self.view == View::Inbox {
            return match self.inbox.get(self.sel_item) {
                Some(InboxItem::Merge { run, node, .. }) => Some(Action::Merge {
                    run: run.clone(),
                    node: node.clone(),
                }),
                _ => None,
            };
        }
        let e = self.run_in_view()?;
        let node = match self.view {
            View::Run(_) => self.node_in_view().map(|n| n.id.clone()),
            // From the runs list the daemon picks, as `merge RUN` does.
            _ => None,
        };
        Some(Action::Merge {
            run: e.id().to_string(),
            node,
        })
    }

    fn retry_target(&self) -> Option<Action> {
        let retryable = |n: &Node| {
            matches!(
                n.state,
                NodeState::Failed
                    | NodeState::Exited
                    | NodeState::Conflict
                    | NodeState::MergeBlocked
            )
        };
        let node = match (&self.view, self.inbox.get(self.sel_item)) {
            (View::Inbox, Some(InboxItem::Merge { run, node, .. })) => {
                return node.clone().map(|node| Action::Retry {
                    run: run.clone(),
                    node,
                })
            }
            (View::Run(_), _) => self.node_in_view().filter(|n| retryable(n))?,
            _ => self
                .run_in_view()?
                .current()?
                .nodes_in_order()
                .find(|n| retryable(n))?,
        };
        Some(Action::Retry {
            run: self.run_in_view()?.id().to_string(),
            node: node.id.clone(),
        })
    }

    fn live_node(&self) -> Option<(String, String)> {
        let e = self.run_in_view()?;
        let n = match self.view {
            View::Run(_) => self.node_in_view()?,
            _ => e
                .state
                .as_ref()?
                .nodes_in_order()
                .find(|n| n.state.is_alive())?,
        };
        n.state
            .is_alive()
            .then(|| (e.id().to_string(), n.id.clone()))
    }

    /// `t`: the same choice of node and the same command as `run attach` (the node's
    /// runner's, asked of the daemon; the terminal is handed to it when it comes).
    fn attach(&mut self) -> Vec<Effect> {
        let Some(e) = self.run_in_view() else {
            self.say(false, "no run selected");
            return Vec::new();
        };
        let Some(s) = e.state.as_ref() else {
            self.say(false, "this run's log is not read yet");
            return Vec::new();
        };
        let d = RunShown::from(detail_of(s));
        let asked = match self.view {
            View::Run(_) => self.node_in_view().map(|n| n.id.clone()),
            _ => None,
        };
        match pick_node(&d, asked.as_deref()) {
            Ok(node) => vec![Effect::Request(Request::Attach(AttachTo::of(
                &self.tmux_socket,
                &d.manifest.id,
                node,
            )))],
            Err(err) => {
                self.say(false, &err.message);
                Vec::new()
            }
        }
    }
}
