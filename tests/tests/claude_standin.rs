//! The real Claude Code CLI against the scripted Messages API stand-in ([`octl_tests::model`]),
//! without the daemon. The tests that need the CLI are `#[ignore]`d: run them with
//! `cargo test -p octl-tests -- --ignored`, as `.ci/run` does; a missing CLI then fails them.
//!
//! The stand-in's own behaviour (script position, side requests, unknown paths) is also checked
//! over raw HTTP, which needs no CLI.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use octl_tests::model::{
    apply_claude_env, print_argv, require_claude, run_with_timeout, seed_claude_config,
    stream_json_result, ModelStandIn, Step, DEFAULT_FINAL_TEXT, SIDE_REPLY_TEXT,
};
use serde_json::{json, Value};

const CLAUDE_TIMEOUT: Duration = Duration::from_secs(90);

/// A temp world: `$HOME`, `$CLAUDE_CONFIG_DIR` and a git repository with one commit on `main`.
struct World {
    root: tempfile::TempDir,
    home: PathBuf,
    config: PathBuf,
    repo: PathBuf,
}

impl World {
    fn new() -> World {
        let root = tempfile::Builder::new()
            .prefix("octl-claude-")
            .tempdir()
            .expect("temp dir");
        let home = root.path().join("home");
        let config = root.path().join("claude");
        let repo = root.path().join("repo");
        for dir in [&home, &config, &repo] {
            std::fs::create_dir_all(dir).unwrap();
        }
        // Canonical paths: Claude Code reports and keys its config by them.
        let world = World {
            home: home.canonicalize().unwrap(),
            config: config.canonicalize().unwrap(),
            repo: repo.canonicalize().unwrap(),
            root,
        };
        world.git(&["init", "-q", "-b", "main"]);
        std::fs::write(world.repo.join("README.md"), "# test\n").unwrap();
        world.git(&["add", "README.md"]);
        world.git(&["commit", "-q", "-m", "initial"]);
        world
    }

    fn git_env(&self, cmd: &mut Command) {
        cmd.env("GIT_AUTHOR_NAME", "Octl Test")
            .env("GIT_AUTHOR_EMAIL", "test@octl.invalid")
            .env("GIT_COMMITTER_NAME", "Octl Test")
            .env("GIT_COMMITTER_EMAIL", "test@octl.invalid")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", self.home.join(".gitconfig"))
            .env("HOME", &self.home);
    }

