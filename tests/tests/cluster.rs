//! The test cluster itself (tests/cluster/up.sh): what the remote runners' tests rely on.
//! `#[ignore]`d (root and `ip netns`): run with `cargo test -p octl-tests -- --ignored`.

use std::time::Duration;

use octl_tests::cluster::Cluster;
use octl_tests::wait_until;

/// `squeue`'s `state|node` of job `id` (jobs stay listed for MinJobAge after they end).
fn job(c: &Cluster, id: &str) -> (String, String) {
    let line = c.slurm("squeue", &["-h", "-t", "all", "-j", id, "-o", "%T|%N"]);
    let (state, node) = line.trim().split_once('|').unwrap_or(("", ""));
    (state.to_string(), node.to_string())
}

fn submit(c: &Cluster, args: &[&str]) -> String {
    c.slurm("sbatch", &[&["--parsable"], args].concat())
        .trim()
        .to_string()
}

/// Every node runs jobs under its own hostname, every SSH host answers under its own, and a
/// `--requeue` job whose node dies (kill -9 of everything on it) starts again on another node.
#[test]
#[ignore = "needs root and ip netns: starts a Slurm cluster (tests/cluster/up.sh)"]
fn nodes_run_jobs_hosts_answer_and_a_dead_nodes_job_is_requeued() {
    let turn = Cluster::shared();
    let c: &Cluster = &turn;
    eprintln!("up.sh took {:.1} s", c.up_secs);
    assert_eq!(c.nodes, ["n1", "n2", "n3"]);
    let states = c.node_states();
    assert!(
        c.nodes.iter().all(|n| states[n] == "idle"),
        "not all idle: {states:?}"
    );

    let out = c.dir.join("hostname.%j.out");
    let out = out.to_str().unwrap();
    for node in &c.nodes {
        let id = submit(c, &["-w", node, "-o", out, "--wrap", "hostname"]);
        wait_until(
            "the hostname job to complete",
            Duration::from_secs(30),
            || (job(c, &id).0 == "COMPLETED").then_some(()),
        );
        let printed = std::fs::read_to_string(c.dir.join(format!("hostname.{id}.out"))).unwrap();
        assert_eq!(printed.trim(), node);
    }

    for host in &c.ssh_hosts {
        let o = c.ssh(host).arg("hostname").output().unwrap();
        assert!(
            o.status.success(),
            "{host}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), host);
    }

    // Node loss: the job's first run records where it ran; after the node dies, Slurm marks it
    // down and runs the job again (SLURM_RESTART_COUNT 1) on another node.
    let log = c.dir.join("requeue.log");
    let script = format!(
        "echo \"$SLURM_RESTART_COUNT $(hostname)\" >> {}; sleep 600",
        log.display()
    );
    let id = submit(c, &["--requeue", "-o", "/dev/null", "--wrap", &script]);
    let first = wait_until("the job to run", Duration::from_secs(30), || {
        let (state, node) = job(c, &id);
        (state == "RUNNING" && !node.is_empty()).then_some(node)
    });
    wait_until("the job's first line", Duration::from_secs(30), || {
        std::fs::read_to_string(&log)
            .ok()
            .filter(|s| s.lines().count() == 1)
    });
    c.fault("kill", &first);
    let second = wait_until(
        "the job to run again elsewhere",
        Duration::from_secs(120),
        || {
            let (state, node) = job(c, &id);
            (state == "RUNNING" && !node.is_empty() && node != first).then_some(node)
        },
    );
    let lines = wait_until("the second run's line", Duration::from_secs(30), || {
        std::fs::read_to_string(&log)
            .ok()
            .filter(|s| s.lines().count() == 2)
    });
    let runs: Vec<&str> = lines.lines().collect();
    assert!(runs[0].ends_with(&first), "{runs:?}");
    assert_eq!(runs[1], format!("1 {second}"), "{runs:?}");
    assert!(c.node_states()[&first].starts_with("down"));

    // Leave the cluster as found: the node comes back by itself (ReturnToService=2).
    c.slurm("scancel", &[&id]);
    c.fault("start", &first);
    wait_until("the node to be idle again", Duration::from_secs(60), || {
        (c.node_states()[&first] == "idle").then_some(())
    });
}
