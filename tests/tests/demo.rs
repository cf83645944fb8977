//! `orchestratectl demo` end to end, with the real CLI, daemon, git and tmux: without
//! `--keep` it leaves no trace (the user's run list is as it was, nothing stays on disk and
//! nothing of its own still runs); with `--keep` its runs and repository stay.

use std::path::{Path, PathBuf};

use octl_tests::TestEnv;
use serde_json::{json, Value};

fn run_ids(env: &TestEnv) -> Vec<String> {
    let mut ids: Vec<String> = env
        .rpc("run.list", json!({}))
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids
}

/// Runs `orchestratectl --json demo ARGS` with its temporary directory in `tmp`.
fn demo(env: &TestEnv, tmp: &Path, args: &[&str]) -> Value {
    std::fs::create_dir_all(tmp).unwrap();
    let mut argv = vec!["--json", "demo"];
    argv.extend(args);
    let out = env.cli_with(argv, |c| {
        c.env("TMPDIR", tmp);
    });
    assert_eq!(out.code, 0, "{out:?}");
    let v = out.json();
    let mut states: Vec<(String, String)> = v["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["status"].as_str().unwrap().to_string(),
                r["state"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    states.sort();
    let (c, m) = ("completed".to_string(), "merged".to_string());
    assert_eq!(
        states,
        [
            (c.clone(), m.clone()),
            (c.clone(), m.clone()),
            (c, m),
            ("waiting".to_string(), "conflict".to_string())
        ],
        "{v}"
    );
    v
}

/// Processes whose command line names `path`.
fn processes_naming(path: &Path) -> Vec<String> {
    let needle = path.as_os_str().as_encoded_bytes();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
            cmdline
                .windows(needle.len())
                .any(|w| w == needle)
                .then(|| String::from_utf8_lossy(&cmdline).replace('\0', " "))
        })
        .collect()
}

#[test]
fn a_demo_leaves_no_trace_unless_kept() {
    let env = TestEnv::new();
    let _d = env.start_daemon();
    env.create_run("mine");
    let before = run_ids(&env);
    let tmp = env.root.path().join("tmp");

    let v = demo(&env, &tmp, &[]);
    assert_eq!(v["kept"], json!(false));
    let home = PathBuf::from(v["home"].as_str().unwrap());
    assert!(home.starts_with(&tmp), "a throwaway home: {v}");
    assert_eq!(run_ids(&env), before, "the user's run list is as it was");
    let left: Vec<PathBuf> = std::fs::read_dir(&tmp)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(left.is_empty(), "nothing stays on disk: {left:?}");
    assert!(
        processes_naming(&home).is_empty(),
        "its daemon and tmux server are gone: {:?}",
        processes_naming(&home)
    );
    assert!(
        !env.home.join("worktrees").exists(),
        "no worktree under the user's home"
    );

    // Kept: on the user's daemon, its four runs listed and its repository there.
    let v = demo(&env, &tmp, &["--keep"]);
    assert_eq!(v["kept"], json!(true));
    assert_eq!(Path::new(v["home"].as_str().unwrap()), env.home);
    let after = run_ids(&env);
    assert_eq!(after.len(), before.len() + 4, "{after:?}");
    for r in v["runs"].as_array().unwrap() {
        assert!(
            after.contains(&r["id"].as_str().unwrap().to_string()),
            "{r}"
        );
    }
    let repo = PathBuf::from(v["repo"].as_str().unwrap());
    assert!(
        repo.join("greeting.txt").is_file(),
        "the repository is kept"
    );
}
