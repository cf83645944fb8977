//! `run watch`: a live view of a run until it ends, redrawn on a terminal, else plain lines
//! (JSON lines with `--json`).

use std::io::{IsTerminal, Write};
use std::time::Duration;

use octl_proto::projection::ListedStatus;
use octl_proto::rpc::RunShown;
use octl_proto::{AppError, NodeState};
use serde_json::Value;

use super::progress::{print_text_raw, terminal_size};
use super::{event_message, one_line, show, show_again, why_text, Events, TICK};
use crate::commands::run::show::{elapsed_cell, waiting_cell};
use crate::commands::Ctx;
use crate::output::{node_counts, print_text, table, truncate};

/// How many past events `run watch` shows first.
pub const WATCH_BACKLOG: u64 = 10;
/// How many recent events the redrawn view keeps at its bottom.
const WATCH_RECENT: usize = 6;
/// How long `run watch` waits, once the run ended, for the events that ended it.
const WATCH_DRAIN: Duration = Duration::from_secs(2);

/// Has the run ended for good (`run watch` stops there; a `waiting` run is watched on)?
pub fn is_terminal_status(status: ListedStatus) -> bool {
    status.is_ended()
}

/// How `run watch` shows the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchMode {
    /// The events as JSON lines on stdout (`--json`).
    Json,
    /// One plain line per event on stdout (stdout is not a terminal).
    Lines,
    /// The whole view redrawn on stdout (a terminal).
    Redraw,
}

impl WatchMode {
    pub fn detect(json: bool) -> WatchMode {
        WatchMode::choose(json, std::io::stdout().is_terminal())
    }

    pub fn choose(json: bool, terminal: bool) -> WatchMode {
        match (json, terminal) {
            (true, _) => WatchMode::Json,
            (false, true) => WatchMode::Redraw,
            (false, false) => WatchMode::Lines,
        }
    }
}

/// One event for `run watch`: `SEQ TS TYPE NODE MESSAGE` (`-` for a run-level event); with
/// `short`, the time of day only.
pub fn watch_event_line(ev: &Value, short: bool) -> String {
    let seq = ev
        .get("seq")
        .and_then(Value::as_u64)
        .map(|s| s.to_string())
        .unwrap_or_else(|| "?".to_string());
    let ts = ev.get("ts").and_then(Value::as_str).unwrap_or("-");
    let ts = if short {
        ts.split_once('T')
            .map(|(_, t)| t.split('.').next().unwrap_or(t).trim_end_matches('Z'))
            .unwrap_or(ts)
    } else {
        ts
    };
    let kind = ev.get("type").and_then(Value::as_str).unwrap_or("?");
    let node = ev.get("node").and_then(Value::as_str).unwrap_or("-");
    format!("{seq} {ts} {kind} {node} {}", event_message(ev))
        .trim_end()
        .to_string()
}

/// What `run watch` shows, and where.
struct WatchView {
    mode: WatchMode,
    recent: std::collections::VecDeque<String>,
}

impl WatchView {
    fn event(&mut self, raw: &str, ev: &Value) {
        match self.mode {
            WatchMode::Json => crate::output::print_line(raw),
            WatchMode::Lines => print_text(&watch_event_line(ev, false)),
            WatchMode::Redraw => {
                if self.recent.len() == WATCH_RECENT {
                    self.recent.pop_front();
                }
                self.recent.push_back(watch_event_line(ev, true));
            }
        }
    }

    fn draw(&self, detail: &RunShown) {
        if self.mode != WatchMode::Redraw {
            return;
        }
        let (cols, rows) = terminal_size(libc::STDOUT_FILENO);
        let recent: Vec<String> = self.recent.iter().cloned().collect();
        let lines = watch_frame(detail, &recent, cols, rows);
        // Home, each line cleared to its end, then the rest of the screen cleared: no flicker.
        let mut text = String::from("\x1b[H");
        for line in &lines {
            text.push_str(&crate::output::plain(line));
            text.push_str("\x1b[K\n");
        }
        text.push_str("\x1b[J");
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
    }
}

