//! The real Claude Code CLI as an agent, in its tmux window, against the scripted stand-in
//! for the model API. Every test is `#[ignore]`d (it needs the CLI): run them with
//! `cargo test -p octl-tests -- --ignored`, as `.ci/run` does; a missing CLI then fails them.

use octl_tests::model::{claude_world, require_claude, ModelStandIn, Step};
use octl_tests::{wait_until_describing, TestEnv};
use serde_json::{json, Value};

/// More of `[agents.claude]`: the agent may run any Bash command (scripts that sleep and loop).
const ALL_BASH: &str = "allowed_tools = [\"Bash\"]\n";

fn node_event<'a>(events: &'a [Value], kind: &str) -> &'a Value {
    events
        .iter()
        .find(|e| e["type"] == json!(kind))
        .unwrap_or_else(|| panic!("no {kind}"))
}

#[test]
#[ignore = "needs the real Claude Code CLI: set OCTL_TEST_CLAUDE_BIN or npm-install it under .ci/node (see .ci/run)"]
fn claude_edits_commits_reports_done_and_the_spinoff_merges() {
    let claude = require_claude();
    let model = ModelStandIn::start(vec![
        Step::bash("printf 'written by claude\\n' > claude.txt"),
        Step::bash("git add claude.txt && git commit -q -m 'claude: add claude.txt'"),
        Step::bash("orchestratectl node done --message 'added claude.txt'"),
        Step::text("All done."),
    ]);
    let (env, repo) = claude_world(&claude, &model, true, "");
    let _d = env.start_daemon();
    let run = env.cli_spawn(
        &repo,
        &["spinoff", "Add a file named claude.txt", "--node", "writer"],
    );
    let show = env.wait_status(&run, &["completed", "failed", "waiting"]);
    assert_eq!(
        show["manifest"]["status"],
        json!("completed"),
        "{show}\nlog: {:?}",
        std::fs::read_to_string(env.run_dir(&run).join("logs/writer.log"))
    );
    assert_eq!(
        repo.show("main", "claude.txt").as_deref(),
        Some("written by claude\n")
    );
    let events = env.log_events(&run);
    let done = node_event(&events, "node.done");
    assert_eq!(
        done["data"]["message"],
        json!("added claude.txt"),
        "the agent's own report"
    );
    let outcome = &done["data"]["outcome"];
    assert_eq!(
        outcome["num_turns"],
        json!(4),
        "the session's turns are in the done event: {done}"
    );
    assert!(outcome["total_cost_usd"].as_f64().unwrap() > 0.0);
    assert_eq!(outcome["is_error"], json!(false));
    // The agent was told how to report.
    let main = model.main_requests();
    assert!(
        main[0].to_string().contains("orchestratectl node done"),
        "the appended system prompt reached the model"
    );
    // The raw stream is kept; the pane showed readable lines.
    let raw = std::fs::read_to_string(env.run_dir(&run).join("logs/writer.log")).unwrap();
    assert!(raw.lines().any(|l| l.contains("\"type\":\"result\"")));
    let pane = std::fs::read_to_string(env.run_dir(&run).join("logs/writer.pane.log")).unwrap();
    assert!(pane.contains("→ Bash: git add claude.txt"), "{pane}");
}

#[test]
#[ignore = "needs the real Claude Code CLI: set OCTL_TEST_CLAUDE_BIN or npm-install it under .ci/node (see .ci/run)"]
fn an_installed_skill_is_expanded_as_a_slash_command() {
    let claude = require_claude();
    let model = ModelStandIn::start(vec![
        Step::bash("orchestratectl node done --message 'read the overview'"),
        Step::text("ok"),
    ]);
    let (env, repo) = claude_world(&claude, &model, true, "");
    let _d = env.start_daemon();
    env.cli(["skill", "install"]).ok();
    let skill =
        std::fs::read_to_string(env.claude_dir.join("skills/octl-run-overview/SKILL.md")).unwrap();
    let run = env.cli_spawn(
        &repo,
        &["spinoff", "/octl-run-overview", "--node", "reader"],
    );
    env.wait_status(&run, &["completed", "failed", "waiting"]);
    // A distinctive line of the skill's body reached the model as part of the request.
    let body_line = skill
        .split("---")
        .nth(2)
        .unwrap()
        .lines()
        .map(str::trim)
        .find(|l| l.len() > 30 && !l.contains('$'))
        .unwrap()
        .to_string();
    let sent: String = model
        .main_requests()
        .iter()
        .map(|r| r.to_string())
        .collect();
    let needle = serde_json::to_string(&body_line).unwrap();
    assert!(
        sent.contains(needle.trim_matches('"')),
        "the skill body line {body_line:?} was not in the request"
    );
}

