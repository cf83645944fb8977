//! Decisions humans take on what agents asked or proposed — `spinoff accept`, `spinoff
//! reject`, `discussion answer` — are won in the run's log before anything happens. Two
//! CLI processes started at once on the same proposal or question: exactly one decision is
//! recorded, exactly one run per accepted proposal exists (none for a rejected one), and the
//! loser changes nothing. A crash between the decision and the run it starts is healed at the
//! next start; a run that cannot be made is recorded on the parent, and the proposal can be
//! decided again.

use std::collections::BTreeMap;
use std::process::Child;
use std::time::Duration;

use octl_tests::{wait_until, Cli, TestEnv, TestRepo};
use serde_json::{json, Value};

/// Proposals (and questions) raced per test.
const N: usize = 10;

fn finish(child: Child) -> Cli {
    Cli::from(child.wait_with_output().expect("orchestratectl output"))
}

/// Runs every pair of commands at once: all processes are started before any is waited for.
fn race(env: &TestEnv, pairs: &[[Vec<String>; 2]]) -> Vec<[Cli; 2]> {
    let started: Vec<[Child; 2]> = pairs
        .iter()
        .map(|[a, b]| [env.start_cli_with(a, |_| {}), env.start_cli_with(b, |_| {})])
        .collect();
    started
        .into_iter()
        .map(|[a, b]| [finish(a), finish(b)])
        .collect()
}

/// The arguments of `orchestratectl --json A…`.
fn args(a: &[&str]) -> Vec<String> {
    std::iter::once(&"--json")
        .chain(a)
        .map(|s| s.to_string())
        .collect()
}

/// A `code` run (its shell agent's node `main` finishes at once) that proposes `n` spin-offs
/// from that node; returns the parent's id and the proposal ids.
fn parent_with_proposals(env: &TestEnv, repo: &TestRepo, n: usize) -> (String, Vec<String>) {
    let parent = env
        .spawn(
            "code",
            repo,
            "true",
            json!({"agent": "shell", "node": "main"}),
        )
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let ids = (0..n)
        .map(|i| {
            env.rpc(
                "spinoff.propose",
                json!({"run": parent, "node": "main", "task": format!("printf {i} > side-{i}.txt")}),
            )["id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    (parent, ids)
}

/// Every run whose settings name `proposal`, by id.
fn children_of(env: &TestEnv, proposal: &str) -> Vec<String> {
    env.rpc("run.list", json!({}))
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["settings"]["proposal"] == json!(proposal))
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect()
}

fn proposals(env: &TestEnv, parent: &str) -> BTreeMap<String, Value> {
    env.rpc("spinoff.list", json!({"run": parent}))
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["id"].as_str().unwrap().to_string(), p.clone()))
        .collect()
}

fn run_count(env: &TestEnv) -> usize {
    env.rpc("run.list", json!({})).as_array().unwrap().len()
}

/// The loser of a race: refused with `invalid_transition` naming `state`, or (the same
/// acceptance, seen once it was done) exit 0 reporting the same run `same`.
fn assert_lost(cli: &Cli, state: &str, same: Option<&str>) {
    if cli.code == 0 {
        let same = same.unwrap_or_else(|| panic!("only one decision may succeed: {cli:?}"));
        assert_eq!(
            cli.json()["run"]["id"],
            json!(same),
            "a repeat reports the existing run"
        );
        return;
    }
    assert_eq!(cli.code, 4, "the loser is refused by state: {cli:?}");
    let err = cli.error();
    assert_eq!(err["kind"], json!("invalid_transition"), "{cli:?}");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains(&format!("already {state}")),
        "the refusal names the state it lost to: {cli:?}"
    );
}

