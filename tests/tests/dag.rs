//! Fan-out and orchestrate end to end with fake agents (`shell`): the cap proven from the log,
//! merges as units finish, conflicts and failures that stop only themselves, the DAG order
//! proven from the log, retry, validation, discussions and spin-off proposals.

use std::collections::{BTreeMap, HashSet};
use std::io::Read;
use std::time::Duration;

use octl_tests::{wait_until, TestEnv, TestRepo};
use serde_json::{json, Value};

fn fanout(env: &TestEnv, repo: &TestRepo, manifest: &str, cap: u64) -> String {
    let r = env.rpc(
        "fanout.start",
        json!({"manifest": manifest, "format": "toml", "repo": repo.path.display().to_string(), "agent": "shell", "max_parallel": cap}),
    );
    r["id"].as_str().unwrap().to_string()
}

fn orchestrate(env: &TestEnv, repo: &TestRepo, plan: &str, extra: Value) -> Result<Value, Value> {
    let mut params = json!({"plan": plan, "format": "toml", "repo": repo.path.display().to_string(), "agent": "shell", "max_parallel": 4});
    if let Value::Object(m) = extra {
        for (k, v) in m {
            params[k] = v;
        }
    }
    env.try_rpc("orchestrate.start", params)
}

/// The most agents alive at once, replayed from the log: a node is alive from
/// `node.starting` until its agent's end (`node.done`, `node.failed`, `node.exited`,
/// `node.cancelled`).
fn max_alive(events: &[Value]) -> usize {
    let mut alive = HashSet::new();
    let mut max = 0;
    for e in events {
        let node = e["node"].as_str().unwrap_or("").to_string();
        match e["type"].as_str().unwrap() {
            "node.starting" => {
                alive.insert(node);
            }
            "node.done" | "node.failed" | "node.exited" | "node.cancelled" => {
                alive.remove(&node);
            }
            _ => {}
        }
        max = max.max(alive.len());
    }
    max
}

fn seq_of(events: &[Value], node: &str, kind: &str) -> u64 {
    events
        .iter()
        .find(|e| e["node"] == json!(node) && e["type"] == json!(kind))
        .unwrap_or_else(|| panic!("no {kind} for {node}"))["seq"]
        .as_u64()
        .unwrap()
}

#[test]
fn twenty_units_under_a_cap_of_three_all_merge_and_leave_nothing() {
    let (env, _d, repo) = TestEnv::world();
    let mut manifest = String::from(
        "title = \"twenty\"\nprompt = \"printf '%s\\\\n' {word} > {word}.txt && cp \\\"$OCTL_MANIFEST\\\" manifest-{word}.seen && sleep 0.2\"\n",
    );
    for i in 0..20 {
        manifest.push_str(&format!(
            "[[units]]\nid = \"u{i:02}\"\nvars = {{ word = \"w{i:02}\" }}\n"
        ));
    }
    let run = fanout(&env, &repo, &manifest, 3);
    let show = env.wait_status(&run, &["completed", "failed", "waiting"]);
    assert_eq!(show["manifest"]["status"], json!("completed"), "{show}");
    assert_eq!(show["manifest"]["nodes"], json!({"merged": 20}));
    let events = env.log_events(&run);
    let max = max_alive(&events);
    assert!(
        max <= 3,
        "at most 3 agents alive at once, the log shows {max}"
    );
    assert_eq!(max, 3, "the cap was used");
    for i in 0..20 {
        assert_eq!(
            repo.show("main", &format!("w{i:02}.txt")).unwrap(),
            format!("w{i:02}\n")
        );
    }
    // Every child could read the manifest.
    assert_eq!(repo.show("main", "manifest-w07.seen").unwrap(), manifest);
    assert!(repo.extra_worktrees().is_empty(), "no worktree left");
    assert!(repo.refs("refs/heads/octl/").is_empty(), "no branch left");
    assert_eq!(show["manifest"]["settings"]["max_parallel"], json!(3));
}

