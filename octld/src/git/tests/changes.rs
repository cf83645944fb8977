//! Status, changed paths, unsaved paths, commit all.

use super::*;
use crate::git::changes::parse_status;

#[test]
fn parses_status_with_renames() {
    let raw = b"R  new name\0old name\0 M file\0?? dir/untracked\0";
    let entries = parse_status(raw).unwrap();
    assert_eq!(entries.len(), 3);
    assert_eq!(entries[0].path, "new name");
    assert_eq!(entries[0].orig_path.as_deref(), Some("old name"));
    assert_eq!(entries[1].worktree, 'M');
    assert_eq!(entries[2].index, '?');
    assert!(parse_status(b"bad").is_err());
}

#[test]
fn unsaved_paths_are_ignored_files_and_nested_repositories() {
    let f = Fixture::new();
    f.git.write(".gitignore", "*.local\ntarget/\n");
    f.git.run(&["add", "-A"]);
    f.git.run(&["commit", "-q", "-m", "ignores"]);
    let wt = f.root.join("wt");
    f.git.worktree_add(&wt, "octl/r/u", "main").unwrap();
    let g = f.git.at(&wt);
    g.write("notes.local", "n");
    g.write("target/a/b.o", "b");
    g.write("untracked.txt", "u");
    g.write("vendor/lib/x.c", "x");
    g.at(wt.join("vendor/lib")).run(&["init", "-q"]);
    let mut got: Vec<String> = g
        .unsaved_paths()
        .unwrap()
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    got.sort();
    assert_eq!(got, ["notes.local", "target/", "vendor/lib/"]);
}

#[test]
fn commit_all_commits_everything_once() {
    let f = Fixture::new();
    let wt = f.root.join("wt");
    f.git.worktree_add(&wt, "octl/r/s", "main").unwrap();
    let g = f.git.at(&wt);
    assert_eq!(g.commit_all("nothing").unwrap(), None);
    g.write("new.txt", "n\n");
    g.write("shared.txt", "edited\n");
    let commit = g.commit_all("# task\nline two").unwrap().unwrap();
    assert_eq!(g.head().unwrap(), commit);
    assert_eq!(g.run(&["status", "--porcelain"]), "");
    assert_eq!(
        g.run(&["log", "-1", "--format=%B"]).trim_end(),
        "# task\nline two"
    );
}

#[test]
fn changed_paths_lists_both_sides_of_a_rename() {
    let f = Fixture::new();
    let before = f.git.head().unwrap();
    f.git.run(&["mv", "shared.txt", "renamed.txt"]);
    f.git.run(&["commit", "-q", "-m", "rename"]);
    let after = f.git.head().unwrap();
    let mut paths = f.git.changed_paths(&before, &after).unwrap();
    paths.sort();
    assert_eq!(
        paths,
        vec!["renamed.txt".to_string(), "shared.txt".to_string()]
    );
}
