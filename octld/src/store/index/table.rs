//! The table, `runs.idx` (its format: `octl_proto::run_index`): read with `pread`s, written
//! whole, beside the old one.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use octl_proto::projection::ListedStatus;
use octl_proto::run_index::{header, parse_header, Entry, Record, Said, HEADER, RECORD};

/// The table file, read with `pread`s.
pub(super) struct Table {
    file: Option<File>,
    pub(super) count: u64,
    /// Where the summaries start.
    section: u64,
}

impl Table {
    pub(super) fn empty() -> Table {
        Table {
            file: None,
            count: 0,
            section: HEADER,
        }
    }

    /// Opens a table and checks its shape (header, records, where the summaries end);
    /// `None` when it is not one.
    pub(super) fn open(path: &Path) -> io::Result<Option<Table>> {
        let file = File::open(path)?;
        let len = file.metadata()?.len();
        if len < HEADER {
            return Ok(None);
        }
        let mut header = [0u8; HEADER as usize];
        file.read_exact_at(&mut header, 0)?;
        let Some(count) = parse_header(&header) else {
            return Ok(None);
        };
        let section = HEADER + count * RECORD;
        if len < section {
            return Ok(None);
        }
        let table = Table {
            file: Some(file),
            count,
            section,
        };
        if count > 0 {
            let Ok(last) = table.record(count - 1) else {
                return Ok(None);
            };
            if section + last.offset + last.len + 1 != len {
                return Ok(None);
            }
        } else if len != section {
            return Ok(None);
        }
        Ok(Some(table))
    }

    pub(super) fn record(&self, n: u64) -> io::Result<Record> {
        let mut buf = [0u8; RECORD as usize];
        self.read_at(&mut buf, HEADER + n * RECORD)?;
        Record::decode(&buf).ok_or_else(|| bad("a bad record"))
    }

    /// Records `from..to`, in one read.
    pub(super) fn records(&self, from: u64, to: u64) -> io::Result<Vec<Record>> {
        if to <= from {
            return Ok(Vec::new());
        }
        let mut buf = vec![0u8; ((to - from) * RECORD) as usize];
        self.read_at(&mut buf, HEADER + from * RECORD)?;
        buf.chunks(RECORD as usize)
            .map(|c| Record::decode(c).ok_or_else(|| bad("a bad record")))
            .collect()
    }

    fn read_at(&self, buf: &mut [u8], at: u64) -> io::Result<()> {
        match &self.file {
            Some(f) => f.read_exact_at(buf, at),
            None => Err(bad("the table is empty")),
        }
    }

    /// The position of the first record whose id is not below `id`.
    pub(super) fn lower_bound(&self, id: &str) -> io::Result<u64> {
        let (mut lo, mut hi) = (0, self.count);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.record(mid)?.id.as_str() < id {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(lo)
    }

    pub(super) fn find(&self, id: &str) -> io::Result<Option<Record>> {
        let at = self.lower_bound(id)?;
        if at < self.count {
            let rec = self.record(at)?;
            if rec.id == id {
                return Ok(Some(rec));
            }
        }
        Ok(None)
    }

    pub(super) fn entry(&self, rec: &Record) -> io::Result<Entry> {
        let mut buf = vec![0u8; rec.len as usize];
        self.read_at(&mut buf, self.section + rec.offset)?;
        let summary = String::from_utf8(buf).map_err(|_| bad("a summary that is not UTF-8"))?;
        Ok(Entry {
            id: rec.id.clone(),
            status: rec.status,
            flags: rec.flags,
            summary: Arc::from(summary),
        })
    }

    /// Reads every entry in order, sequentially.
    pub(super) fn reader(&self) -> io::Result<TableReader<'_>> {
        let summaries = match &self.file {
            Some(f) => {
                let mut f = f.try_clone()?;
                f.seek(SeekFrom::Start(self.section))?;
                Some(BufReader::with_capacity(1 << 20, f))
            }
            None => None,
        };
        Ok(TableReader {
            table: self,
            next: 0,
            chunk: Vec::new(),
            summaries,
            last: String::new(),
        })
    }
}

pub(super) struct TableReader<'a> {
    table: &'a Table,
    next: u64,
    chunk: Vec<Record>,
    summaries: Option<BufReader<File>>,
    last: String,
}

