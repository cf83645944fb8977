//! Agent profiles: how to start an agent for a node, and what its exit means.
//!
//! Built in: `shell` (the task is a shell script; exit 0 → its changes are committed and the
//! node is done, else failed) and `claude` (Claude Code: interactive for `code` runs,
//! `claude -p` with stream-json output for autonomous ones), and the autonomous-only
//! [`Builtin`]s `codex`, `gemini`, `opencode` and `aider` (argv, what the daemon reads:
//! README, "Agent profiles"). Any other agent is an argv template in `config.toml` (see
//! [`crate::config`]).

use std::path::{Path, PathBuf};

use octl_proto::state::ExitPolicy;
use octl_proto::{AppError, ErrorKind};

use crate::config::{AgentConfig, Config, OnExit};
use crate::streams::Stream;

/// The profile used when neither `--agent` nor `[defaults] agent` says otherwise.
pub const DEFAULT_PROFILE: &str = "claude";

/// Whether a human works with the agent (`code`) or it works alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Interactive,
    Autonomous,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ProfileKind {
    Shell,
    Claude {
        program: String,
        permission_mode: String,
        allowed_tools: Vec<String>,
    },
    Argv {
        interactive: Option<Vec<String>>,
        autonomous: Option<Vec<String>>,
    },
    /// A built-in profile of another agent CLI, run headless.
    Builtin {
        agent: Builtin,
        program: String,
        /// Put before the prompt (`[agents.NAME] args`).
        args: Vec<String>,
    },
}

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
    fn argv(self, program: &str, args: &[String], prompt: &str) -> Vec<String> {
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
}

/// Appended to the task of a built-in agent other than Claude: they have no skills or system
/// prompt flag, so the prompt itself says how to report (through their shell tool). An
/// agent that does not report is judged by its stream and exit status.
pub const CLI_REPORTING: &str = "You are an autonomous agent started by orchestratectl in your own git worktree (the current directory) on your own branch. Work only inside this worktree; your changes are committed for you when you finish. If you cannot finish, say why and run `orchestratectl node fail --reason \"<why>\"` with your shell tool. When the task is finished, run `orchestratectl node done --message \"<one-line summary>\"` as your last action. To ask a human a question, run `orchestratectl discussion ask --title \"<question>\" --wait`. If your shell does not find orchestratectl, run \"$OCTL_CLI\" instead.";

#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    pub name: String,
    pub kind: ProfileKind,
    pub on_exit: Option<OnExit>,
    /// An autonomous agent silent (no output) this long is failed as stuck.
    pub silence_limit_secs: Option<u64>,
}

/// How to run one agent: its argv, and how its output and exit are read.
#[derive(Debug, Clone, PartialEq)]
pub struct Launch {
    pub argv: Vec<String>,
    /// What the process's end means when the agent did not report.
    pub on_exit: ExitPolicy,
    /// The agent's output is a stream of JSON lines, kept raw in the node's log while the
    /// pane shows a readable rendering (see `octld agent-wrap`).
    pub stream_json: bool,
    /// Autonomous agents' done/fail reports are held until their process ends: a node counts
    /// as alive (against a parallelism cap) exactly as long as its agent runs, and its
    /// outcome is known when the report becomes an event.
    pub hold_reports: bool,
    /// Claude Code's workspace-trust question may come up in the window: answer it.
    pub answers_trust: bool,
    /// The built-in Claude Code profile: [`Launch::with`] adds its flags.
    pub claude: bool,
    /// The conversation this launch starts (`--session-id`) or continues (`--resume`),
    /// recorded in the node's `node.starting`.
    pub session: Option<Session>,
}

/// What a node adds to its profile's launch.
#[derive(Debug, Clone, Copy, Default)]
pub struct Extra<'a> {
    /// The node's gate: Claude Code may run it (`Bash(<gate>)`), so it can test its work as
    /// the merge will.
    pub gate: Option<&'a str>,
    /// What the session may spend (`--max-budget-usd`).
    pub max_budget_usd: Option<f64>,
}

