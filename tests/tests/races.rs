//! Commands that race: each pair is started at once (two CLI processes) many times, and the
//! invariants are checked, never the timings: the log never contradicts the repository, of two
//! retries exactly one wins and the winner's attempt is untouched, no node stays `running`
//! without an agent. Also: no dead ends (retry of a failed spinoff run, merging a failed node
//! as committed), cancel of an ended run, and `orchestrate --wait && merge`.

use std::process::Child;
use std::time::Duration;

use octl_tests::{wait_until, Cli, TestEnv, TestRepo};
use serde_json::{json, Value};

/// Runs two CLI commands at once and returns both outcomes.
fn race(env: &TestEnv, a: &[&str], b: &[&str]) -> (Cli, Cli) {
    let (ca, cb) = (env.start_cli_with(a, |_| {}), env.start_cli_with(b, |_| {}));
    let out = |c: Child| Cli::from(c.wait_with_output().expect("wait for orchestratectl"));
    (out(ca), out(cb))
}

fn types_of(events: &[Value], node: &str) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["node"] == json!(node) || e["node"].is_null())
        .map(|e| e["type"].as_str().unwrap().to_string())
        .collect()
}

fn node_of(show: &Value, id: &str) -> Value {
    show["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == json!(id))
        .cloned()
        .unwrap_or_else(|| panic!("no node {id} in {show}"))
}

/// A refused command: exit 4, kind `invalid_transition`.
fn assert_lost(out: &Cli, what: &str) {
    assert_eq!(out.code, 4, "{what}: {out:?}");
    assert_eq!(
        out.error()["kind"],
        json!("invalid_transition"),
        "{what}: {out:?}"
    );
}

#[test]
fn merge_and_cancel_discard_at_once_never_contradict_the_repository() {
    let (env, _d, repo) = TestEnv::world();
    let (mut merged, mut cancelled) = (0, 0);
    for i in 0..10 {
        let file = format!("f{i}.txt");
        let run = env
            .spawn(
                "code",
                &repo,
                &format!("printf '{i}\\n' > {file}"),
                json!({"agent": "shell", "node": "n"}),
            )
            .unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string();
        env.wait_node(&run, "n", "done");
        let (merge, cancel) = race(
            &env,
            &["--json", "merge", &run],
            &["--json", "run", "cancel", &run, "--discard"],
        );
        let show = env.wait_status(&run, &["completed", "cancelled"]);
        let events = env.log_events(&run);
        let types = types_of(&events, "n");
        let in_main = repo.show("main", &file).is_some();
        let says_merged = types.iter().any(|t| t == "merge.succeeded");
        assert_eq!(
            in_main, says_merged,
            "round {i}: main has the commit exactly when the log says merged: {types:?}\nmerge: {merge:?}\ncancel: {cancel:?}"
        );
        // Exactly one of them won its step; the other changed nothing.
        match (merge.code, cancel.code) {
            (0, _) => {
                merged += 1;
                assert!(says_merged, "round {i}: {types:?}");
                assert_eq!(show["manifest"]["status"], json!("completed"), "{show}");
                assert_lost(&cancel, "cancel after the merge won");
                assert!(!types.iter().any(|t| t == "node.cancelled"), "{types:?}");
            }
            (_, 0) => {
                cancelled += 1;
                assert_lost(&merge, "merge after the cancel won");
                assert!(
                    !types.iter().any(|t| t.starts_with("merge.")),
                    "round {i}: a merge that lost writes nothing: {types:?}"
                );
                assert_eq!(show["manifest"]["status"], json!("cancelled"));
                let snap = format!("refs/octl/snapshots/{run}/n");
                assert!(
                    repo.refs("refs/octl/snapshots/").contains(&snap),
                    "discarded work is kept under {snap}"
                );
            }
            _ => panic!("round {i}: neither won\nmerge: {merge:?}\ncancel: {cancel:?}"),
        }
        assert!(
            !env.home.join("worktrees").join(&run).join("n").exists(),
            "round {i}: both outcomes remove the worktree"
        );
    }
    eprintln!("merge ‖ cancel --discard: {merged} merged, {cancelled} cancelled of 10");
    let report = env.cli(["--json", "doctor"]).json();
    let runs = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == json!("runs"))
        .cloned()
        .unwrap_or_else(|| panic!("no runs check: {report}"));
    assert_eq!(runs["status"], json!("ok"), "every log replays: {runs}");
}

