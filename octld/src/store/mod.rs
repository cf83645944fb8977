//! The event store: every run's log, its writer, its published state and its event stream.
//!
//! - [`log`]: reading, repairing and appending `events.jsonl`.
//! - [`writer`]: the per-run group-commit writer.
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
pub mod log;
pub mod projections;
pub mod writer;

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use octl_proto::notice::Notice;
use serde_json::value::RawValue;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use octl_proto::ids::{self, RunRef};
use octl_proto::projection::{self, ListedStatus, RunDetail, RunSummary};
use octl_proto::rpc::{AppendResult, RebuildResult};
use octl_proto::{AppError, ErrorKind, Event, RunState};

use crate::home::Home;
pub use create::{FirstWrite, NewRun, Syncing};
use feed::Feed;
pub(crate) use handle::untrusted_hint;
use handle::Listing;
pub use handle::RunHandle;
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
    fn passes(&self, l: &Listing) -> bool {
        self.statuses.as_ref().is_none_or(|s| s.contains(&l.status))
            && self
                .repo
                .as_ref()
                .is_none_or(|path| l.repo.as_ref().is_some_and(|repo| path.starts_with(repo)))
    }
}

pub struct Store {
    home: Home,
    runs: RwLock<BTreeMap<String, Arc<RunHandle>>>,
    /// Told the id of every run whose state changed (the engine listens).
    changes: Mutex<Option<mpsc::UnboundedSender<String>>>,
    /// Given the notices committed events call for (the notifier listens).
    notices: Mutex<Option<mpsc::Sender<Notice>>>,
    closing: AtomicBool,
    writers: Mutex<Vec<JoinHandle<()>>>,
    /// The change feed; set once every run is loaded.
    feed: OnceLock<Arc<Feed>>,
}

