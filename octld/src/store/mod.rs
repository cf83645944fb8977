//! The event store: every run's log, its writer, its published state and its event stream.
//!
//! - [`log`]: reading, repairing and appending `events.jsonl`.
//! - [`writer`]: the per-run group-commit writer.
//! - [`projections`]: atomic writes of the derived files.
//! - [`corrupt`]: what a corrupt run's log still says, and setting such a run aside.
//! - [`fault`]: the errors of a full or failing disk (`storage_full`, `io_error`).
//! - [`feed`]: every run's committed events in one durable order, for the change feed.

pub mod corrupt;
pub mod fault;
pub mod feed;
pub mod log;
pub mod projections;
pub mod writer;

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use octl_proto::notice::Notice;
use serde_json::value::RawValue;
use tokio::sync::{broadcast, mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use octl_proto::event::RunCreated;
use octl_proto::ids::{self, RunRef};
use octl_proto::projection::{self, ListedStatus, RunDetail, RunSummary};
use octl_proto::rpc::{AppendResult, RebuildResult};
use octl_proto::{AppError, ErrorKind, Event, RunState};

use crate::home::Home;
use feed::{Committed, Feed};
use log::{LogWriter, CORRUPT_FILE, LOG_FILE};
pub use writer::Draft;
use writer::{Command, Writer};

/// What a new run starts with; see [`Store::create_run`].
pub struct NewRun {
    /// From [`ids::new_ulid`]; known before creation so that settings and first events can
    /// name things after it (branches, worktrees).
    pub id: String,
    /// Its first event: kind, title, repository, base and settings.
    pub created: RunCreated,
    pub initial: Vec<Draft>,
    /// Input files kept in the run directory, by name.
    pub files: Vec<(String, Vec<u8>)>,
}

/// A run's summary as `run.list` sends it: serialized once per change, so a listing copies
/// bytes instead of building and serializing every run's values on each call.
struct Listing {
    status: ListedStatus,
    repo: Option<PathBuf>,
    json: String,
}

impl Listing {
    fn of(summary: &RunSummary) -> Listing {
        // Through a `Value`, whose maps are sorted: the same bytes as any other answer.
        let json = serde_json::to_value(summary)
            .map(|v| v.to_string())
            .unwrap_or_else(|_| "null".to_string());
        Listing {
            status: summary.status,
            repo: summary.repo.as_deref().map(PathBuf::from),
            json,
        }
    }
}

/// How a new run's first write ended: `Ok(projected)` once the log and directories are
/// synced (`projected`: its projections were written too; if not, the writer heals them),
/// the sync's error otherwise; `None` while it is under way.
pub type FirstWrite = watch::Receiver<Option<Result<bool, String>>>;

/// A new run's first write on its way to disk (see [`Store::begin_run`]).
pub struct Syncing {
    handle: Arc<RunHandle>,
    /// The last seq of the first write.
    seq: u64,
    first: FirstWrite,
    /// The events of the first write, for the feed.
    events: Arc<Vec<Event>>,
}

impl Syncing {
    /// Returns once the run's directory and first events are on disk.
    pub async fn wait(mut self) -> Result<(), AppError> {
        let run = self.handle.id.clone();
        let ended = self
            .first
            .wait_for(Option::is_some)
            .await
            .map(|v| v.clone())
            .map_err(|_| AppError::internal(format!("the first write of run {run} was lost")))?;
        match ended {
            Some(Err(e)) => {
                self.handle
                    .set_untrusted(format!("its first write failed to sync: {e}"));
                Err(AppError::new(
                    ErrorKind::IoError,
                    format!("cannot sync new run {run}: {e}"),
                )
                .with_hint(untrusted_hint()))
            }
            _ => {
                // Readers of committed events (streams, `event.list`) see them from now on.
                self.handle.committed.fetch_max(self.seq, Ordering::AcqRel);
                self.handle.feed(&self.events);
                Ok(())
            }
        }
    }
}

/// Queue depth of one run's writer.
const QUEUE: usize = 8192;

/// Committed groups a run keeps for its streams' subscribers that have not read them yet.
/// A tokio broadcast channel allocates every slot up front, for the run's lifetime: at 1,024
/// slots that was 33 KiB per run, most of an idle daemon's memory per run (3.2 of the 5.4 MiB
/// live after 100 runs). A stream that falls further behind reads what it missed from the log
/// (`server::stream`), so a short buffer loses nothing.
pub(crate) const STREAM_BUFFER: usize = 16;

/// One run as the rest of the daemon sees it.
pub struct RunHandle {
    pub id: String,
    pub dir: PathBuf,
    tx: Mutex<Option<mpsc::Sender<Command>>>,
    view: RwLock<Arc<RunDetail>>,
    /// The run's line of `run.list`, serialized whenever the view changes.
    listing: RwLock<Arc<Listing>>,
    /// Highest seq known to be on disk.
    committed: AtomicU64,
    /// Each committed group, in order.
    events: broadcast::Sender<Arc<Vec<Event>>>,
    /// Set when the log could not be replayed: the run is read-only.
    corrupt: Option<String>,
    /// Set when a sync of the log failed: the run refuses appends until a daemon start
    /// replays its log (see [`log::AppendFault::Untrusted`]).
    untrusted: OnceLock<String>,
    /// Where to say that this run changed.
    changes: Mutex<Option<mpsc::UnboundedSender<String>>>,
    /// Where the notices its committed events call for go (the notifier's queue).
    notices: Mutex<Option<mpsc::Sender<Notice>>>,
    /// Where to say what this run committed, for the change feed.
    tap: Mutex<Tap>,
}

/// A run's link to the feed's indexer.
struct Tap {
    tx: Option<mpsc::UnboundedSender<Committed>>,
    /// The last seq told to the feed.
    fed: u64,
}

impl RunHandle {
    fn new(id: String, dir: PathBuf, view: RunDetail, corrupt: Option<String>) -> RunHandle {
        let view_seq = view.manifest.last_seq;
        RunHandle {
            id,
            dir,
            tx: Mutex::new(None),
            committed: AtomicU64::new(view.manifest.last_seq),
            listing: RwLock::new(Arc::new(Listing::of(&view.manifest))),
            view: RwLock::new(Arc::new(view)),
            events: broadcast::channel(STREAM_BUFFER).0,
            corrupt,
            untrusted: OnceLock::new(),
            changes: Mutex::new(None),
            notices: Mutex::new(None),
            tap: Mutex::new(Tap {
                tx: None,
                fed: view_seq,
            }),
        }
    }

    /// Tells the feed that `events` (a committed group) are durable in the log. Events
    /// already told are left out (a new run's first write is reported by two paths); the
    /// lock keeps the run's groups in commit order on the way to the indexer.
    pub(crate) fn feed(&self, events: &Arc<Vec<Event>>) {
        let mut tap = self.tap.lock().expect("tap lock");
        let Some(last) = events.last().map(|e| e.seq) else {
            return;
        };
        if last <= tap.fed {
            return;
        }
        if let Some(tx) = &tap.tx {
            let fed = tap.fed;
            let new = if events.first().is_some_and(|e| e.seq > fed) {
                events.clone()
            } else {
                Arc::new(events.iter().filter(|e| e.seq > fed).cloned().collect())
            };
            let _ = tx.send(Committed {
                run: self.id.clone(),
                events: new,
            });
        }
        tap.fed = last;
    }

    /// The state as of the last committed group.
    pub fn view(&self) -> Arc<RunDetail> {
        self.view.read().expect("view lock").clone()
    }

    pub fn summary(&self) -> RunSummary {
        self.view().manifest.clone()
    }

    pub fn committed(&self) -> u64 {
        self.committed.load(Ordering::Acquire)
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Vec<Event>>> {
        self.events.subscribe()
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.join(LOG_FILE)
    }

    pub fn corrupt(&self) -> Option<&str> {
        self.corrupt.as_deref()
    }

    /// Why the run refuses appends until the daemon restarts (a failed sync), if it does.
    pub fn untrusted(&self) -> Option<&str> {
        self.untrusted.get().map(String::as_str)
    }

    /// Makes the run refuse appends until the daemon restarts and replays its log.
    fn set_untrusted(&self, reason: String) {
        if self.untrusted.set(reason.clone()).is_ok() {
            tracing::error!(run = %self.id, reason = %reason, "the run's log cannot be trusted: it refuses appends until the daemon restarts");
        }
    }

    /// The refusal of an append to an untrusted run.
    fn untrusted_error(&self) -> Option<AppError> {
        self.untrusted().map(|reason| {
            AppError::new(
                ErrorKind::IoError,
                format!("run {} refuses appends: {reason}", self.id),
            )
            .with_hint(untrusted_hint())
        })
    }

    /// `run_corrupt` for a run whose log was set aside: for commands that would act on it.
    pub fn ensure_writable(&self) -> Result<(), AppError> {
        match &self.corrupt {
            Some(reason) => Err(corrupt_error(&self.id, reason)),
            None => Ok(()),
        }
    }

    fn publish(&self, state: &RunState) {
        let view = projection::detail(state);
        *self.listing.write().expect("listing lock") = Arc::new(Listing::of(&view.manifest));
        *self.view.write().expect("view lock") = Arc::new(view);
        self.changed();
    }

    /// Hands committed events' notices to the notifier without waiting: a full queue drops
    /// them (logged), so a stuck notifier never holds up the log.
    fn tell(&self, notices: Vec<Notice>) {
        let Some(tx) = self.notices.lock().expect("notices lock").clone() else {
            return;
        };
        for n in notices {
            if let Err(e) = tx.try_send(n) {
                let n = match &e {
                    mpsc::error::TrySendError::Full(n) | mpsc::error::TrySendError::Closed(n) => n,
                };
                tracing::warn!(run = %self.id, seq = n.event.seq, kind = n.kind.as_str(), "notification dropped: the notifier's queue is full");
            }
        }
    }

    /// Tells the engine to look at this run again.
    fn changed(&self) {
        if let Some(tx) = self.changes.lock().expect("changes lock").as_ref() {
            let _ = tx.send(self.id.clone());
        }
    }

    fn sender(&self) -> Result<mpsc::Sender<Command>, AppError> {
        if let Some(reason) = &self.corrupt {
            return Err(corrupt_error(&self.id, reason));
        }
        self.tx
            .lock()
            .expect("tx lock")
            .clone()
            .ok_or_else(|| AppError::new(ErrorKind::ShuttingDown, "the daemon is shutting down"))
    }
}

pub(crate) fn untrusted_hint() -> String {
    "nothing of it was recorded; once the log's sync has failed, what the kernel dropped cannot be known, so the run takes no appends until the daemon restarts and replays its log (`orchestratectl daemon stop`, then `orchestratectl daemon start`; check the disk first: dmesg); every other run keeps working".to_string()
}

fn corrupt_error(id: &str, reason: &str) -> AppError {
    AppError::new(ErrorKind::RunCorrupt, format!("run {id} is corrupt: {reason}"))
        .with_hint(format!(
            "its log was set aside as runs/{id}/{CORRUPT_FILE} and is never written again; every other run keeps working; `orchestratectl run show {id}` shows what it still says, `orchestratectl run quarantine {id}` sets it aside"
        ))
}

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

    /// Creates a run: its directory, any input files it keeps (a manifest, a plan), and its
    /// log holding `run.created` and the `initial` events, synced with the directory entry
    /// before this returns. One sync for all of it. If that sync fails, the run is taken
    /// away again: nothing was announced from it, so a refused creation leaves nothing.
    pub async fn create_run(&self, new: NewRun) -> Result<Arc<RunHandle>, AppError> {
        let (handle, syncing) = self.begin_run(new).await?;
        if let Err(e) = syncing.wait().await {
            self.runs.write().expect("runs lock").remove(&handle.id);
            handle.tx.lock().expect("tx lock").take();
            let dir = handle.dir.clone();
            let _ = tokio::task::spawn_blocking(move || fs::remove_dir_all(dir)).await;
            return Err(e.with_hint(
                "nothing was recorded: the run was not created; check the disk (dmesg) and retry",
            ));
        }
        Ok(handle)
    }

    /// [`Store::create_run`], returning as soon as the run's first events are written (in
    /// the page cache, so a daemon crash keeps them) while its projections are written and
    /// everything is synced in the background. A caller can overlap side effects the events
    /// announce with that, and must [`Syncing::wait`] before acknowledging anything; the
    /// run's writer commits nothing before it is done either.
    pub async fn begin_run(&self, new: NewRun) -> Result<(Arc<RunHandle>, Syncing), AppError> {
        let NewRun {
            id,
            created,
            initial,
            files,
        } = new;
        let kind = created.kind;
        if self.closing.load(Ordering::Acquire) {
            return Err(AppError::new(
                ErrorKind::ShuttingDown,
                "the daemon is shutting down",
            ));
        }
        let dir = self.home.run_dir(&id);
        let draft = Draft::daemon(None, created);
        let seed = RunState {
            id: id.clone(),
            kind,
            title: None,
            repo: None,
            base: None,
            settings: Default::default(),
            created_at: String::new(),
            updated_at: String::new(),
            last_seq: 0,
            ended: None,
            merge: None,
            merge_commit: None,
            nodes: Default::default(),
            node_order: Vec::new(),
            discussions: Default::default(),
            spinoffs: Default::default(),
            idempotency: Default::default(),
            budget_spent: false,
        };
        let ev = writer::new_event(&seed, draft);
        let mut state = RunState::from_created(&ev)?;
        let mut line = format!("{}\n", ev.to_line());
        let mut events = vec![ev];
        for draft in initial {
            let ev = writer::new_event(&state, draft);
            state.apply(&ev)?;
            line.push_str(&ev.to_line());
            line.push('\n');
            events.push(ev);
        }
        let events = Arc::new(events);
        let runs_dir = self.home.runs();
        let created = state.clone();
        let dir2 = dir.clone();
        let log = tokio::task::spawn_blocking(move || -> io::Result<LogWriter> {
            // Subdirectories (`nodes/`, `logs/`, …) appear with their first file: a directory
            // costs as much as a synced write on some disks, and most runs never need some.
            match fs::create_dir(&dir2) {
                // A directory without a log is a creation a crash cut short (the store ignores
                // it): the run whose id was recorded before it existed is made in it now.
                Err(e)
                    if e.kind() == io::ErrorKind::AlreadyExists
                        && !dir2.join(LOG_FILE).exists() => {}
                other => other?,
            }
            let written = (|| {
                for (name, bytes) in &files {
                    fs::write(dir2.join(name), bytes)?;
                }
                let mut log = LogWriter::open(&dir2.join(LOG_FILE))?;
                log.append(line.as_bytes())?;
                Ok(log)
            })();
            if written.is_err() {
                // A full disk: the run was never created, so nothing half-made stays.
                let _ = fs::remove_dir_all(&dir2);
            }
            written
        })
        .await
        .map_err(|e| AppError::internal(e.to_string()))?
        .map_err(|e| {
            let err = fault::storage_error(&format!("cannot create run {id}"), &dir, &e);
            let hint = err.hint.clone().unwrap_or_default();
            err.with_hint(format!("nothing was created; {hint}"))
        })?;
        let (done, first) = watch::channel(None);
        let dir2 = dir.clone();
        tokio::task::spawn_blocking(move || {
            // Projections that cannot be written now are healed by the writer: they are
            // derived, and the run exists once its log is synced.
            let projected = match projections::write_all(&dir2, &created) {
                Ok(_) => true,
                Err(e) => {
                    tracing::warn!(dir = %dir2.display(), error = %e, "cannot write a new run's projections; they are written again later");
                    false
                }
            };
            let result = log
                .sync()
                .and_then(|_| log::sync_dir(&dir2))
                .and_then(|_| log::sync_dir(&runs_dir));
            let _ = done.send(Some(result.map(|_| projected).map_err(|e| e.to_string())));
        });
        let handle = self
            .start(
                id.clone(),
                dir,
                state,
                Some((first.clone(), events.clone())),
                false,
            )
            .map_err(|e| AppError::internal(format!("cannot open the new run's log: {e}")))?;
        let seq = handle.view().manifest.last_seq;
        Ok((
            handle.clone(),
            Syncing {
                handle,
                seq,
                first,
                events,
            },
        ))
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
