//! The Slurm runner's exchange repositories (docs/RUNNERS.md, "The exchange repository"): one
//! bare repository per source repository under `$OCTL_HOME/exchange/`, made once with its
//! `update` hook, and the attempts agents may push to (`octl-open`), opened before a job is
//! submitted and closed when no job of the attempt is alive.

use std::path::{Path, PathBuf};

use super::Result;
use super::{tag_of, SlurmRunner};
use crate::git::Git;
use octl_proto::AppError;

/// The exchange repositories' `update` hook: pushes only to open attempts (see its header).
const HOOK: &str = include_str!("../exchange_hook.sh");

/// In an exchange repository: the attempts agents may push to, one ref prefix a line.
const OPEN: &str = "octl-open";

impl SlurmRunner {
    /// The bare exchange repository of the repository `worktree` belongs to, created on first
    /// use: agents clone from it and push into it; the daemon fetches from it.
    pub(super) fn exchange_of(&self, worktree: &Path) -> Result<PathBuf> {
        let _one = self.make_lock.lock().unwrap_or_else(|e| e.into_inner());
        let common = Git::new(worktree).plumbing(&[
            "rev-parse",
            "--path-format=absolute",
            "--git-common-dir",
        ])?;
        let dir = self
            .exchange
            .join(format!("{}.git", &tag_of(Path::new(common.trim()))[5..]));
        if !dir.join("HEAD").exists() {
            std::fs::create_dir_all(&dir)
                .map_err(|e| AppError::internal(format!("cannot create {}: {e}", dir.display())))?;
            Git::new(&dir).plumbing(&["init", "-q", "--bare"])?;
        }
        let hook = dir.join("hooks").join("update");
        if std::fs::read_to_string(&hook).ok().as_deref() != Some(HOOK) {
            use std::os::unix::fs::PermissionsExt;
            let written = std::fs::create_dir_all(dir.join("hooks"))
                .and_then(|()| std::fs::write(&hook, HOOK))
                .and_then(|()| {
                    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755))
                });
            written
                .map_err(|e| AppError::internal(format!("cannot write {}: {e}", hook.display())))?;
        }
        Ok(dir)
    }

    /// Opens (`true`) or closes the attempt `prefix` for agents' pushes in every exchange
    /// repository that lists it (opening: in `exchange`). Rewritten whole (write, rename), so
    /// the hook never reads half a file; one change at a time in this daemon.
    pub(super) fn set_open(&self, exchange: Option<&Path>, prefix: &str, open: bool) -> Result<()> {
        let _one = self.open_lock.lock().unwrap_or_else(|e| e.into_inner());
        let line = format!("{prefix}/");
        let repos: Vec<PathBuf> = match exchange {
            Some(e) => vec![e.to_path_buf()],
            None => std::fs::read_dir(&self.exchange)
                .map(|d| d.flatten().map(|e| e.path()).collect())
                .unwrap_or_default(),
        };
        for repo in repos {
            let path = repo.join(OPEN);
            let had = std::fs::read_to_string(&path).unwrap_or_default();
            let mut lines: Vec<&str> = had.lines().filter(|l| *l != line).collect();
            if open {
                lines.push(&line);
            }
            if lines.len() == had.lines().count() && open == had.lines().any(|l| l == line) {
                continue;
            }
            let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
            let tmp = repo.join(format!("{OPEN}.tmp"));
            std::fs::write(&tmp, text)
                .and_then(|()| std::fs::rename(&tmp, &path))
                .map_err(|e| AppError::internal(format!("cannot write {}: {e}", path.display())))?;
        }
        Ok(())
    }

    /// The job `id` ended: its attempt takes no more pushes (once per job).
    pub(super) fn close(&self, id: &str, prefix: &str) {
        let first = {
            let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
            seen.closed.insert(id.to_string())
        };
        if first {
            if let Err(e) = self.set_open(None, prefix, false) {
                tracing::warn!(job = id, error = %e.message, "cannot close an attempt for pushes");
            }
        }
    }
}
