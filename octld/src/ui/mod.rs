//! The web UI: octld serves it over HTTP on `[ui] listen` (default `127.0.0.1:7420`) once
//! `ui.open` asks (`orchestratectl ui`), again after a restart, until `ui.close`. The page
//! (`octld/ui/`, embedded in the binary) speaks the same JSON-RPC methods as the CLI and
//! follows the change feed. Design and security model: docs/UI.md.
//!
//! - [`auth`]: one-time login links, sessions (cookie and page key), failed logins limited.
//! - [`routes`]: the pages, `/api/rpc`, `/api/events` (the feed as server-sent events), and the
//!   checks every request passes (`Host`, session, key, `Origin`), with the security headers.
//! - [`assets`]: the embedded files.
//! - [`tls`]: rustls, with a given or generated certificate, for a listen address beyond
//!   loopback (refused without it).

pub mod assets;
pub mod auth;
pub mod routes;
pub mod tls;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use serde::Deserialize;
use tokio::net::TcpListener;

use octl_proto::rpc::{UiClosed, UiOpened};
use octl_proto::{AppError, ErrorKind};

use crate::daemon::Daemon;

/// `[ui]` in config.toml.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UiConfig {
    /// `IP:PORT`; beyond loopback only with TLS.
    pub listen: Option<String>,
    /// Serve HTTPS (with `cert`/`key`, or a generated certificate).
    pub tls: Option<bool>,
    pub cert: Option<String>,
    pub key: Option<String>,
    /// More names the UI is reached by (`Host`), e.g. the machine's name on the LAN.
    #[serde(default)]
    pub hosts: Vec<String>,
}

pub const DEFAULT_LISTEN: &str = "127.0.0.1:7420";

/// Connections the UI serves at once (a page holds two or three): a quarter of what the
/// open-file limit leaves the socket, 64 at most — 40 under macOS's 256, so the socket's 160
/// and the UI's together stay inside the limit with most of the reserve still free.
fn connections() -> usize {
    (crate::nofile::connections() / 4).clamp(8, 64)
}
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// What one serving answers to: its scheme and the `Host` values it accepts.
#[derive(Debug)]
pub struct Site {
    pub https: bool,
    pub hosts: Vec<String>,
}

impl Site {
    pub fn scheme(&self) -> &'static str {
        if self.https {
            "https"
        } else {
            "http"
        }
    }
}

pub struct Ui {
    dir: PathBuf,
    pub auth: Arc<auth::Auth>,
    serving: Mutex<Option<Serving>>,
}

struct Serving {
    listen: SocketAddr,
    url: String,
    fingerprint: Option<String>,
    stop: tokio::sync::watch::Sender<bool>,
}

impl Ui {
    /// The UI's state under `dir` (`$OCTL_HOME/ui`): its sessions kept there.
    pub fn new(dir: PathBuf) -> Ui {
        Ui {
            auth: Arc::new(auth::Auth::load(dir.join("sessions.json"))),
            dir,
            serving: Mutex::new(None),
        }
    }

    /// The file whose presence says the UI was asked for: a restarted daemon serves it again.
    fn marker(&self) -> PathBuf {
        self.dir.join("serving")
    }
}

/// `ui.open`: serve (if not yet, or again on a changed `[ui]`), and a new login link.
pub async fn open(daemon: &Arc<Daemon>) -> Result<UiOpened, AppError> {
    let (url, listen, fingerprint) = start(daemon).await?;
    let marked = std::fs::create_dir_all(&daemon.ui.dir)
        .and_then(|()| std::fs::write(daemon.ui.marker(), b""));
    if let Err(e) = marked {
        tracing::warn!(error = %e, "cannot record that the UI is served: a restarted daemon will not serve it");
    }
    let token = daemon.ui.auth.mint();
    Ok(UiOpened {
        listen: listen.to_string(),
        login_url: format!("{url}login?token={token}"),
        url,
        expires_in_s: auth::LOGIN_TTL.as_secs(),
        tls: fingerprint.is_some(),
        fingerprint,
    })
}

/// `ui.close`: stop serving, log every session out.
pub fn close(daemon: &Arc<Daemon>) -> UiClosed {
    let was = daemon.ui.serving.lock().expect("ui lock").take();
    if let Some(s) = &was {
        let _ = s.stop.send(true);
    }
    let _ = std::fs::remove_file(daemon.ui.marker());
    UiClosed {
        was_serving: was.is_some(),
        sessions: daemon.ui.auth.clear(),
    }
}

/// At the daemon's start: serve the UI again if it was being served.
pub async fn resume(daemon: &Arc<Daemon>) {
    if daemon.ui.marker().exists() {
        match start(daemon).await {
            Ok((url, _, _)) => tracing::info!(url = %url, "serving the web UI again"),
            Err(e) => {
                tracing::error!(error = %e, "cannot serve the web UI again (run `orchestratectl ui`)")
            }
        }
    }
}

