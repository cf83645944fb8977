//! `bench hook`'s figures on a live agent: a `shell` spinoff whose task sleeps, in a fresh
//! repository, on the real daemon; the hooks run with its `OCTL_RUN`/`OCTL_NODE`, as its agent's
//! would.
//!
//! - **Activity**: `orchestratectl hook PreToolUse` with a tool call Claude Code allows on its
//!   own (`Bash: ls`) on stdin, interleaved with `/bin/true` and a no-op Rust binary fed the
//!   same bytes; p50 and p95 of each.
//! - **Decision**: `orchestratectl hook PermissionAsk` started in the background; once its
//!   request is pending in `run.show` (and a moment more, so the hook is inside its
//!   `node.permission_wait`), the time from issuing the decision to the hook's exit with the
//!   decision on its stdout. Rounds alternate the decision's path: `orchestratectl node allow
//!   RUN --node N --request ID` (a person at a shell: the CLI's own start included) and the
//!   `node.permission_decide` call made from here on a new connection (the daemon's and the
//!   hook's share alone).

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use octl_tests::{wait_until, TestEnv, TestRepo};
use serde_json::{json, Value};

use super::{time_piped, Row};

const WARMUP: usize = 20;

/// The value at quantile `q` of `v` (nearest rank).
fn percentile(v: &[f64], q: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let rank = (q * s.len() as f64).ceil() as usize;
    s[rank.clamp(1, s.len()) - 1]
}

fn max(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::MIN, f64::max)
}

/// Both figures on one live node. `open_files`: every process's open-file limit (the daemon,
/// the CLI, the hooks, the baselines), as `ulimit -n` sets it.
pub fn live(rows: &mut Vec<Row>, samples: usize, decisions: usize, open_files: Option<u64>) {
    let mut env = TestEnv::new();
    if let Some(n) = open_files {
        env.limit_open_files(n);
    }
    let _d = env.start_daemon();
    let repo = TestRepo::new(&env, "repo");
    let spawned = env
        .spawn(
            "spinoff",
            &repo,
            "sleep 600",
            json!({"agent": "shell", "node": "a"}),
        )
        .unwrap_or_else(|e| panic!("spawn: {e}"));
    let run = spawned["id"].as_str().unwrap().to_string();
    env.wait_node(&run, "a", "running");
    let limit = open_files.map_or(String::new(), |n| format!(", {n} open files"));
    activity(rows, &env, &run, samples, &limit);
    decision(rows, &env, &run, decisions, &limit);
}

fn activity(rows: &mut Vec<Row>, env: &TestEnv, run: &str, samples: usize, limit: &str) {
    let input =
        br#"{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls"}}"#;
    let cli = octl_tests::bin("orchestratectl");
    let me = std::env::current_exe().unwrap();
    let agent = [("OCTL_RUN", run), ("OCTL_NODE", "a")];
    let truebin = std::path::Path::new("/bin/true");
    let before = count(env, run, "node.activity");
    let (mut truth, mut noop, mut hook) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..samples + WARMUP {
        let t = time_piped(env, truebin, &[], &[], input);
        let n = time_piped(env, &me, &["--noop"], &[], input);
        let h = time_piped(env, &cli, &["hook", "PreToolUse"], &agent, input);
        // The first rounds warm the page cache.
        if i >= WARMUP {
            truth.push(t);
            noop.push(n);
            hook.push(h);
        }
    }
    let recorded = count(env, run, "node.activity") - before;
    assert_eq!(
        recorded,
        samples + WARMUP,
        "every hook on the live node was recorded"
    );
    let show = env.rpc("run.show", json!({"run": run}));
    assert_eq!(
        show["nodes"][0]["activity"]["detail"],
        json!("Bash: ls"),
        "{show}"
    );
    let p = |v: &[f64]| (percentile(v, 0.5), percentile(v, 0.95));
    let ((t50, t95), (n50, n95), (h50, h95)) = (p(&truth), p(&noop), p(&hook));
    eprintln!(
        "hook live{limit}: /bin/true p50 {t50:.2} p95 {t95:.2} ms, no-op p50 {n50:.2} p95 {n95:.2} ms, \
         hook PreToolUse p50 {h50:.2} p95 {h95:.2} max {:.2} ms",
        max(&hook)
    );
    let mut row = |metric: String, ours: f64, baseline: f64, target: &str, pass: bool| {
        rows.push(Row {
            metric,
            ours,
            baseline: Some(baseline),
            unit: "ms",
            target: target.into(),
            pass,
            skipped: None,
        })
    };
    row(
        format!("hook PreToolUse (Bash: ls) on a live shell node, p50 of {samples}, vs `/bin/true` fed the same stdin{limit}"),
        h50,
        t50,
        "≤ 3×",
        h50 <= 3.0 * t50,
    );
    row(
        format!("the same, p95, vs `/bin/true`'s p95{limit}"),
        h95,
        t95,
        "≤ 3×",
        h95 <= 3.0 * t95,
    );
    row(
        format!("the same, p50, vs a no-op Rust binary's p50{limit}"),
        h50,
        n50,
        "—",
        true,
    );
    row(
        format!("the same, p95, vs a no-op Rust binary's p95{limit}"),
        h95,
        n95,
        "—",
        true,
    );
}