#[test]
fn two_retries_at_once_one_wins_and_its_attempt_is_untouched() {
    let (env, d, repo) = TestEnv::world();
    let fixed = env.root.path().join("fixed");
    let go = env.root.path().join("go");
    // A unit fails until `fixed` exists; once fixed, it holds until `go` exists, so the
    // retried attempt is provably running while the race's loser has already returned.
    let mut manifest = format!(
        "title = \"retries\"\nprompt = \"test -e {f} || exit 1; while ! test -e {g}; do sleep 0.05; done; printf '%s\\\\n' {{id}} > {{id}}.txt\"\n",
        f = fixed.display(),
        g = go.display()
    );
    let units: Vec<String> = (0..10).map(|i| format!("u{i}")).collect();
    for u in &units {
        manifest.push_str(&format!(
            "[[units]]\nid = \"{u}\"\nvars = {{ id = \"{u}\" }}\n"
        ));
    }
    let run = env.rpc(
        "fanout.start",
        json!({"manifest": manifest, "format": "toml", "repo": repo.path.display().to_string(), "agent": "shell", "max_parallel": 10}),
    )["id"]
        .as_str()
        .unwrap()
        .to_string();
    let show = env.wait_status(&run, &["waiting"]);
    assert_eq!(show["manifest"]["nodes"], json!({"failed": 10}), "{show}");
    std::fs::write(&fixed, "").unwrap();
    for u in &units {
        let args = ["--json", "run", "retry", &run, "--node", u];
        let (a, b) = race(&env, &args, &args);
        let (won, lost) = match (a.code, b.code) {
            (0, _) => (a, b),
            (_, 0) => (b, a),
            _ => panic!("{u}: no retry won: {a:?} {b:?}"),
        };
        assert_eq!(won.json()["id"], json!(run));
        assert_lost(&lost, "the second retry");
        let msg = lost.error()["message"].as_str().unwrap().to_string();
        assert!(
            msg.contains(&format!("node \"{u}\" is "))
                && !msg.contains(&format!("node \"{u}\" is failed;")),
            "{u}: the loser names the state it lost to: {msg}"
        );
        let node = env.wait_node(&run, u, "running");
        // The winner's attempt: its worktree and branch exist and are the node's.
        let worktree = node["worktree"].as_str().unwrap().to_string();
        let branch = node["branch"].as_str().unwrap().to_string();
        assert!(std::path::Path::new(&worktree).is_dir(), "{u}: {node}");
        let tip = repo.git(&["rev-parse", "--verify", &format!("refs/heads/{branch}")]);
        assert!(!tip.trim().is_empty(), "{u}: the branch exists");
        let events = env.log_events(&run);
        let mine: Vec<&str> = events
            .iter()
            .filter(|e| e["node"] == json!(u))
            .map(|e| e["type"].as_str().unwrap())
            .collect();
        assert_eq!(
            mine.iter().filter(|t| **t == "node.retried").count(),
            1,
            "{u}: {mine:?}"
        );
        // The old attempt was cleaned up after the decision and before the new start.
        let after: Vec<&str> = mine
            .iter()
            .copied()
            .skip_while(|t| *t != "node.retried")
            .collect();
        assert_eq!(
            &after[..4],
            &[
                "node.retried",
                "cleanup.done",
                "node.starting",
                "node.started"
            ],
            "{u}: {mine:?}"
        );
    }
    // Across a restart every retried agent is still running, and only those.
    d.signal_and_wait(libc::SIGTERM);
    let _d = env.start_daemon();
    let show = env.rpc("run.show", json!({"run": run}));
    assert_eq!(show["manifest"]["nodes"], json!({"running": 10}), "{show}");
    let windows = env.tmux_windows();
    for u in &units {
        assert!(
            windows.contains(&format!("{run}:{u}")),
            "{u} has its agent: {windows:?}"
        );
    }
    std::fs::write(&go, "").unwrap();
    let wait = env.cli(["--json", "run", "wait", &run, "--timeout", "120"]);
    assert_eq!(wait.code, 0, "run wait returns, completed: {wait:?}");
    for u in &units {
        assert_eq!(
            repo.show("main", &format!("{u}.txt")).as_deref(),
            Some(format!("{u}\n").as_str())
        );
    }
    assert!(repo.extra_worktrees().is_empty());
}

