//! Notifications end to end, with shell agents: the `[notify]` command and webhook of
//! config.toml are told once per transition into a state that needs a person — here an
//! agent's question and its failure — and never again, not after a daemon restart either.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use octl_tests::wait::wait_until;
use octl_tests::{TestEnv, TestRepo};
use serde_json::{json, Value};

/// A tiny HTTP server on 127.0.0.1 that records each POST's body and answers 204.
struct Hook {
    port: u16,
    bodies: Arc<Mutex<Vec<Value>>>,
}

impl Hook {
    fn start() -> Hook {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let seen = bodies.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut len = 0usize;
                let mut line = String::new();
                let mut first = true;
                loop {
                    line.clear();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        break;
                    }
                    if first {
                        assert!(line.starts_with("POST /hook "), "{line}");
                        first = false;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap();
                    }
                    if line == "\r\n" {
                        break;
                    }
                }
                let mut body = vec![0; len];
                if reader.read_exact(&mut body).is_ok() {
                    seen.lock()
                        .unwrap()
                        .push(serde_json::from_slice(&body).unwrap());
                }
                let _ = stream.write_all(b"HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n");
            }
        });
        Hook { port, bodies }
    }

    fn bodies(&self) -> Vec<Value> {
        self.bodies.lock().unwrap().clone()
    }
}

