//! Merge plans, compare-and-swap, moving branches.

use super::*;
use crate::git::merge::paths_overlap;

#[test]
fn overlapping_paths() {
    assert!(paths_overlap("a/b", "a/b"));
    assert!(paths_overlap("a/b", "a"));
    assert!(paths_overlap("a/b", "a/"));
    assert!(paths_overlap("a", "a/b"));
    assert!(!paths_overlap("a/bc", "a/b"));
    assert!(!paths_overlap("ab", "a"));
}

#[test]
fn merge_tree_clean_and_conflicting() {
    let f = Fixture::new();
    let main_before = f.git.head().unwrap();
    f.branch_with("a", "a.txt", "a\n");
    f.branch_with("b", "b.txt", "b\n");
    let MergeTree::Clean { tree } = f.git.merge_tree("a", "b").unwrap() else {
        panic!("expected a clean merge");
    };
    let listing = f.git.run(&["ls-tree", "--name-only", &tree]);
    assert_eq!(listing, "README\na.txt\nb.txt\nshared.txt\n");

    f.branch_with("c1", "shared.txt", "one\nTWO-c1\nthree\n");
    f.branch_with("c2", "shared.txt", "one\nTWO-c2\nthree\n");
    let wt = f.root.join("wt-c3");
    f.git.worktree_add(&wt, "c3", "c2").unwrap();
    let g = f.git.at(&wt);
    g.write("README", "c3 readme\n");
    g.write("c2-only.txt", "x\n");
    g.run(&["add", "-A"]);
    g.run(&["commit", "-q", "-m", "c3"]);
    f.branch_with("c4", "README", "c4 readme\n");
    assert_eq!(
        f.git.merge_tree("c1", "c2").unwrap(),
        MergeTree::Conflict {
            files: vec!["shared.txt".into()]
        }
    );
    assert_eq!(
        f.git.merge_tree("c3", "c4").unwrap(),
        MergeTree::Conflict {
            files: vec!["README".into()]
        }
    );
    assert!(matches!(
        f.git.merge_tree("c1", "no-such-ref"),
        Err(GitError::Failed { .. })
    ));
    assert_eq!(f.git.head().unwrap(), main_before);
    assert!(matches!(
        f.git.plan_merge("c1", "c2", "m").unwrap(),
        MergePlan::Conflict { .. }
    ));
}

#[test]
fn plan_merge_fast_forwards_or_builds_a_commit() {
    let f = Fixture::new();
    let main = f.git.head().unwrap();
    let a = f.branch_with("a", "a.txt", "a\n");
    assert_eq!(
        f.git.plan_merge("main", "a", "m").unwrap(),
        MergePlan::FastForward {
            old: main.clone(),
            new: a.clone()
        }
    );
    assert_eq!(
        f.git.plan_merge("a", "main", "m").unwrap(),
        MergePlan::UpToDate { target: a.clone() }
    );
    let b = f.branch_with("b", "b.txt", "b\n");
    let MergePlan::Merge { old, new } = f.git.plan_merge("a", "b", "Merge b into a").unwrap()
    else {
        panic!("expected a merge commit");
    };
    assert_eq!(old, a);
    let parents = f.git.run(&["rev-list", "--parents", "-n1", &new]);
    assert_eq!(parents.trim(), format!("{new} {a} {b}"));
    assert_eq!(
        f.git.run(&["log", "-1", "--format=%s", &new]).trim(),
        "Merge b into a"
    );
    // Nothing moved yet.
    assert_eq!(f.git.resolve_commit("a").unwrap(), a);
}

