//! Files git ignores (`.env`, `*.local`, `target/`) are never lost: every cleanup moves them
//! to `$OCTL_HOME/kept/<RUN>/<NODE>/<N>/`, `recover --worktree` moves them back, and only
//! `run gc --older-than` deletes them. End to end: the real daemon, git and tmux, shell agents.

use std::path::{Path, PathBuf};
use std::time::Duration;

use octl_tests::{wait_until, TestEnv, TestRepo};
use serde_json::{json, Value};

/// What the agents write that git ignores: two files and a directory of three.
const IGNORED: &[(&str, &str)] = &[
    ("notes.local", "mine\n"),
    (".env", "SECRET=1\n"),
    ("target/debug/a.o", "a\n"),
    ("target/debug/b.o", "b\n"),
    ("target/c.o", "c\n"),
];

/// A shell command writing [`IGNORED`] and a tracked file.
fn writes_ignored() -> String {
    let mut s = String::from("mkdir -p target/debug");
    for (p, text) in IGNORED {
        s.push_str(&format!("; printf '{}' > {p}", text.replace('\n', "\\n")));
    }
    s.push_str("; echo tracked > tracked.txt");
    s
}

fn repo_with_ignores(env: &TestEnv) -> TestRepo {
    let repo = TestRepo::new(env, "repo");
    repo.write(".gitignore", "*.local\n.env\ntarget/\n");
    repo.commit_all("ignore local files");
    repo
}

fn run_id(v: &Value) -> String {
    v["id"].as_str().unwrap().to_string()
}

fn node<'a>(show: &'a Value, id: &str) -> &'a Value {
    show["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == json!(id))
        .unwrap_or_else(|| panic!("no node {id}: {show}"))
}

fn assert_has_ignored(dir: &Path) {
    for (p, text) in IGNORED {
        assert_eq!(
            std::fs::read_to_string(dir.join(p)).ok().as_deref(),
            Some(*text),
            "{p} in {}",
            dir.display()
        );
    }
}

/// `recover RUN --node NODE --worktree PATH --branch BRANCH`: the result.
fn recover_into(env: &TestEnv, run: &str, node: &str, path: &Path, branch: &str) -> Value {
    let out = env.cli([
        "--json",
        "recover",
        run,
        "--node",
        node,
        "--worktree",
        path.to_str().unwrap(),
        "--branch",
        branch,
    ]);
    out.ok();
    out.json()
}

/// The node's one kept set is recorded, holds every ignored file, and comes back through
/// `recover --worktree` (tracked work included).
fn check_kept_and_recover(env: &TestEnv, repo: &TestRepo, run: &str, id: &str) {
    let show = env.rpc("run.show", json!({"run": run}));
    let n = node(&show, id);
    let kept = n["kept"].as_array().unwrap_or_else(|| panic!("{n}"));
    assert_eq!(kept.len(), 1, "{n}");
    let dir = PathBuf::from(kept[0]["dir"].as_str().unwrap());
    assert_eq!(dir, env.home.join("kept").join(run).join(id).join("1"));
    assert_eq!(kept[0]["files"], json!(IGNORED.len()), "{n}");
    assert_eq!(kept[0]["status"], json!("kept"));
    assert_has_ignored(&dir);
    assert!(!env.home.join("worktrees").join(run).join(id).exists());

    // Without --worktree the answer says where they are.
    let out = env.cli(["--json", "recover", run, "--node", id]);
    out.ok();
    let r = out.json();
    assert_eq!(r["kept_dir"], json!(dir.display().to_string()), "{r}");
    assert_eq!(r["kept_files"], json!(IGNORED.len()));
    let human = env.cli(["recover", run, "--node", id, "--branch", "look"]);
    assert!(
        human.stdout.contains(&format!("kept in {}", dir.display())),
        "{}",
        human.stdout
    );

    let back = env.root.path().join(format!("back-{id}"));
    let r = recover_into(env, run, id, &back, "back");
    assert_eq!(r["restored_files"], json!(IGNORED.len()), "{r}");
    assert_eq!(r["worktree"], json!(back.display().to_string()));
    assert_eq!(r.get("kept_dir"), None, "nothing left behind: {r}");
    assert_has_ignored(&back);
    assert_eq!(
        std::fs::read_to_string(back.join("tracked.txt")).unwrap(),
        "tracked\n"
    );
    assert_eq!(repo.git_in(&back, &["branch", "--show-current"]), "back");
    assert!(!dir.exists(), "moved, not copied");
    let show = env.rpc("run.show", json!({"run": run}));
    let k = &node(&show, id)["kept"][0];
    assert_eq!(k["status"], json!("restored"), "{k}");
    assert_eq!(k["restored_to"], json!(back.display().to_string()));

    // Again: refused, and nothing is made.
    let other = env.root.path().join(format!("again-{id}"));
    let again = env.cli([
        "--json",
        "recover",
        run,
        "--node",
        id,
        "--worktree",
        other.to_str().unwrap(),
        "--branch",
        "again",
    ]);
    assert_eq!(again.code, 4, "{again:?}");
    assert_eq!(again.error()["kind"], json!("invalid_transition"));
    assert!(
        again.error()["message"]
            .as_str()
            .unwrap()
            .contains("restored"),
        "{again:?}"
    );
    assert!(!other.exists());
    assert!(!repo
        .refs("refs/heads/")
        .contains(&"refs/heads/again".to_string()));
}

