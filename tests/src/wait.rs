//! Waiting on state with a deadline. The poll interval only bounds how often a condition is
//! checked; the condition, not the clock, decides when the wait ends.

use std::time::{Duration, Instant};

/// Polls `check` until it returns `Some`, or panics naming `what` after `timeout`.
pub fn wait_until<T>(what: &str, timeout: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check() {
            return v;
        }
        if Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
