//! The CLI against the real daemon: autostart, output and exit codes, every kind of bad input
//! (each changes nothing), and `event tail` following the log with the daemon up or down.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use octl_tests::{bin, wait_until, TestEnv};
use serde_json::{json, Value};

fn create(env: &TestEnv, title: &str) -> String {
    let out = env.cli([
        "--json", "run", "create", "--kind", "generic", "--title", title,
    ]);
    out.ok();
    out.json()["id"].as_str().unwrap().to_string()
}

#[test]
fn the_first_command_starts_the_daemon_and_no_autostart_exits_five() {
    let env = TestEnv::new();
    let off = env.cli_with(["--json", "run", "list"], |c| {
        c.env("OCTL_NO_AUTOSTART", "1");
    });
    assert_eq!(off.code, 5, "{off:?}");
    assert_eq!(off.error()["kind"], json!("daemon_unreachable"));
    assert!(off.stdout.is_empty());
    assert!(!env.socket().exists(), "nothing started");

    let list = env.cli(["--json", "run", "list"]);
    list.ok();
    assert_eq!(list.json(), json!([]));
    let status = env.cli(["--json", "daemon", "status"]);
    status.ok();
    let pid = status.json()["pid"].as_u64().unwrap() as i32;
    assert_eq!(
        unsafe { libc::getsid(pid) },
        pid,
        "autostarted in its own session"
    );
    let stop = env.cli(["--json", "daemon", "stop"]);
    stop.ok();
    assert_eq!(stop.json()["stopped"], json!(true));
    let again = env.cli(["daemon", "status"]);
    assert_eq!(again.code, 5, "{again:?}");
}

#[test]
fn json_output_is_one_document_with_the_stable_keys() {
    let env = TestEnv::new();
    let _d = env.start_daemon();
    let created = env.cli([
        "--json", "run", "create", "--kind", "generic", "--title", "keys",
    ]);
    let summary = created.json();
    for key in [
        "id",
        "kind",
        "status",
        "repo",
        "base",
        "created_at",
        "updated_at",
        "nodes",
    ] {
        assert!(
            summary.get(key).is_some(),
            "run summary has {key}: {summary}"
        );
    }
    let run = summary["id"].as_str().unwrap();
    let app = env.cli([
        "--json",
        "event",
        "append",
        "--run",
        run,
        "--node",
        "api",
        "--type",
        "node.added",
    ]);
    let app = app.json();
    assert_eq!(app["seq"], json!(2));
    assert!(app["id"].as_str().unwrap().len() == 26);
    let show = env.cli(["--json", "run", "show", &run[..8]]).json();
    for key in ["manifest", "nodes", "discussions", "spinoffs"] {
        assert!(show.get(key).is_some(), "{show}");
    }
    let node = &show["nodes"][0];
    for key in ["id", "state", "branch", "worktree", "agent", "deps"] {
        assert!(node.get(key).is_some(), "node has {key}: {node}");
    }
    let events = env
        .cli(["--json", "event", "list", "--run", run, "--since", "1"])
        .json();
    assert_eq!(events.as_array().unwrap().len(), 1);
    assert_eq!(events[0]["type"], json!("node.added"));
    let status = env.cli(["--json", "daemon", "status"]).json();
    for key in ["pid", "version", "protocol", "home", "uptime_s"] {
        assert!(status.get(key).is_some(), "{status}");
    }
    let version = env.cli(["--json", "version"]).json();
    assert_eq!(version["protocol"], json!(1));
    // Human output names ids in full.
    let human = env.cli(["run", "list"]);
    assert!(human.stdout.contains(run), "{}", human.stdout);
}

