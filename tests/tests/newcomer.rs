//! Rough edges a new user meets, end to end against the real daemon, git and tmux: `run logs`
//! (plain, --raw, --json, --follow ending with the node), failure reasons in `run show`,
//! reserved plan names, a bare repository, nodes in the order they were added, task text from
//! a file or stdin, `daemon restart`, setting a corrupt run aside, and `doctor`'s sandbox check
//! with and without bubblewrap.

use std::io::{Read, Write};
use std::path::Path;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use octl_tests::{wait_until, TestEnv};
use serde_json::{json, Value};

fn run_id(v: &Value) -> String {
    v["id"].as_str().unwrap().to_string()
}

/// `orchestratectl --home H <args>` with `input` on its stdin.
fn cli_stdin(env: &TestEnv, args: &[&str], input: &[u8]) -> octl_tests::Cli {
    let mut child = env.start_cli_with(args, |c| {
        c.stdin(Stdio::piped());
    });
    child.stdin.take().unwrap().write_all(input).unwrap();
    octl_tests::Cli::from(child.wait_with_output().unwrap())
}

#[test]
fn run_logs_shows_follows_until_the_node_ends_and_run_show_says_why_it_failed() {
    let (env, _d, repo) = TestEnv::world();
    let go = env.root.path().join("go");
    // The agent prints, then waits for the test's word before printing its last line and
    // failing: `--follow` must see both lines and end by itself when the node does.
    let task = format!(
        "echo first-line; while [ ! -e {} ]; do sleep 0.05; done; echo last-line; exit 3",
        go.display()
    );
    let run = run_id(
        &env.spawn(
            "spinoff",
            &repo,
            &task,
            json!({"agent": "shell", "node": "talk"}),
        )
        .unwrap(),
    );
    env.wait_node(&run, "talk", "running");

    let mut child = env.start_cli_with(["run", "logs", &run, "--follow"], |_| {});
    let mut stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel::<Vec<u8>>();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    let read = |seen: &mut Vec<u8>| {
        while let Ok(chunk) = rx.try_recv() {
            seen.extend(chunk);
        }
        String::from_utf8_lossy(seen).into_owned()
    };
    wait_until(
        "--follow to print the first line",
        Duration::from_secs(30),
        || read(&mut seen).contains("first-line").then_some(()),
    );
    assert!(!read(&mut seen).contains("last-line"));
    assert!(child.try_wait().unwrap().is_none(), "still following");
    std::fs::write(&go, "").unwrap();
    let status = wait_until(
        "--follow to end with the node",
        Duration::from_secs(30),
        || child.try_wait().unwrap(),
    );
    assert!(status.success(), "{status:?}");
    let text = loop {
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(chunk) => seen.extend(chunk),
            Err(_) => break String::from_utf8_lossy(&seen).into_owned(),
        }
    };
    assert!(
        text.contains("first-line") && text.contains("last-line"),
        "{text}"
    );
    let show = env.wait_status(&run, &["failed"]);
    assert_eq!(show["nodes"][0]["state"], json!("failed"));

    // Plain: the whole log; the only node needs no --node; --raw is the same file here.
    let plain = env.cli(["run", "logs", &run]);
    plain.ok();
    assert!(plain.stdout.contains("first-line") && plain.stdout.contains("last-line"));
    let raw = env.cli(["run", "logs", &run, "--raw", "--node", "talk"]);
    raw.ok();
    assert_eq!(raw.stdout, plain.stdout);
    let json_out = env.cli(["--json", "run", "logs", &run]);
    json_out.ok();
    let lines: Vec<Value> = json_out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    assert!(lines.iter().all(|l| l["node"] == json!("talk")));
    assert!(
        lines
            .iter()
            .any(|l| l["line"].as_str().unwrap().contains("first-line")),
        "{lines:?}"
    );

    // Unknown node: exit 3, naming the nodes there are.
    let unknown = env.cli(["--json", "run", "logs", &run, "--node", "nope"]);
    assert_eq!(unknown.code, 3, "{unknown:?}");
    assert!(unknown.error()["message"]
        .as_str()
        .unwrap()
        .contains("its nodes: talk"));

    // Human `run show`: why the node failed and where its log is.
    let human = env.cli(["run", "show", &run]);
    human.ok();
    assert!(human.stdout.contains("Failures:"), "{}", human.stdout);
    assert!(
        human.stdout.contains("talk failed:")
            && human.stdout.contains("its agent exited with status 3"),
        "{}",
        human.stdout
    );
    let log = env.run_dir(&run).join("logs").join("talk.log");
    assert!(
        human.stdout.contains(&format!("log: {}", log.display())),
        "{}",
        human.stdout
    );
}

