//! Where the state lives, resolved the same way by the daemon and the CLI: `--home`, else
//! `$OCTL_HOME`, else `$HOME/.orchestratectl`. Pure: the caller passes the flag, the
//! environment's values and the current directory.
//!
//! - An empty `--home` is an error: a flag given with no value is a mistake, not a default.
//! - An empty environment variable (`OCTL_HOME`, `HOME`) counts as unset, as `OCTL_HOME= cmd`
//!   is the shell's way to clear one.
//! - A relative path is made absolute against the current directory, so the daemon (which
//!   leaves the directory it was started in) and the CLI agree on it.
//! - Nothing given and no `HOME`: an error with a hint, never a guess such as `/`.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use crate::AppError;

/// Every path under one home, named once for the daemon and the CLI (pure: the daemon's
/// `Home` adds making it, the CLI's resolving it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    root: PathBuf,
}

impl Layout {
    pub fn new(root: impl Into<PathBuf>) -> Layout {
        Layout { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
    /// `octld.sock`: the daemon's socket.
    pub fn socket(&self) -> PathBuf {
        self.root.join("octld.sock")
    }
    /// `octld.lock`: held by the one daemon of this home.
    pub fn lock(&self) -> PathBuf {
        self.root.join("octld.lock")
    }
    /// `octld.log`: the daemon's own log.
    pub fn log(&self) -> PathBuf {
        self.root.join("octld.log")
    }
    /// `octld.stopped`: left by `daemon stop`, so a follower (`run wait`, `event feed
    /// --follow`, …) waits for a daemon stopped on purpose instead of starting it; the next
    /// daemon to start removes it.
    pub fn stopped(&self) -> PathBuf {
        self.root.join("octld.stopped")
    }
    pub fn config(&self) -> PathBuf {
        self.root.join("config.toml")
    }
    /// `tmux.sock`: the daemon's private tmux server, where the agents' windows are.
    pub fn tmux_socket(&self) -> PathBuf {
        self.root.join("tmux.sock")
    }
    /// `runs/`: one directory per run.
    pub fn runs(&self) -> PathBuf {
        self.root.join("runs")
    }
    pub fn run_dir(&self, run: &str) -> PathBuf {
        self.runs().join(run)
    }
    pub fn worktrees(&self) -> PathBuf {
        self.root.join("worktrees")
    }
    /// The warm pool of prepared worktrees: `pool/<KEY>/<ID>/`.
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
    /// What a sandboxed node's agent is given instead of the user's: its home, `/tmp`, its
    /// branch's ref and reflog, copies of its CLI's configuration: `sandboxes/<RUN>/<NODE>/`.
    pub fn sandbox_of(&self, run: &str, node: &str) -> PathBuf {
        self.root.join("sandboxes").join(run).join(node)
    }
    /// A sandboxed node's control directory, shown to its agent as the whole home: its own
    /// socket (`octld.sock`) only. `s/<KEY>/`, KEY 16 hex digits naming the node: a socket's
    /// path must stay under 108 bytes.
    pub fn agent_ctl(&self, key: &str) -> PathBuf {
        self.root.join("s").join(key)
    }
}

/// The directory under `$HOME` used when neither `--home` nor `$OCTL_HOME` is given.
pub const DEFAULT_DIR: &str = ".orchestratectl";

/// The state directory, always absolute. `cwd` is `None` when the current directory cannot be
/// read; only a relative path needs it.
pub fn resolve(
    flag: Option<&OsStr>,
    octl_home: Option<&OsStr>,
    home: Option<&OsStr>,
    cwd: Option<&Path>,
) -> Result<PathBuf, AppError> {
    let set = |v: Option<&OsStr>| v.filter(|v| !v.is_empty()).map(PathBuf::from);
    let (source, dir) = match (flag, set(octl_home)) {
        (Some(flag), _) if flag.is_empty() => {
            return Err(
                AppError::invalid("invalid --home \"\": expected a directory path").with_hint(
                    "pass --home DIR, or leave it out to use $OCTL_HOME or ~/.orchestratectl",
                ),
            )
        }
        (Some(flag), _) => ("--home", PathBuf::from(flag)),
        (None, Some(dir)) => ("OCTL_HOME", dir),
        (None, None) => match set(home) {
            Some(home) => ("HOME", home.join(DEFAULT_DIR)),
            None => {
                return Err(AppError::invalid(
                    "cannot find the state directory: neither --home nor OCTL_HOME is given, and HOME is unset or empty",
                )
                .with_hint("pass --home DIR or set OCTL_HOME"))
            }
        },
    };
    if dir.is_absolute() {
        return Ok(dir);
    }
    match cwd {
        Some(cwd) => Ok(cwd.join(dir)),
        None => Err(AppError::invalid(format!(
            "invalid {source} {:?}: a relative path needs the current directory, which cannot be read",
            dir.display().to_string()
        ))
        .with_hint(format!("give {source} as an absolute path"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    fn os(s: &str) -> Option<&OsStr> {
        Some(OsStr::new(s))
    }

    fn cwd() -> Option<&'static Path> {
        Some(Path::new("/work"))
    }

    #[test]
    fn the_flag_beats_octl_home_beats_home() {
        let r = |flag, octl, home| resolve(flag, octl, home, cwd()).unwrap();
        assert_eq!(r(os("/a"), os("/b"), os("/c")), Path::new("/a"));
        assert_eq!(r(None, os("/b"), os("/c")), Path::new("/b"));
        assert_eq!(r(None, None, os("/c")), Path::new("/c/.orchestratectl"));
    }

    #[test]
    fn an_empty_flag_is_an_error_naming_it() {
        let err = resolve(os(""), os("/b"), os("/c"), cwd()).unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidParams);
        assert!(err.message.contains("--home"), "{err:?}");
        assert!(err.hint.is_some());
    }

    #[test]
    fn empty_environment_values_count_as_unset() {
        assert_eq!(
            resolve(None, os(""), os("/c"), cwd()).unwrap(),
            Path::new("/c/.orchestratectl")
        );
        let err = resolve(None, os(""), os(""), cwd()).unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidParams);
        assert!(err.message.contains("HOME is unset or empty"), "{err:?}");
    }

    #[test]
    fn nothing_given_is_an_error_with_a_hint() {
        let err = resolve(None, None, None, cwd()).unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidParams);
        assert!(err.message.contains("OCTL_HOME"), "{err:?}");
        assert_eq!(
            err.hint.as_deref(),
            Some("pass --home DIR or set OCTL_HOME")
        );
    }

    #[test]
    fn relative_paths_are_made_absolute_against_the_cwd() {
        assert_eq!(
            resolve(os("rel"), None, None, cwd()).unwrap(),
            Path::new("/work/rel")
        );
        assert_eq!(
            resolve(None, os("./x/y"), None, cwd()).unwrap(),
            Path::new("/work/./x/y")
        );
        assert_eq!(
            resolve(None, None, os("me"), cwd()).unwrap(),
            Path::new("/work/me/.orchestratectl")
        );
    }

    #[test]
    fn a_relative_path_without_a_cwd_is_an_error_naming_its_source() {
        let err = resolve(None, os("rel"), None, None).unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidParams);
        assert!(
            err.message.starts_with("invalid OCTL_HOME \"rel\""),
            "{err:?}"
        );
        let err = resolve(os("rel"), None, None, None).unwrap_err();
        assert!(err.message.starts_with("invalid --home \"rel\""), "{err:?}");
        // An absolute path needs no cwd.
        assert_eq!(
            resolve(os("/a"), None, None, None).unwrap(),
            Path::new("/a")
        );
    }
}
