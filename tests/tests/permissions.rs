//! Permission requests (docs/AGENTS.md, "Permission requests"): an agent's hook asks for a
//! tool, a person answers with `node allow|deny`, one decision per request. Without Claude
//! Code, a `shell` agent runs the same `orchestratectl hook PermissionAsk` an autonomous
//! Claude Code agent's `PermissionRequest` hook runs, with the hook's JSON on stdin; the real
//! Claude Code's are the ignored tests below.

use std::time::Duration;

use octl_tests::model::{claude_world, require_claude, ModelStandIn, Step};
use octl_tests::{wait_until, wait_until_describing, TestEnv};
use serde_json::{json, Value};

/// The first request is allowed alone (by default the node's only open one); each of the
/// other ten is raced.
const ROUNDS: usize = 11;

fn decided(env: &TestEnv, run: &str) -> Vec<Value> {
    env.log_events(run)
        .into_iter()
        .filter(|e| e["type"] == json!("node.permission_decided"))
        .collect()
}

/// `node allow` and `node deny` at once on one request: exactly one wins; the loser exits 4
/// naming the winner and changes nothing; the winner's command again answers the same.
fn race(env: &TestEnv, run: &str, node: &str, request: &str) -> &'static str {
    let allow = env.start_cli_with(
        ["node", "allow", run, "--node", node, "--request", request],
        |_| {},
    );
    let deny = env.start_cli_with(
        [
            "node",
            "deny",
            run,
            "--node",
            node,
            "--request",
            request,
            "--reason",
            "not this one",
        ],
        |_| {},
    );
    let allow = octl_tests::Cli::from(allow.wait_with_output().unwrap());
    let deny = octl_tests::Cli::from(deny.wait_with_output().unwrap());
    let (won, lost, word) = match (allow.code, deny.code) {
        (0, 4) => ("allow", &deny, "allowed"),
        (4, 0) => ("deny", &allow, "denied"),
        _ => panic!("one decision must win: allow {allow:?}, deny {deny:?}"),
    };
    assert!(
        lost.stderr
            .contains(&format!("already decided: {word} by human")),
        "the loser is told who won: {lost:?}"
    );
    let again = match won {
        "allow" => env.cli(["node", "allow", run, "--node", node, "--request", request]),
        _ => env.cli([
            "node",
            "deny",
            run,
            "--node",
            node,
            "--request",
            request,
            "--reason",
            "not this one",
        ]),
    };
    assert_eq!(
        again.code, 0,
        "the same decision again answers it: {again:?}"
    );
    won
}

