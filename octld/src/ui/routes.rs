//! The UI's HTTP routes and the checks every request passes.
//!
//! - Every request: its `Host` must be one the UI is served as (a DNS-rebinding page's own
//!   name is refused), and every answer carries the security headers (a CSP without inline
//!   script, no framing, no sniffing, no referrer).
//! - `/` needs the session cookie; `/api/*` the cookie and the page key (`X-Octl-Key`, or
//!   `key=` on the event stream, which `EventSource` cannot give headers); `POST /api/rpc`
//!   also a JSON body and an `Origin` that is the UI's own.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use futures_util::StreamExt;
use serde_json::json;

use octl_proto::rpc::MAX_BODY_BYTES;

use super::auth::LoginRefused;
use super::{assets, Site};
use crate::daemon::Daemon;

pub const COOKIE: &str = "octl_session";
pub const KEY_HEADER: &str = "x-octl-key";
/// The page's own policy: scripts and styles only from the UI's files, no inline ones.
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'; object-src 'none'";
/// How often an idle event stream says it is alive (a proxy or a phone's network would
/// otherwise close it unnoticed).
const HEARTBEAT: std::time::Duration = std::time::Duration::from_secs(15);

pub fn router(daemon: Arc<Daemon>) -> Router {
    Router::new()
        .route("/", get(index))
        .route("/login", get(login))
        .route("/assets/{name}", get(asset))
        .route("/api/session", get(session))
        .route("/api/rpc", post(rpc))
        .route("/api/events", get(events))
        .fallback(|| async { refuse(StatusCode::NOT_FOUND, "no such page") })
        .layer(middleware::from_fn(guard))
        .with_state(daemon)
}

/// A plain-text refusal (it is shown to whoever made the request, never rendered).
fn refuse(status: StatusCode, why: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("{why}\n"),
    )
        .into_response()
}

async fn guard(Extension(site): Extension<Arc<Site>>, req: Request, next: Next) -> Response {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_ascii_lowercase);
    let mut resp = match host {
        Some(h) if site.hosts.contains(&h) => next.run(req).await,
        _ => refuse(
            StatusCode::MISDIRECTED_REQUEST,
            "this UI is not served under that host name (add it to [ui] hosts)",
        ),
    };
    let h = resp.headers_mut();
    let set = |h: &mut HeaderMap, k: &'static str, v: &'static str| {
        h.insert(k, HeaderValue::from_static(v));
    };
    set(h, "content-security-policy", CSP);
    set(h, "x-content-type-options", "nosniff");
    set(h, "x-frame-options", "DENY");
    set(h, "referrer-policy", "no-referrer");
    set(h, "cross-origin-opener-policy", "same-origin");
    set(h, "cross-origin-resource-policy", "same-origin");
    if !h.contains_key(header::CACHE_CONTROL) {
        set(h, "cache-control", "no-store");
    }
    if site.https {
        set(h, "strict-transport-security", "max-age=31536000");
    }
    resp
}

fn cookie_of(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v)
}

/// Whether the request is a live session's: its cookie, and its page key unless `page`.
fn signed_in(daemon: &Daemon, headers: &HeaderMap, key: Option<&str>, page: bool) -> bool {
    let Some(cookie) = cookie_of(headers) else {
        return false;
    };
    let key = key.or_else(|| headers.get(KEY_HEADER).and_then(|v| v.to_str().ok()));
    match (page, key) {
        (true, _) => daemon.ui.auth.check(cookie, None),
        (false, Some(k)) => daemon.ui.auth.check(cookie, Some(k)),
        (false, None) => false,
    }
}

const SIGN_IN: &str =
    "not signed in: open the link `orchestratectl ui` prints (it works once, for 10 minutes)";

async fn index(State(daemon): State<Arc<Daemon>>, headers: HeaderMap) -> Response {
    if !signed_in(&daemon, &headers, None, true) {
        return refuse(StatusCode::UNAUTHORIZED, SIGN_IN);
    }
    asset_response("index.html")
}

#[derive(serde::Deserialize)]
struct LoginQuery {
    token: Option<String>,
}

async fn login(
    State(daemon): State<Arc<Daemon>>,
    Extension(site): Extension<Arc<Site>>,
    Query(q): Query<LoginQuery>,
) -> Response {
    let token = q.token.unwrap_or_default();
    match daemon.ui.auth.login(&token) {
        Ok(s) => {
            let secure = if site.https { "; Secure" } else { "" };
            let cookie = format!(
                "{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}{secure}",
                s.cookie,
                super::auth::SESSION_IDLE.as_secs()
            );
            // The key goes to the page once, in markup only our own script reads; the
            // script keeps it in this origin's storage and opens the UI.
            let page = format!(
                "<!doctype html><html><head><meta charset=\"utf-8\"><meta name=\"octl-key\" content=\"{}\"><title>orchestratectl</title><script type=\"module\" src=\"/assets/login.js\"></script></head><body><p>Signing in…</p></body></html>",
                s.key
            );
            (
                [
                    (header::SET_COOKIE, cookie),
                    (header::CONTENT_TYPE, "text/html; charset=utf-8".into()),
                ],
                page,
            )
                .into_response()
        }
        Err(LoginRefused::BadToken) => refuse(
            StatusCode::UNAUTHORIZED,
            "this login link is unknown, used or expired: run `orchestratectl ui` for a new one",
        ),
        Err(LoginRefused::Limited(wait)) => {
            let mut r = refuse(
                StatusCode::TOO_MANY_REQUESTS,
                &format!("too many failed logins: try again in {wait} s"),
            );
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(wait));
            r
        }
    }
}

