//! `$OCTL_HOME/config.toml`: agent profiles and defaults. The daemon holds it as a [`Live`]:
//! read once and again when the file changes, so an edit takes effect without restarting the
//! daemon, and an edit that does not parse is refused with the last good file kept. Unknown
//! keys are refused, not ignored.
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
//! runner = "cluster"          # where this profile's agents run unless --runner says
//!
//! [runners.cluster]           # agents as Slurm jobs (docs/RUNNERS.md)
//! kind = "slurm"
//! partition = "agents"
//! account = "team"
//! sbatch_args = ["--time=04:00:00", "--mem=8G"]
//!
//! [runners.big]               # agents in tmux on SSH hosts, `slots` at once on each
//! kind = "ssh"
//! hosts = ["build1", "build2"]
//! slots = 8
//! pass_env = ["ANTHROPIC_API_KEY"] # of the daemon's environment, to agents on the hosts
//! lost_after = "10m"          # a node whose host does not answer this long starts elsewhere
//!
//! [worktree]                  # bootstrap of new worktrees (crate::bootstrap); a
//! ports = "3100-3199"         # repository's .orchestratectl.toml overrides it
//!
//! [pool]                      # worktrees checked out ahead of time (crate::pool)
//! size = 1                    # per repository of `min_files` files or more; 0: off
//!
//! [limits]                    # admission of agents on this machine (see [`limits`])
//! min_available = "10%"
//!
//! [notify]                    # when a node starts needing a person (see crate::notify)
//! command = ["notify-send", "orchestratectl"]   # argv; the notice as JSON on stdin
//! webhook = "http://127.0.0.1:9000/hook"        # a POST of the same JSON
//! timeout_secs = 10                             # per notifier and notice
//!
//! [permissions]               # an autonomous agent's request for a tool under `ask`
//! wait = "10m"                # how long it waits for `node allow|deny`, then is denied
//! allow = ["Bash(cargo test:*)"]  # Claude Code's rule syntax, for every claude agent;
//! ask = ["Bash(git push:*)"]      # [agents.NAME.permissions] adds a profile's, and
//! deny = ["Read(./.env)"]         # --allow/--ask/--deny a run's
//!
//! [sandbox]                   # what agents run in (crate::sandbox, docs/SECURITY.md)
//! kind = "bwrap"              # or "none"; [agents.NAME] sandbox = … and --sandbox win
//! network = "host"            # or "none"
//! pids_max = 1024             # processes at once, where the pids cgroup is writable
//! read_only = ["~/.rustup"]   # more paths shown (PATH's directories always are)
//! ```
//!
//! `local` (this machine's private tmux server) is always there and is the default.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use octl_proto::rules::PermissionRules;
use octl_proto::sandbox::SandboxKind;
use octl_proto::AppError;

#[cfg(test)]
mod fuzz;
pub mod limits;
pub mod live;
pub use limits::Limits;
pub use live::Live;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub defaults: Defaults,
    #[serde(default)]
    pub agents: BTreeMap<String, AgentConfig>,
    /// `[runners.NAME]` as written; [`Config::parse`] types them into `runners`.
    #[serde(default, rename = "runners")]
    runner_tables: BTreeMap<String, RunnerTable>,
    #[serde(skip)]
    pub runners: BTreeMap<String, RunnerConfig>,
    /// Every repository's worktree bootstrap, under what a repository's own file says.
    #[serde(default)]
    pub worktree: crate::bootstrap::WorktreeConfig,
    #[serde(default)]
    pub notify: NotifyConfig,
    #[serde(default)]
    pub permissions: PermissionsConfig,
    /// The warm pool of prepared worktrees ([`crate::pool`]).
    #[serde(default)]
    pub pool: crate::pool::PoolConfig,
    /// `[limits]` as written; [`Config::parse`] checks it into [`Config::limits`].
    #[serde(default, rename = "limits")]
    raw_limits: limits::RawLimits,
    /// Admission of new agents on this machine and the agents' cgroups.
    #[serde(skip)]
    pub limits: Limits,
    /// `[sandbox]` as written; [`Config::parse`] checks it into [`Config::sandbox`].
    #[serde(default, rename = "sandbox")]
    raw_sandbox: crate::sandbox::SandboxToml,
    /// What agents run in ([`crate::sandbox`]).
    #[serde(skip)]
    pub sandbox: crate::sandbox::SandboxConfig,
    /// The web UI ([`crate::ui`]), checked when it is served.
    #[serde(default)]
    pub ui: crate::ui::UiConfig,
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

