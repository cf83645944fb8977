//! Best of N with shell agents whose attempts differ on purpose, against the real daemon and
//! git: the right attempt merges, the others are set aside and recoverable; a judge command's
//! malformed answer is asked again, and a second one leaves the pick to a person;
//! `--first-passing` stops the rest; two people picking at once make one winner; a daemon
//! killed around the judgement merges exactly one attempt.

use octl_tests::{TestEnv, TestRepo};
use serde_json::{json, Value};

/// Attempt 1 writes ten lines, attempt 2 one line, attempt 3 a file the gate refuses; each
/// commits. (`$OCTL_NODE` is `fix-K`.)
const TASK: &str = r#"case "$OCTL_NODE" in
  *-1) seq 1 10 > out.txt ;;
  *-2) echo one > out.txt ;;
  *) echo bad > bad.txt ;;
esac
git add -A && git commit -qm "attempt $OCTL_NODE""#;
const GATE: &str = "test ! -e bad.txt";

fn best_of(env: &TestEnv, repo: &TestRepo, task: &str, extra: Value) -> String {
    let mut params = json!({"agent": "shell", "node": "fix", "attempts": 3, "gate": GATE});
    for (k, v) in extra.as_object().unwrap() {
        params[k] = v.clone();
    }
    let r = env.spawn("spinoff", repo, task, params).unwrap();
    r["id"].as_str().unwrap().to_string()
}

fn judged(env: &TestEnv, run: &str) -> Vec<Value> {
    env.log_events(run)
        .into_iter()
        .filter(|e| e["type"] == "node.judged")
        .collect()
}

