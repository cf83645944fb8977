//! What changed: a worktree's status, the paths between two commits, what a snapshot would not
//! hold, the ignored files `.worktreeinclude` names, and committing everything.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use super::command::split_z;
use super::{Git, GitError, Result};

/// One entry of `git status --porcelain=v1`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusEntry {
    /// Index status (`X`): `?` for untracked, `M`, `A`, `D`, `R`, `U`, …
    pub index: char,
    /// Worktree status (`Y`).
    pub worktree: char,
    pub path: String,
    /// The source of a rename or copy.
    pub orig_path: Option<String>,
}

impl StatusEntry {
    /// Every path this entry makes dirty (both sides of a rename).
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.path.as_str()).chain(self.orig_path.as_deref())
    }
}

impl Git {
    /// `git status --porcelain=v1` of this directory's worktree, untracked files listed one
    /// by one, ignored files left out. It takes no optional lock, so the user's own git
    /// commands in that worktree are not disturbed.
    pub fn status(&self) -> Result<Vec<StatusEntry>> {
        let call = self
            .call([
                "status",
                "--porcelain=v1",
                "-z",
                "--untracked-files=all",
                "--ignore-submodules=none",
            ])
            .env("GIT_OPTIONAL_LOCKS", "0");
        let argv = call.argv.clone();
        let out = call.stdout()?;
        parse_status(&out).map_err(|detail| GitError::Parse { argv, detail })
    }

    /// Paths that differ between two commits. Renames are not detected, so both the old and
    /// the new name of a moved file are listed.
    pub fn changed_paths(&self, old: &str, new: &str) -> Result<Vec<String>> {
        let out = self
            .call([
                "diff-tree",
                "-r",
                "-z",
                "--name-only",
                "--no-renames",
                "--no-commit-id",
                "--end-of-options",
                old,
                new,
            ])
            .stdout()?;
        Ok(split_z(&out).collect())
    }

    /// What a snapshot of this worktree would not hold, relative to it: what git ignores
    /// (an ignored directory as one entry, `dir/`) and untracked nested repositories (which
    /// a snapshot could only record as a commit id, without their files).
    pub fn unsaved_paths(&self) -> Result<Vec<PathBuf>> {
        use std::os::unix::ffi::OsStrExt;
        let listed = |args: &[&str]| -> Result<Vec<PathBuf>> {
            let out = self.call(args).env("GIT_OPTIONAL_LOCKS", "0").stdout()?;
            Ok(out
                .split(|b| *b == 0)
                .filter(|s| !s.is_empty())
                .map(|s| PathBuf::from(OsStr::from_bytes(s)))
                .collect())
        };
        let mut paths = listed(&[
            "ls-files",
            "-z",
            "--others",
            "--ignored",
            "--exclude-standard",
            "--directory",
        ])?;
        // Without --directory, git lists untracked files one by one and a nested repository
        // as `dir/`, which is the only kind of entry that ends in a slash.
        paths.extend(
            listed(&["ls-files", "-z", "--others", "--exclude-standard"])?
                .into_iter()
                .filter(|p| p.as_os_str().as_bytes().ends_with(b"/")),
        );
        Ok(paths)
    }

    /// Files git does not know yet and does not ignore (what `git diff` leaves out), paths
    /// relative to this directory, nested repositories not among them.
    pub fn untracked_files(&self) -> Result<Vec<String>> {
        let out = self
            .call(["ls-files", "-z", "--others", "--exclude-standard"])
            .env("GIT_OPTIONAL_LOCKS", "0")
            .stdout()?;
        Ok(split_z(&out).filter(|p| !p.ends_with('/')).collect())
    }

    /// `path` (untracked) as a diff adding it: what `git diff` would say once it is added.
    pub fn diff_new_file(&self, path: &str) -> Result<String> {
        // `--no-index` exits 1 when the two differ, which they do.
        let (_, out) = self
            .call([
                "diff",
                "--no-color",
                "--no-ext-diff",
                "--no-index",
                "--",
                "/dev/null",
                path,
            ])
            .run_allowing(&[0, 1], None)?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The files `.worktreeinclude` names, as Claude Code reads it: untracked files matching
    /// one of its gitignore-style patterns (`include`, a file) that the repository's own rules
    /// also ignore, each as a path relative to this directory. Both judgements are git's own.
    pub fn included_ignored(&self, include: &Path) -> Result<Vec<PathBuf>> {
        use std::os::unix::ffi::{OsStrExt, OsStringExt};
        let mut from = OsString::from("--exclude-from=");
        from.push(include);
        let matching = self
            .call([
                OsStr::new("ls-files"),
                OsStr::new("-z"),
                OsStr::new("--others"),
                OsStr::new("--ignored"),
                &from,
            ])
            .env("GIT_OPTIONAL_LOCKS", "0")
            .stdout()?;
        if matching.is_empty() {
            return Ok(Vec::new());
        }
        // Exit 1: none of them is ignored.
        let (_, out) = self
            .call(["check-ignore", "-z", "--stdin"])
            .run_allowing(&[0, 1], Some(&matching))?;
        Ok(out
            .stdout
            .split(|b| *b == 0)
            .filter(|s| !s.is_empty())
            .map(|s| PathBuf::from(OsString::from_vec(s.to_vec())))
            .filter(|p| !p.as_os_str().as_bytes().ends_with(b"/"))
            .collect())
    }

    /// Whether git ignores `path` (relative to this directory) as it is on disk now.
    pub fn is_ignored(&self, path: &Path) -> Result<bool> {
        let (code, _) = self
            .call([
                OsStr::new("check-ignore"),
                OsStr::new("-q"),
                OsStr::new("--"),
                path.as_os_str(),
            ])
            .run_allowing(&[0, 1], None)?;
        Ok(code == 0)
    }

    /// `git add -A` then `git commit -m <message>` in this directory's worktree. Returns the
    /// new commit, or `None` when there was nothing to commit. The repository's hooks and
    /// signing settings apply, as for any commit the user makes.
    pub fn commit_all(&self, message: &str) -> Result<Option<String>> {
        self.call(["add", "-A", "--", "."]).stdout()?;
        let (code, _) = self
            .call(["diff", "--cached", "--quiet", "--no-ext-diff"])
            .run_allowing(&[0, 1], None)?;
        if code == 0 {
            return Ok(None);
        }
        self.call(["commit", "--quiet", "-m", message]).stdout()?;
        Ok(Some(self.head()?))
    }
}

pub(super) fn parse_status(bytes: &[u8]) -> std::result::Result<Vec<StatusEntry>, String> {
    let mut entries = Vec::new();
    let mut fields = bytes.split(|b| *b == 0).filter(|f| !f.is_empty());
    while let Some(field) = fields.next() {
        let text = String::from_utf8_lossy(field);
        let mut chars = text.chars();
        let (Some(index), Some(worktree), Some(' ')) = (chars.next(), chars.next(), chars.next())
        else {
            return Err(format!("bad status entry {text:?}"));
        };
        let path = chars.as_str().to_string();
        // With -z the source of a rename or copy follows as its own field.
        let orig_path = if matches!(index, 'R' | 'C') || matches!(worktree, 'R' | 'C') {
            let orig = fields
                .next()
                .ok_or_else(|| format!("rename without a source: {text:?}"))?;
            Some(String::from_utf8_lossy(orig).into_owned())
        } else {
            None
        };
        entries.push(StatusEntry {
            index,
            worktree,
            path,
            orig_path,
        });
    }
    Ok(entries)
}
