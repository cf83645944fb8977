//! Snapshots.

use super::*;

#[test]
fn snapshot_keeps_dirty_and_untracked_files_and_touches_nothing() {
    let f = Fixture::new();
    let wt = f.root.join("wt");
    f.git.worktree_add(&wt, "octl/r/n", "main").unwrap();
    let g = f.git.at(&wt);
    g.write("shared.txt", "changed\n");
    g.write("dir/untracked.txt", "new file\n");
    g.write("staged.txt", "staged\n");
    g.run(&["add", "staged.txt"]);
    g.write(".gitignore", "*.log\n");
    g.write("noise.log", "ignored\n");
    let status_before = g.run(&["status", "--porcelain=v1", "-uall"]);
    let index_before = fs::read(f.repo().join(".git/worktrees/wt/index")).unwrap();
    let head = g.head().unwrap();

    let snap = f.git.snapshot(&wt, "r", "n").unwrap();
    assert_eq!(snap.refname, "refs/octl/snapshots/r/n");
    assert!(snap.dirty);
    assert_eq!(snap.head, head);
    assert_eq!(f.git.resolve_commit(&snap.refname).unwrap(), snap.commit);
    let show = |p: &str| f.git.run(&["show", &format!("{}:{p}", snap.commit)]);
    assert_eq!(show("shared.txt"), "changed\n");
    assert_eq!(show("dir/untracked.txt"), "new file\n");
    assert_eq!(show("staged.txt"), "staged\n");
    assert_eq!(show(".gitignore"), "*.log\n");
    assert!(f
        .git
        .call(["cat-file", "-e", &format!("{}:noise.log", snap.commit)])
        .stdout()
        .is_err());
    assert_eq!(
        f.git
            .run(&["rev-parse", &format!("{}^1", snap.commit)])
            .trim(),
        head
    );

    // Nothing in the worktree moved.
    assert_eq!(g.head().unwrap(), head);
    assert_eq!(g.run(&["status", "--porcelain=v1", "-uall"]), status_before);
    assert_eq!(
        fs::read(f.repo().join(".git/worktrees/wt/index")).unwrap(),
        index_before
    );
    assert_eq!(g.read("shared.txt"), "changed\n");
    let leftovers: Vec<_> = fs::read_dir(f.repo().join(".git/worktrees/wt"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("octl-snapshot"))
        .collect();
    assert!(leftovers.is_empty());

    // A second snapshot keeps the first as its second parent.
    g.write("later.txt", "later\n");
    let second = f.git.snapshot(&wt, "r", "n").unwrap();
    assert_ne!(second.commit, snap.commit);
    assert_eq!(
        f.git
            .run(&["rev-parse", &format!("{}^2", second.commit)])
            .trim(),
        snap.commit
    );
    // Unchanged worktree: the ref stays.
    let third = f.git.snapshot(&wt, "r", "n").unwrap();
    assert_eq!(third.commit, second.commit);
}

#[test]
fn snapshot_sees_assume_unchanged_edits() {
    let f = Fixture::new();
    f.git
        .run(&["update-index", "--assume-unchanged", "shared.txt"]);
    f.git.write("shared.txt", "hidden edit\n");
    let snap = f.git.snapshot(f.repo(), "r", "main").unwrap();
    assert!(snap.dirty);
    assert_eq!(
        f.git.run(&["show", &format!("{}:shared.txt", snap.commit)]),
        "hidden edit\n"
    );
}

#[test]
fn snapshot_of_clean_worktree_points_at_head() {
    let f = Fixture::new();
    let tip = f.branch_with("octl/r/clean", "c.txt", "c\n");
    let wt = f.root.join("wt");
    f.git.worktree_add_existing(&wt, "octl/r/clean").unwrap();
    let snap = f.git.snapshot(&wt, "r", "clean").unwrap();
    assert!(!snap.dirty);
    assert_eq!(snap.commit, tip);
    assert_eq!(
        f.git.resolve_commit("refs/octl/snapshots/r/clean").unwrap(),
        tip
    );
}
