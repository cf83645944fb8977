//! `bench scale`: a year of runs and a thousand agents.
//!
//! - **Finished runs** (`--sizes 1000,10000,100000`): a real spinoff run (a shell agent's
//!   commit, merged) copied as files under new ids, the index removed, so the first start
//!   builds it from every log (timed: what an upgrade costs once); then, at each size, the
//!   start that reads the index only (median of 3, spawn to the first answer), octld's
//!   resident memory after it, `orchestratectl --json run list --limit 50` (median of 30),
//!   and the TUI's first frame (median of 3: the newest run on screen with the older ones
//!   counted); with each figure's growth exponent over the last step (0 is flat).
//! - **Live agents** (`--agents 1000`): one fan-out of that many `shell` units that sleep, all
//!   alive at once: how long until every one runs, the spawn latency (`node.starting` to
//!   `node.started`) of the last agent against the first, octld's CPU over 10 s while they
//!   sleep, and event → TUI redraw (p95 of 40) beside them.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use octl_tests::runs::copy_finished;
use octl_tests::{bin, wait_until, Pane, TestEnv, TestRepo};
use serde_json::{json, Value};

use super::{median, rss_kib, Row};

fn cpu_s(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    (f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap()) / 100.0
}

/// octld started on `env`'s home, timed from spawn to its first answer.
fn start_timed(env: &TestEnv) -> (Child, f64) {
    let mut cmd = Command::new(bin("octld"));
    cmd.arg("--home").arg(&env.home).arg("--foreground");
    env.isolate(&mut cmd);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let t = Instant::now();
    let mut child = cmd.spawn().expect("start octld");
    loop {
        if env.try_rpc("daemon.status", json!({})).is_ok() {
            break;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("octld exited during start ({status})");
        }
        assert!(
            t.elapsed() < Duration::from_secs(3600),
            "octld did not answer"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    (child, t.elapsed().as_secs_f64() * 1000.0)
}

fn stop(env: &TestEnv, mut child: Child) {
    let _ = env.try_rpc("daemon.shutdown", json!({}));
    let _ = child.wait();
}

/// Ends what a bench left running if it stops half-way: the daemon (by pid) and its private
/// tmux server (by socket), with their agents.
struct Cleanup<'a> {
    env: &'a TestEnv,
    pid: u32,
}

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        // SAFETY: kill(2) with a pid this bench started.
        unsafe { libc::kill(self.pid as i32, libc::SIGKILL) };
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(self.env.home.join("tmux.sock"))
            .arg("kill-server")
            .status();
    }
}

/// `orchestratectl ARGS` to completion, in ms.
fn cli_ms(env: &TestEnv, args: &[&str]) -> f64 {
    let mut cmd = Command::new(bin("orchestratectl"));
    cmd.args(args);
    env.isolate(&mut cmd);
    cmd.stdout(Stdio::null()).stderr(Stdio::null());
    let t = Instant::now();
    assert!(cmd.status().unwrap().success(), "{args:?}");
    t.elapsed().as_secs_f64() * 1000.0
}

/// The TUI's first frame in a real terminal: from the key that starts it to a screen
/// showing `newest` (and, when some are not listed, the count of the older ones).
fn tui_first_frame(env: &TestEnv, newest: &str, older: bool) -> f64 {
    let pane = Pane::tui_on_enter(env, 120, 40);
    let t = Instant::now();
    pane.keys(&["Enter"]);
    pane.wait_screen("the first frame", |s| {
        s.contains(&newest[..8]) && (!older || s.contains("older)"))
    });
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    pane.keys(&["q"]);
    ms
}

/// A merged spinoff run of a shell agent, the template of the copies.
fn template(env: &TestEnv) -> String {
    let (d, _) = start_timed(env);
    let repo = TestRepo::new(env, "repo");
    let run = env
        .spawn(
            "spinoff",
            &repo,
            "echo one > one.txt && git add one.txt && git commit -qm one",
            json!({"agent": "shell", "node": "fix"}),
        )
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    env.wait_status(&run, &["completed"]);
    stop(env, d);
    run
}

fn exponent(values: &[f64], sizes: &[usize]) -> f64 {
    let n = values.len();
    if n < 2 {
        return 0.0;
    }
    (values[n - 1] / values[n - 2]).ln() / (sizes[n - 1] as f64 / sizes[n - 2] as f64).ln()
}