#[test]
fn cas_update_succeeds_and_reports_a_lost_race() {
    let f = Fixture::new();
    let main = f.git.head().unwrap();
    let a = f.branch_with("a", "a.txt", "a\n");
    f.git.create_branch("target", &main).unwrap();
    assert_eq!(
        f.git
            .cas_update_ref("refs/heads/target", &a, Some(&main), "test")
            .unwrap(),
        CasOutcome::Updated
    );
    assert_eq!(f.git.resolve_commit("target").unwrap(), a);
    // `main` is stale now: the ref is left alone and the current value reported.
    assert_eq!(
        f.git
            .cas_update_ref("refs/heads/target", &main, Some(&main), "test")
            .unwrap(),
        CasOutcome::Stale {
            current: Some(a.clone())
        }
    );
    assert_eq!(f.git.resolve_commit("target").unwrap(), a);
    assert_eq!(
        f.git
            .cas_update_ref("refs/heads/target", &main, None, "test")
            .unwrap(),
        CasOutcome::Stale {
            current: Some(a.clone())
        }
    );
    assert_eq!(
        f.git
            .cas_update_ref("refs/heads/fresh", &main, None, "test")
            .unwrap(),
        CasOutcome::Updated
    );

    // Not checked out anywhere: move_branch uses the compare-and-swap.
    let b = f.branch_with("b", "b.txt", "b\n");
    assert_eq!(
        f.git.move_branch("target", &main, &b, "test").unwrap(),
        MoveOutcome::LostRace {
            current: Some(a.clone())
        }
    );
    let MergePlan::Merge { old, new } = f.git.plan_merge("target", "b", "m").unwrap() else {
        panic!("expected a merge");
    };
    assert_eq!(
        f.git.move_branch("target", &old, &new, "test").unwrap(),
        MoveOutcome::Moved
    );
    assert_eq!(f.git.resolve_commit("target").unwrap(), new);
}

#[test]
fn fast_forward_through_the_checked_out_worktree() {
    let f = Fixture::new();
    let main = f.git.head().unwrap();
    let a = f.branch_with("a", "shared.txt", "one\ntwo\nthree\nfour\n");
    // An unrelated dirty file and an unrelated untracked file do not block.
    f.git.write("README", "user's edit\n");
    f.git.write("notes.txt", "user's notes\n");
    assert_eq!(
        f.git.move_branch("main", &main, &a, "octl merge").unwrap(),
        MoveOutcome::Moved
    );
    assert_eq!(f.git.head().unwrap(), a);
    assert_eq!(f.git.read("shared.txt"), "one\ntwo\nthree\nfour\n");
    assert_eq!(f.git.read("README"), "user's edit\n");
    assert_eq!(f.git.read("notes.txt"), "user's notes\n");
    let reflog = f.git.run(&["reflog", "-1", "--format=%gs", "main"]);
    assert!(reflog.starts_with("octl merge"), "{reflog}");
}

#[test]
fn dirty_target_blocks_and_moves_nothing() {
    let f = Fixture::new();
    let main = f.git.head().unwrap();
    let a = f.branch_with("a", "shared.txt", "one\ntwo\nthree\nfour\n");
    f.git.write("shared.txt", "user's uncommitted edit\n");
    assert_eq!(
        f.git.move_branch("main", &main, &a, "test").unwrap(),
        MoveOutcome::TargetDirty {
            worktree: f.repo().to_path_buf(),
            paths: vec!["shared.txt".into()],
        }
    );
    assert_eq!(f.git.head().unwrap(), main);
    assert_eq!(f.git.resolve_commit("main").unwrap(), main);
    assert_eq!(f.git.read("shared.txt"), "user's uncommitted edit\n");

    // An untracked file where the branch adds one blocks too.
    f.git.run(&["checkout", "-q", "--", "shared.txt"]);
    let b = f.branch_with("b", "dir/new.txt", "from branch\n");
    f.git.write("dir/new.txt", "user's untracked file\n");
    assert_eq!(
        f.git.move_branch("main", &main, &b, "test").unwrap(),
        MoveOutcome::TargetDirty {
            worktree: f.repo().to_path_buf(),
            paths: vec!["dir/new.txt".into()],
        }
    );
    assert_eq!(f.git.read("dir/new.txt"), "user's untracked file\n");
    assert_eq!(f.git.head().unwrap(), main);

    // A staged rename whose source the merge changes blocks as well.
    fs::remove_file(f.repo().join("dir/new.txt")).unwrap();
    f.git.run(&["mv", "shared.txt", "moved.txt"]);
    let outcome = f.git.move_branch("main", &main, &a, "test").unwrap();
    assert_eq!(
        outcome,
        MoveOutcome::TargetDirty {
            worktree: f.repo().to_path_buf(),
            paths: vec!["shared.txt".into()],
        }
    );
    assert_eq!(f.git.head().unwrap(), main);

    // A stale `old` is a lost race, not a merge.
    f.git.run(&["mv", "moved.txt", "shared.txt"]);
    assert_eq!(
        f.git.move_branch("main", &a, &b, "test").unwrap(),
        MoveOutcome::LostRace {
            current: Some(main.clone())
        }
    );
}
