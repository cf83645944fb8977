//! What the TUI knows of the runs: each run's summary (from `run.list` or `manifest.json`, the
//! first thing shown) and, once read, its state folded from its event log by the same reducer
//! the daemon uses. Everything a view shows is derived here once per change, never per frame.

use std::collections::HashMap;

use octl_proto::event::Event;
use octl_proto::projection::{ListedStatus, RunSummary};
use octl_proto::state::{ActivityState, Discussion, Node, Permission, RunState};
use octl_proto::{NodeState, RunKind};

/// Why a run needs a human, most urgent first: the runs list is sorted by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Attention {
    /// An agent asked for a tool (a permission request) and waits, blocked, for the decision:
    /// the most urgent, since an undecided request is denied after `[permissions] wait`.
    Permission,
    /// An agent asked a question (an open discussion) and waits for the answer.
    Discussion,
    /// An agent proposed a spin-off, which waits to be accepted or rejected.
    Proposal,
    /// An agent waits for input or permission (its node is `waiting`, or its hooks said so).
    Input,
    /// A merge stopped on conflicting files.
    Conflict,
    /// A merge was refused because the base's worktree is dirty for the changed paths.
    MergeBlocked,
    /// A code run (or an orchestrate run's integration branch) waits for `merge`.
    AwaitingMerge,
    /// A node failed (retry it) or the run failed.
    Failed,
}

impl Attention {
    pub fn label(self) -> &'static str {
        match self {
            Attention::Permission => "permission",
            Attention::Discussion => "question",
            Attention::Proposal => "proposal",
            Attention::Input => "input",
            Attention::Conflict => "conflict",
            Attention::MergeBlocked => "blocked",
            Attention::AwaitingMerge => "to merge",
            Attention::Failed => "failed",
        }
    }
}

/// One run as the TUI holds it.
#[derive(Debug, Clone)]
pub struct RunEntry {
    pub summary: RunSummary,
    /// The fold of its log, when read; it wins over the summary once it is at least as new.
    pub state: Option<RunState>,
    /// Why its log could not be folded (shown; the summary stays).
    pub broken: Option<String>,
    /// Derived once per change.
    pub attention: Option<Attention>,
    pub cost_usd: Option<f64>,
}

impl RunEntry {
    pub fn new(summary: RunSummary) -> RunEntry {
        let mut e = RunEntry {
            summary,
            state: None,
            broken: None,
            attention: None,
            cost_usd: None,
        };
        e.derive();
        e
    }

    pub fn id(&self) -> &str {
        &self.summary.id
    }

    /// The fold, when it is complete (it has every event the summary counts).
    pub fn current(&self) -> Option<&RunState> {
        self.state
            .as_ref()
            .filter(|s| s.last_seq >= self.summary.last_seq)
    }

    /// The seq up to which this run's log has been folded (0: not read yet).
    pub fn folded_seq(&self) -> u64 {
        self.state.as_ref().map_or(0, |s| s.last_seq)
    }

    /// Replaces the summary (a newer `run.list` answer); the fold stays if it is as new.
    pub fn set_summary(&mut self, summary: RunSummary) {
        self.summary = summary;
        self.derive();
    }

    /// Folds one event of this run. An event at or below the folded seq is one already seen
    /// (a poll and a feed can overlap) and is skipped; a gap or a refused event drops the fold,
    /// so the source reads the log again rather than showing a state that may be false.
    pub fn apply(&mut self, ev: &Event) -> Result<(), String> {
        let result = match &mut self.state {
            None if ev.seq == 1 => RunState::from_created(ev)
                .map(|s| self.state = Some(s))
                .map_err(|e| e.message),
            None => Err(format!("event {} before the run's first event", ev.seq)),
            Some(s) if ev.seq <= s.last_seq => return Ok(()),
            Some(s) if ev.seq != s.last_seq + 1 => {
                Err(format!("a gap: seq {} after {}", ev.seq, s.last_seq))
            }
            Some(s) => s.apply(ev).map_err(|e| e.message),
        };
        match result {
            Ok(()) => {
                self.broken = None;
                if let Some(s) = &self.state {
                    if s.last_seq > self.summary.last_seq {
                        self.summary = octl_proto::projection::summary(s);
                    }
                }
            }
            Err(e) => {
                self.state = None;
                self.broken = Some(e.clone());
                self.derive();
                return Err(e);
            }
        }
        Ok(())
    }

    /// Recomputes what the views read (call after a batch of [`RunEntry::apply`]).
    pub fn derive(&mut self) {
        if let Some(s) = self.current() {
            self.summary = octl_proto::projection::summary(s);
        }
        self.attention = match self.current() {
            Some(s) => attention_of_state(s),
            None => attention_of_summary(&self.summary),
        };
        self.cost_usd = self.current().and_then(|s| {
            let costs: Vec<f64> = s.nodes.values().filter_map(node_cost).collect();
            (!costs.is_empty()).then(|| costs.iter().sum())
        });
    }
}

