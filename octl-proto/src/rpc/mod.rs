//! JSON-RPC 2.0 over the daemon's socket. Each family of methods is declared in its own file
//! here, beside its params and result types (`run.rs` for `run.*`, …; the list is in
//! [`crate::method`]); this module holds what they share: the envelope, the error object, the
//! params and results of more than one family, and their JSON Schema fragments. Parameters are
//! by name, named like the CLI's flags, and unknown ones are refused.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::error::{AppError, ErrorKind};

pub(crate) mod daemon;
pub(crate) mod discover;
pub(crate) mod discussion;
pub(crate) mod doctor;
pub(crate) mod event;
pub(crate) mod fanout;
pub(crate) mod gc;
pub(crate) mod merge;
pub(crate) mod node;
pub(crate) mod run;
pub(crate) mod spawn;
pub(crate) mod spinoff;
pub(crate) mod ui;

/// The families' params and result types, each under `rpc::` alone (their files are
/// private; the method types are `method::`).
pub use daemon::*;
pub use discussion::*;
pub use doctor::*;
pub use event::*;
pub use fanout::*;
pub use gc::*;
pub use merge::*;
pub use node::*;
pub use run::*;
pub use spawn::*;
pub use spinoff::*;
pub use ui::*;

pub const JSONRPC_VERSION: &str = "2.0";
/// The HTTP path of JSON-RPC requests.
pub const RPC_PATH: &str = "/rpc";
/// Largest accepted request body.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// `run.show`, `run.rebuild`, `run.quarantine`, `fanout.manifest`: one run by id or unique
/// prefix.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunParams {
    #[schemars(schema_with = "crate::schema::run_ref")]
    pub run: String,
}

/// `event.append` and `node.*` result: where the event went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AppendResult {
    pub seq: u64,
    pub id: String,
}

/// `discussion.list`, `spinoff.list`
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    /// Only this run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::run_ref")]
    pub run: Option<String>,
    /// Only open (true) or answered (false) ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open: Option<bool>,
}

/// A result the daemon wrote as JSON text beforehand (`run.list` copies each run's summary,
/// serialized when the run last changed, instead of building it per call): written out as
/// it is, read back as that text, typed by [`Prewritten::parse`]. Its schema is `T`'s.
#[derive(Debug, Clone)]
pub struct Prewritten<T> {
    raw: Box<serde_json::value::RawValue>,
    of: std::marker::PhantomData<fn() -> T>,
}

impl<T> Prewritten<T> {
    /// `raw` must be the JSON of a `T` (the daemon's own serialization of one).
    pub fn new(raw: Box<serde_json::value::RawValue>) -> Prewritten<T> {
        Prewritten {
            raw,
            of: std::marker::PhantomData,
        }
    }

    /// The JSON text, as written.
    pub fn json(&self) -> &str {
        self.raw.get()
    }
}

impl<T: serde::de::DeserializeOwned> Prewritten<T> {
    /// The `T` it holds; text that is not one is an internal error (the daemon wrote it).
    pub fn parse(&self) -> Result<T, AppError> {
        serde_json::from_str(self.raw.get()).map_err(|e| {
            AppError::internal(format!(
                "a result does not read as {}: {e}",
                std::any::type_name::<T>()
            ))
        })
    }
}

impl<T: schemars::JsonSchema> schemars::JsonSchema for Prewritten<T> {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        T::schema_name()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        T::json_schema(generator)
    }
}

impl<T> Serialize for Prewritten<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.raw.serialize(s)
    }
}

impl<'de, T> Deserialize<'de> for Prewritten<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Box::<serde_json::value::RawValue>::deserialize(d).map(Prewritten::new)
    }
}

/// `{id, run}`: what `discussion.ask` and `spinoff.propose` return.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Opened {
    pub id: String,
    pub run: String,
}

/// A budget as given: a finite amount above zero, or an error naming the field.
pub fn check_budget(field: &str, usd: Option<f64>) -> Result<(), crate::AppError> {
    match usd {
        Some(u) if !(u.is_finite() && u > 0.0) => Err(crate::AppError::invalid(format!(
            "invalid {field} {u}: give an amount in USD above 0, e.g. 2.50"
        ))),
        _ => Ok(()),
    }
}

/// The `error` member of a JSON-RPC response for an [`AppError`].
pub fn error_object(err: &AppError) -> Value {
    let mut data = json!({ "kind": err.kind.as_str() });
    if let Some(hint) = &err.hint {
        data["hint"] = Value::String(hint.clone());
    }
    json!({ "code": err.kind.rpc_code(), "message": err.message, "data": data })
}

/// Reads an [`AppError`] back from a JSON-RPC `error` member.
pub fn error_from_object(v: &Value) -> AppError {
    let message = v
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("the daemon reported an error without a message")
        .to_string();
    let data = v.get("data");
    let kind = data
        .and_then(|d| d.get("kind"))
        .and_then(Value::as_str)
        .map(ErrorKind::from_str_lossy)
        .unwrap_or_else(|| match v.get("code").and_then(Value::as_i64) {
            Some(-32700) => ErrorKind::ParseError,
            Some(-32600) => ErrorKind::InvalidRequest,
            Some(-32601) => ErrorKind::MethodNotFound,
            Some(-32602) => ErrorKind::InvalidParams,
            _ => ErrorKind::Internal,
        });
    AppError {
        kind,
        message,
        hint: data
            .and_then(|d| d.get("hint"))
            .and_then(Value::as_str)
            .map(str::to_string),
    }
}

/// A full response object for a request id.
pub fn error_response(id: Value, err: &AppError) -> Value {
    json!({ "jsonrpc": JSONRPC_VERSION, "id": id, "error": error_object(err) })
}

pub fn result_response(id: Value, result: Value) -> Value {
    json!({ "jsonrpc": JSONRPC_VERSION, "id": id, "result": result })
}

// JSON Schema fragments of params and results more than one family declares.
