//! `spawn spinoff|code TASK`: one agent in its own worktree and branch. The flags are checked
//! here (the daemon checks again and finds the repository's top level); `--wait` then follows
//! the run exactly like `run wait`.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use octl_proto::ids::validate_node_id;
use octl_proto::method::{self, Method};
use octl_proto::rpc::{SpawnParams, Spawned};
use octl_proto::rules::PermissionRules;
use octl_proto::{AppError, NodeState};

use super::Ctx;
use crate::follow::{report_wait, wait_run, Mode, Progress};

/// The examples of `spawn --help`.
pub const SPAWN_EXAMPLES: &str = "\
Examples:
  orchestratectl spawn spinoff 'fix the typo in README.md'
  orchestratectl spawn code 'add pagination to /users' --node pagination
  orchestratectl spawn spinoff --agent shell 'date > now.txt' --wait";

#[derive(Debug, Subcommand)]
pub enum SpawnCmd {
    /// Start an autonomous agent in a new worktree; when it reports done, its branch is merged
    /// into base and its window, worktree and branch are removed
    ///
    /// Creates a run of kind `spinoff` with one node, the branch octl/<RUN>/<NODE> from the tip
    /// of base, the worktree $OCTL_HOME/worktrees/<RUN>/<NODE>, and a window on the daemon's
    /// private tmux server running the agent. Prints the run and where its work happens.
    #[command(after_help = "\
Examples:
  orchestratectl spawn spinoff 'fix the off-by-one in src/page.rs; add a test'
  orchestratectl spawn spinoff --node typo --gate 'cargo test' 'fix the typo in src/net.rs'
  orchestratectl spawn spinoff --max-budget-usd 2 'port the parser to nom 8'
  orchestratectl spawn spinoff --agent shell 'printf hi > hi.txt' --wait
  orchestratectl spawn spinoff --runner cluster 'fix the flaky test in tests/net.rs'
  orchestratectl spawn spinoff --task-file task.md       # a long task, sent as written
  generate-task | orchestratectl spawn spinoff --task-file -
  orchestratectl spawn spinoff -- '-x is a task starting with a dash'")]
    Spinoff(SpawnArgs),

    /// Start an interactive agent in a new worktree, for a human to attach to, review and merge
    ///
    /// Like `spawn spinoff`, but nothing is merged by itself: attach with
    /// `orchestratectl run attach RUN`, and merge with `orchestratectl merge RUN` when the work
    /// is ready (the run waits for that once the agent reports done).
    #[command(after_help = "\
Examples:
  orchestratectl spawn code 'refactor the config loader'
  orchestratectl spawn code --repo ~/src/api --base develop --node loader 'split config.rs'
  orchestratectl spawn code --task-file notes/settings-page.md
  orchestratectl spawn code --agent gemini 'add a /health route'   # also codex, opencode
  orchestratectl run attach 01JDXJ5R          # then, when the work is ready:
  orchestratectl merge 01JDXJ5R")]
    Code(SpawnArgs),
}

