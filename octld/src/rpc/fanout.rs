//! `fanout.start`, `fanout.manifest`, and `orchestrate.start`: runs of many nodes from a file.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;

use octl_proto::event::settings::AutoParallel;
use octl_proto::event::{NodeAdded, RunCreated, RunSettings};
use octl_proto::method;
use octl_proto::plan::{self, Format, MaxParallel};
use octl_proto::projection::RunSummary;
use octl_proto::rpc::ManifestDoc;
use octl_proto::rpc::{FanoutParams, OrchestrateParams, RunParams};
use octl_proto::rules::PermissionRules;
use octl_proto::{ids, AppError, RunKind};

use super::Handle;
use crate::agents::Mode;
use crate::daemon::Daemon;
use crate::engine::{blocking, machine, spawn};
use crate::git::Git;
use crate::store::{Draft, NewRun};

fn plural(n: usize, what: &str, noun: &str) -> String {
    format!("{what} {n} {noun}{}", if n == 1 { "" } else { "s" })
}

fn format(given: &str) -> Result<Format, AppError> {
    match given {
        "toml" => Ok(Format::Toml),
        "json" => Ok(Format::Json),
        other => Err(AppError::invalid(format!(
            "invalid format {other:?}: use toml or json"
        ))),
    }
}

/// The cap and, for `auto` and `cluster`, what it was derived from (recorded in
/// `run.created`); `cluster` reads the Slurm runner `runner`'s partition now.
async fn cap(
    daemon: &Arc<Daemon>,
    given: Option<MaxParallel>,
    runner: Option<&str>,
    settings: &mut RunSettings,
) -> Result<(), AppError> {
    let n = match given.unwrap_or_default() {
        MaxParallel::N(n) => n,
        MaxParallel::Auto => {
            // What the machine had is recorded for reading; each start is admitted by the
            // daemon while the machine has room (engine::admission), under this ceiling.
            let (cores, mem) = machine::resources();
            settings.max_parallel_auto = Some(AutoParallel {
                cores: cores as u64,
                mem_available_mib: (mem != u64::MAX).then_some(mem / (1024 * 1024)),
                formula: format!(
                    "at most {}, each start admitted while memory allows ([limits] in config.toml)",
                    plan::AUTO_PARALLEL_CAP
                ),
            });
            plan::AUTO_PARALLEL_CAP
        }
        MaxParallel::Cluster => {
            let config = daemon.config.get()?;
            let name = runner.unwrap_or(crate::config::LOCAL_RUNNER).to_string();
            let crate::config::RunnerConfig::Slurm(wanted) = config.runner(&name)? else {
                return Err(AppError::invalid(format!(
                    "invalid max_parallel \"cluster\": runner {name:?} is of kind {}; cluster is a Slurm runner's cap (give --runner NAME of a slurm runner, or a number)",
                    config.runner(&name)?.kind().as_str()
                )));
            };
            let (n, how) = blocking(move || crate::runner::slurm::cluster_cap(&wanted)).await?;
            let mut how = how;
            how.insert("runner".into(), Value::String(name));
            settings
                .other
                .insert("max_parallel_cluster".into(), Value::Object(how));
            n
        }
    };
    settings.max_parallel = Some(n as u64);
    Ok(())
}

/// What one node (or every unit) asks for: its profile, runner and permission rules, and where
/// the rules were given (a plan node's place, for messages).
struct Wanted {
    profile: Option<String>,
    runner: Option<String>,
    rules: PermissionRules,
    at: String,
}

/// Checks the repository, base and every (profile, runner) named, before anything is created;
/// gives each profile's name and the runner its node starts on.
async fn check(
    daemon: &Arc<Daemon>,
    repo: String,
    base: Option<String>,
    wanted: Vec<Wanted>,
) -> Result<(PathBuf, String, Vec<(String, String)>), AppError> {
    let d = daemon.clone();
    blocking(move || {
        let config = d.config.get()?;
        let names = wanted
            .iter()
            .map(
                |Wanted {
                     profile,
                     runner,
                     rules,
                     at,
                 }| {
                    let profile =
                        spawn::check_profile(&config, profile.as_deref(), Mode::Autonomous)?;
                    spawn::check_rules(&profile, rules, at)?;
                    let runner =
                        spawn::check_runner(&d, &config, runner.as_deref(), &profile.name)?;
                    Ok((profile.name, runner))
                },
            )
            .collect::<Result<Vec<_>, AppError>>()?;
        let (repo, base) = spawn::check_repo(&d, &PathBuf::from(repo), base.as_deref())?;
        Ok((repo, base, names))
    })
    .await
}

