//! `bench slurm` and `bench ssh` (root: they start the test cluster, `tests/cluster/up.sh`):
//! 20 units of `sleep 1` as one fan-out through octld on the runner, next to the same 20 as a
//! bare loop — `sbatch --wrap` for each, or `ssh HOST` for each (alternating hosts) — taking
//! turns round by round. Two figures each: the wall time, from the fan-out's start to its run
//! completed (every unit's job or window started, run, its work fetched and merged) against
//! the loop's start to its last job `COMPLETED` or its last `ssh` ended; and each unit's start
//! latency, the time its first command ran after the start, ours minus the bare one of the
//! same index (the median and the worst of the 20).

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use octl_tests::cluster::{Cluster, Turn};
use octl_tests::{wait_until, TestEnv, TestRepo};
use serde_json::json;

use super::{median, Row};

/// Units per fan-out, and the loop's length.
const UNITS: usize = 20;

/// How often a wait looks (both sides alike).
const POLL: Duration = Duration::from_millis(10);

fn poll<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(POLL);
    }
}

/// Which runner a bench measures.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Slurm,
    Ssh,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Slurm => "slurm",
            Kind::Ssh => "ssh",
        }
    }
}

fn env_on(c: &Cluster, kind: Kind) -> TestEnv {
    let mut env = TestEnv::new();
    for (k, v) in c.env() {
        env.set_env(k, v);
    }
    env.set_env("PATH", &c.path());
    // Checkpoints as in a real run: none during a 1 s agent, the one at its end.
    env.set_env("OCTL_SLURM_CHECKPOINT_S", "60");
    env.set_env("OCTL_SSH_CHECKPOINT_S", "60");
    let hosts: Vec<String> = c.ssh_hosts.iter().map(|h| format!("\"{h}\"")).collect();
    std::fs::create_dir_all(&env.home).unwrap();
    std::fs::write(
        env.home.join("config.toml"),
        match kind {
            Kind::Slurm => format!(
                "[runners.far]\nkind = \"slurm\"\npartition = \"{}\"\n",
                c.partition
            ),
            // Room for every unit at once, as Slurm's 3 × 8 CPUs have.
            Kind::Ssh => format!(
                "[runners.far]\nkind = \"ssh\"\nhosts = [{}]\nslots = {}\n",
                hosts.join(", "),
                UNITS / c.ssh_hosts.len() + 1
            ),
        },
    )
    .unwrap();
    env
}

/// Seconds since the epoch, as `date +%s.%N` prints them.
fn now_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// The times (since the epoch) written in `dir/0` … `dir/<UNITS - 1>`, once all are there.
fn marks(dir: &Path) -> Vec<f64> {
    poll("every unit's first command", || {
        (0..UNITS)
            .map(|i| {
                std::fs::read_to_string(dir.join(i.to_string()))
                    .ok()?
                    .trim()
                    .parse::<f64>()
                    .ok()
            })
            .collect::<Option<Vec<f64>>>()
    })
}

/// One fan-out of `UNITS` × `sleep 1` through octld: (wall seconds, each unit's start latency).
fn ours(env: &TestEnv, repo: &TestRepo, round: usize) -> (f64, Vec<f64>) {
    let dir = env.root.path().join(format!("ours-{round}"));
    std::fs::create_dir_all(&dir).unwrap();
    let mut manifest = format!(
        "prompt = \"date +%s.%N > {}/{{n}}; sleep 1\"\nagent = \"shell\"\nrunner = \"far\"\n",
        dir.display()
    );
    for i in 0..UNITS {
        manifest.push_str(&format!(
            "[[units]]\nid = \"u{i}\"\nvars = {{ n = \"{i}\" }}\n"
        ));
    }
    let (t0, start) = (now_s(), Instant::now());
    let run = env.rpc(
        "fanout.start",
        json!({"manifest": manifest, "format": "toml",
               "repo": repo.path.display().to_string(), "max_parallel": UNITS}),
    )["id"]
        .as_str()
        .unwrap()
        .to_string();
    let show = wait_until("the fan-out", Duration::from_secs(600), || {
        let show = env.rpc("run.show", json!({"run": run}));
        (show["manifest"]["status"] != json!("active")).then_some(show)
    });
    let wall = start.elapsed().as_secs_f64();
    if let Some(keep) = std::env::var_os("OCTL_BENCH_TIMELINE") {
        timeline(env, &run, t0);
        let _ = std::fs::copy(env.home.join("octld.log"), keep);
    }
    assert_eq!(show["manifest"]["status"], json!("completed"), "{show}");
    (wall, marks(&dir).into_iter().map(|m| m - t0).collect())
}

/// Where the time of a fan-out went, node by node (`OCTL_BENCH_TIMELINE=FILE`, which also
/// gets the daemon's debug log): seconds after the start of its `node.starting`,
/// `node.started`, `node.done`, `merge.succeeded` and `cleanup.done`.
fn timeline(env: &TestEnv, run: &str, t0: f64) {
    let mut at: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for e in env.log_events(run) {
        let (Some(node), Some(ts)) = (e["node"].as_str(), e["ts"].as_str()) else {
            continue;
        };
        let t = octl_proto::time::parse_millis(ts).unwrap_or(0) as f64 / 1000.0 - t0;
        let ty = e["type"].as_str().unwrap_or("");
        if matches!(
            ty,
            "node.starting" | "node.started" | "node.done" | "merge.succeeded" | "cleanup.done"
        ) {
            at.entry(node.to_string())
                .or_default()
                .push(format!("{} {t:.2}", ty.trim_start_matches("node.")));
        }
    }
    for (node, times) in at {
        eprintln!("    {node}: {}", times.join(", "));
    }
}

