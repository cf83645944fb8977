//! Questions about the repository: where a directory is in it, what a revision names, ancestry.

use std::path::PathBuf;

use super::{Git, GitError, Result};

impl Git {
    /// The top-level directory of the worktree containing this directory.
    pub fn toplevel(&self) -> Result<PathBuf> {
        Ok(PathBuf::from(
            self.call(["rev-parse", "--show-toplevel"]).line()?,
        ))
    }

    /// The repository's common git directory, the same from every worktree: the key for
    /// "one merge at a time per repository".
    pub fn common_dir(&self) -> Result<PathBuf> {
        Ok(PathBuf::from(
            self.call(["rev-parse", "--path-format=absolute", "--git-common-dir"])
                .line()?,
        ))
    }

    /// A plumbing command this handle has no method for, run with the same care; its stdout.
    /// A non-zero exit is an error.
    pub fn plumbing(&self, args: &[&str]) -> Result<String> {
        Ok(String::from_utf8_lossy(&self.call(args).stdout()?).into_owned())
    }

    /// The top-level directory and the checked-out branch (`None` when HEAD is detached) in
    /// one git call: spawning asks for both.
    pub fn toplevel_and_branch(&self) -> Result<(PathBuf, Option<String>)> {
        let out = self
            .call(["rev-parse", "--show-toplevel", "--abbrev-ref", "HEAD"])
            .stdout()?;
        let out = String::from_utf8_lossy(&out);
        let mut lines = out.lines();
        let top = lines.next().unwrap_or_default();
        let branch = lines.next().unwrap_or_default();
        if top.is_empty() {
            return Err(GitError::NotARepo {
                dir: self.dir.clone(),
            });
        }
        let branch = (!branch.is_empty() && branch != "HEAD").then(|| branch.to_string());
        Ok((PathBuf::from(top), branch))
    }

    /// Where in a repository without a working tree this directory is, if it is: `Some(true)`
    /// for a bare repository, `Some(false)` inside a `.git` directory, `None` otherwise (a
    /// working tree, or no repository at all).
    pub fn without_worktree(&self) -> Option<bool> {
        let out = self
            .call(["rev-parse", "--is-bare-repository", "--is-inside-git-dir"])
            .stdout()
            .ok()?;
        let out = String::from_utf8_lossy(&out);
        let mut lines = out.lines();
        match (lines.next(), lines.next()) {
            (Some("true"), _) => Some(true),
            (_, Some("true")) => Some(false),
            _ => None,
        }
    }

    /// The commit `rev` names; [`GitError::UnknownRevision`] if it names none.
    pub fn resolve_commit(&self, rev: &str) -> Result<String> {
        self.try_resolve(&format!("{rev}^{{commit}}"))?
            .ok_or_else(|| GitError::UnknownRevision {
                rev: rev.to_string(),
            })
    }

    /// The object `rev` names, or `None`.
    pub(super) fn try_resolve(&self, rev: &str) -> Result<Option<String>> {
        let (code, out) = self
            .call(["rev-parse", "--verify", "--quiet", "--end-of-options", rev])
            .run_allowing(&[0, 1], None)?;
        Ok((code == 0).then(|| String::from_utf8_lossy(&out.stdout).trim_end().to_string()))
    }

    pub fn head(&self) -> Result<String> {
        self.resolve_commit("HEAD")
    }

    /// `git merge-base --is-ancestor a b`: whether `a` is contained in `b` (true if equal).
    pub fn is_ancestor(&self, a: &str, b: &str) -> Result<bool> {
        let (code, _) = self
            .call(["merge-base", "--is-ancestor", "--end-of-options", a, b])
            .run_allowing(&[0, 1], None)?;
        Ok(code == 0)
    }
}