#[test]
fn a_failed_spinoff_run_is_retried_and_completes() {
    let (env, _d, repo) = TestEnv::world();
    let flag = env.root.path().join("may-pass");
    let run = env
        .spawn(
            "spinoff",
            &repo,
            &format!(
                "printf 'try\\n' > try.txt; test -e {} && printf 'ok\\n' > s.txt",
                flag.display()
            ),
            json!({"agent": "shell", "node": "s"}),
        )
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let show = env.wait_status(&run, &["failed"]);
    assert_eq!(node_of(&show, "s")["state"], json!("failed"));
    std::fs::write(&flag, "").unwrap();
    let out = env.cli(["run", "retry", &run, "--node", "s"]);
    out.ok();
    assert!(
        out.stdout.contains("from the tip of main"),
        "{}",
        out.stdout
    );
    let show = env.wait_status(&run, &["completed", "failed"]);
    assert_eq!(show["manifest"]["status"], json!("completed"), "{show}");
    assert_eq!(repo.show("main", "s.txt").as_deref(), Some("ok\n"));
    let snap = format!("refs/octl/snapshots/{run}/s");
    assert!(repo.refs("refs/octl/snapshots/").contains(&snap));
    // The first attempt's uncommitted file is in its snapshot.
    assert!(node_of(&show, "s")["snapshot_refs"]
        .as_array()
        .is_some_and(|r| !r.is_empty()));
    let types = env.event_types(&run);
    let failed = types.iter().position(|t| t == "run.failed").unwrap();
    assert_eq!(types[failed + 1], "node.retried", "{types:?}");
    assert_eq!(types.last().unwrap(), "run.completed");

    // A run that ended: a plain cancel says so and exits 4; --discard still works.
    let out = env.cli(["--json", "run", "cancel", &run]);
    assert_lost(&out, "cancel of a completed run");
    assert!(
        out.error()["message"]
            .as_str()
            .unwrap()
            .contains("already ended (completed)"),
        "{out:?}"
    );
    let out = env.cli(["run", "cancel", &run, "--discard"]);
    out.ok();
    assert!(
        out.stdout
            .starts_with(&format!("Run {run} had already ended (completed)")),
        "{out:?}"
    );
}

#[test]
fn a_failed_node_is_merged_as_committed_on_a_humans_say_so() {
    let (env, _d, repo) = TestEnv::world();
    let run = env
        .spawn(
            "spinoff",
            &repo,
            "printf 'half\\n' > half.txt && git add half.txt && git commit -qm half && printf 'loose\\n' > loose.txt && exit 3",
            json!({"agent": "shell", "node": "h"}),
        )
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    env.wait_status(&run, &["failed"]);
    let out = env.cli(["--json", "merge", &run]);
    assert_lost(&out, "merge of a failed node without the flag");
    assert!(
        out.error()["hint"]
            .as_str()
            .unwrap()
            .contains("--accept-failed"),
        "{out:?}"
    );
    assert!(repo.show("main", "half.txt").is_none());
    let out = env.cli(["--json", "merge", &run, "--node", "h", "--accept-failed"]);
    out.ok();
    assert_eq!(out.json()["state"], json!("merged"));
    assert_eq!(repo.show("main", "half.txt").as_deref(), Some("half\n"));
    assert!(
        repo.show("main", "loose.txt").is_none(),
        "only what it committed"
    );
    let show = env.wait_status(&run, &["completed"]);
    let snap = &node_of(&show, "h")["snapshot_ref"];
    assert!(snap.is_string(), "the uncommitted file is kept: {show}");
    let started = env
        .log_events(&run)
        .into_iter()
        .find(|e| e["type"] == json!("merge.started"))
        .unwrap();
    assert_eq!(started["data"]["accept_failed"], json!(true));
}

#[test]
fn orchestrate_wait_then_merge_merges() {
    let (env, _d, repo) = TestEnv::world();
    let plan = env.root.path().join("plan.toml");
    std::fs::write(
        &plan,
        "[[nodes]]\nid = \"a\"\ntask = \"printf a > a.txt\"\n[[nodes]]\nid = \"b\"\ntask = \"printf b > b.txt\"\ndeps = [\"a\"]\n",
    )
    .unwrap();
    let out = env.cli_with(
        [
            "--json",
            "orchestrate",
            "--plan",
            plan.to_str().unwrap(),
            "--agent",
            "shell",
            "--wait",
        ],
        |c| {
            c.current_dir(&repo.path);
        },
    );
    assert_eq!(
        out.code, 0,
        "every node is in integration: --wait succeeds: {out:?}"
    );
    let run = out.json()["id"].as_str().unwrap().to_string();
    assert!(repo.show("main", "b.txt").is_none(), "not merged yet");
    env.cli(["merge", &run]).ok();
    assert_eq!(repo.show("main", "b.txt").as_deref(), Some("b"));
    let wait = env.cli(["run", "wait", &run]);
    assert_eq!(wait.code, 0, "{wait:?}");
}

