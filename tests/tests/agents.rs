//! Worktree agents end to end: real git, real tmux on a private socket, fake agents as shell
//! scripts (the `shell` profile), against the real daemon.

use octl_tests::{TestEnv, TestRepo};
use serde_json::{json, Value};

fn node0(show: &Value) -> Value {
    show["nodes"][0].clone()
}

fn run_id(v: &Value) -> String {
    v["id"].as_str().unwrap().to_string()
}

#[test]
fn a_spinoff_merges_and_leaves_no_window_worktree_or_branch() {
    let (env, _d, repo) = TestEnv::world();
    let base_before = repo.rev("main");
    let spawned = env
        .spawn(
            "spinoff",
            &repo,
            "printf 'from the agent\\n' > agent.txt",
            json!({"agent": "shell", "node": "writer"}),
        )
        .unwrap();
    let run = run_id(&spawned);
    assert_eq!(
        spawned["node"]["branch"],
        json!(format!("octl/{run}/writer"))
    );
    let show = env.wait_status(&run, &["completed", "failed", "waiting"]);
    assert_eq!(show["manifest"]["status"], json!("completed"), "{show}");
    let node = node0(&show);
    assert_eq!(node["state"], json!("merged"));
    let commit = node["merge_commit"].as_str().unwrap();
    assert_eq!(repo.rev("main"), commit);
    assert_eq!(
        repo.show("main", "agent.txt").as_deref(),
        Some("from the agent\n")
    );
    assert!(repo
        .git(&["merge-base", "--is-ancestor", &base_before, "main"])
        .is_empty());
    // The user's checkout of main moved with it (fast-forward through its worktree).
    assert_eq!(
        std::fs::read_to_string(repo.path.join("agent.txt")).unwrap(),
        "from the agent\n"
    );
    // Nothing left behind but the snapshot ref.
    assert!(repo.refs("refs/heads/octl/").is_empty(), "branch deleted");
    assert!(repo.extra_worktrees().is_empty(), "worktree removed");
    assert!(!std::path::Path::new(node["worktree"].as_str().unwrap()).exists());
    assert!(
        env.tmux_windows().iter().all(|w| !w.starts_with(&run)),
        "window gone: {:?}",
        env.tmux_windows()
    );
    assert_eq!(
        repo.refs("refs/octl/snapshots/"),
        vec![format!("refs/octl/snapshots/{run}/writer")]
    );
    assert_eq!(
        node["snapshot_ref"],
        json!(format!("refs/octl/snapshots/{run}/writer"))
    );
    // The order of the log is the contract: intent before each side effect.
    assert_eq!(
        env.event_types(&run),
        [
            "run.created",
            "node.added",
            "node.starting",
            "node.started",
            "node.done",
            "merge.started",
            "merge.succeeded",
            "cleanup.done",
            "run.completed"
        ]
    );
}

#[test]
fn the_agent_window_has_the_octl_environment_and_its_output_is_logged() {
    let (env, _d, repo) = TestEnv::world();
    let task = "echo \"run=$OCTL_RUN node=$OCTL_NODE wt=$OCTL_WORKTREE home=$OCTL_HOME\"; echo \"$OCTL_RUN $OCTL_NODE $OCTL_WORKTREE $OCTL_HOME\" > env.txt";
    let run = run_id(
        &env.spawn(
            "spinoff",
            &repo,
            task,
            json!({"agent": "shell", "node": "env"}),
        )
        .unwrap(),
    );
    let show = env.wait_status(&run, &["completed", "failed"]);
    let worktree = env.home.join("worktrees").join(&run).join("env");
    assert_eq!(
        repo.show("main", "env.txt").unwrap().trim(),
        format!("{run} env {} {}", worktree.display(), env.home.display()),
        "{show}"
    );
    let log = std::fs::read_to_string(env.run_dir(&run).join("logs/env.log")).unwrap();
    assert!(
        log.contains(&format!("run={run} node=env")),
        "pane output kept in the log: {log:?}"
    );
}

