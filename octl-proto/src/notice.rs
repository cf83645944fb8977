//! Notifications: the moments a node starts needing a person, decided from one event and the
//! run's state just before it. The daemon decides them as it commits each event, in log
//! order, so each transition is told once; replaying a log at a start decides nothing.
//!
//! The JSON a notifier receives (docs/CONFIGURATION.md, "Notifications"):
//! `{"v":1,"kind":"question","run":"…","node":"api","run_kind":"fanout","title":"…",
//! "message":"…","command":"orchestratectl discussion answer …","event":{…the event…}}`.

use serde::{Deserialize, Serialize};

use crate::event::{
    Actor, DiscussionOpened, Event, MergeBlocked, MergeConflict, NodeActivity, NodeDone,
    NodeExited, NodeFailed, NodePermissionAsked, Payload, RunFailed,
};
use crate::state::{ActivityState, NodeState, RunKind, RunState};

/// Why a person is wanted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NoticeKind {
    /// The agent waits for a permission prompt to be answered (its hooks said so).
    NeedsPermission,
    /// The agent waits for input at its prompt.
    WaitingInput,
    /// An agent asked a question (`discussion.opened`).
    Question,
    /// A merge conflicted; the branch and worktree are kept.
    Conflict,
    /// A merge was refused (the target's worktree has changes on the merged paths).
    MergeBlocked,
    /// A node failed or exited unfinished, or the run failed.
    Failed,
    /// A code run's agent is done: its branch waits for review and `merge RUN`.
    AwaitingMerge,
}

impl NoticeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            NoticeKind::NeedsPermission => "needs_permission",
            NoticeKind::WaitingInput => "waiting_input",
            NoticeKind::Question => "question",
            NoticeKind::Conflict => "conflict",
            NoticeKind::MergeBlocked => "merge_blocked",
            NoticeKind::Failed => "failed",
            NoticeKind::AwaitingMerge => "awaiting_merge",
        }
    }
}

/// One notification, as a notifier command reads it on stdin and a webhook receives it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Notice {
    /// The format's version.
    pub v: u32,
    pub kind: NoticeKind,
    pub run: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    pub run_kind: RunKind,
    /// The run's title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// One line for a person: what happened and what to do.
    pub message: String,
    /// The command a person runs next: the answer to a question, the merge after a conflict
    /// or a blocked merge, the retry of a failure, the attach to an agent that waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The permission request a `needs_permission` notice is about (`node.permission_asked`),
    /// answered with `command` (allow) or the same with `deny`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
    /// The event that made it so, as in the log.
    pub event: Event,
}

