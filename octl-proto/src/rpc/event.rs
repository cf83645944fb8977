//! The `event.*` family: append an event to a run's log, list a run's events — each method's
//! params and result types beside its declaration. A new method of the family is declared
//! here; the compiler then asks for its daemon `Handle` (`octld/src/rpc/event.rs`), and the
//! client calls it as `method::Name`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::event::{Actor, Event};
use crate::rpc::AppendResult;

/// `event.append`
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EventAppendParams {
    #[schemars(schema_with = "crate::schema::run_ref")]
    pub run: String,
    /// The node the event is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::node_id")]
    pub node: Option<String>,
    /// An event type a client may append to this kind of run, or `x.<name>`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The payload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    /// A repeat with the same key returns the first append's seq and id and writes nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 128), regex(pattern = "^[!-~]+$"))]
    pub idempotency_key: Option<String>,
    /// Who says it (default human)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::client_actor")]
    pub actor: Option<Actor>,
}

/// `event.list`
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EventListParams {
    #[schemars(schema_with = "crate::schema::run_ref")]
    pub run: String,
    /// Only events with a greater `seq` (default 0: all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<u64>,
    /// At most this many events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub limit: Option<u64>,
}

crate::methods! {
    $;
    each: each_event_method;
    EventAppend(EventAppendParams) -> AppendResult {
        name: "event.append",
        summary: "Append one event; answered once it is on disk.",
    },
    EventList(EventListParams) -> Vec<Event> {
        name: "event.list",
        summary: "A run's events after a seq.",
    },
}
