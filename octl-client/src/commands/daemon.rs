//! `daemon start|stop|restart|status|install-service`. Only `start` may start the daemon; `status` and
//! `stop` report what they find (stop of a stopped daemon succeeds, so retries are safe).
//! `install-service` (in [`service`]) renders the bundled systemd units or launchd plist
//! (embedded at build time from `systemd/` and `launchd/`) for this octld and home, and never
//! talks to the daemon.

mod service;

pub use service::{
    FileStatus, InstallServiceArgs, ServiceFile, ServiceManager, LAUNCHD_LABEL, LAUNCHD_PLIST,
    SYSTEMD_SERVICE, SYSTEMD_SOCKET,
};

use crate::commands::result_of;
use octl_proto::method::{self, NoParams};
use std::time::{Duration, Instant};

use clap::Subcommand;
use octl_proto::rpc::DaemonStatusResult;
use octl_proto::{AppError, ErrorKind};
use serde_json::{json, Value};

use super::Ctx;
use crate::client::{CallError, STOP_DEADLINE};
use crate::output::{duration, fields};

/// The examples of `daemon --help`.
pub const DAEMON_EXAMPLES: &str = "\
Examples:
  orchestratectl daemon status
  orchestratectl daemon start
  orchestratectl daemon stop
  orchestratectl daemon restart                # e.g. after upgrading octld
  orchestratectl daemon install-service        # start it on demand through systemd or launchd";

#[derive(Debug, Subcommand)]
pub enum DaemonCmd {
    /// Start octld for this home if it is not running (detached, in its own session)
    #[command(after_help = "\
Examples:
  orchestratectl daemon start
  orchestratectl --home /tmp/octl-test daemon start
  OCTLD_BIN=./target/debug/octld orchestratectl daemon start   # choose the daemon program")]
    Start,

    /// Stop octld and wait (up to 5 s) until it is gone; succeeds if it was not running
    #[command(after_help = "\
Examples:
  orchestratectl daemon stop
  orchestratectl --json daemon stop")]
    Stop,

    /// Stop octld gracefully, wait until it is gone (up to 5 s), then start it again
    ///
    /// In-flight appends finish first; agents keep running (they live on the daemon's tmux
    /// server) and the new daemon finds their windows. Starts it if it was not running.
    /// Prints what happened (with --json: {was_running, stopped_pid, pid, version}). Exits 1
    /// (kind `timeout`) if the old daemon does not go, 5 if the new one does not answer.
    #[command(after_help = "\
Examples:
  orchestratectl daemon restart
  OCTLD_BIN=./target/debug/octld orchestratectl daemon restart   # after rebuilding octld
  orchestratectl --json daemon restart")]
    Restart,

    /// Show whether octld is running: pid, version, protocol, home, uptime, notifiers and their last failure (exit 5 if not)
    #[command(after_help = "\
Examples:
  orchestratectl daemon status
  orchestratectl --json daemon status")]
    Status,

    /// Install octld as a service started on demand: systemd user units on Linux, a LaunchAgent
    /// on macOS (or print them with --print)
    ///
    /// Renders the bundled units with the absolute path of octld (found as autostart finds it:
    /// $OCTLD_BIN, else next to orchestratectl, else on PATH) and this home. On Linux it writes
    /// octld.socket and octld.service to ${XDG_CONFIG_HOME:-~/.config}/systemd/user/; on macOS
    /// dev.orchestratectl.octld.plist to ~/Library/LaunchAgents/. The service manager then owns
    /// the home's socket (octld.sock) and starts octld on the first connection; autostart stays
    /// the fallback. A file that exists with other content is not overwritten without --force
    /// (exit 4, nothing written). Prints the commands to run next; runs none of them.
    #[command(
        name = "install-service",
        after_help = "\
Examples:
  orchestratectl daemon install-service --print          # see the units, write nothing
  orchestratectl daemon install-service                  # then run the commands it prints:
  systemctl --user daemon-reload && systemctl --user enable --now octld.socket
  orchestratectl --home /tmp/octl-test daemon install-service --force
  orchestratectl --json daemon install-service --print   # {\"files\":[{\"path\",\"text\"}]}"
    )]
    InstallService(InstallServiceArgs),
}

pub async fn execute(ctx: &Ctx, cmd: DaemonCmd) -> Result<(), AppError> {
    match cmd {
        DaemonCmd::Start => start(ctx).await,
        DaemonCmd::Stop => stop(ctx).await,
        DaemonCmd::Restart => restart(ctx).await,
        DaemonCmd::Status => status(ctx).await,
        DaemonCmd::InstallService(args) => service::install_service(ctx, args),
    }
}

