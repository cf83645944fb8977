//! [`Feed`]: the change feed (every run's events) across daemon restarts, for `event feed
//! --follow` and the TUI.

use std::time::Duration;

use octl_proto::feed::FeedItem;
use octl_proto::AppError;

use crate::client::{CallError, Client, FeedStream};

/// Pause before opening the feed again after it ended (daemon restarted).
const RECONNECT: Duration = Duration::from_millis(250);

/// The change feed after a cursor, followed across daemon restarts: when the stream ends it
/// is opened again from the last cursor seen (or the one the stream started at), starting the
/// daemon when autostart allows. The feed's cursors survive a restart, so nothing is lost or
/// repeated.
///
/// [`Feed::next`] may be dropped in a `tokio::select!` and called again: nothing is lost.
pub struct Feed {
    cursor: Option<String>,
    stream: Option<FeedStream>,
    /// How many times the stream was opened again after it ended.
    reconnects: u64,
}

impl Feed {
    /// The feed after `since` (a cursor, or `now`; `None`: from the beginning).
    pub fn new(since: Option<&str>) -> Feed {
        Feed {
            cursor: since.map(str::to_string),
            stream: None,
            reconnects: 0,
        }
    }

    /// Where the feed resumes: the cursor of the last item returned (or the starting one).
    pub fn cursor(&self) -> Option<&str> {
        self.cursor.as_deref()
    }

    /// Whether a stream is open now (false while reconnecting).
    pub fn connected(&self) -> bool {
        self.stream.is_some()
    }

    pub fn reconnects(&self) -> u64 {
        self.reconnects
    }

    /// The next item. A bad cursor is an error (it stays one: nothing is retried).
    pub async fn next(&mut self, client: &Client) -> Result<FeedItem, AppError> {
        loop {
            let stream = match &mut self.stream {
                Some(stream) => stream,
                None => match client.feed(self.cursor.as_deref(), true).await {
                    Ok(stream) => {
                        if let Some(start) = stream.start() {
                            // `now` pinned down: a restart resumes from here, not a later now.
                            self.cursor = Some(start.to_string());
                        }
                        self.stream.insert(stream)
                    }
                    Err(CallError::NotRunning(_) | CallError::Dropped(_)) => {
                        // Start it again when autostart allows; otherwise wait for it to be
                        // started (a follower keeps following; `connected` says it waits).
                        tokio::time::sleep(RECONNECT).await;
                        let _ = client.reconnect().await;
                        continue;
                    }
                    Err(CallError::Failed(e)) => return Err(e),
                },
            };
            match stream.next().await {
                Ok(Some(item)) => {
                    self.cursor = Some(item.cursor.clone());
                    return Ok(item);
                }
                // The daemon ended the stream (it stopped or restarts): open it again.
                Ok(None) | Err(_) => {
                    self.stream = None;
                    self.reconnects += 1;
                    tokio::time::sleep(RECONNECT).await;
                }
            }
        }
    }
}