#[test]
fn accept_raced_with_accept_starts_exactly_one_run_per_proposal() {
    let (env, _d, repo) = TestEnv::world();
    let (parent, ids) = parent_with_proposals(&env, &repo, N);
    let pairs: Vec<[Vec<String>; 2]> = ids
        .iter()
        .map(|id| {
            let a = args(&["spinoff", "accept", id, "--agent", "shell"]);
            [a.clone(), a]
        })
        .collect();
    let results = race(&env, &pairs);
    let decided = proposals(&env, &parent);
    for (id, [a, b]) in ids.iter().zip(&results) {
        // The same decision twice: both answer it, exit 0, every time; only the one that
        // started the run says it did (the other says `already`).
        let (a, b) = (a.ok(), b.ok());
        let (winner, loser) = if b.json()["already"] == json!(true) {
            (a, b)
        } else {
            (b, a)
        };
        assert_eq!(winner.json().get("already"), None, "{winner:?}");
        assert_eq!(loser.json()["already"], json!(true), "{loser:?}");
        let child = winner.json()["run"]["id"].as_str().unwrap().to_string();
        assert_eq!(loser.json()["run"]["id"], json!(child), "{loser:?}");
        let p = &decided[id];
        assert_eq!(p["status"], json!("accepted"));
        assert_eq!(p["child_run"], json!(child), "the proposal names its run");
        assert_eq!(
            children_of(&env, id),
            vec![child.clone()],
            "one run for {id}"
        );
        let show = env.rpc("run.show", json!({"run": child}));
        assert_eq!(show["manifest"]["settings"]["parent_run"], json!(parent));
    }
    assert_eq!(
        run_count(&env),
        1 + N,
        "the parent and one run per proposal"
    );
    let accepted = env
        .event_types(&parent)
        .iter()
        .filter(|t| *t == "spinoff.accepted")
        .count();
    assert_eq!(accepted, N, "one decision per proposal in the log");
}

#[test]
fn accept_raced_with_reject_is_one_decision_and_only_accepted_proposals_have_a_run() {
    let (env, _d, repo) = TestEnv::world();
    let (parent, ids) = parent_with_proposals(&env, &repo, N);
    let pairs: Vec<[Vec<String>; 2]> = ids
        .iter()
        .map(|id| {
            [
                args(&["spinoff", "accept", id, "--agent", "shell"]),
                args(&["spinoff", "reject", id, "--reason", "not now"]),
            ]
        })
        .collect();
    let results = race(&env, &pairs);
    let decided = proposals(&env, &parent);
    let mut accepted = 0;
    for (id, [accept, reject]) in ids.iter().zip(&results) {
        let p = &decided[id];
        match p["status"].as_str().unwrap() {
            "accepted" => {
                accepted += 1;
                accept.ok();
                let child = accept.json()["run"]["id"].clone();
                assert_eq!(p["child_run"], child);
                assert_lost(reject, "accepted", None);
                assert_eq!(
                    children_of(&env, id),
                    vec![child.as_str().unwrap().to_string()]
                );
            }
            "rejected" => {
                reject.ok();
                assert_eq!(reject.json()["status"], json!("rejected"));
                assert_lost(accept, "rejected", None);
                assert_eq!(p["child_run"], json!(null));
                assert!(children_of(&env, id).is_empty(), "no run for {id}");
            }
            other => panic!("{id} ended {other}: {p}"),
        }
    }
    assert_eq!(run_count(&env), 1 + accepted);
    let types = env.event_types(&parent);
    let decisions = types
        .iter()
        .filter(|t| *t == "spinoff.accepted" || *t == "spinoff.rejected")
        .count();
    assert_eq!(decisions, N, "one decision per proposal in the log");
}

