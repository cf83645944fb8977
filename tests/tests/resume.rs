//! Resumable sessions without Claude Code: a fake `claude` (a shell script as the `claude`
//! profile's program) records its argv, commits, and waits to be killed; started with
//! `--resume` it reports done. (The real Claude Code resuming its conversation is in
//! `claude_hooks.rs`.)

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use octl_tests::{wait_until, TestEnv, TestRepo};
use serde_json::{json, Value};

/// Makes `claude` at `dir/claude` the profile's program; it appends its argv to `dir/argv`.
fn fake_claude(env: &TestEnv, dir: &Path) {
    let argv = dir.join("argv");
    let script = format!(
        r#"#!/bin/sh
printf '%s\n' "$*" >> {argv}
case " $* " in
  *" --resume "*) orchestratectl node done --message resumed; exit 0 ;;
esac
printf 'first\n' > first.txt && git add first.txt && git commit -qm first
exec sleep 600
"#,
        argv = argv.display()
    );
    let program = dir.join("claude");
    std::fs::write(&program, script).unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    env.write_config(&format!(
        "[agents.claude]\nprogram = {:?}\n",
        program.display().to_string()
    ));
}

/// Kills a pane; when it was the server's last, tmux says the server exited, which it did.
fn tmux(env: &TestEnv, args: &[&str]) {
    let out = env.tmux(args);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() || said.contains("server exited"),
        "tmux {args:?}: {out:?}"
    );
}

fn events_of<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == json!(kind)).collect()
}

#[test]
fn an_autonomous_agent_killed_mid_task_is_resumed_once_in_its_own_worktree() {
    let env = TestEnv::new();
    let scripts = tempfile::tempdir().unwrap();
    fake_claude(&env, scripts.path());
    let _d = env.start_daemon();
    let repo = TestRepo::new(&env, "repo");
    let spawned = env
        .spawn(
            "spinoff",
            &repo,
            "write first.txt",
            json!({"agent": "claude", "node": "w"}),
        )
        .unwrap();
    let run = spawned["id"].as_str().unwrap().to_string();
    let node = env.wait_node(&run, "w", "running");
    let session = node["session_id"].as_str().unwrap().to_string();
    assert!(octl_proto::ids::is_uuid(&session), "{node}");
    let worktree = node["worktree"].as_str().unwrap().to_string();
    // Mid-task: committed, still running.
    wait_until("the first commit", Duration::from_secs(30), || {
        Path::new(&worktree)
            .join("first.txt")
            .exists()
            .then_some(())
    });
    wait_until("the commit", Duration::from_secs(30), || {
        (repo.git(&["log", "--format=%s", "-1", &format!("octl/{run}/w")]) == "first").then_some(())
    });
    tmux(&env, &["kill-pane", "-t", node["pane"].as_str().unwrap()]);

    let show = env.wait_status(&run, &["completed", "failed", "waiting"]);
    assert_eq!(show["manifest"]["status"], json!("completed"), "{show}");
    assert_eq!(repo.show("main", "first.txt").as_deref(), Some("first\n"));
    let argv = std::fs::read_to_string(scripts.path().join("argv")).unwrap();
    let lines: Vec<&str> = argv.lines().collect();
    assert_eq!(lines.len(), 2, "started, then resumed once: {argv}");
    assert!(
        lines[0].contains(&format!("--session-id {session}")),
        "{argv}"
    );
    assert!(lines[0].contains("--settings {\"hooks\""), "{argv}");
    assert!(lines[1].contains(&format!("--resume {session}")), "{argv}");
    assert!(!lines[1].contains("--session-id"), "{argv}");

    let events = env.log_events(&run);
    let exited = events_of(&events, "node.exited");
    assert_eq!(exited.len(), 1);
    assert!(
        exited[0]["data"]["reason"]
            .as_str()
            .unwrap()
            .contains("died before it reported"),
        "{}",
        exited[0]
    );
    let retried = events_of(&events, "node.retried");
    assert_eq!(retried.len(), 1);
    assert_eq!(retried[0]["data"]["resume"], json!(true));
    assert_eq!(retried[0]["data"]["session_id"], json!(session));
    let starts = events_of(&events, "node.starting");
    assert_eq!(starts.len(), 2);
    assert_eq!(starts[1]["data"]["resume"], json!(true));
    assert_eq!(starts[1]["data"]["worktree"], json!(worktree));
    // The attempt was kept: no cleanup between the death and the resumed start.
    let seq = |e: &Value| e["seq"].as_u64().unwrap();
    assert!(events_of(&events, "cleanup.done")
        .iter()
        .all(|c| seq(c) > seq(starts[1])));
}