#[test]
fn a_code_run_waits_for_merge_then_merges() {
    let (env, _d, repo) = TestEnv::world();
    let run = run_id(
        &env.spawn(
            "code",
            &repo,
            "printf 'reviewed\\n' > review.txt",
            json!({"agent": "shell", "node": "ui"}),
        )
        .unwrap(),
    );
    let show = env.wait_status(&run, &["waiting", "failed"]);
    assert_eq!(
        show["manifest"]["status"],
        json!("waiting"),
        "a done code node waits for a human: {show}"
    );
    assert_eq!(node0(&show)["state"], json!("done"));
    assert!(
        repo.show("main", "review.txt").is_none(),
        "nothing merged before the human says so"
    );

    let out = env.cli(["--json", "merge", &run]);
    out.ok();
    let merged = out.json();
    assert_eq!(merged["state"], json!("merged"));
    assert_eq!(repo.rev("main"), merged["merge_commit"].as_str().unwrap());
    assert_eq!(
        repo.show("main", "review.txt").as_deref(),
        Some("reviewed\n")
    );
    let show = env.wait_status(&run, &["completed"]);
    assert!(node0(&show)["cleaned"].as_bool().unwrap_or(false));
    assert!(repo.refs("refs/heads/octl/").is_empty());
    // Merging again reports the existing merge.
    let again = env.cli(["--json", "merge", &run]);
    again.ok();
    assert_eq!(again.json()["merge_commit"], merged["merge_commit"]);
}

#[test]
fn a_conflict_keeps_branch_and_worktree_and_leaves_base_untouched() {
    let (env, _d, repo) = TestEnv::world();
    repo.write("shared.txt", "base\n");
    repo.commit_all("shared file");
    // The agent edits shared.txt after main has changed it too.
    let task = "printf 'agent\\n' > shared.txt && git add shared.txt && git commit -q -m agent && orchestratectl node progress --message committed && sleep 0.2 && orchestratectl node progress --message waiting-for-main && while [ ! -e go ]; do sleep 0.05; done";
    let run = run_id(
        &env.spawn(
            "spinoff",
            &repo,
            task,
            json!({"agent": "shell", "node": "clash"}),
        )
        .unwrap(),
    );
    env.wait_node(&run, "clash", "running");
    repo.write("shared.txt", "main\n");
    let main_tip = repo.commit_all("main edits shared");
    let worktree = env.home.join("worktrees").join(&run).join("clash");
    std::fs::write(worktree.join("go"), "").unwrap();
    let show = env.wait_status(&run, &["waiting", "completed", "failed"]);
    assert_eq!(show["manifest"]["status"], json!("waiting"), "{show}");
    let node = node0(&show);
    assert_eq!(node["state"], json!("conflict"));
    assert_eq!(node["conflict_files"], json!(["shared.txt"]));
    assert_eq!(repo.rev("main"), main_tip, "base untouched");
    assert_eq!(
        std::fs::read_to_string(repo.path.join("shared.txt")).unwrap(),
        "main\n"
    );
    assert_eq!(
        repo.refs("refs/heads/octl/"),
        vec![format!("refs/heads/octl/{run}/clash")],
        "branch kept"
    );
    assert!(worktree.exists(), "worktree kept");
    assert_eq!(
        show["discussions"][0]["open"],
        json!(true),
        "a human is asked"
    );
    // merge reports the conflict with exit 4.
    let out = env.cli(["--json", "merge", &run]);
    assert_eq!(out.code, 4, "{out:?}");
    assert_eq!(out.error()["kind"], json!("merge_conflict"));
    assert!(out.error()["message"]
        .as_str()
        .unwrap()
        .contains("shared.txt"));
    // A human resolves it in the worktree and merges.
    let wt = worktree.clone();
    let _ = repo.try_git_in(&wt, &["merge", "main"]);
    std::fs::write(wt.join("shared.txt"), "both\n").unwrap();
    repo.git_in(&wt, &["add", "-A"]);
    repo.git_in(&wt, &["commit", "-q", "-m", "resolve"]);
    env.cli(["merge", &run]).ok();
    assert_eq!(repo.show("main", "shared.txt").as_deref(), Some("both\n"));
    let show = env.wait_status(&run, &["completed"]);
    assert_eq!(
        show["discussions"][0]["open"],
        json!(false),
        "the merge settles the discussion"
    );
}

