//! What the JSON-lines streams of Codex (`codex exec --json`), Gemini CLI (`--output-format
//! stream-json`) and opencode (`run --format json`), and aider's plain output, say about how
//! the agent ended: success or failure with the reason, the final text, tokens and cost where
//! given. Read from the node's
//! raw log once the agent's process has ended; the result is the node's `outcome`.
//!
//! Every outcome has `agent`, `is_error` and, when the stream said, `result` (the agent's
//! last text), `error`, `input_tokens`, `output_tokens`, `total_cost_usd`, `session_id`.

use std::path::Path;

use serde_json::{json, Map, Value};

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
    pub fields: Map<String, Value>,
    /// `Some(Ok)`: a final success; `Some(Err(reason))`: a final failure; `None`: no final
    /// result.
    pub end: Option<Result<(), String>>,
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
    let mut fields = Map::new();
    fields.insert("agent".into(), json!(stream.agent()));
    let end = fold.end.clone().map(|e| e.map_or(Ok(()), Err));
    fields.insert("is_error".into(), json!(!matches!(end, Some(Ok(())))));
    if let Some(t) = &fold.text {
        fields.insert(
            "result".into(),
            json!(t.chars().take(2000).collect::<String>()),
        );
    }
    let error = match &end {
        Some(Err(reason)) => Some(reason.clone()),
        None => fold.last_error.clone(),
        Some(Ok(())) => None,
    };
    if let Some(e) = error {
        fields.insert(
            "error".into(),
            json!(e.chars().take(2000).collect::<String>()),
        );
    }
    if fold.input + fold.output > 0 {
        fields.insert("input_tokens".into(), json!(fold.input));
        fields.insert("output_tokens".into(), json!(fold.output));
    }
    if let Some(c) = fold.cost {
        fields.insert("total_cost_usd".into(), json!(c));
    }
    if let Some(s) = fold.session {
        fields.insert("session_id".into(), json!(s));
    }
    Outcome { fields, end }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(ok.fields["result"], "All done.");
        assert_eq!(ok.fields["input_tokens"], 12);
        assert_eq!(ok.fields["session_id"], "t1");
        let failed = parse(
            r#"{"type":"error","message":"Reconnecting... 1/5"}
{"type":"turn.failed","error":{"message":"stream disconnected: 500"}}"#,
            Stream::Codex,
        );
        assert_eq!(failed.end, Some(Err("stream disconnected: 500".into())));
        let cut = parse(r#"{"type":"turn.started"}"#, Stream::Codex);
        assert_eq!(cut.end, None);
        assert_eq!(cut.fields["is_error"], true);
    }

    #[test]
    fn aider_text() {
        let ok = parse(
            "Aider v0.86.2\r\n\u{1b}[32mApplied edit to a.txt\u{1b}[0m\nTokens: 2.3k sent, 45 received. Cost: $0.01 message, $0.02 session.\n",
            Stream::Aider,
        );
        assert_eq!(ok.end, Some(Ok(())));
        assert_eq!(ok.fields["input_tokens"], 2300);
        assert_eq!(ok.fields["output_tokens"], 45);
        assert_eq!(ok.fields["total_cost_usd"], 0.02);
        assert_eq!(ok.fields["result"], "Applied edit to a.txt");
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
        assert_eq!(g.fields["result"], "Done");
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
        assert_eq!(o.fields["total_cost_usd"], 0.75);
        assert_eq!(o.fields["session_id"], "ses_1");
        let o = parse(
            r#"{"type":"error","sessionID":"s","error":{"name":"APIError","data":{"message":"bad key"}}}"#,
            Stream::Opencode,
        );
        assert_eq!(o.end, Some(Err("bad key".into())));
    }
}
