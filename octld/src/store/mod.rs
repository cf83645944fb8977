//! The event store: every run's log, its writer, its published state and its event stream.
//!
//! Two kinds of run: an **active** one (not ended, or something in it still waits) has a
//! writer task, its folded state in memory and a [`RunHandle`] held here; a **finished** one
//! has nothing but its line in the on-disk [`index`]. [`Store::resolve`] finds both: a finished
//! run is folded from its log when asked for, and dropped again once no one holds its handle.
//! Appending to a finished run makes it active again first. A run's writer lets go of it once
//! it has finished and stayed untouched for a moment ([`writer`]). The daemon's descriptors and
//! memory therefore grow with the runs it works on, never with the runs it ever made.
//!
//! - [`log`]: reading, repairing and appending `events.jsonl`.
//! - [`writer`]: the per-run group-commit writer; it also lets go of a finished run.
//! - [`index`]: what `run.list` needs of every run, and which runs are active, on disk.
//! - [`projections`]: atomic writes of the derived files.
//! - [`corrupt`]: what a corrupt run's log still says, and setting such a run aside.
//! - [`fault`]: the errors of a full or failing disk (`storage_full`, `io_error`).
//! - [`feed`]: every run's committed events in one durable order, for the change feed.
//! - [`handle`]: one run as the rest of the daemon sees it ([`RunHandle`]).
//! - [`create`]: creating a run, its first write synced before it is announced.

pub mod corrupt;
mod create;
pub mod fault;
pub mod feed;
mod handle;
pub mod index;
pub mod log;
pub mod projections;
pub mod writer;

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};

use octl_proto::notice::Notice;
use serde_json::value::RawValue;
use tokio::sync::{mpsc, oneshot, watch};

use octl_proto::ids::{self, RunRef};
use octl_proto::projection::{self, ListedStatus, RunDetail, RunSummary};
use octl_proto::rpc::{AppendResult, RebuildResult};
use octl_proto::state::SpinoffStatus;
use octl_proto::{AppError, ErrorKind, Event, RunState};

use crate::home::Home;
pub use create::{FirstWrite, NewRun, Syncing};
use feed::Feed;
pub(crate) use handle::untrusted_hint;
use handle::Listing;
pub use handle::RunHandle;
pub use index::Entry;
use index::{Flags, Found, Index, Open};
use log::{LogWriter, CORRUPT_FILE, LOG_FILE};
pub use writer::Draft;
use writer::{Command, Writer};

/// Queue depth of one run's writer.
const QUEUE: usize = 8192;

/// What `run.list` keeps: every field given must match.
#[derive(Debug, Default)]
pub struct ListFilter {
    /// Runs in one of these statuses.
    pub statuses: Option<Vec<ListedStatus>>,
    /// Runs on the repository at this path or containing it.
    pub repo: Option<PathBuf>,
    /// The newest this many of the others.
    pub limit: Option<u64>,
}

impl ListFilter {
    fn status_ok(&self, s: ListedStatus) -> bool {
        self.statuses.as_ref().is_none_or(|l| l.contains(&s))
    }

    fn repo_ok(&self, repo: Option<&str>) -> bool {
        self.repo
            .as_ref()
            .is_none_or(|path| repo.is_some_and(|r| path.starts_with(std::path::Path::new(r))))
    }

    fn passes(&self, l: &Listing) -> bool {
        self.status_ok(l.status) && self.repo_ok(l.repo.as_deref().and_then(|p| p.to_str()))
    }

    fn passes_entry(&self, e: &Entry) -> bool {
        if !self.status_ok(e.status) {
            return false;
        }
        if self.repo.is_none() {
            return true;
        }
        #[derive(serde::Deserialize)]
        struct RepoOnly<'a> {
            #[serde(borrow, default)]
            repo: Option<Cow<'a, str>>,
        }
        let repo = serde_json::from_str::<RepoOnly>(&e.summary)
            .ok()
            .and_then(|r| r.repo);
        self.repo_ok(repo.as_deref())
    }
}

/// Whether a run is **finished**: it ended (completed, failed, cancelled, or its log is
/// corrupt) and nothing in it waits — no open question, no proposal to decide, no accepted
/// proposal whose run does not exist yet (the engine creates it). Such a run is kept in the
/// index only. A failed run may still be retried or merged as committed: that writes to it,
/// which makes it active again.
pub fn finished(view: &RunDetail, exists: &dyn Fn(&str) -> bool) -> bool {
    view.manifest.status.is_ended()
        && view.discussions.iter().all(|d| !d.open)
        && view.spinoffs.iter().all(|s| match s.status {
            SpinoffStatus::Proposed => false,
            SpinoffStatus::Accepted => s
                .child_run
                .as_deref()
                .is_none_or(|c| !ids::is_full_run_id(c) || exists(c)),
            SpinoffStatus::Rejected | SpinoffStatus::Failed => true,
        })
}

