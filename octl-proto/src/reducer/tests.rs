//! Unit tests of the fold: legal transitions, refusals that change nothing, client appends.

use super::*;
use serde_json::{json, Value};

use crate::state::{ActivityState, KeptStatus, NodeState::*, SpinoffStatus};

fn ev(seq: u64, node: Option<&str>, t: &str, actor: Actor, data: Value) -> Event {
    Event {
        v: 1,
        seq,
        id: format!("01JDXK00000000000000000{seq:03}"),
        ts: format!("2026-11-30T10:00:{:02}.000Z", seq % 60),
        run: "01JDXJ0000000000000000000A".into(),
        node: node.map(str::to_string),
        kind: t.into(),
        actor,
        data: data.as_object().unwrap().clone(),
        idempotency_key: None,
    }
}

fn generic() -> RunState {
    RunState::from_created(&ev(
        1,
        None,
        "run.created",
        Actor::Daemon,
        json!({"kind":"generic","title":"t"}),
    ))
    .unwrap()
}

#[test]
fn generic_node_life() {
    let mut s = generic();
    s.apply(&ev(2, Some("a"), "node.added", Actor::Human, json!({})))
        .unwrap();
    s.apply(&ev(
        3,
        Some("a"),
        "node.progress",
        Actor::Human,
        json!({"message":"half"}),
    ))
    .unwrap();
    assert_eq!(s.nodes["a"].state, Running);
    assert_eq!(s.status(), RunStatus::Active);
    s.apply(&ev(4, Some("a"), "node.done", Actor::Human, json!({})))
        .unwrap();
    let err = s
        .apply(&ev(5, Some("a"), "node.failed", Actor::Human, json!({})))
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidTransition);
    assert_eq!(s.last_seq, 4, "a refused event changes nothing");
    s.apply(&ev(5, None, "run.completed", Actor::Human, json!({})))
        .unwrap();
    assert_eq!(s.status(), RunStatus::Completed);
    let err = s
        .apply(&ev(6, Some("b"), "node.added", Actor::Human, json!({})))
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidTransition);
}

#[test]
fn kept_files_are_restored_or_deleted_once() {
    let mut s = generic();
    s.apply(&ev(2, Some("a"), "node.added", Actor::Human, json!({})))
        .unwrap();
    s.apply(&ev(3, Some("a"), "node.done", Actor::Human, json!({})))
        .unwrap();
    s.apply(&ev(4, None, "run.completed", Actor::Human, json!({})))
        .unwrap();
    let kept = json!({"kept": {"dir": "/h/kept/R/a/1", "files": 2, "bytes": 9}});
    s.apply(&ev(
        5,
        Some("a"),
        "cleanup.done",
        Actor::Daemon,
        kept.clone(),
    ))
    .unwrap();
    assert_eq!(s.nodes["a"].kept.len(), 1);
    assert_eq!(s.nodes["a"].kept[0].status, KeptStatus::Kept);
    // The same directory twice is refused, and so is a malformed record.
    assert!(s
        .apply(&ev(6, Some("a"), "cleanup.done", Actor::Daemon, kept))
        .is_err());
    let bad = json!({"kept": {"dir": "/x", "files": "2"}});
    assert_eq!(
        s.apply(&ev(6, Some("a"), "cleanup.done", Actor::Daemon, bad))
            .unwrap_err()
            .kind,
        ErrorKind::InvalidParams
    );
    let restore = json!({"dir": "/h/kept/R/a/1", "worktree": "/w"});
    s.apply(&ev(
        6,
        Some("a"),
        "kept.restored",
        Actor::Daemon,
        restore.clone(),
    ))
    .unwrap();
    assert_eq!(s.nodes["a"].kept[0].restored_to.as_deref(), Some("/w"));
    let before = s.clone();
    for (t, data) in [
        ("kept.restored", restore),
        ("kept.deleted", json!({"dir": "/h/kept/R/a/1"})),
    ] {
        let err = s
            .apply(&ev(7, Some("a"), t, Actor::Daemon, data))
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidTransition);
        assert!(err.message.contains("restored to /w"), "{}", err.message);
    }
    let unknown = json!({"dir": "/nowhere"});
    assert_eq!(
        s.apply(&ev(7, Some("a"), "kept.deleted", Actor::Daemon, unknown))
            .unwrap_err()
            .kind,
        ErrorKind::NotFound
    );
    assert_eq!(s, before);
}

#[test]
fn nodes_are_shown_in_the_order_they_were_added() {
    let mut s = generic();
    for (i, id) in ["u1", "u2", "u10", "b", "a"].iter().enumerate() {
        s.apply(&ev(
            i as u64 + 2,
            Some(id),
            "node.added",
            Actor::Human,
            json!({}),
        ))
        .unwrap();
    }
    let shown: Vec<String> = crate::projection::detail(&s)
        .nodes
        .into_iter()
        .map(|n| n.id)
        .collect();
    assert_eq!(shown, ["u1", "u2", "u10", "b", "a"]);
    // A refused duplicate adds nothing to the order.
    assert!(s
        .apply(&ev(7, Some("u2"), "node.added", Actor::Human, json!({})))
        .is_err());
    assert_eq!(s.node_order.len(), 5);
}

#[test]
fn refusals_change_nothing() {
    let mut s = generic();
    let before = s.clone();
    assert!(s
        .apply(&ev(3, Some("a"), "node.added", Actor::Human, json!({})))
        .is_err());
    assert!(s
        .apply(&ev(2, Some("a"), "node.done", Actor::Human, json!({})))
        .is_err());
    assert!(s
        .apply(&ev(
            2,
            Some("a"),
            "node.added",
            Actor::Human,
            json!({"deps":["../x"]})
        ))
        .is_err());
    assert_eq!(s, before);
}

