//! `doctor.runs`, `doctor.orphans`, `doctor.agents`, `doctor.runners`, `doctor.sandbox`: the
//! checks of `orchestratectl doctor` that only the daemon can make. They read; nothing is
//! written, repaired or removed.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use octl_proto::method;
use octl_proto::projection;
use octl_proto::rpc::{
    DoctorAgent, DoctorAgentsResult, DoctorOrphansResult, DoctorRun, DoctorRunner,
    DoctorRunnersResult, DoctorRunsResult, DoctorSandboxResult,
};
use octl_proto::sandbox::SandboxKind;
use octl_proto::{AppError, RunState};

use super::{Handle, NoParams};
use crate::agents::{self, Mode};
use crate::config::LOCAL_RUNNER;
use crate::daemon::Daemon;
use crate::engine::blocking;
use crate::store::index;
use crate::store::log::{self, CORRUPT_FILE};
use crate::store::RunHandle;

/// How often a run whose log moves while it is read is read again before a difference
/// counts (an append writes the log, then the projections).
const ATTEMPTS: usize = 5;

/// Per run: its log replays (`store::log::replay`, without repair), the projection files on
/// disk are byte for byte what it derives, and what it says of git holds
/// ([`crate::invariants`]). A corrupt run fails.
pub async fn runs(daemon: &Arc<Daemon>, _: NoParams) -> Result<DoctorRunsResult, AppError> {
    let mut out = Vec::new();
    for handle in daemon.store.handles() {
        if let Some(reason) = handle.corrupt() {
            out.push(DoctorRun {
                run: handle.id.clone(),
                ok: false,
                events: 0,
                problem: Some(format!(
                    "corrupt: {reason} (its log was set aside as runs/{}/{CORRUPT_FILE}; the run is read-only)",
                    handle.id
                )),
                mismatched: Vec::new(),
            });
            continue;
        }
        if let Some(reason) = handle.untrusted() {
            out.push(DoctorRun {
                run: handle.id.clone(),
                ok: false,
                events: handle.committed(),
                problem: Some(format!(
                    "refuses appends until the daemon restarts: {reason}"
                )),
                mismatched: Vec::new(),
            });
            continue;
        }
        let h = handle.clone();
        out.push(blocking(move || Ok(check_run(&h))).await?);
    }
    // The finished runs, from the index: each log read once, one at a time.
    let d = daemon.clone();
    out.extend(blocking(move || check_finished(&d)).await?);
    out.sort_by(|a, b| a.run.cmp(&b.run));
    Ok(DoctorRunsResult { runs: out })
}