#[test]
fn bad_input_gets_a_clear_error_and_changes_nothing() {
    let env = TestEnv::new();
    let _d = env.start_daemon();
    let run = create(&env, "bad input");
    env.cli([
        "event",
        "append",
        "--run",
        &run,
        "--node",
        "api",
        "--type",
        "node.added",
    ])
    .ok();
    env.cli([
        "event",
        "append",
        "--run",
        &run,
        "--node",
        "api",
        "--type",
        "node.done",
    ])
    .ok();
    let log_before = std::fs::read(env.run_dir(&run).join("events.jsonl")).unwrap();
    let runs_before = std::fs::read_dir(env.home.join("runs")).unwrap().count();
    let big = format!("{{\"blob\":\"{}\"}}", "a".repeat(70 * 1024));
    let cases: Vec<(Vec<&str>, i32, &str, &str)> = vec![
        (
            vec!["--run", "../../etc/passwd", "--type", "x.a"],
            2,
            "invalid_params",
            "path",
        ),
        (
            vec!["--run", "01JD", "--type", "x.a"],
            2,
            "invalid_params",
            "ULID",
        ),
        (
            vec!["--run", "not-a-ulid!", "--type", "x.a"],
            2,
            "invalid_params",
            "--run",
        ),
        (
            vec!["--run", &run, "--node", "../x", "--type", "x.a"],
            2,
            "invalid_params",
            "a-z, 0-9 and '-'",
        ),
        (
            vec!["--run", &run, "--node", "API", "--type", "x.a"],
            2,
            "invalid_params",
            "node",
        ),
        (
            vec!["--run", &run, "--type", "x.a", "--data", "[1,2]"],
            2,
            "invalid_params",
            "object",
        ),
        (
            vec!["--run", &run, "--type", "x.a", "--data", "{nope"],
            2,
            "invalid_params",
            "--data",
        ),
        (
            vec!["--run", &run, "--type", "x.a", "--data", &big],
            2,
            "invalid_params",
            "64 KiB",
        ),
        (
            vec!["--run", &run, "--type", "merge.succeeded", "--node", "api"],
            4,
            "forbidden",
            "may not be appended",
        ),
        (
            vec!["--run", &run, "--type", "bogus"],
            2,
            "invalid_params",
            "type",
        ),
        (
            vec!["--run", &run, "--node", "api", "--type", "node.progress"],
            4,
            "invalid_transition",
            "done",
        ),
        (
            vec!["--run", "01JDXJ5R8Q4M0ZK7P2W9TB3C6E", "--type", "x.a"],
            3,
            "not_found",
            "no run",
        ),
    ];
    for (args, code, kind, needle) in cases {
        let mut full = vec!["--json", "event", "append"];
        full.extend(args.iter().copied());
        let out = env.cli(&full);
        assert_eq!(out.code, code, "{args:?}: {out:?}");
        let err = out.error();
        assert_eq!(err["kind"], json!(kind), "{args:?}: {err}");
        assert!(
            err["message"].as_str().unwrap().contains(needle),
            "{args:?}: {err}"
        );
        assert!(out.stdout.is_empty(), "nothing on stdout with an error");
    }
    // Unknown method and malformed JSON reach the daemon only through raw RPC; covered in
    // protocol.rs. A run kind that does not exist:
    let out = env.cli(["--json", "run", "create", "--kind", "nonsense"]);
    assert_eq!(out.code, 2, "{out:?}");
    assert_eq!(out.error()["kind"], json!("invalid_params"));
    // A usage error in JSON mode is still a JSON error.
    let out = env.cli(["--json", "event", "append", "--run", &run]);
    assert_eq!(out.code, 2);
    assert_eq!(out.error()["kind"], json!("invalid_params"));

    assert_eq!(
        std::fs::read(env.run_dir(&run).join("events.jsonl")).unwrap(),
        log_before,
        "log unchanged"
    );
    assert_eq!(
        std::fs::read_dir(env.home.join("runs")).unwrap().count(),
        runs_before,
        "no run created"
    );
}

#[test]
fn an_ambiguous_prefix_is_refused_and_a_unique_one_resolves() {
    let env = TestEnv::new();
    let _d = env.start_daemon();
    let mut ids = vec![create(&env, "one"), create(&env, "two")];
    // ULIDs made moments apart share their leading time characters; make sure two do.
    while ids[ids.len() - 1][..6] != ids[ids.len() - 2][..6] {
        ids.push(create(&env, "more"));
    }
    let (a, b) = (&ids[ids.len() - 2], &ids[ids.len() - 1]);
    let out = env.cli(["--json", "run", "show", &a[..6]]);
    assert_eq!(out.code, 2, "{out:?}");
    let err = out.error();
    assert_eq!(err["kind"], json!("ambiguous_id"));
    assert!(err["message"].as_str().unwrap().contains(a.as_str()));
    assert!(err["message"].as_str().unwrap().contains(b.as_str()));
    let common = a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    let unique = &a[..common + 1];
    let shown = env.cli(["--json", "run", "show", &unique.to_lowercase()]);
    shown.ok();
    assert_eq!(shown.json()["manifest"]["id"], json!(a));
}

fn spawn_tail(env: &TestEnv, run: &str) -> (std::process::Child, mpsc::Receiver<Value>) {
    let mut child =
        env.start_cli_with(["--json", "event", "tail", "--run", run, "--follow"], |c| {
            c.env("OCTL_NO_AUTOSTART", "1").stderr(Stdio::null());
        });
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if tx
                .send(serde_json::from_str(&line).expect("tail prints JSON lines"))
                .is_err()
            {
                return;
            }
        }
    });
    (child, rx)
}

fn next_seq(rx: &mpsc::Receiver<Value>) -> u64 {
    rx.recv_timeout(Duration::from_secs(20))
        .expect("a line from tail")["seq"]
        .as_u64()
        .unwrap()
}