#[test]
fn agent_runs_need_a_started_agent() {
    let mut s = RunState::from_created(&ev(
        1,
        None,
        "run.created",
        Actor::Daemon,
        json!({"kind":"spinoff"}),
    ))
    .unwrap();
    s.apply(&ev(2, Some("a"), "node.added", Actor::Daemon, json!({})))
        .unwrap();
    assert!(s
        .apply(&ev(3, Some("a"), "node.done", Actor::Agent, json!({})))
        .is_err());
    s.apply(&ev(
        3,
        Some("a"),
        "node.starting",
        Actor::Daemon,
        json!({"branch":"octl/x/a"}),
    ))
    .unwrap();
    s.apply(&ev(4, Some("a"), "node.started", Actor::Daemon, json!({})))
        .unwrap();
    s.apply(&ev(5, Some("a"), "node.done", Actor::Agent, json!({})))
        .unwrap();
    s.apply(&ev(6, Some("a"), "merge.started", Actor::Daemon, json!({})))
        .unwrap();
    s.apply(&ev(
        7,
        Some("a"),
        "merge.conflict",
        Actor::Daemon,
        json!({"files":["f"]}),
    ))
    .unwrap();
    assert_eq!(s.status(), RunStatus::Waiting);
    assert_eq!(s.nodes["a"].conflict_files, vec!["f".to_string()]);
    assert_eq!(s.nodes["a"].branch.as_deref(), Some("octl/x/a"));
}

#[test]
fn discussions_make_a_node_wait() {
    let mut s = generic();
    s.apply(&ev(2, Some("a"), "node.added", Actor::Human, json!({})))
        .unwrap();
    s.apply(&ev(3, Some("a"), "node.progress", Actor::Agent, json!({})))
        .unwrap();
    s.apply(&ev(
        4,
        Some("a"),
        "discussion.opened",
        Actor::Agent,
        json!({"id":"q1","title":"which?"}),
    ))
    .unwrap();
    assert_eq!(s.nodes["a"].state, Waiting);
    assert_eq!(s.status(), RunStatus::Waiting);
    s.apply(&ev(
        5,
        Some("a"),
        "discussion.resolved",
        Actor::Human,
        json!({"id":"q1","answer":"this"}),
    ))
    .unwrap();
    assert_eq!(s.nodes["a"].state, Running);
}

/// A generic run with one proposal `p1`, at seq 2.
fn proposed() -> RunState {
    let mut s = generic();
    s.apply(&ev(
        2,
        None,
        "spinoff.proposed",
        Actor::Agent,
        json!({"id":"p1","task":"fix it"}),
    ))
    .unwrap();
    s
}

#[test]
fn a_proposal_is_decided_once() {
    let mut s = proposed();
    let accepted = json!({"id":"p1","run":"01JDXJ0000000000000000000B","agent":"shell"});
    s.apply(&ev(
        3,
        None,
        "spinoff.accepted",
        Actor::Daemon,
        accepted.clone(),
    ))
    .unwrap();
    let sp = &s.spinoffs["p1"];
    assert_eq!(sp.status, SpinoffStatus::Accepted);
    assert_eq!(sp.child_run.as_deref(), Some("01JDXJ0000000000000000000B"));
    assert_eq!(sp.agent.as_deref(), Some("shell"));
    let before = s.clone();
    // A second acceptance (another child) and a rejection both lose to the first.
    let second = json!({"id":"p1","run":"01JDXJ0000000000000000000C"});
    for (t, data) in [
        ("spinoff.accepted", second),
        ("spinoff.rejected", json!({"id":"p1","reason":"no"})),
    ] {
        let err = s.apply(&ev(4, None, t, Actor::Daemon, data)).unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidTransition);
        assert_eq!(
            err.message,
            "spin-off proposal \"p1\" is already accepted (run 01JDXJ0000000000000000000B)"
        );
    }
    assert_eq!(s, before, "a lost decision changes nothing");

    let mut r = proposed();
    r.apply(&ev(
        3,
        None,
        "spinoff.rejected",
        Actor::Daemon,
        json!({"id":"p1","reason":"no"}),
    ))
    .unwrap();
    let err = r
        .apply(&ev(4, None, "spinoff.accepted", Actor::Daemon, accepted))
        .unwrap_err();
    assert_eq!(err.message, "spin-off proposal \"p1\" is already rejected");
    assert_eq!(r.spinoffs["p1"].child_run, None);
}

#[test]
fn a_proposal_whose_run_could_not_be_made_can_be_decided_again() {
    let mut s = proposed();
    let child = "01JDXJ0000000000000000000B";
    s.apply(&ev(
        3,
        None,
        "spinoff.accepted",
        Actor::Daemon,
        json!({"id":"p1","run":child}),
    ))
    .unwrap();
    // Only the run it was accepted as can fail, and only with a reason.
    for data in [
        json!({"id":"p1","run":"01JDXJ0000000000000000000C","reason":"x"}),
        json!({"id":"p1","reason":"x"}),
    ] {
        let err = s
            .apply(&ev(4, None, "spinoff.failed", Actor::Daemon, data))
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidTransition, "{}", err.message);
    }
    let err = s
        .apply(&ev(
            4,
            None,
            "spinoff.failed",
            Actor::Daemon,
            json!({"id":"p1","run":child}),
        ))
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidParams);
    s.apply(&ev(
        4,
        None,
        "spinoff.failed",
        Actor::Daemon,
        json!({"id":"p1","run":child,"reason":"the repository is gone"}),
    ))
    .unwrap();
    let sp = &s.spinoffs["p1"];
    assert_eq!(sp.status, SpinoffStatus::Failed);
    assert_eq!(sp.child_run, None, "no run is named after one never made");
    assert_eq!(sp.reason.as_deref(), Some("the repository is gone"));
    // Not a dead end: accepted again (a new run), after the run ended too.
    s.apply(&ev(5, None, "run.completed", Actor::Human, json!({})))
        .unwrap();
    s.apply(&ev(
        6,
        None,
        "spinoff.accepted",
        Actor::Daemon,
        json!({"id":"p1","run":"01JDXJ0000000000000000000D"}),
    ))
    .unwrap();
    let sp = &s.spinoffs["p1"];
    assert_eq!(sp.status, SpinoffStatus::Accepted);
    assert_eq!(sp.reason, None);
    assert_eq!(sp.child_run.as_deref(), Some("01JDXJ0000000000000000000D"));
}