#[test]
fn a_request_is_asked_decided_once_from_the_cli_and_the_hook_returns_the_winner() {
    let (env, _d, repo) = TestEnv::world();
    let input = json!({"hook_event_name": "PermissionRequest", "tool_name": "Bash",
                       "tool_input": {"command": "python3 x.py", "description": "run x"}});
    // The agent asks ROUNDS times, keeping each answer beside its worktree, then finishes.
    let task = format!(
        "for i in $(seq {ROUNDS}); do echo '{input}' | orchestratectl hook PermissionAsk > \"$OCTL_WORKTREE.answer$i\"; done; printf x > x.txt"
    );
    let spawned = env
        .spawn(
            "spinoff",
            &repo,
            &task,
            json!({"agent": "shell", "node": "w"}),
        )
        .unwrap();
    let run = spawned["id"].as_str().unwrap().to_string();
    let asked = env.wait_permission_asked(&run, "p1");
    assert_eq!(asked["actor"], json!("agent"));
    assert_eq!(asked["data"]["tool"], json!("Bash"));
    assert_eq!(asked["data"]["input"]["command"], json!("python3 x.py"));
    assert_eq!(asked["data"]["detail"], json!("Bash: python3 x.py"));
    let show = env.rpc("run.show", json!({"run": run}));
    assert_eq!(
        show["nodes"][0]["activity"]["state"],
        json!("needs_permission"),
        "{show}"
    );
    let worktree = show["nodes"][0]["worktree"].as_str().unwrap().to_string();

    // Bad input changes nothing and says what is accepted.
    for (args, code, says) in [
        (vec!["--request", "p9"], 3, "no permission request \"p9\""),
        (vec!["--request", "P 1"], 2, "invalid --request"),
        (vec!["--reason", " "], 2, "invalid --reason"),
    ] {
        let mut all = vec!["node", "allow", &run, "--node", "w"];
        all.extend(args);
        let out = env.cli(&all);
        assert_eq!(out.code, code, "{all:?}: {out:?}");
        assert!(out.stderr.contains(says), "{all:?}: {out:?}");
    }
    let out = env.cli(["node", "deny", &run, "--node", "w", "--always"]);
    assert_eq!(out.code, 2, "{out:?}");
    // Not from inside an agent.
    let out = env.cli_with(["node", "allow", &run, "--node", "w"], |c| {
        c.env("OCTL_AGENT", "k/r/w");
    });
    assert_eq!(out.code, 4, "{out:?}");
    assert!(out.stderr.contains("an agent may not decide"), "{out:?}");
    let err = env
        .try_rpc(
            "node.permission_decide",
            json!({"run": run, "node": "w", "behavior": "maybe"}),
        )
        .unwrap_err();
    assert_eq!(err["data"]["kind"], json!("invalid_params"), "{err}");
    assert!(
        err["message"].as_str().unwrap().contains("behavior"),
        "{err}"
    );
    let err = env
        .try_rpc(
            "event.append",
            json!({"run": run, "node": "w", "type": "node.permission_decided", "actor": "human",
                   "data": {"request": "p1", "behavior": "allow", "by": "human", "always": false}}),
        )
        .unwrap_err();
    assert_eq!(
        err["data"]["kind"],
        json!("forbidden"),
        "only through node allow|deny: {err}"
    );
    assert!(decided(&env, &run).is_empty(), "nothing was decided");

    for i in 1..=ROUNDS {
        let request = format!("p{i}");
        env.wait_permission_asked(&run, &request);
        let won = if i == 1 {
            // The daemon restarts while the hook waits: the request is in the log, and the
            // hook, asking again, gets the decision the new daemon records.
            env.cli(["daemon", "restart"]).ok();
            let out = env.cli(["node", "allow", &run, "--node", "w"]);
            assert_eq!(out.code, 0, "{out:?}");
            assert!(
                out.stdout.starts_with("Allowed request p1 of node w"),
                "{out:?}"
            );
            "allow"
        } else {
            race(&env, &run, "w", &request)
        };
        let answer = wait_until("the hook's answer", Duration::from_secs(30), || {
            std::fs::read_to_string(format!("{worktree}.answer{i}"))
                .ok()
                .filter(|t| t.ends_with('\n'))
        });
        let answer: Value = serde_json::from_str(&answer).unwrap();
        let d = &answer["hookSpecificOutput"]["decision"];
        assert_eq!(
            answer["hookSpecificOutput"]["hookEventName"],
            json!("PermissionRequest")
        );
        assert_eq!(
            d["behavior"],
            json!(won),
            "the agent got the decision that won"
        );
        if won == "deny" {
            assert_eq!(
                d["message"],
                json!("Permission denied by a person, through orchestratectl: not this one")
            );
        }
        let ours: Vec<Value> = decided(&env, &run)
            .into_iter()
            .filter(|e| e["data"]["request"] == json!(request))
            .collect();
        assert_eq!(ours.len(), 1, "one decision per request: {ours:?}");
        assert_eq!(ours[0]["data"]["behavior"], json!(won));
        assert_eq!(ours[0]["actor"], json!("human"));
    }
    let show = env.wait_status(&run, &["completed", "failed", "waiting"]);
    assert_eq!(show["manifest"]["status"], json!("completed"), "{show}");
    assert_eq!(show["permissions"].as_array().unwrap().len(), ROUNDS);
    // Nothing is decided once the run has ended.
    let out = env.cli(["node", "deny", &run, "--node", "w", "--request", "p1"]);
    assert_eq!(out.code, 4, "{out:?}");
    assert!(out.stderr.contains("after a run has ended"), "{out:?}");
}

