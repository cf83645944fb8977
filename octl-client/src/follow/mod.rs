//! Following runs: until they settle, for `run wait`, `spawn --wait`, `fan-out --wait`,
//! `orchestrate --wait` and `demo` (`run.show`, then the run's event stream, re-checking
//! `run.show` after every event and every second), with the live progress those commands print
//! on stderr; until they end, for `run watch` (a view redrawn on stdout, or plain lines); and
//! the event stream itself across daemon restarts ([`Events`], also used by `discussion ask
//! --wait`), and the change feed of every run likewise ([`Feed`]).
//!
//! A run is *settled* when its status is terminal (`completed`, `failed`, `cancelled`) or
//! `waiting` (only a human can move it). Exit code: 0 for `completed`, 4 for the others.
//!
//! Progress ([`Progress`]) never touches stdout: on a terminal it redraws a status block on
//! stderr ([`Screen`]); otherwise it prints one plain line per event; with `--json`, nothing.

use octl_proto::method;
use octl_proto::rpc::RunParams;
use std::time::Duration;

use octl_proto::rpc::RunShown;
use octl_proto::AppError;

use crate::commands::Ctx;

mod events;
mod feed;
mod progress;
mod wait;
mod watch;

pub use events::Events;
pub use feed::Feed;
pub use progress::{
    eprint_line, event_message, one_line, plain_event_line, short_event, Mode, Progress, Screen,
};
pub use wait::{is_settled, report_wait, wait_exit_code, wait_run, wait_summary_text, why_text};
pub use watch::{
    is_terminal_status, watch_event_line, watch_frame, watch_run, WatchMode, WATCH_BACKLOG,
};

/// How often the status is re-checked and the progress redrawn without an event.
const TICK: Duration = Duration::from_secs(1);

/// `run.show` of one run.
pub async fn show(ctx: &Ctx, run: &str) -> Result<RunShown, AppError> {
    let params = RunParams { run: run.into() };
    ctx.client.call_method::<method::RunShow>(&params).await
}

/// `run.show` again, by a follower that showed the run before: a daemon stopped meanwhile is
/// waited for, not started ([`crate::client::Client::call_following`]).
pub async fn show_again(ctx: &Ctx, run: &str) -> Result<RunShown, AppError> {
    let params = RunParams { run: run.into() };
    ctx.client.call_following::<method::RunShow>(&params).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    pub(super) fn detail(kind: &str, status: &str, nodes: Value, discussions: Value) -> RunShown {
        serde_json::from_value(json!({
            "manifest": {
                "id": "01JDXJ5R8Q4M0ZK7P2W9TB3C6E", "kind": kind, "status": status,
                "title": null, "repo": "/r", "base": "main",
                "created_at": "t", "updated_at": "t", "nodes": {}, "last_seq": 9
            },
            "nodes": nodes, "discussions": discussions, "spinoffs": []
        }))
        .unwrap()
    }

    pub(super) fn node(id: &str, state: &str, extra: Value) -> Value {
        let mut n = json!({"id": id, "state": state, "branch": format!("octl/R/{id}"),
            "worktree": format!("/w/{id}"), "agent": "shell", "deps": [],
            "created_at": "t", "updated_at": "t"});
        for (k, v) in extra.as_object().unwrap() {
            n[k] = v.clone();
        }
        n
    }
}