/// The notification `ev` calls for, given the run's state before it (`None`: nobody needs
/// telling). Called only for an event the reducer accepts.
pub fn notice(before: &RunState, ev: &Event) -> Option<Notice> {
    let node = ev.node.as_deref();
    let node_state = node.and_then(|n| before.nodes.get(n));
    let who = node.map_or_else(|| format!("run {}", before.id), |n| format!("node {n}"));
    let given = |s: Option<String>| s.filter(|s| !s.is_empty());
    let run = &before.id;
    // `--node N` where the notice is about a node.
    let on_node = node.map_or_else(String::new, |n| format!(" --node {n}"));
    let merge = format!("{BIN} merge {run}{on_node}");
    let mut request = None;
    let (kind, message, command) = match ev.kind.as_str() {
        // An agent waits for a decision on a tool: the exact commands that answer it.
        NodePermissionAsked::TYPE => {
            let p: NodePermissionAsked = ev.payload().ok()?;
            let allow = format!("{BIN} node allow {run}{on_node} --request {}", p.request);
            let deny = format!("{BIN} node deny {run}{on_node} --request {}", p.request);
            let what = p.detail.unwrap_or(p.tool);
            request = Some(p.request);
            (
                NoticeKind::NeedsPermission,
                format!("{who} asks to use {what}; answer with `{allow}` or `{deny} --reason '…'`"),
                allow,
            )
        }
        NodeActivity::TYPE => {
            let p: NodeActivity = ev.payload().ok()?;
            let state = ActivityState::parse(&p.state)?;
            let kind = match state {
                ActivityState::NeedsPermission => NoticeKind::NeedsPermission,
                ActivityState::WaitingInput => NoticeKind::WaitingInput,
                _ => return None,
            };
            // Once per transition: the hooks may say the same thing several times.
            if node_state
                .and_then(|n| n.activity.as_ref())
                .is_some_and(|a| a.state == state)
            {
                return None;
            }
            let what = match kind {
                NoticeKind::NeedsPermission => "needs permission",
                _ => "waits for input",
            };
            let attach = format!("{BIN} run attach {run}{on_node}");
            let message = match given(p.detail) {
                Some(d) => format!("{who} {what}: {d}; see to it with `{attach}`"),
                None => format!("{who} {what}; see to it with `{attach}`"),
            };
            (kind, message, attach)
        }
        // A merge conflict's own question is told as the conflict.
        DiscussionOpened::TYPE if ev.actor != Actor::Daemon => {
            let opened = ev.payload::<DiscussionOpened>().ok()?;
            let answer = format!("{BIN} discussion answer {} --text '…'", opened.id);
            let title = given(Some(opened.title));
            (
                NoticeKind::Question,
                format!(
                    "{who} asks: {}; answer with `{answer}`",
                    title.as_deref().unwrap_or("a question")
                ),
                answer,
            )
        }
        MergeConflict::TYPE => {
            let files = ev
                .payload::<MergeConflict>()
                .map(|p| p.files)
                .unwrap_or_default();
            let place = node_state
                .and_then(|n| n.worktree.as_deref())
                .map_or_else(|| "its worktree".to_string(), str::to_string);
            let message = match files.is_empty() {
                true => format!("{who} has a merge conflict"),
                false => format!("{who} has a merge conflict in {}", listed(&files)),
            };
            (
                NoticeKind::Conflict,
                format!("{message}; resolve it and commit in {place}, then run `{merge}`"),
                merge,
            )
        }
        MergeBlocked::TYPE => {
            let p = ev.payload::<MergeBlocked>().unwrap_or_default();
            let why = match (p.reason.as_deref(), p.error) {
                (Some("target_dirty"), _) => {
                    let paths = p.paths.unwrap_or_default();
                    format!(
                        "{} has uncommitted changes to {}; commit or stash them there",
                        p.target_worktree
                            .as_deref()
                            .unwrap_or("the target's checkout"),
                        match paths.is_empty() {
                            true => "the paths it touches".to_string(),
                            false => listed(&paths),
                        }
                    )
                }
                (_, Some(error)) if !error.is_empty() => error,
                _ => "the merge could not be made".to_string(),
            };
            (
                NoticeKind::MergeBlocked,
                format!("{who} cannot merge: {why}, then run `{merge}`"),
                merge,
            )
        }
        // A generic run's nodes are its client's own bookkeeping.
        NodeFailed::TYPE | NodeExited::TYPE if before.kind != RunKind::Generic => {
            let (ended, reason) = if ev.kind == NodeFailed::TYPE {
                (
                    "failed",
                    ev.payload::<NodeFailed>().ok().and_then(|p| p.reason),
                )
            } else {
                (
                    "exited unfinished",
                    ev.payload::<NodeExited>().ok().and_then(|p| p.reason),
                )
            };
            let retry = format!("{BIN} run retry {run}{on_node}");
            let message = match given(reason) {
                Some(r) => format!("{who} {ended}: {r}"),
                None => format!("{who} {ended}"),
            };
            (NoticeKind::Failed, message, retry)
        }
        // In an agent run, the failed node that failed the run was told already.
        RunFailed::TYPE
            if before.kind != RunKind::Generic
                && !before
                    .nodes
                    .values()
                    .any(|n| matches!(n.state, NodeState::Failed | NodeState::Exited)) =>
        {
            (
                NoticeKind::Failed,
                format!("run {run} failed"),
                format!("{BIN} run show {run}"),
            )
        }
        NodeDone::TYPE if before.kind == RunKind::Code => {
            let merge = format!("{BIN} merge {run}");
            (
                NoticeKind::AwaitingMerge,
                format!("{who} is done; review it and run `{merge}`"),
                merge,
            )
        }
        _ => return None,
    };
    Some(Notice {
        v: 1,
        kind,
        run: before.id.clone(),
        node: node.map(str::to_string),
        run_kind: before.kind,
        title: before.title.clone(),
        message,
        command: Some(command),
        request,
        event: ev.clone(),
    })
}

