//! The journal, `runs.journal`: one line for each change since the table was written, each
//! written whole and synced before the change counts. A JSON object per line after a header:
//! `{"open":RUN,"fed":N,"at":M}`, `{"done":RUN,"status":S,"flags":"rlk","summary":{…}}`,
//! `{"gone":RUN}`; the last line a run has wins.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::path::Path;

use crate::store::log::{append_synced, sync_dir};
use octl_proto::run_index::{Said, JOURNAL_FILE, JOURNAL_MAGIC};

/// Reads the journal: `None` when it cannot be parsed (a bad line before the last). A last
/// line cut short (a crash mid-write, never acknowledged) is cut off.
pub(super) fn read_journal(path: &Path) -> io::Result<Option<BTreeMap<String, Said>>> {
    let mut overlay = BTreeMap::new();
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let total = file.metadata()?.len();
    let mut reader = BufReader::with_capacity(1 << 16, file);
    let mut buf = Vec::new();
    let mut offset = 0u64;
    let mut first = true;
    loop {
        buf.clear();
        let n = reader.read_until(b'\n', &mut buf)?;
        if n == 0 || buf.last() != Some(&b'\n') {
            break;
        }
        let Ok(text) = std::str::from_utf8(&buf[..n - 1]) else {
            return Ok(None);
        };
        if first {
            if text != JOURNAL_MAGIC {
                return Ok(None);
            }
            first = false;
        } else {
            let Some((id, said)) = Said::parse(text) else {
                return Ok(None);
            };
            overlay.insert(id, said);
        }
        offset += n as u64;
    }
    if first {
        return Ok(None);
    }
    if offset < total {
        tracing::warn!(
            bytes = total - offset,
            "cut a torn last line from the run journal"
        );
        let f = OpenOptions::new().write(true).open(path)?;
        f.set_len(offset)?;
        f.sync_all()?;
    }
    Ok(Some(overlay))
}

/// Writes a journal holding `overlay` beside the old one and renames it over it.
pub(super) fn write_journal(root: &Path, overlay: &BTreeMap<String, Said>) -> io::Result<Journal> {
    let path = root.join(JOURNAL_FILE);
    let tmp = root.join(format!("{JOURNAL_FILE}.tmp"));
    let mut bytes = format!("{JOURNAL_MAGIC}\n");
    for (id, said) in overlay {
        bytes.push_str(&said.line(id));
    }
    {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes.as_bytes())?;
        f.sync_all()?;
    }
    fs::rename(&tmp, &path)?;
    sync_dir(root)?;
    Journal::open(&path)
}

/// The journal file, appended to under the index's lock.
pub(super) struct Journal {
    file: File,
    /// Length written and synced: where a failed write is cut back to.
    len: u64,
}

impl Journal {
    pub(super) fn open(path: &Path) -> io::Result<Journal> {
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .read(true)
            .open(path)?;
        let mut len = file.metadata()?.len();
        if len == 0 {
            file.write_all(format!("{JOURNAL_MAGIC}\n").as_bytes())?;
            file.sync_all()?;
            if let Some(dir) = path.parent() {
                sync_dir(dir)?;
            }
            len = file.metadata()?.len();
        }
        Ok(Journal { file, len })
    }

    pub(super) fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        append_synced(&mut self.file, &mut self.len, bytes, "index:write-eio")
    }
}

pub(super) fn set_aside(path: &Path) -> io::Result<()> {
    let aside = path.with_file_name(format!(
        "{}.bad-{}",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("index"),
        crate::store::writer::now_ms()
    ));
    tracing::error!(file = %path.display(), aside = %aside.display(), "the run index cannot be read: setting it aside and building it again from the logs");
    fs::rename(path, aside)
}
