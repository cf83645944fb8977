//! `bench admission [--units 40] [--mib 1024] [--hold 5] [--max-parallel auto]`: a fan-out of
//! memory-hungry shell agents (python3 allocating and touching `--mib` MiB each, holding it
//! `--hold` seconds) with `max_parallel = "auto"` (or the number given, for a comparison) and
//! the default `[limits]`, on the real daemon. Throughout,
//! `MemAvailable` is sampled every 20 ms; at the end: the least seen (target: never under
//! 2 GiB), the most agents alive at once (from the log), OOM kills in the kernel's log during
//! the run (target: none), and whether every unit merged.

use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use octl_tests::TestEnv;
use serde_json::{json, Value};

use super::Row;

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Allocates and touches `argv[1]` MiB, holds it `argv[2]` seconds, exits 0.
const ALLOCATE: &str = r#"import sys, time
mib, hold = int(sys.argv[1]), float(sys.argv[2])
block = bytearray(mib << 20)
for i in range(0, len(block), 4096):
    block[i] = 1
time.sleep(hold)
"#;

fn mem_available() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("MemAvailable:"))?
                .split_whitespace()
                .nth(1)?
                .parse::<u64>()
                .ok()
        })
        .map_or(0, |kib| kib * 1024)
}

/// OOM kills the kernel has logged so far (`dmesg`; none readable: `None`).
fn oom_kills() -> Option<usize> {
    let out = Command::new("dmesg").output().ok()?;
    out.status.success().then(|| {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.contains("oom-kill:") || l.contains("Out of memory"))
            .count()
    })
}

/// The most agents alive at once, replayed from the log.
fn max_alive(events: &[Value]) -> usize {
    let mut alive = std::collections::HashSet::new();
    let mut max = 0;
    for e in events {
        let node = e["node"].as_str().unwrap_or("").to_string();
        match e["type"].as_str().unwrap_or("") {
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

pub fn run(rows: &mut Vec<Row>, units: usize, mib: u64, hold: f64, cap: Value) {
    let env = TestEnv::new();
    let _d = env.start_daemon();
    let repo = octl_tests::TestRepo::new(&env, "repo");
    let script = env.root.path().join("allocate.py");
    std::fs::write(&script, ALLOCATE).unwrap();
    let mut manifest = format!(
        "prompt = 'python3 {} {mib} {hold} && printf {{n}} > u{{n}}.txt'\n",
        script.display()
    );
    for i in 0..units {
        manifest.push_str(&format!(
            "[[units]]\nid = \"u{i}\"\nvars = {{ n = \"{i}\" }}\n"
        ));
    }
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("MemTotal:"))?
                .split_whitespace()
                .nth(1)?
                .parse::<u64>()
                .ok()
        })
        .unwrap_or(0)
        * 1024;
    let before = mem_available();
    let kills_before = oom_kills();
    let stop = Arc::new(AtomicBool::new(false));
    let least = Arc::new(AtomicU64::new(u64::MAX));
    let sampler = {
        let (stop, least) = (stop.clone(), least.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                least.fetch_min(mem_available(), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    eprintln!(
        "admission: {units} agents of {mib} MiB, {:.1} GiB available of {:.1} GiB",
        before as f64 / GIB,
        total as f64 / GIB
    );
    let start = Instant::now();
    let run = env.rpc(
        "fanout.start",
        json!({"manifest": manifest, "format": "toml", "repo": repo.path.display().to_string(), "agent": "shell", "max_parallel": cap}),
    )["id"]
        .as_str()
        .unwrap()
        .to_string();
    let show = octl_tests::wait_until("the fan-out", Duration::from_secs(3600), || {
        let show = env.rpc("run.show", json!({"run": run}));
        (show["manifest"]["status"] != json!("active")).then_some(show)
    });
    let wall = start.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    sampler.join().unwrap();
    let least = least.load(Ordering::Relaxed);
    let kills = oom_kills()
        .zip(kills_before)
        .map(|(a, b)| a.saturating_sub(b));
    let merged = show["manifest"]["nodes"]["merged"].as_u64().unwrap_or(0);
    let alive = max_alive(&env.log_events(&run));
    rows.push(Row {
        metric: format!(
            "admission: {units} agents of {mib} MiB, max_parallel {cap}: least MemAvailable seen"
        ),
        ours: least as f64 / GIB,
        baseline: None,
        unit: "GiB",
        target: "≥ 2 GiB".into(),
        pass: least as f64 >= 2.0 * GIB,
        skipped: None,
    });
    rows.push(Row {
        metric: format!(
            "admission: most agents alive at once ({:.1} GiB available at the start)",
            before as f64 / GIB
        ),
        ours: alive as f64,
        baseline: None,
        unit: "agents",
        target: "—".into(),
        pass: true,
        skipped: None,
    });
    rows.push(Row {
        metric: "admission: OOM kills in the kernel's log during the run".into(),
        ours: kills.unwrap_or(0) as f64,
        baseline: None,
        unit: "kills",
        target: "0".into(),
        pass: kills == Some(0),
        skipped: kills.is_none().then(|| "dmesg not readable".to_string()),
    });
    rows.push(Row {
        metric: format!(
            "admission: units merged (run {})",
            show["manifest"]["status"]
        ),
        ours: merged as f64,
        baseline: Some(units as f64),
        unit: "units",
        target: format!("{units}"),
        pass: merged == units as u64,
        skipped: None,
    });
    rows.push(Row {
        metric: "admission: wall time of the fan-out".into(),
        ours: wall,
        baseline: None,
        unit: "s",
        target: "—".into(),
        pass: true,
        skipped: None,
    });
}
