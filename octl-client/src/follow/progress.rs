//! The live progress of a wait on stderr ([`Progress`], in a [`Mode`]): a redrawn status block
//! on a terminal ([`Screen`]), else one plain line per event, nothing with `--json`; and the
//! one-line forms of events it and `run watch` print.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use octl_proto::rpc::RunShown;
use serde_json::Value;

use crate::output::{duration, node_counts, truncate};

/// Text on one line, at most `max` characters.
pub fn one_line(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    truncate(&flat, max)
}

/// What an event says, in a few words: its message, reason, error, files or exit status.
pub fn event_message(ev: &Value) -> String {
    let Some(data) = ev.get("data").filter(|d| d.is_object()) else {
        return String::new();
    };
    for key in ["message", "reason", "error"] {
        if let Some(text) = data.get(key).and_then(Value::as_str) {
            return one_line(text, 200);
        }
    }
    if let Some(files) = data.get("files").and_then(Value::as_array) {
        let names: Vec<&str> = files.iter().filter_map(Value::as_str).collect();
        if !names.is_empty() {
            return format!("files: {}", names.join(", "));
        }
    }
    for key in ["exit_status", "status"] {
        if let Some(code) = data.get(key).and_then(Value::as_i64) {
            return format!("status {code}");
        }
    }
    if let Some(commit) = data.get("commit").and_then(Value::as_str) {
        return format!("commit {}", commit.get(..12).unwrap_or(commit));
    }
    String::new()
}

/// One plain progress line for an event: `SEQ TYPE NODE MESSAGE` (`-` for a run-level event).
pub fn plain_event_line(ev: &Value) -> String {
    let seq = ev
        .get("seq")
        .and_then(Value::as_u64)
        .map(|s| s.to_string())
        .unwrap_or_else(|| "?".to_string());
    let kind = ev.get("type").and_then(Value::as_str).unwrap_or("?");
    let node = ev.get("node").and_then(Value::as_str).unwrap_or("-");
    format!("{seq} {kind} {node} {}", event_message(ev))
        .trim_end()
        .to_string()
}

/// The last event for the status line: `api: node.progress "tests pass"`.
pub fn short_event(ev: &Value) -> String {
    let kind = ev.get("type").and_then(Value::as_str).unwrap_or("?");
    let msg = event_message(ev);
    let mut text = match ev.get("node").and_then(Value::as_str) {
        Some(node) => format!("{node}: {kind}"),
        None => kind.to_string(),
    };
    if !msg.is_empty() {
        text.push_str(&format!(" {msg:?}"));
    }
    text
}

/// Where progress goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Nothing (`--json`).
    Off,
    /// One plain line per event on stderr.
    Lines,
    /// A status block redrawn on stderr (stdout and stderr are terminals).
    Redraw,
}

impl Mode {
    /// The mode for this process: off with `--json`, redrawn on a terminal, else plain lines.
    pub fn detect(json: bool) -> Mode {
        Mode::choose(
            json,
            std::io::stdout().is_terminal() && std::io::stderr().is_terminal(),
        )
    }

    pub fn choose(json: bool, terminal: bool) -> Mode {
        match (json, terminal) {
            (true, _) => Mode::Off,
            (false, true) => Mode::Redraw,
            (false, false) => Mode::Lines,
        }
    }
}

/// The live progress of one run.
pub struct Progress {
    mode: Mode,
    started: Instant,
    run: Option<String>,
    status: Option<String>,
    counts: String,
    last: Option<String>,
    screen: Screen,
}

impl Progress {
    pub fn new(mode: Mode) -> Progress {
        Progress {
            mode,
            started: Instant::now(),
            run: None,
            status: None,
            counts: String::new(),
            last: None,
            screen: Screen::default(),
        }
    }

    /// The run's id and `status (counts)` as last seen.
    pub fn last_status(&self) -> Option<(String, String)> {
        Some((
            self.run.clone()?,
            format!("{} (nodes {})", self.status.clone()?, self.counts),
        ))
    }

    /// A new `run.show`.
    pub fn state(&mut self, d: &RunShown) {
        self.run = Some(d.manifest.id.clone());
        self.status = Some(d.manifest.status.to_string());
        self.counts = node_counts(&d.manifest.nodes);
        self.draw();
    }

    /// A new event (followed by a [`Progress::state`]).
    pub fn event(&mut self, ev: &Value) {
        match self.mode {
            Mode::Off => {}
            Mode::Lines => eprint_line(&plain_event_line(ev)),
            // Drawn with the `run.show` that follows every event.
            Mode::Redraw => self.last = Some(short_event(ev)),
        }
    }

    /// Time passed: redraw the elapsed time.
    pub fn tick(&mut self) {
        self.draw();
    }

