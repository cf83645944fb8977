//! Runners in config.toml: `--runner`, the manifest's and the plan's `runner`, a profile's
//! default, what the log records, what is refused (naming the field and the accepted form,
//! changing nothing), and `doctor`'s check of each runner — on SSH hosts and a Slurm cluster
//! for real in the `#[ignore]`d test (tests/cluster/up.sh).

use serde_json::{json, Value};

use octl_tests::cluster::Cluster;
use octl_tests::{bin, wait_until, Pane, TestEnv, TestRepo};

fn write_config(env: &TestEnv, text: &str) {
    std::fs::create_dir_all(&env.home).unwrap();
    std::fs::write(env.home.join("config.toml"), text).unwrap();
}

/// The `data.runner` of each `node.added` of the run.
fn runners_added(env: &TestEnv, run: &str) -> Vec<Value> {
    env.log_events(run)
        .into_iter()
        .filter(|e| e["type"] == "node.added")
        .map(|e| e["data"]["runner"].clone())
        .collect()
}

fn run_id(v: &Value) -> String {
    v["id"].as_str().unwrap().to_string()
}

const SLURM_AND_LOCAL: &str = "\
[agents.sh]\n\
autonomous = [\"sh\", \"-c\", \"{prompt}\"]\n\
on_exit = \"done\"\n\
runner = \"here\"\n\
[runners.here]\n\
kind = \"local\"\n\
[runners.hpc]\n\
kind = \"slurm\"\n\
partition = \"nosuch\"\n\
[runners.big]\n\
kind = \"ssh\"\n\
hosts = [\"build1\"]\n";

#[test]
fn the_runner_a_node_uses_is_resolved_recorded_and_refused_when_unknown() {
    let env = TestEnv::new();
    write_config(&env, SLURM_AND_LOCAL);
    let _d = env.start_daemon();
    let repo = TestRepo::new(&env, "repo");

    // Nothing asked: local, recorded.
    let run = run_id(
        &env.spawn(
            "spinoff",
            &repo,
            "echo a > a.txt",
            json!({"agent": "shell", "node": "a"}),
        )
        .unwrap(),
    );
    assert_eq!(runners_added(&env, &run), [json!("local")]);
    env.wait_status(&run, &["completed"]);
    let node = &env.rpc("run.show", json!({"run": run}))["nodes"][0];
    assert_eq!(node["runner"], "local", "{node}");

    // The profile's runner when --runner is not given; --runner over it.
    let run = run_id(
        &env.spawn(
            "spinoff",
            &repo,
            "echo b > b.txt",
            json!({"agent": "sh", "node": "b"}),
        )
        .unwrap(),
    );
    assert_eq!(runners_added(&env, &run), [json!("here")]);
    env.wait_status(&run, &["completed"]);
    let cli = env.cli([
        "--json",
        "spawn",
        "spinoff",
        "--repo",
        &repo.path.display().to_string(),
        "--agent",
        "sh",
        "--runner",
        "local",
        "--node",
        "c",
        "echo c > c.txt",
    ]);
    let run = run_id(&cli.ok().json());
    assert_eq!(runners_added(&env, &run), [json!("local")]);
    env.wait_status(&run, &["completed"]);

    // Unknown: not_found naming the known ones; a kind this daemon cannot run yet: invalid.
    // Neither creates a run.
    let before = env.rpc("run.list", json!({}));
    let e = env
        .spawn(
            "spinoff",
            &repo,
            "true",
            json!({"agent": "shell", "runner": "nope"}),
        )
        .unwrap_err();
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("no runner \"nope\"; known: local, big, here, hpc"),
        "{e}"
    );
    // SSH hosts that do not answer (no host build1 here) and a Slurm cluster that does not
    // (none here, or no such partition): tool_failed or tool_missing, before anything exists.
    let spawn_on = |runner: &str| {
        let repo_dir = repo.path.display().to_string();
        let cli = env.cli([
            "--json", "spawn", "spinoff", "--repo", &repo_dir, "--agent", "shell", "--runner",
            runner, "true",
        ]);
        assert_ne!(cli.code, 0, "{cli:?}");
        cli.error()
    };
    let e = spawn_on("big");
    assert_eq!(e["kind"], "tool_failed", "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("no host of runner \"big\" answers over ssh (build1: "),
        "{e}"
    );
    let e = spawn_on("hpc");
    assert!(
        e["kind"] == "tool_failed" || e["kind"] == "tool_missing",
        "{e}"
    );
    let cli = env.cli(["--json", "spawn", "spinoff", "--runner", "Bad Name", "true"]);
    assert!(
        cli.error()["message"]
            .as_str()
            .unwrap()
            .contains("--runner"),
        "{cli:?}"
    );
    assert_eq!(
        env.rpc("run.list", json!({})),
        before,
        "a refused spawn changes nothing"
    );
}