/// Every finished run: its log replays, its projections match, and its entry in the run
/// index is byte for byte what its log derives; then the run directories the index lacks.
fn check_finished(daemon: &Daemon) -> Result<Vec<DoctorRun>, AppError> {
    let store = &daemon.store;
    let mut out = Vec::new();
    let rebuild_hint = format!(
        "the run index ({}) is derived from the logs: stop the daemon, move {} away and start it again, and the start builds it anew",
        index::TABLE_FILE,
        daemon.home.root().join(index::TABLE_FILE).display()
    );
    store.each_finished(|entry| {
        if store.active(&entry.id).is_some() {
            return true;
        }
        let judged = |ok: bool, events: u64, problem: Option<String>, mismatched: Vec<String>| {
            DoctorRun {
                run: entry.id.clone(),
                ok,
                events,
                problem,
                mismatched,
            }
        };
        let dir = daemon.home.run_dir(&entry.id);
        let derived = store.entry_from_log(&entry.id);
        let run = match derived {
            Err(e) => judged(false, 0, Some(format!("cannot read its log: {e}")), vec![]),
            Ok(None) => judged(
                false,
                0,
                Some(format!("listed in the run index, but its directory has no log; {rebuild_hint}")),
                vec![],
            ),
            Ok(Some((derived, state))) => {
                let events = state.as_ref().map_or(0, |s| s.last_seq);
                if derived != entry {
                    judged(
                        false,
                        events,
                        Some(format!(
                            "its entry in the run index ({}, {}) is not what its log derives ({}, {}); {rebuild_hint}",
                            entry.status, entry.flags.letters(), derived.status, derived.flags.letters()
                        )),
                        vec![],
                    )
                } else if entry.status == projection::ListedStatus::Corrupt {
                    let reason = serde_json::from_str::<projection::RunSummary>(&entry.summary)
                        .ok()
                        .and_then(|s| s.error)
                        .unwrap_or_default();
                    judged(
                        false,
                        0,
                        Some(format!(
                            "corrupt: {reason} (its log was set aside as runs/{}/{CORRUPT_FILE}; the run is read-only)",
                            entry.id
                        )),
                        vec![],
                    )
                } else {
                    let state = state.expect("a readable log has a state");
                    let mismatched = mismatched(&dir, &state);
                    if mismatched.is_empty() {
                        judged(true, events, None, vec![])
                    } else {
                        judged(
                            false,
                            events,
                            Some(format!(
                                "its projection files differ from what its log derives: {}",
                                mismatched.join(", ")
                            )),
                            mismatched,
                        )
                    }
                }
            }
        };
        out.push(run);
        true
    })?;
    for id in store.unindexed()? {
        out.push(DoctorRun {
            run: id,
            ok: false,
            events: 0,
            problem: Some(format!(
                "its directory is under runs/ but not in the run index (copied in by hand?); {rebuild_hint}"
            )),
            mismatched: Vec::new(),
        });
    }
    Ok(out)
}

