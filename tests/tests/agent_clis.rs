//! The real Codex, Gemini CLI, opencode and aider as agents (the built-in profiles), each in
//! its tmux window against the harness's scripted stand-in for the model API it speaks
//! (`tests/src/model.rs`): autonomous spinoffs (with the activity their streams show), `code`
//! runs of the interactive ones in tmux, and opencode with no network. `#[ignore]`d: they
//! need the CLIs, pinned in `.ci/run` (npm ones under `.ci/node`, aider in the venv
//! `.ci/aider`), and root for the network namespace; run them with
//! `cargo test -p octl-tests -- --ignored`.

use octl_tests::model::{codex_world, require_agent_cli, ModelStandIn, Step, CODEX_ESCALATED};
use octl_tests::{TestEnv, TestRepo};
use serde_json::{json, Value};

/// A world whose `gemini` profile runs the pinned Gemini CLI against `model` (the Gemini API).
fn gemini_world(model: &ModelStandIn) -> (TestEnv, TestRepo) {
    gemini_world_with(model, &[])
}

/// [`gemini_world`] with `extra` args for the profile.
fn gemini_world_with(model: &ModelStandIn, extra: &[&str]) -> (TestEnv, TestRepo) {
    let gemini = require_agent_cli("gemini");
    let mut env = TestEnv::new();
    // Without a chosen auth method it says "Invalid auth method selected" and exits 0.
    let settings = env.user_home.join(".gemini");
    std::fs::create_dir_all(&settings).unwrap();
    std::fs::write(
        settings.join("settings.json"),
        r#"{"security":{"auth":{"selectedType":"gemini-api-key"}},"general":{"disableAutoUpdate":true},"privacy":{"usageStatisticsEnabled":false}}"#,
    )
    .unwrap();
    env.set_env("GEMINI_API_KEY", "test");
    env.set_env("GOOGLE_GEMINI_BASE_URL", &model.url());
    env.set_env("GEMINI_CLI_TRUST_WORKSPACE", "true");
    let repo = TestRepo::new(&env, "repo");
    std::fs::create_dir_all(&env.home).unwrap();
    std::fs::write(
        env.home.join("config.toml"),
        format!(
            "[agents.gemini]\nprogram = {:?}\nargs = {}\n",
            gemini.display().to_string(),
            serde_json::to_string(&[&["-m", "gemini-2.5-flash"], extra].concat()).unwrap()
        ),
    )
    .unwrap();
    (env, repo)
}

/// A world whose `opencode` profile runs the pinned opencode against `model` (Chat
/// Completions, through its `@ai-sdk/openai-compatible` provider).
fn opencode_world(model: &ModelStandIn) -> (TestEnv, TestRepo) {
    let (mut env, repo) = opencode_world_as_is(model);
    // Its model list from models.opencode.ai: waited for at start, and slow or hanging on a
    // slow network (over 60 s seen here, where offline it fails at once). The offline test
    // keeps it on.
    env.set_env("OPENCODE_DISABLE_MODELS_FETCH", "1");
    (env, repo)
}

/// [`opencode_world`] with opencode's own defaults (it fetches its model list).
fn opencode_world_as_is(model: &ModelStandIn) -> (TestEnv, TestRepo) {
    let opencode = require_agent_cli("opencode");
    let mut env = TestEnv::new();
    let config = env.user_home.join("opencode.json");
    std::fs::write(
        &config,
        json!({"$schema": "https://opencode.ai/config.json", "autoupdate": false, "share": "disabled",
               "provider": {"local": {"npm": "@ai-sdk/openai-compatible", "name": "local",
                 "options": {"baseURL": format!("{}/v1", model.url()), "apiKey": "x"},
                 "models": {"m1": {"name": "m1"}}}}})
        .to_string(),
    )
    .unwrap();
    env.set_env("OPENCODE_CONFIG", &config.display().to_string());
    let repo = TestRepo::new(&env, "repo");
    std::fs::create_dir_all(&env.home).unwrap();
    std::fs::write(
        env.home.join("config.toml"),
        format!(
            "[agents.opencode]\nprogram = {:?}\nargs = [\"-m\", \"local/m1\"]\n",
            opencode.display().to_string()
        ),
    )
    .unwrap();
    (env, repo)
}