fn state_of(shown: &Value, node: &str) -> String {
    shown["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == node)
        .map(|n| n["state"].as_str().unwrap().to_string())
        .unwrap_or_default()
}

#[test]
fn the_smallest_passing_attempt_merges_and_the_others_are_kept() {
    let (env, _d, repo) = TestEnv::world();
    let run = best_of(&env, &repo, TASK, json!({}));
    let shown = env.wait_status(&run, &["completed", "failed"]);
    assert_eq!(shown["manifest"]["status"], "completed", "{shown:#}");
    // The one-line attempt merged; the ten-line one is set aside; the third failed its gate.
    assert_eq!(repo.show("main", "out.txt").as_deref(), Some("one\n"));
    assert_eq!(state_of(&shown, "fix-2"), "merged");
    assert_eq!(state_of(&shown, "fix-1"), "cancelled");
    assert_eq!(state_of(&shown, "fix-3"), "failed");
    let j = judged(&env, &run);
    assert_eq!(j.len(), 1, "{j:?}");
    assert_eq!(j[0]["node"], "fix-2");
    assert_eq!(j[0]["data"]["ranking"], json!(["fix-2", "fix-1"]));
    assert_eq!(j[0]["data"]["by"], "builtin");
    assert!(
        j[0]["data"]["reasons"][1]
            .as_str()
            .unwrap()
            .contains("+10 -0"),
        "{j:?}"
    );
    assert_eq!(shown["judged"]["ranking"], json!(["fix-2", "fix-1"]));
    // `run show` sets the attempts side by side, with the judge's places and reasons.
    let text = env.cli(["run", "show", &run]).stdout;
    assert!(text.contains("Attempts (3 of 3, judge builtin):"), "{text}");
    let attempts = text.split("Attempts (").nth(1).unwrap_or_default();
    let row = |n: &str| {
        attempts
            .lines()
            .find(|l| l.starts_with(n))
            .unwrap_or_default()
            .to_string()
    };
    assert!(
        row("fix-2 ").contains("#1") && row("fix-1 ").contains("#2"),
        "{text}"
    );
    assert!(text.contains("judged by builtin"), "{text}");
    // The two attempts' work side by side, one command away.
    let d = env.cli(["run", "diff", &run, "--node", "fix-2", "--against", "fix-1"]);
    d.ok();
    assert!(
        d.stdout.contains("-10") && d.stdout.contains("+one"),
        "{}",
        d.stdout
    );
    // The loser's work is kept and comes back.
    assert!(repo
        .refs("refs/octl/snapshots/")
        .contains(&format!("refs/octl/snapshots/{run}/fix-1")));
    let out = env.cli([
        "--json", "recover", &run, "--node", "fix-1", "--branch", "took-1",
    ]);
    out.ok();
    assert_eq!(repo.show("took-1", "out.txt").unwrap().lines().count(), 10);
    // A pick after the judgement is refused, naming the winner; nothing changes.
    let late = env.cli(["--json", "pick", &run, "--attempt", "1"]);
    assert_eq!(late.code, 4, "{}", late.stdout);
    assert!(late.error()["message"]
        .as_str()
        .unwrap()
        .contains("fix-2 won"));
    assert_eq!(judged(&env, &run).len(), 1);
}

#[test]
fn a_judge_command_is_asked_again_after_garbage_and_two_failures_leave_it_to_a_person() {
    let (env, _d, repo) = TestEnv::world();
    let dir = tempfile::tempdir().unwrap();
    // First answer garbage, then prefer the bigger attempt, with reasons; it must have been
    // given both passing attempts' diffs.
    let judge = dir.path().join("judge.sh");
    let seen = dir.path().join("seen.json");
    std::fs::write(
        &judge,
        format!(
            "#!/bin/sh\ncat > {seen}\nif [ ! -e {seen}.1 ]; then touch {seen}.1; echo 'the best is obviously fix-1'; exit 0; fi\necho '{{\"ranking\": [\"fix-1\", \"fix-2\"], \"reasons\": [\"more complete\", \"too short\"]}}'\n",
            seen = seen.display()
        ),
    )
    .unwrap();
    let run = best_of(
        &env,
        &repo,
        TASK,
        json!({"judge_command": format!("sh {}", judge.display())}),
    );
    let shown = env.wait_status(&run, &["completed", "failed"]);
    assert_eq!(shown["manifest"]["status"], "completed", "{shown:#}");
    assert_eq!(repo.show("main", "out.txt").unwrap().lines().count(), 10);
    let j = judged(&env, &run);
    assert_eq!(j[0]["data"]["by"], "command");
    assert_eq!(
        j[0]["data"]["reasons"],
        json!(["more complete", "too short"])
    );
    let given: Value = serde_json::from_str(&std::fs::read_to_string(&seen).unwrap()).unwrap();
    let names: Vec<&str> = given["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["node"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 2, "{given}");
    assert!(given["attempts"][0]["diff"]
        .as_str()
        .unwrap()
        .contains("out.txt"));

    // A judge that never answers a ranking: recorded, and a person picks.
    let run = best_of(
        &env,
        &repo,
        TASK,
        json!({"judge_command": "echo '{\"ranking\": [\"fix-3\"]}'"}),
    );
    let failed = octl_tests::wait_until(
        "run.judge_failed",
        std::time::Duration::from_secs(60),
        || {
            env.log_events(&run)
                .into_iter()
                .find(|e| e["type"] == "run.judge_failed")
        },
    );
    assert!(
        failed["data"]["message"]
            .as_str()
            .unwrap()
            .contains("fix-3"),
        "{failed}"
    );
    let out = env.cli(["--json", "pick", &run, "--attempt", "2"]);
    out.ok();
    let shown = env.wait_status(&run, &["completed", "failed"]);
    assert_eq!(shown["manifest"]["status"], "completed");
    assert_eq!(judged(&env, &run)[0]["data"]["by"], "human");
    assert_eq!(state_of(&shown, "fix-2"), "merged");
}

#[test]
fn first_passing_merges_the_first_and_stops_the_others() {
    let (env, _d, repo) = TestEnv::world();
    let task = r#"case "$OCTL_NODE" in
  *-1) echo first > out.txt; git add -A && git commit -qm first ;;
  *) sleep 600 ;;
esac"#;
    let run = best_of(&env, &repo, task, json!({"first_passing": true}));
    let shown = env.wait_status(&run, &["completed", "failed"]);
    assert_eq!(shown["manifest"]["status"], "completed", "{shown:#}");
    assert_eq!(repo.show("main", "out.txt").as_deref(), Some("first\n"));
    for n in ["fix-2", "fix-3"] {
        assert_eq!(state_of(&shown, n), "cancelled");
    }
    assert_eq!(judged(&env, &run)[0]["data"]["by"], "first_passing");
    // Their agents are gone.
    assert!(
        env.agent_processes().is_empty(),
        "{:?}",
        env.agent_processes()
    );
}

