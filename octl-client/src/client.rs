//! The daemon client: JSON-RPC 2.0 over HTTP/1.1 on the Unix socket (hyper's connection-level
//! client on a tokio `UnixStream`, one connection per call), the event stream endpoint, and
//! autostart (start `octld` detached when the socket does not answer).
//!
//! [`Client::call`] starts the daemon when needed (unless `OCTL_NO_AUTOSTART=1`);
//! [`Client::try_call`] never does and tells "not running" apart from other failures, for the
//! commands that must not start it (`daemon status`, `daemon stop`, `event tail`).
//!
//! - `answer`: reading the daemon's answers: JSON-RPC results, its errors in either form, HTTP
//!   errors.
//! - `stream`: the NDJSON endpoints: one run's events and the change feed.
//! - `autostart`: finding `octld` and starting it detached.

mod answer;
mod autostart;
mod stream;

pub use answer::{error_of, http_error, parse_rpc_response, value_of};
pub use autostart::{autostart_disabled, find_octld, find_on_path};
pub use stream::{EventStream, FeedStream};

use std::io;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{header, Method, Request, Response};
use hyper_util::rt::TokioIo;
use octl_proto::method::{self, Method as _};
use octl_proto::rpc::{JSONRPC_VERSION, RPC_PATH};
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
/// How often a follower looks whether a stopped daemon was started again.
const FOLLOWER_POLL: Duration = Duration::from_millis(100);
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
    /// The connection was cut before the answer came (reset, closed): the daemon stopped or
    /// restarted in the middle of the request. A follower's read is asked again once a
    /// daemon answers; what a change did is unknown, so nothing else asks again.
    Dropped(AppError),
}

impl CallError {
    /// No daemon answered this one: it is not running, or it went away mid-request.
    pub fn daemon_gone(&self) -> bool {
        matches!(self, CallError::NotRunning(_) | CallError::Dropped(_))
    }
}

impl From<CallError> for AppError {
    fn from(e: CallError) -> AppError {
        match e {
            CallError::NotRunning(e) | CallError::Failed(e) | CallError::Dropped(e) => e,
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

    /// [`Client::try_call`] of method `M`: once, never starting the daemon; its typed result.
    pub async fn try_call_method<M: method::Method>(
        &self,
        params: &M::Params,
    ) -> Result<M::Result, CallError> {
        let value = self.try_call(M::NAME, to_params(params)).await?;
        Ok(result_of::<M>(&value)?)
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

    /// `daemon.status`, never starting the daemon, and giving up after [`PROBE_TIMEOUT`]; as the
    /// daemon wrote it (`daemon status --json` prints it as it is).
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

    /// Method `M` for a follower (`run wait`, `run watch`, `run logs --follow`, `event feed
    /// --follow`): as [`Client::call_method`], except that a daemon stopped on purpose is
    /// waited for ([`Client::reconnect`]), never started.
    pub async fn call_following<M: method::Method>(
        &self,
        params: &M::Params,
    ) -> Result<M::Result, AppError> {
        loop {
            match self.try_call_method::<M>(params).await {
                Err(e) if e.daemon_gone() => self.reconnect().await?,
                other => return other.map_err(AppError::from),
            }
        }
    }

    /// A follower's way back once its daemon went away: it returns once a daemon answers.
    /// Stopped on purpose (`daemon stop` left `octld.stopped`): it waits, connecting to
    /// nothing, until a daemon started by an explicit command removes the file. A daemon
    /// whose process is alive but does not answer yet (starting, or still draining as it
    /// stops) is waited for, never raced by a second start. Gone otherwise (a crash): it
    /// starts it again as any call would (`daemon_unreachable` when autostart is off).
    pub async fn reconnect(&self) -> Result<(), AppError> {
        loop {
            if self.home.stopped().exists() {
                tokio::time::sleep(FOLLOWER_POLL).await;
                continue;
            }
            if self.probe_status().await.is_ok() {
                return Ok(());
            }
            if self.daemon_alive().is_some() {
                tokio::time::sleep(FOLLOWER_POLL).await;
                continue;
            }
            return self
                .call(method::DaemonStatus::NAME, json!({}))
                .await
                .map(|_| ());
        }
    }

    /// The pid of the octld that holds (or last held) the home's lock, if that process is
    /// alive and is an octld: a daemon that is starting, serving or stopping.
    pub fn daemon_alive(&self) -> Option<u64> {
        let text = std::fs::read_to_string(self.home.lock()).ok()?;
        let pid: u64 = text.split_whitespace().next()?.parse().ok()?;
        if !process_alive(pid) {
            return None;
        }
        // The pid of a daemon long gone may be another program's by now.
        match std::fs::read_to_string(format!("/proc/{pid}/comm")) {
            Ok(comm) if !comm.trim().starts_with("octld") => None,
            _ => Some(pid),
        }
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

    /// The error for a connection cut before its answer came.
    fn cut_off(&self, err: &(dyn std::error::Error + 'static)) -> AppError {
        AppError::new(
            ErrorKind::DaemonUnreachable,
            format!(
                "octld on {} went away before it answered: {}",
                self.home.socket().display(),
                error_chain(err)
            ),
        )
        .with_hint(format!(
            "it stopped or restarted; `orchestratectl daemon status` says whether one runs now, and {} why",
            self.home.log().display()
        ))
    }

    /// Sorts a transport failure: no daemon (missing socket, refused, on `connecting`),
    /// permission denied (the socket belongs to someone else), or anything else.
    fn classify(&self, err: &(dyn std::error::Error + 'static), connecting: bool) -> CallError {
        let socket = self.home.socket();
        match io_error_kind(err) {
            // WouldBlock (EAGAIN): the socket's queue is full because no daemon accepts on it,
            // as while one stops and the next starts.
            Some(
                io::ErrorKind::NotFound
                | io::ErrorKind::ConnectionRefused
                | io::ErrorKind::WouldBlock,
            ) if connecting => CallError::NotRunning(self.not_running()),
            Some(
                io::ErrorKind::ConnectionReset
                | io::ErrorKind::BrokenPipe
                | io::ErrorKind::UnexpectedEof
                | io::ErrorKind::ConnectionAborted,
            ) if !connecting => CallError::Dropped(self.cut_off(err)),
            None if !connecting && cut_before_answer(err) => CallError::Dropped(self.cut_off(err)),
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

/// Is the process alive (a zombie counts as gone)?
pub fn process_alive(pid: u64) -> bool {
    let Ok(pid_t) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks that the process exists and may be signalled.
    let exists = unsafe { libc::kill(pid_t, 0) } == 0
        || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    if !exists {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state is the field after the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .map(|(_, rest)| !rest.trim_start().starts_with('Z'))
            .unwrap_or(true),
        Err(_) => true,
    }
}

/// Whether hyper says the connection closed before a whole answer came.
fn cut_before_answer(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = current {
        if let Some(h) = e.downcast_ref::<hyper::Error>() {
            return h.is_incomplete_message() || h.is_closed() || h.is_canceled();
        }
        current = e.source();
    }
    false
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