    fn git(&self, args: &[&str]) -> String {
        let mut cmd = Command::new("git");
        cmd.arg("-C").arg(&self.repo).args(args);
        self.git_env(&mut cmd);
        let out = cmd.output().expect("run git");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// `claude <args>` in the repository, isolated and pointed at the stand-in.
    fn claude(&self, bin: &Path, model: &ModelStandIn, args: &[String]) -> Command {
        let mut cmd = Command::new(bin);
        cmd.args(args)
            .current_dir(&self.repo)
            .stdin(std::process::Stdio::null());
        self.git_env(&mut cmd);
        apply_claude_env(&mut cmd, &model.url(), &self.home, &self.config);
        cmd
    }
}

/// The text blocks of a request's first user message (where the prompt or the expanded skill is).
fn first_user_texts(request: &Value) -> Vec<String> {
    let message = request["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "user"))
        .expect("a user message");
    match &message["content"] {
        Value::String(s) => vec![s.clone()],
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str().map(str::to_string))
            .collect(),
        _ => vec![],
    }
}

#[test]
#[ignore = "needs the real Claude Code CLI: set OCTL_TEST_CLAUDE_BIN or npm-install it under .ci/node (see .ci/run)"]
fn print_mode_runs_the_script_and_commits() {
    let bin = require_claude();
    let world = World::new();
    let model = ModelStandIn::start(vec![
        Step::bash_described("printf 'hello\\n' > hello.txt", "Create hello.txt"),
        Step::bash_described(
            "git add hello.txt && git commit -q -m 'Add hello.txt'",
            "Commit hello.txt",
        ),
        Step::text("Created and committed hello.txt."),
    ]);
    // A prompt that starts with '-', spans lines and holds both kinds of quotes: `--` keeps it
    // from being read as an option or as one more value of the variadic --allowedTools.
    let prompt = "- create hello.txt and commit it.\nSay \"done\" when it's committed; don't push.";
    let system = "OCTL-APPENDED-SYSTEM-PROMPT: report with orchestratectl node done.";
    let argv = print_argv(
        prompt,
        &["Bash(git *)", "Bash(orchestratectl *)"],
        Some(system),
    );
    let out = run_with_timeout(&mut world.claude(&bin, &model, &argv), CLAUDE_TIMEOUT)
        .unwrap_or_else(|e| panic!("{e}"));
    eprintln!("claude -p took {:?}", out.elapsed);
    assert!(
        out.status.success(),
        "claude -p failed ({}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        out.stdout,
        out.stderr
    );

    // Every stdout line is JSON; the last one is the result.
    for line in out.stdout.lines() {
        serde_json::from_str::<Value>(line)
            .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"));
    }
    let result = stream_json_result(&out.stdout).expect("a result line");
    assert_eq!(result["subtype"], "success", "{result}");
    assert_eq!(result["is_error"], false, "{result}");
    assert_eq!(result["num_turns"], 3, "{result}");
    assert_eq!(
        result["result"], "Created and committed hello.txt.",
        "{result}"
    );
    assert!(result["total_cost_usd"].as_f64().is_some(), "{result}");
    assert_eq!(result["permission_denials"], json!([]), "{result}");
    let init: Value = serde_json::from_str(out.stdout.lines().next().unwrap()).unwrap();
    assert_eq!(init["type"], "system");
    assert_eq!(init["subtype"], "init");
    assert_eq!(init["permissionMode"], "acceptEdits");

    // The commit is there, with the file, and nothing is left over.
    assert_eq!(world.git(&["log", "-1", "--format=%s"]), "Add hello.txt");
    assert_eq!(world.git(&["show", "HEAD:hello.txt"]), "hello");
    assert_eq!(world.git(&["status", "--porcelain"]), "");

    // What Claude Code sent: three main requests (one per step), the prompt verbatim, the
    // appended system prompt, and the Bash results fed back.
    let main = model.main_requests();
    assert_eq!(main.len(), 3, "main requests: {main:#?}");
    let texts = first_user_texts(&main[0]);
    assert!(
        texts.iter().any(|t| t == prompt),
        "prompt not sent verbatim: {texts:#?}"
    );
    assert!(
        main[0]["system"]
            .to_string()
            .contains("OCTL-APPENDED-SYSTEM-PROMPT"),
        "appended system prompt missing"
    );
    assert_eq!(main[0]["stream"], true);
    let last = main[2]["messages"].to_string();
    assert!(last.contains("tool_result"), "{last}");
}

#[test]
#[ignore = "needs the real Claude Code CLI: set OCTL_TEST_CLAUDE_BIN or npm-install it under .ci/node (see .ci/run)"]
fn installed_skill_is_expanded_in_the_request() {
    let bin = require_claude();
    let world = World::new();
    let skill_dir = world.config.join("skills/hello-octl");
    std::fs::create_dir_all(&skill_dir).unwrap();
    std::fs::write(
        skill_dir.join("SKILL.md"),
        "---\nname: hello-octl\ndescription: Greets someone through orchestratectl. Use when asked to say hello with octl.\n---\n\nHELLO-OCTL-BODY: greet $ARGUMENTS, then stop.\n",
    )
    .unwrap();
    let model = ModelStandIn::start(vec![Step::text("Hello, world.")]);
    let argv = print_argv("/hello-octl world", &[], None);
    let out = run_with_timeout(&mut world.claude(&bin, &model, &argv), CLAUDE_TIMEOUT)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        out.status.success(),
        "claude -p failed ({}):\n{}\n{}",
        out.status,
        out.stdout,
        out.stderr
    );
    let result = stream_json_result(&out.stdout).expect("a result line");
    assert_eq!(result["result"], "Hello, world.", "{result}");

