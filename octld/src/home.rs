//! The state layout under `$OCTL_HOME`. Every path the daemon uses is named here.

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Paths inside one home.
#[derive(Debug, Clone)]
pub struct Home {
    root: PathBuf,
}

impl Home {
    pub fn new(root: impl Into<PathBuf>) -> Home {
        Home { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
    pub fn socket(&self) -> PathBuf {
        self.root.join("octld.sock")
    }
    pub fn lock(&self) -> PathBuf {
        self.root.join("octld.lock")
    }
    pub fn log(&self) -> PathBuf {
        self.root.join("octld.log")
    }
    pub fn config(&self) -> PathBuf {
        self.root.join("config.toml")
    }
    pub fn tmux_socket(&self) -> PathBuf {
        self.root.join("tmux.sock")
    }
    pub fn runs(&self) -> PathBuf {
        self.root.join("runs")
    }
    pub fn run_dir(&self, run: &str) -> PathBuf {
        self.runs().join(run)
    }
    pub fn worktrees(&self) -> PathBuf {
        self.root.join("worktrees")
    }
    /// The warm pool of prepared worktrees: `pool/<KEY>/<ID>/` ([`crate::pool`]).
    pub fn pool(&self) -> PathBuf {
        self.root.join("pool")
    }
    /// What cleanups kept of the worktrees' ignored files: `kept/<RUN>/<NODE>/<N>/`.
    pub fn kept(&self) -> PathBuf {
        self.root.join("kept")
    }
    pub fn kept_of(&self, run: &str, node: &str) -> PathBuf {
        self.kept().join(run).join(node)
    }

    /// Creates the home (mode 0700) and `runs/`. A home that exists with wider permissions is
    /// narrowed to 0700: the socket's safety rests on it.
    pub fn ensure(&self) -> io::Result<()> {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.root)?;
        let mode = fs::metadata(&self.root)?.permissions().mode() & 0o777;
        if mode != 0o700 {
            tracing::warn!(home = %self.root.display(), mode = format!("{mode:o}"), "narrowing home permissions to 0700");
            fs::set_permissions(&self.root, fs::Permissions::from_mode(0o700))?;
        }
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(self.runs())?;
        Ok(())
    }
}
