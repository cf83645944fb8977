//! The run index: what `run.list`, the TUI and the daemon's start need of every run, kept on
//! disk, so a finished run costs no descriptor, lock or memory.
//!
//! A run is *finished* when nothing moves it any more by itself or waits for a person in it
//! (see [`super::finished`]). Its line of `run.list` — the summary, serialized once — is all
//! the daemon keeps of it, here; the rest is read from its log when someone asks
//! ([`super::Store::resolve`] folds it then, and drops it after use). Two files in the home:
//!
//! - `runs.idx`, the **table**: every finished run, sorted by id, as a fixed-width record
//!   (`<RUN> <status> <flags> <offset> <length>`, 64 bytes) followed by all the
//!   summaries in the same order. Record `n` sits at byte `64 × (n + 1)`, so a run is
//!   found by binary search with a few `pread`s, the newest `n` runs are the last `n` records,
//!   and `run list --status …` filters without reading a summary. The file is a pure function
//!   of the finished runs' logs: rebuilt from them it is the same, byte for byte.
//! - `runs.journal`, what changed since the table was written, one synced line each:
//!   `open` (a run the daemon works on: its log is read at start), `done` (it finished, with
//!   its summary) or `gone` (its directory left the home). It is read whole at start and held
//!   in memory ([`MERGE_AT`] finished runs at most): when it holds that many, it is merged into
//!   a new table, written beside the old one and renamed over it.
//!
//! Order of writes, so that a crash anywhere leaves the index true: a new run's `open` is
//! written before its creation is acknowledged; an `open` is written before the first event
//! appended to a finished run; `done` is written only once every event of the run is in the
//! change feed's index too (a restart finds nothing of it to index) — before the daemon lets
//! go of the run, so a run is always either held or listed here. A run that finished without
//! its `done` (a crash in between) is still `open`: the next start reads its log and finishes
//! it. Any file that cannot be read is set aside (`<name>.bad-<ms>`) and the index is built
//! again from the logs.
//!
//! - [`table`]: the table's records, reading it and writing one.
//! - [`journal`]: the journal's lines, reading it and appending to it.

mod journal;
mod table;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use octl_proto::projection::ListedStatus;
use octl_proto::run_index::{Record, Said};

use journal::{read_journal, set_aside, write_journal, Journal};
use table::{merge_into, Table, TableWriter};

pub use octl_proto::run_index::{Entry, Flags, Open, JOURNAL_FILE, TABLE_FILE};
/// Finished runs the journal holds before it is merged into the table: bounds both the
/// memory it takes (a summary each, ~1 KiB) and how much of it a start reads.
pub const MERGE_AT: usize = 1000;

/// What the index says of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    Open(Open),
    Done(Entry),
    Absent,
}

/// What `Index::open` found.
pub struct Opened {
    pub index: Index,
    /// The runs the journal names as active, oldest first.
    pub open: Vec<(String, Open)>,
    /// The index could not be read (or is not there): it must be built from the logs.
    pub rebuild: Option<String>,
}

/// The run index of one home. Its methods do blocking I/O (a few `pread`s to find a run;
/// a synced write for a change): callers on the async threads wrap changes in
/// `spawn_blocking`.
pub struct Index {
    root: PathBuf,
    inner: Mutex<Inner>,
    /// Held while the journal is merged into a new table (one merge at a time).
    merging: Mutex<()>,
}

struct Inner {
    table: Arc<Table>,
    /// The journal's word on each run it names, newer than the table's.
    overlay: BTreeMap<String, Said>,
    journal: Journal,
    /// Distinct runs the index knows, open or finished.
    total: u64,
}

