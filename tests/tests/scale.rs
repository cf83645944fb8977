//! A year of use: a home of 20,000 finished runs works under an open-file limit of 256
//! (macOS's default) — start, list, show, spawn, the TUI — holding none of them; the run index
//! is rebuilt from the logs byte for byte, heals after a crash between a run's end and its
//! entry, and is rebuilt when damaged; and a finished run written to by many clients while
//! it is let go of loses and repeats nothing.

use std::path::Path;
use std::time::Duration;

use octl_tests::runs::copy_finished;
use octl_tests::{bin, http, wait_until, Daemon, Pane, TestEnv, TestRepo};
use serde_json::{json, Value};

use octld::store::index::{Index, JOURNAL_FILE, TABLE_FILE};

fn status(env: &TestEnv) -> Value {
    env.rpc("daemon.status", json!({}))
}

/// Waits until the daemon holds `n` active runs (the others are only in the index).
fn wait_active(env: &TestEnv, n: u64) {
    wait_until(&format!("{n} active runs"), Duration::from_secs(30), || {
        (status(env)["active"] == json!(n)).then_some(())
    });
}

fn stop(env: &TestEnv, d: Daemon) {
    env.rpc("daemon.shutdown", json!({}));
    assert!(d.wait_exit().success());
}

fn run_id(v: &Value) -> String {
    v["id"].as_str().unwrap().to_string()
}

/// A spinoff run of a shell agent that commits `file`, merged.
fn merged_spinoff(env: &TestEnv, repo: &TestRepo, file: &str) -> String {
    let run = run_id(
        &env.spawn(
            "spinoff",
            repo,
            &format!("echo {file} > {file} && git add {file} && git commit -qm {file}"),
            json!({"agent": "shell", "node": "n"}),
        )
        .unwrap(),
    );
    env.wait_status(&run, &["completed"]);
    run
}

/// Descriptors a process holds.
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

/// The table the index on disk makes (journal merged in), read with the daemon stopped.
fn canonical(home: &Path) -> Vec<u8> {
    Index::open(home).unwrap().index.canonical().unwrap()
}

/// Every event of the change feed, from the beginning.
fn feed(env: &TestEnv) -> Vec<Value> {
    let r = http::request(&env.socket(), "GET", "/v1/events", None).unwrap();
    assert_eq!(r.status, 200);
    String::from_utf8_lossy(&r.body)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .collect()
}

/// The seqs of `run`'s events in the feed, in feed order.
fn fed_seqs(env: &TestEnv, run: &str) -> Vec<u64> {
    feed(env)
        .iter()
        .filter(|l| l["event"]["run"] == json!(run))
        .map(|l| l["event"]["seq"].as_u64().unwrap())
        .collect()
}

#[test]
fn twenty_thousand_finished_runs_under_256_open_files() {
    let mut env = TestEnv::new();
    env.set_env("OCTL_REST_AFTER_MS", "50");
    let d = env.start_daemon();
    let repo = TestRepo::new(&env, "repo");
    let first = merged_spinoff(&env, &repo, "one.txt");
    wait_active(&env, 0);
    stop(&env, d);
    // A year of such runs, and no index: a home from before it, as an upgrade finds it.
    let copies = copy_finished(&env, &first, 20_000);
    std::fs::remove_file(env.home.join(TABLE_FILE)).unwrap();
    std::fs::remove_file(env.home.join(JOURNAL_FILE)).unwrap();
    let d = env.start_daemon_within(&[], Duration::from_secs(600));
    assert_eq!(status(&env)["runs"], json!(20_001));
    assert_eq!(
        status(&env)["active"],
        json!(0),
        "finished runs are not held"
    );
    stop(&env, d);

    env.limit_open_files(256);
    let d = env.start_daemon();
    assert_eq!(status(&env)["active"], json!(0));
    let fds = open_fds(d.pid());
    assert!(fds < 64, "octld holds {fds} descriptors");

    // The newest five, oldest first; and the whole list.
    let newest = env.cli(["--json", "run", "list", "--limit", "5"]);
    let ids: Vec<String> = newest
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(run_id)
        .collect();
    assert_eq!(ids, copies[copies.len() - 5..]);
    let all = env.cli(["--json", "run", "list"]);
    all.ok();
    assert_eq!(all.json().as_array().unwrap().len(), 20_001);
    let failed = env.cli([
        "--json", "run", "list", "--status", "failed", "--limit", "3",
    ]);
    assert_eq!(failed.json(), json!([]));
    // An old one, by prefix, folded from its log.
    let shown = env.cli(["--json", "run", "show", &copies[17][..20]]);
    shown.ok();
    assert_eq!(shown.json()["manifest"]["id"], json!(copies[17]));
    assert_eq!(shown.json()["manifest"]["status"], json!("completed"));

    // Work goes on: a new spinoff is merged, and let go of once finished.
    let second = merged_spinoff(&env, &repo, "two.txt");
    assert_eq!(repo.show("main", "two.txt").as_deref(), Some("two.txt\n"));
    wait_active(&env, 0);
    let fds = open_fds(d.pid());
    assert!(fds < 64, "octld holds {fds} descriptors after a spawn");

    // The TUI opens on it: the newest runs listed, the older counted.
    let home = env.home.display().to_string();
    let pane = Pane::start(
        &env,
        120,
        40,
        &[],
        &bin("orchestratectl"),
        &["--home", &home, "tui"],
    );
    let screen = pane.wait_screen("the TUI's first frame", |s| {
        s.contains(&second[..8]) && s.contains("older)")
    });
    assert!(screen.contains("(+19502 older)"), "{screen}");
    pane.keys(&["q"]);
    drop(d);
}

