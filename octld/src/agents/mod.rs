//! Agent profiles: how to start an agent for a node, and what its exit means.
//!
//! Built in: `shell` (the task is a shell script; exit 0 → its changes are committed and the
//! node is done, else failed) and `claude` (Claude Code: interactive for `code` runs,
//! `claude -p` with stream-json output for autonomous ones), and the
//! [`Builtin`]s `codex`, `gemini`, `opencode` (both modes) and `aider` (autonomous only; argv, what the daemon reads:
//! docs/CONFIGURATION.md, "Agent profiles"). Any other agent is an argv template in `config.toml` (see
//! [`crate::config`]).

mod builtin;
mod claude;
pub mod helpers;
mod program;
pub mod review;

pub use builtin::{Builtin, CLI_INTERACTIVE_REPORTING, CLI_REPORTING, DEFAULT_SILENCE_LIMIT_SECS};
pub use claude::{hook_settings, Session, CLAUDE_REPORTING, RESUME_PROMPT};
pub use program::{find_program, require_program, version};

use octl_proto::rules::PermissionRules;
use octl_proto::state::ExitPolicy;
use octl_proto::AppError;

use crate::config::{AgentConfig, Config, OnExit};

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
        /// `[permissions]`'s rules and the profile's own, in its settings.
        permissions: PermissionRules,
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
    /// The run's rules for the node (`node.added`), after the profile's in its settings.
    pub permissions: Option<&'a PermissionRules>,
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
        if let Some(rules) = extra.permissions.filter(|r| !r.is_empty()) {
            if let Some(i) = self.argv.iter().position(|a| a == "--settings") {
                self.argv[i + 1] = claude::with_rules(&self.argv[i + 1], rules);
            }
        }
        self.argv.splice(1..1, flags);
        self
    }
}

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

    /// The argv for `task` in `mode`; a Claude Code agent in the conversation `session` (a
    /// resumed one goes on with `task` as its next message: see [`review::prompt`]).
    pub fn launch(
        &self,
        mode: Mode,
        task: &str,
        session: Option<&Session>,
    ) -> Result<Launch, AppError> {
        // Claude Code's own hooks say what it does; its conversation is the daemon's choice.
        let conversation = |argv: &mut Vec<String>, rules: &PermissionRules| {
            argv.extend(["--settings".to_string(), hook_settings(mode, rules)]);
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
                    permissions,
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
                    conversation(&mut argv, permissions);
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
                    permissions,
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
                conversation(&mut argv, permissions);
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
            (
                ProfileKind::Builtin {
                    agent,
                    program,
                    args,
                },
                Mode::Interactive,
            ) => Launch {
                argv: agent
                    .interactive_argv(
                        program,
                        args,
                        &format!("{task}\n\n{CLI_INTERACTIVE_REPORTING}"),
                    )
                    .ok_or_else(|| {
                        AppError::invalid(format!(
                            "the built-in {} profile has no interactive mode (its chat cannot be given the task); run it autonomously (spinoff, fanout, orchestrate), or define agents.{}.interactive in config.toml",
                            agent.name(),
                            self.name
                        ))
                    })?,
                // A human ends an interactive session when the work is ready for review.
                on_exit: exited(ExitPolicy::Done),
                stream_json: false,
                hold_reports: false,
                answers_trust: false,
                session: None,
                claude: false,
            },
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
        "claude" => claude(config, user),
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

fn claude(config: &Config, user: Option<&AgentConfig>) -> ProfileKind {
    let own = user.and_then(|u| u.permissions.clone()).unwrap_or_default();
    ProfileKind::Claude {
        permissions: config.permissions.rules().and(&own),
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

#[cfg(test)]
mod tests {
    use super::*;
    use octl_proto::ErrorKind;

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
                &hook_settings(Mode::Interactive, &PermissionRules::default()),
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
            permissions: None,
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
}