fn check_run(h: &RunHandle) -> DoctorRun {
    let judged =
        |ok: bool, events: u64, problem: Option<String>, mismatched: Vec<String>| DoctorRun {
            run: h.id.clone(),
            ok,
            events,
            problem,
            mismatched,
        };
    let mut last = Vec::new();
    let mut events = 0;
    for attempt in 0..ATTEMPTS {
        let before = h.committed();
        let replayed = match log::replay(&h.log_path(), false) {
            Err(e) => return judged(false, 0, Some(format!("cannot read its log: {e}")), vec![]),
            Ok(Err(c)) => {
                return judged(
                    false,
                    0,
                    Some(format!(
                        "its log does not replay: line {}: {}",
                        c.line, c.reason
                    )),
                    vec![],
                )
            }
            Ok(Ok(r)) => r,
        };
        events = replayed.state.last_seq;
        last = mismatched(&h.dir, &replayed.state);
        if last.is_empty() {
            // And what it says of git holds: its merges are in their targets, its remote
            // nodes' work came back (crate::invariants).
            let untrue = crate::invariants::check(&h.dir);
            if !untrue.is_empty() {
                return judged(
                    false,
                    events,
                    Some(format!(
                        "its log says what git does not hold: {}",
                        untrue.join("; ")
                    )),
                    vec![],
                );
            }
            return judged(true, events, None, vec![]);
        }
        // Read while an append was being written: look again once it settles.
        let settled = before == h.committed() && events == before;
        if settled && attempt >= 1 {
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    judged(
        false,
        events,
        Some(format!(
            "its projection files differ from what its log derives: {}",
            last.join(", ")
        )),
        last,
    )
}

/// Projection files whose bytes are not what `state` derives: differing, missing, or extra
/// (a `.json` under nodes/, discussions/ or spinoffs/ that the log does not derive).
pub fn mismatched(dir: &Path, state: &RunState) -> Vec<String> {
    let files = projection::all_files(state);
    let mut out = Vec::new();
    let derived: BTreeSet<&str> = files.iter().map(|(rel, _)| rel.as_str()).collect();
    for (rel, bytes) in &files {
        match std::fs::read(dir.join(rel)) {
            Ok(disk) if &disk == bytes => {}
            Ok(_) => out.push(rel.clone()),
            Err(_) => out.push(format!("{rel} (missing)")),
        }
    }
    for sub in ["nodes", "discussions", "spinoffs"] {
        let Ok(entries) = std::fs::read_dir(dir.join(sub)) else {
            continue;
        };
        let mut extra: Vec<String> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|name| !name.starts_with('.') && name.ends_with(".json"))
            .map(|name| format!("{sub}/{name}"))
            .filter(|rel| !derived.contains(rel.as_str()))
            .map(|rel| format!("{rel} (extra)"))
            .collect();
        extra.sort();
        out.extend(extra);
    }
    out
}

/// Worktrees, branches and windows under the daemon's names that no run owns.
pub async fn orphans(daemon: &Arc<Daemon>, _: NoParams) -> Result<DoctorOrphansResult, AppError> {
    let orphans = crate::engine::orphans::find(daemon).await?;
    Ok(DoctorOrphansResult { orphans })
}

/// Every agent profile (the built-ins and those of config.toml), its program, and whether
/// the daemon finds that program on its own PATH (the one agents are started with).
pub async fn agents(daemon: &Arc<Daemon>, _: NoParams) -> Result<DoctorAgentsResult, AppError> {
    // What is in force (the last good file while an edit is refused), and why the file as
    // it is now is not.
    let config = daemon.config.get_or_default();
    let config_error = daemon.config.problem().map(|e| e.message);
    let default = config
        .defaults
        .agent
        .clone()
        .unwrap_or_else(|| agents::DEFAULT_PROFILE.to_string());
    let mut names: Vec<String> = vec!["claude".into(), "shell".into()];
    names.extend(agents::Builtin::ALL.map(|b| b.name().to_string()));
    names.extend(
        config
            .agents
            .keys()
            .filter(|k| !names.contains(k))
            .cloned()
            .collect::<Vec<_>>(),
    );
    if !names.contains(&default) {
        names.push(default.clone());
    }
    // Unfinished nodes, by profile: the runs that need it now.
    let mut users: Vec<(String, String)> = Vec::new();
    for h in daemon.store.handles() {
        let view = h.view();
        if view.manifest.status.is_ended() {
            continue;
        }
        for n in view.nodes.iter().filter(|n| !n.state.is_terminal()) {
            if let Some(a) = &n.agent {
                users.push((a.clone(), h.id.clone()));
            }
        }
    }
    let path = std::env::var_os("PATH");
    let mut out = Vec::new();
    for name in names {
        let cli = agents::Builtin::parse(&name).is_some();
        let builtin = cli || matches!(name.as_str(), "claude" | "shell");
        let mut used_by: Vec<String> = users
            .iter()
            .filter(|(a, _)| *a == name)
            .map(|(_, r)| r.clone())
            .collect();
        used_by.dedup();
        let entry = |program: String, problem: Option<String>| {
            let found = (!program.is_empty())
                .then(|| agents::find_program(&program, path.as_deref()))
                .flatten();
            DoctorAgent {
                profile: name.clone(),
                usable: found.is_some() && problem.is_none(),
                found: found.map(|p| p.display().to_string()),
                program,
                builtin,
                default: name == default,
                optional: cli && name != default && used_by.is_empty(),
                used_by: used_by.clone(),
                problem,
                version: None,
            }
        };
        let profile = match agents::resolve(&config, Some(&name)) {
            Ok(p) => p,
            Err(e) => {
                out.push(entry(String::new(), Some(e.message)));
                continue;
            }
        };
        // An argv profile may start a different program per mode.
        let mut programs: Vec<String> = [Mode::Autonomous, Mode::Interactive]
            .into_iter()
            .filter_map(|m| profile.program(m).ok())
            .collect();
        programs.dedup();
        for program in programs {
            out.push(entry(program, None));
        }
    }
    // The agent CLIs' versions, asked all at once (node and python CLIs take seconds).
    let asks: Vec<_> = out
        .iter()
        .enumerate()
        .filter(|(_, a)| agents::Builtin::parse(&a.profile).is_some() && a.usable)
        .map(|(i, a)| {
            let program = a.found.clone().unwrap_or_default();
            (
                i,
                tokio::task::spawn_blocking(move || agents::version(&program)),
            )
        })
        .collect();
    for (i, ask) in asks {
        let answer = ask.await.unwrap_or_else(|e| Err(e.to_string()));
        let a = &mut out[i];
        match answer {
            Ok(v) => a.version = Some(v),
            Err(e) => {
                a.usable = false;
                a.problem = Some(format!("`{} --version` failed: {e}", a.program));
            }
        }
    }
    Ok(DoctorAgentsResult {
        agents: out,
        config_error,
    })
}

impl Handle for method::DoctorRuns {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        runs(daemon, p).await
    }
}

