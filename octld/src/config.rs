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
//! [agents.aider]              # any other agent: argv templates with {prompt}
//! interactive = ["aider", "--message", "{prompt}"]
//! autonomous = ["aider", "--yes-always", "--message", "{prompt}"]
//! on_exit = "done"            # an agent that ends without `node done`: done or exited
//!
//! [notify]                    # when a node starts needing a person (see crate::notify)
//! command = ["notify-send", "orchestratectl"]   # argv; the notice as JSON on stdin
//! webhook = "http://127.0.0.1:9000/hook"        # a POST of the same JSON
//! timeout_secs = 10                             # per notifier and notice
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
    #[serde(default)]
    pub notify: NotifyConfig,
}

/// `[notify]`: who is told when a node starts needing a person.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotifyConfig {
    /// A program and its arguments, run with the notice as JSON on stdin.
    pub command: Option<Vec<String>>,
    /// A plain-HTTP URL that receives the notice as a JSON POST.
    pub webhook: Option<String>,
    /// How long each notifier may take per notice (default 10 s).
    pub timeout_secs: Option<u64>,
}

/// A plain `http://host[:port][/path]` URL: what a webhook may be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpUrl {
    pub host: String,
    pub port: u16,
    pub path: String,
}

impl HttpUrl {
    pub fn parse(url: &str) -> Result<HttpUrl, AppError> {
        let bad = |why: &str| {
            AppError::invalid(format!(
                "invalid notify.webhook {url:?}: {why}; give a plain HTTP URL such as \"http://127.0.0.1:9000/hook\""
            ))
        };
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| bad("only http:// is supported"))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) => (
                h,
                p.parse::<u16>()
                    .map_err(|_| bad("the port is not a number from 1 to 65535"))?,
            ),
            None => (authority, 80),
        };
        if host.is_empty() || port == 0 || host.contains(['@', ' ']) {
            return Err(bad("it names no host"));
        }
        Ok(HttpUrl {
            host: host.to_string(),
            port,
            path: path.to_string(),
        })
    }

    /// `host:port`, for the `Host` header.
    pub fn authority(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
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
    /// The built-in claude profile only: the program to run.
    pub program: Option<String>,
    /// The built-in claude profile only: `--permission-mode` of autonomous runs.
    pub permission_mode: Option<String>,
    /// The built-in claude profile only: tools granted to autonomous runs.
    pub allowed_tools: Option<Vec<String>>,
    /// The built-in claude profile only: what one node's session may spend
    /// (`--max-budget-usd`); a run's own budget caps it further.
    pub max_budget_usd: Option<f64>,
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
            octl_proto::rpc::check_budget(
                &format!("agents.{name}.max_budget_usd"),
                agent.max_budget_usd,
            )?;
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
        let n = &config.notify;
        if let Some(argv) = &n.command {
            if argv.is_empty() || argv[0].is_empty() {
                return Err(AppError::invalid(
                    "notify.command: give the program and its arguments, e.g. [\"notify-send\", \"orchestratectl\"]",
                ));
            }
        }
        if let Some(url) = &n.webhook {
            HttpUrl::parse(url)?;
        }
        if n.timeout_secs == Some(0) {
            return Err(AppError::invalid(
                "notify.timeout_secs: give a number of seconds above 0, e.g. 10",
            ));
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

    #[test]
    fn notify_and_budgets_name_the_field() {
        let c = Config::parse(
            "[notify]\ncommand = [\"notify-send\", \"x\"]\nwebhook = \"http://127.0.0.1:9000/hook\"\n",
        )
        .unwrap();
        assert_eq!(c.notify.command.unwrap()[0], "notify-send");
        assert_eq!(
            HttpUrl::parse(&c.notify.webhook.unwrap()).unwrap(),
            HttpUrl {
                host: "127.0.0.1".into(),
                port: 9000,
                path: "/hook".into()
            }
        );
        assert_eq!(HttpUrl::parse("http://h").unwrap().path, "/");
        for (text, field) in [
            ("[notify]\ncommand = []\n", "notify.command"),
            ("[notify]\nwebhook = \"https://x\"\n", "notify.webhook"),
            (
                "[notify]\nwebhook = \"http://h:99999/\"\n",
                "notify.webhook",
            ),
            ("[notify]\ntimeout_secs = 0\n", "notify.timeout_secs"),
            ("[notify]\nbogus = 1\n", "bogus"),
            (
                "[agents.claude]\nmax_budget_usd = -1\n",
                "agents.claude.max_budget_usd",
            ),
        ] {
            let e = Config::parse(text).unwrap_err();
            assert!(e.message.contains(field), "{text}: {}", e.message);
        }
    }
}
