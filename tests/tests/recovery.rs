//! Garbage and recovery, and `doctor`, end to end: the real daemon, real git and tmux, fake
//! agents as shell scripts (the `shell` profile).

use std::path::{Path, PathBuf};
use std::time::Duration;

use octl_tests::{wait_until, TestEnv, TestRepo};
use serde_json::{json, Value};

fn run_id(v: &Value) -> String {
    v["id"].as_str().unwrap().to_string()
}

/// `--json doctor`: the exit code and the report.
fn doctor(env: &TestEnv) -> (i32, Value) {
    let out = env.cli(["--json", "doctor"]);
    assert!(
        out.code == 0 || out.code == 1,
        "doctor exits 0 or 1: {out:?}"
    );
    (out.code, out.json())
}

fn check<'a>(report: &'a Value, id: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == json!(id))
        .unwrap_or_else(|| panic!("no check {id} in {report}"))
}

/// Checks that may warn on a healthy home, and why: no service unit is installed in a test's
/// home (the CLI's autostart starts the daemon); the `claude` program is not installed on
/// most test machines and no run here uses it.
fn allowed_warning(c: &Value) -> bool {
    match c["id"].as_str().unwrap() {
        "service" => true,
        "agents" => {
            let m = c["message"].as_str().unwrap();
            m.contains("claude") && m.contains("not found") && !m.contains("shell: sh not found")
        }
        _ => false,
    }
}

fn items<'a>(result: &'a Value, list: &str) -> &'a Vec<Value> {
    result[list].as_array().unwrap()
}

fn has_path(list: &[Value], path: &Path) -> bool {
    list.iter()
        .any(|i| i["path"] == json!(path.display().to_string()))
}

fn has_ref(list: &[Value], refname: &str) -> bool {
    list.iter().any(|i| i["ref"] == json!(refname))
}

/// A failed shell agent's run: its worktree keeps `half.txt`, uncommitted.
fn failed_run(env: &TestEnv, repo: &TestRepo) -> (String, PathBuf) {
    let run = run_id(
        &env.spawn(
            "spinoff",
            repo,
            "echo partial > half.txt; exit 3",
            json!({"agent": "shell", "node": "bad"}),
        )
        .unwrap(),
    );
    let show = env.wait_status(&run, &["failed"]);
    let worktree = PathBuf::from(show["nodes"][0]["worktree"].as_str().unwrap());
    assert!(worktree.join("half.txt").exists());
    (run, worktree)
}

