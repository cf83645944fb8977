//! The daemon client: JSON-RPC 2.0 over HTTP/1.1 on the Unix socket (hyper's connection-level
//! client on a tokio `UnixStream`, one connection per call), the event stream endpoint, and
//! autostart (start `octld` detached when the socket does not answer).
//!
//! [`Client::call`] starts the daemon when needed (unless `OCTL_NO_AUTOSTART=1`);
//! [`Client::try_call`] never does and tells "not running" apart from other failures, for the
//! commands that must not start it (`daemon status`, `daemon stop`, `event tail`).

use std::ffi::OsString;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{header, Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use octl_proto::feed::{FeedItem, CURSOR_HEADER as FEED_CURSOR_HEADER, FEED_PATH};
use octl_proto::method::{self, Method as _};
use octl_proto::rpc::{error_from_object, JSONRPC_VERSION, RPC_PATH};
use octl_proto::{AppError, ErrorKind};
use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::home::Home;

/// Method `M`'s typed result from its answer; an answer of another shape is an internal error
/// naming the method.
pub fn result_of<M: method::Method>(value: &Value) -> Result<M::Result, AppError> {
    crate::commands::decode(M::NAME, value)
}

fn to_params<T: serde::Serialize>(params: &T) -> Value {
    serde_json::to_value(params).expect("RPC params always serialize")
}

/// How long autostart waits for a new daemon to answer.
pub const START_DEADLINE: Duration = Duration::from_secs(3);
/// How long `daemon stop` waits for the daemon to go away.
pub const STOP_DEADLINE: Duration = Duration::from_secs(5);
/// How long one request may take before the CLI gives up on the daemon.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// How long `daemon status|start|stop` wait for the daemon's status.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// Pause between two polls of the socket.
const POLL_INTERVAL: Duration = Duration::from_millis(25);
/// Longest socket path the kernel accepts (`sun_path` minus its NUL).
const MAX_SOCKET_PATH: usize = 107;

/// Why a call without autostart failed.
#[derive(Debug)]
pub enum CallError {
    /// The socket is missing or refuses connections: no daemon is running. The error is the
    /// `daemon_unreachable` one to show if the caller has nothing better to do.
    NotRunning(AppError),
    /// The daemon answered with an error, or talking to it failed in another way.
    Failed(AppError),
}

impl From<CallError> for AppError {
    fn from(e: CallError) -> AppError {
        match e {
            CallError::NotRunning(e) | CallError::Failed(e) => e,
        }
    }
}

impl From<AppError> for CallError {
    fn from(e: AppError) -> CallError {
        CallError::Failed(e)
    }
}

/// The RPC client of one home's daemon.
pub struct Client {
    home: Home,
    autostart: bool,
}

/// Is autostart turned off by `OCTL_NO_AUTOSTART` (`1`, `true` or `yes`)?
pub fn autostart_disabled(value: Option<OsString>) -> bool {
    match value {
        Some(v) => matches!(
            v.to_string_lossy().trim().to_ascii_lowercase().as_str(),
            "1" | "true" | "yes" | "on"
        ),
        None => false,
    }
}

impl Client {
    /// A client for `home`'s daemon; `autostart` says whether [`Client::call`] may start it.
    pub fn new(home: Home, autostart: bool) -> Client {
        Client { home, autostart }
    }

    pub fn home(&self) -> &Home {
        &self.home
    }

    /// May [`Client::call`] start the daemon?
    pub fn autostart(&self) -> bool {
        self.autostart
    }

    /// Calls method `M` with its typed params, starting the daemon when needed (as
    /// [`Client::call`]), and reads its typed result.
    pub async fn call_method<M: method::Method>(
        &self,
        params: &M::Params,
    ) -> Result<M::Result, AppError> {
        result_of::<M>(&self.call_value::<M>(params).await?)
    }

    /// [`Client::call_method`], with the result as a value as the daemon wrote it: for
    /// printing it unchanged with `--json` ([`result_of`] types it).
    pub async fn call_value<M: method::Method>(
        &self,
        params: &M::Params,
    ) -> Result<Value, AppError> {
        self.call(M::NAME, to_params(params)).await
    }

    /// [`Client::call_raw`] of method `M`.
    pub async fn call_raw_method<M: method::Method>(
        &self,
        params: &M::Params,
    ) -> Result<Box<RawValue>, AppError> {
        self.call_raw(M::NAME, to_params(params)).await
    }

    /// [`Client::try_call`] of method `M`: once, never starting the daemon.
    pub async fn try_call_method<M: method::Method>(
        &self,
        params: &M::Params,
    ) -> Result<Value, CallError> {
        self.try_call(M::NAME, to_params(params)).await
    }

    /// Calls `method` by name (callers name it through its declaration: [`Client::call_method`]),
    /// starting the daemon first if its socket does not answer (unless
    /// autostart is off, in which case the error is `daemon_unreachable`).
    async fn call(&self, method: &str, params: Value) -> Result<Value, AppError> {
        value_of(method, &self.call_raw(method, params).await?)
    }

    /// [`Client::call`], with the result as the daemon wrote it: for printing it unchanged
    /// without building it as values first.
    async fn call_raw(&self, method: &str, params: Value) -> Result<Box<RawValue>, AppError> {
        let first = self.exchange(method, params.clone(), REQUEST_TIMEOUT).await;
        match first {
            Err(CallError::NotRunning(err)) => {
                if !self.autostart {
                    return Err(AppError::new(
                        ErrorKind::DaemonUnreachable,
                        format!(
                            "cannot reach octld on {}: it is not running and autostart is off (OCTL_NO_AUTOSTART)",
                            self.home.socket().display()
                        ),
                    )
                    .with_hint(err.hint.unwrap_or_default()));
                }
                self.start().await?;
                Ok(self.exchange(method, params, REQUEST_TIMEOUT).await?)
            }
            other => Ok(other?),
        }
    }

    /// Calls `method` once, never starting the daemon.
    async fn try_call(&self, method: &str, params: Value) -> Result<Value, CallError> {
        let raw = self.exchange(method, params, REQUEST_TIMEOUT).await?;
        Ok(value_of(method, &raw)?)
    }

    /// `daemon.status`, never starting the daemon, and giving up after [`PROBE_TIMEOUT`].
    pub async fn probe_status(&self) -> Result<Value, CallError> {
        let raw = self
            .exchange(method::DaemonStatus::NAME, json!({}), PROBE_TIMEOUT)
            .await?;
        Ok(value_of(method::DaemonStatus::NAME, &raw)?)
    }

    /// One request and its answer: the result's JSON text, or the error.
    async fn exchange(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Box<RawValue>, CallError> {
        let body =
            json!({ "jsonrpc": JSONRPC_VERSION, "id": 1, "method": method, "params": params });
        let request = Request::builder()
            .method(Method::POST)
            .uri(RPC_PATH)
            .header(header::HOST, "octld")
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, "application/json")
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|e| AppError::internal(format!("cannot build the request: {e}")))?;
        let exchange = async {
            let response = self.send(request).await?;
            let status = response.status();
            let bytes = response
                .into_body()
                .collect()
                .await
                .map_err(|e| {
                    AppError::internal(format!("reading octld's answer to {method} failed: {e}"))
                })?
                .to_bytes();
            Ok::<_, CallError>((status, bytes))
        };
        let (status, bytes) = tokio::time::timeout(timeout, exchange)
            .await
            .map_err(|_| {
                AppError::new(
                    ErrorKind::Timeout,
                    format!(
                        "octld on {} did not answer {method} within {} s",
                        self.home.socket().display(),
                        timeout.as_secs()
                    ),
                )
                .with_hint(format!("look at {}", self.home.log().display()))
            })??;
        Ok(parse_rpc_response(method, status, &bytes)?)
    }

    /// Opens `GET /v1/runs/<RUN>/events?since=SEQ&follow=…`, never starting the daemon.
    pub async fn event_stream(
        &self,
        run: &str,
        since: u64,
        follow: bool,
    ) -> Result<EventStream, CallError> {
        self.ndjson(format!(
            "/v1/runs/{run}/events?since={since}&follow={follow}"
        ))
        .await
    }

    /// Opens the change feed, `GET /v1/events?since=CURSOR&follow=…` (every run's events;
    /// `since`: a line's cursor, or `now`; absent: from the beginning), never starting the
    /// daemon. [`crate::follow::Feed`] follows it across daemon restarts.
    pub async fn feed(&self, since: Option<&str>, follow: bool) -> Result<FeedStream, CallError> {
        let mut path = format!("{FEED_PATH}?follow={follow}");
        if let Some(since) = since {
            path.push_str("&since=");
            path.push_str(&percent_encode(since));
        }
        let lines = self.ndjson(path).await?;
        Ok(FeedStream {
            start: lines.cursor.clone(),
            lines,
        })
    }

    async fn ndjson(&self, path: String) -> Result<EventStream, CallError> {
        let request = Request::builder()
            .method(Method::GET)
            .uri(path)
            .header(header::HOST, "octld")
            .header(header::ACCEPT, "application/x-ndjson")
            .body(Full::new(Bytes::new()))
            .map_err(|e| AppError::internal(format!("cannot build the request: {e}")))?;
        let response = tokio::time::timeout(REQUEST_TIMEOUT, self.send(request))
            .await
            .map_err(|_| {
                AppError::new(
                    ErrorKind::Timeout,
                    "octld did not open the event stream in time",
                )
            })??;
        let status = response.status();
        if status.is_success() {
            let cursor = response
                .headers()
                .get(FEED_CURSOR_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            return Ok(EventStream {
                body: response.into_body(),
                buf: Vec::new(),
                cursor,
            });
        }
        let bytes = response
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        Err(CallError::Failed(http_error(status, &bytes)))
    }

    /// Starts the daemon detached and waits (≤ 3 s) until it answers `daemon.status`.
    pub async fn start(&self) -> Result<(), AppError> {
        let program = find_octld()?;
        let mut child = spawn_detached(&program, self.home.dir()).map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                self.unreachable(format!(
                    "cannot start octld: program {} not found",
                    program.display()
                ))
            } else {
                self.unreachable(format!("cannot start {}: {e}", program.display()))
            }
        })?;
        let deadline = Instant::now() + START_DEADLINE;
        let mut last_failure = String::new();
        loop {
            // Bounded by the deadline even if something accepts connections but never answers.
            let left = deadline
                .saturating_duration_since(Instant::now())
                .max(POLL_INTERVAL);
            let probe = self.try_call_method::<method::DaemonStatus>(&method::NoParams {});
            match tokio::time::timeout(left, probe).await {
                Ok(Ok(_)) => return Ok(()),
                Ok(Err(CallError::NotRunning(_))) | Err(_) => {}
                // A daemon in the middle of starting may drop a connection: try again.
                Ok(Err(CallError::Failed(e))) if e.kind == ErrorKind::Internal => {
                    last_failure = format!("; last error: {}", e.message);
                }
                Ok(Err(CallError::Failed(e))) => return Err(e),
            }
            if Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
        let exited = match child.try_wait() {
            Ok(Some(status)) => format!(" ({} exited: {status})", program.display()),
            _ => String::new(),
        };
        Err(self.unreachable(format!(
            "started {} but it did not answer on {} within {} s{exited}{last_failure}",
            program.display(),
            self.home.socket().display(),
            START_DEADLINE.as_secs()
        )))
    }

    /// Waits until the socket stops answering, at most until `deadline`. True if it did.
    pub async fn wait_until_gone(&self, deadline: Instant) -> bool {
        loop {
            if !self.socket_answers().await {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }

    /// Does anything accept connections on the socket?
    pub async fn socket_answers(&self) -> bool {
        tokio::net::UnixStream::connect(self.home.socket())
            .await
            .is_ok()
    }

    /// A `daemon_unreachable` error with the standard hint.
    pub fn unreachable(&self, message: impl Into<String>) -> AppError {
        AppError::new(ErrorKind::DaemonUnreachable, message).with_hint(format!(
            "start it with `orchestratectl daemon start` or look at {}",
            self.home.log().display()
        ))
    }

    /// The error for "no daemon answers on the socket".
    pub fn not_running(&self) -> AppError {
        self.unreachable(format!(
            "octld is not running (socket {})",
            self.home.socket().display()
        ))
    }

    fn socket_checked(&self) -> Result<PathBuf, AppError> {
        let socket = self.home.socket();
        let len = socket.as_os_str().len();
        if len > MAX_SOCKET_PATH {
            return Err(AppError::invalid(format!(
                "invalid --home {:?}: the socket path {} is {len} bytes; a Unix socket path has at most {MAX_SOCKET_PATH}",
                self.home.dir().display().to_string(),
                socket.display()
            ))
            .with_hint("use a shorter --home or OCTL_HOME"));
        }
        Ok(socket)
    }

    /// Sends one request on a connection of its own. A CLI process makes one or two calls,
    /// so a connection pool would only add work (and idle connections would delay a daemon's
    /// graceful shutdown).
    async fn send(&self, request: Request<Full<Bytes>>) -> Result<Response<Incoming>, CallError> {
        let stream = tokio::net::UnixStream::connect(self.socket_checked()?)
            .await
            .map_err(|e| self.classify(&e, true))?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| self.classify(&e, false))?;
        // The connection is driven beside the caller until the answer's body is read.
        tokio::spawn(connection);
        sender
            .send_request(request)
            .await
            .map_err(|e| self.classify(&e, false))
    }

    /// Sorts a transport failure: no daemon (missing socket, refused, on `connecting`),
    /// permission denied (the socket belongs to someone else), or anything else.
    fn classify(&self, err: &(dyn std::error::Error + 'static), connecting: bool) -> CallError {
        let socket = self.home.socket();
        match io_error_kind(err) {
            Some(io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused) if connecting => {
                CallError::NotRunning(self.not_running())
            }
            Some(io::ErrorKind::PermissionDenied) => CallError::Failed(
                AppError::new(
                    ErrorKind::Unauthorized,
                    format!(
                        "permission denied on {}: only the daemon's owner may use it",
                        socket.display()
                    ),
                )
                .with_hint(
                    "run orchestratectl as the user that owns the home, or use your own --home",
                ),
            ),
            _ => CallError::Failed(
                AppError::internal(format!(
                    "talking to octld on {} failed: {}",
                    socket.display(),
                    error_chain(err)
                ))
                .with_hint(format!("look at {}", self.home.log().display())),
            ),
        }
    }
}

/// The NDJSON event stream: past events, then (when following) new ones as they land.
pub struct EventStream {
    body: Incoming,
    buf: Vec<u8>,
    /// The change feed's cursor where the stream starts (its response header).
    cursor: Option<String>,
}

impl EventStream {
    /// The next complete line, without its newline; `None` when the stream ended (the daemon
    /// finished sending past events, or it shut down). A cut-off last line is dropped.
    pub async fn next_line(&mut self) -> Result<Option<String>, AppError> {
        loop {
            if let Some(pos) = self.buf.iter().position(|b| *b == b'\n') {
                let rest = self.buf.split_off(pos + 1);
                let mut line = std::mem::replace(&mut self.buf, rest);
                line.truncate(pos);
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                if line.is_empty() {
                    continue;
                }
                return Ok(Some(String::from_utf8_lossy(&line).into_owned()));
            }
            match self.body.frame().await {
                None => return Ok(None),
                Some(Err(e)) => {
                    return Err(AppError::internal(format!(
                        "the event stream broke off: {e}"
                    )))
                }
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.buf.extend_from_slice(&data);
                    }
                }
            }
        }
    }
}

