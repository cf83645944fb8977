//! A scripted stand-in for the Anthropic Messages API, so the real Claude Code CLI can run in
//! tests without the internet, plus helpers to find and isolate that CLI.
//!
//! [`ModelStandIn::start`] serves plain HTTP/1.1 on `127.0.0.1:<free port>` from a thread (std
//! only) and plays a *script*: one [`Step`] per reply to the main agent. Point Claude Code at it
//! with [`claude_env`]. It answers:
//!
//! - `POST /v1/messages` from the **main agent** (a request whose `tools` include `Bash`): the
//!   script step at the conversation's position — a `Bash` tool call (`stop_reason: tool_use`) or
//!   a text (`end_turn`); past the end of the script, the final text again. The position is read
//!   from the conversation itself: the number of `tool_result` blocks plus the number of
//!   assistant messages without a `tool_use` (earlier text replies). Retries and side requests
//!   therefore never derail the script, and several conversations can share one stand-in.
//! - `POST /v1/messages` from anything else (session title, summaries, …): a short text, or an
//!   instance of the requested JSON schema (`output_config.format`), or a call of the forced tool
//!   (`tool_choice: {"type":"tool"}`).
//! - Both kinds streamed as server-sent events when the request has `"stream": true`
//!   (`message_start`, `content_block_start`/`_delta`/`_stop`, `message_delta`, `message_stop`),
//!   else as one JSON message.
//! - `POST /v1/messages/count_tokens`: a token estimate. `HEAD /api/hello` (a connectivity
//!   probe): 200. Anything else: 404 with an Anthropic-style JSON error.
//!
//! Every request is recorded ([`ModelStandIn::requests`], [`ModelStandIn::main_requests`],
//! [`ModelStandIn::log`]) so tests can assert on what Claude Code sent.
//!
//! Facts about Claude Code 2.1.328 that the helpers encode:
//! - `claude -p --output-format stream-json --verbose --permission-mode acceptEdits
//!   --allowedTools "Bash(git *)" "Bash(orchestratectl *)" --append-system-prompt TEXT -- PROMPT`
//!   works for any prompt (leading `-`, several lines, quotes); without `--` the variadic
//!   `--allowedTools` swallows the prompt. See [`print_argv`].
//! - `ANTHROPIC_AUTH_TOKEN` (sent as `Authorization: Bearer`) rather than `ANTHROPIC_API_KEY`:
//!   interactive sessions ask "Detected a custom API key in your environment — use it?" (default
//!   *No*) for an API key the config has not approved, never for an auth token.
//! - `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1` stops the `HEAD /api/hello` probe, the
//!   session-title request, telemetry and update checks; `CLAUDE_CODE_TMPDIR` keeps its temp
//!   files (`claude-<uid>/`, `cc-socks/`) out of the shared `/tmp`.
//! - Interactive `claude` in a directory not yet trusted shows the workspace-trust dialog
//!   ("Accessing workspace: … ❯ No, exit / Yes, I trust this folder"), default *No*: answer it
//!   with Down, then Enter — but only once the dialog has been on screen for ~0.5 s (it is drawn
//!   again ~150 ms after it first appears, resetting the selection and losing earlier keys) and
//!   "❯ Yes, I trust this folder" is seen selected. A git worktree inherits its main repository's
//!   trust, and accepting in a worktree records the trust for the main repository. First-run
//!   onboarding (theme picker, security notes) is skipped when the config says
//!   `hasCompletedOnboarding` — see [`seed_claude_config`], for temp configs only.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

pub use responses::ESCALATED as CODEX_ESCALATED;

/// The reply the main agent gets when the script has no final [`Step::Text`].
pub const DEFAULT_FINAL_TEXT: &str = "Done.";
/// The text of every reply to a side request without a schema or a forced tool.
pub const SIDE_REPLY_TEXT: &str = "Stand-in reply";
/// Token counts reported in every reply's usage (so costs are stable across runs).
pub const INPUT_TOKENS: u64 = 10;
pub const OUTPUT_TOKENS: u64 = 5;

const MAX_BODY: usize = 64 << 20;
const MAX_HEADER_LINE: usize = 64 << 10;

/// One reply of the script to the main agent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// A call of Claude Code's `Bash` tool: `{"command": …, "description": …}`.
    Bash {
        command: String,
        description: String,
    },
    /// A final text; the turn ends (`stop_reason: end_turn`).
    Text(String),
    /// An API error (HTTP 400 with this message) instead of a reply: the agent's request
    /// fails for good (no retry).
    Error(String),
}

impl Step {
    /// A `Bash` step whose description is the command itself.
    pub fn bash(command: impl Into<String>) -> Step {
        let command = command.into();
        Step::Bash {
            description: command.clone(),
            command,
        }
    }

    pub fn bash_described(command: impl Into<String>, description: impl Into<String>) -> Step {
        Step::Bash {
            command: command.into(),
            description: description.into(),
        }
    }

    pub fn text(text: impl Into<String>) -> Step {
        Step::Text(text.into())
    }
}

/// What the stand-in took a request to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestKind {
    /// `POST /v1/messages` with the `Bash` tool offered: the agent's own conversation.
    Main,
    /// `POST /v1/messages` without it: titles, summaries and other helpers.
    Side,
    CountTokens,
    /// Any other method or path.
    Other,
}

/// One request as received.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: String,
    /// The path with its query string (`/v1/messages?beta=true`).
    pub path: String,
    /// Header names in lowercase.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON; a body that is not JSON is kept as a string; no body is `Null`.
    pub body: Value,
    pub kind: RequestKind,
    /// Status code of the reply.
    pub status: u16,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A usage limit the stand-in plays: main requests are refused with HTTP 429 until `reset`.
#[derive(Clone, Copy, Debug)]
struct Limit {
    /// Unix seconds: `anthropic-ratelimit-unified-reset`; for a window, set by the first
    /// main request.
    reset: Option<u64>,
    /// Seconds from the first main request to the reset (a window), when `reset` is unset.
    window: u64,
    /// The `retry-after` header, in seconds.
    retry_after: u64,
}

struct Shared {
    limit: Mutex<Option<Limit>>,
    script: Vec<Step>,
    log: Mutex<Vec<Recorded>>,
    stop: AtomicBool,
    counter: AtomicU64,
    conns: Mutex<HashMap<u64, TcpStream>>,
}

/// The scripted Messages API; stops serving when dropped.
pub struct ModelStandIn {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl ModelStandIn {
    /// Binds `127.0.0.1:0` and serves `script` from a thread.
    pub fn start(script: Vec<Step>) -> ModelStandIn {
        Self::start_on("127.0.0.1".parse().expect("an address"), script)
    }