/// `[permissions]`: how an autonomous agent's request for a tool under `ask` is answered.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PermissionsConfig {
    /// How long a request waits for a decision before it is denied (an age: `10m`, `90s`).
    pub wait: Option<String>,
    /// Every Claude Code agent's rules (Claude Code's syntax: `Bash(cargo test:*)`), before
    /// its profile's (`[agents.NAME.permissions]`) and its run's (`--allow`, `--ask`,
    /// `--deny`).
    #[serde(default)]
    pub allow: Vec<String>,
    #[serde(default)]
    pub ask: Vec<String>,
    #[serde(default)]
    pub deny: Vec<String>,
}

/// The default `[permissions] wait`: 10 minutes.
pub const DEFAULT_PERMISSION_WAIT_MS: u64 = 600_000;
/// The longest `[permissions] wait`: a day.
const MAX_PERMISSION_WAIT_MS: u64 = 86_400_000;

impl PermissionsConfig {
    /// The rules every Claude Code agent gets.
    pub fn rules(&self) -> PermissionRules {
        PermissionRules {
            allow: self.allow.clone(),
            ask: self.ask.clone(),
            deny: self.deny.clone(),
        }
    }

    /// `wait` in milliseconds, with its default.
    pub fn wait_ms(&self) -> Result<u64, AppError> {
        let Some(age) = &self.wait else {
            return Ok(DEFAULT_PERMISSION_WAIT_MS);
        };
        let ms = octl_proto::time::parse_age("permissions.wait", age)?;
        if ms == 0 || ms > MAX_PERMISSION_WAIT_MS {
            return Err(AppError::invalid(format!(
                "invalid permissions.wait {age:?}: give from 1s to 1d, e.g. 10m"
            )));
        }
        Ok(ms)
    }
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
    /// The runner used when neither `--runner`, the manifest or plan, nor the profile names one.
    pub runner: Option<String>,
}

/// The runner every configuration has: this machine's private tmux server.
pub const LOCAL_RUNNER: &str = "local";

/// What kind of place a runner starts agents in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunnerKind {
    /// The daemon's private tmux server on this machine.
    #[default]
    Local,
    /// A tmux server on each of some SSH hosts.
    Ssh,
    /// One Slurm batch job per attempt.
    Slurm,
}

impl RunnerKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RunnerKind::Local => "local",
            RunnerKind::Ssh => "ssh",
            RunnerKind::Slurm => "slurm",
        }
    }
}

/// `[runners.NAME]`: where agents run, by kind, each with only its own settings. Read as a
/// `RunnerTable` and validated into this (so a field of another kind is refused with the
/// kind it belongs to, and nothing downstream checks a kind at run time).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum RunnerConfig {
    /// The daemon's private tmux server on this machine.
    #[default]
    Local,
    Ssh(SshConfig),
    Slurm(SlurmConfig),
}

/// `kind = "ssh"`: a tmux server on each of some SSH hosts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshConfig {
    /// The hosts, as `ssh` names them (`host`, `user@host`, a `Host` of ~/.ssh/config); at
    /// least one.
    pub hosts: Vec<String>,
    /// Agents at once on each host, at least 1.
    pub slots: u32,
    /// Names of the daemon's environment variables given to agents on the hosts (their own
    /// environment is the host's).
    pub pass_env: Vec<String>,
    /// How long a node whose host does not answer stays `lost`, ms.
    pub lost_after_ms: u64,
}