#[test]
fn the_index_is_rebuilt_from_the_logs_byte_for_byte() {
    let mut env = TestEnv::new();
    env.set_env("OCTL_REST_AFTER_MS", "50");
    let d = env.start_daemon();
    let repo = TestRepo::new(&env, "repo");
    merged_spinoff(&env, &repo, "a.txt");
    let failed = run_id(
        &env.spawn(
            "spinoff",
            &repo,
            "exit 3",
            json!({"agent": "shell", "node": "f"}),
        )
        .unwrap(),
    );
    env.wait_status(&failed, &["failed"]);
    let code = run_id(
        &env.spawn(
            "code",
            &repo,
            "sleep 600",
            json!({"agent": "shell", "node": "c"}),
        )
        .unwrap(),
    );
    env.wait_node(&code, "c", "running");
    env.cli(["run", "cancel", &code]).ok();
    // A generic run with a question asked and answered (the index flags its records).
    let asked = env.create_run("asked");
    let q = env.rpc("discussion.ask", json!({"run": asked, "title": "which?"}));
    env.rpc(
        "discussion.answer",
        json!({"id": q["id"], "text": "this one"}),
    );
    env.rpc(
        "event.append",
        json!({"run": asked, "type": "run.completed", "data": {}}),
    );
    let open = env.create_run("still open");
    wait_active(&env, 1);
    stop(&env, d);
    // One more finished run whose log was damaged while the daemon was down.
    let damaged = {
        let id = copy_finished(&env, &asked, 1).remove(0);
        let log = env.run_dir(&id).join("events.jsonl");
        let text = std::fs::read_to_string(&log).unwrap();
        std::fs::write(&log, text.replacen("\"seq\":2", "\"seq\":9", 1)).unwrap();
        id
    };
    let _ = damaged;

    let before = canonical(&env.home);
    assert!(!before.is_empty());
    // Built from the logs alone: the same bytes, but for the damaged run it did not know of.
    std::fs::remove_file(env.home.join(TABLE_FILE)).unwrap();
    std::fs::remove_file(env.home.join(JOURNAL_FILE)).unwrap();
    let d = env.start_daemon();
    assert_eq!(status(&env)["active"], json!(1));
    let listed = env.cli(["--json", "run", "list"]);
    let statuses: Vec<(String, String)> = listed
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (run_id(r), r["status"].as_str().unwrap().to_string()))
        .collect();
    assert_eq!(statuses.len(), 6, "{statuses:?}");
    assert!(statuses.contains(&(open.clone(), "active".into())));
    assert!(statuses.contains(&(damaged.clone(), "corrupt".into())));
    stop(&env, d);
    let rebuilt = canonical(&env.home);
    let again = {
        std::fs::remove_file(env.home.join(TABLE_FILE)).unwrap();
        std::fs::remove_file(env.home.join(JOURNAL_FILE)).unwrap();
        let d = env.start_daemon();
        stop(&env, d);
        canonical(&env.home)
    };
    assert_eq!(rebuilt, again, "a rebuild is a pure function of the logs");
    // The first index plus the damaged run's entry is the rebuilt one: compare without it.
    let without = |bytes: &[u8]| -> String {
        String::from_utf8_lossy(bytes)
            .lines()
            .filter(|l| !l.contains(&damaged))
            .skip(1)
            .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(without(&before), without(&rebuilt));
    let summaries = |bytes: &[u8]| -> Vec<String> {
        String::from_utf8_lossy(bytes)
            .lines()
            .filter(|l| l.starts_with('{') && !l.contains(&damaged))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(summaries(&before), summaries(&rebuilt));

    // doctor agrees: every run's entry is what its log derives; only the damaged one fails.
    let d = env.start_daemon();
    let runs = env.rpc("doctor.runs", json!({}));
    let bad: Vec<&Value> = runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["ok"] != json!(true))
        .collect();
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert_eq!(bad[0]["run"], json!(damaged));
    assert!(
        bad[0]["problem"].as_str().unwrap().starts_with("corrupt:"),
        "{bad:?}"
    );
    drop(d);
}

