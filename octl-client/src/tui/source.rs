//! Where the TUI's data comes from, on a thread of its own (a current-thread tokio runtime) so
//! the UI thread never waits on the daemon, git or the disk. It sends [`Update`]s: the runs'
//! summaries, their events to fold, the link's state, what an action or a load gave.
//!
//! - Daemon up: `run.list` for the summaries (the first frame) — every active and waiting
//!   run, the newest [`SHOWN`] of any status, and any run with an open question or proposal;
//!   a home's older finished runs are counted, not listed (`run list` has them) —, then the
//!   change feed (`GET /v1/events?since=now&follow=true`) for every new event, while each
//!   listed run's earlier events are read with `event.list` (newest runs first) and folded.
//!   After a restart the feed is opened again from its last cursor, so nothing is missed or
//!   seen twice. A daemon without the feed is polled every [`POLL`] instead: `run.list` tells
//!   which runs moved (their `last_seq`), and only those are read.
//! - Daemon down: the runs are read-only from disk: the finished ones' summaries from the
//!   daemon's run index (`run_index`), the active ones folded from their `events.jsonl` the
//!   same way (a home without an index: every log), and the link says so; the daemon is
//!   asked again every [`POLL`].
//!
//! The first `run.list` starts the daemon when it is down exactly as `orchestratectl run list`
//! does (autostart, unless `OCTL_NO_AUTOSTART`); later reconnects never start it: a daemon
//! that went away while the TUI was open was stopped by someone, and the TUI only shows that.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use octl_proto::event::Event;
use octl_proto::method;
use octl_proto::projection::RunSummary;
use octl_proto::rpc::{EventListParams, RunListParams};
use octl_proto::{AppError, ErrorKind};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

use super::actions::{self, Action};
use super::detail::{self, Load, Loaded};
use crate::client::{CallError, Client, FeedStream};
use crate::log_file::LogFile;
use octl_proto::ids::is_full_run_id;

/// How often the daemon is asked what changed (and, when down, whether it is back).
pub const POLL: Duration = Duration::from_millis(500);
/// At most this many runs' logs are read in one round, so requests are never held long.
const CATCH_UP_BATCH: usize = 100;
/// The newest runs listed whatever their status (besides every active and waiting one): a
/// home of a year's runs opens as fast as a new one.
pub const SHOWN: u64 = 500;

/// Why an action is refused while octld does not answer.
pub const READ_ONLY: &str = "read-only: octld is not answering, so nothing can be changed now";

/// The state of the link to the daemon, shown in the status line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Link {
    /// Asking for the first time.
    Connecting,
    /// The daemon answers.
    Live,
    /// It answered before and does not now (restarting?): the last known state is shown.
    Reconnecting { since: Instant, why: String },
    /// Not running: the runs are read from their logs on disk, read-only.
    Offline { why: String },
}

impl Link {
    pub fn is_live(&self) -> bool {
        *self == Link::Live
    }
}

/// What the data thread tells the UI.
#[derive(Debug)]
pub enum Update {
    Link(Link),
    /// The listed runs' summaries (see the module's map): those not in it are dropped.
    Summaries(Vec<RunSummary>),
    /// How many finished runs the home holds beyond those listed.
    Hidden(u64),
    /// Events to fold, in seq order within each run (read from a log or `event.list`).
    Events(Vec<Event>),
    /// Events from the change feed as they commit: folded like [`Update::Events`], and a run
    /// that starts needing a human rings the bell.
    Live(Vec<Event>),
    /// What an action (`None`: handing the terminal over) ended with: a line for the status
    /// bar.
    Done(Option<Action>, Result<String, AppError>),
    /// The command to hand the terminal to for `t`, or why there is none.
    Attach(Result<Vec<String>, AppError>),
    /// A load (screen, log, diff, numstat, events) finished.
    Loaded(Load, Loaded),
    /// A key or a resize, from the input thread: one channel, so the UI waits on one thing.
    Input(crossterm::event::Event),
}

/// What the UI asks of the data thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Act(Action),
    /// Read this run's log again from the start (its fold did not fit).
    Refold(String),
    Load(Load),
    /// The command that reaches a node's agent (`node.attach`), to hand the terminal to.
    Attach(crate::commands::run::attach::AttachTo),
}

