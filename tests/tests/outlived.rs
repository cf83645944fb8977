//! Agents' processes are never orphaned: after `kill -9` of the daemon and of the tmux server,
//! the restarted daemon ends every agent process that outlived its window — one that ignores
//! SIGHUP, one in a session of its own — before it answers anyone; with only the daemon
//! killed, it adopts its agents as they are. What an agent leaves running when it ends goes
//! with it. Processes are counted as the daemon finds them (their cgroups where the machine
//! has writable ones, their environment marker) and, independently, by pid. Run both ways:
//! with cgroups (as this machine offers them) and with `limits.cgroups = false` (the marker
//! alone, as on a machine without a writable cgroup tree).

use std::path::{Path, PathBuf};
use std::time::Duration;

use octl_tests::{wait_until, wait_until_describing, TestEnv, TestRepo};
use serde_json::{json, Value};

fn world(config: &str) -> (TestEnv, octl_tests::Daemon, TestRepo) {
    let env = TestEnv::new();
    env.write_config(config);
    let d = env.start_daemon();
    let repo = TestRepo::new(&env, "repo");
    (env, d, repo)
}

/// Whether `pid` runs (a zombie does not).
fn runs(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit_once(')')
            .and_then(|(_, r)| r.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X")
    })
}

/// Whether `pid` runs and still carries this home's agents' marker (not a pid reused since).
fn still_an_agent(env: &TestEnv, pid: u32) -> bool {
    runs(pid)
        && env
            .agent_processes()
            .iter()
            .any(|(_, _, pids)| pids.contains(&pid))
}

fn fanout(env: &TestEnv, repo: &TestRepo, units: &[(&str, String)]) -> String {
    let mut manifest = String::from("prompt = '{task}'\n");
    for (id, task) in units {
        manifest.push_str(&format!(
            "[[units]]\nid = \"{id}\"\nvars = {{ task = '{task}' }}\n"
        ));
    }
    env.rpc(
        "fanout.start",
        json!({"manifest": manifest, "format": "toml", "repo": repo.path.display().to_string(), "agent": "shell", "max_parallel": units.len()}),
    )["id"]
        .as_str()
        .unwrap()
        .to_string()
}