fn created(kind: RunKind, title: String, repo: &std::path::Path, base: &str) -> RunCreated {
    RunCreated {
        kind,
        title: Some(title),
        repo: Some(repo.display().to_string()),
        base: Some(base.to_string()),
        settings: RunSettings::default(),
    }
}

/// The run's budget into its settings, checked.
fn budget(usd: Option<f64>, settings: &mut RunSettings) -> Result<(), AppError> {
    octl_proto::rpc::check_budget("max_budget_usd", usd)?;
    settings.max_budget_usd = usd;
    Ok(())
}

pub async fn start(daemon: &Arc<Daemon>, p: FanoutParams) -> Result<RunSummary, AppError> {
    let fmt = format(&p.format)?;
    let what = p.manifest_path.clone().unwrap_or_else(|| "manifest".into());
    // Parsed off the async threads: a large hostile document is bounded, but not free.
    let text = p.manifest.clone();
    let manifest =
        blocking(move || plan::parse_manifest(&text, fmt).map_err(|e| e.into_error(&what))).await?;
    let agent = p.agent.clone().or_else(|| manifest.agent.clone());
    let gate = p.gate.clone().or_else(|| manifest.gate.clone());
    let runner = p.runner.clone().or_else(|| manifest.runner.clone());
    spawn::check_gate(gate.as_deref())?;
    let rules = manifest.permissions.and(&p.permissions);
    let wanted = vec![Wanted {
        profile: agent,
        runner,
        rules: rules.clone(),
        at: String::new(),
    }];
    let (repo, base, names) = check(daemon, p.repo, p.base, wanted).await?;
    let (agent, runner) = &names[0];
    let title = manifest
        .title
        .clone()
        .unwrap_or_else(|| plural(manifest.units.len(), "fan-out of", "unit"));
    let mut created = created(RunKind::Fanout, title, &repo, &base);
    let settings = &mut created.settings;
    cap(daemon, p.max_parallel, Some(runner.as_str()), settings).await?;
    budget(p.max_budget_usd, settings)?;
    settings.agent = Some(agent.clone());
    settings.gate = gate.clone();
    settings.review = p.review.then_some(true);
    settings.sandbox = p.sandbox;
    let file = format!(
        "fanout.{}",
        if fmt == Format::Json { "json" } else { "toml" }
    );
    settings.manifest_file = Some(file.clone());
    settings.manifest_path = p.manifest_path.clone();
    settings.order = Some(manifest.units.iter().map(|u| u.id.clone()).collect());
    let initial = manifest
        .units
        .iter()
        .map(|u| {
            Draft::daemon(
                Some(&u.id),
                NodeAdded {
                    agent: Some(agent.clone()),
                    task: Some(manifest.render(u)),
                    gate: gate.clone(),
                    runner: Some(runner.clone()),
                    permissions: Some(rules.clone()).filter(|r| !r.is_empty()),
                    ..NodeAdded::default()
                },
            )
        })
        .collect();
    let handle = daemon
        .store
        .create_run(NewRun {
            id: ids::new_ulid(),
            created,
            initial,
            files: vec![(file, p.manifest.into_bytes())],
        })
        .await?;
    daemon.store.notify(&handle.id);
    Ok(handle.summary())
}

