//! `version`: the CLI's version and protocol. Never talks to the daemon.

use octl_proto::{AppError, PROTOCOL_VERSION};
use serde_json::json;

use super::Ctx;

pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The commit this binary was built from (12 hex digits, or `unknown`; see `build.rs`).
pub const COMMIT: &str = env!("OCTL_BUILD_COMMIT");
/// The build date, UTC, `YYYY-MM-DD`.
pub const BUILD_DATE: &str = env!("OCTL_BUILD_DATE");

pub fn execute(ctx: &Ctx) -> Result<(), AppError> {
    ctx.out.result(
        &json!({
            "version": VERSION,
            "protocol": PROTOCOL_VERSION,
            "commit": COMMIT,
            "build_date": BUILD_DATE,
        }),
        human,
    );
    Ok(())
}

/// `orchestratectl 0.1.0 (commit 0123456789ab, built 2026-12-01; protocol 1)`
pub fn human() -> String {
    format!("orchestratectl {VERSION} (commit {COMMIT}, built {BUILD_DATE}; protocol {PROTOCOL_VERSION})")
}

#[cfg(test)]
mod tests {
    #[test]
    fn human_version() {
        assert_eq!(
            super::human(),
            format!(
                "orchestratectl {} (commit {}, built {}; protocol 1)",
                env!("CARGO_PKG_VERSION"),
                super::COMMIT,
                super::BUILD_DATE
            )
        );
        let date = super::BUILD_DATE.as_bytes();
        assert!(
            date.len() == 10 && date[4] == b'-' && date[7] == b'-',
            "{}",
            super::BUILD_DATE
        );
        assert!(super::COMMIT == "unknown" || super::COMMIT.chars().all(|c| c.is_ascii_hexdigit()));
    }
}
