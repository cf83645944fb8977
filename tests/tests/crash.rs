//! Crashes at the worst moments: `kill -9` of the daemon while agents run, and test-only
//! failpoints (`OCTL_FAILPOINTS`) that SIGKILL the daemon between the steps of a spawn and of
//! a merge. After a restart nothing acknowledged is lost, agents are adopted, and every
//! interrupted step is finished exactly once.

use std::time::Duration;

use octl_tests::{wait_until, TestEnv, TestRepo};
use serde_json::json;

fn id(v: &serde_json::Value) -> String {
    v["id"].as_str().unwrap().to_string()
}

#[test]
fn three_agents_survive_a_kill_nine_of_the_daemon_and_merge() {
    let (env, d, repo) = TestEnv::world();
    let early = env.root.path().join("early");
    let late = env.root.path().join("late");
    let wait_for =
        |flag: &std::path::Path| format!("while [ ! -e {} ]; do sleep 0.05; done", flag.display());
    let runs: Vec<String> = [
        format!("{}; printf one > one.txt", wait_for(&early)),
        format!("{}; printf two > two.txt", wait_for(&early)),
        // This one reports itself, after the restart.
        format!("{}; printf three > three.txt && git add -A && git commit -q -m three && orchestratectl node done --message three", wait_for(&late)),
    ]
    .iter()
    .enumerate()
    .map(|(i, task)| id(&env.spawn("spinoff", &repo, task, json!({"agent": "shell", "node": format!("a{i}")})).unwrap()))
    .collect();
    for (i, run) in runs.iter().enumerate() {
        env.wait_node(run, &format!("a{i}"), "running");
    }
    d.kill9();
    // Two agents finish while the daemon is down; the third is still running at the restart.
    std::fs::write(&early, "").unwrap();
    let windows_dead = || {
        let out = env.tmux(&["list-panes", "-a", "-F", "#{window_name} #{pane_dead}"]);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        (text.contains("a0 1") && text.contains("a1 1")).then_some(())
    };
    wait_until(
        "two agents to finish while the daemon is down",
        Duration::from_secs(20),
        windows_dead,
    );
    let _d = env.start_daemon();
    std::fs::write(&late, "").unwrap();
    for run in &runs {
        let show = env.wait_status(run, &["completed", "failed", "waiting"]);
        assert_eq!(show["manifest"]["status"], json!("completed"), "{show}");
    }
    for f in ["one.txt", "two.txt", "three.txt"] {
        assert!(repo.show("main", f).is_some(), "{f} merged");
    }
    let third = env.log_events(&runs[2]);
    let done = third
        .iter()
        .find(|e| e["type"] == json!("node.done"))
        .unwrap();
    assert_eq!(
        done["data"]["message"],
        json!("three"),
        "the adopted agent's own report was processed"
    );
}

#[test]
fn a_crash_between_moving_the_base_and_recording_it_merges_exactly_once() {
    let env = TestEnv::new();
    let d = env.start_daemon_with(&[("OCTL_FAILPOINTS", "merge:after-move")]);
    let repo = TestRepo::new(&env, "repo");
    let run = id(&env
        .spawn(
            "spinoff",
            &repo,
            "printf once > once.txt",
            json!({"agent": "shell", "node": "once"}),
        )
        .unwrap());
    // The daemon kills itself right after moving main, before `merge.succeeded`.
    let status = d.wait_exit();
    assert!(!status.success(), "the failpoint fired");
    let moved = repo.rev("main");
    assert_eq!(
        repo.show("main", "once.txt").as_deref(),
        Some("once"),
        "main moved before the crash"
    );
    assert_eq!(
        env.event_types(&run).last().map(String::as_str),
        Some("merge.started")
    );

    let _d = env.start_daemon();
    let show = env.wait_status(&run, &["completed", "failed", "waiting"]);
    assert_eq!(show["manifest"]["status"], json!("completed"), "{show}");
    assert_eq!(repo.rev("main"), moved, "not merged a second time");
    let log = repo.git(&["log", "--format=%H", "main", "--", "once.txt"]);
    assert_eq!(log.lines().count(), 1, "one commit brought once.txt: {log}");
    let types = env.event_types(&run);
    assert_eq!(types.iter().filter(|t| *t == "merge.succeeded").count(), 1);
    assert_eq!(types.iter().filter(|t| *t == "merge.started").count(), 1);
    assert!(
        repo.refs("refs/heads/octl/").is_empty(),
        "cleaned up after the restart"
    );
    assert_eq!(repo.refs("refs/octl/snapshots/").len(), 1);
}

#[test]
fn a_spawn_cut_short_after_its_intent_is_healed_on_restart() {
    let env = TestEnv::new();
    let d = env.start_daemon_with(&[("OCTL_FAILPOINTS", "spawn:after-starting")]);
    let repo = TestRepo::new(&env, "repo");
    let err = env.spawn(
        "spinoff",
        &repo,
        "printf healed > healed.txt",
        json!({"agent": "shell", "node": "half"}),
    );
    assert!(err.is_err(), "the daemon died during the spawn");
    d.wait_exit();
    let runs = std::fs::read_dir(env.home.join("runs")).unwrap().count();
    assert_eq!(
        runs, 1,
        "the run and its intent were recorded before the crash"
    );
    let run = std::fs::read_dir(env.home.join("runs"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .file_name()
        .into_string()
        .unwrap();
    assert_eq!(
        env.event_types(&run).last().map(String::as_str),
        Some("node.starting")
    );
    assert!(repo.refs("refs/heads/octl/").is_empty(), "no branch yet");

    let _d = env.start_daemon();
    let show = env.wait_status(&run, &["completed", "failed", "waiting"]);
    assert_eq!(show["manifest"]["status"], json!("completed"), "{show}");
    assert_eq!(repo.show("main", "healed.txt").as_deref(), Some("healed"));
}
