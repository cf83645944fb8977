//! The store under I/O faults: a real full disk (a tmpfs the test mounts and grows), and EIO
//! injected on the log's write and on its fdatasync (`OCTL_FAILPOINTS=log:write-eio@N`,
//! `log:sync-eio@N`). After each fault the log holds exactly the acknowledged events, a client
//! retrying with its idempotency key gets one event, and other runs and reads keep working.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, Mutex};

use octl_tests::{wait_until, TestEnv, Tmpfs};
use serde_json::{json, Value};

fn append(env: &TestEnv, run: &str, key: &str, data: Value) -> Result<Value, Value> {
    env.try_rpc(
        "event.append",
        json!({"run": run, "type": "x.fill", "data": data, "idempotency_key": key}),
    )
}

/// An acknowledged append: its seq, id and idempotency key.
type Acked = (u64, String, String);

fn acked(r: &Value, key: &str) -> Acked {
    (
        r["seq"].as_u64().expect("seq"),
        r["id"].as_str().expect("id").to_string(),
        key.to_string(),
    )
}

/// The log on disk is `run.created` then exactly `acked`, in seq order, without a gap, and
/// `event.list` says the same.
fn assert_log_holds_exactly(env: &TestEnv, run: &str, acked: &[Acked]) {
    let mut acked = acked.to_vec();
    acked.sort();
    let log = env.log_events(run);
    let text = std::fs::read_to_string(env.run_dir(run).join("events.jsonl")).unwrap();
    assert!(text.ends_with('\n'), "no torn line is left in the log");
    assert_eq!(
        log.len(),
        acked.len() + 1,
        "the log holds run.created and the {} acknowledged events, nothing else",
        acked.len()
    );
    assert_eq!(log[0]["type"], json!("run.created"));
    for (ev, (seq, id, key)) in log[1..].iter().zip(&acked) {
        assert_eq!(ev["seq"], json!(seq), "seqs without a gap");
        assert_eq!(ev["id"], json!(id), "the acknowledged event at its seq");
        assert_eq!(ev["idempotency_key"], json!(key));
    }
    for (i, ev) in log.iter().enumerate() {
        assert_eq!(ev["seq"], json!(i as u64 + 1), "gapless");
    }
    let listed = env.rpc("event.list", json!({"run": run}));
    assert_eq!(
        listed.as_array().unwrap().len(),
        log.len(),
        "event.list counts what the log holds"
    );
}

fn no_temp_files(dir: &Path) {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let name = e.file_name().to_string_lossy().into_owned();
                assert!(
                    !name.ends_with(".tmp"),
                    "temp file left behind: {}",
                    p.display()
                );
            }
        }
    }
}

fn doctor_check(env: &TestEnv, id: &str) -> Value {
    let out = env.cli(["--json", "doctor"]);
    let report = out.json();
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == json!(id))
        .cloned()
        .unwrap_or_else(|| panic!("no {id} check in {report}"))
}

/// Waits until `doctor.runs` finds every run's projections equal to what its log derives.
fn wait_projections_healed(env: &TestEnv) {
    wait_until(
        "projections healed from the log",
        std::time::Duration::from_secs(20),
        || {
            let r = env.rpc("doctor.runs", json!({}));
            r["runs"]
                .as_array()
                .unwrap()
                .iter()
                .all(|x| x["ok"] == json!(true))
                .then_some(())
        },
    );
}

