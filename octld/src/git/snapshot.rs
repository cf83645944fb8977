//! Snapshots: everything a worktree holds saved under `refs/octl/snapshots/<RUN>/<NODE>`
//! without touching it, so nothing an agent wrote is lost before its worktree goes.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::command::split_z;
use super::{Git, GitError, Result};

/// Where snapshots live: `refs/octl/snapshots/<RUN>/<NODE>`.
pub const SNAPSHOT_REF_PREFIX: &str = "refs/octl/snapshots/";

/// The snapshot ref of one node.
pub fn snapshot_ref(run: &str, node: &str) -> String {
    format!("{SNAPSHOT_REF_PREFIX}{run}/{node}")
}

/// Result of [`Git::snapshot`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// `refs/octl/snapshots/<RUN>/<NODE>`.
    pub refname: String,
    /// What the ref points at now.
    pub commit: String,
    /// The worktree's HEAD when the snapshot was taken.
    pub head: String,
    /// Whether there were uncommitted or untracked files.
    pub dirty: bool,
}

/// Removes the snapshot's temporary index whatever happens.
struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        let mut lock = self.0.clone().into_os_string();
        lock.push(".lock");
        let _ = std::fs::remove_file(lock);
    }
}

impl Git {
    /// Saves everything in the worktree at `worktree` — tracked changes and untracked files,
    /// not ignored ones — under `refs/octl/snapshots/<run>/<node>`, without touching the
    /// worktree, its index or HEAD.
    ///
    /// The ref always has the worktree's content as its tree and reaches both HEAD and every
    /// earlier snapshot of the node: a snapshot commit's first parent is HEAD and, if the ref
    /// already held something HEAD does not contain, its second parent is that old value. A
    /// clean worktree with no older snapshot gets the ref pointed at HEAD itself, so the
    /// branch tip survives the branch.
    pub fn snapshot(&self, worktree: &Path, run: &str, node: &str) -> Result<Snapshot> {
        let wt = self.at(worktree);
        let refname = snapshot_ref(run, node);
        let head = wt.head()?;
        let tree = wt.worktree_tree()?;
        let head_tree = wt.resolve_tree(&head)?;
        let dirty = tree != head_tree;
        let previous = wt.try_resolve(&refname)?;
        let mut parents = vec![head.clone()];
        if let Some(prev) = &previous {
            // Already holds this content and HEAD: a new commit would only add noise.
            if wt.resolve_tree(prev)? == tree && wt.is_ancestor(&head, prev)? {
                return Ok(Snapshot {
                    refname,
                    commit: prev.clone(),
                    head,
                    dirty,
                });
            }
            if !wt.is_ancestor(prev, &head)? {
                parents.push(prev.clone());
            }
        }
        let commit = if !dirty && parents.len() == 1 {
            head.clone()
        } else {
            let message = format!(
                "octl snapshot {run}/{node}\n\nWorktree: {}\nHEAD: {head}\n",
                worktree.display()
            );
            // Signing would prompt for a passphrase the daemon cannot give, and a snapshot is
            // not a commit anyone publishes.
            wt.commit_tree_with(&tree, &parents, &message, &["--no-gpg-sign"])?
        };
        if previous.as_deref() != Some(commit.as_str()) {
            let expected = previous.as_deref().unwrap_or("");
            wt.call([
                "update-ref",
                "-m",
                "octl snapshot",
                &refname,
                &commit,
                expected,
            ])
            .stdout()?;
        }
        Ok(Snapshot {
            refname,
            commit,
            head,
            dirty,
        })
    }

    /// The tree of the worktree's files as `git add -A` would stage them, built in a
    /// temporary index so the real one is not touched.
    fn worktree_tree(&self) -> Result<String> {
        let index = PathBuf::from(
            self.call(["rev-parse", "--path-format=absolute", "--git-path", "index"])
                .line()?,
        );
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let name = format!(
            "octl-snapshot-{}-{nanos}-{}.index",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let temp = TempFile(index.with_file_name(name));
        let env_index = temp.0.as_os_str();
        // Starting from a copy of the real index keeps what was staged but is ignored
        // (`git add -f`) and keeps the stat cache, so `add -A` need not rehash every file.
        let copied = match std::fs::copy(&index, &temp.0) {
            Ok(_) => true,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(e) => return Err(GitError::TempIndex(e)),
        };
        if copied {
            // Entries marked assume-unchanged would hide their edits from `add -A`.
            let listing = self
                .call(["ls-files", "-v", "-z"])
                .env("GIT_INDEX_FILE", env_index)
                .stdout()?;
            let mut hidden = Vec::new();
            for entry in split_z(&listing) {
                if let Some((tag, path)) = entry.split_once(' ') {
                    if tag.chars().all(|c| c.is_ascii_lowercase()) {
                        hidden.extend_from_slice(path.as_bytes());
                        hidden.push(0);
                    }
                }
            }
            if !hidden.is_empty() {
                self.call(["update-index", "--no-assume-unchanged", "-z", "--stdin"])
                    .env("GIT_INDEX_FILE", env_index)
                    .run_allowing(&[0], Some(&hidden))?;
            }
        } else {
            self.call(["read-tree", "HEAD"])
                .env("GIT_INDEX_FILE", env_index)
                .stdout()?;
        }
        self.call(["add", "-A", "--", "."])
            .env("GIT_INDEX_FILE", env_index)
            .stdout()?;
        self.call(["write-tree"])
            .env("GIT_INDEX_FILE", env_index)
            .line()
    }

    fn resolve_tree(&self, commit: &str) -> Result<String> {
        self.try_resolve(&format!("{commit}^{{tree}}"))?
            .ok_or_else(|| GitError::UnknownRevision {
                rev: commit.to_string(),
            })
    }
}
