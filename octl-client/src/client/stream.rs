//! The NDJSON endpoints: `GET /v1/runs/<RUN>/events` (one run's events) and the change feed
//! `GET /v1/events` (every run's), read line by line as they arrive. Apart from the JSON-RPC
//! calls because these answers are streams that may never end, never start the daemon, and
//! are followed across its restarts by [`crate::follow`].

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{header, Method, Request};
use octl_proto::feed::{FeedItem, CURSOR_HEADER as FEED_CURSOR_HEADER, FEED_PATH};
use octl_proto::{AppError, ErrorKind};

use super::{http_error, CallError, Client, REQUEST_TIMEOUT};

impl Client {
    /// Opens `GET /v1/runs/<RUN>/events?since=SEQ&follow=…`, never starting the daemon.
    pub async fn event_stream(
        &self,
        run: &str,
        since: u64,
        follow: bool,
    ) -> Result<EventStream, CallError> {
        self.ndjson(format!(
            "/v1/runs/{run}/events?since={since}&follow={follow}"
        ))
        .await
    }

    /// Opens the change feed, `GET /v1/events?since=CURSOR&follow=…` (every run's events;
    /// `since`: a line's cursor, or `now`; absent: from the beginning), never starting the
    /// daemon. [`crate::follow::Feed`] follows it across daemon restarts.
    pub async fn feed(&self, since: Option<&str>, follow: bool) -> Result<FeedStream, CallError> {
        let mut path = format!("{FEED_PATH}?follow={follow}");
        if let Some(since) = since {
            path.push_str("&since=");
            path.push_str(&percent_encode(since));
        }
        let lines = self.ndjson(path).await?;
        Ok(FeedStream {
            start: lines.cursor.clone(),
            lines,
        })
    }

    async fn ndjson(&self, path: String) -> Result<EventStream, CallError> {
        let request = Request::builder()
            .method(Method::GET)
            .uri(path)
            .header(header::HOST, "octld")
            .header(header::ACCEPT, "application/x-ndjson")
            .body(Full::new(Bytes::new()))
            .map_err(|e| AppError::internal(format!("cannot build the request: {e}")))?;
        let response = tokio::time::timeout(REQUEST_TIMEOUT, self.send(request))
            .await
            .map_err(|_| {
                AppError::new(
                    ErrorKind::Timeout,
                    "octld did not open the event stream in time",
                )
            })??;
        let status = response.status();
        if status.is_success() {
            let cursor = response
                .headers()
                .get(FEED_CURSOR_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            return Ok(EventStream {
                body: response.into_body(),
                buf: Vec::new(),
                cursor,
            });
        }
        let bytes = response
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        Err(CallError::Failed(http_error(status, &bytes)))
    }
}

/// The NDJSON event stream: past events, then (when following) new ones as they land.
pub struct EventStream {
    body: Incoming,
    buf: Vec<u8>,
    /// The change feed's cursor where the stream starts (its response header).
    cursor: Option<String>,
}

impl EventStream {
    /// The next complete line, without its newline; `None` when the stream ended (the daemon
    /// finished sending past events, or it shut down). A cut-off last line is dropped.
    pub async fn next_line(&mut self) -> Result<Option<String>, AppError> {
        loop {
            if let Some(pos) = self.buf.iter().position(|b| *b == b'\n') {
                let rest = self.buf.split_off(pos + 1);
                let mut line = std::mem::replace(&mut self.buf, rest);
                line.truncate(pos);
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                if line.is_empty() {
                    continue;
                }
                return Ok(Some(String::from_utf8_lossy(&line).into_owned()));
            }
            match self.body.frame().await {
                None => return Ok(None),
                Some(Err(e)) => {
                    return Err(AppError::internal(format!(
                        "the event stream broke off: {e}"
                    )))
                }
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.buf.extend_from_slice(&data);
                    }
                }
            }
        }
    }
}

/// The change feed's lines, typed.
pub struct FeedStream {
    lines: EventStream,
    start: Option<String>,
}

impl FeedStream {
    /// The cursor the stream starts after (what `since=now` stood for), from the daemon's
    /// `x-octl-feed-cursor` header: resuming from it loses nothing even before a first item.
    pub fn start(&self) -> Option<&str> {
        self.start.as_deref()
    }

    /// The next item; `None` when the stream ended (past items sent without `follow`, or the
    /// daemon stopped). A line that is not a `FeedItem` is an error naming it.
    pub async fn next(&mut self) -> Result<Option<FeedItem>, AppError> {
        let Some(line) = self.lines.next_line().await? else {
            return Ok(None);
        };
        serde_json::from_str(&line).map(Some).map_err(|e| {
            AppError::internal(format!(
                "the change feed sent a line that is not a feed item ({e}): {}",
                crate::output::truncate(&line, 120)
            ))
        })
    }
}

/// Escapes what a query value cannot hold as is (a cursor is `<ULID>:<N>`, but `since`
/// comes from the user).
fn percent_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~:".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
