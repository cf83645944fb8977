//! `bench`: performance figures of orchestratectl next to baselines measured in the same run.
//!
//! ```text
//! cargo build --release --workspace --bins
//! target/release/bench all            # or: appends | run-list
//! ```
//! Prints a table (metric, ours, baseline, ratio, target, pass/miss) and writes the same rows as
//! JSON to `target/bench.json` (or `--out FILE`). Figures are medians of interleaved rounds.

use std::fs::OpenOptions;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use octl_tests::{http, TestEnv};
use serde_json::{json, Value};

const ROUNDS: usize = 3;
const SECONDS_PER_POINT: f64 = 2.0;

struct Row {
    metric: String,
    ours: f64,
    baseline: Option<f64>,
    unit: &'static str,
    target: String,
    pass: bool,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// One writer appending a line and `fdatasync`ing it, in a loop: the disk's own limit.
fn disk_limit(dir: &std::path::Path) -> f64 {
    let path = dir.join("bench-disk-limit.jsonl");
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .unwrap();
    let line = format!(
        "{}\n",
        json!({"v":1,"seq":1,"id":"01JDXK0000000000000000000A","type":"x.tick","data":{}})
    );
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed().as_secs_f64() < SECONDS_PER_POINT {
        f.write_all(line.as_bytes()).unwrap();
        f.sync_data().unwrap();
        n += 1;
    }
    let rate = n as f64 / start.elapsed().as_secs_f64();
    let _ = std::fs::remove_file(path);
    rate
}

/// `clients` threads appending to one run over the socket for a fixed time.
fn socket_appends(env: &Arc<TestEnv>, clients: usize) -> f64 {
    let run = env.create_run(&format!("bench {clients} clients"));
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            let (env, run, stop, count) = (env.clone(), run.clone(), stop.clone(), count.clone());
            std::thread::spawn(move || {
                // Each client keeps its connection, as a long-lived program would.
                let mut conn = http::Conn::open(&env.socket()).unwrap();
                let body = json!({"jsonrpc": "2.0", "id": 1, "method": "event.append",
                    "params": {"run": run, "type": "x.tick", "data": {}}})
                .to_string();
                while !stop.load(Ordering::Relaxed) {
                    let r = conn.post_rpc(body.as_bytes()).unwrap();
                    assert!(r.json()["result"]["seq"].is_u64(), "append failed: {r:?}");
                    count.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs_f64(SECONDS_PER_POINT));
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    count.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}

fn appends(rows: &mut Vec<Row>) {
    let env = Arc::new(TestEnv::new());
    let _d = env.start_daemon();
    let mut disk = Vec::new();
    let mut ours: [Vec<f64>; 3] = Default::default();
    for round in 0..ROUNDS {
        eprintln!("appends: round {}/{ROUNDS}", round + 1);
        disk.push(disk_limit(&env.home));
        for (i, c) in [1, 8, 32].into_iter().enumerate() {
            ours[i].push(socket_appends(&env, c));
        }
    }
    let disk = median(disk);
    for (i, c) in [1, 8, 32].into_iter().enumerate() {
        let rate = median(ours[i].clone());
        let (target, pass) = if c == 32 {
            ("≥ 3× disk limit".to_string(), rate >= 3.0 * disk)
        } else {
            ("—".to_string(), true)
        };
        rows.push(Row {
            metric: format!("durable appends/s, {c} client(s)"),
            ours: rate,
            baseline: Some(disk),
            unit: "/s",
            target,
            pass,
        });
    }
}

fn run_list(rows: &mut Vec<Row>) {
    let env = TestEnv::new();
    let _d = env.start_daemon();
    for i in 0..100 {
        let run = env.create_run(&format!("bench run {i}"));
        env.rpc(
            "event.append",
            json!({"run": run, "node": "a", "type": "node.added"}),
        );
    }
    let time = || {
        let start = Instant::now();
        let out = env.cli(["--json", "run", "list"]);
        let t = start.elapsed().as_secs_f64() * 1000.0;
        assert_eq!(out.code, 0, "{out:?}");
        assert_eq!(out.json().as_array().unwrap().len(), 100);
        t
    };
    for _ in 0..5 {
        time();
    }
    let samples: Vec<f64> = (0..60).map(|_| time()).collect();
    let ms = median(samples);
    rows.push(Row {
        metric: "`orchestratectl --json run list`, 100 runs (median)".into(),
        ours: ms,
        baseline: None,
        unit: "ms",
        target: "≤ 5 ms".into(),
        pass: ms <= 5.0,
    });
}

/// `spawn.spinoff` (request → agent process running) next to the bare commands doing the same
/// work: `git worktree add -b` and `tmux new-window`.
fn spawn(rows: &mut Vec<Row>) {
    use std::process::Command;
    let env = TestEnv::new();
    let _d = env.start_daemon();
    let repo = octl_tests::TestRepo::new(&env, "repo");
    let bare_sock = env.root.path().join("bare-tmux.sock");
    let tmux = |args: &[&str]| {
        let out = Command::new("tmux")
            .arg("-S")
            .arg(&bare_sock)
            .arg("-f")
            .arg("/dev/null")
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    tmux(&[
        "new-session",
        "-d",
        "-s",
        "bare",
        "-x",
        "200",
        "-y",
        "50",
        "sleep 600",
    ]);
    let mut ours = Vec::new();
    let mut bare = Vec::new();
    for i in 0..15 {
        let start = Instant::now();
        let r = env.spawn(
            "spinoff",
            &repo,
            "sleep 600",
            json!({"agent": "shell", "node": format!("n{i}")}),
        );
        ours.push(start.elapsed().as_secs_f64() * 1000.0);
        assert!(r.is_ok(), "{r:?}");

        let wt = env.root.path().join(format!("bare-wt-{i}"));
        let start = Instant::now();
        repo.git(&[
            "worktree",
            "add",
            "-q",
            "-b",
            &format!("bare/{i}"),
            wt.to_str().unwrap(),
            "main",
        ]);
        tmux(&[
            "new-window",
            "-d",
            "-t",
            "bare",
            "-c",
            wt.to_str().unwrap(),
            "sleep 600",
        ]);
        bare.push(start.elapsed().as_secs_f64() * 1000.0);
    }
    tmux(&["kill-server"]);
    let (o, b) = (median(ours), median(bare));
    rows.push(Row {
        metric: "spawn latency: request → agent running (median of 15)".into(),
        ours: o,
        baseline: Some(b),
        unit: "ms",
        target: "≤ 1.2× bare".into(),
        pass: o <= 1.2 * b,
    });
}

/// Fan-out of 50 `shell` units at cap 8, next to a plain script doing the same git work in
/// sequence (worktree add, commit, merge, worktree remove).
fn fanout(rows: &mut Vec<Row>) {
    const UNITS: usize = 50;
    let env = TestEnv::new();
    let _d = env.start_daemon();
    let mut ours = Vec::new();
    let mut plain = Vec::new();
    for round in 0..3 {
        eprintln!("fan-out: round {}/3", round + 1);
        // Ours.
        let repo = octl_tests::TestRepo::new(&env, &format!("ours-{round}"));
        let mut manifest = String::from("prompt = \"printf 'unit {n}\\\\n' > f{n}.txt\"\n");
        for i in 0..UNITS {
            manifest.push_str(&format!(
                "[[units]]\nid = \"u{i}\"\nvars = {{ n = \"{i}\" }}\n"
            ));
        }
        let start = Instant::now();
        let run = env.rpc(
            "fanout.start",
            json!({"manifest": manifest, "format": "toml", "repo": repo.path.display().to_string(), "agent": "shell", "max_parallel": 8}),
        )["id"]
            .as_str()
            .unwrap()
            .to_string();
        let show = octl_tests::wait_until("the fan-out", Duration::from_secs(600), || {
            let show = env.rpc("run.show", json!({"run": run}));
            (show["manifest"]["status"] != json!("active")).then_some(show)
        });
        ours.push(start.elapsed().as_secs_f64());
        assert_eq!(show["manifest"]["status"], json!("completed"), "{show}");

        // The same git work by a plain script, in sequence.
        let repo = octl_tests::TestRepo::new(&env, &format!("plain-{round}"));
        let script = format!(
            "set -e; cd {repo}; for i in $(seq 0 {last}); do \
               git worktree add -q -b b/$i ../wt-{round}-$i main; \
               printf 'unit %s\\n' $i > ../wt-{round}-$i/f$i.txt; \
               git -C ../wt-{round}-$i add -A; git -C ../wt-{round}-$i commit -q -m \"unit $i\"; \
               git merge -q --no-edit b/$i; \
               git worktree remove ../wt-{round}-$i; git branch -q -d b/$i; done",
            repo = repo.path.display(),
            last = UNITS - 1
        );
        let start = Instant::now();
        let mut cmd = std::process::Command::new("sh");
        cmd.arg("-c").arg(&script);
        env.isolate(&mut cmd);
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        plain.push(start.elapsed().as_secs_f64());
    }
    let (o, p) = (median(ours), median(plain));
    rows.push(Row {
        metric: format!("fan-out of {UNITS} shell units at cap 8: wall time"),
        ours: o * 1000.0,
        baseline: Some(p * 1000.0),
        unit: "ms",
        target: "—".into(),
        pass: true,
    });
    let overhead = (o - p) * 1000.0 / UNITS as f64;
    rows.push(Row {
        metric: "fan-out: orchestration overhead per unit beyond the git work".into(),
        ours: overhead,
        baseline: None,
        unit: "ms",
        target: "≤ 50 ms".into(),
        pass: overhead <= 50.0,
    });
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let what = args.first().map(String::as_str).unwrap_or("all");
    let out = args
        .iter()
        .position(|a| a == "--out")
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| "target/bench.json".into());
    let mut rows = Vec::new();
    match what {
        "appends" => appends(&mut rows),
        "run-list" => run_list(&mut rows),
        "spawn" => spawn(&mut rows),
        "fanout" => fanout(&mut rows),
        "all" => {
            run_list(&mut rows);
            appends(&mut rows);
            spawn(&mut rows);
            fanout(&mut rows);
        }
        other => {
            eprintln!("unknown benchmark {other:?}: use all, appends, run-list, spawn or fanout");
            std::process::exit(2);
        }
    }
    println!("| metric | ours | baseline | ratio | target | result |");
    println!("|---|---|---|---|---|---|");
    let mut json_rows: Vec<Value> = Vec::new();
    for r in &rows {
        let ratio = r.baseline.map(|b| r.ours / b);
        println!(
            "| {} | {:.1} {} | {} | {} | {} | {} |",
            r.metric,
            r.ours,
            r.unit,
            r.baseline
                .map(|b| format!("{b:.1} {}", r.unit))
                .unwrap_or_else(|| "—".into()),
            ratio
                .map(|x| format!("{x:.2}×"))
                .unwrap_or_else(|| "—".into()),
            r.target,
            if r.pass { "pass" } else { "miss" }
        );
        json_rows.push(json!({"metric": r.metric, "ours": r.ours, "baseline": r.baseline, "unit": r.unit, "ratio": ratio, "target": r.target, "pass": r.pass}));
    }
    let doc = json!({"rows": json_rows, "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)});
    if let Some(parent) = std::path::Path::new(&out).parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    std::fs::write(&out, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    eprintln!("wrote {out}");
}
