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