#[test]
fn manifests_and_plans_name_runners_and_the_flag_decides_where_they_do_not() {
    let env = TestEnv::new();
    write_config(&env, SLURM_AND_LOCAL);
    let _d = env.start_daemon();
    let repo = TestRepo::new(&env, "repo");

    let manifest = "prompt = \"echo {x} > {x}.txt\"\nagent = \"shell\"\nrunner = \"here\"\n\
                    [[units]]\nid = \"u1\"\nvars = { x = \"one\" }\n\
                    [[units]]\nid = \"u2\"\nvars = { x = \"two\" }\n";
    let fan = |runner: Option<&str>| {
        let mut p = json!({"manifest": manifest, "format": "toml",
                           "repo": repo.path.display().to_string()});
        if let Some(r) = runner {
            p["runner"] = json!(r);
        }
        env.try_rpc("fanout.start", p)
    };
    let run = run_id(&fan(None).unwrap());
    assert_eq!(runners_added(&env, &run), [json!("here"), json!("here")]);
    env.wait_status(&run, &["completed"]);
    let run = run_id(&fan(Some("local")).unwrap());
    assert_eq!(runners_added(&env, &run), [json!("local"), json!("local")]);
    env.wait_status(&run, &["completed"]);
    let e = fan(Some("big")).unwrap_err();
    assert!(e["message"].as_str().unwrap().contains("build1"), "{e}");

    // A plan node's runner stands; the others take --runner.
    let plan = "[[nodes]]\nid = \"p1\"\ntask = \"echo 1 > p1.txt\"\nrunner = \"here\"\n\
                [[nodes]]\nid = \"p2\"\ntask = \"echo 2 > p2.txt\"\n";
    let run = run_id(&env.rpc(
        "orchestrate.start",
        json!({"plan": plan, "format": "toml", "repo": repo.path.display().to_string(),
               "agent": "shell", "runner": "local"}),
    ));
    assert_eq!(runners_added(&env, &run), [json!("here"), json!("local")]);

    // A bad name in a manifest is reported with its field.
    let bad = manifest.replace("runner = \"here\"", "runner = \"No Good\"");
    let e = env
        .try_rpc(
            "fanout.start",
            json!({"manifest": bad, "format": "toml", "repo": repo.path.display().to_string()}),
        )
        .unwrap_err();
    assert!(e.to_string().contains("runner \\\"No Good\\\""), "{e}");
}

#[test]
fn a_bad_runner_in_config_is_refused_naming_the_field() {
    let env = TestEnv::new();
    write_config(&env, "[runners.big]\nkind = \"ssh\"\n");
    let _d = env.start_daemon();
    let repo = TestRepo::new(&env, "repo");
    let e = env
        .spawn("spinoff", &repo, "true", json!({"agent": "shell"}))
        .unwrap_err();
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("runners.big.hosts: missing"),
        "{e}"
    );
}

/// `run attach` goes through the runner seam: `node.attach` gives the node's runner's command
/// (the local runner's `tmux attach-session` on the daemon's socket), and `run attach` in a
/// real terminal runs it and shows the agent's window. A node without an agent is refused
/// naming its state.
#[test]
fn run_attach_runs_the_command_the_nodes_runner_gives() {
    let env = TestEnv::new();
    let _d = env.start_daemon();
    let repo = TestRepo::new(&env, "repo");
    let run = run_id(
        &env.spawn(
            "code",
            &repo,
            "echo hello-from-the-agent; sleep 600",
            json!({"agent": "shell", "node": "api"}),
        )
        .unwrap(),
    );
    env.wait_node(&run, "api", "running");
    let a = env.rpc("node.attach", json!({"run": run, "node": "api"}));
    let socket = env.home.join("tmux.sock").display().to_string();
    assert_eq!(
        a["argv"],
        json!([
            "tmux",
            "-S",
            socket,
            "attach-session",
            "-t",
            format!("{run}:api")
        ]),
        "{a}"
    );
    let e = env
        .try_rpc("node.attach", json!({"run": run, "node": "nope"}))
        .unwrap_err();
    assert_eq!(e["data"]["kind"], "not_found", "{e}");

    let home = env.home.display().to_string();
    let pane = Pane::start(
        &env,
        100,
        30,
        &[],
        &bin("orchestratectl"),
        &["--home", &home, "run", "attach", &run],
    );
    pane.wait_for("hello-from-the-agent");
    let clients = || {
        let out = std::process::Command::new("tmux")
            .args(["-S", &socket, "list-clients", "-F", "#{session_name}"])
            .output()
            .unwrap();
        // The daemon's own control client sits on a hidden session of its own.
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|s| *s == run)
            .count()
    };
    wait_until(
        "a client on the agent's session",
        std::time::Duration::from_secs(10),
        || (clients() == 1).then_some(()),
    );
    // Detach (C-b d): the agent goes on.
    pane.keys(&["C-b", "d"]);
    wait_until(
        "run attach to end",
        std::time::Duration::from_secs(10),
        || (!pane.alive()).then_some(()),
    );
    assert_eq!(env.wait_node(&run, "api", "running")["state"], "running");

    // The TUI's `t` runs the same command, and comes back on detach.
    let tui = Pane::start(
        &env,
        120,
        40,
        &[],
        &bin("orchestratectl"),
        &["--home", &home, "tui"],
    );
    tui.wait_for(&run[..8]);
    tui.keys(&["t"]);
    tui.wait_for("hello-from-the-agent");
    wait_until(
        "the TUI's client on the agent's session",
        std::time::Duration::from_secs(10),
        || (clients() == 1).then_some(()),
    );
    tui.keys(&["C-b", "d"]);
    tui.wait_for(&run[..8]);
    assert!(tui.alive(), "the TUI is back after the detach");

    // A plan node that has not started has nothing to attach to: invalid_transition.
    let plan = "[[nodes]]\nid = \"first\"\ntask = \"sleep 600\"\n\
                [[nodes]]\nid = \"later\"\ntask = \"true\"\ndeps = [\"first\"]\n";
    let run = run_id(&env.rpc(
        "orchestrate.start",
        json!({"plan": plan, "format": "toml", "repo": repo.path.display().to_string(),
               "agent": "shell"}),
    ));
    env.wait_node(&run, "first", "running");
    let e = env
        .try_rpc("node.attach", json!({"run": run, "node": "later"}))
        .unwrap_err();
    assert_eq!(e["data"]["kind"], "invalid_transition", "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("has not started"),
        "{e}"
    );
}