#[derive(Debug, Args)]
pub struct SpawnArgs {
    /// What the agent should do: its prompt (for `--agent shell`, a shell script run in the
    /// worktree). Sent exactly as given; put `--` before it if it starts with a dash. At most
    /// 32 KiB (32768 bytes) of UTF-8; or give it with --task-file
    #[arg(
        value_name = "TASK",
        required_unless_present = "task_file",
        conflicts_with = "task_file"
    )]
    pub task: Option<String>,

    /// Read the task from this file, or from standard input with `-`, instead of TASK: sent
    /// exactly as read, at most 32 KiB (32768 bytes) of UTF-8
    #[arg(long, value_name = "PATH|-")]
    pub task_file: Option<PathBuf>,

    /// The git repository to work in (any directory inside it); default: the current directory
    #[arg(long, value_name = "DIR")]
    pub repo: Option<PathBuf>,

    /// The branch to start from and to merge into; default: the repository's current branch
    #[arg(long, value_name = "BRANCH")]
    pub base: Option<String>,

    /// The agent profile: `claude`, `shell`, `codex`, `gemini`, `opencode`, `aider`
    /// (autonomous only), or a profile [agents.NAME] from $OCTL_HOME/config.toml; default:
    /// the configured default, else `claude`
    #[arg(long, value_name = "PROFILE")]
    pub agent: Option<String>,

    /// The node's name, also the end of its branch name (1-63 of a-z, 0-9 and '-');
    /// default: chosen by the daemon
    #[arg(long, value_name = "NAME")]
    pub node: Option<String>,

    /// A shell command run in the worktree after the agent reports done and before the merge
    /// (e.g. 'cargo test'); if it fails the node fails and its branch is kept
    #[arg(long, value_name = "CMD")]
    pub gate: Option<String>,

    /// What the run's agent may spend, in USD (Claude Code's --max-budget-usd); the run
    /// shows its cost in `run list`
    #[arg(long, value_name = "USD")]
    pub max_budget_usd: Option<f64>,
    /// Where the agent runs: `local` (this machine's tmux server) or a runner
    /// [runners.NAME] of $OCTL_HOME/config.toml (kind ssh or slurm); default: the profile's
    /// `runner`, else [defaults] runner, else local
    #[arg(long, value_name = "NAME")]
    pub runner: Option<String>,
    #[command(flatten)]
    pub rules: RuleArgs,

    /// (spinoff) Once done, the node waits for a person's review before it is gated and
    /// merged: `orchestratectl review RUN --approve`, or `--comment …` to send it back (a
    /// code run's node always waits for a person)
    #[arg(long)]
    pub review: bool,
    /// What the agent runs in: `bwrap` (bubblewrap: its worktree, its tools and its own node
    /// only; docs/SECURITY.md) or `none` (the user's whole account); default: the profile's
    /// `sandbox`, else [sandbox] kind of $OCTL_HOME/config.toml, else none
    #[arg(long, value_name = "KIND")]
    pub sandbox: Option<octl_proto::sandbox::SandboxKind>,

    /// Best of N: N attempts (2 to 10) at the task, each in its own worktree (nodes
    /// NODE-1 … NODE-N) and gated; a judge ranks those that passed, the best merges (waits for
    /// `merge` in a code run), the others are kept under their snapshot refs (`recover`)
    #[arg(long, value_name = "N")]
    pub attempts: Option<u32>,

    /// With --attempts: spread the attempts over these profiles, in turn (`claude,codex`)
    #[arg(long, value_name = "PROFILES", value_delimiter = ',')]
    pub agents: Vec<String>,

    /// With --attempts: who ranks them — `builtin` (default: smallest diff, then fewest files,
    /// cheapest, fastest; see --rank), `command` (--judge-command) or `human` (`pick`)
    #[arg(long, value_name = "JUDGE")]
    pub judge: Option<String>,

    /// With --attempts: a shell command that gets the task and every passing attempt's diff as
    /// JSON on stdin and answers {"ranking": [NODE, …], "reasons": [TEXT, …]} (asked once more
    /// after a malformed answer; then a person picks)
    #[arg(long, value_name = "CMD")]
    pub judge_command: Option<String>,

    /// With --attempts: the first attempt that passes its gate wins and the others stop
    #[arg(long)]
    pub first_passing: bool,

    /// With --attempts: at most N attempts alive at once (default: all)
    #[arg(long, value_name = "N")]
    pub max_parallel: Option<u64>,

    /// With --attempts: the built-in judge's criteria in order (`diff,files,cost,time`)
    #[arg(long, value_name = "CRITERIA", value_delimiter = ',')]
    pub rank: Vec<String>,

    /// Then wait like `run wait`: show progress until the run completes, fails, is cancelled
    /// or waits for a human, and exit as `run wait` does (0 completed, 4 otherwise)
    #[arg(long)]
    pub wait: bool,
}

/// The two kinds of spawn: the RPC method and the word shown to people.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpawnKind {
    Spinoff,
    Code,
}

