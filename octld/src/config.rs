//! `$OCTL_HOME/config.toml`: agent profiles and defaults. Read at each use, so an edit takes
//! effect without restarting the daemon. Unknown keys are refused, not ignored.
//!
//! ```toml
//! [defaults]
//! agent = "claude"            # the profile used when --agent is not given
//!
//! [agents.claude]             # tune the built-in claude profile
//! program = "claude"
//! permission_mode = "acceptEdits"
//! allowed_tools = ["Bash(git *)", "Bash(orchestratectl *)"]
//!
//! [agents.codex]              # tune a built-in codex, gemini, opencode or aider profile
//! program = "codex"
//! args = ["-m", "gpt-5-codex"]   # before the prompt
//! silence_limit_secs = 900    # fail an agent silent this long (0: never)
//!
//! [agents.mine]               # any other agent: argv templates with {prompt}
//! interactive = ["my-agent", "{prompt}"]
//! autonomous = ["my-agent", "--batch", "{prompt}"]
//! on_exit = "done"            # an agent that ends without `node done`: done or exited
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use octl_proto::AppError;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub defaults: Defaults,
    #[serde(default)]
    pub agents: BTreeMap<String, AgentConfig>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Defaults {
    pub agent: Option<String>,
}

/// What to do when an agent's process ends without having reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnExit {
    Done,
    Exited,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// argv template for `code` runs; `{prompt}` is replaced by the task.
    pub interactive: Option<Vec<String>>,
    /// argv template for `spinoff`, fan-out and orchestrate nodes.
    pub autonomous: Option<Vec<String>>,
    pub on_exit: Option<OnExit>,
    /// The built-in claude, codex, gemini, opencode and aider profiles: the program to run.
    pub program: Option<String>,
    /// The built-in codex, gemini, opencode and aider profiles: arguments put before the
    /// prompt (a model, a provider, `-c key=value` settings).
    pub args: Option<Vec<String>>,
    /// Seconds an autonomous agent may go without output before it is failed as stuck
    /// (0: never). Built-in codex, gemini, opencode and aider: 900.
    pub silence_limit_secs: Option<u64>,
    /// The built-in claude profile only: `--permission-mode` of autonomous runs.
    pub permission_mode: Option<String>,
    /// The built-in claude profile only: tools granted to autonomous runs.
    pub allowed_tools: Option<Vec<String>>,
}

impl Config {
    /// Reads the file; a missing file is the empty configuration.
    pub fn load(path: &Path) -> Result<Config, AppError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Config::parse(&text).map_err(|e| {
                AppError::invalid(format!("invalid {}: {}", path.display(), e.message))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Config::default()),
            Err(e) => Err(AppError::internal(format!(
                "cannot read {}: {e}",
                path.display()
            ))),
        }
    }

    pub fn parse(text: &str) -> Result<Config, AppError> {
        let config: Config = toml::from_str(text)
            .map_err(|e| AppError::invalid(e.to_string().trim().to_string()))?;
        for (name, agent) in &config.agents {
            octl_proto::ids::validate_node_id("agent profile name", name)?;
            for (field, argv) in [
                ("interactive", &agent.interactive),
                ("autonomous", &agent.autonomous),
            ] {
                if let Some(argv) = argv {
                    if argv.is_empty() || argv[0].is_empty() {
                        return Err(AppError::invalid(format!(
                            "agents.{name}.{field}: give the program and its arguments, e.g. [\"aider\", \"--message\", \"{{prompt}}\"]"
                        )));
                    }
                }
            }
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_profiles_and_refuses_unknown_keys() {
        let c = Config::parse(
            "[defaults]\nagent = \"aider\"\n[agents.aider]\ninteractive = [\"aider\", \"{prompt}\"]\non_exit = \"done\"\n",
        )
        .unwrap();
        assert_eq!(c.defaults.agent.as_deref(), Some("aider"));
        assert_eq!(c.agents["aider"].on_exit, Some(OnExit::Done));
        let err = Config::parse("[agents.x]\nbogus = 1\n").unwrap_err();
        assert!(err.message.contains("bogus"), "{}", err.message);
        assert!(Config::parse("[agents.x]\ninteractive = []\n").is_err());
        assert!(Config::parse("[agents.\"Bad Name\"]\n").is_err());
    }
}
