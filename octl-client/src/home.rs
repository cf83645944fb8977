//! Where the state lives: `--home` > `$OCTL_HOME` > `$HOME/.orchestratectl`, and the paths of
//! the files the CLI touches under it (the daemon's socket and log, the runs' directories).

use std::path::Path;

use octl_proto::home::Layout;

use octl_proto::AppError;

/// The state directory of one daemon, always absolute; its paths are [`Layout`]'s (the
/// daemon's, named once in `octl-proto`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Home(Layout);

impl std::ops::Deref for Home {
    type Target = Layout;
    fn deref(&self) -> &Layout {
        &self.0
    }
}

impl Home {
    /// Resolves the home from this process's flag value and environment
    /// ([`octl_proto::home::resolve`], shared with the daemon).
    pub fn from_env(flag: Option<&Path>) -> Result<Home, AppError> {
        let cwd = std::env::current_dir().ok();
        let dir = octl_proto::home::resolve(
            flag.map(Path::as_os_str),
            std::env::var_os("OCTL_HOME").as_deref(),
            std::env::var_os("HOME").as_deref(),
            cwd.as_deref(),
        )?;
        Ok(Home(Layout::new(dir)))
    }

    pub fn dir(&self) -> &Path {
        self.root()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_paths_the_cli_touches_are_under_the_home() {
        let h = Home(Layout::new("/c/.orchestratectl"));
        assert_eq!(h.socket(), Path::new("/c/.orchestratectl/octld.sock"));
        assert_eq!(h.log(), Path::new("/c/.orchestratectl/octld.log"));
        assert_eq!(h.runs(), Path::new("/c/.orchestratectl/runs"));
        assert_eq!(h.tmux_socket(), Path::new("/c/.orchestratectl/tmux.sock"));
    }
}