/// A node's cost, from its outcome (`total_cost_usd`, as Claude Code reports it).
pub fn node_cost(n: &Node) -> Option<f64> {
    n.outcome.as_ref()?.total_cost_usd
}

/// Can a person answer this question? Not the daemon's question about a merge conflict
/// while its node can still merge: merging settles it, and the daemon refuses an answer
/// (the node is shown as a conflict instead).
pub fn answerable(s: &RunState, d: &Discussion) -> bool {
    d.open
        && !(d.is_merge_conflict()
            && d.node
                .as_deref()
                .and_then(|n| s.nodes.get(n))
                .is_some_and(|n| !n.state.is_terminal()))
}

/// Is this permission request still waiting for a person? Asked, not decided, and its node's
/// agent alive (the daemon takes a decision only then).
pub fn pending(s: &RunState, p: &Permission) -> bool {
    p.decision.is_none() && s.nodes.get(&p.node).is_some_and(|n| n.state.is_alive())
}

/// Why a folded run needs a human, if it does. A question or a proposal still open waits for
/// a person even in a run that has ended.
pub fn attention_of_state(s: &RunState) -> Option<Attention> {
    if s.permissions.values().any(|p| pending(s, p)) {
        return Some(Attention::Permission);
    }
    if s.discussions.values().any(|d| answerable(s, d)) {
        return Some(Attention::Discussion);
    }
    if s.spinoffs.values().any(|p| p.status.is_open()) {
        return Some(Attention::Proposal);
    }
    let status = s.status();
    if status.is_terminal() {
        return (status == octl_proto::RunStatus::Failed).then_some(Attention::Failed);
    }
    let nodes = || s.nodes.values();
    let any = |f: &dyn Fn(&Node) -> bool| nodes().any(f);
    if any(&|n| {
        n.state == NodeState::Waiting
            || (n.state.is_alive()
                && n.activity.as_ref().is_some_and(|a| {
                    matches!(
                        a.state,
                        ActivityState::NeedsPermission | ActivityState::WaitingInput
                    )
                }))
    }) {
        return Some(Attention::Input);
    }
    if any(&|n| n.state == NodeState::Conflict) || s.merge.as_deref() == Some("conflict") {
        return Some(Attention::Conflict);
    }
    if any(&|n| n.state == NodeState::MergeBlocked) || s.merge.as_deref() == Some("merge_blocked") {
        return Some(Attention::MergeBlocked);
    }
    if status == octl_proto::RunStatus::Waiting
        && ((s.kind == RunKind::Code && any(&|n| n.state == NodeState::Done))
            || (s.kind == RunKind::Orchestrate
                && !s.nodes.is_empty()
                && nodes().all(|n| n.state == NodeState::Merged)))
    {
        return Some(Attention::AwaitingMerge);
    }
    if status == octl_proto::RunStatus::Waiting
        && any(&|n| {
            matches!(
                n.state,
                NodeState::Failed | NodeState::Exited | NodeState::Blocked
            )
        })
    {
        return Some(Attention::Failed);
    }
    None
}

/// The same judgement from a summary alone (before the log is read): its status and node
/// counts. A waiting run with none of the other reasons waits on a question.
pub fn attention_of_summary(r: &RunSummary) -> Option<Attention> {
    let has = |state: &str| r.nodes.get(state).is_some_and(|n| *n > 0);
    match r.status {
        ListedStatus::Failed => Some(Attention::Failed),
        ListedStatus::Waiting => Some(if has("waiting") {
            Attention::Input
        } else if has("conflict") || r.merge.as_deref() == Some("conflict") {
            Attention::Conflict
        } else if has("merge_blocked") || r.merge.as_deref() == Some("merge_blocked") {
            Attention::MergeBlocked
        } else if (r.kind == Some(RunKind::Code) && has("done"))
            || (r.kind == Some(RunKind::Orchestrate)
                && r.nodes.keys().all(|k| k == "merged")
                && has("merged"))
        {
            Attention::AwaitingMerge
        } else if has("failed") || has("exited") || has("blocked") {
            Attention::Failed
        } else {
            Attention::Discussion
        }),
        _ => None,
    }
}

/// The order of the runs list: those needing a human first (most urgent reason first), then
/// unfinished ones, then ended ones; newest first within each group.
pub fn sort_key(e: &RunEntry) -> (u8, u8, std::cmp::Reverse<&str>) {
    let group = match (e.attention, e.summary.status.is_ended()) {
        (Some(_), _) => 0,
        (None, false) => 1,
        (None, true) => 2,
    };
    let reason = e.attention.map_or(u8::MAX, |a| a as u8);
    // ULIDs sort by creation time.
    (group, reason, std::cmp::Reverse(e.summary.id.as_str()))
}

