//! Unit tests of gc and recover: branch names, and saving a branch tip before it goes.

use super::branches::{remove_branch, BranchGone};
use super::default_branch;
use super::recover::check_branch_name;
use crate::git::Git;

#[test]
fn default_branch_names() {
    assert_eq!(
        default_branch("01JDXJ5R8Q", "api"),
        "recovered/01JDXJ5R8Q/api"
    );
}

fn repo() -> (tempfile::TempDir, Git) {
    let dir = tempfile::tempdir().unwrap();
    let git = Git::new(dir.path())
        .with_env("GIT_AUTHOR_NAME", "t")
        .with_env("GIT_AUTHOR_EMAIL", "t@t.invalid")
        .with_env("GIT_COMMITTER_NAME", "t")
        .with_env("GIT_COMMITTER_EMAIL", "t@t.invalid")
        .with_env("GIT_CONFIG_NOSYSTEM", "1")
        .with_env("GIT_CONFIG_GLOBAL", "/dev/null");
    let run = |args: &[&str]| {
        let ok = std::process::Command::new("git")
            .arg("-C")
            .arg(dir.path())
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t.invalid")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t.invalid")
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    };
    run(&["init", "-q", "-b", "main"]);
    run(&["commit", "-q", "--allow-empty", "-m", "one"]);
    run(&["branch", "octl/R/a"]);
    run(&["commit", "-q", "--allow-empty", "-m", "two"]);
    (dir, git)
}

#[test]
fn branch_names_are_checked() {
    let (_d, git) = repo();
    assert!(check_branch_name(&git, "recovered/x/api").is_ok());
    for bad in ["", "-x", "a..b", "@{-1}", "octl/R/a", "a b", "x.lock"] {
        assert!(check_branch_name(&git, bad).is_err(), "{bad:?}");
    }
}

#[test]
fn a_branch_tip_is_saved_before_the_branch_goes() {
    let (_d, git) = repo();
    let a = git.resolve_commit("octl/R/a").unwrap();
    let main = git.resolve_commit("main").unwrap();
    // No snapshot yet: the ref is made at the tip, then the branch goes.
    match remove_branch(&git, "octl/R/a", "refs/octl/snapshots/R/a", None).unwrap() {
        BranchGone::Deleted(Some(c)) => assert_eq!(c, a),
        _ => panic!("not deleted"),
    }
    assert!(!git.branch_exists("octl/R/a").unwrap());
    // A snapshot holding other work: both are kept, in a commit that reaches both.
    git.create_branch("octl/R/a", &main).unwrap();
    let snap = match remove_branch(&git, "octl/R/a", "refs/octl/snapshots/R/a", None).unwrap() {
        BranchGone::Deleted(Some(c)) => c,
        _ => panic!("not deleted"),
    };
    assert!(git.is_ancestor(&a, &snap).unwrap());
    assert!(git.is_ancestor(&main, &snap).unwrap());
    // Merged: deleted without a snapshot.
    git.create_branch("octl/R/b", &a).unwrap();
    assert!(matches!(
        remove_branch(&git, "octl/R/b", "refs/octl/snapshots/R/b", Some("main")).unwrap(),
        BranchGone::Deleted(None)
    ));
    assert!(matches!(
        remove_branch(&git, "octl/R/b", "refs/octl/snapshots/R/b", None).unwrap(),
        BranchGone::Absent
    ));
}