#[test]
fn resuming_needs_a_conversation_and_its_worktree() {
    let (env, _d, repo) = TestEnv::world();
    let spawned = env
        .spawn(
            "spinoff",
            &repo,
            "exit 3",
            json!({"agent": "shell", "node": "s"}),
        )
        .unwrap();
    let run = spawned["id"].as_str().unwrap().to_string();
    env.wait_node(&run, "s", "failed");
    let out = env.cli(["run", "retry", &run, "--node", "s", "--resume"]);
    assert_eq!(out.code, 4, "{}", out.stderr);
    assert!(
        out.stderr.contains("no Claude Code session"),
        "{}",
        out.stderr
    );
    assert_eq!(
        env.event_types(&run).last().map(String::as_str),
        Some("run.failed"),
        "nothing written"
    );
}

#[test]
fn a_resume_and_a_fresh_retry_at_once_one_wins_and_the_loser_changes_nothing() {
    // A code run: an interactive agent that died is not resumed by itself, so the two
    // requests race alone.
    for round in 0..8 {
        let env = TestEnv::new();
        let scripts = tempfile::tempdir().unwrap();
        fake_claude(&env, scripts.path());
        let _d = env.start_daemon();
        let repo = TestRepo::new(&env, "repo");
        let run = env
            .spawn(
                "code",
                &repo,
                "write first.txt",
                json!({"agent": "claude", "node": "w"}),
            )
            .unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string();
        let node = env.wait_node(&run, "w", "running");
        tmux(&env, &["kill-pane", "-t", node["pane"].as_str().unwrap()]);
        env.wait_node(&run, "w", "exited");
        let env = std::sync::Arc::new(env);
        let racers: Vec<_> = [true, false]
            .into_iter()
            .map(|resume| {
                let (env, run) = (env.clone(), run.clone());
                std::thread::spawn(move || {
                    env.try_rpc(
                        "run.retry",
                        json!({"run": run, "node": "w", "resume": resume}),
                    )
                })
            })
            .collect();
        let results: Vec<_> = racers.into_iter().map(|t| t.join().unwrap()).collect();
        let won = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(won, 1, "round {round}: exactly one wins: {results:?}");
        let lost = results.iter().find_map(|r| r.clone().err()).unwrap();
        assert_eq!(lost["data"]["kind"], json!("invalid_transition"), "{lost}");
        let events = env.log_events(&run);
        let retried = events_of(&events, "node.retried");
        assert_eq!(retried.len(), 1, "round {round}");
        let resumed = retried[0]["data"]["resume"] == json!(true);
        // The winner's attempt is what happens next: resumed in the kept worktree, or the old
        // attempt saved and cleaned up before a fresh start.
        if resumed {
            env.wait_node(&run, "w", "done");
            let events = env.log_events(&run);
            assert!(
                events_of(&events, "cleanup.done").is_empty(),
                "round {round}"
            );
        } else {
            // The old attempt saved and cleaned up, then a fresh start — or, when its cleanup
            // could not finish (git busy), the node failed saying so, to be retried again.
            let events = wait_until("the fresh start", Duration::from_secs(30), || {
                let events = env.log_events(&run);
                let started = events_of(&events, "node.starting").len() == 2;
                let failed = events_of(&events, "node.failed").iter().any(|e| {
                    e["data"]["reason"]
                        .as_str()
                        .is_some_and(|r| r.contains("could not clean up the previous attempt"))
                });
                (started || failed).then_some(events)
            });
            assert!(
                events_of(&events, "node.starting")
                    .iter()
                    .all(|e| e["data"]["resume"] != json!(true)),
                "round {round}"
            );
        }
    }
}