#[test]
#[ignore = "needs the real Claude Code CLI: set OCTL_TEST_CLAUDE_BIN or npm-install it under .ci/node (see .ci/run)"]
fn an_interactive_session_passes_the_trust_question_and_merges_on_request() {
    let claude = require_claude();
    let model = ModelStandIn::start(vec![
        Step::bash(
            "printf 'reviewed\\n' > review.txt && git add review.txt && git commit -q -m review",
        ),
        Step::bash("orchestratectl node done --message 'ready for review'"),
        Step::text("Ready for your review."),
    ]);
    // Not trusted: the daemon must answer Claude Code's question in the window.
    let (env, repo) = claude_world(&claude, &model, false, "");
    let _d = env.start_daemon();
    let run = env.cli_spawn(&repo, &["code", "Write review.txt", "--node", "ui"]);
    let show = wait_until_describing(
        "the session to end",
        std::time::Duration::from_secs(45),
        || {
            let show = env.rpc("run.show", json!({"run": run}));
            (show["manifest"]["status"] != json!("active")).then_some(show)
        },
        || {
            format!(
                "still active: {}\nscreen:\n{}\nrequests: {}",
                env.rpc("run.show", json!({"run": run})),
                env.tmux_screen(&format!("{run}:ui")),
                model.requests().len()
            )
        },
    );
    assert_eq!(show["nodes"][0]["state"], json!("done"), "{show}");
    env.cli(["merge", &run]).ok();
    assert_eq!(
        repo.show("main", "review.txt").as_deref(),
        Some("reviewed\n")
    );
    env.wait_status(&run, &["completed"]);
}

/// The node's activity state as the daemon shows it.
fn activity(env: &TestEnv, run: &str) -> (String, Value) {
    let show = env.rpc("run.show", json!({"run": run}));
    let node = show["nodes"][0].clone();
    (
        node["activity"]["state"].as_str().unwrap_or("").to_string(),
        node,
    )
}

/// What the node's agent said it was doing, in order: each `node.activity`, and each
/// permission request it recorded (`needs_permission`, hook `PermissionAsk`).
fn activities(env: &TestEnv, run: &str) -> Vec<(String, String)> {
    env.log_events(run)
        .iter()
        .filter_map(|e| match e["type"].as_str() {
            Some("node.activity") => Some((
                e["data"]["state"].as_str().unwrap().to_string(),
                e["data"]["hook"].as_str().unwrap_or("").to_string(),
            )),
            Some("node.permission_asked") => {
                Some(("needs_permission".to_string(), "PermissionAsk".to_string()))
            }
            _ => None,
        })
        .collect()
}

#[test]
#[ignore = "needs the real Claude Code CLI: set OCTL_TEST_CLAUDE_BIN or npm-install it under .ci/node (see .ci/run)"]
fn a_permission_prompt_shows_needs_permission_and_answering_it_goes_back_to_working() {
    let claude = require_claude();
    // python3 is not among the allowed tools: acceptEdits asks "Do you want to proceed?".
    let model = ModelStandIn::start(vec![
        Step::bash("python3 -c 'print(6 * 7)'"),
        Step::text("It printed 42."),
    ]);
    let (env, repo) = claude_world(&claude, &model, true, "");
    let _d = env.start_daemon();
    let run = env.cli_spawn(&repo, &["code", "Compute 6*7 with python", "--node", "py"]);
    let target = format!("{run}:py");
    let node = octl_tests::wait_until(
        "needs_permission from the hooks",
        std::time::Duration::from_secs(60),
        || {
            let (state, node) = activity(&env, &run);
            (state == "needs_permission").then_some(node)
        },
    );
    assert_eq!(
        node["state"],
        json!("running"),
        "the node's state is untouched"
    );
    let detail = node["activity"]["detail"].as_str().unwrap_or("");
    assert!(
        detail.contains("python3") || detail.contains("permission"),
        "{node}"
    );
    // The hook runs as the dialog comes up.
    octl_tests::wait_until(
        "the permission dialog in the window",
        std::time::Duration::from_secs(30),
        || {
            env.tmux_screen(&target)
                .contains("Do you want to proceed?")
                .then_some(())
        },
    );
    assert!(node["session_id"].as_str().is_some(), "{node}");
    // Yes (the first option, selected) in the window.
    let keys = env.tmux(&["send-keys", "-t", &target, "Enter"]);
    assert!(keys.status.success(), "{keys:?}");
    octl_tests::wait_until(
        "working again after the answer, then idle at the prompt",
        std::time::Duration::from_secs(60),
        || {
            let said = activities(&env, &run);
            let asked = said.iter().position(|(s, _)| s == "needs_permission")?;
            let working = said[asked..]
                .iter()
                .position(|(s, h)| s == "working" && h == "PostToolUse")?;
            said[asked + working..]
                .iter()
                .any(|(s, h)| s == "idle" && h == "Stop")
                .then_some(())?;
            // The line is in the file a moment before its group is committed and folded:
            // wait for the daemon's own view too.
            (activity(&env, &run).0 == "idle").then_some(())
        },
    );
    let (state, node) = activity(&env, &run);
    assert_eq!(state, "idle", "{node}\n{:?}", activities(&env, &run));
    assert_eq!(node["state"], json!("running"));
    // The hooks went in through --settings only: no settings file was written.
    assert!(!repo.path.join(".claude/settings.json").exists());
    assert!(!repo.path.join(".claude/settings.local.json").exists());
}

