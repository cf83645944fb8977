//! The warm worktree pool end to end, with real git, real tmux and shell agents against the
//! real daemon: spawns take prepared entries and get what a cold spawn gets, a moved base is
//! never handed out stale, two spawns never share an entry, and an entry a crash left
//! half-made is never handed out.

use std::path::{Path, PathBuf};
use std::time::Duration;

use octl_tests::{wait_until, TestEnv, TestRepo};
use serde_json::json;

/// Every repository spawned in is pooled (`min_files = 0`), one entry each. The agents only
/// sleep, a few MiB each: admission is told so, or it would keep 1 GiB for each of the 25
/// that live at once in the race below (docs/CONFIGURATION.md, "Admission by resources").
const POOL_EVERY_REPO: &str =
    "[pool]\nsize = 1\nmin_files = 0\n[agents.shell]\nmemory_estimate = \"16MiB\"\n";

fn pooled_env() -> TestEnv {
    let env = TestEnv::new();
    std::fs::create_dir_all(&env.home).unwrap();
    std::fs::write(env.home.join("config.toml"), POOL_EVERY_REPO).unwrap();
    env
}

/// A repository with a few tracked files and an ignored `.env` that `.worktreeinclude` names.
fn repo(env: &TestEnv) -> TestRepo {
    let repo = TestRepo::new(env, "repo");
    repo.write(".gitignore", ".env\n");
    repo.write(".worktreeinclude", ".env\n");
    for i in 0..20 {
        repo.write(&format!("src/d{}/f{i}.txt", i % 4), &format!("file {i}\n"));
    }
    repo.commit_all("files");
    repo.write(".env", "SECRET=1\n");
    repo
}

/// The entry directories of the one pooled repository: (path, ready).
fn pool_entries(env: &TestEnv) -> Vec<(PathBuf, bool)> {
    let mut out = Vec::new();
    for key in dirs(&env.home.join("pool")) {
        for entry in dirs(&key) {
            let name = entry.file_name().unwrap().to_string_lossy().into_owned();
            let ready = !name.contains('.') && !key.join(format!("{name}.making")).exists();
            out.push((entry, ready));
        }
    }
    out.sort();
    out
}

fn dirs(p: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(p)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    v.sort();
    v
}

/// Waits until the pool holds a ready entry; returns its id (its directory's name).
fn wait_ready_entry(env: &TestEnv) -> String {
    wait_until("a ready pool entry", Duration::from_secs(60), || {
        pool_entries(env)
            .into_iter()
            .find(|(_, ready)| *ready)
            .map(|(p, _)| p.file_name().unwrap().to_string_lossy().into_owned())
    })
}

