//! The run index's file formats (`runs.idx`, `runs.journal`), shared by the daemon, which
//! writes them, and the CLI, which reads them while the daemon is down. Pure: the daemon's
//! `store::index` does the I/O; docs/ARCHITECTURE.md ("The run index") says how they are used.
//!
//! - The **table**, `runs.idx`: a [`HEADER`]-byte header line naming the count, one
//!   [`RECORD`]-byte [`Record`] per finished run in id order
//!   (`<RUN> <status> <flags> <offset> <length>`), then every run's summary (its line of
//!   `run.list`) in the same order, each followed by a newline. Record `n` sits at byte
//!   `HEADER + n × RECORD`; a summary at `HEADER + count × RECORD + offset`.
//! - The **journal**, `runs.journal`: [`JOURNAL_MAGIC`], then one [`Said`] line per change
//!   since the table was written; a run's last line wins.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::ids;
use crate::projection::ListedStatus;

/// The table's name in the home.
pub const TABLE_FILE: &str = "runs.idx";
/// The journal's name in the home.
pub const JOURNAL_FILE: &str = "runs.journal";
/// Bytes of the table's header line.
pub const HEADER: u64 = 64;
/// Bytes of one record: 26 + 1 + 9 + 1 + 3 + 1 + 12 + 1 + 9 + 1.
pub const RECORD: u64 = 64;
const TABLE_MAGIC: &str = "octl-runs v1";
/// The journal's first line.
pub const JOURNAL_MAGIC: &str = "octl-runs-journal v1";

/// One finished run as the index keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub id: String,
    pub status: ListedStatus,
    /// What it still has, so the searches that need such runs fold only those.
    pub flags: Flags,
    /// Its line of `run.list`, as the daemon's `store::handle::Listing` serializes it.
    pub summary: Arc<str>,
}

/// What a finished run still has that some search must look at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Flags {
    /// Discussions or spin-off proposals (all closed, since it is finished): a search for
    /// one by id.
    pub records: bool,
    /// A node not cleaned up (its worktree, branch or window may be left), or one that ran
    /// on a remote runner (its exchange refs): `run gc` and the orphan search.
    pub left: bool,
    /// Ignored files kept aside: `run gc --older-than`.
    pub kept: bool,
}

impl Flags {
    /// Three letters, `-` for each absent: `r`, `l`, `k`.
    pub fn letters(self) -> String {
        [(self.records, 'r'), (self.left, 'l'), (self.kept, 'k')]
            .iter()
            .map(|(on, c)| if *on { *c } else { '-' })
            .collect()
    }

    pub fn parse(s: &str) -> Option<Flags> {
        let b = s.as_bytes();
        if b.len() != 3 {
            return None;
        }
        let one = |i: usize, c: u8| match b[i] {
            x if x == c => Some(true),
            b'-' => Some(false),
            _ => None,
        };
        Some(Flags {
            records: one(0, b'r')?,
            left: one(1, b'l')?,
            kept: one(2, b'k')?,
        })
    }
}

/// An active run as the journal names it, for the start that reads its log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Open {
    /// Its events up to this seq are in the change feed's index…
    pub fed: u64,
    /// …and records of later ones can only come after this position of it.
    pub at: u64,
}

/// What the journal says of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Said {
    Open(Open),
    Done(Entry),
    Gone,
}

impl Said {
    pub fn line(&self, id: &str) -> String {
        #[derive(Serialize)]
        struct OpenLine<'a> {
            open: &'a str,
            fed: u64,
            at: u64,
        }
        let mut line = match self {
            Said::Open(o) => serde_json::to_string(&OpenLine {
                open: id,
                fed: o.fed,
                at: o.at,
            })
            .expect("serializes"),
            Said::Done(e) => format!(
                "{{\"done\":{},\"status\":\"{}\",\"flags\":\"{}\",\"summary\":{}}}",
                serde_json::to_string(id).expect("serializes"),
                e.status.as_str(),
                e.flags.letters(),
                e.summary
            ),
            Said::Gone => format!(
                "{{\"gone\":{}}}",
                serde_json::to_string(id).expect("serializes")
            ),
        };
        line.push('\n');
        line
    }

    pub fn parse(text: &str) -> Option<(String, Said)> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Line<'a> {
            #[serde(borrow, default)]
            open: Option<&'a str>,
            #[serde(borrow, default)]
            done: Option<&'a str>,
            #[serde(borrow, default)]
            gone: Option<&'a str>,
            #[serde(default)]
            fed: u64,
            #[serde(default)]
            at: u64,
            #[serde(borrow, default)]
            status: Option<&'a str>,
            #[serde(borrow, default)]
            flags: Option<&'a str>,
            #[serde(borrow, default)]
            summary: Option<&'a RawValue>,
        }
        let l: Line = serde_json::from_str(text).ok()?;
        let id = |s: &str| ids::is_full_run_id(s).then(|| s.to_string());
        match (l.open, l.done, l.gone) {
            (Some(run), None, None) => Some((
                id(run)?,
                Said::Open(Open {
                    fed: l.fed,
                    at: l.at,
                }),
            )),
            (None, Some(run), None) => Some((
                id(run)?,
                Said::Done(Entry {
                    id: id(run)?,
                    status: ListedStatus::parse(l.status?)?,
                    flags: Flags::parse(l.flags?)?,
                    summary: Arc::from(l.summary?.get()),
                }),
            )),
            (None, None, Some(run)) => Some((id(run)?, Said::Gone)),
            _ => None,
        }
    }
}

/// One record of the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub id: String,
    pub status: ListedStatus,
    pub flags: Flags,
    /// Where its summary starts, from the start of the summaries.
    pub offset: u64,
    pub len: u64,
}

impl Record {
    pub fn new(id: String, status: ListedStatus, flags: Flags, offset: u64, len: u64) -> Record {
        Record {
            id,
            status,
            flags,
            offset,
            len,
        }
    }

    pub fn encode(&self) -> [u8; RECORD as usize] {
        let line = format!(
            "{:<26} {:<9} {} {:>12} {:>9}\n",
            self.id,
            self.status.as_str(),
            self.flags.letters(),
            self.offset,
            self.len
        );
        let mut out = [b' '; RECORD as usize];
        out.copy_from_slice(&line.as_bytes()[..RECORD as usize]);
        out
    }

    pub fn decode(bytes: &[u8]) -> Option<Record> {
        let text = std::str::from_utf8(bytes).ok()?.strip_suffix('\n')?;
        let mut parts = text.split_ascii_whitespace();
        let id = parts.next()?;
        let status = ListedStatus::parse(parts.next()?)?;
        let flags = Flags::parse(parts.next()?)?;
        let offset = parts.next()?.parse().ok()?;
        let len = parts.next()?.parse().ok()?;
        if parts.next().is_some() || !ids::is_full_run_id(id) || !status.is_ended() {
            return None;
        }
        Some(Record {
            id: id.to_string(),
            status,
            flags,
            offset,
            len,
        })
    }
}

/// The count a table's header line gives.
pub fn parse_header(bytes: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(bytes).ok()?.strip_suffix('\n')?;
    let rest = text.strip_prefix(TABLE_MAGIC)?.trim();
    rest.parse().ok()
}

/// The table's header line for `count` runs.
pub fn header(count: u64) -> String {
    format!("{:<63}\n", format!("{TABLE_MAGIC} {count}"))
}
