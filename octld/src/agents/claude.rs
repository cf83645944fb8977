//! Claude Code's side of a launch: the conversation it runs in, the hooks that report its
//! activity, and how an autonomous one is told to report.

use octl_proto::rules::PermissionRules;

use super::Mode;

/// A Claude Code conversation for one attempt of a node: chosen by the daemon (`--session-id`)
/// and recorded in its `node.starting`, or an earlier one continued (`--resume`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub id: String,
    pub resume: bool,
}

impl Session {
    /// A new conversation.
    pub fn new() -> Session {
        Session {
            id: octl_proto::ids::new_session_id(),
            resume: false,
        }
    }

    /// The conversation the log records for `node`'s current attempt (its `node.starting`, or
    /// the `node.retried` that resumes it).
    pub fn recorded(node: &octl_proto::state::Node) -> Option<Session> {
        node.session_id.as_ref().map(|id| Session {
            id: id.clone(),
            resume: node.resume,
        })
    }
}

impl Default for Session {
    fn default() -> Session {
        Session::new()
    }
}

/// The prompt a resumed conversation goes on with (its task is in the conversation already).
pub const RESUME_PROMPT: &str = "Your session was interrupted: your process ended before you finished (the window was closed or the machine stopped). Continue the task where you left off, in the same worktree; check `git status` and `git log` for what is already done.";

/// The Claude Code hooks that report a node's activity (`orchestratectl hook EVENT`), and
/// whether each is per tool (a matcher). Passed as `--settings` JSON on the command line: it
/// adds to the user's and the repository's settings, whose files are never touched.
pub const HOOKS: &[(&str, bool)] = &[
    ("SessionStart", false),
    ("UserPromptSubmit", false),
    ("PreToolUse", true),
    ("PostToolUse", true),
    ("PostToolUseFailure", true),
    ("PermissionRequest", true),
    ("PermissionDenied", true),
    ("Notification", false),
    ("Stop", false),
    ("StopFailure", false),
    ("SessionEnd", false),
];

/// How long Claude Code lets one hook run (seconds); the hook itself gives up far sooner.
const HOOK_TIMEOUT_S: u64 = 5;
/// How long Claude Code lets the permission hook run: a day (the longest `[permissions]
/// wait`, and an interactive agent's) and a minute. The hook itself gives up 30 s after the
/// wait.
const ASK_TIMEOUT_S: u64 = 86_400 + 60;

/// The `--settings` JSON with [`HOOKS`]: `{"hooks": {"Stop": [{"hooks": [{"type": "command",
/// "command": "orchestratectl hook Stop", "timeout": 5}]}], …}}`. `orchestratectl` is found
/// on the window's PATH, which starts with octld's own directory.
///
/// Claude Code 2.1.328 runs the `PermissionRequest` hook for a tool its rules do not allow
/// and takes the hook's decision. With `-p` (`mode` autonomous) no one can answer a prompt in
/// the window: there it is `orchestratectl hook PermissionAsk`, which records the request and
/// waits for a person's `node allow|deny` (docs/AGENTS.md, "Permission requests"), under a
/// timeout longer than any `[permissions] wait`. Interactive, Claude Code shows its dialog
/// while the hook runs, so the request is answerable both there and from outside: it is
/// `orchestratectl hook PermissionAsk window`, whose decision closes the dialog, and which
/// says so when the dialog was answered No first (Claude Code ends it with SIGTERM).
pub fn hook_settings(mode: Mode, rules: &PermissionRules) -> String {
    let hooks: serde_json::Map<String, serde_json::Value> = HOOKS
        .iter()
        .map(|(event, per_tool)| {
            let (said, timeout) = match (*event, mode) {
                ("PermissionRequest", Mode::Autonomous) => ("PermissionAsk", ASK_TIMEOUT_S),
                ("PermissionRequest", Mode::Interactive) => ("PermissionAsk window", ASK_TIMEOUT_S),
                _ => (*event, HOOK_TIMEOUT_S),
            };
            let mut group = serde_json::json!({"hooks": [{
                "type": "command",
                "command": format!("orchestratectl hook {said}"),
                "timeout": timeout,
            }]});
            if *per_tool {
                group["matcher"] = "*".into();
            }
            (event.to_string(), serde_json::Value::Array(vec![group]))
        })
        .collect();
    let mut settings = serde_json::json!({ "hooks": hooks });
    if !rules.is_empty() {
        settings["permissions"] = serde_json::to_value(rules).expect("plain lists");
    }
    settings.to_string()
}

/// `settings` (what [`hook_settings`] made) with `more` rules after its own.
pub fn with_rules(settings: &str, more: &PermissionRules) -> String {
    let mut v: serde_json::Value = serde_json::from_str(settings).expect("made by hook_settings");
    let own: PermissionRules = v
        .get("permissions")
        .cloned()
        .and_then(|p| serde_json::from_value(p).ok())
        .unwrap_or_default();
    v["permissions"] = serde_json::to_value(own.and(more)).expect("plain lists");
    v.to_string()
}

