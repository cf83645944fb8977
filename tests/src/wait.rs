//! Waiting on state with a deadline. The poll interval only bounds how often a condition is
//! checked; the condition, not the clock, decides when the wait ends.

use std::time::{Duration, Instant};

/// Polls `check` until it returns `Some`, or panics naming `what` after `timeout`.
pub fn wait_until<T>(what: &str, timeout: Duration, check: impl FnMut() -> Option<T>) -> T {
    wait_until_describing(what, timeout, check, String::new)
}

/// Like [`wait_until`]; on timeout the panic also says what `describe` returns (a screen,
/// the state things were left in), so that a failure shows where the wait got stuck.
pub fn wait_until_describing<T>(
    what: &str,
    timeout: Duration,
    mut check: impl FnMut() -> Option<T>,
    describe: impl FnOnce() -> String,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check() {
            return v;
        }
        if Instant::now() >= deadline {
            let state = describe();
            let sep = if state.is_empty() { "" } else { "\n" };
            panic!("timed out after {timeout:?} waiting for {what}{sep}{state}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[should_panic(expected = "waiting for the door\nscreen: closed")]
    fn a_timeout_says_what_describe_returns() {
        wait_until_describing(
            "the door",
            Duration::ZERO,
            || None::<()>,
            || "screen: closed".to_string(),
        );
    }

    #[test]
    fn a_condition_met_never_asks_for_a_description() {
        let v = wait_until_describing(
            "the door",
            Duration::ZERO,
            || Some(7),
            || panic!("described"),
        );
        assert_eq!(v, 7);
    }
}