impl SpawnKind {
    pub fn method(self) -> &'static str {
        match self {
            SpawnKind::Spinoff => method::SpawnSpinoff::NAME,
            SpawnKind::Code => method::SpawnCode::NAME,
        }
    }

    pub fn word(self) -> &'static str {
        match self {
            SpawnKind::Spinoff => "spinoff",
            SpawnKind::Code => "code",
        }
    }
}

pub async fn execute(ctx: &Ctx, cmd: SpawnCmd) -> Result<i32, AppError> {
    let (kind, args) = match cmd {
        SpawnCmd::Spinoff(args) => (SpawnKind::Spinoff, args),
        SpawnCmd::Code(args) => (SpawnKind::Code, args),
    };
    let cwd = std::env::current_dir().map_err(|e| {
        AppError::invalid(format!("cannot read the current directory: {e}"))
            .with_hint("run it from a directory that exists, or pass --repo DIR")
    })?;
    let params = spawn_params(&args, &cwd)?;
    let spawned = spawn(ctx, kind, &params).await?;
    if !args.wait {
        ctx.out.result(&spawned, || spawned_text(kind, &spawned));
        return Ok(0);
    }
    if !ctx.out.json {
        crate::output::print_text(&spawned_text(kind, &spawned));
    }
    let run = spawned.run.id.clone();
    let node = spawned.node.as_ref().map(|n| n.id.clone());
    let mut progress = Progress::new(Mode::detect(ctx.out.json));
    let detail = wait_run(ctx, &run, Some(spawned.run.last_seq), None, &mut progress).await?;
    // One document with --json: the final run summary and its node, as `spawn` prints them.
    let doc = Spawned {
        run: detail.manifest.clone(),
        node: detail
            .nodes
            .iter()
            .find(|n| Some(&n.id) == node.as_ref())
            .map(|n| n.node.clone())
            .or(spawned.node),
    };
    Ok(report_wait(ctx, &doc, &detail))
}

/// Sends a spawn request (also used by `demo`): the new run and its node.
pub async fn spawn(ctx: &Ctx, kind: SpawnKind, params: &SpawnParams) -> Result<Spawned, AppError> {
    match kind {
        SpawnKind::Spinoff => ctx.client.call_method::<method::SpawnSpinoff>(params).await,
        SpawnKind::Code => ctx.client.call_method::<method::SpawnCode>(params).await,
    }
}

/// Builds `{task, repo, base?, agent?, node?, gate?}` from the flags, checking each one.
/// `repo` is made absolute and canonical (default: `cwd`); the task is sent as given.
pub fn spawn_params(args: &SpawnArgs, cwd: &Path) -> Result<SpawnParams, AppError> {
    let task = crate::text_file::text_or_file(
        "--task-file",
        args.task.clone(),
        args.task_file.as_deref(),
        octl_proto::plan::MAX_TASK_BYTES,
    )?
    .unwrap_or_default();
    if task.trim().is_empty() {
        return Err(AppError::invalid(
            "invalid TASK: it is empty; say what the agent should do (for --agent shell: the script to run)",
        ));
    }
    let repo = repo_dir(args.repo.as_deref(), cwd)?;
    if let Some(base) = &args.base {
        validate_branch("--base", base)?;
    }
    if let Some(agent) = &args.agent {
        validate_node_id("--agent", agent).map_err(|e| {
            e.with_hint("built-in profiles are `claude` and `shell`; others are [agents.NAME] in $OCTL_HOME/config.toml")
        })?;
    }
    if let Some(node) = &args.node {
        validate_node_id("--node", node)?;
    }
    if let Some(runner) = &args.runner {
        validate_runner(runner)?;
    }
    if args.gate.as_deref().is_some_and(|g| g.trim().is_empty()) {
        return Err(AppError::invalid(
            "invalid --gate \"\": give a shell command such as 'cargo test', or leave --gate out",
        ));
    }
    octl_proto::rpc::check_budget("--max-budget-usd", args.max_budget_usd)?;
    Ok(SpawnParams {
        task,
        repo,
        base: args.base.clone(),
        agent: args.agent.clone(),
        node: args.node.clone(),
        gate: args.gate.clone(),
        max_budget_usd: args.max_budget_usd,
        runner: args.runner.clone(),
        permissions: args.rules.rules()?,
        review: args.review,
        sandbox: args.sandbox,
        attempts: args.attempts,
        agents: args.agents.clone(),
        judge: args
            .judge
            .as_deref()
            .map(|j| {
                serde_json::from_value(serde_json::json!(j)).map_err(|_| {
                    AppError::invalid(format!(
                        "invalid --judge {j:?}; accepted: builtin, command, human"
                    ))
                })
            })
            .transpose()?,
        judge_command: args.judge_command.clone(),
        first_passing: args.first_passing,
        max_parallel: args.max_parallel,
        rank: args
            .rank
            .iter()
            .map(|c| octl_proto::event::Criterion::parse("--rank", c))
            .collect::<Result<_, _>>()?,
    })
}

