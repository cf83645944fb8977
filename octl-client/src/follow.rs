//! Following runs: until they settle, for `run wait`, `spawn --wait`, `fan-out --wait`,
//! `orchestrate --wait` and `demo` (`run.show`, then the run's event stream, re-checking
//! `run.show` after every event and every second), with the live progress those commands print
//! on stderr; until they end, for `run watch` (a view redrawn on stdout, or plain lines); and
//! the event stream itself across daemon restarts ([`Events`], also used by `discussion ask
//! --wait`).
//!
//! A run is *settled* when its status is terminal (`completed`, `failed`, `cancelled`) or
//! `waiting` (only a human can move it). Exit code: 0 for `completed`, 4 for the others.
//!
//! Progress ([`Progress`]) never touches stdout: on a terminal it redraws a status block on
//! stderr ([`Screen`]); otherwise it prints one plain line per event; with `--json`, nothing.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use octl_proto::projection::RunDetail;
use octl_proto::state::Node;
use octl_proto::{AppError, ErrorKind, NodeState};
use serde_json::{json, Value};

use crate::client::{CallError, EventStream};
use crate::commands::run::show::{elapsed_cell, node_extras, waiting_cell, NodeExtra};
use crate::commands::{decode, Ctx};
use crate::output::{duration, node_counts, print_text, table, truncate};

/// How often the status is re-checked and the progress redrawn without an event.
const TICK: Duration = Duration::from_secs(1);
/// Pause before opening the event stream again after it ended (daemon restarted).
const RECONNECT: Duration = Duration::from_millis(250);

/// Is the run's status one that `run wait` stops at?
pub fn is_settled(status: &str) -> bool {
    matches!(
        status,
        "completed" | "failed" | "cancelled" | "waiting" | "corrupt"
    )
}

/// The exit code of `run wait` for a settled run: 0 completed, or an orchestrate run whose
/// nodes are all merged into its integration branch and that waits only for `merge RUN`
/// (so `orchestrate --wait && orchestratectl merge RUN` merges); 4 otherwise.
pub fn wait_exit_code(d: &RunDetail) -> i32 {
    if d.manifest.status == "completed" || awaits_only_its_merge(d) {
        0
    } else {
        4
    }
}

/// An orchestrate run waiting with every node merged into integration and cleaned up, no
/// question open, and its own merge not yet tried (or refused).
fn awaits_only_its_merge(d: &RunDetail) -> bool {
    let m = &d.manifest;
    m.kind == "orchestrate"
        && m.status == "waiting"
        && m.merge.is_none()
        && !d.nodes.is_empty()
        && d.nodes
            .iter()
            .all(|n| n.state == NodeState::Merged && n.cleaned)
        && !d.discussions.iter().any(|x| x.open)
}

/// `run.show` of one run: the raw answer and its typed form.
pub async fn show(ctx: &Ctx, run: &str) -> Result<(Value, RunDetail), AppError> {
    let value = ctx.client.call("run.show", json!({ "run": run })).await?;
    let detail: RunDetail = decode("run.show", &value)?;
    Ok((value, detail))
}

/// Follows `run` (an id or prefix, already validated) until it settles, then returns its last
/// `run.show`. Events after `since` (default: the run's last seq when we start) are fed to
/// `progress`. Stops after `timeout` with kind `timeout`.
pub async fn wait_run(
    ctx: &Ctx,
    run: &str,
    since: Option<u64>,
    timeout: Option<Duration>,
    progress: &mut Progress,
) -> Result<(Value, RunDetail), AppError> {
    let started = Instant::now();
    let result = match timeout {
        Some(limit) => match tokio::time::timeout(limit, follow(ctx, run, since, progress)).await {
            Ok(r) => r,
            Err(_) => Err(timed_out(run, started.elapsed(), progress.last_status())),
        },
        None => follow(ctx, run, since, progress).await,
    };
    progress.finish();
    result
}

fn timed_out(run: &str, waited: Duration, last: Option<(String, String)>) -> AppError {
    let (id, state) = match last {
        Some((id, state)) => (id, format!(": it is still {state}")),
        None => (run.to_string(), String::new()),
    };
    AppError::new(
        ErrorKind::Timeout,
        format!(
            "gave up waiting for run {id} after {}{state}",
            duration_precise(waited)
        ),
    )
    .with_hint(format!(
        "the run goes on; wait again with `orchestratectl run wait {id}` or look at it with `orchestratectl run show {id}`"
    ))
}

