//! The writer of one active run: a task that owns the run's state and log, takes append
//! requests from a queue, and commits them in groups. Everything queued while the previous
//! group was syncing goes into the next one, so many clients share one `fdatasync`.
//!
//! Once the run has finished (`super::finished`) and nothing came for [`rest_after`], the
//! writer lets go of it: the change feed's index gets its last records, the run index its
//! summary, and — unless someone holds the run meanwhile — the store forgets its handle and
//! the task ends. A later append makes it active again (`Store::activate`).

use octl_proto::notice::Notice;
use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};
use tokio::sync::{mpsc, oneshot};

use octl_proto::event::Payload;
use octl_proto::projection::{self, ProjectionFile};
use octl_proto::reducer::{client_may_append, client_types};
use octl_proto::rpc::{AppendResult, RebuildResult};
use octl_proto::{ids, time, Actor, AppError, ErrorKind, Event, RunState, EVENT_VERSION};

use super::index::Open;
use super::log::{self, AppendFault, LogWriter, LOG_FILE};
use super::{fault, projections, untrusted_hint, RunHandle, Shared};

/// Largest group committed at once.
const MAX_BATCH: usize = 4096;
/// How long projections that a full disk kept from being written wait for the next try
/// when no append comes (an append tries at once).
const HEAL_EVERY: Duration = Duration::from_secs(1);

/// How long a finished run that was found held waits before it is looked at again.
const HELD_AGAIN: Duration = Duration::from_millis(250);

