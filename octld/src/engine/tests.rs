//! The engine's scenarios through the runner seam, without tmux: a daemon in-process
//! ([`Daemon::on_runner`]) whose agents are entries of the in-memory
//! [`FakeRunner`](crate::runner::fake::FakeRunner), on a real git repository. The test plays
//! the agent (commits in its worktree) and its process (exit, a signal, vanishing); the
//! engine's reactions are read back from the run's log.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use octl_proto::method::{self, Method};
use octl_proto::rpc::Spawned;
use octl_proto::state::Node;
use octl_proto::NodeState;
use serde_json::{json, Value};

use crate::daemon::Daemon;
use crate::runner::fake::FakeRunner;

/// Git as these tests run it: no user or system configuration, a fixed identity (the
/// engine's own git commands inherit it).
fn isolate_git() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for (k, v) in [
            ("GIT_CONFIG_NOSYSTEM", "1"),
            ("GIT_CONFIG_GLOBAL", "/dev/null"),
            ("GIT_AUTHOR_NAME", "t"),
            ("GIT_AUTHOR_EMAIL", "t@t.invalid"),
            ("GIT_COMMITTER_NAME", "t"),
            ("GIT_COMMITTER_EMAIL", "t@t.invalid"),
        ] {
            std::env::set_var(k, v);
        }
    });
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

struct World {
    _tmp: tempfile::TempDir,
    repo: PathBuf,
    daemon: Arc<Daemon>,
    fake: Arc<FakeRunner>,
    driving: tokio::task::JoinHandle<()>,
}

impl World {
    async fn new() -> World {
        isolate_git();
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        std::fs::create_dir(&repo).unwrap();
        git(&repo, &["init", "-q", "-b", "main"]);
        std::fs::write(repo.join("README"), "hello\n").unwrap();
        git(&repo, &["add", "."]);
        git(&repo, &["commit", "-q", "-m", "first"]);
        let fake = Arc::new(FakeRunner::new());
        let (daemon, driving) = Daemon::on_runner(&tmp.path().join("home"), fake.clone()).await;
        World {
            _tmp: tmp,
            repo,
            daemon,
            fake,
            driving,
        }
    }

    async fn call<M: Method>(&self, params: Value) -> M::Result {
        let raw = crate::rpc::dispatch(&self.daemon, M::NAME, params)
            .await
            .unwrap_or_else(|e| panic!("{}: {}", M::NAME, e.message));
        serde_json::from_str(raw.get()).unwrap()
    }

    async fn spawn(&self, kind: &str, node: &str) -> String {
        let params = json!({"task": "true", "repo": self.repo, "agent": "shell", "node": node});
        let spawned: Spawned = match kind {
            "code" => self.call::<method::SpawnCode>(params).await,
            _ => self.call::<method::SpawnSpinoff>(params).await,
        };
        spawned.run.id
    }

    fn node(&self, run: &str, node: &str) -> Node {
        let h = self.daemon.store.resolve("run", run).unwrap();
        let view = h.view();
        view.nodes.iter().find(|n| n.id == node).cloned().unwrap()
    }

    /// Waits (bounded) until `done` holds of the node.
    async fn until(&self, run: &str, node: &str, what: &str, done: impl Fn(&Node) -> bool) -> Node {
        let what = format!("node {node} to be {what}");
        poll(&what, || {
            let n = self.node(run, node);
            done(&n).then_some(n)
        })
        .await
    }

    /// The node's agent, once the engine started it.
    async fn agent(&self, run: &str, node: &str) -> crate::runner::AgentHandle {
        self.until(run, node, "running", |n| n.state == NodeState::Running)
            .await;
        self.fake
            .live(run, node)
            .expect("a running node has a live agent")
    }

    /// Plays the agent: a commit in the node's worktree.
    fn work(&self, run: &str, node: &str, file: &str) {
        let wt = PathBuf::from(self.node(run, node).worktree.unwrap());
        std::fs::write(wt.join(file), format!("{file}\n")).unwrap();
        git(&wt, &["add", file]);
        git(&wt, &["commit", "-q", "-m", file]);
    }

    /// Waits (bounded) until the run's status is `want`.
    async fn status(&self, run: &str, want: &str) {
        let what = format!("run {run} to be {want}");
        poll(&what, || {
            let h = self.daemon.store.resolve("run", run).unwrap();
            let status = h.view().manifest.status.to_string();
            (status == want).then_some(())
        })
        .await
    }

