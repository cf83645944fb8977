//! The index's own tests: building, finding, the journal over the table, merging, reading
//! back, and what a damaged file does.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use octl_proto::projection::ListedStatus;

use super::table::TableWriter;
use super::*;
use octl_proto::run_index::{Record, JOURNAL_MAGIC, RECORD};

/// The table `finished` makes, as bytes.
fn table_bytes(dir: &Path, finished: &[Entry]) -> Vec<u8> {
    let path = dir.join("check.idx");
    let mut out = TableWriter::create(&path).unwrap();
    for e in finished {
        out.push(e).unwrap();
    }
    out.finish().unwrap();
    let bytes = fs::read(&path).unwrap();
    fs::remove_file(&path).unwrap();
    bytes
}

fn entry(n: u32, status: ListedStatus) -> Entry {
    let id = format!("01JDXJ5R8Q4M0ZK7P2W9T{n:05}");
    Entry {
        summary: Arc::from(format!("{{\"id\":\"{id}\",\"n\":{n}}}")),
        id,
        status,
        flags: Flags {
            records: n.is_multiple_of(7),
            left: n.is_multiple_of(5),
            kept: n.is_multiple_of(3),
        },
    }
}

fn all(index: &Index) -> Vec<Entry> {
    let mut out = Vec::new();
    index
        .each_finished(|e| {
            out.push(e);
            true
        })
        .unwrap();
    out
}

#[test]
fn records_are_fixed_width_and_parse_back() {
    let e = entry(3, ListedStatus::Cancelled);
    let rec = Record::new(e.id.clone(), e.status, e.flags, 123, 45);
    let bytes = rec.encode();
    assert_eq!(bytes.len(), RECORD as usize);
    assert_eq!(Record::decode(&bytes), Some(rec));
    assert_eq!(Record::decode(&[b' '; RECORD as usize]), None);
}

#[test]
fn a_new_home_is_built_then_found_journaled_merged_and_reopened() {
    let dir = tempfile::tempdir().unwrap();
    let opened = Index::open(dir.path()).unwrap();
    assert!(opened.rebuild.is_some(), "no table yet");
    let index = opened.index;
    let first: Vec<Entry> = (1..=5)
        .map(|n| entry(n * 2, ListedStatus::Completed))
        .collect();
    let open = vec![(entry(99, ListedStatus::Active).id, Open { fed: 3, at: 7 })];
    index.replace(first.clone(), &open).unwrap();
    assert_eq!(index.len(), 6);
    assert_eq!(
        index.find(&first[2].id).unwrap(),
        Found::Done(first[2].clone())
    );
    assert_eq!(
        index.find(&open[0].0).unwrap(),
        Found::Open(Open { fed: 3, at: 7 })
    );
    assert_eq!(
        index.find(&entry(3, ListedStatus::Failed).id).unwrap(),
        Found::Absent
    );

    // The journal: one finishes between two of the table's, one of the table's is gone,
    // the open one finishes.
    index.finish(entry(3, ListedStatus::Failed)).unwrap();
    index.forget(&first[0].id).unwrap();
    index.finish(entry(99, ListedStatus::Completed)).unwrap();
    assert_eq!(index.len(), 6);
    let ids: Vec<String> = all(&index).into_iter().map(|e| e.id).collect();
    let want: Vec<String> = [3, 4, 6, 8, 10, 99]
        .iter()
        .map(|n| entry(*n, ListedStatus::Completed).id)
        .collect();
    assert_eq!(ids, want);
    assert_eq!(
        index.with_prefix("01JDXJ5R8Q4M0ZK7P2W9T0000", 10).unwrap(),
        vec![
            want[0].clone(),
            want[1].clone(),
            want[2].clone(),
            want[3].clone()
        ]
    );

    // Reopened: the same, from the table and the journal.
    drop(index);
    let opened = Index::open(dir.path()).unwrap();
    assert!(opened.rebuild.is_none());
    assert!(opened.open.is_empty());
    let before = all(&opened.index);
    assert_eq!(
        before.iter().map(|e| e.id.clone()).collect::<Vec<_>>(),
        want
    );

    // Merged: the table alone holds it, byte for byte what the entries make.
    opened.index.merge().unwrap();
    assert_eq!(all(&opened.index), before);
    assert_eq!(
        fs::read(dir.path().join(TABLE_FILE)).unwrap(),
        table_bytes(dir.path(), &before)
    );
    let journal = fs::read_to_string(dir.path().join(JOURNAL_FILE)).unwrap();
    assert_eq!(journal, format!("{JOURNAL_MAGIC}\n"));
    let opened = Index::open(dir.path()).unwrap();
    assert_eq!(all(&opened.index), before);
    assert_eq!(opened.index.len(), 6);
}

