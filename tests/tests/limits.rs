//! Usage limits and budgets with the real Claude Code CLI against the scripted stand-in of the
//! model API: a spent usage limit pauses the node (not failed) until its reset, then the node
//! continues its conversation; an API key's 429s are retried by the CLI itself; a run's
//! budget stops a fan-out from starting more nodes; the agent may run its gate's command and
//! is told no (and `run show` says so) for what it may not. Every test needs the CLI and is
//! `#[ignore]`d: `cargo test -p octl-tests --test limits -- --ignored`.

use std::time::Duration;

use octl_tests::model::{claude_world, require_claude, ModelStandIn, Step};
use octl_tests::wait::wait_until;
use octl_tests::{TestEnv, TestRepo};
use serde_json::{json, Value};

/// A world whose daemon runs `claude` against `model`; `subscription` authenticates as a
/// claude.ai subscriber (`CLAUDE_CODE_OAUTH_TOKEN`), whose usage limits Claude Code reports
/// as `rate_limit_event`s, else with an auth token (API usage).
fn world(model: &ModelStandIn, subscription: bool, config: &str) -> (TestEnv, TestRepo) {
    let (mut env, repo) = claude_world(&require_claude(), model, true, config);
    if subscription {
        env.set_env("ANTHROPIC_AUTH_TOKEN", "");
        env.set_env("CLAUDE_CODE_OAUTH_TOKEN", "octl-test-oauth-token");
    }
    (env, repo)
}

fn events_of<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == json!(kind)).collect()
}

#[test]
#[ignore = "needs the real Claude Code CLI: set OCTL_TEST_CLAUDE_BIN or npm-install it under .ci/node (see .ci/run)"]
fn a_spent_usage_limit_pauses_the_node_and_it_resumes_after_the_reset() {
    // Whichever step the resumed conversation is at, the agent reports done.
    let model = ModelStandIn::start(vec![
        Step::bash("orchestratectl node done --message 'after the reset'"),
        Step::bash("orchestratectl node done --message 'after the reset'"),
        Step::text("Done."),
    ]);
    // A reset a few seconds after the first request: every main request is refused until
    // then.
    model.limit_for(3, 3);
    let (env, repo) = world(&model, true, "");
    let _d = env.start_daemon();
    let spawned = env
        .spawn(
            "spinoff",
            &repo,
            "Say you are done",
            json!({"node": "limited"}),
        )
        .unwrap();
    let run = spawned["id"].as_str().unwrap().to_string();
    let node = env.wait_node(&run, "limited", "paused");
    let reset = model.limit_reset().unwrap();
    assert_eq!(
        octl_proto::time::parse_millis(node["paused_until"].as_str().unwrap()),
        Some(reset * 1000),
        "{node}"
    );
    assert!(node["reason"].as_str().unwrap().contains("limit"), "{node}");
    let session = node["session_id"].as_str().unwrap().to_string();
    // `run show` says until when.
    let out = env.cli(["run", "show", &run]);
    out.ok();
    assert!(out.stdout.contains("paused until"), "{}", out.stdout);
    // Not failed: the run is active, and nothing else of the profile starts meanwhile.
    let show = env.rpc("run.show", json!({"run": run}));
    assert_eq!(show["manifest"]["status"], json!("active"), "{show}");

    // After the reset it starts again, continuing its conversation, and finishes.
    let show = env.wait_status(&run, &["completed", "failed", "waiting"]);
    assert_eq!(
        show["manifest"]["status"],
        json!("completed"),
        "{show}\nlog: {:?}",
        std::fs::read_to_string(env.run_dir(&run).join("logs/limited.log"))
    );
    let events = env.log_events(&run);
    let paused = events_of(&events, "node.paused");
    assert_eq!(paused.len(), 1, "{events:?}");
    assert_eq!(
        paused[0]["data"]["outcome"]["api_error"],
        json!("usage_limit_reached")
    );
    let starts = events_of(&events, "node.starting");
    assert_eq!(starts.len(), 2, "{events:?}");
    assert_eq!(starts[1]["data"]["resume"], json!(true));
    assert_eq!(starts[1]["data"]["session_id"], json!(session));
    assert!(
        octl_proto::time::parse_millis(starts[1]["ts"].as_str().unwrap()).unwrap() >= reset * 1000,
        "resumed before the reset: {}",
        starts[1]
    );
    // The request after the reset carries the earlier conversation: the task it was given.
    let after: Vec<Value> = model
        .log()
        .into_iter()
        .filter(|r| r.kind == octl_tests::model::RequestKind::Main && r.status == 200)
        .map(|r| r.body)
        .collect();
    assert!(!after.is_empty());
    assert!(
        after[0]["messages"]
            .to_string()
            .contains("Say you are done"),
        "{}",
        after[0]["messages"]
    );
    assert!(!events.iter().any(|e| e["type"] == json!("node.failed")));
}