    /// The status line: `[12s] 2 running, 1 done · api: node.progress "tests pass"`.
    pub fn status_line(&self, elapsed: Duration) -> String {
        let mut line = format!("[{}] {}", duration(elapsed.as_secs()), self.counts);
        if let Some(last) = &self.last {
            line.push_str(" · ");
            line.push_str(last);
        }
        line
    }

    fn draw(&mut self) {
        if self.mode == Mode::Redraw && self.status.is_some() {
            let line = self.status_line(self.started.elapsed());
            self.screen.draw(&[line]);
        }
    }

    /// Removes the status line (call before printing the result).
    pub fn finish(&mut self) {
        self.screen.clear();
    }
}

/// Writes one line to stderr.
pub fn eprint_line(line: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{}", crate::output::plain(line));
    let _ = err.flush();
}

/// A block of lines at the bottom of the terminal, redrawn in place on stderr. Every line is
/// cut to the terminal's width so that none wraps (wrapping would break the redraw).
#[derive(Default)]
pub struct Screen {
    drawn: usize,
}

impl Screen {
    pub fn draw(&mut self, lines: &[String]) {
        let cols = terminal_columns().saturating_sub(1).max(20);
        let mut text = self.erase_sequence();
        for line in lines {
            text.push_str(&truncate(&crate::output::plain(line), cols));
            text.push('\n');
        }
        self.drawn = lines.len();
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(text.as_bytes());
        let _ = err.flush();
    }

    pub fn clear(&mut self) {
        if self.drawn > 0 {
            let text = self.erase_sequence();
            self.drawn = 0;
            let mut err = std::io::stderr().lock();
            let _ = err.write_all(text.as_bytes());
            let _ = err.flush();
        }
    }

    /// Back to the first drawn line, then clear to the end of the screen.
    fn erase_sequence(&self) -> String {
        if self.drawn == 0 {
            String::new()
        } else {
            format!("\r\x1b[{}A\x1b[J", self.drawn)
        }
    }
}

/// The width of the terminal on stderr (80 when unknown).
fn terminal_columns() -> usize {
    terminal_size(libc::STDERR_FILENO).0
}

/// The columns and rows of the terminal on `fd` (else $COLUMNS and $LINES, else 80 × 24).
pub(super) fn terminal_size(fd: libc::c_int) -> (usize, usize) {
    // SAFETY: TIOCGWINSZ fills a `winsize`; on failure it is left zeroed.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut ws) } == 0;
    let env = |k: &str, default: usize| {
        std::env::var(k)
            .ok()
            .and_then(|c| c.parse().ok())
            .unwrap_or(default)
    };
    let cols = if ok && ws.ws_col > 0 {
        usize::from(ws.ws_col)
    } else {
        env("COLUMNS", 80)
    };
    let rows = if ok && ws.ws_row > 0 {
        usize::from(ws.ws_row)
    } else {
        env("LINES", 24)
    };
    (cols, rows)
}

/// Writes text to stdout as it is.
pub(super) fn print_text_raw(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::follow::tests::*;
    use serde_json::json;

    #[test]
    fn progress_text() {
        let ev = json!({"seq": 7, "type": "node.progress", "node": "api",
            "data": {"message": "tests\npass"}});
        assert_eq!(plain_event_line(&ev), "7 node.progress api tests pass");
        assert_eq!(short_event(&ev), "api: node.progress \"tests pass\"");
        let ev = json!({"seq": 1, "type": "run.created", "data": {"kind": "spinoff"}});
        assert_eq!(plain_event_line(&ev), "1 run.created -");
        let ev = json!({"seq": 9, "type": "merge.conflict", "node": "b",
            "data": {"files": ["greeting.txt"]}});
        assert_eq!(
            plain_event_line(&ev),
            "9 merge.conflict b files: greeting.txt"
        );

        let mut p = Progress::new(Mode::Off);
        p.state(&detail("spinoff", "active", json!([]), json!([])));
        p.event(&json!({"seq": 2, "type": "node.started", "node": "api", "data": {}}));
        assert_eq!(p.status_line(Duration::from_secs(12)), "[12s] -");
        assert_eq!(p.last_status().unwrap().1, "active (nodes -)".to_string());
        p.last = Some("api: node.started".into());
        assert_eq!(
            p.status_line(Duration::from_secs(3)),
            "[3s] - · api: node.started"
        );
    }

    #[test]
    fn progress_modes() {
        assert_eq!(Mode::choose(true, true), Mode::Off);
        assert_eq!(Mode::choose(true, false), Mode::Off);
        assert_eq!(Mode::choose(false, true), Mode::Redraw);
        assert_eq!(Mode::choose(false, false), Mode::Lines);
    }
}