pub async fn manifest(daemon: &Arc<Daemon>, p: RunParams) -> Result<ManifestDoc, AppError> {
    let handle = daemon.store.resolve("run", &p.run)?;
    let view = handle.view();
    let file = view
        .manifest
        .settings
        .manifest_file
        .as_deref()
        .ok_or_else(|| {
            AppError::invalid(format!(
                "run {} is a {} run, not a fan-out",
                handle.id,
                view.manifest.kind_name()
            ))
        })?;
    let path = handle.dir.join(file);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| AppError::internal(format!("cannot read {}: {e}", path.display())))?;
    Ok(ManifestDoc {
        run: Some(handle.id.clone()),
        format: if file.ends_with(".json") {
            "json"
        } else {
            "toml"
        }
        .to_string(),
        path: path.display().to_string(),
        text,
    })
}

pub async fn orchestrate(
    daemon: &Arc<Daemon>,
    p: OrchestrateParams,
) -> Result<RunSummary, AppError> {
    let fmt = format(&p.format)?;
    let what = p.plan_path.clone().unwrap_or_else(|| "plan".into());
    let text = p.plan.clone();
    let plan =
        blocking(move || plan::parse_plan(&text, fmt).map_err(|e| e.into_error(&what))).await?;
    for n in &plan.nodes {
        spawn::check_gate(n.gate.as_deref())?;
    }
    let wanted = plan
        .nodes
        .iter()
        .map(|n| Wanted {
            profile: n.agent.clone().or_else(|| p.agent.clone()),
            runner: n.runner.clone().or_else(|| p.runner.clone()),
            rules: p.permissions.and(&n.permissions),
            at: format!("node {:?}: ", n.id),
        })
        .collect::<Vec<_>>();
    let rules: Vec<PermissionRules> = wanted.iter().map(|w| w.rules.clone()).collect();
    let (repo, base, names) = check(daemon, p.repo, p.base, wanted).await?;
    let id = ids::new_ulid();
    let integration = format!("octl/{id}/integration");
    let title = plan
        .title
        .clone()
        .unwrap_or_else(|| plural(plan.nodes.len(), "plan of", "node"));
    let mut created = created(RunKind::Orchestrate, title, &repo, &base);
    let settings = &mut created.settings;
    // `cluster`: the plan's --runner, else its first node's.
    let runner = p
        .runner
        .as_deref()
        .or(names.first().map(|(_, r)| r.as_str()));
    cap(daemon, p.max_parallel, runner, settings).await?;
    budget(p.max_budget_usd, settings)?;
    settings.integration = Some(integration.clone());
    settings.auto_merge = Some(p.auto_merge);
    settings.review = p.review.then_some(true);
    settings.sandbox = p.sandbox;
    let file = format!("plan.{}", if fmt == Format::Json { "json" } else { "toml" });
    settings.plan_file = Some(file.clone());
    settings.plan_path = p.plan_path.clone();
    settings.order = Some(plan.order().into_iter().map(str::to_string).collect());
    let initial = plan
        .nodes
        .iter()
        .zip(names.iter().zip(rules))
        .map(|(n, ((agent, runner), rules))| {
            Draft::daemon(
                Some(&n.id),
                NodeAdded {
                    agent: Some(agent.clone()),
                    task: Some(n.task.clone()),
                    gate: n.gate.clone(),
                    deps: Some(n.deps.clone()),
                    runner: Some(runner.clone()),
                    permissions: Some(rules).filter(|r| !r.is_empty()),
                    sandbox: n.sandbox,
                    ..NodeAdded::default()
                },
            )
        })
        .collect();
    let handle = daemon
        .store
        .create_run(NewRun {
            id,
            created,
            initial,
            files: vec![(file, p.plan.into_bytes())],
        })
        .await?;
    // The integration branch starts at base; the run's first event named it already.
    let (r, i, b) = (repo.clone(), integration.clone(), base.clone());
    blocking(move || {
        let git = Git::new(&r);
        if !git.branch_exists(&i)? {
            git.create_branch(&i, &b)?;
        }
        Ok(())
    })
    .await?;
    daemon.store.notify(&handle.id);
    Ok(handle.summary())
}

impl Handle for method::FanoutStart {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        start(daemon, p).await
    }
}

impl Handle for method::FanoutManifest {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        manifest(daemon, p).await
    }
}

impl Handle for method::OrchestrateStart {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        orchestrate(daemon, p).await
    }
}