/// The index entry of a finished run, from its view.
fn entry_of(id: &str, view: &RunDetail) -> Entry {
    Entry {
        id: id.to_string(),
        status: view.manifest.status,
        flags: Flags {
            records: !view.discussions.is_empty() || !view.spinoffs.is_empty(),
            left: view.nodes.iter().any(|n| !n.cleaned || n.runner.is_some()),
            kept: view.nodes.iter().any(|n| {
                n.kept
                    .iter()
                    .any(|k| k.status == octl_proto::state::KeptStatus::Kept)
            }),
        },
        summary: Arc::from(Listing::of(&view.manifest).json),
    }
}

/// What the store shares with the writers (which let go of their runs themselves).
pub(crate) struct Shared {
    home: Home,
    maps: RwLock<Maps>,
    index: Index,
    closing: AtomicBool,
    /// Told the id of every run whose state changed (the engine listens).
    changes: Mutex<Option<mpsc::UnboundedSender<String>>>,
    /// Given the notices committed events call for (the notifier listens).
    notices: Mutex<Option<mpsc::Sender<Notice>>>,
    /// The change feed; set once the active runs are loaded.
    feed: OnceLock<Arc<Feed>>,
    /// How many writers run: shutdown waits for none.
    writers: watch::Sender<usize>,
    /// One finished run made active at a time.
    activating: tokio::sync::Mutex<()>,
}

/// The runs in memory.
#[derive(Default)]
struct Maps {
    /// Every active run (each has a writer).
    active: BTreeMap<String, Arc<RunHandle>>,
    /// Finished runs folded for someone who still holds them: one handle per run at a time.
    loaded: HashMap<String, Weak<RunHandle>>,
}

impl Shared {
    fn maps(&self) -> std::sync::RwLockReadGuard<'_, Maps> {
        self.maps.read().expect("runs lock")
    }

    fn maps_mut(&self) -> std::sync::RwLockWriteGuard<'_, Maps> {
        self.maps.write().expect("runs lock")
    }

    /// Whether a run of this id exists (without reading it).
    pub(crate) fn exists(&self, id: &str) -> bool {
        self.maps().active.contains_key(id)
            || !matches!(self.index.find(id), Ok(Found::Absent) | Err(_))
    }

    /// The change feed's durable head, for an `open` entry written now.
    fn feed_head(&self) -> u64 {
        self.feed.get().map_or(0, |f| f.head())
    }
}

pub struct Store {
    shared: Arc<Shared>,
}

/// What is on disk of one run, read at start.
enum OnDisk {
    /// A directory without a log: a creation cut short.
    Missing,
    /// Set aside as corrupt (now or before): finished, read-only.
    Corrupt(Entry),
    Replayed {
        state: Box<RunState>,
        /// Its projections could not be written now.
        stale: bool,
    },
}

impl Store {
    /// Opens the index and loads the active runs it names: replays each log (cutting a torn
    /// tail), re-derives its projections, and starts its writer. Without a readable index,
    /// builds it from every run's log first. Then opens the change feed.
    pub async fn open(home: Home) -> io::Result<Store> {
        let opened = Index::open(home.root())?;
        let shared = Arc::new(Shared {
            home,
            maps: RwLock::new(Maps::default()),
            index: opened.index,
            closing: AtomicBool::new(false),
            changes: Mutex::new(None),
            notices: Mutex::new(None),
            feed: OnceLock::new(),
            writers: watch::channel(0).0,
            activating: tokio::sync::Mutex::new(()),
        });
        let store = Store { shared };
        // Runs whose feed records must be checked: the active ones, and after a rebuild every
        // run (nothing says what the feed's index holds of them).
        let mut feed_runs: Vec<(String, u64, Open)> = Vec::new();
        match opened.rebuild {
            Some(why) => {
                tracing::warn!(why = %why, "building the run index from the runs' logs");
                store.rebuild_index(&mut feed_runs)?;
            }
            None => {
                for (id, open) in opened.open {
                    if let Some(committed) = store.load_active(&id)? {
                        feed_runs.push((id, committed, open));
                    }
                }
            }
        }
        // Nothing appends before the store is returned, so what each run has committed is
        // what the feed must have indexed.
        let home = &store.shared.home;
        let every = || store.committed_everywhere();
        let feed = Feed::open(home.root(), &home.runs(), &feed_runs, &every)?;
        drop(feed_runs);
        let handles = store.handles();
        for h in &handles {
            let mut tap = h.tap.lock().expect("tap lock");
            tap.tx = Some(feed.sender());
            tap.fed = h.committed();
        }
        let _ = store.shared.feed.set(feed);
        // Every active run's events are in the feed's index now: the next start reads it from
        // here on only. On a full disk the journal's older points stand: the next start
        // reads more of the feed's index, nothing is lost.
        if let Err(e) = store.checkpoint().await {
            tracing::warn!(error = %e, "cannot checkpoint the run journal; the next start reads more of the feed's index");
        }
        Ok(store)
    }

