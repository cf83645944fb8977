//! Where the state lives: `--home` > `$OCTL_HOME` > `$HOME/.orchestratectl`, and the paths of
//! the files the CLI touches under it (the daemon's socket and log, the runs' directories).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use octl_proto::AppError;

/// The state directory of one daemon (DESIGN.md §3). Always absolute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Home {
    dir: PathBuf,
}

impl Home {
    /// Resolves the home from the `--home` flag, then `$OCTL_HOME`, then `$HOME`. Empty values
    /// count as unset; a relative path is taken relative to `cwd`.
    pub fn resolve(
        flag: Option<&Path>,
        octl_home: Option<OsString>,
        user_home: Option<OsString>,
        cwd: &Path,
    ) -> Result<Home, AppError> {
        let non_empty = |v: Option<OsString>| v.filter(|s| !s.is_empty()).map(PathBuf::from);
        let dir = match (
            flag.filter(|p| !p.as_os_str().is_empty()),
            non_empty(octl_home),
        ) {
            (Some(p), _) => p.to_path_buf(),
            (None, Some(p)) => p,
            (None, None) => match non_empty(user_home) {
                Some(h) => h.join(".orchestratectl"),
                None => return Err(AppError::invalid(
                    "cannot find the state directory: neither --home, OCTL_HOME nor HOME is set",
                )
                .with_hint("pass --home DIR or set OCTL_HOME")),
            },
        };
        let dir = if dir.is_absolute() {
            dir
        } else {
            cwd.join(dir)
        };
        Ok(Home { dir })
    }

    /// Resolves the home from this process's flag value and environment.
    pub fn from_env(flag: Option<&Path>) -> Result<Home, AppError> {
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        Home::resolve(
            flag,
            std::env::var_os("OCTL_HOME"),
            std::env::var_os("HOME"),
            &cwd,
        )
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

    fn os(s: &str) -> Option<OsString> {
        Some(OsString::from(s))
    }

    #[test]
    fn flag_beats_env_beats_home() {
        let cwd = Path::new("/work");
        let h = Home::resolve(Some(Path::new("/a")), os("/b"), os("/c"), cwd).unwrap();
        assert_eq!(h.dir(), Path::new("/a"));
        let h = Home::resolve(None, os("/b"), os("/c"), cwd).unwrap();
        assert_eq!(h.dir(), Path::new("/b"));
        let h = Home::resolve(None, os(""), os("/c"), cwd).unwrap();
        assert_eq!(h.dir(), Path::new("/c/.orchestratectl"));
        assert_eq!(h.socket(), Path::new("/c/.orchestratectl/octld.sock"));
        assert_eq!(h.runs(), Path::new("/c/.orchestratectl/runs"));
        assert_eq!(h.tmux_socket(), Path::new("/c/.orchestratectl/tmux.sock"));
    }

    #[test]
    fn relative_paths_are_made_absolute_and_missing_home_is_an_error() {
        let h = Home::resolve(Some(Path::new("rel")), None, None, Path::new("/work")).unwrap();
        assert_eq!(h.dir(), Path::new("/work/rel"));
        let err = Home::resolve(None, None, None, Path::new("/")).unwrap_err();
        assert_eq!(err.kind, octl_proto::ErrorKind::InvalidParams);
        assert!(err.message.contains("OCTL_HOME"));
    }
}