async fn asset(axum::extract::Path(name): axum::extract::Path<String>) -> Response {
    if name == "index.html" {
        return refuse(StatusCode::NOT_FOUND, "no such file");
    }
    asset_response(&name)
}

fn asset_response(name: &str) -> Response {
    match assets::get(name) {
        Some((bytes, mime)) => ([(header::CONTENT_TYPE, mime)], bytes).into_response(),
        None => refuse(StatusCode::NOT_FOUND, "no such file"),
    }
}

async fn session(State(daemon): State<Arc<Daemon>>, headers: HeaderMap) -> Response {
    if !signed_in(&daemon, &headers, None, false) {
        return refuse(StatusCode::UNAUTHORIZED, SIGN_IN);
    }
    axum::Json(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "pid": std::process::id(),
        "started": daemon.started_at(),
    }))
    .into_response()
}

async fn rpc(
    State(daemon): State<Arc<Daemon>>,
    Extension(site): Extension<Arc<Site>>,
    req: Request,
) -> Response {
    let headers = req.headers();
    if !signed_in(&daemon, headers, None, false) {
        return refuse(StatusCode::UNAUTHORIZED, SIGN_IN);
    }
    // The page's own origin only: scheme and the host it was served as.
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    let own = format!("{}://{host}", site.scheme());
    if headers.get(header::ORIGIN).and_then(|o| o.to_str().ok()) != Some(own.as_str()) {
        return refuse(StatusCode::FORBIDDEN, "a change needs the UI's own Origin");
    }
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|c| c.to_str().ok())
        .is_some_and(|c| {
            c.split(';')
                .next()
                .is_some_and(|m| m.trim() == "application/json")
        });
    if !json {
        return refuse(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "the body must be application/json",
        );
    }
    let body: Bytes = match axum::body::to_bytes(req.into_body(), MAX_BODY_BYTES).await {
        Ok(b) => b,
        Err(_) => return refuse(StatusCode::PAYLOAD_TOO_LARGE, "request body over 1 MiB"),
    };
    let work = crate::server::jsonrpc::handle(&daemon, &body, None);
    match tokio::time::timeout(crate::server::routes::REQUEST_TIMEOUT, work).await {
        Ok(Some(reply)) => ([(header::CONTENT_TYPE, "application/json")], reply).into_response(),
        Ok(None) => StatusCode::NO_CONTENT.into_response(),
        Err(_) => refuse(StatusCode::REQUEST_TIMEOUT, "the request took too long"),
    }
}

#[derive(serde::Deserialize)]
struct EventsQuery {
    since: Option<String>,
    key: Option<String>,
}

/// The change feed as server-sent events: a `hello` naming the daemon (a new pid after a
/// restart), then each item with its cursor as the event id, so the browser's automatic
/// reconnection resumes after the last one it got (`Last-Event-ID`).
async fn events(
    State(daemon): State<Arc<Daemon>>,
    headers: HeaderMap,
    Query(q): Query<EventsQuery>,
) -> Response {
    if !signed_in(&daemon, &headers, q.key.as_deref(), false) {
        return refuse(StatusCode::UNAUTHORIZED, SIGN_IN);
    }
    let resumed = headers.get("last-event-id").and_then(|v| v.to_str().ok());
    let since = resumed.or(q.since.as_deref()).unwrap_or("now");
    let (start, feed) = match crate::server::feed::open(&daemon, Some(since), true) {
        Ok(x) => x,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, &e.to_string()),
    };
    let hello = format!(
        "retry: 1000\nevent: hello\ndata: {}\n\n",
        json!({"cursor": start, "pid": std::process::id(), "started": daemon.started_at()})
    );
    // The feed's chunks are whole lines of FeedItem JSON.
    #[derive(serde::Deserialize)]
    struct Cursor {
        cursor: String,
    }
    let items = feed.map(|chunk| {
        let chunk = chunk.unwrap_or_default();
        let mut out = String::new();
        for line in chunk.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            let Ok(c) = serde_json::from_slice::<Cursor>(line) else {
                continue;
            };
            out.push_str("id: ");
            out.push_str(&c.cursor);
            out.push_str("\ndata: ");
            out.push_str(&String::from_utf8_lossy(line));
            out.push_str("\n\n");
        }
        Ok::<_, std::convert::Infallible>(Bytes::from(out))
    });
    // A heartbeat while the feed is quiet; the stream ends with the feed's (a shutdown).
    let ticks = tokio::time::interval(HEARTBEAT);
    let items = futures_util::stream::unfold(
        (Box::pin(items), ticks),
        |(mut items, mut ticks)| async move {
            tokio::select! {
                next = items.next() => next.map(|b| (b, (items, ticks))),
                _ = ticks.tick() => Some((Ok(Bytes::from_static(b": alive\n\n")), (items, ticks))),
            }
        },
    );
    let body = futures_util::stream::once(async move { Ok(Bytes::from(hello)) }).chain(items);
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from_stream(body))
        .expect("static response parts")
}
