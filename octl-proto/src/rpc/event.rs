//! The `event.*` family: append an event to a run's log, list a run's events — each method's
//! params and result types beside its declaration. A new method of the family is declared
//! here; the compiler then asks for its daemon `Handle` (`octld/src/rpc/event.rs`), and the
//! client calls it as `method::Name`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::event::{Actor, Event};
use crate::method::ParamSpec;
use crate::rpc::{AppendResult, RUN_PARAM};

/// `event.append`
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventAppendParams {
    pub run: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<Actor>,
}

/// `event.list`
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventListParams {
    pub run: String,
    /// Only events with a greater `seq` (default 0: all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<u64>,
    /// At most this many events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
}

crate::methods! {
    $;
    each: each_event_method;
    EventAppend(EventAppendParams) -> AppendResult {
        name: "event.append",
        summary: "Append one event; answered once it is on disk.",
        params: &[
            RUN_PARAM,
            ParamSpec {
                name: "node",
                required: false,
                schema: r#"{"type":"string","pattern":"^[a-z0-9][a-z0-9-]{0,62}$"}"#,
                doc: "the node the event is about",
            },
            ParamSpec {
                name: "type",
                required: true,
                schema: r#"{"type":"string","description":"an event type a client may append to this kind of run, or x.<name>"}"#,
                doc: "the event type",
            },
            ParamSpec {
                name: "data",
                required: false,
                schema: r#"{"type":"object","description":"at most 64 KiB"}"#,
                doc: "the payload",
            },
            ParamSpec {
                name: "idempotency_key",
                required: false,
                schema: r#"{"type":"string","maxLength":128}"#,
                doc: "a repeat with the same key returns the first append's seq and id and writes nothing",
            },
            ParamSpec {
                name: "actor",
                required: false,
                schema: r#"{"type":"string","enum":["agent","human","tool"]}"#,
                doc: "who says it (default human)",
            },
        ],
        result: r#"{"type":"object","required":["seq","id"],"properties":{"seq":{"type":"integer"},"id":{"type":"string"}}}"#,
    },
    EventList(EventListParams) -> Vec<Event> {
        name: "event.list",
        summary: "A run's events after a seq.",
        params: &[
            RUN_PARAM,
            ParamSpec {
                name: "since",
                required: false,
                schema: r#"{"type":"integer","minimum":0}"#,
                doc: "only events with a greater seq (default 0)",
            },
            ParamSpec {
                name: "limit",
                required: false,
                schema: r#"{"type":"integer","minimum":1}"#,
                doc: "at most this many events",
            },
        ],
        result: r##"{"type":"array","items":{"$ref":"#/components/schemas/Event"}}"##,
    },
}
