//! The change feed's order: every run's committed events numbered in one daemon-wide
//! sequence, kept in `$OCTL_HOME/feed.idx`, so that a cursor survives a daemon restart.
//!
//! # Why a persisted commit sequence
//! Run writers commit concurrently, so neither event ids (ULIDs) nor timestamps are in commit
//! order across runs, and a cursor made of them would skip an event committed late with an
//! early id. A cursor that is each run's last seq (a position set) is exact but grows with
//! the number of runs, and every feed line carries one: 30 KB a line at 1,000 runs. So the
//! feed numbers events in the order their groups became durable, and records that order.
//!
//! `feed.idx` is a header line and then one fixed-width record per event, `<RUN> <SEQ>`:
//! record `n` (from 1) sits at byte `n × 48`, so the cursor of the `n`-th event is just `n`
//! (plus the index's id, which changes if the index is ever rebuilt) and resuming reads from
//! one seek. The event itself stays in its run's log, the only source of truth; the index says
//! which event comes next.
//!
//! # No event skipped or duplicated
//! - A run writer tells the indexer about a group once it is synced in the run's log (the
//!   first write of a new run included), in the run's commit order (under the run's tap lock).
//! - The indexer appends the records of everything told so far in one write and one
//!   `fdatasync` (a group commit across runs, off the writers' path: a writer never waits
//!   for it), and only then publishes them to followers. So every cursor a client ever got
//!   names a record on disk.
//! - At start, a run whose log holds events the index lacks (the daemon stopped between the
//!   two syncs; a home from before the feed) gets records for them, run by run, before the
//!   socket is served: those events were never published, so numbering them now duplicates
//!   nothing, and numbering them after every record on disk skips nothing.
//! - A torn last record (a crash mid-write, never published) is cut. An index that cannot be
//!   parsed is set aside (`feed.idx.bad-<ms>`) and rebuilt with a new id; cursors of the old
//!   one are then refused by name rather than misread.

use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, mpsc, oneshot};

use octl_proto::{ids, AppError, Event};

use super::index::Open;
use super::log::{self, CORRUPT_FILE, LOG_FILE};

/// Name of the index in the home.
pub const FEED_FILE: &str = "feed.idx";
/// Bytes of one record (and of the header): 26 (run id) + 1 + 20 (seq) + 1 (newline).
const WIDTH: u64 = 48;
const MAGIC: &str = "octl-feed v1";
/// Published batches kept for followers that have not read them; one further behind reads
/// the index and the logs instead (see `server::feed`).
const FEED_BUFFER: usize = 64;
/// How long the indexer waits before writing again after a failed write or sync.
const RETRY: Duration = Duration::from_secs(1);

/// Events one run committed in one group, for the indexer.
pub struct Committed {
    pub run: String,
    pub events: Arc<Vec<Event>>,
}

/// What the indexer is told, in order.
pub enum Told {
    Committed(Committed),
    /// Answered once everything told before it is durable in the index (a run about to be
    /// let go of waits for its last records: a restart would not index them).
    Flush(oneshot::Sender<()>),
}

/// Groups made durable in the index together: their events carry the cursors
/// `first`, `first + 1`, … in order.
pub struct Batch {
    pub first: u64,
    /// The cursor number of the batch's last event.
    pub last: u64,
    pub groups: Vec<Arc<Vec<Event>>>,
}

impl Batch {
    /// Each event with its cursor number.
    pub fn items(&self) -> impl Iterator<Item = (u64, &Event)> {
        self.groups
            .iter()
            .flat_map(|g| g.iter())
            .zip(self.first..)
            .map(|(e, n)| (n, e))
    }
}

/// Where a follower starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Since {
    /// After the `n`-th event (0: from the beginning).
    After(u64),
    /// After the last event indexed when the feed is opened.
    Now,
}

/// The feed as the rest of the daemon sees it.
pub struct Feed {
    /// Changes whenever the index is created anew; part of every cursor.
    id: String,
    path: PathBuf,
    runs: PathBuf,
    /// Records durable in the index: the cursor number of the last published event.
    head: AtomicU64,
    tx: mpsc::UnboundedSender<Told>,
    out: broadcast::Sender<Arc<Batch>>,
}