/// The tool results the agent's last request to the stand-in carried, as `is_error content`.
fn tool_results(model: &ModelStandIn) -> Vec<String> {
    model.main_requests().last().unwrap()["messages"]
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
        .collect()
}

fn python(file: &str) -> String {
    format!("python3 -c \"open('{file}', 'w').write('ran')\"")
}

#[test]
#[ignore = "needs the real Claude Code CLI: set OCTL_TEST_CLAUDE_BIN or npm-install it under .ci/node (see .ci/run)"]
fn claude_asks_for_python_is_allowed_always_from_the_cli_and_the_run_merges() {
    let claude = require_claude();
    let model = ModelStandIn::start(vec![
        Step::bash(python("one.txt")),
        Step::bash(python("two.txt")),
        Step::bash("git add one.txt two.txt && git commit -q -m 'python wrote them'"),
        Step::bash("orchestratectl node done --message 'ran python twice'"),
        Step::text("Done."),
    ]);
    let (env, repo) = claude_world(&claude, &model, true, "");
    let _d = env.start_daemon();
    let run = env.cli_spawn(&repo, &["spinoff", "Run python", "--node", "py"]);
    let asked = env.wait_permission_asked(&run, "p1");
    assert_eq!(asked["data"]["tool"], json!("Bash"));
    assert_eq!(asked["data"]["input"]["command"], json!(python("one.txt")));
    let n = env.rpc("run.show", json!({"run": run}))["nodes"][0].clone();
    assert_eq!(n["activity"]["state"], json!("needs_permission"), "{n}");
    let out = env.cli(["node", "allow", &run, "--node", "py", "--always"]);
    assert_eq!(out.code, 0, "{out:?}");
    let show = env.wait_status(&run, &["completed", "failed", "waiting"]);
    assert_eq!(show["manifest"]["status"], json!("completed"), "{show}");
    assert_eq!(repo.show("main", "one.txt").as_deref(), Some("ran"));
    assert_eq!(repo.show("main", "two.txt").as_deref(), Some("ran"));
    let asked: Vec<Value> = env
        .log_events(&run)
        .into_iter()
        .filter(|e| e["type"] == json!("node.permission_asked"))
        .collect();
    assert_eq!(
        asked.len(),
        1,
        "the second python3 was not asked: {asked:?}"
    );
    assert_eq!(show["allowed"], json!(["Bash(python3 *)"]), "{show}");
    assert!(show["nodes"][0]["outcome"]["denied"].is_null(), "{show}");
}

#[test]
#[ignore = "needs the real Claude Code CLI: set OCTL_TEST_CLAUDE_BIN or npm-install it under .ci/node (see .ci/run)"]
fn claude_denied_from_the_cli_is_told_the_reason() {
    let claude = require_claude();
    let model = ModelStandIn::start(vec![
        Step::bash(python("one.txt")),
        Step::bash("orchestratectl node done --message 'could not'"),
        Step::text("Done."),
    ]);
    let (env, repo) = claude_world(&claude, &model, true, "");
    let _d = env.start_daemon();
    let run = env.cli_spawn(&repo, &["spinoff", "Run python", "--node", "py"]);
    env.wait_permission_asked(&run, "p1");
    let out = env.cli([
        "node",
        "deny",
        &run,
        "--node",
        "py",
        "--reason",
        "use make run instead",
    ]);
    assert_eq!(out.code, 0, "{out:?}");
    model.wait_main_requests(2, Duration::from_secs(60));
    let results = tool_results(&model);
    assert!(
        results[0].starts_with("true")
            && results[0].contains("use make run instead")
            && results[0].contains("a person, through orchestratectl"),
        "the agent's next request carries the reason: {results:?}"
    );
    env.wait_status(&run, &["completed", "failed", "waiting"]);
    assert_eq!(repo.show("main", "one.txt"), None, "python never ran");
}