/// `doctor` asks each runner: the SSH hosts of the test cluster answer, Slurm's `sinfo` knows
/// the partition; a host cut off and an unknown partition are warnings naming them.
#[test]
#[ignore = "needs root and ip netns: starts a Slurm cluster (tests/cluster/up.sh)"]
fn doctor_checks_each_runner_for_real() {
    let c = Cluster::shared();
    let mut env = TestEnv::new();
    for (k, v) in c.env() {
        env.set_env(k, v);
    }
    // The daemon's plain `ssh HOST` uses the cluster's ssh config (host names, key).
    env.set_env("PATH", &c.path());
    write_config(
        &env,
        &format!(
            "[runners.hosts]\nkind = \"ssh\"\nhosts = [{}]\n\
             [runners.hpc]\nkind = \"slurm\"\npartition = \"{}\"\n\
             [runners.wrong]\nkind = \"slurm\"\npartition = \"nosuch\"\n",
            c.ssh_hosts
                .iter()
                .map(|h| format!("\"{h}\""))
                .collect::<Vec<_>>()
                .join(", "),
            c.partition
        ),
    );
    let _d = env.start_daemon();
    let doctor = || -> Value {
        let r = env.rpc("doctor.runners", json!({}));
        r["runners"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| (x["name"].as_str().unwrap().to_string(), x.clone()))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    let r = doctor();
    assert_eq!(r["local"]["ok"], true, "{r}");
    assert_eq!(r["hosts"]["ok"], true, "{r}");
    assert!(
        r["hosts"]["message"]
            .as_str()
            .unwrap()
            .contains("2 hosts answered"),
        "{r}"
    );
    assert_eq!(r["hpc"]["ok"], true, "{r}");
    assert!(
        r["hpc"]["message"]
            .as_str()
            .unwrap()
            .contains("partition agents up"),
        "{r}"
    );
    assert_eq!(r["wrong"]["ok"], false, "{r}");
    assert!(
        r["wrong"]["message"]
            .as_str()
            .unwrap()
            .contains("no partition \"nosuch\""),
        "{r}"
    );

    c.fault("cut", "s2");
    let r = doctor();
    c.fault("join", "s2");
    assert_eq!(r["hosts"]["ok"], false, "{r}");
    assert!(
        r["hosts"]["message"].as_str().unwrap().contains("s2:"),
        "{r}"
    );

    let cli = env.cli(["--json", "doctor"]);
    let checks = cli.json()["checks"].clone();
    let runners = checks
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "runners")
        .unwrap()
        .clone();
    assert_eq!(runners["status"], "warn", "{runners}");
    assert!(
        runners["hint"]
            .as_str()
            .unwrap()
            .contains("[runners.wrong]"),
        "{runners}"
    );
}

