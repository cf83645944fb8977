//! The real Claude Code CLI as an agent, in its tmux window, against the scripted stand-in
//! for the model API. Every test is `#[ignore]`d (it needs the CLI): run them with
//! `cargo test -p octl-tests -- --ignored`, as `.ci/run` does; a missing CLI then fails them.

use octl_tests::model::{claude_env, require_claude, seed_claude_config, ModelStandIn, Step};
use octl_tests::{TestEnv, TestRepo};
use serde_json::{json, Value};

/// A world where the daemon's agents run the given claude binary against `model`.
fn claude_world(
    claude: &std::path::Path,
    model: &ModelStandIn,
    trusted: bool,
) -> (TestEnv, TestRepo) {
    let mut env = TestEnv::new();
    for (k, v) in claude_env(&model.url(), &env.user_home, &env.claude_dir) {
        env.set_env(&k, &v);
    }
    let repo = TestRepo::new(&env, "repo");
    let trusted_dirs: Vec<&std::path::Path> = if trusted {
        vec![repo.path.as_path()]
    } else {
        vec![]
    };
    seed_claude_config(&env.claude_dir, &trusted_dirs);
    std::fs::create_dir_all(&env.home).unwrap();
    std::fs::write(
        env.home.join("config.toml"),
        format!(
            "[agents.claude]\nprogram = {:?}\n",
            claude.display().to_string()
        ),
    )
    .unwrap();
    (env, repo)
}

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
    let (env, repo) = claude_world(&claude, &model, true);
    let _d = env.start_daemon();
    let out = env.cli_with(
        [
            "--json",
            "spawn",
            "spinoff",
            "Add a file named claude.txt",
            "--node",
            "writer",
        ],
        |c| {
            c.current_dir(&repo.path);
        },
    );
    out.ok();
    let run = out.json()["id"].as_str().unwrap().to_string();
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
    let (env, repo) = claude_world(&claude, &model, true);
    let _d = env.start_daemon();
    env.cli(["skill", "install"]).ok();
    let skill =
        std::fs::read_to_string(env.claude_dir.join("skills/octl-run-overview/SKILL.md")).unwrap();
    let out = env.cli_with(
        [
            "--json",
            "spawn",
            "spinoff",
            "/octl-run-overview",
            "--node",
            "reader",
        ],
        |c| {
            c.current_dir(&repo.path);
        },
    );
    out.ok();
    let run = out.json()["id"].as_str().unwrap().to_string();
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
    let (env, repo) = claude_world(&claude, &model, false);
    let _d = env.start_daemon();
    let out = env.cli_with(
        [
            "--json",
            "spawn",
            "code",
            "Write review.txt",
            "--node",
            "ui",
        ],
        |c| {
            c.current_dir(&repo.path);
        },
    );
    out.ok();
    let run = out.json()["id"].as_str().unwrap().to_string();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(45);
    let show = loop {
        let show = env.rpc("run.show", json!({"run": run}));
        if show["manifest"]["status"] != json!("active") {
            break show;
        }
        if std::time::Instant::now() > deadline {
            let screen = std::process::Command::new("tmux")
                .arg("-S")
                .arg(env.home.join("tmux.sock"))
                .args(["capture-pane", "-p", "-t", &format!("{run}:ui")])
                .output()
                .unwrap();
            panic!(
                "still active: {show}\nscreen:\n{}\nrequests: {}",
                String::from_utf8_lossy(&screen.stdout),
                model.requests().len()
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert_eq!(show["nodes"][0]["state"], json!("done"), "{show}");
    env.cli(["merge", &run]).ok();
    assert_eq!(
        repo.show("main", "review.txt").as_deref(),
        Some("reviewed\n")
    );
    env.wait_status(&run, &["completed"]);
}