#[test]
#[ignore = "needs the real Claude Code CLI: set OCTL_TEST_CLAUDE_BIN or npm-install it under .ci/node (see .ci/run)"]
fn an_agent_killed_mid_task_is_resumed_with_its_earlier_conversation() {
    let claude = require_claude();
    let model = ModelStandIn::start(vec![
        Step::bash("printf 'one\\n' > one.txt && git add one.txt && git commit -q -m one"),
        // The first time it waits to be killed; the resumed agent passes through.
        Step::bash(
            "if [ -e \"$OCTL_WORKTREE.killed\" ]; then true; else touch \"$OCTL_WORKTREE.killed\"; sleep 600; fi",
        ),
        // Where the resumed conversation picks up depends on how Claude Code closes the
        // interrupted call (a result, a note): each next reply reports.
        Step::bash("orchestratectl node done --message 'resumed and done'"),
        Step::bash("orchestratectl node done --message 'resumed and done'"),
        Step::bash("orchestratectl node done --message 'resumed and done'"),
        Step::text("Done."),
    ]);
    let (env, repo) = claude_world(&claude, &model, true, ALL_BASH);
    let _d = env.start_daemon();
    let run = env.cli_spawn(
        &repo,
        &["spinoff", "Write one.txt, then wait", "--node", "w"],
    );
    let node = env.wait_node(&run, "w", "running");
    let worktree = node["worktree"].as_str().unwrap().to_string();
    let session = node["session_id"].as_str().unwrap().to_string();
    octl_tests::wait_until(
        "the agent to be in its sleep",
        std::time::Duration::from_secs(60),
        || {
            std::path::Path::new(&format!("{worktree}.killed"))
                .exists()
                .then_some(())
        },
    );
    let before = model.main_requests().len();
    // The whole tmux server goes, as with a reboot or `tmux kill-server`.
    env.tmux(&["kill-server"]);
    let show = env.wait_status(&run, &["completed", "failed", "waiting"]);
    assert_eq!(show["manifest"]["status"], json!("completed"), "{show}");
    assert_eq!(repo.show("main", "one.txt").as_deref(), Some("one\n"));
    let events = env.log_events(&run);
    let retried = node_event(&events, "node.retried");
    assert_eq!(retried["data"]["resume"], json!(true), "{retried}");
    assert_eq!(retried["data"]["session_id"], json!(session));
    // The resumed agent's first request carries what came before the kill.
    let main = model.main_requests();
    let resumed = &main[before];
    let text = resumed["messages"].to_string();
    assert!(
        text.contains("Write one.txt, then wait"),
        "the task: {text}"
    );
    assert!(
        text.contains("git commit -q -m one"),
        "the earlier tool call: {text}"
    );
    assert!(
        text.contains("Your session was interrupted"),
        "the resume prompt: {text}"
    );
    let done = node_event(&events, "node.done");
    assert_eq!(done["data"]["message"], json!("resumed and done"));
}

#[test]
#[ignore = "needs the real Claude Code CLI: set OCTL_TEST_CLAUDE_BIN or npm-install it under .ci/node (see .ci/run)"]
fn with_the_daemon_down_the_hooks_leave_the_agent_working() {
    let claude = require_claude();
    let model = ModelStandIn::start(vec![
        Step::bash("until [ -e \"$OCTL_WORKTREE.go\" ]; do sleep 0.1; done"),
        Step::bash("printf 'two\\n' > two.txt"),
        Step::bash("printf 'three\\n' > three.txt"),
        Step::text("Wrote them."),
    ]);
    let (env, repo) = claude_world(&claude, &model, true, ALL_BASH);
    let d = env.start_daemon();
    let run = env.cli_spawn(&repo, &["spinoff", "Write two files", "--node", "w"]);
    let node = env.wait_node(&run, "w", "running");
    let worktree = node["worktree"].as_str().unwrap().to_string();
    model.wait_main_requests(1, std::time::Duration::from_secs(60));
    d.signal_and_wait(libc::SIGTERM);
    std::fs::write(format!("{worktree}.go"), "").unwrap();
    // Every tool call after this runs its hooks against a daemon that is gone.
    octl_tests::wait_until(
        "the agent to go on without the daemon",
        std::time::Duration::from_secs(60),
        || {
            (std::path::Path::new(&worktree).join("three.txt").exists()
                && model.main_requests().len() >= 4)
                .then_some(())
        },
    );
    assert!(
        env.try_rpc("daemon.status", json!({})).is_err(),
        "no hook started the daemon"
    );
    // Back up, the daemon sees the agent's end.
    let _d = env.start_daemon();
    let n = env.wait_node(&run, "w", "exited");
    assert_eq!(n["state"], json!("exited"));
}