    /// Like [`ModelStandIn::start`] on `ip` (one of this machine's addresses that agents
    /// elsewhere reach: the test cluster's side of its links, for agents on its hosts).
    pub fn start_on(ip: std::net::IpAddr, script: Vec<Step>) -> ModelStandIn {
        let listener = TcpListener::bind((ip, 0)).expect("bind the model stand-in");
        let addr = listener.local_addr().expect("stand-in address");
        let shared = Arc::new(Shared {
            limit: Mutex::new(None),
            script,
            log: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
            counter: AtomicU64::new(0),
            conns: Mutex::new(HashMap::new()),
        });
        let accept_shared = shared.clone();
        let accept = std::thread::Builder::new()
            .name("model-stand-in".into())
            .spawn(move || accept_loop(listener, accept_shared))
            .expect("spawn the stand-in thread");
        ModelStandIn {
            addr,
            shared,
            accept: Some(accept),
        }
    }

    /// Until `reset` (Unix seconds), refuses every main-agent request with HTTP 429 and the
    /// headers of a spent usage limit: `anthropic-ratelimit-unified-status: rejected`,
    /// `anthropic-ratelimit-unified-reset: <reset>`, `…-representative-claim: five_hour`,
    /// `retry-after: <retry_after>`. Claude Code 2.1.328 with a subscription token
    /// (`CLAUDE_CODE_OAUTH_TOKEN`) then prints a `rate_limit_event` with status `rejected`
    /// and ends with a result whose `api_error` is `usage_limit_reached`; with an API key or
    /// auth token it retries (up to 10 times, waiting about `retry_after`) and prints
    /// `system`/`api_retry` lines.
    pub fn limit_until(&self, reset: u64, retry_after: u64) {
        *self.shared.limit.lock().unwrap() = Some(Limit {
            reset: Some(reset),
            window: 0,
            retry_after,
        });
    }

    /// Like [`ModelStandIn::limit_until`], with the reset `window` seconds after the first
    /// main request, however late the CLI starts ([`ModelStandIn::limit_reset`] says when).
    pub fn limit_for(&self, window: u64, retry_after: u64) {
        *self.shared.limit.lock().unwrap() = Some(Limit {
            reset: None,
            window,
            retry_after,
        });
    }

    /// The reset of the limit being played, once known (Unix seconds).
    pub fn limit_reset(&self) -> Option<u64> {
        self.shared.limit.lock().unwrap().and_then(|l| l.reset)
    }

    /// `http://<ip>:<port>`: the value for `ANTHROPIC_BASE_URL`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every request received so far, in order.
    pub fn log(&self) -> Vec<Recorded> {
        self.shared.log.lock().unwrap().clone()
    }

    /// The bodies of every request that had one, in order.
    pub fn requests(&self) -> Vec<Value> {
        self.log()
            .into_iter()
            .filter(|r| !r.body.is_null())
            .map(|r| r.body)
            .collect()
    }

    /// The bodies of the main agent's `/v1/messages` requests, in order.
    pub fn main_requests(&self) -> Vec<Value> {
        self.log()
            .into_iter()
            .filter(|r| r.kind == RequestKind::Main)
            .map(|r| r.body)
            .collect()
    }

    /// Waits until at least `n` main requests have been answered; panics after `timeout`.
    pub fn wait_main_requests(&self, n: usize, timeout: Duration) -> Vec<Value> {
        crate::wait::wait_until(
            &format!("{n} main-agent request(s) at the model stand-in"),
            timeout,
            || {
                let main = self.main_requests();
                (main.len() >= n).then_some(main)
            },
        )
    }
}

impl Drop for ModelStandIn {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop, then cut every open connection so its thread ends.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(handle) = self.accept.take() {
            let _ = handle.join();
        }
        for (_, conn) in self.shared.conns.lock().unwrap().drain() {
            let _ = conn.shutdown(Shutdown::Both);
        }
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    for stream in listener.incoming() {
        if shared.stop.load(Ordering::SeqCst) {
            break;
        }
        let Ok(stream) = stream else { continue };
        let id = shared.counter.fetch_add(1, Ordering::SeqCst);
        if let Ok(clone) = stream.try_clone() {
            shared.conns.lock().unwrap().insert(id, clone);
        }
        let conn_shared = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("model-stand-in-conn".into())
            .spawn(move || {
                let _ = serve_connection(stream, &conn_shared);
                conn_shared.conns.lock().unwrap().remove(&id);
            });
        if spawned.is_err() {
            shared.conns.lock().unwrap().remove(&id);
        }
    }
}

struct HttpRequest {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl HttpRequest {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

struct HttpResponse {
    status: u16,
    content_type: &'static str,
    body: Vec<u8>,
    headers: Vec<(&'static str, String)>,
}

fn serve_connection(stream: TcpStream, shared: &Shared) -> std::io::Result<()> {
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    loop {
        let Some(request) = read_request(&mut reader, &mut writer)? else {
            return Ok(());
        };
        if shared.stop.load(Ordering::SeqCst) {
            return Ok(());
        }
        let close = request
            .header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"));
        let (kind, response) = respond(&request, shared);
        let body = if request.body.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&request.body)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&request.body).into()))
        };
        shared.log.lock().unwrap().push(Recorded {
            method: request.method.clone(),
            path: request.path.clone(),
            headers: request.headers.clone(),
            body,
            kind,
            status: response.status,
        });
        write_response(&mut writer, &request.method, &response, close)?;
        if close {
            return Ok(());
        }
    }
}

fn read_line_capped(reader: &mut impl BufRead) -> std::io::Result<Option<String>> {
    let mut line = Vec::new();
    let n = reader
        .by_ref()
        .take(MAX_HEADER_LINE as u64)
        .read_until(b'\n', &mut line)?;
    if n == 0 {
        return Ok(None);
    }
    while matches!(line.last(), Some(b'\n' | b'\r')) {
        line.pop();
    }
    Ok(Some(String::from_utf8_lossy(&line).into_owned()))
}

fn bad_input(msg: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, msg.to_string())
}