fn duration_precise(d: Duration) -> String {
    if d.as_secs() >= 60 {
        duration(d.as_secs())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

async fn follow(
    ctx: &Ctx,
    run: &str,
    since: Option<u64>,
    progress: &mut Progress,
) -> Result<(Value, RunDetail), AppError> {
    let (mut value, mut detail) = show(ctx, run).await?;
    progress.state(&detail);
    if is_settled(&detail.manifest.status) {
        return Ok((value, detail));
    }
    let id = detail.manifest.id.clone();
    let cursor = since
        .unwrap_or(detail.manifest.last_seq)
        .min(detail.manifest.last_seq);
    let mut events = Events::new(&id, cursor);
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            ev = events.next(ctx) => progress.event(&ev?),
            _ = tick.tick() => progress.tick(),
        }
        (value, detail) = show(ctx, &id).await?;
        progress.state(&detail);
        if is_settled(&detail.manifest.status) {
            return Ok((value, detail));
        }
    }
}

/// A run's events after a cursor, as they land, across daemon restarts: when the stream ends
/// it is opened again from the last event seen (after a pause, starting the daemon when
/// autostart allows). Used by `run wait`, `run watch` and `discussion ask --wait`.
///
/// [`Events::next`] may be dropped in a `tokio::select!` and called again: nothing is lost.
pub struct Events {
    id: String,
    cursor: u64,
    stream: Option<EventStream>,
}

impl Events {
    /// Events of run `id` (a full id) with a seq greater than `cursor`.
    pub fn new(id: &str, cursor: u64) -> Events {
        Events {
            id: id.to_string(),
            cursor,
            stream: None,
        }
    }

    /// The seq of the last event returned (or the starting cursor).
    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    /// The next event. Lines that are not JSON, and events already seen, are skipped.
    pub async fn next(&mut self, ctx: &Ctx) -> Result<Value, AppError> {
        self.next_line(ctx).await.map(|(_, ev)| ev)
    }

    /// The next event, with its line exactly as the daemon sent it.
    pub async fn next_line(&mut self, ctx: &Ctx) -> Result<(String, Value), AppError> {
        loop {
            let stream = match &mut self.stream {
                Some(stream) => stream,
                None => match ctx.client.event_stream(&self.id, self.cursor, true).await {
                    Ok(stream) => self.stream.insert(stream),
                    Err(CallError::NotRunning(_)) => {
                        // Start it again, or fail with daemon_unreachable when autostart is off.
                        tokio::time::sleep(RECONNECT).await;
                        ctx.client
                            .call("run.show", json!({ "run": self.id }))
                            .await?;
                        continue;
                    }
                    Err(CallError::Failed(e)) => return Err(e),
                },
            };
            match stream.next_line().await {
                Ok(Some(line)) => {
                    let Ok(ev) = serde_json::from_str::<Value>(&line) else {
                        continue;
                    };
                    if let Some(seq) = ev.get("seq").and_then(Value::as_u64) {
                        if seq <= self.cursor {
                            continue;
                        }
                        self.cursor = seq;
                    }
                    return Ok((line, ev));
                }
                // The daemon ended the stream (it stopped or restarts): open it again.
                Ok(None) | Err(_) => {
                    self.stream = None;
                    tokio::time::sleep(RECONNECT).await;
                }
            }
        }
    }
}

/// Prints the outcome of a wait and returns its exit code: the summary on stdout (`json` as
/// given with `--json`, else one line), and for exit 4, in human mode, why on stderr.
pub fn report_wait(ctx: &Ctx, json: &Value, detail: &RunDetail) -> i32 {
    ctx.out.result(json, || wait_summary_text(detail));
    let code = wait_exit_code(detail);
    if code == 0 && awaits_only_its_merge(detail) && !ctx.out.json {
        let (why, hint) = why_text(detail);
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "{why}");
        if let Some(hint) = hint {
            let _ = writeln!(err, "next: {hint}");
        }
    }
    if code != 0 && !ctx.out.json {
        let (why, hint) = why_text(detail);
        let mut text = format!("{why}\n");
        if let Some(hint) = hint {
            text.push_str(&format!("hint: {hint}\n"));
        }
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(text.as_bytes());
        let _ = err.flush();
    }
    code
}

/// `Run 01… completed: nodes 1 merged`
pub fn wait_summary_text(d: &RunDetail) -> String {
    let m = &d.manifest;
    format!("Run {} {}: nodes {}", m.id, m.status, node_counts(&m.nodes))
}