/// Watches a run until it ends (completed, failed, cancelled): the last [`WATCH_BACKLOG`]
/// events, then every new one, shown by `mode`. Returns the last `run.show`.
pub async fn watch_run(ctx: &Ctx, run: &str, mode: WatchMode) -> Result<RunShown, AppError> {
    let mut detail = show(ctx, run).await?;
    let id = detail.manifest.id.clone();
    let mut view = WatchView {
        mode,
        recent: Default::default(),
    };
    if mode == WatchMode::Redraw {
        print_text_raw("\x1b[2J");
    }
    let since = detail.manifest.last_seq.saturating_sub(WATCH_BACKLOG);
    if is_terminal_status(detail.manifest.status) {
        // Ended already: its last events, then the view once.
        let mut stream = ctx.client.event_stream(&id, since, false).await?;
        while let Some(line) = stream.next_line().await? {
            if let Ok(ev) = serde_json::from_str::<Value>(&line) {
                view.event(&line, &ev);
            }
        }
        view.draw(&detail);
        return Ok(detail);
    }
    let mut events = Events::new(&id, since);
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    view.draw(&detail);
    while !is_terminal_status(detail.manifest.status) {
        tokio::select! {
            next = events.next_line(ctx) => {
                let (line, ev) = next?;
                view.event(&line, &ev);
            }
            _ = tick.tick() => {}
        }
        detail = show_again(ctx, &id).await?;
        view.draw(&detail);
    }
    // The events that ended it may still be on their way.
    let last = detail.manifest.last_seq;
    let _ = tokio::time::timeout(WATCH_DRAIN, async {
        while events.cursor() < last {
            match events.next_line(ctx).await {
                Ok((line, ev)) => view.event(&line, &ev),
                Err(_) => break,
            }
        }
    })
    .await;
    view.draw(&detail);
    Ok(detail)
}

