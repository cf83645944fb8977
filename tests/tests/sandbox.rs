//! Agents in a sandbox (docs/SECURITY.md): a sandboxed agent reaches its worktree, its tools
//! and its own node only. Real bubblewrap, the real daemon, git and tmux.

use octl_tests::{TestEnv, TestRepo};
use serde_json::json;

fn sandboxed_spinoff(env: &TestEnv, repo: &TestRepo, task: &str) -> String {
    env.spawn(
        "spinoff",
        repo,
        task,
        json!({"agent": "shell", "node": "n", "sandbox": "bwrap"}),
    )
    .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn a_sandboxed_agent_commits_and_merges() {
    let (env, _d, repo) = TestEnv::world();
    let run = sandboxed_spinoff(
        &env,
        &repo,
        "printf '%s %s\\n' \"$OCTL_SANDBOX\" $(hostname) > work.txt && git add work.txt && git commit -q -m 'sandboxed work'",
    );
    let show = env.wait_status(&run, &["completed", "failed"]);
    let log = std::fs::read_to_string(env.run_dir(&run).join("logs/n.log")).unwrap_or_default();
    assert_eq!(
        show["manifest"]["status"],
        json!("completed"),
        "{show}\n{log}"
    );
    assert_eq!(
        repo.show("main", "work.txt").as_deref(),
        Some("bwrap octl-sandbox\n")
    );
}