async fn start(ctx: &Ctx) -> Result<(), AppError> {
    let (value, started) = match ctx.client.probe_status().await {
        Ok(v) => (v, false),
        Err(CallError::NotRunning(_)) => {
            ctx.client.start().await?;
            (
                ctx.client
                    .call_value::<method::DaemonStatus>(&NoParams {})
                    .await?,
                true,
            )
        }
        Err(CallError::Failed(e) | CallError::Dropped(e)) => return Err(e),
    };
    let status = result_of::<method::DaemonStatus>(&value)?;
    let socket = ctx.client.home().socket();
    ctx.out.result(&value, || {
        if started {
            format!(
                "Started octld (pid {}, version {}) on {}",
                status.pid,
                status.version,
                socket.display()
            )
        } else {
            format!(
                "octld is already running (pid {}) on {}",
                status.pid,
                socket.display()
            )
        }
    });
    Ok(())
}

/// What stopping found: whether a daemon was running, and its pid when it said.
struct Stopped {
    was_running: bool,
    pid: Option<u64>,
}

async fn stop(ctx: &Ctx) -> Result<(), AppError> {
    let socket = ctx.client.home().socket();
    let Stopped { was_running, pid } = stop_daemon(ctx).await?;
    if !was_running {
        ctx.out.result(
            &json!({"stopped": true, "pid": null, "was_running": false}),
            || {
                format!(
                    "octld is not running (socket {}); nothing to stop",
                    socket.display()
                )
            },
        );
        return Ok(());
    }
    ctx.out.result(
        &json!({"stopped": true, "pid": pid, "was_running": true}),
        || {
            let mut text = match pid {
                Some(pid) => format!("Stopped octld (pid {pid})"),
                None => "Stopped octld".to_string(),
            };
            if socket.exists() {
                text.push_str(&format!(
                    "\n{} stays: a service manager holds it and starts octld again on the next connection ({})",
                    socket.display(),
                    stop_service_hint()
                ));
            }
            text
        },
    );
    Ok(())
}