#[test]
fn ignored_files_come_back_after_a_merge() {
    let env = TestEnv::new();
    let _d = env.start_daemon();
    let repo = repo_with_ignores(&env);
    let run = run_id(
        &env.spawn(
            "spinoff",
            &repo,
            &writes_ignored(),
            json!({"agent": "shell", "node": "m"}),
        )
        .unwrap(),
    );
    env.wait_status(&run, &["completed"]);
    assert_eq!(
        repo.show("main", "tracked.txt").as_deref(),
        Some("tracked\n")
    );
    let done = env
        .log_events(&run)
        .into_iter()
        .find(|e| e["type"] == json!("cleanup.done"))
        .unwrap();
    assert_eq!(
        done["data"]["kept"]["files"],
        json!(IGNORED.len()),
        "{done}"
    );
    let human = env.cli(["run", "show", &run]);
    assert!(
        human.stdout.contains("Kept ignored files"),
        "{}",
        human.stdout
    );
    check_kept_and_recover(&env, &repo, &run, "m");
}

#[test]
fn ignored_files_come_back_after_cancel_discard() {
    let env = TestEnv::new();
    let _d = env.start_daemon();
    let repo = repo_with_ignores(&env);
    let run = run_id(
        &env.spawn(
            "spinoff",
            &repo,
            &format!("{}; while true; do sleep 1; done", writes_ignored()),
            json!({"agent": "shell", "node": "c"}),
        )
        .unwrap(),
    );
    let wt = env.home.join("worktrees").join(&run).join("c");
    wait_until("the agent's files", Duration::from_secs(20), || {
        wt.join("tracked.txt").exists().then_some(())
    });
    env.cli(["run", "cancel", &run, "--discard"]).ok();
    check_kept_and_recover(&env, &repo, &run, "c");
}

