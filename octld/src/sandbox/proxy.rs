//! `[sandbox] network = "allow"`: a sandboxed agent reaches only the `host:port` patterns of
//! `[sandbox] allow`, through a proxy the daemon runs (docs/SECURITY.md, "Network").
//!
//! The decision, kept small:
//! - The agent has a network namespace of its own (no `--share-net`), holding a loopback
//!   only (bubblewrap brings it up), so nothing leaves the sandbox but through a Unix socket.
//! - Per node, the daemon serves that socket, `proxy.sock` in the node's sandbox directory
//!   (`net/` beside what [`super::prepare`] makes; the directory is shown inside at
//!   [`IN_SANDBOX_DIR`], so a socket made anew is seen anew). It speaks HTTP CONNECT only:
//!   `CONNECT host:port HTTP/1.1` and headers (at most [`MAX_HEADER`] bytes, within
//!   [`HEADER_WITHIN`]); a target [`Pattern`]s allow is resolved and connected here, answered
//!   `200` and spliced both ways; anything else is `403` with one line saying why, and counted
//!   ([`Refusals`]: `node.network_refused`, not flooding the log); another method is `405`.
//! - Inside, `octld sandbox-relay` ([`super::relay`]) runs first and starts the agent: it
//!   listens on each loopback target of the allow list at its own address and port (a model
//!   stand-in at `http://127.0.0.1:PORT` works unchanged) and sends the CONNECT itself, and
//!   on one port for `HTTPS_PROXY`/`HTTP_PROXY`, passing bytes as they are.
//! - A name is matched as the agent gave it and resolved by the daemon; `*.suffix` matches
//!   names under the suffix, not the suffix itself.
//!
//! The socket is opened at [`super::wrap`] and closed with the node's own socket.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use octl_proto::AppError;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UnixListener, UnixStream};

use crate::daemon::Daemon;
use crate::server::agent::Scope;

/// Where the node's proxy directory is shown inside its sandbox; the socket is in it.
pub const IN_SANDBOX_DIR: &str = "/run/octl-net";
/// The socket's name in that directory.
pub const SOCKET: &str = "proxy.sock";
/// A request's line and headers, at most.
pub const MAX_HEADER: usize = 8 * 1024;
/// The time a client has to send them.
pub const HEADER_WITHIN: Duration = Duration::from_secs(10);
/// The time a connection to an allowed target may take.
const CONNECT_WITHIN: Duration = Duration::from_secs(15);
/// After a target's first refusal is recorded, its next at most this often.
pub const RECORD_EVERY: Duration = Duration::from_secs(60);
/// Distinct targets recorded per node; the rest are counted together as target `*`.
pub const MAX_TARGETS: usize = 50;

/// What `[sandbox] allow` accepts, for its error messages.
pub const ACCEPTED: &str = "host:port, the host a name, an address ([::1] for IPv6) or *.suffix, the port a number or *; e.g. \"api.anthropic.com:443\", \"*.npmjs.org:443\", \"127.0.0.1:8080\"";

/// One `host:port` pattern of `[sandbox] allow`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    pub host: Host,
    /// `None`: any port (`*`).
    pub port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    /// This name or address exactly (lower case; an IPv6 address without brackets).
    Exact(String),
    /// Any name under this suffix (`*.npmjs.org` is `npmjs.org`), not the suffix itself.
    Under(String),
}

/// `host:port` or `[v6]:port` split, the host without brackets.
fn split_host_port(s: &str) -> Option<(&str, &str)> {
    if let Some(rest) = s.strip_prefix('[') {
        let (host, port) = rest.split_once("]:")?;
        Some((host, port))
    } else {
        let (host, port) = s.rsplit_once(':')?;
        (!host.contains(':')).then_some((host, port))
    }
}

