//! The built-in profiles of the agent CLIs other than Claude Code: their headless argv and the
//! reporting text appended to their prompt.

use crate::streams::Stream;

/// The agent CLIs with a built-in autonomous profile besides Claude Code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Builtin {
    Codex,
    Gemini,
    Opencode,
    Aider,
}

/// How long a built-in agent may go without output before it is failed as stuck.
pub const DEFAULT_SILENCE_LIMIT_SECS: u64 = 900;

impl Builtin {
    pub const ALL: [Builtin; 4] = [
        Builtin::Codex,
        Builtin::Gemini,
        Builtin::Opencode,
        Builtin::Aider,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Builtin::Codex => "codex",
            Builtin::Gemini => "gemini",
            Builtin::Opencode => "opencode",
            Builtin::Aider => "aider",
        }
    }

    pub fn parse(name: &str) -> Option<Builtin> {
        Builtin::ALL.into_iter().find(|b| b.name() == name)
    }

    /// The output it reports in.
    pub fn stream(self) -> Stream {
        match self {
            Builtin::Codex => Stream::Codex,
            Builtin::Gemini => Stream::Gemini,
            Builtin::Opencode => Stream::Opencode,
            Builtin::Aider => Stream::Aider,
        }
    }

    /// The headless argv for `prompt`, `args` before it.
    pub(super) fn argv(self, program: &str, args: &[String], prompt: &str) -> Vec<String> {
        let mut argv = vec![program.to_string()];
        let fixed: &[&str] = match self {
            // stdin is closed by `octld agent-wrap` (codex waits for more input on an open
            // one). The workspace-write sandbox keeps the git directory read-only — a linked
            // worktree's is in the main repository — so the daemon commits after a success.
            Builtin::Codex => &[
                "exec",
                "--json",
                "--sandbox",
                "workspace-write",
                "--skip-git-repo-check",
                "--color",
                "never",
            ],
            // yolo: its tools run without asking; the worktree is new, so trusted explicitly.
            Builtin::Gemini => &[
                "--output-format",
                "stream-json",
                "--approval-mode",
                "yolo",
                "--skip-trust",
            ],
            // --auto: permissions not explicitly denied are granted (nobody is there to ask).
            Builtin::Opencode => &["run", "--format", "json", "--auto"],
            // No commits of its own (the daemon commits after exit 0), no files of its own in
            // the worktree (histories, repo-map cache, .gitignore edits), no questions.
            Builtin::Aider => &[
                "--yes-always",
                "--no-auto-commits",
                "--no-dirty-commits",
                "--no-gitignore",
                "--no-check-update",
                "--no-show-model-warnings",
                "--no-analytics",
                "--no-pretty",
                "--no-stream",
                "--map-tokens",
                "0",
                "--input-history-file",
                "/dev/null",
                "--chat-history-file",
                "/dev/null",
            ],
        };
        argv.extend(fixed.iter().map(|a| a.to_string()));
        if self == Builtin::Codex {
            argv.extend(codex_ask_flags());
        }
        argv.extend(args.iter().cloned());
        match self {
            Builtin::Gemini => argv.extend(["-p".into(), prompt.to_string()]),
            Builtin::Aider => argv.extend(["--message".into(), prompt.to_string()]),
            // `--` keeps a prompt that starts with '-' a prompt.
            Builtin::Codex | Builtin::Opencode => argv.extend(["--".into(), prompt.to_string()]),
        }
        argv
    }

    /// The interactive argv — the CLI's own terminal interface, in the node's window for a
    /// person to watch and type into — for `prompt`, `args` before it; `None` for aider,
    /// whose chat cannot be given a first message (`--message` and `--message-file` send
    /// it and exit; `--load`'s `/code` is skipped at launch, "only supported in interactive
    /// mode").
    pub(super) fn interactive_argv(
        self,
        program: &str,
        args: &[String],
        prompt: &str,
    ) -> Option<Vec<String>> {
        let mut argv = vec![program.to_string()];
        let fixed: &[&str] = match self {
            // Its sandbox as in autonomous runs; what needs more (its `git commit`, reaching
            // the daemon) it asks the person for (on-request).
            Builtin::Codex => &[
                "--sandbox",
                "workspace-write",
                "--ask-for-approval",
                "on-request",
            ],
            // Edits without asking, and its shell for git and orchestratectl, as Claude
            // Code's interactive profile; anything else it asks the person.
            Builtin::Gemini => &[
                "--approval-mode",
                "auto_edit",
                "--skip-trust",
                // One value per flag: yargs gives the option one, the next word is the query.
                "--allowed-tools=run_shell_command(git)",
                "--allowed-tools=run_shell_command(orchestratectl)",
            ],
            // Its own permission rules (config `permission`): it asks the person where
            // they say ask.
            Builtin::Opencode => &[],
            Builtin::Aider => return None,
        };
        argv.extend(fixed.iter().map(|a| a.to_string()));
        argv.extend(args.iter().cloned());
        match self {
            // `=`: a prompt that starts with '-' stays the option's value.
            Builtin::Gemini => argv.push(format!("--prompt-interactive={prompt}")),
            Builtin::Opencode => argv.push(format!("--prompt={prompt}")),
            Builtin::Codex => argv.extend(["--".into(), prompt.to_string()]),
            Builtin::Aider => unreachable!("returned above"),
        }
        Some(argv)
    }
}

