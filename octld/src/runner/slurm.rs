//! A Slurm cluster as a runner (`kind = "slurm"`): one batch job per attempt. So far the
//! check `doctor` makes; the design is docs/RUNNERS.md.

use std::process::{Command, Stdio};

use super::Result;
use octl_proto::{AppError, ErrorKind};

/// Runs a Slurm client command (`sinfo`, `squeue`, `sbatch`, `scancel`); its stdout.
pub fn slurm(program: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            AppError::new(ErrorKind::ToolMissing, format!("cannot run {program}: {e}")).with_hint(
                "install Slurm's client commands (Debian: slurm-client) on the daemon's machine",
            )
        })?;
    if !out.status.success() {
        return Err(AppError::new(
            ErrorKind::ToolFailed,
            format!(
                "{program} failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `sinfo` answers, and knows `partition` (or has a default one). Ok: its nodes by state.
pub fn check_cluster(partition: Option<&str>) -> Result<String> {
    // One line per partition: name (the default one ends in '*'), availability, and nodes
    // allocated/idle/other/total.
    let text = slurm("sinfo", &["-h", "-s", "-o", "%P|%a|%F"])?;
    let parts: Vec<(&str, &str, &str)> = text
        .lines()
        .filter_map(|l| {
            let mut f = l.trim().split('|');
            Some((f.next()?, f.next()?, f.next()?))
        })
        .collect();
    let found = parts.iter().find(|(name, _, _)| match partition {
        Some(p) => name.trim_end_matches('*') == p,
        None => name.ends_with('*'),
    });
    let Some((name, avail, nodes)) = found else {
        let known: Vec<&str> = parts.iter().map(|p| p.0).collect();
        return Err(AppError::new(
            ErrorKind::ToolFailed,
            match partition {
                Some(p) => format!(
                    "sinfo knows no partition {p:?} (it has: {})",
                    known.join(", ")
                ),
                None => format!(
                    "the cluster has no default partition (it has: {}); set partition",
                    known.join(", ")
                ),
            },
        ));
    };
    let name = name.trim_end_matches('*');
    if *avail != "up" {
        return Err(AppError::new(
            ErrorKind::ToolFailed,
            format!("partition {name} is {avail}"),
        ));
    }
    Ok(format!(
        "sinfo answers: partition {name} up, nodes allocated/idle/other/total {nodes}"
    ))
}