    async fn stop(self) {
        self.daemon.request_shutdown();
        self.driving.await.unwrap();
        self.daemon.store.shutdown().await;
    }
}

/// `check` until it gives a value, for at most 30 s (the engine ticks every 200 ms).
async fn poll<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(t) = check() {
            return t;
        }
        assert!(Instant::now() < deadline, "waited 30 s for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn in_main(repo: &Path, file: &str) -> bool {
    Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["cat-file", "-e", &format!("main:{file}")])
        .status()
        .unwrap()
        .success()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exit_merges_the_work_and_a_failure_is_retried_until_it_merges() {
    let w = World::new().await;
    // Exit 0: a shell agent's work is done; it merges into main and the run completes.
    let run = w.spawn("spinoff", "a").await;
    let agent = w.agent(&run, "a").await;
    w.work(&run, "a", "a.txt");
    assert!(w.fake.exit(&agent, 0));
    let a = w
        .until(&run, "a", "merged", |n| n.state == NodeState::Merged)
        .await;
    assert!(in_main(&w.repo, "a.txt"), "the agent's commit is in main");
    assert_eq!(a.exit_status, Some(0));
    w.status(&run, "completed").await;
    assert_eq!(w.fake.started(), 1);

    // Exit 3 fails the node and its run; a retry starts a second agent, whose exit merges.
    let run = w.spawn("spinoff", "b").await;
    let agent = w.agent(&run, "b").await;
    w.work(&run, "b", "lost-attempt.txt");
    assert!(w.fake.exit(&agent, 3));
    let b = w
        .until(&run, "b", "failed", |n| n.state == NodeState::Failed)
        .await;
    assert_eq!(b.exit_status, Some(3));
    assert!(
        !in_main(&w.repo, "lost-attempt.txt"),
        "a failed node merges nothing"
    );
    w.status(&run, "failed").await;
    w.call::<method::RunRetry>(json!({"run": run, "node": "b"}))
        .await;
    let again = w.agent(&run, "b").await;
    assert_ne!(again, agent, "a retry is a new agent");
    assert_eq!(w.fake.started(), 3);
    let retried = w.node(&run, "b");
    assert!(
        !retried.snapshot_refs.is_empty(),
        "the failed attempt is kept under a snapshot ref: {retried:#?}"
    );
    w.work(&run, "b", "b.txt");
    assert!(w.fake.exit(&again, 0));
    w.until(&run, "b", "merged", |n| n.state == NodeState::Merged)
        .await;
    assert!(in_main(&w.repo, "b.txt"));
    w.status(&run, "completed").await;
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_killed_or_gone_is_recorded_as_it_ended_and_its_work_kept() {
    let w = World::new().await;
    // Killed by a signal: a shell node is judged by its exit, so it failed, with the shell's
    // status for it (128 + 9) in its reason; nothing merges; the agent's commit stays on its branch.
    let killed = w.spawn("code", "k").await;
    let run = killed.clone();
    let agent = w.agent(&run, "k").await;
    w.work(&run, "k", "k.txt");
    assert!(w.fake.kill(&agent, 9));
    let k = w
        .until(&run, "k", "failed", |n| n.state == NodeState::Failed)
        .await;
    assert_eq!(k.exit_status, Some(137));
    assert!(
        k.reason.as_deref().is_some_and(|r| r.contains("137")),
        "{k:#?}"
    );
    assert!(!in_main(&w.repo, "k.txt"));
    let branch = k.branch.clone().unwrap();
    assert!(
        git(&w.repo, &["log", "--format=%s", &branch]).contains("k.txt"),
        "the agent's commit is on its branch"
    );

    // Gone without a trace (its window closed under the daemon): recorded as ended too,
    // with why, never left running.
    let run = w.spawn("code", "v").await;
    let agent = w.agent(&run, "v").await;
    assert!(w.fake.vanish(&agent));
    let v = w.until(&run, "v", "ended", |n| !n.state.is_alive()).await;
    assert!(
        matches!(v.state, NodeState::Exited | NodeState::Failed),
        "{v:#?}"
    );
    assert!(v.reason.is_some() || v.exit_status.is_none(), "{v:#?}");

    // A human merges the killed node's work as it was (accept_failed).
    w.call::<method::Merge>(json!({"run": killed, "node": "k", "accept_failed": true}))
        .await;
    assert!(in_main(&w.repo, "k.txt"));
    w.stop().await;
}
