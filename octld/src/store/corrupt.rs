//! Corrupt runs: what their set-aside log still says, and setting the whole run aside.
//!
//! A run whose log does not replay is read-only (see [`super::log`]). Its lines before the bad
//! one are intact, so `run show` folds them to show what can be read. A human who has seen it
//! can move the run directory to `$OCTL_HOME/corrupt/<RUN>` (`run quarantine`): the daemon
//! forgets the run, so doctor is green again, and nothing is deleted.

use std::collections::VecDeque;
use std::fs::{self, File};
use std::io::{self, BufRead, BufReader};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use octl_proto::{AppError, ErrorKind, Event, RunState};

use super::log::CORRUPT_FILE;
use super::{RunHandle, Store};

/// How many of the readable events `run show` returns (the last ones before the bad line).
pub const SHOWN_EVENTS: usize = 50;

/// What a corrupt log still says.
pub struct Salvage {
    /// The log as set aside.
    pub log: PathBuf,
    /// The state folded from the events before the bad line, if the first one was readable.
    pub state: Option<RunState>,
    /// How many events before the bad line were read.
    pub readable: u64,
    /// The last [`SHOWN_EVENTS`] of them.
    pub last: Vec<Event>,
    /// 1-based number of the first bad line (0: the log holds no complete event).
    pub bad_line: u64,
    pub reason: String,
}

/// Reads a corrupt run's log line by line up to its first bad line (streaming: nothing but the
/// last few events is kept).
pub fn salvage(run_dir: &Path) -> io::Result<Salvage> {
    let log = run_dir.join(CORRUPT_FILE);
    let mut reader = BufReader::with_capacity(1 << 20, File::open(&log)?);
    let mut buf = Vec::with_capacity(512);
    let mut state: Option<RunState> = None;
    let mut last = VecDeque::with_capacity(SHOWN_EVENTS);
    let mut readable = 0;
    let mut line_no = 0;
    let (bad_line, reason) = loop {
        buf.clear();
        if reader.read_until(b'\n', &mut buf)? == 0 {
            break (0, "the log ends here".to_string());
        }
        line_no += 1;
        if buf.last() != Some(&b'\n') {
            break (line_no, "its last line is cut short".to_string());
        }
        let Ok(text) = std::str::from_utf8(&buf[..buf.len() - 1]) else {
            break (line_no, "not UTF-8".to_string());
        };
        let ev = match Event::from_line(text) {
            Ok(ev) => ev,
            Err(e) => break (line_no, format!("not a valid event: {e}")),
        };
        let applied = match state.as_mut() {
            None => RunState::from_created(&ev).map(|s| state = Some(s)),
            Some(s) => s.apply(&ev),
        };
        if let Err(e) = applied {
            break (
                line_no,
                format!("event seq {} does not fit: {}", ev.seq, e.message),
            );
        }
        readable += 1;
        if last.len() == SHOWN_EVENTS {
            last.pop_front();
        }
        last.push_back(ev);
    };
    Ok(Salvage {
        log,
        state,
        readable,
        last: last.into(),
        bad_line,
        reason,
    })
}

impl Store {
    /// Moves a corrupt run's directory to `$OCTL_HOME/corrupt/<RUN>` and forgets the run.
    /// Refused for a run that is not corrupt, and when the destination exists. Two callers
    /// racing: one moves it, the other finds no such run.
    pub fn quarantine(&self, handle: &RunHandle) -> Result<PathBuf, AppError> {
        if handle.corrupt().is_none() {
            return Err(AppError::new(
                ErrorKind::InvalidTransition,
                format!(
                    "run {} is {}: only a corrupt run can be set aside",
                    handle.id,
                    handle.summary().status
                ),
            ));
        }
        let aside = self.shared.home.root().join("corrupt");
        let dest = aside.join(&handle.id);
        // Under the runs lock: the check that the run is still here and the move are one step.
        let mut maps = self.shared.maps_mut();
        if !handle.dir.exists() {
            return Err(AppError::not_found(format!(
                "no run {}: it was set aside already",
                handle.id
            )));
        }
        if dest.exists() {
            return Err(AppError::new(
                ErrorKind::InvalidTransition,
                format!(
                    "cannot set run {} aside: {} exists already",
                    handle.id,
                    dest.display()
                ),
            )
            .with_hint("move that directory elsewhere first; nothing was changed"));
        }
        let io_err = |e: io::Error| {
            AppError::internal(format!(
                "cannot move {} to {}: {e}",
                handle.dir.display(),
                dest.display()
            ))
        };
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&aside)
            .map_err(io_err)?;
        fs::rename(&handle.dir, &dest).map_err(io_err)?;
        // Both directory entries, so the move survives a crash.
        let _ = super::log::sync_dir(&aside);
        let _ = super::log::sync_dir(&self.shared.home.runs());
        maps.active.remove(&handle.id);
        maps.loaded.remove(&handle.id);
        if let Err(e) = self.shared.index.forget(&handle.id) {
            tracing::warn!(run = %handle.id, error = %e, "cannot record in the run index that a run was set aside; `run list` shows it until the index is rebuilt");
        }
        tracing::warn!(run = %handle.id, to = %dest.display(), "corrupt run set aside");
        Ok(dest)
    }
}