#[test]
fn ignored_files_come_back_after_gc_of_a_failed_run_and_of_an_orphan() {
    let env = TestEnv::new();
    let _d = env.start_daemon();
    let repo = repo_with_ignores(&env);
    let run = run_id(
        &env.spawn(
            "spinoff",
            &repo,
            &format!("{}; exit 3", writes_ignored()),
            json!({"agent": "shell", "node": "f"}),
        )
        .unwrap(),
    );
    env.wait_status(&run, &["failed"]);
    // A worktree of a run this daemon never knew, with ignored files of its own.
    let other = "01CCCCCCCCCCCCCCCCCCCCCCCC";
    let orphan = env.home.join("worktrees").join(other).join("z");
    repo.git(&[
        "worktree",
        "add",
        "-q",
        "-b",
        &format!("octl/{other}/z"),
        orphan.to_str().unwrap(),
        "main",
    ]);
    for (p, text) in IGNORED {
        let f = orphan.join(p);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, text).unwrap();
    }

    let dry = env.cli(["--json", "run", "gc", "--dry-run"]).json();
    assert!(!dry["removed"].as_array().unwrap().is_empty());
    assert!(
        orphan.join("notes.local").exists(),
        "a dry run moves nothing"
    );

    let out = env.cli(["--json", "run", "gc"]);
    out.ok();
    let done = out.json();
    let removed = done["removed"].as_array().unwrap();
    let wt_item = |path: &Path| {
        removed
            .iter()
            .find(|i| i["path"] == json!(path.display().to_string()))
            .unwrap_or_else(|| panic!("{done}"))
            .clone()
    };
    let own = wt_item(&env.home.join("worktrees").join(&run).join("f"));
    assert_eq!(own["kept_files"], json!(IGNORED.len()), "{own}");
    let o = wt_item(&orphan);
    assert_eq!(o["kept_files"], json!(IGNORED.len()), "{o}");
    let orphan_kept = PathBuf::from(o["kept_dir"].as_str().unwrap());
    assert_eq!(
        orphan_kept,
        env.home.join("kept").join(other).join("z").join("1")
    );
    assert_has_ignored(&orphan_kept);
    assert!(!orphan.exists());
    check_kept_and_recover(&env, &repo, &run, "f");

    // The orphan's snapshot, as `run gc` says to recover it.
    let snap = format!("refs/octl/snapshots/{other}/z");
    let repo_path = repo.path.display().to_string();
    let back = env.root.path().join("orphan-back");
    let out = env.cli([
        "--json",
        "recover",
        "--ref",
        &snap,
        "--repo",
        &repo_path,
        "--worktree",
        back.to_str().unwrap(),
    ]);
    out.ok();
    let r = out.json();
    assert_eq!(r["restored_files"], json!(IGNORED.len()), "{r}");
    assert_has_ignored(&back);
    assert!(!orphan_kept.exists());
    // A bad ref is refused with the form it takes.
    let bad = env.cli([
        "--json",
        "recover",
        "--ref",
        "refs/heads/main",
        "--repo",
        &repo_path,
    ]);
    assert_eq!(bad.code, 2, "{bad:?}");
    assert!(bad.error()["message"]
        .as_str()
        .unwrap()
        .contains("refs/octl/snapshots/<RUN>/<NODE>"));
}

#[test]
fn gc_prints_a_recover_command_that_works_for_an_orphan() {
    let env = TestEnv::new();
    let _d = env.start_daemon();
    let repo = repo_with_ignores(&env);
    let other = "01DDDDDDDDDDDDDDDDDDDDDDDD";
    let orphan = env.home.join("worktrees").join(other).join("q");
    repo.git(&[
        "worktree",
        "add",
        "-q",
        "-b",
        &format!("octl/{other}/q"),
        orphan.to_str().unwrap(),
        "main",
    ]);
    std::fs::write(orphan.join("draft.txt"), "draft\n").unwrap();
    let out = env.cli(["run", "gc"]);
    out.ok();
    let line = out
        .stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("recover: orchestratectl "))
        .unwrap_or_else(|| panic!("{}", out.stdout))
        .to_string();
    let args: Vec<&str> = line.split_whitespace().collect();
    let again = env.cli(args.iter().copied().chain(["--branch", "from-hint"]));
    again.ok();
    assert_eq!(
        repo.show("from-hint", "draft.txt").as_deref(),
        Some("draft\n")
    );
}

