//! Reading and writing one run's `events.jsonl`.
//!
//! A line is only ever written whole, in one `write` with the rest of its batch, then synced.
//! So a last line without its newline is a write that a crash cut short and was never
//! acknowledged: it is cut off. A bad line anywhere else means the file was damaged: the run
//! is corrupt and its log is set aside, never written again. A batch whose write or sync
//! fails while the daemon runs is cut back at once ([`AppendFault`]), so the log holds
//! exactly the acknowledged events.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use octl_proto::{Event, RunState};

/// Name of the log inside a run directory.
pub const LOG_FILE: &str = "events.jsonl";
/// Name a corrupt log is moved to, so nothing writes to it again.
pub const CORRUPT_FILE: &str = "events.jsonl.corrupt";

/// Why a log cannot be replayed.
#[derive(Debug, Clone)]
pub struct Corruption {
    /// 1-based line number of the first bad line (0 when the log is empty).
    pub line: u64,
    pub reason: String,
}

/// A replayed log: the folded state, the file's valid length, and bytes cut from a torn tail.
pub struct Replayed {
    pub state: RunState,
    pub len: u64,
    pub cut: u64,
}

/// Replays `path` line by line (streaming: a log of millions of events is never held whole).
/// With `repair`, a torn last line is truncated away on disk.
pub fn replay(path: &Path, repair: bool) -> io::Result<Result<Replayed, Corruption>> {
    let file = File::open(path)?;
    let total = file.metadata()?.len();
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut buf = Vec::with_capacity(512);
    let mut offset: u64 = 0;
    let mut line_no: u64 = 0;
    let mut state: Option<RunState> = None;
    loop {
        buf.clear();
        let n = reader.read_until(b'\n', &mut buf)?;
        if n == 0 {
            break;
        }
        if buf.last() != Some(&b'\n') {
            // Torn tail: never acknowledged, since the ack waits for the whole batch's sync.
            break;
        }
        line_no += 1;
        let text = match std::str::from_utf8(&buf[..buf.len() - 1]) {
            Ok(t) => t,
            Err(_) => return Ok(Err(bad(line_no, "not UTF-8".into()))),
        };
        let ev = match Event::from_line(text) {
            Ok(ev) => ev,
            Err(e) => return Ok(Err(bad(line_no, format!("not a valid event: {e}")))),
        };
        let applied = match state.as_mut() {
            None => RunState::from_created(&ev).map(|s| state = Some(s)),
            Some(s) => s.apply(&ev),
        };
        if let Err(e) = applied {
            return Ok(Err(bad(
                line_no,
                format!("event seq {} does not fit: {}", ev.seq, e.message),
            )));
        }
        offset += n as u64;
    }
    let Some(state) = state else {
        return Ok(Err(Corruption {
            line: 0,
            reason: "the log holds no complete event".into(),
        }));
    };
    // A reader without `repair` may race an append (a finished run being made active
    // again): the file can have grown past the length read at the start.
    let cut = total.saturating_sub(offset);
    if cut > 0 && repair {
        let f = OpenOptions::new().write(true).open(path)?;
        f.set_len(offset)?;
        f.sync_all()?;
    }
    Ok(Ok(Replayed {
        state,
        len: offset,
        cut,
    }))
}

fn bad(line: u64, reason: String) -> Corruption {
    Corruption { line, reason }
}

/// Reads the events with `since < seq <= upto`, at most `limit` of them.
pub fn read_range(path: &Path, since: u64, upto: u64, limit: usize) -> io::Result<Vec<Event>> {
    #[derive(serde::Deserialize)]
    struct SeqOnly {
        seq: u64,
    }
    let mut reader = BufReader::with_capacity(1 << 20, File::open(path)?);
    let mut buf = Vec::with_capacity(512);
    let mut out = Vec::new();
    while out.len() < limit {
        buf.clear();
        if reader.read_until(b'\n', &mut buf)? == 0 || buf.last() != Some(&b'\n') {
            break;
        }
        let line = &buf[..buf.len() - 1];
        let seq = serde_json::from_slice::<SeqOnly>(line)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?
            .seq;
        if seq <= since {
            continue;
        }
        if seq > upto {
            break;
        }
        let text =
            std::str::from_utf8(line).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        out.push(
            Event::from_line(text).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?,
        );
    }
    Ok(out)
}

/// Why a batch is not in the log.
#[derive(Debug)]
pub enum AppendFault {
    /// The write failed and the log was cut back to its last committed length: as if the
    /// batch had never been tried. The log takes the next batch.
    Write(io::Error),
    /// The sync failed (or a failed write could not be cut back). Once `fdatasync` has
    /// failed, the kernel may have dropped dirty pages and a later sync can report success
    /// without them (PostgreSQL's "fsyncgate"): the log must not be written again before a
    /// daemon start replays it.
    Untrusted(io::Error),
}