#[test]
fn run_logs_shows_the_readable_log_raw_on_request_and_says_when_there_is_none() {
    let env = TestEnv::new();
    let _d = env.start_daemon();
    let run = env.create_run("logs");
    for node in ["a", "b"] {
        env.rpc(
            "event.append",
            json!({"run": run, "type": "node.added", "node": node}),
        );
    }
    // Two nodes: --node is needed.
    let which = env.cli(["--json", "run", "logs", &run]);
    assert_eq!(which.code, 2, "{which:?}");
    assert!(which.error()["message"]
        .as_str()
        .unwrap()
        .contains("a, b; choose one with --node"));
    // No log yet: exit 3 with the way to wait for it.
    let none = env.cli(["--json", "run", "logs", &run, "--node", "a"]);
    assert_eq!(none.code, 3, "{none:?}");
    assert!(
        none.error()["message"]
            .as_str()
            .unwrap()
            .contains("has no log yet"),
        "{none:?}"
    );
    assert!(none.error()["hint"].as_str().unwrap().contains("--follow"));

    // A Claude Code node keeps the raw stream-json and a readable rendering.
    let logs = env.run_dir(&run).join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    std::fs::write(logs.join("a.log"), "{\"type\":\"system\"}\n").unwrap();
    std::fs::write(logs.join("a.pane.log"), "● Reading README.md\nno newline").unwrap();
    let readable = env.cli(["run", "logs", &run, "--node", "a"]);
    readable.ok();
    assert_eq!(readable.stdout, "● Reading README.md\nno newline");
    let raw = env.cli(["run", "logs", &run, "--node", "a", "--raw"]);
    raw.ok();
    assert_eq!(raw.stdout, "{\"type\":\"system\"}\n");
    let json_out = env.cli(["--json", "run", "logs", &run, "--node", "a"]);
    json_out.ok();
    assert_eq!(
        json_out.stdout,
        "{\"line\":\"● Reading README.md\",\"node\":\"a\"}\n{\"line\":\"no newline\",\"node\":\"a\"}\n"
    );
}

#[test]
fn a_plan_node_named_integration_is_refused_and_nothing_is_created() {
    let (env, _d, repo) = TestEnv::world();
    let plan = env.root.path().join("plan.toml");
    std::fs::write(
        &plan,
        "[[nodes]]\nid = \"api\"\ntask = \"true\"\n[[nodes]]\nid = \"integration\"\ntask = \"true\"\ndeps = [\"api\"]\n",
    )
    .unwrap();
    let out = env.cli([
        "--json",
        "orchestrate",
        "--plan",
        plan.to_str().unwrap(),
        "--repo",
        repo.path.to_str().unwrap(),
        "--agent",
        "shell",
    ]);
    assert_eq!(out.code, 2, "{out:?}");
    let message = out.error()["message"].as_str().unwrap().to_string();
    assert!(
        message.contains("nodes[1].id \"integration\": reserved"),
        "{message}"
    );
    assert!(message.contains("octl/<RUN>/integration"), "{message}");
    assert_eq!(env.rpc("run.list", json!({})), json!([]), "nothing created");
}

