//! What the JSON-lines streams of Codex (`codex exec --json`), Gemini CLI (`--output-format
//! stream-json`) and opencode (`run --format json`), and aider's plain output, say about how
//! the agent ended: success or failure with the reason, the final text, tokens and cost where
//! given. Read from the node's
//! raw log once the agent's process has ended; the result is the node's `outcome`.
//!
//! Every outcome has `agent`, `is_error` and, when the stream said, `result` (the agent's
//! last text), `error`, `input_tokens`, `output_tokens`, `total_cost_usd`, `session_id`.
//!
//! While the agent runs, [`Follow`] reads what its stream gained and says what it is doing
//! ([`Stream::activity`]): the daemon records each change as the node's `node.activity`.

use std::path::Path;

use serde_json::{json, Value};

use octl_proto::state::ActivityState;

/// The stream format of a built-in profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Codex,
    Gemini,
    Opencode,
    /// Plain text (`--no-pretty`): a `Tokens: N sent, M received.` line follows each model
    /// reply; a model error is a `litellm.…Error: …` line (aider exits 0 after it).
    Aider,
}

impl Stream {
    fn agent(self) -> &'static str {
        match self {
            Stream::Codex => "codex",
            Stream::Gemini => "gemini",
            Stream::Opencode => "opencode",
            Stream::Aider => "aider",
        }
    }
}

/// What an agent is doing, as its stream says: a `node.activity`'s state and detail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Doing {
    pub state: ActivityState,
    pub detail: Option<String>,
}

impl Doing {
    fn working(detail: Option<String>) -> Option<Doing> {
        Some(Doing {
            state: ActivityState::Working,
            detail: detail.map(|d| crate::wrap::short(&d, DETAIL_MAX)),
        })
    }

    fn idle(detail: Option<String>) -> Option<Doing> {
        Some(Doing {
            state: ActivityState::Idle,
            detail: detail.map(|d| crate::wrap::short(&d, DETAIL_MAX)),
        })
    }
}

/// Longest `detail` recorded (a command line), as for Claude Code's hooks.
const DETAIL_MAX: usize = 200;

/// "TOOL: ARG" — the tool and the command or file it was given, when its input names one.
fn tool(name: &str, input: &Value) -> Option<String> {
    let arg = [
        "command",
        "cmd",
        "file_path",
        "filePath",
        "absolute_path",
        "path",
    ]
    .iter()
    .find_map(|k| match &input[*k] {
        Value::String(s) => Some(s.clone()),
        // Codex's older `shell` takes argv.
        Value::Array(a) => Some(
            a.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(" "),
        ),
        _ => None,
    });
    Some(match arg {
        Some(a) => format!("{name}: {a}"),
        None => name.to_string(),
    })
}