/// Asks the daemon to shut down (it finishes in-flight appends first) and waits until its
/// process is gone. Succeeds when none was running.
async fn stop_daemon(ctx: &Ctx) -> Result<Stopped, AppError> {
    let socket = ctx.client.home().socket();
    let pid = match ctx.client.probe_status().await {
        Ok(v) => v.get("pid").and_then(Value::as_u64),
        Err(CallError::NotRunning(_)) => {
            return Ok(Stopped {
                was_running: false,
                pid: None,
            })
        }
        // A daemon already on its way out is as good as asked to stop.
        Err(CallError::Dropped(_)) => None,
        Err(CallError::Failed(e)) if e.kind == ErrorKind::ShuttingDown => None,
        Err(CallError::Failed(e)) => return Err(e),
    };
    // Said before the daemon goes: its followers, seeing their streams end, wait for it
    // instead of starting it again (only an explicit command does).
    std::fs::write(ctx.client.home().stopped(), b"").map_err(|e| {
        AppError::internal(format!(
            "cannot write {}: {e}",
            ctx.client.home().stopped().display()
        ))
    })?;
    match ctx
        .client
        .try_call_method::<method::DaemonShutdown>(&NoParams {})
        .await
    {
        Ok(_) | Err(CallError::NotRunning(_) | CallError::Dropped(_)) => {}
        Err(CallError::Failed(e)) if e.kind == ErrorKind::ShuttingDown => {}
        Err(CallError::Failed(e)) => return Err(e),
    }
    let deadline = Instant::now() + STOP_DEADLINE;
    // With its pid known, wait for the process itself (which also frees its lock for the next
    // start), never connecting: a socket held by systemd or launchd stays after octld exits,
    // and a connection to it would start a new octld.
    let gone = match pid {
        Some(pid) => loop {
            if !crate::client::process_alive(pid) {
                break true;
            }
            if Instant::now() >= deadline {
                break false;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        },
        None => ctx.client.wait_until_gone(deadline).await,
    };
    if !gone {
        let who = pid.map(|p| format!(" (pid {p})")).unwrap_or_default();
        return Err(AppError::new(
            ErrorKind::Timeout,
            format!(
                "octld{who} still runs on {} {} s after it was asked to stop",
                socket.display(),
                STOP_DEADLINE.as_secs()
            ),
        )
        .with_hint(format!(
            "look at {}; `kill <pid>` stops it too",
            ctx.client.home().log().display()
        )));
    }
    Ok(Stopped {
        was_running: true,
        pid,
    })
}

/// `daemon restart`: stop gracefully, wait until the process is gone, start again. Agents
/// keep running meanwhile (they live on the tmux server, not in the daemon).
async fn restart(ctx: &Ctx) -> Result<(), AppError> {
    let stopped = stop_daemon(ctx).await?;
    // Under a service manager the first connection starts it again; else start it here.
    let value = match ctx.client.probe_status().await {
        Ok(v) => v,
        Err(CallError::NotRunning(_)) => {
            ctx.client.start().await?;
            ctx.client
                .call_value::<method::DaemonStatus>(&NoParams {})
                .await?
        }
        Err(CallError::Failed(e) | CallError::Dropped(e)) => return Err(e),
    };
    let status = result_of::<method::DaemonStatus>(&value)?;
    let socket = ctx.client.home().socket();
    let doc = json!({
        "was_running": stopped.was_running,
        "stopped_pid": stopped.pid,
        "pid": status.pid,
        "version": status.version,
    });
    ctx.out.result(&doc, || {
        let before = match (stopped.was_running, stopped.pid) {
            (false, _) => "octld was not running".to_string(),
            (true, Some(pid)) => format!("Stopped octld (pid {pid})"),
            (true, None) => "Stopped octld".to_string(),
        };
        format!(
            "{before}; started octld (pid {}, version {}) on {}",
            status.pid,
            status.version,
            socket.display()
        )
    });
    Ok(())
}

async fn status(ctx: &Ctx) -> Result<(), AppError> {
    let value = match ctx.client.probe_status().await {
        Ok(v) => v,
        Err(CallError::NotRunning(_)) => {
            return Err(ctx
                .client
                .not_running()
                .with_hint("start it with `orchestratectl daemon start`"))
        }
        Err(CallError::Failed(e) | CallError::Dropped(e)) => return Err(e),
    };
    let status = result_of::<method::DaemonStatus>(&value)?;
    ctx.out.result(&value, || status_text(&status));
    Ok(())
}

/// The human form of `daemon status`.
pub fn status_text(s: &DaemonStatusResult) -> String {
    let mut rows = vec![
        ("pid", s.pid.to_string()),
        ("version", s.version.clone()),
        ("protocol", s.protocol.to_string()),
        ("home", s.home.clone()),
        ("uptime", duration(s.uptime_s)),
        (
            "runs",
            match s.active {
                Some(a) => format!("{} ({a} active)", s.runs),
                None => s.runs.to_string(),
            },
        ),
        ("notify", notify_text(&s.notify)),
    ];
    if let Some(e) = &s.config_error {
        rows.push(("config", format!("config.toml refused: {e}")));
    }
    format!("octld is running\n{}", fields(&rows))
}

/// `command sh, webhook http://…; last failure at T (command): …`, or `none configured`.
fn notify_text(n: &octl_proto::rpc::NotifyStatus) -> String {
    let configured: Vec<String> = [("command", &n.command), ("webhook", &n.webhook)]
        .into_iter()
        .filter_map(|(what, v)| v.as_ref().map(|v| format!("{what} {v}")))
        .collect();
    let mut out = if configured.is_empty() {
        "none configured".to_string()
    } else {
        configured.join(", ")
    };
    if let Some(f) = &n.last_failure {
        out.push_str(&format!(
            "; last failure at {} ({}): {}",
            f.at,
            f.notifier,
            f.message.trim()
        ));
        if let Some(at) = &f.delivered_since {
            out.push_str(&format!("; delivered since, at {at}"));
        }
    }
    out
}

fn stop_service_hint() -> &'static str {
    if cfg!(target_os = "macos") {
        "`launchctl bootout gui/$(id -u)/dev.orchestratectl.octld` stops that too"
    } else {
        "`systemctl --user stop octld.socket` stops that too"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines_up() {
        let s = DaemonStatusResult {
            pid: 42,
            version: "0.1.0".into(),
            protocol: 1,
            home: "/h".into(),
            uptime_s: 65,
            runs: 3,
            active: Some(1),
            notify: Default::default(),
            config_error: None,
        };
        assert_eq!(
            status_text(&s),
            "octld is running\npid       42\nversion   0.1.0\nprotocol  1\nhome      /h\nuptime    1m 5s\nruns      3 (1 active)\nnotify    none configured\n"
        );
    }

    #[test]
    fn liveness() {
        assert!(crate::client::process_alive(std::process::id() as u64));
        assert!(!crate::client::process_alive(u32::MAX as u64));
    }
}
