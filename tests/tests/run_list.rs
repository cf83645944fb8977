//! `run.list` filters for large homes: status (one or several), repository, limit; bad
//! values refused naming the field and what it accepts. Real daemon, git and tmux.

use octl_tests::{TestEnv, TestRepo};
use serde_json::{json, Value};

fn ids(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn run_list_filters_by_status_repo_and_limit() {
    let env = TestEnv::new();
    let _d = env.start_daemon();
    let a = TestRepo::new(&env, "a");
    let b = TestRepo::new(&env, "b");
    std::fs::create_dir_all(a.path.join("sub/dir")).unwrap();
    let spin = |repo: &TestRepo| {
        let v = env
            .spawn("spinoff", repo, "true", json!({"agent": "shell"}))
            .unwrap();
        let id = v["id"].as_str().unwrap().to_string();
        env.wait_status(&id, &["completed"]);
        id
    };
    let generic1 = env.create_run("g1");
    let in_a = spin(&a);
    let in_b = spin(&b);
    let generic2 = env.create_run("g2");

    let list = |params: Value| ids(&env.rpc("run.list", params));
    assert_eq!(
        list(json!({})),
        [
            generic1.as_str(),
            in_a.as_str(),
            in_b.as_str(),
            generic2.as_str()
        ],
        "oldest first"
    );
    assert_eq!(
        list(json!({"status": "completed"})),
        [in_a.as_str(), in_b.as_str()]
    );
    assert_eq!(
        list(json!({"status": ["completed"]})),
        [in_a.as_str(), in_b.as_str()]
    );
    assert_eq!(
        list(json!({"status": ["active", "failed"]})),
        [generic1.as_str(), generic2.as_str()]
    );
    assert_eq!(
        list(json!({"repo": a.path.display().to_string()})),
        [in_a.as_str()]
    );
    assert_eq!(
        list(json!({"repo": a.path.join("sub/dir").display().to_string()})),
        [in_a.as_str()],
        "a directory inside the repository"
    );
    assert!(list(json!({"repo": env.home.display().to_string()})).is_empty());
    assert_eq!(
        list(json!({"limit": 2})),
        [in_b.as_str(), generic2.as_str()],
        "the newest, oldest first"
    );
    assert_eq!(list(json!({"limit": 99})).len(), 4);
    assert_eq!(
        list(json!({"status": ["completed", "active"], "limit": 3})),
        [in_a.as_str(), in_b.as_str(), generic2.as_str()]
    );
    assert_eq!(
        list(json!({"status": "completed", "repo": b.path.display().to_string(), "limit": 1})),
        [in_b.as_str()]
    );

    // Bad values: refused, naming the field and what it takes.
    for (params, needle) in [
        (
            json!({"status": "bogus"}),
            "invalid status \"bogus\": use one of active, waiting",
        ),
        (
            json!({"status": ["completed", "done"]}),
            "invalid status \"done\"",
        ),
        (
            json!({"status": []}),
            "invalid status []: give at least one of",
        ),
        (json!({"limit": 0}), "invalid limit 0"),
        (
            json!({"repo": "relative/dir"}),
            "invalid repo \"relative/dir\": give an absolute path",
        ),
        (json!({"limit": -1}), "limit"),
        (json!({"owner": "me"}), "owner"),
    ] {
        let err = env.try_rpc("run.list", params.clone()).unwrap_err();
        assert_eq!(
            err["data"]["kind"],
            json!("invalid_params"),
            "{params}: {err}"
        );
        let msg = err["message"].as_str().unwrap();
        assert!(msg.contains(needle), "{params}: {msg}");
    }

    // The CLI: comma-separated statuses, a relative --repo from the current directory.
    let cli = env.cli([
        "--json",
        "run",
        "list",
        "--status",
        "completed,active",
        "--limit",
        "3",
    ]);
    assert_eq!(
        ids(&cli.ok().json()),
        [in_a.as_str(), in_b.as_str(), generic2.as_str()]
    );
    let cli = env.cli_with(["--json", "run", "list", "--repo", "."], |c| {
        c.current_dir(b.path.clone());
    });
    assert_eq!(ids(&cli.ok().json()), [in_b.as_str()]);
    let cli = env.cli(["run", "list", "--status", "waiting,nope"]);
    assert_eq!(cli.code, 2, "{cli:?}");
    assert!(
        cli.stderr
            .contains("invalid --status \"nope\": use one or more of active, waiting"),
        "{}",
        cli.stderr
    );
    let cli = env.cli(["run", "list", "--limit", "0"]);
    assert_eq!(cli.code, 2, "{cli:?}");
    assert!(cli.stderr.contains("invalid --limit 0"), "{}", cli.stderr);
    let cli = env.cli(["run", "list", "--status", "failed"]);
    assert!(
        cli.ok().stdout.contains("No runs pass these filters."),
        "{cli:?}"
    );
}
