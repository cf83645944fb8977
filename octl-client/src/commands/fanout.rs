//! `fan-out --manifest FILE …` and `fan-out manifest`. The CLI only reads the file (resolved,
//! a regular file of at most 1 MiB, UTF-8) and sends its text with its format; the daemon
//! validates the content and reports every problem at once. The helpers shared with
//! `orchestrate` (reading the file, `--max-parallel`, the flags both take, `--wait`) live here.

use crate::commands::result_of;
use octl_proto::method::{self, Method};
use octl_proto::rpc::RunParams;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use octl_proto::ids::parse_run_ref;
use octl_proto::plan::{self, Format, MaxParallel};
use octl_proto::projection::RunSummary;
use octl_proto::rpc::FanoutParams;
use octl_proto::AppError;
use serde_json::Value;

use super::spawn::{repo_dir, validate_branch};
use super::{call, decode, Ctx};
use crate::follow::{report_wait, wait_run, Mode, Progress};
use crate::output::print_text;

/// The examples of `fan-out --help`.
pub const FANOUT_EXAMPLES: &str = "\
Examples:
  orchestratectl fan-out --manifest units.toml
  orchestratectl fan-out --manifest units.json --max-parallel 3 --agent shell --wait
  orchestratectl fan-out --manifest units.toml --max-parallel auto --gate 'cargo test'
  orchestratectl fan-out --manifest units.toml --max-budget-usd 20
  orchestratectl fan-out --manifest units.toml --runner cluster --max-parallel 24
  orchestratectl --json fan-out --manifest units.toml    # the run summary
  orchestratectl fan-out manifest                        # inside a unit's agent window