fn is_name(h: &str) -> bool {
    !h.is_empty()
        && h.len() <= 253
        && h.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

fn is_host(h: &str) -> bool {
    is_name(h) || h.parse::<std::net::IpAddr>().is_ok()
}

impl Pattern {
    /// Reads one pattern; the error names `[sandbox] allow` and the accepted form.
    pub fn parse(s: &str) -> Result<Pattern, AppError> {
        let bad = || {
            AppError::invalid(format!(
                "[sandbox] allow: {s:?} is not a host:port pattern; accepted: {ACCEPTED}"
            ))
        };
        let (host, port) = split_host_port(s).ok_or_else(bad)?;
        let port = match port {
            "*" => None,
            p => match p.parse::<u16>() {
                Ok(n) if n > 0 && !p.starts_with('+') => Some(n),
                _ => return Err(bad()),
            },
        };
        let host = host.to_ascii_lowercase();
        let host = match host.strip_prefix("*.") {
            Some(suffix) if is_name(suffix) => Host::Under(suffix.to_string()),
            Some(_) => return Err(bad()),
            None if is_host(&host) => Host::Exact(host),
            None => return Err(bad()),
        };
        Ok(Pattern { host, port })
    }

    /// Whether `host:port` (the host as the client named it, without brackets) is allowed.
    pub fn allows(&self, host: &str, port: u16) -> bool {
        let host = host.to_ascii_lowercase();
        let host_ok = match &self.host {
            Host::Exact(h) => *h == host,
            Host::Under(suffix) => host
                .strip_suffix(suffix.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
        };
        host_ok && self.port.is_none_or(|p| p == port)
    }

    /// The loopback address and port the relay listens on for this pattern (a loopback
    /// address with an exact port), with the target it asks for: `(listen, target)`.
    pub fn loopback_forward(&self) -> Option<(String, String)> {
        let (Host::Exact(h), Some(port)) = (&self.host, self.port) else {
            return None;
        };
        let addr: std::net::IpAddr = match h.as_str() {
            "localhost" => std::net::Ipv4Addr::LOCALHOST.into(),
            other => other.parse().ok()?,
        };
        if !addr.is_loopback() {
            return None;
        }
        let target = if h.contains(':') {
            format!("[{h}]:{port}")
        } else {
            format!("{h}:{port}")
        };
        Some((std::net::SocketAddr::new(addr, port).to_string(), target))
    }
}

/// Whether any pattern allows `host:port`.
pub fn allowed(allow: &[Pattern], host: &str, port: u16) -> bool {
    allow.iter().any(|p| p.allows(host, port))
}

/// A node's refused targets, so that a hostile agent cannot flood the log: a target's first
/// refusal is recorded at once, later ones at most every [`RECORD_EVERY`] with the count since
/// the last record; past [`MAX_TARGETS`] distinct targets, the others count as target `*`.
#[derive(Debug, Default)]
pub struct Refusals {
    targets: HashMap<String, Counted>,
}

#[derive(Debug)]
struct Counted {
    recorded_at: Instant,
    /// Refusals since the last record.
    pending: u64,
}

impl Refusals {
    /// Notes one refusal of `target`; returns the record due now, if one is: `(target, count)`.
    pub fn note(&mut self, target: &str, now: Instant) -> Option<(String, u64)> {
        let key = if self.targets.contains_key(target) || self.targets.len() < MAX_TARGETS {
            target
        } else {
            "*"
        };
        match self.targets.get_mut(key) {
            None => {
                self.targets.insert(
                    key.to_string(),
                    Counted {
                        recorded_at: now,
                        pending: 0,
                    },
                );
                Some((key.to_string(), 1))
            }
            Some(c) => {
                c.pending += 1;
                if now.duration_since(c.recorded_at) >= RECORD_EVERY {
                    let n = std::mem::take(&mut c.pending);
                    c.recorded_at = now;
                    Some((key.to_string(), n))
                } else {
                    None
                }
            }
        }
    }

    /// The records due by `now` of targets refused since their last one (`all`: every such
    /// target, as when the node's proxy closes).
    pub fn due(&mut self, now: Instant, all: bool) -> Vec<(String, u64)> {
        let mut out: Vec<(String, u64)> = self
            .targets
            .iter_mut()
            .filter(|(_, c)| {
                c.pending > 0 && (all || now.duration_since(c.recorded_at) >= RECORD_EVERY)
            })
            .map(|(t, c)| {
                c.recorded_at = now;
                (t.clone(), std::mem::take(&mut c.pending))
            })
            .collect();
        out.sort();
        out
    }
}

/// What the proxy does with a refusal: records it (the daemon), or nothing (the bench).
type OnRefused = Arc<dyn Fn(&str) + Send + Sync>;

/// Serves CONNECT requests on `listener` until dropped.
pub async fn serve(listener: UnixListener, allow: Arc<Vec<Pattern>>, refused: OnRefused) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            // Out of descriptors, say: the next accept may work.
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        tokio::spawn(one(stream, allow.clone(), refused.clone()));
    }
}

