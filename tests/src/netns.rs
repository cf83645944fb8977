//! Running a test with no network: the calling thread enters a new network namespace whose
//! only interface is loopback, brought up. Threads and processes it starts afterwards — the
//! model stand-in, the daemon, its tmux server and the agents — are in it too, so anything
//! that tries to reach past 127.0.0.1 fails. Needs root (CAP_SYS_ADMIN).

use std::process::Command;

/// Puts the calling thread (and what it starts from now on) in a new network namespace with
/// only `lo`, up; an error says why not.
pub fn offline() -> Result<(), String> {
    // SAFETY: unshare(2) with CLONE_NEWNET changes only this thread's network namespace.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        return Err(format!(
            "unshare(CLONE_NEWNET): {} (needs root)",
            std::io::Error::last_os_error()
        ));
    }
    let up = Command::new("ip")
        .args(["link", "set", "lo", "up"])
        .status()
        .map_err(|e| format!("ip link set lo up: {e}"))?;
    if !up.success() {
        return Err(format!("ip link set lo up: {up}"));
    }
    Ok(())
}

/// The network interfaces this thread sees (`ip -o link`), to show there is only `lo`.
pub fn interfaces() -> Vec<String> {
    let out = Command::new("ip").args(["-o", "link"]).output();
    out.map(|o| {
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter_map(|l| l.split(':').nth(1).map(|n| n.trim().to_string()))
            .collect()
    })
    .unwrap_or_default()
}