/// How each id the TUI shows is cut: the shortest prefix (at least
/// [`ids::SHOWN_PREFIX`](octl_proto::ids::SHOWN_PREFIX)) that no other run's id, or no other
/// question's or proposal's, starts with. Runs started within 256 ms share 8 characters, so a
/// fixed cut would name several at once ("cancel run 01M8SEXK?"). Unique among the runs
/// listed: a finished run not listed could share a shown prefix only if it was made in the
/// same millisecond as a listed one (10 characters are the millisecond).
#[derive(Debug, Default)]
pub struct ShortIds(HashMap<String, usize>);

impl ShortIds {
    fn of_ids(mut ids: Vec<&str>) -> ShortIds {
        ids.sort_unstable();
        ids.dedup();
        let len = |i: usize| {
            let neighbours = [i.checked_sub(1), Some(i + 1)]
                .into_iter()
                .flatten()
                .filter_map(|j| ids.get(j).copied());
            octl_proto::ids::unique_prefix_len(ids[i], neighbours, octl_proto::ids::SHOWN_PREFIX)
        };
        ShortIds(
            (0..ids.len())
                .map(|i| (ids[i].to_string(), len(i)))
                .collect(),
        )
    }

    /// `id` as shown; an id the TUI does not know (yet) whole, the one form sure to be unique.
    pub fn of<'a>(&self, id: &'a str) -> &'a str {
        match self.0.get(id) {
            Some(n) => &id[..*n],
            None => id,
        }
    }
}

/// Every run, by id.
#[derive(Debug, Default)]
pub struct Runs {
    pub by_id: HashMap<String, RunEntry>,
    /// Ids in [`sort_key`] order; recomputed when a run changes, not per frame.
    pub order: Vec<String>,
    /// How run, discussion and proposal ids are shown; recomputed with the order.
    pub short: ShortIds,
}

impl Runs {
    pub fn resort(&mut self) {
        let mut ids: Vec<&RunEntry> = self.by_id.values().collect();
        ids.sort_by(|a, b| sort_key(a).cmp(&sort_key(b)));
        self.order = ids.into_iter().map(|e| e.summary.id.clone()).collect();
        // Run ids are upper case and records' lower case: one table cannot mix them up.
        let mut all: Vec<&str> = self.by_id.keys().map(String::as_str).collect();
        for s in self.by_id.values().filter_map(|e| e.state.as_ref()) {
            all.extend(s.discussions.keys().map(String::as_str));
            all.extend(s.spinoffs.keys().map(String::as_str));
        }
        self.short = ShortIds::of_ids(all);
    }

    pub fn get(&self, id: &str) -> Option<&RunEntry> {
        self.by_id.get(id)
    }
}

/// Milliseconds since the epoch of an RFC 3339 time the daemon wrote.
pub fn millis(ts: &str) -> Option<u64> {
    octl_proto::time::parse_millis(ts)
}

/// A run's age: until its last change once it ended, else until now.
pub fn run_elapsed_s(r: &RunSummary, now_ms: u64) -> Option<u64> {
    let start = millis(&r.created_at)?;
    let end = if r.status.is_ended() {
        millis(&r.updated_at)?
    } else {
        now_ms
    };
    Some(end.saturating_sub(start) / 1000)
}

/// A node's time since it started, or until it finished; `None` if it never started.
pub fn node_elapsed_s(n: &Node, now_ms: u64) -> Option<u64> {
    let start = millis(n.started_at.as_deref()?)?;
    let end = match n.finished_at.as_deref() {
        Some(f) => millis(f)?,
        None if n.state.is_alive() => now_ms,
        None => millis(&n.updated_at)?,
    };
    Some(end.saturating_sub(start) / 1000)
}

/// Nodes by state, compactly: `2 running 1 done`, in the life order of the states.
pub fn counts_cell(r: &RunSummary) -> String {
    let mut out = String::new();
    for state in NodeState::ALL {
        if let Some(n) = r.nodes.get(state.as_str()).filter(|n| **n > 0) {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(&format!("{n} {}", state.as_str()));
        }
    }
    if out.is_empty() {
        out.push('-');
    }
    out
}

/// The depth of each node in its run's DAG (0: no deps), for the tree: one more than its
/// deepest dependency. Unknown deps count as depth 0; a cycle cannot be in a log the reducer
/// accepted, but is cut anyway.
pub fn depths(s: &RunState) -> HashMap<&str, usize> {
    let mut depth: HashMap<&str, usize> = HashMap::new();
    fn visit<'a>(
        s: &'a RunState,
        id: &'a str,
        depth: &mut HashMap<&'a str, usize>,
        guard: usize,
    ) -> usize {
        if let Some(d) = depth.get(id) {
            return *d;
        }
        let d = match s.nodes.get(id) {
            Some(n) if guard < 64 => n
                .deps
                .iter()
                .map(|dep| visit(s, dep, depth, guard + 1) + 1)
                .max()
                .unwrap_or(0),
            _ => 0,
        };
        depth.insert(id, d);
        d
    }
    for id in &s.node_order {
        visit(s, id, &mut depth, 0);
    }
    depth
}