A manifest (units.toml):
  prompt = \"Port the {module} module to the new logging API; keep its tests green.\"
  [[units]]
  id = \"net\"
  vars = { module = \"net\" }
  [[units]]
  id = \"db\"
  vars = { module = \"db\" }";

#[derive(Debug, Args)]
pub struct FanOutArgs {
    #[command(subcommand)]
    pub cmd: Option<FanOutCmd>,

    #[command(flatten)]
    pub start: FanOutStartArgs,
}

#[derive(Debug, Args)]
pub struct FanOutStartArgs {
    /// The manifest: a .toml or .json file of at most 1 MiB (symlinks and '..' are resolved;
    /// its text is sent to the daemon, which keeps a copy in the run's directory)
    #[arg(long, value_name = "FILE", required = true)]
    pub manifest: Option<PathBuf>,

    #[command(flatten)]
    pub common: StartArgs,

    /// A shell command run in each unit's worktree after its agent reports done and before
    /// the merge (e.g. 'cargo test'); overrides the manifest's `gate`
    #[arg(long, value_name = "CMD")]
    pub gate: Option<String>,
}

/// The flags `fan-out` and `orchestrate` share.
#[derive(Debug, Args)]
pub struct StartArgs {
    /// At most this many agents alive at once: a number from 1 to 1000, `auto` (at most 32,
    /// each start admitted while the machine has memory for it: [limits] in config.toml), or
    /// `cluster` on a Slurm runner (the idle CPUs of its partition now over the CPUs a job
    /// asks); the number and what it came from are recorded in the run; default: auto
    #[arg(long, value_name = "N|auto|cluster")]
    pub max_parallel: Option<String>,

    /// The run's budget in USD: once its agents have cost this much no new node starts
    /// (`run show` says so); each Claude Code session gets what is left (--max-budget-usd)
    #[arg(long, value_name = "USD")]
    pub max_budget_usd: Option<f64>,

    /// The git repository to work in (any directory inside it); default: the current directory
    #[arg(long, value_name = "DIR")]
    pub repo: Option<PathBuf>,

    /// The branch to start from and to merge into; default: the repository's current branch
    #[arg(long, value_name = "BRANCH")]
    pub base: Option<String>,

    /// The agent profile for every unit or node that names none: `claude`, `shell`, or a
    /// profile [agents.NAME] from $OCTL_HOME/config.toml; default: the configured default
    #[arg(long, value_name = "PROFILE")]
    pub agent: Option<String>,

    /// Where the agents run: `local` (this machine's tmux server) or a runner [runners.NAME]
    /// of $OCTL_HOME/config.toml (kind ssh or slurm); over the manifest's `runner`, under a
    /// plan node's; default: each profile's `runner`, else [defaults] runner, else local
    #[arg(long, value_name = "NAME")]
    pub runner: Option<String>,
    #[command(flatten)]
    pub rules: super::spawn::RuleArgs,

    /// Each node, once done, waits for a person's review before it is gated and merged:
    /// `orchestratectl review RUN --node N --approve`, or `--comment …` to send it back
    #[arg(long)]
    pub review: bool,
    /// What the agents run in: `bwrap` (bubblewrap: each its worktree, its tools and its own
    /// node only; docs/SECURITY.md) or `none`; default: each profile's `sandbox`, else
    /// [sandbox] kind of $OCTL_HOME/config.toml, else none
    #[arg(long, value_name = "KIND")]
    pub sandbox: Option<octl_proto::sandbox::SandboxKind>,

    /// Then wait like `run wait`: show progress until the run completes, fails, is cancelled
    /// or waits for a human, and exit as `run wait` does (0 completed, 4 otherwise)
    #[arg(long)]
    pub wait: bool,
}

#[derive(Debug, Subcommand)]
pub enum FanOutCmd {
    /// Print a fan-out run's manifest exactly as it was given (for the units' agents)
    ///
    /// Without --run, inside a unit's agent window, prints the file $OCTL_MANIFEST names
    /// (no daemon needed); otherwise asks the daemon for the manifest of --run, else $OCTL_RUN.
    #[command(after_help = "\
Examples:
  orchestratectl fan-out manifest                    # inside a unit's agent window
  orchestratectl fan-out manifest --run 01JDXJ5R
  orchestratectl --json fan-out manifest --run 01JDXJ5R   # {run, format, path, text}")]
    Manifest(FanOutManifestArgs),
}

#[derive(Debug, Args)]
pub struct FanOutManifestArgs {
    /// The fan-out run: a ULID or a unique prefix of at least 6 characters; default: the file
    /// $OCTL_MANIFEST names, else the run $OCTL_RUN (both set in every unit's window)
    #[arg(long, value_name = "RUN")]
    pub run: Option<String>,
}

/// The largest manifest or plan the CLI sends.
pub const MAX_INPUT_BYTES: u64 = 1024 * 1024;

pub async fn execute(ctx: &Ctx, args: FanOutArgs) -> Result<i32, AppError> {
    match args.cmd {
        Some(FanOutCmd::Manifest(m)) => manifest(ctx, m).await.map(|()| 0),
        None => start(ctx, args.start).await,
    }
}

// ---------------------------------------------------------------------------------------------
// Shared with `orchestrate`.

/// A manifest or plan read from disk: its absolute, resolved path, its format and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputFile {
    pub path: String,
    pub format: Format,
    pub text: String,
}

/// Reads `given` (relative to `cwd`) for `flag`: resolves symlinks and `..`; refuses a
/// missing file (`not_found`), a directory or anything but a regular file, a name that is
/// neither .toml nor .json, more than 1 MiB, and text that is not UTF-8 (`invalid_params`).
/// The format comes from the name as given, else from the name the symlinks lead to.
pub fn read_input_file(flag: &str, given: &Path, cwd: &Path) -> Result<InputFile, AppError> {
    let shown = given.display().to_string();
    if given.as_os_str().is_empty() {
        return Err(AppError::invalid(format!(
            "invalid {flag} \"\": give the path of a .toml or .json file"
        )));
    }
    let path = cwd.join(given);
    let canonical = std::fs::canonicalize(&path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            AppError::not_found(format!("invalid {flag} {shown:?}: no such file"))
        } else {
            AppError::invalid(format!("invalid {flag} {shown:?}: {e}"))
        }
    })?;
    let meta = std::fs::metadata(&canonical)
        .map_err(|e| AppError::invalid(format!("invalid {flag} {shown:?}: {e}")))?;
    if meta.is_dir() {
        return Err(AppError::invalid(format!(
            "invalid {flag} {shown:?}: it is a directory; give a .toml or .json file"
        )));
    }
    if !meta.is_file() {
        return Err(AppError::invalid(format!(
            "invalid {flag} {shown:?}: not a regular file; give a .toml or .json file"
        )));
    }
    let format = Format::from_path(&given.to_string_lossy())
        .or_else(|_| Format::from_path(&canonical.to_string_lossy()))
        .map_err(|_| {
            AppError::invalid(format!(
                "invalid {flag} {shown:?}: the format comes from the extension, and it is neither .toml nor .json"
            ))
            .with_hint("rename the file to end in .toml or .json")
        })?;
    let too_large = |size: u64| {
        AppError::invalid(format!(
            "invalid {flag} {shown:?}: it has {size} bytes; the limit is {MAX_INPUT_BYTES} bytes (1 MiB)"
        ))
    };
    if meta.len() > MAX_INPUT_BYTES {
        return Err(too_large(meta.len()));
    }
    let file = std::fs::File::open(&canonical)
        .map_err(|e| AppError::invalid(format!("invalid {flag} {shown:?}: {e}")))?;
    let mut bytes = Vec::new();
    // Bounded even if the file grows after the size check.
    file.take(MAX_INPUT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| AppError::invalid(format!("invalid {flag} {shown:?}: {e}")))?;
    if bytes.len() as u64 > MAX_INPUT_BYTES {
        return Err(too_large(bytes.len() as u64));
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        AppError::invalid(format!(
            "invalid {flag} {shown:?}: not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        ))
    })?;
    let path = canonical.into_os_string().into_string().map_err(|p| {
        AppError::invalid(format!(
            "invalid {flag} {:?}: the path is not valid UTF-8, which the daemon cannot take",
            PathBuf::from(p).display().to_string()
        ))
    })?;
    Ok(InputFile { path, format, text })
}