fn count(env: &TestEnv, run: &str, kind: &str) -> usize {
    env.log_events(run)
        .iter()
        .filter(|e| e["type"] == json!(kind))
        .count()
}

/// The node's open request, once `run.show` lists it.
fn pending(env: &TestEnv, run: &str) -> String {
    wait_until(
        "the hook's request pending",
        Duration::from_secs(30),
        || {
            let show = env.rpc("run.show", json!({"run": run}));
            show["permissions"].as_array().and_then(|ps| {
                ps.iter()
                    .find(|p| p["node"] == json!("a") && p["decision"].is_null())
                    .and_then(|p| p["request"].as_str().map(str::to_string))
            })
        },
    )
}

fn decision(rows: &mut Vec<Row>, env: &TestEnv, run: &str, rounds: usize, limit: &str) {
    let input = br#"{"hook_event_name":"PermissionRequest","tool_name":"Bash","tool_input":{"command":"python3 x.py"}}"#;
    let cli = octl_tests::bin("orchestratectl");
    // (issued → hook exited, issued → decider returned), by the decision's path.
    let (mut by_cli, mut by_rpc) = (Vec::new(), Vec::new());
    for i in 0..2 * (rounds + 1) {
        let mut cmd = Command::new(&cli);
        cmd.args(["hook", "PermissionAsk"]);
        env.isolate(&mut cmd);
        cmd.envs([("OCTL_RUN", run), ("OCTL_NODE", "a")])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = cmd.spawn().unwrap();
        child.stdin.take().unwrap().write_all(input).unwrap();
        let request = pending(env, run);
        // Into its `node.permission_wait`, where a waiting hook spends its time.
        std::thread::sleep(Duration::from_millis(50));
        let waiter = std::thread::spawn(move || {
            let out = child.wait_with_output().unwrap();
            (Instant::now(), out)
        });
        let via_cli = i % 2 == 0;
        let start = Instant::now();
        if via_cli {
            let out = env.cli(["node", "allow", run, "--node", "a", "--request", &request]);
            assert_eq!(out.code, 0, "{out:?}");
        } else {
            env.rpc(
                "node.permission_decide",
                json!({"run": run, "node": "a", "request": request, "behavior": "allow"}),
            );
        }
        let decided = start.elapsed().as_secs_f64() * 1000.0;
        let (ended, out) = waiter.join().unwrap();
        let took = ended.duration_since(start).as_secs_f64() * 1000.0;
        let said: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("the hook's stdout {:?}: {e}", out.stdout));
        assert_eq!(
            said["hookSpecificOutput"]["decision"]["behavior"],
            json!("allow"),
            "{said}"
        );
        if i >= 2 {
            // The first round of each path warms up.
            let v = if via_cli { &mut by_cli } else { &mut by_rpc };
            v.push((took, decided));
        }
    }
    let n = by_cli.len();
    for (path, v) in [
        ("`orchestratectl node allow`", &by_cli),
        ("`node.permission_decide` on a new connection", &by_rpc),
    ] {
        let took: Vec<f64> = v.iter().map(|x| x.0).collect();
        let decided: Vec<f64> = v.iter().map(|x| x.1).collect();
        let (p50, p95, worst) = (percentile(&took, 0.5), percentile(&took, 0.95), max(&took));
        eprintln!(
            "hook decision{limit}, {path}: to the hook's exit p50 {p50:.1} p95 {p95:.1} max {worst:.1} ms; \
             the decider itself p50 {:.1} max {:.1} ms",
            percentile(&decided, 0.5),
            max(&decided)
        );
        for (q, ours) in [("p50", p50), ("p95", p95), ("max", worst)] {
            rows.push(Row {
                metric: format!(
                    "decision by {path} → hook PermissionAsk exits with it, {q} of {n}{limit}"
                ),
                ours,
                baseline: None,
                unit: "ms",
                target: "≤ 200 ms".into(),
                pass: ours <= 200.0,
                skipped: None,
            });
        }
        rows.push(Row {
            metric: format!("decision by {path}: the decider's own return, p50 of {n}{limit}"),
            ours: percentile(&decided, 0.5),
            baseline: None,
            unit: "ms",
            target: "—".into(),
            pass: true,
            skipped: None,
        });
    }
}