#[test]
fn a_corrupt_run_is_refused_with_run_corrupt() {
    let env = TestEnv::new();
    let d = env.start_daemon();
    let run = env.create_run("c");
    env.rpc(
        "event.append",
        json!({"run": run, "type": "node.added", "node": "a"}),
    );
    env.rpc(
        "event.append",
        json!({"run": run, "type": "node.progress", "node": "a"}),
    );
    d.signal_and_wait(libc::SIGTERM);
    // A damaged line in the middle of the log.
    let log = env.run_dir(&run).join("events.jsonl");
    let text = std::fs::read_to_string(&log).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines[1] = "{not json".to_string();
    std::fs::write(&log, lines.join("\n") + "\n").unwrap();
    let _d = env.start_daemon();
    wait_until("the run is marked corrupt", Duration::from_secs(10), || {
        (env.rpc("run.show", json!({"run": run}))["manifest"]["status"] == json!("corrupt"))
            .then_some(())
    });
    for args in [
        vec!["--json", "merge", &run, "--node", "a"],
        vec!["--json", "run", "cancel", &run],
        vec!["--json", "run", "retry", &run, "--node", "a"],
    ] {
        let out = env.cli(&args);
        assert_eq!(out.code, 4, "{args:?}: {out:?}");
        assert_eq!(
            out.error()["kind"],
            json!("run_corrupt"),
            "{args:?}: {out:?}"
        );
    }
}

#[test]
fn an_agent_that_exited_while_the_daemon_was_down_is_not_shown_running_after_a_restart() {
    let (env, d, repo) = TestEnv::world();
    let go = env.root.path().join("go");
    let run = env
        .spawn(
            "spinoff",
            &repo,
            &format!(
                "while ! test -e {}; do sleep 0.05; done; exit 7",
                go.display()
            ),
            json!({"agent": "shell", "node": "w"}),
        )
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    env.wait_node(&run, "w", "running");
    d.signal_and_wait(libc::SIGTERM);
    std::fs::write(&go, "").unwrap();
    // The agent ends while no daemon watches it: its pane dies (kept by remain-on-exit).
    wait_until("the agent's pane to die", Duration::from_secs(30), || {
        let out = env.tmux(&[
            "list-panes",
            "-a",
            "-F",
            "#{session_name}:#{window_name} #{pane_dead}",
        ]);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .any(|l| l == format!("{run}:w 1"))
            .then_some(())
    });
    let _d = env.start_daemon();
    // The very first answer already knows.
    let node = node_of(&env.rpc("run.show", json!({"run": run})), "w");
    assert_eq!(node["state"], json!("failed"), "{node}");
    assert_eq!(node["exit_status"], json!(7), "{node}");
}

#[test]
fn a_crash_between_a_cancel_and_its_windows_closes_them_on_restart() {
    let env = TestEnv::new();
    let d = env.start_daemon_with(&[("OCTL_FAILPOINTS", "cancel:after-decided")]);
    let repo = TestRepo::new(&env, "repo");
    let run = env
        .spawn(
            "spinoff",
            &repo,
            "sleep 600",
            json!({"agent": "shell", "node": "long"}),
        )
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    env.wait_node(&run, "long", "running");
    let out = env.cli(["--json", "run", "cancel", &run]);
    assert_ne!(out.code, 0, "the daemon died mid-cancel: {out:?}");
    assert!(!d.wait_exit().success(), "the failpoint fired");
    assert_eq!(
        env.event_types(&run).last().map(String::as_str),
        Some("run.cancelled"),
        "decided before the crash"
    );
    assert!(
        env.tmux_windows().contains(&format!("{run}:long")),
        "its agent outlived the crash"
    );
    let _d = env.start_daemon();
    assert!(
        !env.tmux_windows().iter().any(|w| w.starts_with(&run)),
        "the restart finished the cancel: {:?}",
        env.tmux_windows()
    );
    let show = env.rpc("run.show", json!({"run": run}));
    assert_eq!(show["manifest"]["status"], json!("cancelled"));
    assert!(
        env.home.join("worktrees").join(&run).join("long").is_dir(),
        "a plain cancel keeps the worktree"
    );
}