/// Parses `--max-parallel` (a number from 1 to 1000, `auto` or `cluster`) by the daemon's own rule.
pub fn parse_max_parallel(given: &str) -> Result<MaxParallel, AppError> {
    plan::parse_max_parallel(given)
        .map_err(|e| e.with_hint("auto starts as many as the machine has memory for (at most 32)"))
}

/// The checked flags that `fan-out` and `orchestrate` share.
#[derive(Debug, Clone, PartialEq)]
pub struct CommonParams {
    pub repo: String,
    pub base: Option<String>,
    pub agent: Option<String>,
    pub runner: Option<String>,
    pub max_parallel: Option<MaxParallel>,
    pub max_budget_usd: Option<f64>,
    pub permissions: octl_proto::rules::PermissionRules,
    pub review: bool,
    pub sandbox: Option<octl_proto::sandbox::SandboxKind>,
}

/// Checks `--repo`, `--base`, `--agent`, `--max-parallel` as `spawn` does.
pub fn common_params(args: &StartArgs, cwd: &Path) -> Result<CommonParams, AppError> {
    let max_parallel = args
        .max_parallel
        .as_deref()
        .map(parse_max_parallel)
        .transpose()?;
    let repo = repo_dir(args.repo.as_deref(), cwd)?;
    if let Some(base) = &args.base {
        validate_branch("--base", base)?;
    }
    if let Some(agent) = &args.agent {
        octl_proto::ids::validate_node_id("--agent", agent).map_err(|e| {
            e.with_hint("built-in profiles are `claude` and `shell`; others are [agents.NAME] in $OCTL_HOME/config.toml")
        })?;
    }
    octl_proto::rpc::check_budget("--max-budget-usd", args.max_budget_usd)?;
    if let Some(runner) = &args.runner {
        super::spawn::validate_runner(runner)?;
    }
    Ok(CommonParams {
        repo,
        base: args.base.clone(),
        agent: args.agent.clone(),
        runner: args.runner.clone(),
        max_parallel,
        max_budget_usd: args.max_budget_usd,
        permissions: args.rules.rules()?,
        review: args.review,
        sandbox: args.sandbox,
    })
}