/// Why a run that is not `completed` stopped, and what to do about it:
/// `run 01… is waiting: node api is conflict (greeting.txt)`.
pub fn why_text(d: &RunDetail) -> (String, Option<String>) {
    let m = &d.manifest;
    let id = &m.id;
    let show = format!("orchestratectl run show {id}");
    match m.status.as_str() {
        "waiting" => {
            let mut parts = Vec::new();
            let mut hint = None;
            for n in &d.nodes {
                let detail = match n.state {
                    NodeState::Conflict => {
                        if hint.is_none() {
                            hint = Some(format!(
                                "resolve the conflict in {} (git merge {}, fix, commit), then run `orchestratectl merge {id} --node {}`",
                                n.worktree.as_deref().unwrap_or("the node's worktree"),
                                m.base.as_deref().unwrap_or("BASE"),
                                n.id
                            ));
                        }
                        if n.conflict_files.is_empty() {
                            String::new()
                        } else {
                            format!(" ({})", n.conflict_files.join(", "))
                        }
                    }
                    NodeState::MergeBlocked => {
                        if hint.is_none() {
                            hint = Some(format!(
                                "commit or stash the changes in the checkout of {}, then run `orchestratectl merge {id} --node {}`",
                                m.base.as_deref().unwrap_or("the base branch"),
                                n.id
                            ));
                        }
                        String::new()
                    }
                    NodeState::Done if m.kind == "code" => {
                        if hint.is_none() {
                            hint = Some(format!(
                                "review it, then run `orchestratectl merge {id} --node {}`",
                                n.id
                            ));
                        }
                        " (awaiting merge)".to_string()
                    }
                    NodeState::Waiting | NodeState::Blocked => n
                        .message
                        .as_deref()
                        .or(n.reason.as_deref())
                        .map(|t| format!(" ({})", one_line(t, 80)))
                        .unwrap_or_default(),
                    // In a DAG a failed node can be started again.
                    NodeState::Failed | NodeState::Exited if m.kind == "orchestrate" => {
                        if hint.is_none() {
                            hint = Some(format!(
                                "see why in `{show}`, then start it again with `orchestratectl run retry {id} --node {}`",
                                n.id
                            ));
                        }
                        n.reason
                            .as_deref()
                            .or(n.message.as_deref())
                            .map(|t| format!(" ({})", one_line(t, 80)))
                            .unwrap_or_default()
                    }
                    _ => continue,
                };
                parts.push(format!("node {} is {}{detail}", n.id, n.state.as_str()));
            }
            for x in d.discussions.iter().filter(|x| x.open) {
                parts.push(format!(
                    "discussion {} is open ({})",
                    x.id,
                    one_line(&x.title, 80)
                ));
                if hint.is_none() {
                    hint = Some(format!(
                        "answer it with `orchestratectl discussion answer {} --text '…'`",
                        x.id
                    ));
                }
            }
            // An orchestrate run whose nodes all merged waits for its integration branch.
            let all_merged =
                !d.nodes.is_empty() && d.nodes.iter().all(|n| n.state == NodeState::Merged);
            if m.kind == "orchestrate" && all_merged {
                let integration = m
                    .settings
                    .get("integration")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("octl/{id}/integration"));
                let base = m.base.as_deref().unwrap_or("base");
                match m.merge.as_deref() {
                    Some(state @ ("conflict" | "merge_blocked")) => {
                        parts.push(format!("the merge of {integration} into {base} is {state}"))
                    }
                    _ => parts.push(format!(
                        "every node is merged into {integration}, which is not merged into {base} yet"
                    )),
                }
                if hint.is_none() {
                    hint = Some(format!(
                        "merge it into {base} with `orchestratectl merge {id}`"
                    ));
                }
            }
            if parts.is_empty() {
                parts.push("a human has to act".to_string());
            }
            (
                format!("run {id} is waiting: {}", parts.join("; ")),
                hint.or(Some(show)),
            )
        }
        "failed" => {
            let parts: Vec<String> = d
                .nodes
                .iter()
                .filter(|n| matches!(n.state, NodeState::Failed | NodeState::Exited))
                .map(failed_node_text)
                .collect();
            let why = if !parts.is_empty() {
                parts.join("; ")
            } else if let Some(e) = &m.error {
                one_line(e, 120)
            } else {
                "see its events".to_string()
            };
            (
                format!("run {id} failed: {why}"),
                Some(format!(
                    "{show}; the branches and worktrees of failed nodes are kept"
                )),
            )
        }
        "cancelled" => (format!("run {id} was cancelled"), Some(show)),
        other => (format!("run {id} is {other}"), Some(show)),
    }
}

