//! HTTP routes, request limits and error bodies.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use serde_json::{json, Value};

use octl_proto::rpc::{self, MAX_BODY_BYTES, RPC_PATH};
use octl_proto::{AppError, ErrorKind};

use super::{feed, jsonrpc, stream};
use crate::daemon::Daemon;

/// How long one JSON-RPC request (reading the body and answering) may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Whether this connection's peer is the daemon's owner, and (on a sandboxed node's socket)
/// what it may reach.
#[derive(Clone, Debug)]
pub struct Peer {
    pub authorized: bool,
    pub scope: Option<Arc<super::agent::Scope>>,
}

pub fn router(daemon: Arc<Daemon>) -> Router {
    Router::new()
        .route(RPC_PATH, post(rpc_handler))
        .route("/v1/runs/{run}/events", get(stream_handler))
        .route(octl_proto::feed::FEED_PATH, get(feed_handler))
        .fallback(fallback)
        .layer(middleware::from_fn(check_peer))
        .with_state(daemon)
}

async fn check_peer(Extension(peer): Extension<Peer>, req: Request, next: Next) -> Response {
    if !peer.authorized {
        let err = AppError::new(
            ErrorKind::Unauthorized,
            "this daemon serves only the user that owns it",
        );
        return (
            StatusCode::FORBIDDEN,
            json_body(&rpc::error_response(Value::Null, &err)),
        )
            .into_response();
    }
    next.run(req).await
}

fn json_body(v: &Value) -> ([(header::HeaderName, &'static str); 1], String) {
    ([(header::CONTENT_TYPE, "application/json")], v.to_string())
}

/// The HTTP status for an error outside JSON-RPC (streams, limits).
pub fn status_for(kind: ErrorKind) -> StatusCode {
    match kind {
        ErrorKind::NotFound => StatusCode::NOT_FOUND,
        ErrorKind::Unauthorized => StatusCode::FORBIDDEN,
        ErrorKind::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        ErrorKind::RunCorrupt | ErrorKind::InvalidTransition => StatusCode::CONFLICT,
        ErrorKind::ShuttingDown => StatusCode::SERVICE_UNAVAILABLE,
        ErrorKind::Timeout => StatusCode::REQUEST_TIMEOUT,
        ErrorKind::StorageFull => StatusCode::INSUFFICIENT_STORAGE,
        ErrorKind::Internal | ErrorKind::IoError => StatusCode::INTERNAL_SERVER_ERROR,
        _ => StatusCode::BAD_REQUEST,
    }
}

/// `{"error":{"kind","message","hint"}}` with the matching status.
pub fn error_response(err: &AppError) -> Response {
    (status_for(err.kind), json_body(&json!({ "error": err }))).into_response()
}

async fn fallback() -> Response {
    error_response(&AppError::not_found(
        "no such endpoint: use POST /rpc, GET /v1/runs/<RUN>/events or GET /v1/events",
    ))
}

async fn rpc_handler(
    State(daemon): State<Arc<Daemon>>,
    Extension(peer): Extension<Peer>,
    req: Request,
) -> Response {
    let too_large = || {
        let err = AppError::new(
            ErrorKind::TooLarge,
            format!("request body over {MAX_BODY_BYTES} bytes (1 MiB)"),
        );
        (
            StatusCode::PAYLOAD_TOO_LARGE,
            json_body(&rpc::error_response(Value::Null, &err)),
        )
            .into_response()
    };
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES) {
        return too_large();
    }
    let work = async {
        let body: Bytes = match axum::body::to_bytes(req.into_body(), MAX_BODY_BYTES).await {
            Ok(b) => b,
            Err(_) => return too_large(),
        };
        match jsonrpc::handle(&daemon, &body, peer.scope.as_deref()).await {
            Some(reply) => ([(header::CONTENT_TYPE, "application/json")], reply).into_response(),
            None => StatusCode::NO_CONTENT.into_response(),
        }
    };
    match tokio::time::timeout(REQUEST_TIMEOUT, work).await {
        Ok(resp) => resp,
        Err(_) => {
            let err = AppError::new(
                ErrorKind::Timeout,
                format!(
                    "the request took longer than {} s",
                    REQUEST_TIMEOUT.as_secs()
                ),
            );
            json_body(&rpc::error_response(Value::Null, &err)).into_response()
        }
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct StreamQuery {
    since: Option<u64>,
    follow: Option<bool>,
}

async fn stream_handler(
    State(daemon): State<Arc<Daemon>>,
    Extension(peer): Extension<Peer>,
    Path(run): Path<String>,
    query: Result<Query<StreamQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    if let Some(Err(e)) = peer.scope.as_ref().map(|s| s.permits_stream(&run)) {
        return error_response(&e);
    }
    let Query(q) = match query {
        Ok(q) => q,
        Err(e) => {
            return error_response(&AppError::invalid(format!(
                "invalid query: {}; accepted: since=<SEQ>&follow=true|false",
                e.body_text()
            )))
        }
    };
    match stream::open(
        &daemon,
        &run,
        q.since.unwrap_or(0),
        q.follow.unwrap_or(false),
    ) {
        Ok(body) => ndjson(Body::from_stream(body)),
        Err(e) => error_response(&e),
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct FeedQuery {
    since: Option<String>,
    follow: Option<bool>,
}

async fn feed_handler(
    State(daemon): State<Arc<Daemon>>,
    Extension(peer): Extension<Peer>,
    query: Result<Query<FeedQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    if let Some(s) = &peer.scope {
        return error_response(&AppError::new(
            ErrorKind::Unauthorized,
            format!(
                "the change feed is every run's: node {} of run {} reads its own run's events (GET /v1/runs/{}/events)",
                s.node, s.run, s.run
            ),
        ));
    }
    let Query(q) = match query {
        Ok(q) => q,
        Err(e) => {
            return error_response(&AppError::invalid(format!(
                "invalid query: {}; accepted: since=now|<CURSOR>&follow=true|false",
                e.body_text()
            )))
        }
    };
    match feed::open(&daemon, q.since.as_deref(), q.follow.unwrap_or(false)) {
        Ok((start, body)) => {
            let mut resp = ndjson(Body::from_stream(body));
            if let Ok(v) = header::HeaderValue::from_str(&start) {
                resp.headers_mut().insert(feed::CURSOR_HEADER, v);
            }
            resp
        }
        Err(e) => error_response(&e),
    }
}

fn ndjson(body: Body) -> Response {
    Response::builder()
        .header(header::CONTENT_TYPE, "application/x-ndjson")
        .body(body)
        .expect("static response parts")
}