/// `kind = "slurm"`: one Slurm batch job per attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlurmConfig {
    /// `sbatch --partition` (the cluster's default partition if absent).
    pub partition: Option<String>,
    /// `sbatch --account`.
    pub account: Option<String>,
    /// More `sbatch` arguments, each one argument (`--time=04:00:00`).
    pub sbatch_args: Vec<String>,
    /// How long a node whose controller does not answer stays `lost`, ms.
    pub lost_after_ms: u64,
}

impl RunnerConfig {
    pub fn kind(&self) -> RunnerKind {
        match self {
            RunnerConfig::Local => RunnerKind::Local,
            RunnerConfig::Ssh(_) => RunnerKind::Ssh,
            RunnerConfig::Slurm(_) => RunnerKind::Slurm,
        }
    }

    /// How long a node of this runner whose place does not answer stays `lost` before it
    /// starts again elsewhere (a local node is never lost).
    pub fn lost_after_ms(&self) -> u64 {
        match self {
            RunnerConfig::Local => DEFAULT_LOST_AFTER_MS,
            RunnerConfig::Ssh(c) => c.lost_after_ms,
            RunnerConfig::Slurm(c) => c.lost_after_ms,
        }
    }
}

/// `[runners.NAME]` as written: every kind's fields, checked by [`RunnerTable::typed`] into
/// a [`RunnerConfig`]. The fields a kind does not use are refused.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
struct RunnerTable {
    #[serde(default)]
    pub kind: RunnerKind,
    /// ssh: the hosts, as `ssh` names them (`host`, `user@host`, a `Host` of ~/.ssh/config).
    pub hosts: Option<Vec<String>>,
    /// ssh: agents at once on each host.
    pub slots: Option<u32>,
    /// slurm: `sbatch --partition` (the cluster's default partition if absent).
    pub partition: Option<String>,
    /// slurm: `sbatch --account`.
    pub account: Option<String>,
    /// slurm: more `sbatch` arguments, each one argument (`--time=04:00:00`).
    pub sbatch_args: Option<Vec<String>>,
    /// ssh: names of the daemon's environment variables given to agents on the hosts (their
    /// own environment is the host's).
    pub pass_env: Option<Vec<String>>,
    /// ssh, slurm: how long a node whose place does not answer (its host; the Slurm
    /// controller) stays `lost` before it starts again elsewhere from its last checkpoint
    /// (`30s`, `10m`, `2h`; [`DEFAULT_LOST_AFTER_MS`] if absent).
    pub lost_after: Option<String>,
}

/// How long a node stays `lost` when `lost_after` is not given: 10 minutes.
pub const DEFAULT_LOST_AFTER_MS: u64 = 10 * 60 * 1000;

/// Agents on one SSH host at once when `slots` is not given.
pub const DEFAULT_SSH_SLOTS: u32 = 4;

/// The sbatch options the slurm runner sets itself: the job's name carries run, node and
/// attempt, its output is the node's log, requeue is how node loss is survived, and a pinned
/// job would be requeued onto the node that died.
const SBATCH_OWNED: &[&str] = &[
    "-J",
    "--job-name",
    "-o",
    "--output",
    "-e",
    "--error",
    "--wrap",
    "--requeue",
    "--no-requeue",
    "-w",
    "--nodelist",
    "-p",
    "--partition",
    "-A",
    "--account",
    "--parsable",
];

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
    /// The built-in claude profile only: `[agents.NAME.permissions]`, rules added to
    /// `[permissions]`'s for this profile's agents.
    pub permissions: Option<PermissionRules>,
    /// The built-in claude profile only: what one node's session may spend
    /// (`--max-budget-usd`); a run's own budget caps it further.
    pub max_budget_usd: Option<f64>,
    /// The runner this profile's agents use unless `--runner` (or the manifest, the plan)
    /// names one.
    pub runner: Option<String>,
    /// The sandbox this profile's agents run in unless their run says (`bwrap`, `none`);
    /// `[sandbox] kind` otherwise.
    pub sandbox: Option<String>,
    /// What a new agent of this profile is assumed to need until one has been observed to
    /// its end (default [`limits::DEFAULT_ESTIMATE`]).
    pub memory_estimate: Option<limits::Amount>,
    /// The memory limit of each agent's cgroup (default: the machine's total less
    /// `limits.min_available`).
    pub memory_max: Option<limits::Amount>,
}