#[test]
fn a_bare_repository_is_named_as_such() {
    let (env, _d, repo) = TestEnv::world();
    let bare = env.root.path().join("bare.git");
    repo.git(&["clone", "-q", "--bare", ".", bare.to_str().unwrap()]);
    let out = env.cli([
        "--json",
        "spawn",
        "spinoff",
        "--agent",
        "shell",
        "--repo",
        bare.to_str().unwrap(),
        "true",
    ]);
    assert_eq!(out.code, 2, "{out:?}");
    let err = out.error();
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("a bare repository (it has no working tree)"),
        "{err}"
    );
    assert!(err["hint"].as_str().unwrap().contains("git clone"), "{err}");
    assert_eq!(env.rpc("run.list", json!({})), json!([]), "nothing created");
}

#[test]
fn nodes_are_listed_in_the_order_they_were_added_and_projections_still_rebuild() {
    let env = TestEnv::new();
    let _d = env.start_daemon();
    let run = env.create_run("order");
    let ids: Vec<String> = (1..=12).map(|i| format!("u{i}")).collect();
    for id in &ids {
        env.rpc(
            "event.append",
            json!({"run": run, "type": "node.added", "node": id}),
        );
    }
    let shown = env.cli(["--json", "run", "show", &run]);
    shown.ok();
    let order: Vec<String> = shown.json()["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(order, ids);
    let human = env.cli(["run", "show", &run]);
    human.ok();
    let table: Vec<&str> = human
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("ID "))
        .skip(1)
        .take(12)
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(table, ids);
    let list = env.cli(["run", "list"]);
    list.ok();
    let at = |id: &str| list.stdout.find(&format!("  {id} ")).unwrap();
    assert!(at("u2") < at("u10"), "{}", list.stdout);

    let before = env.projections(&run);
    env.rpc("run.rebuild", json!({"run": run}));
    assert_eq!(env.projections(&run), before, "byte for byte");
}

#[test]
fn task_text_comes_from_a_file_or_stdin_within_its_limit() {
    let (env, _d, repo) = TestEnv::world();
    let task = "printf '%s\\n' \"it's quoted\" > from-file.txt\n# a second line, kept\n";
    let file = env.root.path().join("task.sh");
    std::fs::write(&file, task).unwrap();
    let repo_arg = repo.path.to_str().unwrap();
    let out = env.cli([
        "--json",
        "spawn",
        "spinoff",
        "--agent",
        "shell",
        "--repo",
        repo_arg,
        "--task-file",
        file.to_str().unwrap(),
    ]);
    out.ok();
    let run = run_id(&out.json());
    let show = env.wait_status(&run, &["completed"]);
    assert_eq!(
        show["nodes"][0]["task"],
        json!(task),
        "sent exactly as read"
    );
    assert_eq!(
        repo.show("main", "from-file.txt").as_deref(),
        Some("it's quoted\n")
    );

    let stdin_task = "echo from stdin > s.txt";
    let out = cli_stdin(
        &env,
        &[
            "--json",
            "spawn",
            "code",
            "--agent",
            "shell",
            "--repo",
            repo_arg,
            "--task-file",
            "-",
        ],
        stdin_task.as_bytes(),
    );
    out.ok();
    let run = run_id(&out.json());
    let show = env.rpc("run.show", json!({"run": run}));
    assert_eq!(show["nodes"][0]["task"], json!(stdin_task));

    let runs = env.rpc("run.list", json!({})).as_array().unwrap().len();
    let big = env.root.path().join("big.txt");
    std::fs::write(&big, "x".repeat(32 * 1024 + 1)).unwrap();
    let over = env.cli([
        "--json",
        "spawn",
        "spinoff",
        "--repo",
        repo_arg,
        "--task-file",
        big.to_str().unwrap(),
    ]);
    assert_eq!(over.code, 2, "{over:?}");
    assert!(
        over.error()["message"]
            .as_str()
            .unwrap()
            .contains("the limit is 32768 bytes"),
        "{over:?}"
    );
    let over_stdin = cli_stdin(
        &env,
        &[
            "--json",
            "spawn",
            "spinoff",
            "--repo",
            repo_arg,
            "--task-file",
            "-",
        ],
        &vec![b'x'; 32 * 1024 + 1],
    );
    assert_eq!(over_stdin.code, 2, "{over_stdin:?}");
    let missing = env.cli([
        "--json",
        "spawn",
        "spinoff",
        "--task-file",
        "/nonexistent/t.md",
    ]);
    assert_eq!(missing.code, 3, "{missing:?}");
    let both = env.cli(["--json", "spawn", "spinoff", "--task-file", "-", "task"]);
    assert_eq!(both.code, 2, "{both:?}");
    let not_utf8 = env.root.path().join("latin1.txt");
    std::fs::write(&not_utf8, b"caf\xe9").unwrap();
    let bad = env.cli([
        "--json",
        "spinoff",
        "propose",
        "--run",
        &run,
        "--task-file",
        not_utf8.to_str().unwrap(),
    ]);
    assert_eq!(bad.code, 2, "{bad:?}");
    assert!(bad.error()["message"]
        .as_str()
        .unwrap()
        .contains("not UTF-8"));
    assert_eq!(
        env.rpc("run.list", json!({})).as_array().unwrap().len(),
        runs,
        "nothing created by the refused ones"
    );
    // `--help` states the limit.
    let help = env.cli(["spawn", "spinoff", "--help"]);
    assert!(
        help.stdout.contains("--task-file <PATH|->"),
        "{}",
        help.stdout
    );
    assert!(help.stdout.contains("32 KiB"), "{}", help.stdout);
}

