//! Unit tests of the git plumbing, on real repositories in temporary directories, with git
//! isolated from the user's configuration; one file per module.

mod branches;
mod changes;
mod merge;
mod repo;
mod snapshot;
mod worktrees;

use std::fs;
use std::path::{Path, PathBuf};

use super::*;

/// A repository in a temp dir, with git isolated from the real user's configuration.
struct Fixture {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    git: Git,
}

fn isolated(dir: &Path, home: &Path) -> Git {
    Git::new(dir)
        .with_env("HOME", home)
        .with_env("XDG_CONFIG_HOME", home)
        .with_env("GIT_CONFIG_NOSYSTEM", "1")
        .with_env("GIT_CONFIG_GLOBAL", "/dev/null")
        .with_env("GIT_AUTHOR_NAME", "Test")
        .with_env("GIT_AUTHOR_EMAIL", "test@example.com")
        .with_env("GIT_COMMITTER_NAME", "Test")
        .with_env("GIT_COMMITTER_EMAIL", "test@example.com")
}

impl Fixture {
    fn new() -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let repo = root.join("repo");
        fs::create_dir(&repo).unwrap();
        let git = isolated(&repo, &root);
        git.run(&["init", "-q", "-b", "main"]);
        git.write("README", "hello\n");
        git.write("shared.txt", "one\ntwo\nthree\n");
        git.run(&["add", "-A"]);
        git.run(&["commit", "-q", "-m", "initial"]);
        Fixture {
            _tmp: tmp,
            root,
            git,
        }
    }

    fn repo(&self) -> &Path {
        self.git.dir()
    }

    /// A branch `name` off main with one commit writing `file`.
    fn branch_with(&self, name: &str, file: &str, content: &str) -> String {
        let wt = self.root.join(format!("wt-{name}"));
        self.git.worktree_add(&wt, name, "main").unwrap();
        let g = self.git.at(&wt);
        g.write(file, content);
        g.run(&["add", "-A"]);
        g.run(&["commit", "-q", "-m", name]);
        let tip = g.head().unwrap();
        self.git.worktree_remove(&wt).unwrap();
        tip
    }
}

impl Git {
    fn run(&self, args: &[&str]) -> String {
        String::from_utf8(self.call(args).stdout().unwrap()).unwrap()
    }

    fn write(&self, path: &str, content: &str) {
        let p = self.dir().join(path);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, content).unwrap();
    }

    fn read(&self, path: &str) -> String {
        fs::read_to_string(self.dir().join(path)).unwrap()
    }
}
