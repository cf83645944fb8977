//! One line of `events.jsonl` and the rules on what goes into one.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::AppError;

/// Largest accepted `data` payload, serialized.
pub const MAX_DATA_BYTES: usize = 64 * 1024;
/// Deepest accepted nesting of `data`, the object itself being level 1. JSON parsers limit
/// nesting (serde_json at 128 levels) and an event travels inside envelopes (an `event.list`
/// answer, a node in `run show`) that add levels: a payload any deeper could be appended but
/// then never read back by a client.
pub const MAX_DATA_DEPTH: usize = 64;

/// Who said it. Clients say `agent`, `human` or `tool`; the daemon's own events say `daemon`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Actor {
    Daemon,
    Agent,
    #[default]
    Human,
    Tool,
}

/// One event, exactly as stored: `{"v":1,"seq":…,"id":…,"ts":…,"run":…,"node":…,"type":…,
/// "actor":…,"data":{…}}`. `node` is absent for run-level events; `idempotency_key` only when
/// the client gave one (it is kept in the log so a retry after a restart is still recognised).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Event {
    pub v: u32,
    pub seq: u64,
    pub id: String,
    pub ts: String,
    pub run: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    #[serde(rename = "type")]
    pub kind: String,
    pub actor: Actor,
    pub data: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
}

impl Event {
    /// The line as written to `events.jsonl`, without the trailing newline.
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).expect("an event always serializes")
    }

    /// Parses one line (without its newline). The error says what is wrong with it.
    pub fn from_line(line: &str) -> Result<Event, String> {
        let ev: Event = serde_json::from_str(line).map_err(|e| e.to_string())?;
        if ev.v != crate::EVENT_VERSION {
            return Err(format!("unsupported event version {}", ev.v));
        }
        Ok(ev)
    }

    /// The event's typed payload. The caller has matched its type.
    pub fn payload<P: Payload>(&self) -> Result<P, AppError> {
        debug_assert_eq!(self.kind, P::TYPE, "payload of the wrong type");
        P::from_data(&self.data)
    }

    pub fn str_field(&self, key: &str) -> Option<&str> {
        self.data.get(key).and_then(Value::as_str)
    }
}

pub mod field;
pub mod payload;
pub mod settings;

pub use field::Nullable;
pub use payload::*;
pub use settings::{BestOf, Criterion, Judge, RunSettings, DEFAULT_RANK};

/// The `data` of one event type ([`payload`] declares them all), bound to its type name.
pub trait Payload: Serialize + Sized {
    const TYPE: &'static str;

    /// Reads the payload from an event's data; the error names the field and the form it
    /// accepts. Keys it does not name are ignored (or kept, for events a client may append).
    fn from_data(data: &Map<String, Value>) -> Result<Self, AppError>;

    /// The data as written to the log.
    fn to_data(&self) -> Map<String, Value> {
        match serde_json::to_value(self) {
            Ok(Value::Object(m)) => m,
            other => unreachable!("a payload serializes to an object, not {other:?}"),
        }
    }
}

/// Is this a custom type, `x.<name>` with name `[a-z0-9][a-z0-9._-]{0,62}`?
pub fn is_custom_type(t: &str) -> bool {
    match t.strip_prefix("x.") {
        Some(name) => {
            let b = name.as_bytes();
            !b.is_empty()
                && b.len() <= 63
                && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
                && b.iter().all(|c| {
                    c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'.' | b'_' | b'-')
                })
        }
        None => false,
    }
}

/// Validates the `type` field's form (not whether this client may append it).
pub fn validate_type(t: &str) -> Result<(), AppError> {
    if KNOWN_TYPES.contains(&t) || is_custom_type(t) {
        Ok(())
    } else {
        Err(AppError::invalid(format!(
            "invalid type {t:?}: use a known event type (node.progress, node.done, …) or a custom x.<name> with a-z, 0-9, '.', '_', '-'"
        )))
    }
}

/// Validates the `data` field: a JSON object of at most 64 KiB, nested at most 64 levels
/// deep. Returns the object.
pub fn validate_data(data: Option<Value>) -> Result<Map<String, Value>, AppError> {
    match data {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(map)) => {
            let len = serde_json::to_vec(&map)
                .map(|v| v.len())
                .unwrap_or(usize::MAX);
            let depth = 1 + map.values().map(nesting).max().unwrap_or(0);
            if len > MAX_DATA_BYTES {
                Err(AppError::invalid(format!(
                    "invalid data: {len} bytes; a JSON object of at most {MAX_DATA_BYTES} bytes (64 KiB) is accepted"
                )))
            } else if depth > MAX_DATA_DEPTH {
                Err(AppError::invalid(format!(
                    "invalid data: nested {depth} levels deep; at most {MAX_DATA_DEPTH} levels of objects and arrays are accepted"
                )))
            } else {
                Ok(map)
            }
        }
        Some(other) => Err(AppError::invalid(format!(
            "invalid data: got a JSON {}; a JSON object such as {{\"message\":\"…\"}} is accepted",
            json_type_name(&other)
        ))),
    }
}

/// Levels of arrays and objects in `v` (0 for a scalar).
fn nesting(v: &Value) -> usize {
    match v {
        Value::Array(items) => 1 + items.iter().map(nesting).max().unwrap_or(0),
        Value::Object(map) => 1 + map.values().map(nesting).max().unwrap_or(0),
        _ => 0,
    }
}

pub fn json_type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn line_round_trip_keeps_field_order() {
        let ev = Event {
            v: 1,
            seq: 7,
            id: "01JDXK0000000000000000000A".into(),
            ts: "2026-11-30T10:00:00.123Z".into(),
            run: "01JDXJ0000000000000000000A".into(),
            node: Some("api".into()),
            kind: "node.done".into(),
            actor: Actor::Agent,
            data: json!({"message": "added endpoint"})
                .as_object()
                .unwrap()
                .clone(),
            idempotency_key: None,
        };
        let line = ev.to_line();
        assert!(line.starts_with(r#"{"v":1,"seq":7,"id":"#), "{line}");
        assert!(line.contains(r#""type":"node.done","actor":"agent""#));
        assert_eq!(Event::from_line(&line).unwrap(), ev);
    }

    #[test]
    fn types_and_data() {
        assert!(validate_type("node.done").is_ok());
        assert!(validate_type("x.build-42").is_ok());
        assert!(validate_type("x.").is_err());
        assert!(validate_type("node.exploded").is_err());
        assert!(validate_data(Some(json!([1])))
            .unwrap_err()
            .message
            .contains("array"));
        let big = "a".repeat(MAX_DATA_BYTES);
        assert!(validate_data(Some(json!({ "b": big }))).is_err());
        assert!(validate_data(None).unwrap().is_empty());
    }
}
