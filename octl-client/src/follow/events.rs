//! [`Events`]: a run's event stream across daemon restarts (for `run wait`, `run watch` and
//! `discussion ask --wait`).

use std::time::Duration;

use octl_proto::AppError;
use serde_json::Value;

use crate::client::{CallError, EventStream};
use crate::commands::Ctx;

/// Pause before opening the event stream again after it ended (daemon restarted).
const RECONNECT: Duration = Duration::from_millis(250);

/// A run's events after a cursor, as they land, across daemon restarts: when the stream ends
/// it is opened again from the last event seen (after a pause, starting the daemon when
/// autostart allows). Used by `run wait`, `run watch` and `discussion ask --wait`.
///
/// [`Events::next`] may be dropped in a `tokio::select!` and called again: nothing is lost.
pub struct Events {
    id: String,
    cursor: u64,
    stream: Option<EventStream>,
}

impl Events {
    /// Events of run `id` (a full id) with a seq greater than `cursor`.
    pub fn new(id: &str, cursor: u64) -> Events {
        Events {
            id: id.to_string(),
            cursor,
            stream: None,
        }
    }

    /// The seq of the last event returned (or the starting cursor).
    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    /// The next event. Lines that are not JSON, and events already seen, are skipped.
    pub async fn next(&mut self, ctx: &Ctx) -> Result<Value, AppError> {
        self.next_line(ctx).await.map(|(_, ev)| ev)
    }

    /// The next event, with its line exactly as the daemon sent it.
    pub async fn next_line(&mut self, ctx: &Ctx) -> Result<(String, Value), AppError> {
        loop {
            let stream = match &mut self.stream {
                Some(stream) => stream,
                None => match ctx.client.event_stream(&self.id, self.cursor, true).await {
                    Ok(stream) => self.stream.insert(stream),
                    Err(CallError::NotRunning(_) | CallError::Dropped(_)) => {
                        // Wait for a daemon stopped on purpose; start one that crashed (or
                        // fail with daemon_unreachable when autostart is off).
                        tokio::time::sleep(RECONNECT).await;
                        ctx.client.reconnect().await?;
                        continue;
                    }
                    Err(CallError::Failed(e)) => return Err(e),
                },
            };
            match stream.next_line().await {
                Ok(Some(line)) => {
                    let Ok(ev) = serde_json::from_str::<Value>(&line) else {
                        continue;
                    };
                    if let Some(seq) = ev.get("seq").and_then(Value::as_u64) {
                        if seq <= self.cursor {
                            continue;
                        }
                        self.cursor = seq;
                    }
                    return Ok((line, ev));
                }
                // The daemon ended the stream (it stopped or restarts): open it again.
                Ok(None) | Err(_) => {
                    self.stream = None;
                    tokio::time::sleep(RECONNECT).await;
                }
            }
        }
    }
}
