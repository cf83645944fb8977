//! Claude Code, started interactively in a folder it does not know, first asks whether to
//! trust it (default "No, exit"). The user asked for the agent in their own repository, so the
//! daemon answers "Yes" with keystrokes in the agent's window — it never edits Claude's own
//! files, which the user's running sessions write. Claude then records the trust itself (for
//! the main repository, which later worktrees inherit).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::runner::{AgentHandle, Runner};

const QUESTION: &str = "Yes, I trust this folder";
const SELECTED: &str = "❯ Yes, I trust this folder";
/// How long the question is watched for after the window opens.
const WATCH: Duration = Duration::from_secs(60);
/// The dialog is drawn twice at first; keys sent before it settles are lost.
const SETTLE: Duration = Duration::from_millis(500);
/// The selection must hold this long before Enter confirms it.
const HOLD: Duration = Duration::from_millis(200);
const POLL: Duration = Duration::from_millis(100);

/// Watches a new interactive window on its node's `runner` and answers the trust question
/// once, if it comes.
pub fn answer(runner: Arc<dyn Runner>, pane: AgentHandle) {
    tokio::task::spawn_blocking(move || {
        let start = Instant::now();
        let mut shown: Option<Instant> = None;
        let mut selected: Option<Instant> = None;
        while start.elapsed() < WATCH {
            let Ok(screen) = runner.capture(&pane) else {
                return;
            };
            if !screen.contains(QUESTION) {
                if shown.is_some() {
                    tracing::info!(pane = %pane, "answered Claude Code's workspace-trust question");
                    return;
                }
            } else {
                let since = *shown.get_or_insert_with(Instant::now);
                if since.elapsed() >= SETTLE {
                    if screen.contains(SELECTED) {
                        let at = *selected.get_or_insert_with(Instant::now);
                        if at.elapsed() >= HOLD {
                            let _ = runner.send_key(&pane, "Enter");
                            selected = None;
                        }
                    } else {
                        selected = None;
                        let _ = runner.send_key(&pane, "Down");
                    }
                }
            }
            std::thread::sleep(POLL);
        }
    });
}