impl Handle for method::DoctorOrphans {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        orphans(daemon, p).await
    }
}

/// `local` and every runner of config.toml, each probed (all at once: an SSH host that does
/// not answer costs its connect timeout once, not once per runner).
pub async fn runners(daemon: &Arc<Daemon>, _: NoParams) -> Result<DoctorRunnersResult, AppError> {
    // What is in force (the last good file while an edit is refused), and why the file as
    // it is now is not.
    let config = daemon.config.get_or_default();
    let config_error = daemon.config.problem().map(|e| e.message);
    let default = config
        .defaults
        .runner
        .clone()
        .unwrap_or_else(|| LOCAL_RUNNER.to_string());
    let mut names = vec![LOCAL_RUNNER.to_string()];
    names.extend(
        config
            .runners
            .keys()
            .filter(|n| *n != LOCAL_RUNNER)
            .cloned(),
    );
    let mut users: Vec<(String, String)> = Vec::new();
    for h in daemon.store.handles() {
        let view = h.view();
        if view.manifest.status.is_ended() {
            continue;
        }
        for n in view.nodes.iter().filter(|n| !n.state.is_terminal()) {
            let runner = n.runner.clone().unwrap_or_else(|| LOCAL_RUNNER.to_string());
            users.push((runner, h.id.clone()));
        }
    }
    let probes = names.into_iter().map(|name| {
        let wanted = config.runner(&name).unwrap_or_default();
        let local = daemon.runner.clone();
        async move {
            let kind = wanted.kind().as_str().to_string();
            let answer = blocking(move || Ok(crate::runner::probe(&*local, &wanted))).await;
            (name, kind, answer.and_then(|a| a))
        }
    });
    let mut out = Vec::new();
    for (name, kind, answer) in futures_join(probes).await {
        let mut used_by: Vec<String> = users
            .iter()
            .filter(|(r, _)| *r == name)
            .map(|(_, run)| run.clone())
            .collect();
        used_by.dedup();
        let (ok, message) = match answer {
            Ok(m) => (true, m),
            Err(e) => (false, e.message),
        };
        out.push(DoctorRunner {
            default: name == default,
            name,
            kind,
            ok,
            message,
            used_by,
        });
    }
    Ok(DoctorRunnersResult {
        runners: out,
        config_error,
    })
}

/// How long the minimal sandbox may take to run `true` (it takes milliseconds).
const SANDBOX_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether bubblewrap, as the daemon finds it on its own PATH, runs a minimal sandbox, and
/// what asks for it (config.toml's `[sandbox] kind`, a profile's `sandbox`, an unfinished
/// run's `--sandbox`).
pub async fn sandbox(daemon: &Arc<Daemon>, _: NoParams) -> Result<DoctorSandboxResult, AppError> {
    let config = daemon.config.get_or_default();
    let mut wanted_by = Vec::new();
    if config.sandbox.kind == SandboxKind::Bwrap {
        wanted_by.push("config.toml's [sandbox] kind".to_string());
    }
    for (name, a) in &config.agents {
        if a.sandbox.as_deref() == Some(SandboxKind::Bwrap.as_str()) {
            wanted_by.push(format!("[agents.{name}] sandbox"));
        }
    }
    for h in daemon.store.handles() {
        let view = h.view();
        if !view.manifest.status.is_ended()
            && view.manifest.settings.sandbox == Some(SandboxKind::Bwrap)
        {
            wanted_by.push(format!("unfinished run {}", h.id));
        }
    }
    let found = agents::find_program("bwrap", std::env::var_os("PATH").as_deref());
    let Some(bwrap) = found else {
        return Ok(DoctorSandboxResult {
            bwrap: None,
            version: None,
            ok: false,
            message: "bwrap (bubblewrap) is not on the daemon's PATH".to_string(),
            wanted_by,
        });
    };
    let path = bwrap.clone();
    let (version, ran) = blocking(move || {
        Ok((
            agents::version(&path.display().to_string()).ok(),
            run_minimal_sandbox(&path, SANDBOX_TIMEOUT),
        ))
    })
    .await?;
    let (ok, message) = match ran {
        Ok(()) => (
            true,
            "ran a sandbox (its own namespaces, the system read-only, `true`)".to_string(),
        ),
        Err(why) => (false, why),
    };
    Ok(DoctorSandboxResult {
        bwrap: Some(bwrap.display().to_string()),
        version,
        ok,
        message,
        wanted_by,
    })
}