impl Feed {
    /// Opens (or creates) the index, gives records to every event of `runs` (the active runs:
    /// id, last committed seq, and what the run index says of the feed's records for it) that
    /// it lacks, and starts the indexer task. Finished runs are not read: all their events were
    /// indexed before they were let go of.
    /// An index made anew (none yet, or one set aside) numbers every event of every run:
    /// `every` gives each run's id and last committed seq then.
    pub fn open(
        home: &Path,
        runs_dir: &Path,
        runs: &[(String, u64, Open)],
        every: &dyn Fn() -> io::Result<Vec<(String, u64)>>,
    ) -> io::Result<Arc<Feed>> {
        let path = home.join(FEED_FILE);
        let (file, id, head) = match IndexFile::open(&path, runs, every)? {
            Some(opened) => opened,
            None => {
                let aside = home.join(format!("{FEED_FILE}.bad-{}", super::writer::now_ms()));
                tracing::error!(index = %path.display(), aside = %aside.display(), "the feed index cannot be read: setting it aside and building a new one (cursors of the old one are refused)");
                fs::rename(&path, &aside)?;
                IndexFile::open(&path, runs, every)?
                    .ok_or_else(|| io::Error::other("a new feed index cannot be read back"))?
            }
        };
        file.file.sync_data()?;
        let (tx, rx) = mpsc::unbounded_channel();
        let feed = Arc::new(Feed {
            id,
            path,
            runs: runs_dir.to_path_buf(),
            head: AtomicU64::new(head),
            tx,
            out: broadcast::channel(FEED_BUFFER).0,
        });
        tokio::spawn(index(feed.clone(), file, rx));
        Ok(feed)
    }

    /// Where run writers say what they committed.
    pub fn sender(&self) -> mpsc::UnboundedSender<Told> {
        self.tx.clone()
    }

    /// Returns once everything told so far is durable in the index.
    pub async fn flush(&self) {
        flush(&self.tx).await
    }

    pub fn head(&self) -> u64 {
        self.head.load(Ordering::Acquire)
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Batch>> {
        self.out.subscribe()
    }

    /// The cursor after the `n`-th event.
    pub fn cursor(&self, n: u64) -> String {
        format!("{}:{n}", self.id)
    }

    /// Parses `since` (absent: from the beginning). The error names the field and the form.
    pub fn parse_since(&self, given: Option<&str>) -> Result<Since, AppError> {
        const FORM: &str = "accepted: `now`, or the `cursor` of a feed line (`<FEED>:<N>`)";
        let Some(given) = given else {
            return Ok(Since::After(0));
        };
        if given == "now" {
            return Ok(Since::Now);
        }
        let quoted = if given.len() > 64 {
            format!(
                "{:?}…",
                &given[..given.char_indices().nth(64).map_or(given.len(), |(i, _)| i)]
            )
        } else {
            format!("{given:?}")
        };
        let Some((id, n)) = given.split_once(':') else {
            return Err(AppError::invalid(format!("invalid since {quoted}: {FORM}")));
        };
        let n: u64 = n
            .parse()
            .map_err(|_| AppError::invalid(format!("invalid since {quoted}: {FORM}")))?;
        if !ids::is_full_run_id(id) {
            return Err(AppError::invalid(format!("invalid since {quoted}: {FORM}")));
        }
        if id != self.id {
            return Err(AppError::invalid(format!(
                "invalid since {quoted}: a cursor of another feed index (this one is {}); {FORM}",
                self.id
            ))
            .with_hint(
                "the index was rebuilt: read the feed again from the beginning (no since)",
            ));
        }
        let head = self.head();
        if n > head {
            return Err(AppError::invalid(format!(
                "invalid since {quoted}: past the end of the feed ({head} events); {FORM}"
            )));
        }
        Ok(Since::After(n))
    }

    /// The events numbered `after + 1 ..= upto` (at most `limit` records read), from the
    /// index and the runs' logs, with their numbers. An event whose log is gone (a run set
    /// aside) is left out; its number is not reused.
    pub fn read(&self, after: u64, upto: u64, limit: u64) -> io::Result<Vec<(u64, Event)>> {
        let end = upto.min(after.saturating_add(limit));
        if end <= after {
            return Ok(Vec::new());
        }
        let mut f = File::open(&self.path)?;
        f.seek(SeekFrom::Start((after + 1) * WIDTH))?;
        let mut buf = vec![0u8; ((end - after) * WIDTH) as usize];
        f.read_exact(&mut buf)?;
        let records: Vec<(String, u64)> = buf
            .chunks(WIDTH as usize)
            .map(parse_record)
            .collect::<Option<_>>()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "a bad feed record"))?;
        // One read of each run's log for its (contiguous) part of the range.
        let mut spans: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
        for (run, seq) in &records {
            let span = spans.entry(run.as_str()).or_insert((*seq, *seq));
            span.0 = span.0.min(*seq);
            span.1 = span.1.max(*seq);
        }
        let mut found: HashMap<(&str, u64), Event> = HashMap::new();
        for (run, (lo, hi)) in spans {
            let dir = self.runs.join(run);
            let path = [LOG_FILE, CORRUPT_FILE]
                .iter()
                .map(|name| dir.join(name))
                .find(|p| p.exists());
            let Some(path) = path else {
                tracing::debug!(run, "feed: the run's log is gone; its events are left out");
                continue;
            };
            match log::read_range(&path, lo - 1, hi, usize::MAX) {
                Ok(events) => {
                    for ev in events {
                        found.insert((run, ev.seq), ev);
                    }
                }
                Err(e) => {
                    tracing::warn!(run, error = %e, "feed: cannot read the run's log; its events are left out")
                }
            }
        }
        Ok(records
            .iter()
            .zip(after + 1..)
            .filter_map(|((run, seq), n)| found.remove(&(run.as_str(), *seq)).map(|e| (n, e)))
            .collect())
    }
}