#[test]
fn a_discussion_is_answered_once() {
    let mut s = generic();
    s.apply(&ev(
        2,
        None,
        "discussion.opened",
        Actor::Agent,
        json!({"id":"q1","title":"which?"}),
    ))
    .unwrap();
    s.apply(&ev(
        3,
        None,
        "discussion.resolved",
        Actor::Human,
        json!({"id":"q1","answer":"a"}),
    ))
    .unwrap();
    let before = s.clone();
    let err = s
        .apply(&ev(
            4,
            None,
            "discussion.resolved",
            Actor::Human,
            json!({"id":"q1","answer":"b"}),
        ))
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidTransition);
    assert_eq!(err.message, "discussion \"q1\" is already answered: \"a\"");
    assert_eq!(s, before);
    assert_eq!(s.discussions["q1"].answer.as_deref(), Some("a"));
}

/// A spinoff run whose node `a` has run: `node.added`, `node.starting`, `node.started`.
fn started_spinoff() -> RunState {
    let mut s = RunState::from_created(&ev(
        1,
        None,
        "run.created",
        Actor::Daemon,
        json!({"kind":"spinoff"}),
    ))
    .unwrap();
    for (seq, t, data) in [
        (2, "node.added", json!({})),
        (
            3,
            "node.starting",
            json!({"branch":"octl/x/a","worktree":"/w/x/a"}),
        ),
        (4, "node.started", json!({"pane":"%1"})),
    ] {
        s.apply(&ev(seq, Some("a"), t, Actor::Daemon, data))
            .unwrap();
    }
    s
}

#[test]
fn a_merging_node_cannot_be_cancelled() {
    let mut s = started_spinoff();
    s.apply(&ev(5, Some("a"), "node.done", Actor::Agent, json!({})))
        .unwrap();
    s.apply(&ev(6, Some("a"), "merge.started", Actor::Daemon, json!({})))
        .unwrap();
    let before = s.clone();
    let err = s
        .apply(&ev(
            7,
            Some("a"),
            "node.cancelled",
            Actor::Daemon,
            json!({}),
        ))
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidTransition);
    assert!(err.message.contains("is merging"), "{}", err.message);
    assert_eq!(s, before);
    // The merge ends as it ends; merge.succeeded is accepted.
    s.apply(&ev(
        7,
        Some("a"),
        "merge.succeeded",
        Actor::Daemon,
        json!({"commit":"c"}),
    ))
    .unwrap();
    assert_eq!(s.nodes["a"].state, Merged);
}

#[test]
fn a_cancelled_node_cannot_start_merging() {
    let mut s = started_spinoff();
    s.apply(&ev(5, Some("a"), "node.done", Actor::Agent, json!({})))
        .unwrap();
    s.apply(&ev(
        6,
        Some("a"),
        "node.cancelled",
        Actor::Daemon,
        json!({}),
    ))
    .unwrap();
    let err = s
        .apply(&ev(7, Some("a"), "merge.started", Actor::Daemon, json!({})))
        .unwrap_err();
    assert!(err.message.contains("is cancelled"), "{}", err.message);
}

#[test]
fn a_second_retry_loses_and_a_retry_opens_a_failed_run_again() {
    let mut s = started_spinoff();
    s.apply(&ev(
        5,
        Some("a"),
        "node.failed",
        Actor::Daemon,
        json!({"reason":"r"}),
    ))
    .unwrap();
    s.apply(&ev(6, None, "run.failed", Actor::Daemon, json!({})))
        .unwrap();
    assert_eq!(s.status(), RunStatus::Failed);
    // Other events stay refused after the end.
    assert!(s
        .apply(&ev(7, Some("a"), "node.progress", Actor::Daemon, json!({})))
        .is_err());
    s.apply(&ev(7, Some("a"), "node.retried", Actor::Daemon, json!({})))
        .unwrap();
    assert_eq!(s.ended, None);
    assert_eq!(s.status(), RunStatus::Active);
    let n = &s.nodes["a"];
    assert_eq!(n.state, Pending);
    assert!(n.stale_attempt(), "the old attempt is still to clean up");
    assert_eq!(
        n.pane.as_deref(),
        Some("%1"),
        "kept so the cleanup can close it"
    );
    let before = s.clone();
    let err = s
        .apply(&ev(8, Some("a"), "node.retried", Actor::Daemon, json!({})))
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidTransition);
    assert!(err.message.contains("is pending"), "{}", err.message);
    assert_eq!(s, before);
    s.apply(&ev(8, Some("a"), "cleanup.done", Actor::Daemon, json!({})))
        .unwrap();
    assert!(!s.nodes["a"].stale_attempt());
    s.apply(&ev(
        9,
        Some("a"),
        "node.starting",
        Actor::Daemon,
        json!({"branch":"octl/x/a"}),
    ))
    .unwrap();
    let n = &s.nodes["a"];
    assert!(!n.cleaned && n.pane.is_none(), "a new attempt: {n:?}");
}

#[test]
fn only_a_failed_run_reopens() {
    let mut s = started_spinoff();
    s.apply(&ev(5, Some("a"), "node.failed", Actor::Daemon, json!({})))
        .unwrap();
    s.apply(&ev(6, None, "run.cancelled", Actor::Daemon, json!({})))
        .unwrap();
    let err = s
        .apply(&ev(7, Some("a"), "node.retried", Actor::Daemon, json!({})))
        .unwrap_err();
    assert!(err.message.contains("cancelled"), "{}", err.message);
    let mut g = generic();
    g.apply(&ev(2, Some("a"), "node.added", Actor::Human, json!({})))
        .unwrap();
    g.apply(&ev(3, Some("a"), "node.failed", Actor::Human, json!({})))
        .unwrap();
    g.apply(&ev(4, None, "run.failed", Actor::Human, json!({})))
        .unwrap();
    assert!(g
        .apply(&ev(5, Some("a"), "node.retried", Actor::Daemon, json!({})))
        .is_err());
}