/// Starts the data thread, which sends its updates on `tx`.
pub fn spawn(client: Client, tx: mpsc::Sender<Update>) -> UnboundedSender<Request> {
    let (req_tx, req_rx) = tokio::sync::mpsc::unbounded_channel();
    std::thread::Builder::new()
        .name("octl-tui-data".into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a current-thread runtime starts");
            rt.block_on(Source::new(client, tx).run(req_rx));
        })
        .expect("the data thread starts");
    req_tx
}

struct Source {
    client: std::rc::Rc<Client>,
    tx: mpsc::Sender<Update>,
    /// The seq up to which each run's events were sent.
    sent: HashMap<String, u64>,
    /// The latest summaries (to know which runs moved).
    listed: HashMap<String, u64>,
    /// Logs read from disk while the daemon is down.
    disk: HashMap<String, LogFile>,
    link: Link,
    first: bool,
    /// The change feed's last cursor: where it resumes after a restart.
    cursor: Option<String>,
    /// The daemon has no change feed: poll.
    polling: bool,
    /// The finished runs' summaries were sent from the index on disk (daemon down).
    disk_listed: bool,
}

impl Source {
    fn new(client: Client, tx: mpsc::Sender<Update>) -> Source {
        Source {
            client: std::rc::Rc::new(client),
            tx,
            sent: HashMap::new(),
            listed: HashMap::new(),
            disk: HashMap::new(),
            link: Link::Connecting,
            first: true,
            cursor: None,
            polling: false,
            disk_listed: false,
        }
    }

    fn send(&self, u: Update) -> bool {
        self.tx.send(u).is_ok()
    }

    fn set_link(&mut self, link: Link) {
        let same = match (&self.link, &link) {
            (Link::Reconnecting { .. }, Link::Reconnecting { .. }) => true,
            (a, b) => a == b,
        };
        if !same {
            self.link = link.clone();
            self.send(Update::Link(link));
        }
    }

