//! `fanout.start`, `fanout.manifest`, and `orchestrate.start`: runs of many nodes from a file.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{json, Map, Value};

use octl_proto::method;
use octl_proto::plan::{self, Format, MaxParallel};
use octl_proto::rpc::{FanoutParams, OrchestrateParams, RunParams};
use octl_proto::{ids, AppError, RunKind};

use super::{to_value, Answer, Handle};
use crate::agents::Mode;
use crate::config::Config;
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

/// The cap and, for `auto`, what it was derived from (recorded in `run.created`).
fn cap(given: Option<Value>, settings: &mut Map<String, Value>) -> Result<(), AppError> {
    let text = match given {
        None => "auto".to_string(),
        Some(Value::String(s)) => s,
        Some(Value::Number(n)) => n.to_string(),
        Some(other) => {
            return Err(AppError::invalid(format!(
                "invalid max_parallel {other}: a number from 1 to 256, or \"auto\""
            )))
        }
    };
    let n = match plan::parse_max_parallel(&text)? {
        MaxParallel::N(n) => n,
        MaxParallel::Auto => {
            let (cores, mem) = machine::resources();
            let n = plan::auto_parallel(cores, mem);
            settings.insert(
                "max_parallel_auto".into(),
                json!({
                    "cores": cores,
                    "mem_available_mib": if mem == u64::MAX { Value::Null } else { json!(mem / (1024 * 1024)) },
                    "formula": "max(1, min(2 × cores, MemAvailable in GiB)), at most 32",
                }),
            );
            n
        }
    };
    settings.insert("max_parallel".into(), json!(n));
    Ok(())
}

/// Checks the repository, base and every profile named, before anything is created.
async fn check(
    daemon: &Arc<Daemon>,
    repo: String,
    base: Option<String>,
    profiles: Vec<Option<String>>,
) -> Result<(PathBuf, String, Vec<String>), AppError> {
    let d = daemon.clone();
    blocking(move || {
        let config = Config::load(&d.home.config())?;
        let names = profiles
            .iter()
            .map(|p| spawn::check_profile(&config, p.as_deref(), Mode::Autonomous).map(|p| p.name))
            .collect::<Result<Vec<_>, _>>()?;
        let (repo, base) = spawn::check_repo(&d, &PathBuf::from(repo), base.as_deref())?;
        Ok((repo, base, names))
    })
    .await
}

fn base_settings(title: String, repo: &std::path::Path, base: &str) -> Map<String, Value> {
    let mut s = Map::new();
    s.insert("title".into(), json!(title));
    s.insert("repo".into(), json!(repo.display().to_string()));
    s.insert("base".into(), json!(base));
    s
}

/// The run's budget into its settings, checked.
fn budget(usd: Option<f64>, settings: &mut serde_json::Map<String, Value>) -> Result<(), AppError> {
    octl_proto::rpc::check_budget("max_budget_usd", usd)?;
    if let Some(u) = usd {
        settings.insert("max_budget_usd".into(), json!(u));
    }
    Ok(())
}