#[test]
fn two_people_picking_at_once_make_one_winner() {
    let (env, _d, repo) = TestEnv::world();
    for round in 0..5 {
        // Each round's text differs from the last winner's, so every attempt has a change.
        let task = format!("echo $OCTL_NODE {round} > out.txt; git add -A && git commit -qm work");
        let run = best_of(
            &env,
            &repo,
            &task,
            json!({"judge": "human", "attempts": 2, "gate": "true"}),
        );
        octl_tests::wait_until("both gated", std::time::Duration::from_secs(60), || {
            let gated = env
                .log_events(&run)
                .into_iter()
                .filter(|e| e["type"] == "node.gated")
                .count();
            (gated == 2).then_some(())
        });
        let outs: Vec<octl_tests::Cli> = std::thread::scope(|s| {
            let hs: Vec<_> = ["1", "2"]
                .into_iter()
                .map(|k| {
                    let (env, run) = (&env, &run);
                    s.spawn(move || env.cli(["--json", "pick", run, "--attempt", k]))
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let won: Vec<_> = outs.iter().filter(|o| o.code == 0).collect();
        assert_eq!(
            won.len(),
            1,
            "round {round}: {:?}",
            outs.iter()
                .map(|o| (&o.code, &o.stdout))
                .collect::<Vec<_>>()
        );
        let lost = outs.iter().find(|o| o.code != 0).unwrap();
        assert_eq!(lost.code, 4, "{}", lost.stdout);
        let shown = env.wait_status(&run, &["completed", "failed"]);
        assert_eq!(judged(&env, &run).len(), 1);
        let winner = judged(&env, &run)[0]["node"].as_str().unwrap().to_string();
        assert_eq!(
            repo.show("main", "out.txt").unwrap(),
            format!("{winner} {round}\n")
        );
        let merged = shown["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| n["state"] == "merged")
            .count();
        assert_eq!(merged, 1);
    }
}

#[test]
fn a_daemon_killed_at_each_step_after_the_judgement_merges_exactly_one_attempt() {
    let env = TestEnv::new();
    let repo = TestRepo::new(&env, "repo");
    for (round, point) in [
        "best-of:after-judged",
        "best-of:after-set-aside",
        "merge:after-started",
        "merge:after-move",
    ]
    .into_iter()
    .enumerate()
    {
        let d = env.start_daemon_with(&[("OCTL_FAILPOINTS", &format!("{point}@1"))]);
        let task = format!(
            "case \"$OCTL_NODE\" in *-1) seq 1 {} > out.txt ;; *) echo {round} > out.txt ;; esac; git add -A && git commit -qm work",
            10 + round
        );
        let run = best_of(&env, &repo, &task, json!({"attempts": 2, "gate": "true"}));
        let status = d.wait_exit();
        assert!(!status.success(), "{point}: the failpoint fired");
        let _d = env.start_daemon();
        let shown = env.wait_status(&run, &["completed", "failed"]);
        assert_eq!(
            shown["manifest"]["status"], "completed",
            "{point}: {shown:#}"
        );
        assert_eq!(judged(&env, &run).len(), 1, "{point}: judged once");
        assert_eq!(state_of(&shown, "fix-2"), "merged", "{point}");
        assert_eq!(state_of(&shown, "fix-1"), "cancelled", "{point}");
        assert_eq!(
            repo.show("main", "out.txt"),
            Some(format!("{round}\n")),
            "{point}"
        );
        // One attempt's commit per round on main: the loser's never, the winner's once.
        let work = repo.git(&["log", "--format=%s", "main"]);
        assert_eq!(
            work.lines().filter(|l| *l == "work").count(),
            round + 1,
            "{point}"
        );
        // The loser's worktree is gone, its work in its snapshot.
        let loser = shown["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["id"] == "fix-1")
            .unwrap();
        assert_eq!(loser["cleaned"], json!(true), "{point}: {loser}");
        assert!(repo
            .refs("refs/octl/snapshots/")
            .contains(&format!("refs/octl/snapshots/{run}/fix-1")));
        drop(_d);
    }
}

#[test]
fn a_spent_budget_stops_new_attempts_and_a_person_picks_among_those_that_ran() {
    let env = TestEnv::new();
    let scripts = tempfile::tempdir().unwrap();
    // Each attempt costs 0.5 of a 0.4 budget: after the first, no other starts.
    octl_tests::model::costly_claude(&env, scripts.path(), 0.5);
    let _d = env.start_daemon();
    let repo = TestRepo::new(&env, "repo");
    let r = env
        .spawn(
            "spinoff",
            &repo,
            "any",
            json!({"agent": "claude", "node": "fix", "attempts": 3, "max_parallel": 1,
                   "max_budget_usd": 0.4, "judge": "human"}),
        )
        .unwrap();
    let run = r["id"].as_str().unwrap().to_string();
    let shown = octl_tests::wait_until(
        "the budget spent",
        std::time::Duration::from_secs(60),
        || {
            let show = env.rpc("run.show", json!({"run": run}));
            (show["manifest"]["budget_spent"] == json!(true)
                && show["nodes"][0]["gated"] == json!(true))
            .then_some(show)
        },
    );
    let started = env
        .event_types(&run)
        .iter()
        .filter(|t| *t == "node.starting")
        .count();
    assert_eq!(started, 1, "{shown:#}");
    for n in ["fix-2", "fix-3"] {
        assert_eq!(state_of(&shown, n), "pending");
    }
    // The person picks the one that ran; the attempts that never started are set aside.
    env.cli(["--json", "pick", &run, "--attempt", "1"]).ok();
    let shown = env.wait_status(&run, &["completed", "failed"]);
    assert_eq!(shown["manifest"]["status"], "completed", "{shown:#}");
    assert_eq!(repo.show("main", "fix-1.txt").as_deref(), Some("fix-1\n"));
    for n in ["fix-2", "fix-3"] {
        assert_eq!(state_of(&shown, n), "cancelled");
    }
}
