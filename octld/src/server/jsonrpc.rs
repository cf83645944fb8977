//! JSON-RPC 2.0, exactly: a single request or a batch; notifications (no `id`) get no
//! response, and a batch of only notifications gets no body at all.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures_util::stream::{self, StreamExt};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use octl_proto::rpc::{error_object, error_response, JSONRPC_VERSION};
use octl_proto::{AppError, ErrorKind};

use crate::daemon::Daemon;
use crate::rpc::{self, Answer};

/// Members of one batch in flight at once. Each holds a future as large as the largest
/// method's (~3.5 KiB), so a batch run all at once held that much per member on top of its
/// parsed body: a 1 MiB batch of `daemon.status` peaked at 88 MiB resident, one of 8,000
/// appends at 48 MiB (26 and 22 MiB with this bound). 256 in flight still share group commits,
/// and a batch of 1,000 appends answers no slower (≈ 9 groups instead of 2).
const BATCH_IN_FLIGHT: usize = 256;

/// Answers a request body with the JSON text to send back; `None` means nothing to send.
pub async fn handle(daemon: &Arc<Daemon>, body: &[u8]) -> Option<String> {
    let parse_error = |e: serde_json::Error| {
        let err = AppError::new(ErrorKind::ParseError, format!("parse error: {e}"));
        Some(error_response(Value::Null, &err).to_string())
    };
    // Members stay raw text until each is read: a request's `id` goes back exactly as sent
    // (a number beyond 2^64, `1e3`), which a parsed `Value` would have rewritten.
    let parsed: &RawValue = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => return parse_error(e),
    };
    if !parsed.get().starts_with('[') {
        return one(daemon, parsed).await;
    }
    let items: Vec<Box<RawValue>> = match serde_json::from_str(parsed.get()) {
        Ok(items) => items,
        Err(e) => return parse_error(e),
    };
    if items.is_empty() {
        return Some(invalid(NULL_ID, "an empty batch"));
    }
    // Members of a batch run concurrently, so a batch of appends shares group commits; at
    // most `BATCH_IN_FLIGHT` at once, replies in the batch's order.
    let members = items.len();
    let replies: Vec<String> = stream::iter(items)
        .map(|item| async move { one(daemon, &item).await })
        .buffered(BATCH_IN_FLIGHT)
        .collect::<Vec<Option<String>>>()
        .await
        .into_iter()
        .flatten()
        .collect();
    if members >= LARGE_BATCH {
        release_freed_memory();
    }
    (!replies.is_empty()).then(|| format!("[{}]", replies.join(",")))
}

/// The id of a reply to a request whose own id could not be read.
const NULL_ID: &str = "null";

async fn one(daemon: &Arc<Daemon>, item: &RawValue) -> Option<String> {
    let Ok(mut req) = serde_json::from_str::<BTreeMap<String, &RawValue>>(item.get()) else {
        return Some(invalid(NULL_ID, "a request must be a JSON object"));
    };
    // An `id` that is present but not a string, number or null cannot be echoed back.
    let id: Option<&str> = match req.remove("id").map(RawValue::get) {
        None => None,
        Some(raw)
            if raw == "null"
                || raw
                    .starts_with(['"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9']) =>
        {
            Some(raw)
        }
        Some(_) => return Some(invalid(NULL_ID, "id must be a string, a number or null")),
    };
    let reply_id = id.unwrap_or(NULL_ID);
    let text = |key: &str| {
        req.get(key)
            .and_then(|raw| serde_json::from_str::<String>(raw.get()).ok())
    };
    if text("jsonrpc").as_deref() != Some(JSONRPC_VERSION) {
        return Some(invalid(reply_id, "jsonrpc must be \"2.0\""));
    }
    let Some(method) = text("method") else {
        return Some(invalid(reply_id, "method must be a string"));
    };
    if let Some(extra) = req
        .keys()
        .find(|k| !["jsonrpc", "method", "params"].contains(&k.as_str()))
    {
        return Some(invalid(
            reply_id,
            &format!("unknown member {extra:?}: a request has jsonrpc, method, params and id"),
        ));
    }
    let params = match req
        .get("params")
        .map(|raw| serde_json::from_str::<Value>(raw.get()))
    {
        None => Map::new(),
        Some(Ok(Value::Object(p))) => p,
        Some(Ok(Value::Array(_))) => {
            return reply(
                id,
                Err(AppError::invalid(
                    "params must be given by name, as an object such as {\"run\":\"01JDXJ…\"}",
                )),
            )
        }
        Some(_) => return Some(invalid(reply_id, "params must be an object")),
    };
    let result = rpc::dispatch(daemon, &method, Value::Object(params)).await;
    if let Err(e) = &result {
        if e.kind == ErrorKind::Internal {
            tracing::error!(method, error = %e.message, "internal error");
        }
    }
    reply(id, result)
}

/// A reply's members, in the order every reply has them; `id` is the request's own text.
#[derive(serde::Serialize)]
#[serde(untagged)]
enum Reply<'a> {
    Failed {
        error: Value,
        id: &'a RawValue,
        jsonrpc: &'static str,
    },
    Value {
        id: &'a RawValue,
        jsonrpc: &'static str,
        result: Value,
    },
    Raw {
        id: &'a RawValue,
        jsonrpc: &'static str,
        result: &'a RawValue,
    },
}

fn reply(id: Option<&str>, result: Result<Answer, AppError>) -> Option<String> {
    let raw: Box<RawValue> = RawValue::from_string(id?.to_string()).expect("an id read as JSON");
    let id = &*raw;
    let jsonrpc = JSONRPC_VERSION;
    let reply = match &result {
        Ok(Answer::Value(v)) => Reply::Value {
            id,
            jsonrpc,
            result: v.clone(),
        },
        Ok(Answer::Raw(result)) => Reply::Raw {
            id,
            jsonrpc,
            result,
        },
        Err(e) => Reply::Failed {
            error: error_object(e),
            id,
            jsonrpc,
        },
    };
    Some(serde_json::to_string(&reply).expect("a reply serializes"))
}

fn invalid(id: &str, why: &str) -> String {
    let err = AppError::new(ErrorKind::InvalidRequest, format!("invalid request: {why}"));
    reply(Some(id), Err(err)).expect("an id was given")
}

/// Members from which a batch's freed memory is handed back at once (see
/// [`release_freed_memory`]).
const LARGE_BATCH: usize = 64;

/// Gives the pages a large batch freed back to the system. glibc keeps freed memory in the
/// arena of the worker thread that allocated it and returns only what lies at an arena's top,
/// which allocations that outlive the batch (the runs' published views, new runs' handles)
/// pin: after 100 runs each sent 1,000 appends in one batch, the heaps held 8.9 MiB for
/// 2.5 MiB in use, 14.1 MiB resident; trimmed after each batch, 10.6–10.9 MiB. One trim took
/// ~0.35 ms against ~15–50 ms for such a batch.
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only hands free pages back to the system; it has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}