/// `--allow`, `--ask`, `--deny`: the run's permission rules for its Claude Code agents.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RuleArgs {
    /// A tool call Claude Code may make without asking, in its rule syntax
    /// (`Bash(cargo test:*)`, `Edit(src/**)`); repeat for more; added to config.toml's
    /// [permissions] (docs/AGENTS.md, "Permission policy")
    #[arg(long, value_name = "RULE")]
    pub allow: Vec<String>,
    /// A tool call that is asked (`node allow|deny`, the TUI inbox) even where a rule allows it;
    /// repeat for more
    #[arg(long, value_name = "RULE")]
    pub ask: Vec<String>,
    /// A tool call refused without asking, whatever else allows it; repeat for more
    #[arg(long, value_name = "RULE")]
    pub deny: Vec<String>,
}

impl RuleArgs {
    /// The rules, each checked (a message names the flag and the rule).
    pub fn rules(&self) -> Result<PermissionRules, AppError> {
        let rules = PermissionRules {
            allow: self.allow.clone(),
            ask: self.ask.clone(),
            deny: self.deny.clone(),
        };
        rules.check("--")?;
        Ok(rules)
    }
}

/// `--runner NAME`: a runner's name, in node-id form (the daemon checks it is configured).
pub fn validate_runner(runner: &str) -> Result<(), AppError> {
    validate_node_id("--runner", runner).map_err(|e| {
        e.with_hint("`local` is this machine; others are [runners.NAME] in $OCTL_HOME/config.toml")
    })
}

/// The repository directory to send: `given` (relative to `cwd`) or `cwd`, canonical, UTF-8.
pub fn repo_dir(given: Option<&Path>, cwd: &Path) -> Result<String, AppError> {
    let path: PathBuf = match given {
        Some(p) if p.as_os_str().is_empty() => {
            return Err(AppError::invalid(
                "invalid --repo \"\": give a directory inside a git repository",
            ))
        }
        Some(p) => cwd.join(p),
        None => cwd.to_path_buf(),
    };
    let shown = given
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| path.display().to_string());
    let flag = if given.is_some() {
        "--repo"
    } else {
        "the current directory"
    };
    let canonical = std::fs::canonicalize(&path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            AppError::not_found(format!("invalid {flag} {shown:?}: no such directory"))
        } else {
            AppError::invalid(format!("invalid {flag} {shown:?}: {e}"))
        }
    })?;
    if !canonical.is_dir() {
        return Err(AppError::invalid(format!(
            "invalid {flag} {shown:?}: not a directory; give a directory inside a git repository"
        )));
    }
    canonical.into_os_string().into_string().map_err(|p| {
        AppError::invalid(format!(
            "invalid {flag} {:?}: the path is not valid UTF-8, which the daemon cannot take",
            PathBuf::from(p).display().to_string()
        ))
    })
}