/// The change feed's lines, typed.
pub struct FeedStream {
    lines: EventStream,
    start: Option<String>,
}

impl FeedStream {
    /// The cursor the stream starts after (what `since=now` stood for), from the daemon's
    /// `x-octl-feed-cursor` header: resuming from it loses nothing even before a first item.
    pub fn start(&self) -> Option<&str> {
        self.start.as_deref()
    }

    /// The next item; `None` when the stream ended (past items sent without `follow`, or the
    /// daemon stopped). A line that is not a `FeedItem` is an error naming it.
    pub async fn next(&mut self) -> Result<Option<FeedItem>, AppError> {
        let Some(line) = self.lines.next_line().await? else {
            return Ok(None);
        };
        serde_json::from_str(&line).map(Some).map_err(|e| {
            AppError::internal(format!(
                "the change feed sent a line that is not a feed item ({e}): {}",
                crate::output::truncate(&line, 120)
            ))
        })
    }
}

/// Escapes what a query value cannot hold as is (a cursor is `<ULID>:<N>`, but `since`
/// comes from the user).
fn percent_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~:".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

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

/// The first `io::Error` kind in an error's chain of sources.
fn io_error_kind(err: &(dyn std::error::Error + 'static)) -> Option<io::ErrorKind> {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = current {
        if let Some(io) = e.downcast_ref::<io::Error>() {
            return Some(io.kind());
        }
        current = e.source();
    }
    None
}

fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![err.to_string()];
    let mut current = err.source();
    while let Some(e) = current {
        let text = e.to_string();
        if !parts.contains(&text) {
            parts.push(text);
        }
        current = e.source();
    }
    parts.join(": ")
}

/// Finds the daemon program: `$OCTLD_BIN`, else `octld` next to this executable, else on PATH.
pub fn find_octld() -> Result<PathBuf, AppError> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|d| d.join("octld")));
    find_octld_in(
        std::env::var_os("OCTLD_BIN"),
        beside,
        std::env::var_os("PATH"),
        &cwd,
    )
}

fn find_octld_in(
    octld_bin: Option<OsString>,
    beside: Option<PathBuf>,
    path_var: Option<OsString>,
    cwd: &Path,
) -> Result<PathBuf, AppError> {
    let not_found = |message: String| {
        AppError::new(ErrorKind::DaemonUnreachable, message)
            .with_hint("install octld next to orchestratectl (`cargo install` puts both in the same directory) or set OCTLD_BIN to its path")
    };
    if let Some(bin) = octld_bin.filter(|v| !v.is_empty()) {
        let bin = PathBuf::from(bin);
        // A bare name is looked up on PATH by exec; a relative path is made absolute because
        // the daemon is started in `/`.
        let bin = if bin.components().count() > 1 && bin.is_relative() {
            cwd.join(bin)
        } else {
            bin
        };
        if bin.components().count() > 1 && !is_executable(&bin) {
            return Err(not_found(format!(
                "cannot start octld: OCTLD_BIN is set to {}, which is not an executable file",
                bin.display()
            )));
        }
        return Ok(bin);
    }
    let mut looked = Vec::new();
    if let Some(candidate) = beside {
        if is_executable(&candidate) {
            return Ok(candidate);
        }
        looked.push(candidate.display().to_string());
    }
    if let Some(path_var) = path_var {
        for dir in std::env::split_paths(&path_var) {
            let candidate = dir.join("octld");
            if is_executable(&candidate) {
                return Ok(candidate);
            }
        }
    }
    looked.push("every directory on PATH".to_string());
    Err(not_found(format!(
        "cannot start octld: no octld program found (OCTLD_BIN is not set; looked at {})",
        looked.join(" and ")
    )))
}