#[test]
fn answer_raced_with_another_answer_records_exactly_one() {
    let env = TestEnv::new();
    let _d = env.start_daemon();
    let run = env.create_run("questions");
    let ids: Vec<String> = (0..N)
        .map(|i| {
            env.rpc(
                "discussion.ask",
                json!({"run": run, "title": format!("question {i}?")}),
            )["id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let pairs: Vec<[Vec<String>; 2]> = ids
        .iter()
        .map(|id| {
            [
                args(&["discussion", "answer", id, "--text", "yes"]),
                args(&["discussion", "answer", id, "--text", "no"]),
            ]
        })
        .collect();
    let results = race(&env, &pairs);
    let show = env.rpc("run.show", json!({"run": run}));
    for (id, [yes, no]) in ids.iter().zip(&results) {
        let d = show["discussions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["id"] == json!(id))
            .unwrap();
        assert_eq!(d["open"], json!(false));
        let (winner, loser, text) = match d["answer"].as_str().unwrap() {
            "yes" => (yes, no, "yes"),
            "no" => (no, yes, "no"),
            other => panic!("{id} answered {other:?}"),
        };
        winner.ok();
        assert_eq!(winner.json()["answer"], json!(text));
        assert_eq!(loser.code, 4, "the other answer is refused: {loser:?}");
        assert_eq!(loser.error()["kind"], json!("invalid_transition"));
        assert!(
            loser.error()["message"]
                .as_str()
                .unwrap()
                .contains(&format!("already answered: \"{text}\"")),
            "{loser:?}"
        );
    }
    let resolved = env
        .event_types(&run)
        .iter()
        .filter(|t| *t == "discussion.resolved")
        .count();
    assert_eq!(resolved, N, "one answer per discussion in the log");
}

#[test]
fn proposal_and_discussion_ids_take_unique_prefixes() {
    let (env, _d, repo) = TestEnv::world();
    let (parent, ids) = parent_with_proposals(&env, &repo, 3);
    // Proposals made in the same moment share their first characters (the time).
    let common = |a: &str, b: &str| a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    let shared = &ids[0][..common(&ids[0], &ids[1]).max(common(&ids[0], &ids[2]))];
    assert!(shared.len() >= 6, "{ids:?}");
    let out = env.cli(["--json", "spinoff", "reject", shared, "--reason", "r"]);
    assert_eq!(out.code, 2, "{out:?}");
    assert_eq!(out.error()["kind"], json!("ambiguous_id"));
    let out = env.cli(["--json", "spinoff", "reject", "zzzzzz", "--reason", "r"]);
    assert_eq!(out.code, 3, "{out:?}");
    // A unique prefix, in either case, names the proposal.
    let prefix = ids[1][..24].to_ascii_uppercase();
    let out = env.cli(["--json", "spinoff", "reject", &prefix, "--reason", "r"]);
    out.ok();
    assert_eq!(out.json()["id"], json!(ids[1]));
    assert_eq!(
        proposals(&env, &parent)[&ids[1]]["status"],
        json!("rejected")
    );

    let q = env.rpc("discussion.ask", json!({"run": parent, "title": "which?"}))["id"]
        .as_str()
        .unwrap()
        .to_string();
    let out = env.cli(["--json", "discussion", "answer", &q[..20], "--text", "this"]);
    out.ok();
    assert_eq!(out.json()["id"], json!(q));
    assert_eq!(out.json()["answer"], json!("this"));
}

#[test]
fn accept_defaults_to_the_proposing_nodes_agent() {
    let (env, _d, repo) = TestEnv::world();
    let (parent, ids) = parent_with_proposals(&env, &repo, 1);
    // The configured default (claude) is not on this PATH: only the proposing node's
    // profile (shell) can start it.
    let out = env.cli(["--json", "spinoff", "accept", &ids[0]]);
    out.ok();
    let child = out.json()["run"]["id"].as_str().unwrap().to_string();
    let show = env.rpc("run.show", json!({"run": child}));
    assert_eq!(show["manifest"]["settings"]["agent"], json!("shell"));
    assert_eq!(show["nodes"][0]["agent"], json!("shell"));
    assert_eq!(proposals(&env, &parent)[&ids[0]]["agent"], json!("shell"));
}

#[test]
fn answering_a_merge_conflict_question_is_refused_with_what_resolves_it() {
    let (env, _d, repo) = TestEnv::world();
    let run = env.conflicted_spinoff(&repo);
    let show = env.rpc("run.show", json!({"run": run}));
    let q = show["discussions"][0]["id"].as_str().unwrap().to_string();
    assert!(q.starts_with("merge-"), "{q}");
    let out = env.cli(["--json", "discussion", "answer", &q, "--text", "drop it"]);
    assert_eq!(out.code, 4, "{out:?}");
    let err = out.error();
    assert_eq!(err["kind"], json!("invalid_transition"));
    let hint = err["hint"].as_str().unwrap();
    assert!(
        hint.contains(&format!("orchestratectl merge {run} --node clash"))
            && hint.contains("run cancel"),
        "{hint}"
    );
    // Nor can an agent close it through the log.
    let err = env
        .try_rpc(
            "event.append",
            json!({"run": run, "node": "clash", "type": "discussion.resolved", "actor": "agent", "data": {"id": q, "answer": "x"}}),
        )
        .unwrap_err();
    assert_eq!(err["data"]["kind"], json!("invalid_transition"), "{err}");
    let show = env.rpc("run.show", json!({"run": run}));
    assert_eq!(
        show["discussions"][0]["open"],
        json!(true),
        "nothing changed"
    );
    assert_eq!(show["nodes"][0]["state"], json!("conflict"));
    // Given up on: the question can then be closed.
    env.cli(["run", "cancel", &run]).ok();
    env.wait_node(&run, "clash", "cancelled");
    env.cli(["--json", "discussion", "answer", &q, "--text", "dropped"])
        .ok();
}

#[test]
fn a_crash_between_accepting_and_creating_the_run_is_healed_with_exactly_one_run() {
    let env = TestEnv::new();
    let d = env.start_daemon_with(&[("OCTL_FAILPOINTS", "spinoff:after-accepted")]);
    let repo = TestRepo::new(&env, "repo");
    let (parent, ids) = parent_with_proposals(&env, &repo, 2);
    // The daemon kills itself right after writing the decision, before the run exists.
    let out = env.try_rpc("spinoff.accept", json!({"id": ids[0], "agent": "shell"}));
    assert!(out.is_err(), "the daemon died during the accept: {out:?}");
    d.wait_exit();
    let child = env
        .log_events(&parent)
        .iter()
        .find(|e| e["type"] == json!("spinoff.accepted"))
        .expect("the decision was written first")["data"]["run"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(!env.run_dir(&child).join("events.jsonl").exists());

    let _d = env.start_daemon();
    let show = wait_until("the run to be created", Duration::from_secs(30), || {
        env.try_rpc("run.show", json!({"run": child})).ok()
    });
    assert_eq!(show["manifest"]["settings"]["proposal"], json!(ids[0]));
    let show = env.wait_status(&child, &["completed", "failed", "waiting"]);
    assert_eq!(show["manifest"]["status"], json!("completed"), "{show}");
    assert_eq!(repo.show("main", "side-0.txt").as_deref(), Some("0"));
    assert_eq!(children_of(&env, &ids[0]), vec![child.clone()]);
    assert_eq!(run_count(&env), 2, "the parent and exactly one child");
    // Accepting again reports that run.
    let again = env.cli(["--json", "spinoff", "accept", &ids[0]]);
    again.ok();
    assert_eq!(again.json()["run"]["id"], json!(child));
}

#[test]
fn a_run_that_cannot_be_made_after_a_crash_is_recorded_and_can_be_accepted_again() {
    let env = TestEnv::new();
    let d = env.start_daemon_with(&[("OCTL_FAILPOINTS", "spinoff:after-accepted")]);
    let repo = TestRepo::new(&env, "repo");
    let (parent, ids) = parent_with_proposals(&env, &repo, 1);
    let out = env.try_rpc("spinoff.accept", json!({"id": ids[0], "agent": "shell"}));
    assert!(out.is_err(), "the daemon died during the accept: {out:?}");
    d.wait_exit();
    // The repository is gone while the daemon is down.
    let moved = env.root.path().join("moved-away");
    std::fs::rename(&repo.path, &moved).unwrap();

    let _d = env.start_daemon();
    let p = wait_until(
        "the failure to be recorded",
        Duration::from_secs(30),
        || {
            let p = proposals(&env, &parent)[&ids[0]].clone();
            (p["status"] == json!("failed")).then_some(p)
        },
    );
    assert!(
        p["reason"].as_str().unwrap().contains("invalid repo"),
        "the reason says why: {p}"
    );
    assert_eq!(p["child_run"], json!(null));
    assert_eq!(run_count(&env), 1, "no run was made");
    let listed = env.cli(["spinoff", "list"]);
    assert!(
        listed
            .ok()
            .stdout
            .contains("its run could not be created: invalid repo"),
        "{listed:?}"
    );
    // Not a dead end: once the repository is back, accepting again starts one run.
    std::fs::rename(&moved, &repo.path).unwrap();
    let out = env.cli(["--json", "spinoff", "accept", &ids[0], "--agent", "shell"]);
    out.ok();
    let child = out.json()["run"]["id"].as_str().unwrap().to_string();
    assert_eq!(children_of(&env, &ids[0]), vec![child]);
    assert_eq!(
        proposals(&env, &parent)[&ids[0]]["status"],
        json!("accepted")
    );
}
