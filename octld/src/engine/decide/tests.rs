//! Unit tests of the engine's decisions: the steps due for runs folded by the real reducer
//! from small event lists, the scheduler's pure parts and how an agent's exit is read.

use serde_json::{json, Value};

use octl_proto::projection::{self, RunDetail};
use octl_proto::state::Node;
use octl_proto::{Actor, Event, RunState};

use super::*;
use crate::engine::schedule;
use crate::engine::supervise::{exit_verdict, Verdict};

const RUN: &str = "01JDXJ0000000000000000000A";
const CHILD: &str = "01JDXJ0000000000000000000B";

/// One event to fold: (node, type, data).
type E = (Option<&'static str>, &'static str, Value);

/// The run of `kind` created with `settings`, after `events`, as the engine sees it.
fn view(kind: &str, settings: Value, events: Vec<E>) -> RunDetail {
    let mut created = settings.as_object().cloned().unwrap_or_default();
    created.insert("kind".into(), json!(kind));
    let all: Vec<Event> = std::iter::once((None, "run.created", Value::Object(created)))
        .chain(events)
        .enumerate()
        .map(|(i, (node, t, data))| {
            let seq = i as u64 + 1;
            Event {
                v: 1,
                seq,
                id: format!("01JDXK00000000000000000{seq:03}"),
                ts: format!("2026-11-30T10:00:{:02}.000Z", seq % 60),
                run: RUN.into(),
                node: node.map(str::to_string),
                kind: t.into(),
                actor: Actor::Daemon,
                data: data.as_object().cloned().unwrap_or_default(),
                idempotency_key: None,
            }
        })
        .collect();
    let state = RunState::replay(&all).unwrap_or_else(|(seq, e)| panic!("event {seq}: {e:?}"));
    projection::detail(&state)
}

fn added(n: &'static str, deps: &[&str]) -> Vec<E> {
    vec![(Some(n), "node.added", json!({ "deps": deps }))]
}

fn starting(n: &'static str) -> Vec<E> {
    vec![(
        Some(n),
        "node.starting",
        json!({"branch": format!("octl/r/{n}"), "worktree": format!("/w/{n}")}),
    )]
}

fn running(n: &'static str) -> Vec<E> {
    let mut e = starting(n);
    e.push((Some(n), "node.started", json!({"pane": "%1"})));
    e
}

fn done(n: &'static str) -> Vec<E> {
    let mut e = running(n);
    e.push((Some(n), "node.done", json!({})));
    e
}

fn merging(n: &'static str) -> Vec<E> {
    let mut e = done(n);
    e.push((Some(n), "merge.started", json!({})));
    e
}

/// Merged, not cleaned up yet.
fn merged(n: &'static str) -> Vec<E> {
    let mut e = merging(n);
    e.push((Some(n), "merge.succeeded", json!({"commit": "c0ffee"})));
    e
}

fn finished(n: &'static str) -> Vec<E> {
    let mut e = merged(n);
    e.push((Some(n), "cleanup.done", json!({})));
    e
}

fn failed(n: &'static str) -> Vec<E> {
    let mut e = running(n);
    e.push((Some(n), "node.failed", json!({"reason": "r"})));
    e
}

fn one(n: &'static str, then: fn(&'static str) -> Vec<E>) -> Vec<E> {
    let mut e = added(n, &[]);
    e.extend(then(n));
    e
}

fn steps_with(v: &RunDetail, corrupt: bool, exists: &dyn Fn(&str) -> bool) -> Vec<Step> {
    due(
        v,
        &Facts {
            corrupt,
            run_exists: exists,
            now_ms: 0,
        },
    )
}

fn steps(v: &RunDetail) -> Vec<Step> {
    steps_with(v, false, &|_| false)
}

fn node(v: &RunDetail, id: &str) -> Node {
    v.nodes.iter().find(|n| n.id == id).unwrap().clone()
}

fn finish(n: &str) -> Step {
    Step::Finish { node: n.into() }
}

fn accepted_proposal(child: &str) -> Vec<E> {
    vec![
        (
            None,
            "spinoff.proposed",
            json!({"id": "p1", "task": "fix it"}),
        ),
        (None, "spinoff.accepted", json!({"id": "p1", "run": child})),
    ]
}