#[test]
fn a_failed_node_merges_only_when_accepted_as_committed() {
    let mut s = started_spinoff();
    s.apply(&ev(5, Some("a"), "node.failed", Actor::Daemon, json!({})))
        .unwrap();
    s.apply(&ev(6, None, "run.failed", Actor::Daemon, json!({})))
        .unwrap();
    assert!(s
        .apply(&ev(7, Some("a"), "merge.started", Actor::Daemon, json!({})))
        .is_err());
    // Only the daemon's event carries the say-so.
    assert!(s
        .apply(&ev(
            7,
            Some("a"),
            "merge.started",
            Actor::Human,
            json!({"accept_failed": true})
        ))
        .is_err());
    s.apply(&ev(
        7,
        Some("a"),
        "merge.started",
        Actor::Daemon,
        json!({"accept_failed": true}),
    ))
    .unwrap();
    assert_eq!(s.nodes["a"].state, Merging);
    assert_eq!(s.ended, None, "the run is open again");
    s.apply(&ev(
        8,
        Some("a"),
        "merge.succeeded",
        Actor::Daemon,
        json!({"commit":"c"}),
    ))
    .unwrap();
    assert_eq!(s.nodes["a"].state, Merged);
}

#[test]
fn client_permissions() {
    assert!(client_may_append(RunKind::Generic, "node.added"));
    assert!(!client_may_append(RunKind::Spinoff, "node.added"));
    assert!(!client_may_append(RunKind::Generic, "merge.succeeded"));
    assert!(client_may_append(RunKind::Code, "x.note"));
    assert!(!client_may_append(RunKind::Generic, "run.created"));
}

#[test]
fn activity_is_the_agents_to_say_while_it_lives_and_never_moves_the_node() {
    use crate::state::ActivityState;
    let mut s = started_spinoff();
    assert_eq!(
        s.nodes["a"].activity_or_unknown().state,
        ActivityState::Unknown
    );
    assert_eq!(
        s.nodes["a"].activity_or_unknown().since,
        s.nodes["a"].started_at.clone().unwrap(),
        "unknown since the node started"
    );
    let said = |seq, state: &str, detail: &str| {
        ev(
            seq,
            Some("a"),
            "node.activity",
            Actor::Agent,
            json!({"state": state, "detail": detail, "hook": "PreToolUse", "session_id": "s-1"}),
        )
    };
    s.apply(&said(5, "working", "Bash")).unwrap();
    s.apply(&said(6, "working", "Edit")).unwrap();
    let a = s.nodes["a"].activity.clone().unwrap();
    assert_eq!(a.state, ActivityState::Working);
    assert_eq!(a.detail.as_deref(), Some("Edit"));
    assert_eq!(
        a.since,
        ev(5, None, "x", Actor::Agent, json!({})).ts,
        "since it began working"
    );
    assert_eq!(s.nodes["a"].state, Running, "the node's state is untouched");
    assert_eq!(s.nodes["a"].session_id.as_deref(), Some("s-1"));
    s.apply(&said(7, "needs_permission", "Bash")).unwrap();
    assert_eq!(
        s.nodes["a"].activity.as_ref().unwrap().since,
        ev(7, None, "x", Actor::Agent, json!({})).ts
    );

    // Refused, changing nothing: another actor, a state it does not know, a finished node.
    let before = s.clone();
    for actor in [Actor::Human, Actor::Tool, Actor::Daemon] {
        let mut e = said(8, "idle", "");
        e.actor = actor;
        assert_eq!(s.apply(&e).unwrap_err().kind, ErrorKind::Forbidden);
    }
    let err = s.apply(&said(8, "busy", "")).unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidParams);
    assert!(err.message.contains("data.state"), "{}", err.message);
    assert_eq!(s, before);
    s.apply(&ev(8, Some("a"), "node.done", Actor::Agent, json!({})))
        .unwrap();
    let err = s.apply(&said(9, "idle", "")).unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidTransition);
    assert!(err.message.contains("is done"), "{}", err.message);
    assert!(client_may_append(RunKind::Spinoff, "node.activity"));
}

#[test]
fn a_requeue_is_recorded_once_per_copy_by_the_daemon_and_never_moves_the_node() {
    let mut s = started_spinoff();
    let requeued = |seq, copy: u32| {
        ev(
            seq,
            Some("a"),
            "node.requeued",
            Actor::Daemon,
            json!({"copy": copy, "from": "n1", "reason": "node n1 lost"}),
        )
    };
    s.apply(&requeued(5, 1)).unwrap();
    let a = &s.nodes["a"];
    assert_eq!(a.state, Running, "the node's state is untouched");
    let r = a.requeued.clone().unwrap();
    assert_eq!((r.copy, r.from.as_deref()), (1, Some("n1")));
    assert_eq!(r.at, requeued(5, 1).ts);

    // Refused, changing nothing: the same copy again (a second tick's look), another actor,
    // a copy without its number.
    let before = s.clone();
    let err = s.apply(&requeued(6, 1)).unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidTransition);
    assert!(
        err.message.contains("already runs copy 1"),
        "{}",
        err.message
    );
    let mut e = requeued(6, 2);
    e.actor = Actor::Agent;
    assert_eq!(s.apply(&e).unwrap_err().kind, ErrorKind::Forbidden);
    let e = ev(6, Some("a"), "node.requeued", Actor::Daemon, json!({}));
    assert_eq!(s.apply(&e).unwrap_err().kind, ErrorKind::InvalidParams);
    assert_eq!(s, before);
    assert!(!client_may_append(RunKind::Spinoff, "node.requeued"));

    s.apply(&requeued(6, 2)).unwrap();
    assert_eq!(s.nodes["a"].requeued.as_ref().unwrap().copy, 2);
    // A new attempt starts without its predecessor's requeues; a finished node takes none.
    s.apply(&ev(
        7,
        Some("a"),
        "node.exited",
        Actor::Daemon,
        json!({"exit_status": 1}),
    ))
    .unwrap();
    let err = s.apply(&requeued(8, 3)).unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidTransition);
    s.apply(&ev(8, Some("a"), "node.retried", Actor::Daemon, json!({})))
        .unwrap();
    s.apply(&ev(
        9,
        Some("a"),
        "node.starting",
        Actor::Daemon,
        json!({"branch":"octl/x/a","worktree":"/w/x/a"}),
    ))
    .unwrap();
    assert_eq!(s.nodes["a"].requeued, None);
    s.apply(&requeued(10, 1)).unwrap();
}