impl Launch {
    /// The launch with the node's extras; only Claude Code takes them (other agents'
    /// argv is exactly their template).
    pub fn with(mut self, extra: &Extra) -> Launch {
        if !self.claude || self.argv.is_empty() {
            return self;
        }
        // Inserted right after the program, before the first flag of the profile's argv,
        // so they end no variadic list and are ended by the next flag.
        let mut flags: Vec<String> = Vec::new();
        if let Some(gate) = extra.gate.map(str::trim).filter(|g| !g.is_empty()) {
            let tool = format!("Bash({gate})");
            // Into the profile's own list when it has one: one list, whatever the CLI does
            // with a flag given twice.
            match self.argv.iter().position(|a| a == "--allowedTools") {
                Some(i) => self.argv.insert(i + 1, tool),
                None => flags.extend(["--allowedTools".into(), tool]),
            }
        }
        if let Some(usd) = extra.max_budget_usd {
            flags.extend(["--max-budget-usd".into(), usd.to_string()]);
        }
        self.argv.splice(1..1, flags);
        self
    }
}

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

/// The `--settings` JSON with [`HOOKS`]: `{"hooks": {"Stop": [{"hooks": [{"type": "command",
/// "command": "orchestratectl hook Stop", "timeout": 5}]}], …}}`. `orchestratectl` is found
/// on the window's PATH, which starts with octld's own directory.
///
/// With `-p` (`mode` autonomous) no one can answer a permission prompt: Claude Code denies the
/// tool and goes on, so its `PermissionRequest` is reported as the `PermissionDenied` it is —
/// working, "denied: TOOL" — never as an agent waiting for a person.
pub fn hook_settings(mode: Mode) -> String {
    let hooks: serde_json::Map<String, serde_json::Value> = HOOKS
        .iter()
        .map(|(event, per_tool)| {
            let said = match (*event, mode) {
                ("PermissionRequest", Mode::Autonomous) => "PermissionDenied",
                _ => event,
            };
            let mut group = serde_json::json!({"hooks": [{
                "type": "command",
                "command": format!("orchestratectl hook {said}"),
                "timeout": HOOK_TIMEOUT_S,
            }]});
            if *per_tool {
                group["matcher"] = "*".into();
            }
            (event.to_string(), serde_json::Value::Array(vec![group]))
        })
        .collect();
    serde_json::json!({ "hooks": hooks }).to_string()
}

/// Appended to Claude's system prompt in autonomous runs: how to report.
pub const CLAUDE_REPORTING: &str = "You are an autonomous agent started by orchestratectl in your own git worktree (the current directory) on your own branch. Work only inside this worktree. When the task is finished: commit all your changes with git (git add -A && git commit -m \"<summary>\"), then run `orchestratectl node done --message \"<one-line summary>\"` as your last action. If you cannot finish, run `orchestratectl node fail --reason \"<why>\"`. To ask a human a question, run `orchestratectl discussion ask --title \"<question>\" --wait`. If you notice separate work outside your task, propose it with `orchestratectl spinoff propose --task \"<task>\"` instead of doing it. Report progress on long tasks with `orchestratectl node progress --message \"<what>\"`.";

impl Profile {
    /// The conversation for `node`'s next attempt: the one to resume when the node is
    /// resumed, else a new one; `None` for agents that are not Claude Code.
    pub fn session_for(&self, node: &octl_proto::state::Node) -> Option<Session> {
        if !matches!(self.kind, ProfileKind::Claude { .. }) {
            return None;
        }
        match (node.resume, &node.session_id) {
            (true, Some(id)) => Some(Session {
                id: id.clone(),
                resume: true,
            }),
            _ => Some(Session::new()),
        }
    }

    /// The program that must exist on PATH for this profile and mode.
    pub fn program(&self, mode: Mode) -> Result<String, AppError> {
        Ok(match &self.kind {
            ProfileKind::Shell => "sh".to_string(),
            ProfileKind::Claude { program, .. } => program.clone(),
            ProfileKind::Argv { .. } => self.template(mode)?[0].clone(),
            ProfileKind::Builtin { program, .. } => program.clone(),
        })
    }

    fn template(&self, mode: Mode) -> Result<&Vec<String>, AppError> {
        let ProfileKind::Argv {
            interactive,
            autonomous,
        } = &self.kind
        else {
            unreachable!("only argv profiles have templates")
        };
        let (t, field) = match mode {
            Mode::Interactive => (interactive, "interactive"),
            Mode::Autonomous => (autonomous, "autonomous"),
        };
        t.as_ref().ok_or_else(|| {
            AppError::invalid(format!(
                "agent profile {:?} has no {field} command: add agents.{}.{field} to config.toml",
                self.name, self.name
            ))
        })
    }