/// The redrawn `run watch` view, at most `height - 1` lines of at most `width - 1` columns:
/// a header (run, kind, status, counts), the node table (ID, STATE, ELAPSED, WAITING FOR,
/// BRANCH), and the last events. When the nodes do not fit, unfinished ones are shown first
/// and the rest is counted.
pub fn watch_frame(d: &RunShown, recent: &[String], width: usize, height: usize) -> Vec<String> {
    let m = &d.manifest;
    let mut head = format!("Run {}  {}  {}", m.id, m.kind_name(), m.status);
    if let Some(title) = m.title.as_deref().filter(|t| !t.is_empty()) {
        head.push_str(&format!("  {}", one_line(title, 60)));
    }
    let mut second = format!("Nodes: {}", node_counts(&m.nodes));
    if let Some(cap) = m.settings.max_parallel {
        second.push_str(&format!("  ·  at most {cap} at once"));
    }
    if let Some(integration) = &m.settings.integration {
        second.push_str(&format!("  ·  {integration}"));
        if let Some(merge) = &m.merge {
            second.push_str(&format!(" ({merge})"));
        }
    }
    let mut lines = vec![head, second];
    if m.status == ListedStatus::Waiting {
        let (why, hint) = why_text(d);
        lines.push(format!(
            "Waiting: {}",
            why.split_once(": ").map_or(why.as_str(), |(_, w)| w)
        ));
        if let Some(hint) = hint {
            lines.push(format!("  {hint}"));
        }
    }
    lines.push(String::new());

    let footer = "Ctrl-C stops watching; the run goes on.".to_string();
    let events_block = 2 + recent.len().max(1);
    let fixed = lines.len() + 1 + events_block + 2;
    let room = height.saturating_sub(1).saturating_sub(fixed).max(2);
    let mut shown: Vec<usize> = (0..d.nodes.len()).collect();
    let mut hidden = Vec::new();
    if d.nodes.len() > room {
        let keep = room - 1;
        let (open, done): (Vec<usize>, Vec<usize>) = (0..d.nodes.len())
            .partition(|&i| !matches!(d.nodes[i].state, NodeState::Merged | NodeState::Cancelled));
        shown = open.iter().chain(done.iter()).take(keep).copied().collect();
        shown.sort_unstable();
        hidden = (0..d.nodes.len()).filter(|i| !shown.contains(i)).collect();
    }
    let mut rows: Vec<Vec<String>> = shown
        .iter()
        .map(|&i| {
            let n = &d.nodes[i];
            vec![
                n.id.clone(),
                n.state.as_str().to_string(),
                elapsed_cell(n),
                waiting_cell(n),
                n.branch.clone().unwrap_or_else(|| "-".to_string()),
            ]
        })
        .collect();
    if !hidden.is_empty() {
        let mut counts = std::collections::BTreeMap::new();
        for &i in &hidden {
            *counts
                .entry(d.nodes[i].state.as_str().to_string())
                .or_insert(0usize) += 1;
        }
        rows.push(vec![
            format!("… {} more", hidden.len()),
            node_counts(&counts),
            String::new(),
            String::new(),
            String::new(),
        ]);
    }
    if d.nodes.is_empty() {
        lines.push("No nodes.".to_string());
    } else {
        let t = table(&["ID", "STATE", "ELAPSED", "WAITING FOR", "BRANCH"], &rows);
        lines.extend(t.lines().map(str::to_string));
    }
    lines.push(String::new());
    lines.push("Last events:".to_string());
    if recent.is_empty() {
        lines.push("  (none yet)".to_string());
    }
    lines.extend(recent.iter().map(|l| format!("  {l}")));
    lines.push(String::new());
    lines.push(footer);
    // `truncate` adds its `…` after `cols` characters: every line stays within width - 1.
    let cols = width.saturating_sub(2).max(20);
    lines.iter().map(|l| truncate(l, cols)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::follow::tests::*;
    use serde_json::json;

    #[test]
    fn watch_lines_and_modes() {
        let ev = json!({"seq": 7, "ts": "2026-11-30T10:00:05.123Z", "type": "node.progress",
            "node": "api", "data": {"message": "tests pass"}});
        assert_eq!(
            watch_event_line(&ev, false),
            "7 2026-11-30T10:00:05.123Z node.progress api tests pass"
        );
        assert_eq!(
            watch_event_line(&ev, true),
            "7 10:00:05 node.progress api tests pass"
        );
        let ev =
            json!({"seq": 1, "ts": "2026-11-30T10:00:00.000Z", "type": "run.created", "data": {}});
        assert_eq!(
            watch_event_line(&ev, false),
            "1 2026-11-30T10:00:00.000Z run.created -"
        );
        assert_eq!(WatchMode::choose(true, true), WatchMode::Json);
        assert_eq!(WatchMode::choose(false, true), WatchMode::Redraw);
        assert_eq!(WatchMode::choose(false, false), WatchMode::Lines);
        for s in ["completed", "failed", "cancelled", "corrupt"] {
            assert!(is_terminal_status(ListedStatus::parse(s).unwrap()), "{s}");
        }
        assert!(!is_terminal_status(ListedStatus::Waiting));
        assert!(!is_terminal_status(ListedStatus::Active));
    }

    #[test]
    fn the_watch_frame() {
        let mut d = detail(
            "orchestrate",
            "active",
            json!([
                node("schema", "merged", json!({})),
                node("api", "running", json!({"deps": ["schema"]})),
                node("docs", "pending", json!({"deps": ["api"]}))
            ]),
            json!([]),
        );
        d.manifest.nodes = [
            ("merged".to_string(), 1),
            ("running".into(), 1),
            ("pending".into(), 1),
        ]
        .into_iter()
        .collect();
        d.manifest.settings =
            serde_json::from_value(json!({"integration": "octl/R/integration", "max_parallel": 2}))
                .unwrap();
        d.nodes[1].elapsed_s = Some(65);
        d.nodes[2].waiting_for = vec!["api".into()];
        let recent = vec!["5 10:00:05 node.started api".to_string()];
        let frame = watch_frame(&d, &recent, 120, 40);
        assert_eq!(
            frame,
            [
                "Run 01JDXJ5R8Q4M0ZK7P2W9TB3C6E  orchestrate  active",
                "Nodes: 1 pending, 1 running, 1 merged  ·  at most 2 at once  ·  octl/R/integration",
                "",
                "ID      STATE    ELAPSED  WAITING FOR  BRANCH",
                "schema  merged   -        -            octl/R/schema",
                "api     running  1m05s    -            octl/R/api",
                "docs    pending  -        api          octl/R/docs",
                "",
                "Last events:",
                "  5 10:00:05 node.started api",
                "",
                "Ctrl-C stops watching; the run goes on.",
            ]
        );
        // A small terminal: unfinished nodes first, the rest counted, nothing wider than it.
        d.nodes
            .push(serde_json::from_value(node("auth", "merged", json!({}))).unwrap());
        let frame = watch_frame(&d, &recent, 30, 13);
        assert_eq!(frame.len(), 12, "{frame:#?}");
        assert!(frame.iter().all(|l| l.chars().count() <= 29), "{frame:#?}");
        let rows: Vec<&String> = frame.iter().skip(4).take(3).collect();
        assert!(rows[0].starts_with("api "), "{frame:#?}");
        assert!(rows[1].starts_with("docs "), "{frame:#?}");
        assert!(rows[2].starts_with("… 2 more  2 merged"), "{frame:#?}");
    }
}
