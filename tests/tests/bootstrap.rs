//! Worktree bootstrap end to end: `.worktreeinclude`, linked directories, the setup command
//! and `OCTL_PORT`, with real git, real tmux and shell agents against the real daemon.

use std::collections::BTreeSet;
use std::path::Path;

use octl_tests::{wait_until, TestEnv, TestRepo};
use serde_json::{json, Value};

fn run_id(v: &Value) -> String {
    v["id"].as_str().unwrap().to_string()
}

fn write_home_config(env: &TestEnv, text: &str) {
    std::fs::create_dir_all(&env.home).unwrap();
    std::fs::write(env.home.join("config.toml"), text).unwrap();
}

/// A repository whose checkout has ignored files, some of them named by `.worktreeinclude`.
fn repo_with_ignored_files(env: &TestEnv) -> TestRepo {
    let repo = TestRepo::new(env, "repo");
    repo.write(".gitignore", ".env\n*.local\nbuild/\nnode_modules\n");
    repo.write(".worktreeinclude", ".env\nconfig/*.local\nnotes.txt\n");
    repo.commit_all("ignore rules");
    repo.write(".env", "SECRET=1\n");
    repo.write("config/db.local", "db\n");
    repo.write("build/out.bin", "not included\n");
    // Matches .worktreeinclude but git does not ignore it: not copied.
    repo.write("notes.txt", "untracked\n");
    repo.write("node_modules/pkg/index.js", "module.exports = 1\n");
    repo
}

fn port_of_start(env: &TestEnv, run: &str) -> Option<u64> {
    env.log_events(run)
        .iter()
        .find(|e| e["type"] == json!("node.starting"))
        .and_then(|e| e["data"]["port"].as_u64())
}

#[test]
fn a_new_worktree_gets_its_included_files_links_setup_and_port() {
    let env = TestEnv::new();
    write_home_config(
        &env,
        "[worktree]\nports = \"4100-4109\"\nsetup = \"echo from-home > home.out\"\n",
    );
    let _d = env.start_daemon();
    let repo = repo_with_ignored_files(&env);
    // The repository's own file wins over the home's setup.
    repo.write(
        ".orchestratectl.toml",
        "[worktree]\nsymlink = [\"node_modules\"]\nsetup = \"echo setup-saw-port-$OCTL_PORT; echo \\\"$OCTL_PORT\\\" > setup.out\"\n",
    );
    repo.git(&["add", ".orchestratectl.toml"]);
    repo.git(&["commit", "-q", "-m", "bootstrap"]);
    let task = "{ cat .env config/db.local; echo port=$OCTL_PORT; \
                test -L node_modules && cat node_modules/pkg/index.js; \
                test -e build/out.bin || echo no-build; test -e notes.txt || echo no-notes; \
                test -e home.out || echo no-home-setup; cat setup.out; } > seen.txt; rm setup.out";
    let spawned = env
        .spawn(
            "spinoff",
            &repo,
            task,
            json!({"agent": "shell", "node": "boot"}),
        )
        .unwrap();
    let run = run_id(&spawned);
    let show = env.wait_status(&run, &["completed", "failed", "waiting"]);
    assert_eq!(show["manifest"]["status"], json!("completed"), "{show}");
    assert_eq!(port_of_start(&env, &run), Some(4100));
    assert_eq!(
        repo.show("main", "seen.txt").as_deref(),
        Some(
            "SECRET=1\ndb\nport=4100\nmodule.exports = 1\nno-build\nno-notes\nno-home-setup\n4100\n"
        )
    );
    // The link was never committed, and the repository's own directory is untouched.
    assert!(repo.show("main", "node_modules").is_none());
    assert!(repo.path.join("node_modules/pkg/index.js").is_file());
    let log = std::fs::read_to_string(env.run_dir(&run).join("logs/boot.log")).unwrap();
    assert!(log.contains("[octl] setup: echo setup-saw-port"), "{log}");
    assert!(log.contains("setup-saw-port-4100"), "{log}");
}

