//! The bundled skills in a user's own Claude Code session (the real CLI against the scripted
//! model stand-in, the real daemon): they run their `orchestratectl` calls without asking,
//! because each declares them in `allowed-tools`; and they install offline as a Claude Code
//! plugin from a local marketplace. `#[ignore]`d: they need the CLI (`-- --ignored`).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use octl_tests::model::{
    apply_claude_env, require_claude, run_with_timeout, seed_claude_config, stream_json_result,
    Finished, ModelStandIn, Step,
};
use octl_tests::{bin, TestEnv, TestRepo};
use serde_json::{json, Value};

const CLAUDE_TIMEOUT: Duration = Duration::from_secs(120);

/// What the model answers to `/worktree-spinoff`: the skill's own spawn command (a shell agent,
/// so no second Claude is needed), then a last word.
fn spinoff_script() -> Vec<Step> {
    vec![
        Step::bash(
            "orchestratectl --json spawn spinoff --agent shell --node typo \"$(cat <<'TASK'\nprintf 'fixed\\n' > typo.txt\nTASK\n)\"",
        ),
        Step::text("Spawned the agent."),
    ]
}

/// `claude <args>` as a user would run it in `repo`: the default permission mode, no tools
/// granted on the command line; orchestratectl on PATH, the test's home for everything.
fn claude_in(env: &TestEnv, repo: &Path, model: &ModelStandIn, args: &[&str]) -> Finished {
    let claude = require_claude();
    let mut cmd = Command::new(&claude);
    cmd.args(args)
        .current_dir(repo)
        .stdin(std::process::Stdio::null());
    env.isolate(&mut cmd);
    apply_claude_env(&mut cmd, &model.url(), &env.user_home, &env.claude_dir);
    let dir = bin("orchestratectl").parent().unwrap().to_path_buf();
    cmd.env(
        "PATH",
        format!(
            "{}:{}",
            dir.display(),
            std::env::var("PATH").unwrap_or_default()
        ),
    );
    run_with_timeout(&mut cmd, CLAUDE_TIMEOUT).unwrap_or_else(|e| panic!("{e}"))
}

fn print(prompt: &str) -> Vec<&str> {
    vec![
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--",
        prompt,
    ]
}

fn result_of(out: &Finished) -> Value {
    assert!(
        out.status.success(),
        "claude failed ({}):\n{}\n{}",
        out.status,
        out.stdout,
        out.stderr
    );
    stream_json_result(&out.stdout).expect("a result line")
}

fn world() -> (TestEnv, TestRepo) {
    let env = TestEnv::new();
    let repo = TestRepo::new(&env, "repo");
    seed_claude_config(&env.claude_dir, &[repo.path.as_path()]);
    (env, repo)
}