/// Reads one request; `None` when the peer closed the connection between requests.
fn read_request(
    reader: &mut BufReader<TcpStream>,
    writer: &mut TcpStream,
) -> std::io::Result<Option<HttpRequest>> {
    let request_line = loop {
        match read_line_capped(reader)? {
            None => return Ok(None),
            Some(line) if line.is_empty() => continue,
            Some(line) => break line,
        }
    };
    let mut parts = request_line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let path = parts.next().unwrap_or("/").to_string();
    let mut headers = Vec::new();
    loop {
        let line = read_line_capped(reader)?.ok_or_else(|| bad_input("eof in headers"))?;
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let mut request = HttpRequest {
        method,
        path,
        headers,
        body: Vec::new(),
    };
    if request
        .header("expect")
        .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"))
    {
        writer.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
    }
    let chunked = request
        .header("transfer-encoding")
        .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    if chunked {
        loop {
            let size_line = read_line_capped(reader)?.ok_or_else(|| bad_input("eof in chunk"))?;
            let size_hex = size_line.split(';').next().unwrap_or("").trim();
            let size =
                usize::from_str_radix(size_hex, 16).map_err(|_| bad_input("bad chunk size"))?;
            if size == 0 {
                // Trailers, up to the empty line.
                while let Some(line) = read_line_capped(reader)? {
                    if line.is_empty() {
                        break;
                    }
                }
                break;
            }
            if request.body.len() + size > MAX_BODY {
                return Err(bad_input("body too large"));
            }
            let start = request.body.len();
            request.body.resize(start + size, 0);
            reader.read_exact(&mut request.body[start..])?;
            let mut crlf = [0u8; 2];
            reader.read_exact(&mut crlf)?;
        }
    } else if let Some(len) = request.header("content-length") {
        let len: usize = len.parse().map_err(|_| bad_input("bad content-length"))?;
        if len > MAX_BODY {
            return Err(bad_input("body too large"));
        }
        request.body.resize(len, 0);
        reader.read_exact(&mut request.body)?;
    }
    Ok(Some(request))
}

fn write_response(
    writer: &mut TcpStream,
    method: &str,
    response: &HttpResponse,
    close: bool,
) -> std::io::Result<()> {
    let reason = match response.status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        429 => "Too Many Requests",
        _ => "Status",
    };
    let mut head = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: {}\r\ncontent-length: {}\r\nrequest-id: req_standin\r\ncache-control: no-cache\r\n",
        response.status,
        reason,
        response.content_type,
        response.body.len()
    );
    for (k, v) in &response.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str(if close {
        "connection: close\r\n\r\n"
    } else {
        "connection: keep-alive\r\n\r\n"
    });
    writer.write_all(head.as_bytes())?;
    if method != "HEAD" {
        writer.write_all(&response.body)?;
    }
    writer.flush()
}

fn json_response(status: u16, body: &Value) -> HttpResponse {
    HttpResponse {
        status,
        content_type: "application/json",
        body: serde_json::to_vec(body).unwrap(),
        headers: Vec::new(),
    }
}

fn error_response(status: u16, kind: &str, message: &str) -> HttpResponse {
    json_response(
        status,
        &json!({"type": "error", "error": {"type": kind, "message": message}}),
    )
}

fn respond(request: &HttpRequest, shared: &Shared) -> (RequestKind, HttpResponse) {
    let path = request.path.split('?').next().unwrap_or("");
    match (request.method.as_str(), path) {
        ("POST", "/v1/messages") => {
            let Ok(body) = serde_json::from_slice::<Value>(&request.body) else {
                return (
                    RequestKind::Side,
                    error_response(400, "invalid_request_error", "body is not JSON"),
                );
            };
            let n = shared.counter.fetch_add(1, Ordering::SeqCst);
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs();
            let limit = {
                let mut limit = shared.limit.lock().unwrap();
                if let Some(l) = limit.as_mut().filter(|_| is_main(&body)) {
                    l.reset.get_or_insert(now + l.window);
                }
                *limit
            };
            let reset_of = |l: &Limit| l.reset.unwrap_or(0);
            if let Some(limit) = limit.filter(|l| is_main(&body) && now < reset_of(l)) {
                let mut r = error_response(
                    429,
                    "rate_limit_error",
                    "This request would exceed your account's rate limit. Please try again later.",
                );
                r.headers = vec![
                    ("anthropic-ratelimit-unified-status", "rejected".into()),
                    (
                        "anthropic-ratelimit-unified-reset",
                        reset_of(&limit).to_string(),
                    ),
                    (
                        "anthropic-ratelimit-unified-representative-claim",
                        "five_hour".into(),
                    ),
                    ("retry-after", limit.retry_after.to_string()),
                ];
                return (RequestKind::Main, r);
            }
            if is_main(&body) {
                let reply = main_reply(&body, &shared.script, n);
                (RequestKind::Main, reply.into_response(&body, n))
            } else {
                (RequestKind::Side, side_reply(&body).into_response(&body, n))
            }
        }
        ("POST", "/v1/responses") => {
            let Ok(body) = serde_json::from_slice::<Value>(&request.body) else {
                return (
                    RequestKind::Side,
                    error_response(400, "invalid_request_error", "body is not JSON"),
                );
            };
            let n = shared.counter.fetch_add(1, Ordering::SeqCst);
            (
                RequestKind::Main,
                responses::reply(&body, &shared.script, n),
            )
        }
        ("POST", p) if p.starts_with("/v1beta/models/") => {
            let Ok(body) = serde_json::from_slice::<Value>(&request.body) else {
                return (
                    RequestKind::Side,
                    error_response(400, "invalid_request_error", "body is not JSON"),
                );
            };
            let n = shared.counter.fetch_add(1, Ordering::SeqCst);
            gemini::reply(p, &body, &shared.script, n)
        }
        ("POST", "/v1/chat/completions") => {
            let Ok(body) = serde_json::from_slice::<Value>(&request.body) else {
                return (
                    RequestKind::Side,
                    error_response(400, "invalid_request_error", "body is not JSON"),
                );
            };
            let n = shared.counter.fetch_add(1, Ordering::SeqCst);
            chat::reply(&body, &shared.script, n)
        }
        ("POST", "/v1/messages/count_tokens") => {
            let tokens = (request.body.len() / 4).max(1);
            (
                RequestKind::CountTokens,
                json_response(200, &json!({"input_tokens": tokens})),
            )
        }
        ("HEAD" | "GET", "/api/hello") => (
            RequestKind::Other,
            HttpResponse {
                status: 200,
                content_type: "text/plain",
                body: Vec::new(),
                headers: Vec::new(),
            },
        ),
        _ => (
            RequestKind::Other,
            error_response(
                404,
                "not_found_error",
                &format!(
                    "the model stand-in does not serve {} {}",
                    request.method, request.path
                ),
            ),
        ),
    }
}

/// A request from the main agent offers the `Bash` tool.
pub fn is_main(body: &Value) -> bool {
    body.get("tools")
        .and_then(Value::as_array)
        .is_some_and(|tools| {
            tools
                .iter()
                .any(|t| t.get("name").and_then(Value::as_str) == Some("Bash"))
        })
}