#[test]
#[ignore = "needs the real Claude Code CLI: set OCTL_TEST_CLAUDE_BIN or npm-install it under .ci/node (see .ci/run)"]
fn an_api_keys_429_is_retried_by_claude_code_and_pauses_nothing() {
    let model = ModelStandIn::start(vec![
        Step::bash("orchestratectl node done --message 'through the 429s'"),
        Step::text("Done."),
    ]);
    // Refused for a few seconds from the first request: within the CLI's 10 retries of
    // about `retry-after` (1 s) each.
    model.limit_for(4, 1);
    let (env, repo) = world(&model, false, "");
    let _d = env.start_daemon();
    let spawned = env
        .spawn(
            "spinoff",
            &repo,
            "Say you are done",
            json!({"node": "retried"}),
        )
        .unwrap();
    let run = spawned["id"].as_str().unwrap().to_string();
    let show = env.wait_status(&run, &["completed", "failed", "waiting"]);
    assert_eq!(show["manifest"]["status"], json!("completed"), "{show}");
    assert!(
        model.log().iter().any(|r| r.status == 429),
        "the stand-in refused no request"
    );
    let raw = std::fs::read_to_string(env.run_dir(&run).join("logs/retried.log")).unwrap();
    assert!(raw.contains("\"api_retry\""), "{raw}");
    assert!(!env.event_types(&run).contains(&"node.paused".to_string()));
}

#[test]
#[ignore = "needs the real Claude Code CLI: set OCTL_TEST_CLAUDE_BIN or npm-install it under .ci/node (see .ci/run)"]
fn a_spent_budget_stops_a_fan_out_from_starting_more_nodes() {
    let model = ModelStandIn::start(vec![
        Step::bash("orchestratectl node done --message 'unit done'"),
        Step::text("Done."),
    ]);
    let (env, repo) = world(&model, false, "");
    let _d = env.start_daemon();
    let manifest = env.root.path().join("units.toml");
    std::fs::write(
        &manifest,
        "prompt = \"Say you are done with {n}\"\n[[units]]\nid = \"u1\"\nvars = { n = \"1\" }\n[[units]]\nid = \"u2\"\nvars = { n = \"2\" }\n[[units]]\nid = \"u3\"\nvars = { n = \"3\" }\n",
    )
    .unwrap();
    // One session of the stand-in costs more than this.
    let out = env.cli_with(
        [
            "--json",
            "fan-out",
            "--manifest",
            manifest.to_str().unwrap(),
            "--max-parallel",
            "1",
            "--max-budget-usd",
            "0.00001",
        ],
        |c| {
            c.current_dir(&repo.path);
        },
    );
    out.ok();
    let run = out.json()["id"].as_str().unwrap().to_string();
    let show = wait_until("the budget spent", Duration::from_secs(90), || {
        let show = env.rpc("run.show", json!({"run": run}));
        (show["manifest"]["budget_spent"] == json!(true)
            && show["manifest"]["status"] == json!("waiting"))
        .then_some(show)
    });
    let events = env.log_events(&run);
    let starts = events_of(&events, "node.starting");
    assert_eq!(starts.len(), 1, "only the first unit started: {events:?}");
    let spent = events_of(&events, "run.budget_spent");
    assert_eq!(spent.len(), 1, "{events:?}");
    assert_eq!(spent[0]["data"]["budget_usd"], json!(0.00001));
    assert_eq!(spent[0]["data"]["next"], json!("u2"));
    let cost = show["manifest"]["cost_usd"].as_f64().unwrap();
    assert!(cost > 0.00001, "{show}");
    assert_eq!(show["nodes"][1]["state"], json!("pending"));
    assert_eq!(show["nodes"][2]["state"], json!("pending"));
    // The session was given the run's budget as its own.
    let raw = std::fs::read_to_string(env.run_dir(&run).join("logs/u1.log")).unwrap();
    assert!(raw.contains("total_cost_usd"), "{raw}");
    // `run list` shows the cost; `run show` says the budget is spent.
    let list = env.cli(["run", "list"]);
    list.ok();
    assert!(list.stdout.contains("COST"), "{}", list.stdout);
    let text = env.cli(["run", "show", &run]);
    text.ok();
    assert!(text.stdout.contains("budget spent"), "{}", text.stdout);
}