    /// Once the feed's index holds every event told to it, notes in the journal, for each
    /// active run, how far that is: the next start reads the feed's index from there on.
    async fn checkpoint(&self) -> io::Result<()> {
        let Some(feed) = self.shared.feed.get() else {
            return Ok(());
        };
        feed.flush().await;
        let at = feed.head();
        let points: Vec<(String, Open)> = self
            .handles()
            .iter()
            .map(|h| {
                let fed = h.committed();
                (h.id.clone(), Open { fed, at })
            })
            .collect();
        self.shared.index.checkpoint(&points)
    }

    /// Every run's id and last committed seq (finished runs' from their summaries), for a
    /// change feed index made anew.
    fn committed_everywhere(&self) -> io::Result<Vec<(String, u64)>> {
        #[derive(serde::Deserialize)]
        struct SeqOnly {
            last_seq: u64,
        }
        let mut out: Vec<(String, u64)> = self
            .handles()
            .iter()
            .filter(|h| h.corrupt().is_none())
            .map(|h| (h.id.clone(), h.committed()))
            .collect();
        self.shared.index.each_finished(|e| {
            if e.status != ListedStatus::Corrupt && !self.shared.maps().active.contains_key(&e.id) {
                if let Ok(s) = serde_json::from_str::<SeqOnly>(&e.summary) {
                    out.push((e.id, s.last_seq));
                }
            }
            true
        })?;
        out.sort();
        Ok(out)
    }

    /// The change feed (every run's committed events in one order).
    pub fn feed(&self) -> &Arc<Feed> {
        self.shared
            .feed
            .get()
            .expect("the feed opens with the store")
    }

    /// Reads one run's directory at start.
    fn read_run(&self, id: &str) -> io::Result<OnDisk> {
        let dir = self.shared.home.run_dir(id);
        let path = dir.join(LOG_FILE);
        let aside = dir.join(CORRUPT_FILE);
        if !path.exists() {
            if aside.exists() {
                let reason = match log::replay(&aside, false)? {
                    Err(c) => describe(&c),
                    Ok(_) => "its log was set aside earlier".to_string(),
                };
                return Ok(OnDisk::Corrupt(entry_of(
                    id,
                    &corrupt_view(id, &dir, &reason),
                )));
            }
            return Ok(OnDisk::Missing);
        }
        match log::replay(&path, true)? {
            Ok(replayed) => {
                if replayed.cut > 0 {
                    tracing::warn!(run = %id, bytes = replayed.cut, "cut a torn last line from the log (a write a crash interrupted, never acknowledged)");
                }
                // On a full disk the daemon still starts; the writer heals the projections.
                let stale = match projections::write_all(&dir, &replayed.state) {
                    Ok(_) => false,
                    Err(e) => {
                        tracing::warn!(run = %id, error = %e, "cannot write projections; they are written again later");
                        true
                    }
                };
                Ok(OnDisk::Replayed {
                    state: Box::new(replayed.state),
                    stale,
                })
            }
            Err(c) => {
                let reason = describe(&c);
                tracing::error!(run = %id, line = c.line, reason = %c.reason, "corrupt log: setting it aside; the run is read-only");
                fs::rename(&path, &aside)?;
                Ok(OnDisk::Corrupt(entry_of(
                    id,
                    &corrupt_view(id, &dir, &reason),
                )))
            }
        }
    }

    /// Loads a run the journal names as active; its committed seq, or `None` when it turned
    /// out corrupt or never created (the index says so now).
    fn load_active(&self, id: &str) -> io::Result<Option<u64>> {
        match self.read_run(id)? {
            OnDisk::Missing => {
                tracing::warn!(run = %id, "run directory without a log (a creation cut short); ignored");
                self.shared.index.forget(id)?;
                Ok(None)
            }
            OnDisk::Corrupt(entry) => {
                self.shared.index.finish(entry)?;
                Ok(None)
            }
            // Even one that has finished meanwhile (a crash before its index entry): its
            // writer lets go of it once the feed has its last events.
            OnDisk::Replayed { state, stale } => {
                let committed = state.last_seq;
                self.start(id.to_string(), *state, None, stale);
                Ok(Some(committed))
            }
        }
    }

