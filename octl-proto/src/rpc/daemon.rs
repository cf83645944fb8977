//! The `daemon.*` family: the daemon's own status and its shutdown — each method's params and
//! result types beside its declaration. A new method of the family is declared here; the
//! compiler then asks for its daemon `Handle` (`octld/src/rpc/daemon.rs`), and the client calls
//! it as `method::Name`.

use serde::{Deserialize, Serialize};

use crate::method::NoParams;

/// `daemon.status` result.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DaemonStatusResult {
    pub pid: u32,
    pub version: String,
    pub protocol: u32,
    pub home: String,
    pub uptime_s: u64,
    /// Every run of the home, active or finished.
    pub runs: usize,
    /// The active runs: those the daemon holds in memory (a finished run is only in the
    /// run index). Absent from older daemons.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active: Option<usize>,
    /// The notifiers of `[notify]` and their last failure (absent from older daemons).
    #[serde(default)]
    pub notify: NotifyStatus,
    /// Why `config.toml`, as it is now, is not in force (it does not parse; the last file
    /// that did stays in force). Absent when it is, and from older daemons.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_error: Option<String>,
}

/// The notifiers `config.toml`'s `[notify]` configures and how delivering to them went since
/// the daemon started (failures are in octld.log too).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NotifyStatus {
    /// The notifier command's program, if one is configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The webhook's URL, if one is configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<String>,
    /// The last notice a notifier failed to deliver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failure: Option<NotifyFailure>,
}

/// One notice a notifier failed to deliver.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NotifyFailure {
    /// When (RFC 3339).
    pub at: String,
    /// `command` or `webhook`.
    pub notifier: String,
    /// What went wrong: the exit status and stderr, the refused connection, the HTTP status,
    /// the timeout.
    pub message: String,
    /// The notice's kind (`question`, `failed`, …) and run.
    pub kind: String,
    pub run: String,
    /// When that notifier last delivered a notice after this failure, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered_since: Option<String>,
}

/// `daemon.shutdown` result: the daemon stops once this answer is written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Stopping {
    pub stopping: bool,
    pub pid: u32,
}

crate::methods! {
    $;
    each: each_daemon_method;
    DaemonStatus(NoParams) -> DaemonStatusResult {
        name: "daemon.status",
        summary: "The daemon's pid, version, protocol, home, uptime and notifiers (`notify`: their last failure).",
    },
    DaemonShutdown(NoParams) -> Stopping {
        name: "daemon.shutdown",
        summary: "Finish in-flight appends, remove the socket and exit.",
    },
}
