//! Deleting branches only when merged.

use super::*;

#[test]
fn delete_refuses_unmerged_branch() {
    let f = Fixture::new();
    let tip = f.branch_with("feature", "f.txt", "feature\n");
    assert_eq!(
        f.git.delete_branch("feature").unwrap(),
        BranchDelete::NotMerged
    );
    assert_eq!(
        f.git.delete_merged_branch("feature", "main").unwrap(),
        BranchDelete::NotMerged
    );
    assert_eq!(f.git.resolve_commit("feature").unwrap(), tip);

    // Merged into `side` while the user's checkout stays on main: `-d` still refuses (it
    // judges against HEAD), the merged-into variant deletes.
    f.git.create_branch("side", "feature").unwrap();
    assert_eq!(
        f.git.delete_branch("feature").unwrap(),
        BranchDelete::NotMerged
    );
    assert_eq!(
        f.git.delete_merged_branch("feature", "side").unwrap(),
        BranchDelete::Deleted
    );
    assert!(!f.git.branch_exists("feature").unwrap());
    assert_eq!(
        f.git.delete_merged_branch("feature", "side").unwrap(),
        BranchDelete::Absent
    );
}

/// A ref held by another git for a moment (an agent's last `git commit` being stopped) does
/// not fail the daemon's step: it waits for the lock as git's own 100 ms would not.
#[test]
fn delete_waits_for_a_lock_another_git_holds_for_a_moment() {
    let f = Fixture::new();
    f.branch_with("feature", "f.txt", "feature\n");
    f.git.create_branch("side", "feature").unwrap();
    let lock = f.repo().join(".git/refs/heads/feature.lock");
    std::fs::write(&lock, "").unwrap();
    // The other git lets go well inside the daemon's wait, well outside git's default.
    let holder = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(400));
        std::fs::remove_file(lock).unwrap();
    });
    assert_eq!(
        f.git.delete_merged_branch("feature", "side").unwrap(),
        BranchDelete::Deleted
    );
    holder.join().unwrap();
}
