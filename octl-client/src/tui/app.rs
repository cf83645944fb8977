//! The TUI's state and how keys and updates change it. Pure: no terminal, no I/O; what must
//! happen outside (a request to the data thread, handing the terminal to tmux) is returned as
//! an [`Effect`], so every behaviour here is tested without a terminal.
//!
//! - `inbox`: the inbox of every run, most urgent first.
//! - `input`: what each key does, aimed at what the view has selected.

mod inbox;
mod input;

pub use inbox::{inbox, InboxItem, InboxKey};

use std::collections::HashMap;
use std::time::Instant;

use octl_proto::state::{Node, RunState};
use octl_proto::Event;

use super::actions::{Action, Handoff};
use super::detail::{Load, Loaded};
use super::model::{Attention, RunEntry, Runs};
use super::source::{Link, Request, Update};
use crate::commands::run::attach::attach_argv;

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
    Answer {
        id: String,
        question: String,
    },
    Reject {
        id: String,
    },
    /// Why a permission request is denied (optional: empty denies without a reason).
    Deny {
        run: String,
        node: String,
        request: String,
    },
    Send {
        run: String,
        node: String,
    },
    /// A review comment that sends the node's work back to its agent.
    Review {
        run: String,
        node: String,
    },
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

/// How long a status line stays true.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lasts {
    /// Until another line replaces it (what an action did, why a key did nothing).
    Replaced,
    /// While octld does not answer: it goes once the link is live again.
    ReadOnly,
}

/// The line at the bottom: what the last key or action gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub ok: bool,
    pub text: String,
    pub lasts: Lasts,
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
    /// The last action's result.
    pub status: Option<Status>,
    /// The detail pane: what it shows and what it has.
    pub want: Option<Load>,
    pub detail: Option<Loaded>,
    /// The diff's line cursor (`j`/`k` in the detail pane; `c` names its line).
    pub diff_at: usize,
    /// The diff tab shows what changed since the node's last review round (`d` again).
    pub diff_since: bool,
    pub stats: HashMap<(String, String), Stat>,
    pub color: bool,
    pub now_ms: u64,
    /// Something changed since the last frame.
    pub dirty: bool,
    /// A first list of runs arrived (before it, the list says it is loading, not empty).
    pub loaded: bool,
    /// The daemon's private tmux server, where `t` attaches.
    pub tmux_socket: std::path::PathBuf,
    /// Finished runs the home holds beyond those listed (the newest are).
    pub hidden: u64,
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
            diff_at: 0,
            diff_since: false,
            stats: HashMap::new(),
            color,
            now_ms: 0,
            dirty: true,
            loaded: false,
            tmux_socket,
            hidden: 0,
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
            Update::Link(link) => {
                // What was said because octld did not answer is no longer true once it does.
                if link.is_live()
                    && self
                        .status
                        .as_ref()
                        .is_some_and(|s| s.lasts == Lasts::ReadOnly)
                {
                    self.status = None;
                }
                self.link = link;
            }
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
            Update::Hidden(n) => self.hidden = n,
            Update::Events(events) => self.fold_events(events, false, &mut effects),
            Update::Live(events) => self.fold_events(events, true, &mut effects),
            Update::Done(action, result) => {
                self.status = Some(match result {
                    Ok(text) => Status {
                        ok: true,
                        text: match action {
                            Some(a) => format!("{}: {text}", a.describe(&self.runs.short)),
                            None => text,
                        },
                        lasts: Lasts::Replaced,
                    },
                    Err(e) => Status {
                        ok: false,
                        lasts: if e.kind == octl_proto::ErrorKind::DaemonUnreachable {
                            Lasts::ReadOnly
                        } else {
                            Lasts::Replaced
                        },
                        text: match e.hint {
                            Some(h) => format!("{} ({h})", e.message),
                            None => e.message,
                        },
                    },
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
        // The selection stays on its item wherever it moved; once that item is gone, on the
        // row it had (the next item moved up into it).
        let selected = self.inbox.get(self.sel_item).map(InboxItem::key);
        self.inbox = inbox(&self.runs);
        if let Some(i) = selected.and_then(|k| self.inbox.iter().position(|it| it.key() == k)) {
            self.sel_item = i;
        }
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
        self.diff_at = 0;
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
                since: self.diff_since.then(|| last_review_tip(n)).flatten(),
                run,
                node,
            },
        })
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

/// The tip a node's last review round was made on: its diff since is what the agent did after.
pub fn last_review_tip(n: &Node) -> Option<String> {
    n.reviews.iter().rev().find_map(|r| r.head.clone())
}

/// The branch a run's node branches are compared with: an orchestrate run's integration
/// branch, else the run's base.
pub fn diff_base(s: &RunState) -> Option<String> {
    s.settings.diff_base(Some(s.kind), s.base.as_deref())
}