/// A spinoff on the Slurm runner: the job runs the shell agent on a compute node in a clone of
/// its own (not the daemon's worktree, though the node sees it), pushes the work back, and the
/// daemon fetches it and merges it into base.
#[test]
#[ignore = "needs root and ip netns: starts a Slurm cluster (tests/cluster/up.sh)"]
fn a_spinoff_on_slurm_comes_back_and_merges() {
    let c = Cluster::shared();
    let mut env = TestEnv::new();
    for (k, v) in c.env() {
        env.set_env(k, v);
    }
    env.set_env("OCTL_SLURM_CHECKPOINT_S", "2");
    write_config(
        &env,
        &format!(
            "[runners.hpc]\nkind = \"slurm\"\npartition = \"{}\"\n",
            c.partition
        ),
    );
    let _d = env.start_daemon();
    let repo = TestRepo::new(&env, "repo");
    let run = run_id(
        &env.spawn(
            "spinoff",
            &repo,
            "hostname > where.txt; pwd > pwd.txt; git add where.txt; git commit -qm 'where it ran'",
            json!({"agent": "shell", "node": "far", "runner": "hpc"}),
        )
        .unwrap(),
    );
    assert_eq!(runners_added(&env, &run), [json!("hpc")]);
    let show = env.wait_status(&run, &["completed", "failed"]);
    let node = &show["nodes"][0];
    let log = std::fs::read_to_string(env.run_dir(&run).join("logs/far.log")).unwrap_or_default();
    let job = node["pane"]
        .as_str()
        .unwrap_or("")
        .split(':')
        .nth(1)
        .unwrap_or("0")
        .to_string();
    let log = format!(
        "{log}\n{}",
        c.slurm("scontrol", &["-o", "show", "job", &job])
    );
    assert_eq!(
        show["manifest"]["status"], "completed",
        "{show}\nthe job's output:\n{log}"
    );
    assert!(
        node["pane"].as_str().unwrap().starts_with("slurm:"),
        "{node}"
    );

    // Both files reached base: the commit the agent made and what it left uncommitted.
    let host = repo.show("main", "where.txt").expect("where.txt merged");
    assert!(
        c.nodes.contains(&host.trim().to_string()),
        "ran on {host:?}"
    );
    let pwd = repo.show("main", "pwd.txt").expect("pwd.txt merged");
    let worktree = node["worktree"].as_str().unwrap();
    assert_ne!(
        pwd.trim(),
        worktree,
        "the job worked in the daemon's worktree"
    );
    assert!(
        !pwd.trim().starts_with(&env.home.display().to_string()),
        "{pwd}"
    );
    assert!(
        !std::path::Path::new(pwd.trim()).exists(),
        "the job's clone is removed once its work is pushed"
    );
    assert!(repo
        .git(&["log", "--format=%s", "main"])
        .contains("where it ran"));

    // `run gc`: the run's exchange refs whose commits the repository has go (the base); the
    // checkpoint of what the agent left uncommitted is only in the exchange, and stays.
    let gc = env.rpc("run.gc", json!({}));
    let named = |list: &str, r: &str| {
        gc[list]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["kind"] == "exchange_ref" && i["ref"].as_str() == Some(r))
    };
    assert!(
        named("removed", &format!("refs/octl/base/{run}/far/0")),
        "{gc}"
    );
    let wip = format!("refs/octl/remote/{run}/far/0/0/wip");
    assert!(named("kept", &wip), "{gc}");
    let left = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "for g in {}/*.git; do git --git-dir=$g for-each-ref --format='%(refname)' refs/octl/; done",
            env.home.join("exchange").display()
        ))
        .output()
        .unwrap();
    let left = String::from_utf8_lossy(&left.stdout).into_owned();
    assert!(left.contains(&wip), "{left}");
    assert!(!left.contains(&format!("refs/octl/base/{run}/")), "{left}");
}

