//! What must hold once the runs of a home on the remote runners have settled, after whatever
//! faults: the invariant checker of the daemon (`octld::invariants`: every merge in its
//! target, every remote node's work in the target, its branch or its snapshot) finds nothing
//! and every log replays; nothing of the home is left on the cluster — no orphan `doctor`
//! reports, no live Slurm job, no window on an SSH host, no clone of a job or a window; and
//! no node's last checkpoint exists only on a host (the host's bare repository holds nothing
//! the daemon's repository does not).

use std::path::Path;

use serde_json::{json, Value};

use crate::cluster::Cluster;
use crate::{wait_until_describing, TestEnv, TestRepo};

/// Waits up to `timeout` for [`problems`] to find none (what is left on the cluster is being
/// stopped in the background); on timeout, panics with what it found last.
pub fn settle(
    env: &TestEnv,
    c: &Cluster,
    repo: &TestRepo,
    runs: &[String],
    timeout: std::time::Duration,
) {
    let last = std::cell::RefCell::new(Vec::new());
    wait_until_describing(
        "nothing of the runs left on the cluster, and the checker clean",
        timeout,
        || {
            let found = problems(env, c, repo, runs);
            let clean = found.is_empty();
            *last.borrow_mut() = found;
            clean.then_some(())
        },
        || {
            // What the logs say, to see how it came to be left.
            let events: Vec<String> = runs
                .iter()
                .flat_map(|r| env.log_events(r))
                .map(|e| {
                    format!(
                        "{} {} {} {}",
                        e["seq"],
                        e["type"].as_str().unwrap_or(""),
                        e["node"].as_str().unwrap_or("-"),
                        e["data"]
                    )
                })
                .collect();
            format!(
                "{:#?}
--- the runs' events ---
{}",
                last.borrow(),
                events.join(
                    "
"
                )
            )
        },
    );
}

/// Every problem found, one sentence each (empty: all holds). `runs` are the runs of the
/// home to look at (ended ones: their agents must all be gone).
/// The ref prefixes (`refs/octl/remote/<run>/<node>/<attempt>/<copy>/`) of the copy each node
/// of `events` ran last, for the nodes whose last `node.started` is on the SSH host `host`.
fn last_copies(events: &[(String, Vec<Value>)], host: &str) -> Vec<String> {
    let mut last: std::collections::BTreeMap<(String, String), String> = Default::default();
    for (run, evs) in events {
        for e in evs.iter().filter(|e| e["type"] == "node.started") {
            let (Some(node), Some(pane)) = (e["node"].as_str(), e["data"]["pane"].as_str()) else {
                continue;
            };
            last.insert((run.clone(), node.to_string()), pane.to_string());
        }
    }
    last.into_iter()
        .filter_map(|((run, node), pane)| {
            let f: Vec<&str> = pane.splitn(5, ':').collect();
            (f.len() == 5 && f[0] == "ssh" && f[4] == host)
                .then(|| format!("refs/octl/remote/{run}/{node}/{}/{}/", f[1], f[2]))
        })
        .collect()
}

pub fn problems(env: &TestEnv, c: &Cluster, repo: &TestRepo, runs: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for (run, found) in octld::invariants::check_all(&env.home.join("runs")) {
        out.extend(found.into_iter().map(|f| format!("run {run}: {f}")));
    }
    match env.try_rpc("doctor.orphans", json!({})) {
        Ok(v) => {
            for o in v["orphans"].as_array().into_iter().flatten() {
                out.push(format!("orphan: {o}"));
            }
        }
        Err(e) => out.push(format!("doctor.orphans failed: {e}")),
    }
    let events: Vec<(String, Vec<Value>)> = runs
        .iter()
        .map(|r| (r.clone(), env.log_events(r)))
        .collect();
    // Slurm: no job of these runs alive, no clone of theirs left in the shared /tmp.
    let jobs = c.slurm("squeue", &["-h", "-t", "all", "-o", "%i|%j|%T"]);
    for line in jobs.lines() {
        let f: Vec<&str> = line.trim().split('|').collect();
        let (Some(id), Some(name), Some(state)) = (f.first(), f.get(1), f.get(2)) else {
            continue;
        };
        let ours = runs.iter().any(|r| name.starts_with(&format!("octl.{r}.")));
        if ours
            && matches!(
                *state,
                "PENDING" | "RUNNING" | "REQUEUED" | "CONFIGURING" | "SUSPENDED"
            )
        {
            out.push(format!("Slurm job {id} ({name}) is still {state}"));
        }
        if ours {
            for copy in 0..4 {
                let clone = std::env::temp_dir().join(format!("octl-job-{id}-{copy}"));
                if clone.exists() {
                    out.push(format!(
                        "the clone {} of job {id} is still there",
                        clone.display()
                    ));
                }
            }
        }
    }
    // SSH: no window of these runs on any host, no clone under their work directory, and
    // every node's last copy on a host no newer than what the daemon fetched.
    let common = repo.git(&["rev-parse", "--path-format=absolute", "--git-common-dir"]);
    let bare = octld::runner::ssh::host_repo(Path::new(common.trim()));
    for host in &c.ssh_hosts {
        let dir = octld::runner::ssh::host_dir(&env.home, host);
        let script = format!(
            "cd \"$HOME/{dir}\" 2>/dev/null || exit 0; tmux -S tmux.sock list-windows -a -F 'W #{{session_name}}:#{{window_name}}' 2>/dev/null; \
             for d in work/*/*/*; do [ -d \"$d\" ] && echo \"C $d\"; done; \
             git -C {bare} for-each-ref --format='R %(refname) %(objectname)' refs/octl/remote/ 2>/dev/null; true"
        );
        let listed = c.ssh(host).arg(script).output().expect("ssh to a host");
        let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
        for line in listed.lines() {
            let ours = |s: &str| runs.iter().any(|r| s.contains(r.as_str()));
            if let Some(w) = line.strip_prefix("W ").filter(|w| ours(w)) {
                out.push(format!("the window {w} is still on {host}"));
            }
            if let Some(d) = line.strip_prefix("C ").filter(|d| ours(d)) {
                out.push(format!("the clone {d} is still on {host}"));
            }
            let Some((name, sha)) = line.strip_prefix("R ").and_then(|r| r.split_once(' ')) else {
                continue;
            };
            if !ours(name) || !(name.ends_with("/head") || name.ends_with("/wip")) {
                continue;
            }
            // Only the copies the log says its nodes ran last: a copy given up on may well
            // have pushed after it was (never fetched, by design).
            if !last_copies(&events, host)
                .iter()
                .any(|p| name.starts_with(p))
            {
                continue;
            }
            let here = repo.git(&["for-each-ref", "--format=%(objectname)", name]);
            if here.trim() != sha {
                out.push(format!(
                    "{name} is {sha} on {host} but {} in the daemon's repository: the agent's last work is only on the host",
                    if here.trim().is_empty() { "absent" } else { here.trim() }
                ));
            }
        }
    }
    out
}
