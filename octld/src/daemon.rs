//! The daemon's life: take the lock, load the store, take the socket (from systemd or
//! launchd when they hold it, else bind it), say it is ready, serve until asked to stop
//! (signal, `daemon.shutdown`, or the caller's future), then finish in-flight appends, remove
//! the socket if it bound it, and return.

use std::future::Future;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::watch;

use crate::engine::Engine;
use crate::home::Home;
use crate::lock::{self, LockError};
use crate::runner::{tmux::TmuxRunner, Runner, Runners};
use crate::store::Store;
use crate::tmux::Tmux;
use crate::{activation, engine, logging, server};

/// How the daemon was asked to run (its command line; config.toml is [`crate::config`]).
#[derive(Debug, Clone)]
pub struct Options {
    pub home: PathBuf,
    pub foreground: bool,
    pub verbose: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    Lock(#[from] LockError),
    #[error("{what}: {source}{}", crate::nofile::explain(source).map(|m| format!(" — {m}")).unwrap_or_default())]
    Io { what: String, source: io::Error },
    #[error("{0} still answers: another daemon serves it; not removing it")]
    SocketInUse(String),
}

pub(crate) fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> DaemonError {
    let what = what.into();
    move |source| DaemonError::Io { what, source }
}

/// Everything a request handler may reach.
pub struct Daemon {
    pub home: Home,
    pub store: Store,
    /// Where the agents run (the private tmux server); the engine reaches them only here.
    pub runner: Arc<dyn Runner>,
    /// Every runner by name (`local` is [`runner`](Self::runner)): a node starts on the one
    /// its `node.added` names.
    pub runners: Runners,
    /// config.toml: read once, again when it changes; a broken edit keeps the last good one.
    pub config: Arc<crate::config::Live>,
    /// What drives agent runs forward: spawning, supervising, merging, cleaning up.
    pub engine: Engine,
    /// How telling the notifiers went (the last failure), for `daemon status` and `doctor`.
    pub notified: crate::notify::Record,
    /// Sandboxed nodes' own sockets, being served ([`crate::server::agent`]).
    pub agent_sockets: crate::server::agent::Sockets,
    /// Sandboxed nodes' network proxies (`network = "allow"`), being served
    /// ([`crate::sandbox::proxy`]).
    pub network_proxies: crate::sandbox::proxy::Proxies,
    /// The web UI: its sessions, and its listener while it is served ([`crate::ui`]).
    pub ui: crate::ui::Ui,
    started: Instant,
    /// When this daemon started (RFC 3339): the UI tells a restart by it.
    started_at: String,
    shutdown: watch::Sender<bool>,
}

impl Daemon {
    /// The daemon of `home`: its store loaded, its agents on `local` (and the runners
    /// config.toml names), not yet driven or serving.
    fn new(
        home: Home,
        store: Store,
        local: Arc<dyn Runner>,
        config: Arc<crate::config::Live>,
    ) -> Daemon {
        Daemon {
            runners: Runners::new(local.clone(), home.root(), config.clone()),
            ui: crate::ui::Ui::new(home.root().join("ui")),
            home,
            store,
            runner: local,
            config,
            engine: Engine::default(),
            notified: Default::default(),
            agent_sockets: Default::default(),
            network_proxies: Default::default(),
            started: Instant::now(),
            started_at: octl_proto::time::format_millis(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as u64),
            ),
            shutdown: watch::channel(false).0,
        }
    }

    pub fn started_at(&self) -> &str {
        &self.started_at
    }

    pub fn uptime_s(&self) -> u64 {
        self.started.elapsed().as_secs()
    }

    /// Asks the daemon to stop (the same path as SIGTERM).
    pub fn request_shutdown(&self) {
        let _ = self.shutdown.send(true);
    }

    /// Has shutdown been requested? For blocking work that polls (the pool's checkouts).
    pub fn stopping(&self) -> bool {
        *self.shutdown.borrow()
    }