impl Stream {
    /// What one line of the stream says the agent is doing; `None` for lines that say
    /// nothing about it (a delta of a message already begun says the same as its first part,
    /// and is folded into it by [`Follow`]). docs/AGENTS.md, "Activity and resumable sessions", lists the mapping.
    pub fn activity(self, line: &str) -> Option<Doing> {
        if self == Stream::Aider {
            let line = strip_escapes(line);
            let line = line.trim();
            return if line.starts_with("Aider v") {
                Doing::working(None)
            } else if let Some(file) = line.strip_prefix("Applied edit to ") {
                Doing::working(Some(format!("edit: {file}")))
            } else if let Some(cmd) = line.strip_prefix("Running ") {
                Doing::working(Some(format!("shell: {cmd}")))
            } else if line.starts_with("litellm.") && line.contains("Error") {
                Doing::idle(Some(line.to_string()))
            } else {
                None
            };
        }
        let v: Value = serde_json::from_str(line).ok()?;
        let kind = v.get("type").and_then(Value::as_str)?;
        match (self, kind) {
            (Stream::Codex, "turn.started") => Doing::working(None),
            (Stream::Codex, "item.started" | "item.completed") => {
                let item = &v["item"];
                let started = kind == "item.started";
                match item["type"].as_str()? {
                    "command_execution" if started => {
                        Doing::working(tool("shell", &json!({"command": item["command"]})))
                    }
                    "file_change" if started => {
                        let paths: Vec<&str> = item["changes"]
                            .as_array()
                            .map(|c| c.iter().filter_map(|c| c["path"].as_str()).collect())
                            .unwrap_or_default();
                        Doing::working(Some(format!("edit: {}", paths.join(", "))))
                    }
                    "mcp_tool_call" if started => Doing::working(Some(format!(
                        "{}.{}",
                        item["server"].as_str().unwrap_or("mcp"),
                        item["tool"].as_str().unwrap_or("tool")
                    ))),
                    "web_search" if started => {
                        Doing::working(tool("web_search", &json!({"command": item["query"]})))
                    }
                    "agent_message" | "reasoning" => Doing::working(None),
                    _ => None,
                }
            }
            (Stream::Codex, "turn.completed") => Doing::idle(None),
            (Stream::Codex, "turn.failed") => Doing::idle(text(&v["error"]["message"])),
            (Stream::Gemini, "init") => Doing::working(None),
            (Stream::Gemini, "message") => Doing::working(None),
            (Stream::Gemini, "tool_use") => {
                Doing::working(tool(v["tool_name"].as_str()?, &v["parameters"]))
            }
            (Stream::Gemini, "result") if v["status"] == "success" => Doing::idle(None),
            (Stream::Gemini, "result") => Doing::idle(
                text(&v["error"]["message"]).or_else(|| Some(format!("status {}", v["status"]))),
            ),
            (Stream::Opencode, "step_start" | "text" | "reasoning") => Doing::working(None),
            (Stream::Opencode, "tool_use") => {
                let part = &v["part"];
                Doing::working(tool(part["tool"].as_str()?, &part["state"]["input"]))
            }
            (Stream::Opencode, "step_finish") if v["part"]["reason"] != "tool-calls" => {
                Doing::idle(None)
            }
            (Stream::Opencode, "error") => {
                let e = &v["error"];
                Doing::idle(text(&e["data"]["message"]).or(text(&e["message"])))
            }
            _ => None,
        }
    }
}

/// Follows a live agent's stream in its log: how far it was read, and what the agent was
/// last seen doing, so that only changes are recorded — never one event per line.
#[derive(Debug)]
pub struct Follow {
    stream: Stream,
    offset: u64,
    last: Option<Doing>,
    /// Started on a log already written, by a daemon that was restarted (the node's
    /// activity is recorded): only where it is now counts, not its history again.
    catch_up: bool,
}

/// The most a first read takes of a long log (its end).
const FIRST_READ_MAX: u64 = 1 << 20;

impl Follow {
    /// Following from the start of the log; `recorded` is the node's activity in the log.
    pub fn new(stream: Stream, recorded: Option<Doing>) -> Follow {
        Follow {
            stream,
            offset: 0,
            catch_up: recorded.is_some(),
            last: recorded,
        }
    }

    /// What the log gained since the last read says: each change of activity, in order.
    /// Only whole lines are read; a line being written is read once it is whole.
    pub fn read(&mut self, log: &Path) -> Vec<Doing> {
        use std::io::{Read, Seek, SeekFrom};
        let Ok(mut f) = std::fs::File::open(log) else {
            return Vec::new();
        };
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        if len < self.offset {
            self.offset = 0; // a new log (a retry's)
        }
        let mut from = self.offset;
        if from == 0 && len > FIRST_READ_MAX {
            from = len - FIRST_READ_MAX;
        }
        let mut bytes = Vec::new();
        if f.seek(SeekFrom::Start(from)).is_err() || f.read_to_end(&mut bytes).is_err() {
            return Vec::new();
        }
        let Some(end) = bytes.iter().rposition(|b| *b == b'\n') else {
            return Vec::new();
        };
        self.offset = from + end as u64 + 1;
        self.feed(&String::from_utf8_lossy(&bytes[..end]))
    }

