//! JSON-RPC 2.0, exactly: a single request or a batch; notifications (no `id`) get no
//! response, and a batch of only notifications gets no body at all.

use std::sync::Arc;

use futures_util::stream::{self, StreamExt};
use serde_json::value::RawValue;
use serde_json::Value;

use octl_proto::rpc::{error_object, error_response, JSONRPC_VERSION};
use octl_proto::{AppError, ErrorKind};

use super::agent::Scope;
use crate::daemon::Daemon;
use crate::rpc;

/// Members of one batch in flight at once. Each holds a future as large as the largest
/// method's (~3.5 KiB), so a batch run all at once held that much per member on top of its
/// parsed body: a 1 MiB batch of `daemon.status` peaked at 88 MiB resident, one of 8,000
/// appends at 48 MiB (26 and 22 MiB with this bound). 256 in flight still share group commits,
/// and a batch of 1,000 appends answers no slower (≈ 9 groups instead of 2).
const BATCH_IN_FLIGHT: usize = 256;

/// Answers a request body with the JSON text to send back; `None` means nothing to send.
/// `scope`: the request came on a sandboxed node's socket, which serves its methods only.
pub async fn handle(daemon: &Arc<Daemon>, body: &[u8], scope: Option<&Scope>) -> Option<String> {
    let parsed: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => {
            let err = AppError::new(ErrorKind::ParseError, format!("parse error: {e}"));
            return Some(error_response(Value::Null, &err).to_string());
        }
    };
    match parsed {
        Value::Array(items) if items.is_empty() => Some(invalid(None, "an empty batch")),
        // Members of a batch run concurrently, so a batch of appends shares group commits;
        // at most `BATCH_IN_FLIGHT` at once, replies in the batch's order.
        Value::Array(items) => {
            let members = items.len();
            let ids = raw_ids(body, members);
            let replies: Vec<String> = stream::iter(items.into_iter().zip(ids))
                .map(|(item, id)| async move { one(daemon, item, id.as_deref(), scope).await })
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
        other => {
            let id = serde_json::from_slice::<IdOnly>(body)
                .ok()
                .and_then(|i| i.id);
            one(daemon, other, id, scope).await
        }
    }
}

/// A request's `id` as its text: what goes back is what came, byte for byte (a number
/// beyond 2^64, `1e3`), which the parsed value would have rewritten as a double.
#[derive(serde::Deserialize)]
struct IdOnly<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
}

/// Each batch member's id text, in order (`None` where it has none or is not an object).
fn raw_ids(body: &[u8], members: usize) -> Vec<Option<Box<RawValue>>> {
    let items: Vec<&RawValue> = serde_json::from_slice(body).unwrap_or_default();
    let mut ids: Vec<Option<Box<RawValue>>> = items
        .into_iter()
        .map(|item| {
            serde_json::from_str::<IdOnly>(item.get())
                .ok()
                .and_then(|i| i.id)
                .map(|raw| raw.to_owned())
        })
        .collect();
    ids.resize(members, None);
    ids
}

async fn one(
    daemon: &Arc<Daemon>,
    item: Value,
    raw_id: Option<&RawValue>,
    scope: Option<&Scope>,
) -> Option<String> {
    let Value::Object(mut req) = item else {
        return Some(invalid(None, "a request must be a JSON object"));
    };
    // An `id` that is present but not a string, number or null cannot be echoed back; one
    // that is goes back as its own text.
    let id: Option<Box<RawValue>> = match req.remove("id") {
        None => None,
        Some(v @ (Value::String(_) | Value::Number(_) | Value::Null)) => Some(match raw_id {
            Some(raw) => raw.to_owned(),
            None => RawValue::from_string(v.to_string()).expect("a value is JSON"),
        }),
        Some(_) => return Some(invalid(None, "id must be a string, a number or null")),
    };
    let reply_id = id.as_deref();
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
                reply_id,
                Err(AppError::invalid(
                    "params must be given by name, as an object such as {\"run\":\"01JDXJ…\"}",
                )),
            )
        }
        Some(_) => return Some(invalid(reply_id, "params must be an object")),
    };
    let params = params.unwrap_or_default();
    if let Some(Err(e)) = scope.map(|s| s.permits(&method, &params)) {
        tracing::warn!(error = %e.message, method, "refused a sandboxed agent's request");
        return reply(reply_id, Err(e));
    }
    let mut result = rpc::dispatch(daemon, &method, Value::Object(params)).await;
    if let (Some(s), Ok(r)) = (scope, &mut result) {
        s.redact(&method, r);
    }
    if let Err(e) = &result {
        if e.kind == ErrorKind::Internal {
            tracing::error!(method, error = %e.message, "internal error");
        }
    }
    reply(reply_id, result)
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
    Answered {
        id: &'a RawValue,
        jsonrpc: &'static str,
        result: &'a RawValue,
    },
}

fn reply(id: Option<&RawValue>, result: Result<Box<RawValue>, AppError>) -> Option<String> {
    let id = id?;
    let jsonrpc = JSONRPC_VERSION;
    let reply = match &result {
        Ok(result) => Reply::Answered {
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

/// An invalid request's answer, to `id` (`None`: its id could not be read, so `null`).
fn invalid(id: Option<&RawValue>, why: &str) -> String {
    let null = RawValue::from_string("null".into()).expect("null is JSON");
    let err = AppError::new(ErrorKind::InvalidRequest, format!("invalid request: {why}"));
    reply(Some(id.unwrap_or(&null)), Err(err)).expect("an id was given")
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
