//! Test-only failpoints, named in `OCTL_FAILPOINTS` (comma-separated). `point` arms every hit
//! of a point; `point@N` arms only its Nth hit (counted from 1 in this daemon process), so a
//! test can let a run be created and fail exactly the write it means to.
//!
//! Two sorts: crash points, where the daemon SIGKILLs itself as a power cut would (the crash
//! tests), and I/O points, where an operation fails with the error a failing disk gives (EIO).
//!
//! Compiled into debug builds only (`debug_assertions`: what `cargo build` and `cargo test`
//! make). Release builds — the README's, `install.sh`'s, `cargo install` — lack them: there
//! every point is an empty inline function and `OCTL_FAILPOINTS` is ignored. Not a cargo
//! feature: a feature one package turns on is on for every package of a workspace build, so
//! the tests' dependency put failpoints into the README's release octld.

#[cfg(debug_assertions)]
use std::collections::HashMap;
use std::io;
#[cfg(debug_assertions)]
use std::sync::{Mutex, OnceLock};

/// The armed points: name → `None` (every hit) or `Some(n)` (the nth hit only).
#[cfg(debug_assertions)]
fn armed_points() -> &'static HashMap<String, Vec<Option<u64>>> {
    static ARMED: OnceLock<HashMap<String, Vec<Option<u64>>>> = OnceLock::new();
    ARMED.get_or_init(|| {
        let mut map: HashMap<String, Vec<Option<u64>>> = HashMap::new();
        for item in std::env::var("OCTL_FAILPOINTS")
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
        {
            let (name, nth) = match item.rsplit_once('@') {
                Some((name, n)) => match n.parse::<u64>() {
                    Ok(n) => (name, Some(n)),
                    Err(_) => (item, None),
                },
                None => (item, None),
            };
            map.entry(name.to_string()).or_default().push(nth);
        }
        map
    })
}

/// Whether this hit of `point` fires (each call is one hit).
#[cfg(debug_assertions)]
pub fn fires(point: &str) -> bool {
    let Some(when) = armed_points().get(point) else {
        return false;
    };
    static HITS: Mutex<Option<HashMap<String, u64>>> = Mutex::new(None);
    let hit = {
        let mut hits = HITS.lock().unwrap_or_else(|e| e.into_inner());
        let n = hits
            .get_or_insert_with(HashMap::new)
            .entry(point.to_string())
            .or_insert(0);
        *n += 1;
        *n
    };
    when.iter().any(|w| w.is_none_or(|n| n == hit))
}

/// A crash point: SIGKILL when it fires.
#[cfg(debug_assertions)]
pub fn crash(point: &str) {
    if fires(point) {
        tracing::warn!(point, "failpoint: killing the daemon");
        // SAFETY: `kill(2)` takes two integers and touches no memory of ours. SIGKILL to our
        // own pid ends the process at once, running no destructor, flush or unwind: what a
        // power cut does, which is what the crash tests simulate.
        unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
    }
}

/// An I/O point: an EIO error when it fires.
#[cfg(debug_assertions)]
pub fn io_error(point: &str) -> io::Result<()> {
    if fires(point) {
        tracing::warn!(point, "failpoint: failing with EIO");
        return Err(io::Error::from_raw_os_error(libc::EIO));
    }
    Ok(())
}

/// A release build: never.
#[cfg(not(debug_assertions))]
#[inline(always)]
pub fn fires(_point: &str) -> bool {
    false
}

/// A release build: nothing.
#[cfg(not(debug_assertions))]
#[inline(always)]
pub fn crash(_point: &str) {}

/// A release build: never fails.
#[cfg(not(debug_assertions))]
#[inline(always)]
pub fn io_error(_point: &str) -> io::Result<()> {
    Ok(())
}
