//! The daemon's home: the layout under `$OCTL_HOME` ([`Layout`], named once in `octl-proto`
//! for the daemon and the CLI) and making it with the permissions its safety rests on.

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::PathBuf;

pub use octl_proto::home::Layout;

/// One home: its paths ([`Layout`], shared with the CLI) and making it.
#[derive(Debug, Clone)]
pub struct Home(Layout);

impl std::ops::Deref for Home {
    type Target = Layout;
    fn deref(&self) -> &Layout {
        &self.0
    }
}

impl Home {
    pub fn new(root: impl Into<PathBuf>) -> Home {
        Home(Layout::new(root))
    }

    /// Creates the home (mode 0700) and `runs/`. A home that exists with wider permissions is
    /// narrowed to 0700: the socket's safety rests on it.
    pub fn ensure(&self) -> io::Result<()> {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(self.root())?;
        let mode = fs::metadata(self.root())?.permissions().mode() & 0o777;
        if mode != 0o700 {
            tracing::warn!(home = %self.root().display(), mode = format!("{mode:o}"), "narrowing home permissions to 0700");
            fs::set_permissions(self.root(), fs::Permissions::from_mode(0o700))?;
        }
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(self.runs())?;
        Ok(())
    }
}
