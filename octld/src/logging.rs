//! The daemon's own log: JSON lines in `octld.log`, and on stderr too in the foreground.
//! `RUST_LOG` or `-v` raise the level; prompts and secrets are never logged at info.

use std::fs::OpenOptions;
use std::path::Path;
use std::sync::Mutex;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{fmt, EnvFilter, Layer};

/// Installs the global subscriber once per process; later calls (tests running several
/// daemons in one process) keep the first.
pub fn init(log_path: &Path, foreground: bool, verbose: bool) {
    let default = if verbose { "debug" } else { "info" };
    let filter = || EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let file = match OpenOptions::new().create(true).append(true).open(log_path) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("octld: cannot open {}: {e}", log_path.display());
            return;
        }
    };
    let file_layer = fmt::layer()
        .json()
        .with_current_span(false)
        .with_writer(Mutex::new(file))
        .with_filter(filter());
    let stderr_layer = foreground.then(|| {
        fmt::layer()
            .json()
            .with_current_span(false)
            .with_writer(std::io::stderr)
            .with_filter(filter())
    });
    let _ = tracing_subscriber::registry()
        .with(file_layer)
        .with(stderr_layer)
        .try_init();
}