/// The working directory, or an error saying to pass `--repo`.
pub fn current_dir() -> Result<PathBuf, AppError> {
    std::env::current_dir().map_err(|e| {
        AppError::invalid(format!("cannot read the current directory: {e}"))
            .with_hint("run it from a directory that exists, or pass --repo DIR")
    })
}

/// How many nodes a run summary counts.
pub fn node_total(s: &RunSummary) -> usize {
    s.nodes.values().sum()
}

/// Prints what was started, and with `--wait` follows the run like `run wait`: in human mode
/// the started text first, then progress; the result is the final run summary.
pub async fn started(
    ctx: &Ctx,
    method: &str,
    value: Value,
    wait: bool,
    text: impl FnOnce(&RunSummary) -> String,
) -> Result<i32, AppError> {
    let summary: RunSummary = decode(method, &value)?;
    if !wait {
        ctx.out.result(&value, || text(&summary));
        return Ok(0);
    }
    if !ctx.out.json {
        print_text(&text(&summary));
    }
    let mut progress = Progress::new(Mode::detect(ctx.out.json));
    let since = Some(summary.last_seq);
    let detail = wait_run(ctx, &summary.id, since, None, &mut progress).await?;
    Ok(report_wait(ctx, &detail.manifest, &detail))
}

// ---------------------------------------------------------------------------------------------
// fan-out --manifest FILE

/// Builds the `fanout.start` params from the flags: the file's text, format and resolved path,
/// and the checked flags (what was not given is not sent).
pub fn fanout_params(args: &FanOutStartArgs, cwd: &Path) -> Result<FanoutParams, AppError> {
    let Some(manifest) = args.manifest.as_deref() else {
        return Err(AppError::invalid(
            "missing --manifest: give the manifest file (.toml or .json)",
        )
        .with_hint("see `orchestratectl fan-out --help` for its form and an example"));
    };
    // The flags first: they are cheap to check and say more than a file error.
    let common = common_params(&args.common, cwd)?;
    if args.gate.as_deref().is_some_and(|g| g.trim().is_empty()) {
        return Err(AppError::invalid(
            "invalid --gate \"\": give a shell command such as 'cargo test', or leave --gate out",
        ));
    }
    let file = read_input_file("--manifest", manifest, cwd)?;
    Ok(FanoutParams {
        manifest: file.text,
        format: file.format.as_str().to_string(),
        manifest_path: Some(file.path),
        repo: common.repo,
        base: common.base,
        agent: common.agent,
        gate: args.gate.clone(),
        max_parallel: common.max_parallel,
        max_budget_usd: common.max_budget_usd,
        runner: common.runner,
        permissions: common.permissions,
        review: common.review,
        sandbox: common.sandbox,
    })
}

async fn start(ctx: &Ctx, args: FanOutStartArgs) -> Result<i32, AppError> {
    let params = fanout_params(&args, &current_dir()?)?;
    let value = call::<method::FanoutStart>(ctx, &params).await?;
    started(
        ctx,
        method::FanoutStart::NAME,
        value,
        args.common.wait,
        fanout_text,
    )
    .await
}

/// ```text
/// Started fan-out run 01…: 20 units, at most 3 at once
///   follow it: orchestratectl run watch 01…   wait: orchestratectl run wait 01…
/// ```
pub fn fanout_text(s: &RunSummary) -> String {
    let cap = s
        .settings
        .max_parallel
        .map_or_else(|| "?".to_string(), |n| n.to_string());
    let n = node_total(s);
    let units = if n == 1 { "unit" } else { "units" };
    format!(
        "Started fan-out run {id}: {n} {units}, at most {cap} at once\n  follow it: orchestratectl run watch {id}   wait: orchestratectl run wait {id}\n",
        id = s.id
    )
}