/// Stops a daemon the CLI started, even when the test fails.
struct StopOnDrop<'a>(&'a TestEnv);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        let _ = self.0.cli(["daemon", "stop"]);
    }
}

#[test]
fn daemon_restart_stops_waits_and_starts_again() {
    let env = TestEnv::new();
    let _stop = StopOnDrop(&env);
    let started = env.cli(["--json", "daemon", "start"]);
    started.ok();
    let old = started.json()["pid"].as_u64().unwrap();
    let run = env.create_run("survives a restart");

    let out = env.cli(["--json", "daemon", "restart"]);
    out.ok();
    let doc = out.json();
    assert_eq!(doc["was_running"], json!(true));
    assert_eq!(doc["stopped_pid"], json!(old));
    let new = doc["pid"].as_u64().unwrap();
    assert_ne!(new, old);
    // Gone: no process, or a zombie nobody has reaped yet (its parent, the CLI, is gone).
    let stat = std::fs::read_to_string(format!("/proc/{old}/stat")).unwrap_or_default();
    let state = stat
        .rsplit_once(')')
        .map(|(_, r)| r.trim_start().to_string());
    assert!(
        state.is_none_or(|s| s.starts_with('Z')),
        "the old daemon is gone: {stat}"
    );
    let status = env.cli(["--json", "daemon", "status"]);
    status.ok();
    assert_eq!(status.json()["pid"], json!(new));
    assert_eq!(
        env.rpc("run.show", json!({"run": run}))["manifest"]["id"],
        json!(run)
    );

    env.cli(["daemon", "stop"]).ok();
    let out = env.cli(["daemon", "restart"]);
    out.ok();
    assert!(
        out.stdout
            .starts_with("octld was not running; started octld (pid "),
        "{out:?}"
    );
    let off = env.cli_with(["--json", "daemon", "restart"], |c| {
        c.env("OCTLD_BIN", "/nonexistent/octld");
    });
    assert_eq!(off.code, 5, "cannot start it again: {off:?}");
}

fn doctor_runs(env: &TestEnv) -> Value {
    let out = env.cli(["--json", "doctor"]);
    out.json()["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == json!("runs"))
        .cloned()
        .unwrap()
}

fn corrupt_line_three(path: &Path) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[2] = "garbage, not an event";
    std::fs::write(path, format!("{}\n", lines.join("\n"))).unwrap();
}