/// The node running a Slurm agent dies (`kill -9` of everything on it): Slurm requeues the
/// job, the next copy resumes from the last checkpoint the dead one pushed (its uncommitted
/// work included), and what both copies did merges: nothing the first copy checkpointed is lost.
#[test]
#[ignore = "needs root and ip netns: starts a Slurm cluster (tests/cluster/up.sh)"]
fn a_slurm_agent_whose_node_dies_resumes_from_its_checkpoint_and_merges() {
    let c = Cluster::shared();
    let mut env = TestEnv::new();
    for (k, v) in c.env() {
        env.set_env(k, v);
    }
    env.set_env("OCTL_SLURM_CHECKPOINT_S", "1");
    write_config(
        &env,
        &format!(
            "[runners.hpc]\nkind = \"slurm\"\npartition = \"{}\"\n",
            c.partition
        ),
    );
    // Where the test sees that the first copy runs (the nodes share this filesystem).
    let mark = env.root.path().join("first-copy-ran");
    env.set_env("OCTL_MARK", &mark.display().to_string());
    let _d = env.start_daemon();
    let repo = TestRepo::new(&env, "repo");
    // First copy: leaves first.txt uncommitted and waits to be killed. A later copy finds
    // first.txt (restored from the checkpoint) and finishes.
    let task = "if [ -f first.txt ]; then hostname > second.txt; else hostname > first.txt; \
                touch \"$OCTL_MARK\"; sleep 600; fi";
    let run = run_id(
        &env.spawn(
            "spinoff",
            &repo,
            task,
            json!({"agent": "shell", "node": "durable", "runner": "hpc"}),
        )
        .unwrap(),
    );
    octl_tests::wait_until(
        "the first copy to run",
        std::time::Duration::from_secs(60),
        || mark.exists().then_some(()),
    );
    let exchange = env.home.join("exchange");
    let first_host = octl_tests::wait_until(
        "the first copy's checkpoint with first.txt",
        std::time::Duration::from_secs(60),
        || {
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg(format!(
                    "for g in {}/*.git; do git --git-dir=$g show 'refs/octl/remote/{run}/durable/0/0/wip:first.txt' 2>/dev/null; done",
                    exchange.display()
                ))
                .output()
                .unwrap();
            let host = String::from_utf8_lossy(&out.stdout).trim().to_string();
            (!host.is_empty()).then_some(host)
        },
    );
    c.fault("kill", &first_host);
    let show = octl_tests::wait_until(
        "the requeued copy to finish and merge",
        std::time::Duration::from_secs(180),
        || {
            let show = env.rpc("run.show", json!({"run": run}));
            matches!(
                show["manifest"]["status"].as_str(),
                Some("completed" | "failed")
            )
            .then_some(show)
        },
    );
    c.fault("start", &first_host);
    let log =
        std::fs::read_to_string(env.run_dir(&run).join("logs/durable.log")).unwrap_or_default();
    assert_eq!(show["manifest"]["status"], "completed", "{show}\n{log}");
    let first = repo
        .show("main", "first.txt")
        .expect("the first copy's work merged");
    let second = repo
        .show("main", "second.txt")
        .expect("the second copy's work merged");
    assert_eq!(first.trim(), first_host);
    assert_ne!(second.trim(), first_host, "the job ran again elsewhere");
    assert!(log.contains("copy 1"), "{log}");

    // The requeue is in the log, once, naming the lost node; it did not move the node (no
    // retry, one start), and `run show` says it.
    let events = env.log_events(&run);
    let requeued: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "node.requeued")
        .collect();
    assert_eq!(requeued.len(), 1, "{requeued:?}");
    let r = &requeued[0]["data"];
    assert_eq!(r["copy"], 1, "{r}");
    assert_eq!(r["from"], json!(first_host), "{r}");
    assert!(r["reason"].as_str().unwrap().contains(&first_host), "{r}");
    let count = |t: &str| events.iter().filter(|e| e["type"] == t).count();
    assert_eq!((count("node.started"), count("node.retried")), (1, 0));
    assert_eq!(show["nodes"][0]["requeued"]["copy"], 1, "{show}");
    let text = env.cli(["run", "show", &run]);
    let out = &text.ok().stdout;
    assert!(out.contains("durable requeued at"), "{out}");
    assert!(
        out.contains(&format!("the copy on {first_host} was lost")),
        "{out}"
    );
    // The dead copy's clone (in the scratch directory the nodes share here) went with the
    // copy that resumed from its checkpoint (issue 23, 6).
    let job = show["nodes"][0]["pane"]
        .as_str()
        .unwrap()
        .split(':')
        .nth(1)
        .unwrap()
        .to_string();
    let dead = std::env::temp_dir().join(format!("octl-job-{job}-0"));
    assert!(!dead.exists(), "{} is still there", dead.display());
}

/// `run cancel` of a run on Slurm cancels its job; the agent's trap pushes a last checkpoint
/// first, so what it had written is kept in the exchange repository.
#[test]
#[ignore = "needs root and ip netns: starts a Slurm cluster (tests/cluster/up.sh)"]
fn cancelling_a_slurm_run_cancels_its_job_after_a_last_checkpoint() {
    let c = Cluster::shared();
    let mut env = TestEnv::new();
    for (k, v) in c.env() {
        env.set_env(k, v);
    }
    // No periodic checkpoint before the cancel: the one found must be the trap's.
    env.set_env("OCTL_SLURM_CHECKPOINT_S", "3600");
    let mark = env.root.path().join("written");
    env.set_env("OCTL_MARK", &mark.display().to_string());
    write_config(
        &env,
        &format!(
            "[runners.hpc]\nkind = \"slurm\"\npartition = \"{}\"\n",
            c.partition
        ),
    );
    let _d = env.start_daemon();
    let repo = TestRepo::new(&env, "repo");
    let run = run_id(
        &env.spawn(
            "spinoff",
            &repo,
            "echo draft > draft.txt; touch \"$OCTL_MARK\"; sleep 600",
            json!({"agent": "shell", "node": "long", "runner": "hpc"}),
        )
        .unwrap(),
    );
    octl_tests::wait_until(
        "the agent to write its draft",
        std::time::Duration::from_secs(60),
        || mark.exists().then_some(()),
    );
    let job = env.rpc("run.show", json!({"run": run}))["nodes"][0]["pane"]
        .as_str()
        .unwrap()
        .split(':')
        .nth(1)
        .unwrap()
        .to_string();
    env.cli(["run", "cancel", &run]).ok();
    octl_tests::wait_until(
        "the job to be cancelled",
        std::time::Duration::from_secs(60),
        || {
            let state = c.slurm("squeue", &["-h", "-t", "all", "-j", &job, "-o", "%T"]);
            (state.trim() == "CANCELLED").then_some(())
        },
    );
    let draft = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "for g in {}/*.git; do git --git-dir=$g show 'refs/octl/remote/{run}/long/0/0/wip:draft.txt' 2>/dev/null; done",
            env.home.join("exchange").display()
        ))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&draft.stdout).trim(), "draft");
    assert_eq!(
        env.rpc("run.show", json!({"run": run}))["manifest"]["status"],
        "cancelled"
    );
}