    /// The argv for `task` in `mode`; a Claude Code agent in the conversation `session`
    /// (continued with a prompt to go on when it is resumed).
    pub fn launch(
        &self,
        mode: Mode,
        task: &str,
        session: Option<&Session>,
    ) -> Result<Launch, AppError> {
        let task = match session {
            Some(s) if s.resume => RESUME_PROMPT,
            _ => task,
        };
        // Claude Code's own hooks say what it does; its conversation is the daemon's choice.
        let conversation = |argv: &mut Vec<String>| {
            argv.extend(["--settings".to_string(), hook_settings(mode)]);
            if let Some(s) = session {
                let flag = if s.resume { "--resume" } else { "--session-id" };
                argv.extend([flag.to_string(), s.id.clone()]);
            }
        };
        let exited = |default: ExitPolicy| match self.on_exit {
            Some(OnExit::Done) => ExitPolicy::Done,
            Some(OnExit::Exited) => ExitPolicy::Exited,
            None => default,
        };
        let autonomous = mode == Mode::Autonomous;
        Ok(match (&self.kind, mode) {
            (ProfileKind::Shell, _) => Launch {
                argv: vec!["sh".into(), "-c".into(), task.to_string()],
                on_exit: ExitPolicy::Shell,
                stream_json: false,
                hold_reports: autonomous,
                answers_trust: false,
                claude: false,
                session: session.cloned(),
            },
            (
                ProfileKind::Claude {
                    program,
                    permission_mode,
                    allowed_tools,
                },
                Mode::Interactive,
            ) => Launch {
                // The permission mode and the tools it may use to commit and report are
                // explicit, as in autonomous runs, so the agent does not stop to ask before
                // each `git commit` or `orchestratectl node done`; `--` ends the variadic tool
                // list and keeps any task text a prompt.
                argv: {
                    let mut argv = vec![
                        program.clone(),
                        "--permission-mode".into(),
                        permission_mode.clone(),
                    ];
                    conversation(&mut argv);
                    if !allowed_tools.is_empty() {
                        argv.push("--allowedTools".into());
                        argv.extend(allowed_tools.iter().cloned());
                    }
                    argv.extend(["--".into(), task.to_string()]);
                    argv
                },
                // A human ends an interactive session when the work is ready for review.
                on_exit: exited(ExitPolicy::Done),
                stream_json: false,
                hold_reports: false,
                answers_trust: true,
                claude: true,
                session: session.cloned(),
            },
            (
                ProfileKind::Claude {
                    program,
                    permission_mode,
                    allowed_tools,
                },
                Mode::Autonomous,
            ) => {
                let mut argv = vec![
                    program.clone(),
                    "-p".into(),
                    "--output-format".into(),
                    "stream-json".into(),
                    "--verbose".into(),
                    "--permission-mode".into(),
                    permission_mode.clone(),
                ];
                conversation(&mut argv);
                if !allowed_tools.is_empty() {
                    argv.push("--allowedTools".into());
                    argv.extend(allowed_tools.iter().cloned());
                }
                // A single-valued flag ends the variadic --allowedTools list; `--` keeps a
                // task that starts with '-' from being read as an option.
                argv.extend([
                    "--append-system-prompt".into(),
                    CLAUDE_REPORTING.into(),
                    "--".into(),
                    task.to_string(),
                ]);
                Launch {
                    argv,
                    on_exit: exited(ExitPolicy::Exited),
                    stream_json: true,
                    hold_reports: true,
                    answers_trust: false,
                    claude: true,
                    session: session.cloned(),
                }
            }
            (ProfileKind::Builtin { agent, .. }, Mode::Interactive) => {
                return Err(AppError::invalid(format!(
                    "the built-in {} profile runs autonomously only (spinoff, fanout, orchestrate); for `code`, define agents.{}.interactive in config.toml",
                    agent.name(),
                    self.name
                )))
            }
            (
                ProfileKind::Builtin {
                    agent,
                    program,
                    args,
                },
                Mode::Autonomous,
            ) => Launch {
                argv: agent.argv(program, args, &format!("{task}\n\n{CLI_REPORTING}")),
                on_exit: exited(ExitPolicy::Stream),
                // Aider has no JSON output; its pane's output is its log.
                stream_json: *agent != Builtin::Aider,
                hold_reports: true,
                answers_trust: false,
                // Conversations the daemon can continue are Claude Code's only.
                session: None,
                claude: false,
            },
            (ProfileKind::Argv { .. }, _) => Launch {
                argv: self
                    .template(mode)?
                    .iter()
                    .map(|a| a.replace("{prompt}", task))
                    .collect(),
                on_exit: exited(ExitPolicy::Exited),
                stream_json: false,
                hold_reports: autonomous,
                answers_trust: false,
                claude: false,
                session: session.cloned(),
            },
        })
    }
}

