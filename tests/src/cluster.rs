//! A real Slurm cluster and SSH hosts on this machine, for the remote runners' tests: started
//! once per test process by `tests/cluster/up.sh` (munged, slurmctld, compute nodes `n1..n3` as
//! `slurmd` in network namespaces, SSH hosts `s1`, `s2` as `sshd` in network namespaces) and
//! stopped by `tests/cluster/down.sh` when the process exits.
//!
//! It needs root and `ip netns`, so the tests that use it are `#[ignore]`d with that reason
//! ([`IGNORE`]) and run with `cargo test -p octl-tests -- --ignored`, as `.ci/run` does (as
//! root). Run there without root they fail, saying why, rather than pass without having run.
//!
//! The namespaces separate the network only: nodes and hosts see this machine's whole
//! filesystem. A test of a remote runner must therefore check that the agent worked in its
//! own clone, not in a path of the daemon's that merely happens to be visible.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Instant;

/// The reason on the `#[ignore]` of every test that uses the cluster.
pub const IGNORE: &str = "needs root and ip netns: starts a Slurm cluster (tests/cluster/up.sh)";

/// The cluster this test process shares.
#[derive(Debug)]
pub struct Cluster {
    /// The state dir: config, pid files, logs, keys (`$OCTL_CLUSTER_DIR`).
    pub dir: PathBuf,
    /// Compute node names (`n1`, …).
    pub nodes: Vec<String>,
    /// The partition every node is in.
    pub partition: String,
    /// SSH host names (`s1`, …), as `ssh -F` [`ssh_config`](Self::ssh_config) knows them.
    pub ssh_hosts: Vec<String>,
    /// An ssh_config naming every host with its address, user, key and known-hosts file.
    pub ssh_config: PathBuf,
    /// The private key every host accepts for root.
    pub ssh_key: PathBuf,
    /// Holds an `ssh` that uses [`ssh_config`](Self::ssh_config): first on the PATH of a
    /// daemon under test, its plain `ssh HOST` reaches the cluster's hosts.
    pub bin: PathBuf,
    /// How long `up.sh` took (packages already installed or not).
    pub up_secs: f64,
    /// What `$OCTL_CLUSTER_DIR/env` exports (`SLURM_CONF` and the `OCTL_CLUSTER_*` settings).
    env: BTreeMap<String, String>,
}

static SHARED: OnceLock<Cluster> = OnceLock::new();

/// Held by every test using the cluster: one kills nodes and cuts links, which another's job
/// must not meet by chance.
static TURN: Mutex<()> = Mutex::new(());

/// The cluster, for one test at a time (see [`Cluster::shared`]).
pub struct Turn {
    cluster: &'static Cluster,
    _turn: MutexGuard<'static, ()>,
}

impl std::ops::Deref for Turn {
    type Target = Cluster;
    fn deref(&self) -> &Cluster {
        self.cluster
    }
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("cluster")
        .join(name)
}

/// Why the cluster cannot be started here, if it cannot.
pub fn unavailable() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("the cluster tests need root (network namespaces, slurmd)".into());
    }
    let netns = Command::new("ip").args(["netns", "list"]).output();
    if !netns.map(|o| o.status.success()).unwrap_or(false) {
        return Some("the cluster tests need iproute2 with `ip netns`".into());
    }
    None
}

extern "C" fn stop_shared() {
    if let Some(c) = SHARED.get() {
        c.down();
    }
}

impl Cluster {
    /// The cluster of this test process, started on first use, for this test alone until the
    /// returned turn is dropped (tests inject faults). Panics, saying why, where it cannot run
    /// (see [`unavailable`]) or does not come up.
    pub fn shared() -> Turn {
        // A test that panicked while holding its turn left the cluster as it was: go on.
        let turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
        let cluster = SHARED.get_or_init(|| {
            if let Some(why) = unavailable() {
                panic!("{why}: run the #[ignore]d tests as root, as CI does");
            }
            reap_orphans();
            let cluster = Cluster::up();
            // SAFETY: registering a plain extern "C" fn; it runs once, at process exit.
            unsafe { libc::atexit(stop_shared) };
            cluster
        });
        Turn {
            cluster,
            _turn: turn,
        }
    }