#[test]
fn doctor_never_starts_the_daemon_and_is_all_ok_on_a_healthy_home() {
    let env = TestEnv::new();
    // A home whose daemon was never started: what only the daemon knows is skipped, not
    // failed (nothing is wrong yet), the rest still runs, nothing is started.
    let skipped_while_down = |report: &Value| {
        for id in [
            "daemon",
            "socket-mode",
            "runners",
            "runs",
            "orphans",
            "notify",
        ] {
            assert_eq!(check(report, id)["status"], json!("skip"), "{report}");
        }
        assert_eq!(report["fail"], json!(0), "{report}");
    };
    let (code, report) = doctor(&env);
    assert_eq!(code, 0, "{report}");
    skipped_while_down(&report);
    assert!(check(&report, "daemon")["hint"]
        .as_str()
        .unwrap()
        .contains("daemon start"));
    assert_eq!(check(&report, "git")["status"], json!("ok"));
    assert!(!env.socket().exists(), "doctor never autostarts the daemon");

    let _d = env.start_daemon();
    env.cli(["skill", "install"]).ok();
    let repo = TestRepo::new(&env, "repo");
    let run = run_id(
        &env.spawn(
            "spinoff",
            &repo,
            "echo hi > hi.txt",
            json!({"agent": "shell", "node": "hi"}),
        )
        .unwrap(),
    );
    env.wait_status(&run, &["completed"]);
    env.create_run("a generic one");

    let (code, report) = doctor(&env);
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["fail"], json!(0), "{report}");
    for c in report["checks"].as_array().unwrap() {
        assert!(
            c["status"] == json!("ok") || (c["status"] == json!("warn") && allowed_warning(c)),
            "unexpected: {c}"
        );
        if c["status"] != json!("ok") {
            assert!(c["hint"].as_str().is_some_and(|h| !h.is_empty()), "{c}");
        }
    }
    let ids: Vec<&str> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            "git",
            "tmux",
            "home-mode",
            "disk",
            "pool",
            "daemon",
            "socket-mode",
            "agents",
            "runners",
            "sandbox",
            "runs",
            "orphans",
            "notify",
            "skills",
            "service"
        ]
    );
    assert!(check(&report, "runs")["message"]
        .as_str()
        .unwrap()
        .starts_with("2 runs"));
    assert_eq!(
        report["ok"].as_u64().unwrap() + report["warn"].as_u64().unwrap(),
        15
    );
    assert_eq!(report["skip"], json!(0), "{report}");

    // The human form: one line per check, hints under warnings, a summary.
    let out = env.cli(["doctor"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout.lines().any(|l| l.starts_with("ok   git ")),
        "{}",
        out.stdout
    );
    assert!(out.stdout.trim_end().ends_with("0 fail"), "{}", out.stdout);

    // Stopped on purpose: skipped again, exit 0.
    assert_eq!(env.cli(["daemon", "stop"]).code, 0);
    let (code, report) = doctor(&env);
    assert_eq!(code, 0, "{report}");
    skipped_while_down(&report);
    assert!(check(&report, "daemon")["message"]
        .as_str()
        .unwrap()
        .contains("daemon stop"));
    // Killed: its socket is left and nothing answers: that is a failure.
    env.start_daemon().kill9();
    let (code, report) = doctor(&env);
    assert_eq!(code, 1, "{report}");
    assert_eq!(
        check(&report, "daemon")["status"],
        json!("fail"),
        "{report}"
    );
}

#[test]
fn doctor_fails_a_socket_with_the_wrong_mode() {
    use std::os::unix::fs::PermissionsExt;
    let env = TestEnv::new();
    let _d = env.start_daemon();
    std::fs::set_permissions(env.socket(), std::fs::Permissions::from_mode(0o666)).unwrap();
    let (code, report) = doctor(&env);
    assert_eq!(code, 1, "{report}");
    let c = check(&report, "socket-mode");
    assert_eq!(c["status"], json!("fail"), "{c}");
    assert!(c["message"].as_str().unwrap().contains("0666"), "{c}");
    assert!(c["hint"].as_str().unwrap().contains("chmod 600"), "{c}");
    let out = env.cli(["doctor"]);
    assert_eq!(out.code, 1);
    let line = out
        .stdout
        .lines()
        .position(|l| l.starts_with("FAIL socket-mode"))
        .unwrap_or_else(|| panic!("{}", out.stdout));
    assert!(out
        .stdout
        .lines()
        .nth(line + 1)
        .unwrap()
        .contains("hint: chmod 600"));
}

