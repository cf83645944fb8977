//! One line of the change feed, `GET /v1/events?since=CURSOR&follow=true`: every run's
//! committed events in one stream.

use serde::{Deserialize, Serialize};

use crate::event::Event;

/// A committed event and the cursor just after it. Giving `cursor` back as `since` resumes
/// the feed after this event, also across a daemon restart. The cursor is opaque to clients.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeedItem {
    pub cursor: String,
    pub event: Event,
}

/// The feed's endpoint on the daemon's socket.
pub const FEED_PATH: &str = "/v1/events";

/// Response header of the feed: the cursor the stream starts after (for `since=now`, the
/// feed's end when it was opened), so a client can resume before it has seen any item.
pub const CURSOR_HEADER: &str = "x-octl-feed-cursor";