#[test]
fn a_failing_or_overlong_setup_fails_the_node_and_keeps_everything() {
    let env = TestEnv::new();
    let _d = env.start_daemon();
    let repo = repo_with_ignored_files(&env);
    for (setup, timeout, says) in [
        ("echo broke-here; exit 3", "1m", "exit status: 3"),
        ("echo slow; sleep 30", "1s", "did not finish within 1 s"),
    ] {
        repo.write(
            ".orchestratectl.toml",
            &format!("[worktree]\nsetup = {setup:?}\nsetup_timeout = {timeout:?}\n"),
        );
        let spawned = env
            .spawn(
                "spinoff",
                &repo,
                "echo never > ran.txt",
                json!({"agent": "shell", "node": "n"}),
            )
            .unwrap();
        let run = run_id(&spawned);
        let node = env.wait_node(&run, "n", "failed");
        let reason = node["reason"].as_str().unwrap();
        assert!(
            reason.contains("setup command") && reason.contains(says),
            "{reason}"
        );
        assert!(reason.contains("logs/n.log"), "{reason}");
        // Kept: the worktree (with what was copied into it) and the branch; no agent ran.
        let wt = Path::new(node["worktree"].as_str().unwrap());
        assert_eq!(
            std::fs::read_to_string(wt.join(".env")).unwrap(),
            "SECRET=1\n"
        );
        assert!(!wt.join("ran.txt").exists());
        assert_eq!(repo.refs(&format!("refs/heads/octl/{run}/")).len(), 1);
        assert!(!env.event_types(&run).contains(&"node.started".to_string()));
        let log = std::fs::read_to_string(env.run_dir(&run).join("logs/n.log")).unwrap();
        assert!(
            log.contains(setup.split(';').next().unwrap().trim_start_matches("echo ")),
            "{log}"
        );
    }
}

#[test]
fn bad_bootstrap_settings_are_refused_naming_the_field_and_nothing_is_created() {
    let env = TestEnv::new();
    let _d = env.start_daemon();
    let repo = TestRepo::new(&env, "repo");
    for (file, text, field) in [
        (
            ".orchestratectl.toml",
            "[worktree]\nports = \"9-1\"\n",
            "worktree.ports",
        ),
        (
            ".orchestratectl.toml",
            "[worktree]\nsymlink = [\"/abs\"]\n",
            "worktree.symlink",
        ),
        (
            ".orchestratectl.toml",
            "[worktree]\nsetup_timeout = \"soon\"\n",
            "worktree.setup_timeout",
        ),
        (
            ".orchestratectl.toml",
            "[worktree]\nsetpu = \"x\"\n",
            "setpu",
        ),
    ] {
        repo.write(file, text);
        let err = env
            .spawn("spinoff", &repo, "true", json!({"agent": "shell"}))
            .unwrap_err();
        assert_eq!(err["data"]["kind"], json!("invalid_params"), "{err}");
        let message = err["message"].as_str().unwrap();
        assert!(message.contains(field), "{message}");
    }
    assert_eq!(env.rpc("run.list", json!({})), json!([]), "no run created");
    assert!(repo.refs("refs/heads/octl/").is_empty());
}

#[test]
fn a_link_git_would_commit_is_refused_and_the_node_fails_with_the_reason() {
    let env = TestEnv::new();
    let _d = env.start_daemon();
    let repo = TestRepo::new(&env, "repo");
    // `node_modules/` matches only a directory: git would see the link as a new file.
    repo.write(".gitignore", "node_modules/\n");
    repo.write(
        ".orchestratectl.toml",
        "[worktree]\nsymlink = [\"node_modules\"]\n",
    );
    repo.commit_all("ignore");
    repo.write("node_modules/x.js", "1\n");
    // The answer is the start's failure; the node failed with it.
    let err = env
        .spawn(
            "spinoff",
            &repo,
            "true",
            json!({"agent": "shell", "node": "n"}),
        )
        .unwrap_err();
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("does not ignore it as a link"),
        "{err}"
    );
    let runs = env.rpc("run.list", json!({}));
    let node = env.wait_node(runs[0]["id"].as_str().unwrap(), "n", "failed");
    let reason = node["reason"].as_str().unwrap();
    assert!(reason.contains("does not ignore it as a link"), "{reason}");
    let wt = Path::new(node["worktree"].as_str().unwrap());
    assert!(std::fs::symlink_metadata(wt.join("node_modules")).is_err());
}

/// Agents that live until `release` exists.
fn held_task(release: &Path) -> String {
    format!(
        "while [ ! -e '{}' ]; do sleep 0.05; done",
        release.display()
    )
}

fn live_ports(env: &TestEnv) -> Vec<u64> {
    let mut ports = Vec::new();
    for r in env.rpc("run.list", json!({})).as_array().unwrap() {
        let show = env.rpc("run.show", json!({"run": r["id"]}));
        for n in show["nodes"].as_array().unwrap() {
            if ["starting", "running", "waiting"].contains(&n["state"].as_str().unwrap()) {
                ports.extend(n["port"].as_u64());
            }
        }
    }
    ports
}

