//! Reading a run's `events.jsonl` straight from disk, for `event tail` while the daemon is down:
//! resolve the run among the directories under `runs/`, print the last lines, and follow the
//! file with `notify`. Only complete (`\n`-terminated) lines are ever returned.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use octl_proto::ids::{is_full_run_id, parse_run_ref};
use octl_proto::{AppError, ErrorKind};
use serde_json::Value;

/// The log's file name inside a run directory.
pub const EVENTS_FILE: &str = "events.jsonl";
/// Even without a notification the file is read again this often (a safety net).
const RESCAN: Duration = Duration::from_secs(1);

/// A watcher that sends `()` when what it watches changes: written, created, removed,
/// renamed. Reads are not changes: a follower opens the file it watches to read it, and an
/// open or a read that woke it would wake it again at once, spinning (a CPU and, while the
/// daemon is away, a connection attempt per turn).
pub fn watch_changes(
    tx: tokio::sync::mpsc::UnboundedSender<()>,
) -> notify::Result<notify::RecommendedWatcher> {
    use notify::event::{AccessKind, AccessMode, EventKind};
    notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        let read_only = res.as_ref().is_ok_and(|ev| {
            matches!(ev.kind, EventKind::Access(kind)
                if kind != AccessKind::Close(AccessMode::Write))
        });
        if !read_only {
            let _ = tx.send(());
        }
    })
}

/// Finds the run directory for `given` (a ULID or unique prefix ≥ 6) under `runs`.
/// Returns the full run id and its directory.
pub fn resolve_run_dir(
    runs: &Path,
    field: &str,
    given: &str,
) -> Result<(String, PathBuf), AppError> {
    let run_ref = parse_run_ref(field, given)?;
    let entries = match std::fs::read_dir(runs) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(no_such_run(given, runs));
        }
        Err(e) => {
            return Err(AppError::internal(format!(
                "cannot read {}: {e}",
                runs.display()
            )))
        }
    };
    let mut matches: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|name| is_full_run_id(name) && run_ref.matches(name))
        .collect();
    matches.sort();
    match matches.len() {
        0 => Err(no_such_run(given, runs)),
        1 => {
            let id = matches.remove(0);
            let dir = runs.join(&id);
            Ok((id, dir))
        }
        n => Err(AppError::new(
            ErrorKind::AmbiguousId,
            format!(
                "ambiguous {field} {given:?}: it matches {n} runs ({}); give more characters",
                matches.join(", ")
            ),
        )),
    }
}

fn no_such_run(given: &str, runs: &Path) -> AppError {
    AppError::not_found(format!("no run matches {given:?} in {}", runs.display()))
        .with_hint("list runs with `orchestratectl run list`")
}

/// Where to start printing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// The last N complete lines.
    LastLines(usize),
    /// Every line whose `seq` is greater than this.
    AfterSeq(u64),
}

/// A run's event log read incrementally: a byte offset up to the last complete line read.
pub struct LogFile {
    dir: PathBuf,
    path: PathBuf,
    offset: u64,
}

impl LogFile {
    pub fn new(run_dir: &Path) -> LogFile {
        LogFile {
            dir: run_dir.to_path_buf(),
            path: run_dir.join(EVENTS_FILE),
            offset: 0,
        }
    }

    /// Reads the log from the start and returns the lines to print first.
    pub fn initial(&mut self, start: Start) -> Result<Vec<String>, AppError> {
        if !self.path.exists() {
            return Err(AppError::not_found(format!(
                "the run has no event log at {}",
                self.path.display()
            ))
            .with_hint("a corrupt log is set aside by the daemon; look at its log"));
        }
        self.offset = 0;
        let lines = self.read_new()?;
        Ok(select(lines, start))
    }

    /// Watches the run directory and hands every new complete line to `emit`, forever (until
    /// the process is interrupted) or until `emit` fails.
    pub async fn follow(&mut self, emit: &mut dyn FnMut(&str)) -> Result<(), AppError> {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
        let mut watcher = watch_changes(tx)
            .map_err(|e| AppError::internal(format!("cannot watch {}: {e}", self.dir.display())))?;
        watcher
            .watch(&self.dir, RecursiveMode::NonRecursive)
            .map_err(|e| AppError::internal(format!("cannot watch {}: {e}", self.dir.display())))?;
        loop {
            // Lines that landed between the first read and the watch are caught here.
            for line in self.read_new()? {
                emit(&line);
            }
            let _ = tokio::time::timeout(RESCAN, rx.recv()).await;
            while rx.try_recv().is_ok() {}
        }
    }

    /// The complete lines after the offset; advances the offset past them. A file that got
    /// shorter (a torn tail cut off) is read on from its new end. (Also the TUI's reader of
    /// logs on disk while the daemon is down.)
    pub fn read_new(&mut self) -> Result<Vec<String>, AppError> {
        let mut file = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => {
                return Err(AppError::internal(format!(
                    "cannot read {}: {e}",
                    self.path.display()
                )))
            }
        };
        let read_err = |e: std::io::Error| {
            AppError::internal(format!("cannot read {}: {e}", self.path.display()))
        };
        let len = file.metadata().map_err(read_err)?.len();
        if len < self.offset {
            self.offset = len;
        }
        file.seek(SeekFrom::Start(self.offset)).map_err(read_err)?;
        let mut buf = Vec::new();
        file.read_to_end(&mut buf).map_err(read_err)?;
        let (lines, consumed) = complete_lines(&buf);
        self.offset += consumed as u64;
        Ok(lines)
    }
}

