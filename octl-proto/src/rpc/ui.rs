//! The `ui.*` family: the web UI octld serves over HTTP(S) when asked (`orchestratectl ui`).
//! Its design and security model are in docs/UI.md.

use serde::{Deserialize, Serialize};

use crate::method::NoParams;

/// `ui.open` result: where the UI is served and a one-time link that logs a browser in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct UiOpened {
    /// `[ui] listen` as served (`127.0.0.1:7420`).
    pub listen: String,
    /// The UI's address (`http://127.0.0.1:7420/`, `https://…` with TLS).
    pub url: String,
    /// The link that logs one browser in: it works once, within `expires_in_s`.
    pub login_url: String,
    pub expires_in_s: u64,
    pub tls: bool,
    /// The SHA-256 fingerprint of the certificate served, with TLS (to compare with what the
    /// browser shows when the certificate was generated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
}

/// `ui.close` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct UiClosed {
    /// Whether the UI was being served.
    pub was_serving: bool,
    /// Browser sessions logged out.
    pub sessions: usize,
}

crate::methods! {
    $;
    each: each_ui_method;
    UiOpen(NoParams) -> UiOpened {
        name: "ui.open",
        summary: "Serve the web UI on [ui] listen (again after a restart, until ui.close) and mint a one-time login link valid for 10 minutes.",
    },
    UiClose(NoParams) -> UiClosed {
        name: "ui.close",
        summary: "Stop serving the web UI and log every browser session out.",
    },
}