#[test]
#[ignore = "needs the real Claude Code CLI: set OCTL_TEST_CLAUDE_BIN or npm-install it under .ci/node (see .ci/run)"]
fn claude_acts_on_the_one_decision_of_each_raced_allow_and_deny() {
    const RACES: usize = 10;
    let claude = require_claude();
    let mut script: Vec<Step> = (1..=RACES)
        .map(|i| Step::bash(python(&format!("f{i}.txt"))))
        .collect();
    script.push(Step::text("Done."));
    let model = ModelStandIn::start(script);
    let (env, repo) = claude_world(&claude, &model, true, "");
    let _d = env.start_daemon();
    let run = env.cli_spawn(&repo, &["spinoff", "Run python", "--node", "py"]);
    let worktree = env.wait_node(&run, "py", "running")["worktree"]
        .as_str()
        .unwrap()
        .to_string();
    let mut won = Vec::new();
    for i in 1..=RACES {
        let request = format!("p{i}");
        env.wait_permission_asked(&run, &request);
        won.push(race(&env, &run, "py", &request));
        // The agent's next request says what became of the tool.
        model.wait_main_requests(i + 1, Duration::from_secs(60));
        let results = tool_results(&model);
        let ran = results[i - 1].starts_with("false");
        assert_eq!(ran, won[i - 1] == "allow", "round {i}: {results:?}");
        let file = std::path::Path::new(&worktree).join(format!("f{i}.txt"));
        assert_eq!(file.exists(), ran, "f{i}.txt after {}", won[i - 1]);
    }
    let decided = decided(&env, &run);
    assert_eq!(
        decided.len(),
        RACES,
        "one decision per request: {decided:?}"
    );
    drop(repo);
}

/// The `--settings` JSON a fake `claude` was started with, once it has run for `node`.
fn settings_of(dir: &std::path::Path, node: &str) -> Value {
    let file = dir.join(node);
    let argv: Vec<String> = wait_until(
        &format!("node {node}'s agent to start"),
        Duration::from_secs(30),
        || std::fs::read(&file).ok(),
    )
    .split(|b| *b == 0)
    .map(|a| String::from_utf8_lossy(a).into_owned())
    .collect();
    let at = argv
        .iter()
        .position(|a| a == "--settings")
        .expect("--settings");
    serde_json::from_str(&argv[at + 1]).unwrap()
}