#[test]
fn queued_and_lost_nodes_stay_alive_and_come_back_as_they_were() {
    let mut s = started_spinoff();
    let d = |seq, t: &str, data: Value| ev(seq, Some("a"), t, Actor::Daemon, data);
    s.apply(&d(5, "node.queued", json!({"reason": "Resources"})))
        .unwrap();
    let a = &s.nodes["a"];
    assert_eq!(a.state, Queued);
    assert_eq!(
        a.queued.as_ref().unwrap().reason.as_deref(),
        Some("Resources")
    );
    assert_eq!(a.started_at, None, "a queued agent has not begun to run");
    assert!(a.state.is_alive());
    assert_eq!(s.status(), RunStatus::Active);
    s.apply(&d(6, "node.running", json!({}))).unwrap();
    let a = &s.nodes["a"];
    assert_eq!((a.state, a.queued.clone()), (Running, None));
    assert_eq!(
        a.started_at.as_deref(),
        Some(d(6, "x", json!({})).ts.as_str())
    );

    // Lost: its reason and since when, alive still; found again as it was. Without a reason,
    // or with a time that is none, it is refused.
    let before = s.clone();
    for bad in [json!({}), json!({"reason": "r", "since": "yesterday"})] {
        let err = s.apply(&d(7, "node.lost", bad)).unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidParams, "{}", err.message);
    }
    assert_eq!(s, before);
    s.apply(&d(
        7,
        "node.lost",
        json!({"reason": "ssh host s1 stopped answering", "since": "2026-11-30T10:00:03.000Z"}),
    ))
    .unwrap();
    let a = &s.nodes["a"];
    assert_eq!(a.state, Lost);
    let l = a.lost.clone().unwrap();
    assert_eq!(
        (l.since.as_str(), l.was),
        ("2026-11-30T10:00:03.000Z", Running)
    );
    assert!(l.reason.contains("s1"));
    assert_eq!(s.status(), RunStatus::Active, "it waits for its host");

    // Refused, changing nothing: another actor, lost again, found while not lost, a bad time.
    let before = s.clone();
    let mut e = d(8, "node.found", json!({}));
    e.actor = Actor::Agent;
    assert_eq!(s.apply(&e).unwrap_err().kind, ErrorKind::Forbidden);
    let err = s
        .apply(&d(8, "node.lost", json!({"reason": "again"})))
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidTransition);
    assert!(err.message.contains("is lost"), "{}", err.message);
    let err = s.apply(&d(8, "node.queued", json!({}))).unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidTransition);
    assert_eq!(s, before);
    assert!(!client_may_append(RunKind::Spinoff, "node.lost"));

    s.apply(&d(8, "node.found", json!({}))).unwrap();
    assert_eq!(
        (s.nodes["a"].state, s.nodes["a"].lost.clone()),
        (Running, None)
    );
    // A queued node lost and found is queued again, with its reason.
    s.apply(&d(9, "node.queued", json!({"reason": "Priority"})))
        .unwrap();
    s.apply(&d(10, "node.lost", json!({"reason": "slurmctld"})))
        .unwrap();
    s.apply(&d(11, "node.found", json!({}))).unwrap();
    let a = &s.nodes["a"];
    assert_eq!(a.state, Queued);
    assert_eq!(
        a.queued.as_ref().unwrap().reason.as_deref(),
        Some("Priority")
    );

    // Its end is judged from where it is, and clears what it waited for.
    s.apply(&d(12, "node.lost", json!({"reason": "gone quiet"})))
        .unwrap();
    s.apply(&d(13, "node.exited", json!({"exit_status": 0})))
        .unwrap();
    let a = &s.nodes["a"];
    assert_eq!(
        (a.state, a.lost.clone(), a.queued.clone()),
        (Exited, None, None)
    );
    let err = s.apply(&d(14, "node.found", json!({}))).unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidTransition);

    // Only a started node: one without an agent is neither queued nor lost.
    let mut s = started_spinoff();
    s.nodes.get_mut("a").unwrap().pane = None;
    let err = s
        .apply(&d(5, "node.lost", json!({"reason": "x"})))
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidTransition);
}

#[test]
fn the_session_is_recorded_at_start_and_a_resumed_retry_keeps_its_attempt() {
    let mut s = RunState::from_created(&ev(
        1,
        None,
        "run.created",
        Actor::Daemon,
        json!({"kind":"spinoff"}),
    ))
    .unwrap();
    let sid = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";
    for (seq, t, data) in [
        (2, "node.added", json!({})),
        (
            3,
            "node.starting",
            json!({"branch":"octl/x/a","worktree":"/w/x/a","session_id": sid}),
        ),
        (4, "node.started", json!({"pane":"%1"})),
        (5, "node.exited", json!({})),
    ] {
        s.apply(&ev(seq, Some("a"), t, Actor::Daemon, data))
            .unwrap();
    }
    assert_eq!(s.nodes["a"].session_id.as_deref(), Some(sid));
    assert!(!s.nodes["a"].resume);
    s.apply(&ev(
        6,
        Some("a"),
        "node.retried",
        Actor::Daemon,
        json!({"resume": true, "session_id": sid}),
    ))
    .unwrap();
    let n = &s.nodes["a"];
    assert!(n.resume && n.state == Pending);
    assert!(
        !n.stale_attempt(),
        "a resumed node keeps its worktree and branch"
    );
    s.apply(&ev(
        7,
        Some("a"),
        "node.starting",
        Actor::Daemon,
        json!({"branch":"octl/x/a","worktree":"/w/x/a","session_id": sid, "resume": true}),
    ))
    .unwrap();
    assert!(s.nodes["a"].resume);
    assert_eq!(s.nodes["a"].session_id.as_deref(), Some(sid));
}

