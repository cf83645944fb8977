//! An autonomous Codex's approval requests (docs/AGENTS.md, "Permission requests"): the real
//! Codex 0.169 in `codex exec`, against the harness's scripted stand-in for the Responses API
//! (`tests/src/model.rs`), asks to run a command outside its sandbox (`sandbox_permissions:
//! require_escalated`); its `PermissionRequest` hook, which octld's `-c` flags give it, records
//! the request and waits for a person's `node allow|deny`, and Codex does as they said.
//! `#[ignore]`d: they need the pinned Codex (`OCTL_TEST_CODEX_BIN`, or `.ci/node`, see
//! `.ci/run`); run them with `cargo test -p octl-tests --test codex_permissions -- --ignored`.

use std::time::Duration;

use octl_tests::model::{codex_world, ModelStandIn, Step, CODEX_ESCALATED};
use octl_tests::{TestEnv, TestRepo};
use serde_json::json;

/// Codex's sandbox keeps the git directory read-only (a linked worktree's is in the main
/// repository): only outside it does this commit succeed.
const COMMIT: &str = "printf 'written by codex\\n' > codex.txt && git add codex.txt && git commit -q -m 'codex: add codex.txt'";
const WHY: &str = "git writes the repository's git directory";

fn spinoff(env: &TestEnv, repo: &TestRepo) -> String {
    let out = env.cli_with(
        [
            "--json",
            "spawn",
            "spinoff",
            "Add a file named codex.txt",
            "--node",
            "writer",
            "--agent",
            "codex",
        ],
        |c| {
            c.current_dir(&repo.path);
        },
    );
    out.ok();
    out.json()["id"].as_str().unwrap().to_string()
}

fn raw_log(env: &TestEnv, run: &str) -> String {
    std::fs::read_to_string(env.run_dir(run).join("logs/writer.log")).unwrap_or_default()
}

/// What the shell calls returned to the model, as the last request carried them.
fn call_outputs(model: &ModelStandIn) -> Vec<String> {
    let requests = model.main_requests();
    requests.last().unwrap()["input"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == json!("function_call_output"))
        .map(|i| i["output"].to_string())
        .collect()
}

/// The request as Codex asked it: Claude Code's shape (`Bash`, `command`), its reason as
/// `description`; the node needs permission meanwhile.
fn assert_asked_to_commit(env: &TestEnv, run: &str) {
    let asked = env.wait_permission_asked(run, "p1");
    assert_eq!(asked["actor"], json!("agent"), "{asked}");
    assert_eq!(asked["data"]["tool"], json!("Bash"), "{asked}");
    assert_eq!(asked["data"]["input"]["command"], json!(COMMIT), "{asked}");
    assert_eq!(asked["data"]["input"]["description"], json!(WHY), "{asked}");
    let node = env.rpc("run.show", json!({"run": run}))["nodes"][0].clone();
    assert_eq!(
        node["activity"]["state"],
        json!("needs_permission"),
        "{node}"
    );
}

#[test]
#[ignore = "needs the pinned Codex CLI: set OCTL_TEST_CODEX_BIN or npm-install it under .ci/node (see .ci/run)"]
fn codex_allowed_by_a_person_commits_outside_its_sandbox_and_the_run_merges() {
    let model = ModelStandIn::start(vec![
        Step::bash_described(COMMIT, format!("{CODEX_ESCALATED}{WHY}")),
        Step::text("Added codex.txt."),
    ]);
    let (env, repo) = codex_world(&model, "");
    let _d = env.start_daemon();
    let run = spinoff(&env, &repo);
    assert_asked_to_commit(&env, &run);
    // Nothing ran before the decision: the model still waits for the call's output.
    assert_eq!(model.main_requests().len(), 1, "{:?}", model.log());
    let out = env.cli(["node", "allow", &run, "--node", "writer"]);
    assert_eq!(out.code, 0, "{out:?}");
    let show = env.wait_status(&run, &["completed", "failed", "waiting"]);
    assert_eq!(
        show["manifest"]["status"],
        json!("completed"),
        "{show}\nlog: {}",
        raw_log(&env, &run)
    );
    assert_eq!(
        repo.show("main", "codex.txt").as_deref(),
        Some("written by codex\n")
    );
    // Its own commit: it ran outside the sandbox, as the person allowed.
    let subjects = std::process::Command::new("git")
        .args(["log", "--format=%s", "main"])
        .current_dir(&repo.path)
        .output()
        .unwrap();
    let subjects = String::from_utf8_lossy(&subjects.stdout).into_owned();
    assert!(
        subjects.lines().any(|s| s == "codex: add codex.txt"),
        "{subjects}"
    );
    let outputs = call_outputs(&model);
    assert!(
        outputs.len() == 1 && outputs[0].contains("exited with code 0"),
        "{outputs:?}"
    );
    let decided = env
        .log_events(&run)
        .into_iter()
        .find(|e| e["type"] == json!("node.permission_decided"))
        .unwrap();
    assert_eq!(decided["data"]["behavior"], json!("allow"), "{decided}");
    assert_eq!(decided["data"]["by"], json!("human"), "{decided}");
}

#[test]
#[ignore = "needs the pinned Codex CLI: set OCTL_TEST_CODEX_BIN or npm-install it under .ci/node (see .ci/run)"]
fn codex_denied_by_a_person_is_told_the_reason_and_runs_nothing() {
    let model = ModelStandIn::start(vec![
        Step::bash_described(COMMIT, format!("{CODEX_ESCALATED}{WHY}")),
        Step::text("I was not allowed to commit."),
    ]);
    let (env, repo) = codex_world(&model, "");
    let _d = env.start_daemon();
    let run = spinoff(&env, &repo);
    assert_asked_to_commit(&env, &run);
    let out = env.cli([
        "node",
        "deny",
        &run,
        "--node",
        "writer",
        "--reason",
        "the daemon commits for you",
    ]);
    assert_eq!(out.code, 0, "{out:?}");
    model.wait_main_requests(2, Duration::from_secs(60));
    let outputs = call_outputs(&model);
    assert!(
        outputs.len() == 1
            && outputs[0].contains(
                "Permission denied by a person, through orchestratectl: the daemon commits for you"
            ),
        "the model is told the reason: {outputs:?}"
    );
    let show = env.wait_status(&run, &["completed", "failed", "waiting"]);
    let branch = format!("octl/{run}/writer");
    assert_eq!(
        repo.show(&branch, "codex.txt"),
        None,
        "the command never ran: {show}\nlog: {}",
        raw_log(&env, &run)
    );
    assert_eq!(repo.show("main", "codex.txt"), None);
}