#[test]
fn an_agent_that_exits_three_fails_with_status_three_and_keeps_its_worktree() {
    let (env, _d, repo) = TestEnv::world();
    let run = run_id(
        &env.spawn(
            "spinoff",
            &repo,
            "echo partial > half.txt; exit 3",
            json!({"agent": "shell", "node": "bad"}),
        )
        .unwrap(),
    );
    let show = env.wait_status(&run, &["failed"]);
    let node = node0(&show);
    assert_eq!(node["state"], json!("failed"));
    assert_eq!(node["exit_status"], json!(3));
    let worktree = std::path::PathBuf::from(node["worktree"].as_str().unwrap());
    assert_eq!(
        std::fs::read_to_string(worktree.join("half.txt")).unwrap(),
        "partial\n",
        "uncommitted work kept"
    );
    assert_eq!(repo.refs("refs/heads/octl/").len(), 1, "branch kept");
    let out = env.cli(["--json", "run", "wait", &run]);
    assert_eq!(out.code, 4, "run wait exits 4 for a failed run: {out:?}");
}

#[test]
fn a_silent_agent_is_failed_by_the_watchdog_with_the_reason_and_its_window_closed() {
    let env = TestEnv::new();
    env.write_config("[agents.shell]\nsilence_limit_secs = 1\n");
    let _d = env.start_daemon();
    let repo = TestRepo::new(&env, "repo");
    // An agent that waits for a person's decision on a permission request is not stuck,
    // however long it waits.
    let input = json!({"hook_event_name": "PermissionRequest", "tool_name": "Bash",
                       "tool_input": {"command": "python3 x.py"}});
    let asker = run_id(
        &env.spawn(
            "spinoff",
            &repo,
            &format!("echo '{input}' | orchestratectl hook PermissionAsk > /dev/null; sleep 600"),
            json!({"agent": "shell", "node": "asks"}),
        )
        .unwrap(),
    );
    octl_tests::wait_until("the request", std::time::Duration::from_secs(30), || {
        env.event_types(&asker)
            .contains(&"node.permission_asked".to_string())
            .then_some(())
    });
    let run = run_id(
        &env.spawn(
            "spinoff",
            &repo,
            "echo started; sleep 600",
            json!({"agent": "shell", "node": "quiet"}),
        )
        .unwrap(),
    );
    let show = env.wait_status(&run, &["failed"]);
    // Silent for longer than the quiet one, which the watchdog stopped: still running.
    let asking = env.rpc("run.show", json!({"run": asker}));
    assert_eq!(node0(&asking)["state"], json!("running"), "{asking}");
    let node = node0(&show);
    assert_eq!(node["state"], json!("failed"), "{show}");
    let reason = node["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("silent (no output)") && reason.contains("agents.shell.silence_limit_secs"),
        "{reason}"
    );
    let failed: Vec<Value> = env
        .log_events(&run)
        .into_iter()
        .filter(|e| e["type"] == json!("node.failed"))
        .collect();
    assert_eq!(
        failed.len(),
        1,
        "one decision, not a second one at the exit: {failed:?}"
    );
    octl_tests::wait_until(
        "the silent agent's window closed",
        std::time::Duration::from_secs(20),
        || (!env.tmux_windows().iter().any(|w| w.ends_with(":quiet"))).then_some(()),
    );
}

