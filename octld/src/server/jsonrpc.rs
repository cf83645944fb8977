//! JSON-RPC 2.0, exactly: a single request or a batch; notifications (no `id`) get no
//! response, and a batch of only notifications gets no body at all.

use std::sync::Arc;

use futures_util::stream::{self, StreamExt};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use octl_proto::rpc::{error_response, result_response, JSONRPC_VERSION};
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
    let parsed: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => {
            let err = AppError::new(ErrorKind::ParseError, format!("parse error: {e}"));
            return Some(error_response(Value::Null, &err).to_string());
        }
    };
    match parsed {
        Value::Array(items) if items.is_empty() => Some(
            error_response(
                Value::Null,
                &AppError::new(ErrorKind::InvalidRequest, "invalid request: an empty batch"),
            )
            .to_string(),
        ),
        // Members of a batch run concurrently, so a batch of appends shares group commits;
        // at most `BATCH_IN_FLIGHT` at once, replies in the batch's order.
        Value::Array(items) => {
            let members = items.len();
            let replies: Vec<String> = stream::iter(items)
                .map(|item| one(daemon, item))
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
        other => one(daemon, other).await,
    }
}

async fn one(daemon: &Arc<Daemon>, item: Value) -> Option<String> {
    let Value::Object(mut req) = item else {
        return Some(invalid(Value::Null, "a request must be a JSON object"));
    };
    // An `id` that is present but not a string, number or null cannot be echoed back.
    let id = match req.remove("id") {
        None => None,
        Some(v @ (Value::String(_) | Value::Number(_) | Value::Null)) => Some(v),
        Some(_) => {
            return Some(invalid(
                Value::Null,
                "id must be a string, a number or null",
            ))
        }
    };
    let reply_id = id.clone().unwrap_or(Value::Null);
    if req.get("jsonrpc") != Some(&Value::String(JSONRPC_VERSION.into())) {
        return Some(invalid(reply_id, "jsonrpc must be \"2.0\""));
    }
    let method = match req.remove("method") {
        Some(Value::String(m)) => m,
        _ => return Some(invalid(reply_id, "method must be a string")),
    };
    let params = req.remove("params");
    req.remove("jsonrpc");
    if let Some(extra) = req.keys().next() {
        return Some(invalid(
            reply_id,
            &format!("unknown member {extra:?}: a request has jsonrpc, method, params and id"),
        ));
    }
    let params = match params {
        None => None,
        Some(Value::Object(p)) => Some(p),
        Some(Value::Array(_)) => {
            return reply(
                id,
                Err(AppError::invalid(
                    "params must be given by name, as an object such as {\"run\":\"01JDXJ…\"}",
                )),
            )
        }
        Some(_) => return Some(invalid(reply_id, "params must be an object")),
    };
    let result = rpc::dispatch(
        daemon,
        &method,
        params
            .map(Value::Object)
            .unwrap_or(Value::Object(Map::new())),
    )
    .await;
    if let Err(e) = &result {
        if e.kind == ErrorKind::Internal {
            tracing::error!(method, error = %e.message, "internal error");
        }
    }
    reply(id, result)
}

fn reply(id: Option<Value>, result: Result<Answer, AppError>) -> Option<String> {
    let id = id?;
    Some(match result {
        Ok(Answer::Value(v)) => result_response(id, v).to_string(),
        Ok(Answer::Raw(result)) => {
            // Members in the order a `Value` map would have them, like every other reply.
            #[derive(serde::Serialize)]
            struct Reply<'a> {
                id: &'a Value,
                jsonrpc: &'static str,
                result: &'a RawValue,
            }
            serde_json::to_string(&Reply {
                id: &id,
                jsonrpc: JSONRPC_VERSION,
                result: &result,
            })
            .expect("a reply serializes")
        }
        Err(e) => error_response(id, &e).to_string(),
    })
}

fn invalid(id: Value, why: &str) -> String {
    error_response(
        id,
        &AppError::new(ErrorKind::InvalidRequest, format!("invalid request: {why}")),
    )
    .to_string()
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