/// `run attach` of a node on Slurm: `node.attach` gives `srun --overlap --pty` into the job,
/// onto the agent's tmux inside it; in a real terminal it shows what the agent printed, and a
/// line typed there reaches the agent, whose work then comes back and merges.
#[test]
#[ignore = "needs root and ip netns: starts a Slurm cluster (tests/cluster/up.sh)"]
fn attaching_to_a_slurm_agent_reaches_it_inside_its_job() {
    let c = Cluster::shared();
    let mut env = TestEnv::new();
    for (k, v) in c.env() {
        env.set_env(k, v);
    }
    env.set_env("OCTL_SLURM_CHECKPOINT_S", "2");
    write_config(
        &env,
        &format!(
            "[runners.hpc]\nkind = \"slurm\"\npartition = \"{}\"\n",
            c.partition
        ),
    );
    let _d = env.start_daemon();
    let repo = TestRepo::new(&env, "repo");
    let task = "echo hello-from-slurm-on-$(hostname); read line; echo \"$line\" > typed.txt";
    let run = run_id(
        &env.spawn(
            "spinoff",
            &repo,
            task,
            json!({"agent": "shell", "node": "far", "runner": "hpc"}),
        )
        .unwrap(),
    );
    // Until its job runs, the node has nothing to attach to (invalid_transition).
    let argv = wait_until("the job to run", std::time::Duration::from_secs(60), || {
        env.try_rpc("node.attach", json!({"run": run, "node": "far"}))
            .ok()
            .map(|a| a["argv"].clone())
    });
    let job = env.rpc("run.show", json!({"run": run}))["nodes"][0]["pane"]
        .as_str()
        .unwrap()
        .split(':')
        .nth(1)
        .unwrap()
        .to_string();
    assert_eq!(argv[0], "srun", "{argv}");
    assert!(
        argv.as_array()
            .unwrap()
            .contains(&json!(format!("--jobid={job}"))),
        "{argv}"
    );
    assert!(
        argv.as_array().unwrap().contains(&json!("--overlap")),
        "{argv}"
    );

    let home = env.home.display().to_string();
    let pane = Pane::start(
        &env,
        100,
        30,
        &[],
        &bin("orchestratectl"),
        &["--home", &home, "run", "attach", &run],
    );
    let screen = pane.wait_for("hello-from-slurm-on-");
    assert!(
        c.nodes.iter().any(|n| screen.contains(&format!("on-{n}"))),
        "the agent ran on a compute node:\n{screen}"
    );
    pane.type_text("typed-through-srun");
    pane.keys(&["Enter"]);
    let show = env.wait_status(&run, &["completed", "failed"]);
    assert_eq!(show["manifest"]["status"], "completed", "{show}");
    assert_eq!(
        repo.show("main", "typed.txt").as_deref().map(str::trim),
        Some("typed-through-srun")
    );
    // The agent's output reached the node's log through the job's tmux.
    let log = std::fs::read_to_string(env.run_dir(&run).join("logs/far.log")).unwrap();
    assert!(log.contains("hello-from-slurm-on-"), "{log}");
}

/// The exchange repository takes pushes only to the attempts the daemon runs: once an attempt
/// is closed (here by hand, as the daemon closes one it no longer runs), the agent's final
/// push is refused by the hook, and the node fails with git's message as its reason. Nothing
/// is lost: what the agent checkpointed before is in the node's worktree and the exchange.
#[test]
#[ignore = "needs root and ip netns: starts a Slurm cluster (tests/cluster/up.sh)"]
fn a_push_the_exchange_refuses_fails_the_node_with_the_reason() {
    let c = Cluster::shared();
    let mut env = TestEnv::new();
    for (k, v) in c.env() {
        env.set_env(k, v);
    }
    env.set_env("OCTL_SLURM_CHECKPOINT_S", "1");
    let mark = env.root.path().join("early-written");
    let go = env.root.path().join("go");
    env.set_env("OCTL_MARK", &mark.display().to_string());
    env.set_env("OCTL_GO", &go.display().to_string());
    write_config(
        &env,
        &format!(
            "[runners.hpc]\nkind = \"slurm\"\npartition = \"{}\"\n",
            c.partition
        ),
    );
    let _d = env.start_daemon();
    let repo = TestRepo::new(&env, "repo");
    let task = "echo early > early.txt; touch \"$OCTL_MARK\"; \
                while [ ! -e \"$OCTL_GO\" ]; do sleep 0.2; done; \
                echo late > late.txt; git add -A; git commit -qm late";
    let run = run_id(
        &env.spawn(
            "spinoff",
            &repo,
            task,
            json!({"agent": "shell", "node": "fenced", "runner": "hpc"}),
        )
        .unwrap(),
    );
    let exchange = env.home.join("exchange");
    let checkpointed = || {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "for g in {}/*.git; do git --git-dir=$g show 'refs/octl/remote/{run}/fenced/0/0/wip:early.txt' 2>/dev/null; done",
                exchange.display()
            ))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    wait_until(
        "the checkpoint with early.txt",
        std::time::Duration::from_secs(60),
        || (checkpointed() == "early").then_some(()),
    );
    // Close the attempt, as the daemon does for one it no longer runs.
    let open_line = format!("refs/octl/remote/{run}/fenced/0/");
    let mut closed = 0;
    for repo in std::fs::read_dir(&exchange).unwrap().flatten() {
        let path = repo.path().join("octl-open");
        if let Ok(text) = std::fs::read_to_string(&path) {
            let kept: String = text
                .lines()
                .filter(|l| *l != open_line)
                .map(|l| format!("{l}\n"))
                .collect();
            closed += usize::from(kept.len() != text.len());
            std::fs::write(&path, kept).unwrap();
        }
    }
    assert_eq!(closed, 1, "the attempt was open in one exchange repository");
    std::fs::write(&go, "").unwrap();

    let show = env.wait_status(&run, &["completed", "failed"]);
    let node = &show["nodes"][0];
    assert_eq!(node["state"], "failed", "{show}");
    let failed = env
        .log_events(&run)
        .into_iter()
        .find(|e| e["type"] == "node.failed")
        .expect("node.failed in the log");
    let reason = failed["data"]["reason"].as_str().unwrap().to_string();
    assert!(
        reason.contains("the exchange refused the push to refs/octl/remote/")
            && reason.contains("is closed"),
        "{reason}"
    );
    assert_eq!(failed["data"]["exit_status"], 92, "{failed}");
    // Nothing lost: the checkpoint stays in the exchange, and its work is in the worktree.
    assert_eq!(checkpointed(), "early");
    let worktree = std::path::Path::new(node["worktree"].as_str().unwrap());
    assert_eq!(
        std::fs::read_to_string(worktree.join("early.txt"))
            .unwrap()
            .trim(),
        "early"
    );
    assert!(repo.show("main", "early.txt").is_none(), "nothing merged");
}