/// Resolves a profile by name (`None`: the configured default, else `claude`).
pub fn resolve(config: &Config, name: Option<&str>) -> Result<Profile, AppError> {
    let name = name
        .map(str::to_string)
        .or_else(|| config.defaults.agent.clone())
        .unwrap_or_else(|| DEFAULT_PROFILE.to_string());
    let user = config.agents.get(&name);
    let kind = match name.as_str() {
        "shell" => ProfileKind::Shell,
        "claude" => claude(user),
        _ => match user {
            // A template of one's own replaces a built-in profile of the same name.
            Some(AgentConfig {
                interactive,
                autonomous,
                ..
            }) if interactive.is_some() || autonomous.is_some() => ProfileKind::Argv {
                interactive: interactive.clone(),
                autonomous: autonomous.clone(),
            },
            _ if Builtin::parse(&name).is_some() => ProfileKind::Builtin {
                agent: Builtin::parse(&name).expect("checked"),
                program: user
                    .and_then(|u| u.program.clone())
                    .unwrap_or_else(|| name.clone()),
                args: user.and_then(|u| u.args.clone()).unwrap_or_default(),
            },
            _ => {
                let mut known: Vec<&str> = vec!["claude", "shell"];
                known.extend(Builtin::ALL.map(Builtin::name));
                known.extend(config.agents.keys().map(String::as_str));
                known.sort_unstable();
                known.dedup();
                return Err(AppError::not_found(format!(
                    "no agent profile {name:?}; known: {}",
                    known.join(", ")
                ))
                .with_hint("define it as [agents.NAME] with interactive/autonomous argv templates in $OCTL_HOME/config.toml"));
            }
        },
    };
    let silence_limit_secs = user
        .and_then(|u| u.silence_limit_secs)
        .or(matches!(kind, ProfileKind::Builtin { .. }).then_some(DEFAULT_SILENCE_LIMIT_SECS))
        .filter(|s| *s > 0);
    Ok(Profile {
        name,
        kind,
        on_exit: user.and_then(|u| u.on_exit),
        silence_limit_secs,
    })
}

/// What one node of this profile may spend, from config (`agents.<name>.max_budget_usd`).
pub fn node_budget(config: &Config, profile: &Profile) -> Option<f64> {
    config
        .agents
        .get(&profile.name)
        .and_then(|a| a.max_budget_usd)
}

fn claude(user: Option<&AgentConfig>) -> ProfileKind {
    ProfileKind::Claude {
        program: user
            .and_then(|u| u.program.clone())
            .unwrap_or_else(|| "claude".into()),
        permission_mode: user
            .and_then(|u| u.permission_mode.clone())
            .unwrap_or_else(|| "acceptEdits".into()),
        allowed_tools: user
            .and_then(|u| u.allowed_tools.clone())
            .unwrap_or_else(|| vec!["Bash(git *)".into(), "Bash(orchestratectl *)".into()]),
    }
}

/// Finds `program` the way a shell would: a path is taken as is, a bare name is looked up
/// in `PATH`.
pub fn find_program(program: &str, path_var: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        p.metadata()
            .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false)
    };
    if program.contains('/') {
        let p = PathBuf::from(program);
        return executable(&p).then_some(p);
    }
    std::env::split_paths(path_var?)
        .map(|dir| dir.join(program))
        .find(|p| executable(p))
}