impl AgentConfig {
    /// `memory_estimate` in bytes (checked by [`Config::parse`]).
    pub fn memory_estimate(&self) -> Option<u64> {
        let a = self.memory_estimate.as_ref()?;
        limits::size("memory_estimate", a).ok()
    }

    /// `memory_max` in bytes (checked by [`Config::parse`]).
    pub fn memory_max(&self) -> Option<u64> {
        let a = self.memory_max.as_ref()?;
        limits::size("memory_max", a).ok()
    }
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
        let mut config: Config = toml::from_str(text)
            .map_err(|e| AppError::invalid(e.to_string().trim().to_string()))?;
        config.limits = Limits::from_raw(&config.raw_limits)?;
        for (name, agent) in &config.agents {
            octl_proto::ids::validate_node_id("agent profile name", name)?;
            for (field, amount) in [
                ("memory_estimate", &agent.memory_estimate),
                ("memory_max", &agent.memory_max),
            ] {
                if let Some(a) = amount {
                    limits::size(&format!("agents.{name}.{field}"), a)?;
                }
            }
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
        config.permissions.wait_ms()?;
        config.permissions.rules().check("permissions.")?;
        for (name, agent) in &config.agents {
            if let Some(rules) = &agent.permissions {
                if name != "claude" {
                    return Err(AppError::invalid(format!(
                        "agents.{name}.permissions: only the claude profile takes permission rules (they are Claude Code's); give them as [agents.claude.permissions] or [permissions]"
                    )));
                }
                rules.check(&format!("agents.{name}.permissions."))?;
            }
        }
        crate::pool::Settings::of(&config)?;
        config.sandbox = config.raw_sandbox.validate()?;
        for (name, agent) in &config.agents {
            if let Some(k) = &agent.sandbox {
                SandboxKind::parse(&format!("agents.{name}.sandbox"), k)?;
            }
        }
        for (name, table) in std::mem::take(&mut config.runner_tables) {
            octl_proto::ids::validate_node_id("runner name", &name)?;
            let runner = table.typed(&name)?;
            config.runners.insert(name, runner);
        }
        let named = config
            .agents
            .iter()
            .filter_map(|(n, a)| Some((format!("agents.{n}.runner"), a.runner.as_ref()?)))
            .chain(
                config
                    .defaults
                    .runner
                    .iter()
                    .map(|r| ("defaults.runner".to_string(), r)),
            );
        for (field, runner) in named {
            config
                .runner(runner)
                .map_err(|e| AppError::invalid(format!("{field}: {}", e.message)))?;
        }
        Ok(config)
    }

    /// The runner named `name`: one of `[runners]`, or `local`.
    pub fn runner(&self, name: &str) -> Result<RunnerConfig, AppError> {
        match self.runners.get(name) {
            Some(r) => Ok(r.clone()),
            None if name == LOCAL_RUNNER => Ok(RunnerConfig::default()),
            None => {
                let mut known = vec![LOCAL_RUNNER];
                known.extend(
                    self.runners
                        .keys()
                        .map(String::as_str)
                        .filter(|n| *n != LOCAL_RUNNER),
                );
                Err(AppError::not_found(format!(
                    "no runner {name:?}; known: {}",
                    known.join(", ")
                ))
                .with_hint("define it as [runners.NAME] with kind = \"ssh\" or \"slurm\" in $OCTL_HOME/config.toml"))
            }
        }
    }

