//! Each agent in a cgroup of its own with its profile's memory limit: an agent that goes over
//! it is killed by the kernel there, and only its node fails, with that reason; the others
//! run on. Writing the memory controller's hierarchy needs root (cgroup v1 here; a delegated
//! v2 subtree elsewhere), so the test is `#[ignore]`d and run with `cargo test -p octl-tests
//! -- --ignored` (CI does, as root); without root it fails, saying why.

use std::path::PathBuf;
use std::time::Duration;

use octl_tests::{wait_until, wait_until_describing, TestEnv, TestRepo};
use serde_json::{json, Value};

const MIB: u64 = 1024 * 1024;

/// Allocates and touches `argv[1]` MiB, says so (`MARK.held`), holds it until `MARK.release`.
const HOLD: &str = r#"import os, sys, time
mib, mark = int(sys.argv[1]), sys.argv[2]
block = bytearray(mib << 20)
for i in range(0, len(block), 4096):
    block[i] = 1
open(mark + ".held", "w").close()
while not os.path.exists(mark + ".release"):
    time.sleep(0.05)
"#;

/// The file of the memory limit of the cgroup `pid` is in under this daemon's agents'
/// directory (`…/octl-<KEY>/<RUN>.<NODE>`), in whichever hierarchy has the controller.
fn limit_file(pid: u32) -> Option<PathBuf> {
    let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    cgroups.lines().find_map(|l| {
        let path = l.splitn(3, ':').nth(2)?;
        if !path.contains("/octl-") {
            return None;
        }
        [
            ("/sys/fs/cgroup/memory", "memory.limit_in_bytes"),
            ("/sys/fs/cgroup/unified", "memory.max"),
            ("/sys/fs/cgroup", "memory.max"),
        ]
        .iter()
        .map(|(mount, file)| PathBuf::from(format!("{mount}{path}/{file}")))
        .find(|f| f.exists())
    })
}

fn node<'a>(show: &'a Value, id: &str) -> &'a Value {
    show["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == json!(id))
        .unwrap()
}

#[test]
#[ignore = "needs root to write the cgroup memory hierarchy: run as root with `cargo test -p octl-tests -- --ignored` (see .ci/run)"]
fn an_agent_over_its_memory_limit_is_killed_and_only_its_node_fails() {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    assert!(
        root,
        "a memory limit needs a writable cgroup memory controller: run this test as root, as CI does"
    );
    let env = TestEnv::new();
    env.write_config(
        "[limits]\nmemory_budget = \"4GiB\"\n[agents.shell]\nmemory_max = \"100MiB\"\nmemory_estimate = \"64MiB\"\n",
    );
    let _d = env.start_daemon();
    let repo = TestRepo::new(&env, "repo");
    let dir = env.root.path().join("holders");
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("hold.py");
    std::fs::write(&script, HOLD).unwrap();
    let task = |id: &str, mib: u64| {
        format!(
            "python3 {} {mib} {} && printf {id} > {id}.txt",
            script.display(),
            dir.join(id).display()
        )
    };
    let manifest = format!(
        "prompt = '{{task}}'\n[[units]]\nid = \"hog\"\nvars = {{ task = \"{}\" }}\n[[units]]\nid = \"meek\"\nvars = {{ task = \"{}\" }}\n",
        task("hog", 400),
        task("meek", 20)
    );
    let run = env.rpc(
        "fanout.start",
        json!({"manifest": manifest, "format": "toml", "repo": repo.path.display().to_string(), "agent": "shell", "max_parallel": 2}),
    )["id"]
        .as_str()
        .unwrap()
        .to_string();
    wait_until("meek to hold its memory", Duration::from_secs(30), || {
        dir.join("meek.held").exists().then_some(())
    });
    // Its processes are in its cgroup, under its profile's limit.
    let meek = env
        .agent_processes()
        .into_iter()
        .find(|(_, n, _)| n == "meek")
        .expect("meek's processes");
    let limit = meek
        .2
        .iter()
        .find_map(|p| limit_file(*p))
        .unwrap_or_else(|| {
            panic!(
                "none of meek's processes {:?} is in a limited cgroup",
                meek.2
            )
        });
    assert_eq!(
        std::fs::read_to_string(&limit).unwrap().trim(),
        (100 * MIB).to_string(),
        "{}",
        limit.display()
    );

    let failed = wait_until_describing(
        "the hog to fail",
        Duration::from_secs(60),
        || {
            let show = env.rpc("run.show", json!({"run": run}));
            let hog = node(&show, "hog");
            (hog["state"] == json!("failed")).then(|| hog.clone())
        },
        || env.rpc("run.show", json!({"run": run})).to_string(),
    );
    assert!(!dir.join("hog.held").exists(), "the hog got its 400 MiB");
    let reason = failed["reason"].as_str().unwrap();
    assert!(
        reason.starts_with(
            "the agent went over its memory limit of 100 MiB (agents.shell.memory_max): the kernel killed"
        ),
        "{reason}"
    );
    // The other agent did not notice.
    let show = env.rpc("run.show", json!({"run": run}));
    assert_eq!(node(&show, "meek")["state"], json!("running"), "{show}");
    std::fs::write(dir.join("meek.release"), "").unwrap();
    env.wait_node(&run, "meek", "merged");
    assert_eq!(repo.show("main", "meek.txt").unwrap(), "meek");
    // Its cgroup went with it.
    wait_until(
        "meek's cgroup to be removed",
        Duration::from_secs(10),
        || (!limit.exists()).then_some(()),
    );
    assert_eq!(env.agent_processes(), vec![]);
}
