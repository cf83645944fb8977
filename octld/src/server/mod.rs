//! The daemon's HTTP server on its Unix socket.
//!
//! - [`routes`]: `POST /rpc` and `GET /v1/runs/<RUN>/events`, limits and HTTP error bodies.
//! - [`jsonrpc`]: JSON-RPC 2.0 envelopes: batches, notifications, standard errors.
//! - [`stream`]: the event stream of one run (past events, then new ones as they land).
//! - [`feed`]: the change feed, every run's events in one stream (`GET /v1/events`).
//! - [`agent`]: a sandboxed node's own socket, serving that node's methods only.
//!
//! Every connection's peer uid is checked against ours before any byte is parsed; another
//! uid is answered 403 (`unauthorized`) whatever the socket's mode.

pub mod agent;
pub mod feed;
pub mod jsonrpc;
pub mod routes;
pub mod stream;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::UnixListener;

use crate::daemon::{io_err, Daemon, DaemonError};

/// How long a client may take to send its request headers.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long in-flight connections get to finish at shutdown.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Binds the socket. A socket file left by a crash (nobody answers) is replaced; one that
/// still answers belongs to a live daemon and is left alone.
pub fn bind(path: &Path) -> Result<UnixListener, DaemonError> {
    if path.exists() {
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(DaemonError::SocketInUse(path.display().to_string()));
        }
        tracing::warn!(socket = %path.display(), "replacing a stale socket left by a daemon that is gone");
        std::fs::remove_file(path)
            .map_err(io_err(format!("cannot remove stale {}", path.display())))?;
    }
    let listener =
        UnixListener::bind(path).map_err(io_err(format!("cannot bind {}", path.display())))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(io_err(format!("cannot set the mode of {}", path.display())))?;
    Ok(listener)
}

/// Serves a listening socket handed over by a service manager ([`crate::activation`]) instead
/// of binding one. It is never unlinked by the daemon: the service manager owns it.
pub fn adopt(listener: std::os::unix::net::UnixListener) -> Result<UnixListener, DaemonError> {
    listener
        .set_nonblocking(true)
        .map_err(io_err("cannot make the handed-over socket non-blocking"))?;
    UnixListener::from_std(listener).map_err(io_err("cannot serve the handed-over socket"))
}

/// Connections one agent's socket serves at once: an agent needs a few (a hook, a report);
/// a hostile one cannot take the daemon's descriptors.
const AGENT_CONNECTIONS: usize = 16;

/// Serves until the daemon's shutdown is requested, then drains in-flight connections.
pub async fn serve(listener: UnixListener, daemon: Arc<Daemon>) {
    serve_scoped(listener, daemon, None).await
}

/// [`serve`], for one sandboxed node's socket when `scope` is given ([`agent`]).
pub async fn serve_scoped(
    listener: UnixListener,
    daemon: Arc<Daemon>,
    scope: Option<Arc<agent::Scope>>,
) {
    let graceful = GracefulShutdown::new();
    let me = unsafe { libc::geteuid() };
    let router = routes::router(daemon.clone());
    let stop = daemon.shutdown_requested();
    tokio::pin!(stop);
    // Connections served at once: what the open-file limit leaves beside a reserve for
    // logs, git and tmux (at most 512).
    let open = Arc::new(tokio::sync::Semaphore::new(match scope {
        Some(_) => AGENT_CONNECTIONS,
        None => crate::nofile::connections(),
    }));
    let mut told_limit = None::<std::time::Instant>;
    loop {
        // At the limit, new connections wait in the socket's backlog until one closes (an
        // idle one is closed by the header timeout), rather than exhausting the daemon.
        let permit = tokio::select! {
            p = open.clone().acquire_owned() => p.expect("the semaphore is never closed"),
            _ = &mut stop => break,
        };
        tokio::select! {
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((s, _)) => s,
                    Err(e) => {
                        match crate::nofile::explain(&e) {
                            // Once a minute: it lasts until something closes.
                            Some(why) if told_limit.is_none_or(|t| t.elapsed() > Duration::from_secs(60)) => {
                                told_limit = Some(std::time::Instant::now());
                                tracing::error!(error = %e, why = %why, "cannot accept connections");
                            }
                            Some(_) => {}
                            None => tracing::warn!(error = %e, "accept failed"),
                        }
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let peer = stream.peer_cred().ok().map(|c| c.uid());
                let authorized = peer == Some(me);
                if !authorized {
                    tracing::warn!(peer_uid = ?peer, "refused a connection from another uid");
                }
                let peer = routes::Peer { authorized, scope: scope.clone() };
                let svc = TowerToHyperService::new(router.clone().layer(axum::Extension(peer)));
                let conn = http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(HEADER_TIMEOUT)
                    .serve_connection(TokioIo::new(stream), svc);
                let conn = graceful.watch(conn);
                tokio::spawn(async move {
                    if let Err(e) = conn.await {
                        tracing::debug!(error = %e, "connection ended with an error");
                    }
                    drop(permit);
                });
            }
            _ = &mut stop => break,
        }
    }
    drop(listener);
    if tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("some connections did not finish within the drain timeout");
    }
}