impl AppendFault {
    pub fn error(&self) -> &io::Error {
        match self {
            AppendFault::Write(e) | AppendFault::Untrusted(e) => e,
        }
    }
}

/// A run's log, appended to in batches. It holds no descriptor between batches: the file is
/// opened for each one (a few microseconds beside its `fdatasync`), so the daemon's open files
/// do not grow with its runs — an `ulimit -n` of 256 (macOS's default) holds any number.
pub struct LogWriter {
    path: PathBuf,
    /// Length of what was written and synced: where a failed batch is cut back to.
    len: u64,
}

/// The first batch of a new log, written but not yet synced.
pub struct Unsynced {
    file: File,
}

impl Unsynced {
    pub fn sync(&self) -> io::Result<()> {
        crate::failpoint::io_error("log:sync-eio")?;
        self.file.sync_data()
    }
}

impl LogWriter {
    /// The log at `path` (created empty when missing).
    pub fn open(path: &Path) -> io::Result<LogWriter> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        let len = file.metadata()?.len();
        Ok(LogWriter {
            path: path.to_path_buf(),
            len,
        })
    }

    /// Creates the log of a new run with its first batch, without waiting for the disk: the
    /// caller must [`Unsynced::sync`] before acknowledging anything in it.
    pub fn create(path: &Path, bytes: &[u8]) -> io::Result<Unsynced> {
        let mut file = OpenOptions::new().create(true).append(true).open(path)?;
        file.lock()?;
        let written = file.write_all(bytes);
        let _ = file.unlock();
        written?;
        Ok(Unsynced { file })
    }

    /// Writes a batch of lines in one write and syncs it, under the run's flock. Returns only
    /// when the data is on disk: the caller acknowledges after this. On a fault the log is
    /// cut back to where it was before the batch.
    pub fn append_synced(&mut self, bytes: &[u8]) -> Result<(), AppendFault> {
        let mut file = OpenOptions::new()
            .append(true)
            .open(&self.path)
            .map_err(AppendFault::Write)?;
        file.lock().map_err(AppendFault::Write)?;
        let result = self
            .write(&mut file, bytes)
            .and_then(|_| match sync(&file) {
                Ok(()) => Ok(()),
                Err(e) => {
                    self.cut_back(&file);
                    Err(AppendFault::Untrusted(e))
                }
            });
        if result.is_ok() {
            self.len += bytes.len() as u64;
        }
        let _ = file.unlock();
        result
    }

    /// One write of the whole batch; on failure (a full disk, EIO) the log is cut back, so a
    /// partly written batch never stays behind to be replayed as if acknowledged.
    fn write(&mut self, file: &mut File, bytes: &[u8]) -> Result<(), AppendFault> {
        let written = match crate::failpoint::io_error("log:write-eio") {
            // A write the disk gave up on halfway, as a full disk does.
            Err(e) => file.write_all(&bytes[..bytes.len() / 2]).and(Err(e)),
            Ok(()) => file.write_all(bytes),
        };
        match written {
            Ok(()) => Ok(()),
            Err(e) => {
                if self.cut_back(file) {
                    Err(AppendFault::Write(e))
                } else {
                    Err(AppendFault::Untrusted(e))
                }
            }
        }
    }

    /// Truncates the file to its last committed length; false if even that failed.
    fn cut_back(&self, file: &File) -> bool {
        match file.set_len(self.len) {
            Ok(()) => true,
            Err(e) => {
                tracing::error!(error = %e, len = self.len, "cannot cut the log back after a failed write");
                false
            }
        }
    }
}

fn sync(file: &File) -> io::Result<()> {
    crate::failpoint::io_error("log:sync-eio")?;
    file.sync_data()
}

/// Appends `bytes` to `file` in one write and syncs it; on failure the file is cut back to
/// `len`, what was written and synced before, so a failed append leaves nothing. `point` is
/// the failpoint that fails it in tests. For the files other than logs that only grow (the
/// change feed's index, the run journal).
pub fn append_synced(file: &mut File, len: &mut u64, bytes: &[u8], point: &str) -> io::Result<()> {
    let result = crate::failpoint::io_error(point)
        .and_then(|_| file.write_all(bytes))
        .and_then(|_| file.sync_data());
    match result {
        Ok(()) => {
            *len += bytes.len() as u64;
            Ok(())
        }
        Err(e) => {
            let _ = file.set_len(*len);
            Err(e)
        }
    }
}

/// Syncs a directory, so a file created in it survives a crash.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}