impl Index {
    /// Opens the index of the home at `root`, or says it must be rebuilt.
    pub fn open(root: &Path) -> io::Result<Opened> {
        for tmp in [TABLE_FILE, JOURNAL_FILE] {
            let _ = fs::remove_file(root.join(format!("{tmp}.tmp")));
        }
        let table_path = root.join(TABLE_FILE);
        let journal_path = root.join(JOURNAL_FILE);
        let mut rebuild = None;
        let table = if table_path.exists() {
            match Table::open(&table_path)? {
                Some(t) => t,
                None => {
                    set_aside(&table_path)?;
                    rebuild = Some(format!("{TABLE_FILE} cannot be read"));
                    Table::empty()
                }
            }
        } else {
            rebuild = Some(format!("there is no {TABLE_FILE}"));
            Table::empty()
        };
        let overlay = if rebuild.is_some() {
            BTreeMap::new()
        } else {
            match read_journal(&journal_path)? {
                Some(o) => o,
                None => {
                    set_aside(&journal_path)?;
                    rebuild = Some(format!("{JOURNAL_FILE} cannot be read"));
                    BTreeMap::new()
                }
            }
        };
        if rebuild.is_some() {
            // Built from the logs by the caller (`replace`); nothing is read from these.
            let index = Index::from_parts(root, Table::empty(), BTreeMap::new())?;
            return Ok(Opened {
                index,
                open: Vec::new(),
                rebuild,
            });
        }
        let open = overlay
            .iter()
            .filter_map(|(id, s)| match s {
                Said::Open(o) => Some((id.clone(), *o)),
                _ => None,
            })
            .collect();
        let index = Index::from_parts(root, table, overlay)?;
        Ok(Opened {
            index,
            open,
            rebuild: None,
        })
    }

