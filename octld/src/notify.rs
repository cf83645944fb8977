//! Telling a person: each [`Notice`] the store decided while committing an event (once per
//! transition, in log order; see `octl_proto::notice`) goes to the notifiers of
//! `config.toml`'s `[notify]`: a command that reads the notice as JSON on stdin, and a webhook
//! that receives it as a POST. They run on a task of their own, one notice after another,
//! each bounded in time; the store hands notices over through a bounded queue and never
//! waits, so a slow or broken notifier never holds up an append or the engine. Failures are
//! logged to octld.log, and the last one is kept ([`Record`]) for `daemon status` and
//! `doctor`. A notice committed just before the daemon dies may go untold: the
//! log is never replayed into notifications, so nothing is ever told twice.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

use octl_proto::notice::Notice;
use octl_proto::rpc::{NotifyFailure, NotifyStatus};

use crate::config::NotifyConfig;
use crate::daemon::Daemon;
use crate::store::writer::now_ms;

/// Notices waiting for their notifiers; past this many, new ones are dropped (and logged).
pub const QUEUE: usize = 256;

/// How long one notifier may take when the configuration does not say.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Delivers notices until the queue closes (the daemon shuts down).
pub async fn run(daemon: Arc<Daemon>, mut notices: mpsc::Receiver<Notice>) {
    while let Some(notice) = notices.recv().await {
        // Read at each notice, like every other use of config.toml: an edit takes effect
        // without a restart.
        let config = match daemon.config.get() {
            Ok(c) => c.notify.clone(),
            Err(e) => {
                tracing::warn!(error = %e.message, kind = notice.kind.as_str(), run = %notice.run, "notification not sent: config.toml is invalid");
                continue;
            }
        };
        deliver(&config, &notice, &daemon.notified).await;
    }
}

/// How delivering went since the daemon started: the last failure, and when each notifier
/// last delivered (whether it works again since).
#[derive(Debug, Default)]
pub struct Record(Mutex<Outcomes>);

#[derive(Debug, Default)]
struct Outcomes {
    last_failure: Option<NotifyFailure>,
    /// When the command and the webhook last delivered (ms since the epoch).
    delivered: [Option<u64>; 2],
}

/// The notifiers, in [`Outcomes::delivered`]'s order.
const NOTIFIERS: [&str; 2] = ["command", "webhook"];

impl Record {
    fn outcomes(&self) -> std::sync::MutexGuard<'_, Outcomes> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn delivered(&self, notifier: usize) {
        self.outcomes().delivered[notifier] = Some(now_ms());
    }

    fn failed(&self, notifier: usize, notice: &Notice, message: String) {
        self.outcomes().last_failure = Some(NotifyFailure {
            at: octl_proto::time::format_millis(now_ms()),
            notifier: NOTIFIERS[notifier].to_string(),
            message,
            kind: notice.kind.as_str().to_string(),
            run: notice.run.clone(),
            delivered_since: None,
        });
    }

    /// What `daemon.status` says: the notifiers `config` configures, and the last failure
    /// with when its notifier delivered since.
    pub fn status(&self, config: &NotifyConfig) -> NotifyStatus {
        let outcomes = self.outcomes();
        let last_failure = outcomes.last_failure.clone().map(|mut f| {
            let at = octl_proto::time::parse_millis(&f.at).unwrap_or(0);
            let which = NOTIFIERS.iter().position(|n| *n == f.notifier).unwrap_or(0);
            f.delivered_since = outcomes.delivered[which]
                .filter(|&t| t >= at)
                .map(octl_proto::time::format_millis);
            f
        });
        NotifyStatus {
            command: config.command.as_ref().and_then(|a| a.first().cloned()),
            webhook: config.webhook.clone(),
            last_failure,
        }
    }
}

