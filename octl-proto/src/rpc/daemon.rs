//! The `daemon.*` family: the daemon's own status and its shutdown — each method's params and
//! result types beside its declaration. A new method of the family is declared here; the
//! compiler then asks for its daemon `Handle` (`octld/src/rpc/daemon.rs`), and the client calls
//! it as `method::Name`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::method::NoParams;

/// `daemon.status` result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DaemonStatusResult {
    pub pid: u32,
    pub version: String,
    pub protocol: u32,
    pub home: String,
    pub uptime_s: u64,
    pub runs: usize,
}

crate::methods! {
    $;
    each: each_daemon_method;
    DaemonStatus(NoParams) -> DaemonStatusResult {
        name: "daemon.status",
        summary: "The daemon's pid, version, protocol, home and uptime.",
        params: &[],
        result: r#"{"type":"object","required":["pid","version","protocol","home","uptime_s"]}"#,
    },
    DaemonShutdown(NoParams) -> Value {
        name: "daemon.shutdown",
        summary: "Finish in-flight appends, remove the socket and exit.",
        params: &[],
        result: r#"{"type":"object","properties":{"stopping":{"type":"boolean"}}}"#,
    },
}