#[test]
fn event_tail_follows_the_stream_when_the_daemon_is_up() {
    let env = TestEnv::new();
    let _d = env.start_daemon();
    let run = create(&env, "tail up");
    let (mut child, rx) = spawn_tail(&env, &run);
    assert_eq!(next_seq(&rx), 1);
    for i in 0..5 {
        env.rpc(
            "event.append",
            json!({"run": run, "type": "x.tick", "data": {"i": i}}),
        );
    }
    let seqs: Vec<u64> = (0..5).map(|_| next_seq(&rx)).collect();
    assert_eq!(seqs, vec![2, 3, 4, 5, 6]);
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn event_tail_reads_and_follows_the_file_when_the_daemon_is_down() {
    let env = TestEnv::new();
    let d = env.start_daemon();
    let run = create(&env, "tail down");
    env.rpc("event.append", json!({"run": run, "type": "x.before"}));
    d.signal_and_wait(libc::SIGTERM);
    // Daemon down: tail reads the file itself and watches it.
    let (mut child, rx) = spawn_tail(&env, &run);
    assert_eq!(next_seq(&rx), 1);
    assert_eq!(next_seq(&rx), 2);
    let _d = env.start_daemon();
    for i in 0..3 {
        env.rpc(
            "event.append",
            json!({"run": run, "type": "x.after", "data": {"i": i}}),
        );
    }
    let seqs: Vec<u64> = (0..3).map(|_| next_seq(&rx)).collect();
    assert_eq!(seqs, vec![3, 4, 5], "new lines picked up from the file");
    let _ = child.kill();
    let _ = child.wait();
    wait_until("tail to exit", Duration::from_secs(5), || {
        child.try_wait().ok().flatten().map(|_| ())
    });
}

#[test]
fn skills_install_never_overwrite_a_changed_file_without_force() {
    let env = TestEnv::new();
    let out = env.cli(["--json", "skill", "install"]);
    out.ok();
    let dir = env.claude_dir.join("skills");
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names.len(), 13, "{names:?}");
    let file = dir.join("fan-out/SKILL.md");
    let original = std::fs::read_to_string(&file).unwrap();
    assert!(
        original.starts_with("---\nname: fan-out\n"),
        "valid frontmatter: {original:.60}"
    );
    let printed = env.cli(["skill", "print", "fan-out"]);
    assert_eq!(printed.stdout, original, "print gives the same bytes");

    std::fs::write(&file, "my own notes\n").unwrap();
    let list = env.cli(["--json", "skill", "list"]).json();
    let status = list
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == json!("fan-out"))
        .unwrap()["status"]
        .clone();
    assert_eq!(status, json!("modified"));
    let again = env.cli(["--json", "skill", "install"]);
    assert_eq!(again.code, 4, "{again:?}");
    assert_eq!(again.error()["kind"], json!("forbidden"));
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "my own notes\n",
        "the user's change is kept"
    );
    env.cli(["skill", "install", "--force"]).ok();
    assert_eq!(std::fs::read_to_string(&file).unwrap(), original);
    let list = env.cli(["--json", "skill", "list"]).json();
    assert!(
        list.as_array()
            .unwrap()
            .iter()
            .all(|s| s["status"] == json!("installed")),
        "{list}"
    );
}

/// The daemon and the CLI share one home resolver: no `HOME` with neither `--home` nor
/// `OCTL_HOME` is the same `invalid_params` error (exit 2) from both, as is an empty `--home`,
/// and neither creates anything (no `/.orchestratectl`, no home in the current directory).
#[test]
fn the_daemon_and_the_cli_refuse_the_same_unusable_homes() {
    let env = TestEnv::new();
    let cwd = env.root.path().join("cwd");
    std::fs::create_dir_all(&cwd).unwrap();
    let run = |program: &str, args: &[&str], adjust: &dyn Fn(&mut Command)| {
        let mut cmd = Command::new(bin(program));
        cmd.args(args).current_dir(&cwd).stdin(Stdio::null());
        env.isolate(&mut cmd);
        cmd.env("OCTL_NO_AUTOSTART", "1");
        adjust(&mut cmd);
        octl_tests::Cli::from(cmd.output().unwrap())
    };
    let no_home = |c: &mut Command| {
        c.env_remove("OCTL_HOME").env("HOME", "");
    };
    for (program, args) in [
        ("octld", &["--foreground"][..]),
        ("orchestratectl", &["run", "list"][..]),
    ] {
        let out = run(program, args, &no_home);
        assert_eq!(out.code, 2, "{program} without a home: {out:?}");
        assert!(
            out.stderr
                .contains("cannot find the state directory: neither --home nor OCTL_HOME is given, and HOME is unset or empty"),
            "{program}: {out:?}"
        );
        assert!(
            out.stderr
                .contains("hint: pass --home DIR or set OCTL_HOME"),
            "{program}: {out:?}"
        );
        let empty: Vec<&str> = ["--home", ""].iter().chain(args).copied().collect();
        let out = run(program, &empty, &|_| {});
        assert_eq!(out.code, 2, "{program} --home \"\": {out:?}");
        // clap refuses the empty value before the resolver (which refuses it too) sees it.
        assert!(out.stderr.contains("--home"), "{program}: {out:?}");
    }
    assert_eq!(
        std::fs::read_dir(&cwd).unwrap().count(),
        0,
        "nothing created in the cwd"
    );
    assert!(!env.home.exists(), "nothing created in OCTL_HOME");
}