#[test]
fn a_crash_between_a_runs_end_and_its_index_entry_heals_at_the_next_start() {
    let mut env = TestEnv::new();
    env.set_env("OCTL_REST_AFTER_MS", "50");
    let d = env.start_daemon_with(&[("OCTL_FAILPOINTS", "index:before-done")]);
    let run = env.create_run("ends");
    env.rpc(
        "event.append",
        json!({"run": run, "type": "run.completed", "data": {}}),
    );
    // Let go of once finished: the daemon dies just before the index says so.
    assert!(!d.wait_exit().success());
    let journal = std::fs::read_to_string(env.home.join(JOURNAL_FILE)).unwrap();
    assert!(
        journal.contains(&format!("{{\"open\":\"{run}\"")),
        "{journal}"
    );
    assert!(!journal.contains("\"done\""), "{journal}");

    let _d = env.start_daemon();
    wait_active(&env, 0);
    let journal = std::fs::read_to_string(env.home.join(JOURNAL_FILE)).unwrap();
    assert!(
        journal.contains(&format!("{{\"done\":\"{run}\"")),
        "{journal}"
    );
    let listed = env.cli(["--json", "run", "list"]);
    assert_eq!(listed.json()[0]["status"], json!("completed"));
    assert_eq!(fed_seqs(&env, &run), [1, 2], "each event once in the feed");
}

#[test]
fn a_creation_cut_short_after_its_index_entry_is_forgotten() {
    let env = TestEnv::new();
    let d = env.start_daemon_with(&[("OCTL_FAILPOINTS", "create:after-index")]);
    assert!(env
        .try_rpc("run.create", json!({"kind": "generic", "title": "never"}))
        .is_err());
    assert!(!d.wait_exit().success());
    let d = env.start_daemon();
    assert_eq!(env.rpc("run.list", json!({})), json!([]));
    assert_eq!(status(&env)["runs"], json!(0));
    let journal = std::fs::read_to_string(env.home.join(JOURNAL_FILE)).unwrap();
    assert!(journal.contains("\"gone\""), "{journal}");
    drop(d);
}

#[test]
fn a_damaged_index_is_set_aside_and_built_again() {
    let mut env = TestEnv::new();
    env.set_env("OCTL_REST_AFTER_MS", "50");
    let d = env.start_daemon();
    let runs: Vec<String> = (0..3)
        .map(|i| {
            let r = env.create_run(&format!("r{i}"));
            env.rpc(
                "event.append",
                json!({"run": r, "type": "run.completed", "data": {}}),
            );
            r
        })
        .collect();
    wait_active(&env, 0);
    stop(&env, d);
    let before = canonical(&env.home);
    std::fs::write(env.home.join(TABLE_FILE), b"octl-runs v1 99\n garbage").unwrap();
    let d = env.start_daemon();
    let listed: Vec<String> = env
        .rpc("run.list", json!({}))
        .as_array()
        .unwrap()
        .iter()
        .map(run_id)
        .collect();
    assert_eq!(listed, runs);
    let aside: Vec<String> = std::fs::read_dir(&env.home)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("runs.idx.bad-"))
        .collect();
    assert_eq!(aside.len(), 1, "the damaged table is kept aside");
    stop(&env, d);
    assert_eq!(canonical(&env.home), before);
}

#[test]
fn a_finished_run_written_to_while_it_is_let_go_of_loses_and_repeats_nothing() {
    let mut env = TestEnv::new();
    // Let go of the moment it rests: every round races its writer's end with new appends.
    env.set_env("OCTL_REST_AFTER_MS", "0");
    let d = env.start_daemon();
    let run = env.create_run("busy");
    env.rpc(
        "event.append",
        json!({"run": run, "type": "run.completed", "data": {}}),
    );
    let rounds = 15;
    let clients = 6;
    for round in 0..rounds {
        wait_active(&env, 0);
        std::thread::scope(|s| {
            for c in 0..clients {
                let (env, run, d) = (&env, &run, &d);
                s.spawn(move || {
                    for i in 0..4 {
                        let r = env.try_rpc(
                            "event.append",
                            json!({"run": run, "type": "x.tick", "data": {"round": round, "c": c, "i": i}}),
                        );
                        assert!(r.is_ok(), "{r:?}; octld said: {}", d.stderr());
                    }
                });
            }
        });
    }
    wait_active(&env, 0);
    let want = 2 + rounds * clients * 4;
    let seqs: Vec<u64> = env
        .log_events(&run)
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, (1..=want as u64).collect::<Vec<_>>());
    let listed = env.rpc("run.list", json!({}));
    assert_eq!(listed[0]["last_seq"], json!(want));
    assert_eq!(fed_seqs(&env, &run), (1..=want as u64).collect::<Vec<_>>());
    let doctor = env.rpc("doctor.runs", json!({}));
    assert_eq!(doctor["runs"][0]["ok"], json!(true), "{doctor}");
}
