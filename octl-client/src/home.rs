//! Where the state lives: `--home` > `$OCTL_HOME` > `$HOME/.orchestratectl`, and the paths of
//! the files the CLI touches under it (the daemon's socket and log, the runs' directories).

use std::path::{Path, PathBuf};

use octl_proto::AppError;

/// The state directory of one daemon. Always absolute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Home {
    dir: PathBuf,
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
        Ok(Home { dir })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `octld.sock`: the daemon's socket.
    pub fn socket(&self) -> PathBuf {
        self.dir.join("octld.sock")
    }

    /// `octld.log`: the daemon's own log.
    pub fn log(&self) -> PathBuf {
        self.dir.join("octld.log")
    }

    /// `runs/`: one directory per run.
    pub fn runs(&self) -> PathBuf {
        self.dir.join("runs")
    }

    /// `tmux.sock`: the daemon's private tmux server, where the agents' windows are.
    pub fn tmux_socket(&self) -> PathBuf {
        self.dir.join("tmux.sock")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_paths_the_cli_touches_are_under_the_home() {
        let h = Home {
            dir: PathBuf::from("/c/.orchestratectl"),
        };
        assert_eq!(h.socket(), Path::new("/c/.orchestratectl/octld.sock"));
        assert_eq!(h.log(), Path::new("/c/.orchestratectl/octld.log"));
        assert_eq!(h.runs(), Path::new("/c/.orchestratectl/runs"));
        assert_eq!(h.tmux_socket(), Path::new("/c/.orchestratectl/tmux.sock"));
    }
}