#[test]
fn a_corrupt_run_shows_what_it_can_and_can_be_set_aside_so_doctor_is_green() {
    let env = TestEnv::new();
    let d = env.start_daemon();
    let bad = env.create_run("will break");
    let good = env.create_run("stays fine");
    for i in 0..3 {
        for run in [&bad, &good] {
            env.rpc(
                "event.append",
                json!({"run": run, "type": "x.n", "data": {"i": i}}),
            );
        }
    }
    d.signal_and_wait(libc::SIGTERM);
    corrupt_line_three(&env.run_dir(&bad).join("events.jsonl"));
    let d = env.start_daemon();
    assert_eq!(doctor_runs(&env)["status"], json!("fail"));
    let listed = env.rpc("run.list", json!({"status": "corrupt"}));
    assert_eq!(listed[0]["id"], json!(bad));
    assert_eq!(listed[0]["kind"], json!("generic"), "{listed}");
    assert_eq!(listed[0]["title"], json!("will break"));

    // What can still be read: kind, creation time, the events before line 3, and where.
    let shown = env.cli(["--json", "run", "show", &bad]);
    shown.ok();
    let v = shown.json();
    assert_eq!(v["manifest"]["status"], json!("corrupt"));
    assert_eq!(v["manifest"]["kind"], json!("generic"));
    assert_eq!(v["manifest"]["title"], json!("will break"));
    assert!(!v["manifest"]["created_at"].as_str().unwrap().is_empty());
    assert_eq!(v["corrupt"]["line"], json!(3));
    assert_eq!(v["corrupt"]["readable_events"], json!(2));
    let seqs: Vec<u64> = v["corrupt"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [1, 2]);
    assert!(v["corrupt"]["log"]
        .as_str()
        .unwrap()
        .ends_with("events.jsonl.corrupt"));
    let human = env.cli(["run", "show", &bad]);
    human.ok();
    assert!(human.stdout.contains("bad line: 3 of "), "{}", human.stdout);
    assert!(
        human.stdout.contains(&format!("run quarantine {bad}")),
        "{}",
        human.stdout
    );

    // Only a corrupt run can be set aside.
    let refused = env.cli(["--json", "run", "quarantine", &good]);
    assert_eq!(refused.code, 4, "{refused:?}");
    assert!(env.run_dir(&good).exists());

    let out = env.cli(["--json", "run", "quarantine", &bad]);
    out.ok();
    let dest = env.home.join("corrupt").join(&bad);
    assert_eq!(out.json()["moved_to"], json!(dest.display().to_string()));
    assert!(!env.run_dir(&bad).exists());
    assert!(
        dest.join("events.jsonl.corrupt").exists(),
        "nothing deleted"
    );
    assert_eq!(doctor_runs(&env)["status"], json!("ok"));
    let gone = env.cli(["--json", "run", "show", &bad]);
    assert_eq!(gone.code, 3, "{gone:?}");
    let again = env.cli(["--json", "run", "quarantine", &bad]);
    assert_eq!(again.code, 3, "{again:?}");
    // And after a restart too.
    d.signal_and_wait(libc::SIGTERM);
    let _d = env.start_daemon();
    assert_eq!(doctor_runs(&env)["status"], json!("ok"));
    assert_eq!(
        env.rpc("run.show", json!({"run": good}))["manifest"]["status"],
        json!("active")
    );
}

#[test]
fn racing_quarantines_move_the_run_once() {
    for _ in 0..5 {
        let env = TestEnv::new();
        let d = env.start_daemon();
        let bad = env.create_run("will break");
        for i in 0..3 {
            env.rpc(
                "event.append",
                json!({"run": bad, "type": "x.n", "data": {"i": i}}),
            );
        }
        d.signal_and_wait(libc::SIGTERM);
        corrupt_line_three(&env.run_dir(&bad).join("events.jsonl"));
        let _d = env.start_daemon();
        let results: Vec<Result<Value, Value>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| s.spawn(|| env.try_rpc("run.quarantine", json!({"run": bad}))))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let won = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(won, 1, "{results:?}");
        for r in results.iter().filter_map(|r| r.as_ref().err()) {
            assert_eq!(r["data"]["kind"], json!("not_found"), "{r}");
        }
        assert!(env
            .home
            .join("corrupt")
            .join(&bad)
            .join("events.jsonl.corrupt")
            .exists());
    }
}