    /// The changes whole lines `text` make.
    fn feed(&mut self, text: &str) -> Vec<Doing> {
        let recorded = self.last.clone();
        let mut changes = Vec::new();
        for doing in text.lines().filter_map(|l| self.stream.activity(l)) {
            if self.last.as_ref() != Some(&doing) {
                self.last = Some(doing.clone());
                changes.push(doing);
            }
        }
        if std::mem::take(&mut self.catch_up) {
            // Only where it is now, unless the log says so already.
            changes = self
                .last
                .clone()
                .filter(|d| Some(d) != recorded.as_ref())
                .into_iter()
                .collect();
        }
        changes
    }
}

/// How far the stream got: the final result, if it ended with one.
#[derive(Debug, Default)]
struct Fold {
    /// `Some(None)`: a final success; `Some(Some(reason))`: a final failure.
    end: Option<Option<String>>,
    /// The last error seen, kept as the reason when no final result follows.
    last_error: Option<String>,
    text: Option<String>,
    session: Option<String>,
    input: u64,
    output: u64,
    cost: Option<f64>,
    commands: Commands,
}

/// The shell commands an agent's stream says it ran, and those that failed (ran and exited
/// with another status than 0): how many, and what the first one was and said.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Commands {
    pub ran: u32,
    pub failed: u32,
    /// The first failed command, its status and output, on one line, shortened and without
    /// control characters (the agent's output is untrusted: it goes into a reason that
    /// `run show`, the TUI and the notifiers print).
    pub first_failure: Option<String>,
}

/// The most of a failed command's line or output kept in [`Commands::first_failure`].
const FAILURE_PART_MAX: usize = 160;

impl Commands {
    fn ran(&mut self, command: &str, status: Option<i64>, output: &str) {
        self.ran += 1;
        let Some(code) = status.filter(|c| *c != 0) else {
            return;
        };
        self.failed += 1;
        if self.first_failure.is_none() {
            let output = one_line(output, FAILURE_PART_MAX);
            let command = one_line(command, FAILURE_PART_MAX);
            self.first_failure = Some(if output.is_empty() {
                format!("`{command}` exited with status {code}")
            } else {
                format!("`{command}` exited with status {code}: {output}")
            });
        }
    }
}

/// `text` as one line of at most `max` characters (then `…`): terminal escapes removed,
/// every other control character and run of whitespace one space.
pub fn one_line(text: &str, max: usize) -> String {
    let mut out = String::new();
    for line in text.lines() {
        for c in strip_escapes(line).chars() {
            let c = if c.is_control() || c.is_whitespace() {
                ' '
            } else {
                c
            };
            if c != ' ' || !(out.is_empty() || out.ends_with(' ')) {
                out.push(c);
            }
        }
        if !out.is_empty() && !out.ends_with(' ') {
            out.push(' ');
        }
    }
    let out = out.trim_end();
    if out.chars().count() > max {
        let cut: String = out.chars().take(max).collect();
        format!("{}…", cut.trim_end())
    } else {
        out.to_string()
    }
}