#[test]
fn cancel_keeps_worktrees_and_discard_snapshots_them_first() {
    let (env, _d, repo) = TestEnv::world();
    let slow = "echo draft > draft.txt; while true; do sleep 1; done";
    // Without --discard: agent stopped, branch and worktree kept.
    let keep = run_id(
        &env.spawn(
            "spinoff",
            &repo,
            slow,
            json!({"agent": "shell", "node": "keep"}),
        )
        .unwrap(),
    );
    env.wait_node(&keep, "keep", "running");
    let out = env.cli(["--json", "run", "cancel", &keep]);
    out.ok();
    assert_eq!(out.json()["status"], json!("cancelled"));
    let wt_keep = env.home.join("worktrees").join(&keep).join("keep");
    assert!(wt_keep.exists());
    assert!(repo
        .refs("refs/heads/octl/")
        .contains(&format!("refs/heads/octl/{keep}/keep")));
    assert!(
        env.tmux_windows().iter().all(|w| !w.starts_with(&keep)),
        "agent stopped"
    );

    // With --discard: the uncommitted file lives on in the snapshot ref.
    let gone = run_id(
        &env.spawn(
            "spinoff",
            &repo,
            slow,
            json!({"agent": "shell", "node": "gone"}),
        )
        .unwrap(),
    );
    let wt_gone = env.home.join("worktrees").join(&gone).join("gone");
    octl_tests::wait_until("the draft file", std::time::Duration::from_secs(20), || {
        wt_gone.join("draft.txt").exists().then_some(())
    });
    env.cli(["run", "cancel", &gone, "--discard"]).ok();
    assert!(!wt_gone.exists(), "worktree removed");
    assert!(
        !repo
            .refs("refs/heads/octl/")
            .contains(&format!("refs/heads/octl/{gone}/gone")),
        "branch removed"
    );
    let snap = format!("refs/octl/snapshots/{gone}/gone");
    assert_eq!(
        repo.show(&snap, "draft.txt").as_deref(),
        Some("draft\n"),
        "nothing lost"
    );
    let show = env.rpc("run.show", json!({"run": gone}));
    assert_eq!(node0(&show)["snapshot_ref"], json!(snap));
    assert_eq!(show["manifest"]["status"], json!("cancelled"));
}

#[test]
fn a_dirty_checked_out_base_blocks_the_merge_and_keeps_the_users_change() {
    let (env, _d, repo) = TestEnv::world();
    repo.write("notes.txt", "v1\n");
    repo.commit_all("notes");
    // The user is editing notes.txt on main, uncommitted; the agent changes notes.txt too.
    repo.write("notes.txt", "user's unsaved edit\n");
    let before = repo.rev("main");
    let run = run_id(
        &env.spawn(
            "spinoff",
            &repo,
            "printf 'v2\\n' > notes.txt",
            json!({"agent": "shell", "node": "notes"}),
        )
        .unwrap(),
    );
    let show = env.wait_status(&run, &["waiting", "completed", "failed"]);
    assert_eq!(node0(&show)["state"], json!("merge_blocked"), "{show}");
    assert_eq!(repo.rev("main"), before, "nothing moved");
    assert_eq!(
        std::fs::read_to_string(repo.path.join("notes.txt")).unwrap(),
        "user's unsaved edit\n"
    );
    let out = env.cli(["--json", "merge", &run]);
    assert_eq!(out.code, 4);
    assert_eq!(out.error()["kind"], json!("target_dirty"));
    // Once the user commits elsewhere... here: restores the file, the merge goes through.
    repo.git(&["checkout", "--", "notes.txt"]);
    env.cli(["merge", &run]).ok();
    assert_eq!(repo.show("main", "notes.txt").as_deref(), Some("v2\n"));
}

#[test]
fn a_base_that_is_not_checked_out_moves_by_compare_and_swap() {
    let (env, _d, repo) = TestEnv::world();
    repo.git(&["branch", "release"]);
    // The user's checkout stays on main, dirty; release is checked out nowhere.
    repo.write("README.md", "dirty on main\n");
    let release_before = repo.rev("release");
    let run = run_id(
        &env.spawn(
            "spinoff",
            &repo,
            "printf 'fix\\n' > fix.txt",
            json!({"agent": "shell", "base": "release", "node": "fix"}),
        )
        .unwrap(),
    );
    let show = env.wait_status(&run, &["completed", "waiting", "failed"]);
    assert_eq!(show["manifest"]["status"], json!("completed"), "{show}");
    assert_ne!(repo.rev("release"), release_before);
    assert_eq!(repo.show("release", "fix.txt").as_deref(), Some("fix\n"));
    assert_eq!(
        std::fs::read_to_string(repo.path.join("README.md")).unwrap(),
        "dirty on main\n"
    );
    assert!(repo.show("main", "fix.txt").is_none());
    // The ref was moved by `update-ref` (its reason is our merge message), not by a checkout.
    let reflog = repo.git(&["reflog", "show", "--format=%H %gs", "release"]);
    let last = reflog.lines().next().unwrap();
    assert!(
        last.starts_with(&repo.rev("release")) && last.contains(&format!("Merge octl/{run}/fix")),
        "{reflog}"
    );
}