/// Policy (docs/AGENTS.md, "Permission policy"): the rules of config.toml's `[permissions]` and
/// `[agents.claude.permissions]`, of the run's `--allow`/`--ask`/`--deny` and of a plan node
/// reach Claude Code's settings, and the run's own are in its log (`node.added`). A rule not in
/// Claude Code's syntax, or rules for an agent that does not read them, are refused naming the
/// flag or field, and nothing is made. (A stand-in `claude` records its argv; the real one
/// deciding with them is `claude_decides_by_the_runs_rules` below.)
#[test]
fn rules_of_config_the_run_and_a_plan_node_reach_claude_codes_settings() {
    let env = TestEnv::new();
    let seen = env.root.path().join("argv");
    std::fs::create_dir_all(&seen).unwrap();
    let fake = env.root.path().join("fake-claude");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\0' \"$a\"; done > '{0}/.tmp'\nmv '{0}/.tmp' \"{0}/$OCTL_NODE\"\n",
            seen.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    env.write_config(&format!(
        "[permissions]\ndeny = [\"Read(./.env)\"]\n[agents.claude]\nprogram = \"{}\"\n[agents.claude.permissions]\nask = [\"Bash(git push:*)\"]\n",
        fake.display()
    ));
    let _d = env.start_daemon();
    let repo = octl_tests::TestRepo::new(&env, "repo");
    let run = env.cli_spawn(
        &repo,
        &[
            "spinoff",
            "t",
            "--node",
            "one",
            "--allow",
            "Bash(cargo test:*)",
            "--deny",
            "WebFetch",
        ],
    );
    assert_eq!(
        settings_of(&seen, "one")["permissions"],
        json!({
            "allow": ["Bash(cargo test:*)"],
            "ask": ["Bash(git push:*)"],
            "deny": ["Read(./.env)", "WebFetch"],
        })
    );
    let added = env
        .log_events(&run)
        .into_iter()
        .find(|e| e["type"] == json!("node.added"))
        .unwrap();
    assert_eq!(
        added["data"]["permissions"],
        json!({"allow": ["Bash(cargo test:*)"], "deny": ["WebFetch"]}),
        "the run's own rules are in its log; config.toml's are read at each start"
    );
    // A plan node's rules after the run's.
    let plan = env.root.path().join("plan.toml");
    std::fs::write(
        &plan,
        "[[nodes]]\nid = \"a\"\ntask = \"t\"\nask = [\"Edit(src/**)\"]\n[[nodes]]\nid = \"b\"\ntask = \"t\"\n",
    )
    .unwrap();
    let orchestrate = |extra: &[&str]| {
        env.cli_with(
            ["--json", "orchestrate", "--plan", plan.to_str().unwrap()]
                .iter()
                .chain(extra),
            |c| {
                c.current_dir(&repo.path);
            },
        )
    };
    let out = orchestrate(&["--deny", "WebFetch"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(
        settings_of(&seen, "a")["permissions"],
        json!({
            "ask": ["Bash(git push:*)", "Edit(src/**)"],
            "deny": ["Read(./.env)", "WebFetch"],
        })
    );
    assert_eq!(
        settings_of(&seen, "b")["permissions"],
        json!({"ask": ["Bash(git push:*)"], "deny": ["Read(./.env)", "WebFetch"]})
    );
    // Refused, naming what was wrong; no run made.
    let runs = env.rpc("run.list", json!({})).as_array().unwrap().len();
    for (args, says) in [
        (
            vec!["spawn", "spinoff", "t", "--deny", "Bash(rm"],
            "invalid --deny \"Bash(rm\": no closing ')'",
        ),
        (
            vec![
                "spawn", "spinoff", "t", "--agent", "shell", "--allow", "Bash",
            ],
            "profile \"shell\" does not take permission rules",
        ),
        (
            vec![
                "orchestrate",
                "--plan",
                plan.to_str().unwrap(),
                "--agent",
                "shell",
            ],
            "node \"a\": permissions: profile \"shell\" does not take permission rules",
        ),
    ] {
        let out = env.cli_with(["--json"].iter().chain(&args), |c| {
            c.current_dir(&repo.path);
        });
        assert_eq!(out.code, 2, "{args:?}: {out:?}");
        let msg = out.error()["message"].as_str().unwrap().to_string();
        assert!(msg.contains(says), "{args:?}: {msg}");
    }
    assert_eq!(
        env.rpc("run.list", json!({})).as_array().unwrap().len(),
        runs
    );
}

/// The real Claude Code decides by the run's rules: `--deny` refuses `python3` without asking
/// anyone, `--allow` runs `touch` without asking, and `--ask` asks for a `git status` that the
/// default `Bash(git *)` would have allowed (ask comes before allow); allowed from the CLI, the
/// run merges what was allowed.
#[test]
#[ignore = "needs the real Claude Code CLI: set OCTL_TEST_CLAUDE_BIN or npm-install it under .ci/node (see .ci/run)"]
fn claude_decides_by_the_runs_rules() {
    let claude = require_claude();
    let model = ModelStandIn::start(vec![
        Step::bash(python("one.txt")),
        Step::bash("touch two.txt"),
        Step::bash("git status --short"),
        Step::bash("git add two.txt && git commit -q -m 'touched two'"),
        Step::bash("orchestratectl node done --message 'two'"),
        Step::text("Done."),
    ]);
    let (env, repo) = claude_world(&claude, &model, true, "");
    let _d = env.start_daemon();
    let run = env.cli_spawn(
        &repo,
        &[
            "spinoff",
            "Work by the rules",
            "--node",
            "w",
            "--deny",
            "Bash(python3 *)",
            "--allow",
            "Bash(touch *)",
            "--ask",
            "Bash(git status:*)",
        ],
    );
    let asked = env.wait_permission_asked(&run, "p1");
    assert_eq!(
        asked["data"]["input"]["command"],
        json!("git status --short"),
        "{asked}"
    );
    let out = env.cli(["node", "allow", &run, "--node", "w"]);
    assert_eq!(out.code, 0, "{out:?}");
    let show = env.wait_status(&run, &["completed", "failed", "waiting"]);
    assert_eq!(show["manifest"]["status"], json!("completed"), "{show}");
    let asked: Vec<Value> = env
        .log_events(&run)
        .into_iter()
        .filter(|e| e["type"] == json!("node.permission_asked"))
        .collect();
    assert_eq!(asked.len(), 1, "only git status was asked: {asked:?}");
    assert_eq!(repo.show("main", "two.txt").as_deref(), Some(""));
    assert_eq!(repo.show("main", "one.txt"), None, "python3 never ran");
    let first = &model.main_requests()[1]["messages"];
    assert!(
        first.to_string().contains("\"is_error\":true"),
        "python3 was refused to the agent: {first}"
    );
}

/// An interactive (`code`) Claude Code agent asking for python3: the request is recorded and
/// its dialog is on screen at once (Claude Code 2.1.328 runs the hook while it shows the
/// dialog). Returns the run, the window and the node's worktree.
fn interactive_asking(env: &TestEnv, repo: &octl_tests::TestRepo) -> (String, String, String) {
    let run = env.cli_spawn(repo, &["code", "Run python", "--node", "py"]);
    let asked = env.wait_permission_asked(&run, "p1");
    assert_eq!(asked["data"]["input"]["command"], json!(python("one.txt")));
    let window = format!("{run}:py");
    wait_until_describing(
        "the permission dialog in the window",
        Duration::from_secs(30),
        || {
            env.tmux_screen(&window)
                .contains("Do you want to proceed?")
                .then_some(())
        },
        || env.tmux_screen(&window),
    );
    let show = env.rpc("run.show", json!({"run": run}));
    assert_eq!(
        show["nodes"][0]["activity"]["state"],
        json!("needs_permission"),
        "{show}"
    );
    let worktree = show["nodes"][0]["worktree"].as_str().unwrap().to_string();
    (run, window, worktree)
}

fn wait_decided(env: &TestEnv, run: &str) -> Value {
    wait_until_describing(
        "the request's decision",
        Duration::from_secs(60),
        || decided(env, run).into_iter().next(),
        || format!("{:?}", env.event_types(run)),
    )
}

/// Interactive: allowed from the CLI while the dialog is on screen. The hook returns the
/// decision, the dialog goes and the tool runs; the log has that one decision, and the
/// window's own answer can no longer be given (a later `node deny` is told who won).
#[test]
#[ignore = "needs the real Claude Code CLI: set OCTL_TEST_CLAUDE_BIN or npm-install it under .ci/node (see .ci/run)"]
fn claude_interactive_allowed_from_the_cli_while_the_dialog_is_on_screen() {
    let claude = require_claude();
    let model = ModelStandIn::start(vec![Step::bash(python("one.txt")), Step::text("Done.")]);
    let (env, repo) = claude_world(&claude, &model, true, "");
    let _d = env.start_daemon();
    let (run, window, worktree) = interactive_asking(&env, &repo);
    let out = env.cli(["node", "allow", &run, "--node", "py"]);
    assert_eq!(out.code, 0, "{out:?}");
    let one = std::path::Path::new(&worktree).join("one.txt");
    wait_until_describing(
        "python3 to run",
        Duration::from_secs(60),
        || one.exists().then_some(()),
        || env.tmux_screen(&window),
    );
    model.wait_main_requests(2, Duration::from_secs(60));
    let results = tool_results(&model);
    assert!(results[0].starts_with("false"), "the tool ran: {results:?}");
    wait_until_describing(
        "the dialog to go",
        Duration::from_secs(30),
        || (!env.tmux_screen(&window).contains("Do you want to proceed?")).then_some(()),
        || env.tmux_screen(&window),
    );
    // The tool's PostToolUse is in the log: the window's watch saw it and changed nothing.
    wait_until("the tool's PostToolUse", Duration::from_secs(30), || {
        env.log_events(&run)
            .iter()
            .any(|e| {
                e["type"] == json!("node.activity") && e["data"]["hook"] == json!("PostToolUse")
            })
            .then_some(())
    });
    let d = decided(&env, &run);
    assert_eq!(d.len(), 1, "one decision: {d:?}");
    assert_eq!(d[0]["data"]["behavior"], json!("allow"));
    assert_eq!(d[0]["data"]["by"], json!("human"));
    let out = env.cli(["node", "deny", &run, "--node", "py"]);
    assert_eq!(out.code, 4, "{out:?}");
    assert!(
        out.stderr.contains("already decided: allowed by human"),
        "{out:?}"
    );
    assert_eq!(decided(&env, &run).len(), 1);
}

/// Interactive: answered No in the window while the hook waits. Claude Code ends the hook
/// (SIGTERM), which says so; the daemon records the window's denial, and the CLI's allow
/// after it is refused naming it. The tool never runs.
#[test]
#[ignore = "needs the real Claude Code CLI: set OCTL_TEST_CLAUDE_BIN or npm-install it under .ci/node (see .ci/run)"]
fn claude_interactive_denied_in_the_window_first_and_the_cli_is_told() {
    let claude = require_claude();
    let model = ModelStandIn::start(vec![Step::bash(python("one.txt")), Step::text("Done.")]);
    let (env, repo) = claude_world(&claude, &model, true, "");
    let _d = env.start_daemon();
    let (run, window, worktree) = interactive_asking(&env, &repo);
    // The dialog is drawn again ~150 ms after it first appears: keys wait for that.
    std::thread::sleep(Duration::from_millis(800));
    let keys = env.tmux(&["send-keys", "-t", &window, "Escape"]);
    assert!(keys.status.success(), "{keys:?}");
    let d = wait_decided(&env, &run);
    assert_eq!(d["actor"], json!("daemon"), "{d}");
    assert_eq!(d["data"]["by"], json!("window"), "{d}");
    assert_eq!(d["data"]["behavior"], json!("deny"), "{d}");
    assert!(
        d["data"]["reason"]
            .as_str()
            .unwrap()
            .starts_with("answered No (or cancelled) in the agent's window"),
        "the hook said so as Claude Code ended it: {d}"
    );
    let out = env.cli(["node", "allow", &run, "--node", "py"]);
    assert_eq!(out.code, 4, "{out:?}");
    assert!(
        out.stderr.contains("already decided: denied by window"),
        "{out:?}"
    );
    assert_eq!(decided(&env, &run).len(), 1);
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        !std::path::Path::new(&worktree).join("one.txt").exists(),
        "python3 never ran"
    );
}

/// Interactive: answered Yes in the window while the hook waits. The tool runs; its
/// `PostToolUse` makes the window's allow the decision, the waiting hook stops, and the CLI's
/// deny after it is refused naming it.
#[test]
#[ignore = "needs the real Claude Code CLI: set OCTL_TEST_CLAUDE_BIN or npm-install it under .ci/node (see .ci/run)"]
fn claude_interactive_allowed_in_the_window_first_and_the_cli_is_told() {
    let claude = require_claude();
    let model = ModelStandIn::start(vec![Step::bash(python("one.txt")), Step::text("Done.")]);
    let (env, repo) = claude_world(&claude, &model, true, "");
    let _d = env.start_daemon();
    let (run, window, worktree) = interactive_asking(&env, &repo);
    std::thread::sleep(Duration::from_millis(800));
    let keys = env.tmux(&["send-keys", "-t", &window, "Enter"]);
    assert!(keys.status.success(), "{keys:?}");
    let d = wait_decided(&env, &run);
    assert_eq!(d["data"]["by"], json!("window"), "{d}");
    assert_eq!(d["data"]["behavior"], json!("allow"), "{d}");
    assert!(std::path::Path::new(&worktree).join("one.txt").exists());
    let out = env.cli(["node", "deny", &run, "--node", "py"]);
    assert_eq!(out.code, 4, "{out:?}");
    assert!(
        out.stderr.contains("already decided: allowed by window"),
        "{out:?}"
    );
    assert_eq!(decided(&env, &run).len(), 1);
}
