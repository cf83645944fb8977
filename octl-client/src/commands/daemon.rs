//! `daemon start|stop|status`. Only `start` may start the daemon; `status` and `stop` report
//! what they find (stop of a stopped daemon succeeds, so retries are safe).

use std::time::{Duration, Instant};

use octl_proto::rpc::DaemonStatus;
use octl_proto::{AppError, ErrorKind};
use serde_json::{json, Value};

use super::{decode, Ctx};
use crate::cli::DaemonCmd;
use crate::client::{CallError, STOP_DEADLINE};
use crate::output::{duration, fields};

pub async fn execute(ctx: &Ctx, cmd: DaemonCmd) -> Result<(), AppError> {
    match cmd {
        DaemonCmd::Start => start(ctx).await,
        DaemonCmd::Stop => stop(ctx).await,
        DaemonCmd::Status => status(ctx).await,
    }
}

async fn start(ctx: &Ctx) -> Result<(), AppError> {
    let (value, started) = match ctx.client.probe_status().await {
        Ok(v) => (v, false),
        Err(CallError::NotRunning(_)) => {
            ctx.client.start().await?;
            (ctx.client.call("daemon.status", json!({})).await?, true)
        }
        Err(CallError::Failed(e)) => return Err(e),
    };
    let status: DaemonStatus = decode("daemon.status", &value)?;
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

async fn stop(ctx: &Ctx) -> Result<(), AppError> {
    let socket = ctx.client.home().socket();
    let pid = match ctx.client.probe_status().await {
        Ok(v) => v.get("pid").and_then(Value::as_u64),
        Err(CallError::NotRunning(_)) => {
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
        // A daemon already on its way out is as good as asked to stop.
        Err(CallError::Failed(e)) if e.kind == ErrorKind::ShuttingDown => None,
        Err(CallError::Failed(e)) => return Err(e),
    };
    match ctx.client.try_call("daemon.shutdown", json!({})).await {
        Ok(_) | Err(CallError::NotRunning(_)) => {}
        Err(CallError::Failed(e)) if e.kind == ErrorKind::ShuttingDown => {}
        Err(CallError::Failed(e)) => return Err(e),
    }
    let deadline = Instant::now() + STOP_DEADLINE;
    if !ctx.client.wait_until_gone(deadline).await {
        let who = pid.map(|p| format!(" (pid {p})")).unwrap_or_default();
        return Err(AppError::new(
            ErrorKind::Timeout,
            format!(
                "octld{who} still answers on {} {} s after it was asked to stop",
                socket.display(),
                STOP_DEADLINE.as_secs()
            ),
        )
        .with_hint(format!(
            "look at {}; `kill <pid>` stops it too",
            ctx.client.home().log().display()
        )));
    }
    // The socket is gone; give the process the rest of the deadline to exit so that its lock
    // is free for the next start. Best effort: the socket is what counts.
    if let Some(pid) = pid {
        while process_alive(pid) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
    ctx.out.result(
        &json!({"stopped": true, "pid": pid, "was_running": true}),
        || match pid {
            Some(pid) => format!("Stopped octld (pid {pid})"),
            None => "Stopped octld".to_string(),
        },
    );
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
        Err(CallError::Failed(e)) => return Err(e),
    };
    let status: DaemonStatus = decode("daemon.status", &value)?;
    ctx.out.result(&value, || status_text(&status));
    Ok(())
}

/// The human form of `daemon status`.
pub fn status_text(s: &DaemonStatus) -> String {
    format!(
        "octld is running\n{}",
        fields(&[
            ("pid", s.pid.to_string()),
            ("version", s.version.clone()),
            ("protocol", s.protocol.to_string()),
            ("home", s.home.clone()),
            ("uptime", duration(s.uptime_s)),
            ("runs", s.runs.to_string()),
        ])
    )
}

/// Is the process alive (a zombie counts as gone)?
fn process_alive(pid: u64) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines_up() {
        let s = DaemonStatus {
            pid: 42,
            version: "0.1.0".into(),
            protocol: 1,
            home: "/h".into(),
            uptime_s: 65,
            runs: 3,
        };
        assert_eq!(
            status_text(&s),
            "octld is running\npid       42\nversion   0.1.0\nprotocol  1\nhome      /h\nuptime    1m 5s\nruns      3\n"
        );
    }

    #[test]
    fn liveness() {
        assert!(process_alive(std::process::id() as u64));
        assert!(!process_alive(u32::MAX as u64));
    }
}