#[test]
fn a_paused_node_waits_for_its_reset_then_starts_again_and_costs_add_up() {
    let mut s = started_spinoff();
    // A client cannot pause a node; the daemon needs the reset time.
    assert!(!client_may_append(RunKind::Spinoff, "node.paused"));
    let err = s
        .apply(&ev(5, Some("a"), "node.paused", Actor::Daemon, json!({})))
        .unwrap_err();
    assert!(err.message.contains("data.until"), "{}", err.message);
    s.apply(&ev(
        5,
        Some("a"),
        "node.paused",
        Actor::Daemon,
        json!({"until": "2026-12-01T10:00:00.000Z", "reason": "limit",
               "outcome": {"total_cost_usd": 0.25}}),
    ))
    .unwrap();
    let a = &s.nodes["a"];
    assert_eq!(a.state, Paused);
    assert_eq!(a.paused_until.as_deref(), Some("2026-12-01T10:00:00.000Z"));
    assert_eq!(a.cost_usd, Some(0.25));
    assert!(!a.state.is_alive() && !a.state.is_terminal());
    // It resumes by itself: the run is not waiting for a human.
    assert_eq!(s.status(), RunStatus::Active);
    // Only a start moves it on (or a cancel).
    let err = s
        .apply(&ev(6, Some("a"), "node.done", Actor::Agent, json!({})))
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidTransition);
    s.apply(&ev(
        6,
        Some("a"),
        "node.starting",
        Actor::Daemon,
        json!({"branch":"octl/x/a","worktree":"/w/x/a"}),
    ))
    .unwrap();
    assert_eq!(s.nodes["a"].state, Starting);
    assert_eq!(s.nodes["a"].paused_until, None);
    s.apply(&ev(
        7,
        Some("a"),
        "node.started",
        Actor::Daemon,
        json!({"pane":"%2"}),
    ))
    .unwrap();
    s.apply(&ev(
        8,
        Some("a"),
        "node.done",
        Actor::Daemon,
        json!({"outcome": {"total_cost_usd": 0.5}}),
    ))
    .unwrap();
    // Every attempt's cost, summed per node and per run.
    assert_eq!(s.nodes["a"].cost_usd, Some(0.75));
    assert_eq!(s.cost_usd(), Some(0.75));
    assert_eq!(crate::projection::summary(&s).cost_usd, Some(0.75));
}

#[test]
fn a_spent_budget_is_recorded_once_and_the_run_waits_for_a_human() {
    let mut s = RunState::from_created(&ev(
        1,
        None,
        "run.created",
        Actor::Daemon,
        json!({"kind":"fanout","max_budget_usd": 1.0}),
    ))
    .unwrap();
    s.apply(&ev(2, Some("u1"), "node.added", Actor::Daemon, json!({})))
        .unwrap();
    assert_eq!(s.status(), RunStatus::Active);
    assert!(!client_may_append(RunKind::Fanout, "run.budget_spent"));
    let err = s
        .apply(&ev(
            3,
            Some("u1"),
            "run.budget_spent",
            Actor::Daemon,
            json!({}),
        ))
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidParams);
    s.apply(&ev(
        3,
        None,
        "run.budget_spent",
        Actor::Daemon,
        json!({"spent_usd": 1.2, "budget_usd": 1.0, "next": "u1"}),
    ))
    .unwrap();
    assert!(s.budget_spent);
    // A pending node that will not start leaves the run to a human.
    assert_eq!(s.status(), RunStatus::Waiting);
    let err = s
        .apply(&ev(4, None, "run.budget_spent", Actor::Daemon, json!({})))
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidTransition);
    assert!(crate::projection::summary(&s).budget_spent);

    // A person raises it: the budget is what they said, no longer spent, and the pending node
    // may start (the run is active again). A bad change changes nothing.
    assert!(!client_may_append(RunKind::Fanout, "run.budget_changed"));
    for bad in [
        json!({}),
        json!({"add_usd": 1.0, "budget_usd": 3.0}),
        json!({"add_usd": -1.0}),
        json!({"add_usd": 0}),
        json!({"budget_usd": "2"}),
    ] {
        let before = s.clone();
        let err = s
            .apply(&ev(
                4,
                None,
                "run.budget_changed",
                Actor::Daemon,
                bad.clone(),
            ))
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidParams, "{bad}: {}", err.message);
        assert!(err.message.contains("data."), "{bad}: {}", err.message);
        assert_eq!(s, before, "a refused event changes nothing");
    }
    s.apply(&ev(
        4,
        None,
        "run.budget_changed",
        Actor::Daemon,
        json!({"add_usd": 0.5}),
    ))
    .unwrap();
    assert!(!s.budget_spent);
    assert_eq!(s.settings.max_budget_usd, Some(1.5));
    assert_eq!(s.status(), RunStatus::Active);
    let summary = crate::projection::summary(&s);
    assert!(!summary.budget_spent);
    assert_eq!(summary.settings.max_budget_usd, Some(1.5));
    // Spent again, it is said again; a budget set outright replaces it.
    s.apply(&ev(
        5,
        None,
        "run.budget_spent",
        Actor::Daemon,
        json!({"spent_usd": 1.6, "budget_usd": 1.5, "next": "u1"}),
    ))
    .unwrap();
    s.apply(&ev(
        6,
        None,
        "run.budget_changed",
        Actor::Daemon,
        json!({"budget_usd": 4.0}),
    ))
    .unwrap();
    assert_eq!(s.settings.max_budget_usd, Some(4.0));
    assert_eq!(s.status(), RunStatus::Active);
}

#[test]
fn a_new_budget_must_be_above_what_was_spent() {
    let budget_after = |b, spent, add, set| {
        super::budget_after(b, spent, add, set, ["data.add_usd", "data.budget_usd"])
    };
    assert_eq!(budget_after(Some(1.0), 1.2, Some(0.5), None).unwrap(), 1.5);
    assert_eq!(budget_after(None, 0.0, None, Some(2.0)).unwrap(), 2.0);
    let err = budget_after(Some(1.0), 1.2, Some(0.1), None).unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidParams);
    assert!(
        err.message.contains("data.add_usd") && err.message.contains("$1.1 is not above the $1.2"),
        "{}",
        err.message
    );
    let err = budget_after(Some(1.0), 1.2, None, Some(1.2)).unwrap_err();
    assert!(err.message.contains("data.budget_usd"), "{}", err.message);
    let err = budget_after(None, 0.0, Some(1.0), None).unwrap_err();
    assert!(
        err.message.contains("no budget to add to"),
        "{}",
        err.message
    );
    assert_eq!(super::usd(0.00001), "$0.00001");
    assert_eq!(super::usd(2.0), "$2");
}