fn failed_node_text(n: &Node) -> String {
    let mut text = format!("node {} {}", n.id, n.state.as_str());
    if let Some(status) = n.exit_status {
        text.push_str(&format!(" with status {status}"));
    }
    if let Some(reason) = n.reason.as_deref().or(n.message.as_deref()) {
        text.push_str(&format!(" ({})", one_line(reason, 80)));
    }
    text
}

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
    pub fn state(&mut self, d: &RunDetail) {
        self.run = Some(d.manifest.id.clone());
        self.status = Some(d.manifest.status.clone());
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
    let _ = writeln!(err, "{line}");
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
            text.push_str(&truncate(line, cols));
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
fn terminal_size(fd: libc::c_int) -> (usize, usize) {
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
fn print_text_raw(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

// ---------------------------------------------------------------------------------------------
// run watch

/// How many past events `run watch` shows first.
pub const WATCH_BACKLOG: u64 = 10;
/// How many recent events the redrawn view keeps at its bottom.
const WATCH_RECENT: usize = 6;
/// How long `run watch` waits, once the run ended, for the events that ended it.
const WATCH_DRAIN: Duration = Duration::from_secs(2);

/// Has the run ended for good (`run watch` stops there; a `waiting` run is watched on)?
pub fn is_terminal_status(status: &str) -> bool {
    matches!(status, "completed" | "failed" | "cancelled" | "corrupt")
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
            WatchMode::Json => print_text(raw),
            WatchMode::Lines => print_text(&watch_event_line(ev, false)),
            WatchMode::Redraw => {
                if self.recent.len() == WATCH_RECENT {
                    self.recent.pop_front();
                }
                self.recent.push_back(watch_event_line(ev, true));
            }
        }
    }

    fn draw(&self, value: &Value, detail: &RunDetail) {
        if self.mode != WatchMode::Redraw {
            return;
        }
        let (cols, rows) = terminal_size(libc::STDOUT_FILENO);
        let recent: Vec<String> = self.recent.iter().cloned().collect();
        let lines = watch_frame(detail, &node_extras(value), &recent, cols, rows);
        // Home, each line cleared to its end, then the rest of the screen cleared: no flicker.
        let mut text = String::from("\x1b[H");
        for line in &lines {
            text.push_str(line);
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
pub async fn watch_run(
    ctx: &Ctx,
    run: &str,
    mode: WatchMode,
) -> Result<(Value, RunDetail), AppError> {
    let (mut value, mut detail) = show(ctx, run).await?;
    let id = detail.manifest.id.clone();
    let mut view = WatchView {
        mode,
        recent: Default::default(),
    };
    if mode == WatchMode::Redraw {
        print_text_raw("\x1b[2J");
    }
    let since = detail.manifest.last_seq.saturating_sub(WATCH_BACKLOG);
    if is_terminal_status(&detail.manifest.status) {
        // Ended already: its last events, then the view once.
        let mut stream = ctx.client.event_stream(&id, since, false).await?;
        while let Some(line) = stream.next_line().await? {
            if let Ok(ev) = serde_json::from_str::<Value>(&line) {
                view.event(&line, &ev);
            }
        }
        view.draw(&value, &detail);
        return Ok((value, detail));
    }
    let mut events = Events::new(&id, since);
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    view.draw(&value, &detail);
    while !is_terminal_status(&detail.manifest.status) {
        tokio::select! {
            next = events.next_line(ctx) => {
                let (line, ev) = next?;
                view.event(&line, &ev);
            }
            _ = tick.tick() => {}
        }
        (value, detail) = show(ctx, &id).await?;
        view.draw(&value, &detail);
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
    view.draw(&value, &detail);
    Ok((value, detail))
}

/// The redrawn `run watch` view, at most `height - 1` lines of at most `width - 1` columns:
/// a header (run, kind, status, counts), the node table (ID, STATE, ELAPSED, WAITING FOR,
/// BRANCH), and the last events. When the nodes do not fit, unfinished ones are shown first
/// and the rest is counted.
pub fn watch_frame(
    d: &RunDetail,
    extras: &std::collections::HashMap<String, NodeExtra>,
    recent: &[String],
    width: usize,
    height: usize,
) -> Vec<String> {
    let m = &d.manifest;
    let mut head = format!("Run {}  {}  {}", m.id, m.kind, m.status);
    if let Some(title) = m.title.as_deref().filter(|t| !t.is_empty()) {
        head.push_str(&format!("  {}", one_line(title, 60)));
    }
    let mut second = format!("Nodes: {}", node_counts(&m.nodes));
    if let Some(cap) = m.settings.get("max_parallel").and_then(Value::as_u64) {
        second.push_str(&format!("  ·  at most {cap} at once"));
    }
    if let Some(integration) = m.settings.get("integration").and_then(Value::as_str) {
        second.push_str(&format!("  ·  {integration}"));
        if let Some(merge) = &m.merge {
            second.push_str(&format!(" ({merge})"));
        }
    }
    let mut lines = vec![head, second];
    if m.status == "waiting" {
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
            let extra = extras.get(&n.id);
            vec![
                n.id.clone(),
                n.state.as_str().to_string(),
                elapsed_cell(extra),
                waiting_cell(extra),
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

    fn detail(kind: &str, status: &str, nodes: Value, discussions: Value) -> RunDetail {
        serde_json::from_value(json!({
            "manifest": {
                "id": "01JDXJ5R8Q4M0ZK7P2W9TB3C6E", "kind": kind, "status": status,
                "title": null, "repo": "/r", "base": "main",
                "created_at": "t", "updated_at": "t", "nodes": {}, "last_seq": 9
            },
            "nodes": nodes, "discussions": discussions, "spinoffs": []
        }))
        .unwrap()
    }

    fn node(id: &str, state: &str, extra: Value) -> Value {
        let mut n = json!({"id": id, "state": state, "branch": format!("octl/R/{id}"),
            "worktree": format!("/w/{id}"), "agent": "shell", "deps": [],
            "created_at": "t", "updated_at": "t"});
        for (k, v) in extra.as_object().unwrap() {
            n[k] = v.clone();
        }
        n
    }

    #[test]
    fn wait_exit_codes() {
        let d = |status: &str| detail("spinoff", status, json!([]), json!([]));
        assert_eq!(wait_exit_code(&d("completed")), 0);
        for s in ["failed", "cancelled", "waiting", "corrupt"] {
            assert_eq!(wait_exit_code(&d(s)), 4, "{s}");
            assert!(is_settled(s), "{s}");
        }
        // An orchestrate run whose nodes are all in integration waits only for `merge RUN`.
        let merged = json!([node("a", "merged", json!({"cleaned": true}))]);
        let ready = detail("orchestrate", "waiting", merged.clone(), json!([]));
        assert_eq!(wait_exit_code(&ready), 0);
        let mut tried = ready.clone();
        tried.manifest.merge = Some("conflict".into());
        assert_eq!(wait_exit_code(&tried), 4, "its merge conflicted");
        let failed = json!([
            node("a", "merged", json!({"cleaned": true})),
            node("b", "failed", json!({}))
        ]);
        assert_eq!(
            wait_exit_code(&detail("orchestrate", "waiting", failed, json!([]))),
            4
        );
        assert!(is_settled("completed"));
        assert!(!is_settled("active"));
    }

    #[test]
    fn why_a_run_waits() {
        let d = detail(
            "spinoff",
            "waiting",
            json!([node(
                "api",
                "conflict",
                json!({"conflict_files": ["a.txt", "b.txt"]})
            )]),
            json!([]),
        );
        let (why, hint) = why_text(&d);
        assert_eq!(
            why,
            "run 01JDXJ5R8Q4M0ZK7P2W9TB3C6E is waiting: node api is conflict (a.txt, b.txt)"
        );
        let hint = hint.unwrap();
        assert!(hint.contains("/w/api"), "{hint}");
        assert!(
            hint.contains("orchestratectl merge 01JDXJ5R8Q4M0ZK7P2W9TB3C6E --node api"),
            "{hint}"
        );

        let d = detail(
            "code",
            "waiting",
            json!([node("ui", "done", json!({}))]),
            json!([]),
        );
        let (why, hint) = why_text(&d);
        assert!(why.ends_with("node ui is done (awaiting merge)"), "{why}");
        assert!(hint.unwrap().contains("orchestratectl merge"));
    }

    #[test]
    fn why_an_orchestrate_run_waits() {
        let mut d = detail(
            "orchestrate",
            "waiting",
            json!([
                node("a", "merged", json!({})),
                node("b", "merged", json!({}))
            ]),
            json!([]),
        );
        let (why, hint) = why_text(&d);
        assert_eq!(
            why,
            "run 01JDXJ5R8Q4M0ZK7P2W9TB3C6E is waiting: every node is merged into octl/01JDXJ5R8Q4M0ZK7P2W9TB3C6E/integration, which is not merged into main yet"
        );
        assert_eq!(
            hint.unwrap(),
            "merge it into main with `orchestratectl merge 01JDXJ5R8Q4M0ZK7P2W9TB3C6E`"
        );
        d.manifest.merge = Some("conflict".into());
        assert!(why_text(&d).0.ends_with(
            "the merge of octl/01JDXJ5R8Q4M0ZK7P2W9TB3C6E/integration into main is conflict"
        ));

        let d = detail(
            "orchestrate",
            "waiting",
            json!([
                node("a", "failed", json!({"reason": "tests fail"})),
                node("b", "blocked", json!({"reason": "a failed"}))
            ]),
            json!([{"id": "q1", "node": null, "title": "which db?", "body": null, "open": true,
                    "answer": null, "opened_at": "t", "resolved_at": null}]),
        );
        let (why, hint) = why_text(&d);
        assert!(
            why.ends_with(": node a is failed (tests fail); node b is blocked (a failed); discussion q1 is open (which db?)"),
            "{why}"
        );
        assert!(hint
            .unwrap()
            .ends_with("`orchestratectl run retry 01JDXJ5R8Q4M0ZK7P2W9TB3C6E --node a`"));
    }

    #[test]
    fn why_a_run_failed_or_was_cancelled() {
        let d = detail(
            "spinoff",
            "failed",
            json!([node("api", "exited", json!({"exit_status": 3}))]),
            json!([]),
        );
        assert_eq!(
            why_text(&d).0,
            "run 01JDXJ5R8Q4M0ZK7P2W9TB3C6E failed: node api exited with status 3"
        );
        let d = detail("spinoff", "cancelled", json!([]), json!([]));
        assert_eq!(
            why_text(&d).0,
            "run 01JDXJ5R8Q4M0ZK7P2W9TB3C6E was cancelled"
        );
    }

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
            assert!(is_terminal_status(s), "{s}");
        }
        assert!(!is_terminal_status("waiting"));
        assert!(!is_terminal_status("active"));
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
        d.manifest.settings = json!({"integration": "octl/R/integration", "max_parallel": 2})
            .as_object()
            .unwrap()
            .clone();
        let mut extras = std::collections::HashMap::new();
        extras.insert(
            "api".to_string(),
            NodeExtra {
                elapsed_s: Some(65),
                waiting_for: vec![],
            },
        );
        extras.insert(
            "docs".to_string(),
            NodeExtra {
                elapsed_s: None,
                waiting_for: vec!["api".into()],
            },
        );
        let recent = vec!["5 10:00:05 node.started api".to_string()];
        let frame = watch_frame(&d, &extras, &recent, 120, 40);
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
        let frame = watch_frame(&d, &extras, &recent, 30, 13);
        assert_eq!(frame.len(), 12, "{frame:#?}");
        assert!(frame.iter().all(|l| l.chars().count() <= 29), "{frame:#?}");
        let rows: Vec<&String> = frame.iter().skip(4).take(3).collect();
        assert!(rows[0].starts_with("api "), "{frame:#?}");
        assert!(rows[1].starts_with("docs "), "{frame:#?}");
        assert!(rows[2].starts_with("… 2 more  2 merged"), "{frame:#?}");
    }

    #[test]
    fn progress_modes() {
        assert_eq!(Mode::choose(true, true), Mode::Off);
        assert_eq!(Mode::choose(true, false), Mode::Off);
        assert_eq!(Mode::choose(false, true), Mode::Redraw);
        assert_eq!(Mode::choose(false, false), Mode::Lines);
    }

    #[test]
    fn timeouts_name_the_run_and_how_to_go_on() {
        let e = timed_out(
            "01JDXJ",
            Duration::from_millis(1500),
            Some((
                "01JDXJ5R8Q4M0ZK7P2W9TB3C6E".into(),
                "active (nodes 1 running)".into(),
            )),
        );
        assert_eq!(e.kind, ErrorKind::Timeout);
        assert_eq!(e.kind.exit_code(), 1);
        assert_eq!(
            e.message,
            "gave up waiting for run 01JDXJ5R8Q4M0ZK7P2W9TB3C6E after 1.5 s: it is still active (nodes 1 running)"
        );
    }
}
