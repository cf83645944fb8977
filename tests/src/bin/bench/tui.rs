//! `bench tui`: `orchestratectl tui` on a home of 1,000 runs × 10 nodes (logs written straight
//! to disk, then the real daemon started on them), in a real terminal (a tmux pane): the time
//! from starting the process to its first full frame, from appending an event to the redraw
//! that shows it (p95), its CPU while nothing changes, and its resident memory.
//!
//! The screen is read with `capture-pane` (each read is a tmux process, ~2 ms: the timings
//! include up to one read's delay). The TUI waits in a shell (`read`) so that tmux's own start
//! is not counted; the `send-keys` that releases it is.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use octl_proto::{Actor, Event};
use octl_tests::{wait_until, Pane, TestEnv};
use serde_json::json;

use super::{rss_kib, BigDaemon, Row};

const RUNS: usize = 1000;
const NODES: usize = 10;
const SAMPLES: usize = 60;

/// One run's log: `run.created`, 10 nodes (each after the previous one for the first three),
/// half of them running, the first done; every tenth run has an open question. Returns the
/// id and its last seq.
fn write_run(home: &Path, i: usize) -> (String, u64) {
    let id = octl_proto::ids::new_ulid();
    let dir = home.join("runs").join(&id);
    std::fs::create_dir_all(&dir).unwrap();
    let ts = octl_proto::time::format_millis(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64,
    );
    let mut out = std::io::BufWriter::new(std::fs::File::create(dir.join("events.jsonl")).unwrap());
    let mut seq = 0;
    let mut push = |node: Option<String>, kind: &str, data: serde_json::Value| {
        seq += 1;
        let ev = Event {
            v: 1,
            seq,
            id: octl_proto::ids::new_ulid(),
            ts: ts.clone(),
            run: id.clone(),
            node,
            kind: kind.into(),
            actor: Actor::Tool,
            data: data.as_object().unwrap().clone(),
            idempotency_key: None,
        };
        out.write_all(ev.to_line().as_bytes()).unwrap();
        out.write_all(b"\n").unwrap();
    };
    push(
        None,
        "run.created",
        json!({"kind": "generic", "title": format!("bench run {i}")}),
    );
    for n in 0..NODES {
        let deps = if (1..3).contains(&n) {
            json!([format!("n{}", n - 1)])
        } else {
            json!([])
        };
        push(Some(format!("n{n}")), "node.added", json!({"deps": deps}));
    }
    for n in 0..NODES / 2 {
        push(
            Some(format!("n{n}")),
            "node.progress",
            json!({"message": "working"}),
        );
    }
    push(Some("n0".into()), "node.done", json!({}));
    if i.is_multiple_of(10) {
        push(
            None,
            "discussion.opened",
            json!({"id": "q1", "node": "n1", "title": "which way?"}),
        );
    }
    out.into_inner().unwrap().sync_all().unwrap();
    (id, seq)
}

/// CPU time of a process so far, in seconds (utime + stime of `/proc/<pid>/stat`).
fn cpu_s(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which may hold spaces) in parentheses.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    ticks / 100.0
}

fn percentile(mut v: Vec<f64>, p: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

pub fn timings(rows: &mut Vec<Row>) {
    let env = TestEnv::new();
    let runs: Vec<(String, u64)> = (0..RUNS).map(|i| write_run(&env.home, i)).collect();
    let _d = BigDaemon::start(&env);
    let pane = Pane::tui_on_enter(&env, 120, 40);
    let start = Instant::now();
    pane.keys(&["Enter"]);
    // Full: the header counts every run and the list is drawn to the bottom row.
    pane.wait_screen("the first full frame", |s| {
        s.contains(&format!("{RUNS} runs"))
            && s.lines().filter(|l| l.contains("bench run")).count() >= 30
    });
    let first_frame = start.elapsed().as_secs_f64() * 1000.0;
    let pid = pane.pid();

    // Wait until every log is read (the process goes quiet), then measure while idle.
    wait_until(
        "the tui to finish reading the logs",
        Duration::from_secs(120),
        || {
            let a = cpu_s(pid);
            std::thread::sleep(Duration::from_millis(1000));
            (cpu_s(pid) - a < 0.02).then_some(())
        },
    );
    let idle_window = Duration::from_secs(10);
    let (c0, t0) = (cpu_s(pid), Instant::now());
    std::thread::sleep(idle_window);
    let idle_cpu = (cpu_s(pid) - c0) / t0.elapsed().as_secs_f64() * 100.0;
    let rss = rss_kib(pid) / 1024.0;

    // The newest runs are on top (after the questions): their node counts change as nodes
    // finish; each sample is one `node.done` and the redraw that shows the new count.
    // (The rows on screen are found by their titles, `bench run I`; runs with a question
    // are left out, they sit above the others.)
    let screen = pane.screen();
    let shown: Vec<usize> = screen
        .lines()
        .filter_map(|l| l.trim_end().rsplit("bench run ").next()?.parse().ok())
        .filter(|i: &usize| !i.is_multiple_of(10))
        .take(SAMPLES / (NODES - 1) + 1)
        .collect();
    let mut latencies = Vec::new();
    'outer: for i in shown {
        let (id, _) = &runs[i];
        let title = format!("bench run {i}");
        for n in 1..NODES {
            if latencies.len() == SAMPLES {
                break 'outer;
            }
            let done = format!(" {} done", n + 1);
            // From the append's answer: the event is committed (on disk) from then on.
            env.rpc(
                "event.append",
                json!({"run": id, "node": format!("n{n}"), "type": "node.done"}),
            );
            let t = Instant::now();
            pane.wait_screen("the redraw after an append", |s| {
                s.lines()
                    .any(|l| l.trim_end().ends_with(&title) && l.contains(&done))
            });
            latencies.push(t.elapsed().as_secs_f64() * 1000.0);
        }
    }
    let p95 = percentile(latencies.clone(), 0.95);
    let p50 = percentile(latencies, 0.5);
    pane.keys(&["q"]);

    let row = |metric: &str, ours: f64, unit: &'static str, target: &str, pass: bool| Row {
        metric: metric.into(),
        ours,
        baseline: None,
        unit,
        target: target.into(),
        pass,
        skipped: None,
    };
    rows.push(row(
        "tui: process start to first full frame, 1,000 runs × 10 nodes",
        first_frame,
        "ms",
        "≤ 100 ms",
        first_frame <= 100.0,
    ));
    rows.push(row(
        "tui: appended event to redraw, p50",
        p50,
        "ms",
        "—",
        true,
    ));
    rows.push(row(
        "tui: appended event to redraw, p95",
        p95,
        "ms",
        "≤ 50 ms",
        p95 <= 50.0,
    ));
    rows.push(row(
        "tui: CPU while idle",
        idle_cpu,
        "% of a core",
        "≤ 0.5 %",
        idle_cpu <= 0.5,
    ));
    rows.push(row(
        "tui: resident memory, 1,000 runs × 10 nodes",
        rss,
        "MiB",
        "≤ 30 MiB",
        rss <= 30.0,
    ));
}