fn text(v: &Value) -> Option<String> {
    v.as_str().map(str::to_string)
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

impl Fold {
    fn line(&mut self, stream: Stream, v: &Value) {
        let kind = v.get("type").and_then(Value::as_str).unwrap_or("");
        match (stream, kind) {
            (Stream::Codex, "thread.started") => self.session = text(&v["thread_id"]),
            (Stream::Codex, "item.completed") if v["item"]["type"] == "agent_message" => {
                self.text = text(&v["item"]["text"]);
            }
            // `exit_code` null: it did not run (declined by a person, or cut short).
            (Stream::Codex, "item.completed") if v["item"]["type"] == "command_execution" => {
                let item = &v["item"];
                if let Some(code) = item["exit_code"].as_i64() {
                    self.commands.ran(
                        item["command"].as_str().unwrap_or(""),
                        Some(code),
                        item["aggregated_output"].as_str().unwrap_or(""),
                    );
                }
            }
            (Stream::Codex, "turn.completed") => {
                self.input += u(&v["usage"]["input_tokens"]);
                self.output += u(&v["usage"]["output_tokens"]);
                self.end = Some(None);
            }
            (Stream::Codex, "turn.failed") => {
                let reason = text(&v["error"]["message"]).or(self.last_error.take());
                self.end = Some(Some(reason.unwrap_or_else(|| "the turn failed".into())));
            }
            (Stream::Codex, "error") => self.last_error = text(&v["message"]),
            (Stream::Gemini, "init") => self.session = text(&v["session_id"]),
            (Stream::Gemini, "message") if v["role"] == "assistant" => {
                // Deltas are parts of one message; a non-delta message replaces it.
                let part = v["content"].as_str().unwrap_or("");
                match (&mut self.text, v["delta"].as_bool().unwrap_or(false)) {
                    (Some(t), true) => t.push_str(part),
                    (t, _) => *t = Some(part.to_string()),
                }
            }
            (Stream::Gemini, "error") => self.last_error = text(&v["message"]),
            (Stream::Gemini, "result") => {
                self.input = u(&v["stats"]["input_tokens"]);
                self.output = u(&v["stats"]["output_tokens"]);
                self.end = Some(if v["status"] == "success" {
                    None
                } else {
                    Some(
                        text(&v["error"]["message"])
                            .or(self.last_error.clone())
                            .unwrap_or_else(|| format!("the result's status is {}", v["status"])),
                    )
                });
            }
            (Stream::Opencode, _) if self.session.is_none() && v["sessionID"].is_string() => {
                self.session = text(&v["sessionID"]);
                self.line(stream, v);
            }
            (Stream::Opencode, "text") => self.text = text(&v["part"]["text"]),
            (Stream::Opencode, "step_finish") => {
                let part = &v["part"];
                self.input += u(&part["tokens"]["input"]);
                self.output += u(&part["tokens"]["output"]);
                if let Some(c) = part["cost"].as_f64() {
                    *self.cost.get_or_insert(0.0) += c;
                }
                // A step that ends in tool calls is followed by another step.
                if part["reason"] != "tool-calls" {
                    self.end = Some(None);
                }
            }
            (Stream::Opencode, "error") => {
                let e = &v["error"];
                let reason = text(&e["data"]["message"])
                    .or(text(&e["message"]))
                    .or(text(&e["name"]))
                    .unwrap_or_else(|| e.to_string());
                // opencode exits 0 after an error: the error is the end.
                self.end = Some(Some(reason));
            }
            _ => {}
        }
    }
}

impl Fold {
    fn aider_line(&mut self, line: &str) {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("Tokens: ") {
            // "Tokens: 2.3k sent, 45 received. Cost: $0.01 message, $0.02 session."
            let count = |s: &str| {
                let s = s.trim();
                let (n, k) = s.strip_suffix('k').map_or((s, 1.0), |n| (n, 1000.0));
                n.replace(',', "")
                    .parse::<f64>()
                    .map(|v| (v * k) as u64)
                    .unwrap_or(0)
            };
            let mut parts = rest.split(", ");
            if let (Some(sent), Some(received)) = (parts.next(), parts.next()) {
                self.input += count(sent.trim_end_matches(" sent"));
                self.output += count(received.split(" received").next().unwrap_or(""));
            }
            if let Some(cost) = rest.split("$").nth(2) {
                // The session's total is the second amount.
                let session = cost.split_whitespace().next().unwrap_or("");
                self.cost = session.parse().ok();
            }
            self.end = Some(None);
        } else if line.starts_with("litellm.") && line.contains("Error") {
            self.end = Some(Some(line.to_string()));
        } else if line.starts_with("Applied edit to ") {
            self.text = Some(line.to_string());
        }
    }
}

/// A line of pane output without terminal escape sequences and carriage-return redraws.
fn strip_escapes(line: &str) -> String {
    let line = line.rsplit('\r').find(|s| !s.is_empty()).unwrap_or("");
    let mut out = String::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ … final byte in @–~.
            if chars.next() == Some('[') {
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The outcome of the stream in `log` (an unreadable log: no final result).
pub fn read(log: &Path, stream: Stream) -> Outcome {
    use std::io::{Read, Seek, SeekFrom};
    let mut bytes = Vec::new();
    // The end is what matters; a long session's log need not be read whole.
    if let Ok(mut f) = std::fs::File::open(log) {
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        let _ = f.seek(SeekFrom::Start(len.saturating_sub(1 << 20)));
        let _ = f.read_to_end(&mut bytes);
    }
    parse(&String::from_utf8_lossy(&bytes), stream)
}

/// What a stream said: the node's `outcome`, and whether it ended in success.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub fields: octl_proto::state::Outcome,
    /// `Some(Ok)`: a final success; `Some(Err(reason))`: a final failure; `None`: no final
    /// result.
    pub end: Option<Result<(), String>>,
    /// The shell commands it ran (Codex's `command_execution` items; the other streams' are
    /// not read for them).
    pub commands: Commands,
}

pub fn parse(text: &str, stream: Stream) -> Outcome {
    let mut fold = Fold::default();
    if stream == Stream::Aider {
        for line in text.lines() {
            fold.aider_line(&strip_escapes(line));
        }
    }
    for v in text
        .lines()
        .filter(|_| stream != Stream::Aider)
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
    {
        fold.line(stream, &v);
    }
    let end = fold.end.clone().map(|e| e.map_or(Ok(()), Err));
    let error = match &end {
        Some(Err(reason)) => Some(reason.clone()),
        None => fold.last_error.clone(),
        Some(Ok(())) => None,
    };
    let tokens = fold.input + fold.output > 0;
    let fields = octl_proto::state::Outcome {
        agent: Some(stream.agent().to_string()),
        is_error: Some(!matches!(end, Some(Ok(())))),
        result: fold.text.as_ref().map(|t| t.chars().take(2000).collect()),
        error: error.map(|e| e.chars().take(2000).collect()),
        input_tokens: tokens.then_some(fold.input),
        output_tokens: tokens.then_some(fold.output),
        total_cost_usd: fold.cost,
        session_id: fold.session,
        ..Default::default()
    };
    Outcome {
        fields,
        end,
        commands: fold.commands,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An outcome's fields as the event writes them.
    fn fields(o: &Outcome) -> Value {
        serde_json::to_value(&o.fields).unwrap()
    }

    #[test]
    fn codex_success_failure_and_no_result() {
        let ok = parse(
            r#"{"type":"thread.started","thread_id":"t1"}
{"type":"turn.started"}
{"type":"item.completed","item":{"id":"i0","type":"agent_message","text":"All done."}}
{"type":"turn.completed","usage":{"input_tokens":12,"cached_input_tokens":0,"output_tokens":7}}"#,
            Stream::Codex,
        );
        assert_eq!(ok.end, Some(Ok(())));
        assert_eq!(fields(&ok)["result"], "All done.");
        assert_eq!(fields(&ok)["input_tokens"], 12);
        assert_eq!(fields(&ok)["session_id"], "t1");
        let failed = parse(
            r#"{"type":"error","message":"Reconnecting... 1/5"}
{"type":"turn.failed","error":{"message":"stream disconnected: 500"}}"#,
            Stream::Codex,
        );
        assert_eq!(failed.end, Some(Err("stream disconnected: 500".into())));
        let cut = parse(r#"{"type":"turn.started"}"#, Stream::Codex);
        assert_eq!(cut.end, None);
        assert_eq!(fields(&cut)["is_error"], true);
    }

    #[test]
    fn aider_text() {
        let ok = parse(
            "Aider v0.86.2\r\n\u{1b}[32mApplied edit to a.txt\u{1b}[0m\nTokens: 2.3k sent, 45 received. Cost: $0.01 message, $0.02 session.\n",
            Stream::Aider,
        );
        assert_eq!(ok.end, Some(Ok(())));
        assert_eq!(fields(&ok)["input_tokens"], 2300);
        assert_eq!(fields(&ok)["output_tokens"], 45);
        assert_eq!(fields(&ok)["total_cost_usd"], 0.02);
        assert_eq!(fields(&ok)["result"], "Applied edit to a.txt");
        let failed = parse(
            "Aider v0.86.2\nlitellm.BadRequestError: OpenAIException - quota\n",
            Stream::Aider,
        );
        assert_eq!(
            failed.end,
            Some(Err(
                "litellm.BadRequestError: OpenAIException - quota".into()
            ))
        );
        assert_eq!(parse("Aider v0.86.2\n", Stream::Aider).end, None);
    }

    #[test]
    fn gemini_and_opencode() {
        let g = parse(
            r#"{"type":"init","session_id":"s","model":"m"}
{"type":"message","role":"assistant","content":"Do","delta":true}
{"type":"message","role":"assistant","content":"ne","delta":true}
{"type":"result","status":"success","stats":{"input_tokens":3,"output_tokens":4}}"#,
            Stream::Gemini,
        );
        assert_eq!(g.end, Some(Ok(())));
        assert_eq!(fields(&g)["result"], "Done");
        let g = parse(
            r#"{"type":"result","status":"error","error":{"type":"x","message":"quota"}}"#,
            Stream::Gemini,
        );
        assert_eq!(g.end, Some(Err("quota".into())));
        let o = parse(
            r#"{"type":"step_start","sessionID":"ses_1","part":{}}
{"type":"step_finish","sessionID":"ses_1","part":{"reason":"tool-calls","cost":0.5,"tokens":{"input":1,"output":2}}}
{"type":"text","sessionID":"ses_1","part":{"text":"ok"}}
{"type":"step_finish","sessionID":"ses_1","part":{"reason":"stop","cost":0.25,"tokens":{"input":1,"output":2}}}"#,
            Stream::Opencode,
        );
        assert_eq!(o.end, Some(Ok(())));
        assert_eq!(fields(&o)["total_cost_usd"], 0.75);
        assert_eq!(fields(&o)["session_id"], "ses_1");
        let o = parse(
            r#"{"type":"error","sessionID":"s","error":{"name":"APIError","data":{"message":"bad key"}}}"#,
            Stream::Opencode,
        );
        assert_eq!(o.end, Some(Err("bad key".into())));
    }

    fn said(changes: &[Doing]) -> Vec<(String, Option<String>)> {
        changes
            .iter()
            .map(|d| (d.state.as_str().to_string(), d.detail.clone()))
            .collect()
    }

    fn w(detail: Option<&str>) -> (String, Option<String>) {
        ("working".into(), detail.map(str::to_string))
    }

    fn idle() -> (String, Option<String>) {
        ("idle".into(), None)
    }

    #[test]
    fn activity_from_the_streams_changes_only() {
        let mut codex = Follow::new(Stream::Codex, None);
        let changes = codex.feed(
            r#"{"type":"thread.started","thread_id":"t1"}
{"type":"turn.started"}
{"type":"item.started","item":{"id":"i1","type":"command_execution","command":"bash -lc 'printf x > a'","status":"in_progress"}}
{"type":"item.completed","item":{"id":"i1","type":"command_execution","command":"bash -lc 'printf x > a'","exit_code":0}}
{"type":"item.completed","item":{"id":"i2","type":"agent_message","text":"Done."}}
{"type":"turn.completed","usage":{"input_tokens":1,"output_tokens":1}}"#,
        );
        assert_eq!(
            said(&changes),
            [
                w(None),
                w(Some("shell: bash -lc 'printf x > a'")),
                w(None),
                idle()
            ]
        );
        // Gemini's deltas of one message are one change.
        let mut gemini = Follow::new(Stream::Gemini, None);
        let changes = gemini.feed(
            r#"{"type":"init","session_id":"s"}
{"type":"message","role":"user","content":"task"}
{"type":"tool_use","tool_name":"run_shell_command","tool_id":"x","parameters":{"command":"ls"}}
{"type":"tool_result","tool_id":"x","status":"success"}
{"type":"message","role":"assistant","content":"Do","delta":true}
{"type":"message","role":"assistant","content":"ne","delta":true}
{"type":"result","status":"success","stats":{}}"#,
        );
        assert_eq!(
            said(&changes),
            [w(None), w(Some("run_shell_command: ls")), w(None), idle()]
        );
        let mut opencode = Follow::new(Stream::Opencode, None);
        let changes = opencode.feed(
            r#"{"type":"step_start","sessionID":"s","part":{}}
{"type":"tool_use","sessionID":"s","part":{"tool":"bash","state":{"status":"completed","input":{"command":"git status"}}}}
{"type":"step_finish","sessionID":"s","part":{"reason":"tool-calls"}}
{"type":"step_start","sessionID":"s","part":{}}
{"type":"text","sessionID":"s","part":{"text":"ok"}}
{"type":"step_finish","sessionID":"s","part":{"reason":"stop"}}"#,
        );
        assert_eq!(
            said(&changes),
            [w(None), w(Some("bash: git status")), w(None), idle()]
        );
        let mut aider = Follow::new(Stream::Aider, None);
        // With --message it replies once, applies the edits and exits: its end is its exit.
        let changes = aider.feed(
            "\u{1b}[?12l\u{1b}[?25h\r\nAider v0.86.2\r\nModel: openai/m1\r\nTokens: 1 sent, 2 received.\r\n\u{1b}[32mApplied edit to a.txt\u{1b}[0m\n",
        );
        assert_eq!(said(&changes), [w(None), w(Some("edit: a.txt"))]);
        let failed = aider.feed("litellm.BadRequestError: quota\n");
        assert_eq!(said(&failed)[0].0, "idle");
        assert!(aider.feed("more text\n").is_empty(), "nothing new said");
    }

    #[test]
    fn a_restarted_daemon_records_only_where_the_agent_is_now() {
        let history = r#"{"type":"turn.started"}
{"type":"item.started","item":{"type":"command_execution","command":"ls"}}
{"type":"turn.completed","usage":{}}"#;
        let recorded = Doing::idle(None);
        let mut f = Follow::new(Stream::Codex, recorded.clone());
        assert!(f.feed(history).is_empty(), "the log says so already");
        let mut f = Follow::new(Stream::Codex, Doing::working(None));
        assert_eq!(said(&f.feed(history)), [idle()]);
        // Then every change again.
        assert_eq!(said(&f.feed(r#"{"type":"turn.started"}"#)), [w(None)]);
    }

    #[test]
    fn follow_reads_whole_lines_only() {
        let dir = std::env::temp_dir().join(format!("octl-follow-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("n.log");
        std::fs::write(&log, "{\"type\":\"turn.started\"}\n{\"type\":\"turn.comp").unwrap();
        let mut f = Follow::new(Stream::Codex, None);
        assert_eq!(said(&f.read(&log)), [w(None)]);
        assert!(f.read(&log).is_empty());
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
        writeln!(file, "leted\",\"usage\":{{}}}}").unwrap();
        assert_eq!(said(&f.read(&log)), [idle()]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
