//! The change feed, `GET /v1/events?since=CURSOR&follow=true`: every run's committed events
//! after a cursor as `FeedItem` lines, then, with `follow`, each batch as the feed's index
//! makes it durable. Any number of followers: each has its own subscription to the feed's
//! broadcast (the engine's wake-ups are a separate channel), and one that falls behind reads
//! what it missed from the index and the logs instead of holding anyone up. The order and
//! the cursors are [`crate::store::feed`]'s.

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::Bytes;
use futures_util::Stream;
use tokio::sync::{broadcast, mpsc};

pub use octl_proto::feed::CURSOR_HEADER;
use octl_proto::{AppError, Event};

use crate::daemon::Daemon;
use crate::store::feed::{Batch, Feed, Since};

/// Records read from the index at a time when catching up.
const CHUNK: u64 = 4096;

pub fn open(
    daemon: &Arc<Daemon>,
    since: Option<&str>,
    follow: bool,
) -> Result<(String, impl Stream<Item = Result<Bytes, Infallible>>), AppError> {
    let feed = daemon.store.feed().clone();
    // Subscribe before reading the head, so no batch falls between the two.
    let sub = feed.subscribe();
    let last = match feed.parse_since(since)? {
        Since::After(n) => n,
        Since::Now => feed.head(),
    };
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    let stop = daemon.shutdown_requested();
    let start = feed.cursor(last);
    tokio::spawn(pump(feed, sub, tx, last, follow, stop));
    let body =
        futures_util::stream::unfold(
            rx,
            |mut rx| async move { rx.recv().await.map(|b| (Ok(b), rx)) },
        );
    Ok((start, body))
}

async fn pump(
    feed: Arc<Feed>,
    mut sub: broadcast::Receiver<Arc<Batch>>,
    tx: mpsc::Sender<Bytes>,
    mut last: u64,
    follow: bool,
    stop: impl std::future::Future<Output = ()>,
) {
    tokio::pin!(stop);
    if !catch_up(&feed, &tx, &mut last).await || !follow {
        return;
    }
    loop {
        tokio::select! {
            got = sub.recv() => match got {
                // Records the indexer wrote without publishing (a backlog from a full disk
                // at start) come before this batch: read them, and the batch, from disk.
                Ok(batch) if batch.first > last + 1 => {
                    if !catch_up(&feed, &tx, &mut last).await {
                        return;
                    }
                }
                Ok(batch) => {
                    let chunk = lines(&feed, batch.items().filter(|(n, _)| *n > last));
                    last = last.max(batch.last);
                    if !chunk.is_empty() && tx.send(chunk).await.is_err() {
                        return;
                    }
                }
                // Too slow to keep up: read what was missed from the index.
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    if !catch_up(&feed, &tx, &mut last).await {
                        return;
                    }
                }
                Err(broadcast::error::RecvError::Closed) => return,
            },
            _ = &mut stop => return,
            _ = tx.closed() => return,
        }
    }
}

/// Sends the events after `last` up to the feed's head. False if the client left.
async fn catch_up(feed: &Arc<Feed>, tx: &mpsc::Sender<Bytes>, last: &mut u64) -> bool {
    loop {
        let upto = feed.head();
        if *last >= upto {
            return true;
        }
        let from = *last;
        let reader = feed.clone();
        let items = match tokio::task::spawn_blocking(move || reader.read(from, upto, CHUNK)).await
        {
            Ok(Ok(items)) => items,
            other => {
                tracing::warn!(outcome = ?other.map(|r| r.map(|v| v.len())), "cannot read the feed's index");
                return false;
            }
        };
        // Records whose event is gone (a run set aside) are passed over.
        *last = upto.min(from + CHUNK);
        let chunk = lines(feed, items.iter().map(|(n, e)| (*n, e)));
        if !chunk.is_empty() && tx.send(chunk).await.is_err() {
            return false;
        }
    }
}

/// `{"cursor":…,"event":…}` lines: a `FeedItem` each, the event as its log line.
fn lines<'a>(feed: &Feed, items: impl Iterator<Item = (u64, &'a Event)>) -> Bytes {
    let mut out = String::new();
    for (n, ev) in items {
        out.push_str("{\"cursor\":\"");
        out.push_str(&feed.cursor(n));
        out.push_str("\",\"event\":");
        out.push_str(&ev.to_line());
        out.push_str("}\n");
    }
    Bytes::from(out)
}