/// What an autonomous Codex's `PermissionRequest` hook runs: `orchestratectl hook
/// PermissionAsk` (Codex 0.169 gives it Claude Code's JSON — `tool_name` `Bash`,
/// `tool_input.command` — and takes Claude Code's answer), and a denial when that prints
/// nothing (the daemon is down, or gave no decision in time): without a decision Codex would
/// hand the request to its automatic reviewer, a model, where today it is refused. Codex runs
/// it with a shell in the agent's environment (`OCTL_RUN`, `OCTL_NODE`, its PATH).
pub const CODEX_ASK_COMMAND: &str = "d=$(orchestratectl hook PermissionAsk); if [ -n \"$d\" ]; then printf '%s\\n' \"$d\"; else printf '%s\\n' '{\"hookSpecificOutput\":{\"hookEventName\":\"PermissionRequest\",\"decision\":{\"behavior\":\"deny\",\"message\":\"Permission denied by orchestratectl: no decision could be had from a person (is octld running?)\"}}}'; fi";
/// How long Codex lets that hook run (s): a day (the longest `[permissions] wait`) and a
/// minute, as for Claude Code; the hook itself gives up 30 s after the wait.
const CODEX_ASK_TIMEOUT_S: u64 = 86_400 + 60;
/// The key Codex 0.169 gives the first `PermissionRequest` hook of its `-c` flags.
const CODEX_ASK_KEY: &str = "/<session-flags>/config.toml:permission_request:0:0";
/// Codex runs only the hooks the person trusted (`hooks.state.KEY.trusted_hash`, the hash of
/// the hook's definition): this is the hash Codex 0.169 computes for the hook above (sha256
/// of its normalized definition as JSON with sorted keys:
/// `{"event_name":"permission_request","hooks":[{"async":false,"command":…,"timeout":…,
/// "type":"command"}],"matcher":"*"}`). Trusting it by `-c` trusts that one hook for that
/// one run; the user's own hooks and trust in `$CODEX_HOME` are untouched.
const CODEX_ASK_HASH: &str =
    "sha256:075e9c55a9c7cdfea0ee92a2c9b475be2d1ddeb1f3949e932df3099936013879";

/// The `-c` flags of an autonomous Codex that send its approval requests to a person through
/// orchestratectl. `codex exec` forces the approval policy `never` (an escalation is refused
/// unasked: "approval policy is Never; reject command") unless its approvals reviewer is
/// `auto_review`; with it, the policy is `on-request` and Codex runs its `PermissionRequest`
/// hooks before that reviewer, whose decision it takes instead (docs/AGENTS.md, "Permission
/// requests").
fn codex_ask_flags() -> Vec<String> {
    let quoted = |s: &str| serde_json::to_string(s).expect("a string");
    [
        "approval_policy=\"on-request\"".to_string(),
        "approvals_reviewer=\"auto_review\"".to_string(),
        format!(
            "hooks.PermissionRequest=[{{matcher=\"*\",hooks=[{{type=\"command\",command={},timeout={CODEX_ASK_TIMEOUT_S}}}]}}]",
            quoted(CODEX_ASK_COMMAND)
        ),
        format!(
            "hooks.state={{{}={{trusted_hash={}}}}}",
            quoted(CODEX_ASK_KEY),
            quoted(CODEX_ASK_HASH)
        ),
    ]
    .into_iter()
    .flat_map(|flag| ["-c".to_string(), flag])
    .collect()
}

/// Appended to the task of an interactive built-in agent other than Claude: it commits its
/// own work and reports through its shell tool (a person may approve the commands).
pub const CLI_INTERACTIVE_REPORTING: &str = "You were started by orchestratectl in your own git worktree (the current directory) on your own branch; a person watches this session and may type to you. Work only inside this worktree. When the task is finished: commit all your changes with git (git add -A && git commit -m \"<summary>\"), then run `orchestratectl node done --message \"<one-line summary>\"` with your shell tool as your last action. If you cannot finish, run `orchestratectl node fail --reason \"<why>\"`. To ask a question the person here cannot answer, run `orchestratectl discussion ask --title \"<question>\" --wait`. If your shell does not find orchestratectl, run \"$OCTL_CLI\" instead.";