    /// The runner a node of `profile` uses: the one asked for (`--runner`, the manifest or the
    /// plan), else the profile's, else `[defaults] runner`, else `local`; checked to exist.
    pub fn resolve_runner(&self, asked: Option<&str>, profile: &str) -> Result<String, AppError> {
        let name = asked
            .map(str::to_string)
            .or_else(|| self.agents.get(profile).and_then(|a| a.runner.clone()))
            .or_else(|| self.defaults.runner.clone())
            .unwrap_or_else(|| LOCAL_RUNNER.to_string());
        self.runner(&name)?;
        Ok(name)
    }
}

impl RunnerTable {
    /// The typed runner, or why not, naming `runners.<name>.<field>`.
    fn typed(self, name: &str) -> Result<RunnerConfig, AppError> {
        self.validate(name)?;
        let lost_after_ms = self.lost_after_ms(name)?;
        Ok(match self.kind {
            RunnerKind::Local => RunnerConfig::Local,
            RunnerKind::Ssh => RunnerConfig::Ssh(SshConfig {
                hosts: self.hosts.unwrap_or_default(),
                slots: self.slots.unwrap_or(DEFAULT_SSH_SLOTS),
                pass_env: self.pass_env.unwrap_or_default(),
                lost_after_ms,
            }),
            RunnerKind::Slurm => RunnerConfig::Slurm(SlurmConfig {
                partition: self.partition,
                account: self.account,
                sbatch_args: self.sbatch_args.unwrap_or_default(),
                lost_after_ms,
            }),
        })
    }

    fn validate(&self, name: &str) -> Result<(), AppError> {
        let at = |field: &str| format!("runners.{name}.{field}");
        let kind = self.kind.as_str();
        let only = |field: &str, given: bool, for_kind: RunnerKind| {
            if given && self.kind != for_kind {
                Err(AppError::invalid(format!(
                    "{}: only for kind = \"{}\" (this runner is kind = \"{kind}\")",
                    at(field),
                    for_kind.as_str()
                )))
            } else {
                Ok(())
            }
        };
        only("hosts", self.hosts.is_some(), RunnerKind::Ssh)?;
        only("slots", self.slots.is_some(), RunnerKind::Ssh)?;
        only("partition", self.partition.is_some(), RunnerKind::Slurm)?;
        only("account", self.account.is_some(), RunnerKind::Slurm)?;
        only("sbatch_args", self.sbatch_args.is_some(), RunnerKind::Slurm)?;
        only("pass_env", self.pass_env.is_some(), RunnerKind::Ssh)?;
        if self.lost_after.is_some() && self.kind == RunnerKind::Local {
            return Err(AppError::invalid(format!(
                "{}: only for kind = \"ssh\" or \"slurm\" (this runner is kind = \"local\")",
                at("lost_after")
            )));
        }
        self.lost_after_ms(name)?;
        for v in self.pass_env.as_deref().unwrap_or_default() {
            let ok = !v.is_empty()
                && !v.starts_with(|c: char| c.is_ascii_digit())
                && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !ok {
                return Err(AppError::invalid(format!(
                    "{} entry {v:?}: the name of an environment variable (letters, digits, '_')",
                    at("pass_env")
                )));
            }
        }
        if name == LOCAL_RUNNER && self.kind != RunnerKind::Local {
            return Err(AppError::invalid(format!(
                "{}: the runner named local is this machine's tmux server; give yours another name",
                at("kind")
            )));
        }
        // Names and arguments go to ssh and sbatch as single arguments: one that starts with
        // '-' or holds whitespace would be read as options.
        let word =
            |s: &str| !s.is_empty() && !s.starts_with('-') && !s.chars().any(char::is_whitespace);
        if self.kind == RunnerKind::Ssh {
            let hosts = self.hosts.as_deref().unwrap_or_default();
            if hosts.is_empty() {
                return Err(AppError::invalid(format!(
                    "{}: missing; list the hosts as ssh names them, e.g. hosts = [\"build1\", \"me@build2\"]",
                    at("hosts")
                )));
            }
            if let Some(bad) = hosts.iter().find(|h| !word(h)) {
                return Err(AppError::invalid(format!(
                    "{} entry {bad:?}: a host as ssh names it (host, user@host or a Host of ~/.ssh/config), without spaces or a leading '-'",
                    at("hosts")
                )));
            }
            if self.slots == Some(0) {
                return Err(AppError::invalid(format!(
                    "{}: 0; give how many agents run at once on each host, at least 1",
                    at("slots")
                )));
            }
        }
        for (field, value) in [("partition", &self.partition), ("account", &self.account)] {
            if let Some(v) = value.as_deref().filter(|v| !word(v)) {
                return Err(AppError::invalid(format!(
                    "{} {v:?}: a Slurm {field} name, without spaces or a leading '-'",
                    at(field)
                )));
            }
        }
        for arg in self.sbatch_args.as_deref().unwrap_or_default() {
            let option = arg.split('=').next().unwrap_or_default();
            if !arg.starts_with('-') {
                return Err(AppError::invalid(format!(
                    "{} entry {arg:?}: one sbatch option per entry, with its value after '=', e.g. \"--time=04:00:00\"",
                    at("sbatch_args")
                )));
            }
            if SBATCH_OWNED.contains(&option) {
                let use_instead = match option {
                    "-p" | "--partition" => " (use partition)",
                    "-A" | "--account" => " (use account)",
                    _ => "",
                };
                return Err(AppError::invalid(format!(
                    "{} entry {arg:?}: the slurm runner sets {option} itself{use_instead}",
                    at("sbatch_args")
                )));
            }
        }
        Ok(())
    }