/// Finds a program on PATH (`tmux`, `git`): the first executable file of that name.
pub fn find_on_path(name: &str) -> Option<PathBuf> {
    let path_var = std::env::var_os("PATH")?;
    std::env::split_paths(&path_var)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Starts `octld --home HOME --foreground` in its own session with stdio on /dev/null, in `/`
/// so that it does not hold the caller's working directory.
fn spawn_detached(program: &Path, home: &Path) -> io::Result<std::process::Child> {
    let mut command = Command::new(program);
    command
        .arg("--home")
        .arg(home)
        .arg("--foreground")
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: `setsid` is async-signal-safe and touches no memory of the parent.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() == -1 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    command.spawn()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

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

    #[test]
    fn autostart_switch() {
        assert!(autostart_disabled(Some("1".into())));
        assert!(autostart_disabled(Some("true".into())));
        assert!(!autostart_disabled(Some("0".into())));
        assert!(!autostart_disabled(Some("".into())));
        assert!(!autostart_disabled(None));
    }

    #[test]
    fn finding_octld() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("octld");
        std::fs::write(&exe, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let cwd = Path::new("/");
        // Beside the CLI.
        assert_eq!(
            find_octld_in(None, Some(exe.clone()), None, cwd).unwrap(),
            exe
        );
        // On PATH.
        let path = std::env::join_paths([Path::new("/nonexistent"), dir.path()]).unwrap();
        assert_eq!(
            find_octld_in(None, Some(PathBuf::from("/nope/octld")), Some(path), cwd).unwrap(),
            exe
        );
        // OCTLD_BIN wins, and a missing one says so.
        let err =
            find_octld_in(Some("/nope/octld".into()), Some(exe.clone()), None, cwd).unwrap_err();
        assert_eq!(err.kind.exit_code(), 5);
        assert!(err.message.contains("OCTLD_BIN"), "{}", err.message);
        // Nowhere: the message says where it looked.
        let err = find_octld_in(None, Some(PathBuf::from("/nope/octld")), None, cwd).unwrap_err();
        assert!(err.message.contains("/nope/octld"), "{}", err.message);
        assert!(err.message.contains("PATH"), "{}", err.message);
        assert_eq!(err.kind, ErrorKind::DaemonUnreachable);
    }
}
