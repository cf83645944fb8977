//! `node.send` and `node.screen`: a line typed into a live interactive agent through the
//! runner, and its screen read back, with a real tmux and a shell agent; refusals name the
//! node's state. The line is never written to the run's log.

use std::time::Duration;

use octl_tests::{wait_until, TestEnv};
use serde_json::{json, Value};

fn screen(env: &TestEnv, run: &str, node: &str) -> String {
    env.rpc("node.screen", json!({"run": run, "node": node}))["screen"]
        .as_str()
        .unwrap()
        .to_string()
}

fn refused(env: &TestEnv, method: &str, params: Value) -> (String, String) {
    let err = env.try_rpc(method, params.clone()).unwrap_err();
    (
        err["data"]["kind"].as_str().unwrap_or("").to_string(),
        err["message"].as_str().unwrap_or("").to_string(),
    )
}

#[test]
fn a_line_reaches_an_interactive_agent_and_its_screen_shows_it() {
    let (env, _d, repo) = TestEnv::world();
    let task = "echo 'ready for input'; read line; echo \"got:$line\"; printf '%s\\n' \"$line\" > got.txt; read second; echo \"$second\" >> got.txt";
    let run = env
        .spawn(
            "code",
            &repo,
            task,
            json!({"agent": "shell", "node": "talk"}),
        )
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    env.wait_node(&run, "talk", "running");
    wait_until(
        "the agent's prompt on its screen",
        Duration::from_secs(30),
        || {
            screen(&env, &run, "talk")
                .contains("ready for input")
                .then_some(())
        },
    );

    // Bad text changes nothing.
    for bad in ["", "two\nlines", "bell\u{7}"] {
        let (kind, msg) = refused(
            &env,
            "node.send",
            json!({"run": run, "node": "talk", "text": bad}),
        );
        assert_eq!(kind, "invalid_params", "{bad:?}: {msg}");
        assert!(msg.starts_with("invalid text"), "{msg}");
    }
    let (kind, _) = refused(
        &env,
        "node.send",
        json!({"run": run, "node": "nope", "text": "x"}),
    );
    assert_eq!(kind, "not_found");
    let (kind, msg) = refused(
        &env,
        "node.screen",
        json!({"run": run, "node": "talk", "lines": 0}),
    );
    assert_eq!(kind, "invalid_params", "{msg}");

    let sent = env.rpc(
        "node.send",
        json!({"run": run, "node": "talk", "text": "open sesame 42"}),
    );
    assert_eq!(sent, json!({"run": run, "node": "talk", "bytes": 14}));
    wait_until(
        "the agent's answer on its screen",
        Duration::from_secs(30),
        || {
            screen(&env, &run, "talk")
                .contains("got:open sesame 42")
                .then_some(())
        },
    );
    let two = env.rpc(
        "node.screen",
        json!({"run": run, "node": "talk", "lines": 1}),
    );
    assert_eq!(two["screen"].as_str().unwrap().lines().count(), 1);

    // The CLI: `node send RUN --node N TEXT`, `node screen RUN --node N`.
    let cli = env.cli(["node", "send", &run[..10], "--node", "talk", "second line"]);
    let typed = &cli.ok().stdout;
    assert!(typed.contains("Typed 11 bytes"), "{typed}");
    assert!(
        typed.contains("the node's log shows it if the agent echoes it"),
        "{typed}"
    );
    let show = env.wait_status(&run, &["waiting", "completed", "failed"]);
    let node = show["nodes"][0].clone();
    assert!(
        ["done", "exited"].contains(&node["state"].as_str().unwrap()),
        "{node}"
    );
    let branch = node["branch"].as_str().unwrap();
    assert_eq!(
        repo.show(branch, "got.txt").as_deref(),
        Some("open sesame 42\nsecond line\n"),
        "both lines reached the agent"
    );
    // What was typed is not in the log (it may be a secret).
    let log = std::fs::read_to_string(env.run_dir(&run).join("events.jsonl")).unwrap();
    assert!(
        !log.contains("open sesame"),
        "the typed line is not recorded"
    );

    // The node has ended: refused, naming its state.
    let state = node["state"].as_str().unwrap().to_string();
    let (kind, msg) = refused(
        &env,
        "node.send",
        json!({"run": run, "node": "talk", "text": "late"}),
    );
    assert_eq!(kind, "invalid_transition", "{msg}");
    assert!(msg.contains(&format!("is {state}")), "{msg}");
    let cli = env.cli(["node", "screen", &run, "--node", "talk"]);
    assert_eq!(cli.code, 4, "{cli:?}");
    assert!(cli.stderr.contains(&format!("is {state}")), "{cli:?}");
}

#[test]
fn an_autonomous_agent_takes_no_input_but_shows_its_screen() {
    let (env, _d, repo) = TestEnv::world();
    let run = env
        .spawn(
            "spinoff",
            &repo,
            "echo working alone; sleep 60",
            json!({"agent": "shell", "node": "solo"}),
        )
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    env.wait_node(&run, "solo", "running");
    let (kind, msg) = refused(
        &env,
        "node.send",
        json!({"run": run, "node": "solo", "text": "hi"}),
    );
    assert_eq!(kind, "invalid_transition", "{msg}");
    assert!(msg.contains("is running in a spinoff run"), "{msg}");
    wait_until("the screen", Duration::from_secs(30), || {
        screen(&env, &run, "solo")
            .contains("working alone")
            .then_some(())
    });
    env.rpc("run.cancel", json!({"run": run}));
}
