//! Everything the CLI prints: one JSON document (or JSON lines) on stdout with `--json`, concise
//! aligned text without it, errors on stderr in either form, and the exit codes.
//!
//! Formatting functions return strings so they can be tested; the `print_*` functions only write.

use std::collections::BTreeMap;
use std::io::Write;

use octl_proto::{AppError, ErrorKind, NodeState};
use serde::Serialize;
use serde_json::Value;

/// How results are printed: JSON documents or human text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Output {
    pub json: bool,
}

impl Output {
    pub fn new(json: bool) -> Output {
        Output { json }
    }

    /// Prints the result of a command: `json` with `--json`, otherwise the human text (nothing
    /// when it is empty).
    pub fn result(&self, json: &impl Serialize, human: impl FnOnce() -> String) {
        if self.json {
            print_json_line(json);
        } else {
            let text = human();
            if !text.is_empty() {
                print_text(&text);
            }
        }
    }

    /// Prints one line of a stream: the raw JSON line with `--json`, else its human form.
    /// A line that is not JSON is dropped in JSON mode (stdout must stay JSON lines).
    pub fn event_line(&self, raw: &str) {
        let parsed: Option<Value> = serde_json::from_str(raw).ok();
        match (self.json, parsed) {
            (true, Some(_)) => print_line(raw),
            (true, None) => {}
            (false, Some(v)) => print_text(&event_line(&v)),
            (false, None) => print_text(raw),
        }
    }
}

/// `text` as a terminal may show it: without control characters but newline and tab (C0,
/// DEL, C1). Human output is full of what agents wrote — titles, messages, questions, reasons,
/// file names — and an escape sequence in one could retitle the terminal, hide lines or move
/// the cursor over what a person reads; JSON output escapes them instead.
pub fn plain(text: &str) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| c.is_control() && c != '\n' && c != '\t';
    if text.chars().any(unsafe_char) {
        text.chars().filter(|c| !unsafe_char(*c)).collect()
    } else {
        std::borrow::Cow::Borrowed(text)
    }
}

/// Writes human text to stdout ([`plain`]), adding the final newline if missing.
pub fn print_text(text: &str) {
    print_line(&plain(text));
}

/// Writes a line to stdout as it is (JSON, which escapes what it holds), adding the final
/// newline if missing.
pub fn print_line(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    if !text.ends_with('\n') {
        let _ = out.write_all(b"\n");
    }
    let _ = out.flush();
}

/// Writes one compact JSON document and a newline to stdout.
pub fn print_json_line(value: &impl Serialize) {
    let text = serde_json::to_string(value).unwrap_or_else(|_| "null".to_string());
    print_line(&text);
}

/// The `{"error":{"kind":…,"message":…,"hint":…}}` document (no `hint` when there is none),
/// keys in that order.
pub fn error_json(err: &AppError) -> String {
    #[derive(Serialize)]
    struct Doc<'a> {
        error: &'a AppError,
    }
    serde_json::to_string(&Doc { error: err }).expect("an error always serializes")
}

/// The human form of an error: `error: <message>` and, if any, `hint: <hint>`.
pub fn error_text(err: &AppError) -> String {
    match &err.hint {
        Some(hint) => format!("error: {}\nhint: {}\n", err.message, hint),
        None => format!("error: {}\n", err.message),
    }
}

/// Prints an error to stderr in the chosen mode and returns its exit code.
pub fn print_error(json: bool, err: &AppError) -> i32 {
    let text = if json {
        format!("{}\n", error_json(err))
    } else {
        plain(&error_text(err)).into_owned()
    };
    let mut stderr = std::io::stderr().lock();
    let _ = stderr.write_all(text.as_bytes());
    let _ = stderr.flush();
    exit_code(err)
}

/// The process exit code for an error (the table of exit codes in docs/PROTOCOL.md).
pub fn exit_code(err: &AppError) -> i32 {
    err.kind.exit_code()
}

/// A usage error reported by clap, as an `invalid_params` error. The message is clap's first
/// paragraph on one line (`the following required arguments were not provided: --kind <KIND>`).
pub fn usage_error(rendered: &str) -> AppError {
    let paragraph: Vec<&str> = rendered
        .lines()
        .map(str::trim)
        .skip_while(|l| l.is_empty())
        .take_while(|l| !l.is_empty())
        .collect();
    let joined = paragraph.join(" ");
    let message = joined.strip_prefix("error: ").unwrap_or(&joined);
    let message = if message.is_empty() {
        "invalid usage"
    } else {
        message
    };
    AppError::new(ErrorKind::InvalidParams, message)
        .with_hint("run the command with --help to see its flags and examples")
}