/// An answer other than `200`, with its one-line reason, and the connection closed.
async fn answer(stream: &mut UnixStream, status: &str, reason: &str) {
    let body = format!("{reason}\n");
    let text = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(text.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// Reads the request's line and headers; returns them and what came after them.
async fn read_header(stream: &mut UnixStream) -> Result<(String, Vec<u8>), &'static str> {
    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 2048];
    loop {
        let n = stream.read(&mut chunk).await.map_err(|_| "read")?;
        if n == 0 {
            return Err("closed");
        }
        let from = buf.len().saturating_sub(3);
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf[from..].windows(4).position(|w| w == b"\r\n\r\n") {
            let end = from + i + 4;
            if end > MAX_HEADER {
                return Err("too large");
            }
            let rest = buf.split_off(end);
            return Ok((String::from_utf8_lossy(&buf).into_owned(), rest));
        }
        if buf.len() > MAX_HEADER {
            return Err("too large");
        }
    }
}

async fn one(mut stream: UnixStream, allow: Arc<Vec<Pattern>>, refused: OnRefused) {
    let (header, rest) = match tokio::time::timeout(HEADER_WITHIN, read_header(&mut stream)).await {
        Ok(Ok(h)) => h,
        Ok(Err("too large")) => {
            let why = format!("the request's line and headers exceed {MAX_HEADER} bytes");
            return answer(&mut stream, "431 Request Header Fields Too Large", &why).await;
        }
        Ok(Err(_)) => return,
        Err(_) => {
            return answer(
                &mut stream,
                "408 Request Timeout",
                "no complete request within 10 s",
            )
            .await
        }
    };
    let line = header.lines().next().unwrap_or("");
    let mut words = line.split(' ');
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    if method != "CONNECT" {
        return answer(
            &mut stream,
            "405 Method Not Allowed",
            "this sandbox's network proxy accepts only CONNECT host:port HTTP/1.1 (use https, or the target's own port)",
        )
        .await;
    }
    let Some((host, port)) = split_host_port(target)
        .filter(|(h, _)| is_host(h))
        .and_then(|(h, p)| Some((h, p.parse::<u16>().ok()?)))
    else {
        let why = format!("{target:?} is not host:port");
        return answer(&mut stream, "400 Bad Request", &why).await;
    };
    if !allowed(&allow, host, port) {
        refused(target);
        let why = format!("{target} is not in [sandbox] allow of config.toml");
        return answer(&mut stream, "403 Forbidden", &why).await;
    }
    let remote = match tokio::time::timeout(CONNECT_WITHIN, TcpStream::connect((host, port))).await
    {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            let why = format!("cannot connect to {target}: {e}");
            return answer(&mut stream, "502 Bad Gateway", &why).await;
        }
        Err(_) => {
            let why = format!("no connection to {target} within 15 s");
            return answer(&mut stream, "504 Gateway Timeout", &why).await;
        }
    };
    let _ = remote.set_nodelay(true);
    let mut remote = remote;
    if stream
        .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
        .await
        .is_err()
        || remote.write_all(&rest).await.is_err()
    {
        return;
    }
    let _ = tokio::io::copy_bidirectional(&mut stream, &mut remote).await;
}

/// The node's proxy directory (`net/` of its sandbox directory) and socket.
pub fn dir_of(layout: &octl_proto::home::Layout, run: &str, node: &str) -> PathBuf {
    layout.sandbox_of(run, node).join("net")
}