/// One rule for shell nodes: the exit status decides, except that a script which reports
/// failure (`node fail`) fails whatever status it exits with, and its reason is the node's.
#[test]
fn a_shell_script_that_reports_failure_fails_even_when_it_exits_zero() {
    let (env, _d, repo) = TestEnv::world();
    let run = run_id(
        &env.spawn(
            "spinoff",
            &repo,
            "orchestratectl node fail --reason 'the fixture is missing'; exit 0",
            json!({"agent": "shell", "node": "says"}),
        )
        .unwrap(),
    );
    let show = env.wait_status(&run, &["completed", "failed"]);
    assert_eq!(show["manifest"]["status"], json!("failed"), "{show}");
    let node = &show["nodes"][0];
    assert_eq!(node["state"], json!("failed"), "{node}");
    assert_eq!(node["reason"], json!("the fixture is missing"), "{node}");
}

fn doctor_check(env: &TestEnv, id: &str) -> Value {
    let out = env.cli(["--json", "doctor"]);
    out.json()["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == json!(id))
        .cloned()
        .unwrap_or_else(|| panic!("no {id} check"))
}

/// A PATH with every program of this one but `bwrap` (each linked into one directory).
fn path_without_bwrap(dir: &Path) -> String {
    for d in std::env::split_paths(&std::env::var_os("PATH").unwrap()) {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let to = dir.join(e.file_name());
            if e.file_name() != "bwrap" && std::fs::symlink_metadata(&to).is_err() {
                let _ = std::os::unix::fs::symlink(e.path(), to);
            }
        }
    }
    dir.display().to_string()
}

#[test]
fn doctor_runs_a_real_sandbox_and_says_how_to_install_bubblewrap_without_it() {
    // bubblewrap on the daemon's PATH (as here): a minimal sandbox runs, and config.toml
    // asking for it is named.
    let env = TestEnv::new();
    env.write_config("[sandbox]\nkind = \"bwrap\"\n");
    let d = env.start_daemon();
    let c = doctor_check(&env, "sandbox");
    assert_eq!(c["status"], json!("ok"), "{c}");
    let message = c["message"].as_str().unwrap();
    assert!(
        message.contains("bwrap") && message.contains("ran a sandbox"),
        "{c}"
    );
    assert!(
        message.contains("wanted by config.toml's [sandbox] kind"),
        "{c}"
    );
    assert_eq!(c["details"][0]["ok"], json!(true), "{c}");
    drop(d);

    // Without it: a failure while config.toml asks for bwrap, a skip saying what to install
    // when nothing does.
    let bin = tempfile::tempdir().unwrap();
    let path = path_without_bwrap(bin.path());
    let d = env.start_daemon_with(&[("PATH", &path)]);
    let c = doctor_check(&env, "sandbox");
    assert_eq!(c["status"], json!("fail"), "{c}");
    assert!(
        c["message"]
            .as_str()
            .unwrap()
            .contains("not on the daemon's PATH"),
        "{c}"
    );
    assert!(
        c["hint"]
            .as_str()
            .unwrap()
            .contains("apt-get install bubblewrap"),
        "{c}"
    );
    drop(d);
    env.write_config("");
    let _d = env.start_daemon_with(&[("PATH", &path)]);
    let c = doctor_check(&env, "sandbox");
    assert_eq!(c["status"], json!("skip"), "{c}");
    assert!(
        c["hint"]
            .as_str()
            .unwrap()
            .contains("apt-get install bubblewrap"),
        "{c}"
    );
}