#[test]
#[ignore = "needs the real Claude Code CLI: set OCTL_TEST_CLAUDE_BIN or npm-install it under .ci/node (see .ci/run)"]
fn the_agent_may_run_its_gate_and_a_tool_no_one_allows_is_denied_when_its_wait_ends() {
    // Not a read-only command Claude Code would allow by itself.
    const GATE: &str = "sh -c 'echo gate ok'";
    let model = ModelStandIn::start(vec![
        Step::bash(GATE),
        Step::bash("npm --version"),
        Step::bash("orchestratectl node done --message 'checked'"),
        Step::text("Done."),
    ]);
    // No one answers the request for npm: after `[permissions] wait` it is denied.
    let (env, repo) = world(&model, false, "\n[permissions]\nwait = \"1s\"\n");
    let _d = env.start_daemon();
    let spawned = env
        .spawn(
            "spinoff",
            &repo,
            "Run the checks",
            json!({"node": "checker", "gate": GATE}),
        )
        .unwrap();
    let run = spawned["id"].as_str().unwrap().to_string();
    let show = env.wait_status(&run, &["completed", "failed", "waiting"]);
    assert_eq!(show["manifest"]["status"], json!("completed"), "{show}");
    let node = &show["nodes"][0];
    // The gate's command ran without asking; npm was asked for, then denied.
    assert_eq!(
        node["outcome"]["denied"],
        json!(["Bash(npm --version)"]),
        "{node}"
    );
    let events = env.log_events(&run);
    let asked = events_of(&events, "node.permission_asked");
    assert_eq!(asked.len(), 1, "only npm was asked for: {asked:?}");
    assert_eq!(asked[0]["data"]["detail"], json!("Bash: npm --version"));
    let decided = events_of(&events, "node.permission_decided");
    assert_eq!(decided.len(), 1, "{decided:?}");
    assert_eq!(decided[0]["actor"], json!("daemon"));
    assert_eq!(decided[0]["data"]["by"], json!("timeout"));
    assert_eq!(decided[0]["data"]["behavior"], json!("deny"));
    // While it waited, the node needed a person's permission.
    assert_eq!(
        show["permissions"][0]["decision"]["by"],
        json!("timeout"),
        "{show}"
    );
    let text = env.cli(["run", "show", &run]);
    text.ok();
    assert!(
        text.stdout
            .contains("checker was denied: Bash(npm --version)"),
        "{}",
        text.stdout
    );
    // What the CLI said to each tool call: the gate's command ran, npm was refused, and the
    // agent was told why.
    let results: Vec<String> = model.main_requests().last().unwrap()["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|b| b["type"] == json!("tool_result"))
        .map(|b| {
            format!(
                "{} {}",
                b["is_error"].as_bool().unwrap_or(false),
                b["content"]
            )
        })
        .collect();
    assert!(
        results[0].starts_with("false") && results[0].contains("gate ok"),
        "{results:?}"
    );
    assert!(results[1].starts_with("true"), "{results:?}");
    assert!(
        results[1].contains("no one answered within 1s"),
        "the agent sees why: {results:?}"
    );
}

#[test]
fn a_bad_budget_is_refused_naming_the_field_and_creates_nothing() {
    let (env, _d, repo) = TestEnv::world();
    for bad in [json!(-1), json!(0)] {
        let err = env
            .spawn(
                "spinoff",
                &repo,
                "true",
                json!({"agent": "shell", "max_budget_usd": bad}),
            )
            .unwrap_err();
        assert_eq!(err["data"]["kind"], json!("invalid_params"), "{err}");
        assert!(
            err["message"].as_str().unwrap().contains("max_budget_usd"),
            "{err}"
        );
    }
    let out = env.cli_with(
        [
            "--json",
            "spawn",
            "spinoff",
            "--agent",
            "shell",
            "--max-budget-usd",
            "0",
            "true",
        ],
        |c| {
            c.current_dir(&repo.path);
        },
    );
    assert_eq!(out.code, 2, "{out:?}");
    assert!(
        out.error()["message"]
            .as_str()
            .unwrap()
            .contains("--max-budget-usd"),
        "{out:?}"
    );
    // A per-node budget in config.toml is checked too, naming its key.
    // An edit with one is refused, naming its key (the last good file stays in force).
    env.write_config("[agents.claude]\nmax_budget_usd = -1\n");
    let status = env.rpc("daemon.status", json!({}));
    assert!(
        status["config_error"]
            .as_str()
            .unwrap_or_default()
            .contains("agents.claude.max_budget_usd"),
        "{status}"
    );
    let runs = env.rpc("run.list", json!({}));
    assert_eq!(runs, json!([]), "nothing was created");
}

#[test]
fn a_spent_budget_is_given_more_with_run_budget_and_the_pending_nodes_start() {
    let env = TestEnv::new();
    let scripts = tempfile::tempdir().unwrap();
    octl_tests::model::costly_claude(&env, scripts.path(), 0.5);
    let _d = env.start_daemon();
    let repo = TestRepo::new(&env, "repo");
    let manifest = env.root.path().join("units.toml");
    std::fs::write(
        &manifest,
        "prompt = \"unit {n}\"\n[[units]]\nid = \"u1\"\nvars = { n = \"1\" }\n[[units]]\nid = \"u2\"\nvars = { n = \"2\" }\n[[units]]\nid = \"u3\"\nvars = { n = \"3\" }\n",
    )
    .unwrap();
    let out = env.cli_with(
        [
            "--json",
            "fan-out",
            "--manifest",
            manifest.to_str().unwrap(),
            "--agent",
            "claude",
            "--max-parallel",
            "1",
            "--max-budget-usd",
            "0.4",
        ],
        |c| {
            c.current_dir(&repo.path);
        },
    );
    out.ok();
    let run = out.json()["id"].as_str().unwrap().to_string();
    wait_until("the budget spent", Duration::from_secs(60), || {
        let show = env.rpc("run.show", json!({"run": run}));
        (show["manifest"]["budget_spent"] == json!(true)
            && show["manifest"]["status"] == json!("waiting"))
        .then_some(show)
    });
    assert_eq!(events_of(&env.log_events(&run), "node.starting").len(), 1);

    // Where the run is shown, the way out is named.
    let wait = env.cli(["run", "wait", &run, "--timeout", "10"]);
    assert_eq!(wait.code, 4, "{wait:?}");
    let said = format!("{}{}", wait.stdout, wait.stderr);
    assert!(said.contains("budget spent"), "{said}");
    assert!(
        said.contains(&format!("orchestratectl run budget {run} --add USD")),
        "{said}"
    );
    let show = env.cli(["run", "show", &run]);
    show.ok();
    assert!(
        show.stdout
            .contains(&format!("budget spent, no new node starts (give it more: orchestratectl run budget {run} --add USD)")),
        "{}",
        show.stdout
    );
    let list = env.cli(["run", "list"]);
    assert!(list.stdout.contains("(budget spent)"), "{}", list.stdout);

    // A bad amount names its field and the accepted form, and changes nothing. (The spent
    // unit's merge and cleanup may still be recorded meanwhile: what counts is that no
    // budget change is, and the run stays spent.)
    let unchanged = |env: &TestEnv| {
        let events = env.log_events(&run);
        let show = env.rpc("run.show", json!({"run": run}));
        assert_eq!(
            events_of(&events, "run.budget_changed").len(),
            0,
            "nothing was recorded"
        );
        assert_eq!(show["manifest"]["budget_spent"], json!(true));
        assert_eq!(events_of(&events, "node.starting").len(), 1);
    };
    for (args, field) in [
        (vec!["--add", "-1"], "--add"),
        (vec!["--set", "0"], "--set"),
        // $0.45 in all is not above the $0.5 spent.
        (vec!["--add", "0.05"], "add_usd"),
        (vec!["--set", "0.5"], "set_usd"),
    ] {
        let mut argv = vec!["--json", "run", "budget", &run];
        argv.extend(args.iter().copied());
        let out = env.cli(argv);
        assert_eq!(out.code, 2, "{args:?}: {out:?}");
        let err = out.error();
        assert_eq!(err["kind"], json!("invalid_params"), "{args:?}: {err}");
        let message = err["message"].as_str().unwrap();
        assert!(message.contains(field), "{args:?}: {message}");
        assert!(
            message.contains("above 0") || message.contains("not above the $0.5"),
            "{args:?}: {message}"
        );
    }
    let both = env
        .try_rpc(
            "run.budget",
            json!({"run": run, "add_usd": 1.0, "set_usd": 2.0}),
        )
        .unwrap_err();
    assert_eq!(both["data"]["kind"], json!("invalid_params"), "{both}");
    unchanged(&env);

    // The way out: the change is in the log, and the pending nodes start and finish.
    let out = env.cli(["run", "budget", &run, "--add", "1"]);
    out.ok();
    assert!(
        out.stdout.contains("budget is now $1.4 ($0.5 spent)"),
        "{}",
        out.stdout
    );
    let show = env.wait_status(&run, &["completed", "failed", "waiting"]);
    assert_eq!(show["manifest"]["status"], json!("completed"), "{show}");
    let events = env.log_events(&run);
    let changed = events_of(&events, "run.budget_changed");
    assert_eq!(changed.len(), 1, "{events:?}");
    assert_eq!(changed[0]["data"], json!({"add_usd": 1.0}));
    assert_eq!(events_of(&events, "node.starting").len(), 3);
    assert_eq!(show["manifest"]["settings"]["max_budget_usd"], json!(1.4));
    assert_ne!(show["manifest"]["budget_spent"], json!(true));
    for unit in ["u1", "u2", "u3"] {
        assert_eq!(
            repo.show("main", &format!("{unit}.txt")).as_deref(),
            Some(format!("{unit}\n").as_str())
        );
    }
}