/// The index file, appended to by the indexer only.
struct IndexFile {
    file: File,
    /// Length written and synced: where a failed write is cut back to.
    len: u64,
    /// Records found missing at start that could not be written then: written first.
    backlog: Vec<u8>,
}

impl IndexFile {
    /// Opens or creates the index and appends records for what `runs` committed beyond it.
    /// `None` if the file exists but is not a readable index. Returns the index's id and head.
    fn open(
        path: &Path,
        runs: &[(String, u64, Open)],
        every: &dyn Fn() -> io::Result<Vec<(String, u64)>>,
    ) -> io::Result<Option<(IndexFile, String, u64)>> {
        let created = !path.exists();
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(path)?;
        let anew = created || file.metadata()?.len() < WIDTH;
        let id = if anew {
            if !created && file.metadata()?.len() > 0 {
                // A header cut short: nothing was ever published from it.
                file.set_len(0)?;
            }
            let id = ids::new_ulid();
            file.write_all(format!("{:<47}\n", format!("{MAGIC} {id}")).as_bytes())?;
            file.sync_all()?;
            if let Some(dir) = path.parent() {
                log::sync_dir(dir)?;
            }
            id
        } else {
            let mut header = [0u8; WIDTH as usize];
            file.seek(SeekFrom::Start(0))?;
            file.read_exact(&mut header)?;
            match parse_header(&header) {
                Some(id) => id,
                None => return Ok(None),
            }
        };
        // A torn last record was never published: cut it.
        let total = file.metadata()?.len();
        let whole = total - total % WIDTH;
        if whole != total {
            tracing::warn!(
                bytes = total - whole,
                "feed: cut a torn last record from the index"
            );
            file.set_len(whole)?;
        }
        // What each active run has in the index: every event up to its `fed`, and any record
        // after its `at` (read from the earliest `at` on — not the whole index, which holds
        // every event ever committed).
        let mut head = whole / WIDTH - 1;
        let mut indexed: HashMap<&str, u64> = runs
            .iter()
            .map(|(run, _, open)| (run.as_str(), open.fed))
            .collect();
        let from = runs
            .iter()
            .map(|(_, _, o)| o.at)
            .min()
            .unwrap_or(head)
            .min(head);
        file.seek(SeekFrom::Start((from + 1) * WIDTH))?;
        let mut reader = BufReader::with_capacity(1 << 20, &file);
        let mut rec = [0u8; WIDTH as usize];
        for _ in from..head {
            reader.read_exact(&mut rec)?;
            let Some((run, seq)) = parse_record(&rec) else {
                return Ok(None);
            };
            if let Some(last) = indexed.get_mut(run.as_str()) {
                *last = (*last).max(seq);
            }
        }
        drop(reader);
        let mut missing = Vec::new();
        if anew {
            // Nothing is indexed: every run's events, finished runs' too.
            for (run, committed) in every()? {
                for seq in 1..=committed {
                    missing.extend_from_slice(&record(&run, seq));
                }
            }
        } else {
            for (run, committed, _) in runs {
                let from = indexed.get(run.as_str()).copied().unwrap_or(0);
                for seq in from + 1..=*committed {
                    missing.extend_from_slice(&record(run, seq));
                }
            }
        }
        let mut index = IndexFile {
            file,
            len: whole,
            backlog: Vec::new(),
        };
        if !missing.is_empty() {
            let n = missing.len() as u64 / WIDTH;
            tracing::info!(
                events = n,
                "feed: indexing events committed while the index was not"
            );
            match index.append_synced(&missing) {
                Ok(()) => head += n,
                // A full disk must not keep the daemon from starting: the indexer writes
                // these first, before anything committed later.
                Err(e) => {
                    tracing::warn!(error = %e, events = n, "feed: cannot index them now; the indexer tries again");
                    index.backlog = missing;
                }
            }
        }
        Ok(Some((index, id, head)))
    }

    /// One write and one sync; on failure the file is cut back to what was synced before.
    fn append_synced(&mut self, bytes: &[u8]) -> io::Result<()> {
        log::append_synced(&mut self.file, &mut self.len, bytes, "feed:write-eio")
    }
}

