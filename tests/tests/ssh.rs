//! The SSH runner against real hosts: `sshd` in network namespaces of the test cluster
//! (tests/cluster/up.sh, hosts `s1`, `s2`). Agents run in a private tmux server on each host,
//! in clones of their own; the daemon pushes the base and fetches the work back itself.
//!
//! Every test is `#[ignore]`d (root, network namespaces) and run with `-- --ignored`, one
//! process at a time on the cluster (`flock /tmp/octl-cluster.lock`).

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use octl_tests::cluster::{Cluster, Turn};
use octl_tests::{wait_until, TestEnv, TestRepo};

fn run_id(v: &Value) -> String {
    v["id"].as_str().unwrap().to_string()
}

/// A test home whose daemon reaches the cluster's hosts, with an `ssh` runner named `hosts`
/// on all of them (`slots` each) and checkpoints every second.
fn ssh_env(c: &Turn, slots: u32) -> TestEnv {
    let mut env = TestEnv::new();
    env.set_env("PATH", &c.path());
    env.set_env("OCTL_SSH_CHECKPOINT_S", "1");
    let hosts: Vec<String> = c.ssh_hosts.iter().map(|h| format!("\"{h}\"")).collect();
    std::fs::create_dir_all(&env.home).unwrap();
    std::fs::write(
        env.home.join("config.toml"),
        format!(
            "[runners.hosts]\nkind = \"ssh\"\nhosts = [{}]\nslots = {slots}\n",
            hosts.join(", ")
        ),
    )
    .unwrap();
    env
}

/// The node's log, then the daemon's (for failure messages).
fn node_log(env: &TestEnv, run: &str, node: &str) -> String {
    let node = std::fs::read_to_string(env.run_dir(run).join(format!("logs/{node}.log")))
        .unwrap_or_default();
    let daemon = std::fs::read_to_string(env.home.join("octld.log")).unwrap_or_default();
    format!("{node}\n--- octld.log ---\n{daemon}")
}

/// The host a handle `ssh:<attempt>:<copy>:<pane>:<host>` names.
fn host_of(pane: &Value) -> String {
    pane.as_str()
        .unwrap_or_default()
        .splitn(5, ':')
        .nth(4)
        .unwrap_or_default()
        .to_string()
}

/// A spinoff on the SSH runner: the shell agent runs on one of the hosts in a clone of its
/// own (not the daemon's worktree, though the host sees it), its commit and what it left
/// uncommitted come back and merge into base.
#[test]
#[ignore = "needs root and ip netns: starts SSH hosts (tests/cluster/up.sh)"]
fn a_spinoff_on_an_ssh_host_comes_back_and_merges() {
    let c = Cluster::shared();
    let env = ssh_env(&c, 2);
    let _d = env.start_daemon();
    let repo = TestRepo::new(&env, "repo");
    let t0 = Instant::now();
    let run = run_id(
        &env.spawn(
            "spinoff",
            &repo,
            "hostname > where.txt; pwd > pwd.txt; git add where.txt; git commit -qm 'where it ran'",
            json!({"agent": "shell", "node": "far", "runner": "hosts"}),
        )
        .unwrap(),
    );
    let show = env.wait_status(&run, &["completed", "failed"]);
    let took = t0.elapsed();
    let node = &show["nodes"][0];
    let log = node_log(&env, &run, "far");
    assert_eq!(show["manifest"]["status"], "completed", "{show}\n{log}");
    let host = host_of(&node["pane"]);
    assert!(c.ssh_hosts.contains(&host), "{node}");
    let ran_on = repo.show("main", "where.txt").expect("where.txt merged");
    assert_eq!(ran_on.trim(), host);
    let pwd = repo.show("main", "pwd.txt").expect("pwd.txt merged");
    assert_ne!(
        pwd.trim(),
        node["worktree"].as_str().unwrap(),
        "worked in the daemon's worktree"
    );
    assert!(
        !pwd.trim().starts_with(&env.home.display().to_string()),
        "{pwd}"
    );
    assert!(repo
        .git(&["log", "--format=%s", "main"])
        .contains("where it ran"));
    assert!(log.contains(&format!("on ssh host {host}")), "{log}");
    eprintln!(
        "spinoff on ssh: {:.2} s from spawn to completed",
        took.as_secs_f64()
    );
}