/// The finished-runs figures; returns the scaling table as JSON.
pub fn finished(rows: &mut Vec<Row>, sizes: &[usize]) -> Value {
    let mut env = TestEnv::new();
    env.set_env("OCTL_REST_AFTER_MS", "5000");
    let first = template(&env);
    let mut have = 1;
    let mut newest = first.clone();
    let mut table = Vec::new();
    let (mut starts, mut mems, mut lists, mut frames) = (vec![], vec![], vec![], vec![]);
    for &size in sizes {
        eprintln!("scale: {size} finished runs");
        let copies = copy_finished(&env, &first, size - have);
        have = size;
        newest = copies.last().cloned().unwrap_or(newest);
        let _ = std::fs::remove_file(env.home.join("runs.idx"));
        let _ = std::fs::remove_file(env.home.join("runs.journal"));
        let (d, built) = start_timed(&env);
        stop(&env, d);
        let mut start = Vec::new();
        let mut rss = 0.0;
        for _ in 0..3 {
            let (d, ms) = start_timed(&env);
            start.push(ms);
            // Memory once it has answered a listing (what a person's first command does).
            cli_ms(&env, &["--json", "run", "list", "--limit", "50"]);
            rss = rss_kib(d.id()) / 1024.0;
            stop(&env, d);
        }
        let (d, _) = start_timed(&env);
        let list: Vec<f64> = (0..30)
            .map(|_| cli_ms(&env, &["--json", "run", "list", "--limit", "50"]))
            .collect();
        let frame: Vec<f64> = (0..3)
            .map(|_| tui_first_frame(&env, &newest, size > 500))
            .collect();
        stop(&env, d);
        let (start, list, frame) = (median(start), median(list), median(frame));
        eprintln!("  first start {built:.0} ms; start {start:.1} ms; {rss:.1} MiB; run list --limit 50 {list:.1} ms; TUI first frame {frame:.0} ms");
        table.push(json!({"runs": size, "first_start_ms": built, "start_ms": start, "rss_mib": rss, "run_list_limit_50_ms": list, "tui_first_frame_ms": frame}));
        starts.push(start);
        mems.push(rss);
        lists.push(list);
        frames.push(frame);
    }
    let last = *sizes.last().unwrap();
    let row = |metric: String, v: f64, unit: &'static str, target: f64| Row {
        metric,
        ours: v,
        baseline: None,
        unit,
        target: format!("≤ {target} {unit}"),
        pass: v <= target,
        skipped: None,
    };
    rows.push(row(
        format!(
            "daemon start, {last} finished runs (exponent {:.2})",
            exponent(&starts, sizes)
        ),
        *starts.last().unwrap(),
        "ms",
        500.0,
    ));
    rows.push(row(
        format!(
            "daemon resident memory, {last} finished runs (exponent {:.2})",
            exponent(&mems, sizes)
        ),
        *mems.last().unwrap(),
        "MiB",
        40.0,
    ));
    rows.push(row(
        format!(
            "`run list --limit 50`, {last} finished runs (exponent {:.2})",
            exponent(&lists, sizes)
        ),
        *lists.last().unwrap(),
        "ms",
        5.0,
    ));
    rows.push(row(
        format!(
            "TUI first frame, {last} finished runs (exponent {:.2})",
            exponent(&frames, sizes)
        ),
        *frames.last().unwrap(),
        "ms",
        150.0,
    ));
    json!(table)
}