/// How long a finished run stays active after its last append, for what usually follows an
/// end (`run wait` returning, `run show`, the TUI folding it): 5 s, or
/// `OCTL_REST_AFTER_MS` (the tests set it low, so that they go through finished runs too).
pub fn rest_after() -> Duration {
    static AFTER: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
    *AFTER.get_or_init(|| {
        std::env::var("OCTL_REST_AFTER_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .map(Duration::from_millis)
            .unwrap_or(Duration::from_secs(5))
    })
}

/// An event to append, before the writer gives it its seq, id and time.
#[derive(Debug, Clone)]
pub struct Draft {
    pub node: Option<String>,
    pub kind: String,
    pub actor: Actor,
    pub data: Map<String, Value>,
    pub idempotency_key: Option<String>,
}

impl Draft {
    /// A daemon event: its typed payload, written as its type's data.
    pub fn daemon<P: Payload>(node: Option<&str>, payload: P) -> Draft {
        Draft::said(node.map(str::to_string), Actor::Daemon, payload)
    }

    /// An event said by `actor` (a client's report, built by the daemon from its request).
    pub fn said<P: Payload>(node: Option<String>, actor: Actor, payload: P) -> Draft {
        Draft {
            node,
            kind: P::TYPE.to_string(),
            actor,
            data: payload.to_data(),
            idempotency_key: None,
        }
    }
}

pub enum Command {
    Append {
        /// Boxed so the queue's slots stay small: tokio's channel allocates them 32 at a time
        /// and keeps a few spare blocks per run after a burst.
        draft: Box<Draft>,
        /// Appended on behalf of a client: the client-type rules apply.
        client: bool,
        reply: oneshot::Sender<Result<AppendResult, AppError>>,
    },
    /// Several daemon events that are written together or not at all.
    AppendAll {
        drafts: Vec<Draft>,
        reply: oneshot::Sender<Result<Vec<AppendResult>, AppError>>,
    },
    Rebuild {
        reply: oneshot::Sender<Result<RebuildResult, AppError>>,
    },
}

/// One queued append request within a group commit.
enum Item {
    One(Draft, bool, Reply),
    All(
        Vec<Draft>,
        oneshot::Sender<Result<Vec<AppendResult>, AppError>>,
    ),
}

/// An answer to send once the group is on disk.
enum Ack {
    One(Reply, Result<AppendResult, AppError>),
    All(
        oneshot::Sender<Result<Vec<AppendResult>, AppError>>,
        Result<Vec<AppendResult>, AppError>,
    ),
}

impl Item {
    fn refuse(self, err: &AppError) {
        match self {
            Item::One(_, _, reply) => {
                let _ = reply.send(Err(err.clone()));
            }
            Item::All(_, reply) => {
                let _ = reply.send(Err(err.clone()));
            }
        }
    }
}

impl Ack {
    fn send(self, failure: Option<&AppError>) {
        match self {
            Ack::One(reply, res) => {
                let _ = reply.send(match failure {
                    Some(e) => res.and(Err(e.clone())),
                    None => res,
                });
            }
            Ack::All(reply, res) => {
                let _ = reply.send(match failure {
                    Some(e) => res.and(Err(e.clone())),
                    None => res,
                });
            }
        }
    }
}

pub struct Writer {
    pub handle: Arc<RunHandle>,
    pub(super) shared: Arc<Shared>,
    pub state: RunState,
    pub log: Option<LogWriter>,
    /// A new run's first write, still being synced: waited for before the first commit, so
    /// its projections can never land over a later group's.
    pub first: Option<(super::FirstWrite, Arc<Vec<Event>>)>,
    /// The projections on disk are behind the state (their write failed, e.g. on a full
    /// disk): every one is written again with the next group, or after [`HEAL_EVERY`].
    pub stale: bool,
    /// The last group failed to be written (e.g. a full disk): the engine is told to look at
    /// the run again every [`HEAL_EVERY`], so a step whose event was refused is tried again
    /// by itself once there is room, as after a crash.
    pub faulted: bool,
    /// The run index lists this run as finished (it was let go of, but someone held it
    /// meanwhile): it must say `open` again before the next append.
    pub listed_done: bool,
}

type Reply = oneshot::Sender<Result<AppendResult, AppError>>;

enum Outcome {
    Write(Event),
    Repeat(AppendResult),
}

impl Writer {
    pub async fn run(mut self, mut rx: mpsc::Receiver<Command>) {
        if let Some((mut first, events)) = self.first.take() {
            let ended = first
                .wait_for(Option::is_some)
                .await
                .map(|v| v.clone())
                .ok()
                .flatten();
            match ended {
                Some(Ok(projected)) => {
                    self.handle
                        .committed
                        .fetch_max(self.state.last_seq, Ordering::AcqRel);
                    self.handle.feed(&events);
                    self.stale = !projected;
                }
                Some(Err(e)) => self
                    .handle
                    .set_untrusted(format!("its first write failed to sync: {e}")),
                None => self
                    .handle
                    .set_untrusted("its first write was lost".to_string()),
            }
        }
        let mut last = Instant::now();
        // How long a finished run waits before it is let go of: `rest_after`, and after an
        // attempt found it held, at least HELD_AGAIN (so a held run never spins).
        let mut after = rest_after();
        loop {
            let resting = self.resting();
            let wait = if self.stale || self.faulted {
                Some(HEAL_EVERY)
            } else if resting {
                Some(after.saturating_sub(last.elapsed()))
            } else {
                None
            };
            let next = match wait {
                Some(wait) => match tokio::time::timeout(wait, rx.recv()).await {
                    Ok(next) => next,
                    Err(_) => {
                        if self.stale {
                            self.heal().await;
                        }
                        if self.faulted && self.handle.untrusted().is_none() {
                            self.handle.changed();
                        }
                        if resting && last.elapsed() >= after {
                            if self.rest(&rx).await {
                                break;
                            }
                            // Held by someone (a stream, a step): looked at again later.
                            last = Instant::now();
                            after = rest_after().max(HELD_AGAIN);
                        }
                        continue;
                    }
                },
                None => rx.recv().await,
            };
            let Some(first) = next else { break };
            last = Instant::now();
            after = rest_after();
            let mut batch = vec![first];
            while batch.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(cmd) => batch.push(cmd),
                    Err(_) => break,
                }
            }
            let mut rebuilds = Vec::new();
            let mut appends = Vec::new();
            for cmd in batch {
                match cmd {
                    Command::Append {
                        draft,
                        client,
                        reply,
                    } => appends.push(Item::One(*draft, client, reply)),
                    Command::AppendAll { drafts, reply } => appends.push(Item::All(drafts, reply)),
                    Command::Rebuild { reply } => rebuilds.push(reply),
                }
            }
            if !appends.is_empty() {
                self.commit(appends).await;
            }
            for reply in rebuilds {
                let _ = reply.send(self.rebuild().await);
            }
        }
    }

    /// Whether the run may be let go of: finished, with nothing left to heal.
    fn resting(&self) -> bool {
        !self.stale
            && !self.faulted
            && self.handle.untrusted().is_none()
            && super::finished(&self.handle.view(), &|c| self.shared.exists(c))
    }

    /// Lets go of the finished run: its last events into the feed's index, its summary into
    /// the run index, then out of the store — unless someone holds it or has queued
    /// something, which keeps it active. True when the task should end.
    async fn rest(&mut self, rx: &mpsc::Receiver<Command>) -> bool {
        // Held by someone (a step still acting on it, say a cancel closing its windows): it
        // stays active, and the index does not call it finished meanwhile.
        let held = || Arc::strong_count(&self.handle) > 2 || !rx.is_empty();
        if held() {
            return false;
        }
        self.handle.flush_feed().await;
        // A crash here: the run has finished, the index does not say so yet.
        crate::failpoint::crash("index:before-done");
        if !self.listed_done {
            let entry = super::entry_of(&self.handle.id, &self.handle.view());
            let shared = self.shared.clone();
            match tokio::task::spawn_blocking(move || shared.index.finish(entry)).await {
                Ok(Ok(())) => self.listed_done = true,
                Ok(Err(e)) => {
                    tracing::warn!(run = %self.handle.id, error = %e, "cannot list a finished run in the run index; it stays active");
                    return false;
                }
                Err(e) => {
                    tracing::error!(run = %self.handle.id, error = %e, "run index task failed");
                    return false;
                }
            }
        }
        let mut maps = self.shared.maps_mut();
        // The store's handle and this task's: nobody else can be about to append.
        if held() {
            return false;
        }
        maps.active.remove(&self.handle.id);
        self.handle.tx.lock().expect("tx lock").take();
        tracing::debug!(run = %self.handle.id, "finished run let go of");
        true
    }

    /// Checks, writes, syncs, projects, publishes, then acknowledges one group.
    async fn commit(&mut self, appends: Vec<Item>) {
        if let Some(err) = self.handle.untrusted_error() {
            for item in appends {
                item.refuse(&err);
            }
            return;
        }
        if self.listed_done {
            // The run index lists it as finished: it says `open` again before the log moves.
            let open = Open {
                fed: self.handle.committed(),
                at: self.shared.feed_head(),
            };
            let shared = self.shared.clone();
            let id = self.handle.id.clone();
            let said = tokio::task::spawn_blocking(move || shared.index.open_run(&id, open))
                .await
                .unwrap_or_else(|e| Err(std::io::Error::other(e.to_string())));
            match said {
                Ok(()) => self.listed_done = false,
                Err(e) => {
                    let root = self.shared.home.root().join(super::index::JOURNAL_FILE);
                    let err = fault::storage_error(
                        &format!("cannot append to run {}", self.handle.id),
                        &root,
                        &e,
                    );
                    for item in appends {
                        item.refuse(&err);
                    }
                    return;
                }
            }
        }
        let mut lines = String::new();
        let mut events: Vec<Event> = Vec::new();
        let mut acks: Vec<Ack> = Vec::new();
        let mut touched = Touched::default();
        // Decided as each event is checked, told only once the group is durable.
        let mut notices: Vec<Notice> = Vec::new();
        let write = |ev: Event, lines: &mut String, events: &mut Vec<Event>| {
            lines.push_str(&ev.to_line());
            lines.push('\n');
            let ack = AppendResult {
                seq: ev.seq,
                id: ev.id.clone(),
            };
            events.push(ev);
            ack
        };
        for item in appends {
            match item {
                Item::One(draft, client, reply) => {
                    let ack = self
                        .check_and_apply(draft, client, &mut touched, &mut notices)
                        .map(|outcome| match outcome {
                            Outcome::Write(ev) => write(ev, &mut lines, &mut events),
                            Outcome::Repeat(ack) => ack,
                        });
                    acks.push(Ack::One(reply, ack));
                }
                Item::All(drafts, reply) => {
                    // All or nothing: on a refusal, the state and the group go back to how
                    // they were before this request.
                    let (before, n_lines, n_events, n_notices) =
                        (self.state.clone(), lines.len(), events.len(), notices.len());
                    let mut out = Vec::new();
                    let mut failed = None;
                    for draft in drafts {
                        match self.check_and_apply(draft, false, &mut touched, &mut notices) {
                            Ok(Outcome::Write(ev)) => out.push(write(ev, &mut lines, &mut events)),
                            Ok(Outcome::Repeat(ack)) => out.push(ack),
                            Err(e) => {
                                failed = Some(e);
                                break;
                            }
                        }
                    }
                    let res = match failed {
                        Some(e) => {
                            self.state = before;
                            lines.truncate(n_lines);
                            events.truncate(n_events);
                            notices.truncate(n_notices);
                            Err(e)
                        }
                        None => Ok(out),
                    };
                    acks.push(Ack::All(reply, res));
                }
            }
        }
        if !events.is_empty() {
            let all = self.stale;
            let files = if all {
                projection::all_files(&self.state)
            } else {
                touched.render(&self.state)
            };
            let dir = self.handle.dir.clone();
            let mut log = self.log.take();
            let bytes = lines.into_bytes();
            // The log's sync and the projections' renames each cost about as much as the
            // other on an ext4 disk, so they run side by side; the group is acknowledged once
            // both are done. A projection ahead of an unsynced log is harmless: projections
            // are derived again from the log after a failure and at every start.
            let logged = tokio::task::spawn_blocking(move || {
                let result = match log.as_mut() {
                    Some(w) => w.append_synced(&bytes),
                    None => Err(AppendFault::Write(std::io::Error::other(
                        "the run's log is not open",
                    ))),
                };
                (log, result)
            });
            let projected = tokio::task::spawn_blocking(move || projections::write(&dir, &files));
            let (logged, projected) = tokio::join!(logged, projected);
            let (log_back, logged) = logged.unwrap_or_else(|e| {
                (
                    None,
                    Err(AppendFault::Untrusted(std::io::Error::other(e.to_string()))),
                )
            });
            let projected = projected.unwrap_or_else(|e| Err(std::io::Error::other(e.to_string())));
            self.log = log_back;
            if let Err(fault) = logged {
                // Nothing of the group is in the log (it was cut back): every member is
                // refused, and the state is read back from the log as it was before.
                let e = fault.error();
                let path = self.handle.dir.join(LOG_FILE);
                let mut err = fault::append_error(&self.handle.id, &path, e);
                if let AppendFault::Untrusted(_) = &fault {
                    self.handle.set_untrusted(format!(
                        "its log failed to sync ({e}), so what is on disk cannot be trusted"
                    ));
                    err = err.with_hint(untrusted_hint());
                }
                tracing::error!(run = %self.handle.id, error = %e, kind = %err.kind, "append failed; nothing of the group was recorded");
                for ack in acks {
                    ack.send(Some(&err));
                }
                self.faulted = true;
                self.reload().await;
                return;
            }
            self.faulted = false;
            // The log is durable: the group is acknowledged whatever became of the
            // projections, which are derived and healed from the state.
            match projected {
                Ok(()) => self.stale &= !all,
                Err(e) => {
                    tracing::warn!(run = %self.handle.id, error = %e, "cannot write projections; the append is recorded and they are written again later");
                    self.stale = true;
                }
            }
            self.handle
                .committed
                .store(self.state.last_seq, Ordering::Release);
            self.handle.publish(&self.state);
            let events = Arc::new(events);
            self.handle.feed(&events);
            let _ = self.handle.events.send(events);
            self.handle.tell(notices);
        }
        for ack in acks {
            ack.send(None);
        }
    }

    fn check_and_apply(
        &mut self,
        draft: Draft,
        client: bool,
        touched: &mut Touched,
        notices: &mut Vec<Notice>,
    ) -> Result<Outcome, AppError> {
        let kind = self.state.kind;
        if client && !client_may_append(kind, &draft.kind) {
            return Err(AppError::new(
                ErrorKind::Forbidden,
                format!(
                    "type {:?} may not be appended by a client to a {} run; accepted: {}",
                    draft.kind,
                    kind.as_str(),
                    client_types(kind).join(", ")
                ),
            ));
        }
        if let Some(key) = &draft.idempotency_key {
            if let Some((seq, id)) = self.state.idempotency.get(key) {
                // A retry: answer with the first append, write nothing.
                return Ok(Outcome::Repeat(AppendResult {
                    seq: *seq,
                    id: id.clone(),
                }));
            }
        }
        let ev = new_event(&self.state, draft);
        let told = octl_proto::notice::notice(&self.state, &ev);
        self.state.apply(&ev)?;
        notices.extend(told);
        touched.note(&ev, &self.state);
        Ok(Outcome::Write(ev))
    }

    async fn rebuild(&mut self) -> Result<RebuildResult, AppError> {
        let (result, state) = rebuild_projections(&self.handle.id, &self.handle.dir).await?;
        self.stale = false;
        if state != self.state {
            tracing::error!(run = %self.handle.id, "the state replayed from the log differs from the daemon's; adopting the log's");
            self.state = state;
            self.handle.publish(&self.state);
        }
        Ok(result)
    }

    /// After a failed append: the state (seq, idempotency keys, nodes) read back from the
    /// log, which holds exactly the acknowledged events, and the projections rewritten from
    /// it (those written beside the failed append are ahead of it).
    async fn reload(&mut self) {
        let path = self.handle.dir.join(LOG_FILE);
        let dir = self.handle.dir.clone();
        let committed = self.handle.committed();
        let replayed = tokio::task::spawn_blocking(move || {
            let replayed = log::replay(&path, false);
            let projected = match &replayed {
                // Only from a log that holds exactly the acknowledged events.
                Ok(Ok(r)) if r.state.last_seq == committed && r.cut == 0 => {
                    projections::write_all(&dir, &r.state).map(|_| ())
                }
                _ => Ok(()),
            };
            (replayed, projected)
        });
        match replayed.await {
            Ok((Ok(Ok(r)), projected)) if r.state.last_seq == committed && r.cut == 0 => {
                self.state = r.state;
                if let Err(e) = projected {
                    tracing::warn!(run = %self.handle.id, error = %e, "cannot rewrite projections after a failed append; they are written again later");
                    self.stale = true;
                }
                self.handle.publish(&self.state);
            }
            Ok((Ok(Ok(r)), _)) => {
                // The log could not be cut back to the last acknowledged event: the run
                // takes nothing more, and the published view stays what was acknowledged.
                self.handle.set_untrusted(format!(
                    "its log holds {} events and {} bytes of a torn line, but only {committed} were acknowledged",
                    r.state.last_seq, r.cut
                ));
            }
            other => {
                let outcome = match other {
                    Ok((Ok(Ok(_)), _)) => unreachable!("matched above"),
                    Ok((Ok(Err(c)), _)) => format!("line {}: {}", c.line, c.reason),
                    Ok((Err(e), _)) => e.to_string(),
                    Err(e) => e.to_string(),
                };
                self.handle.set_untrusted(format!(
                    "its log cannot be read back after a failed append: {outcome}"
                ));
            }
        }
        if self.log.is_none() {
            self.log = LogWriter::open(&self.handle.dir.join(LOG_FILE)).ok();
        }
    }

    /// Writes every projection that differs from what the state derives.
    async fn heal(&mut self) {
        let dir = self.handle.dir.clone();
        let state = self.state.clone();
        match tokio::task::spawn_blocking(move || projections::write_all(&dir, &state)).await {
            Ok(Ok(_)) => {
                tracing::info!(run = %self.handle.id, "projections written again");
                self.stale = false;
            }
            Ok(Err(e)) => {
                tracing::debug!(run = %self.handle.id, error = %e, "projections still cannot be written")
            }
            Err(e) => tracing::error!(run = %self.handle.id, error = %e, "projection task failed"),
        }
    }
}