#[test]
#[ignore = "needs root to mount a tmpfs: run as root with `cargo test -p octl-tests -- --ignored` (see .ci/run)"]
fn a_full_disk_refuses_appends_and_the_log_holds_exactly_the_acknowledged_ones() {
    let env = TestEnv::new();
    let fs = Tmpfs::mount(&env.home, "2m");
    let d = env.start_daemon();
    let run = env.create_run("full disk");
    let other = env.create_run("other");
    let pad = "x".repeat(600);
    let mut ok: Vec<Acked> = Vec::new();
    let mut refused = None;
    for i in 0..20_000 {
        let key = format!("fill-{i}");
        match append(&env, &run, &key, json!({"i": i, "pad": pad})) {
            Ok(r) => ok.push(acked(&r, &key)),
            Err(e) => {
                refused = Some((key, e));
                break;
            }
        }
    }
    let (key, err) = refused.expect("the 2 MiB disk filled up");
    assert!(
        ok.len() > 100,
        "{} appends before the disk was full",
        ok.len()
    );
    assert_eq!(err["data"]["kind"], json!("storage_full"), "{err}");
    let message = err["message"].as_str().unwrap();
    assert!(
        message.contains("events.jsonl"),
        "names the path: {message}"
    );
    let hint = err["data"]["hint"].as_str().unwrap_or_default();
    assert!(
        hint.contains("MiB free") && hint.contains("run gc"),
        "says how much is free and what to clean: {hint}"
    );
    // Other files on the disk (the change feed's index, the projections) give back what a
    // failed write of theirs took, so a few more appends may fit: acknowledged, they are kept
    // like any other. Fill that too; from then on the disk stays full.
    for j in 0.. {
        assert!(j < 20, "the disk never stayed full");
        let k = format!("refill-{j}");
        match append(&env, &run, &k, json!({"pad": pad})) {
            Ok(r) => ok.push(acked(&r, &k)),
            Err(e) => {
                assert_eq!(e["data"]["kind"], json!("storage_full"), "{e}");
                break;
            }
        }
    }
    // Refused again and again while the disk stays full, the retry and new keys alike; the
    // CLI exits 7 with the stable kind.
    for j in 0..5 {
        let k = if j % 2 == 0 {
            key.clone()
        } else {
            format!("more-{j}")
        };
        let e = append(&env, &run, &k, json!({"pad": pad})).unwrap_err();
        assert_eq!(e["data"]["kind"], json!("storage_full"), "{e}");
    }
    let cli = env.cli([
        "--json",
        "event",
        "append",
        "--run",
        &run,
        "--type",
        "x.fill",
        "--data",
        &json!({"pad": pad}).to_string(),
    ]);
    assert_eq!(cli.code, 7, "{cli:?}");
    assert_eq!(cli.error()["kind"], json!("storage_full"));
    assert_log_holds_exactly(&env, &run, &ok);
    // Reads and other runs' reads keep working; the daemon is up.
    env.rpc("run.list", json!({}));
    env.rpc("run.show", json!({"run": run}));
    assert_eq!(
        env.rpc("event.list", json!({"run": other}))
            .as_array()
            .unwrap()
            .len(),
        1
    );
    // A stream of the run's events (`event tail` streams from the daemon) and a rebuild,
    // which either finds nothing to rewrite or is refused, leaving no temp file.
    let tail = env.cli(["--json", "event", "tail", "--run", &run, "--lines", "3"]);
    assert_eq!(tail.code, 0, "{tail:?}");
    assert_eq!(tail.stdout.lines().count(), 3, "{tail:?}");
    if let Err(e) = env.try_rpc("run.rebuild", json!({"run": run})) {
        assert_eq!(e["data"]["kind"], json!("storage_full"), "{e}");
    }
    no_temp_files(&env.run_dir(&run));
    let disk = doctor_check(&env, "disk");
    assert_ne!(disk["status"], json!("ok"), "doctor warns: {disk}");
    assert!(disk["message"].as_str().unwrap().contains("MiB free"));

    // Space comes back: appends resume by themselves, the retry is recorded once.
    fs.resize("16m");
    let first = append(&env, &run, &key, json!({"pad": pad})).expect("append after resize");
    assert_eq!(first["seq"], json!(ok.last().unwrap().0 + 1), "no gap");
    let again = append(&env, &run, &key, json!({"pad": pad})).unwrap();
    assert_eq!(again, first, "a retry with the key gets the same event");
    ok.push(acked(&first, &key));
    let r = append(&env, &other, "o-1", json!({})).expect("the other run appends");
    assert_eq!(r["seq"], json!(2));
    assert_log_holds_exactly(&env, &run, &ok);
    wait_projections_healed(&env);
    no_temp_files(&env.run_dir(&run));
    no_temp_files(&env.run_dir(&other));

    // A restart replays the same log.
    d.signal_and_wait(libc::SIGTERM);
    let _d = env.start_daemon();
    assert_log_holds_exactly(&env, &run, &ok);
    let next = append(&env, &run, "after-restart", json!({})).unwrap();
    assert_eq!(next["seq"], json!(ok.last().unwrap().0 + 1));
}