// ---------------------------------------------------------------------------------------------
// fan-out manifest

pub use octl_proto::rpc::ManifestDoc;

/// Where `fan-out manifest` takes the manifest from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ManifestSource {
    /// The file `$OCTL_MANIFEST` names (no daemon needed).
    File(PathBuf),
    /// The daemon, for this run.
    Run(String),
}

/// `--run` wins; else `$OCTL_MANIFEST`; else `$OCTL_RUN`.
pub fn manifest_source(
    run_flag: Option<&str>,
    octl_manifest: Option<&str>,
    octl_run: Option<&str>,
) -> Result<ManifestSource, AppError> {
    if let Some(run) = run_flag {
        return Ok(ManifestSource::Run(
            parse_run_ref("--run", run)?.as_str().to_string(),
        ));
    }
    if let Some(path) = octl_manifest.filter(|p| !p.is_empty()) {
        return Ok(ManifestSource::File(PathBuf::from(path)));
    }
    if let Some(run) = octl_run.filter(|r| !r.is_empty()) {
        return Ok(ManifestSource::Run(
            parse_run_ref("OCTL_RUN", run)?.as_str().to_string(),
        ));
    }
    Err(AppError::invalid(
        "missing --run: give --run RUN, or run it inside a unit's agent window (where OCTL_MANIFEST and OCTL_RUN are set)",
    )
    .with_hint("list fan-out runs with `orchestratectl run list`"))
}