/// `bwrap --unshare-all`, the system's directories as an agent's view has them, `/proc` and
/// `/dev`, `-- true`: Ok, or bwrap's own words (its first line on stderr) and exit status.
pub fn run_minimal_sandbox(bwrap: &Path, timeout: Duration) -> Result<(), String> {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let mut cmd = Command::new(bwrap);
    cmd.args([
        "--die-with-parent",
        "--unshare-all",
        "--hostname",
        "octl-sandbox",
    ]);
    for (dir, link) in crate::sandbox::bwrap::system_dirs() {
        match link {
            Some(target) => cmd.arg("--symlink").arg(target).arg(dir),
            None => cmd.args(["--ro-bind", dir, dir]),
        };
    }
    cmd.args(["--proc", "/proc", "--dev", "/dev", "--", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", bwrap.display()))?;
    let deadline = std::time::Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if std::time::Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "a minimal sandbox did not end within {} s",
                    timeout.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(format!("cannot wait for bwrap: {e}")),
        }
    };
    if status.success() {
        return Ok(());
    }
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut stderr);
    }
    let said = stderr
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("(nothing on stderr)");
    Err(format!("a minimal sandbox failed ({status}): {said}"))
}

/// Awaits every future, concurrently, in order.
async fn futures_join<F>(futures: impl IntoIterator<Item = F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let tasks: Vec<_> = futures.into_iter().map(tokio::spawn).collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.expect("a doctor probe panicked"));
    }
    out
}

impl Handle for method::DoctorRunners {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        runners(daemon, p).await
    }
}

impl Handle for method::DoctorAgents {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        agents(daemon, p).await
    }
}

impl Handle for method::DoctorSandbox {
    async fn handle(daemon: &Arc<Daemon>, p: Self::Params) -> Result<Self::Result, AppError> {
        sandbox(daemon, p).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The real bubblewrap, where it is installed (the check's failure names what bwrap said).
    #[test]
    fn a_minimal_sandbox_runs_where_bwrap_is_installed() {
        let Some(bwrap) = agents::find_program("bwrap", std::env::var_os("PATH").as_deref()) else {
            eprintln!("bwrap is not installed: nothing to check");
            return;
        };
        assert_eq!(run_minimal_sandbox(&bwrap, SANDBOX_TIMEOUT), Ok(()));
        // A program that refuses its options, as a bwrap that cannot make its namespaces
        // does: its first line on stderr, and the status.
        let e = run_minimal_sandbox(Path::new("/bin/sh"), SANDBOX_TIMEOUT).unwrap_err();
        assert!(
            e.starts_with("a minimal sandbox failed (exit status: 2): ")
                && !e.ends_with("(nothing on stderr)"),
            "{e}"
        );
        let e = run_minimal_sandbox(Path::new("/bin/false"), SANDBOX_TIMEOUT).unwrap_err();
        assert_eq!(
            e,
            "a minimal sandbox failed (exit status: 1): (nothing on stderr)"
        );
    }
}