fn content_blocks(message: &Value) -> &[Value] {
    message
        .get("content")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn block_type(block: &Value) -> Option<&str> {
    block.get("type").and_then(Value::as_str)
}

/// The script position of a main-agent request: replies already consumed in its conversation,
/// i.e. `tool_result` blocks plus assistant messages without a `tool_use` (earlier text turns).
pub fn script_position(body: &Value) -> usize {
    let Some(messages) = body.get("messages").and_then(Value::as_array) else {
        return 0;
    };
    messages
        .iter()
        .map(|m| {
            let blocks = content_blocks(m);
            match m.get("role").and_then(Value::as_str) {
                Some("user") => blocks
                    .iter()
                    .filter(|b| block_type(b) == Some("tool_result"))
                    .count(),
                Some("assistant") => {
                    let has_tool_use = blocks.iter().any(|b| block_type(b) == Some("tool_use"));
                    usize::from(!has_tool_use)
                }
                _ => 0,
            }
        })
        .sum()
}

enum Reply {
    Text(String),
    Error(String),
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
}

fn main_reply(body: &Value, script: &[Step], n: u64) -> Reply {
    let position = script_position(body);
    match script.get(position) {
        Some(Step::Bash {
            command,
            description,
        }) => Reply::ToolUse {
            id: format!("toolu_standin_{position:03}_{n:05}"),
            name: "Bash".into(),
            input: json!({"command": command, "description": description}),
        },
        Some(Step::Text(text)) => Reply::Text(text.clone()),
        Some(Step::Error(message)) => Reply::Error(message.clone()),
        None => Reply::Text(final_text(script)),
    }
}

fn final_text(script: &[Step]) -> String {
    match script.last() {
        Some(Step::Text(text)) => text.clone(),
        _ => DEFAULT_FINAL_TEXT.to_string(),
    }
}

fn side_reply(body: &Value) -> Reply {
    // A forced tool: call it with an input that fits its schema.
    let forced = body
        .get("tool_choice")
        .filter(|c| c.get("type").and_then(Value::as_str) == Some("tool"))
        .and_then(|c| c.get("name"))
        .and_then(Value::as_str);
    if let Some(name) = forced {
        let schema = body
            .get("tools")
            .and_then(Value::as_array)
            .and_then(|tools| {
                tools
                    .iter()
                    .find(|t| t.get("name").and_then(Value::as_str) == Some(name))
            })
            .and_then(|t| t.get("input_schema"))
            .cloned()
            .unwrap_or_else(|| json!({"type": "object"}));
        return Reply::ToolUse {
            id: "toolu_standin_side".into(),
            name: name.to_string(),
            input: schema_instance(&schema, 0),
        };
    }
    // Structured output: a JSON text that fits the schema (e.g. `{"title": …}`).
    let schema = body
        .pointer("/output_config/format")
        .filter(|f| f.get("type").and_then(Value::as_str) == Some("json_schema"))
        .and_then(|f| f.get("schema"));
    if let Some(schema) = schema {
        return Reply::Text(schema_instance(schema, 0).to_string());
    }
    Reply::Text(SIDE_REPLY_TEXT.to_string())
}

/// A small value that satisfies a simple JSON schema.
fn schema_instance(schema: &Value, depth: usize) -> Value {
    if depth > 8 {
        return Value::Null;
    }
    if let Some(v) = schema.get("const") {
        return v.clone();
    }
    if let Some(first) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(first) = schema
            .get(key)
            .and_then(Value::as_array)
            .and_then(|v| v.first())
        {
            return schema_instance(first, depth + 1);
        }
    }
    let ty = match schema.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(types)) => types
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("null"),
        _ if schema.get("properties").is_some() => "object",
        _ => "string",
    };
    match ty {
        "object" => {
            let mut out = serde_json::Map::new();
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (name, sub) in props {
                    out.insert(name.clone(), schema_instance(sub, depth + 1));
                }
            }
            Value::Object(out)
        }
        "array" => {
            let min = schema.get("minItems").and_then(Value::as_u64).unwrap_or(0);
            let item = schema.get("items").cloned().unwrap_or(json!({}));
            Value::Array(
                (0..min)
                    .map(|_| schema_instance(&item, depth + 1))
                    .collect(),
            )
        }
        "integer" | "number" => json!(0),
        "boolean" => json!(false),
        "null" => Value::Null,
        _ => json!("Stand-in"),
    }
}

impl Reply {
    fn stop_reason(&self) -> &'static str {
        match self {
            Reply::Text(_) | Reply::Error(_) => "end_turn",
            Reply::ToolUse { .. } => "tool_use",
        }
    }

    fn into_response(self, request: &Value, n: u64) -> HttpResponse {
        let model = request
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or("claude-stand-in")
            .to_string();
        if let Reply::Error(message) = &self {
            return error_response(400, "invalid_request_error", message);
        }
        let id = format!("msg_standin_{n:05}");
        let stop_reason = self.stop_reason();
        let stream = request.get("stream").and_then(Value::as_bool) == Some(true);
        if !stream {
            let block = match &self {
                Reply::Text(text) | Reply::Error(text) => json!({"type": "text", "text": text}),
                Reply::ToolUse { id, name, input } => {
                    json!({"type": "tool_use", "id": id, "name": name, "input": input})
                }
            };
            return json_response(
                200,
                &json!({
                    "id": id, "type": "message", "role": "assistant", "model": model,
                    "content": [block], "stop_reason": stop_reason, "stop_sequence": null,
                    "usage": usage(OUTPUT_TOKENS),
                }),
            );
        }
        let mut events: Vec<(&str, Value)> = vec![
            (
                "message_start",
                json!({"type": "message_start", "message": {
                    "id": id, "type": "message", "role": "assistant", "model": model,
                    "content": [], "stop_reason": null, "stop_sequence": null,
                    "usage": usage(1),
                }}),
            ),
            ("ping", json!({"type": "ping"})),
        ];
        match &self {
            Reply::Text(text) | Reply::Error(text) => {
                events.push((
                    "content_block_start",
                    json!({"type": "content_block_start", "index": 0,
                           "content_block": {"type": "text", "text": ""}}),
                ));
                events.push((
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": 0,
                           "delta": {"type": "text_delta", "text": text}}),
                ));
            }
            Reply::ToolUse { id, name, input } => {
                events.push((
                    "content_block_start",
                    json!({"type": "content_block_start", "index": 0,
                           "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
                ));
                events.push((
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": 0,
                           "delta": {"type": "input_json_delta", "partial_json": input.to_string()}}),
                ));
            }
        }
        events.push((
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ));
        events.push((
            "message_delta",
            json!({"type": "message_delta",
                   "delta": {"stop_reason": stop_reason, "stop_sequence": null},
                   "usage": {"output_tokens": OUTPUT_TOKENS}}),
        ));
        events.push(("message_stop", json!({"type": "message_stop"})));
        let mut body = String::new();
        for (event, data) in events {
            body.push_str(&format!("event: {event}\ndata: {data}\n\n"));
        }
        HttpResponse {
            status: 200,
            content_type: "text/event-stream",
            body: body.into_bytes(),
            headers: Vec::new(),
        }
    }
}

