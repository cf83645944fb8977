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
            l.argv[..10],
            [
                "codex",
                "exec",
                "--json",
                "--sandbox",
                "workspace-write",
                "--skip-git-repo-check",
                "--color",
                "never",
                "-m",
                "m1"
            ]
        );
        assert_eq!(l.argv[10], "--");
        assert!(l.argv[11].starts_with("-fix it\n\n") && l.argv[11].ends_with(CLI_REPORTING));
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
}