    async fn run(mut self, mut requests: UnboundedReceiver<Request>) {
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async move {
                loop {
                    let more = self.round().await;
                    if self.link.is_live() && !self.polling {
                        let first = self.cursor.is_none();
                        if let Some(feed) = self.open_feed().await {
                            // Opened at `now`, after the listing: what committed between the
                            // two is on neither, so the runs are listed again (what both have
                            // is folded once).
                            if first {
                                self.round().await;
                            }
                            if !self.follow(feed, &mut requests).await {
                                return;
                            }
                            continue;
                        }
                    }
                    let wait = if more { Duration::ZERO } else { POLL };
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        req = requests.recv() => match req {
                            None => return,
                            Some(req) => self.handle(req).await,
                        },
                    }
                    while let Ok(req) = requests.try_recv() {
                        self.handle(req).await;
                    }
                }
            })
            .await;
    }

    /// Opens the change feed after the last cursor seen (first time: `now`, the summaries
    /// just read being the state before it). `None` when it cannot be opened; a daemon
    /// without the feed (older than this client) is polled instead from then on.
    async fn open_feed(&mut self) -> Option<FeedStream> {
        let since = self.cursor.clone().unwrap_or_else(|| "now".to_string());
        match self.client.feed(Some(&since), true).await {
            Ok(feed) => {
                if self.cursor.is_none() {
                    self.cursor = feed.start().map(str::to_string);
                }
                Some(feed)
            }
            Err(CallError::Failed(e))
                if matches!(e.kind, ErrorKind::NotFound | ErrorKind::MethodNotFound) =>
            {
                // An octld from before the change feed: `run.list` and `event.list` every
                // POLL tell the same, at the cost of reading the list each time.
                self.polling = true;
                None
            }
            Err(_) => None,
        }
    }

    /// Follows the feed until it ends (the daemon stopped), reading the runs that are behind
    /// meanwhile. False when the UI is gone.
    async fn follow(
        &mut self,
        mut feed: FeedStream,
        requests: &mut UnboundedReceiver<Request>,
    ) -> bool {
        loop {
            let more = self.catch_up().await;
            let idle = if more {
                Duration::ZERO
            } else {
                Duration::from_secs(3600)
            };
            tokio::select! {
                item = feed.next() => match item {
                    Ok(Some(item)) => {
                        self.cursor = Some(item.cursor.clone());
                        self.on_event(item.event);
                    }
                    // It ended or broke: the daemon is going away (or restarting).
                    Ok(None) | Err(_) => return true,
                },
                req = requests.recv() => match req {
                    None => return false,
                    Some(req) => self.handle(req).await,
                },
                _ = tokio::time::sleep(idle) => {}
            }
        }
    }

    /// One event from the feed: sent on when it follows what was sent of its run; otherwise
    /// (its run not read yet, or a gap) the run is marked behind and read with `event.list`.
    fn on_event(&mut self, ev: Event) {
        let sent = self.sent.get(&ev.run).copied().unwrap_or(0);
        let known = self.listed.entry(ev.run.clone()).or_insert(0);
        *known = (*known).max(ev.seq);
        if ev.seq == sent + 1 {
            self.sent.insert(ev.run.clone(), ev.seq);
            self.send(Update::Live(vec![ev]));
        }
    }

    async fn handle(&mut self, req: Request) {
        match req {
            Request::Refold(run) => {
                self.sent.remove(&run);
                self.disk.remove(&run);
            }
            Request::Act(action) => {
                let result = if self.link.is_live() {
                    actions::perform(&self.client, action.clone()).await
                } else {
                    Err(AppError::new(ErrorKind::DaemonUnreachable, READ_ONLY))
                };
                self.send(Update::Done(Some(action), result));
            }
            Request::Attach(to) => {
                let argv = to.command(&self.client, self.link.is_live()).await;
                self.send(Update::Attach(argv));
            }
            Request::Load(load) => {
                // Off this loop: a slow git or tmux must not hold the polling.
                let client = self.client.clone();
                let tx = self.tx.clone();
                let live = self.link.is_live();
                tokio::task::spawn_local(async move {
                    let loaded = detail::load(&client, live, &load).await;
                    let _ = tx.send(Update::Loaded(load, loaded));
                });
            }
        }
    }

    /// One call to the daemon; the first one may start it, as `run list` does (unless
    /// OCTL_NO_AUTOSTART), later ones never do.
    async fn call<M: octl_proto::method::Method>(
        &mut self,
        params: &M::Params,
    ) -> Result<M::Result, CallError> {
        if self.first {
            self.first = false;
            return self
                .client
                .call_method::<M>(params)
                .await
                .map_err(|e| match e.kind {
                    ErrorKind::DaemonUnreachable => CallError::NotRunning(e),
                    _ => CallError::Failed(e),
                });
        }
        self.client.try_call_method::<M>(params).await
    }

    /// The runs to list (see the module's map), in id order, and how many finished runs the
    /// home holds beyond them.
    async fn list(&mut self) -> Result<(Vec<RunSummary>, u64), CallError> {
        use octl_proto::rpc::{ListParams, RunParams, Statuses};
        let unfinished = RunListParams {
            status: Some(Statuses::Many(vec!["active".into(), "waiting".into()])),
            ..RunListParams::default()
        };
        let mut runs: std::collections::BTreeMap<String, RunSummary> = self
            .call::<method::RunList>(&unfinished)
            .await?
            .parse()?
            .into_iter()
            .map(|r| (r.id.clone(), r))
            .collect();
        let newest = RunListParams {
            limit: Some(SHOWN),
            ..RunListParams::default()
        };
        for r in self.call::<method::RunList>(&newest).await?.parse()? {
            runs.insert(r.id.clone(), r);
        }
        // An ended run can still hold an open question or proposal (its agent asked, then
        // failed): it is in the inbox whatever its age.
        let open = ListParams {
            run: None,
            open: Some(true),
        };
        let mut asking: Vec<String> = self
            .call::<method::DiscussionList>(&open)
            .await?
            .into_iter()
            .map(|d| d.run)
            .collect();
        asking.extend(
            self.call::<method::SpinoffList>(&open)
                .await?
                .into_iter()
                .map(|p| p.run),
        );
        asking.sort();
        asking.dedup();
        asking.retain(|r| !runs.contains_key(r));
        for run in asking {
            if let Ok(detail) = self.call::<method::RunShow>(&RunParams { run }).await {
                runs.insert(detail.manifest.id.clone(), detail.manifest);
            }
        }
        let total = self
            .call::<method::DaemonStatus>(&method::NoParams {})
            .await
            .map_or(0, |s| s.runs as u64);
        let hidden = total.saturating_sub(runs.len() as u64);
        Ok((runs.into_values().collect(), hidden))
    }

    /// One look at the daemon (or the disk). True when there is more to read at once.
    async fn round(&mut self) -> bool {
        match self.list().await {
            Ok((runs, hidden)) => {
                self.set_link(Link::Live);
                self.disk.clear();
                self.disk_listed = false;
                self.listed = runs.iter().map(|r| (r.id.clone(), r.last_seq)).collect();
                if !self.send(Update::Summaries(runs)) || !self.send(Update::Hidden(hidden)) {
                    return false;
                }
                self.catch_up().await
            }
            Err(CallError::NotRunning(e) | CallError::Dropped(e)) => {
                let why = e.message;
                match &self.link {
                    // It answered before: it is (re)starting, or was stopped. Either way the
                    // logs on disk are the truth meanwhile.
                    Link::Live | Link::Reconnecting { .. } => self.set_link(Link::Reconnecting {
                        since: Instant::now(),
                        why: format!("{why}; showing the logs on disk, read-only"),
                    }),
                    _ => self.set_link(Link::Offline { why }),
                }
                self.read_disk();
                false
            }
            Err(CallError::Failed(e)) => {
                if !matches!(self.link, Link::Reconnecting { .. }) {
                    self.set_link(Link::Reconnecting {
                        since: Instant::now(),
                        why: e.message,
                    });
                }
                false
            }
        }
    }

    /// Reads the events of the runs that moved since they were sent, unfinished runs first.
    async fn catch_up(&mut self) -> bool {
        let mut behind: Vec<(&String, &u64)> = self
            .listed
            .iter()
            .filter(|(id, seq)| self.sent.get(*id).copied().unwrap_or(0) < **seq)
            .collect();
        // Newest first: the runs a person looks at now.
        behind.sort_by(|a, b| b.0.cmp(a.0));
        let batch: Vec<String> = behind
            .iter()
            .take(CATCH_UP_BATCH)
            .map(|(id, _)| (*id).clone())
            .collect();
        let more = behind.len() > batch.len();
        for run in batch {
            let since = self.sent.get(&run).copied().unwrap_or(0);
            let params = EventListParams {
                run: run.clone(),
                since: Some(since),
                limit: None,
            };
            match self
                .client
                .try_call_method::<method::EventList>(&params)
                .await
            {
                Ok(events) => {
                    if let Some(last) = events.last() {
                        self.sent.insert(run, last.seq);
                        self.send(Update::Events(events));
                    }
                }
                // A corrupt run has no events to list; its summary says so.
                Err(CallError::Failed(_)) => {
                    self.sent.insert(run.clone(), self.listed[&run]);
                }
                Err(CallError::NotRunning(_) | CallError::Dropped(_)) => return false,
            }
        }
        more
    }

    /// With the daemon down: the finished runs' summaries from the run index once, then the
    /// active runs' new complete lines from their `events.jsonl` (every run's, in a home
    /// without an index).
    fn read_disk(&mut self) {
        let runs = self.client.home().runs();
        let indexed = crate::run_index::read(self.client.home().dir(), SHOWN as usize)
            .ok()
            .flatten();
        let dirs: Vec<(String, PathBuf)> = match indexed {
            Some(index) => {
                if !self.disk_listed {
                    // What was folded before is read again from the logs: the summaries
                    // replace the list.
                    self.disk_listed = true;
                    self.sent.clear();
                    self.disk.clear();
                    let _ = self.send(Update::Summaries(index.finished))
                        && self.send(Update::Hidden(index.finished_total.saturating_sub(SHOWN)));
                }
                index
                    .active
                    .into_iter()
                    .map(|id| {
                        let dir = runs.join(&id);
                        (id, dir)
                    })
                    .collect()
            }
            None => {
                let Ok(entries) = std::fs::read_dir(&runs) else {
                    return;
                };
                entries
                    .filter_map(|e| e.ok())
                    .filter_map(|e| {
                        let name = e.file_name().into_string().ok()?;
                        is_full_run_id(&name).then(|| (name, e.path()))
                    })
                    .collect()
            }
        };
        for (id, dir) in dirs {
            let log = self
                .disk
                .entry(id.clone())
                .or_insert_with(|| LogFile::new(&dir));
            let Ok(lines) = log.read_new() else { continue };
            let sent = self.sent.get(&id).copied().unwrap_or(0);
            let events: Vec<Event> = lines
                .iter()
                .filter_map(|l| Event::from_line(l).ok())
                .filter(|e| e.seq > sent)
                .collect();
            if let Some(last) = events.last() {
                self.sent.insert(id, last.seq);
                self.send(Update::Events(events));
            }
        }
    }
}
