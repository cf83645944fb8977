//! Admission by resources end to end: memory-hungry shell agents (python3 allocating and
//! touching N MiB, holding it until the test lets go) start only while `[limits]` has room
//! for them; the others wait `pending`, with the reason `run show` gives, and start as memory
//! frees. The thresholds are config values (a memory budget for the agents, an estimate per
//! profile), so no test needs to fill the machine. The daemon measures each agent's whole
//! process tree (`memory` in `run show`). Bad `[limits]` values are refused naming the field.

use std::path::PathBuf;
use std::time::Duration;

use octl_tests::{wait_until, wait_until_describing, TestEnv, TestRepo};
use serde_json::{json, Value};

const MIB: u64 = 1024 * 1024;

/// An agent that allocates and touches `argv[1]` MiB, says so (`MARK.held`), and holds it
/// until `MARK.release` appears.
const HOLD: &str = r#"import os, sys, time
mib, mark = int(sys.argv[1]), sys.argv[2]
block = bytearray(mib << 20)
for i in range(0, len(block), 4096):
    block[i] = 1
open(mark + ".held", "w").close()
while not os.path.exists(mark + ".release"):
    time.sleep(0.05)
"#;

struct Holders {
    dir: PathBuf,
    script: PathBuf,
}

impl Holders {
    fn new(env: &TestEnv) -> Holders {
        let dir = env.root.path().join("holders");
        std::fs::create_dir_all(&dir).unwrap();
        let script = dir.join("hold.py");
        std::fs::write(&script, HOLD).unwrap();
        Holders { dir, script }
    }

    /// The shell task of an agent `id` holding `mib` MiB, then committing a file.
    fn task(&self, id: &str, mib: u64) -> String {
        format!(
            "python3 {} {mib} {} && printf {id} > {id}.txt",
            self.script.display(),
            self.dir.join(id).display()
        )
    }

    fn held(&self, id: &str) -> bool {
        self.dir.join(format!("{id}.held")).exists()
    }

    fn release(&self, id: &str) {
        std::fs::write(self.dir.join(format!("{id}.release")), "").unwrap();
    }
}

/// A world whose daemon reads `config` from its first start.
fn world(config: &str) -> (TestEnv, octl_tests::Daemon, TestRepo) {
    let env = TestEnv::new();
    env.write_config(config);
    let d = env.start_daemon();
    let repo = TestRepo::new(&env, "repo");
    (env, d, repo)
}

fn node<'a>(show: &'a Value, id: &str) -> &'a Value {
    show["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == json!(id))
        .unwrap_or_else(|| panic!("no node {id}: {show}"))
}

fn show(env: &TestEnv, run: &str) -> Value {
    env.rpc("run.show", json!({"run": run}))
}

/// Waits until `id` of `run` waits for room, and returns what it waits for.
fn waits_for_room(env: &TestEnv, run: &str, id: &str) -> String {
    wait_until_describing(
        &format!("{id} to wait for memory"),
        Duration::from_secs(30),
        || {
            let s = show(env, run);
            let n = node(&s, id);
            let why = n["waiting_for"].as_array()?.iter().find_map(|w| {
                w.as_str()
                    .filter(|w| w.starts_with("memory:"))
                    .map(str::to_string)
            })?;
            (n["state"] == json!("pending")).then_some(why)
        },
        || show(env, run).to_string(),
    )
}

fn wait_held(h: &Holders, id: &str) {
    wait_until(
        &format!("{id} to hold its memory"),
        Duration::from_secs(30),
        || h.held(id).then_some(()),
    );
}

