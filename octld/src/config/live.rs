//! config.toml as the daemon holds it: read once, and again only when the file changes; a
//! file that does not parse is refused, the last good one stays in force, and the error is
//! what `daemon status` and `doctor` show until the file is fixed.
//!
//! A change is noticed at the next use by the file's identity and times (inode, size, mtime
//! and ctime, to the nanosecond): one `stat` a use instead of a read and a parse, and no
//! watcher thread, whose events a network home directory or an editor's write-and-rename can
//! lose. So an edit takes effect at the next step that reads the config, as before, without a
//! restart.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use octl_proto::AppError;

use super::Config;

pub struct Live {
    path: PathBuf,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The file as it was last read; `None` before the first read.
    read: Option<Stamp>,
    /// The last file that parsed (no file is the defaults).
    good: Option<Arc<Config>>,
    /// Why the file as it is now was refused.
    error: Option<AppError>,
}

/// What tells one version of the file from another; `Absent` when there is none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stamp {
    Absent,
    File {
        ino: u64,
        len: u64,
        mtime: (i64, i64),
        ctime: (i64, i64),
    },
    /// The file could not be looked at: read again at every use until it can.
    Unknown,
}

fn stamp(path: &Path) -> Stamp {
    match std::fs::metadata(path) {
        Ok(m) => Stamp::File {
            ino: m.ino(),
            len: m.len(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Stamp::Absent,
        Err(_) => Stamp::Unknown,
    }
}

impl Live {
    /// Reads `path` now (a broken file is logged and reported; the daemon starts anyway).
    pub fn open(path: PathBuf) -> Live {
        let live = Live {
            path,
            state: Mutex::new(State::default()),
        };
        drop(live.refresh());
        live
    }

    /// The config in force: the file as it is now, or the last good one when it does not
    /// parse. An error only when no version of the file has parsed since the daemon started:
    /// then what needs the config (a spawn, a fan-out) is refused with the file's error, never
    /// done with defaults the file did not ask for.
    pub fn get(&self) -> Result<Arc<Config>, AppError> {
        let state = self.refresh();
        match (&state.good, &state.error) {
            (Some(good), _) => Ok(good.clone()),
            (None, Some(e)) => Err(e.clone()),
            (None, None) => Ok(Arc::default()),
        }
    }

    /// What is in force where a default must stand in (the supervisor's silence limits,
    /// admission's floor) while no version of the file has parsed: that error is shown by
    /// `daemon status` and `doctor` meanwhile ([`Live::problem`]).
    pub fn get_or_default(&self) -> Arc<Config> {
        self.get().unwrap_or_default()
    }

    /// Why config.toml, as it is now, is not in force; `None` when it is.
    pub fn problem(&self) -> Option<AppError> {
        self.refresh().error.clone()
    }

    fn refresh(&self) -> std::sync::MutexGuard<'_, State> {
        let now = stamp(&self.path);
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.read == Some(now) && now != Stamp::Unknown {
            return state;
        }
        match Config::load(&self.path) {
            Ok(c) => {
                if state.error.is_some() {
                    tracing::info!(path = %self.path.display(), "config.toml is in force again");
                }
                state.good = Some(Arc::new(c));
                state.error = None;
            }
            Err(e) => {
                let kept = if state.good.is_some() {
                    "the last good one stays in force"
                } else {
                    "what needs it is refused until it is fixed"
                };
                tracing::warn!(path = %self.path.display(), error = %e.message, "config.toml refused; {kept}");
                let message = format!("{}; {kept}", e.message);
                state.error = Some(AppError { message, ..e });
            }
        }
        state.read = Some(now);
        state
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broken_edit_keeps_the_last_good_config_and_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        let live = Live::open(path.clone());
        assert!(
            live.get().unwrap().agents.is_empty(),
            "no file: the defaults"
        );
        std::fs::write(&path, "[agents.shell]\nsilence_limit_secs = 5\n").unwrap();
        assert!(live.get().unwrap().agents.contains_key("shell"));
        assert!(live.problem().is_none());
        std::fs::write(&path, "[agents.shell]\nsilence_limit_secs = \"five\"\n").unwrap();
        let kept = live.get().unwrap();
        assert!(kept.agents.contains_key("shell"), "the last good one");
        let why = live.problem().expect("the error is kept").message;
        assert!(why.contains("silence_limit_secs"), "{why}");
        std::fs::write(&path, "").unwrap();
        assert!(live.get().unwrap().agents.is_empty(), "fixed: the new file");
        assert!(live.problem().is_none());
    }

    #[test]
    fn a_file_broken_from_the_start_refuses_what_needs_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, "[nonsense\n").unwrap();
        let live = Live::open(path.clone());
        assert!(live.get().is_err());
        assert!(live.problem().is_some());
        assert!(live.get_or_default().agents.is_empty());
        std::fs::write(&path, "[defaults]\nagent = \"shell\"\n").unwrap();
        assert_eq!(live.get().unwrap().defaults.agent.as_deref(), Some("shell"));
    }
}
