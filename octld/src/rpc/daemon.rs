//! `daemon.status`, `daemon.shutdown`.

use std::sync::Arc;

use octl_proto::method;
use octl_proto::rpc::{DaemonStatusResult, Stopping};
use octl_proto::{AppError, PROTOCOL_VERSION};

use super::{Handle, NoParams};
use crate::daemon::Daemon;

pub fn status(daemon: &Arc<Daemon>, _: NoParams) -> Result<DaemonStatusResult, AppError> {
    Ok(DaemonStatusResult {
        pid: std::process::id(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        protocol: PROTOCOL_VERSION,
        home: daemon.home.root().display().to_string(),
        uptime_s: daemon.uptime_s(),
        runs: daemon.store.len(),
        active: Some(daemon.store.active_len()),
        // What is in force: the last good config.toml while an edit of it is refused.
        notify: daemon
            .notified
            .status(&daemon.config.get_or_default().notify),
        config_error: daemon.config.problem().map(|e| e.message),
    })
}

/// Answers first, then stops: the shutdown runs after this response is written.
pub fn shutdown(daemon: &Arc<Daemon>, _: NoParams) -> Result<Stopping, AppError> {
    let d = daemon.clone();
    tokio::spawn(async move {
        tokio::task::yield_now().await;
        d.request_shutdown();
    });
    Ok(Stopping {
        stopping: true,
        pid: std::process::id(),
    })
}

impl Handle for method::DaemonStatus {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        status(daemon, p)
    }
}

impl Handle for method::DaemonShutdown {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        shutdown(daemon, p)
    }
}