impl TableReader<'_> {
    /// The next entry, its summary read only when `wanted` says so of its status (else
    /// `Some(None)`: skipped without reading it).
    pub(super) fn next_where(
        &mut self,
        wanted: &dyn Fn(ListedStatus) -> bool,
    ) -> io::Result<Option<Option<Entry>>> {
        if self.chunk.is_empty() {
            if self.next >= self.table.count {
                return Ok(None);
            }
            let to = (self.next + 4096).min(self.table.count);
            self.chunk = self.table.records(self.next, to)?;
            self.chunk.reverse();
            self.next = to;
        }
        let rec = self.chunk.pop().expect("a record");
        self.last = rec.id.clone();
        let reader = self.summaries.as_mut().ok_or_else(|| bad("no summaries"))?;
        if !wanted(rec.status) {
            reader.seek_relative(rec.len as i64 + 1)?;
            return Ok(Some(None));
        }
        let mut buf = vec![0u8; rec.len as usize + 1];
        reader.read_exact(&mut buf)?;
        if buf.pop() != Some(b'\n') {
            return Err(bad("a summary without its newline"));
        }
        Ok(Some(Some(Entry {
            id: rec.id,
            status: rec.status,
            flags: rec.flags,
            summary: Arc::from(String::from_utf8(buf).map_err(|_| bad("not UTF-8"))?),
        })))
    }

    /// The id of the record read last.
    pub(super) fn last_id(&self) -> &str {
        &self.last
    }

    pub(super) fn next_entry(&mut self) -> io::Result<Option<Entry>> {
        Ok(self.next_where(&|_| true)?.flatten())
    }
}

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("run index: {what}"))
}

/// Writes a table from entries given in id order: the records are kept (64 bytes each), the
/// summaries streamed to a side file, and the two joined at the end.
pub(super) struct TableWriter {
    pub(super) path: PathBuf,
    side: PathBuf,
    summaries: BufWriter<File>,
    records: Vec<u8>,
    offset: u64,
    pub(super) count: u64,
    pub(super) last: Option<String>,
}

impl TableWriter {
    pub(super) fn create(path: &Path) -> io::Result<TableWriter> {
        let side = path.with_extension("summaries.tmp");
        Ok(TableWriter {
            path: path.to_path_buf(),
            summaries: BufWriter::with_capacity(1 << 20, File::create(&side)?),
            side,
            records: Vec::new(),
            offset: 0,
            count: 0,
            last: None,
        })
    }

    pub(super) fn push(&mut self, e: &Entry) -> io::Result<()> {
        debug_assert!(self.last.as_deref().is_none_or(|l| l < e.id.as_str()));
        let rec = Record {
            id: e.id.clone(),
            status: e.status,
            flags: e.flags,
            offset: self.offset,
            len: e.summary.len() as u64,
        };
        self.records.extend_from_slice(&rec.encode());
        self.summaries.write_all(e.summary.as_bytes())?;
        self.summaries.write_all(b"\n")?;
        self.offset += e.summary.len() as u64 + 1;
        self.count += 1;
        self.last = Some(e.id.clone());
        Ok(())
    }

    /// Writes the file and syncs it.
    pub(super) fn finish(self) -> io::Result<()> {
        let TableWriter {
            path,
            side,
            summaries,
            records,
            count,
            ..
        } = self;
        summaries.into_inner().map_err(|e| e.into_error())?;
        let result = (|| {
            let mut out = BufWriter::with_capacity(1 << 20, File::create(&path)?);
            out.write_all(header(count).as_bytes())?;
            out.write_all(&records)?;
            io::copy(&mut File::open(&side)?, &mut out)?;
            let file = out.into_inner().map_err(|e| e.into_error())?;
            file.sync_all()
        })();
        let _ = fs::remove_file(&side);
        if result.is_err() {
            let _ = fs::remove_file(&path);
        }
        result
    }
}

/// Streams `table` with `changes` applied into `out`.
pub(super) fn merge_into(
    table: &Table,
    changes: &BTreeMap<String, Said>,
    out: &mut TableWriter,
) -> io::Result<()> {
    let mut own = changes.iter().peekable();
    let mut reader = table.reader()?;
    let put = |said: &Said, out: &mut TableWriter| match said {
        Said::Done(e) => out.push(e),
        _ => Ok(()),
    };
    while let Some(e) = reader.next_entry()? {
        while let Some((_, said)) = own.next_if(|(id, _)| id.as_str() < e.id.as_str()) {
            put(said, out)?;
        }
        match own.next_if(|(id, _)| id.as_str() == e.id.as_str()) {
            Some((_, said)) => put(said, out)?,
            None => out.push(&e)?,
        }
    }
    for (_, said) in own {
        put(said, out)?;
    }
    Ok(())
}