    /// Resolves once shutdown is requested (at once if it already was).
    pub fn shutdown_requested(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut rx = self.shutdown.subscribe();
        async move {
            // The borrow ends before each await, which keeps this future Send.
            while !*rx.borrow_and_update() {
                if rx.changed().await.is_err() {
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
impl Daemon {
    /// A daemon on `home` whose agents run on `runner` (in tests, the in-memory
    /// [`FakeRunner`](crate::runner::fake::FakeRunner)), its engine driving, serving no
    /// socket: the engine's scenarios without tmux. It stops when shutdown is requested.
    pub(crate) async fn on_runner(
        home: &std::path::Path,
        runner: Arc<dyn Runner>,
    ) -> (Arc<Daemon>, tokio::task::JoinHandle<()>) {
        let home = Home::new(home);
        home.ensure().unwrap();
        let store = Store::open(home.clone()).await.unwrap();
        let changes = store.watch_changes();
        let config = Arc::new(crate::config::Live::open(home.config()));
        let daemon = Arc::new(Daemon::new(home, store, runner, config));
        engine::supervise::first_look(&daemon).await;
        let driving = tokio::spawn(engine::drive(daemon.clone(), changes));
        (daemon, driving)
    }
}

/// Runs a daemon on `options.home` until `stop` resolves, a signal-free `daemon.shutdown`
/// arrives, or an error. Public so tests can run a daemon in-process.
pub async fn run(options: Options, stop: impl Future<Output = ()>) -> Result<(), DaemonError> {
    let home = Home::new(&options.home);
    home.ensure()
        .map_err(io_err(format!("cannot create {}", home.root().display())))?;
    let _lock = lock::acquire(&home.lock())?;
    logging::init(&home.log(), options.foreground, options.verbose);
    let (soft, hard) = crate::nofile::limits();
    tracing::info!(home = %home.root().display(), pid = std::process::id(), version = env!("CARGO_PKG_VERSION"), open_files = soft, open_files_hard = hard, "octld starting");
    let served = serve_home(home, stop).await;
    if let Err(e) = &served {
        // In octld.log too: a detached daemon's stderr goes nowhere, and `daemon start`
        // shows this line when the daemon exits before it answers.
        tracing::error!(error = %e, "octld cannot start");
    }
    served
}

async fn serve_home(home: Home, stop: impl Future<Output = ()>) -> Result<(), DaemonError> {
    let store = Store::open(home.clone())
        .await
        .map_err(io_err("cannot load runs"))?;
    let changes = store.watch_changes();
    let notices = store.watch_notices(crate::notify::QUEUE);
    // A socket handed over by systemd or launchd is theirs: served, never unlinked.
    let (listener, activated) = match activation::take_listener(&home.socket())? {
        Some(handed) => (server::adopt(handed)?, true),
        None => (server::bind(&home.socket())?, false),
    };
    // Started again: followers that waited since a `daemon stop` may come back.
    let _ = std::fs::remove_file(home.stopped());
    let config = Arc::new(crate::config::Live::open(home.config()));
    // Read once: whether agents go into cgroups is settled for the daemon's life.
    let cgroups = config.get().map(|c| c.limits.cgroups).unwrap_or(true);
    let contain = crate::contain::Containment::new(home.root(), cgroups);
    let local: Arc<dyn Runner> = Arc::new(TmuxRunner::new(
        Tmux::new(home.tmux_socket()),
        contain.clone(),
    ));
    let daemon = Arc::new(Daemon::new(home.clone(), store, local, config));
    // Agents that exited while the daemon was down are recorded before anyone is answered.
    engine::supervise::first_look(&daemon).await;
    // What a crash or a shutdown left half-made in the worktree pool goes (never handed out).
    let (pool_home, pool_config) = (home.clone(), daemon.config.clone());
    tokio::task::spawn_blocking(move || crate::pool::heal(&pool_home, &pool_config));
    let driving = tokio::spawn(engine::drive(daemon.clone(), changes));
    tokio::spawn(crate::notify::run(daemon.clone(), notices));
    tracing::info!(socket = %home.socket().display(), runs = daemon.store.len(), "octld ready");

    // The server stops by itself on a shutdown request (`daemon.shutdown`); a signal or the
    // caller's future asks it to.
    // The web UI first, if it was being served: once the socket answers, it does too.
    crate::ui::resume(&daemon).await;
    let serving = tokio::spawn(server::serve(listener, daemon.clone()));
    // The store is loaded and the socket listens: connections from now on are answered.
    activation::notify(&format!(
        "READY=1\nSTATUS=serving {} runs on {}",
        daemon.store.len(),
        home.socket().display()
    ));
    tokio::select! {
        _ = stop => {}
        _ = daemon.shutdown_requested() => {}
    }
    tracing::info!("octld stopping: finishing in-flight requests");
    activation::notify("STOPPING=1\nSTATUS=finishing in-flight requests");
    daemon.request_shutdown();
    let _ = serving.await;
    let _ = driving.await;
    daemon.store.shutdown().await;
    // Remote runners' connections (ssh masters) go with the daemon; their agents go on.
    for (_, runner) in daemon.runners.remote() {
        let _ = tokio::task::spawn_blocking(move || runner.shutdown()).await;
    }
    contain.release();
    if !activated {
        let _ = std::fs::remove_file(home.socket());
    }
    tracing::info!("octld stopped");
    Ok(())
}