#[test]
fn a_failing_gate_fails_the_node_and_keeps_the_branch() {
    let (env, _d, repo) = TestEnv::world();
    let run = run_id(
        &env.spawn("spinoff", &repo, "printf 'broken\\n' > code.txt", json!({"agent": "shell", "node": "gated", "gate": "echo checking; grep -q fixed code.txt"})).unwrap(),
    );
    let show = env.wait_status(&run, &["failed", "completed"]);
    let node = node0(&show);
    assert_eq!(node["state"], json!("failed"), "{show}");
    assert!(node["reason"].as_str().unwrap().contains("gate"));
    assert!(repo.show("main", "code.txt").is_none(), "not merged");
    assert_eq!(repo.refs("refs/heads/octl/").len(), 1, "branch kept");
    let log = std::fs::read_to_string(env.run_dir(&run).join("logs/gated.log")).unwrap();
    assert!(
        log.contains("checking"),
        "the gate's output is in the node's log: {log}"
    );
    // A passing gate lets the merge through.
    let ok = run_id(
        &env.spawn(
            "spinoff",
            &repo,
            "printf 'fixed\\n' > code.txt",
            json!({"agent": "shell", "node": "gated", "gate": "grep -q fixed code.txt"}),
        )
        .unwrap(),
    );
    env.wait_status(&ok, &["completed"]);
    assert_eq!(repo.show("main", "code.txt").as_deref(), Some("fixed\n"));
}

#[test]
fn spawn_refuses_bad_input_and_missing_programs_creating_nothing() {
    let mut env = TestEnv::new();
    env.write_config("[agents.ghost]\nautonomous = [\"no-such-agent-program\", \"{prompt}\"]\n");
    env.set_env("OCTL_UNUSED", "1");
    let _d = env.start_daemon();
    let repo = TestRepo::new(&env, "repo");
    let cases = [
        (json!({"agent": "ghost"}), "echo", "tool_missing"),
        (json!({"agent": "nope"}), "echo", "not_found"),
        (
            json!({"agent": "shell", "base": "no-such-branch"}),
            "echo",
            "not_found",
        ),
        (
            json!({"agent": "shell", "node": "../x"}),
            "echo",
            "invalid_params",
        ),
        (json!({"agent": "shell"}), "   ", "invalid_params"),
    ];
    for (extra, task, kind) in cases {
        let err = env
            .spawn("spinoff", &repo, task, extra.clone())
            .unwrap_err();
        assert_eq!(err["data"]["kind"], json!(kind), "{extra}: {err}");
    }
    let err = env
        .try_rpc("spawn.spinoff", json!({"task": "echo", "repo": env.root.path().display().to_string(), "agent": "shell"}))
        .unwrap_err();
    assert_eq!(
        err["data"]["kind"],
        json!("invalid_params"),
        "not a repository: {err}"
    );
    assert_eq!(env.rpc("run.list", json!({})), json!([]), "no run created");
    assert!(repo.refs("refs/heads/octl/").is_empty());
    // The CLI maps a missing program to exit 6.
    let out = env.cli_with(
        ["--json", "spawn", "spinoff", "echo", "--agent", "ghost"],
        |c| {
            c.current_dir(&repo.path);
        },
    );
    assert_eq!(out.code, 6, "{out:?}");
    assert_eq!(out.error()["kind"], json!("tool_missing"));
}
