//! The real agent CLIs in the bubblewrap sandbox (docs/SECURITY.md), each against its
//! scripted model stand-in on 127.0.0.1, whose port alone `[sandbox] allow` lets through:
//! each starts in its private home with its configuration copied, edits and commits in its
//! worktree, reports through its node's socket, and its run merges. `#[ignore]`d: they need
//! the pinned CLIs (`.ci/run` installs them).

use octl_tests::model::{claude_world, codex_world, require_claude, ModelStandIn, Step};
use octl_tests::{TestEnv, TestRepo};
use serde_json::{json, Value};

/// `[sandbox]`: bwrap for every agent, the network of its own, the stand-in's port allowed.
fn sandbox_config(model: &ModelStandIn) -> String {
    format!(
        "[sandbox]\nkind = \"bwrap\"\nnetwork = \"allow\"\nallow = [\"127.0.0.1:{}\"]\n",
        model.addr().port()
    )
}

fn run_log(env: &TestEnv, run: &str, node: &str) -> String {
    std::fs::read_to_string(env.run_dir(run).join(format!("logs/{node}.log"))).unwrap_or_default()
}

/// The run completed with `file` holding `text` on main, and the agent's model was never
/// refused.
fn assert_merged(env: &TestEnv, repo: &TestRepo, run: &str, node: &str, file: &str, text: &str) {
    let show = env.wait_status(run, &["completed", "failed", "waiting"]);
    assert_eq!(
        show["manifest"]["status"],
        json!("completed"),
        "{show}\nlog: {}",
        run_log(env, run, node)
    );
    assert_eq!(repo.show("main", file).as_deref(), Some(text));
    // Whatever else it tried to reach (Codex asks for updates) was refused and counted; its
    // model never was.
    let refused: Vec<Value> = env
        .log_events(run)
        .into_iter()
        .filter(|e| e["type"] == json!("node.network_refused"))
        .map(|e| e["data"]["target"].clone())
        .collect();
    assert!(
        refused
            .iter()
            .all(|t| !t.as_str().unwrap_or("").starts_with("127.0.0.1:")),
        "{refused:?}"
    );
}

#[test]
#[ignore = "needs the real Claude Code CLI: set OCTL_TEST_CLAUDE_BIN or npm-install it under .ci/node (see .ci/run)"]
fn claude_code_in_the_sandbox_reaches_its_model_commits_reports_and_merges() {
    let claude = require_claude();
    let model = ModelStandIn::start(vec![
        // What it sees: the sandbox's host name, and no user home but its own.
        Step::bash("printf '%s\\n' \"$(hostname)\" > claude.txt && ls ~ > /dev/null"),
        Step::bash("git add claude.txt && git commit -q -m 'claude: add claude.txt'"),
        Step::bash("orchestratectl node done --message 'added claude.txt'"),
        Step::text("All done."),
    ]);
    // In its sandbox it may run any command without asking.
    let config = format!("allowed_tools = [\"Bash\"]\n{}", sandbox_config(&model));
    let (env, repo) = claude_world(&claude, &model, true, &config);
    let _d = env.start_daemon();
    let run = env.cli_spawn(
        &repo,
        &["spinoff", "Add a file named claude.txt", "--node", "writer"],
    );
    assert_merged(&env, &repo, &run, "writer", "claude.txt", "octl-sandbox\n");
    let events = env.log_events(&run);
    let done = events
        .iter()
        .find(|e| e["type"] == json!("node.done"))
        .unwrap();
    assert_eq!(done["data"]["message"], json!("added claude.txt"), "{done}");
    // Its hooks reached the daemon through the node's socket: its activity is recorded.
    assert!(
        events.iter().any(|e| e["type"] == json!("node.activity")),
        "{events:?}"
    );
}

#[test]
#[ignore = "needs the pinned Codex CLI: set OCTL_TEST_CODEX_BIN or npm-install it under .ci/node (see .ci/run)"]
fn codex_in_the_sandbox_reaches_its_model_runs_its_commands_and_merges() {
    let model = ModelStandIn::start(vec![
        Step::bash("printf '%s\\n' \"$(hostname)\" > codex.txt"),
        Step::text("Added codex.txt."),
    ]);
    let (env, repo) = codex_world(&model, &sandbox_config(&model));
    let _d = env.start_daemon();
    let run = env.cli_spawn(
        &repo,
        &[
            "spinoff",
            "Add a file named codex.txt",
            "--agent",
            "codex",
            "--node",
            "writer",
        ],
    );
    assert_merged(&env, &repo, &run, "writer", "codex.txt", "octl-sandbox\n");
}