const BIN: &str = "orchestratectl";

/// Paths for a sentence: the first few, and how many more.
fn listed(paths: &[String]) -> String {
    const SHOWN: usize = 5;
    let head = paths[..paths.len().min(SHOWN)].join(", ");
    match paths.len().saturating_sub(SHOWN) {
        0 => head,
        more => format!("{head} and {more} more"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn ev(seq: u64, node: Option<&str>, kind: &str, actor: Actor, data: Value) -> Event {
        Event {
            v: 1,
            seq,
            id: format!("E{seq}"),
            ts: "2026-12-01T10:00:00.000Z".into(),
            run: "R".into(),
            node: node.map(str::to_string),
            kind: kind.into(),
            actor,
            data: data.as_object().cloned().unwrap_or_default(),
            idempotency_key: None,
        }
    }

    /// The run after `events`, and the notices each one called for, in order.
    fn fold(kind: &str, events: &[(Option<&str>, &str, Actor, Value)]) -> Vec<Option<NoticeKind>> {
        let created = ev(
            1,
            None,
            "run.created",
            Actor::Daemon,
            json!({"kind": kind, "title": "t"}),
        );
        let mut state = RunState::from_created(&created).unwrap();
        let mut out = Vec::new();
        for (i, (node, t, actor, data)) in events.iter().enumerate() {
            let e = ev(i as u64 + 2, *node, t, *actor, data.clone());
            let n = notice(&state, &e);
            state
                .apply(&e)
                .unwrap_or_else(|err| panic!("{t}: {}", err.message));
            out.push(n.map(|n| n.kind));
        }
        out
    }

    const D: Actor = Actor::Daemon;
    const A: Actor = Actor::Agent;

    fn started() -> Vec<(Option<&'static str>, &'static str, Actor, Value)> {
        vec![
            (Some("a"), "node.added", D, json!({})),
            (Some("a"), "node.starting", D, json!({"branch": "b"})),
            (Some("a"), "node.started", D, json!({"pane": "%1"})),
        ]
    }

    #[test]
    fn a_question_and_a_failure_once_each() {
        let mut evs = started();
        evs.push((
            Some("a"),
            "discussion.opened",
            A,
            json!({"id": "q1", "title": "which db?"}),
        ));
        evs.push((Some("a"), "node.failed", D, json!({"reason": "exit 1"})));
        evs.push((None, "run.failed", D, json!({})));
        let got = fold("spinoff", &evs);
        assert_eq!(
            got,
            [
                None,
                None,
                None,
                Some(NoticeKind::Question),
                Some(NoticeKind::Failed),
                // The node's failure was told; the run's end is not told again.
                None
            ]
        );
    }

    #[test]
    fn permission_once_per_transition() {
        let mut evs = started();
        for state in [
            "working",
            "needs_permission",
            "needs_permission",
            "working",
            "needs_permission",
        ] {
            evs.push((
                Some("a"),
                "node.activity",
                A,
                json!({"state": state, "detail": "Bash"}),
            ));
        }
        let got = fold("code", &evs);
        assert_eq!(
            got[3..],
            [
                None,
                Some(NoticeKind::NeedsPermission),
                None,
                None,
                Some(NoticeKind::NeedsPermission)
            ]
        );
    }

    #[test]
    fn conflicts_and_code_runs() {
        let mut evs = started();
        evs.push((Some("a"), "node.done", A, json!({})));
        evs.push((Some("a"), "merge.started", D, json!({})));
        evs.push((Some("a"), "merge.conflict", D, json!({"files": ["x"]})));
        // The conflict's own question is not told twice.
        evs.push((
            Some("a"),
            "discussion.opened",
            D,
            json!({"id": "merge-1", "title": "Merge conflict"}),
        ));
        let got = fold("code", &evs);
        assert_eq!(
            got[3..],
            [
                Some(NoticeKind::AwaitingMerge),
                None,
                Some(NoticeKind::Conflict),
                None
            ]
        );
        // A spinoff's done node is the daemon's to merge: nobody is wanted.
        let mut evs = started();
        evs.push((Some("a"), "node.done", A, json!({})));
        assert_eq!(fold("spinoff", &evs)[3], None);
    }

    #[test]
    fn the_json_shape() {
        let created = ev(
            1,
            None,
            "run.created",
            D,
            json!({"kind": "fanout", "title": "docs"}),
        );
        let mut state = RunState::from_created(&created).unwrap();
        for e in [
            ev(2, Some("fr"), "node.added", D, json!({})),
            ev(3, Some("fr"), "node.starting", D, json!({})),
        ] {
            state.apply(&e).unwrap();
        }
        let e = ev(4, Some("fr"), "node.failed", D, json!({"reason": "boom"}));
        let v = serde_json::to_value(notice(&state, &e).unwrap()).unwrap();
        assert_eq!(
            v,
            json!({"v": 1, "kind": "failed", "run": "R", "node": "fr", "run_kind": "fanout",
                   "title": "docs", "message": "node fr failed: boom",
                   "command": "orchestratectl run retry R --node fr",
                   "event": serde_json::to_value(&e).unwrap()})
        );
    }

    /// Each notice, in one state, after one event.
    fn told(kind: &str, events: &[(Option<&str>, &str, Actor, Value)]) -> Notice {
        let created = ev(1, None, "run.created", D, json!({"kind": kind}));
        let mut state = RunState::from_created(&created).unwrap();
        let (last, earlier) = events.split_last().unwrap();
        for (i, (node, t, actor, data)) in earlier.iter().enumerate() {
            state
                .apply(&ev(i as u64 + 2, *node, t, *actor, data.clone()))
                .unwrap();
        }
        let (node, t, actor, data) = last;
        notice(&state, &ev(99, *node, t, *actor, data.clone())).expect("a notice")
    }

    #[test]
    fn each_notice_says_what_happened_and_the_command_that_acts_on_it() {
        let mut evs = started();
        evs[1].3 = json!({"branch": "b", "worktree": "/w/a"});
        let with = |extra: (Option<&'static str>, &'static str, Actor, Value)| {
            let mut e = evs.clone();
            e.push((Some("a"), "node.done", A, json!({})));
            e.push((Some("a"), "merge.started", D, json!({})));
            e.push(extra);
            e
        };
        let n = told(
            "fanout",
            &with((
                Some("a"),
                "merge.blocked",
                D,
                json!({"reason": "target_dirty", "target_worktree": "/src/repo", "paths": ["x.rs"]}),
            )),
        );
        assert_eq!(
            n.message,
            "node a cannot merge: /src/repo has uncommitted changes to x.rs; commit or stash \
             them there, then run `orchestratectl merge R --node a`"
        );
        assert!(!n.message.contains("target_dirty"));
        assert_eq!(
            n.command.as_deref(),
            Some("orchestratectl merge R --node a")
        );
        let files: Vec<String> = (1..=7).map(|i| format!("f{i}")).collect();
        let n = told(
            "fanout",
            &with((Some("a"), "merge.conflict", D, json!({ "files": files }))),
        );
        assert_eq!(
            n.message,
            "node a has a merge conflict in f1, f2, f3, f4, f5 and 2 more; resolve it and commit \
             in /w/a, then run `orchestratectl merge R --node a`"
        );
        let mut q = evs.clone();
        q.push((
            Some("a"),
            "discussion.opened",
            A,
            json!({"id": "01Q", "title": "which db?"}),
        ));
        let n = told("spinoff", &q);
        assert_eq!(
            n.command.as_deref(),
            Some("orchestratectl discussion answer 01Q --text '…'")
        );
        assert!(n
            .message
            .starts_with("node a asks: which db?; answer with `"));
        let mut p = evs.clone();
        p.push((
            Some("a"),
            "node.permission_asked",
            A,
            json!({"request": "p1", "tool": "Bash", "input": {"command": "python3 x.py"},
                   "detail": "Bash: python3 x.py"}),
        ));
        let n = told("spinoff", &p);
        assert_eq!(n.kind, NoticeKind::NeedsPermission);
        assert_eq!(n.request.as_deref(), Some("p1"));
        assert_eq!(
            n.command.as_deref(),
            Some("orchestratectl node allow R --node a --request p1")
        );
        assert_eq!(
            n.message,
            "node a asks to use Bash: python3 x.py; answer with `orchestratectl node allow R \
             --node a --request p1` or `orchestratectl node deny R --node a --request p1 \
             --reason '…'`"
        );
    }
}