#[test]
fn a_dead_tmux_server_is_logged_with_its_cause_and_its_agents_end() {
    let (env, _d, repo) = TestEnv::world();
    let run = env
        .spawn(
            "spinoff",
            &repo,
            "sleep 600",
            json!({"agent": "shell", "node": "long"}),
        )
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    env.wait_node(&run, "long", "running");
    assert!(env.tmux(&["kill-server"]).status.success());
    // Not left running: the vanished window ends the node, and it can be retried.
    let show = env.wait_status(&run, &["failed"]);
    assert_eq!(node_of(&show, "long")["state"], json!("failed"), "{show}");
    let log = env.home.join("octld.log");
    let line = wait_until("octld.log to say why", Duration::from_secs(10), || {
        std::fs::read_to_string(&log)
            .ok()?
            .lines()
            .find(|l| l.contains("the tmux server is gone"))
            .map(str::to_string)
    });
    assert!(line.contains("cause"), "{line}");
}

#[test]
fn a_crash_between_a_retry_and_its_cleanup_is_finished_on_restart() {
    let env = TestEnv::new();
    let d = env.start_daemon_with(&[("OCTL_FAILPOINTS", "retry:before-cleanup")]);
    let repo = TestRepo::new(&env, "repo");
    let flag = env.root.path().join("may-pass");
    let run = env
        .spawn(
            "spinoff",
            &repo,
            &format!("test -e {} && printf ok > r.txt", flag.display()),
            json!({"agent": "shell", "node": "r"}),
        )
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    env.wait_status(&run, &["failed"]);
    std::fs::write(&flag, "").unwrap();
    let out = env.cli(["--json", "run", "retry", &run, "--node", "r"]);
    assert_ne!(out.code, 0, "the daemon died after the decision: {out:?}");
    assert!(!d.wait_exit().success(), "the failpoint fired");
    assert_eq!(
        env.event_types(&run).last().map(String::as_str),
        Some("node.retried")
    );
    let _d = env.start_daemon();
    let show = env.wait_status(&run, &["completed", "failed"]);
    assert_eq!(show["manifest"]["status"], json!("completed"), "{show}");
    assert_eq!(repo.show("main", "r.txt").as_deref(), Some("ok"));
    let types = env.event_types(&run);
    let retried = types.iter().position(|t| t == "node.retried").unwrap();
    assert_eq!(
        &types[retried..retried + 3],
        &["node.retried", "cleanup.done", "node.starting"],
        "{types:?}"
    );
}

#[test]
fn a_failed_node_whose_worktree_was_removed_by_hand_is_retried_and_its_commit_kept() {
    let (env, _d, repo) = TestEnv::world();
    let flag = env.root.path().join("may-pass");
    // The first attempt commits, then fails; the retry passes.
    let run = env
        .spawn(
            "spinoff",
            &repo,
            &format!(
                "printf 'one\\n' > one.txt && git add one.txt && git commit -qm one && test -e {} && printf 'ok\\n' > s.txt",
                flag.display()
            ),
            json!({"agent": "shell", "node": "s"}),
        )
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let show = env.wait_status(&run, &["failed"]);
    let node = node_of(&show, "s");
    let branch = node["branch"].as_str().unwrap().to_string();
    let first_tip = repo.rev(&branch);
    // A human removes the failed attempt's worktree; its branch stays.
    repo.git(&[
        "worktree",
        "remove",
        "--force",
        node["worktree"].as_str().unwrap(),
    ]);
    std::fs::write(&flag, "").unwrap();
    env.cli(["run", "retry", &run, "--node", "s"]).ok();
    let show = env.wait_status(&run, &["completed", "failed"]);
    assert_eq!(show["manifest"]["status"], json!("completed"), "{show}");
    assert_eq!(repo.show("main", "s.txt").as_deref(), Some("ok\n"));
    // The first attempt's commit is saved under the node's snapshot ref, not lost.
    let snap = format!("refs/octl/snapshots/{run}/s");
    let contained = repo
        .try_git_in(
            &repo.path,
            &["merge-base", "--is-ancestor", &first_tip, &snap],
        )
        .status
        .success();
    assert!(
        contained,
        "the first attempt's tip {first_tip} is not in {snap}"
    );
}