    fn from_parts(root: &Path, table: Table, overlay: BTreeMap<String, Said>) -> io::Result<Index> {
        let journal = Journal::open(&root.join(JOURNAL_FILE))?;
        let mut total = table.count;
        for (id, said) in &overlay {
            let in_table = table.find(id)?.is_some();
            match said {
                Said::Gone if in_table => total -= 1,
                Said::Gone => {}
                _ if !in_table => total += 1,
                _ => {}
            }
        }
        Ok(Index {
            root: root.to_path_buf(),
            inner: Mutex::new(Inner {
                table: Arc::new(table),
                overlay,
                journal,
                total,
            }),
            merging: Mutex::new(()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().expect("index lock")
    }

    /// How many runs the index knows.
    pub fn len(&self) -> u64 {
        self.lock().total
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// What the index says of `id`.
    pub fn find(&self, id: &str) -> io::Result<Found> {
        let table = {
            let inner = self.lock();
            match inner.overlay.get(id) {
                Some(Said::Open(o)) => return Ok(Found::Open(*o)),
                Some(Said::Done(e)) => return Ok(Found::Done(e.clone())),
                Some(Said::Gone) => return Ok(Found::Absent),
                None => inner.table.clone(),
            }
        };
        Ok(match table.find(id)? {
            Some(rec) => Found::Done(table.entry(&rec)?),
            None => Found::Absent,
        })
    }

    /// The ids starting with `prefix`, at most `max`, in order.
    pub fn with_prefix(&self, prefix: &str, max: usize) -> io::Result<Vec<String>> {
        let (table, overlay): (Arc<Table>, Vec<(String, bool)>) = {
            let inner = self.lock();
            let overlay = inner
                .overlay
                .range(prefix.to_string()..)
                .take_while(|(k, _)| k.starts_with(prefix))
                .map(|(k, s)| (k.clone(), *s != Said::Gone))
                .collect();
            (inner.table.clone(), overlay)
        };
        let mut ids: BTreeMap<String, bool> = BTreeMap::new();
        let mut n = table.lower_bound(prefix)?;
        while n < table.count && ids.len() < max + overlay.len() {
            let rec = table.record(n)?;
            if !rec.id.starts_with(prefix) {
                break;
            }
            ids.insert(rec.id, true);
            n += 1;
        }
        for (id, present) in overlay {
            ids.insert(id, present);
        }
        Ok(ids
            .into_iter()
            .filter(|(_, present)| *present)
            .map(|(id, _)| id)
            .take(max)
            .collect())
    }

    /// Records that `id` is active (a new run, or a finished one written to again): synced
    /// before this returns.
    pub fn open_run(&self, id: &str, open: Open) -> io::Result<()> {
        self.say(id, Said::Open(open))
    }

    /// Records that a run finished, with its summary: synced before this returns. Merges the
    /// journal into a new table once it holds [`MERGE_AT`] finished runs.
    pub fn finish(&self, entry: Entry) -> io::Result<()> {
        let id = entry.id.clone();
        self.say(&id, Said::Done(entry))?;
        let due = self
            .lock()
            .overlay
            .values()
            .filter(|s| !matches!(s, Said::Open(_)))
            .count()
            >= MERGE_AT;
        if due {
            if let Err(e) = self.merge() {
                // The journal still holds everything: the merge is tried again next time.
                tracing::warn!(error = %e, "cannot merge the run journal into a new table; trying again later");
            }
        }
        Ok(())
    }

    /// Records that a run's directory left the home (`run quarantine`).
    pub fn forget(&self, id: &str) -> io::Result<()> {
        self.say(id, Said::Gone)
    }

    fn say(&self, id: &str, said: Said) -> io::Result<()> {
        let line = said.line(id);
        let mut inner = self.lock();
        inner.journal.append(line.as_bytes())?;
        let known_before = match inner.overlay.get(id) {
            Some(Said::Gone) => false,
            Some(_) => true,
            None => inner.table.find(id)?.is_some(),
        };
        let known_after = said != Said::Gone;
        match (known_before, known_after) {
            (false, true) => inner.total += 1,
            (true, false) => inner.total -= 1,
            _ => {}
        }
        inner.overlay.insert(id.to_string(), said);
        Ok(())
    }

    /// Writes the journal anew with the given open runs' positions (and everything else it
    /// holds), so the next start reads the change feed's index only from there.
    pub fn checkpoint(&self, open: &[(String, Open)]) -> io::Result<()> {
        let mut inner = self.lock();
        for (id, o) in open {
            if let Some(Said::Open(old)) = inner.overlay.get_mut(id) {
                *old = *o;
            }
        }
        let overlay = inner.overlay.clone();
        inner.journal = write_journal(&self.root, &overlay)?;
        Ok(())
    }

    /// Merges the journal's finished and gone runs into a new table. The heavy part (reading
    /// the old table, writing the new) runs without the lock; only the swap holds it.
    pub fn merge(&self) -> io::Result<()> {
        let Ok(_merging) = self.merging.try_lock() else {
            return Ok(());
        };
        let (table, snapshot): (Arc<Table>, BTreeMap<String, Said>) = {
            let inner = self.lock();
            let snapshot = inner
                .overlay
                .iter()
                .filter(|(_, s)| !matches!(s, Said::Open(_)))
                .map(|(k, s)| (k.clone(), s.clone()))
                .collect();
            (inner.table.clone(), snapshot)
        };
        let tmp = self.root.join(format!("{TABLE_FILE}.tmp"));
        {
            let mut out = TableWriter::create(&tmp)?;
            merge_into(&table, &snapshot, &mut out)?;
            out.finish()?;
        }
        let mut inner = self.lock();
        fs::rename(&tmp, self.root.join(TABLE_FILE))?;
        let new_table = Table::open(&self.root.join(TABLE_FILE))?
            .ok_or_else(|| io::Error::other("the new run table cannot be read back"))?;
        // What the new table holds leaves the journal, unless it changed meanwhile.
        for (id, said) in &snapshot {
            if inner.overlay.get(id) == Some(said) {
                inner.overlay.remove(id);
            }
        }
        let overlay = inner.overlay.clone();
        inner.journal = write_journal(&self.root, &overlay)?;
        inner.table = Arc::new(new_table);
        tracing::info!(
            runs = inner.table.count,
            "run journal merged into a new table"
        );
        Ok(())
    }

    /// Replaces the whole index with `finished` (any order) and `open`.
    #[cfg(test)]
    fn replace(&self, mut finished: Vec<Entry>, open: &[(String, Open)]) -> io::Result<()> {
        finished.sort_by(|a, b| a.id.cmp(&b.id));
        finished.dedup_by(|a, b| a.id == b.id);
        let mut table = self.rebuild()?;
        for e in &finished {
            table.push(e)?;
        }
        table.finish(open)
    }

    /// A new table, built from entries given in id order, that replaces the whole index when
    /// it is finished: the index built from the logs.
    pub fn rebuild(&self) -> io::Result<Rebuild<'_>> {
        Ok(Rebuild {
            index: self,
            out: TableWriter::create(&self.root.join(format!("{TABLE_FILE}.tmp")))?,
        })
    }

    /// Every finished run the index holds, in id order, `visit`ed one at a time (runs open
    /// in the journal are left out). Stops early when `visit` returns false.
    pub fn each_finished(&self, visit: impl FnMut(Entry) -> bool) -> io::Result<()> {
        self.each_finished_where(&|_| true, visit)
    }

    /// [`Index::each_finished`] for the runs whose status `wanted` takes: the others' records
    /// are passed over without reading their summaries.
    pub fn each_finished_where(
        &self,
        wanted: &dyn Fn(ListedStatus) -> bool,
        mut visit: impl FnMut(Entry) -> bool,
    ) -> io::Result<()> {
        let (table, overlay) = {
            let inner = self.lock();
            (inner.table.clone(), inner.overlay.clone())
        };
        let mut own = overlay.iter().peekable();
        let said = |s: &Said, visit: &mut dyn FnMut(Entry) -> bool| match s {
            Said::Done(e) if wanted(e.status) => visit(e.clone()),
            _ => true,
        };
        let mut reader = table.reader()?;
        while let Some(next) = reader.next_where(wanted)? {
            // The record's id, to order it among the journal's (read or passed over).
            let id = match &next {
                Some(e) => e.id.clone(),
                None => reader.last_id().to_string(),
            };
            while let Some((_, s)) = own.next_if(|(k, _)| **k < id) {
                if !said(s, &mut visit) {
                    return Ok(());
                }
            }
            if let Some((_, s)) = own.next_if(|(k, _)| **k == id) {
                // The journal's word on it wins.
                if !said(s, &mut visit) {
                    return Ok(());
                }
                continue;
            }
            if let Some(e) = next {
                if !visit(e) {
                    return Ok(());
                }
            }
        }
        for (_, s) in own {
            if !said(s, &mut visit) {
                return Ok(());
            }
        }
        Ok(())
    }

    /// The table this index makes once its journal is merged in: what a rebuild from the
    /// logs must give, byte for byte (the finished runs only; the active are in no table).
    pub fn canonical(&self) -> io::Result<Vec<u8>> {
        let (table, overlay) = {
            let inner = self.lock();
            (inner.table.clone(), inner.overlay.clone())
        };
        let changes: BTreeMap<String, Said> = overlay
            .into_iter()
            .map(|(id, s)| match s {
                // An open run is in no table.
                Said::Open(_) => (id, Said::Gone),
                other => (id, other),
            })
            .collect();
        let tmp = self.root.join(format!("{TABLE_FILE}.check.tmp"));
        let mut out = TableWriter::create(&tmp)?;
        merge_into(&table, &changes, &mut out)?;
        out.finish()?;
        let bytes = fs::read(&tmp);
        let _ = fs::remove_file(&tmp);
        bytes
    }

    /// Every id the index knows (open or finished), in order.
    pub fn ids(&self) -> io::Result<Vec<String>> {
        let (table, overlay) = {
            let inner = self.lock();
            (inner.table.clone(), inner.overlay.clone())
        };
        let mut out: BTreeMap<String, bool> = BTreeMap::new();
        let mut n = 0;
        while n < table.count {
            let chunk = table.records(n, (n + 4096).min(table.count))?;
            n += chunk.len() as u64;
            for rec in chunk {
                out.insert(rec.id, true);
            }
        }
        for (id, said) in overlay {
            out.insert(id, said != Said::Gone);
        }
        Ok(out
            .into_iter()
            .filter(|(_, p)| *p)
            .map(|(k, _)| k)
            .collect())
    }

    /// The newest finished runs that pass `keep`, newest first, until `enough` says so or
    /// none is left: what `run list --limit N` reads. `keep` sees the status first (no
    /// summary read) and the entry after.
    pub fn newest(
        &self,
        skip: &dyn Fn(&str) -> bool,
        status_ok: &dyn Fn(ListedStatus) -> bool,
        keep: &mut dyn FnMut(&Entry) -> bool,
        enough: &dyn Fn() -> bool,
    ) -> io::Result<()> {
        let (table, overlay) = {
            let inner = self.lock();
            (inner.table.clone(), inner.overlay.clone())
        };
        let mut own = overlay.iter().rev().peekable();
        let mut end = table.count;
        let mut chunk: Vec<Record> = Vec::new();
        loop {
            if enough() {
                return Ok(());
            }
            if chunk.is_empty() && end > 0 {
                let start = end.saturating_sub(256);
                chunk = table.records(start, end)?;
                end = start;
            }
            let next_table = chunk.last().map(|r| r.id.clone());
            // The overlay's newer ids come first; an equal id shadows the table's.
            let take_own = match (own.peek(), &next_table) {
                (Some((id, _)), Some(t)) => **id >= *t,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => return Ok(()),
            };
            if take_own {
                let (id, said) = own.next().expect("peeked");
                if next_table.as_deref() == Some(id.as_str()) {
                    chunk.pop();
                }
                if let Said::Done(e) = said {
                    if !skip(&e.id) && status_ok(e.status) {
                        keep(e);
                    }
                }
                continue;
            }
            let rec = chunk.pop().expect("a record");
            if skip(&rec.id) || !status_ok(rec.status) {
                continue;
            }
            let e = table.entry(&rec)?;
            keep(&e);
        }
    }
}

/// A table being built; see [`Index::rebuild`].
pub struct Rebuild<'a> {
    index: &'a Index,
    out: TableWriter,
}

impl Rebuild<'_> {
    /// Adds a finished run; ids must come in increasing order.
    pub fn push(&mut self, e: &Entry) -> io::Result<()> {
        if self.out.last.as_deref().is_some_and(|l| l >= e.id.as_str()) {
            return Err(io::Error::other(format!(
                "run index: {} given after {}",
                e.id,
                self.out.last.as_deref().unwrap_or_default()
            )));
        }
        self.out.push(e)
    }

    /// How many runs were added.
    pub fn count(&self) -> u64 {
        self.out.count
    }

    /// Writes the table and a journal naming `open` as the active runs, replacing both.
    pub fn finish(self, open: &[(String, Open)]) -> io::Result<()> {
        let Rebuild { index, out } = self;
        let tmp = out.path.clone();
        out.finish()?;
        let root = &index.root;
        let mut inner = index.lock();
        fs::rename(&tmp, root.join(TABLE_FILE))?;
        let table = Table::open(&root.join(TABLE_FILE))?
            .ok_or_else(|| io::Error::other("the new run table cannot be read back"))?;
        let overlay: BTreeMap<String, Said> = open
            .iter()
            .map(|(id, o)| (id.clone(), Said::Open(*o)))
            .collect();
        inner.journal = write_journal(root, &overlay)?;
        let mut total = table.count;
        for id in overlay.keys() {
            if table.find(id)?.is_none() {
                total += 1;
            }
        }
        inner.total = total;
        inner.table = Arc::new(table);
        inner.overlay = overlay;
        Ok(())
    }
}