#[test]
fn a_start_holds_the_port_its_intent_names_and_a_bad_port_changes_nothing() {
    let mut s = RunState::from_created(&ev(
        1,
        None,
        "run.created",
        Actor::Daemon,
        json!({"kind":"spinoff"}),
    ))
    .unwrap();
    s.apply(&ev(2, Some("a"), "node.added", Actor::Daemon, json!({})))
        .unwrap();
    for bad in [json!(0), json!(70000), json!("3100")] {
        let before = s.clone();
        let err = s
            .apply(&ev(
                3,
                Some("a"),
                "node.starting",
                Actor::Daemon,
                json!({"port": bad}),
            ))
            .unwrap_err();
        assert!(err.message.contains("data.port"), "{}", err.message);
        assert_eq!(s, before, "a refused event changes nothing");
    }
    s.apply(&ev(
        3,
        Some("a"),
        "node.starting",
        Actor::Daemon,
        json!({"port": 3100}),
    ))
    .unwrap();
    assert_eq!(s.nodes["a"].port, Some(3100));
}

#[test]
fn an_agent_that_reports_before_its_start_is_recorded_keeps_its_state_and_gets_its_window() {
    let mut s = RunState::from_created(&ev(
        1,
        None,
        "run.created",
        Actor::Daemon,
        json!({"kind":"spinoff"}),
    ))
    .unwrap();
    s.apply(&ev(2, Some("a"), "node.added", Actor::Daemon, json!({})))
        .unwrap();
    s.apply(&ev(
        3,
        Some("a"),
        "node.starting",
        Actor::Daemon,
        json!({"branch":"octl/x/a","worktree":"/w/x/a"}),
    ))
    .unwrap();
    // The agent asks a question before the daemon has written node.started.
    s.apply(&ev(4, Some("a"), "node.waiting", Actor::Agent, json!({})))
        .unwrap();
    s.apply(&ev(
        5,
        Some("a"),
        "node.started",
        Actor::Daemon,
        json!({"pane":"%1"}),
    ))
    .unwrap();
    assert_eq!(s.nodes["a"].state, Waiting, "what the agent said stands");
    assert_eq!(s.nodes["a"].pane.as_deref(), Some("%1"));
    // Started once only.
    let before = s.clone();
    let err = s
        .apply(&ev(
            6,
            Some("a"),
            "node.started",
            Actor::Daemon,
            json!({"pane":"%2"}),
        ))
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidTransition);
    assert_eq!(s, before);
}

#[test]
fn a_permission_request_is_decided_once_and_always_adds_its_rule() {
    let mut s = started_spinoff();
    let asked = json!({"request": "p1", "tool": "Bash", "input": {"command": "python3 x.py"},
                       "detail": "Bash: python3 x.py"});
    // Only the node's own agent asks, while its process may be alive.
    for (actor, data) in [
        (Actor::Human, asked.clone()),
        (
            Actor::Agent,
            json!({"request": "P 1", "tool": "Bash", "input": {}}),
        ),
        (
            Actor::Agent,
            json!({"request": "p1", "tool": "Bash", "input": "python3"}),
        ),
    ] {
        let before = s.clone();
        assert!(s
            .apply(&ev(5, Some("a"), "node.permission_asked", actor, data))
            .is_err());
        assert_eq!(s, before, "a refused event changes nothing");
    }
    s.apply(&ev(
        5,
        Some("a"),
        "node.permission_asked",
        Actor::Agent,
        asked.clone(),
    ))
    .unwrap();
    let a = s.nodes["a"].activity.clone().unwrap();
    assert_eq!(a.state, ActivityState::NeedsPermission);
    assert_eq!(a.detail.as_deref(), Some("Bash: python3 x.py"));
    assert_eq!(s.nodes["a"].state, Running, "asking never moves the node");
    let err = s
        .apply(&ev(
            6,
            Some("a"),
            "node.permission_asked",
            Actor::Agent,
            asked,
        ))
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidTransition);

    let decided = |behavior: &str, always: bool| json!({"request": "p1", "behavior": behavior, "by": "human", "always": always});
    for (actor, data, kind) in [
        (Actor::Agent, decided("allow", false), ErrorKind::Forbidden),
        (
            Actor::Human,
            decided("maybe", false),
            ErrorKind::InvalidParams,
        ),
        (
            Actor::Human,
            json!({"request": "p1", "behavior": "allow", "by": "human"}),
            ErrorKind::InvalidParams,
        ),
        (
            Actor::Human,
            json!({"request": "p9", "behavior": "allow", "by": "human", "always": false}),
            ErrorKind::NotFound,
        ),
    ] {
        let before = s.clone();
        let err = s
            .apply(&ev(
                6,
                Some("a"),
                "node.permission_decided",
                actor,
                data.clone(),
            ))
            .unwrap_err();
        assert_eq!(err.kind, kind, "{data}: {}", err.message);
        assert_eq!(s, before, "a refused event changes nothing");
    }
    s.apply(&ev(
        6,
        Some("a"),
        "node.permission_decided",
        Actor::Human,
        decided("allow", true),
    ))
    .unwrap();
    assert_eq!(s.allowed, vec!["Bash(python3 *)".to_string()]);
    assert_eq!(
        s.nodes["a"].activity.as_ref().unwrap().state,
        ActivityState::Working
    );
    // The loser of a race changes nothing and is told who won.
    let before = s.clone();
    let err = s
        .apply(&ev(
            7,
            Some("a"),
            "node.permission_decided",
            Actor::Daemon,
            json!({"request": "p1", "behavior": "deny", "by": "timeout", "always": false}),
        ))
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidTransition);
    assert!(
        err.message.contains("already decided: allowed by human"),
        "{}",
        err.message
    );
    assert_eq!(s, before);

    let input = |cmd: &str| json!({"command": cmd}).as_object().unwrap().clone();
    assert!(rule_allows(
        "Bash(python3 *)",
        "Bash",
        &input("python3 y.py")
    ));
    assert!(!rule_allows(
        "Bash(python3 *)",
        "Bash",
        &input("python3 y.py && rm -rf /")
    ));
    assert!(!rule_allows(
        "Bash(python3 *)",
        "Bash",
        &input("python y.py")
    ));
    assert!(rule_allows("WebFetch", "WebFetch", &input("x")));
    assert_eq!(rule_for("WebFetch", &input("x")), "WebFetch");
}