#[test]
#[ignore = "needs the real Claude Code CLI: set OCTL_TEST_CLAUDE_BIN or npm-install it under .ci/node (see .ci/run)"]
fn worktree_spinoff_runs_its_orchestratectl_call_unasked() {
    let (env, repo) = world();
    let _d = env.start_daemon();
    env.cli(["skill", "install"]).ok();
    let skill_file = env.claude_dir.join("skills/worktree-spinoff/SKILL.md");
    let skill = std::fs::read_to_string(&skill_file).unwrap();
    assert!(
        skill.contains("\nallowed-tools: Bash(orchestratectl *)"),
        "{skill}"
    );

    // Without the declaration Claude Code stops to ask, which in a session nobody watches
    // means the call never runs: that is what the declaration is for.
    let undeclared: String = skill
        .lines()
        .filter(|l| !l.starts_with("allowed-tools:"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&skill_file, undeclared).unwrap();
    let model = ModelStandIn::start(spinoff_script());
    let result = result_of(&claude_in(
        &env,
        &repo.path,
        &model,
        &print("/worktree-spinoff fix the typo"),
    ));
    assert_ne!(result["permission_denials"], json!([]), "{result}");
    let fed_back = model.main_requests()[1]["messages"].to_string();
    assert!(fed_back.contains("requires approval"), "{fed_back}");
    assert_eq!(
        env.rpc("run.list", json!({})),
        json!([]),
        "nothing was spawned"
    );

    // As bundled: the call runs, the spinoff is created and merges.
    std::fs::write(&skill_file, &skill).unwrap();
    let model = ModelStandIn::start(spinoff_script());
    let result = result_of(&claude_in(
        &env,
        &repo.path,
        &model,
        &print("/worktree-spinoff fix the typo"),
    ));
    assert_eq!(result["permission_denials"], json!([]), "{result}");
    assert_eq!(result["result"], json!("Spawned the agent."), "{result}");
    let runs = env.rpc("run.list", json!({}));
    assert_eq!(runs.as_array().unwrap().len(), 1, "{runs}");
    let run = runs[0]["id"].as_str().unwrap();
    let show = env.wait_status(run, &["completed", "failed", "waiting"]);
    assert_eq!(show["manifest"]["status"], json!("completed"), "{show}");
    assert_eq!(repo.show("main", "typo.txt").as_deref(), Some("fixed\n"));
    // The skill's body reached the model with the task in it.
    let first = model.main_requests()[0].to_string();
    assert!(
        first.contains("fire and forget") && first.contains("fix the typo"),
        "{first}"
    );
}

/// `claude <args>` for the `plugin` subcommands, in the test's Claude config; its stdout.
fn claude_plugin(env: &TestEnv, model: &ModelStandIn, args: &[&str]) -> String {
    let out = claude_in(env, env.root.path(), model, args);
    assert!(
        out.status.success(),
        "claude {args:?} failed ({}):\n{}\n{}",
        out.status,
        out.stdout,
        out.stderr
    );
    out.stdout
}

#[test]
#[ignore = "needs the real Claude Code CLI: set OCTL_TEST_CLAUDE_BIN or npm-install it under .ci/node (see .ci/run)"]
fn the_skills_install_offline_as_a_plugin_and_run_as_its_commands() {
    let (env, repo) = world();
    let _d = env.start_daemon();
    let dir = env.root.path().join("plugin");
    let out = env.cli([
        "--json",
        "skill",
        "install",
        "--plugin",
        "--dir",
        dir.to_str().unwrap(),
    ]);
    out.ok();
    assert_eq!(
        out.json()["skills"]["installed"].as_array().unwrap().len(),
        13
    );
    let dir = dir.to_str().unwrap();
    let model = ModelStandIn::start(vec![Step::text("unused")]);
    let validated = claude_plugin(&env, &model, &["plugin", "validate", dir]);
    assert!(validated.contains("Validation passed"), "{validated}");
    claude_plugin(&env, &model, &["plugin", "marketplace", "add", dir]);
    claude_plugin(
        &env,
        &model,
        &["plugin", "install", "orchestratectl@orchestratectl"],
    );
    let listed: Value =
        serde_json::from_str(&claude_plugin(&env, &model, &["plugin", "list", "--json"])).unwrap();
    assert_eq!(
        listed[0]["id"],
        json!("orchestratectl@orchestratectl"),
        "{listed}"
    );
    assert_eq!(listed[0]["enabled"], json!(true), "{listed}");
    assert_eq!(
        listed[0]["version"],
        json!(env!("CARGO_PKG_VERSION")),
        "{listed}"
    );
    let details = claude_plugin(
        &env,
        &model,
        &["plugin", "details", "orchestratectl@orchestratectl"],
    );
    assert!(details.contains("Skills (13)"), "{details}");
    for name in [
        "worktree-spinoff",
        "fan-out",
        "orchestrate",
        "worktree-merge",
    ] {
        assert!(details.contains(name), "{name}: {details}");
    }
    // Not installed as loose skills: only the plugin provides the command, and it runs its
    // orchestratectl call unasked.
    assert!(!env.claude_dir.join("skills/worktree-spinoff").exists());
    let model = ModelStandIn::start(spinoff_script());
    let result = result_of(&claude_in(
        &env,
        &repo.path,
        &model,
        &print("/orchestratectl:worktree-spinoff fix the typo"),
    ));
    assert_eq!(result["permission_denials"], json!([]), "{result}");
    let first = model.main_requests()[0].to_string();
    assert!(
        first.contains("fire and forget") && first.contains("fix the typo"),
        "{first}"
    );
    let runs = env.rpc("run.list", json!({}));
    let run = runs[0]["id"].as_str().unwrap();
    let show = env.wait_status(run, &["completed", "failed", "waiting"]);
    assert_eq!(show["manifest"]["status"], json!("completed"), "{show}");
    assert_eq!(repo.show("main", "typo.txt").as_deref(), Some("fixed\n"));
}