    fn up() -> Cluster {
        let started = Instant::now();
        let out = Command::new(script("up.sh"))
            .env("OCTL_CLUSTER_OWNER", std::process::id().to_string())
            .output()
            .expect("run tests/cluster/up.sh");
        assert!(
            out.status.success(),
            "tests/cluster/up.sh failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let up_secs = started.elapsed().as_secs_f64();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let dir = PathBuf::from(stdout.lines().last().expect("up.sh prints its state dir"));
        let env = parse_env(&std::fs::read_to_string(dir.join("env")).expect("cluster env file"));
        let list =
            |k: &str| -> Vec<String> { env[k].split_whitespace().map(str::to_string).collect() };
        Cluster {
            nodes: list("OCTL_CLUSTER_NODES"),
            ssh_hosts: list("OCTL_CLUSTER_SSH_HOSTS"),
            partition: env["OCTL_CLUSTER_PARTITION"].clone(),
            ssh_config: env["OCTL_CLUSTER_SSH_CONFIG"].clone().into(),
            ssh_key: env["OCTL_CLUSTER_SSH_KEY"].clone().into(),
            bin: env["OCTL_CLUSTER_BIN"].clone().into(),
            dir,
            up_secs,
            env,
        }
    }

    fn down(&self) {
        let _ = Command::new(script("down.sh")).arg(&self.dir).output();
    }

    /// What a process needs to reach the cluster (`SLURM_CONF`, …): give it to the daemon of a
    /// test with [`TestEnv::set_env`](crate::TestEnv::set_env).
    pub fn env(&self) -> impl Iterator<Item = (&str, &str)> {
        self.env.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// `PATH` with [`bin`](Self::bin) first.
    pub fn path(&self) -> String {
        let rest = std::env::var("PATH").unwrap_or_default();
        format!("{}:{rest}", self.bin.display())
    }

    /// A command with the cluster's environment (`sinfo`, `sbatch`, `squeue`, …).
    pub fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(program);
        cmd.envs(self.env());
        cmd
    }

    /// Runs a Slurm client command that must succeed; its stdout.
    pub fn slurm(&self, program: &str, args: &[&str]) -> String {
        let out = self.command(program).args(args).output().expect(program);
        ok(program, args, out)
    }

    /// The state of every compute node, as `sinfo` reports it (`idle`, `allocated`, `down*`…).
    pub fn node_states(&self) -> BTreeMap<String, String> {
        self.slurm("sinfo", &["-h", "-N", "-o", "%N %T"])
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(n, s)| (n.to_string(), s.trim().to_string()))
            .collect()
    }

    /// `ssh` to `host` (`s1`, …) with the cluster's key and known-hosts file, non-interactive.
    pub fn ssh(&self, host: &str) -> Command {
        let mut cmd = Command::new("ssh");
        cmd.arg("-F").arg(&self.ssh_config).args([
            "-o",
            "BatchMode=yes",
            "-o",
            "ConnectTimeout=3",
            host,
        ]);
        cmd
    }

    /// The address of node or host `name` (its namespace's end of the link).
    pub fn addr(&self, name: &str) -> &str {
        &self.env[&format!("OCTL_CLUSTER_ADDR_{name}")]
    }

    /// An address of this machine that every node and host reaches (the controller's: this
    /// machine's end of the first node's link), for a server agents there must reach.
    pub fn host_addr(&self) -> std::net::IpAddr {
        let node = self.addr(&self.nodes[0]);
        let (net, _) = node.rsplit_once('.').expect("an IPv4 address");
        format!("{net}.1").parse().expect("an IPv4 address")
    }

    /// A fault for one node or host (see `tests/cluster/node.sh`): `kill` (the machine dies:
    /// everything in its namespace), `stop` (its slurmd or sshd only), `start`, `cut` (its link
    /// goes down), `join` (the link comes back).
    pub fn fault(&self, action: &str, name: &str) {
        let out = Command::new(script("node.sh"))
            .arg(&self.dir)
            .args([action, name])
            .output()
            .expect("run tests/cluster/node.sh");
        ok("tests/cluster/node.sh", &[action, name], out);
    }
}

fn ok(program: &str, args: &[&str], out: Output) -> String {
    assert!(
        out.status.success(),
        "{program} {args:?} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn parse_env(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("export "))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.trim_matches('"').to_string()))
        .collect()
}

/// Stops the clusters of test processes that died without stopping theirs (killed, say): each
/// state dir names its owner's pid; one whose owner is gone is handed to down.sh.
fn reap_orphans() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for dir in entries.flatten().map(|e| e.path()) {
        let is_cluster = dir
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("octl-cluster."));
        let owner = std::fs::read_to_string(dir.join("owner"))
            .ok()
            .and_then(|s| s.trim().parse::<i32>().ok());
        if let (true, Some(pid)) = (is_cluster, owner) {
            // SAFETY: signal 0 only checks that the process exists.
            let gone = unsafe { libc::kill(pid, 0) } != 0;
            if gone {
                let _ = Command::new(script("down.sh")).arg(&dir).output();
            }
        }
    }
}
