//! Ready to publish: `orchestratectl version` names the commit and the build date, from a
//! clone (git), from a crate tarball without `.git` (what `cargo package` recorded) and when
//! a packager says so (`OCTL_BUILD_COMMIT`). The client's real `build.rs` is compiled and run
//! as cargo runs it, on each kind of source tree.

use std::path::{Path, PathBuf};
use std::process::Command;

use octl_tests::{bin, TestEnv, TestRepo};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The client's build script, compiled once per test into `dir`.
fn build_script(dir: &Path) -> PathBuf {
    let exe = dir.join("build-script");
    let out = Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
        .args(["--edition", "2021", "-O", "-o"])
        .arg(&exe)
        .arg(workspace().join("octl-client/build.rs"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// Runs the build script on the crate at `manifest_dir`; its `OCTL_BUILD_*` values.
fn build_env(script: &Path, manifest_dir: &Path, extra: &[(&str, &str)]) -> (String, String) {
    let out_dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(script);
    cmd.env("CARGO_MANIFEST_DIR", manifest_dir)
        .env("OUT_DIR", out_dir.path())
        .env_remove("OCTL_BUILD_COMMIT")
        .env_remove("SOURCE_DATE_EPOCH")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("GIT_DIR");
    cmd.envs(extra.iter().copied());
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let value = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("cargo:rustc-env={key}=")))
            .unwrap_or_else(|| panic!("no {key} in {text}"))
            .to_string()
    };
    assert!(out_dir.path().join("skills.rs").is_file());
    (value("OCTL_BUILD_COMMIT"), value("OCTL_BUILD_DATE"))
}

/// A crate directory as a tarball unpacks: `build.rs`, the skills, maybe `.cargo_vcs_info.json`.
fn tarball_tree(root: &Path, vcs_sha: Option<&str>) -> PathBuf {
    let dir = root.join("octl-client-0.1.0");
    let skill = dir.join("skills/demo");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: demo\ndescription: d\n---\nbody\n",
    )
    .unwrap();
    if let Some(sha) = vcs_sha {
        std::fs::write(
            dir.join(".cargo_vcs_info.json"),
            format!("{{\n  \"git\": {{\n    \"sha1\": \"{sha}\"\n  }},\n  \"path_in_vcs\": \"octl-client\"\n}}"),
        )
        .unwrap();
    }
    dir
}

#[test]
fn the_build_is_named_from_a_clone_a_tarball_or_the_packager() {
    let env = TestEnv::new();
    let script = build_script(env.root.path());
    // Outside any repository (the temp dir is not in one).
    let sha = "0123456789abcdef0123456789abcdef01234567";
    let tar = tarball_tree(&env.root.path().join("tar"), Some(sha));
    let (commit, date) = build_env(&script, &tar, &[]);
    assert_eq!(commit, "0123456789ab");
    assert!(date.len() == 10 && date.as_bytes()[4] == b'-', "{date}");
    let bare = tarball_tree(&env.root.path().join("plain"), None);
    assert_eq!(build_env(&script, &bare, &[]).0, "unknown");
    assert_eq!(
        build_env(&script, &bare, &[("OCTL_BUILD_COMMIT", "v0.1.0-debian1")]).0,
        "v0.1.0-debian1"
    );
    // Reproducible builds: 2026-12-01T00:00:00Z.
    assert_eq!(
        build_env(&script, &bare, &[("SOURCE_DATE_EPOCH", "1796083200")]).1,
        "2026-12-01"
    );
    assert_eq!(
        build_env(&script, &bare, &[("SOURCE_DATE_EPOCH", "951782400")]).1,
        "2000-02-29"
    );

    // A fresh clone: git's HEAD, whatever the packaged file says.
    let repo = TestRepo::new(&env, "clone");
    let head = repo.rev("HEAD");
    let crate_dir = tarball_tree(&repo.path, Some(sha));
    let (commit, _) = build_env(&script, &crate_dir, &[]);
    assert_eq!(commit, head[..12]);
}

#[test]
fn version_names_the_commit_and_the_build_date() {
    let out = Command::new(bin("orchestratectl"))
        .args(["--json", "version"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let commit = v["commit"].as_str().unwrap();
    assert!(
        commit.len() == 12 && commit.chars().all(|c| c.is_ascii_hexdigit()),
        "built from this repository: {v}"
    );
    assert_eq!(v["build_date"].as_str().unwrap().len(), 10, "{v}");
    let human = Command::new(bin("orchestratectl"))
        .arg("version")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(text.contains(&format!("commit {commit}, built ")), "{text}");
}

/// The README's release build has no failpoints: a point armed in the environment, which
/// fails the debug build's first append to a log, changes nothing there (and it says so).
#[test]
#[ignore = "needs the release octld: `cargo build --release -p octld` (.ci/run builds it)"]
fn the_release_octld_ignores_failpoints() {
    let armed = [("OCTL_FAILPOINTS", "log:write-eio@1")];
    let wait = std::time::Duration::from_secs(10);
    let append = |env: &TestEnv| {
        let run = env.create_run("failpoints");
        let appended = env.try_rpc(
            "event.append",
            serde_json::json!({"run": run, "type": "x.note", "data": {}}),
        );
        (run, appended)
    };
    // The debug build, as the tests run it: the armed write fails.
    let env = TestEnv::new();
    let d = env.start_daemon_within(&armed, wait);
    let (_, refused) = append(&env);
    assert!(
        refused.is_err(),
        "the debug octld honours the point: {refused:?}"
    );
    drop(d);
    // The release build: the same point, and the event is in the log.
    let release = bin("octld")
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .join("release/octld");
    assert!(
        release.exists(),
        "{} is missing: build it with `cargo build --release -p octld`",
        release.display()
    );
    let env = TestEnv::new();
    let d = env.start_daemon_from(&release, &armed, wait);
    let (run, appended) = append(&env);
    assert!(appended.is_ok(), "{appended:?}");
    assert_eq!(env.log_events(&run).len(), 2, "run.created and x.note");
    assert!(
        d.stderr().contains("OCTL_FAILPOINTS ignored"),
        "{}",
        d.stderr()
    );
}
/// Nothing changed, nothing rebuilt: the README's build twice in a row, and the second
/// compiles nothing (a build script watching a file that does not exist made cargo rebuild
/// the client, and relink every binary, on every build).
#[test]
fn a_second_build_compiles_nothing() {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let build = || {
        let out = Command::new(&cargo)
            .args(["build", "--workspace", "--bins"])
            .current_dir(workspace())
            .env("CARGO_LOG", "cargo::core::compiler::fingerprint=info")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{err}");
        err
    };
    build();
    let second = build();
    let compiled: Vec<&str> = second
        .lines()
        .filter(|l| l.trim_start().starts_with("Compiling") || l.contains("stale:"))
        .collect();
    assert!(
        compiled.is_empty(),
        "the second build rebuilt:\n{}",
        compiled.join("\n")
    );
}