    /// Builds the index from every run directory (a home from before the index, or one whose
    /// index could not be read): finished runs go into the table, the others are loaded.
    fn rebuild_index(&self, feed_runs: &mut Vec<(String, u64, Open)>) -> io::Result<()> {
        let home = &self.shared.home;
        let mut ids: Vec<String> = fs::read_dir(home.runs())?
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|name| ids::is_full_run_id(name))
            .collect();
        ids.sort();
        let runs_dir = home.runs();
        let on_disk = |id: &str| {
            let dir = runs_dir.join(id);
            dir.join(LOG_FILE).exists() || dir.join(CORRUPT_FILE).exists()
        };
        let mut table = self.shared.index.rebuild()?;
        let mut open = Vec::new();
        for id in &ids {
            match self.read_run(id)? {
                OnDisk::Missing => {
                    tracing::warn!(run = %id, "run directory without a log (a creation cut short); ignored");
                }
                OnDisk::Corrupt(entry) => table.push(&entry)?,
                OnDisk::Replayed { state, stale } => {
                    let view = projection::detail(&state);
                    let o = Open { fed: 0, at: 0 };
                    feed_runs.push((id.clone(), state.last_seq, o));
                    if !stale && finished(&view, &on_disk) {
                        table.push(&entry_of(id, &view))?;
                    } else {
                        open.push((id.clone(), o));
                        self.start(id.clone(), *state, None, stale);
                    }
                }
            }
        }
        let finished_runs = table.count();
        table.finish(&open)?;
        tracing::info!(
            finished = finished_runs,
            active = open.len(),
            "run index built from the logs"
        );
        Ok(())
    }

    /// Starts telling the returned receiver the id of each run whose state changes.
    pub fn watch_changes(&self) -> mpsc::UnboundedReceiver<String> {
        let (tx, rx) = mpsc::unbounded_channel();
        for h in self.handles() {
            *h.changes.lock().expect("changes lock") = Some(tx.clone());
        }
        *self.shared.changes.lock().expect("changes lock") = Some(tx);
        rx
    }

    /// Starts giving the returned receiver the notice of each committed event that calls
    /// for one (`octl_proto::notice`), in each run's log order; at most `depth` wait.
    pub fn watch_notices(&self, depth: usize) -> mpsc::Receiver<Notice> {
        let (tx, rx) = mpsc::channel(depth);
        for h in self.handles() {
            *h.notices.lock().expect("notices lock") = Some(tx.clone());
        }
        *self.shared.notices.lock().expect("notices lock") = Some(tx);
        rx
    }

    /// Says that `run` changed, so the engine looks at it again.
    pub fn notify(&self, run: &str) {
        if let Some(tx) = self.shared.changes.lock().expect("changes lock").as_ref() {
            let _ = tx.send(run.to_string());
        }
    }

    /// Makes `state` an active run with a writer. `first`, for a new run, is its first write
    /// still on its way to disk: the writer commits nothing before it is.
    fn start(
        &self,
        id: String,
        state: RunState,
        first: Option<(FirstWrite, Arc<Vec<Event>>)>,
        stale: bool,
    ) -> Arc<RunHandle> {
        let dir = self.shared.home.run_dir(&id);
        let handle = Arc::new(RunHandle::new(
            id.clone(),
            dir,
            projection::detail(&state),
            None,
        ));
        if first.is_some() {
            // Nothing is on disk yet; the writer says so once the first write is.
            handle.committed.store(0, Ordering::Release);
            handle.tap.lock().expect("tap lock").fed = 0;
        }
        self.shared.maps_mut().active.insert(id, handle.clone());
        self.run_writer(&handle, state, first, stale);
        handle
    }

    /// Starts the writer of an active run (new, loaded at start, or made active again).
    fn run_writer(
        &self,
        handle: &Arc<RunHandle>,
        state: RunState,
        first: Option<(FirstWrite, Arc<Vec<Event>>)>,
        stale: bool,
    ) {
        let shared = &self.shared;
        handle.tap.lock().expect("tap lock").tx = shared.feed.get().map(|f| f.sender());
        let (tx, rx) = mpsc::channel(QUEUE);
        *handle.tx.lock().expect("tx lock") = Some(tx);
        *handle.changes.lock().expect("changes lock") =
            shared.changes.lock().expect("changes lock").clone();
        *handle.notices.lock().expect("notices lock") =
            shared.notices.lock().expect("notices lock").clone();
        let writer = Writer {
            handle: handle.clone(),
            shared: shared.clone(),
            log: LogWriter::open(&handle.dir.join(LOG_FILE)).ok(),
            state,
            first,
            stale,
            faulted: false,
            listed_done: false,
        };
        shared.writers.send_modify(|n| *n += 1);
        let shared = shared.clone();
        tokio::spawn(async move {
            writer.run(rx).await;
            shared.writers.send_modify(|n| *n -= 1);
        });
    }

    /// Finds a run by full id or unique prefix (`field` names the parameter in errors). A
    /// finished run is folded from its log now.
    pub fn resolve(&self, field: &str, given: &str) -> Result<Arc<RunHandle>, AppError> {
        let r = ids::parse_run_ref(field, given)?;
        let id = match &r {
            RunRef::Full(id) => id.clone(),
            RunRef::Prefix(p) => {
                let mut found: BTreeSet<String> = self
                    .shared
                    .maps()
                    .active
                    .range(p.clone()..)
                    .take_while(|(k, _)| k.starts_with(p.as_str()))
                    .map(|(k, _)| k.clone())
                    .take(6)
                    .collect();
                found.extend(
                    self.shared
                        .index
                        .with_prefix(p, 6)
                        .map_err(|e| self.index_error(e))?,
                );
                let many: Vec<String> = found.into_iter().collect();
                match many.as_slice() {
                    [] => return Err(not_found(given)),
                    [one] => one.clone(),
                    _ => {
                        return Err(AppError::new(
                            ErrorKind::AmbiguousId,
                            format!(
                                "{field} {given:?} matches more than one run: {}{}",
                                many.iter()
                                    .take(5)
                                    .map(String::as_str)
                                    .collect::<Vec<_>>()
                                    .join(", "),
                                if many.len() > 5 { ", …" } else { "" }
                            ),
                        )
                        .with_hint("give more characters of the run id"))
                    }
                }
            }
        };
        self.get(&id)?.ok_or_else(|| not_found(given))
    }

    /// The shortest prefix of the run id `id` (at least [`ids::SHOWN_PREFIX`]) that no other
    /// run of this home starts with: what names it for a person, in a branch name too. Only
    /// the runs sharing its first [`ids::SHOWN_PREFIX`] characters (its millisecond) can need
    /// more.
    pub fn shown_id(&self, id: &str) -> Result<String, AppError> {
        let Some(ms) = id.get(..ids::SHOWN_PREFIX) else {
            return Ok(id.to_string());
        };
        let mut near: BTreeSet<String> = self
            .shared
            .maps()
            .active
            .range(ms.to_string()..)
            .take_while(|(k, _)| k.starts_with(ms))
            .map(|(k, _)| k.clone())
            .collect();
        near.extend(
            self.shared
                .index
                .with_prefix(ms, 64)
                .map_err(|e| self.index_error(e))?,
        );
        Ok(ids::shown_prefix(id, near.iter().map(String::as_str)).to_string())
    }

    /// The run of this full id, if it exists: an active one, or a finished one folded now.
    pub fn get(&self, id: &str) -> Result<Option<Arc<RunHandle>>, AppError> {
        if let Some(h) = self.held(id) {
            return Ok(Some(h));
        }
        match self
            .shared
            .index
            .find(id)
            .map_err(|e| self.index_error(e))?
        {
            Found::Absent => Ok(None),
            Found::Open(_) | Found::Done(_) => self.load(id),
        }
    }

    /// The run's handle if it is in memory (active, or finished and held by someone).
    fn held(&self, id: &str) -> Option<Arc<RunHandle>> {
        let maps = self.shared.maps();
        maps.active
            .get(id)
            .cloned()
            .or_else(|| maps.loaded.get(id).and_then(Weak::upgrade))
    }

    /// The active run of this id, if it is one (never reads a log).
    pub fn active(&self, id: &str) -> Option<Arc<RunHandle>> {
        self.shared.maps().active.get(id).cloned()
    }

    /// Whether a run of this id exists, without reading it.
    pub fn exists(&self, id: &str) -> bool {
        self.shared.exists(id)
    }

    /// Folds a finished run from its log: a handle without a writer, kept only while
    /// someone holds it. A log found corrupt now is set aside, and the index says so.
    fn load(&self, id: &str) -> Result<Option<Arc<RunHandle>>, AppError> {
        let dir = self.shared.home.run_dir(id);
        let read = blocking_here(|| -> io::Result<Option<(RunDetail, Option<String>)>> {
            let path = dir.join(LOG_FILE);
            let aside = dir.join(CORRUPT_FILE);
            let corrupt = |reason: String| {
                let view = corrupt_view(id, &dir, &reason);
                Ok(Some((view, Some(reason))))
            };
            if !path.exists() {
                if !aside.exists() {
                    return Ok(None);
                }
                let reason = match log::replay(&aside, false)? {
                    Err(c) => describe(&c),
                    Ok(_) => "its log was set aside earlier".to_string(),
                };
                return corrupt(reason);
            }
            match log::replay(&path, false) {
                Ok(Ok(r)) => Ok(Some((projection::detail(&r.state), None))),
                Ok(Err(c)) => {
                    let reason = describe(&c);
                    tracing::error!(run = %id, line = c.line, reason = %c.reason, "corrupt log: setting it aside; the run is read-only");
                    match fs::rename(&path, &aside) {
                        Ok(()) => {}
                        // Set aside by another reader meanwhile.
                        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                        Err(e) => return Err(e),
                    }
                    let view = corrupt_view(id, &dir, &reason);
                    if !self.shared.maps().active.contains_key(id) {
                        self.shared.index.finish(entry_of(id, &view))?;
                    }
                    Ok(Some((view, Some(reason))))
                }
                // Gone meanwhile (set aside by another reader).
                Err(e) if e.kind() == io::ErrorKind::NotFound && aside.exists() => {
                    let reason = match log::replay(&aside, false)? {
                        Err(c) => describe(&c),
                        Ok(_) => "its log was set aside earlier".to_string(),
                    };
                    corrupt(reason)
                }
                Err(e) => Err(e),
            }
        })
        .map_err(|e| {
            fault::storage_error(&format!("cannot read run {id}"), &self.shared.home.run_dir(id), &e)
        })?;
        let Some((view, corrupt)) = read else {
            return Ok(None);
        };
        let mut maps = self.shared.maps_mut();
        // Another caller may have loaded it (or made it active) meanwhile: one handle a run.
        if let Some(h) = maps
            .active
            .get(id)
            .cloned()
            .or_else(|| maps.loaded.get(id).and_then(Weak::upgrade))
        {
            return Ok(Some(h));
        }
        let handle = Arc::new(RunHandle::new(
            id.to_string(),
            self.shared.home.run_dir(id),
            view,
            corrupt,
        ));
        if maps.loaded.len() >= 64 {
            maps.loaded.retain(|_, w| w.strong_count() > 0);
        }
        maps.loaded.insert(id.to_string(), Arc::downgrade(&handle));
        Ok(Some(handle))
    }

    /// Makes a finished run active again (something is appended to it): its log replayed
    /// into a writer, listed as active before the index says so, which it does before the
    /// first append.
    async fn activate(&self, id: &str) -> Result<(), AppError> {
        let _one = self.shared.activating.lock().await;
        let handle = {
            let maps = self.shared.maps();
            if maps.active.contains_key(id) {
                return Ok(());
            }
            maps.loaded.get(id).and_then(Weak::upgrade)
        };
        let Some(handle) = handle else {
            return Err(AppError::internal(format!(
                "run {id} is neither active nor loaded"
            )));
        };
        let path = handle.log_path();
        let replayed = tokio::task::spawn_blocking(move || log::replay(&path, true))
            .await
            .map_err(|e| AppError::internal(e.to_string()))?
            .map_err(|e| fault::storage_error(&format!("cannot read run {id}"), &handle.dir, &e))?
            .map_err(|c| {
                AppError::new(ErrorKind::RunCorrupt, format!("run {id}: {}", describe(&c)))
            })?;
        let state = replayed.state;
        {
            let mut maps = self.shared.maps_mut();
            maps.active.insert(id.to_string(), handle.clone());
            maps.loaded.remove(id);
        }
        let open = Open {
            fed: state.last_seq,
            at: self.shared.feed_head(),
        };
        let shared = self.shared.clone();
        let run = id.to_string();
        let written = tokio::task::spawn_blocking(move || shared.index.open_run(&run, open))
            .await
            .map_err(|e| AppError::internal(e.to_string()))?;
        if let Err(e) = written {
            let mut maps = self.shared.maps_mut();
            maps.active.remove(id);
            maps.loaded.insert(id.to_string(), Arc::downgrade(&handle));
            return Err(self.index_error(e));
        }
        tracing::debug!(run = %id, "a finished run is active again");
        handle.committed.store(state.last_seq, Ordering::Release);
        handle.tap.lock().expect("tap lock").fed = state.last_seq;
        self.run_writer(&handle, state, None, false);
        Ok(())
    }

    fn index_error(&self, e: io::Error) -> AppError {
        fault::storage_error(
            "cannot use the run index",
            &self.shared.home.root().join(index::JOURNAL_FILE),
            &e,
        )
    }

    /// The summaries of the runs that pass `filter` as one JSON array, oldest first (ULIDs
    /// sort by creation time): the active runs' from memory, the finished runs' from the
    /// index.
    pub fn list_json(&self, filter: &ListFilter) -> Result<Box<RawValue>, AppError> {
        // Under the runs lock throughout: a run made active (or let go of) meanwhile is in
        // memory or in the index, never in neither (see `index`'s order of writes).
        let maps = self.shared.maps();
        let active: Vec<(String, Arc<Listing>)> = maps
            .active
            .iter()
            .map(|(id, h)| (id.clone(), h.listing.read().expect("listing lock").clone()))
            .collect();
        let is_active = |id: &str| maps.active.contains_key(id);
        let mut parts: Vec<(String, Arc<str>)> = Vec::new();
        let result = match filter.limit {
            Some(limit) => {
                let keep = usize::try_from(limit).unwrap_or(usize::MAX);
                let mut newest: Vec<(String, Arc<str>)> = Vec::new();
                let taken = std::cell::Cell::new(0usize);
                let result = self.shared.index.newest(
                    &is_active,
                    &|s| filter.status_ok(s),
                    &mut |e| {
                        if filter.passes_entry(e) {
                            newest.push((e.id.clone(), e.summary.clone()));
                            taken.set(taken.get() + 1);
                        }
                        true
                    },
                    &|| taken.get() >= keep,
                );
                parts.extend(newest);
                result
            }
            None => {
                // A finished run's status is an ended one: `--status active,waiting` reads
                // nothing of the index, and any status filter skips the others' summaries.
                let result = if filter
                    .statuses
                    .as_ref()
                    .is_some_and(|l| !l.iter().any(|s| s.is_ended()))
                {
                    Ok(())
                } else {
                    self.shared
                        .index
                        .each_finished_where(&|s| filter.status_ok(s), |e| {
                            if !is_active(&e.id) && filter.passes_entry(&e) {
                                parts.push((e.id, e.summary));
                            }
                            true
                        })
                };
                result
            }
        };
        drop(maps);
        // The active runs beside them, all in id order; `--limit` keeps the newest.
        parts.extend(
            active
                .iter()
                .filter(|(_, l)| filter.passes(l))
                .map(|(id, l)| (id.clone(), Arc::from(l.json.as_str()))),
        );
        parts.sort_by(|a, b| a.0.cmp(&b.0));
        if let Some(limit) = filter.limit {
            let keep = usize::try_from(limit).unwrap_or(usize::MAX);
            parts.drain(..parts.len().saturating_sub(keep));
        }
        result.map_err(|e| self.index_error(e))?;
        let mut out =
            String::with_capacity(2 + parts.iter().map(|(_, j)| j.len() + 1).sum::<usize>());
        out.push('[');
        for (_, json) in &parts {
            if out.len() > 1 {
                out.push(',');
            }
            out.push_str(json);
        }
        out.push(']');
        Ok(RawValue::from_string(out).expect("summaries serialize to JSON"))
    }

    /// How many runs the home holds, active or finished.
    pub fn len(&self) -> usize {
        self.shared.index.len() as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many runs are active (in memory, each with a writer).
    pub fn active_len(&self) -> usize {
        self.shared.maps().active.len()
    }

    /// Every active run. Finished runs are not in memory: see [`Store::each_run`].
    pub fn handles(&self) -> Vec<Arc<RunHandle>> {
        self.shared.maps().active.values().cloned().collect()
    }

    /// Every run, active or finished, one at a time (a finished one folded from its log and
    /// dropped after `visit`): for the checks that look at every run (`doctor`). Stops early
    /// when `visit` returns false.
    pub fn each_run(&self, mut visit: impl FnMut(Arc<RunHandle>) -> bool) -> Result<(), AppError> {
        let ids = self.shared.index.ids().map_err(|e| self.index_error(e))?;
        for id in ids {
            if let Some(h) = self.get(&id)? {
                if !visit(h) {
                    break;
                }
            }
        }
        Ok(())
    }

    /// Every finished run's entry in the index, in id order (no log is read).
    pub fn each_finished(&self, visit: impl FnMut(Entry) -> bool) -> Result<(), AppError> {
        self.shared
            .index
            .each_finished(visit)
            .map_err(|e| self.index_error(e))
    }

    /// The index entry a finished run's log derives now, with the state it folds to (none
    /// for a corrupt log); `None` when its directory has no log. For checking the index.
    pub fn entry_from_log(&self, id: &str) -> io::Result<Option<(Entry, Option<RunState>)>> {
        let dir = self.shared.home.run_dir(id);
        if !dir.join(LOG_FILE).exists() {
            if !dir.join(CORRUPT_FILE).exists() {
                return Ok(None);
            }
            let reason = match log::replay(&dir.join(CORRUPT_FILE), false)? {
                Err(c) => describe(&c),
                Ok(_) => "its log was set aside earlier".to_string(),
            };
            return Ok(Some((entry_of(id, &corrupt_view(id, &dir, &reason)), None)));
        }
        match log::replay(&dir.join(LOG_FILE), false)? {
            Ok(r) => Ok(Some((
                entry_of(id, &projection::detail(&r.state)),
                Some(r.state),
            ))),
            Err(c) => {
                let reason = describe(&c);
                Ok(Some((entry_of(id, &corrupt_view(id, &dir, &reason)), None)))
            }
        }
    }

    /// Run directories (with a log) that the index does not know: copied in by hand, or an
    /// index damaged. Read from the directory first, so a run created meanwhile (named in the
    /// index before its directory exists) is never among them.
    pub fn unindexed(&self) -> Result<Vec<String>, AppError> {
        let runs = self.shared.home.runs();
        let on_disk: Vec<String> = fs::read_dir(&runs)
            .map_err(|e| fault::storage_error("cannot read the runs", &runs, &e))?
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|name| ids::is_full_run_id(name))
            .filter(|name| {
                let dir = runs.join(name);
                dir.join(LOG_FILE).exists() || dir.join(CORRUPT_FILE).exists()
            })
            .collect();
        let known: BTreeSet<String> = self
            .shared
            .index
            .ids()
            .map_err(|e| self.index_error(e))?
            .into_iter()
            .collect();
        let mut out: Vec<String> = on_disk
            .into_iter()
            .filter(|id| !known.contains(id))
            .collect();
        out.sort();
        Ok(out)
    }

    /// The runs that may hold a record (discussion or proposal) by that id prefix: every
    /// active run, then the finished runs that have records, folded one at a time.
    pub fn each_with_records(
        &self,
        mut visit: impl FnMut(Arc<RunHandle>) -> bool,
    ) -> Result<(), AppError> {
        for h in self.handles() {
            if !visit(h) {
                return Ok(());
            }
        }
        let mut ids = Vec::new();
        self.shared
            .index
            .each_finished(|e| {
                if e.flags.records {
                    ids.push(e.id);
                }
                true
            })
            .map_err(|e| self.index_error(e))?;
        for id in ids {
            if self.active(&id).is_some() {
                continue;
            }
            if let Some(h) = self.get(&id)? {
                if !visit(h) {
                    break;
                }
            }
        }
        Ok(())
    }

    /// The writer's queue of an active run, making a finished run active first.
    async fn sender(&self, run: &RunHandle) -> Result<mpsc::Sender<Command>, AppError> {
        if let Some(tx) = run.sender()? {
            return Ok(tx);
        }
        if self.shared.closing.load(Ordering::Acquire) {
            return Err(AppError::new(
                ErrorKind::ShuttingDown,
                "the daemon is shutting down",
            ));
        }
        // One handle a run at a time (the loaded map), so the one made active is `run`.
        self.activate(&run.id).await?;
        run.sender()?
            .ok_or_else(|| AppError::internal(format!("run {} could not be made active", run.id)))
    }

    /// Appends one event and returns once it is on disk.
    pub async fn append(
        &self,
        run: &RunHandle,
        draft: Draft,
        client: bool,
    ) -> Result<AppendResult, AppError> {
        let tx = self.sender(run).await?;
        if let Some(e) = run.untrusted_error() {
            return Err(e);
        }
        let (reply, rx) = oneshot::channel();
        tx.send(Command::Append {
            draft: Box::new(draft),
            client,
            reply,
        })
        .await
        .map_err(|_| AppError::new(ErrorKind::ShuttingDown, "the daemon is shutting down"))?;
        rx.await
            .map_err(|_| AppError::internal("the run's writer stopped"))?
    }

    /// Appends daemon events together: all are written in one group, or none is.
    pub async fn append_all(
        &self,
        run: &RunHandle,
        drafts: Vec<Draft>,
    ) -> Result<Vec<AppendResult>, AppError> {
        let tx = self.sender(run).await?;
        if let Some(e) = run.untrusted_error() {
            return Err(e);
        }
        let (reply, rx) = oneshot::channel();
        tx.send(Command::AppendAll { drafts, reply })
            .await
            .map_err(|_| AppError::new(ErrorKind::ShuttingDown, "the daemon is shutting down"))?;
        rx.await
            .map_err(|_| AppError::internal("the run's writer stopped"))?
    }

    /// Re-derives every projection of a run from its log alone.
    pub async fn rebuild(&self, run: &RunHandle) -> Result<RebuildResult, AppError> {
        if run.sender()?.is_none() {
            // A finished run: no writer to ask, nothing appends to it meanwhile.
            return writer::rebuild_projections(&run.id, &run.dir)
                .await
                .map(|(r, _)| r);
        }
        let tx = self.sender(run).await?;
        let (reply, rx) = oneshot::channel();
        tx.send(Command::Rebuild { reply })
            .await
            .map_err(|_| AppError::new(ErrorKind::ShuttingDown, "the daemon is shutting down"))?;
        rx.await
            .map_err(|_| AppError::internal("the run's writer stopped"))?
    }

    /// Stops taking appends, lets every writer finish what is queued, and waits for them;
    /// then, once the feed holds every committed event, notes in the index where the next
    /// start reads the feed's index from.
    pub async fn shutdown(&self) {
        self.shared.closing.store(true, Ordering::Release);
        let handles = self.handles();
        for h in &handles {
            h.tx.lock().expect("tx lock").take();
        }
        let mut writers = self.shared.writers.subscribe();
        let _ = writers.wait_for(|n| *n == 0).await;
        if let Err(e) = self.checkpoint().await {
            tracing::warn!(error = %e, "cannot checkpoint the run journal; the next start reads more of the feed's index");
        }
    }
}

