//! The TUI's state and how keys and updates change it. Pure: no terminal, no I/O; what must
//! happen outside (a request to the data thread, handing the terminal to tmux) is returned as
//! an [`Effect`], so every behaviour here is tested without a terminal.

use std::collections::HashMap;
use std::time::Instant;

use octl_proto::projection::detail as detail_of;
use octl_proto::state::{Discussion, Node, RunState, Spinoff};
use octl_proto::{Event, NodeState, RunKind};

use super::actions::{open_worktree, Action, Handoff};
use super::detail::{Load, Loaded};
use super::keys::Cmd;
use super::model::{Attention, RunEntry, Runs};
use super::source::{Link, Request, Update};
use crate::commands::run::attach::{attach_argv, pick_node, AttachTo};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum View {
    Runs,
    Inbox,
    /// One run's nodes and the selected node's detail.
    Run(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pane {
    List,
    Detail,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tab {
    Screen,
    Log,
    Diff,
    Events,
}

impl Tab {
    pub const ALL: [Tab; 4] = [Tab::Screen, Tab::Log, Tab::Diff, Tab::Events];
    pub fn title(self) -> &'static str {
        match self {
            Tab::Screen => "screen",
            Tab::Log => "log",
            Tab::Diff => "diff",
            Tab::Events => "events",
        }
    }
}

/// What a line of typed text is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Typing {
    Filter,
    Answer { id: String, question: String },
    Reject { id: String },
    Send { run: String, node: String },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Modal {
    Help,
    Input {
        purpose: Typing,
        text: String,
    },
    /// `y` does `action`; a cancel also offers `d`, which asks once more before discarding.
    Confirm {
        action: Action,
        discard: Option<Action>,
    },
}

/// What must happen outside the state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    Quit,
    /// Ring the terminal's bell: a run started needing a human.
    Bell,
    Request(Request),
    /// Suspend the TUI and run this with the terminal.
    Handoff(Handoff),
}

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

impl InboxItem {
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
        for d in s.discussions.values().filter(|d| d.open) {
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
        if all_merged && s.status() == octl_proto::RunStatus::Waiting {
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

/// A cached count of lines added and removed, and when it was asked for.
#[derive(Debug, Clone)]
pub struct Stat {
    pub stamp: String,
    pub asked: Instant,
    pub value: Option<Loaded>,
}

pub struct App {
    pub runs: Runs,
    pub link: Link,
    pub view: View,
    pub pane: Pane,
    pub tab: Tab,
    pub modal: Option<Modal>,
    pub filter: String,
    /// The runs shown (filtered), in order; recomputed on change.
    pub visible: Vec<String>,
    pub inbox: Vec<InboxItem>,
    pub sel_run: Option<String>,
    pub sel_node: Option<String>,
    pub sel_item: usize,
    /// The last action's result (ok, text).
    pub status: Option<(bool, String)>,
    /// The detail pane: what it shows and what it has.
    pub want: Option<Load>,
    pub detail: Option<Loaded>,
    pub stats: HashMap<(String, String), Stat>,
    pub color: bool,
    pub now_ms: u64,
    /// Something changed since the last frame.
    pub dirty: bool,
    /// A first list of runs arrived (before it, the list says it is loading, not empty).
    pub loaded: bool,
    /// The daemon's private tmux server, where `t` attaches.
    pub tmux_socket: std::path::PathBuf,
}

impl App {
    pub fn new(color: bool, tmux_socket: std::path::PathBuf) -> App {
        App {
            runs: Runs::default(),
            link: Link::Connecting,
            view: View::Runs,
            pane: Pane::List,
            tab: Tab::Screen,
            modal: None,
            filter: String::new(),
            visible: Vec::new(),
            inbox: Vec::new(),
            sel_run: None,
            sel_node: None,
            sel_item: 0,
            status: None,
            want: None,
            detail: None,
            stats: HashMap::new(),
            color,
            now_ms: 0,
            dirty: true,
            loaded: false,
            tmux_socket,
        }
    }

    /// Folds events in. `live` (the change feed, as they commit): a run that starts needing a
    /// human, or needs one for another reason, rings the terminal's bell once; events read
    /// back from a log (a first load, a refold) never do.
    fn fold_events(&mut self, events: Vec<Event>, live: bool, effects: &mut Vec<Effect>) {
        let before: HashMap<String, Option<Attention>> = if live {
            events
                .iter()
                .map(|ev| {
                    let a = self.runs.by_id.get(&ev.run).and_then(|e| e.attention);
                    (ev.run.clone(), a)
                })
                .collect()
        } else {
            HashMap::new()
        };
        let mut touched: Vec<String> = Vec::new();
        for ev in &events {
            let entry = match self.runs.by_id.get_mut(&ev.run) {
                Some(e) => e,
                None => {
                    // Read from disk before any summary: the fold makes one.
                    let Ok(state) = RunState::from_created(ev) else {
                        continue;
                    };
                    let e = RunEntry::new(octl_proto::projection::summary(&state));
                    self.runs.by_id.entry(ev.run.clone()).or_insert(e)
                }
            };
            if entry.apply(ev).is_err() {
                effects.push(Effect::Request(Request::Refold(ev.run.clone())));
            }
            if touched.last() != Some(&ev.run) {
                touched.push(ev.run.clone());
            }
        }
        for id in touched {
            if let Some(e) = self.runs.by_id.get_mut(&id) {
                e.derive();
            }
        }
        self.loaded = true;
        self.changed();
        effects.extend(self.stat_requests());
        let rings = before.iter().any(|(id, was)| {
            let now = self.runs.by_id.get(id).and_then(|e| e.attention);
            now.is_some() && now != *was
        });
        if rings {
            effects.push(Effect::Bell);
        }
    }

    /// Folds an update in; returns requests it calls for (a refold, loads).
    pub fn update(&mut self, u: Update) -> Vec<Effect> {
        self.dirty = true;
        let mut effects = Vec::new();
        match u {
            Update::Link(link) => self.link = link,
            Update::Summaries(list) => {
                self.loaded = true;
                let seen: std::collections::HashSet<&str> =
                    list.iter().map(|r| r.id.as_str()).collect();
                self.runs.by_id.retain(|id, _| seen.contains(id.as_str()));
                for r in list {
                    match self.runs.by_id.get_mut(&r.id) {
                        Some(e) if e.folded_seq() <= r.last_seq => e.set_summary(r),
                        Some(_) => {}
                        None => {
                            self.runs.by_id.insert(r.id.clone(), RunEntry::new(r));
                        }
                    }
                }
                self.changed();
            }
            Update::Events(events) => self.fold_events(events, false, &mut effects),
            Update::Live(events) => self.fold_events(events, true, &mut effects),
            Update::Done(result) => {
                self.status = Some(match result {
                    Ok(text) => (true, text),
                    Err(e) => (
                        false,
                        match e.hint {
                            Some(h) => format!("{} ({h})", e.message),
                            None => e.message,
                        },
                    ),
                });
            }
            Update::Attach(Ok(argv)) => {
                effects.push(Effect::Handoff(Handoff { argv, dir: None }));
            }
            Update::Attach(Err(e)) => self.say(false, &e.message),
            // Handled by the loop (keys need the terminal's own decoding).
            Update::Input(_) => {}
            Update::Loaded(load, loaded) => {
                if let Load::Numstat { run, node, .. } = &load {
                    if let Some(s) = self.stats.get_mut(&(run.clone(), node.clone())) {
                        s.value = Some(loaded);
                    }
                } else if self.want.as_ref() == Some(&load) {
                    self.detail = Some(loaded);
                }
            }
        }
        effects
    }

    /// Recomputes the order, the filtered list and the inbox after runs changed.
    fn changed(&mut self) {
        self.runs.resort();
        let f = self.filter.to_lowercase();
        self.visible = self
            .runs
            .order
            .iter()
            .filter(|id| f.is_empty() || self.runs.get(id).is_some_and(|e| matches_filter(e, &f)))
            .cloned()
            .collect();
        self.inbox = inbox(&self.runs);
        if self.sel_item >= self.inbox.len() {
            self.sel_item = self.inbox.len().saturating_sub(1);
        }
        let keep = self
            .sel_run
            .as_ref()
            .is_some_and(|id| self.visible.contains(id));
        if !keep {
            self.sel_run = self.visible.first().cloned();
        }
    }

    /// The run the view is about: the open one, else the selected row (or inbox item).
    pub fn run_in_view(&self) -> Option<&RunEntry> {
        let id = match &self.view {
            View::Run(id) => Some(id.as_str()),
            View::Runs => self.sel_run.as_deref(),
            View::Inbox => self.inbox.get(self.sel_item).map(InboxItem::run),
        }?;
        self.runs.get(id)
    }

    /// The selected node of the open run, in plan order.
    pub fn node_in_view(&self) -> Option<&Node> {
        let s = self.run_in_view()?.state.as_ref()?;
        match &self.sel_node {
            Some(id) => s.nodes.get(id),
            None => s.nodes_in_order().next(),
        }
    }

    /// Once a second: elapsed times move; the screen and log of a live node are read again.
    pub fn tick(&mut self, now_ms: u64) -> Vec<Effect> {
        self.now_ms = now_ms;
        self.dirty = true;
        let mut effects = Vec::new();
        if let (View::Run(_), Some(want)) = (&self.view, &self.want) {
            let live = self.node_in_view().is_some_and(|n| n.state.is_alive());
            if live && !matches!(want, Load::Events { .. }) {
                effects.push(Effect::Request(Request::Load(want.clone())));
            }
        }
        effects.extend(self.stat_requests());
        effects
    }

    /// Lines added/removed of the open run's nodes that have a worktree: asked again when the
    /// node changed, or every 10 s while its agent is alive.
    fn stat_requests(&mut self) -> Vec<Effect> {
        let View::Run(id) = &self.view else {
            return Vec::new();
        };
        let Some(s) = self.runs.get(id).and_then(|e| e.state.as_ref()) else {
            return Vec::new();
        };
        let base = diff_base(s);
        let mut out = Vec::new();
        for n in s.nodes_in_order() {
            let (Some(wt), Some(base)) = (n.worktree.as_ref(), base.as_ref()) else {
                continue;
            };
            if n.cleaned {
                continue;
            }
            let key = (s.id.clone(), n.id.clone());
            let stale = match self.stats.get(&key) {
                None => true,
                Some(st) => {
                    st.stamp != n.updated_at
                        || (n.state.is_alive() && st.asked.elapsed().as_secs() >= 10)
                }
            };
            if stale {
                self.stats.insert(
                    key,
                    Stat {
                        stamp: n.updated_at.clone(),
                        asked: Instant::now(),
                        value: self
                            .stats
                            .get(&(s.id.clone(), n.id.clone()))
                            .and_then(|st| st.value.clone()),
                    },
                );
                out.push(Effect::Request(Request::Load(Load::Numstat {
                    run: s.id.clone(),
                    node: n.id.clone(),
                    worktree: wt.clone(),
                    base: base.clone(),
                })));
            }
        }
        out
    }

    /// Points the detail pane at the selected node and tab.
    fn retarget(&mut self) -> Vec<Effect> {
        let want = self.load_for_view();
        if want == self.want {
            return Vec::new();
        }
        self.want = want.clone();
        self.detail = None;
        want.map(|w| Effect::Request(Request::Load(w)))
            .into_iter()
            .collect()
    }

    fn load_for_view(&self) -> Option<Load> {
        let View::Run(run) = &self.view else {
            return None;
        };
        let e = self.runs.get(run)?;
        let s = e.state.as_ref()?;
        let n = self.node_in_view()?;
        let (run, node) = (s.id.clone(), n.id.clone());
        Some(match self.tab {
            Tab::Screen => Load::Screen {
                target: attach_argv(std::path::Path::new(""), &run, n)[5].clone(),
                run,
                node,
            },
            Tab::Log => Load::Log { run, node },
            Tab::Events => Load::Events { run, node },
            Tab::Diff => Load::Diff {
                worktree: n.worktree.clone().unwrap_or_default(),
                base: diff_base(s).unwrap_or_default(),
                run,
                node,
            },
        })
    }

    /// A key press.
    pub fn key(&mut self, cmd: Option<Cmd>, ch: Option<char>) -> Vec<Effect> {
        self.dirty = true;
        if let Some(modal) = self.modal.take() {
            return self.modal_key(modal, cmd, ch);
        }
        let Some(cmd) = cmd else { return Vec::new() };
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
            Cmd::Screen | Cmd::Log | Cmd::Diff | Cmd::Events => {
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
                None => self.say(false, "no open question here"),
            },
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

    fn say(&mut self, ok: bool, text: &str) {
        self.status = Some((ok, text.to_string()));
    }

    fn confirm(&mut self, action: Action, discard: Option<Action>) {
        self.modal = Some(Modal::Confirm { action, discard });
    }

    fn act(&mut self, action: Action) -> Vec<Effect> {
        self.status = Some((true, format!("{}…", action.describe())));
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
        let open: Vec<&Discussion> = s.discussions.values().filter(|d| d.open).collect();
        open.iter()
            .find(|d| matches!(self.view, View::Run(_)) && d.node == node)
            .or_else(|| open.first())
            .map(|d| (*d).clone())
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
        let d = detail_of(s);
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

/// Does the run match the filter (lowercase): its id, title, repo, status, kind, or why it
/// needs you.
fn matches_filter(e: &RunEntry, f: &str) -> bool {
    let s = &e.summary;
    let has = |t: &str| t.to_lowercase().contains(f);
    has(&s.id)
        || s.title.as_deref().is_some_and(has)
        || s.repo.as_deref().is_some_and(has)
        || has(s.status.as_str())
        || has(s.kind_name())
        || e.attention.is_some_and(|a| has(a.label()))
}

/// The branch a run's node branches are compared with: an orchestrate run's integration
/// branch, else the run's base.
pub fn diff_base(s: &RunState) -> Option<String> {
    match (s.kind, &s.settings.integration) {
        (RunKind::Orchestrate, Some(i)) => Some(i.clone()),
        _ => s.base.clone(),
    }
}