#[test]
fn newest_reads_backwards_through_journal_and_table() {
    let dir = tempfile::tempdir().unwrap();
    let index = Index::open(dir.path()).unwrap().index;
    let table: Vec<Entry> = (0..600)
        .map(|n| {
            entry(
                n * 2,
                if n % 3 == 0 {
                    ListedStatus::Failed
                } else {
                    ListedStatus::Completed
                },
            )
        })
        .collect();
    index.replace(table, &[]).unwrap();
    // Newer in the journal: one between, one replacing a table entry's status.
    index.finish(entry(1001, ListedStatus::Cancelled)).unwrap();
    index.finish(entry(1198, ListedStatus::Failed)).unwrap();
    let mut got = Vec::new();
    let want = 5;
    let taken = std::cell::Cell::new(0);
    index
        .newest(
            &|_| false,
            &|s| s == ListedStatus::Failed || s == ListedStatus::Cancelled,
            &mut |e| {
                got.push(e.id.clone());
                taken.set(taken.get() + 1);
                true
            },
            &|| taken.get() >= want,
        )
        .unwrap();
    let expect: Vec<String> = [1198, 1194, 1188, 1182, 1176]
        .iter()
        .map(|n| entry(*n, ListedStatus::Failed).id)
        .collect();
    assert_eq!(got, expect);
}

#[test]
fn a_torn_journal_line_is_cut_and_a_bad_one_rebuilds() {
    let dir = tempfile::tempdir().unwrap();
    let index = Index::open(dir.path()).unwrap().index;
    index.replace(vec![], &[]).unwrap();
    index.finish(entry(1, ListedStatus::Completed)).unwrap();
    drop(index);
    let path = dir.path().join(JOURNAL_FILE);
    let mut f = OpenOptions::new().append(true).open(&path).unwrap();
    f.write_all(b"{\"done\":\"01JDX").unwrap();
    drop(f);
    let opened = Index::open(dir.path()).unwrap();
    assert!(opened.rebuild.is_none());
    assert_eq!(all(&opened.index).len(), 1);
    drop(opened);
    let mut f = OpenOptions::new().append(true).open(&path).unwrap();
    f.write_all(b"not json\n{\"gone\":\"01JDXJ5R8Q4M0ZK7P2W9T00001\"}\n")
        .unwrap();
    drop(f);
    let opened = Index::open(dir.path()).unwrap();
    assert!(opened.rebuild.is_some());
    assert!(fs::read_dir(dir.path()).unwrap().any(|e| e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .starts_with("runs.journal.bad-")));
}

#[test]
fn a_table_of_the_wrong_shape_rebuilds() {
    let dir = tempfile::tempdir().unwrap();
    let index = Index::open(dir.path()).unwrap().index;
    index
        .replace(vec![entry(1, ListedStatus::Completed)], &[])
        .unwrap();
    drop(index);
    let path = dir.path().join(TABLE_FILE);
    let mut bytes = fs::read(&path).unwrap();
    bytes.pop();
    fs::write(&path, &bytes).unwrap();
    assert!(Index::open(dir.path()).unwrap().rebuild.is_some());
}

#[test]
fn a_status_filter_reads_only_those_summaries_and_the_journal_still_wins() {
    let dir = tempfile::tempdir().unwrap();
    let index = Index::open(dir.path()).unwrap().index;
    let table: Vec<Entry> = (0..10)
        .map(|n| {
            entry(
                n,
                if n % 2 == 0 {
                    ListedStatus::Failed
                } else {
                    ListedStatus::Completed
                },
            )
        })
        .collect();
    index.replace(table, &[]).unwrap();
    // A failed one retried and now completed; a new failed one between two.
    index.finish(entry(4, ListedStatus::Completed)).unwrap();
    index.finish(entry(5, ListedStatus::Failed)).unwrap();
    index.forget(&entry(8, ListedStatus::Failed).id).unwrap();
    let mut failed = Vec::new();
    index
        .each_finished_where(&|s| s == ListedStatus::Failed, |e| {
            assert_eq!(e.status, ListedStatus::Failed);
            failed.push(e.id);
            true
        })
        .unwrap();
    let want: Vec<String> = [0, 2, 5, 6]
        .iter()
        .map(|n| entry(*n, ListedStatus::Failed).id)
        .collect();
    assert_eq!(failed, want);
}