// --- spin-off runs an accepted proposal is missing -------------------------------------------

#[test]
fn an_accepted_proposal_without_its_run_gets_it_even_in_an_ended_run() {
    let mut e = one("a", |_| vec![(Some("a"), "node.done", json!({}))]);
    let mut decision = accepted_proposal(CHILD);
    let accepted = decision.pop().unwrap();
    e.extend(decision);
    e.push((None, "run.completed", json!({})));
    // A human decides after the run ended.
    e.push(accepted);
    let v = view("generic", json!({}), e);
    let s = steps(&v);
    assert_eq!(s.len(), 1, "{s:?}");
    match &s[0] {
        Step::CreateSpinoffRun { proposal, child } => {
            assert_eq!(proposal.id, "p1");
            assert_eq!(child, CHILD);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(s[0].key(), StepKey::SpinoffRun(CHILD.into()));
    assert!(!s[0].quiet());
}

#[test]
fn an_accepted_proposal_whose_run_exists_needs_nothing() {
    let v = view("generic", json!({}), accepted_proposal(CHILD));
    assert_eq!(steps_with(&v, false, &|id| id == CHILD), vec![]);
}

#[test]
fn a_proposal_not_decided_needs_nothing() {
    let v = view(
        "generic",
        json!({}),
        vec![(None, "spinoff.proposed", json!({"id": "p1", "task": "t"}))],
    );
    assert_eq!(steps(&v), vec![]);
}

#[test]
fn a_corrupt_run_gets_no_step_at_all() {
    let mut e = one("a", done);
    e.extend(accepted_proposal(CHILD));
    let v = view("spinoff", json!({}), e);
    assert_eq!(steps_with(&v, true, &|_| false), vec![]);
    assert!(!steps(&v).is_empty(), "the same run, readable, has steps");
}

// --- kinds and ended runs --------------------------------------------------------------------

#[test]
fn a_generic_run_is_moved_by_its_clients_not_the_engine() {
    let v = view(
        "generic",
        json!({}),
        one("a", |_| vec![(Some("a"), "node.done", json!({}))]),
    );
    assert_eq!(steps(&v), vec![]);
}

#[test]
fn an_ended_run_gets_no_node_step() {
    let mut e = one("a", failed);
    e.push((None, "run.failed", json!({})));
    let v = view("spinoff", json!({}), e);
    assert_eq!(steps(&v), vec![]);
}

// --- healing steps a crash cut short ---------------------------------------------------------

#[test]
fn a_start_cut_short_is_healed() {
    let v = view("spinoff", json!({}), one("a", starting));
    assert_eq!(
        steps(&v),
        vec![Step::HealStart {
            node: node(&v, "a")
        }]
    );
}

#[test]
fn a_merge_cut_short_is_healed() {
    let v = view("spinoff", json!({}), one("a", merging));
    assert_eq!(
        steps(&v),
        vec![Step::HealMerge {
            node: node(&v, "a")
        }]
    );
}

#[test]
fn a_merged_node_not_cleaned_is_cleaned_before_the_end() {
    let v = view("spinoff", json!({}), one("a", merged));
    let s = steps(&v);
    // The end is due too, but claimed after the heal, which the engine sees as busy.
    assert_eq!(
        s,
        vec![
            Step::HealMerge {
                node: node(&v, "a")
            },
            Step::EndRun(RunEnd::Completed)
        ]
    );
    assert_eq!(s[0].key(), StepKey::node("a"));
    assert!(s[0].key().is_node() && !s[1].key().is_node());
}

#[test]
fn a_running_node_needs_nothing() {
    let v = view("spinoff", json!({}), one("a", running));
    assert_eq!(steps(&v), vec![]);
}

// --- retried nodes ---------------------------------------------------------------------------

#[test]
fn a_retried_node_has_its_old_attempt_cleaned_first() {
    let mut e = one("a", failed);
    e.push((None, "run.failed", json!({})));
    e.push((Some("a"), "node.retried", json!({})));
    let v = view("spinoff", json!({}), e);
    assert!(node(&v, "a").stale_attempt());
    assert_eq!(
        steps(&v),
        vec![Step::CleanStaleAttempt { node: "a".into() }]
    );
}

#[test]
fn a_retried_spinoff_node_starts_again_once_cleaned() {
    let mut e = one("a", failed);
    e.push((Some("a"), "node.retried", json!({})));
    e.push((Some("a"), "cleanup.done", json!({})));
    let v = view("spinoff", json!({}), e);
    assert_eq!(steps(&v), vec![Step::StartPending { node: "a".into() }]);
}

#[test]
fn a_retried_code_node_starts_again_once_cleaned() {
    let mut e = one("a", failed);
    e.push((Some("a"), "node.retried", json!({})));
    e.push((Some("a"), "cleanup.done", json!({})));
    let v = view("code", json!({}), e);
    assert_eq!(steps(&v), vec![Step::StartPending { node: "a".into() }]);
}

#[test]
fn a_pending_fanout_node_waits_for_the_scheduler() {
    let mut e = added("a", &[]);
    e.extend(added("b", &[]));
    e.extend(failed("a"));
    e.push((Some("a"), "node.retried", json!({})));
    let v = view("fanout", json!({}), e);
    assert_eq!(
        steps(&v),
        vec![Step::CleanStaleAttempt { node: "a".into() }, Step::Schedule]
    );
    assert!(Step::Schedule.quiet());
    assert_eq!(Step::Schedule.key(), StepKey::Schedule);
}

// --- finishing done nodes --------------------------------------------------------------------

#[test]
fn a_done_spinoff_node_is_finished() {
    let v = view("spinoff", json!({}), one("a", done));
    let s = steps(&v);
    assert_eq!(s, vec![finish("a")]);
    assert_eq!(s[0].key(), StepKey::node("a"));
}

#[test]
fn a_done_code_node_waits_for_a_human_merge() {
    let v = view("code", json!({}), one("a", done));
    assert_eq!(steps(&v), vec![]);
}

#[test]
fn done_fanout_nodes_are_finished_and_the_rest_scheduled() {
    let mut e = added("a", &[]);
    e.extend(added("b", &[]));
    e.extend(done("a"));
    e.extend(done("b"));
    let v = view("fanout", json!({"max_parallel": 2}), e);
    assert_eq!(steps(&v), vec![finish("a"), finish("b"), Step::Schedule]);
}

// --- end of run ------------------------------------------------------------------------------

#[test]
fn a_run_whose_nodes_all_merged_completes() {
    let v = view("spinoff", json!({}), one("a", finished));
    let s = steps(&v);
    assert_eq!(s, vec![Step::EndRun(RunEnd::Completed)]);
    assert!(s[0].quiet());
    assert_eq!(s[0].key(), StepKey::RunEnd);
    assert_eq!(RunEnd::Completed.event(), "run.completed");
}

#[test]
fn a_run_whose_node_failed_fails() {
    let v = view("code", json!({}), one("a", failed));
    assert_eq!(steps(&v), vec![Step::EndRun(RunEnd::Failed)]);
    assert_eq!(RunEnd::Failed.event(), "run.failed");
}

#[test]
fn a_fanout_with_a_failed_unit_waits_for_a_retry() {
    let mut e = added("a", &[]);
    e.extend(added("b", &[]));
    e.extend(finished("a"));
    e.extend(failed("b"));
    let v = view("fanout", json!({}), e);
    assert_eq!(run_end(&v), None);
    assert_eq!(steps(&v), vec![Step::Schedule]);
}

#[test]
fn a_fanout_whose_units_all_merged_completes() {
    let mut e = added("a", &[]);
    e.extend(added("b", &[]));
    e.extend(finished("a"));
    e.extend(finished("b"));
    let v = view("fanout", json!({}), e);
    assert_eq!(
        steps(&v),
        vec![Step::Schedule, Step::EndRun(RunEnd::Completed)]
    );
}

#[test]
fn a_run_with_a_cancelled_node_does_not_end_by_itself() {
    let mut e = added("a", &[]);
    e.extend(added("b", &[]));
    e.extend(failed("a"));
    e.extend(running("b"));
    e.push((Some("b"), "node.cancelled", json!({})));
    let v = view("fanout", json!({}), e);
    assert_eq!(run_end(&v), None);
    let mut s = v.clone();
    s.manifest.kind = Some(octl_proto::RunKind::Spinoff);
    assert_eq!(
        run_end(&s),
        None,
        "a cancelled node: the cancel ends the run"
    );
}

#[test]
fn a_run_with_a_node_still_moving_does_not_end() {
    let mut e = added("a", &[]);
    e.extend(added("b", &[]));
    e.extend(failed("a"));
    e.extend(running("b"));
    let v = view("fanout", json!({}), e);
    assert_eq!(run_end(&v), None);
    assert_eq!(
        run_end(&view("spinoff", json!({}), vec![])),
        None,
        "no node"
    );
}

// --- orchestrate runs: the run's merge -------------------------------------------------------

#[test]
fn an_auto_merge_run_whose_nodes_all_merged_is_merged() {
    let v = view(
        "orchestrate",
        json!({"auto_merge": true}),
        one("a", finished),
    );
    let s = steps(&v);
    assert_eq!(s, vec![Step::Schedule, Step::AutoMergeRun]);
    assert_eq!(s[1].key(), StepKey::RunMerge);
    assert!(!s[1].quiet());
}

#[test]
fn an_auto_merge_run_waits_for_its_nodes_cleanup() {
    let v = view("orchestrate", json!({"auto_merge": true}), one("a", merged));
    assert!(!wants_auto_merge(&v));
    assert_eq!(
        steps(&v),
        vec![
            Step::HealMerge {
                node: node(&v, "a")
            },
            Step::Schedule
        ]
    );
}

#[test]
fn a_run_without_auto_merge_waits_for_a_human_merge() {
    let v = view("orchestrate", json!({}), one("a", finished));
    assert_eq!(steps(&v), vec![Step::Schedule]);
}

#[test]
fn a_run_merge_cut_short_is_resumed_not_started_again() {
    let mut e = one("a", finished);
    e.push((None, "merge.started", json!({})));
    let v = view("orchestrate", json!({"auto_merge": true}), e);
    assert_eq!(v.manifest.merge.as_deref(), Some("merging"));
    let s = steps(&v);
    assert_eq!(s, vec![Step::ResumeRunMerge, Step::Schedule]);
    assert_eq!(s[0].key(), StepKey::RunMerge);
}

// --- scheduling: the cap and DAG readiness ---------------------------------------------------

#[test]
fn the_cap_is_max_parallel_and_at_least_one() {
    assert_eq!(schedule::cap(&view("fanout", json!({}), vec![])), 1);
    assert_eq!(
        schedule::cap(&view("fanout", json!({"max_parallel": 0}), vec![])),
        1
    );
    assert_eq!(
        schedule::cap(&view("fanout", json!({"max_parallel": 3}), vec![])),
        3
    );
}

#[test]
fn nothing_starts_while_the_cap_is_reached() {
    let mut e = added("a", &[]);
    e.extend(added("b", &[]));
    e.extend(running("a"));
    let v = view("fanout", json!({"max_parallel": 1}), e);
    assert!(schedule::next_to_start(&v).is_none());
}

#[test]
fn the_next_node_starts_under_the_cap() {
    let mut e = added("a", &[]);
    e.extend(added("b", &[]));
    e.extend(added("c", &[]));
    e.extend(running("a"));
    let v = view("fanout", json!({"max_parallel": 2}), e);
    assert_eq!(
        schedule::next_to_start(&v).map(|n| n.id.as_str()),
        Some("b")
    );
}

#[test]
fn a_finished_node_frees_its_place_under_the_cap() {
    let mut e = added("a", &[]);
    e.extend(added("b", &[]));
    e.extend(finished("a"));
    let v = view("fanout", json!({"max_parallel": 1}), e);
    assert_eq!(
        schedule::next_to_start(&v).map(|n| n.id.as_str()),
        Some("b")
    );
}

#[test]
fn nodes_start_in_the_recorded_order() {
    let mut e = added("a", &[]);
    e.extend(added("b", &[]));
    let v = view("fanout", json!({"order": ["b", "a"]}), e);
    assert_eq!(
        schedule::next_to_start(&v).map(|n| n.id.as_str()),
        Some("b")
    );
}

#[test]
fn a_dag_node_waits_for_its_dependencies_to_merge() {
    let mut e = added("a", &[]);
    e.extend(added("b", &["a"]));
    e.extend(added("c", &[]));
    e.extend(done("a"));
    let v = view("orchestrate", json!({"max_parallel": 2}), e);
    assert_eq!(schedule::waiting_for(&v, &node(&v, "b")), vec!["a"]);
    // b's dependency is done, not merged: the independent c goes first.
    assert_eq!(
        schedule::next_to_start(&v).map(|n| n.id.as_str()),
        Some("c")
    );
}

#[test]
fn a_dag_node_is_ready_once_its_dependencies_merged() {
    let mut e = added("a", &[]);
    e.extend(added("b", &["a"]));
    e.extend(finished("a"));
    let v = view("orchestrate", json!({}), e);
    assert!(schedule::waiting_for(&v, &node(&v, "b")).is_empty());
    assert_eq!(
        schedule::next_to_start(&v).map(|n| n.id.as_str()),
        Some("b")
    );
}

#[test]
fn a_retried_node_is_not_scheduled_before_its_cleanup() {
    let mut e = added("a", &[]);
    e.extend(failed("a"));
    e.push((Some("a"), "node.retried", json!({})));
    let v = view("fanout", json!({}), e);
    assert!(schedule::next_to_start(&v).is_none());
}

#[test]
fn a_failed_dependency_blocks_its_pending_dependents() {
    let mut e = added("a", &[]);
    e.extend(added("b", &["a"]));
    e.extend(added("c", &[]));
    e.extend(failed("a"));
    let v = view("orchestrate", json!({}), e);
    let blocked: Vec<(&str, &str)> = schedule::to_block(&v)
        .into_iter()
        .map(|(n, d)| (n.id.as_str(), d))
        .collect();
    assert_eq!(blocked, vec![("b", "a")]);
    assert!(schedule::to_unblock(&v).is_empty());
    assert_eq!(
        schedule::next_to_start(&v).map(|n| n.id.as_str()),
        Some("c")
    );
}

#[test]
fn a_retried_dependency_frees_the_nodes_it_blocked() {
    let mut e = added("a", &[]);
    e.extend(added("b", &["a"]));
    e.extend(failed("a"));
    e.push((
        Some("b"),
        "node.blocked",
        json!({"reason": "dependency a cannot merge"}),
    ));
    let still = view("orchestrate", json!({}), e.clone());
    assert!(schedule::to_unblock(&still).is_empty(), "a still failed");
    assert!(
        schedule::to_block(&still).is_empty(),
        "b is blocked already"
    );
    e.push((Some("a"), "node.retried", json!({})));
    let v = view("orchestrate", json!({}), e);
    let freed: Vec<&str> = schedule::to_unblock(&v)
        .into_iter()
        .map(|n| n.id.as_str())
        .collect();
    assert_eq!(freed, vec!["b"]);
}

// --- how an agent's exit is read -------------------------------------------------------------

/// Node `a` of a spinoff run started with `on_exit`, then given `report` (with a reason).
fn exited(on_exit: &str, report: Option<(&str, &str)>) -> Node {
    let mut e = added("a", &[]);
    e.extend(starting("a"));
    e.push((
        Some("a"),
        "node.started",
        json!({"pane": "%1", "on_exit": on_exit}),
    ));
    if let Some((r, reason)) = report {
        e.push((
            Some("a"),
            "node.progress",
            json!({"report": r, "reason": reason}),
        ));
    }
    node(&view("spinoff", json!({}), e), "a")
}

#[test]
fn a_shell_task_that_exits_0_is_committed_then_done() {
    let n = exited("shell", None);
    assert_eq!(exit_verdict(&n, Some(0)), Verdict::CommitThenDone);
}

#[test]
fn a_shell_task_closed_after_reporting_done_is_committed_then_done() {
    let n = exited("shell", Some(("done", "ok")));
    assert_eq!(exit_verdict(&n, None), Verdict::CommitThenDone);
}

#[test]
fn a_shell_task_that_exits_non_zero_fails_with_its_status() {
    let n = exited("shell", None);
    assert_eq!(
        exit_verdict(&n, Some(3)),
        Verdict::ShellFailed("the task exited with status 3".into())
    );
}

#[test]
fn a_killed_shell_task_fails() {
    let n = exited("shell", None);
    assert_eq!(
        exit_verdict(&n, None),
        Verdict::ShellFailed("the task was killed or its window closed".into())
    );
}

#[test]
fn a_shell_task_that_reported_failure_fails_with_its_reason_even_on_exit_0() {
    let n = exited("shell", Some(("failed", "tests broke")));
    assert_eq!(
        exit_verdict(&n, Some(0)),
        Verdict::ShellFailed("tests broke".into())
    );
}

#[test]
fn an_agent_is_judged_by_its_held_report() {
    assert_eq!(
        exit_verdict(&exited("exited", Some(("done", "x"))), Some(1)),
        Verdict::Reported("node.done")
    );
    assert_eq!(
        exit_verdict(&exited("done", Some(("failed", "x"))), Some(0)),
        Verdict::Reported("node.failed")
    );
}

#[test]
fn an_unreported_exit_means_what_the_profile_says() {
    assert_eq!(
        exit_verdict(&exited("done", None), Some(0)),
        Verdict::Unreported("node.done")
    );
    assert_eq!(
        exit_verdict(&exited("exited", None), Some(0)),
        Verdict::Unreported("node.exited")
    );
}

#[test]
fn a_claude_conversation_killed_before_it_reported_exited_and_is_not_done() {
    let mut n = exited("done", None);
    n.session_id = Some("0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b".into());
    // The window or the tmux server vanished, or a signal killed it: not a human's close.
    for status in [None, Some(137), Some(129)] {
        assert_eq!(
            exit_verdict(&n, status),
            Verdict::Unreported("node.exited"),
            "{status:?}"
        );
    }
    // A session that ended by itself is judged as before.
    assert_eq!(exit_verdict(&n, Some(0)), Verdict::Unreported("node.done"));
    // A report still wins.
    let mut r = exited("done", Some(("done", "x")));
    r.session_id = n.session_id.clone();
    assert_eq!(exit_verdict(&r, None), Verdict::Reported("node.done"));
}

#[test]
fn a_paused_node_is_due_to_resume_only_after_its_reset() {
    let mut events = one("a", running);
    events.push((
        Some("a"),
        "node.paused",
        json!({"until": "2026-12-01T10:00:00.000Z"}),
    ));
    let v = view("spinoff", json!({}), events);
    let reset = octl_proto::time::parse_millis("2026-12-01T10:00:00.000Z").unwrap();
    let at = |now_ms| {
        due(
            &v,
            &Facts {
                corrupt: false,
                run_exists: &|_| false,
                now_ms,
            },
        )
    };
    assert!(at(reset - 1).is_empty(), "{:?}", at(reset - 1));
    assert_eq!(at(reset), [Step::Resume { node: "a".into() }]);
    assert_eq!(at(reset)[0].key(), StepKey::node("a"));
    // Not before the node ends by itself, and not twice: the run does not end meanwhile.
    assert_eq!(run_end(&v), None);
}

#[test]
fn a_fan_out_starts_no_node_of_a_paused_profile() {
    let mut events = added("a", &[]);
    events.extend(added("b", &[]));
    events.extend(running("a"));
    events.push((
        Some("a"),
        "node.paused",
        json!({"until": "2026-12-01T10:00:00.000Z"}),
    ));
    // The profile is recorded per node (node.added's agent).
    let v = {
        let mut v = view("fanout", json!({"max_parallel": 4}), events);
        for n in v.nodes.iter_mut() {
            n.agent = Some("claude".into());
        }
        v
    };
    let reset = octl_proto::time::parse_millis("2026-12-01T10:00:00.000Z").unwrap();
    let pauses = limits::profile_pauses([&v], reset - 1);
    assert_eq!(schedule::next_startable(&v, &pauses, reset - 1), None);
    assert_eq!(
        schedule::next_to_start(&v).map(|n| n.id.as_str()),
        Some("b")
    );
    // After the reset the paused node itself goes first, then the rest of its profile.
    let after = limits::profile_pauses([&v], reset);
    assert_eq!(
        schedule::next_startable(&v, &after, reset).map(|n| n.id.as_str()),
        Some("a")
    );
    let mut resumed = v.clone();
    resumed.nodes[0].state = octl_proto::NodeState::Running;
    assert_eq!(
        schedule::next_startable(&resumed, &after, reset).map(|n| n.id.as_str()),
        Some("b")
    );
}

/// A fan-out of `cap` whose unit `a` was paused until `RESET` while `b` ran, then `then`.
fn paused_fanout(cap: u64, then: Vec<E>) -> RunDetail {
    let mut events = added("a", &[]);
    events.extend(added("b", &[]));
    events.extend(added("c", &[]));
    events.extend(running("a"));
    events.push((Some("a"), "node.paused", json!({"until": RESET})));
    events.extend(then);
    view("fanout", json!({ "max_parallel": cap }), events)
}

const RESET: &str = "2026-12-01T10:00:00.000Z";

#[test]
fn a_paused_fan_out_unit_is_resumed_by_the_scheduler_not_beside_it() {
    let v = paused_fanout(1, running("b"));
    let reset = octl_proto::time::parse_millis(RESET).unwrap();
    let due = |now_ms| {
        due(
            &v,
            &Facts {
                corrupt: false,
                run_exists: &|_| false,
                now_ms,
            },
        )
    };
    // No resume of its own, which would not count against the cap: the scheduling pass
    // (one per run at a time) starts it.
    assert_eq!(due(reset), [Step::Schedule]);
    let none = Default::default();
    assert_eq!(
        schedule::next_startable(&v, &none, reset),
        None,
        "b holds the only place"
    );
}

#[test]
fn a_resumed_unit_takes_the_next_free_place_before_pending_ones() {
    let reset = octl_proto::time::parse_millis(RESET).unwrap();
    let none = Default::default();
    let v = paused_fanout(1, finished("b"));
    assert_eq!(
        schedule::next_startable(&v, &none, reset).map(|n| n.id.as_str()),
        Some("a")
    );
    assert_eq!(
        schedule::next_startable(&v, &none, reset - 1).map(|n| n.id.as_str()),
        Some("c"),
        "before its reset, the paused node's place is free for others"
    );
    // Two places, one taken by b: a resumes into the other; c waits.
    let two = paused_fanout(2, running("b"));
    assert_eq!(
        schedule::next_startable(&two, &none, reset).map(|n| n.id.as_str()),
        Some("a")
    );
    let mut full = two.clone();
    full.nodes[0].state = octl_proto::NodeState::Starting;
    assert_eq!(schedule::next_startable(&full, &none, reset), None);
}

#[test]
fn stream_agents_are_judged_by_their_final_result() {
    use crate::engine::supervise::stream_verdict;
    let n = exited("stream", None);
    assert_eq!(
        stream_verdict(&n, Some(0), true, Some(Ok(()))),
        Verdict::CommitThenDone
    );
    assert_eq!(
        stream_verdict(&n, Some(0), true, None),
        Verdict::Failed("the agent exited with status 0 without a final result".into())
    );
    assert_eq!(
        stream_verdict(&n, Some(0), true, Some(Err("quota".into()))),
        Verdict::Failed("quota".into())
    );
    assert_eq!(
        stream_verdict(&n, Some(1), true, Some(Ok(()))),
        Verdict::Failed("the agent exited with status 1".into())
    );
    // No stream known for the agent: exit 0 is success.
    assert_eq!(
        stream_verdict(&n, Some(0), false, None),
        Verdict::CommitThenDone
    );
    assert_eq!(
        stream_verdict(&n, None, true, Some(Ok(()))),
        Verdict::Failed("the agent was killed or its window closed".into())
    );
    // A report wins; done is committed by the daemon (codex cannot commit in its sandbox).
    let done = exited("stream", Some(("done", "x")));
    assert_eq!(
        stream_verdict(&done, Some(1), true, None),
        Verdict::CommitThenDone
    );
    let failed = exited("stream", Some(("failed", "x")));
    assert_eq!(
        stream_verdict(&failed, Some(0), true, Some(Ok(()))),
        Verdict::Reported("node.failed")
    );
}

#[test]
fn a_success_that_changed_nothing_while_its_commands_failed_is_a_failure() {
    use crate::engine::supervise::no_op_failure;
    use crate::streams::{parse, Stream};
    // What Codex 0.169 wrote when no command could run in its sandbox, and said it was done.
    let stream = r#"{"type":"thread.started","thread_id":"t1"}
{"type":"turn.started"}
{"type":"item.completed","item":{"id":"i1","type":"command_execution","command":"/bin/bash -lc 'printf x > a.txt'","aggregated_output":"bwrap: execvp codex-linux-sandbox: No such file or directory\n","exit_code":1,"status":"failed"}}
{"type":"item.completed","item":{"id":"i2","type":"command_execution","command":"/bin/bash -lc 'ls'","aggregated_output":"a\n","exit_code":0,"status":"completed"}}
{"type":"item.completed","item":{"id":"i3","type":"command_execution","command":"/bin/bash -lc 'git add -A'","aggregated_output":"\u001b[31mfatal\u001b[0m: no\r\nmore\u0007\n","exit_code":128,"status":"failed"}}
{"type":"item.completed","item":{"id":"i4","type":"agent_message","text":"All steps done."}}
{"type":"turn.completed","usage":{"input_tokens":1,"output_tokens":1}}"#;
    let o = parse(stream, Stream::Codex);
    assert_eq!(o.end, Some(Ok(())), "the agent said it succeeded");
    assert_eq!((o.commands.ran, o.commands.failed), (3, 2));
    let reason = no_op_failure(false, &o.commands).expect("no change and failed commands");
    assert_eq!(
        reason,
        "the agent said it succeeded but changed nothing, and 2 of its 3 shell commands failed; the first: `/bin/bash -lc 'printf x > a.txt'` exited with status 1: bwrap: execvp codex-linux-sandbox: No such file or directory"
    );
    // With a change, the failed commands were on the way: a success.
    assert_eq!(no_op_failure(true, &o.commands), None);
    // No change and no failed command: an investigation, a success.
    let looked = parse(
        r#"{"type":"item.completed","item":{"type":"command_execution","command":"grep -r x","aggregated_output":"","exit_code":0}}
{"type":"turn.completed","usage":{}}"#,
        Stream::Codex,
    );
    assert_eq!((looked.commands.ran, looked.commands.failed), (1, 0));
    assert_eq!(no_op_failure(false, &looked.commands), None);
    // A command that did not run (declined: no exit code) is not a failed one.
    let declined = parse(
        r#"{"type":"item.completed","item":{"type":"command_execution","command":"git commit","aggregated_output":"","exit_code":null,"status":"declined"}}"#,
        Stream::Codex,
    );
    assert_eq!(declined.commands.failed, 0);
    // One command, failed: its text is the reason's; the output's control characters and
    // escapes are gone, a long one is cut.
    let one = parse(
        &format!(
            r#"{{"type":"item.completed","item":{{"type":"command_execution","command":"make","aggregated_output":"\u001b]0;title\u0007boom\t{}","exit_code":2}}}}"#,
            "x".repeat(500)
        ),
        Stream::Codex,
    );
    let reason = no_op_failure(false, &one.commands).unwrap();
    assert!(
        reason.starts_with(
            "the agent said it succeeded but changed nothing, and its 1 shell command failed: `make` exited with status 2: "
        ),
        "{reason}"
    );
    assert!(reason.ends_with('…'), "{reason}");
    assert!(!reason.chars().any(char::is_control), "{reason:?}");
    assert!(reason.chars().count() < 400, "{reason}");
}