/// The same `UNITS` × `sleep 1` as a bare loop: (wall seconds, each one's start latency).
fn bare(c: &Cluster, kind: Kind, dir: &Path) -> (f64, Vec<f64>) {
    std::fs::create_dir_all(dir).unwrap();
    let script = |i: usize| format!("date +%s.%N > {}/{i}; sleep 1", dir.display());
    let (t0, start) = (now_s(), Instant::now());
    match kind {
        Kind::Slurm => {
            let jobs: Vec<String> = (0..UNITS)
                .map(|i| {
                    c.slurm(
                        "sbatch",
                        &["--parsable", "--output=/dev/null", "--wrap", &script(i)],
                    )
                    .trim()
                    .to_string()
                })
                .collect();
            let list = jobs.join(",");
            poll("the bare jobs to end", || {
                let states = c.slurm("squeue", &["-h", "-t", "all", "-j", &list, "-o", "%T"]);
                (states.lines().count() == UNITS && states.lines().all(|s| s.trim() == "COMPLETED"))
                    .then_some(())
            });
        }
        Kind::Ssh => {
            let children: Vec<Child> = (0..UNITS)
                .map(|i| {
                    c.ssh(&c.ssh_hosts[i % c.ssh_hosts.len()])
                        .arg(script(i))
                        .stdin(Stdio::null())
                        .stdout(Stdio::null())
                        .spawn()
                        .expect("ssh")
                })
                .collect();
            for mut ch in children {
                assert!(ch.wait().unwrap().success(), "a bare ssh failed");
            }
        }
    }
    let wall = start.elapsed().as_secs_f64();
    (wall, marks(dir).into_iter().map(|m| m - t0).collect())
}

pub fn timings(rows: &mut Vec<Row>, kind: Kind, rounds: usize) {
    let c: Turn = Cluster::shared();
    let env = env_on(&c, kind);
    let _d = if std::env::var_os("OCTL_BENCH_TIMELINE").is_some() {
        env.start_daemon_with(&[("RUST_LOG", "octld=debug")])
    } else {
        env.start_daemon()
    };
    let repo = TestRepo::new(&env, "repo");
    let (mut walls, mut bare_walls, mut beyond, mut worst) = (vec![], vec![], vec![], vec![]);
    for round in 0..rounds {
        eprintln!(
            "{} fan-out of {UNITS} × sleep 1: round {}/{rounds}",
            kind.name(),
            round + 1
        );
        let (b_wall, b_starts) = bare(&c, kind, &env.root.path().join(format!("bare-{round}")));
        let (o_wall, o_starts) = ours(&env, &repo, round);
        // Start latency beyond the bare call, unit by unit in the order each side started.
        let (mut o, mut b) = (o_starts, b_starts);
        o.sort_by(|x, y| x.partial_cmp(y).unwrap());
        b.sort_by(|x, y| x.partial_cmp(y).unwrap());
        let extra: Vec<f64> = o.iter().zip(&b).map(|(o, b)| (o - b) * 1000.0).collect();
        eprintln!(
            "  ours {o_wall:.2} s, bare {b_wall:.2} s; start beyond bare: median {:.0} ms, worst {:.0} ms",
            median(extra.clone()),
            extra.iter().cloned().fold(f64::MIN, f64::max)
        );
        walls.push(o_wall);
        bare_walls.push(b_wall);
        worst.push(extra.iter().cloned().fold(f64::MIN, f64::max));
        beyond.push(median(extra));
    }
    let (o, b) = (median(walls) * 1000.0, median(bare_walls) * 1000.0);
    let name = kind.name();
    let bare_call = match kind {
        Kind::Slurm => "sbatch --wrap",
        Kind::Ssh => "ssh HOST",
    };
    rows.push(Row {
        metric: format!(
            "{name}: fan-out of {UNITS} × sleep 1, start to all merged, vs {UNITS} bare `{bare_call}` to all ended"
        ),
        ours: o,
        baseline: Some(b),
        unit: "ms",
        target: "≤ 1.3×".into(),
        pass: o <= 1.3 * b,
        skipped: None,
    });
    let (m, w) = (median(beyond), median(worst));
    rows.push(Row {
        metric: format!(
            "{name}: a unit's start latency beyond the bare `{bare_call}`, median of the {UNITS}"
        ),
        ours: m,
        baseline: None,
        unit: "ms",
        target: "≤ 100 ms".into(),
        pass: m <= 100.0,
        skipped: None,
    });
    rows.push(Row {
        metric: format!("{name}: a unit's start latency beyond the bare `{bare_call}`, the worst of the {UNITS}"),
        ours: w,
        baseline: None,
        unit: "ms",
        target: "≤ 100 ms".into(),
        pass: w <= 100.0,
        skipped: None,
    });
}