/// A fan-out of 24 on Slurm with `max_parallel = "cluster"`: the cap is read from the
/// partition (3 nodes × 8 idle CPUs over the 2 CPUs each job asks = 12) and recorded; at no
/// point of the log are more than 12 units alive; the units ran on all 3 nodes, and all 24
/// merge.
#[test]
#[ignore = "needs root and ip netns: starts a Slurm cluster (tests/cluster/up.sh)"]
fn a_fan_out_of_24_on_slurm_spreads_over_the_nodes_under_the_clusters_cap() {
    let c = Cluster::shared();
    let mut env = TestEnv::new();
    for (k, v) in c.env() {
        env.set_env(k, v);
    }
    env.set_env("OCTL_SLURM_CHECKPOINT_S", "5");
    write_config(
        &env,
        &format!(
            "[runners.hpc]\nkind = \"slurm\"\npartition = \"{}\"\nsbatch_args = [\"--cpus-per-task=2\"]\n",
            c.partition
        ),
    );
    let _d = env.start_daemon();
    let repo = TestRepo::new(&env, "repo");
    let units: String = (1..=24)
        .map(|i| format!("[[units]]\nid = \"u{i}\"\nvars = {{ i = \"{i}\" }}\n"))
        .collect();
    let manifest = format!(
        "prompt = \"sleep 2; hostname > unit{{i}}.txt\"\nagent = \"shell\"\nrunner = \"hpc\"\n{units}"
    );
    let started = env.rpc(
        "fanout.start",
        json!({"manifest": manifest, "format": "toml",
               "repo": repo.path.display().to_string(), "max_parallel": "cluster"}),
    );
    let run = run_id(&started);
    let created = &env.log_events(&run)[0]["data"];
    assert_eq!(created["max_parallel"], 12, "{created}");
    let how = &created["max_parallel_cluster"];
    assert_eq!(
        (how["idle_cpus"].clone(), how["cpus_per_job"].clone()),
        (json!(24), json!(2)),
        "{how}"
    );
    assert_eq!(how["runner"], "hpc", "{how}");

    // A node that failed leaves the run waiting for a decision: that ends the wait too.
    let show = octl_tests::wait::wait_until_describing(
        "the fan-out to end",
        std::time::Duration::from_secs(240),
        || {
            let show = env.rpc("run.show", json!({"run": run}));
            matches!(
                show["manifest"]["status"].as_str(),
                Some("completed" | "failed" | "waiting")
            )
            .then_some(show)
        },
        || env.rpc("run.show", json!({"run": run})).to_string(),
    );
    assert_eq!(show["manifest"]["status"], "completed", "{show}");
    // Alive from node.starting to its end, in log order: never more than the cap.
    let (mut alive, mut most) = (0i32, 0i32);
    for e in env.log_events(&run) {
        match e["type"].as_str().unwrap() {
            "node.starting" => alive += 1,
            "node.done" | "node.failed" | "node.exited" => alive -= 1,
            _ => {}
        }
        most = most.max(alive);
    }
    assert!(most <= 12, "{most} alive at once, over the cap of 12");
    assert!(most > 1, "the units ran in parallel ({most} at most)");
    let mut hosts = std::collections::BTreeSet::new();
    for i in 1..=24 {
        let host = repo
            .show("main", &format!("unit{i}.txt"))
            .unwrap_or_else(|| {
                let events: Vec<String> = env
                    .log_events(&run)
                    .iter()
                    .filter(|e| e["node"] == json!(format!("u{i}")))
                    .map(|e| e.to_string())
                    .collect();
                panic!("unit{i}.txt merged: {events:#?}")
            });
        hosts.insert(host.trim().to_string());
    }
    let nodes: std::collections::BTreeSet<String> = c.nodes.iter().cloned().collect();
    assert_eq!(hosts, nodes, "the units ran on every compute node");
}

