//! [`RunHandle`]: one run as the rest of the daemon sees it — its published view and its
//! `run.list` line, what it has committed, the channel to its writer (an active run's), and
//! where its changes, notices and committed events go. Apart from [`super::Store`], which
//! holds the active runs' handles, folds finished ones on demand, and creates and finds them.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use octl_proto::notice::Notice;
use octl_proto::projection::{self, ListedStatus, RunDetail, RunSummary};
use octl_proto::{AppError, ErrorKind, Event, RunState};
use tokio::sync::{broadcast, mpsc};

use super::feed::{Committed, Told};
use super::log::{CORRUPT_FILE, LOG_FILE};
use super::writer::Command;

/// A run's summary as `run.list` sends it: serialized once per change, so a listing copies
/// bytes instead of building and serializing every run's values on each call.
pub(super) struct Listing {
    pub(super) status: ListedStatus,
    pub(super) repo: Option<PathBuf>,
    pub(super) json: String,
}

impl Listing {
    pub(super) fn of(summary: &RunSummary) -> Listing {
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
    pub(super) tx: Mutex<Option<mpsc::Sender<Command>>>,
    view: RwLock<Arc<RunDetail>>,
    /// The run's line of `run.list`, serialized whenever the view changes.
    pub(super) listing: RwLock<Arc<Listing>>,
    /// Highest seq known to be on disk.
    pub(super) committed: AtomicU64,
    /// Each committed group, in order.
    pub(super) events: broadcast::Sender<Arc<Vec<Event>>>,
    /// Set when the log could not be replayed: the run is read-only.
    pub(super) corrupt: Option<String>,
    /// Set when a sync of the log failed: the run refuses appends until a daemon start
    /// replays its log (see [`log::AppendFault::Untrusted`]).
    untrusted: OnceLock<String>,
    /// Where to say that this run changed.
    pub(super) changes: Mutex<Option<mpsc::UnboundedSender<String>>>,
    /// Where the notices its committed events call for go (the notifier's queue).
    pub(super) notices: Mutex<Option<mpsc::Sender<Notice>>>,
    /// Where to say what this run committed, for the change feed.
    pub(super) tap: Mutex<Tap>,
}

/// A run's link to the feed's indexer.
pub(super) struct Tap {
    pub(super) tx: Option<mpsc::UnboundedSender<Told>>,
    /// The last seq told to the feed.
    pub(super) fed: u64,
}

impl RunHandle {
    pub(super) fn new(
        id: String,
        dir: PathBuf,
        view: RunDetail,
        corrupt: Option<String>,
    ) -> RunHandle {
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
            let _ = tx.send(Told::Committed(Committed {
                run: self.id.clone(),
                events: new,
            }));
        }
        tap.fed = last;
    }

    /// Returns once every event this run told the change feed is durable in its index.
    pub(super) async fn flush_feed(&self) {
        let tx = self.tap.lock().expect("tap lock").tx.clone();
        if let Some(tx) = tx {
            super::feed::flush(&tx).await;
        }
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
    pub(super) fn set_untrusted(&self, reason: String) {
        if self.untrusted.set(reason.clone()).is_ok() {
            tracing::error!(run = %self.id, reason = %reason, "the run's log cannot be trusted: it refuses appends until the daemon restarts");
        }
    }

    /// The refusal of an append to an untrusted run.
    pub(super) fn untrusted_error(&self) -> Option<AppError> {
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

    pub(super) fn publish(&self, state: &RunState) {
        let view = projection::detail(state);
        *self.listing.write().expect("listing lock") = Arc::new(Listing::of(&view.manifest));
        *self.view.write().expect("view lock") = Arc::new(view);
        self.changed();
    }

    /// Hands committed events' notices to the notifier without waiting: a full queue drops
    /// them (logged), so a stuck notifier never holds up the log.
    pub(super) fn tell(&self, notices: Vec<Notice>) {
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
    pub(super) fn changed(&self) {
        if let Some(tx) = self.changes.lock().expect("changes lock").as_ref() {
            let _ = tx.send(self.id.clone());
        }
    }

    /// Its writer's queue; `None` when it has none (a finished run, or a daemon that is
    /// shutting down).
    pub(super) fn sender(&self) -> Result<Option<mpsc::Sender<Command>>, AppError> {
        if let Some(reason) = &self.corrupt {
            return Err(corrupt_error(&self.id, reason));
        }
        Ok(self.tx.lock().expect("tx lock").clone())
    }

    /// Whether it has a writer (an active run).
    pub fn is_active(&self) -> bool {
        self.tx.lock().expect("tx lock").is_some()
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