/// Re-derives every projection of the run in `dir` from its log alone; also returns the
/// state the log folds to.
pub(super) async fn rebuild_projections(
    id: &str,
    dir: &std::path::Path,
) -> Result<(RebuildResult, RunState), AppError> {
    let (dir, id) = (dir.to_path_buf(), id.to_string());
    tokio::task::spawn_blocking(move || {
        let state = match log::replay(&dir.join(LOG_FILE), false) {
            Ok(Ok(r)) => r.state,
            Ok(Err(c)) => {
                return Err(AppError::new(
                    ErrorKind::RunCorrupt,
                    format!("run {id}: line {} of its log: {}", c.line, c.reason),
                ))
            }
            Err(e) => {
                return Err(fault::storage_error(
                    &format!("cannot read run {id}"),
                    &dir.join(LOG_FILE),
                    &e,
                ))
            }
        };
        let files = projections::write_all(&dir, &state).map_err(|e| {
            fault::storage_error(&format!("cannot write projections of run {id}"), &dir, &e)
        })?;
        let result = RebuildResult {
            run: id,
            events: state.last_seq,
            files,
        };
        Ok((result, state))
    })
    .await
    .map_err(|e| AppError::internal(e.to_string()))?
}

/// Which projection files a group changed.
#[derive(Default)]
struct Touched {
    manifest: bool,
    nodes: BTreeSet<String>,
    discussions: BTreeSet<String>,
    spinoffs: BTreeSet<String>,
}