/// The most agents alive at once, replayed from the log (from `node.starting` to the end of
/// its agent).
fn max_alive(events: &[Value]) -> usize {
    let mut alive = std::collections::HashSet::new();
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

/// Room for two agents: each shell agent is expected to need 300 MiB (nothing of the profile
/// has been watched to its end yet) and all of them may take 700.
const TWO_FIT: &str = "[limits]\nmemory_budget = \"700MiB\"\nheadroom = \"0%\"\n[agents.shell]\nmemory_estimate = \"300MiB\"\n";

#[test]
fn fanout_nodes_wait_for_memory_and_start_as_it_frees() {
    let (env, _d, repo) = world(TWO_FIT);
    let h = Holders::new(&env);
    let mut manifest = String::from("prompt = '{task}'\n");
    for id in ["a", "b", "c", "d"] {
        manifest.push_str(&format!(
            "[[units]]\nid = \"{id}\"\nvars = {{ task = \"{}\" }}\n",
            h.task(id, 200)
        ));
    }
    // `auto`: as many as there is room for.
    let run = env.rpc(
        "fanout.start",
        json!({"manifest": manifest, "format": "toml", "repo": repo.path.display().to_string(), "agent": "shell"}),
    )["id"]
        .as_str()
        .unwrap()
        .to_string();
    wait_held(&h, "a");
    wait_held(&h, "b");
    let why = waits_for_room(&env, &run, "c");
    assert_eq!(
        why,
        "memory: a shell agent is expected to need 300 MiB, agents count for 600 MiB of limits.memory_budget 700 MiB"
    );
    let s = show(&env, &run);
    assert_eq!(node(&s, "d")["state"], json!("pending"), "{s}");
    assert!(!h.held("c") && !h.held("d"));
    // The person's view says the same.
    let out = env.cli(["run", "show", &run]);
    out.ok();
    assert!(
        out.stdout.contains("limits.memory_budget"),
        "{}",
        out.stdout
    );
    // The daemon measured each agent's process tree: its 200 MiB, and the shells around it.
    let measured = wait_until("a's memory to be measured", Duration::from_secs(30), || {
        let s = show(&env, &run);
        let m = node(&s, "a")["memory"]["resident_bytes"].as_u64()?;
        (m >= 200 * MIB).then_some(m)
    });
    assert!(measured < 300 * MIB, "a holds {measured} bytes");

    // As a ends, c takes its room; d still waits, for b or c.
    h.release("a");
    wait_held(&h, "c");
    waits_for_room(&env, &run, "d");
    assert_eq!(node(&show(&env, &run), "a")["state"], json!("merged"));
    h.release("b");
    wait_held(&h, "d");
    h.release("c");
    h.release("d");
    let s = env.wait_status(&run, &["completed", "failed", "waiting"]);
    assert_eq!(s["manifest"]["status"], json!("completed"), "{s}");
    assert_eq!(
        max_alive(&env.log_events(&run)),
        2,
        "never more than there was room for"
    );
    for id in ["a", "b", "c", "d"] {
        assert_eq!(repo.show("main", &format!("{id}.txt")).unwrap(), id);
    }
    // `auto` is recorded as what it now means.
    let settings = &s["manifest"]["settings"];
    assert_eq!(settings["max_parallel"], json!(32), "{settings}");
    assert!(
        settings["max_parallel_auto"]["formula"]
            .as_str()
            .unwrap()
            .contains("[limits]"),
        "{settings}"
    );
}

#[test]
fn a_spawn_without_room_is_pending_and_starts_when_room_frees() {
    let env = TestEnv::new();
    env.write_config(
        "[limits]\nmemory_budget = \"400MiB\"\n[agents.shell]\nmemory_estimate = \"300MiB\"\n",
    );
    // The spawn pauses between saying its node waits and creating its run (a slow disk did
    // in CI): the engine's passes meanwhile must not strand the node.
    let _d = env.start_daemon_with(&[("OCTL_FAILPOINTS", "spawn:slow-create")]);
    let repo = TestRepo::new(&env, "repo");
    let h = Holders::new(&env);
    let first = env
        .spawn(
            "spinoff",
            &repo,
            &h.task("first", 50),
            json!({"agent": "shell", "node": "first"}),
        )
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    wait_held(&h, "first");
    // The second is answered at once: its run exists, its node waits.
    let second = env
        .spawn(
            "spinoff",
            &repo,
            &h.task("second", 50),
            json!({"agent": "shell", "node": "second"}),
        )
        .unwrap();
    let second = second["id"].as_str().unwrap().to_string();
    let why = waits_for_room(&env, &second, "second");
    assert!(why.contains("limits.memory_budget 400 MiB"), "{why}");
    assert!(!env
        .event_types(&second)
        .contains(&"node.starting".to_string()));
    h.release("first");
    wait_held(&h, "second");
    h.release("second");
    for run in [&first, &second] {
        let s = env.wait_status(run, &["completed", "failed", "waiting"]);
        assert_eq!(s["manifest"]["status"], json!("completed"), "{s}");
    }
}

#[test]
fn bad_limits_are_refused_naming_the_field_and_nothing_is_created() {
    let (env, _d, _repo) = world("");
    for (config, field) in [
        (
            "[limits]\nmin_available = \"lots\"\n",
            "limits.min_available \"lots\"",
        ),
        (
            "[limits]\nheadroom = \"2000%\"\n",
            "limits.headroom \"2000%\": give a share such as \"25%\" (at most 1000%)",
        ),
        ("[limits]\nmax_agents = 0\n", "limits.max_agents"),
        (
            "[agents.shell]\nmemory_max = \"1 bucket\"\n",
            "agents.shell.memory_max",
        ),
        ("[limits]\nmemory = \"1GiB\"\n", "unknown field `memory`"),
    ] {
        // Refused as an edit of a running daemon's config.toml: the last good file stays in
        // force, and `daemon status` names the field until the file is fixed.
        env.write_config(config);
        let status = env.rpc("daemon.status", json!({}));
        let message = status["config_error"].as_str().unwrap_or_default();
        assert!(message.contains(field), "{config}: {status}");
    }
    let runs = env.rpc("run.list", json!({}));
    assert_eq!(runs, json!([]), "{runs}");
}