#[test]
fn ports_are_never_held_by_two_live_nodes_even_across_a_restart() {
    let env = TestEnv::new();
    write_home_config(&env, "[worktree]\nports = \"4200-4203\"\n");
    let mut daemon = Some(env.start_daemon());
    let repo = TestRepo::new(&env, "repo");
    const ROUNDS: usize = 3;
    for round in 0..ROUNDS {
        let release = env.root.path().join(format!("release-{round}"));
        let task = held_task(&release);
        // Six concurrent spawns for four ports: four start, two are refused.
        let answers: Vec<Result<Value, Value>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..6)
                .map(|i| {
                    let (env, repo, task) = (&env, &repo, &task);
                    s.spawn(move || {
                        env.spawn(
                            "spinoff",
                            repo,
                            task,
                            json!({"agent": "shell", "node": format!("n{i}")}),
                        )
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let started: Vec<String> = answers.iter().flatten().map(run_id).collect();
        assert_eq!(started.len(), 4, "{answers:?}");
        for err in answers.iter().filter_map(|a| a.as_ref().err()) {
            assert_eq!(err["data"]["kind"], json!("invalid_transition"), "{err}");
            assert!(
                err["message"]
                    .as_str()
                    .unwrap()
                    .contains("no free port in worktree.ports 4200-4203"),
                "{err}"
            );
        }
        let ports: BTreeSet<u64> = started
            .iter()
            .map(|r| port_of_start(&env, r).unwrap())
            .collect();
        assert_eq!(ports, BTreeSet::from([4200, 4201, 4202, 4203]));
        if round == ROUNDS - 1 {
            // The ports live nodes hold are read back from the logs after a crash.
            daemon.take().unwrap().kill9();
            daemon = Some(env.start_daemon());
            let err = env
                .spawn("spinoff", &repo, "true", json!({"agent": "shell"}))
                .unwrap_err();
            assert!(
                err["message"].as_str().unwrap().contains("no free port"),
                "{err}"
            );
        }
        let mut live = live_ports(&env);
        live.sort();
        assert_eq!(live, vec![4200, 4201, 4202, 4203]);
        std::fs::write(&release, "").unwrap();
        for r in &started {
            env.wait_status(r, &["completed", "failed", "waiting"]);
        }
        wait_until(
            "every port to be free",
            std::time::Duration::from_secs(30),
            || live_ports(&env).is_empty().then_some(()),
        );
    }
    // Free again: the lowest port is handed out.
    let spawned = env
        .spawn("spinoff", &repo, "true", json!({"agent": "shell"}))
        .unwrap();
    assert_eq!(port_of_start(&env, &run_id(&spawned)), Some(4200));
}

fn fanout(env: &TestEnv, repo: &TestRepo, manifest: &str, cap: u64) -> String {
    let r = env.rpc(
        "fanout.start",
        json!({"manifest": manifest, "format": "toml", "repo": repo.path.display().to_string(), "agent": "shell", "max_parallel": cap}),
    );
    r["id"].as_str().unwrap().to_string()
}

#[test]
fn a_fan_out_runs_its_units_setups_side_by_side_and_each_gets_its_port() {
    let env = TestEnv::new();
    let gate = env.root.path().join("gate");
    std::fs::create_dir_all(&gate).unwrap();
    // Each setup says it started, then waits for the test: both can only have started if
    // the second unit's start did not wait for the first one's setup.
    write_home_config(
        &env,
        &format!(
            "[worktree]\nports = \"4300-4309\"\nsetup = \"touch '{0}'/$OCTL_NODE; while [ ! -e '{0}'/go ]; do sleep 0.05; done\"\n",
            gate.display()
        ),
    );
    let _d = env.start_daemon();
    let repo = TestRepo::new(&env, "repo");
    let manifest = "prompt = \"echo $OCTL_PORT > {id}.port\"\n\
        [[units]]\nid = \"a\"\nvars = { id = \"a\" }\n\
        [[units]]\nid = \"b\"\nvars = { id = \"b\" }\n";
    let run = fanout(&env, &repo, manifest, 2);
    wait_until(
        "both setups to run at once",
        std::time::Duration::from_secs(30),
        || (gate.join("a").exists() && gate.join("b").exists()).then_some(()),
    );
    let show = env.rpc("run.show", json!({"run": run}));
    for n in show["nodes"].as_array().unwrap() {
        assert_eq!(n["state"], json!("starting"), "{show}");
    }
    std::fs::write(gate.join("go"), "").unwrap();
    let show = env.wait_status(&run, &["completed", "failed", "waiting"]);
    assert_eq!(show["manifest"]["status"], json!("completed"), "{show}");
    let ports: BTreeSet<String> = ["a", "b"]
        .iter()
        .map(|u| repo.show("main", &format!("{u}.port")).unwrap())
        .collect();
    assert_eq!(
        ports,
        BTreeSet::from(["4300\n".to_string(), "4301\n".to_string()])
    );
}

#[test]
fn fan_out_units_without_a_free_port_wait_for_one_and_all_merge() {
    let env = TestEnv::new();
    write_home_config(&env, "[worktree]\nports = \"4400-4400\"\n");
    let _d = env.start_daemon();
    let repo = TestRepo::new(&env, "repo");
    // Another run holds the only port first: the fan-out's units wait for it, then for
    // each other.
    let release = env.root.path().join("release");
    let holder = run_id(
        &env.spawn(
            "spinoff",
            &repo,
            &held_task(&release),
            json!({"agent": "shell", "node": "holder"}),
        )
        .unwrap(),
    );
    env.wait_node(&holder, "holder", "running");
    let manifest = "prompt = \"echo $OCTL_PORT > {id}.port\"\n\
        [[units]]\nid = \"a\"\nvars = { id = \"a\" }\n\
        [[units]]\nid = \"b\"\nvars = { id = \"b\" }\n\
        [[units]]\nid = \"c\"\nvars = { id = \"c\" }\n";
    let run = fanout(&env, &repo, manifest, 3);
    let why = "a free port in worktree.ports 4400-4400";
    let show = wait_until(
        "a unit waiting for the port",
        std::time::Duration::from_secs(30),
        || {
            let show = env.rpc("run.show", json!({"run": run}));
            show["nodes"]
                .as_array()
                .unwrap()
                .iter()
                .any(|n| n["waiting_for"] == json!([why]))
                .then_some(show)
        },
    );
    // Waiting, not failed: every unit is still pending, and `run show` says why.
    for n in show["nodes"].as_array().unwrap() {
        assert_eq!(n["state"], json!("pending"), "{show}");
    }
    let text = env.cli(["run", "show", &run]).ok().stdout.clone();
    assert!(text.contains(why), "{text}");
    std::fs::write(&release, "").unwrap();
    let show = env.wait_status(&run, &["completed", "failed", "waiting"]);
    assert_eq!(show["manifest"]["status"], json!("completed"), "{show}");
    for u in ["a", "b", "c"] {
        assert_eq!(
            repo.show("main", &format!("{u}.port")).as_deref(),
            Some("4400\n")
        );
    }
    // Never two live nodes with the port: in each run's log, and across both (by time).
    let mut events: Vec<Value> = [&holder, &run]
        .iter()
        .flat_map(|r| env.log_events(r))
        .collect();
    // At one millisecond, an end goes before a start (the log of each run keeps its order).
    events.sort_by_key(|e| {
        (
            e["ts"].as_str().unwrap().to_string(),
            e["type"] == json!("node.starting"),
        )
    });
    let mut held_by: Option<(String, String)> = None;
    for e in &events {
        let who = (
            e["run"].as_str().unwrap_or("").to_string(),
            e["node"].as_str().unwrap_or("").to_string(),
        );
        let kind = e["type"].as_str().unwrap();
        if kind == "node.starting" && e["data"]["port"] == json!(4400) {
            assert_eq!(held_by, None, "port 4400 handed out twice: {e}");
            held_by = Some(who);
        } else if held_by.as_ref() == Some(&who)
            && [
                "node.done",
                "node.failed",
                "node.exited",
                "node.paused",
                "node.cancelled",
            ]
            .contains(&kind)
        {
            held_by = None;
        }
    }
    assert!(
        !env.log_events(&run)
            .iter()
            .any(|e| e["type"] == json!("node.failed")),
        "no unit failed"
    );
}

#[test]
fn cancelling_a_node_during_its_setup_stops_the_setup() {
    let env = TestEnv::new();
    let pid_file = env.root.path().join("setup.pid");
    write_home_config(
        &env,
        &format!(
            "[worktree]\nsetup = \"echo $$ > '{}'; exec sleep 60\"\n",
            pid_file.display()
        ),
    );
    let _d = env.start_daemon();
    let repo = TestRepo::new(&env, "repo");
    let spawned = env
        .spawn(
            "spinoff",
            &repo,
            "true",
            json!({"agent": "shell", "node": "n"}),
        )
        .unwrap();
    let run = run_id(&spawned);
    let pid: i32 = wait_until(
        "the setup to run",
        std::time::Duration::from_secs(30),
        || std::fs::read_to_string(&pid_file).ok()?.trim().parse().ok(),
    );
    env.rpc("run.cancel", json!({"run": run}));
    wait_until(
        "the setup to be killed",
        std::time::Duration::from_secs(30),
        || {
            // SAFETY: signal 0 only asks whether the process exists.
            (unsafe { libc::kill(pid, 0) } != 0).then_some(())
        },
    );
    let node = env.wait_node(&run, "n", "cancelled");
    assert!(node["pane"].is_null(), "no agent was started: {node}");
    let log = std::fs::read_to_string(env.run_dir(&run).join("logs/n.log")).unwrap();
    assert!(
        log.contains("[octl] setup killed: its node no longer waits for it"),
        "{log}"
    );
}