fn usage(output_tokens: u64) -> Value {
    json!({
        "input_tokens": INPUT_TOKENS,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": output_tokens,
    })
}

/// The OpenAI Responses API (`POST /v1/responses`, Codex's wire API), playing the same script:
/// a [`Step::Bash`] is a call of the shell function the request offers (`exec_command`,
/// `shell_command` or `shell`), a [`Step::Text`] an assistant message, a [`Step::Error`] an
/// HTTP 400. The position is read from the conversation: `function_call_output` items plus
/// earlier assistant messages in `input`. Streamed as server-sent events (`response.created`,
/// `response.output_item.done`, `response.completed` with usage) when `"stream": true`.
mod responses {
    use super::*;

    /// A [`Step::Bash`] described `escalated: WHY` asks to run outside Codex's sandbox
    /// (`sandbox_permissions: require_escalated`, `justification: WHY`): in its TUI with
    /// `--ask-for-approval on-request`, the person approves.
    pub const ESCALATED: &str = "escalated: ";

    pub fn position(body: &Value) -> usize {
        let items = body.get("input").and_then(Value::as_array);
        items.map_or(0, |items| {
            items
                .iter()
                .filter(|i| {
                    let t = i.get("type").and_then(Value::as_str);
                    t == Some("function_call_output")
                        || (t == Some("message") && i["role"] == "assistant")
                })
                .count()
        })
    }

    /// The name of the shell function offered, and the arguments it takes for `command`.
    fn shell_call(body: &Value, command: &str) -> (String, Value) {
        let names: Vec<&str> = body
            .get("tools")
            .and_then(Value::as_array)
            .map(|t| t.iter().filter_map(|t| t.get("name")?.as_str()).collect())
            .unwrap_or_default();
        if names.contains(&"exec_command") {
            ("exec_command".into(), json!({"cmd": command}))
        } else if names.contains(&"shell_command") {
            ("shell_command".into(), json!({"command": command}))
        } else {
            ("shell".into(), json!({"command": ["bash", "-lc", command]}))
        }
    }