fn record(run: &str, seq: u64) -> [u8; WIDTH as usize] {
    let mut out = [0u8; WIDTH as usize];
    let line = format!("{run:<26} {seq:020}\n");
    debug_assert_eq!(line.len(), WIDTH as usize);
    out.copy_from_slice(&line.as_bytes()[..WIDTH as usize]);
    out
}

fn parse_record(rec: &[u8]) -> Option<(String, u64)> {
    let text = std::str::from_utf8(rec).ok()?.strip_suffix('\n')?;
    let (run, seq) = text.split_once(' ')?;
    if !ids::is_full_run_id(run) || seq.len() != 20 {
        return None;
    }
    Some((run.to_string(), seq.parse().ok().filter(|s| *s > 0)?))
}

fn parse_header(rec: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(rec).ok()?.strip_suffix('\n')?;
    let id = text.strip_prefix(MAGIC)?.trim();
    ids::is_full_run_id(id).then(|| id.to_string())
}

/// The indexer: writes the records of what the writers committed, in the order they said
/// it, many groups per sync, and publishes each batch once it is durable.
async fn index(feed: Arc<Feed>, file: IndexFile, mut rx: mpsc::UnboundedReceiver<Told>) {
    let mut file = Some(file);
    let mut pending: Vec<Committed> = Vec::new();
    // Flushes waiting for the records told before them: answered after the next write.
    let mut flushes: Vec<oneshot::Sender<()>> = Vec::new();
    fn take(told: Told, pending: &mut Vec<Committed>, flushes: &mut Vec<oneshot::Sender<()>>) {
        match told {
            Told::Committed(c) => pending.push(c),
            Told::Flush(reply) => flushes.push(reply),
        }
    }
    loop {
        let backlog = file.as_ref().map_or(0, |f| f.backlog.len() as u64 / WIDTH);
        if pending.is_empty() && backlog == 0 {
            for reply in flushes.drain(..) {
                let _ = reply.send(());
            }
            match rx.recv().await {
                Some(told) => take(told, &mut pending, &mut flushes),
                None => return,
            }
        }
        while let Ok(told) = rx.try_recv() {
            take(told, &mut pending, &mut flushes);
        }
        if pending.is_empty() && backlog == 0 {
            continue;
        }
        let mut bytes = file.as_ref().map(|f| f.backlog.clone()).unwrap_or_default();
        for c in &pending {
            for ev in c.events.iter() {
                bytes.extend_from_slice(&record(&c.run, ev.seq));
            }
        }
        // Between the runs' log syncs and the index's: what a restart must index.
        crate::failpoint::crash("feed:before-index");
        let mut f = file
            .take()
            .expect("the index file is back after each write");
        let (f, written) = tokio::task::spawn_blocking(move || {
            let r = f.append_synced(&bytes);
            (f, r)
        })
        .await
        .expect("the index write does not panic");
        file = Some(f);
        if written.is_ok() {
            if let Some(f) = file.as_mut() {
                f.backlog.clear();
            }
        }
        if let Err(e) = written {
            // The events are safe in their logs; the feed only lags until the disk takes
            // the records (a restart indexes them too).
            tracing::warn!(error = %e, "feed: cannot write the index; trying again");
            tokio::time::sleep(RETRY).await;
            continue;
        }
        let n: u64 = pending.iter().map(|c| c.events.len() as u64).sum();
        // The backlog's events are published by reading them (followers see the gap).
        let first = feed.head.fetch_add(backlog + n, Ordering::AcqRel) + backlog + 1;
        for reply in flushes.drain(..) {
            let _ = reply.send(());
        }
        if n == 0 {
            continue;
        }
        let groups = pending.drain(..).map(|c| c.events).collect();
        let _ = feed.out.send(Arc::new(Batch {
            first,
            last: first + n - 1,
            groups,
        }));
    }
}

/// Asks the indexer behind `tx` to say when everything told before is durable. Returns at
/// once when there is no indexer (it stopped: nothing more is written).
pub(super) async fn flush(tx: &mpsc::UnboundedSender<Told>) {
    let (reply, done) = oneshot::channel();
    if tx.send(Told::Flush(reply)).is_ok() {
        let _ = done.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_fixed_width_and_parse_back() {
        let run = "01JDXJ5R8Q4M0ZK7P2W9TB3C6E";
        let r = record(run, 42);
        assert_eq!(r.len(), WIDTH as usize);
        assert_eq!(parse_record(&r), Some((run.to_string(), 42)));
        assert_eq!(parse_record(&[b' '; WIDTH as usize]), None);
        let header = format!("{:<47}\n", format!("{MAGIC} {run}"));
        assert_eq!(parse_header(header.as_bytes()), Some(run.to_string()));
    }
}
