//! SSH hosts as a runner (`kind = "ssh"`): so far the check `doctor` makes. Starting agents on
//! hosts is designed in docs/RUNNERS.md, not built.

use std::process::{Command, Stdio};

use super::Result;
use octl_proto::{AppError, ErrorKind};

/// `ssh` options for a command that must never wait for a human: no password prompt, no
/// host-key question, a bounded connect.
pub const BATCH: &[&str] = &["-o", "BatchMode=yes", "-o", "ConnectTimeout=5"];

/// Runs `true` on every host at once; all must answer. Ok: how many answered.
pub fn check_hosts(hosts: &[String]) -> Result<String> {
    let tries: Vec<_> = hosts
        .iter()
        .map(|h| {
            let child = Command::new("ssh")
                .args(BATCH)
                .arg("--")
                .arg(h)
                .arg("true")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn();
            (h, child)
        })
        .collect();
    let mut failed = Vec::new();
    for (host, child) in tries {
        let answer = child.and_then(|c| c.wait_with_output());
        match answer {
            Ok(o) if o.status.success() => {}
            Ok(o) => failed.push(format!(
                "{host}: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            )),
            Err(e) => {
                return Err(AppError::new(
                    ErrorKind::ToolMissing,
                    format!("cannot run ssh: {e}"),
                ));
            }
        }
    }
    if failed.is_empty() {
        Ok(format!(
            "{} host{} answered over ssh",
            hosts.len(),
            if hosts.len() == 1 { "" } else { "s" }
        ))
    } else {
        Err(AppError::new(
            ErrorKind::ToolFailed,
            format!("not reached over ssh: {}", failed.join("; ")),
        ))
    }
}