/// The notices the command appended to `file`, one JSON object per line.
fn told(file: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn kinds(notices: &[Value]) -> Vec<String> {
    notices
        .iter()
        .map(|n| n["kind"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_question_and_a_failure_are_told_once_each_even_across_a_restart() {
    let env = TestEnv::new();
    let hook = Hook::start();
    let file = env.root.path().join("told.jsonl");
    env.write_config(&format!(
        "[notify]\ncommand = [\"sh\", \"-c\", \"cat >> {}\"]\nwebhook = \"http://127.0.0.1:{}/hook\"\n",
        file.display(),
        hook.port
    ));
    let d = env.start_daemon();
    let repo = TestRepo::new(&env, "repo");
    // The agent asks a question (without waiting for the answer), then fails. It asks once
    // its start is recorded: a report that beats `node.started` makes the daemon refuse the
    // start and close the window (a race of its own, not what this test is about).
    let spawned = env
        .spawn(
            "spinoff",
            &repo,
            "until orchestratectl --json run show \"$OCTL_RUN\" | grep -q started_at; do :; done; orchestratectl discussion ask --title 'which db?' && exit 3",
            json!({"agent": "shell", "node": "asker"}),
        )
        .unwrap();
    let run = spawned["id"].as_str().unwrap().to_string();
    let n = wait_until("two notices", Duration::from_secs(30), || {
        let t = told(&file);
        (t.len() >= 2).then_some(t)
    });
    assert_eq!(kinds(&n), ["question", "failed"], "{n:?}");
    assert_eq!(n[0]["run"], json!(run));
    assert_eq!(n[0]["node"], json!("asker"));
    assert_eq!(n[0]["v"], json!(1));
    assert_eq!(n[0]["run_kind"], json!("spinoff"));
    assert_eq!(n[0]["event"]["type"], json!("discussion.opened"));
    assert_eq!(n[1]["event"]["type"], json!("node.failed"));
    // The question carries the command that answers it, and that command does.
    let command = n[0]["command"].as_str().unwrap().replace("'…'", "sqlite");
    let words: Vec<&str> = command.split_whitespace().collect();
    assert_eq!(
        words[..3],
        ["orchestratectl", "discussion", "answer"],
        "{command}"
    );
    env.cli(&words[1..]).ok();
    let asked = env.rpc("discussion.list", json!({"run": run}));
    assert_eq!(asked[0]["answer"], json!("sqlite"), "{asked}");
    assert!(
        n[0]["message"]
            .as_str()
            .unwrap()
            .contains(&command.replace("sqlite", "'…'")),
        "{}",
        n[0]
    );
    assert!(
        n[1]["message"]
            .as_str()
            .unwrap()
            .contains("node asker failed"),
        "{}",
        n[1]
    );
    // Each event's seq is the log's own.
    let events = env.log_events(&run);
    for notice in &n {
        let seq = notice["event"]["seq"].as_u64().unwrap();
        assert_eq!(events[seq as usize - 1], notice["event"]);
    }
    // The webhook got the same JSON.
    let posted = wait_until("two webhook posts", Duration::from_secs(30), || {
        let b = hook.bodies();
        (b.len() >= 2).then_some(b)
    });
    assert_eq!(posted, n);

    // A restart replays the log and tells nothing again.
    env.rpc("daemon.shutdown", json!({}));
    d.wait_exit();
    let _d = env.start_daemon();
    env.wait_status(&run, &["failed", "waiting"]);
    // A new transition after the restart is told, once.
    env.cli(["run", "retry", &run, "--node", "asker"]).ok();
    let n = wait_until("four notices", Duration::from_secs(30), || {
        let t = told(&file);
        (t.len() >= 4).then_some(t)
    });
    env.wait_status(&run, &["failed", "waiting"]);
    // Anything told twice would have arrived by the time the retried node failed.
    let posted = wait_until("four webhook posts", Duration::from_secs(30), || {
        let b = hook.bodies();
        (b.len() >= 4).then_some(b)
    });
    let n2 = told(&file);
    assert_eq!(
        kinds(&n2),
        ["question", "failed", "question", "failed"],
        "{n2:?}"
    );
    assert_eq!(n2, n);
    assert_eq!(posted, n2);
    let seqs: Vec<u64> = n2
        .iter()
        .map(|x| x["event"]["seq"].as_u64().unwrap())
        .collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
}

#[test]
fn a_failing_notifier_is_logged_and_blocks_nothing() {
    let env = TestEnv::new();
    // A notifier that fails, and a webhook nobody listens on.
    let dead = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = dead.local_addr().unwrap().port();
    drop(dead);
    env.write_config(&format!(
        "[notify]\ncommand = [\"sh\", \"-c\", \"echo nope >&2; exit 9\"]\nwebhook = \"http://127.0.0.1:{port}/hook\"\n"
    ));
    let _d = env.start_daemon();
    let repo = TestRepo::new(&env, "repo");
    let spawned = env
        .spawn(
            "spinoff",
            &repo,
            "exit 4",
            json!({"agent": "shell", "node": "boom"}),
        )
        .unwrap();
    let run = spawned["id"].as_str().unwrap().to_string();
    let show = env.wait_status(&run, &["failed"]);
    assert_eq!(show["nodes"][0]["state"], json!("failed"));
    let log = env.home.join("octld.log");
    wait_until(
        "the notifier's failures in octld.log",
        Duration::from_secs(30),
        || {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            (text.contains("notifier command failed")
                && text.contains("nope")
                && text.contains("notifier webhook failed"))
            .then_some(())
        },
    );
    // The engine went on: the run is still served and a new spawn works.
    let again = env
        .spawn(
            "spinoff",
            &repo,
            "true",
            json!({"agent": "shell", "node": "fine"}),
        )
        .unwrap();
    env.wait_status(again["id"].as_str().unwrap(), &["completed"]);
}

/// The `notify` check of `doctor --json`.
fn notify_check(env: &TestEnv) -> Value {
    let report = env.cli(["--json", "doctor"]).json();
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == json!("notify"))
        .cloned()
        .unwrap_or_else(|| panic!("no notify check: {report}"))
}

#[test]
fn the_last_notifier_failure_shows_in_doctor_and_daemon_status_until_it_delivers_again() {
    let env = TestEnv::new();
    std::fs::create_dir_all(&env.home).unwrap();
    let config = env.home.join("config.toml");
    std::fs::write(
        &config,
        "[notify]\ncommand = [\"sh\", \"-c\", \"echo no display here >&2; exit 1\"]\n",
    )
    .unwrap();
    let _d = env.start_daemon();
    let check = notify_check(&env);
    assert_eq!(check["status"], json!("ok"), "{check}");
    assert!(
        check["message"].as_str().unwrap().contains("command sh"),
        "{check}"
    );
    let repo = TestRepo::new(&env, "repo");
    let failing = |node: &str| {
        let run = env
            .spawn(
                "spinoff",
                &repo,
                "exit 4",
                json!({"agent": "shell", "node": node}),
            )
            .unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string();
        env.wait_status(&run, &["failed"]);
        run
    };
    let run = failing("boom");
    let failure = wait_until(
        "the failure in daemon.status",
        Duration::from_secs(30),
        || {
            let f = env.rpc("daemon.status", json!({}))["notify"]["last_failure"].clone();
            (!f.is_null()).then_some(f)
        },
    );
    assert_eq!(failure["notifier"], json!("command"), "{failure}");
    assert_eq!(failure["kind"], json!("failed"), "{failure}");
    assert_eq!(failure["run"], json!(run), "{failure}");
    let message = failure["message"].as_str().unwrap();
    assert!(
        message.contains("exit status: 1") && message.contains("no display here"),
        "{failure}"
    );
    assert!(octl_proto::time::parse_millis(failure["at"].as_str().unwrap()).is_some());
    // Where the user looks: doctor warns with the time and message, daemon status says it.
    let check = notify_check(&env);
    assert_eq!(check["status"], json!("warn"), "{check}");
    let text = check["message"].as_str().unwrap();
    assert!(
        text.contains("no display here") && text.contains(failure["at"].as_str().unwrap()),
        "{check}"
    );
    assert!(
        check["hint"].as_str().unwrap().contains("[notify]"),
        "{check}"
    );
    let status = env.cli(["daemon", "status"]).ok().stdout.clone();
    assert!(status.contains("last failure at"), "{status}");
    assert!(status.contains("no display here"), "{status}");

    // Fixed (config.toml is read at each notice): the next notice is delivered, and doctor
    // is ok again, still naming the last failure.
    let told_file = env.root.path().join("told.jsonl");
    std::fs::write(
        &config,
        format!(
            "[notify]\ncommand = [\"sh\", \"-c\", \"cat >> '{}'\"]\n",
            told_file.display()
        ),
    )
    .unwrap();
    failing("again");
    wait_until("the next notice told", Duration::from_secs(30), || {
        (!told(&told_file).is_empty()).then_some(())
    });
    let check = wait_until("doctor ok again", Duration::from_secs(30), || {
        let c = notify_check(&env);
        (c["status"] == json!("ok")).then_some(c)
    });
    let text = check["message"].as_str().unwrap();
    assert!(
        text.contains("delivered since") && text.contains("no display here"),
        "{check}"
    );
}

#[test]
#[ignore = "needs the real Claude Code CLI: set OCTL_TEST_CLAUDE_BIN or npm-install it under .ci/node (see .ci/run)"]
fn a_permission_prompt_of_the_real_claude_code_is_told_once() {
    use octl_tests::model::{claude_world, require_claude, ModelStandIn, Step};
    let claude = require_claude();
    // python3 is not among the allowed tools: acceptEdits asks "Do you want to proceed?".
    let model = ModelStandIn::start(vec![
        Step::bash("python3 -c 'print(6 * 7)'"),
        Step::text("It printed 42."),
    ]);
    let (env, repo) = claude_world(&claude, &model, true, "");
    // `[notify]` beside `[agents.claude]`: the notifier appends to a file of this world.
    let file = env.root.path().join("told.jsonl");
    env.write_config(&format!(
        "[agents.claude]\nprogram = {:?}\n[notify]\ncommand = [\"sh\", \"-c\", \"cat >> {}\"]\n",
        claude.display().to_string(),
        file.display()
    ));
    let _d = env.start_daemon();
    let spawned = env
        .spawn(
            "code",
            &repo,
            "Compute 6*7 with python",
            json!({"node": "py"}),
        )
        .unwrap();
    let run = spawned["id"].as_str().unwrap().to_string();
    let n = wait_until("a needs_permission notice", Duration::from_secs(60), || {
        let t = told(&file);
        (!t.is_empty()).then_some(t)
    });
    assert_eq!(kinds(&n), ["needs_permission"], "{n:?}");
    assert_eq!(n[0]["node"], json!("py"));
    // Told by the request it records, with the commands that answer it.
    assert_eq!(
        n[0]["event"]["type"],
        json!("node.permission_asked"),
        "{n:?}"
    );
    assert_eq!(n[0]["request"], json!("p1"), "{n:?}");
    // Yes (the first option, selected) in the window; then it goes on to idle at its prompt.
    let target = format!("{run}:py");
    wait_until("the permission dialog", Duration::from_secs(30), || {
        env.tmux_screen(&target)
            .contains("Do you want to proceed?")
            .then_some(())
    });
    assert!(env
        .tmux(&["send-keys", "-t", &target, "Enter"])
        .status
        .success());
    wait_until("idle at the prompt", Duration::from_secs(60), || {
        let show = env.rpc("run.show", json!({"run": run}));
        (show["nodes"][0]["activity"]["state"] == json!("idle")).then_some(())
    });
    // The request and every hook that said "needs permission" (Notification) made one
    // notice; working and idle made none.
    let said: Vec<Value> = env
        .log_events(&run)
        .into_iter()
        .filter(|e| e["type"] == json!("node.activity"))
        .collect();
    assert!(said.len() >= 3, "{said:?}");
    assert_eq!(kinds(&told(&file)), ["needs_permission"]);
}
