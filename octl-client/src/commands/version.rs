//! `version`: the CLI's version and protocol. Never talks to the daemon.

use octl_proto::{AppError, PROTOCOL_VERSION};
use serde_json::json;

use super::Ctx;

pub const VERSION: &str = env!("CARGO_PKG_VERSION");

pub fn execute(ctx: &Ctx) -> Result<(), AppError> {
    ctx.out.result(
        &json!({ "version": VERSION, "protocol": PROTOCOL_VERSION }),
        human,
    );
    Ok(())
}

/// `orchestratectl 0.1.0 (protocol 1)`
pub fn human() -> String {
    format!("orchestratectl {VERSION} (protocol {PROTOCOL_VERSION})")
}

#[cfg(test)]
mod tests {
    #[test]
    fn human_version() {
        assert_eq!(
            super::human(),
            format!("orchestratectl {} (protocol 1)", env!("CARGO_PKG_VERSION"))
        );
    }
}