/// A Slurm job of this daemon that no run owns (here submitted by hand with the daemon's tag,
/// for a run it never had) is an orphan: `doctor.orphans` and `run gc --dry-run` report it
/// (kind `job`) and leave it running; `run gc` cancels it — and only it: the job of a live
/// node is neither reported nor touched. With two Slurm runners on one cluster each job is
/// one orphan, named by its id; a second job of a live node's attempt is one too.
#[test]
#[ignore = "needs root and ip netns: starts a Slurm cluster (tests/cluster/up.sh)"]
fn a_slurm_job_no_run_owns_is_an_orphan_that_gc_cancels() {
    let c = Cluster::shared();
    let mut env = TestEnv::new();
    for (k, v) in c.env() {
        env.set_env(k, v);
    }
    // Two runners on one cluster (issue 23, 4): each job is still one orphan.
    write_config(
        &env,
        &format!(
            "[runners.hpc]\nkind = \"slurm\"\npartition = \"{p}\"\n\
             [runners.hpc2]\nkind = \"slurm\"\npartition = \"{p}\"\n",
            p = c.partition
        ),
    );
    let _d = env.start_daemon();
    let repo = TestRepo::new(&env, "repo");
    let run = run_id(
        &env.spawn(
            "spinoff",
            &repo,
            "sleep 600",
            json!({"agent": "shell", "node": "live", "runner": "hpc"}),
        )
        .unwrap(),
    );
    let job_of = |run: &str| {
        env.rpc("run.show", json!({"run": run}))["nodes"][0]["pane"]
            .as_str()
            .unwrap_or("")
            .split(':')
            .nth(1)
            .map(str::to_string)
    };
    let live = wait_until("the live job", std::time::Duration::from_secs(60), || {
        job_of(&run)
    });
    let tag = c.slurm("squeue", &["-h", "-j", &live, "-o", "%k"]);
    let stray_name = "octl.01JDXJ0000000000000000000Z.stray.0";
    let submit = |name: &str| {
        c.slurm(
            "sbatch",
            &[
                "--parsable",
                &format!("--job-name={name}"),
                &format!("--comment={}", tag.trim()),
                "--output=/dev/null",
                "--wrap",
                "sleep 600",
            ],
        )
        .trim()
        .to_string()
    };
    let stray = submit(stray_name);
    // A second job of the live node's attempt (what a crash used to leave): not its copy.
    let twin = submit(&format!("octl.{run}.live.0"));
    let state = |job: &str| {
        c.slurm("squeue", &["-h", "-t", "all", "-j", job, "-o", "%T"])
            .trim()
            .to_string()
    };
    wait_until(
        "the stray jobs to run",
        std::time::Duration::from_secs(60),
        || (state(&stray) == "RUNNING" && state(&twin) == "RUNNING").then_some(()),
    );

    let orphans = env.rpc("doctor.orphans", json!({}))["orphans"].clone();
    let mut jobs: Vec<&Value> = orphans
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["kind"] == "job")
        .collect();
    jobs.sort_by_key(|o| o["pane"].as_str().unwrap_or("").to_string());
    assert_eq!(
        jobs.len(),
        2,
        "one entry per job, however many runners: {orphans}"
    );
    let by_pane = |job: &str| {
        jobs.iter()
            .find(|o| o["pane"] == json!(format!("slurm:{job}:0")))
            .unwrap_or_else(|| panic!("job {job} is not an orphan: {orphans}"))
    };
    assert_eq!(
        by_pane(&stray)["target"],
        json!(format!("job {stray}")),
        "{orphans}"
    );
    assert!(by_pane(&stray)["runner"]
        .as_str()
        .unwrap()
        .starts_with("hpc"));
    assert!(
        by_pane(&twin)["why"]
            .as_str()
            .unwrap()
            .contains("runs another copy"),
        "{orphans}"
    );
    let dry = env.rpc("run.gc", json!({"dry_run": true}));
    assert!(
        dry.to_string().contains("01JDXJ0000000000000000000Z"),
        "{dry}"
    );
    assert_eq!(state(&stray), "RUNNING", "a dry run changes nothing");

    let gc = env.rpc("run.gc", json!({}));
    let cancelled = gc["removed"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["kind"] == "job")
        .count();
    assert_eq!(cancelled, 2, "each job cancelled once: {gc}");
    wait_until(
        "the stray jobs to be cancelled",
        std::time::Duration::from_secs(30),
        || (state(&stray) == "CANCELLED" && state(&twin) == "CANCELLED").then_some(()),
    );
    assert_eq!(state(&live), "RUNNING", "the live node's job is untouched");
    env.cli(["run", "cancel", &run]).ok();
}