impl Touched {
    fn note(&mut self, ev: &Event, state: &RunState) {
        self.manifest = true;
        if let Some(n) = &ev.node {
            self.nodes.insert(n.clone());
        }
        if let Some(id) = ev.str_field("id") {
            if ev.kind.starts_with("discussion.") {
                self.discussions.insert(id.to_string());
                if let Some(n) = state.discussions.get(id).and_then(|d| d.node.clone()) {
                    self.nodes.insert(n);
                }
            } else if ev.kind.starts_with("spinoff.") {
                self.spinoffs.insert(id.to_string());
            }
        }
    }

    fn render(&self, state: &RunState) -> Vec<ProjectionFile> {
        let mut files = Vec::new();
        if self.manifest {
            files.push(projection::manifest_file(state));
        }
        files.extend(
            self.nodes
                .iter()
                .filter_map(|n| state.nodes.get(n))
                .map(projection::node_file),
        );
        files.extend(
            self.discussions
                .iter()
                .filter_map(|d| state.discussions.get(d))
                .map(projection::discussion_file),
        );
        files.extend(
            self.spinoffs
                .iter()
                .filter_map(|s| state.spinoffs.get(s))
                .map(projection::spinoff_file),
        );
        files
    }
}

pub(super) fn new_event(state: &RunState, draft: Draft) -> Event {
    Event {
        v: EVENT_VERSION,
        seq: state.last_seq + 1,
        id: ids::new_ulid(),
        ts: time::format_millis(now_ms()),
        run: state.id.clone(),
        node: draft.node,
        kind: draft.kind,
        actor: draft.actor,
        data: draft.data,
        idempotency_key: draft.idempotency_key,
    }
}

pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
