//! Worktrees and their bookkeeping lock.

use std::sync::atomic::Ordering;

use super::*;

/// Worktrees added from several threads while another lists them, as a fan-out does:
/// without one-at-a-time bookkeeping git fails now and then with "failed to read
/// .git/worktrees/<name>/commondir".
#[test]
fn worktrees_added_and_listed_concurrently() {
    let f = Fixture::new();
    let adding = std::sync::atomic::AtomicUsize::new(4);
    std::thread::scope(|scope| {
        for t in 0..4 {
            let (f, adding) = (&f, &adding);
            scope.spawn(move || {
                for i in 0..6 {
                    let wt = f.root.join(format!("wt-{t}-{i}"));
                    f.git
                        .worktree_add(&wt, &format!("b/{t}/{i}"), "main")
                        .unwrap();
                }
                adding.fetch_sub(1, Ordering::SeqCst);
            });
        }
        let (f, adding) = (&f, &adding);
        scope.spawn(move || {
            while adding.load(Ordering::SeqCst) > 0 {
                f.git.worktree_list().unwrap();
            }
        });
    });
    assert_eq!(f.git.worktree_list().unwrap().len(), 1 + 4 * 6);
}

#[test]
fn branches_and_worktrees() {
    let f = Fixture::new();
    let head = f.git.head().unwrap();
    assert!(!f.git.branch_exists("octl/r/a").unwrap());
    f.git.create_branch("octl/r/a", &head).unwrap();
    assert!(f.git.branch_exists("octl/r/a").unwrap());
    assert!(f.git.create_branch("octl/r/a", &head).is_err());

    let wt = f.root.join("worktrees/r/a");
    f.git.worktree_add_existing(&wt, "octl/r/a").unwrap();
    let wt2 = f.root.join("worktrees/r/b");
    f.git.worktree_add(&wt2, "octl/r/b", "main").unwrap();
    let list = f.git.worktree_list().unwrap();
    assert_eq!(list.len(), 3);
    assert_eq!(list[0].branch.as_deref(), Some("main"));
    assert_eq!(list[1].path, wt);
    assert_eq!(list[1].head.as_deref(), Some(head.as_str()));
    assert_eq!(
        f.git.worktree_for_branch("octl/r/b").unwrap().unwrap().path,
        wt2
    );
    assert!(f.git.worktree_for_branch("nobody").unwrap().is_none());

    assert_eq!(
        f.git.delete_branch("octl/r/a").unwrap(),
        BranchDelete::CheckedOut {
            worktree: wt.clone()
        }
    );
    f.git.worktree_remove(&wt).unwrap();
    f.git.worktree_remove(&wt).unwrap();
    assert_eq!(
        f.git.delete_branch("octl/r/a").unwrap(),
        BranchDelete::Deleted
    );
    assert_eq!(
        f.git.delete_branch("octl/r/a").unwrap(),
        BranchDelete::Absent
    );

    // A worktree with untracked files is not removed without a snapshot.
    f.git.at(&wt2).write("new.txt", "x");
    assert!(f.git.worktree_remove(&wt2).is_err());
    assert!(wt2.join("new.txt").exists());
    let snap = f.git.snapshot(&wt2, "r", "b").unwrap();
    f.git.worktree_remove_snapshotted(&wt2, &snap).unwrap();
    assert!(!wt2.exists());

    // A worktree whose directory was deleted by hand is forgotten.
    let wt3 = f.root.join("worktrees/r/c");
    f.git.worktree_add(&wt3, "octl/r/c", "main").unwrap();
    fs::remove_dir_all(&wt3).unwrap();
    f.git.worktree_remove(&wt3).unwrap();
    assert!(f.git.worktree_for_branch("octl/r/c").unwrap().is_none());
}