#[test]
fn a_review_sends_the_node_back_once_and_an_approval_is_once() {
    let review = |seq, actor, data| ev(seq, Some("a"), "node.review", actor, data);
    let mut s = started_spinoff();
    s.apply(&ev(5, Some("a"), "node.done", Actor::Agent, json!({})))
        .unwrap();
    // Refused, changing nothing: an agent's review, neither changes nor approval, both, a
    // way a node without a conversation cannot take.
    let before = s.clone();
    for (data, actor, says) in [
        (
            json!({"by":"human","comments":["x"],"way":"typed"}),
            Actor::Agent,
            "agent cannot review",
        ),
        (json!({"by":"human"}), Actor::Human, "one of the two"),
        (
            json!({"by":"human","comments":["x"],"approve":true}),
            Actor::Human,
            "one of the two",
        ),
        (
            json!({"by":"human","comments":["x"]}),
            Actor::Human,
            "missing data.way",
        ),
        (
            json!({"by":"human","comments":["x"],"way":"resumed"}),
            Actor::Human,
            "no conversation",
        ),
        (
            json!({"by":"human","comments":[" "],"way":"typed"}),
            Actor::Human,
            "non-empty",
        ),
        (
            json!({"by":"human","comments":["x"],"way":"sideways"}),
            Actor::Human,
            "\"typed\", \"resumed\" or \"attempt\"",
        ),
    ] {
        let err = s.apply(&review(6, actor, data)).unwrap_err();
        assert!(err.message.contains(says), "{says}: {}", err.message);
        assert_eq!(s, before);
    }
    // Typed into the live session: running again; a second review at once finds it so.
    s.apply(&review(
        6,
        Actor::Human,
        json!({"by":"human","comments":["use the helper"],"way":"typed","head":"abc"}),
    ))
    .unwrap();
    assert_eq!(s.nodes["a"].state, Running);
    let err = s
        .apply(&review(
            7,
            Actor::Human,
            json!({"by":"human","comments":["other"],"way":"typed"}),
        ))
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidTransition);
    assert!(err.message.contains("is running"), "{}", err.message);
    s.apply(&ev(7, Some("a"), "node.done", Actor::Agent, json!({})))
        .unwrap();
    s.apply(&review(
        8,
        Actor::Human,
        json!({"by":"human","approve":true}),
    ))
    .unwrap();
    let n = &s.nodes["a"];
    assert!(n.approved && n.state == Done, "{n:?}");
    assert_eq!(n.reviews.len(), 2);
    assert_eq!(n.reviews[0].head.as_deref(), Some("abc"));
    assert_eq!(n.reviews[0].way, Some(crate::state::ReviewWay::Typed));
    let err = s
        .apply(&review(
            9,
            Actor::Human,
            json!({"by":"human","approve":true}),
        ))
        .unwrap_err();
    assert!(err.message.contains("approved already"), "{}", err.message);
}

#[test]
fn a_review_of_a_failed_node_reopens_its_run_in_the_same_worktree() {
    let mut s = started_spinoff();
    s.apply(&ev(
        5,
        Some("a"),
        "node.failed",
        Actor::Daemon,
        json!({"reason":"gate"}),
    ))
    .unwrap();
    s.apply(&ev(6, None, "run.failed", Actor::Daemon, json!({})))
        .unwrap();
    // An approval is for done work only.
    assert!(s
        .apply(&ev(
            7,
            Some("a"),
            "node.review",
            Actor::Human,
            json!({"by":"human","approve":true})
        ))
        .is_err());
    s.apply(&ev(
        7,
        Some("a"),
        "node.review",
        Actor::Human,
        json!({"by":"human","text":"add the test","way":"attempt"}),
    ))
    .unwrap();
    assert_eq!(s.status(), RunStatus::Active);
    let n = &s.nodes["a"];
    assert_eq!(n.state, Pending);
    assert!(
        !n.stale_attempt(),
        "its worktree is kept, not cleaned: {n:?}"
    );
    assert_eq!(n.review_due, Some(1));
    assert_eq!(n.reason, None);
    s.apply(&ev(
        8,
        Some("a"),
        "node.starting",
        Actor::Daemon,
        json!({"branch":"octl/x/a","worktree":"/w/x/a"}),
    ))
    .unwrap();
    assert_eq!(s.nodes["a"].review_due, Some(1), "until it has started");
    s.apply(&ev(
        9,
        Some("a"),
        "node.started",
        Actor::Daemon,
        json!({"pane":"%2"}),
    ))
    .unwrap();
    assert_eq!(s.nodes["a"].review_due, None);
}

#[test]
fn a_network_refusal_is_the_daemons_record_and_never_moves_the_node() {
    let mut s = started_spinoff();
    let refused =
        |seq, data: Value| ev(seq, Some("a"), "node.network_refused", Actor::Daemon, data);
    s.apply(&refused(
        5,
        json!({"target": "evil.example:443", "count": 1}),
    ))
    .unwrap();
    assert_eq!(s.nodes["a"].state, Running);
    let before = s.clone();
    let mut e = refused(6, json!({"target": "evil.example:443", "count": 2}));
    e.actor = Actor::Agent;
    assert_eq!(s.apply(&e).unwrap_err().kind, ErrorKind::Forbidden);
    for bad in [
        json!({"target": "x:1"}),
        json!({"target": "", "count": 1}),
        json!({"target": "x:1", "count": 0}),
    ] {
        assert_eq!(
            s.apply(&refused(6, bad)).unwrap_err().kind,
            ErrorKind::InvalidParams
        );
    }
    let e = ev(
        6,
        Some("zz"),
        "node.network_refused",
        Actor::Daemon,
        json!({"target": "x:1", "count": 1}),
    );
    assert_eq!(s.apply(&e).unwrap_err().kind, ErrorKind::NotFound);
    assert_eq!(s, before);
    assert!(!client_may_append(RunKind::Spinoff, "node.network_refused"));
}