async fn manifest(ctx: &Ctx, args: FanOutManifestArgs) -> Result<(), AppError> {
    let env = |k: &str| std::env::var(k).ok();
    let source = manifest_source(
        args.run.as_deref(),
        env("OCTL_MANIFEST").as_deref(),
        env("OCTL_RUN").as_deref(),
    )?;
    let (value, doc) = match source {
        ManifestSource::Run(run) => {
            let value = call::<method::FanoutManifest>(ctx, &RunParams { run }).await?;
            let doc = result_of::<method::FanoutManifest>(&value)?;
            (value, doc)
        }
        ManifestSource::File(path) => {
            let file = read_input_file("OCTL_MANIFEST", &path, &current_dir()?)?;
            let doc = ManifestDoc {
                run: env("OCTL_RUN").filter(|r| !r.is_empty()),
                format: file.format.as_str().to_string(),
                path: file.path,
                text: file.text,
            };
            let value = serde_json::to_value(&doc).expect("a manifest always serializes");
            (value, doc)
        }
    };
    if ctx.out.json {
        ctx.out.result(&value, String::new);
    } else {
        // Exactly as given: no newline added.
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(doc.text.as_bytes());
        let _ = out.flush();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn start_args(manifest: &str) -> FanOutStartArgs {
        FanOutStartArgs {
            manifest: Some(manifest.into()),
            common: StartArgs {
                max_parallel: None,
                max_budget_usd: None,
                repo: None,
                base: None,
                agent: None,
                runner: None,
                rules: Default::default(),
                review: false,
                sandbox: None,
                wait: false,
            },
            gate: None,
        }
    }

    use octl_proto::ErrorKind;

    #[test]
    fn max_parallel_is_a_number_from_1_to_1000_or_auto() {
        assert_eq!(parse_max_parallel("auto").unwrap(), MaxParallel::Auto);
        assert_eq!(parse_max_parallel(" 4 ").unwrap(), MaxParallel::N(4));
        assert_eq!(parse_max_parallel("AUTO").unwrap(), MaxParallel::Auto);
        assert_eq!(parse_max_parallel("1").unwrap(), MaxParallel::N(1));
        assert_eq!(parse_max_parallel("1000").unwrap(), MaxParallel::N(1000));
        for bad in ["0", "1001", "-1", "3.5", "", "many", "1e3"] {
            let err = parse_max_parallel(bad).unwrap_err();
            assert_eq!(err.kind.exit_code(), 2, "{bad}");
            assert!(
                err.message.starts_with(&format!(
                    "invalid --max-parallel {bad:?}: use a number from 1 to 1000, auto, or cluster"
                )),
                "{}",
                err.message
            );
        }
        assert_eq!(
            serde_json::to_value(MaxParallel::Auto).unwrap(),
            json!("auto")
        );
        assert_eq!(serde_json::to_value(MaxParallel::N(3)).unwrap(), json!(3));
    }

    #[test]
    fn input_files_are_resolved_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("sub")).unwrap();
        std::fs::write(root.join("sub/units.toml"), "prompt = \"x\"\n").unwrap();
        std::os::unix::fs::symlink(root.join("sub/units.toml"), root.join("link.toml")).unwrap();

        let f = read_input_file("--manifest", Path::new("sub/../sub/units.toml"), &root).unwrap();
        assert_eq!(f.path, root.join("sub/units.toml").to_str().unwrap());
        assert_eq!(f.format, Format::Toml);
        assert_eq!(f.text, "prompt = \"x\"\n");
        let f = read_input_file("--manifest", Path::new("link.toml"), &root).unwrap();
        assert_eq!(f.path, root.join("sub/units.toml").to_str().unwrap());

        // The format follows the name given, else where the link leads.
        std::fs::write(root.join("blob"), "{}").unwrap();
        std::os::unix::fs::symlink(root.join("blob"), root.join("plan.json")).unwrap();
        let f = read_input_file("--plan", Path::new("plan.json"), &root).unwrap();
        assert_eq!((f.format, f.text.as_str()), (Format::Json, "{}"));
        std::os::unix::fs::symlink(root.join("sub/units.toml"), root.join("noext")).unwrap();
        assert_eq!(
            read_input_file("--plan", Path::new("noext"), &root)
                .unwrap()
                .format,
            Format::Toml
        );
        let err = read_input_file("--manifest", Path::new("blob"), &root).unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidParams);
        assert!(
            err.message.contains("neither .toml nor .json"),
            "{}",
            err.message
        );

        let err = read_input_file("--manifest", Path::new("nope.toml"), &root).unwrap_err();
        assert_eq!(err.kind, ErrorKind::NotFound);
        assert_eq!(err.kind.exit_code(), 3);
        assert_eq!(
            err.message,
            "invalid --manifest \"nope.toml\": no such file"
        );

        std::fs::create_dir(root.join("dir.toml")).unwrap();
        let err = read_input_file("--manifest", Path::new("dir.toml"), &root).unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidParams);
        assert!(err.message.contains("is a directory"), "{}", err.message);

        let big = vec![b'#'; MAX_INPUT_BYTES as usize + 1];
        std::fs::write(root.join("big.toml"), &big).unwrap();
        let err = read_input_file("--manifest", Path::new("big.toml"), &root).unwrap_err();
        assert_eq!(err.kind.exit_code(), 2);
        assert!(err.message.contains("1 MiB"), "{}", err.message);
        std::fs::write(root.join("max.toml"), &big[1..]).unwrap();
        read_input_file("--manifest", Path::new("max.toml"), &root).unwrap();

        std::fs::write(root.join("bin.json"), b"{\"a\":\"\xff\"}").unwrap();
        let err = read_input_file("--manifest", Path::new("bin.json"), &root).unwrap_err();
        assert!(err.message.contains("not UTF-8"), "{}", err.message);

        let err = read_input_file("--manifest", Path::new(""), &root).unwrap_err();
        assert_eq!(err.kind.exit_code(), 2);
    }

    #[test]
    fn fanout_params_carry_the_text_and_only_what_was_given() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let text = "prompt = \"do {x}\"\n[[units]]\nid = \"a\"\nvars = { x = \"1\" }\n";
        std::fs::write(root.join("m.TOML"), text).unwrap();
        let params = |a: &FanOutStartArgs| {
            serde_json::to_value(fanout_params(a, &root)?)
                .map_err(|e| AppError::internal(e.to_string()))
        };
        let p = params(&start_args("m.TOML")).unwrap();
        assert_eq!(
            p,
            json!({"manifest": text, "format": "toml",
                   "manifest_path": root.join("m.TOML").to_str().unwrap(),
                   "repo": root.to_str().unwrap()})
        );
        let mut a = start_args("m.TOML");
        a.common.max_parallel = Some("auto".into());
        a.common.base = Some("main".into());
        a.common.agent = Some("shell".into());
        a.gate = Some("make test".into());
        let p = params(&a).unwrap();
        assert_eq!(p["max_parallel"], "auto");
        assert_eq!(p["base"], "main");
        assert_eq!(p["agent"], "shell");
        assert_eq!(p["gate"], "make test");
        a.common.max_parallel = Some("8".into());
        assert_eq!(params(&a).unwrap()["max_parallel"], 8);

        a.common.max_parallel = Some("0".into());
        let err = fanout_params(&a, &root).unwrap_err();
        assert!(
            err.message.starts_with("invalid --max-parallel"),
            "{}",
            err.message
        );
        let mut a = start_args("m.TOML");
        a.gate = Some(" ".into());
        assert!(fanout_params(&a, &root)
            .unwrap_err()
            .message
            .starts_with("invalid --gate"));
        let mut a = start_args("m.TOML");
        a.manifest = None;
        assert!(fanout_params(&a, &root)
            .unwrap_err()
            .message
            .starts_with("missing --manifest"));
    }

    fn summary(settings: Value, nodes: Value) -> RunSummary {
        serde_json::from_value(json!({
            "id": "01JDXJ5R8Q4M0ZK7P2W9TB3C6E", "kind": "fanout", "status": "active",
            "title": null, "repo": "/r", "base": "main", "created_at": "t", "updated_at": "t",
            "nodes": nodes, "last_seq": 21, "settings": settings
        }))
        .unwrap()
    }

    #[test]
    fn the_started_text() {
        let s = summary(
            json!({"max_parallel": 3}),
            json!({"pending": 17, "starting": 3}),
        );
        assert_eq!(
            fanout_text(&s),
            "Started fan-out run 01JDXJ5R8Q4M0ZK7P2W9TB3C6E: 20 units, at most 3 at once\n  follow it: orchestratectl run watch 01JDXJ5R8Q4M0ZK7P2W9TB3C6E   wait: orchestratectl run wait 01JDXJ5R8Q4M0ZK7P2W9TB3C6E\n"
        );
        let s = summary(json!({}), json!({"pending": 1}));
        assert!(fanout_text(&s).contains(": 1 unit, at most ? at once"));
    }

    #[test]
    fn where_the_manifest_comes_from() {
        assert_eq!(
            manifest_source(Some("01jdxj5r"), Some("/m.toml"), Some("01AAAAAA")).unwrap(),
            ManifestSource::Run("01JDXJ5R".into())
        );
        assert_eq!(
            manifest_source(None, Some("/m.toml"), Some("01AAAAAA")).unwrap(),
            ManifestSource::File("/m.toml".into())
        );
        assert_eq!(
            manifest_source(None, Some(""), Some("01aaaaaa")).unwrap(),
            ManifestSource::Run("01AAAAAA".into())
        );
        let err = manifest_source(None, None, None).unwrap_err();
        assert_eq!(err.kind.exit_code(), 2);
        assert!(err.message.starts_with("missing --run"), "{}", err.message);
        let err = manifest_source(Some("../x"), None, None).unwrap_err();
        assert!(err.message.starts_with("invalid --run"), "{}", err.message);
    }
}