fn marks(env: &TestEnv) -> PathBuf {
    let dir = env.root.path().join("marks");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn wait_mark(dir: &Path, name: &str) {
    wait_until(&format!("{name} to start"), Duration::from_secs(30), || {
        dir.join(name).exists().then_some(())
    });
}

/// The tmux server's pid, from the server itself.
fn tmux_pid(env: &TestEnv) -> u32 {
    let out = env.tmux(&["display-message", "-p", "#{pid}"]);
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

fn node_states(env: &TestEnv, run: &str) -> Vec<(String, String)> {
    env.rpc("run.show", json!({"run": run}))["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["id"].as_str().unwrap().to_string(),
                n["state"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn process_orphans(env: &TestEnv) -> Vec<Value> {
    env.rpc("doctor.orphans", json!({}))["orphans"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["kind"] == json!("process"))
        .cloned()
        .collect()
}

/// Three agents: one plain (SIGHUP ends it), one that ignores SIGHUP, one whose `sleep` is in
/// a session of its own (no terminal to hang up). Both the daemon and the tmux server are
/// killed; the survivors are ended by the restarted daemon before it answers.
fn survivors_of_a_killed_daemon_and_tmux_server_are_ended_on_restart(config: &str) {
    let (env, d, repo) = world(config);
    let m = marks(&env);
    let mark = |name: &str| m.join(name).display().to_string();
    let run = fanout(
        &env,
        &repo,
        &[
            ("plain", format!("touch {}; sleep 600", mark("plain"))),
            (
                "deaf",
                format!("trap \"\" HUP; touch {}; sleep 600", mark("deaf")),
            ),
            (
                "detached",
                format!("setsid sleep 600 & touch {}; wait", mark("detached")),
            ),
        ],
    );
    for name in ["plain", "deaf", "detached"] {
        wait_mark(&m, name);
    }
    let before = env.agent_processes();
    let nodes: Vec<&str> = before.iter().map(|(_, n, _)| n.as_str()).collect();
    assert_eq!(nodes, ["deaf", "detached", "plain"], "{before:?}");
    let pids: Vec<u32> = before.iter().flat_map(|(_, _, p)| p.clone()).collect();
    assert!(
        pids.len() >= 6,
        "every agent is a few processes: {before:?}"
    );

    let server = tmux_pid(&env);
    d.kill9();
    // SAFETY: kill(2) of the test's own tmux server (its pid read from the server).
    assert_eq!(unsafe { libc::kill(server as i32, libc::SIGKILL) }, 0);
    wait_until(
        "the tmux server to be gone",
        Duration::from_secs(10),
        || (!runs(server)).then_some(()),
    );
    // Some of them outlive their window: what this test is about.
    let outlived = wait_until_describing(
        "the plain agent to end with its terminal",
        Duration::from_secs(10),
        || {
            let left = env.agent_processes();
            (!left.iter().any(|(_, n, _)| n == "plain")).then_some(left)
        },
        || format!("{:?}", env.agent_processes()),
    );
    let outliving: Vec<&str> = outlived.iter().map(|(_, n, _)| n.as_str()).collect();
    assert_eq!(outliving, ["deaf", "detached"], "{outlived:?}");

    // The restarted daemon answers only once it has recorded every exit and ended what
    // outlived its window.
    let _d = env.start_daemon();
    assert_eq!(env.agent_processes(), vec![], "left after the restart");
    for pid in &pids {
        assert!(!still_an_agent(&env, *pid), "pid {pid} still runs");
    }
    for (id, state) in node_states(&env, &run) {
        assert_eq!(state, "failed", "{id}");
    }
    assert_eq!(process_orphans(&env), Vec::<Value>::new());
}

#[test]
fn agents_that_outlive_a_killed_daemon_and_tmux_server_are_ended_on_restart() {
    survivors_of_a_killed_daemon_and_tmux_server_are_ended_on_restart("");
}

#[test]
fn without_cgroups_the_marker_finds_and_ends_them_all_the_same() {
    survivors_of_a_killed_daemon_and_tmux_server_are_ended_on_restart(
        "[limits]\ncgroups = false\n",
    );
}

/// A fifo an agent blocks on (reading it, no process of its own) until the test writes it.
fn gate(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    let made = std::process::Command::new("mkfifo")
        .arg(&path)
        .status()
        .unwrap();
    assert!(made.success());
    path
}

#[test]
fn a_daemon_killed_alone_adopts_its_agents_as_they_are() {
    let (env, d, repo) = world("");
    let m = marks(&env);
    let mark = |n: &str| m.join(n).display().to_string();
    let (one, two) = (gate(&m, "one.go"), gate(&m, "two.go"));
    let run = fanout(
        &env,
        &repo,
        &[
            (
                "one",
                format!(
                    "touch {}; read x < {}; printf 1 > one.txt",
                    mark("one"),
                    one.display()
                ),
            ),
            (
                "two",
                format!(
                    "trap \"\" HUP; touch {}; read x < {}; printf 2 > two.txt",
                    mark("two"),
                    two.display()
                ),
            ),
        ],
    );
    wait_mark(&m, "one");
    wait_mark(&m, "two");
    // Both started as the log says (an agent's first command can run before its
    // node.started is written; a start cut short is the heal's case, not this one).
    env.wait_node(&run, "one", "running");
    env.wait_node(&run, "two", "running");
    let before = env.agent_processes();
    assert_eq!(before.len(), 2, "{before:?}");
    d.kill9();
    let _d = env.start_daemon();
    // Adopted: the same processes run on, their nodes too.
    assert_eq!(env.agent_processes(), before);
    for (id, state) in node_states(&env, &run) {
        assert_eq!(state, "running", "{id}");
    }
    assert_eq!(process_orphans(&env), Vec::<Value>::new());
    std::fs::write(&one, "go\n").unwrap();
    std::fs::write(&two, "go\n").unwrap();
    let show = env.wait_status(&run, &["completed", "failed", "waiting"]);
    assert_eq!(show["manifest"]["status"], json!("completed"), "{show}");
    assert_eq!(env.agent_processes(), vec![]);
}

#[test]
fn what_an_agent_leaves_running_ends_with_it() {
    let (env, d, repo) = world("");
    let m = marks(&env);
    let pidfile = m.join("left.pid");
    // The agent starts a server of its own in another session and exits at once.
    let task = format!(
        "setsid sleep 600 < /dev/null > /dev/null 2>&1 & echo $! > {}; printf x > x.txt",
        pidfile.display()
    );
    let run = env
        .spawn(
            "spinoff",
            &repo,
            &task,
            json!({"agent": "shell", "node": "leaver"}),
        )
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let show = env.wait_status(&run, &["completed", "failed", "waiting"]);
    assert_eq!(show["manifest"]["status"], json!("completed"), "{show}");
    let left: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(!runs(left), "the agent's sleep (pid {left}) outlived it");
    assert_eq!(env.agent_processes(), vec![]);
    // A daemon that stops with no agent left leaves no empty cgroup directory behind.
    let bases: Vec<PathBuf> = std::fs::read_to_string(env.home.join("cgroups"))
        .unwrap()
        .lines()
        .map(PathBuf::from)
        .collect();
    assert!(d.signal_and_wait(libc::SIGTERM).success());
    for b in bases {
        assert!(!b.exists(), "{} is left", b.display());
    }
}