/// A world whose `aider` profile runs the pinned aider against `model` (Chat Completions,
/// through litellm), in its "whole" edit format: a reply names a file, then its content.
fn aider_world(model: &ModelStandIn) -> (TestEnv, TestRepo) {
    let aider = require_agent_cli("aider");
    let env = TestEnv::new();
    let repo = TestRepo::new(&env, "repo");
    std::fs::create_dir_all(&env.home).unwrap();
    let args = [
        "--model".to_string(),
        "openai/m1".to_string(),
        "--openai-api-base".to_string(),
        format!("{}/v1", model.url()),
        "--openai-api-key".to_string(),
        "x".to_string(),
        "--edit-format".to_string(),
        "whole".to_string(),
    ];
    std::fs::write(
        env.home.join("config.toml"),
        format!(
            "[agents.aider]\nprogram = {:?}\nargs = {}\n",
            aider.display().to_string(),
            serde_json::to_string(&args).unwrap()
        ),
    )
    .unwrap();
    (env, repo)
}

fn spinoff(env: &TestEnv, repo: &TestRepo, agent: &str, task: &str) -> String {
    let out = env.cli_with(
        [
            "--json", "spawn", "spinoff", task, "--node", "writer", "--agent", agent,
        ],
        |c| {
            c.current_dir(&repo.path);
        },
    );
    out.ok();
    out.json()["id"].as_str().unwrap().to_string()
}

/// A `code` run of `agent`: its CLI's own interface in the node's window.
fn code(env: &TestEnv, repo: &TestRepo, agent: &str, task: &str) -> String {
    let out = env.cli_with(
        [
            "--json", "spawn", "code", task, "--node", "ui", "--agent", agent,
        ],
        |c| {
            c.current_dir(&repo.path);
        },
    );
    out.ok();
    out.json()["id"].as_str().unwrap().to_string()
}