/// A node's proxy being served.
struct Served {
    task: tokio::task::AbortHandle,
    refusals: Arc<Mutex<Refusals>>,
}

/// The proxies being served, by node; closing one's stops it.
#[derive(Default)]
pub struct Proxies {
    open: Mutex<HashMap<Scope, Served>>,
}

/// Records `node.network_refused` for the node, off the caller.
fn record(daemon: &Arc<Daemon>, scope: &Scope, records: Vec<(String, u64)>) {
    if records.is_empty() {
        return;
    }
    let (d, scope) = (daemon.clone(), scope.clone());
    tokio::spawn(async move {
        let Some(handle) = d.store.active(&scope.run) else {
            return;
        };
        for (target, count) in records {
            let said = octl_proto::event::NodeNetworkRefused { target, count };
            let _ = crate::engine::append(&d, &handle, Some(&scope.node), said).await;
        }
    });
}

impl Proxies {
    /// Serves `scope`'s proxy socket in `dir` (made anew), allowing `allow`; one already
    /// served is left as it is.
    pub fn open(
        &self,
        daemon: &Arc<Daemon>,
        scope: Scope,
        dir: &Path,
        allow: &[Pattern],
    ) -> Result<(), AppError> {
        let mut open = self.open.lock().expect("proxies lock");
        if open.get(&scope).is_some_and(|s| !s.task.is_finished()) {
            return Ok(());
        }
        std::fs::create_dir_all(dir)
            .map_err(|e| AppError::internal(format!("cannot make {}: {e}", dir.display())))?;
        let path = dir.join(SOCKET);
        let _ = std::fs::remove_file(&path);
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
            AppError::internal("a node's network proxy is opened inside the daemon's runtime")
        })?;
        let listener = {
            let _enter = runtime.enter();
            UnixListener::bind(&path)
                .map_err(|e| AppError::internal(format!("cannot serve {}: {e}", path.display())))?
        };
        let refusals = Arc::new(Mutex::new(Refusals::default()));
        let (r, d, s) = (refusals.clone(), Arc::downgrade(daemon), scope.clone());
        let on_refused: OnRefused = Arc::new(move |target: &str| {
            let due = r.lock().expect("refusals").note(target, Instant::now());
            if let (Some(due), Some(d)) = (due, d.upgrade()) {
                record(&d, &s, vec![due]);
            }
        });
        let (r, d, s) = (refusals.clone(), Arc::downgrade(daemon), scope.clone());
        let allow = Arc::new(allow.to_vec());
        let task = runtime.spawn(async move {
            // The counts a target's later refusals wait with are recorded once due.
            let flush = async move {
                let mut tick = tokio::time::interval(RECORD_EVERY / 6);
                loop {
                    tick.tick().await;
                    let due = r.lock().expect("refusals").due(Instant::now(), false);
                    match d.upgrade() {
                        Some(d) => record(&d, &s, due),
                        None => return,
                    }
                }
            };
            tokio::join!(serve(listener, allow, on_refused), flush);
        });
        open.insert(
            scope,
            Served {
                task: task.abort_handle(),
                refusals,
            },
        );
        Ok(())
    }

    /// Stops serving `scope`'s proxy (its node ended), if it was, recording the refusals not
    /// yet recorded.
    pub fn close(&self, daemon: &Arc<Daemon>, scope: &Scope, dir: &Path) {
        if let Some(s) = self.open.lock().expect("proxies lock").remove(scope) {
            s.task.abort();
            let due = s
                .refusals
                .lock()
                .expect("refusals")
                .due(Instant::now(), true);
            record(daemon, scope, due);
        }
        let _ = std::fs::remove_file(dir.join(SOCKET));
    }
}

