//! What `/proc` says of processes and of the machine (Linux): the processes whose environment
//! carries a marker, their resident memory, ending a process only while it still is the one
//! that was found (a pidfd, then its identity checked again), `MemAvailable` and the load.
//! Elsewhere every reading is empty: no process is found, memory and load are unknown.

use std::path::Path;

/// The memory of the machine, from `/proc/meminfo`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemInfo {
    pub total: u64,
    /// `MemAvailable`: what can be given to new work without swapping.
    pub available: u64,
}

/// `/proc/meminfo`'s `MemTotal` and `MemAvailable`, in bytes; `None` where there is none.
pub fn meminfo() -> Option<MemInfo> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_meminfo(&text)
}

pub fn parse_meminfo(text: &str) -> Option<MemInfo> {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.trim_start_matches(':').split_whitespace().next())
            .and_then(|kib| kib.parse::<u64>().ok())
            .map(|kib| kib * 1024)
    };
    Some(MemInfo {
        total: field("MemTotal")?,
        available: field("MemAvailable")?,
    })
}

/// The 1-minute load average, from `/proc/loadavg`.
pub fn load_1min() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Every process (thread group) on the machine.
pub fn pids() -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

/// The value of `name` in the environment `pid` started with (what it inherited), if it is
/// readable and there.
pub fn environ_var(pid: u32, name: &str) -> Option<String> {
    let bytes = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let prefix = format!("{name}=");
    bytes
        .split(|b| *b == 0)
        .find_map(|kv| kv.strip_prefix(prefix.as_bytes()))
        .map(|v| String::from_utf8_lossy(v).into_owned())
}

/// What a process holds in memory that only swapping could take back: its anonymous and
/// shared-memory resident pages (`RssAnon` + `RssShmem`; file pages are reclaimable and
/// counted as available by the kernel). `None` once it is gone.
pub fn resident(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    Some(parse_resident(&text))
}

pub fn parse_resident(status: &str) -> u64 {
    status
        .lines()
        .filter(|l| l.starts_with("RssAnon:") || l.starts_with("RssShmem:"))
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum::<u64>()
        * 1024
}

/// Whether `pid` is a zombie (ended, not reaped yet) or gone: nothing left to end.
pub fn ended(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command, which is in parentheses and may hold any byte.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_none_or(|state| state == "Z" || state == "X"),
        Err(_) => true,
    }
}

/// Sends `signal` to `pid` if it still is the process `still_ours` recognises (by its
/// environment or its cgroup): a pidfd is opened first, so a pid reused after the check
/// cannot be signalled. `false` if it was gone or not ours.
pub fn signal_if(pid: u32, signal: i32, still_ours: impl Fn(u32) -> bool) -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
        if fd >= 0 {
            let fd = fd as libc::c_int;
            let sent = still_ours(pid)
                // SAFETY: fd is the pidfd just opened; a null siginfo means a plain kill.
                && unsafe {
                    libc::syscall(
                        libc::SYS_pidfd_send_signal,
                        fd,
                        signal,
                        std::ptr::null::<libc::siginfo_t>(),
                        0,
                    )
                } == 0;
            // SAFETY: fd is ours and closed once.
            unsafe { libc::close(fd) };
            return sent;
        }
        // A kernel before 5.3: the check and the kill, as close together as can be.
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::ENOSYS) {
            return false;
        }
    }
    // SAFETY: kill(2) with a pid and a signal number.
    still_ours(pid) && unsafe { libc::kill(pid as libc::pid_t, signal) } == 0
}

/// The cgroup paths `pid` is in (`/proc/PID/cgroup`), one line per hierarchy.
pub fn cgroups_of(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default()
}

/// This process's own `/proc/self/cgroup` and `/proc/self/mountinfo`.
pub fn own_cgroup_files() -> (String, String) {
    let read = |p: &str| std::fs::read_to_string(Path::new(p)).unwrap_or_default();
    (read("/proc/self/cgroup"), read("/proc/self/mountinfo"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_and_status_parse() {
        let m = parse_meminfo(
            "MemTotal:       24684084 kB\nMemFree: 1 kB\nMemAvailable:   24327528 kB\n",
        )
        .unwrap();
        assert_eq!(m.total, 24684084 * 1024);
        assert_eq!(m.available, 24327528 * 1024);
        assert_eq!(parse_meminfo("MemTotal: 5 kB\n"), None);
        let status = "Name:\tpython3\nVmRSS:\t 1050000 kB\nRssAnon:\t 1048000 kB\nRssFile:\t 2000 kB\nRssShmem:\t 16 kB\n";
        assert_eq!(parse_resident(status), (1048000 + 16) * 1024);
    }

    #[test]
    fn this_process_is_found_and_read() {
        let me = std::process::id();
        assert!(pids().contains(&me));
        assert!(resident(me).unwrap() > 0);
        assert!(!ended(me));
        assert!(environ_var(me, "PATH").is_some());
        assert!(meminfo().unwrap().available > 0);
        assert!(load_1min().is_some());
        // Not ours: nothing is sent.
        assert!(!signal_if(me, 0, |_| false));
        assert!(signal_if(me, 0, |_| true));
    }
}
