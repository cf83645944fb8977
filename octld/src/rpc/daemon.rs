//! `daemon.status`, `daemon.shutdown`.

use std::sync::Arc;

use serde_json::{json, Value};

use octl_proto::method;
use octl_proto::rpc::DaemonStatus;
use octl_proto::{AppError, PROTOCOL_VERSION};

use super::{to_value, Answer, Handle, NoParams};
use crate::daemon::Daemon;

pub fn status(daemon: &Arc<Daemon>, _: NoParams) -> Result<Value, AppError> {
    to_value(&DaemonStatus {
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
pub fn shutdown(daemon: &Arc<Daemon>, _: NoParams) -> Result<Value, AppError> {
    let d = daemon.clone();
    tokio::spawn(async move {
        tokio::task::yield_now().await;
        d.request_shutdown();
    });
    Ok(json!({ "stopping": true, "pid": std::process::id() }))
}

impl Handle for method::DaemonStatus {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Answer, AppError> {
        status(daemon, p).map(Answer::Value)
    }
}

impl Handle for method::DaemonShutdown {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Answer, AppError> {
        shutdown(daemon, p).map(Answer::Value)
    }
}