#[test]
fn doctor_fails_a_run_whose_log_is_corrupt_or_whose_projections_differ() {
    let env = TestEnv::new();
    let d = env.start_daemon();
    let bad = env.create_run("will break");
    let good = env.create_run("stays fine");
    for i in 0..3 {
        env.rpc(
            "event.append",
            json!({"run": bad, "type": "x.n", "data": {"i": i}}),
        );
        env.rpc(
            "event.append",
            json!({"run": good, "type": "x.n", "data": {"i": i}}),
        );
    }
    d.signal_and_wait(libc::SIGTERM);
    let path = env.run_dir(&bad).join("events.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[2] = "garbage, not an event";
    std::fs::write(&path, format!("{}\n", lines.join("\n"))).unwrap();
    let _d = env.start_daemon();

    let (code, report) = doctor(&env);
    assert_eq!(code, 1, "{report}");
    let c = check(&report, "runs");
    assert_eq!(c["status"], json!("fail"), "{c}");
    let message = c["message"].as_str().unwrap();
    assert!(message.contains(&bad) && message.contains("corrupt"), "{c}");
    assert!(!message.contains(&good), "the sound run is not blamed: {c}");
    assert!(message.contains("line 3"), "{c}");

    // A projection that no longer matches the log: named, with `run rebuild` as the fix.
    let manifest = env.run_dir(&good).join("manifest.json");
    std::fs::write(&manifest, "{}\n").unwrap();
    let (_, report) = doctor(&env);
    let c = check(&report, "runs");
    assert!(
        c["message"]
            .as_str()
            .unwrap()
            .contains(&format!("run {good}: its projection files differ")),
        "{c}"
    );
    assert!(
        c["message"].as_str().unwrap().contains("manifest.json"),
        "{c}"
    );
    assert!(
        c["hint"]
            .as_str()
            .unwrap()
            .contains(&format!("run rebuild {good}")),
        "{c}"
    );
    assert_eq!(
        std::fs::read_to_string(&manifest).unwrap(),
        "{}\n",
        "doctor writes nothing"
    );
    env.cli(["run", "rebuild", &good]).ok();
    let (_, report) = doctor(&env);
    assert!(
        !check(&report, "runs")["message"]
            .as_str()
            .unwrap()
            .contains(&good),
        "{report}"
    );
}

#[test]
fn doctor_warns_of_orphans_and_gc_keeps_what_it_cannot_snapshot() {
    let env = TestEnv::new();
    let _d = env.start_daemon();
    let stray = env
        .home
        .join("worktrees")
        .join("01AAAAAAAAAAAAAAAAAAAAAAAA")
        .join("x");
    std::fs::create_dir_all(&stray).unwrap();
    std::fs::write(stray.join("notes.txt"), "mine\n").unwrap();
    // A window on the daemon's private tmux server that no run owns.
    let made = env.tmux(&["new-session", "-d", "-s", "stray", "-n", "w", "sleep 600"]);
    assert!(made.status.success());

    let (code, report) = doctor(&env);
    let c = check(&report, "orphans");
    assert_eq!(c["status"], json!("warn"), "{c}");
    assert!(
        c["message"]
            .as_str()
            .unwrap()
            .contains(&stray.display().to_string()),
        "names it: {c}"
    );
    assert!(c["message"].as_str().unwrap().contains("stray:w"), "{c}");
    assert!(c["hint"].as_str().unwrap().contains("run gc"), "{c}");
    assert_eq!(code, 0, "an orphan is a warning: {report}");
    let human = env.cli(["doctor"]);
    assert!(
        human.stdout.contains(&format!(
            "worktree {}: run 01AAAAAAAAAAAAAAAAAAAAAAAA is not known",
            stray.display()
        )),
        "{}",
        human.stdout
    );

    let dry = env.cli(["--json", "run", "gc", "--dry-run"]);
    dry.ok();
    let dry = dry.json();
    assert_eq!(dry["dry_run"], json!(true));
    assert!(has_path(items(&dry, "kept"), &stray), "{dry}");
    assert!(
        items(&dry, "removed")
            .iter()
            .any(|i| i["target"] == json!("stray:w")),
        "{dry}"
    );
    assert!(
        env.tmux_windows().contains(&"stray:w".to_string()),
        "a dry run closes nothing"
    );

    let done = env.cli(["--json", "run", "gc"]);
    done.ok();
    let done = done.json();
    let kept = items(&done, "kept")
        .iter()
        .find(|i| i["path"] == json!(stray.display().to_string()))
        .unwrap_or_else(|| panic!("{done}"));
    assert!(
        kept["reason"]
            .as_str()
            .unwrap()
            .contains("not a git worktree"),
        "{kept}"
    );
    assert_eq!(
        std::fs::read_to_string(stray.join("notes.txt")).unwrap(),
        "mine\n",
        "what cannot be snapshotted is not removed"
    );
    assert!(
        !env.tmux_windows().contains(&"stray:w".to_string()),
        "the orphan window is closed"
    );
}

#[test]
fn gc_dry_run_changes_nothing_and_gc_snapshots_then_removes_a_failed_runs_leftovers() {
    let (env, _d, repo) = TestEnv::world();
    let (run, worktree) = failed_run(&env, &repo);
    let branch = format!("refs/heads/octl/{run}/bad");
    let snap = format!("refs/octl/snapshots/{run}/bad");
    // A branch under our names from a run this daemon never knew, holding a commit.
    let unknown = "01BBBBBBBBBBBBBBBBBBBBBBBB";
    repo.git(&["switch", "-q", "-c", &format!("octl/{unknown}/y")]);
    repo.write("lost.txt", "only here\n");
    repo.commit_all("work of a forgotten run");
    repo.git(&["switch", "-q", "main"]);
    let orphan_branch = format!("refs/heads/octl/{unknown}/y");
    let orphan_snap = format!("refs/octl/snapshots/{unknown}/y");
    // A git worktree under our folder from a run this daemon never knew, with a file in it.
    let other = "01CCCCCCCCCCCCCCCCCCCCCCCC";
    let orphan_wt = env.home.join("worktrees").join(other).join("z");
    repo.git(&[
        "worktree",
        "add",
        "-q",
        "-b",
        &format!("octl/{other}/z"),
        orphan_wt.to_str().unwrap(),
        "main",
    ]);
    std::fs::write(orphan_wt.join("scratch.txt"), "unsaved\n").unwrap();
    let orphan_wt_snap = format!("refs/octl/snapshots/{other}/z");

    let out = env.cli(["--json", "run", "gc", "--dry-run"]);
    out.ok();
    let dry = out.json();
    let removed = items(&dry, "removed");
    assert!(has_path(removed, &worktree), "{dry}");
    assert!(has_ref(removed, &branch), "{dry}");
    assert!(has_ref(removed, &orphan_branch), "{dry}");
    assert!(has_path(removed, &orphan_wt), "{dry}");
    // Nothing changed.
    assert!(worktree.join("half.txt").exists());
    assert!(orphan_wt.join("scratch.txt").exists());
    assert!(repo.refs("refs/heads/octl/").contains(&branch));
    assert!(repo.refs("refs/heads/octl/").contains(&orphan_branch));
    assert!(
        repo.refs("refs/octl/snapshots/").is_empty(),
        "{:?}",
        repo.refs("refs/octl/")
    );
    let show = env.rpc("run.show", json!({"run": run}));
    assert_eq!(show["nodes"][0].get("cleaned"), None, "{show}");
    let human = env.cli(["run", "gc", "--dry-run"]);
    assert!(human.stdout.starts_with("Would remove"), "{}", human.stdout);
    assert!(
        human.stdout.contains("nothing was changed"),
        "{}",
        human.stdout
    );

    let out = env.cli(["--json", "run", "gc"]);
    out.ok();
    let done = out.json();
    assert_eq!(done["dry_run"], json!(false));
    let removed = items(&done, "removed");
    let wt = removed
        .iter()
        .find(|i| i["path"] == json!(worktree.display().to_string()))
        .unwrap_or_else(|| panic!("{done}"));
    assert_eq!(wt["snapshot_ref"], json!(snap));
    assert!(has_ref(removed, &branch), "{done}");
    assert!(has_ref(removed, &orphan_branch), "{done}");
    // The worktree is gone, but its uncommitted file is in the snapshot.
    assert!(!worktree.exists());
    assert!(repo.extra_worktrees().is_empty());
    assert_eq!(repo.show(&snap, "half.txt").as_deref(), Some("partial\n"));
    assert_eq!(wt["snapshot_commit"], json!(repo.rev(&snap)));
    assert!(repo.refs("refs/heads/octl/").is_empty(), "branches deleted");
    assert_eq!(
        repo.show(&orphan_snap, "lost.txt").as_deref(),
        Some("only here\n")
    );
    // The unknown run's worktree: snapshotted under the run and node its path names, removed,
    // and its branch with it.
    assert!(has_path(removed, &orphan_wt), "{done}");
    assert!(!orphan_wt.exists());
    assert_eq!(
        repo.show(&orphan_wt_snap, "scratch.txt").as_deref(),
        Some("unsaved\n")
    );
    // Recorded in the run's log.
    let show = env.rpc("run.show", json!({"run": run}));
    assert_eq!(show["nodes"][0]["cleaned"], json!(true), "{show}");
    assert_eq!(show["nodes"][0]["snapshot_ref"], json!(snap));
    assert_eq!(env.event_types(&run).last().unwrap(), "cleanup.done");
    // `run show` lists the snapshot.
    let human = env.cli(["run", "show", &run]);
    assert!(human.stdout.contains("Snapshots"), "{}", human.stdout);
    assert!(human.stdout.contains(&snap), "{}", human.stdout);

    // Again: nothing left to do, and no orphans.
    let again = env.cli(["--json", "run", "gc"]).json();
    assert!(items(&again, "removed").is_empty(), "{again}");
    let (_, report) = doctor(&env);
    assert_eq!(check(&report, "orphans")["status"], json!("ok"), "{report}");
}

#[test]
fn recover_makes_a_branch_from_a_discarded_nodes_snapshot() {
    let (env, _d, repo) = TestEnv::world();
    let run = run_id(
        &env.spawn(
            "spinoff",
            &repo,
            "echo draft > draft.txt; while true; do sleep 1; done",
            json!({"agent": "shell", "node": "gone"}),
        )
        .unwrap(),
    );
    let wt = env.home.join("worktrees").join(&run).join("gone");
    wait_until("the draft file", Duration::from_secs(20), || {
        wt.join("draft.txt").exists().then_some(())
    });
    env.cli(["run", "cancel", &run, "--discard"]).ok();
    assert!(!wt.exists());

    let out = env.cli(["--json", "recover", &run, "--node", "gone"]);
    out.ok();
    let r = out.json();
    // Named by the run's shortest unique prefix, at least 10 characters (its millisecond).
    let branch = format!("recovered/{}/gone", &run[..10]);
    assert_eq!(r["branch"], json!(branch));
    assert_eq!(
        r["snapshot_ref"],
        json!(format!("refs/octl/snapshots/{run}/gone"))
    );
    assert_eq!(r["commit"], json!(repo.rev(&branch)));
    assert_eq!(repo.show(&branch, "draft.txt").as_deref(), Some("draft\n"));

    // Never over an existing branch.
    let again = env.cli(["--json", "recover", &run, "--node", "gone"]);
    assert_eq!(again.code, 4, "{again:?}");
    assert_eq!(again.error()["kind"], json!("forbidden"));
    assert_eq!(repo.rev(&branch), r["commit"].as_str().unwrap());
    // A name of one's own, checked by git.
    let bad = env.cli([
        "--json", "recover", &run, "--node", "gone", "--branch", "a..b",
    ]);
    assert_eq!(bad.code, 2, "{bad:?}");
    let human = env.cli(["recover", &run, "--node", "gone", "--branch", "draft-kept"]);
    assert_eq!(human.code, 0, "{human:?}");
    assert!(
        human.stdout.contains("branch draft-kept at"),
        "{}",
        human.stdout
    );
    assert_eq!(
        repo.show("draft-kept", "draft.txt").as_deref(),
        Some("draft\n")
    );
    // No snapshot: not found.
    let none = env.cli(["--json", "recover", &run, "--node", "other"]);
    assert_eq!(none.code, 3, "{none:?}");
    assert_eq!(none.error()["kind"], json!("not_found"));
}