/// The first line `program --version` prints (within 20 s; agent CLIs on node or python
/// take seconds to start), or why it did not.
pub fn version(program: &str) -> Result<String, String> {
    use std::process::{Command, Stdio};
    let mut child = Command::new(program)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        match child.try_wait().map_err(|e| e.to_string())? {
            Some(_) => break,
            None if std::time::Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err("no answer within 20 s".into());
            }
            None => std::thread::sleep(std::time::Duration::from_millis(50)),
        }
    }
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout);
    let first = text.lines().map(str::trim).find(|l| !l.is_empty());
    match (out.status.success(), first) {
        (true, Some(line)) => Ok(line.to_string()),
        (_, _) => Err(format!(
            "{}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    }
}

/// A missing agent program: kind `tool_missing` (exit 6), before anything is created.
pub fn require_program(
    profile: &Profile,
    mode: Mode,
    path_var: Option<&std::ffi::OsStr>,
) -> Result<PathBuf, AppError> {
    let program = profile.program(mode)?;
    find_program(&program, path_var).ok_or_else(|| {
        AppError::new(
            ErrorKind::ToolMissing,
            format!(
                "the agent program {program:?} of profile {:?} was not found on the daemon's PATH",
                profile.name
            ),
        )
        .with_hint("install it, or choose another profile with --agent (shell needs no AI)")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_and_user_profiles() {
        let config = Config::parse(
            "[defaults]\nagent = \"aider\"\n[agents.aider]\nautonomous = [\"aider\", \"--message\", \"{prompt}\"]\non_exit = \"done\"\n",
        )
        .unwrap();
        let p = resolve(&config, None).unwrap();
        assert_eq!(p.name, "aider");
        let l = p.launch(Mode::Autonomous, "fix it", None).unwrap();
        assert_eq!(l.argv, vec!["aider", "--message", "fix it"]);
        assert_eq!(l.on_exit, ExitPolicy::Done);
        assert!(p.launch(Mode::Interactive, "x", None).is_err());

        let shell = resolve(&config, Some("shell")).unwrap();
        assert_eq!(
            shell
                .launch(Mode::Autonomous, "echo hi", None)
                .unwrap()
                .argv,
            vec!["sh", "-c", "echo hi"]
        );

        let claude = resolve(&Config::default(), None).unwrap();
        let l = claude
            .launch(Mode::Autonomous, "-starts with a dash", None)
            .unwrap();
        assert_eq!(l.argv.last().unwrap(), "-starts with a dash");
        assert_eq!(l.argv[l.argv.len() - 2], "--");
        assert!(l.stream_json);
        assert_eq!(
            claude.launch(Mode::Interactive, "hi", None).unwrap().argv,
            vec![
                "claude",
                "--permission-mode",
                "acceptEdits",
                "--settings",
                &hook_settings(Mode::Interactive),
                "--allowedTools",
                "Bash(git *)",
                "Bash(orchestratectl *)",
                "--",
                "hi"
            ]
        );

        let extra = Extra {
            gate: Some("cargo test -p x"),
            max_budget_usd: Some(0.5),
        };
        let l = claude
            .launch(Mode::Autonomous, "fix it", None)
            .unwrap()
            .with(&extra);
        assert_eq!(
            l.argv[..5],
            ["claude", "--max-budget-usd", "0.5", "-p", "--output-format"]
        );
        let tools = l.argv.iter().position(|a| a == "--allowedTools").unwrap();
        assert_eq!(l.argv[tools + 1], "Bash(cargo test -p x)");
        assert_eq!(l.argv[tools + 2], "Bash(git *)");
        assert_eq!(l.argv.last().unwrap(), "fix it");
        // Other agents' argv is their template, whatever the node adds.
        let aider = p.launch(Mode::Autonomous, "fix it", None).unwrap();
        assert_eq!(aider.clone().with(&extra).argv, aider.argv);

        let err = resolve(&config, Some("nope")).unwrap_err();
        assert_eq!(err.kind, ErrorKind::NotFound);
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
            assert_eq!(argv.last().unwrap(), RESUME_PROMPT);
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
        assert!(codex.launch(Mode::Interactive, "x", None).is_err());

        let gemini = resolve(&config, Some("gemini")).unwrap();
        assert_eq!(gemini.silence_limit_secs, None, "0 turns the watchdog off");
        let argv = gemini.launch(Mode::Autonomous, "t", None).unwrap().argv;
        assert_eq!(argv[0], "/opt/gemini");
        assert_eq!(argv[argv.len() - 2], "-p");

        let opencode = resolve(&config, Some("opencode")).unwrap();
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

        // The claude and shell profiles have no watchdog unless configured.
        assert_eq!(
            resolve(&config, Some("claude")).unwrap().silence_limit_secs,
            None
        );
    }
}