#[test]
fn a_retried_node_keeps_each_set_apart_and_gc_older_than_deletes_only_old_ones() {
    let env = TestEnv::new();
    let _d = env.start_daemon();
    let repo = repo_with_ignores(&env);
    let retry_ok = env.root.path().join("second-time");
    let b_may_end = env.root.path().join("b-may-end");
    let plan = format!(
        "[[nodes]]\nid = \"a\"\ntask = \"if test -e {r}; then echo second > notes.local; echo a > a.txt; else echo first > notes.local; exit 1; fi\"\n\
         [[nodes]]\nid = \"b\"\ntask = \"while ! test -e {b}; do sleep 0.2; done; echo b > b.txt\"\n",
        r = retry_ok.display(),
        b = b_may_end.display()
    );
    let run = env.rpc(
        "orchestrate.start",
        json!({"plan": plan, "format": "toml", "repo": repo.path.display().to_string(),
               "agent": "shell", "max_parallel": 4, "auto_merge": true}),
    )["id"]
        .as_str()
        .unwrap()
        .to_string();
    env.wait_node(&run, "a", "failed");
    std::fs::write(&retry_ok, "").unwrap();
    env.cli(["run", "retry", &run, "--node", "a"]).ok();
    let kept_of = |show: &Value| {
        node(show, "a")["kept"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    let show = wait_until("a's second cleanup", Duration::from_secs(60), || {
        let show = env.rpc("run.show", json!({"run": run}));
        (kept_of(&show).len() == 2).then_some(show)
    });
    let sets = kept_of(&show);
    let dirs: Vec<PathBuf> = sets
        .iter()
        .map(|k| PathBuf::from(k["dir"].as_str().unwrap()))
        .collect();
    assert_ne!(dirs[0], dirs[1]);
    assert_eq!(
        std::fs::read_to_string(dirs[0].join("notes.local")).unwrap(),
        "first\n"
    );
    assert_eq!(
        std::fs::read_to_string(dirs[1].join("notes.local")).unwrap(),
        "second\n"
    );
    assert_ne!(sets[0]["snapshot_commit"], sets[1]["snapshot_commit"]);

    // The run has not ended: even --older-than 0s keeps its files.
    let out = env.cli(["--json", "run", "gc", "--older-than", "0s"]);
    out.ok();
    assert!(
        dirs.iter().all(|d| d.join("notes.local").exists()),
        "{:?}",
        out.json()
    );
    std::fs::write(&b_may_end, "").unwrap();
    env.wait_status(&run, &["completed"]);

    // Bad input: the field and its form named, nothing changed.
    let bad = env.cli(["--json", "run", "gc", "--older-than", "7x"]);
    assert_eq!(bad.code, 2, "{bad:?}");
    let msg = bad.error()["message"].as_str().unwrap().to_string();
    assert!(msg.contains("--older-than") && msg.contains("7d"), "{msg}");
    let err = env
        .try_rpc("run.gc", json!({"older_than": "soon"}))
        .unwrap_err();
    assert!(
        err["message"].as_str().unwrap().contains("older_than"),
        "{err}"
    );
    // Plain gc and a longer age keep them; a dry run only lists them.
    env.cli(["run", "gc"]).ok();
    env.cli(["run", "gc", "--older-than", "1d"]).ok();
    let dry = env
        .cli(["--json", "run", "gc", "--dry-run", "--older-than", "0s"])
        .json();
    let listed = dry["removed"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["kind"] == json!("kept"))
        .count();
    assert_eq!(listed, 2, "{dry}");
    assert!(dirs.iter().all(|d| d.join("notes.local").exists()));

    let out = env.cli(["--json", "run", "gc", "--older-than", "0s"]);
    out.ok();
    let done = out.json();
    let gone: Vec<&Value> = done["removed"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["kind"] == json!("kept"))
        .collect();
    assert_eq!(gone.len(), 2, "{done}");
    assert!(dirs.iter().all(|d| !d.exists()));
    assert!(!env.home.join("kept").join(&run).exists());
    let show = env.rpc("run.show", json!({"run": run}));
    assert!(kept_of(&show)
        .iter()
        .all(|k| k["status"] == json!("deleted")));
    // Snapshot refs stay: the agent's commits are never deleted.
    assert!(repo
        .refs("refs/octl/snapshots/")
        .contains(&format!("refs/octl/snapshots/{run}/a")));
    let back = env.root.path().join("too-late");
    let late = env.cli([
        "--json",
        "recover",
        &run,
        "--node",
        "a",
        "--worktree",
        back.to_str().unwrap(),
    ]);
    assert_eq!(late.code, 4, "{late:?}");
    assert!(late.error()["message"]
        .as_str()
        .unwrap()
        .contains("deleted"));
    assert!(!back.exists());
}

#[test]
fn concurrent_gc_cancel_and_recover_do_the_work_once_and_lose_nothing() {
    let env = TestEnv::new();
    let _d = env.start_daemon();
    let repo = repo_with_ignores(&env);
    for i in 0..10 {
        let id = format!("n{i}");
        let run = run_id(
            &env.spawn(
                "spinoff",
                &repo,
                &format!("{}; exit 3", writes_ignored()),
                json!({"agent": "shell", "node": id}),
            )
            .unwrap(),
        );
        env.wait_status(&run, &["failed"]);

        // gc ‖ gc (or, every other time, gc ‖ cancel --discard of the ended run): one
        // cleanup, one kept set, every file in it.
        let (a, b) = std::thread::scope(|s| {
            let a = s.spawn(|| env.cli(["--json", "run", "gc"]));
            let b = s.spawn(|| {
                if i % 2 == 0 {
                    env.cli(["--json", "run", "gc"])
                } else {
                    env.cli(["--json", "run", "cancel", &run, "--discard"])
                }
            });
            (a.join().unwrap(), b.join().unwrap())
        });
        a.ok();
        b.ok();
        let cleanups = env
            .log_events(&run)
            .iter()
            .filter(|e| e["type"] == json!("cleanup.done"))
            .count();
        assert_eq!(cleanups, 1, "iteration {i}");
        let show = env.rpc("run.show", json!({"run": run}));
        let kept = node(&show, &id)["kept"].as_array().unwrap().clone();
        assert_eq!(kept.len(), 1, "iteration {i}: {show}");
        let dir = PathBuf::from(kept[0]["dir"].as_str().unwrap());
        assert_has_ignored(&dir);

        // recover ‖ recover into two places: one wins, the other changes nothing.
        let p1 = env.root.path().join(format!("r{i}-1"));
        let p2 = env.root.path().join(format!("r{i}-2"));
        let (b1, b2) = (format!("r{i}-1"), format!("r{i}-2"));
        let recover = |p: &Path, b: &str| {
            env.cli([
                "--json",
                "recover",
                &run,
                "--node",
                &id,
                "--worktree",
                p.to_str().unwrap(),
                "--branch",
                b,
            ])
        };
        let (x, y) = std::thread::scope(|s| {
            let x = s.spawn(|| recover(&p1, &b1));
            let y = s.spawn(|| recover(&p2, &b2));
            (x.join().unwrap(), y.join().unwrap())
        });
        let outcomes = [(&x, &p1, &b1), (&y, &p2, &b2)];
        let winners: Vec<_> = outcomes.iter().filter(|(o, _, _)| o.code == 0).collect();
        assert_eq!(winners.len(), 1, "iteration {i}: {x:?} {y:?}");
        for (o, p, b) in outcomes {
            if o.code == 0 {
                assert_has_ignored(p);
            } else {
                assert_eq!(o.code, 4, "{o:?}");
                assert_eq!(o.error()["kind"], json!("invalid_transition"), "{o:?}");
                assert!(!p.exists(), "the loser makes no worktree");
                assert!(!repo
                    .refs("refs/heads/")
                    .contains(&format!("refs/heads/{b}")));
            }
        }
        let restored = env
            .log_events(&run)
            .iter()
            .filter(|e| e["type"] == json!("kept.restored"))
            .count();
        assert_eq!(restored, 1, "iteration {i}");
        assert!(!dir.exists());
    }
}
