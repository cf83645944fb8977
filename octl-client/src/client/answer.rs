//! Reading the daemon's answers: a JSON-RPC response into its result (kept as the daemon
//! wrote it) or its error, and an HTTP error answer (the stream endpoints' flat error form, or
//! one derived from the status) into an [`AppError`]. Pure functions of the bytes received.

use hyper::StatusCode;
use octl_proto::rpc::error_from_object;
use octl_proto::{AppError, ErrorKind};
use serde_json::value::RawValue;
use serde_json::Value;

/// Turns an HTTP answer to a JSON-RPC request into its result (as the daemon wrote it) or
/// its error.
pub fn parse_rpc_response(
    method: &str,
    status: StatusCode,
    body: &[u8],
) -> Result<Box<RawValue>, AppError> {
    /// Only the members read here; the result stays text until someone needs its values.
    #[derive(serde::Deserialize)]
    struct Reply {
        // `null` is a result too: present, unlike a missing member.
        #[serde(default, deserialize_with = "present")]
        result: Option<Box<RawValue>>,
        error: Option<Value>,
    }
    fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Box<RawValue>>, D::Error> {
        serde::Deserialize::deserialize(d).map(Some)
    }
    if let Ok(reply) = serde_json::from_slice::<Reply>(body) {
        if let Some(err) = &reply.error {
            return Err(error_of(err));
        }
        if status.is_success() {
            if let Some(result) = reply.result {
                return Ok(result);
            }
        }
    }
    if status.is_success() {
        return Err(AppError::internal(format!(
            "octld's answer to {method} is not a JSON-RPC response: {}",
            crate::output::truncate(&String::from_utf8_lossy(body), 200)
        )));
    }
    Err(http_error(status, body))
}

/// A result's values.
pub fn value_of(method: &str, raw: &RawValue) -> Result<Value, AppError> {
    serde_json::from_str(raw.get()).map_err(|e| {
        AppError::internal(format!("octld's answer to {method} is not valid JSON: {e}"))
    })
}

/// An error from an HTTP error answer: the JSON error in its body when there is one,
/// else one derived from the status (403 → `unauthorized`, 413 → `too_large`, …).
pub fn http_error(status: StatusCode, body: &[u8]) -> AppError {
    if let Some(err) = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v.get("error").cloned())
    {
        return error_of(&err);
    }
    let kind = match status {
        StatusCode::FORBIDDEN | StatusCode::UNAUTHORIZED => ErrorKind::Unauthorized,
        StatusCode::PAYLOAD_TOO_LARGE => ErrorKind::TooLarge,
        StatusCode::NOT_FOUND => ErrorKind::NotFound,
        StatusCode::BAD_REQUEST => ErrorKind::InvalidParams,
        StatusCode::REQUEST_TIMEOUT => ErrorKind::Timeout,
        StatusCode::SERVICE_UNAVAILABLE => ErrorKind::ShuttingDown,
        _ => ErrorKind::Internal,
    };
    AppError::new(
        kind,
        format!(
            "octld answered HTTP {status}: {}",
            crate::output::truncate(String::from_utf8_lossy(body).trim(), 200)
        ),
    )
}

/// Reads an error object in either form the daemon uses: JSON-RPC (`{code, message,
/// data: {kind, hint}}`) or the stream endpoint's (`{kind, message, hint}`).
pub fn error_of(err: &Value) -> AppError {
    match err.get("kind").and_then(Value::as_str) {
        Some(kind) if err.get("data").is_none() => AppError {
            kind: ErrorKind::from_str_lossy(kind),
            message: err
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("octld reported an error without a message")
                .to_string(),
            hint: err.get("hint").and_then(Value::as_str).map(str::to_string),
        },
        _ => error_from_object(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rpc_results_and_errors() {
        let ok = br#"{"jsonrpc":"2.0","id":1,"result":{"seq":3,"id":"X"}}"#;
        assert_eq!(
            value_of(
                "event.append",
                &parse_rpc_response("event.append", StatusCode::OK, ok).unwrap()
            )
            .unwrap(),
            json!({"seq":3,"id":"X"})
        );
        let null = br#"{"jsonrpc":"2.0","id":1,"result":null}"#;
        assert_eq!(
            parse_rpc_response("x", StatusCode::OK, null).unwrap().get(),
            "null"
        );
        let err = br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"no run ABCDEF","data":{"kind":"not_found","hint":"list runs"}}}"#;
        let e = parse_rpc_response("run.show", StatusCode::OK, err).unwrap_err();
        assert_eq!(e.kind, ErrorKind::NotFound);
        assert_eq!(e.hint.as_deref(), Some("list runs"));
        let forbidden = br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32008,"message":"uid 1000 is not the owner","data":{"kind":"unauthorized"}}}"#;
        let e = parse_rpc_response("run.list", StatusCode::FORBIDDEN, forbidden).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Unauthorized);
        assert_eq!(e.kind.exit_code(), 4);
        let e = parse_rpc_response("run.list", StatusCode::PAYLOAD_TOO_LARGE, b"").unwrap_err();
        assert_eq!(e.kind, ErrorKind::TooLarge);
        let e = parse_rpc_response("run.list", StatusCode::OK, b"garbage").unwrap_err();
        assert_eq!(e.kind, ErrorKind::Internal);
    }

    #[test]
    fn stream_errors_use_the_flat_form() {
        let e = http_error(
            StatusCode::NOT_FOUND,
            br#"{"error":{"kind":"not_found","message":"no run ABCDEF"}}"#,
        );
        assert_eq!(e.kind, ErrorKind::NotFound);
        assert_eq!(e.message, "no run ABCDEF");
    }
}