    let main = model.main_requests();
    assert_eq!(main.len(), 1, "main requests: {main:#?}");
    let texts = first_user_texts(&main[0]);
    assert!(
        texts
            .iter()
            .any(|t| t.contains("HELLO-OCTL-BODY: greet world, then stop.")),
        "skill body with $ARGUMENTS replaced not sent: {texts:#?}"
    );
    assert!(
        !main[0].to_string().contains("greet $ARGUMENTS"),
        "$ARGUMENTS left unexpanded"
    );
}

fn tmux_available() -> bool {
    Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A private tmux server in a temp dir; killed on drop.
struct Tmux {
    socket: PathBuf,
    /// The pane's process (Claude Code itself: tmux execs a multi-word command directly).
    pane_pid: std::cell::Cell<Option<i32>>,
}

impl Tmux {
    fn cmd(&self) -> Command {
        let mut cmd = Command::new("tmux");
        cmd.arg("-S").arg(&self.socket).arg("-f").arg("/dev/null");
        cmd
    }

    fn screen(&self) -> String {
        let out = self
            .cmd()
            .args(["capture-pane", "-p", "-J", "-t", "t"])
            .output()
            .expect("tmux capture-pane");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits until the screen satisfies `check`; panics with the screen after `timeout`.
    fn wait_screen(&self, what: &str, timeout: Duration, check: impl Fn(&str) -> bool) -> String {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let screen = self.screen();
            if check(&screen) {
                return screen;
            }
            if std::time::Instant::now() >= deadline {
                panic!("timed out after {timeout:?} waiting for {what}; the screen:\n{screen}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn keys(&self, keys: &[&str]) {
        let status = self
            .cmd()
            .args(["send-keys", "-t", "t"])
            .args(keys)
            .status()
            .expect("tmux send-keys");
        assert!(status.success());
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        // Kill Claude Code first and wait until it is gone: exiting on the server's hang-up, it
        // would still write into $CLAUDE_CONFIG_DIR after the temp dir is removed.
        if let Some(pid) = self.pane_pid.get() {
            // SAFETY: plain kill(2) on the pane's own process.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            let zombie = || {
                std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                    let state = stat.rsplit(')').next().unwrap_or("").trim_start();
                    state.starts_with('Z')
                })
            };
            // SAFETY: signal 0 only asks whether the process exists.
            let alive = || unsafe { libc::kill(pid, 0) } == 0 && !zombie();
            let deadline = Instant::now() + Duration::from_secs(10);
            while alive() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        let _ = self.cmd().arg("kill-server").output();
    }
}

const TRUST_YES: &str = "Yes, I trust this folder";

/// Answers Claude Code's workspace-trust dialog with keys, the way a supervisor has to: the
/// dialog is drawn once and redrawn about 150 ms later with the selection reset to its default
/// ("No, exit") and keys sent to the first drawing lost. So: wait until the dialog has been on
/// screen for a while, move to "Yes", check that the selection holds, and only then press Enter.
fn accept_trust_dialog(tmux: &Tmux) {
    let yes_selected = |s: &str| {
        s.lines()
            .any(|l| l.trim_start().starts_with(&format!("❯ {TRUST_YES}")))
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut shown_since: Option<Instant> = None;
    loop {
        if tmux.screen().contains(TRUST_YES) {
            if shown_since.get_or_insert_with(Instant::now).elapsed() >= Duration::from_millis(500)
            {
                break;
            }
        } else {
            shown_since = None;
        }
        assert!(
            Instant::now() < deadline,
            "no stable trust dialog:\n{}",
            tmux.screen()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let poll = |what: &dyn Fn(&str) -> bool, timeout: Duration| {
        let until = Instant::now() + timeout;
        loop {
            if what(&tmux.screen()) {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    for _ in 0..10 {
        if !yes_selected(&tmux.screen()) {
            tmux.keys(&["Down"]);
            if !poll(&yes_selected, Duration::from_secs(1)) {
                continue;
            }
        }
        // The selection must hold (no redraw in between) before Enter may be pressed.
        std::thread::sleep(Duration::from_millis(200));
        if !yes_selected(&tmux.screen()) {
            continue;
        }
        tmux.keys(&["Enter"]);
        if poll(&|s: &str| !s.contains(TRUST_YES), Duration::from_secs(5)) {
            return;
        }
    }
    panic!("could not accept the trust dialog:\n{}", tmux.screen());
}

/// Interactive `claude` in a tmux pane of a new directory: the workspace-trust dialog comes up
/// (default "No, exit"), Down + Enter accepts it, and the session then runs the script with
/// `--permission-mode acceptEdits --allowedTools "Bash(git *)"` (git commit allowed).
#[test]
#[ignore = "needs the real Claude Code CLI: set OCTL_TEST_CLAUDE_BIN or npm-install it under .ci/node (see .ci/run)"]
fn interactive_session_in_tmux_passes_the_trust_dialog_with_keys() {
    let bin = require_claude();
    assert!(
        tmux_available(),
        "tmux is not installed (.ci/run installs it)"
    );
    let world = World::new();
    // Onboarding done (our temp config only); workspace trust deliberately not granted.
    seed_claude_config(&world.config, &[]);
    let model = ModelStandIn::start(vec![
        Step::bash("printf 'hi\\n' > hi.txt"),
        Step::bash("git add hi.txt && git commit -q -m 'Add hi.txt'"),
        Step::text("Committed hi.txt."),
    ]);
    let tmux = Tmux {
        socket: world.root.path().join("tmux.sock"),
        pane_pid: std::cell::Cell::new(None),
    };
    // The server inherits this command's environment, so the pane gets the isolated one.
    let mut start = tmux.cmd();
    start
        .args([
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            "200",
            "-y",
            "50",
            "-c",
        ])
        .arg(&world.repo)
        .arg(&bin)
        .args([
            "--permission-mode",
            "acceptEdits",
            "--allowedTools",
            "Bash(git *)",
            "Bash(orchestratectl *)",
            "--",
            "create hi.txt and commit it",
        ]);
    world.git_env(&mut start);
    apply_claude_env(&mut start, &model.url(), &world.home, &world.config);
    start.env_remove("TMUX").env("TERM", "xterm-256color");
    assert!(start.status().expect("tmux new-session").success());
    let pid = tmux
        .cmd()
        .args(["display-message", "-p", "-t", "t", "#{pane_pid}"])
        .output()
        .expect("tmux display-message");
    tmux.pane_pid
        .set(String::from_utf8_lossy(&pid.stdout).trim().parse().ok());

    let screen = tmux.wait_screen("the workspace trust dialog", Duration::from_secs(30), |s| {
        s.contains("Yes, I trust this folder")
    });
    assert!(screen.contains("Accessing workspace:"), "{screen}");
    assert!(screen.contains("❯ No, exit"), "default changed? {screen}");
    assert!(
        model.main_requests().is_empty(),
        "ran before trust was given"
    );
    accept_trust_dialog(&tmux);

    let screen = tmux.wait_screen("the final reply", Duration::from_secs(60), |s| {
        s.contains("Committed hi.txt.")
    });
    assert_eq!(world.git(&["log", "-1", "--format=%s"]), "Add hi.txt");
    assert!(!screen.contains("custom API key"), "{screen}");
    assert_eq!(model.main_requests().len(), 3);
    // Accepting wrote the trust into our temp config (Claude Code does that itself).
    let config: Value =
        serde_json::from_slice(&std::fs::read(world.config.join(".claude.json")).unwrap()).unwrap();
    assert_eq!(
        config["projects"][world.repo.display().to_string()]["hasTrustDialogAccepted"],
        true
    );
}

// ---------------------------------------------------------------------------------------------
// The stand-in alone, over raw HTTP (no CLI needed).

fn post(model: &ModelStandIn, path: &str, body: &Value) -> (u16, String) {
    let mut stream = TcpStream::connect(model.addr()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let body = body.to_string();
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response[9..12].parse().unwrap();
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

fn bash_tool() -> Value {
    json!({"name": "Bash", "input_schema": {"type": "object"}})
}

#[test]
fn stand_in_follows_the_conversation_not_a_counter() {
    let model = ModelStandIn::start(vec![Step::bash("echo one"), Step::bash("echo two")]);
    let ask = |messages: Value, stream: bool| {
        let body =
            json!({"model": "m", "stream": stream, "tools": [bash_tool()], "messages": messages});
        post(&model, "/v1/messages?beta=true", &body)
    };
    let start = json!([{"role": "user", "content": "go"}]);
    // The first request, asked twice (a retry), gets the first step both times.
    for _ in 0..2 {
        let (status, body) = ask(start.clone(), false);
        assert_eq!(status, 200);
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["stop_reason"], "tool_use");
        assert_eq!(v["content"][0]["input"]["command"], "echo one");
    }
    // A side request in between changes nothing.
    let (status, body) = post(
        &model,
        "/v1/messages",
        &json!({"model": "m", "messages": [{"role": "user", "content": "title?"}]}),
    );
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["content"][0]["text"],
        SIDE_REPLY_TEXT
    );
    // After one tool_result: the second step, streamed.
    let one = json!([
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "Bash", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "one"}]},
    ]);
    let (status, sse) = ask(one, true);
    assert_eq!(status, 200);
    let events: Vec<&str> = sse
        .lines()
        .filter_map(|l| l.strip_prefix("event: "))
        .collect();
    assert_eq!(
        events,
        [
            "message_start",
            "ping",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    assert!(sse.contains(r#"\"command\":\"echo two\""#), "{sse}");
    assert!(sse.contains(r#""stop_reason":"tool_use""#), "{sse}");
    // After two: the final text, end_turn.
    let two = json!([
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "Bash", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "one"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "b", "name": "Bash", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "b", "content": "two"}]},
    ]);
    let (_, body) = ask(two, false);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["stop_reason"], "end_turn");
    assert_eq!(v["content"][0]["text"], DEFAULT_FINAL_TEXT);

    assert_eq!(model.main_requests().len(), 4);
    assert_eq!(model.requests().len(), 5);
}

#[test]
fn stand_in_answers_side_requests_and_unknown_paths() {
    let model = ModelStandIn::start(vec![]);
    // A structured-output side request (Claude Code's session title) gets JSON of that shape.
    let title = json!({
        "model": "m", "tools": [], "messages": [{"role": "user", "content": "name it"}],
        "output_config": {"format": {"type": "json_schema", "schema": {
            "type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}}},
    });
    let (status, body) = post(&model, "/v1/messages", &title);
    assert_eq!(status, 200);
    let v: Value = serde_json::from_str(&body).unwrap();
    let text: Value = serde_json::from_str(v["content"][0]["text"].as_str().unwrap()).unwrap();
    assert!(text["title"].is_string(), "{text}");
    // A forced tool gets called.
    let forced = json!({
        "model": "m", "messages": [{"role": "user", "content": "x"}],
        "tools": [{"name": "Pick", "input_schema": {"type": "object", "properties": {"n": {"type": "integer"}}}}],
        "tool_choice": {"type": "tool", "name": "Pick"},
    });
    let (_, body) = post(&model, "/v1/messages", &forced);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["content"][0]["name"], "Pick");
    assert_eq!(v["content"][0]["input"], json!({"n": 0}));
    // count_tokens and unknown paths.
    let (status, body) = post(
        &model,
        "/v1/messages/count_tokens",
        &json!({"messages": []}),
    );
    assert_eq!(status, 200);
    assert!(serde_json::from_str::<Value>(&body).unwrap()["input_tokens"].is_u64());
    let (status, body) = post(&model, "/v1/nope", &json!({}));
    assert_eq!(status, 404);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["error"]["type"],
        "not_found_error"
    );
    assert!(model.main_requests().is_empty());
    assert_eq!(model.log().len(), 4);
}