/// The live-agents figures.
pub fn live(rows: &mut Vec<Row>, agents: usize) {
    let env = TestEnv::new();
    // A sleeping shell takes a few MiB: admitted by that, all of them fit (`auto`'s 1 GiB
    // default estimate would let about 20 in on this machine).
    env.write_config("[agents.shell]\nmemory_estimate = \"16MiB\"\n");
    let (d, _) = start_timed(&env);
    let _cleanup = Cleanup {
        env: &env,
        pid: d.id(),
    };
    let repo = TestRepo::new(&env, "repo");
    let mut manifest = String::from("prompt = \"sleep 3600\"\n");
    for i in 0..agents {
        manifest.push_str(&format!("[[units]]\nid = \"u{i}\"\n"));
    }
    let t = Instant::now();
    let run = env.rpc(
        "fanout.start",
        json!({"manifest": manifest, "format": "toml", "repo": repo.path.display().to_string(), "agent": "shell", "max_parallel": agents}),
    )["id"]
        .as_str()
        .unwrap()
        .to_string();
    wait_until("every agent to run", Duration::from_secs(3600), || {
        let show = env.rpc("run.show", json!({"run": run}));
        (show["manifest"]["nodes"]["running"] == json!(agents)).then_some(())
    });
    let all_running = t.elapsed().as_secs_f64();
    // Spawn latency per node, from its log: node.starting → node.started.
    let events = env.log_events(&run);
    let ts = |e: &Value| octl_proto::time::parse_millis(e["ts"].as_str().unwrap()).unwrap();
    let latency = |node: &str| -> f64 {
        let of = |ty: &str| {
            events
                .iter()
                .find(|e| e["node"] == json!(node) && e["type"] == json!(ty))
                .map(ts)
                .unwrap()
        };
        (of("node.started") - of("node.starting")) as f64
    };
    let (first, last) = (latency("u0"), latency(&format!("u{}", agents - 1)));
    let firsts: Vec<f64> = (0..5).map(|i| latency(&format!("u{i}"))).collect();
    let lasts: Vec<f64> = (agents - 5..agents)
        .map(|i| latency(&format!("u{i}")))
        .collect();
    let (first5, last5) = (median(firsts), median(lasts));
    eprintln!("live {agents}: all running after {all_running:.1} s; spawn first {first:.0} ms (median of 5: {first5:.0}), last {last:.0} ms (median of 5: {last5:.0})");
    // CPU while they all sleep: the supervisor's ticks.
    std::thread::sleep(Duration::from_secs(2));
    let pid = d.id();
    let (c0, t0) = (cpu_s(pid), Instant::now());
    std::thread::sleep(Duration::from_secs(10));
    let cpu = (cpu_s(pid) - c0) / t0.elapsed().as_secs_f64() * 100.0;
    eprintln!("live {agents}: octld CPU {cpu:.2} % of a core while they sleep");
    // Event → redraw beside them: a generic run's node finishing, shown by its count.
    let other = env.create_run("beside the agents");
    let nodes = 40;
    for n in 0..nodes {
        for (ty, data) in [
            ("node.added", json!({})),
            ("node.progress", json!({"message": "working"})),
        ] {
            env.rpc(
                "event.append",
                json!({"run": other, "node": format!("n{n}"), "type": ty, "data": data}),
            );
        }
    }
    let home = env.home.display().to_string();
    let pane = Pane::start(
        &env,
        160,
        40,
        &[],
        &bin("orchestratectl"),
        &["--home", &home, "tui"],
    );
    pane.wait_for("beside the agents");
    let mut redraws = Vec::new();
    for n in 0..nodes {
        let t = Instant::now();
        env.rpc(
            "event.append",
            json!({"run": other, "node": format!("n{n}"), "type": "node.done", "data": {}}),
        );
        let want = format!("{} done", n + 1);
        pane.wait_screen("the redraw", |s| {
            s.lines()
                .any(|l| l.contains("beside the agents") && l.contains(&want))
        });
        redraws.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    pane.keys(&["q"]);
    redraws.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let p95 = redraws[((redraws.len() as f64 - 1.0) * 0.95).round() as usize];
    eprintln!("live {agents}: event → TUI redraw p95 {p95:.0} ms");
    rows.push(Row {
        metric: format!("{agents} live shell agents: octld CPU while they sleep"),
        ours: cpu,
        baseline: None,
        unit: "% of a core",
        target: "≤ 2 % of a core".into(),
        pass: cpu <= 2.0,
        skipped: None,
    });
    rows.push(Row {
        metric: format!("{agents} live agents: event → TUI redraw, p95 of {nodes}"),
        ours: p95,
        baseline: None,
        unit: "ms",
        target: "≤ 100 ms".into(),
        pass: p95 <= 100.0,
        skipped: None,
    });
    // The floor: git's own `worktree add` in a repository that has that many worktrees
    // already, against one that has none (it reads every worktree's HEAD).
    let add = |repo: &TestRepo, name: &str| -> f64 {
        let t = Instant::now();
        repo.git(&[
            "worktree",
            "add",
            "-q",
            "-b",
            name,
            &format!("../wt-{name}"),
            "main",
        ]);
        t.elapsed().as_secs_f64() * 1000.0
    };
    let fresh = TestRepo::new(&env, "fresh");
    let git_first = median((0..5).map(|i| add(&fresh, &format!("f{i}"))).collect());
    let git_last = median((0..5).map(|i| add(&repo, &format!("l{i}"))).collect());
    eprintln!("live {agents}: git worktree add {git_first:.0} ms in a fresh repository, {git_last:.0} ms beside {agents} worktrees");
    rows.push(Row {
        metric: format!(
            "git's own `worktree add`: beside {agents} worktrees vs none (medians of 5)"
        ),
        ours: git_last,
        baseline: Some(git_first),
        unit: "ms",
        target: "—".into(),
        pass: true,
        skipped: None,
    });
    rows.push(Row {
        metric: format!(
            "spawn latency of the last 5 of {agents} agents vs the first 5 (medians; all running after {all_running:.0} s)"
        ),
        ours: last5,
        baseline: Some(first5),
        unit: "ms",
        target: "≤ 2×".into(),
        pass: last5 <= 2.0 * first5,
        skipped: None,
    });
    let _ = env.try_rpc("run.cancel", json!({"run": run}));
    wait_until("the agents to end", Duration::from_secs(600), || {
        (env.rpc("run.show", json!({"run": run}))["manifest"]["status"] == json!("cancelled"))
            .then_some(())
    });
    stop(&env, d);
}