    pub fn reply(body: &Value, script: &[Step], n: u64) -> HttpResponse {
        let position = position(body);
        let item = match script.get(position) {
            Some(Step::Error(message)) => {
                return json_response(
                    400,
                    &json!({"error": {"message": message, "type": "invalid_request_error", "code": null, "param": null}}),
                )
            }
            Some(Step::Bash {
                command,
                description,
            }) => {
                let (name, mut arguments) = shell_call(body, command);
                // Codex's way to ask the person to run a command outside its sandbox.
                if let Some(why) = description.strip_prefix(ESCALATED) {
                    arguments["sandbox_permissions"] = json!("require_escalated");
                    arguments["justification"] = json!(why);
                }
                json!({"type": "function_call", "id": format!("fc_{n:05}"),
                       "call_id": format!("call_standin_{position:03}_{n:05}"),
                       "name": name, "arguments": arguments.to_string(), "status": "completed"})
            }
            Some(Step::Text(text)) => message(text, n),
            None => message(&final_text(script), n),
        };
        let id = format!("resp_standin_{n:05}");
        let usage = json!({"input_tokens": INPUT_TOKENS, "input_tokens_details": {"cached_tokens": 0},
                           "output_tokens": OUTPUT_TOKENS, "output_tokens_details": {"reasoning_tokens": 0},
                           "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS});
        let response = |status: &str, output: Value| {
            json!({"id": id, "object": "response", "status": status, "model": body["model"],
                   "output": output, "usage": usage})
        };
        if body.get("stream").and_then(Value::as_bool) != Some(true) {
            return json_response(200, &response("completed", json!([item])));
        }
        let events = [
            json!({"type": "response.created", "sequence_number": 0, "response": response("in_progress", json!([]))}),
            json!({"type": "response.output_item.added", "sequence_number": 1, "output_index": 0, "item": item}),
            json!({"type": "response.output_item.done", "sequence_number": 2, "output_index": 0, "item": item}),
            json!({"type": "response.completed", "sequence_number": 3, "response": response("completed", json!([item]))}),
        ];
        let mut text = String::new();
        for e in events {
            text.push_str(&format!(
                "event: {}\ndata: {e}\n\n",
                e["type"].as_str().unwrap()
            ));
        }
        HttpResponse {
            status: 200,
            content_type: "text/event-stream",
            body: text.into_bytes(),
            headers: Vec::new(),
        }
    }

    fn message(text: &str, n: u64) -> Value {
        json!({"type": "message", "id": format!("msg_{n:05}"), "role": "assistant", "status": "completed",
               "content": [{"type": "output_text", "text": text, "annotations": []}]})
    }
}

/// The Gemini API (`POST /v1beta/models/<model>:generateContent` and
/// `:streamGenerateContent`, Gemini CLI's), playing the same script for the main agent (a
/// request offering `run_shell_command`): a [`Step::Bash`] is a `functionCall` of it, a
/// [`Step::Text`] a text part, a [`Step::Error`] an HTTP 400. The position is read from the
/// conversation: `functionResponse` parts plus earlier model turns without a call. Other
/// requests (its routing and next-speaker checks) get an instance of their JSON schema, or a
/// short text. `:countTokens` gets an estimate. Streamed as `data:` events (`alt=sse`).
mod gemini {
    use super::*;

    fn is_main(body: &Value) -> bool {
        body["tools"].as_array().is_some_and(|tools| {
            tools.iter().any(|t| {
                t["functionDeclarations"]
                    .as_array()
                    .is_some_and(|f| f.iter().any(|d| d["name"] == "run_shell_command"))
            })
        })
    }

    pub fn position(body: &Value) -> usize {
        let contents = body["contents"].as_array();
        contents.map_or(0, |contents| {
            contents
                .iter()
                .map(|c| {
                    let parts = c["parts"].as_array().map(Vec::as_slice).unwrap_or(&[]);
                    let responses = parts
                        .iter()
                        .filter(|p| p.get("functionResponse").is_some())
                        .count();
                    let model_text = c["role"] == "model"
                        && !parts.iter().any(|p| p.get("functionCall").is_some());
                    responses + usize::from(model_text)
                })
                .sum()
        })
    }

    pub fn reply(path: &str, body: &Value, script: &[Step], n: u64) -> (RequestKind, HttpResponse) {
        if path.ends_with(":countTokens") {
            let tokens = (body.to_string().len() / 4).max(1);
            return (
                RequestKind::CountTokens,
                json_response(200, &json!({"totalTokens": tokens})),
            );
        }
        let main = is_main(body);
        let part = if main {
            match script.get(position(body)) {
                Some(Step::Error(message)) => {
                    return (
                        RequestKind::Main,
                        json_response(
                            400,
                            &json!({"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}),
                        ),
                    )
                }
                Some(Step::Bash {
                    command,
                    description,
                }) => json!({"functionCall": {
                    "name": "run_shell_command",
                    "args": {"command": command, "description": description}}}),
                Some(Step::Text(text)) => json!({"text": text}),
                None => json!({"text": final_text(script)}),
            }
        } else {
            let config = &body["generationConfig"];
            let schema = config
                .get("responseJsonSchema")
                .or(config.get("responseSchema"));
            match schema {
                Some(schema) => {
                    json!({"text": schema_instance(&lowercase_types(schema), 0).to_string()})
                }
                None => json!({"text": SIDE_REPLY_TEXT}),
            }
        };
        let chunk = json!({
            "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": INPUT_TOKENS, "candidatesTokenCount": OUTPUT_TOKENS,
                              "totalTokenCount": INPUT_TOKENS + OUTPUT_TOKENS},
            "modelVersion": "stand-in",
            "responseId": format!("gemini_standin_{n:05}"),
        });
        let kind = if main {
            RequestKind::Main
        } else {
            RequestKind::Side
        };
        if !path.ends_with(":streamGenerateContent") {
            return (kind, json_response(200, &chunk));
        }
        (
            kind,
            HttpResponse {
                status: 200,
                content_type: "text/event-stream",
                body: format!("data: {chunk}\r\n\r\n").into_bytes(),
                headers: Vec::new(),
            },
        )
    }

    /// Gemini schemas spell types in capitals (`OBJECT`); [`schema_instance`] reads JSON Schema.
    fn lowercase_types(schema: &Value) -> Value {
        match schema {
            Value::Object(m) => Value::Object(
                m.iter()
                    .map(|(k, v)| match (k.as_str(), v) {
                        ("type", Value::String(t)) => (k.clone(), json!(t.to_ascii_lowercase())),
                        _ => (k.clone(), lowercase_types(v)),
                    })
                    .collect(),
            ),
            Value::Array(a) => Value::Array(a.iter().map(lowercase_types).collect()),
            v => v.clone(),
        }
    }
}

/// OpenAI-compatible Chat Completions (`POST /v1/chat/completions`, opencode's and aider's),
/// playing the same script for the main agent (a request offering a `bash` function, or
/// aider's, which offers none and reads edits from the text): a [`Step::Bash`]
/// is a `tool_calls` entry, a [`Step::Text`] a content reply, a [`Step::Error`] an HTTP 400.
/// The position is read from the conversation: `tool` messages plus earlier assistant
/// messages without tool calls. Other requests (its session title) get a short text.
/// Streamed as `data:` chunks ending in `data: [DONE]` when `"stream": true`.
mod chat {
    use super::*;

    /// opencode's agent offers `bash`; aider offers no tools (it edits through its replies'
    /// text), and only opencode's title request speaks of a title.
    fn is_main(body: &Value) -> bool {
        match body["tools"].as_array() {
            Some(tools) if !tools.is_empty() => {
                tools.iter().any(|t| t["function"]["name"] == "bash")
            }
            _ => !body["messages"][0]
                .to_string()
                .to_lowercase()
                .contains("title"),
        }
    }

    /// aider opens with example exchanges: the conversation counted starts at the task (the
    /// first message naming `orchestratectl`, as every built-in profile's prompt does), or
    /// with the first message when none does.
    pub fn position(body: &Value) -> usize {
        body["messages"].as_array().map_or(0, |messages| {
            let task = messages
                .iter()
                .position(|m| m["role"] == "user" && m.to_string().contains("orchestratectl"))
                .unwrap_or(0);
            messages[task..]
                .iter()
                .filter(|m| {
                    m["role"] == "tool"
                        || (m["role"] == "assistant"
                            && m["tool_calls"].as_array().is_none_or(Vec::is_empty))
                })
                .count()
        })
    }

    pub fn reply(body: &Value, script: &[Step], n: u64) -> (RequestKind, HttpResponse) {
        let main = is_main(body);
        let kind = if main {
            RequestKind::Main
        } else {
            RequestKind::Side
        };
        let step = if main {
            script.get(position(body)).cloned()
        } else {
            Some(Step::Text(SIDE_REPLY_TEXT.into()))
        };
        let (message, finish) = match step {
            Some(Step::Error(message)) => {
                return (
                    kind,
                    json_response(
                        400,
                        &json!({"error": {"message": message, "type": "invalid_request_error", "code": null, "param": null}}),
                    ),
                )
            }
            Some(Step::Bash {
                command,
                description,
            }) => (
                json!({"role": "assistant", "content": null, "tool_calls": [{
                    "index": 0, "id": format!("call_standin_{n:05}"), "type": "function",
                    "function": {"name": "bash",
                                 "arguments": json!({"command": command, "description": description}).to_string()}}]}),
                "tool_calls",
            ),
            Some(Step::Text(text)) => (json!({"role": "assistant", "content": text}), "stop"),
            None => (
                json!({"role": "assistant", "content": final_text(script)}),
                "stop",
            ),
        };
        let usage = json!({"prompt_tokens": INPUT_TOKENS, "completion_tokens": OUTPUT_TOKENS,
                           "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS});
        let id = format!("chatcmpl-standin-{n:05}");
        let model = body["model"].clone();
        if body.get("stream").and_then(Value::as_bool) != Some(true) {
            return (
                kind,
                json_response(
                    200,
                    &json!({"id": id, "object": "chat.completion", "created": 0, "model": model,
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage}),
                ),
            );
        }
        let chunk = |delta: Value, finish: Value, usage: Value| {
            json!({"id": id, "object": "chat.completion.chunk", "created": 0, "model": model,
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], "usage": usage})
        };
        let text = [
            chunk(message, Value::Null, Value::Null),
            chunk(json!({}), json!(finish), usage),
        ]
        .iter()
        .map(|c| format!("data: {c}\n\n"))
        .collect::<String>()
            + "data: [DONE]\n\n";
        (
            kind,
            HttpResponse {
                status: 200,
                content_type: "text/event-stream",
                body: text.into_bytes(),
                headers: Vec::new(),
            },
        )
    }
}

/// The pinned agent CLI `name` (`codex`, `gemini`, `opencode`, `aider`) for tests:
/// `OCTL_TEST_<NAME>_BIN`, else `.ci/node/node_modules/.bin/<name>` (`.ci/aider/bin/aider`),
/// as `.ci/run` installs them; `None` when missing.
pub fn agent_cli(name: &str) -> Option<PathBuf> {
    let var = format!("OCTL_TEST_{}_BIN", name.to_ascii_uppercase());
    if let Some(p) = std::env::var_os(&var) {
        return Some(PathBuf::from(p));
    }
    let p = match name {
        "aider" => workspace_root().join(".ci/aider/bin/aider"),
        _ => workspace_root()
            .join(".ci/node/node_modules/.bin")
            .join(name),
    };
    p.exists().then_some(p)
}

/// [`agent_cli`], or a panic saying how to install it.
pub fn require_agent_cli(name: &str) -> PathBuf {
    agent_cli(name).unwrap_or_else(|| {
        panic!(
            "the {name} CLI is missing: set OCTL_TEST_{}_BIN or run .ci/run (it npm-installs the pinned version under .ci/node)",
            name.to_ascii_uppercase()
        )
    })
}

// ---------------------------------------------------------------------------------------------
// The Claude Code CLI.

/// The workspace root (the parent of the `tests` package).
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// The Claude Code CLI: `$OCTL_TEST_CLAUDE_BIN`, else `<workspace>/.ci/node/node_modules/.bin/claude`
/// (where `.ci/run` installs the pinned version), if that file exists.
pub fn claude_bin() -> Option<PathBuf> {
    let path = match std::env::var_os("OCTL_TEST_CLAUDE_BIN") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => workspace_root().join(".ci/node/node_modules/.bin/claude"),
    };
    path.is_file().then_some(path)
}

/// Why the CLI cannot be used, if it cannot (missing, or `--version` fails).
fn claude_problem() -> Result<PathBuf, String> {
    let Some(bin) = claude_bin() else {
        let wanted = std::env::var("OCTL_TEST_CLAUDE_BIN").unwrap_or_else(|_| {
            workspace_root()
                .join(".ci/node/node_modules/.bin/claude")
                .display()
                .to_string()
        });
        return Err(format!(
            "the Claude Code CLI is not installed at {wanted} (run .ci/run, or `cd .ci/node && npm install @anthropic-ai/claude-code@<pinned>`, or set OCTL_TEST_CLAUDE_BIN)"
        ));
    };
    let home = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
    let mut cmd = Command::new(&bin);
    cmd.arg("--version")
        .env("HOME", home.path())
        .env("CLAUDE_CONFIG_DIR", home.path())
        .env("CLAUDE_CODE_TMPDIR", home.path())
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .stdin(Stdio::null());
    match run_with_timeout(&mut cmd, Duration::from_secs(30)) {
        Ok(out) if out.status.success() => Ok(bin),
        Ok(out) => Err(format!(
            "{} --version failed ({}): {}{}",
            bin.display(),
            out.status,
            out.stdout,
            out.stderr
        )),
        Err(e) => Err(format!("{} --version: {e}", bin.display())),
    }
}

/// The CLI, checked once per test process; panics saying why when it is missing or its
/// `--version` fails. The tests that call it are `#[ignore]`d with that reason, so they run only
/// when asked for (`cargo test -p octl-tests -- --ignored`, as `.ci/run` does) and then fail
/// loudly rather than pass without having run.
pub fn require_claude() -> PathBuf {
    static CHECKED: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    match CHECKED.get_or_init(claude_problem) {
        Ok(bin) => bin.clone(),
        Err(why) => panic!("{why}"),
    }
}

/// Variables inherited from a surrounding shell or Claude Code session that would change how the
/// CLI authenticates or behaves; [`apply_claude_env`] removes them.
pub const CLAUDE_ENV_REMOVE: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_MODEL",
    "ANTHROPIC_SMALL_FAST_MODEL",
    "ANTHROPIC_DEFAULT_OPUS_MODEL",
    "ANTHROPIC_DEFAULT_SONNET_MODEL",
    "ANTHROPIC_DEFAULT_HAIKU_MODEL",
    "ANTHROPIC_CUSTOM_HEADERS",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_VERTEX",
    "CLAUDE_CODE_USE_FOUNDRY",
    "CLAUDECODE",
    "CLAUDE_CODE_ENTRYPOINT",
    "CLAUDE_CODE_SSE_PORT",
    "CLAUDE_CODE_SANDBOXED",
    "CLAUDE_CODE_SIMPLE",
    "IS_SANDBOX",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "http_proxy",
    "https_proxy",
    "ALL_PROXY",
    "all_proxy",
];

/// Everything the CLI needs to talk only to the stand-in at `url`, with `home` as `$HOME`,
/// `config_dir` as `$CLAUDE_CONFIG_DIR` and its temp files under `home`.
///
/// Auth is `ANTHROPIC_AUTH_TOKEN` and `ANTHROPIC_API_KEY` is set empty: an API key makes an
/// interactive session ask whether to use it (default *No*); a token never does. Where a command
/// can drop variables, also remove [`CLAUDE_ENV_REMOVE`] (see [`apply_claude_env`]).
pub fn claude_env(url: &str, home: &Path, config_dir: &Path) -> Vec<(String, String)> {
    let s = |k: &str, v: &str| (k.to_string(), v.to_string());
    vec![
        s("ANTHROPIC_BASE_URL", url),
        s("ANTHROPIC_AUTH_TOKEN", "octl-test-token"),
        s("ANTHROPIC_API_KEY", ""),
        s("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
        s("DISABLE_AUTOUPDATER", "1"),
        s("DISABLE_TELEMETRY", "1"),
        s("DISABLE_ERROR_REPORTING", "1"),
        s("NO_PROXY", "127.0.0.1,localhost"),
        s("HOME", &home.display().to_string()),
        s("CLAUDE_CONFIG_DIR", &config_dir.display().to_string()),
        s("CLAUDE_CODE_TMPDIR", &home.display().to_string()),
    ]
}

/// Removes [`CLAUDE_ENV_REMOVE`] from `cmd` and sets [`claude_env`].
pub fn apply_claude_env(cmd: &mut Command, url: &str, home: &Path, config_dir: &Path) {
    for var in CLAUDE_ENV_REMOVE {
        cmd.env_remove(var);
    }
    cmd.envs(claude_env(url, home, config_dir));
}

/// For interactive sessions in tests only: writes `$CLAUDE_CONFIG_DIR/.claude.json` with the
/// first-run onboarding done (no theme picker, no security notes) and `trusted` directories'
/// workspace trust accepted. A git worktree inherits the trust of its main repository. Never
/// point this at a user's real config.
pub fn seed_claude_config(config_dir: &Path, trusted: &[&Path]) {
    let mut projects = serde_json::Map::new();
    for dir in trusted {
        let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
        projects.insert(
            dir.display().to_string(),
            json!({"hasTrustDialogAccepted": true}),
        );
    }
    let config = json!({"hasCompletedOnboarding": true, "projects": projects});
    std::fs::create_dir_all(config_dir).expect("create CLAUDE_CONFIG_DIR");
    std::fs::write(
        config_dir.join(".claude.json"),
        serde_json::to_vec_pretty(&config).unwrap(),
    )
    .expect("write .claude.json");
}

/// A world whose daemon runs the Claude Code program `claude` against `model`: the CLI's
/// environment aimed at the stand-in ([`claude_env`]), its config seeded
/// ([`seed_claude_config`]) with the repository trusted when `trusted` (else Claude Code asks
/// in the window), and `[agents.claude]` naming the program, followed by `agent_config` (more
/// keys of that table, each on its own line).
pub fn claude_world(
    claude: &Path,
    model: &ModelStandIn,
    trusted: bool,
    agent_config: &str,
) -> (crate::TestEnv, crate::TestRepo) {
    let mut env = crate::TestEnv::new();
    for (k, v) in claude_env(&model.url(), &env.user_home, &env.claude_dir) {
        env.set_env(&k, &v);
    }
    let repo = crate::TestRepo::new(&env, "repo");
    let trusted_dirs: Vec<&Path> = if trusted {
        vec![repo.path.as_path()]
    } else {
        vec![]
    };
    seed_claude_config(&env.claude_dir, &trusted_dirs);
    env.write_config(&format!(
        "[agents.claude]\nprogram = {:?}\n{agent_config}",
        claude.display().to_string()
    ));
    (env, repo)
}

/// A world whose `codex` profile runs the pinned Codex against `model` (the Responses API
/// stand-in), with a `CODEX_HOME` and HOME of its own; `extra_config` is appended to
/// config.toml after `[agents.codex]`.
pub fn codex_world(model: &ModelStandIn, extra_config: &str) -> (crate::TestEnv, crate::TestRepo) {
    let codex = require_agent_cli("codex");
    let mut env = crate::TestEnv::new();
    let codex_home = env.user_home.join(".codex");
    std::fs::create_dir_all(&codex_home).unwrap();
    env.set_env("CODEX_HOME", &codex_home.display().to_string());
    env.set_env("OPENAI_API_KEY", "sk-test");
    let repo = crate::TestRepo::new(&env, "repo");
    let settings = [
        "model_provider=local".to_string(),
        "model_providers.local.name=\"local\"".to_string(),
        format!("model_providers.local.base_url=\"{}/v1\"", model.url()),
        "model_providers.local.wire_api=\"responses\"".to_string(),
        "model_providers.local.env_key=\"OPENAI_API_KEY\"".to_string(),
    ];
    let mut args: Vec<String> = settings
        .iter()
        .flat_map(|s| ["-c".to_string(), s.clone()])
        .collect();
    args.extend(["-m".to_string(), "stand-in".to_string()]);
    env.write_config(&format!(
        "[agents.codex]\nprogram = {:?}\nargs = {}\n{extra_config}",
        codex.display().to_string(),
        serde_json::to_string(&args).unwrap()
    ));
    (env, repo)
}

/// The autonomous argv (after the program name) that works with this Claude Code version:
/// `-p --output-format stream-json --verbose --permission-mode acceptEdits --allowedTools
/// <allowed…> [--append-system-prompt <text>] -- <prompt>`. The `--` ends the variadic
/// `--allowedTools` and lets the prompt start with `-`.
pub fn print_argv(
    prompt: &str,
    allowed_tools: &[&str],
    append_system_prompt: Option<&str>,
) -> Vec<String> {
    let mut argv: Vec<String> = [
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--permission-mode",
        "acceptEdits",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if !allowed_tools.is_empty() {
        argv.push("--allowedTools".into());
        argv.extend(allowed_tools.iter().map(|s| s.to_string()));
    }
    if let Some(text) = append_system_prompt {
        argv.push("--append-system-prompt".into());
        argv.push(text.into());
    }
    argv.push("--".into());
    argv.push(prompt.into());
    argv
}

/// The final `{"type":"result",…}` line of `--output-format stream-json` output.
pub fn stream_json_result(stdout: &str) -> Option<Value> {
    stdout
        .lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v.get("type").and_then(Value::as_str) == Some("result"))
}

/// What a finished process printed.
#[derive(Debug)]
pub struct Finished {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

/// Runs `cmd` to completion with its output captured (in temp files, so a lingering grandchild
/// holding the descriptors cannot stall the wait); kills it and returns an error with what it
/// printed when it is still running at `timeout`.
pub fn run_with_timeout(cmd: &mut Command, timeout: Duration) -> Result<Finished, String> {
    let started = Instant::now();
    let out_file = tempfile::tempfile().map_err(|e| format!("temp file: {e}"))?;
    let err_file = tempfile::tempfile().map_err(|e| format!("temp file: {e}"))?;
    let clone = |f: &std::fs::File| f.try_clone().map_err(|e| format!("temp file: {e}"));
    let mut child = cmd
        .stdout(clone(&out_file)?)
        .stderr(clone(&err_file)?)
        .spawn()
        .map_err(|e| format!("spawn {:?}: {e}", cmd.get_program()))?;
    let read_back = |mut f: &std::fs::File| {
        use std::io::Seek;
        let mut buf = Vec::new();
        let _ = f.seek(std::io::SeekFrom::Start(0));
        let _ = f.read_to_end(&mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    };
    let deadline = started + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{:?} still running after {timeout:?}; killed.\nstdout:\n{}\nstderr:\n{}",
                    cmd.get_program(),
                    read_back(&out_file),
                    read_back(&err_file)
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(format!("wait: {e}")),
        }
    };
    Ok(Finished {
        status,
        stdout: read_back(&out_file),
        stderr: read_back(&err_file),
        elapsed: started.elapsed(),
    })
}

/// Makes the `claude` profile's program a script that, like Claude Code, ends its stream with
/// a result costing `cost` USD, after committing a file named after its node and reporting
/// done: a run's spending without the real CLI.
pub fn costly_claude(env: &crate::TestEnv, dir: &std::path::Path, cost: f64) {
    use std::os::unix::fs::PermissionsExt;
    let script = format!(
        r#"#!/bin/sh
printf '%s\n' "$OCTL_NODE" > "$OCTL_NODE.txt" && git add "$OCTL_NODE.txt" && git commit -qm "$OCTL_NODE"
orchestratectl node done --message spent
printf '%s\n' '{{"type":"result","subtype":"success","is_error":false,"num_turns":1,"total_cost_usd":{cost},"session_id":"s"}}'
"#
    );
    let program = dir.join("claude");
    std::fs::write(&program, script).unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    env.write_config(&format!(
        "[agents.claude]\nprogram = {:?}\n",
        program.display().to_string()
    ));
}