/// The node of a `code` run once it is no longer live, or a panic with its screen.
fn wait_node_ended(env: &TestEnv, run: &str, model: &ModelStandIn) -> Value {
    let screen = || {
        let out = std::process::Command::new("tmux")
            .arg("-S")
            .arg(env.home.join("tmux.sock"))
            .args(["capture-pane", "-p", "-t", &format!("{run}:ui")])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // opencode's TUI takes ~45 s to start on a busy machine.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(180);
    loop {
        let show = env.rpc("run.show", json!({"run": run}));
        let node = show["nodes"][0].clone();
        if !["starting", "running", "waiting"].contains(&node["state"].as_str().unwrap_or("")) {
            return node;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still live: {node}\nscreen:\n{}\nrequests: {:?}",
            screen(),
            model
                .log()
                .iter()
                .map(|r| (&r.path, r.status))
                .collect::<Vec<_>>()
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

fn node_event<'a>(events: &'a [Value], kind: &str) -> &'a Value {
    events
        .iter()
        .find(|e| e["type"] == json!(kind))
        .unwrap_or_else(|| panic!("no {kind} in {events:?}"))
}

/// The node's `node.activity` events in order, as (state, detail), each after the one before
/// it and before the node's end.
fn activities(events: &[Value]) -> Vec<(String, String)> {
    let said: Vec<(String, String)> = events
        .iter()
        .filter(|e| e["type"] == json!("node.activity"))
        .map(|e| {
            assert_eq!(e["actor"], json!("agent"), "{e}");
            (
                e["data"]["state"].as_str().unwrap().to_string(),
                e["data"]["detail"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert!(
        said.windows(2).all(|w| w[0] != w[1]),
        "recorded only on change: {said:?}"
    );
    let last_activity = events
        .iter()
        .rposition(|e| e["type"] == json!("node.activity"));
    let end = events
        .iter()
        .position(|e| e["type"] == json!("node.done") || e["type"] == json!("node.failed"));
    assert!(
        last_activity < end,
        "the activity comes before the node's end: {events:?}"
    );
    said
}

/// The agent was seen working with a tool whose detail contains `tool`, then ended idle.
fn assert_worked_then_idle(events: &[Value], tool: &str) {
    let said = activities(events);
    let worked = said
        .iter()
        .position(|(s, d)| s == "working" && d.contains(tool))
        .unwrap_or_else(|| panic!("no working with {tool:?} in {said:?}"));
    assert_eq!(
        said.last().map(|(s, _)| s.as_str()),
        Some("idle"),
        "idle at the end: {said:?}"
    );
    assert!(worked < said.len() - 1, "{said:?}");
}

fn raw_log(env: &TestEnv, run: &str) -> String {
    std::fs::read_to_string(env.run_dir(run).join("logs/writer.log")).unwrap_or_default()
}

#[test]
#[ignore = "needs the pinned Codex CLI: set OCTL_TEST_CODEX_BIN or npm-install it under .ci/node (see .ci/run)"]
fn codex_edits_a_file_the_daemon_commits_and_the_spinoff_merges() {
    let model = ModelStandIn::start(vec![
        Step::bash("printf 'written by codex\\n' > codex.txt"),
        Step::bash("git add codex.txt && git commit -q -m 'codex: add codex.txt'"),
        // Its sandbox keeps the git directory read-only: this commit fails, and the daemon
        // commits. Its shell is a login shell (PATH reset): $OCTL_CLI names the CLI, but the
        // socket's owner check refuses the sandboxed peer; it is judged by its stream.
        Step::bash("\"$OCTL_CLI\" node done --message 'added codex.txt'"),
        Step::text("Added codex.txt."),
    ]);
    let (env, repo) = codex_world(&model, "");
    let _d = env.start_daemon();
    let run = spinoff(&env, &repo, "codex", "Add a file named codex.txt");
    let show = env.wait_status(&run, &["completed", "failed", "waiting"]);
    assert_eq!(
        show["manifest"]["status"],
        json!("completed"),
        "{show}\nlog: {}\nrequests: {:?}",
        raw_log(&env, &run),
        model.log().iter().map(|r| &r.path).collect::<Vec<_>>()
    );
    assert_eq!(
        repo.show("main", "codex.txt").as_deref(),
        Some("written by codex\n")
    );
    let events = env.log_events(&run);
    let done = node_event(&events, "node.done");
    let outcome = &done["data"]["outcome"];
    assert_eq!(outcome["agent"], json!("codex"), "{done}");
    assert_worked_then_idle(&events, "shell: /bin/bash -lc \"printf 'written by codex");
    assert_eq!(outcome["is_error"], json!(false), "{done}");
    assert_eq!(outcome["result"], json!("Added codex.txt."), "{done}");
    assert!(outcome["output_tokens"].as_u64().unwrap() > 0, "{done}");
    assert!(
        done["data"]["commit"].is_string(),
        "the daemon committed: {done}"
    );
    // The prompt told the agent how to report.
    let first = model.requests()[0].to_string();
    assert!(first.contains("orchestratectl node done"), "{first}");
}

/// What the model's shell calls returned to it, as its last request carried them.
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

/// Codex runs each command in its Linux sandbox through bubblewrap; these tests are about a
/// machine that has one (`.ci/run` installs Debian's 0.8.0, whose lack of `--argv0` makes
/// Codex find its `codex-linux-sandbox` helper on PATH).
fn require_bwrap() {
    let found = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("bwrap").is_file()));
    assert!(
        found,
        "bubblewrap is missing: apt-get install bubblewrap (.ci/run does)"
    );
}

#[test]
#[ignore = "needs the pinned Codex CLI: set OCTL_TEST_CODEX_BIN or npm-install it under .ci/node (see .ci/run)"]
fn codex_runs_its_commands_under_bubblewrap_and_the_spinoff_merges() {
    require_bwrap();
    // Its CODEX_HOME is under /tmp, where Codex does not make its own helper links: the
    // daemon's are what bwrap finds (docs/AGENTS.md, the Codex section).
    let model = ModelStandIn::start(vec![
        Step::bash("printf 'written by codex\\n' > codex.txt && tr '\\0' ' ' < /proc/1/cmdline"),
        Step::text("Added codex.txt."),
    ]);
    let (env, repo) = codex_world(&model, "");
    let _d = env.start_daemon();
    let run = spinoff(&env, &repo, "codex", "Add a file named codex.txt");
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
    // The command ran in the sandbox: the first process of its namespace is Codex's helper.
    let outputs = call_outputs(&model);
    assert!(
        outputs.len() == 1
            && outputs[0].contains("exited with code 0")
            && outputs[0].contains("codex-linux-sandbox"),
        "{outputs:?}"
    );
}

#[test]
#[ignore = "needs the pinned Codex CLI: set OCTL_TEST_CODEX_BIN or npm-install it under .ci/node (see .ci/run)"]
fn a_codex_that_says_it_is_done_having_changed_nothing_while_its_commands_failed_has_failed() {
    let model = ModelStandIn::start(vec![
        // Fails without writing anything (a redirection would leave an empty file: a change).
        Step::bash("cp no-such-input.txt codex.txt"),
        Step::bash("ls"),
        Step::text("All steps done."),
    ]);
    let (env, repo) = codex_world(&model, "");
    let _d = env.start_daemon();
    let run = spinoff(&env, &repo, "codex", "Copy no-such-input.txt to codex.txt");
    let show = env.wait_status(&run, &["completed", "failed", "waiting"]);
    assert_eq!(
        show["manifest"]["status"],
        json!("failed"),
        "{show}\nlog: {}",
        raw_log(&env, &run)
    );
    let events = env.log_events(&run);
    let failed = node_event(&events, "node.failed");
    let reason = failed["data"]["reason"].as_str().unwrap_or_default();
    assert!(
        reason.starts_with(
            "the agent said it succeeded but changed nothing, and 1 of its 2 shell commands failed: `/bin/bash -lc"
        ) && reason.contains("cp no-such-input.txt codex.txt")
            && reason.contains("exited with status 1: cp: cannot stat 'no-such-input.txt': No such file or directory"),
        "{failed}\nlog: {}",
        raw_log(&env, &run)
    );
    // Its own words stay in the outcome; the worktree is kept for a look or a retry.
    assert_eq!(
        failed["data"]["outcome"]["result"],
        json!("All steps done.")
    );
    assert_eq!(failed["data"]["outcome"]["is_error"], json!(false));
    let node = &show["nodes"][0];
    assert_eq!(node["state"], json!("failed"), "{node}");
    let worktree = node["worktree"].as_str().unwrap();
    assert!(std::path::Path::new(worktree).is_dir(), "{node}");
    let text = env.cli(["run", "show", &run]);
    assert_eq!(text.code, 0, "{text:?}");
    assert!(
        text.stdout.contains("changed nothing") && text.stdout.contains("failed"),
        "{}",
        text.stdout
    );
}

#[test]
#[ignore = "needs the pinned Codex CLI: set OCTL_TEST_CODEX_BIN or npm-install it under .ci/node (see .ci/run)"]
fn a_failing_codex_is_recorded_as_failed_with_its_reason() {
    let model = ModelStandIn::start(vec![Step::Error("stand-in quota exceeded".into())]);
    let (env, repo) = codex_world(&model, "");
    let _d = env.start_daemon();
    let run = spinoff(&env, &repo, "codex", "Add a file named codex.txt");
    let show = env.wait_status(&run, &["completed", "failed", "waiting"]);
    assert_eq!(show["manifest"]["status"], json!("failed"), "{show}");
    let events = env.log_events(&run);
    let failed = node_event(&events, "node.failed");
    let said = activities(&events);
    assert!(
        said.last()
            .is_some_and(|(s, d)| s == "idle" && d.contains("quota exceeded")),
        "it ended idle, saying why: {said:?}"
    );
    let reason = failed["data"]["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("stand-in quota exceeded"),
        "the model's error is the reason: {failed}\nlog: {}",
        raw_log(&env, &run)
    );
    assert_eq!(failed["data"]["outcome"]["is_error"], json!(true));
}

#[test]
#[ignore = "needs the pinned Gemini CLI: set OCTL_TEST_GEMINI_BIN or npm-install it under .ci/node (see .ci/run)"]
fn gemini_edits_a_file_the_daemon_commits_and_the_spinoff_merges() {
    let model = ModelStandIn::start(vec![
        Step::bash("printf 'written by gemini\\n' > gemini.txt"),
        Step::bash("orchestratectl node done --message 'added gemini.txt'"),
        Step::text("Added gemini.txt."),
    ]);
    let (env, repo) = gemini_world(&model);
    let _d = env.start_daemon();
    let run = spinoff(&env, &repo, "gemini", "Add a file named gemini.txt");
    let show = env.wait_status(&run, &["completed", "failed", "waiting"]);
    assert_eq!(
        show["manifest"]["status"],
        json!("completed"),
        "{show}\nlog: {}\nrequests: {:?}",
        raw_log(&env, &run),
        model
            .log()
            .iter()
            .map(|r| (&r.path, r.status))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        repo.show("main", "gemini.txt").as_deref(),
        Some("written by gemini\n")
    );
    let events = env.log_events(&run);
    let done = node_event(&events, "node.done");
    let outcome = &done["data"]["outcome"];
    assert_eq!(outcome["agent"], json!("gemini"), "{done}");
    assert_worked_then_idle(&events, "run_shell_command: printf 'written by gemini");
    assert_eq!(
        done["data"]["message"],
        json!("added gemini.txt"),
        "it reported through its shell tool, as its prompt says: {done}"
    );
    assert_eq!(outcome["is_error"], json!(false), "{done}");
    assert!(
        done["data"]["commit"].is_string(),
        "the daemon committed: {done}"
    );
}

#[test]
#[ignore = "needs the pinned Gemini CLI: set OCTL_TEST_GEMINI_BIN or npm-install it under .ci/node (see .ci/run)"]
fn a_failing_gemini_is_recorded_as_failed_with_its_reason() {
    let model = ModelStandIn::start(vec![Step::Error("stand-in quota exceeded".into())]);
    let (env, repo) = gemini_world(&model);
    let _d = env.start_daemon();
    let run = spinoff(&env, &repo, "gemini", "Add a file named gemini.txt");
    let show = env.wait_status(&run, &["completed", "failed", "waiting"]);
    assert_eq!(show["manifest"]["status"], json!("failed"), "{show}");
    let events = env.log_events(&run);
    let failed = node_event(&events, "node.failed");
    let said = activities(&events);
    assert!(
        said.last()
            .is_some_and(|(s, d)| s == "idle" && d.contains("quota exceeded")),
        "it ended idle, saying why: {said:?}"
    );
    assert!(
        failed["data"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("quota exceeded")),
        "the model's error is the reason: {failed}\nlog: {}",
        raw_log(&env, &run)
    );
}

#[test]
#[ignore = "needs the pinned opencode: set OCTL_TEST_OPENCODE_BIN or npm-install it under .ci/node (see .ci/run)"]
fn opencode_edits_a_file_the_daemon_commits_and_the_spinoff_merges() {
    opencode_edits_a_file(opencode_world);
}

/// The same with no network at all: the stand-in, the daemon, tmux and opencode run in a
/// network namespace with only loopback, so nothing reaches past 127.0.0.1 — its provider
/// package (`@ai-sdk/openai-compatible`) is one it carries, fetched from nowhere.
#[test]
#[ignore = "needs the pinned opencode and root (a network namespace of its own; see .ci/run)"]
fn opencode_works_with_no_network_at_all() {
    octl_tests::netns::offline().expect("a network namespace with only loopback");
    assert_eq!(octl_tests::netns::interfaces(), ["lo"]);
    let env = opencode_edits_a_file(opencode_world_as_is);
    // It tried (its model list, models.opencode.ai, is logged as unreachable) and needed
    // nothing: no package was installed into its cache.
    let found = std::process::Command::new("find")
        .arg(&env.user_home)
        .args(["-name", "node_modules"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&found.stdout),
        "",
        "nothing fetched"
    );
}

/// The opencode spinoff test; its world, for a look at what opencode left in its home.
fn opencode_edits_a_file(world: fn(&ModelStandIn) -> (TestEnv, TestRepo)) -> TestEnv {
    let model = ModelStandIn::start(vec![
        Step::bash("printf 'written by opencode\\n' > opencode.txt"),
        Step::bash("orchestratectl node done --message 'added opencode.txt'"),
        Step::text("Added opencode.txt."),
    ]);
    let (env, repo) = world(&model);
    let _d = env.start_daemon();
    let run = spinoff(&env, &repo, "opencode", "Add a file named opencode.txt");
    let show = env.wait_status(&run, &["completed", "failed", "waiting"]);
    assert_eq!(
        show["manifest"]["status"],
        json!("completed"),
        "{show}\nlog: {}\nrequests: {:?}",
        raw_log(&env, &run),
        model
            .log()
            .iter()
            .map(|r| (&r.path, r.status))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        repo.show("main", "opencode.txt").as_deref(),
        Some("written by opencode\n")
    );
    let events = env.log_events(&run);
    let done = node_event(&events, "node.done");
    let outcome = &done["data"]["outcome"];
    assert_eq!(outcome["agent"], json!("opencode"), "{done}");
    assert_worked_then_idle(&events, "bash: printf 'written by opencode");
    assert_eq!(
        done["data"]["message"],
        json!("added opencode.txt"),
        "it reported through its shell tool, as its prompt says: {done}"
    );
    assert_eq!(outcome["is_error"], json!(false), "{done}");
    assert!(
        done["data"]["commit"].is_string(),
        "the daemon committed: {done}"
    );
    env
}

#[test]
#[ignore = "needs the pinned opencode: set OCTL_TEST_OPENCODE_BIN or npm-install it under .ci/node (see .ci/run)"]
fn a_failing_opencode_is_recorded_as_failed_with_its_reason() {
    let model = ModelStandIn::start(vec![Step::Error("stand-in quota exceeded".into())]);
    let (env, repo) = opencode_world(&model);
    let _d = env.start_daemon();
    let run = spinoff(&env, &repo, "opencode", "Add a file named opencode.txt");
    let show = env.wait_status(&run, &["completed", "failed", "waiting"]);
    assert_eq!(show["manifest"]["status"], json!("failed"), "{show}");
    let events = env.log_events(&run);
    let failed = node_event(&events, "node.failed");
    let said = activities(&events);
    assert!(
        said.last()
            .is_some_and(|(s, d)| s == "idle" && d.contains("quota exceeded")),
        "it ended idle, saying why: {said:?}"
    );
    assert!(
        failed["data"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("quota exceeded")),
        "the model's error is the reason: {failed}\nlog: {}",
        raw_log(&env, &run)
    );
}

#[test]
#[ignore = "needs the pinned aider: set OCTL_TEST_AIDER_BIN or pip-install it into .ci/aider (see .ci/run)"]
fn aider_edits_a_file_the_daemon_commits_and_the_spinoff_merges() {
    let model = ModelStandIn::start(vec![Step::text("aider.txt\n```\nwritten by aider\n```\n")]);
    let (env, repo) = aider_world(&model);
    let _d = env.start_daemon();
    let run = spinoff(&env, &repo, "aider", "Add a file named aider.txt");
    let show = env.wait_status(&run, &["completed", "failed", "waiting"]);
    assert_eq!(
        show["manifest"]["status"],
        json!("completed"),
        "{show}\nlog: {}\nrequests: {:?}",
        raw_log(&env, &run),
        model
            .log()
            .iter()
            .map(|r| (&r.path, r.status))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        repo.show("main", "aider.txt").as_deref(),
        Some("written by aider\n")
    );
    let events = env.log_events(&run);
    let done = node_event(&events, "node.done");
    let outcome = &done["data"]["outcome"];
    assert_eq!(outcome["agent"], json!("aider"), "{done}");
    // aider --message replies once, applies its edits and exits: its end is its exit.
    let said = activities(&events);
    assert_eq!(
        said.last(),
        Some(&("working".to_string(), "edit: aider.txt".to_string())),
        "{said:?}"
    );
    let tree = std::process::Command::new("git")
        .args(["ls-tree", "-r", "--name-only", "main"])
        .current_dir(&repo.path)
        .output()
        .unwrap();
    let tree = String::from_utf8_lossy(&tree.stdout);
    assert!(
        !tree
            .lines()
            .any(|f| f.starts_with(".aider") || f == ".gitignore"),
        "aider left none of its own files in the work: {tree}"
    );
    assert_eq!(outcome["is_error"], json!(false), "{done}");
    assert!(
        done["data"]["commit"].is_string(),
        "the daemon committed: {done}"
    );
}

#[test]
#[ignore = "needs the pinned aider: set OCTL_TEST_AIDER_BIN or pip-install it into .ci/aider (see .ci/run)"]
fn a_failing_aider_is_recorded_as_failed_with_its_reason() {
    let model = ModelStandIn::start(vec![Step::Error("stand-in quota exceeded".into())]);
    let (env, repo) = aider_world(&model);
    let _d = env.start_daemon();
    let run = spinoff(&env, &repo, "aider", "Add a file named aider.txt");
    let show = env.wait_status(&run, &["completed", "failed", "waiting"]);
    assert_eq!(
        show["manifest"]["status"],
        json!("failed"),
        "{show}\nlog: {}\nrequests: {:?}",
        raw_log(&env, &run),
        model.log()
    );
    let events = env.log_events(&run);
    let failed = node_event(&events, "node.failed");
    let said = activities(&events);
    assert!(
        said.last()
            .is_some_and(|(s, d)| s == "idle" && d.contains("quota exceeded")),
        "it ended idle, saying why: {said:?}"
    );
    assert!(
        failed["data"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("quota exceeded")),
        "the model's error is the reason, though aider exits 0: {failed}\nlog: {}",
        raw_log(&env, &run)
    );
}

#[test]
#[ignore = "needs the pinned Codex, Gemini CLI, opencode and aider (see .ci/run)"]
fn doctor_shows_each_agent_clis_program_version_and_usability() {
    let env = TestEnv::new();
    std::fs::create_dir_all(&env.home).unwrap();
    let mut config = String::new();
    for name in ["codex", "gemini", "opencode", "aider"] {
        let bin = require_agent_cli(name);
        config.push_str(&format!(
            "[agents.{name}]\nprogram = {:?}\n",
            bin.display().to_string()
        ));
    }
    config.push_str("[agents.mine]\nautonomous = [\"/nonexistent/my-agent\", \"{prompt}\"]\n");
    std::fs::write(env.home.join("config.toml"), config).unwrap();
    let _d = env.start_daemon();
    let out = env.cli(["--json", "doctor"]);
    let agents = out.json()["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == json!("agents"))
        .cloned()
        .unwrap();
    let detail = |name: &str| {
        agents["details"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["profile"] == json!(name))
            .cloned()
            .unwrap_or_else(|| panic!("no {name} in {agents}"))
    };
    for (name, version) in [
        ("codex", "codex-cli 0.169.0"),
        ("gemini", "0.61.0"),
        ("opencode", "1.18.33"),
        ("aider", "aider 0.86.2"),
    ] {
        let d = detail(name);
        assert_eq!(d["version"], json!(version), "{d}");
        assert_eq!(d["usable"], json!(true), "{d}");
        assert_eq!(d["builtin"], json!(true), "{d}");
    }
    let mine = detail("mine");
    assert_eq!(mine["usable"], json!(false), "{mine}");
    assert!(
        agents["message"].as_str().unwrap().contains("codex: "),
        "{agents}"
    );
}

/// The stand-in plays a person's agent in `code`: it writes and commits a file, then reports
/// done through its shell tool, as the appended instructions say; the run merges.
fn interactive_script(agent: &str) -> Vec<Step> {
    vec![
        Step::bash(format!(
            "printf 'written by {agent}\\n' > {agent}.txt && git add {agent}.txt && git commit -q -m '{agent}: add {agent}.txt'"
        )),
        Step::bash(format!(
            "orchestratectl node done --message 'added {agent}.txt'"
        )),
        Step::text(format!("Added {agent}.txt.")),
    ]
}

fn assert_interactive_merges(env: &TestEnv, repo: &TestRepo, run: &str, node: &Value, agent: &str) {
    assert_eq!(node["state"], json!("done"), "{node}");
    let events = env.log_events(run);
    let done = node_event(&events, "node.done");
    assert_eq!(done["actor"], json!("agent"), "it reported itself: {done}");
    assert_eq!(
        done["data"]["message"],
        json!(format!("added {agent}.txt")),
        "{done}"
    );
    env.cli(["merge", run]).ok();
    assert_eq!(
        repo.show("main", &format!("{agent}.txt")).as_deref(),
        Some(format!("written by {agent}\n").as_str())
    );
    env.wait_status(run, &["completed"]);
}

#[test]
#[ignore = "needs the pinned Gemini CLI: set OCTL_TEST_GEMINI_BIN or npm-install it under .ci/node (see .ci/run)"]
fn an_interactive_gemini_commits_reports_done_from_its_window_and_merges() {
    let model = ModelStandIn::start(interactive_script("gemini"));
    // Its shell runs git and orchestratectl without asking (the profile's); printf too here.
    let (env, repo) = gemini_world_with(&model, &["--allowed-tools=run_shell_command(printf)"]);
    let _d = env.start_daemon();
    let run = code(&env, &repo, "gemini", "Add a file named gemini.txt");
    let node = wait_node_ended(&env, &run, &model);
    let first = model.main_requests()[0].to_string();
    assert!(first.contains("a person watches this session"), "{first}");
    assert_interactive_merges(&env, &repo, &run, &node, "gemini");
}

#[test]
#[ignore = "needs the pinned opencode and root (a network namespace of its own; see .ci/run)"]
fn an_interactive_opencode_commits_reports_done_from_its_window_and_merges() {
    // Offline too: its TUI waits at start for what it fetches (over 60 s on this network,
    // ~45 s of its own start-up offline), and nothing it needs is on the network.
    octl_tests::netns::offline().expect("a network namespace with only loopback");
    let model = ModelStandIn::start(interactive_script("opencode"));
    let (env, repo) = opencode_world(&model);
    let _d = env.start_daemon();
    let run = code(&env, &repo, "opencode", "Add a file named opencode.txt");
    let node = wait_node_ended(&env, &run, &model);
    assert_interactive_merges(&env, &repo, &run, &node, "opencode");
}

#[test]
#[ignore = "needs the pinned Codex CLI: set OCTL_TEST_CODEX_BIN or npm-install it under .ci/node (see .ci/run)"]
fn an_interactive_codex_runs_what_the_person_approves_reports_done_and_merges() {
    let model = ModelStandIn::start(vec![
        Step::bash_described(
            "printf 'written by codex\\n' > codex.txt && git add codex.txt && git commit -q -m 'codex: add codex.txt'",
            format!("{CODEX_ESCALATED}git writes the repository's git directory"),
        ),
        Step::bash_described(
            "\"$OCTL_CLI\" node done --message 'added codex.txt'",
            format!("{CODEX_ESCALATED}report to orchestratectl"),
        ),
        Step::text("Added codex.txt."),
    ]);
    let (env, repo) = codex_world(&model, "");
    std::fs::write(
        env.user_home.join(".codex/config.toml"),
        format!(
            "[projects.{:?}]\ntrust_level = \"trusted\"\n",
            repo.path.display().to_string()
        ),
    )
    .unwrap();
    let _d = env.start_daemon();
    let run = code(&env, &repo, "codex", "Add a file named codex.txt");
    // The person: each time it asks to run a command outside its sandbox (a new reason on
    // screen), they approve it with `y`, typed with `node send`.
    let mut answered: Vec<String> = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    let node = loop {
        let node = env.rpc("run.show", json!({"run": run}))["nodes"][0].clone();
        if !["starting", "running", "waiting"].contains(&node["state"].as_str().unwrap_or("")) {
            break node;
        }
        let screen = env.cli(["node", "screen", &run, "--node", "ui"]);
        let screen = screen.stdout.clone();
        let asked = screen
            .contains("Would you like to run the following command?")
            .then(|| {
                screen
                    .lines()
                    .find(|l| l.trim_start().starts_with("Reason: "))
            })
            .flatten()
            .map(|l| l.trim().to_string());
        if let Some(reason) = asked.filter(|r| !answered.contains(r)) {
            env.cli(["node", "send", &run, "--node", "ui", "y"]).ok();
            answered.push(reason);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still live: {node}\nscreen:\n{screen}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    assert_eq!(answered.len(), 2, "{answered:?}");
    assert_interactive_merges(&env, &repo, &run, &node, "codex");
}
