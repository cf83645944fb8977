//! A real git repository for a test, with the identity given through the environment.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::env::TestEnv;

pub struct TestRepo {
    pub path: PathBuf,
    env: Vec<(String, String)>,
}

impl TestRepo {
    /// `git init -b main` with one commit holding `README.md`.
    pub fn new(env: &TestEnv, name: &str) -> TestRepo {
        let path = env.root.path().join(name);
        std::fs::create_dir_all(&path).unwrap();
        let repo = TestRepo {
            path,
            env: vec![
                ("GIT_AUTHOR_NAME".into(), "Octl Test".into()),
                ("GIT_AUTHOR_EMAIL".into(), "test@octl.invalid".into()),
                ("GIT_COMMITTER_NAME".into(), "Octl Test".into()),
                ("GIT_COMMITTER_EMAIL".into(), "test@octl.invalid".into()),
                ("GIT_CONFIG_NOSYSTEM".into(), "1".into()),
                (
                    "GIT_CONFIG_GLOBAL".into(),
                    env.user_home.join(".gitconfig").display().to_string(),
                ),
                ("HOME".into(), env.user_home.display().to_string()),
            ],
        };
        repo.git(&["init", "-q", "-b", "main"]);
        repo.write("README.md", "# test repo\n");
        repo.git(&["add", "-A"]);
        repo.git(&["commit", "-q", "-m", "initial"]);
        repo
    }

    /// Runs git in the repository; panics on failure. Returns stdout, trimmed.
    pub fn git(&self, args: &[&str]) -> String {
        self.git_in(&self.path, args)
    }

    pub fn git_in(&self, dir: &Path, args: &[&str]) -> String {
        let out = self.try_git_in(dir, args);
        assert!(
            out.status.success(),
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    pub fn try_git_in(&self, dir: &Path, args: &[&str]) -> std::process::Output {
        let mut cmd = Command::new("git");
        cmd.arg("-C").arg(dir).args(args);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd.output().expect("run git")
    }

    pub fn write(&self, rel: &str, text: &str) {
        let p = self.path.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(p, text).unwrap();
    }

    /// Commits everything on the checked-out branch.
    pub fn commit_all(&self, message: &str) -> String {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", message]);
        self.rev("HEAD")
    }

    pub fn rev(&self, rev: &str) -> String {
        self.git(&["rev-parse", rev])
    }

    /// The content of `path` at `rev`, or None.
    pub fn show(&self, rev: &str, path: &str) -> Option<String> {
        let out = self.try_git_in(&self.path, &["show", &format!("{rev}:{path}")]);
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Every ref name under `prefix` (e.g. `refs/heads/octl/`).
    pub fn refs(&self, prefix: &str) -> Vec<String> {
        let out = self.git(&["for-each-ref", "--format=%(refname)", prefix]);
        out.lines()
            .map(str::to_string)
            .filter(|l| !l.is_empty())
            .collect()
    }

    /// Worktree paths other than the main one.
    pub fn extra_worktrees(&self) -> Vec<String> {
        self.git(&["worktree", "list", "--porcelain"])
            .lines()
            .filter_map(|l| l.strip_prefix("worktree "))
            .skip(1)
            .map(str::to_string)
            .collect()
    }
}
