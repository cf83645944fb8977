//! The daemon's run index read straight from disk, for the TUI while the daemon is down: the
//! runs its journal names as active (their logs are folded) and the newest finished runs'
//! summaries — so a home of any size is shown without reading every run's log. The formats
//! are `octl_proto::run_index`'s; only the daemon writes them.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::os::unix::fs::FileExt;
use std::path::Path;

use octl_proto::projection::RunSummary;
use octl_proto::run_index::{
    parse_header, Record, Said, HEADER, JOURNAL_FILE, JOURNAL_MAGIC, RECORD, TABLE_FILE,
};

/// What the index on disk says.
#[derive(Debug, Default)]
pub struct OnDisk {
    /// The active runs, in id order.
    pub active: Vec<String>,
    /// The newest finished runs asked for, oldest first.
    pub finished: Vec<RunSummary>,
    /// How many finished runs there are in all.
    pub finished_total: u64,
}

/// Reads the index of the home at `root`, with the newest `newest` finished runs; `None` when
/// there is none or it cannot be read (a home from before the index, or one the daemon is
/// rebuilding): the caller reads the logs instead.
pub fn read(root: &Path, newest: usize) -> io::Result<Option<OnDisk>> {
    let Some(journal) = read_journal(&root.join(JOURNAL_FILE))? else {
        return Ok(None);
    };
    let table = match File::open(root.join(TABLE_FILE)) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut header = [0u8; HEADER as usize];
    table.read_exact_at(&mut header, 0)?;
    let Some(count) = parse_header(&header) else {
        return Ok(None);
    };
    let section = HEADER + count * RECORD;
    let record = |n: u64| -> io::Result<Option<Record>> {
        let mut buf = [0u8; RECORD as usize];
        table.read_exact_at(&mut buf, HEADER + n * RECORD)?;
        Ok(Record::decode(&buf))
    };
    let in_table = |id: &str| -> io::Result<bool> {
        let (mut lo, mut hi) = (0, count);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let Some(rec) = record(mid)? else {
                return Ok(false);
            };
            match rec.id.as_str().cmp(id) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Ok(true),
            }
        }
        Ok(false)
    };
    // The table's newest, enough of them once the journal has taken its own away.
    let mut finished: BTreeMap<String, String> = BTreeMap::new();
    let from = count.saturating_sub((newest + journal.len()) as u64);
    for n in from..count {
        let Some(rec) = record(n)? else {
            return Ok(None);
        };
        let mut summary = vec![0u8; rec.len as usize];
        table.read_exact_at(&mut summary, section + rec.offset)?;
        if let Ok(s) = String::from_utf8(summary) {
            finished.insert(rec.id, s);
        }
    }
    let mut out = OnDisk {
        finished_total: count,
        ..OnDisk::default()
    };
    for (id, said) in journal {
        let listed = in_table(&id)?;
        match said {
            Said::Done(e) => {
                if !listed {
                    out.finished_total += 1;
                }
                finished.insert(id, e.summary.to_string());
            }
            Said::Open(_) | Said::Gone => {
                if listed {
                    out.finished_total = out.finished_total.saturating_sub(1);
                }
                finished.remove(&id);
                if matches!(said, Said::Open(_)) {
                    out.active.push(id);
                }
            }
        }
    }
    let skip = finished.len().saturating_sub(newest);
    out.finished = finished
        .into_values()
        .skip(skip)
        .filter_map(|s| serde_json::from_str(&s).ok())
        .collect();
    Ok(Some(out))
}

/// The journal's lines, the last per run; `None` when it is missing or a line before the
/// last cannot be read (a torn last line is a write cut short: left out).
fn read_journal(path: &Path) -> io::Result<Option<BTreeMap<String, Said>>> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut lines = BufReader::new(file).split(b'\n').peekable();
    match lines.next() {
        Some(Ok(first)) if first == JOURNAL_MAGIC.as_bytes() => {}
        _ => return Ok(None),
    }
    let mut out = BTreeMap::new();
    while let Some(line) = lines.next() {
        let line = line?;
        let last = lines.peek().is_none();
        match std::str::from_utf8(&line).ok().and_then(Said::parse) {
            Some((id, said)) => {
                out.insert(id, said);
            }
            None if last => {}
            None => return Ok(None),
        }
    }
    Ok(Some(out))
}