#[test]
fn a_unit_that_conflicts_stops_only_itself() {
    let (env, _d, repo) = TestEnv::world();
    let manifest = "prompt = \"{script}\"\n\
        [[units]]\nid = \"one\"\nvars = { script = \"printf one > one.txt\" }\n\
        [[units]]\nid = \"left\"\nvars = { script = \"printf left > shared.txt\" }\n\
        [[units]]\nid = \"right\"\nvars = { script = \"printf right > shared.txt\" }\n\
        [[units]]\nid = \"two\"\nvars = { script = \"printf two > two.txt\" }\n";
    let run = fanout(&env, &repo, manifest, 4);
    let show = env.wait_status(&run, &["waiting", "completed", "failed"]);
    let states: BTreeMap<String, String> = show["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["id"].as_str().unwrap().to_string(),
                n["state"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(states["one"], "merged");
    assert_eq!(states["two"], "merged");
    let mut pair = [states["left"].as_str(), states["right"].as_str()];
    pair.sort();
    assert_eq!(pair, ["conflict", "merged"], "{states:?}");
    assert_eq!(show["manifest"]["status"], json!("waiting"));
    assert_eq!(repo.show("main", "one.txt").as_deref(), Some("one"));
    assert_eq!(repo.show("main", "two.txt").as_deref(), Some("two"));
}

const DIAMOND: &str = "title = \"diamond\"\n\
    [[nodes]]\nid = \"a\"\ntask = \"printf a > a.txt\"\n\
    [[nodes]]\nid = \"b\"\ntask = \"test -e a.txt && printf b > b.txt\"\ndeps = [\"a\"]\n\
    [[nodes]]\nid = \"c\"\ntask = \"test -e a.txt && printf c > c.txt\"\ndeps = [\"a\"]\n\
    [[nodes]]\nid = \"d\"\ntask = \"test -e b.txt && test -e c.txt && printf d > d.txt\"\ndeps = [\"b\", \"c\"]\n";

#[test]
fn a_diamond_runs_in_dependency_order_through_the_integration_branch() {
    let (env, _d, repo) = TestEnv::world();
    let r = orchestrate(&env, &repo, DIAMOND, json!({})).unwrap();
    let run = r["id"].as_str().unwrap().to_string();
    let integration = format!("octl/{run}/integration");
    assert_eq!(r["settings"]["integration"], json!(integration));
    let show = env.wait_status(&run, &["waiting", "failed", "completed"]);
    assert_eq!(show["manifest"]["nodes"], json!({"merged": 4}), "{show}");
    let events = env.log_events(&run);
    // D starts only after B and C are merged into integration; B and C after A.
    let d_start = seq_of(&events, "d", "node.starting");
    assert!(d_start > seq_of(&events, "b", "merge.succeeded"));
    assert!(d_start > seq_of(&events, "c", "merge.succeeded"));
    for n in ["b", "c"] {
        assert!(seq_of(&events, n, "node.starting") > seq_of(&events, "a", "merge.succeeded"));
    }
    assert_eq!(repo.show(&integration, "d.txt").as_deref(), Some("d"));
    assert!(
        repo.show("main", "a.txt").is_none(),
        "base untouched until the run is merged"
    );
    // Now the human merges the integration branch into base.
    let out = env.cli(["--json", "merge", &run]);
    out.ok();
    for f in ["a.txt", "b.txt", "c.txt", "d.txt"] {
        assert!(repo.show("main", f).is_some(), "{f} on main");
    }
    let show = env.wait_status(&run, &["completed"]);
    assert_eq!(show["manifest"]["merge"], json!("merged"));
    assert!(
        repo.refs("refs/heads/octl/").is_empty(),
        "integration and node branches gone"
    );
}

#[test]
fn a_failed_node_blocks_only_its_dependents_and_a_retry_lets_them_run() {
    let (env, _d, repo) = TestEnv::world();
    let flag = env.root.path().join("b-may-pass");
    let plan = DIAMOND.replace(
        "test -e a.txt && printf b > b.txt",
        &format!("test -e {} && printf b > b.txt", flag.display()),
    );
    let run = orchestrate(&env, &repo, &plan, json!({"auto_merge": true})).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let show = env.wait_status(&run, &["waiting", "failed", "completed"]);
    let state = |show: &Value, id: &str| {
        show["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["id"] == json!(id))
            .unwrap()["state"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(state(&show, "a"), "merged");
    assert_eq!(state(&show, "b"), "failed");
    assert_eq!(state(&show, "c"), "merged", "an independent node goes on");
    assert_eq!(state(&show, "d"), "blocked");
    // Retry B once it can pass: D runs, and with auto_merge the run completes.
    std::fs::write(&flag, "").unwrap();
    let out = env.cli(["--json", "run", "retry", &run, "--node", "b"]);
    out.ok();
    let snap = format!("refs/octl/snapshots/{run}/b");
    assert!(
        repo.refs("refs/octl/snapshots/").contains(&snap),
        "the old branch is kept under {snap}"
    );
    let show = env.wait_status(&run, &["completed", "failed"]);
    assert_eq!(show["manifest"]["status"], json!("completed"), "{show}");
    assert_eq!(repo.show("main", "d.txt").as_deref(), Some("d"));
    let events = env.log_events(&run);
    assert!(seq_of(&events, "d", "node.starting") > seq_of(&events, "b", "merge.succeeded"));
}

#[test]
fn a_plan_with_a_cycle_and_an_unknown_dep_is_refused_whole() {
    let (env, _d, repo) = TestEnv::world();
    let plan = "[[nodes]]\nid = \"x\"\ntask = \"true\"\ndeps = [\"z\"]\n\
        [[nodes]]\nid = \"y\"\ntask = \"true\"\ndeps = [\"x\"]\n\
        [[nodes]]\nid = \"z\"\ntask = \"true\"\ndeps = [\"y\"]\n\
        [[nodes]]\nid = \"w\"\ntask = \"true\"\ndeps = [\"nope\"]\n";
    let err = orchestrate(&env, &repo, plan, json!({})).unwrap_err();
    assert_eq!(err["data"]["kind"], json!("invalid_params"));
    let msg = err["message"].as_str().unwrap();
    assert!(msg.contains("cycle"), "{msg}");
    for n in ["x", "y", "z"] {
        assert!(msg.contains(n), "the cycle names {n}: {msg}");
    }
    assert!(msg.contains("nope"), "the unknown dep is named too: {msg}");
    assert_eq!(env.rpc("run.list", json!({})), json!([]), "nothing created");
    assert!(repo.refs("refs/heads/octl/").is_empty());
    // Through the CLI: exit 2 with the same message.
    let path = env.root.path().join("plan.toml");
    std::fs::write(&path, plan).unwrap();
    let out = env.cli_with(
        [
            "--json",
            "orchestrate",
            "--plan",
            path.to_str().unwrap(),
            "--agent",
            "shell",
        ],
        |c| {
            c.current_dir(&repo.path);
        },
    );
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.error()["message"].as_str().unwrap().contains("cycle"));
}

#[test]
fn discussion_ask_wait_returns_the_answer() {
    let env = TestEnv::new();
    let _d = env.start_daemon();
    let run = env.create_run("questions");
    let mut child = env.start_cli_with(
        [
            "discussion",
            "ask",
            "--run",
            &run,
            "--title",
            "Which database?",
            "--wait",
        ],
        |_| {},
    );
    let id = wait_until("the question", Duration::from_secs(20), || {
        let list = env.rpc("discussion.list", json!({"open": true}));
        list.as_array()
            .and_then(|l| l.first())
            .map(|d| d["id"].as_str().unwrap().to_string())
    });
    env.cli(["discussion", "answer", &id, "--text", "PostgreSQL"])
        .ok();
    let status = wait_until("ask to return", Duration::from_secs(20), || {
        child.try_wait().ok().flatten()
    });
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert!(status.success(), "{out}");
    assert_eq!(out.trim(), "PostgreSQL");
    let again = env.cli(["--json", "discussion", "answer", &id, "--text", "MySQL"]);
    assert_eq!(
        again.code, 4,
        "an answered discussion stays answered: {again:?}"
    );
}

#[test]
fn spinoff_accept_starts_a_linked_run() {
    let (env, _d, repo) = TestEnv::world();
    let parent = env
        .spawn(
            "code",
            &repo,
            "printf main-work > work.txt",
            json!({"agent": "shell", "node": "main"}),
        )
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let proposed = env.cli([
        "--json",
        "spinoff",
        "propose",
        "--run",
        &parent,
        "--task",
        "printf side > side.txt",
        "--why",
        "noticed while working",
    ]);
    proposed.ok();
    let id = proposed.json()["id"].as_str().unwrap().to_string();
    let accepted = env.cli(["--json", "spinoff", "accept", &id, "--agent", "shell"]);
    accepted.ok();
    let child = accepted.json()["run"]["id"].as_str().unwrap().to_string();
    let show = env.wait_status(&child, &["completed", "failed"]);
    assert_eq!(show["manifest"]["status"], json!("completed"));
    // Merged and cleaned up: its branch and worktree are still named, and marked removed.
    let node = &show["nodes"][0];
    assert_eq!(node["branch_removed"], json!(true), "{node}");
    assert_eq!(node["worktree_removed"], json!(true), "{node}");
    let text = env.cli(["run", "show", &child]);
    let branch = node["branch"].as_str().unwrap();
    assert!(
        text.ok().stdout.contains(&format!("(removed) {branch}")),
        "{text:?}"
    );
    // The parent's node is live: nothing of it is marked.
    let live = env.rpc("run.show", json!({"run": parent}));
    assert_eq!(live["nodes"][0].get("branch_removed"), None, "{live}");
    assert_eq!(live["nodes"][0].get("worktree_removed"), None, "{live}");
    assert_eq!(
        show["manifest"]["settings"]["parent_run"],
        json!(parent),
        "child names its parent"
    );
    assert_eq!(repo.show("main", "side.txt").as_deref(), Some("side"));
    let parent_show = env.rpc("run.show", json!({"run": parent}));
    let sp = &parent_show["spinoffs"][0];
    assert_eq!(sp["status"], json!("accepted"));
    assert_eq!(sp["child_run"], json!(child), "parent names its child");
    // Accepting again reports the existing decision; it starts nothing new.
    let again = env.cli(["--json", "spinoff", "accept", &id]);
    again.ok();
    assert_eq!(again.json()["run"]["id"], json!(child));
    let runs = env.rpc("run.list", json!({}));
    assert_eq!(runs.as_array().unwrap().len(), 2, "parent and one child");
    let reject = env.cli([
        "--json",
        "spinoff",
        "reject",
        &id,
        "--reason",
        "changed my mind",
    ]);
    assert_eq!(
        reject.code, 4,
        "an accepted proposal cannot be rejected: {reject:?}"
    );
}