/// What a corrupt run still says, as a view: the lines before the bad one (kind, title,
/// creation, node counts) for `run list`. Its nodes stay out of it, so nothing supervises or
/// schedules them; `run show` reads them from the log.
fn corrupt_view(id: &str, dir: &std::path::Path, reason: &str) -> RunDetail {
    if let Some(state) = corrupt::salvage(dir).ok().and_then(|s| s.state) {
        let mut manifest = projection::summary(&state);
        manifest.status = ListedStatus::Corrupt;
        manifest.error = Some(reason.to_string());
        return RunDetail {
            manifest,
            nodes: vec![],
            discussions: vec![],
            spinoffs: vec![],
            permissions: vec![],
            allowed: vec![],
            judged: None,
            judge_failed: None,
        };
    }
    let summary = RunSummary {
        id: id.to_string(),
        kind: None,
        status: ListedStatus::Corrupt,
        title: None,
        repo: None,
        base: None,
        created_at: String::new(),
        updated_at: String::new(),
        nodes: BTreeMap::new(),
        activity: BTreeMap::new(),
        last_seq: 0,
        settings: Default::default(),
        merge: None,
        merge_commit: None,
        error: Some(reason.to_string()),
        cost_usd: None,
        budget_spent: false,
    };
    RunDetail {
        manifest: summary,
        nodes: vec![],
        discussions: vec![],
        spinoffs: vec![],
        permissions: vec![],
        allowed: vec![],
        judged: None,
        judge_failed: None,
    }
}

/// Runs blocking work (a log read) on this thread, letting the runtime move its other tasks
/// elsewhere meanwhile when it can.
fn blocking_here<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(rt) if rt.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

fn describe(c: &log::Corruption) -> String {
    if c.line == 0 {
        c.reason.clone()
    } else {
        format!("line {} of its log: {}", c.line, c.reason)
    }
}

fn not_found(given: &str) -> AppError {
    AppError::not_found(format!("no run matches {given:?}"))
        .with_hint("list runs with `orchestratectl run list`")
}
