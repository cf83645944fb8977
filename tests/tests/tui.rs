//! `orchestratectl tui` in a real terminal (a tmux pane on a private socket) against the real
//! daemon and real git, with shell agents: a person answers a question, accepts a proposal,
//! merges a code run and cancels a run with keys, and each is checked in the run's event log.
//! With the daemon down the TUI shows the runs read-only from their logs, and says so.

use std::time::Duration;

use octl_tests::{bin, wait_until, Pane, TestEnv, TestRepo};
use serde_json::{json, Value};

fn tui(env: &TestEnv, extra: &[(&str, &str)]) -> Pane {
    tui_sized(env, 120, 40, extra)
}

fn tui_sized(env: &TestEnv, width: u16, height: u16, extra: &[(&str, &str)]) -> Pane {
    let home = env.home.display().to_string();
    Pane::start(
        env,
        width,
        height,
        extra,
        &bin("orchestratectl"),
        &["--home", &home, "tui"],
    )
}

/// Does a row of the screen start with `text` (the NEEDS column of the runs list)?
fn a_row_starts_with(screen: &str, text: &str) -> bool {
    screen.lines().any(|l| l.starts_with(text))
}

fn code_run(env: &TestEnv, repo: &TestRepo, task: &str) -> String {
    env.spawn(
        "code",
        repo,
        task,
        json!({"agent": "shell", "node": "main"}),
    )
    .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// A code run whose shell agent (node `main`) stays alive; returns once it runs.
fn live_run(env: &TestEnv, repo: &TestRepo) -> String {
    let run = code_run(env, repo, "sleep 600");
    env.wait_node(&run, "main", "running");
    run
}

/// Waits until the run's log has an event of type `ty`; returns it.
fn logged(env: &TestEnv, run: &str, ty: &str) -> Value {
    wait_until(
        &format!("{ty} in the log of {run}"),
        Duration::from_secs(30),
        || {
            env.log_events(run)
                .into_iter()
                .find(|e| e["type"] == json!(ty))
        },
    )
}

#[test]
fn answering_a_question_from_the_inbox() {
    let (env, _d, repo) = TestEnv::world();
    let run = live_run(&env, &repo);
    env.rpc(
        "discussion.ask",
        json!({"run": run, "node": "main", "title": "Which colour?", "body": "blue or green"}),
    );
    let pane = tui(&env, &[]);
    // The runs list says why the run needs you.
    pane.wait_for("question");
    pane.keys(&["i"]);
    let screen = pane.wait_for("Which colour?");
    assert!(
        screen.contains("blue or green"),
        "the context is shown:\n{screen}"
    );
    pane.keys(&["a"]);
    pane.wait_for("enter: send");
    pane.type_text("green, please");
    pane.keys(&["Enter"]);
    let ev = logged(&env, &run, "discussion.resolved");
    assert_eq!(ev["data"]["answer"], json!("green, please"));
    // The inbox empties once the answer is folded in.
    pane.wait_for("Nothing waits for you");
    pane.keys(&["q"]);
    wait_until("the tui to quit", Duration::from_secs(10), || {
        (!pane.alive()).then_some(())
    });
}

#[test]
fn accepting_a_proposal_starts_its_run() {
    let (env, _d, repo) = TestEnv::world();
    let run = live_run(&env, &repo);
    env.rpc(
        "spinoff.propose",
        json!({"run": run, "node": "main", "task": "printf side > side.txt", "why": "separate work"}),
    );
    let proposal = env.rpc("run.show", json!({"run": run}))["spinoffs"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let pane = tui(&env, &[]);
    pane.wait_for("● live");
    // An open proposal needs you as much as a question does.
    pane.wait_screen("the run's row to say it needs you for a proposal", |s| {
        a_row_starts_with(s, "proposal")
    });
    pane.keys(&["i"]);
    pane.wait_for("printf side > side.txt");
    // A question arrives and sorts above it: the selection stays on the proposal.
    env.rpc(
        "discussion.ask",
        json!({"run": run, "node": "main", "title": "Which colour?"}),
    );
    pane.wait_for("Which colour?");
    pane.keys(&["y"]);
    let ev = logged(&env, &run, "spinoff.accepted");
    assert_eq!(ev["data"]["id"], json!(proposal), "{ev}");
    let child = ev["data"]["run"]
        .as_str()
        .or_else(|| ev["data"]["child_run"].as_str())
        .map(str::to_string);
    pane.wait_for("accept proposal");
    // The new run shows up in the list.
    pane.keys(&["Escape"]);
    if let Some(child) = child {
        pane.wait_for(&child[..8]);
    }
}

#[test]
fn merging_a_code_run_after_confirming() {
    let (env, _d, repo) = TestEnv::world();
    let run = code_run(&env, &repo, "printf 'reviewed\\n' > review.txt");
    env.wait_status(&run, &["waiting"]);
    let pane = tui(&env, &[]);
    // First in the list, and why.
    pane.wait_for("to merge");
    pane.keys(&["m"]);
    pane.wait_for("merge run");
    pane.keys(&["y"]);
    logged(&env, &run, "merge.succeeded");
    assert_eq!(
        repo.show("main", "review.txt").as_deref(),
        Some("reviewed\n")
    );
    pane.wait_for("completed");
}

#[test]
fn a_best_of_code_run_shows_its_attempts_and_the_winner_merges_with_a_key() {
    let (env, _d, repo) = TestEnv::world();
    // Attempt 1 writes more than attempt 2: the built-in judge ranks 2 first.
    let task = "case \"$OCTL_NODE\" in *-1) seq 1 9 > best.txt ;; *) echo two > best.txt ;; esac";
    let run = env
        .spawn(
            "code",
            &repo,
            task,
            json!({"agent": "shell", "node": "main", "attempts": 2, "gate": "true"}),
        )
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    logged(&env, &run, "node.judged");
    let pane = tui(&env, &[]);
    pane.wait_for("to merge");
    pane.keys(&["Enter"]);
    pane.wait_for("attempts: main-2 won (builtin)");
    pane.wait_for("#1 won");
    // The winner is the second row.
    pane.keys(&["j", "m"]);
    pane.wait_for("merge");
    pane.keys(&["y"]);
    logged(&env, &run, "merge.succeeded");
    assert_eq!(repo.show("main", "best.txt").as_deref(), Some("two\n"));
    env.wait_status(&run, &["completed"]);
}

#[test]
fn cancelling_a_run_asks_first_and_discard_asks_twice() {
    let (env, _d, repo) = TestEnv::world();
    let run = live_run(&env, &repo);
    // At 80 columns every confirmation shows its keys in full.
    let pane = tui_sized(&env, 80, 24, &[]);
    pane.wait_for(&run[..8]);
    pane.wait_for("1 running");
    // Discard is offered, and asks once more; saying no there does nothing.
    pane.keys(&["x"]);
    pane.wait_for("d: discard too… · n/esc: no");
    pane.keys(&["d"]);
    pane.wait_for("DISCARD");
    pane.wait_for("y: yes · n/esc: no");
    pane.keys(&["n"]);
    pane.wait_for("nothing done");
    assert!(!env.event_types(&run).contains(&"run.cancelled".to_string()));
    // Cancel without discard.
    pane.keys(&["x"]);
    pane.wait_for("d: discard too");
    pane.keys(&["y"]);
    let ev = logged(&env, &run, "run.cancelled");
    assert_ne!(ev["data"]["discard"], json!(true), "{ev}");
    pane.wait_for("cancelled");
}

#[test]
fn with_the_daemon_down_the_runs_are_read_from_disk_and_it_says_so() {
    let (env, d, repo) = TestEnv::world();
    let run = code_run(&env, &repo, "printf 'x\\n' > x.txt");
    env.wait_status(&run, &["waiting"]);
    let pane = tui(&env, &[]);
    pane.wait_for("● live");
    pane.wait_for(&run[..8]);
    // Stopped while the TUI looks: it says so and keeps the runs (from their logs).
    d.signal_and_wait(libc::SIGTERM);
    let screen = pane.wait_for("read-only");
    assert!(screen.contains(&run[..8]), "{screen}");
    // An action is refused at once, saying why (not after asking to confirm), and changes
    // nothing.
    pane.keys(&["m"]);
    let screen = pane.wait_for("nothing can be changed now");
    assert!(!screen.contains("merge run"), "no confirmation:\n{screen}");
    // Back when the daemon is; what was true only while it was away is no longer said.
    let _d = env.start_daemon();
    let screen = pane.wait_for("● live");
    assert!(
        !screen.contains("nothing can be changed"),
        "the read-only line is gone once octld answers:\n{screen}"
    );
    assert!(!env.event_types(&run).contains(&"merge.started".to_string()));
    drop(pane);

    // Opened with the daemon down and autostart off: read-only from the start, not started.
    drop(_d);
    wait_until("octld to stop", Duration::from_secs(10), || {
        env.try_rpc("daemon.status", json!({}))
            .is_err()
            .then_some(())
    });
    let pane = tui(&env, &[("OCTL_NO_AUTOSTART", "1")]);
    let screen = pane.wait_for("octld is not running: read-only");
    pane.wait_for(&run[..8]);
    assert!(screen.contains("to merge") || pane.wait_for("to merge").contains("to merge"));
    assert!(env.try_rpc("daemon.status", json!({})).is_err());
}

#[test]
fn the_agents_screen_is_shown_and_a_line_of_input_reaches_it() {
    let (env, _d, repo) = TestEnv::world();
    let run = code_run(
        &env,
        &repo,
        "echo 'ready for input'; read line; echo \"got:$line\"; sleep 600",
    );
    env.wait_node(&run, "main", "running");
    let pane = tui(&env, &[]);
    pane.wait_for(&run[..8]);
    // The run's node, its live screen (node.screen) beside the tree.
    pane.keys(&["Enter"]);
    pane.wait_for("ready for input");
    pane.keys(&["s"]);
    pane.wait_for("send a line");
    pane.type_text("hello agent");
    pane.keys(&["Enter"]);
    pane.wait_for("got:hello agent");
    // The node's events, each line with its node beside its type.
    pane.keys(&["e"]);
    pane.wait_screen("node.started with its node in the events pane", |s| {
        s.lines()
            .any(|l| l.contains("node.started") && l.contains(" main "))
    });
    // The line itself is not written to the run's log.
    let log = std::fs::read_to_string(env.run_dir(&run).join("events.jsonl")).unwrap();
    assert!(!log.contains("hello agent"));
}

/// Runs created within the same 256 ms share their first 8 characters (a ULID's first 10 are
/// its millisecond): the list and every question name each run by the shortest prefix no
/// other run has, at least 10 characters long.
#[test]
fn runs_started_together_are_told_apart_by_their_ids() {
    let (env, _d, _repo) = TestEnv::world();
    // Created back to back, two nearly always share 8 characters; more are made until they do.
    let mut ids: Vec<String> = Vec::new();
    let mut twins = None;
    for _ in 0..50 {
        let id = env.create_run("together");
        twins = ids
            .iter()
            .find(|o| o[..8] == id[..8])
            .map(|o| (o.clone(), id.clone()));
        ids.push(id);
        if twins.is_some() {
            break;
        }
    }
    let (older, newest) = twins.expect("two runs created back to back share 8 characters");
    let unique = |id: &str| {
        let n = (10..=26)
            .find(|n| ids.iter().filter(|o| o[..*n] == id[..*n]).count() == 1)
            .unwrap();
        id[..n].to_string()
    };
    let pane = tui_sized(&env, 80, 24, &[]);
    pane.wait_for(&unique(&older));
    pane.wait_for(&unique(&newest));
    // The newest run is selected first; the question names it unambiguously.
    pane.keys(&["x"]);
    pane.wait_for(&format!("cancel run {}?", unique(&newest)));
    pane.keys(&["n"]);
    pane.wait_for("nothing done");
}

/// A merge conflict is settled by merging, so the TUI says `conflict` (not `question`) and
/// never offers to answer the daemon's question about it; it says what to do instead.
#[test]
fn a_merge_conflict_is_labelled_a_conflict_and_not_offered_as_a_question() {
    let (env, _d, repo) = TestEnv::world();
    let run = env.conflicted_spinoff(&repo);
    let pane = tui_sized(&env, 80, 24, &[]);
    let screen = pane.wait_screen("the run's row to say conflict", |s| {
        a_row_starts_with(s, "conflict")
    });
    assert!(!a_row_starts_with(&screen, "question"), "{screen}");
    pane.keys(&["i"]);
    let screen = pane.wait_for("resolve the conflict in");
    assert!(
        !screen.contains("a: answer"),
        "no answer is offered for a conflict:\n{screen}"
    );
    pane.keys(&["a"]);
    pane.wait_for("settled by merging");
    assert!(!pane.screen().contains("enter: send"));
    assert!(!env
        .event_types(&run)
        .contains(&"discussion.resolved".to_string()));
}

/// An agent's permission request (its hook asks, as an autonomous Claude Code agent's
/// `PermissionRequest` hook does) is its own inbox item, `permission`, with the tool and the
/// whole command; `y` allows it through `node.permission_decide`, as `node allow` does, and
/// the waiting hook gets the allow.
#[test]
fn allowing_a_permission_request_from_the_inbox() {
    let (env, _d, repo) = TestEnv::world();
    let command = "python3 scripts/check.py --all --strict";
    let input = json!({"hook_event_name": "PermissionRequest", "tool_name": "Bash",
                       "tool_input": {"command": command, "description": "check it"}});
    let run = code_run(
        &env,
        &repo,
        &format!(
            "echo '{input}' | orchestratectl hook PermissionAsk > \"$OCTL_WORKTREE.answer\"; sleep 600"
        ),
    );
    logged(&env, &run, "node.permission_asked");
    let pane = tui_sized(&env, 80, 24, &[]);
    pane.wait_screen("the run's row to say permission", |s| {
        a_row_starts_with(s, "permission ")
    });
    pane.keys(&["i"]);
    let screen = pane.wait_for(&format!("command: {command}"));
    assert!(
        screen.contains("/main Bash (p1)") && screen.contains("description: check it"),
        "the tool and its input:\n{screen}"
    );
    assert!(
        screen.contains("y allow · n deny · A allow always"),
        "{screen}"
    );
    pane.keys(&["y"]);
    let ev = logged(&env, &run, "node.permission_decided");
    assert_eq!(ev["actor"], json!("human"), "{ev}");
    assert_eq!(ev["data"]["request"], json!("p1"), "{ev}");
    assert_eq!(ev["data"]["behavior"], json!("allow"), "{ev}");
    assert_eq!(ev["data"]["by"], json!("human"), "{ev}");
    assert_eq!(ev["data"]["always"], json!(false), "{ev}");
    pane.wait_for("allowed by human");
    let worktree = env.rpc("run.show", json!({"run": run}))["nodes"][0]["worktree"]
        .as_str()
        .unwrap()
        .to_string();
    let answer = wait_until("the hook's answer", Duration::from_secs(30), || {
        std::fs::read_to_string(format!("{worktree}.answer"))
            .ok()
            .filter(|t| t.ends_with('\n'))
    });
    let answer: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(
        answer["hookSpecificOutput"]["decision"]["behavior"],
        json!("allow"),
        "{answer}"
    );
    // Decided, it is no longer listed.
    pane.wait_for("Nothing waits for you");
}

/// From the diff of a done node, `c` sends its work back with a review comment: recorded as
/// `node.review`, its agent goes on with it (a shell agent: again in the same worktree, the
/// review in `$OCTL_REVIEW_FILE`), and merged it has both.
#[test]
fn requesting_changes_from_the_diff() {
    let (env, _d, repo) = TestEnv::world();
    let run = code_run(
        &env,
        &repo,
        "if [ -n \"$OCTL_REVIEW_FILE\" ]; then cp \"$OCTL_REVIEW_FILE\" review.md; else printf 'one\\ntwo\\n' > notes.txt; fi",
    );
    env.wait_status(&run, &["waiting"]);
    let pane = tui(&env, &[]);
    pane.wait_for("to merge");
    pane.keys(&["d"]);
    pane.wait_for("+two");
    // The diff's last line: `c` starts the comment by naming it.
    pane.keys(&["G", "c"]);
    pane.wait_for("review: what should change?");
    pane.wait_for("> notes.txt:2: ");
    pane.type_text("say why");
    pane.keys(&["Enter"]);
    let ev = logged(&env, &run, "node.review");
    assert_eq!(ev["actor"], json!("human"), "{ev}");
    assert_eq!(
        ev["data"]["comments"],
        json!(["notes.txt:2: say why"]),
        "{ev}"
    );
    assert_eq!(ev["data"]["way"], json!("attempt"), "{ev}");
    pane.wait_for("review 1 attempt");
    pane.wait_for("review 1: changes asked (attempt): notes.txt:2: say");
    wait_until("the node done again", Duration::from_secs(30), || {
        let show = env.rpc("run.show", json!({"run": run}));
        (show["nodes"][0]["state"] == json!("done") && show["nodes"][0]["started_at"].is_string())
            .then_some(())
    });
    // `d` again: what the agent did since the review, and only that.
    pane.keys(&["d"]);
    let since = pane.wait_for("b/review.md");
    assert!(since.contains("since review 1"), "{since}");
    assert!(!since.contains("+one"), "{since}");
    env.cli(["review", &run, "--approve"]).ok();
    env.wait_status(&run, &["completed"]);
    assert_eq!(
        repo.show("main", "notes.txt").as_deref(),
        Some("one\ntwo\n")
    );
    assert!(repo
        .show("main", "review.md")
        .unwrap()
        .contains("notes.txt:2: say why"));
}