/// The error for a group given without a command (clap shows the help in that case): names
/// the usage line from that help.
pub fn missing_command_error(help: &str) -> AppError {
    let usage = help
        .lines()
        .find_map(|l| l.trim().strip_prefix("Usage: "))
        .unwrap_or("orchestratectl <COMMAND>");
    AppError::new(
        ErrorKind::InvalidParams,
        format!("a command is missing: the usage is `{usage}`"),
    )
    .with_hint("run it with --help to see the commands and examples")
}

/// Lines up columns: headers first, two spaces between columns, the last column unpadded.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let cols = headers.len();
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate().take(cols) {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let header_row: Vec<String> = headers.iter().map(|h| h.to_string()).collect();
    for row in std::iter::once(&header_row).chain(rows.iter()) {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate().take(cols) {
            if i + 1 == cols {
                line.push_str(cell);
            } else {
                line.push_str(cell);
                let pad = widths[i] - cell.chars().count() + 2;
                line.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Label/value lines with the values lined up: `Kind     generic`.
pub fn fields(pairs: &[(&str, String)]) -> String {
    let width = pairs
        .iter()
        .map(|(k, _)| k.chars().count())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for (k, v) in pairs {
        out.push_str(&format!("{k:<width$}  {v}\n"));
    }
    out
}

/// Node counts in life order: `2 running, 1 done`; `-` when there are none.
pub fn node_counts(counts: &BTreeMap<String, usize>) -> String {
    let rank = |state: &str| {
        NodeState::ALL
            .iter()
            .position(|s| s.as_str() == state)
            .unwrap_or(usize::MAX)
    };
    let mut entries: Vec<(&String, &usize)> = counts.iter().filter(|(_, n)| **n > 0).collect();
    entries.sort_by_key(|(state, _)| (rank(state), (*state).clone()));
    if entries.is_empty() {
        return "-".to_string();
    }
    entries
        .iter()
        .map(|(state, n)| format!("{n} {state}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// An optional text for a table cell: `-` when absent or empty.
pub fn cell(value: Option<&str>) -> String {
    match value {
        Some(v) if !v.is_empty() => v.to_string(),
        _ => "-".to_string(),
    }
}

/// A timestamp for people: `2026-11-30T10:00:00.123Z` → `2026-11-30 10:00:00`.
pub fn short_time(ts: &str) -> String {
    match ts.split_once('T') {
        Some((date, time)) => {
            let time = time.trim_end_matches('Z');
            let time = time.split('.').next().unwrap_or(time);
            format!("{date} {time}")
        }
        None => ts.to_string(),
    }
}

/// A duration in seconds for people: `2d 3h`, `1h 2m 3s`, `45s`.
pub fn duration(secs: u64) -> String {
    let (d, h, m, s) = (
        secs / 86_400,
        (secs / 3600) % 24,
        (secs / 60) % 60,
        secs % 60,
    );
    if d > 0 {
        format!("{d}d {h}h {m}m")
    } else if h > 0 {
        format!("{h}h {m}m {s}s")
    } else if m > 0 {
        format!("{m}m {s}s")
    } else {
        format!("{s}s")
    }
}

/// A short duration for tables: `45s`, `1m05s`, `2h03m`, `3d04h`.
pub fn clock(secs: u64) -> String {
    let (d, h, m, s) = (
        secs / 86_400,
        (secs / 3600) % 24,
        (secs / 60) % 60,
        secs % 60,
    );
    if d > 0 {
        format!("{d}d{h:02}h")
    } else if h > 0 {
        format!("{h}h{m:02}m")
    } else if m > 0 {
        format!("{m}m{s:02}s")
    } else {
        format!("{s}s")
    }
}

/// One event for people: `SEQ  TS  TYPE  NODE  ACTOR  DATA` with the data as compact JSON.
/// Works on any JSON so that fields added later do not break it.
pub fn event_line(ev: &Value) -> String {
    let seq = ev
        .get("seq")
        .and_then(Value::as_u64)
        .map(|s| s.to_string())
        .unwrap_or_else(|| "?".to_string());
    let text = |key: &str| cell(ev.get(key).and_then(Value::as_str));
    let data = match ev.get("data") {
        Some(d) if !d.is_null() => d.to_string(),
        _ => "{}".to_string(),
    };
    format!(
        "{seq:>4}  {:<24}  {:<19}  {:<12}  {:<6}  {data}",
        text("ts"),
        text("type"),
        text("node"),
        text("actor"),
    )
}

/// A word as a POSIX shell reads it back: unchanged when it is plain, else single-quoted.
pub fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./:%@=+,".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// Shortens what a user gave for an error message: at most `max` characters, then `…`.
pub fn truncate(given: &str, max: usize) -> String {
    if given.chars().count() <= max {
        given.to_string()
    } else {
        let mut s: String = given.chars().take(max).collect();
        s.push('…');
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_error_shape_omits_missing_hint() {
        let err = AppError::not_found("no run 01ABCDEF");
        assert_eq!(
            error_json(&err),
            r#"{"error":{"kind":"not_found","message":"no run 01ABCDEF"}}"#
        );
        let err = err.with_hint("see `orchestratectl run list`");
        assert_eq!(
            error_json(&err),
            r#"{"error":{"kind":"not_found","message":"no run 01ABCDEF","hint":"see `orchestratectl run list`"}}"#
        );
        assert_eq!(
            error_text(&err),
            "error: no run 01ABCDEF\nhint: see `orchestratectl run list`\n"
        );
        assert_eq!(exit_code(&err), 3);
    }

    #[test]
    fn tables_line_up() {
        let rows = vec![
            vec!["01AAAA".to_string(), "generic".into(), "a title".into()],
            vec!["01B".to_string(), "x".into(), "-".into()],
        ];
        let t = table(&["ID", "KIND", "TITLE"], &rows);
        assert_eq!(
            t,
            "ID      KIND     TITLE\n01AAAA  generic  a title\n01B     x        -\n"
        );
        // Every column starts at the same offset on every line.
        let starts: Vec<usize> = t.lines().map(|l| l.find("TITLE").unwrap_or(0)).collect();
        assert_eq!(starts[0], 17);
        assert_eq!(&t.lines().nth(1).unwrap()[17..], "a title");
    }

    #[test]
    fn tables_count_characters_not_bytes() {
        let rows = vec![vec!["é".to_string(), "x".into()]];
        assert_eq!(table(&["AB", "C"], &rows), "AB  C\né   x\n");
    }

    #[test]
    fn node_counts_follow_the_node_life() {
        let mut counts = BTreeMap::new();
        counts.insert("done".to_string(), 1);
        counts.insert("running".to_string(), 2);
        counts.insert("zzz".to_string(), 1);
        assert_eq!(node_counts(&counts), "2 running, 1 done, 1 zzz");
        assert_eq!(node_counts(&BTreeMap::new()), "-");
    }

    #[test]
    fn event_lines_and_helpers() {
        let ev = json!({"v":1,"seq":7,"id":"01X","ts":"2026-11-30T10:00:00.123Z","run":"01R",
            "node":"api","type":"node.done","actor":"agent","data":{"message":"ok"}});
        assert_eq!(
            event_line(&ev),
            "   7  2026-11-30T10:00:00.123Z  node.done            api           agent   {\"message\":\"ok\"}"
        );
        let ev = json!({"seq":1,"ts":"t","type":"run.created","actor":"human","data":{}});
        assert!(event_line(&ev).contains("  -             human   {}"));
        assert_eq!(
            short_time("2026-11-30T10:00:00.123Z"),
            "2026-11-30 10:00:00"
        );
        assert_eq!(duration(3723), "1h 2m 3s");
        assert_eq!(duration(59), "59s");
        assert_eq!(clock(0), "0s");
        assert_eq!(clock(45), "45s");
        assert_eq!(clock(65), "1m05s");
        assert_eq!(clock(3600 + 180 + 9), "1h03m");
        assert_eq!(clock(3 * 86_400 + 4 * 3600 + 59), "3d04h");
        assert_eq!(truncate("abcdef", 3), "abc…");
        assert_eq!(truncate("abc", 3), "abc");
        assert_eq!(shell_word("/h/tmux.sock"), "/h/tmux.sock");
        assert_eq!(shell_word("01R:api"), "01R:api");
        assert_eq!(shell_word("a b"), "'a b'");
        assert_eq!(shell_word("it's"), "'it'\\''s'");
        assert_eq!(shell_word(""), "''");
        assert_eq!(
            fields(&[("Run", "x".into()), ("Status", "y".into())]),
            "Run     x\nStatus  y\n"
        );
    }

    #[test]
    fn usage_errors_keep_clap_first_line() {
        let err = usage_error(
            "error: unexpected argument '--bogus' found\n\nUsage: orchestratectl run list\n",
        );
        assert_eq!(err.kind, ErrorKind::InvalidParams);
        assert_eq!(err.message, "unexpected argument '--bogus' found");
        assert_eq!(exit_code(&err), 2);
        let err = usage_error(
            "error: the following required arguments were not provided:\n  --kind <KIND>\n\nUsage: x\n",
        );
        assert_eq!(
            err.message,
            "the following required arguments were not provided: --kind <KIND>"
        );
        let err = missing_command_error("About\n\nUsage: orchestratectl run [OPTIONS] <COMMAND>\n");
        assert_eq!(
            err.message,
            "a command is missing: the usage is `orchestratectl run [OPTIONS] <COMMAND>`"
        );
    }
}