    /// `lost_after` in milliseconds, with its default; `name` is the runner's, for the error.
    fn lost_after_ms(&self, name: &str) -> Result<u64, AppError> {
        match &self.lost_after {
            Some(age) => octl_proto::time::parse_age(&format!("runners.{name}.lost_after"), age),
            None => Ok(DEFAULT_LOST_AFTER_MS),
        }
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
            ("[permissions]\nwait = \"0s\"\n", "permissions.wait"),
            (
                "[permissions]\ndeny = [\"Bash(\"]\n",
                "permissions.deny \"Bash(\"",
            ),
            (
                "[agents.claude.permissions]\nask = [\"not a rule\"]\n",
                "agents.claude.permissions.ask \"not a rule\"",
            ),
            (
                "[agents.codex.permissions]\nallow = [\"Bash\"]\n",
                "only the claude profile",
            ),
            ("[agents.claude.permissions]\nalow = [\"Bash\"]\n", "alow"),
            ("[permissions]\nwait = \"10\"\n", "permissions.wait"),
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

    fn refused(text: &str) -> String {
        Config::parse(text).unwrap_err().message
    }

    #[test]
    fn runners_parse_by_kind_and_resolve_by_precedence() {
        let c = Config::parse(
            "[defaults]\nrunner = \"big\"\n\
             [agents.aider]\nautonomous = [\"aider\", \"{prompt}\"]\nrunner = \"hpc\"\n\
             [runners.hpc]\nkind = \"slurm\"\npartition = \"agents\"\naccount = \"team\"\nsbatch_args = [\"--time=04:00:00\"]\n\
             [runners.big]\nkind = \"ssh\"\nhosts = [\"b1\", \"me@b2\"]\n",
        )
        .unwrap();
        let RunnerConfig::Slurm(hpc) = &c.runners["hpc"] else {
            panic!("{:?}", c.runners["hpc"])
        };
        assert_eq!(hpc.partition.as_deref(), Some("agents"));
        assert_eq!(hpc.sbatch_args, ["--time=04:00:00"]);
        let RunnerConfig::Ssh(big) = &c.runners["big"] else {
            panic!("{:?}", c.runners["big"])
        };
        assert_eq!(big.slots, DEFAULT_SSH_SLOTS);
        assert_eq!(c.runner("local").unwrap(), RunnerConfig::Local);
        // Asked > profile > defaults > local.
        assert_eq!(c.resolve_runner(Some("local"), "aider").unwrap(), "local");
        assert_eq!(c.resolve_runner(None, "aider").unwrap(), "hpc");
        assert_eq!(c.resolve_runner(None, "shell").unwrap(), "big");
        assert_eq!(
            Config::default().resolve_runner(None, "shell").unwrap(),
            "local"
        );
        let e = c.resolve_runner(Some("nope"), "shell").unwrap_err();
        assert!(
            e.message
                .contains("no runner \"nope\"; known: local, big, hpc"),
            "{}",
            e.message
        );
        // A runner without kind is local.
        assert_eq!(
            Config::parse("[runners.here]\n").unwrap().runners["here"],
            RunnerConfig::Local
        );
    }

    #[test]
    fn runner_errors_name_the_field_and_the_accepted_form() {
        let e = refused("[runners.x]\nkind = \"k8s\"\n");
        assert!(
            e.contains("local") && e.contains("ssh") && e.contains("slurm"),
            "{e}"
        );
        let e = refused("[runners.x]\nkind = \"ssh\"\n");
        assert!(e.contains("runners.x.hosts: missing"), "{e}");
        let e = refused("[runners.x]\nkind = \"ssh\"\nhosts = [\"-oProxyCommand=x\"]\n");
        assert!(e.contains("runners.x.hosts entry"), "{e}");
        let e = refused("[runners.x]\nkind = \"ssh\"\nhosts = [\"a\"]\nslots = 0\n");
        assert!(e.contains("runners.x.slots: 0"), "{e}");
        let e = refused("[runners.x]\nkind = \"ssh\"\nhosts = [\"a\"]\npartition = \"p\"\n");
        assert!(
            e.contains("runners.x.partition: only for kind = \"slurm\""),
            "{e}"
        );
        let e = refused("[runners.x]\nkind = \"slurm\"\nsbatch_args = [\"--job-name=a\"]\n");
        assert!(e.contains("sets --job-name itself"), "{e}");
        let e = refused("[runners.x]\nkind = \"slurm\"\nsbatch_args = [\"-p\", \"a\"]\n");
        assert!(e.contains("(use partition)"), "{e}");
        let e = refused("[runners.x]\nkind = \"slurm\"\nsbatch_args = [\"--time\", \"1:00\"]\n");
        assert!(
            e.contains("entry \"1:00\": one sbatch option per entry"),
            "{e}"
        );
        let e = refused("[runners.local]\nkind = \"slurm\"\n");
        assert!(e.contains("runners.local.kind"), "{e}");
        let e = refused("[runners.x]\nkind = \"slurm\"\nlost_after = \"10\"\n");
        assert!(e.contains("invalid runners.x.lost_after \"10\""), "{e}");
        let e = refused("[runners.x]\nlost_after = \"1m\"\n");
        assert!(e.contains("runners.x.lost_after: only for kind"), "{e}");
        let e = refused("[runners.x]\nkind = \"ssh\"\nhosts = [\"a\"]\npass_env = [\"A B\"]\n");
        assert!(e.contains("runners.x.pass_env entry \"A B\""), "{e}");
        let e = refused("[runners.x]\nkind = \"slurm\"\npass_env = [\"A\"]\n");
        assert!(
            e.contains("runners.x.pass_env: only for kind = \"ssh\""),
            "{e}"
        );
        let c = Config::parse(
            "[runners.x]\nkind = \"ssh\"\nhosts = [\"a\"]\nlost_after = \"30s\"\npass_env = [\"HOME\"]\n",
        )
        .unwrap();
        assert_eq!(c.runners["x"].lost_after_ms(), 30_000);
        assert_eq!(
            RunnerConfig::default().lost_after_ms(),
            DEFAULT_LOST_AFTER_MS
        );
        let e = refused("[runners.x]\nbogus = 1\n");
        assert!(e.contains("bogus"), "{e}");
        let e = refused("[agents.a]\nautonomous = [\"a\"]\nrunner = \"gone\"\n");
        assert!(e.contains("agents.a.runner: no runner \"gone\""), "{e}");
        let e = refused("[defaults]\nrunner = \"gone\"\n");
        assert!(e.contains("defaults.runner: no runner"), "{e}");
    }
}