/// A light check of a branch name (git check-ref-format's main rules); the daemon asks git.
pub fn validate_branch(field: &str, given: &str) -> Result<(), AppError> {
    let bad = given.is_empty()
        || given.starts_with('-')
        || given.starts_with('/')
        || given.ends_with('/')
        || given.ends_with('.')
        || given.ends_with(".lock")
        || given.contains("..")
        || given.contains("//")
        || given.contains("@{")
        || given == "@"
        || given.split('/').any(|c| c.starts_with('.'))
        || given
            .chars()
            .any(|c| c.is_control() || c.is_whitespace() || "~^:?*[\\".contains(c));
    if bad {
        return Err(AppError::invalid(format!(
            "invalid {field} {given:?}: give a branch name such as main or feature/login (no spaces, '..', '~^:?*[\\', leading '-' or '.')"
        )));
    }
    Ok(())
}

/// The human form of a spawn result:
/// ```text
/// Spawned spinoff run 01…: node api on branch octl/01…/api
///   worktree /home/u/.orchestratectl/worktrees/01…/api
///   follow it: orchestratectl run wait 01…   attach: orchestratectl run attach 01…
/// ```
pub fn spawned_text(kind: SpawnKind, spawned: &Spawned) -> String {
    let run = &spawned.run.id;
    let node = spawned.node.as_ref();
    let id = node.map_or("?", |n| n.id.as_str());
    let branch = node.and_then(|n| n.branch.as_deref()).unwrap_or("-");
    let mut text = format!(
        "Spawned {} run {run}: node {id} on branch {branch}\n",
        kind.word()
    );
    if let Some(worktree) = node.and_then(|n| n.worktree.as_deref()) {
        text.push_str(&format!("  worktree {worktree}\n"));
    }
    // No room on the machine for its agent yet: it starts by itself once there is.
    if node.is_some_and(|n| n.state == NodeState::Pending) {
        text.push_str(&format!(
            "  pending: it starts once the machine has room (what it waits for: orchestratectl run show {run})\n"
        ));
    }
    text.push_str(&format!(
        "  follow it: orchestratectl run wait {run}   attach: orchestratectl run attach {run}\n"
    ));
    if kind == SpawnKind::Code {
        text.push_str(&format!(
            "  when the work is ready: orchestratectl merge {run}\n"
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(task: &str) -> SpawnArgs {
        SpawnArgs {
            task: Some(task.into()),
            task_file: None,
            repo: None,
            base: None,
            agent: None,
            node: None,
            gate: None,
            max_budget_usd: None,
            runner: None,
            rules: RuleArgs::default(),
            review: false,
            sandbox: None,
            attempts: None,
            agents: Vec::new(),
            judge: None,
            judge_command: None,
            first_passing: false,
            max_parallel: None,
            rank: Vec::new(),
            wait: false,
        }
    }

    #[test]
    fn params_carry_the_task_untouched_and_omit_what_was_not_given() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path().canonicalize().unwrap();
        let task = "line 1\n  'quoted' \"double\" $HOME `tick` \\ ;\n-- --flag ünïcode\n";
        let p = spawn_params(&args(task), &cwd).unwrap();
        assert_eq!(
            serde_json::to_value(&p).unwrap(),
            json!({"task": task, "repo": cwd.to_str().unwrap()}),
            "nothing else is sent"
        );
        let mut a = args("x");
        a.base = Some("feature/login".into());
        a.agent = Some("shell".into());
        a.node = Some("api".into());
        a.gate = Some("cargo test".into());
        let p = serde_json::to_value(spawn_params(&a, &cwd).unwrap()).unwrap();
        assert_eq!(p["base"], "feature/login");
        assert_eq!(p["agent"], "shell");
        assert_eq!(p["node"], "api");
        assert_eq!(p["gate"], "cargo test");
    }

    #[test]
    fn repo_is_made_absolute_and_canonical() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("sub")).unwrap();
        std::os::unix::fs::symlink(root.join("sub"), root.join("link")).unwrap();
        let got = repo_dir(Some(Path::new("link/../sub")), &root).unwrap();
        assert_eq!(got, root.join("sub").to_str().unwrap());
        let got = repo_dir(Some(Path::new("link")), &root).unwrap();
        assert_eq!(got, root.join("sub").to_str().unwrap());
        assert_eq!(repo_dir(None, &root).unwrap(), root.to_str().unwrap());

        let err = repo_dir(Some(Path::new("nope")), &root).unwrap_err();
        assert_eq!(err.kind.exit_code(), 3);
        assert_eq!(err.message, "invalid --repo \"nope\": no such directory");
        std::fs::write(root.join("file"), "x").unwrap();
        let err = repo_dir(Some(Path::new("file")), &root).unwrap_err();
        assert_eq!(err.kind.exit_code(), 2);
        assert!(err.message.contains("not a directory"), "{}", err.message);
    }

    #[test]
    fn bad_flags_are_refused_before_anything_is_sent() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path();
        let err = spawn_params(&args("  \n"), cwd).unwrap_err();
        assert_eq!(err.kind.exit_code(), 2);
        assert!(err.message.starts_with("invalid TASK"), "{}", err.message);

        let mut a = args("x");
        a.node = Some("../x".into());
        let err = spawn_params(&a, cwd).unwrap_err();
        assert_eq!(
            err.message,
            "invalid --node \"../x\": use 1-63 of a-z, 0-9 and '-', starting with a letter or digit"
        );

        let mut a = args("x");
        a.agent = Some("Claude Code".into());
        let err = spawn_params(&a, cwd).unwrap_err();
        assert!(
            err.message.starts_with("invalid --agent"),
            "{}",
            err.message
        );

        for base in [
            "", "-x", "a..b", "a b", "a~1", "x.lock", "a/", ".hidden", "a/.b", "@",
        ] {
            let mut a = args("x");
            a.base = Some(base.into());
            let err = spawn_params(&a, cwd).unwrap_err();
            assert!(
                err.message.starts_with("invalid --base"),
                "{base}: {}",
                err.message
            );
        }
        for base in ["main", "feature/login", "release-1.2", "v2_x"] {
            validate_branch("--base", base).unwrap();
        }

        let mut a = args("x");
        a.gate = Some(" ".into());
        assert!(spawn_params(&a, cwd)
            .unwrap_err()
            .message
            .starts_with("invalid --gate"));
    }

    #[test]
    fn the_spawned_text() {
        let mut v = serde_json::to_value(crate::commands::run::tests::summary(
            "01JDXJ5R8Q4M0ZK7P2W9TB3C6E",
            None,
            json!({"starting": 1}),
        ))
        .unwrap();
        v["node"] = json!({"id": "api", "state": "starting", "branch": "octl/01JDXJ5R8Q4M0ZK7P2W9TB3C6E/api",
                     "worktree": "/h/worktrees/01JDXJ5R8Q4M0ZK7P2W9TB3C6E/api", "agent": "shell",
                     "deps": [], "created_at": "t", "updated_at": "t"});
        let v: Spawned = serde_json::from_value(v).unwrap();
        assert_eq!(
            spawned_text(SpawnKind::Spinoff, &v),
            "Spawned spinoff run 01JDXJ5R8Q4M0ZK7P2W9TB3C6E: node api on branch octl/01JDXJ5R8Q4M0ZK7P2W9TB3C6E/api\n  worktree /h/worktrees/01JDXJ5R8Q4M0ZK7P2W9TB3C6E/api\n  follow it: orchestratectl run wait 01JDXJ5R8Q4M0ZK7P2W9TB3C6E   attach: orchestratectl run attach 01JDXJ5R8Q4M0ZK7P2W9TB3C6E\n"
        );
        assert!(spawned_text(SpawnKind::Code, &v).ends_with(
            "  when the work is ready: orchestratectl merge 01JDXJ5R8Q4M0ZK7P2W9TB3C6E\n"
        ));
    }
}