impl Store {
    /// Loads every run under `runs/`: replays its log (cutting a torn tail), re-derives its
    /// projections, and starts its writer. A run that cannot be replayed is set aside.
    pub fn open(home: Home) -> io::Result<Store> {
        let store = Store {
            home,
            runs: RwLock::new(BTreeMap::new()),
            changes: Mutex::new(None),
            notices: Mutex::new(None),
            closing: AtomicBool::new(false),
            writers: Mutex::new(Vec::new()),
            feed: OnceLock::new(),
        };
        let mut ids: Vec<String> = fs::read_dir(store.home.runs())?
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|name| ids::is_full_run_id(name))
            .collect();
        ids.sort();
        for id in ids {
            store.load(id)?;
        }
        // Nothing appends before the store is returned, so what each run has committed is
        // what the feed must have indexed.
        let handles = store.handles();
        let committed: Vec<(String, u64)> = handles
            .iter()
            .filter(|h| h.corrupt.is_none())
            .map(|h| (h.id.clone(), h.committed()))
            .collect();
        let feed = Feed::open(store.home.root(), &store.home.runs(), &committed)?;
        for h in &handles {
            let mut tap = h.tap.lock().expect("tap lock");
            tap.tx = Some(feed.sender());
            tap.fed = h.committed();
        }
        let _ = store.feed.set(feed);
        Ok(store)
    }

    /// The change feed (every run's committed events in one order).
    pub fn feed(&self) -> &Arc<Feed> {
        self.feed.get().expect("the feed opens with the store")
    }

    fn load(&self, id: String) -> io::Result<()> {
        let dir = self.home.run_dir(&id);
        let path = dir.join(LOG_FILE);
        let aside = dir.join(CORRUPT_FILE);
        if !path.exists() {
            if aside.exists() {
                let reason = match log::replay(&aside, false)? {
                    Err(c) => describe(&c),
                    Ok(_) => "its log was set aside earlier".to_string(),
                };
                self.insert_corrupt(id, dir, reason);
            } else {
                tracing::warn!(run = %id, "run directory without a log (a creation cut short); ignored");
            }
            return Ok(());
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
                self.start(id, dir, replayed.state, None, stale)?;
            }
            Err(c) => {
                let reason = describe(&c);
                tracing::error!(run = %id, line = c.line, reason = %c.reason, "corrupt log: setting it aside; the run is read-only");
                fs::rename(&path, &aside)?;
                self.insert_corrupt(id, dir, reason);
            }
        }
        Ok(())
    }

    fn insert_corrupt(&self, id: String, dir: PathBuf, reason: String) {
        // What the lines before the bad one say (kind, title, creation, node counts), for
        // `run list`. Its nodes stay out of the view, so nothing supervises or schedules them;
        // `run show` reads them from the log.
        if let Some(state) = corrupt::salvage(&dir).ok().and_then(|s| s.state) {
            let mut manifest = projection::summary(&state);
            manifest.status = ListedStatus::Corrupt;
            manifest.error = Some(reason.clone());
            let view = RunDetail {
                manifest,
                nodes: vec![],
                discussions: vec![],
                spinoffs: vec![],
            };
            let handle = Arc::new(RunHandle::new(id.clone(), dir, view, Some(reason)));
            self.runs.write().expect("runs lock").insert(id, handle);
            return;
        }
        let summary = RunSummary {
            id: id.clone(),
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
            error: Some(reason.clone()),
            cost_usd: None,
            budget_spent: false,
        };
        let view = RunDetail {
            manifest: summary,
            nodes: vec![],
            discussions: vec![],
            spinoffs: vec![],
        };
        let handle = Arc::new(RunHandle::new(id.clone(), dir, view, Some(reason)));
        self.runs.write().expect("runs lock").insert(id, handle);
    }

    /// Starts telling the returned receiver the id of each run whose state changes.
    pub fn watch_changes(&self) -> mpsc::UnboundedReceiver<String> {
        let (tx, rx) = mpsc::unbounded_channel();
        for h in self.handles() {
            *h.changes.lock().expect("changes lock") = Some(tx.clone());
        }
        *self.changes.lock().expect("changes lock") = Some(tx);
        rx
    }

    /// Starts giving the returned receiver the notice of each committed event that calls
    /// for one (`octl_proto::notice`), in each run's log order; at most `depth` wait.
    pub fn watch_notices(&self, depth: usize) -> mpsc::Receiver<Notice> {
        let (tx, rx) = mpsc::channel(depth);
        for h in self.handles() {
            *h.notices.lock().expect("notices lock") = Some(tx.clone());
        }
        *self.notices.lock().expect("notices lock") = Some(tx);
        rx
    }

    /// Says that `run` changed, so the engine looks at it again.
    pub fn notify(&self, run: &str) {
        if let Some(tx) = self.changes.lock().expect("changes lock").as_ref() {
            let _ = tx.send(run.to_string());
        }
    }

    /// Opens a run's log and starts its writer. `first`, for a new run, is its first write
    /// still on its way to disk: the writer commits nothing before it is.
    fn start(
        &self,
        id: String,
        dir: PathBuf,
        state: RunState,
        first: Option<(FirstWrite, Arc<Vec<Event>>)>,
        stale: bool,
    ) -> io::Result<Arc<RunHandle>> {
        let log = LogWriter::open(&dir.join(LOG_FILE))?;
        let handle = Arc::new(RunHandle::new(
            id.clone(),
            dir,
            projection::detail(&state),
            None,
        ));
        {
            let mut tap = handle.tap.lock().expect("tap lock");
            tap.tx = self.feed.get().map(|f| f.sender());
            if first.is_some() {
                // Nothing is on disk yet; the writer says so once the first write is.
                handle.committed.store(0, Ordering::Release);
                tap.fed = 0;
            }
        }
        let (tx, rx) = mpsc::channel(QUEUE);
        *handle.tx.lock().expect("tx lock") = Some(tx);
        *handle.changes.lock().expect("changes lock") =
            self.changes.lock().expect("changes lock").clone();
        *handle.notices.lock().expect("notices lock") =
            self.notices.lock().expect("notices lock").clone();
        let writer = Writer {
            handle: handle.clone(),
            state,
            log: Some(log),
            first,
            stale,
            faulted: false,
        };
        let task = tokio::spawn(writer.run(rx));
        self.writers.lock().expect("writers lock").push(task);
        self.runs
            .write()
            .expect("runs lock")
            .insert(id, handle.clone());
        Ok(handle)
    }

    /// Finds a run by full id or unique prefix (`field` names the parameter in errors).
    pub fn resolve(&self, field: &str, given: &str) -> Result<Arc<RunHandle>, AppError> {
        let r = ids::parse_run_ref(field, given)?;
        let runs = self.runs.read().expect("runs lock");
        match &r {
            RunRef::Full(id) => runs.get(id).cloned().ok_or_else(|| not_found(given)),
            RunRef::Prefix(p) => {
                let matches: Vec<&Arc<RunHandle>> = runs
                    .range(p.clone()..)
                    .take_while(|(k, _)| k.starts_with(p.as_str()))
                    .map(|(_, v)| v)
                    .take(6)
                    .collect();
                match matches.as_slice() {
                    [] => Err(not_found(given)),
                    [one] => Ok((*one).clone()),
                    many => Err(AppError::new(
                        ErrorKind::AmbiguousId,
                        format!(
                            "{field} {given:?} matches more than one run: {}{}",
                            many.iter()
                                .take(5)
                                .map(|h| h.id.as_str())
                                .collect::<Vec<_>>()
                                .join(", "),
                            if many.len() > 5 { ", …" } else { "" }
                        ),
                    )
                    .with_hint("give more characters of the run id")),
                }
            }
        }
    }

    /// The summaries of the runs that pass `filter` as one JSON array, oldest first (ULIDs
    /// sort by creation time).
    pub fn list_json(&self, filter: &ListFilter) -> Box<RawValue> {
        let mut listings: Vec<Arc<Listing>> = self
            .runs
            .read()
            .expect("runs lock")
            .values()
            .map(|h| h.listing.read().expect("listing lock").clone())
            .filter(|l| filter.passes(l))
            .collect();
        if let Some(limit) = filter.limit {
            let keep = usize::try_from(limit).unwrap_or(usize::MAX);
            listings.drain(..listings.len().saturating_sub(keep));
        }
        let mut out =
            String::with_capacity(2 + listings.iter().map(|l| l.json.len() + 1).sum::<usize>());
        out.push('[');
        for l in &listings {
            if out.len() > 1 {
                out.push(',');
            }
            out.push_str(&l.json);
        }
        out.push(']');
        RawValue::from_string(out).expect("summaries serialize to JSON")
    }

    pub fn len(&self) -> usize {
        self.runs.read().expect("runs lock").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn handles(&self) -> Vec<Arc<RunHandle>> {
        self.runs
            .read()
            .expect("runs lock")
            .values()
            .cloned()
            .collect()
    }

    /// Appends one event and returns once it is on disk.
    pub async fn append(
        &self,
        run: &RunHandle,
        draft: Draft,
        client: bool,
    ) -> Result<AppendResult, AppError> {
        let tx = run.sender()?;
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
        let tx = run.sender()?;
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
        let tx = run.sender()?;
        let (reply, rx) = oneshot::channel();
        tx.send(Command::Rebuild { reply })
            .await
            .map_err(|_| AppError::new(ErrorKind::ShuttingDown, "the daemon is shutting down"))?;
        rx.await
            .map_err(|_| AppError::internal("the run's writer stopped"))?
    }

    /// Stops taking appends, lets every writer finish what is queued, and waits for them.
    pub async fn shutdown(&self) {
        self.closing.store(true, Ordering::Release);
        for h in self.handles() {
            h.tx.lock().expect("tx lock").take();
        }
        let tasks: Vec<JoinHandle<()>> =
            std::mem::take(&mut *self.writers.lock().expect("writers lock"));
        for t in tasks {
            let _ = t.await;
        }
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
