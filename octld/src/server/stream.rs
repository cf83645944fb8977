//! The event stream of one run: the log's events after `since`, then, with `follow`, every
//! group as it commits, until the client goes or the daemon stops.

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::Bytes;
use futures_util::Stream;
use tokio::sync::{broadcast, mpsc};

use octl_proto::{AppError, Event};

use crate::daemon::Daemon;
use crate::store::{log, RunHandle};

pub fn open(
    daemon: &Arc<Daemon>,
    run: &str,
    since: u64,
    follow: bool,
) -> Result<impl Stream<Item = Result<Bytes, Infallible>>, AppError> {
    let handle = daemon.store.resolve("run", run)?;
    if let Some(reason) = handle.corrupt() {
        return Err(AppError::new(
            octl_proto::ErrorKind::RunCorrupt,
            format!("run {} is corrupt: {reason}", handle.id),
        ));
    }
    // Subscribe before reading the file, so no group falls between the two.
    let sub = handle.subscribe();
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    let stop = daemon.shutdown_requested();
    tokio::spawn(pump(handle, sub, tx, since, follow, stop));
    Ok(futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok(b), rx))
    }))
}

async fn pump(
    handle: Arc<RunHandle>,
    mut sub: broadcast::Receiver<Arc<Vec<Event>>>,
    tx: mpsc::Sender<Bytes>,
    since: u64,
    follow: bool,
    stop: impl std::future::Future<Output = ()>,
) {
    tokio::pin!(stop);
    let mut last = since;
    if !catch_up(&handle, &tx, &mut last).await || !follow {
        return;
    }
    loop {
        tokio::select! {
            got = sub.recv() => match got {
                Ok(events) => {
                    let chunk = lines(events.iter().filter(|e| e.seq > last));
                    if let Some(max) = events.last().map(|e| e.seq) {
                        last = last.max(max);
                    }
                    if !chunk.is_empty() && tx.send(chunk).await.is_err() {
                        return;
                    }
                }
                // Too slow to keep up: read what was missed from the log.
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    if !catch_up(&handle, &tx, &mut last).await {
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

/// Sends the events in the log after `last` up to the committed seq. False if the client left.
async fn catch_up(handle: &Arc<RunHandle>, tx: &mpsc::Sender<Bytes>, last: &mut u64) -> bool {
    const CHUNK: usize = 4096;
    loop {
        let upto = handle.committed();
        if *last >= upto {
            return true;
        }
        let path = handle.log_path();
        let from = *last;
        let events = match tokio::task::spawn_blocking(move || {
            log::read_range(&path, from, upto, CHUNK)
        })
        .await
        {
            Ok(Ok(evs)) => evs,
            other => {
                tracing::warn!(run = %handle.id, outcome = ?other.map(|r| r.map(|v| v.len())), "cannot read the log for a stream");
                return false;
            }
        };
        let Some(max) = events.last().map(|e| e.seq) else {
            return true;
        };
        *last = max;
        if tx.send(lines(events.iter())).await.is_err() {
            return false;
        }
    }
}

fn lines<'a>(events: impl Iterator<Item = &'a Event>) -> Bytes {
    let mut out = String::new();
    for ev in events {
        out.push_str(&ev.to_line());
        out.push('\n');
    }
    Bytes::from(out)
}
