//! `bench slurm` (root: it starts the test cluster, `tests/cluster/up.sh`): on a real Slurm
//! cluster, submit → agent running through octld next to a bare `sbatch` reaching `RUNNING`,
//! the two taking turns; and a fan-out of 50 over the 3 compute nodes next to 50 bare jobs
//! submitted at once, for the orchestration overhead per unit.

use std::path::Path;
use std::time::{Duration, Instant};

use octl_tests::cluster::Cluster;
use octl_tests::{wait_until, TestEnv, TestRepo};
use serde_json::json;

use super::{median, Row};

/// How often a wait looks (both sides alike).
const POLL: Duration = Duration::from_millis(10);

fn poll<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(POLL);
    }
}

fn env_on(c: &Cluster, every: &str) -> TestEnv {
    let mut env = TestEnv::new();
    for (k, v) in c.env() {
        env.set_env(k, v);
    }
    env.set_env("OCTL_SLURM_CHECKPOINT_S", every);
    std::fs::create_dir_all(&env.home).unwrap();
    std::fs::write(
        env.home.join("config.toml"),
        format!(
            "[runners.hpc]\nkind = \"slurm\"\npartition = \"{}\"\n",
            c.partition
        ),
    )
    .unwrap();
    env
}

fn state(c: &Cluster, job: &str) -> String {
    c.slurm("squeue", &["-h", "-t", "all", "-j", job, "-o", "%T"])
        .trim()
        .to_string()
}

pub fn timings(rows: &mut Vec<Row>, rounds: usize) {
    let c = Cluster::shared();
    submit_to_running(&c, rows, rounds);
    fanout(&c, rows, 50);
}

fn submit_to_running(c: &Cluster, rows: &mut Vec<Row>, rounds: usize) {
    let env = env_on(c, "60");
    let _d = env.start_daemon();
    let repo = TestRepo::new(&env, "repo");
    let (mut ours, mut bare) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        eprintln!("slurm submit → running: round {}/{rounds}", round + 1);
        // Bare: sbatch, then squeue until RUNNING.
        let start = Instant::now();
        let job = c
            .slurm(
                "sbatch",
                &["--parsable", "--output=/dev/null", "--wrap", "sleep 60"],
            )
            .trim()
            .to_string();
        poll("the bare job to run", || {
            (state(c, &job) == "RUNNING").then_some(())
        });
        bare.push(start.elapsed().as_secs_f64());
        c.slurm("scancel", &[&job]);

        // Ours: spawn on the Slurm runner, until the agent's first command ran in its job.
        let mark = env.root.path().join(format!("running-{round}"));
        let start = Instant::now();
        let run = env.spawn(
            "spinoff",
            &repo,
            &format!("touch {}; sleep 60", mark.display()),
            json!({"agent": "shell", "node": format!("b{round}"), "runner": "hpc"}),
        );
        let run = run.unwrap()["id"].as_str().unwrap().to_string();
        poll("the agent to run", || {
            Path::new(&mark).exists().then_some(())
        });
        ours.push(start.elapsed().as_secs_f64());
        env.cli(["run", "cancel", &run]).ok();
    }
    let (o, b) = (median(ours) * 1000.0, median(bare) * 1000.0);
    rows.push(Row {
        metric: "slurm: submit → agent running (octld spawn) vs bare sbatch → RUNNING".into(),
        ours: o,
        baseline: Some(b),
        unit: "ms",
        target: "≤ 1.3×".into(),
        pass: o <= 1.3 * b,
        skipped: None,
    });
}

fn fanout(c: &Cluster, rows: &mut Vec<Row>, units: usize) {
    let env = env_on(c, "60");
    let _d = env.start_daemon();
    let repo = TestRepo::new(&env, "fan");
    eprintln!("slurm fan-out of {units}");
    let mut manifest = String::from(
        "prompt = \"printf 'unit {n}\\\\n' > f{n}.txt\"\nagent = \"shell\"\nrunner = \"hpc\"\n",
    );
    for i in 0..units {
        manifest.push_str(&format!(
            "[[units]]\nid = \"u{i}\"\nvars = {{ n = \"{i}\" }}\n"
        ));
    }
    let start = Instant::now();
    let run = env.rpc(
        "fanout.start",
        json!({"manifest": manifest, "format": "toml",
               "repo": repo.path.display().to_string(), "max_parallel": units}),
    )["id"]
        .as_str()
        .unwrap()
        .to_string();
    let show = wait_until("the fan-out", Duration::from_secs(900), || {
        let show = env.rpc("run.show", json!({"run": run}));
        (show["manifest"]["status"] != json!("active")).then_some(show)
    });
    let ours = start.elapsed().as_secs_f64();
    assert_eq!(show["manifest"]["status"], json!("completed"), "{show}");

    // Bare: the same number of trivial jobs submitted at once, until none is left in the queue.
    let start = Instant::now();
    let jobs: Vec<String> = (0..units)
        .map(|_| {
            c.slurm(
                "sbatch",
                &["--parsable", "--output=/dev/null", "--wrap", "true"],
            )
            .trim()
            .to_string()
        })
        .collect();
    let list = jobs.join(",");
    poll("the bare jobs to end", || {
        let states = c.slurm("squeue", &["-h", "-t", "all", "-j", &list, "-o", "%T"]);
        states
            .lines()
            .all(|s| s.trim() == "COMPLETED")
            .then_some(())
    });
    let bare = start.elapsed().as_secs_f64();
    rows.push(Row {
        metric: format!("slurm: fan-out of {units} over 3 nodes, to all merged, vs {units} bare jobs to COMPLETED"),
        ours: ours * 1000.0,
        baseline: Some(bare * 1000.0),
        unit: "ms",
        target: "—".into(),
        pass: true,
        skipped: None,
    });
    let overhead = (ours - bare) * 1000.0 / units as f64;
    rows.push(Row {
        metric: format!("slurm: fan-out of {units}: orchestration overhead per unit (clone, push back, fetch, merge)"),
        ours: overhead,
        baseline: None,
        unit: "ms",
        target: "—".into(),
        pass: true,
        skipped: None,
    });
}
