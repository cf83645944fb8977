//! A node's activity from its agent's hooks, without Claude Code: a `shell` agent runs the
//! same `orchestratectl hook EVENT` Claude Code's hooks run, with a hook's JSON on stdin.
//! (The real Claude Code's hooks are in `claude_hooks.rs`.)

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use octl_tests::{bin, wait_until, TestEnv};
use serde_json::{json, Value};

/// `orchestratectl hook EVENT` as a hook runs it, in an agent's environment; its status and
/// stdout.
fn hook(env: &TestEnv, run: &str, node: &str, event: &str, input: Value) -> (i32, String) {
    let mut cmd = Command::new(bin("orchestratectl"));
    cmd.args(["hook", event]);
    env.isolate(&mut cmd);
    cmd.env("OCTL_RUN", run)
        .env("OCTL_NODE", node)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn node_of(show: &Value, id: &str) -> Value {
    show["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == json!(id))
        .cloned()
        .unwrap()
}

#[test]
fn with_the_daemon_down_a_hook_exits_0_at_once_and_starts_nothing() {
    let env = TestEnv::new();
    std::fs::create_dir_all(&env.home).unwrap();
    let input = json!({"hook_event_name": "PreToolUse", "tool_name": "Bash", "session_id": "x"});
    let (code, stdout) = hook(
        &env,
        "01JDXJ0000000000000000000A",
        "a",
        "PreToolUse",
        input.clone(),
    );
    assert_eq!(code, 0);
    assert_eq!(stdout, "", "nothing Claude Code could read as a decision");
    // A permission request, too: no decision, so the agent does what it would without it.
    let (code, stdout) = hook(
        &env,
        "01JDXJ0000000000000000000A",
        "a",
        "PermissionAsk",
        json!({"hook_event_name": "PermissionRequest", "tool_name": "Bash",
               "tool_input": {"command": "python3 x.py"}}),
    );
    assert_eq!((code, stdout.as_str()), (0, ""));
    // A lock file left by a daemon that is gone, and a socket file nothing listens on (as a
    // service manager's would be): still down, and the socket is not touched.
    std::fs::write(env.home.join("octld.lock"), "999999999 0.1.0\n").unwrap();
    let listener = std::os::unix::net::UnixListener::bind(env.socket()).unwrap();
    listener.set_nonblocking(true).unwrap();
    let (code, stdout) = hook(&env, "01JDXJ0000000000000000000A", "a", "Stop", input);
    assert_eq!((code, stdout.as_str()), (0, ""));
    assert!(
        listener.accept().is_err(),
        "the hook never connects to a socket whose daemon is gone (socket activation)"
    );
    // Outside an agent window (no OCTL_RUN) it does nothing either.
    let mut cmd = Command::new(bin("orchestratectl"));
    cmd.args(["hook", "Stop"]).stdin(Stdio::null());
    env.isolate(&mut cmd);
    assert_eq!(cmd.status().unwrap().code(), Some(0));
}

#[test]
fn hooks_set_a_live_nodes_activity_and_nothing_else_may() {
    let (env, _d, repo) = TestEnv::world();
    let go = env.home.join("go");
    // The agent says what it does through the hook entry, then works until told to finish.
    let task = format!(
        "echo '{{\"hook_event_name\":\"PreToolUse\",\"tool_name\":\"Bash\",\"tool_input\":{{\"command\":\"make test\"}}}}' | orchestratectl hook PreToolUse; until [ -f {go} ]; do sleep 0.05; done; printf x > x.txt",
        go = go.display()
    );
    let spawned = env
        .spawn(
            "spinoff",
            &repo,
            &task,
            json!({"agent": "shell", "node": "worker"}),
        )
        .unwrap();
    let run = spawned["id"].as_str().unwrap().to_string();
    let node = wait_until("the agent's hook", Duration::from_secs(30), || {
        let n = node_of(&env.rpc("run.show", json!({"run": run})), "worker");
        (n["activity"]["state"] == json!("working")).then_some(n)
    });
    assert_eq!(
        node["state"],
        json!("running"),
        "activity never moves the node"
    );
    assert_eq!(node["activity"]["detail"], json!("Bash: make test"));
    assert!(node["activity"]["since"].as_str().unwrap().ends_with('Z'));
    let ev = env
        .log_events(&run)
        .into_iter()
        .find(|e| e["type"] == json!("node.activity"))
        .unwrap();
    assert_eq!(ev["actor"], json!("agent"));
    assert_eq!(ev["data"]["hook"], json!("PreToolUse"));

    // From outside: a permission prompt (as Claude Code's Notification says it).
    let (code, out) = hook(
        &env,
        &run,
        "worker",
        "Notification",
        json!({"hook_event_name": "Notification", "message": "Claude needs your permission to use Bash",
               "notification_type": "permission_prompt"}),
    );
    assert_eq!((code, out.as_str()), (0, ""));
    let show = env.rpc("run.show", json!({"run": run}));
    let n = node_of(&show, "worker");
    assert_eq!(n["activity"]["state"], json!("needs_permission"));
    assert_eq!(show["manifest"]["activity"], json!({"needs_permission": 1}));
    let text = env.cli(["run", "show", &run]).ok().stdout.clone();
    assert!(text.contains("ACTIVITY"), "{text}");
    assert!(text.contains("needs_permission"), "{text}");
    assert!(
        text.contains("Claude needs your permission to use Bash"),
        "{text}"
    );
    let list = env.cli(["run", "list"]).ok().stdout.clone();
    assert!(list.contains("needs_permission"), "{list}");

    // Nobody but the agent says it.
    for actor in ["human", "tool"] {
        let err = env
            .try_rpc(
                "event.append",
                json!({"run": run, "node": "worker", "type": "node.activity", "actor": actor,
                       "data": {"state": "idle"}}),
            )
            .unwrap_err();
        assert_eq!(err["data"]["kind"], json!("forbidden"), "{err}");
    }
    let bad = env
        .try_rpc(
            "event.append",
            json!({"run": run, "node": "worker", "type": "node.activity", "actor": "agent",
                   "data": {"state": "busy"}}),
        )
        .unwrap_err();
    assert_eq!(bad["data"]["kind"], json!("invalid_params"), "{bad}");

    // Once the node is finished, its agent has nothing more to say.
    std::fs::write(&go, "").unwrap();
    env.wait_status(&run, &["completed"]);
    let late = env
        .try_rpc(
            "event.append",
            json!({"run": run, "node": "worker", "type": "node.activity", "actor": "agent",
                   "data": {"state": "idle"}}),
        )
        .unwrap_err();
    assert!(
        late["data"]["kind"] == json!("invalid_transition"),
        "{late}"
    );
    let (code, _) = hook(
        &env,
        &run,
        "worker",
        "Stop",
        json!({"hook_event_name": "Stop"}),
    );
    assert_eq!(code, 0, "a refused hook still never fails the agent");
}

#[test]
fn an_agent_without_hooks_is_unknown_since_it_started_never_done() {
    let (env, _d, repo) = TestEnv::world();
    let go = env.home.join("go");
    let spawned = env
        .spawn(
            "spinoff",
            &repo,
            &format!("until [ -f {} ]; do sleep 0.05; done", go.display()),
            json!({"agent": "shell", "node": "quiet"}),
        )
        .unwrap();
    let run = spawned["id"].as_str().unwrap().to_string();
    let node = env.wait_node(&run, "quiet", "running");
    assert_eq!(node["activity"]["state"], json!("unknown"));
    assert_eq!(node["activity"]["since"], node["started_at"]);
    let out = env.cli(["--json", "run", "show", &run]).ok().json();
    assert_eq!(out["nodes"][0]["activity"]["state"], json!("unknown"));
    std::fs::write(&go, "").unwrap();
    env.wait_status(&run, &["completed"]);
}