#[test]
#[ignore = "needs root to mount a tmpfs: run as root with `cargo test -p octl-tests -- --ignored` (see .ci/run)"]
fn a_run_created_on_a_full_disk_leaves_nothing_behind() {
    let env = TestEnv::new();
    let fs = Tmpfs::mount(&env.home, "1m");
    let _d = env.start_daemon();
    let run = env.create_run("filler");
    let pad = "y".repeat(4000);
    let mut i = 0;
    while append(&env, &run, &format!("f{i}"), json!({"pad": pad})).is_ok() {
        i += 1;
    }
    // Fill what is left to the last block, so that even a new directory fails.
    let mut n = 0;
    while std::fs::write(env.home.join(format!("ballast-{n}")), vec![0u8; 512]).is_ok() {
        n += 1;
    }
    let runs_before: BTreeSet<String> = std::fs::read_dir(env.home.join("runs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for _ in 0..3 {
        let err = env
            .try_rpc("run.create", json!({"kind": "generic", "title": "no room"}))
            .unwrap_err();
        assert_eq!(err["data"]["kind"], json!("storage_full"), "{err}");
    }
    let runs_after: BTreeSet<String> = std::fs::read_dir(env.home.join("runs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(runs_after, runs_before, "no half-made run directory");
    let listed = env.rpc("run.list", json!({}));
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    fs.resize("8m");
    let created = env.create_run("room again");
    assert_eq!(env.log_events(&created).len(), 1);
    wait_projections_healed(&env);
}

#[test]
fn eio_on_write_refuses_whole_groups_and_retries_record_each_event_once() {
    let env = Arc::new(TestEnv::new());
    // The 1st write is the run's creation; a few groups later, two of them fail.
    let _d = env.start_daemon_with(&[(
        "OCTL_FAILPOINTS",
        "log:write-eio@12,log:write-eio@25,log:write-eio@26",
    )]);
    let run = env.create_run("eio");
    let ok = Arc::new(Mutex::new(Vec::<Acked>::new()));
    let refused = Arc::new(Mutex::new(Vec::<String>::new()));
    let threads: Vec<_> = (0..8)
        .map(|c| {
            let (env, run, ok, refused) = (env.clone(), run.clone(), ok.clone(), refused.clone());
            std::thread::spawn(move || {
                for i in 0..40 {
                    let key = format!("c{c}-{i}");
                    match append(&env, &run, &key, json!({"c": c, "i": i})) {
                        Ok(r) => ok.lock().unwrap().push(acked(&r, &key)),
                        Err(e) => {
                            assert_eq!(e["data"]["kind"], json!("io_error"), "{e}");
                            refused.lock().unwrap().push(key);
                        }
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut ok = ok.lock().unwrap().clone();
    let refused = refused.lock().unwrap().clone();
    assert!(refused.len() >= 3, "three groups failed: {refused:?}");
    assert_eq!(ok.len() + refused.len(), 320);
    assert_log_holds_exactly(&env, &run, &ok);
    // Each client retries with its key: one event each, and a second retry changes nothing.
    for key in &refused {
        let r = append(&env, &run, key, json!({})).expect("retry after EIO");
        let again = append(&env, &run, key, json!({})).unwrap();
        assert_eq!(again, r);
        ok.push(acked(&r, key));
    }
    assert_log_holds_exactly(&env, &run, &ok);
    let keys: BTreeMap<String, usize> =
        env.log_events(&run)
            .iter()
            .skip(1)
            .fold(BTreeMap::new(), |mut m, ev| {
                *m.entry(ev["idempotency_key"].as_str().unwrap().to_string())
                    .or_default() += 1;
                m
            });
    assert_eq!(keys.len(), 320, "every key once");
    assert!(keys.values().all(|&n| n == 1));
    wait_projections_healed(&env);
    no_temp_files(&env.run_dir(&run));
}

#[test]
fn a_failed_sync_makes_that_run_refuse_appends_until_restart_while_others_go_on() {
    let env = TestEnv::new();
    // Syncs: 1 creates A, 2 creates B, 3 is A's first append, 4 fails.
    let d = env.start_daemon_with(&[("OCTL_FAILPOINTS", "log:sync-eio@4")]);
    let a = env.create_run("a");
    let b = env.create_run("b");
    let mut ok = vec![acked(&append(&env, &a, "a-1", json!({})).unwrap(), "a-1")];
    let err = append(&env, &a, "a-2", json!({})).unwrap_err();
    assert_eq!(err["data"]["kind"], json!("io_error"), "{err}");
    let hint = err["data"]["hint"].as_str().unwrap_or_default();
    assert!(
        hint.contains("until the daemon restarts") && hint.contains("daemon stop"),
        "{hint}"
    );
    // The run refuses every append from now on, and says why.
    for key in ["a-2", "a-3"] {
        let e = append(&env, &a, key, json!({})).unwrap_err();
        assert_eq!(e["data"]["kind"], json!("io_error"), "{e}");
        assert!(
            e["message"].as_str().unwrap().contains("refuses appends"),
            "{e}"
        );
    }
    assert_log_holds_exactly(&env, &a, &ok);
    // The other run goes on; reads of A keep working.
    let mut ok_b = Vec::new();
    for i in 0..5 {
        let key = format!("b-{i}");
        ok_b.push(acked(&append(&env, &b, &key, json!({})).unwrap(), &key));
    }
    assert_log_holds_exactly(&env, &b, &ok_b);
    env.rpc("run.show", json!({"run": a}));
    let runs = env.rpc("doctor.runs", json!({}));
    let bad: Vec<&Value> = runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["ok"] != json!(true))
        .collect();
    assert_eq!(bad.len(), 1, "{runs}");
    assert_eq!(bad[0]["run"], json!(a));
    assert!(bad[0]["problem"]
        .as_str()
        .unwrap()
        .starts_with("refuses appends"));

    // A restart replays the log and A takes appends again; the retry is recorded once.
    d.signal_and_wait(libc::SIGTERM);
    let _d = env.start_daemon();
    assert_log_holds_exactly(&env, &a, &ok);
    let r = append(&env, &a, "a-2", json!({})).expect("appends after restart");
    assert_eq!(r["seq"], json!(3));
    assert_eq!(append(&env, &a, "a-2", json!({})).unwrap(), r);
    ok.push(acked(&r, "a-2"));
    assert_log_holds_exactly(&env, &a, &ok);
}

fn fill_up(dir: &Path) -> usize {
    let mut n = 0;
    while std::fs::write(dir.join(format!("ballast-{n}")), vec![0u8; 4096]).is_ok() {
        n += 1;
    }
    // The last blocks, in small pieces.
    while std::fs::write(dir.join(format!("ballast-{n}")), vec![0u8; 64]).is_ok() {
        n += 1;
    }
    n
}

fn names(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
#[ignore = "needs root to mount a tmpfs: run as root with `cargo test -p octl-tests -- --ignored` (see .ci/run)"]
fn a_spawn_on_a_full_disk_creates_nothing_and_works_once_there_is_room() {
    let env = TestEnv::new();
    let fs = Tmpfs::mount(&env.home, "4m");
    let _d = env.start_daemon();
    let repo = octl_tests::TestRepo::new(&env, "repo");
    fill_up(&env.home);
    let before = (
        names(&env.home.join("runs")),
        names(&env.home.join("worktrees")),
    );
    for _ in 0..3 {
        let err = env
            .spawn(
                "spinoff",
                &repo,
                "printf room > room.txt",
                json!({"agent": "shell", "node": "room"}),
            )
            .unwrap_err();
        assert_eq!(err["data"]["kind"], json!("storage_full"), "{err}");
    }
    assert_eq!(
        (
            names(&env.home.join("runs")),
            names(&env.home.join("worktrees"))
        ),
        before,
        "no run directory or worktree was made"
    );
    assert!(repo.refs("refs/heads/octl/").is_empty(), "no branch made");
    assert!(env.tmux_windows().is_empty(), "{:?}", env.tmux_windows());
    assert_eq!(env.rpc("run.list", json!({})), json!([]));

    fs.resize("64m");
    let run = env
        .spawn(
            "spinoff",
            &repo,
            "printf room > room.txt",
            json!({"agent": "shell", "node": "room"}),
        )
        .expect("spawn once there is room");
    let run = run["id"].as_str().unwrap().to_string();
    let show = env.wait_status(&run, &["completed", "failed"]);
    assert_eq!(show["manifest"]["status"], json!("completed"), "{show}");
    assert_eq!(repo.show("main", "room.txt").as_deref(), Some("room"));
}

#[test]
fn merge_and_cleanup_whose_events_fail_to_write_are_tried_again_and_lose_nothing() {
    // Writes: 1 creates the run, 2 is node.started, 3 node.done, 4 merge.started, then
    // merge.succeeded (after main moved) and cleanup.done (after the worktree went).
    // `merge.started` refused three times:
    merge_with_failed_writes("log:write-eio@4,log:write-eio@5,log:write-eio@6");
    // `merge.succeeded` refused after the move, then `cleanup.done` after the cleanup:
    merge_with_failed_writes("log:write-eio@5,log:write-eio@7");
}

fn merge_with_failed_writes(failpoints: &str) {
    let env = TestEnv::new();
    let d = env.start_daemon_with(&[("OCTL_FAILPOINTS", failpoints)]);
    let repo = octl_tests::TestRepo::new(&env, "repo");
    let run = env
        .spawn(
            "spinoff",
            &repo,
            "printf kept > kept.txt && git add kept.txt && git commit -qm kept",
            json!({"agent": "shell", "node": "kept"}),
        )
        .expect("spawn");
    let run = run["id"].as_str().unwrap().to_string();
    let show = env.wait_status(&run, &["completed", "failed"]);
    let types = env.event_types(&run);
    let refused: Vec<String> = d
        .stderr()
        .lines()
        .filter(|l| l.contains("daemon event refused"))
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|v| v["fields"]["kind"].as_str().unwrap_or_default().to_string())
        .collect();
    let failed = d
        .stderr()
        .lines()
        .filter(|l| l.contains("nothing of the group was recorded"))
        .count();
    assert_eq!(
        failed,
        failpoints.split(',').count(),
        "{failpoints}: each armed write failed a group (refused via append: {refused:?})"
    );
    assert_eq!(
        show["manifest"]["status"],
        json!("completed"),
        "{failpoints}: {show} {types:?} refused {refused:?}"
    );
    assert_eq!(repo.show("main", "kept.txt").as_deref(), Some("kept"));
    assert_eq!(
        types.iter().filter(|t| *t == "merge.succeeded").count(),
        1,
        "{types:?}"
    );
    let log = repo.git(&["log", "--format=%H", "main", "--", "kept.txt"]);
    assert_eq!(log.lines().count(), 1, "merged once: {log}");
    assert!(
        repo.refs("refs/heads/octl/").is_empty(),
        "branch deleted once merged"
    );
    assert_eq!(repo.refs("refs/octl/snapshots/").len(), 1, "snapshot kept");
    assert!(names(&env.home.join("worktrees").join(&run)).is_empty());
    for (i, ev) in env.log_events(&run).iter().enumerate() {
        assert_eq!(ev["seq"], json!(i as u64 + 1), "gapless: {types:?}");
    }
    eprintln!("{failpoints}: refused {refused:?}; log {types:?}");
}

#[test]
fn a_run_whose_first_sync_fails_is_not_created() {
    let env = TestEnv::new();
    let _d = env.start_daemon_with(&[("OCTL_FAILPOINTS", "log:sync-eio@1")]);
    let err = env
        .try_rpc("run.create", json!({"kind": "generic", "title": "lost"}))
        .unwrap_err();
    assert_eq!(err["data"]["kind"], json!("io_error"), "{err}");
    assert_eq!(env.rpc("run.list", json!({})), json!([]));
    assert!(names(&env.home.join("runs")).is_empty(), "no run directory");
    let run = env.create_run("kept");
    let r = append(&env, &run, "k", json!({})).expect("the next run takes appends");
    assert_eq!(r["seq"], json!(2));
}

#[test]
#[ignore = "needs root to mount a tmpfs: run as root with `cargo test -p octl-tests -- --ignored` (see .ci/run)"]
fn the_daemon_starts_on_a_full_disk_and_heals_projections_when_there_is_room() {
    let env = TestEnv::new();
    let fs = Tmpfs::mount(&env.home, "2m");
    let d = env.start_daemon();
    let run = env.create_run("restart on a full disk");
    let mut ok = Vec::new();
    for i in 0..20 {
        let key = format!("k{i}");
        ok.push(acked(
            &append(&env, &run, &key, json!({"i": i})).unwrap(),
            &key,
        ));
    }
    d.signal_and_wait(libc::SIGTERM);
    // The projections are gone and there is no room to write them again.
    std::fs::remove_file(env.run_dir(&run).join("manifest.json")).unwrap();
    fill_up(&env.home);
    let _d = env.start_daemon();
    assert_log_holds_exactly(&env, &run, &ok);
    let show = env.rpc("run.show", json!({"run": run}));
    assert_eq!(show["manifest"]["last_seq"], json!(21), "{show}");
    fs.resize("8m");
    wait_projections_healed(&env);
    assert!(env.run_dir(&run).join("manifest.json").exists());
}

/// `len` bytes that do not compress: git stores and writes them whole.
fn noise(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Spawns a shell spinoff of `repo` that cannot be checked out for want of room: refused
/// with `storage_full`, its node failed saying so, no worktree left. Returns the run.
fn spawn_without_room(env: &TestEnv, repo: &octl_tests::TestRepo, node: &str) -> (String, String) {
    let err = env
        .spawn(
            "spinoff",
            repo,
            "printf room > room.txt",
            json!({"agent": "shell", "node": node}),
        )
        .unwrap_err();
    assert_eq!(err["data"]["kind"], json!("storage_full"), "{err}");
    let message = err["message"].as_str().unwrap().to_string();
    assert!(message.contains("could not check out"), "{message}");
    assert!(message.contains("free of"), "{message}");
    assert!(
        err["data"]["hint"].as_str().unwrap().contains("run retry"),
        "{err}"
    );
    let runs = env.rpc("run.list", json!({}));
    let run = runs
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["repo"] == json!(repo.path.display().to_string()))
        .expect("the run")["id"]
        .as_str()
        .unwrap()
        .to_string();
    let failed = env.wait_node(&run, node, "failed");
    let reason = failed["reason"].as_str().unwrap();
    assert!(reason.contains("could not check out"), "{reason}");
    assert!(failed["exit_status"].is_null(), "no agent ran: {failed}");
    // Nothing half-made: no worktree, in the home or in git's bookkeeping.
    assert!(
        !env.home.join("worktrees").join(&run).join(node).exists(),
        "the incomplete checkout was removed"
    );
    assert!(
        repo.extra_worktrees().is_empty(),
        "{:?}",
        repo.extra_worktrees()
    );
    let show = env.cli(["run", "show", &run]);
    assert!(!show.stdout.contains("exit status"), "{}", show.stdout);
    (run, message)
}

#[test]
#[ignore = "needs root to mount a tmpfs: run as root with `cargo test -p octl-tests -- --ignored` (see .ci/run)"]
fn a_checkout_without_room_fails_the_start_with_storage_full_and_leaves_nothing_half_made() {
    let env = TestEnv::new();
    let fs = Tmpfs::mount(&env.home, "4m");
    let _d = env.start_daemon();
    // A tree bigger than the home: git says it could not write a file.
    let big = octl_tests::TestRepo::new(&env, "big");
    std::fs::write(big.path.join("big.bin"), noise(6 << 20)).unwrap();
    big.commit_all("big");
    spawn_without_room(&env, &big, "big");

    // A file mostly of zeros, which git writes sparse and which fits: git exits 0, but the
    // disk is left full and (on a tmpfs) the file cannot be read back.
    let sparse = octl_tests::TestRepo::new(&env, "sparse");
    let mut bytes = noise(1536 << 10);
    bytes.resize(bytes.len() + (8 << 20), 0);
    bytes.extend(noise(4096));
    std::fs::write(sparse.path.join("sparse.bin"), &bytes).unwrap();
    sparse.commit_all("sparse");
    let ballast = fill_up(&env.home);
    // 2 MiB of room again.
    for n in (0..ballast).rev().take(512) {
        let _ = std::fs::remove_file(env.home.join(format!("ballast-{n}")));
    }
    let (run, message) = spawn_without_room(&env, &sparse, "sparse");
    assert!(
        message.contains("left its filesystem full") || message.contains("cannot be read back"),
        "git exited 0: {message}"
    );

    // Once there is room, the node starts again and its work lands.
    fs.resize("64m");
    env.cli(["run", "retry", &run, "--node", "sparse"]).ok();
    let show = env.wait_status(&run, &["completed", "failed"]);
    assert_eq!(show["manifest"]["status"], json!("completed"), "{show}");
    assert_eq!(sparse.show("main", "room.txt").as_deref(), Some("room"));
}