/// Splits bytes into complete lines (without `\n`, empty ones skipped) and returns how many
/// bytes they covered: everything up to and including the last `\n`.
pub fn complete_lines(buf: &[u8]) -> (Vec<String>, usize) {
    let consumed = match buf.iter().rposition(|b| *b == b'\n') {
        Some(pos) => pos + 1,
        None => return (Vec::new(), 0),
    };
    let lines = buf[..consumed]
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| String::from_utf8_lossy(l).into_owned())
        .collect();
    (lines, consumed)
}

/// Picks the lines to print first.
pub fn select(lines: Vec<String>, start: Start) -> Vec<String> {
    match start {
        Start::LastLines(n) => {
            let skip = lines.len().saturating_sub(n);
            lines.into_iter().skip(skip).collect()
        }
        Start::AfterSeq(after) => lines
            .into_iter()
            .filter(|l| seq_of(l).is_none_or(|s| s > after))
            .collect(),
    }
}

/// The `seq` of an event line, if it has one.
pub fn seq_of(line: &str) -> Option<u64> {
    serde_json::from_str::<Value>(line)
        .ok()
        .and_then(|v| v.get("seq").and_then(Value::as_u64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    const A: &str = "01JDXJ5R8Q4M0ZK7P2W9TB3C6E";
    const B: &str = "01JDXJ5R8Q4M0ZK7P2W9TB3C6F";

    #[test]
    fn only_complete_lines_count() {
        let (lines, consumed) = complete_lines(b"{\"seq\":1}\n{\"seq\":2}\n{\"se");
        assert_eq!(lines, vec!["{\"seq\":1}", "{\"seq\":2}"]);
        assert_eq!(consumed, 20);
        assert_eq!(complete_lines(b"partial"), (Vec::new(), 0));
    }

    #[test]
    fn selecting_the_start() {
        let lines: Vec<String> = (1..=5).map(|i| format!("{{\"seq\":{i}}}")).collect();
        assert_eq!(select(lines.clone(), Start::LastLines(2)).len(), 2);
        assert_eq!(select(lines.clone(), Start::LastLines(10)).len(), 5);
        assert_eq!(select(lines.clone(), Start::LastLines(0)).len(), 0);
        assert_eq!(
            select(lines, Start::AfterSeq(3)),
            vec!["{\"seq\":4}", "{\"seq\":5}"]
        );
    }

    #[test]
    fn resolving_runs_on_disk() {
        let home = tempfile::tempdir().unwrap();
        let runs = home.path().join("runs");
        std::fs::create_dir_all(runs.join(A)).unwrap();
        std::fs::create_dir_all(runs.join(B)).unwrap();
        std::fs::create_dir_all(runs.join("not-a-run")).unwrap();
        let (id, dir) = resolve_run_dir(&runs, "--run", &A.to_ascii_lowercase()).unwrap();
        assert_eq!(id, A);
        assert_eq!(dir, runs.join(A));
        let err = resolve_run_dir(&runs, "--run", &A[..8]).unwrap_err();
        assert_eq!(err.kind, ErrorKind::AmbiguousId);
        assert_eq!(err.kind.exit_code(), 2);
        let err = resolve_run_dir(&runs, "--run", "01ZZZZZZ").unwrap_err();
        assert_eq!(err.kind.exit_code(), 3);
        let err = resolve_run_dir(&runs, "--run", "../etc").unwrap_err();
        assert_eq!(err.kind.exit_code(), 2);
        let err = resolve_run_dir(&home.path().join("none"), "--run", A).unwrap_err();
        assert_eq!(err.kind, ErrorKind::NotFound);
    }

    #[test]
    fn reading_and_following_a_growing_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(EVENTS_FILE);
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(b"{\"seq\":1}\n{\"seq\":2}\n{\"seq\":3")
            .unwrap();
        let mut log = LogFile::new(dir.path());
        assert_eq!(
            log.initial(Start::LastLines(1)).unwrap(),
            vec!["{\"seq\":2}"]
        );
        f.write_all(b"}\n").unwrap();
        assert_eq!(log.read_new().unwrap(), vec!["{\"seq\":3}"]);

        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let seen = rt.block_on(async {
            let mut seen = Vec::new();
            let writer = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(100));
                f.write_all(b"{\"seq\":4}\n{\"seq\":5}\n").unwrap();
            });
            let _ = tokio::time::timeout(
                Duration::from_millis(1500),
                log.follow(&mut |l: &str| seen.push(l.to_string())),
            )
            .await;
            writer.join().unwrap();
            seen
        });
        assert_eq!(seen, vec!["{\"seq\":4}", "{\"seq\":5}"]);
    }

    #[test]
    fn a_missing_log_is_not_found() {
        let dir = tempfile::tempdir().unwrap();
        let err = LogFile::new(dir.path())
            .initial(Start::LastLines(10))
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::NotFound);
    }
}
