//! `octld agent-wrap --raw-log FILE -- PROGRAM ARGS…`: runs an agent whose output is a stream
//! of JSON lines (Claude Code's `--output-format stream-json`, Codex's, Gemini CLI's and
//! opencode's JSON output), keeps every raw line in the node's log, and shows a person a
//! readable line per step in the pane. Its stdin is closed (Codex waits for more input on an
//! open one). Exits with the agent's status, which the supervisor reads from the pane.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

pub fn run(raw_log: &Path, argv: &[String]) -> i32 {
    let Some((program, args)) = argv.split_first() else {
        eprintln!("octld agent-wrap: give the program to run after --");
        return 2;
    };
    let mut log = match std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(raw_log)
    {
        Ok(f) => f,
        Err(e) => {
            eprintln!("octld agent-wrap: cannot open {}: {e}", raw_log.display());
            return 1;
        }
    };
    let mut child = match Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("octld agent-wrap: cannot start {program}: {e}");
            return 127;
        }
    };
    let stdout = child.stdout.take().expect("piped stdout");
    let mut pane = std::io::stdout();
    for line in BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        let _ = writeln!(log, "{line}");
        if let Some(text) = render(&line) {
            let _ = writeln!(pane, "{text}");
        }
    }
    let _ = log.sync_data();
    crate::ended::shell_status(child.wait())
}

pub(crate) fn short(s: &str, max: usize) -> String {
    let one_line = s.replace('\n', " ⏎ ");
    if one_line.chars().count() > max {
        format!("{}…", one_line.chars().take(max).collect::<String>())
    } else {
        one_line
    }
}

/// One readable line for a stream-json line (`None` for lines a person need not see).
pub fn render(line: &str) -> Option<String> {
    let Ok(v) = serde_json::from_str::<Value>(line) else {
        return Some(line.to_string());
    };
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    match v.get("type").and_then(Value::as_str)? {
        "system" if v.get("subtype").and_then(Value::as_str) == Some("init") => Some(format!(
            "· session started (model {}, cwd {})",
            s(&v["model"]),
            s(&v["cwd"])
        )),
        "assistant" => {
            let parts: Vec<String> = v["message"]["content"]
                .as_array()?
                .iter()
                .filter_map(|block| match block.get("type").and_then(Value::as_str)? {
                    "text" => Some(format!("◆ {}", short(&s(&block["text"]), 300))),
                    "tool_use" => {
                        let input = &block["input"];
                        let what = input
                            .get("command")
                            .or_else(|| input.get("file_path"))
                            .or_else(|| input.get("pattern"))
                            .map(s)
                            .unwrap_or_else(|| input.to_string());
                        Some(format!("→ {}: {}", s(&block["name"]), short(&what, 200)))
                    }
                    _ => None,
                })
                .collect();
            (!parts.is_empty()).then(|| parts.join("\n"))
        }
        "user" => {
            let results = v["message"]["content"].as_array()?;
            let n = results
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
                .count();
            (n > 0).then(|| {
                let err = results
                    .iter()
                    .any(|b| b.get("is_error").and_then(Value::as_bool) == Some(true));
                format!("  ← {}", if err { "tool error" } else { "tool result" })
            })
        }
        // Gemini CLI's result has a status, Claude Code's a subtype.
        "result" if v["status"].is_string() => Some(format!("■ {}", s(&v["status"]))),
        "result" => Some(format!(
            "■ {} after {} turns, ${:.4}",
            s(&v["subtype"]),
            v["num_turns"].as_u64().unwrap_or(0),
            v["total_cost_usd"].as_f64().unwrap_or(0.0)
        )),
        // Codex (`exec --json`).
        "item.completed" => {
            let item = &v["item"];
            match item["type"].as_str()? {
                "agent_message" => Some(format!("◆ {}", short(&s(&item["text"]), 300))),
                "command_execution" => Some(format!("→ {}", short(&s(&item["command"]), 200))),
                "file_change" => Some("→ file change".to_string()),
                _ => None,
            }
        }
        "turn.completed" => Some("■ turn completed".to_string()),
        "turn.failed" => Some(format!(
            "■ failed: {}",
            short(&s(&v["error"]["message"]), 300)
        )),
        // Gemini CLI (`stream-json`) and opencode (`--format json`).
        "message" if v["role"] == "assistant" && v["delta"] != true => {
            Some(format!("◆ {}", short(&s(&v["content"]), 300)))
        }
        "tool_use" if v["part"].is_object() => Some(format!(
            "→ {}: {}",
            s(&v["part"]["tool"]),
            short(&v["part"]["state"]["input"].to_string(), 200)
        )),
        "tool_use" => Some(format!(
            "→ {}: {}",
            s(&v["tool_name"]),
            short(&v["parameters"].to_string(), 200)
        )),
        "text" => Some(format!("◆ {}", short(&s(&v["part"]["text"]), 300))),
        "error" => Some(format!(
            "■ error: {}",
            short(
                &v["message"]
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| v["error"].to_string()),
                300
            )
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::render;

    #[test]
    fn renders_the_steps_people_care_about() {
        let tool = r#"{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Bash","input":{"command":"git commit -m x"}}]}}"#;
        assert_eq!(render(tool).unwrap(), "→ Bash: git commit -m x");
        let result = r#"{"type":"result","subtype":"success","num_turns":3,"total_cost_usd":0.5}"#;
        assert_eq!(render(result).unwrap(), "■ success after 3 turns, $0.5000");
        assert_eq!(render(r#"{"type":"stream_event"}"#), None);
        assert_eq!(render("not json").unwrap(), "not json");
        let codex = r#"{"type":"item.completed","item":{"type":"command_execution","command":"bash -lc ls"}}"#;
        assert_eq!(render(codex).unwrap(), "→ bash -lc ls");
        let opencode =
            r#"{"type":"tool_use","part":{"tool":"bash","state":{"input":{"command":"ls"}}}}"#;
        assert_eq!(render(opencode).unwrap(), r#"→ bash: {"command":"ls"}"#);
        let gemini = r#"{"type":"result","status":"success","stats":{}}"#;
        assert_eq!(render(gemini).unwrap(), "■ success");
    }
}