/// The name of git's record of the worktree at `wt` (`.git/worktrees/<NAME>`): a pool
/// entry's id when it was taken from the pool, the node's name when made cold.
fn admin_name(wt: &Path) -> String {
    let text = std::fs::read_to_string(wt.join(".git")).unwrap();
    let dir = text.trim().strip_prefix("gitdir: ").unwrap().to_string();
    Path::new(&dir)
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

/// Spawns a waiting agent; returns (run, its worktree once running).
fn spawn_waiting(env: &TestEnv, repo: &TestRepo, node: &str) -> (String, PathBuf) {
    let v = env
        .spawn(
            "spinoff",
            repo,
            "sleep 600",
            json!({"agent": "shell", "node": node}),
        )
        .unwrap_or_else(|e| panic!("spawn {node}: {e}"));
    let run = v["id"].as_str().unwrap().to_string();
    let n = env.wait_node(&run, node, "running");
    (run, PathBuf::from(n["worktree"].as_str().unwrap()))
}

/// What a worktree is: its branch, HEAD, status, and every file (not `.git`) with its bytes.
fn describe(repo: &TestRepo, wt: &Path) -> (String, String, String, Vec<(String, Vec<u8>)>) {
    let branch = repo
        .git_in(wt, &["symbolic-ref", "HEAD"])
        .trim()
        .to_string();
    let head = repo.git_in(wt, &["rev-parse", "HEAD"]).trim().to_string();
    let status = repo.git_in(wt, &["status", "--porcelain", "--ignored"]);
    let mut files = Vec::new();
    fn walk(root: &Path, at: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        for e in std::fs::read_dir(at).unwrap() {
            let p = e.unwrap().path();
            if p.file_name().unwrap() == ".git" {
                continue;
            }
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                let rel = p.strip_prefix(root).unwrap().display().to_string();
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    walk(wt, wt, &mut files);
    files.sort();
    (branch, head, status, files)
}

fn assert_is_nodes_worktree(repo: &TestRepo, run: &str, node: &str, wt: &Path, tip: &str) {
    let (branch, head, status, _) = describe(repo, wt);
    assert_eq!(branch, format!("refs/heads/octl/{run}/{node}"));
    assert_eq!(head, tip);
    assert_eq!(
        status.trim(),
        "!! .env",
        "clean but for the included ignored file"
    );
    // The pool may be adding its next entry meanwhile, and git's listing fails while another
    // `git worktree add` has made its record but not written it yet: listed once it reads.
    let listed = wait_until("git to list the worktrees", Duration::from_secs(30), || {
        let out = repo.try_git_in(&repo.path, &["worktree", "list", "--porcelain"]);
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    });
    assert!(
        listed.contains(&format!("worktree {}\n", wt.display())),
        "{listed}"
    );
    assert!(!listed.contains("prunable"), "{listed}");
}

#[test]
fn spawns_take_warm_entries_and_get_what_a_cold_spawn_gets() {
    let env = pooled_env();
    let _d = env.start_daemon();
    let repo = repo(&env);
    let tip = repo.rev("main");
    // The first spawn in the repository is cold, and pools it.
    let (cold_run, cold) = spawn_waiting(&env, &repo, "cold");
    assert_eq!(admin_name(&cold), "cold");
    let entry = wait_ready_entry(&env);
    let (warm_run, warm) = spawn_waiting(&env, &repo, "warm");
    assert_eq!(admin_name(&warm), entry, "the worktree is the pool's entry");
    assert!(
        !pool_entries(&env).iter().any(|(p, _)| p.ends_with(&entry)),
        "the entry left the pool"
    );
    assert_is_nodes_worktree(&repo, &cold_run, "cold", &cold, &tip);
    assert_is_nodes_worktree(&repo, &warm_run, "warm", &warm, &tip);
    let (_, _, _, cold_files) = describe(&repo, &cold);
    let (_, _, _, warm_files) = describe(&repo, &warm);
    assert_eq!(cold_files, warm_files, "the same files, bytes for bytes");
    assert!(warm_files
        .iter()
        .any(|(p, b)| p == ".env" && b == b"SECRET=1\n"));
    // And the pool is filled again for the next one.
    let next = wait_ready_entry(&env);
    assert_ne!(next, entry);
}

#[test]
fn a_base_moved_after_the_pool_was_filled_starts_the_node_at_the_new_tip() {
    let env = pooled_env();
    let _d = env.start_daemon();
    let repo = repo(&env);
    spawn_waiting(&env, &repo, "first");
    let entry = wait_ready_entry(&env);
    let old = repo.rev("main");
    repo.write("src/d0/f0.txt", "changed\n");
    repo.write("new.txt", "new\n");
    repo.git(&["rm", "-q", "src/d1/f1.txt"]);
    let tip = repo.commit_all("moved on");
    assert_ne!(old, tip);
    let (run, wt) = spawn_waiting(&env, &repo, "moved");
    assert_eq!(
        admin_name(&wt),
        entry,
        "taken from the pool and brought up to date"
    );
    assert_is_nodes_worktree(&repo, &run, "moved", &wt, &tip);
    assert_eq!(
        std::fs::read_to_string(wt.join("src/d0/f0.txt")).unwrap(),
        "changed\n"
    );
    assert!(wt.join("new.txt").is_file() && !wt.join("src/d1/f1.txt").exists());
}

#[test]
fn two_spawns_racing_for_one_entry_never_share_it() {
    let env = pooled_env();
    let _d = env.start_daemon();
    let repo = repo(&env);
    spawn_waiting(&env, &repo, "first");
    let tip = repo.rev("main");
    const ROUNDS: usize = 12;
    for round in 0..ROUNDS {
        let entry = wait_ready_entry(&env);
        let (a, b) = std::thread::scope(|s| {
            let a = s.spawn(|| {
                env.spawn(
                    "spinoff",
                    &repo,
                    "sleep 600",
                    json!({"agent": "shell", "node": format!("a{round}")}),
                )
            });
            let b = s.spawn(|| {
                env.spawn(
                    "spinoff",
                    &repo,
                    "sleep 600",
                    json!({"agent": "shell", "node": format!("b{round}")}),
                )
            });
            (a.join().unwrap(), b.join().unwrap())
        });
        let mut took = 0;
        for (v, node) in [(a, format!("a{round}")), (b, format!("b{round}"))] {
            let run = v.unwrap()["id"].as_str().unwrap().to_string();
            let n = env.wait_node(&run, &node, "running");
            let wt = PathBuf::from(n["worktree"].as_str().unwrap());
            assert_is_nodes_worktree(&repo, &run, &node, &wt, &tip);
            let name = admin_name(&wt);
            if name == entry {
                took += 1;
            } else {
                assert_eq!(name, node, "round {round}: made cold");
            }
        }
        assert_eq!(took, 1, "round {round}: exactly one spawn took the entry");
    }
    // Every worktree is registered once, none is broken.
    wait_ready_entry(&env);
    // The pool may be adding its next entry meanwhile, and git's listing fails while another
    // `git worktree add` has made its record but not written it yet: listed once it reads.
    let listed = wait_until("git to list the worktrees", Duration::from_secs(30), || {
        let out = repo.try_git_in(&repo.path, &["worktree", "list", "--porcelain"]);
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    });
    assert!(!listed.contains("prunable"), "{listed}");
    assert_eq!(repo.extra_worktrees().len(), 1 + 2 * ROUNDS + 1);
}

#[test]
fn an_entry_a_crash_left_half_made_is_never_handed_out() {
    let env = pooled_env();
    let d = env.start_daemon_with(&[("OCTL_FAILPOINTS", "pool:before-ready")]);
    let repo = repo(&env);
    // The first spawn pools the repository; filling it kills the daemon before the entry is
    // complete (possibly before it answered).
    let _ = env.spawn(
        "spinoff",
        &repo,
        "sleep 600",
        json!({"agent": "shell", "node": "first"}),
    );
    d.wait_exit();
    let half: Vec<(PathBuf, bool)> = pool_entries(&env);
    assert_eq!(half.len(), 1, "{half:?}");
    assert!(!half[0].1, "marked as being made");
    let half_id = half[0]
        .0
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();

    let _d = env.start_daemon();
    let (run, wt) = spawn_waiting(&env, &repo, "after");
    assert_ne!(
        admin_name(&wt),
        half_id,
        "the half-made entry was not handed out"
    );
    assert_is_nodes_worktree(&repo, &run, "after", &wt, &repo.rev("main"));
    // The restart discarded it, and the pool holds a complete entry again.
    wait_until("the half-made entry to go", Duration::from_secs(60), || {
        (!half[0].0.exists()).then_some(())
    });
    let fresh = wait_ready_entry(&env);
    assert_ne!(fresh, half_id);
    // The pool may be adding its next entry meanwhile, and git's listing fails while another
    // `git worktree add` has made its record but not written it yet: listed once it reads.
    let listed = wait_until("git to list the worktrees", Duration::from_secs(30), || {
        let out = repo.try_git_in(&repo.path, &["worktree", "list", "--porcelain"]);
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    });
    assert!(!listed.contains(&half_id), "{listed}");
}

#[test]
fn a_take_a_crash_cut_short_is_finished_by_healing() {
    let env = pooled_env();
    let d = env.start_daemon_with(&[("OCTL_FAILPOINTS", "pool:after-claim")]);
    let repo = repo(&env);
    let (first, _) = spawn_waiting(&env, &repo, "first");
    let entry = wait_ready_entry(&env);
    // The daemon dies right after renaming the entry to the node's worktree.
    let e = env.spawn(
        "spinoff",
        &repo,
        "sleep 600",
        json!({"agent": "shell", "node": "cut"}),
    );
    assert!(e.is_err(), "the daemon died during the spawn");
    d.wait_exit();
    let _d = env.start_daemon();
    let run = std::fs::read_dir(env.home.join("runs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .find(|id| *id != first)
        .expect("the cut spawn's run");
    let n = env.wait_node(&run, "cut", "running");
    let wt = PathBuf::from(n["worktree"].as_str().unwrap());
    assert_eq!(admin_name(&wt), entry);
    assert_is_nodes_worktree(&repo, &run, "cut", &wt, &repo.rev("main"));
}

#[test]
fn run_gc_empties_the_pool_once_it_is_turned_off() {
    let env = pooled_env();
    let _d = env.start_daemon();
    let repo = repo(&env);
    let (_, first) = spawn_waiting(&env, &repo, "first");
    let entry = wait_ready_entry(&env);
    let pool_items = |gc: &serde_json::Value| -> Vec<String> {
        gc["removed"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["kind"] == json!("pool"))
            .map(|i| i["path"].as_str().unwrap().to_string())
            .collect()
    };
    // On, the pool's ready entry is not garbage.
    assert!(pool_items(&env.rpc("run.gc", json!({}))).is_empty());
    std::fs::write(env.home.join("config.toml"), "[pool]\nsize = 0\n").unwrap();
    let dry = env.rpc("run.gc", json!({"dry_run": true}));
    let listed = pool_items(&dry);
    assert!(listed.len() == 1 && listed[0].ends_with(&entry), "{dry}");
    assert!(Path::new(&listed[0]).is_dir(), "a dry run removes nothing");
    let gc = env.rpc("run.gc", json!({}));
    assert_eq!(pool_items(&gc), listed, "{gc}");
    assert!(!Path::new(&listed[0]).exists());
    let worktrees = repo.git(&["worktree", "list", "--porcelain"]);
    assert!(!worktrees.contains(&entry), "{worktrees}");
    assert!(first.is_dir(), "the running node's worktree is left alone");
}

#[test]
fn a_shutdown_stops_a_fill_and_the_next_start_discards_what_it_left() {
    let env = pooled_env();
    let d = env.start_daemon();
    let repo = repo(&env);
    // A post-checkout hook that takes a minute, but only in the pool's entries: the fill is
    // still running when the daemon is asked to stop.
    let hook = repo.path.join(".git/hooks/post-checkout");
    std::fs::write(
        &hook,
        "#!/bin/sh\ncase \"$PWD\" in */pool/*) touch \"$PWD.hook-ran\"; sleep 60; touch \"$PWD.hook-ended\";; esac\n",
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    spawn_waiting(&env, &repo, "first");
    let entry = wait_until(
        "the fill to reach the hook",
        Duration::from_secs(60),
        || {
            pool_entries(&env).into_iter().find(|(p, _)| {
                let mut ran = p.as_os_str().to_owned();
                ran.push(".hook-ran");
                Path::new(&ran).exists()
            })
        },
    );
    assert!(!entry.1, "not ready while its hook runs");
    env.rpc("daemon.shutdown", json!({}));
    let status = d.wait_exit();
    assert!(status.success(), "{status}");
    // It did not wait for the hook, and the hook went with the checkout it was part of.
    let sidecar = |what: &str| {
        let mut p = entry.0.as_os_str().to_owned();
        p.push(what);
        PathBuf::from(p)
    };
    assert!(
        !sidecar(".hook-ended").exists(),
        "the daemon waited for the hook"
    );
    let inside: Vec<PathBuf> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path().join("cwd")).ok())
        .filter(|cwd| cwd.starts_with(&entry.0))
        .collect();
    assert!(
        inside.is_empty(),
        "a process still runs in the entry: {inside:?}"
    );
    assert!(entry.0.exists(), "left for the next start");
    let _d = env.start_daemon();
    wait_until("the half-made entry to go", Duration::from_secs(60), || {
        (!entry.0.exists()).then_some(())
    });
    // The pool may be adding its next entry meanwhile, and git's listing fails while another
    // `git worktree add` has made its record but not written it yet: listed once it reads.
    let listed = wait_until("git to list the worktrees", Duration::from_secs(30), || {
        let out = repo.try_git_in(&repo.path, &["worktree", "list", "--porcelain"]);
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    });
    assert!(!listed.contains(&entry.0.display().to_string()), "{listed}");
}