/// Appended to Claude's system prompt in autonomous runs: how to report.
pub const CLAUDE_REPORTING: &str = "You are an autonomous agent started by orchestratectl in your own git worktree (the current directory) on your own branch. Work only inside this worktree. When the task is finished: commit all your changes with git (git add -A && git commit -m \"<summary>\"), then run `orchestratectl node done --message \"<one-line summary>\"` as your last action. If you cannot finish, run `orchestratectl node fail --reason \"<why>\"`. To ask a human a question, run `orchestratectl discussion ask --title \"<question>\" --wait`. If you notice separate work outside your task, propose it with `orchestratectl spinoff propose --task \"<task>\"` instead of doing it. Report progress on long tasks with `orchestratectl node progress --message \"<what>\"`.";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::resolve;
    use crate::config::Config;

    #[test]
    fn claude_codes_settings_carry_config_profile_and_node_rules_in_that_order() {
        let config = Config::parse(
            "[permissions]\ndeny = [\"Read(./.env)\"]\n[agents.claude.permissions]\nask = [\"Bash(git push:*)\"]\n",
        )
        .unwrap();
        let node = PermissionRules {
            allow: vec!["Bash(cargo test:*)".into()],
            deny: vec!["Read(./.env)".into(), "WebFetch".into()],
            ..PermissionRules::default()
        };
        let claude = resolve(&config, None).unwrap();
        for mode in [Mode::Interactive, Mode::Autonomous] {
            let argv = claude
                .launch(mode, "t", None)
                .unwrap()
                .with(&crate::agents::Extra {
                    permissions: Some(&node),
                    ..Default::default()
                })
                .argv;
            let at = argv.iter().position(|a| a == "--settings").unwrap();
            let settings: serde_json::Value = serde_json::from_str(&argv[at + 1]).unwrap();
            assert_eq!(
                settings["permissions"],
                serde_json::json!({
                    "allow": ["Bash(cargo test:*)"],
                    "ask": ["Bash(git push:*)"],
                    "deny": ["Read(./.env)", "WebFetch"],
                }),
                "{mode:?}"
            );
            let asks = &settings["hooks"]["PermissionRequest"][0]["hooks"][0];
            let command = match mode {
                Mode::Autonomous => "orchestratectl hook PermissionAsk",
                Mode::Interactive => "orchestratectl hook PermissionAsk window",
            };
            assert_eq!(asks["command"], serde_json::json!(command), "{mode:?}");
            assert_eq!(
                asks["timeout"],
                serde_json::json!(ASK_TIMEOUT_S),
                "{mode:?}"
            );
            assert_eq!(
                settings["hooks"]["Stop"][0]["hooks"][0]["timeout"],
                serde_json::json!(HOOK_TIMEOUT_S)
            );
        }
        // No rules anywhere: the settings say nothing of permissions.
        let plain = resolve(&Config::default(), None).unwrap();
        let argv = plain.launch(Mode::Autonomous, "t", None).unwrap().argv;
        let at = argv.iter().position(|a| a == "--settings").unwrap();
        assert!(!argv[at + 1].contains("permissions"));
    }

    #[test]
    fn claude_runs_in_the_conversation_the_daemon_chose_or_resumes_it() {
        let claude = resolve(&Config::default(), None).unwrap();
        let new = Session::new();
        for mode in [Mode::Interactive, Mode::Autonomous] {
            let argv = claude.launch(mode, "the task", Some(&new)).unwrap().argv;
            let at = argv.iter().position(|a| a == "--session-id").unwrap();
            assert_eq!(argv[at + 1], new.id);
            assert_eq!(argv.last().unwrap(), "the task");
            let resumed = Session {
                id: new.id.clone(),
                resume: true,
            };
            let argv = claude
                .launch(mode, "the task", Some(&resumed))
                .unwrap()
                .argv;
            let at = argv.iter().position(|a| a == "--resume").unwrap();
            assert_eq!(argv[at + 1], new.id);
            assert!(!argv.contains(&"--session-id".to_string()));
            assert_eq!(argv.last().unwrap(), "the task");
        }
        let shell = resolve(&Config::default(), Some("shell")).unwrap();
        let node: octl_proto::state::Node = serde_json::from_value(serde_json::json!({
            "id": "a", "state": "exited", "branch": null, "worktree": null, "agent": null,
            "deps": [], "created_at": "t", "updated_at": "t", "session_id": "s", "resume": true
        }))
        .unwrap();
        assert_eq!(
            shell.session_for(&node),
            None,
            "only Claude Code has conversations"
        );
        assert_eq!(
            claude.session_for(&node),
            Some(Session {
                id: "s".into(),
                resume: true
            })
        );
    }
}