/// Appended to the task of a built-in agent other than Claude: they have no skills or system
/// prompt flag, so the prompt itself says how to report (through their shell tool). An
/// agent that does not report is judged by its stream and exit status.
pub const CLI_REPORTING: &str = "You are an autonomous agent started by orchestratectl in your own git worktree (the current directory) on your own branch. Work only inside this worktree; your changes are committed for you when you finish. If you cannot finish, say why and run `orchestratectl node fail --reason \"<why>\"` with your shell tool. When the task is finished, run `orchestratectl node done --message \"<one-line summary>\"` as your last action. To ask a human a question, run `orchestratectl discussion ask --title \"<question>\" --wait`. If your shell does not find orchestratectl, run \"$OCTL_CLI\" instead.";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::{resolve, Mode};
    use crate::config::Config;
    use octl_proto::state::ExitPolicy;

    #[test]
    fn builtin_agent_clis() {
        let config = Config::parse(
            "[agents.codex]\nargs = [\"-m\", \"m1\"]\nsilence_limit_secs = 60\n[agents.gemini]\nprogram = \"/opt/gemini\"\nsilence_limit_secs = 0\n",
        )
        .unwrap();
        let codex = resolve(&config, Some("codex")).unwrap();
        assert_eq!(codex.silence_limit_secs, Some(60));
        let l = codex.launch(Mode::Autonomous, "-fix it", None).unwrap();
        assert_eq!(
            l.argv[..8],
            [
                "codex",
                "exec",
                "--json",
                "--sandbox",
                "workspace-write",
                "--skip-git-repo-check",
                "--color",
                "never",
            ]
        );
        // Its approval requests go to a person (the hook), then the profile's args.
        assert_eq!(l.argv[8..16], codex_ask_flags()[..]);
        assert_eq!(l.argv[16..18], ["-m", "m1"]);
        assert_eq!(l.argv[18], "--");
        assert!(l.argv[19].starts_with("-fix it\n\n") && l.argv[19].ends_with(CLI_REPORTING));
        assert_eq!(l.on_exit, ExitPolicy::Stream);
        assert!(l.stream_json && l.hold_reports);
        let i = codex.launch(Mode::Interactive, "-x", None).unwrap();
        assert_eq!(
            i.argv[..7],
            [
                "codex",
                "--sandbox",
                "workspace-write",
                "--ask-for-approval",
                "on-request",
                "-m",
                "m1"
            ]
        );
        assert_eq!(i.argv[7], "--");
        assert!(i.argv[8].starts_with("-x\n\n") && i.argv[8].ends_with(CLI_INTERACTIVE_REPORTING));
        assert_eq!(i.on_exit, ExitPolicy::Done, "a person closes it when done");
        assert!(!i.stream_json && !i.hold_reports);

        let gemini = resolve(&config, Some("gemini")).unwrap();
        assert_eq!(gemini.silence_limit_secs, None, "0 turns the watchdog off");
        let argv = gemini.launch(Mode::Autonomous, "t", None).unwrap().argv;
        assert_eq!(argv[0], "/opt/gemini");
        assert_eq!(argv[argv.len() - 2], "-p");

        let argv = gemini.launch(Mode::Interactive, "-t", None).unwrap().argv;
        assert!(argv
            .last()
            .unwrap()
            .starts_with("--prompt-interactive=-t\n\n"));
        assert!(argv.contains(&"--allowed-tools=run_shell_command(orchestratectl)".to_string()));

        let opencode = resolve(&config, Some("opencode")).unwrap();
        let argv = opencode.launch(Mode::Interactive, "t", None).unwrap().argv;
        assert_eq!(argv[0], "opencode");
        assert!(argv[1].starts_with("--prompt=t\n\n"));
        assert_eq!(
            opencode.silence_limit_secs,
            Some(DEFAULT_SILENCE_LIMIT_SECS)
        );
        let argv = opencode.launch(Mode::Autonomous, "t", None).unwrap().argv;
        assert_eq!(argv[..5], ["opencode", "run", "--format", "json", "--auto"]);

        let aider = resolve(&config, Some("aider"))
            .unwrap()
            .launch(Mode::Autonomous, "t", None)
            .unwrap();
        assert!(
            !aider.stream_json,
            "aider writes no JSON; its exit status decides"
        );
        assert!(aider.argv.contains(&"--no-auto-commits".to_string()));
        assert_eq!(aider.argv[aider.argv.len() - 2], "--message");
        let err = resolve(&config, Some("aider"))
            .unwrap()
            .launch(Mode::Interactive, "t", None)
            .unwrap_err();
        assert!(
            err.message.contains("no interactive mode"),
            "{}",
            err.message
        );

        // The claude and shell profiles have no watchdog unless configured.
        assert_eq!(
            resolve(&config, Some("claude")).unwrap().silence_limit_secs,
            None
        );
    }
    /// sha256 of `{"event_name":"permission_request","hooks":[{"async":false,"command":C,
    /// "timeout":T,"type":"command"}],"matcher":"*"}`, Codex's trust hash of such a hook.
    fn trust_hash(command: &str, timeout: u64) -> String {
        use std::io::Write;
        let json = format!(
            "{{\"event_name\":\"permission_request\",\"hooks\":[{{\"async\":false,\"command\":{},\"timeout\":{timeout},\"type\":\"command\"}}],\"matcher\":\"*\"}}",
            serde_json::to_string(command).unwrap()
        );
        let mut sum = std::process::Command::new("sha256sum")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .or_else(|_| {
                std::process::Command::new("shasum")
                    .args(["-a", "256"])
                    .stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::piped())
                    .spawn()
            })
            .expect("sha256sum or shasum");
        sum.stdin
            .take()
            .unwrap()
            .write_all(json.as_bytes())
            .unwrap();
        let out = sum.wait_with_output().unwrap();
        let hex = String::from_utf8(out.stdout).unwrap();
        format!("sha256:{}", hex.split_whitespace().next().unwrap())
    }

    #[test]
    fn codex_trusts_exactly_the_permission_hook_it_is_given() {
        // What Codex 0.169's `app-server` `hooks/list` reported as the `currentHash` of
        // `-c 'hooks.PermissionRequest=[{matcher="*",hooks=[{type="command",
        // command="/tmp/cx/hook.sh allow",timeout=60}]}]'`: the hash is computed as it does.
        assert_eq!(
            trust_hash("/tmp/cx/hook.sh allow", 60),
            "sha256:060aa176e9ee7626406381141d7a1d1f1e7dd8f50fe7cba8d98d124543eedf97"
        );
        assert_eq!(
            trust_hash(CODEX_ASK_COMMAND, CODEX_ASK_TIMEOUT_S),
            CODEX_ASK_HASH,
            "CODEX_ASK_HASH is the hash of CODEX_ASK_COMMAND"
        );
        // Each -c value is TOML Codex reads as the hook and its trust.
        let flags = codex_ask_flags();
        let values: Vec<toml::Table> = flags
            .chunks(2)
            .map(|c| {
                assert_eq!(c[0], "-c");
                c[1].parse::<toml::Table>().unwrap()
            })
            .collect();
        assert_eq!(values[0]["approval_policy"].as_str(), Some("on-request"));
        assert_eq!(
            values[1]["approvals_reviewer"].as_str(),
            Some("auto_review")
        );
        let group = &values[2]["hooks"]["PermissionRequest"][0];
        assert_eq!(group["matcher"].as_str(), Some("*"));
        let hook = &group["hooks"][0];
        assert_eq!(hook["type"].as_str(), Some("command"));
        assert_eq!(hook["command"].as_str(), Some(CODEX_ASK_COMMAND));
        assert_eq!(
            hook["timeout"].as_integer(),
            Some(CODEX_ASK_TIMEOUT_S as i64)
        );
        assert_eq!(
            values[3]["hooks"]["state"][CODEX_ASK_KEY]["trusted_hash"].as_str(),
            Some(CODEX_ASK_HASH)
        );
    }

    #[test]
    fn codexs_permission_hook_prints_the_decision_else_a_denial() {
        // `orchestratectl` as a shell function saying `says`.
        let run = |says: &str| {
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg(format!(
                    "orchestratectl() {{ cat >/dev/null; {says}; }}\n{CODEX_ASK_COMMAND}"
                ))
                .stdin(std::process::Stdio::null())
                .output()
                .unwrap();
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(
                v["hookSpecificOutput"]["hookEventName"], "PermissionRequest",
                "{v}"
            );
            v["hookSpecificOutput"]["decision"].clone()
        };
        let allow = r#"{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow"}}}"#;
        assert_eq!(run(&format!("echo '{allow}'"))["behavior"], "allow");
        // The daemon down: the hook prints nothing, and the request is denied.
        let denied = run("true");
        assert_eq!(denied["behavior"], "deny");
        assert!(denied["message"]
            .as_str()
            .unwrap()
            .contains("is octld running?"));
    }
}