/// Serves a proxy on `path` allowing `allow`, refusals not recorded, on a thread of its own
/// (the bench measures the proxy without a daemon).
pub fn serve_standalone(path: &Path, allow: Vec<Pattern>) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let _ = std::fs::remove_file(path);
    let listener = {
        let _enter = runtime.enter();
        UnixListener::bind(path)?
    };
    std::thread::spawn(move || {
        runtime.block_on(serve(listener, Arc::new(allow), Arc::new(|_: &str| {})));
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Pattern {
        Pattern::parse(s).unwrap()
    }

    #[test]
    fn patterns_match_a_host_exactly_or_under_a_suffix_and_a_port_or_any() {
        assert!(p("api.anthropic.com:443").allows("API.anthropic.com", 443));
        assert!(!p("api.anthropic.com:443").allows("api.anthropic.com", 80));
        assert!(!p("api.anthropic.com:443").allows("xapi.anthropic.com", 443));
        let npm = p("*.npmjs.org:443");
        assert!(npm.allows("registry.npmjs.org", 443));
        assert!(npm.allows("a.b.npmjs.org", 443));
        assert!(
            !npm.allows("npmjs.org", 443),
            "the suffix itself is not under it"
        );
        assert!(!npm.allows("evilnpmjs.org", 443));
        assert!(!npm.allows("registry.npmjs.org.evil.com", 443));
        assert!(p("127.0.0.1:*").allows("127.0.0.1", 9));
        assert!(p("[::1]:8080").allows("::1", 8080));
        assert_eq!(
            p("127.0.0.1:8080").loopback_forward(),
            Some(("127.0.0.1:8080".into(), "127.0.0.1:8080".into()))
        );
        assert_eq!(
            p("[::1]:8080").loopback_forward(),
            Some(("[::1]:8080".into(), "[::1]:8080".into()))
        );
        assert_eq!(
            p("localhost:3000").loopback_forward(),
            Some(("127.0.0.1:3000".into(), "localhost:3000".into()))
        );
        assert_eq!(p("127.0.0.1:*").loopback_forward(), None);
        assert_eq!(p("10.0.0.1:80").loopback_forward(), None);
        assert_eq!(p("example.com:80").loopback_forward(), None);
    }

    #[test]
    fn a_bad_pattern_names_the_field_and_the_accepted_form() {
        for bad in [
            "example.com",
            "example.com:",
            "example.com:0",
            "example.com:70000",
            "example.com:+80",
            "*:443",
            "*.:443",
            "a*.example.com:443",
            "http://example.com:443",
            "::1:80",
            ":80",
            "exa mple.com:80",
        ] {
            let e = Pattern::parse(bad).unwrap_err();
            assert!(
                e.message.starts_with(&format!(
                    "[sandbox] allow: {bad:?} is not a host:port pattern; accepted: host:port"
                )),
                "{bad}: {}",
                e.message
            );
        }
    }

    #[test]
    fn refusals_are_recorded_first_at_once_then_at_most_once_a_minute_and_capped() {
        let mut r = Refusals::default();
        let t0 = Instant::now();
        assert_eq!(r.note("a:1", t0), Some(("a:1".into(), 1)));
        assert_eq!(r.note("a:1", t0 + Duration::from_secs(1)), None);
        assert_eq!(r.note("a:1", t0 + Duration::from_secs(2)), None);
        assert_eq!(r.due(t0 + Duration::from_secs(30), false), vec![]);
        assert_eq!(
            r.note("a:1", t0 + Duration::from_secs(61)),
            Some(("a:1".into(), 3))
        );
        assert_eq!(r.note("a:1", t0 + Duration::from_secs(62)), None);
        assert_eq!(
            r.due(t0 + Duration::from_secs(122), false),
            vec![("a:1".into(), 1)]
        );
        assert_eq!(r.due(t0 + Duration::from_secs(500), true), vec![]);
        // Past the cap, every new target counts as `*`.
        for i in 0..MAX_TARGETS - 1 {
            assert!(r.note(&format!("h{i}:1"), t0).is_some());
        }
        assert_eq!(r.note("new:1", t0), Some(("*".into(), 1)));
        assert_eq!(r.note("other:2", t0), None);
        assert_eq!(r.note("a:1", t0 + Duration::from_secs(63)), None);
        assert_eq!(
            r.due(t0 + Duration::from_secs(63), true),
            vec![("*".into(), 1), ("a:1".into(), 1)]
        );
    }
}