pub async fn start(daemon: &Arc<Daemon>, p: FanoutParams) -> Result<Value, AppError> {
    let fmt = format(&p.format)?;
    let what = p.manifest_path.clone().unwrap_or_else(|| "manifest".into());
    // Parsed off the async threads: a large hostile document is bounded, but not free.
    let text = p.manifest.clone();
    let manifest =
        blocking(move || plan::parse_manifest(&text, fmt).map_err(|e| e.into_error(&what))).await?;
    let agent = p.agent.clone().or_else(|| manifest.agent.clone());
    let gate = p.gate.clone().or_else(|| manifest.gate.clone());
    spawn::check_gate(gate.as_deref())?;
    let (repo, base, names) = check(daemon, p.repo, p.base, vec![agent]).await?;
    let title = manifest
        .title
        .clone()
        .unwrap_or_else(|| plural(manifest.units.len(), "fan-out of", "unit"));
    let mut settings = base_settings(title, &repo, &base);
    cap(p.max_parallel, &mut settings)?;
    budget(p.max_budget_usd, &mut settings)?;
    settings.insert("agent".into(), json!(names[0]));
    if let Some(g) = &gate {
        settings.insert("gate".into(), json!(g));
    }
    let file = format!(
        "fanout.{}",
        if fmt == Format::Json { "json" } else { "toml" }
    );
    settings.insert("manifest_file".into(), json!(file));
    if let Some(path) = &p.manifest_path {
        settings.insert("manifest_path".into(), json!(path));
    }
    settings.insert(
        "order".into(),
        json!(manifest.units.iter().map(|u| &u.id).collect::<Vec<_>>()),
    );
    let initial = manifest
        .units
        .iter()
        .map(|u| {
            Draft::daemon(
                Some(&u.id),
                "node.added",
                json!({"agent": names[0], "task": manifest.render(u), "gate": gate}),
            )
        })
        .collect();
    let handle = daemon
        .store
        .create_run(NewRun {
            id: ids::new_ulid(),
            kind: RunKind::Fanout,
            settings,
            initial,
            files: vec![(file, p.manifest.into_bytes())],
        })
        .await?;
    daemon.store.notify(&handle.id);
    to_value(&handle.summary())
}

pub async fn manifest(daemon: &Arc<Daemon>, p: RunParams) -> Result<Value, AppError> {
    let handle = daemon.store.resolve("run", &p.run)?;
    let view = handle.view();
    let file = view
        .manifest
        .run_settings()
        .manifest_file()
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
    Ok(json!({
        "run": handle.id,
        "format": if file.ends_with(".json") { "json" } else { "toml" },
        "path": path.display().to_string(),
        "text": text,
    }))
}

pub async fn orchestrate(daemon: &Arc<Daemon>, p: OrchestrateParams) -> Result<Value, AppError> {
    let fmt = format(&p.format)?;
    let what = p.plan_path.clone().unwrap_or_else(|| "plan".into());
    let text = p.plan.clone();
    let plan =
        blocking(move || plan::parse_plan(&text, fmt).map_err(|e| e.into_error(&what))).await?;
    for n in &plan.nodes {
        spawn::check_gate(n.gate.as_deref())?;
    }
    let wanted: Vec<Option<String>> = plan
        .nodes
        .iter()
        .map(|n| n.agent.clone().or_else(|| p.agent.clone()))
        .collect();
    let (repo, base, names) = check(daemon, p.repo, p.base, wanted).await?;
    let id = ids::new_ulid();
    let integration = format!("octl/{id}/integration");
    let title = plan
        .title
        .clone()
        .unwrap_or_else(|| plural(plan.nodes.len(), "plan of", "node"));
    let mut settings = base_settings(title, &repo, &base);
    cap(p.max_parallel, &mut settings)?;
    budget(p.max_budget_usd, &mut settings)?;
    settings.insert("integration".into(), json!(integration));
    settings.insert("auto_merge".into(), json!(p.auto_merge));
    let file = format!("plan.{}", if fmt == Format::Json { "json" } else { "toml" });
    settings.insert("plan_file".into(), json!(file));
    if let Some(path) = &p.plan_path {
        settings.insert("plan_path".into(), json!(path));
    }
    settings.insert("order".into(), json!(plan.order()));
    let initial = plan
        .nodes
        .iter()
        .zip(&names)
        .map(|(n, agent)| {
            Draft::daemon(
                Some(&n.id),
                "node.added",
                json!({"agent": agent, "task": n.task, "gate": n.gate, "deps": n.deps}),
            )
        })
        .collect();
    let handle = daemon
        .store
        .create_run(NewRun {
            id,
            kind: RunKind::Orchestrate,
            settings,
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
    to_value(&handle.summary())
}

impl Handle for method::FanoutStart {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Answer, AppError> {
        start(daemon, p).await.map(Answer::Value)
    }
}

impl Handle for method::FanoutManifest {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Answer, AppError> {
        manifest(daemon, p).await.map(Answer::Value)
    }
}

impl Handle for method::OrchestrateStart {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Answer, AppError> {
        orchestrate(daemon, p).await.map(Answer::Value)
    }
}