/// Where and how `[ui]` says to serve, checked: a listen address beyond loopback needs TLS.
fn site_of(config: &UiConfig) -> Result<(SocketAddr, bool, Vec<String>), AppError> {
    let given = config.listen.as_deref().unwrap_or(DEFAULT_LISTEN);
    let listen: SocketAddr = given.parse().map_err(|_| {
        AppError::invalid(format!(
            "[ui] listen: {given:?} is not an address; accepted: IP:PORT (127.0.0.1:7420, [::1]:7420, 0.0.0.0:7420 with TLS)"
        ))
    })?;
    let https = config.tls.unwrap_or(false) || config.cert.is_some();
    if !listen.ip().is_loopback() && !https {
        return Err(AppError::invalid(format!(
            "[ui] listen: {listen} is beyond loopback and the UI would be plain HTTP; set [ui] tls = true (a certificate is generated) or [ui] cert and key, or keep 127.0.0.1 and reach it through an SSH tunnel (docs/UI.md)"
        )));
    }
    for h in &config.hosts {
        if h.is_empty()
            || !h
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-.:[]".contains(&b))
        {
            return Err(AppError::invalid(format!(
                "[ui] hosts: {h:?} is not a host name; accepted: names and addresses (`box.lan`, `192.168.1.5`)"
            )));
        }
    }
    // The names a certificate is made for and the `Host` values served.
    let mut names: Vec<String> = config
        .hosts
        .iter()
        .map(|h| h.to_ascii_lowercase())
        .collect();
    match listen.ip() {
        ip if ip.is_unspecified() => {}
        IpAddr::V4(ip) => names.push(ip.to_string()),
        IpAddr::V6(ip) => names.push(format!("[{ip}]")),
    }
    if listen.ip().is_loopback() {
        names.push("localhost".into());
    }
    Ok((listen, https, names))
}

/// Starts serving unless the serving already matches `[ui]`: its URL, address, fingerprint.
async fn start(daemon: &Arc<Daemon>) -> Result<(String, SocketAddr, Option<String>), AppError> {
    let config = daemon.config.get()?.ui.clone();
    let (listen, https, names) = site_of(&config)?;
    {
        let serving = daemon.ui.serving.lock().expect("ui lock");
        if let Some(s) = serving
            .as_ref()
            .filter(|s| s.listen == listen && s.fingerprint.is_some() == https)
        {
            return Ok((s.url.clone(), s.listen, s.fingerprint.clone()));
        }
    }
    let tls = if https {
        let cert_names: Vec<String> = names
            .iter()
            .map(|n| n.trim_matches(['[', ']']).to_string())
            .collect();
        Some(tls::load(
            config.cert.as_deref().map(std::path::Path::new),
            config.key.as_deref().map(std::path::Path::new),
            &daemon.ui.dir,
            &cert_names,
        )?)
    } else {
        None
    };
    // A serving on another address stops first: the port may be the same.
    if let Some(old) = daemon.ui.serving.lock().expect("ui lock").take() {
        let _ = old.stop.send(true);
    }
    let listener = TcpListener::bind(listen).await.map_err(|e| {
        AppError::new(
            ErrorKind::IoError,
            format!("cannot serve the UI on {listen}: {e}"),
        )
        .with_hint("another program has the port: set [ui] listen in config.toml")
    })?;
    let bound = listener.local_addr().unwrap_or(listen);
    let port = bound.port();
    let mut hosts: Vec<String> = names.iter().map(|n| format!("{n}:{port}")).collect();
    if https && port == 443 || !https && port == 80 {
        hosts.extend(names.iter().cloned());
    }
    let host = match bound.ip() {
        ip if ip.is_unspecified() => names.first().cloned().unwrap_or_else(|| "localhost".into()),
        IpAddr::V4(ip) => ip.to_string(),
        IpAddr::V6(ip) => format!("[{ip}]"),
    };
    let site = Arc::new(Site { https, hosts });
    let url = format!("{}://{host}:{port}/", site.scheme());
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let fingerprint = tls.as_ref().map(|t| t.fingerprint.clone());
    tokio::spawn(serve(
        listener,
        daemon.clone(),
        site,
        tls.map(|t| t.acceptor),
        stopped,
    ));
    *daemon.ui.serving.lock().expect("ui lock") = Some(Serving {
        listen: bound,
        url: url.clone(),
        fingerprint: fingerprint.clone(),
        stop,
    });
    Ok((url, bound, fingerprint))
}

async fn serve(
    listener: TcpListener,
    daemon: Arc<Daemon>,
    site: Arc<Site>,
    tls: Option<tokio_rustls::TlsAcceptor>,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) {
    let router = routes::router(daemon.clone()).layer(axum::Extension(site));
    let open = Arc::new(tokio::sync::Semaphore::new(connections()));
    let mut told_limit = None::<std::time::Instant>;
    let shutdown = daemon.shutdown_requested();
    tokio::pin!(shutdown);
    // Every connection's task, so a stop ends the event streams too.
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let permit = tokio::select! {
            p = open.clone().acquire_owned() => p.expect("the semaphore is never closed"),
            _ = stopped.changed() => break,
            _ = &mut shutdown => break,
        };
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(s) => s,
                Err(e) => {
                    // Out of descriptors lasts until something closes: said once a minute.
                    let limit = crate::nofile::exhausted(&e);
                    if !limit || told_limit.is_none_or(|t| t.elapsed() > Duration::from_secs(60)) {
                        if limit {
                            told_limit = Some(std::time::Instant::now());
                        }
                        tracing::warn!(error = %e, "the UI cannot accept a connection");
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            _ = stopped.changed() => break,
            _ = &mut shutdown => break,
        };
        let svc = TowerToHyperService::new(router.clone());
        let tls = tls.clone();
        connections.spawn(async move {
            let mut http = http1::Builder::new();
            http.timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT);
            let done = match tls {
                Some(acceptor) => {
                    match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await
                    {
                        Ok(Ok(s)) => http.serve_connection(TokioIo::new(s), svc).await,
                        _ => Ok(()),
                    }
                }
                None => http.serve_connection(TokioIo::new(stream), svc).await,
            };
            if let Err(e) = done {
                tracing::debug!(error = %e, "a UI connection ended with an error");
            }
            drop(permit);
        });
    }
    connections.abort_all();
}
