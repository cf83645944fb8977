//! Review that goes back to the agent: `orchestratectl review RUN --comment …` records
//! `node.review` and the node's agent goes on with it (here a shell agent: a new attempt in
//! the same worktree and branch, the review in `$OCTL_REVIEW_FILE`); `--approve` merges a code
//! run's node. Two reviews at once: one is recorded, the other refused and in no event. Real
//! daemon, git and tmux.

use std::path::Path;
use std::time::Duration;

use octl_tests::{wait_until, TestEnv};
use serde_json::{json, Value};

fn node_of(env: &TestEnv, run: &str, id: &str) -> Value {
    let show = env.rpc("run.show", json!({"run": run}));
    show["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == json!(id))
        .cloned()
        .unwrap()
}

fn reviews(env: &TestEnv, run: &str) -> Vec<Value> {
    env.log_events(run)
        .into_iter()
        .filter(|e| e["type"] == json!("node.review"))
        .collect()
}

#[test]
fn reviews_go_back_to_the_agent_one_at_a_time_and_the_approved_work_merges() {
    let (env, _daemon, repo) = TestEnv::world();
    let go = env.root.path().join("go");
    // The first attempt writes v1; each attempt sent back by a review waits for `go`, then
    // keeps what the review said (from $OCTL_REVIEW_FILE) in the branch.
    let task = format!(
        "if [ -n \"$OCTL_REVIEW_FILE\" ]; then while [ ! -e {go} ]; do sleep 0.05; done; rm -f {go}; cat \"$OCTL_REVIEW_FILE\" >> reviews.md; else echo v1 > a.txt; fi",
        go = go.display()
    );
    let run = env.cli_spawn(&repo, &["code", "--agent", "shell", "--node", "w", &task]);
    env.wait_node(&run, "w", "done");

    // Bad input changes nothing, and says what is accepted.
    let before = env.log_events(&run).len();
    let none = env.cli(["--json", "review", &run]);
    assert_eq!(none.code, 2, "{none:?}");
    assert!(
        none.error()["message"]
            .as_str()
            .unwrap()
            .contains("--comment"),
        "{none:?}"
    );
    let both = env.try_rpc(
        "node.review",
        json!({"run": run, "comments": ["x"], "approve": true}),
    );
    assert_eq!(both.unwrap_err()["data"]["kind"], json!("invalid_params"));
    let ctl = env.try_rpc(
        "node.review",
        json!({"run": run, "comments": ["a\u{1b}[2Jb"]}),
    );
    assert!(ctl.unwrap_err()["message"]
        .as_str()
        .unwrap()
        .contains("control character"));
    let agent = env.cli_with(["--json", "review", &run, "--comment", "mine"], |c| {
        c.env("OCTL_AGENT", "1");
    });
    assert_eq!(agent.code, 4, "an agent does not review: {agent:?}");
    assert_eq!(env.log_events(&run).len(), before, "nothing recorded");

    // Three rounds, each raced by two reviewers: one wins, the other is told and changes
    // nothing.
    for round in 1..=3u64 {
        let (a, b) = (
            format!("r{round}: use the helper"),
            format!("r{round}: other"),
        );
        let (ca, cb) = std::thread::scope(|s| {
            let one = s.spawn(|| env.cli(["--json", "review", &run, "--comment", &a]));
            let two = s.spawn(|| env.cli(["--json", "review", &run, "--comment", &b]));
            (one.join().unwrap(), two.join().unwrap())
        });
        let (won, lost, said) = match (ca.code, cb.code) {
            (0, 4) => (ca, cb, a.clone()),
            (4, 0) => (cb, ca, b.clone()),
            _ => panic!("round {round}: one review wins, one is refused: {ca:?} {cb:?}"),
        };
        assert_eq!(
            lost.error()["kind"],
            json!("invalid_transition"),
            "{lost:?}"
        );
        let r = won.json();
        assert_eq!(r["review"]["round"], json!(round), "{r}");
        assert_eq!(
            r["review"]["way"],
            json!("attempt"),
            "a shell agent starts again: {r}"
        );
        let file = r["file"].as_str().unwrap().to_string();
        let recorded = reviews(&env, &run);
        assert_eq!(recorded.len() as u64, round, "one review per round");
        assert_eq!(recorded.last().unwrap()["data"]["comments"], json!([said]));
        // It starts again in the same worktree, and waits for `go`.
        env.wait_node(&run, "w", "running");
        std::fs::write(&go, "").unwrap();
        env.wait_node(&run, "w", "done");
        assert!(
            std::fs::read_to_string(&file).unwrap().contains(&said),
            "{file} holds the review"
        );
    }
    let wt = env.home.join("worktrees").join(&run).join("w");
    assert_eq!(
        std::fs::read_to_string(wt.join("a.txt")).unwrap(),
        "v1\n",
        "the first attempt's work is still there"
    );
    let n = node_of(&env, &run, "w");
    assert_eq!(n["reviews"].as_array().unwrap().len(), 3, "{n}");

    // Shown in `run show`, each round with what changed since it (each attempt added to
    // reviews.md: to the next round's tip, the last to the worktree as it is).
    let show = env.cli(["run", "show", &run]);
    for round in 1..=3 {
        let row = show
            .stdout
            .lines()
            .find(|l| l.starts_with("w ") && l.contains(&format!("review {round} ")))
            .unwrap_or_else(|| panic!("no row for review {round}:\n{}", show.stdout));
        assert!(row.contains(" 1 file +"), "{row}\n{}", show.stdout);
    }

    // Approved: merged, with every round's work.
    let out = env.cli(["--json", "review", &run, "--approve"]);
    out.ok();
    assert_eq!(out.json()["state"], json!("merged"), "{:?}", out);
    let merged = repo.show("main", "reviews.md").unwrap();
    for round in 1..=3 {
        assert!(merged.contains(&format!("r{round}: ")), "{merged}");
    }
    assert_eq!(repo.show("main", "a.txt").as_deref(), Some("v1\n"));
    let last = reviews(&env, &run).pop().unwrap();
    assert_eq!(last["data"]["approve"], json!(true), "{last}");
    assert_eq!(last["actor"], json!("human"));
    env.wait_status(&run, &["completed"]);
    // A review of merged work is refused.
    let late = env.cli(["--json", "review", &run, "--comment", "late"]);
    assert_eq!(late.code, 4, "{late:?}");
    wait_until("nothing left running", Duration::from_secs(10), || {
        (!Path::new(&wt).exists()).then_some(())
    });
}

#[test]
fn a_run_that_holds_for_review_merges_only_what_a_person_approved() {
    let (env, _daemon, repo) = TestEnv::world();
    // The first attempt's work fails the gate's check for the review's file; the attempt a
    // review sends back keeps the review, then it passes.
    let task = "if [ -n \"$OCTL_REVIEW_FILE\" ]; then cp \"$OCTL_REVIEW_FILE\" review.md; else echo v1 > a.txt; fi";
    let run = env.cli_spawn(
        &repo,
        &[
            "spinoff",
            "--agent",
            "shell",
            "--node",
            "h",
            "--review",
            "--gate",
            "test -f review.md",
            task,
        ],
    );
    env.wait_node(&run, "h", "done");
    let shown = env.rpc("run.show", json!({"run": run}));
    let waits = shown["nodes"][0]["waiting_for"].to_string();
    assert!(waits.contains("a person's review"), "{shown}");
    assert!(repo.show("main", "a.txt").is_none(), "held: nothing merged");
    // Sent back, it goes on in the same worktree; done again, it still waits.
    let out = env.cli([
        "--json",
        "review",
        &run,
        "--comment",
        "keep the review in review.md",
    ]);
    out.ok();
    assert_eq!(out.json()["review"]["way"], json!("attempt"));
    wait_until("the node done again", Duration::from_secs(60), || {
        let n = node_of(&env, &run, "h");
        (n["state"] == json!("done") && n["started_at"].is_string()).then_some(())
    });
    assert_eq!(env.wait_node(&run, "h", "done")["approved"], json!(null));
    assert!(repo.show("main", "review.md").is_none(), "held again");
    // Approved: gated, then merged.
    env.cli(["--json", "review", &run, "--approve"]).ok();
    env.wait_status(&run, &["completed"]);
    assert_eq!(repo.show("main", "a.txt").as_deref(), Some("v1\n"));
    assert!(repo
        .show("main", "review.md")
        .unwrap()
        .contains("keep the review"));
    // `--review` with a code run says it waits anyway, and starts nothing.
    let code = env.cli_with(
        [
            "--json", "spawn", "code", "--review", "--agent", "shell", "true",
        ],
        |c| {
            c.current_dir(&repo.path);
        },
    );
    assert_eq!(code.code, 2, "{code:?}");
}

/// The real Claude Code 2.1.328: a done node held for review is sent back with a comment; its
/// conversation is resumed (`claude --resume`) in the same worktree and branch with the
/// review as its next message — the stand-in's next request carries it — it commits again,
/// and once approved it merges.
#[test]
#[ignore = "needs the real Claude Code CLI: set OCTL_TEST_CLAUDE_BIN or npm-install it under .ci/node (see .ci/run)"]
fn claude_goes_on_with_a_review_in_its_own_conversation() {
    use octl_tests::model::{claude_world, require_claude, ModelStandIn, Step};
    let claude = require_claude();
    let model = ModelStandIn::start(vec![
        Step::bash("echo v1 > a.txt && git add a.txt && git commit -q -m v1"),
        Step::bash("orchestratectl node done --message v1"),
        Step::text("Done."),
        // The resumed conversation: the review is its next user message.
        Step::bash("echo b > b.txt && git add b.txt && git commit -q -m 'as reviewed'"),
        Step::bash("orchestratectl node done --message 'as reviewed'"),
        Step::text("Done again."),
    ]);
    let (env, repo) = claude_world(&claude, &model, true, "");
    let _d = env.start_daemon();
    let run = env.cli_spawn(
        &repo,
        &["spinoff", "Write a.txt", "--node", "c", "--review"],
    );
    env.wait_node(&run, "c", "done");
    let first = model.main_requests().len();
    let out = env.cli([
        "--json",
        "review",
        &run,
        "--comment",
        "a.txt:1: also add b.txt beside it",
    ]);
    out.ok();
    assert_eq!(out.json()["review"]["way"], json!("resumed"), "{out:?}");
    let asked = model.wait_main_requests(first + 1, Duration::from_secs(60));
    let next = asked[first]["messages"].to_string();
    assert!(
        next.contains("a.txt:1: also add b.txt beside it") && next.contains("review 1"),
        "the review is the conversation's next message: {next}"
    );
    assert!(
        next.contains("echo v1 > a.txt"),
        "in the same conversation: {next}"
    );
    wait_until("done again", Duration::from_secs(60), || {
        let n = node_of(&env, &run, "c");
        (n["state"] == json!("done") && n["message"] == json!("as reviewed")).then_some(())
    });
    env.cli(["review", &run, "--approve"]).ok();
    env.wait_status(&run, &["completed"]);
    assert_eq!(repo.show("main", "a.txt").as_deref(), Some("v1\n"));
    assert_eq!(repo.show("main", "b.txt").as_deref(), Some("b\n"));
    let resumed = env
        .log_events(&run)
        .into_iter()
        .filter(|e| e["type"] == json!("node.starting"))
        .nth(1)
        .unwrap();
    assert_eq!(resumed["data"]["resume"], json!(true), "{resumed}");
}

/// The real Claude Code 2.1.328, interactive (a code run): the review is typed into its live
/// session, the stand-in's next request carries it, it commits again, and approved, merges.
#[test]
#[ignore = "needs the real Claude Code CLI: set OCTL_TEST_CLAUDE_BIN or npm-install it under .ci/node (see .ci/run)"]
fn a_review_is_typed_into_a_live_claude_session() {
    use octl_tests::model::{claude_world, require_claude, ModelStandIn, Step};
    let claude = require_claude();
    let model = ModelStandIn::start(vec![
        Step::bash("echo v1 > a.txt && git add a.txt && git commit -q -m v1"),
        Step::bash("orchestratectl node done --message v1"),
        Step::text("Done."),
        Step::bash("echo b > b.txt && git add b.txt && git commit -q -m 'as reviewed'"),
        Step::bash("orchestratectl node done --message 'as reviewed'"),
        Step::text("Done again."),
    ]);
    let (env, repo) = claude_world(&claude, &model, true, "");
    let _d = env.start_daemon();
    let run = env.cli_spawn(&repo, &["code", "Write a.txt", "--node", "i"]);
    env.wait_node(&run, "i", "done");
    // Its turn over, the session waits at its prompt.
    wait_until("the first turn to end", Duration::from_secs(60), || {
        (model.main_requests().len() >= 3).then_some(())
    });
    let first = model.main_requests().len();
    let out = env.cli([
        "--json",
        "review",
        &run,
        "--comment",
        "a.txt: add b.txt too",
    ]);
    out.ok();
    assert_eq!(out.json()["review"]["way"], json!("typed"), "{out:?}");
    assert_eq!(out.json()["state"], json!("running"));
    let window = format!("{run}:i");
    octl_tests::wait_until_describing(
        "the typed review's request",
        Duration::from_secs(60),
        || (model.main_requests().len() > first).then_some(()),
        || env.tmux_screen(&window),
    );
    let asked = model.main_requests();
    let next = asked[first]["messages"].to_string();
    assert!(
        next.contains("a.txt: add b.txt too"),
        "typed as its next message: {next}"
    );
    wait_until("done again", Duration::from_secs(60), || {
        let n = node_of(&env, &run, "i");
        (n["state"] == json!("done") && n["message"] == json!("as reviewed")).then_some(())
    });
    env.cli(["review", &run, "--approve"]).ok();
    env.wait_status(&run, &["completed"]);
    assert_eq!(repo.show("main", "b.txt").as_deref(), Some("b\n"));
}