/// Sends one notice to every configured notifier, logging what failed and recording how it
/// went in `record`.
pub async fn deliver(config: &NotifyConfig, notice: &Notice, record: &Record) {
    if config.command.is_none() && config.webhook.is_none() {
        return;
    }
    let body = serde_json::to_vec(notice).expect("a notice always serializes");
    let timeout = config
        .timeout_secs
        .map(Duration::from_secs)
        .unwrap_or(DEFAULT_TIMEOUT);
    let fields = (notice.kind.as_str(), notice.run.as_str(), notice.event.seq);
    if let Some(argv) = &config.command {
        match tokio::time::timeout(timeout, command(argv, &body)).await {
            Ok(Ok(())) => {
                record.delivered(0);
                tracing::debug!(
                    kind = fields.0,
                    run = fields.1,
                    seq = fields.2,
                    "notifier command ran"
                )
            }
            Ok(Err(e)) => {
                tracing::warn!(kind = fields.0, run = fields.1, seq = fields.2, program = %argv[0], error = %e, "notifier command failed");
                record.failed(0, notice, format!("{:?} failed: {e}", argv[0]));
            }
            Err(_) => {
                tracing::warn!(kind = fields.0, run = fields.1, seq = fields.2, program = %argv[0], timeout_s = timeout.as_secs(), "notifier command timed out; killed");
                let message = format!(
                    "{:?} timed out after {} s and was killed",
                    argv[0],
                    timeout.as_secs()
                );
                record.failed(0, notice, message);
            }
        }
    }
    if let Some(url) = &config.webhook {
        match tokio::time::timeout(timeout, webhook(url, body)).await {
            Ok(Ok(())) => {
                record.delivered(1);
                tracing::debug!(
                    kind = fields.0,
                    run = fields.1,
                    seq = fields.2,
                    "webhook notified"
                )
            }
            Ok(Err(e)) => {
                tracing::warn!(kind = fields.0, run = fields.1, seq = fields.2, url = %url, error = %e, "notifier webhook failed");
                record.failed(1, notice, format!("{url} failed: {e}"));
            }
            Err(_) => {
                tracing::warn!(kind = fields.0, run = fields.1, seq = fields.2, url = %url, timeout_s = timeout.as_secs(), "notifier webhook timed out");
                let message = format!("{url} timed out after {} s", timeout.as_secs());
                record.failed(1, notice, message);
            }
        }
    }
}

/// Runs the notifier command with the notice on stdin; an exit other than 0 is an error
/// carrying what it printed on stderr. Killed when dropped (on a timeout).
async fn command(argv: &[String], body: &[u8]) -> Result<(), String> {
    let mut child = tokio::process::Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start {:?}: {e}", argv[0]))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A command that does not read its input is no failure.
        let _ = stdin.write_all(body).await;
        let _ = stdin.write_all(b"\n").await;
    }
    let out = child
        .wait_with_output()
        .await
        .map_err(|e| format!("waiting for {:?}: {e}", argv[0]))?;
    if out.status.success() {
        Ok(())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        Err(format!(
            "{} ({})",
            out.status,
            err.trim().chars().take(500).collect::<String>()
        ))
    }
}

/// POSTs the notice to a plain-HTTP webhook; a status other than 2xx is an error.
async fn webhook(url: &str, body: Vec<u8>) -> Result<(), String> {
    let target = crate::config::HttpUrl::parse(url).map_err(|e| e.message)?;
    let stream = tokio::net::TcpStream::connect((target.host.as_str(), target.port))
        .await
        .map_err(|e| format!("cannot connect to {}:{}: {e}", target.host, target.port))?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())?;
    tokio::spawn(connection);
    let request = hyper::Request::post(&target.path)
        .header("host", target.authority())
        .header("content-type", "application/json")
        .header("user-agent", concat!("octld/", env!("CARGO_PKG_VERSION")))
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| e.to_string())?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    // Read the answer whole, so the server sees its reply taken.
    let _ = response.into_body().collect().await;
    if status.is_success() {
        Ok(())
    } else {
        Err(format!("answered HTTP {status}"))
    }
}
