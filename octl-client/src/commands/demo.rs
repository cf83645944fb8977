//! `demo`: the whole loop without Claude Code or an API key. A throwaway repository, four
//! spinoffs with the `shell` agent (two add a file, two rewrite greeting.txt differently, so
//! the second of those to merge conflicts), live progress, and where every result ended up.
//!
//! The two greeting agents wait for a start file that the demo writes once all four runs
//! exist, so both branches start from the same commit of main and the conflict is certain.
//!
//! It leaves no trace unless asked: the runs go to a daemon of its own on a throwaway home
//! beside the repository (its own socket and tmux server), which is stopped and removed with
//! the repository at the end, so your run list, your daemon and your config are never
//! touched. `--keep` runs it on your daemon instead and keeps the runs and the repository.

use octl_proto::method;
use octl_proto::rpc::EventListParams;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use clap::Args;
use octl_proto::ids::new_ulid;
use octl_proto::rpc::RunShown;
use octl_proto::rpc::SpawnParams;
use octl_proto::state::Node;
use octl_proto::{AppError, ErrorKind, NodeState};
use serde_json::{json, Value};

use super::spawn::{spawn, SpawnKind};
use super::Ctx;
use crate::client::{find_on_path, Client};
use crate::follow::{eprint_line, is_settled, plain_event_line, short_event, show, Mode, Screen};
use crate::home::Home;
use crate::output::{duration, print_text, shell_word, table};

/// The examples of `demo --help`.
pub const DEMO_EXAMPLES: &str = "\
Examples:
  orchestratectl demo                 # on a throwaway daemon: nothing stays afterwards
  orchestratectl demo --keep          # on your daemon: the runs stay in `run list`, the repository too
  orchestratectl --json demo          # {repo, kept, home, runs: [{id, task, node, status, state}]}";

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Run the demo on your daemon and keep its runs (in `run list`) and its repository;
    /// without it the demo runs on a throwaway daemon and removes everything at the end
    #[arg(long)]
    pub keep: bool,
}

/// The demo gives up after this long.
const DEADLINE: Duration = Duration::from_secs(180);
/// How often the runs are looked at.
const POLL: Duration = Duration::from_millis(200);
/// The branch of the demo repository.
const BRANCH: &str = "main";
/// Identity for the demo's own commit, used only when git has none configured.
const DEMO_IDENTITY: [&str; 4] = [
    "-c",
    "user.name=orchestratectl-demo",
    "-c",
    "user.email=demo@orchestratectl.invalid",
];

/// One of the demo's spinoffs.
struct DemoRun {
    node: &'static str,
    /// What it does, for people.
    what: &'static str,
    task: String,
    run: String,
    cursor: u64,
    last: String,
    detail: Option<RunShown>,
}

impl DemoRun {
    fn status(&self) -> &str {
        self.detail
            .as_ref()
            .map(|d| d.manifest.status.as_str())
            .unwrap_or("starting")
    }

    fn node_detail(&self) -> Option<&Node> {
        self.detail
            .as_ref()
            .and_then(|d| d.nodes.iter().find(|n| n.id == self.node))
            .map(|n| &n.node)
    }

    fn state(&self) -> String {
        self.node_detail()
            .map(|n| n.state.as_str().to_string())
            .unwrap_or_else(|| "-".to_string())
    }

    fn settled(&self) -> bool {
        self.detail
            .as_ref()
            .is_some_and(|d| is_settled(d.manifest.status))
    }
}

/// The four tasks: node name, what it does, and the shell script (`{start}` is the start file).
/// The first line of a shell task is its commit message, so the greeting scripts write first
/// and then wait; their commit (when the script ends) comes after the start file appears.
const TASKS: [(&str, &str, &str); 4] = [
    ("one", "adds one.txt", "printf 'one\\n' > one.txt"),
    ("two", "adds two.txt", "printf 'two\\n' > two.txt"),
    (
        "greeting-a",
        "rewrites greeting.txt (hi from A)",
        GREETING_A,
    ),
    (
        "greeting-b",
        "rewrites greeting.txt (hi from B)",
        GREETING_B,
    ),
];

const GREETING_A: &str = "printf 'hi from A\\n' > greeting.txt
# wait until the demo has started all four runs (both greeting branches fork from the same main)
for i in $(seq 600); do [ -e {start} ] && break; sleep 0.1; done";

const GREETING_B: &str = "printf 'hi from B\\n' > greeting.txt
# wait until the demo has started all four runs (both greeting branches fork from the same main)
for i in $(seq 600); do [ -e {start} ] && break; sleep 0.1; done";

pub async fn execute(ctx: &Ctx, args: DemoArgs) -> Result<i32, AppError> {
    let human = !ctx.out.json;
    let git = find_on_path("git").ok_or_else(|| {
        AppError::new(
            ErrorKind::ToolMissing,
            "the demo needs git, and there is no git program on PATH",
        )
        .with_hint("install git (2.38 or newer)")
    })?;
    let root = make_temp_dir()?;
    if let Err(e) = make_repo(&git, &root.join("repo")) {
        let _ = std::fs::remove_dir_all(&root);
        return Err(e);
    }
    // Without --keep, a daemon of its own (started on first use, as yours is).
    let own = if args.keep {
        None
    } else {
        match Home::from_env(Some(&root.join("home"))) {
            Ok(home) => Some(Ctx {
                out: ctx.out,
                client: Client::new(home, true),
            }),
            Err(e) => {
                let _ = std::fs::remove_dir_all(&root);
                return Err(e);
            }
        }
    };
    let result = demo(own.as_ref().unwrap_or(ctx), &args, &git, &root).await;
    if let Some(own) = &own {
        stop_own_daemon(own).await;
        match &result {
            Ok(_) => {
                let _ = std::fs::remove_dir_all(&root);
            }
            Err(_) if human => print_text(&format!(
                "\nThe demo's repository and home are kept for a look: {} (remove it with rm -rf {})",
                root.display(),
                shell_word(&root.display().to_string())
            )),
            Err(_) => {}
        }
    }
    result
}

/// Stops the demo's own daemon and its tmux server (with any window left), so that removing
/// its home leaves nothing running.
async fn stop_own_daemon(own: &Ctx) {
    let client = &own.client;
    if client.socket_answers().await {
        let _ = client
            .try_call_method::<method::DaemonShutdown>(&method::NoParams {})
            .await;
        client
            .wait_until_gone(Instant::now() + crate::client::STOP_DEADLINE)
            .await;
    }
    let _ = Command::new("tmux")
        .arg("-S")
        .arg(client.home().tmux_socket())
        .arg("kill-server")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
}

/// The demo itself, on `ctx`'s daemon: the runs spawned, followed and summed up.
async fn demo(ctx: &Ctx, args: &DemoArgs, git: &Path, root: &Path) -> Result<i32, AppError> {
    let human = !ctx.out.json;
    let own = !args.keep;
    let repo = root.join("repo");
    let start_file = root.join("start");
    let repo_text = repo.display().to_string();
    if human {
        let daemon = if own {
            "on a daemon of its own, removed with it at the end (--keep: on yours, kept)"
        } else {
            "on your daemon, kept at the end (--keep)"
        };
        print_text(&format!(
            "Demo repository: {repo_text}, {daemon}\n  branch {BRANCH}: README.md, and greeting.txt containing \"hello\""
        ));
    }

    let mut runs: Vec<DemoRun> = Vec::new();
    for (node, what, script) in TASKS {
        let task = script.replace("{start}", &shell_word(&start_file.display().to_string()));
        let params = SpawnParams {
            task: task.clone(),
            repo: repo_text.clone(),
            base: Some(BRANCH.to_string()),
            agent: Some("shell".to_string()),
            node: Some(node.to_string()),
            gate: None,
            max_budget_usd: None,
            runner: None,
            permissions: Default::default(),
            review: false,
            sandbox: None,
            attempts: None,
            agents: Vec::new(),
            judge: None,
            judge_command: None,
            first_passing: false,
            max_parallel: None,
            rank: Vec::new(),
        };
        match spawn(ctx, SpawnKind::Spinoff, &params).await {
            Ok(spawned) => {
                let run = spawned.run.id;
                runs.push(DemoRun {
                    node,
                    what,
                    task,
                    run,
                    cursor: 0,
                    last: String::new(),
                    detail: None,
                });
            }
            Err(e) if runs.is_empty() => {
                if !own {
                    let _ = std::fs::remove_dir_all(root);
                }
                return Err(e);
            }
            Err(e) => {
                let _ = std::fs::write(&start_file, b"");
                let ids: Vec<&str> = runs.iter().map(|r| r.run.as_str()).collect();
                let hint = format!(
                    "the demo repository {} is kept for the runs already started ({}); remove it when they are done",
                    root.display(),
                    ids.join(", ")
                );
                return Err(AppError {
                    hint: Some(
                        e.hint
                            .clone()
                            .map_or(hint.clone(), |h| format!("{h}; {hint}")),
                    ),
                    ..e
                });
            }
        }
    }
    // Both greeting branches exist now, forked from the same commit: let them go.
    std::fs::write(&start_file, b"")
        .map_err(|e| AppError::internal(format!("cannot write {}: {e}", start_file.display())))?;
    if human {
        let rows: Vec<Vec<String>> = runs
            .iter()
            .map(|r| vec![r.node.to_string(), r.run.clone(), r.what.to_string()])
            .collect();
        print_text(&format!(
            "Spawned 4 spinoffs with the shell agent on {BRANCH}:\n{}",
            indent(&table(&["NODE", "RUN", "TASK"], &rows))
        ));
    }

    let mode = Mode::detect(ctx.out.json);
    let watched = watch(ctx, &mut runs, mode, &repo_text).await;
    if let Err(e) = watched {
        let hint = if own {
            format!(
                "the demo's repository and its daemon's home (runs, logs) are kept in {}",
                root.display()
            )
        } else {
            format!(
                "the demo repository {} is kept; see the runs with `orchestratectl run list`",
                root.display()
            )
        };
        return Err(e.with_hint(hint));
    }

    let completed = runs.iter().filter(|r| r.status() == "completed").count();
    let conflicted: Vec<&DemoRun> = runs
        .iter()
        .filter(|r| {
            r.status() == "waiting" && r.node_detail().map(|n| n.state) == Some(NodeState::Conflict)
        })
        .collect();
    let as_designed = completed == 3 && conflicted.len() == 1;
    // A run that is not completed still has a worktree made from this repository (on the
    // demo's own daemon, everything goes anyway).
    let holding: Vec<&DemoRun> = runs
        .iter()
        .filter(|r| !own && r.status() != "completed")
        .collect();
    let kept = args.keep;

    if ctx.out.json {
        let items: Vec<Value> = runs
            .iter()
            .map(|r| {
                let n = r.node_detail();
                json!({
                    "id": r.run, "task": r.task, "node": r.node, "status": r.status(),
                    "state": r.state(),
                    "branch": n.and_then(|n| n.branch.clone()),
                    "worktree": n.and_then(|n| n.worktree.clone()),
                    "merge_commit": n.and_then(|n| n.merge_commit.clone()),
                })
            })
            .collect();
        let home = ctx.client.home().dir().display().to_string();
        ctx.out.result(
            &json!({"repo": repo_text, "kept": kept, "home": home, "runs": items}),
            String::new,
        );
    } else {
        print_text(&summary_text(&runs, git, &repo));
        for r in &conflicted {
            if own {
                print_text(&format!(
                    "\n{} conflicts with what the other greeting merged first: its work stays on its branch and worktree, and `orchestratectl demo --keep` leaves them for you to resolve and merge.",
                    r.node
                ));
            } else {
                print_text(&conflict_text(r, &runs));
            }
        }
        if kept {
            let why = if holding.is_empty() {
                "as asked (--keep)".to_string()
            } else {
                let ids: Vec<String> = holding
                    .iter()
                    .map(|r| format!("{} ({})", r.run, r.status()))
                    .collect();
                format!("because run {} still uses it", ids.join(", "))
            };
            let mut text = format!("\nThe demo repository is kept {why}: {repo_text}\n");
            let cancels: Vec<String> = holding
                .iter()
                .map(|r| format!("orchestratectl run cancel {} --discard", r.run))
                .collect();
            if !cancels.is_empty() {
                text.push_str(&format!(
                    "When you are done with it:\n  {} && rm -rf {}",
                    cancels.join(" && "),
                    shell_word(&root.display().to_string())
                ));
            } else {
                text.push_str(&format!(
                    "Remove it with: rm -rf {}",
                    shell_word(&root.display().to_string())
                ));
            }
            print_text(&text);
        }
    }
    if own && human {
        // Removed by the caller once the demo's daemon has stopped.
        print_text(&format!(
            "\nRemoving the demo repository ({repo_text}), its runs and its daemon: `run list` is as it was."
        ));
    }
    if as_designed {
        return Ok(0);
    }
    let got: Vec<String> = runs
        .iter()
        .map(|r| format!("{} {} ({})", r.node, r.status(), r.state()))
        .collect();
    Err(AppError::internal(format!(
        "the demo did not end as designed (3 completed and 1 waiting on a conflict): {}",
        got.join(", ")
    ))
    .with_hint(format!(
        "look at `orchestratectl --home {} run show RUN` and the agents' logs under {}/runs/RUN/logs/",
        shell_word(&ctx.client.home().dir().display().to_string()),
        ctx.client.home().dir().display()
    )))
}

/// A fresh directory under the system's temp dir: `orchestratectl-demo-<random>`.
fn make_temp_dir() -> Result<PathBuf, AppError> {
    let base = std::env::temp_dir();
    let base = base.canonicalize().unwrap_or(base);
    let id = new_ulid().to_ascii_lowercase();
    let dir = base.join(format!("orchestratectl-demo-{}", &id[id.len() - 10..]));
    std::fs::create_dir(&dir)
        .map_err(|e| AppError::internal(format!("cannot create {}: {e}", dir.display())))?;
    Ok(dir)
}

/// `git init -b main`, README.md and greeting.txt, one commit (with a demo identity only if
/// git has none).
fn make_repo(git: &Path, repo: &Path) -> Result<(), AppError> {
    run_git(
        git,
        None,
        &["init", "-q", "-b", BRANCH, &repo.display().to_string()],
    )?;
    let write = |name: &str, text: &str| {
        std::fs::write(repo.join(name), text).map_err(|e| {
            AppError::internal(format!("cannot write {}: {e}", repo.join(name).display()))
        })
    };
    write(
        "README.md",
        "# orchestratectl demo\n\nA throwaway repository made by `orchestratectl demo`.\n",
    )?;
    write("greeting.txt", "hello\n")?;
    run_git(git, Some(repo), &["add", "README.md", "greeting.txt"])?;
    let identity_known = ["GIT_AUTHOR_IDENT", "GIT_COMMITTER_IDENT"]
        .iter()
        .all(|var| {
            Command::new(git)
                .arg("-C")
                .arg(repo)
                .args(["var", var])
                .output()
                .map(|o| o.status.success())
                .unwrap_or(false)
        });
    let mut args: Vec<&str> = Vec::new();
    if !identity_known {
        args.extend(DEMO_IDENTITY);
    }
    args.extend([
        "-c",
        "commit.gpgsign=false",
        "commit",
        "-q",
        "-m",
        "Start the orchestratectl demo",
    ]);
    run_git(git, Some(repo), &args)?;
    Ok(())
}

fn run_git(git: &Path, dir: Option<&Path>, args: &[&str]) -> Result<String, AppError> {
    let mut cmd = Command::new(git);
    if let Some(dir) = dir {
        cmd.arg("-C").arg(dir);
    }
    let out = cmd.args(args).output().map_err(|e| {
        AppError::new(
            ErrorKind::ToolFailed,
            format!("cannot run {}: {e}", git.display()),
        )
    })?;
    if !out.status.success() {
        return Err(AppError::new(
            ErrorKind::ToolFailed,
            format!(
                "git {} failed ({}): {}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Follows the four runs until all are settled: a redrawn board on a terminal, plain event
/// lines otherwise, nothing with `--json`.
async fn watch(ctx: &Ctx, runs: &mut [DemoRun], mode: Mode, repo: &str) -> Result<(), AppError> {
    let started = Instant::now();
    let mut screen = Screen::default();
    let result = async {
        loop {
            for r in runs.iter_mut().filter(|r| !r.settled()) {
                let detail = show(ctx, &r.run).await?;
                if detail.manifest.last_seq > r.cursor {
                    let events = ctx
                        .client
                        .call_value::<method::EventList>(&EventListParams {
                            run: r.run.clone(),
                            since: Some(r.cursor),
                            limit: None,
                        })
                        .await?;
                    for ev in events.as_array().into_iter().flatten() {
                        if let Some(seq) = ev.get("seq").and_then(Value::as_u64) {
                            r.cursor = r.cursor.max(seq);
                        }
                        r.last = short_event(ev);
                        if mode == Mode::Lines {
                            eprint_line(&format!("{:<10}  {}", r.node, plain_event_line(ev)));
                        }
                    }
                }
                r.detail = Some(detail);
            }
            if mode == Mode::Redraw {
                screen.draw(&board(runs, started.elapsed(), repo));
            }
            if runs.iter().all(DemoRun::settled) {
                return Ok(());
            }
            if started.elapsed() > DEADLINE {
                return Err(AppError::new(
                    ErrorKind::Timeout,
                    format!(
                        "the demo's runs did not settle within {}",
                        duration(DEADLINE.as_secs())
                    ),
                ));
            }
            tokio::time::sleep(POLL).await;
        }
    }
    .await;
    screen.clear();
    result
}

/// The live board: one line per run.
fn board(runs: &[DemoRun], elapsed: Duration, repo: &str) -> Vec<String> {
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|r| {
            vec![
                r.node.to_string(),
                r.status().to_string(),
                r.state(),
                r.last.clone(),
            ]
        })
        .collect();
    let mut lines = vec![format!(
        "[{}] 4 spinoffs in {repo}",
        duration(elapsed.as_secs())
    )];
    lines.extend(
        table(&["NODE", "STATUS", "STATE", "LAST EVENT"], &rows)
            .lines()
            .map(|l| format!("  {l}")),
    );
    lines
}

/// Where every result is: a table of the runs, then main's history.
fn summary_text(runs: &[DemoRun], git: &Path, repo: &Path) -> String {
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|r| {
            let n = r.node_detail();
            let result = match (n.map(|n| n.state), n) {
                (Some(NodeState::Merged), Some(n)) => format!(
                    "merged into {BRANCH} at {}",
                    n.merge_commit
                        .as_deref()
                        .map(|c| c.get(..12).unwrap_or(c))
                        .unwrap_or("?")
                ),
                (Some(NodeState::Conflict), Some(n)) => {
                    format!("conflict on {}", n.conflict_files.join(", "))
                }
                (Some(state), Some(n)) => {
                    let why = n
                        .reason
                        .as_deref()
                        .or(n.message.as_deref())
                        .map(|m| format!(": {m}"))
                        .unwrap_or_default();
                    format!("{}{why}", state.as_str())
                }
                _ => "-".to_string(),
            };
            vec![
                r.node.to_string(),
                r.run.clone(),
                r.status().to_string(),
                result,
            ]
        })
        .collect();
    let mut text = format!(
        "\nResults:\n{}",
        indent(&table(&["NODE", "RUN", "STATUS", "RESULT"], &rows))
    );
    match run_git(git, Some(repo), &["log", "--oneline", BRANCH]) {
        Ok(log) => text.push_str(&format!(
            "\n`git -C {} log --oneline {BRANCH}`:\n{}",
            shell_word(&repo.display().to_string()),
            indent(&log)
        )),
        Err(e) => text.push_str(&format!(
            "\n(cannot show {BRANCH}'s history: {})",
            e.message
        )),
    }
    text
}

/// What to do with the conflicting run.
fn conflict_text(r: &DemoRun, runs: &[DemoRun]) -> String {
    let n = r.node_detail();
    let winner = runs
        .iter()
        .filter(|o| o.node.starts_with("greeting-") && o.node != r.node)
        .map(|o| o.node)
        .next()
        .unwrap_or("the other greeting run");
    let worktree = n
        .and_then(|n| n.worktree.clone())
        .unwrap_or_else(|| "-".to_string());
    format!(
        "\n{node} conflicts with what {winner} merged first. Nothing is lost: its work stays on\n  \
         branch    {branch}\n  \
         worktree  {worktree}\n\
         To finish it, resolve the conflict there and merge again:\n  \
         cd {wt} && git merge {BRANCH}     # edit greeting.txt, then: git commit -am 'keep both greetings'\n  \
         orchestratectl merge {run}\n\
         Or drop it (its work is saved under refs/octl/snapshots/):\n  \
         orchestratectl run cancel {run} --discard",
        node = r.node,
        branch = n
            .and_then(|n| n.branch.clone())
            .unwrap_or_else(|| "-".to_string()),
        wt = shell_word(&worktree),
        run = r.run,
    )
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tasks_wait_for_the_start_file_and_keep_their_quoting() {
        let start = shell_word("/tmp/orchestratectl-demo-x/start");
        for (node, _, script) in TASKS {
            let task = script.replace("{start}", &start);
            if node.starts_with("greeting-") {
                assert!(
                    task.contains("[ -e /tmp/orchestratectl-demo-x/start ]"),
                    "{task}"
                );
                let first = task.lines().next().unwrap();
                assert!(
                    first.ends_with("> greeting.txt"),
                    "the commit message: {task}"
                );
            } else {
                assert!(!task.contains("start"), "{task}");
            }
            octl_proto::ids::validate_node_id("node", node).unwrap();
        }
        let spaced = shell_word("/tmp/with space/start");
        assert_eq!(spaced, "'/tmp/with space/start'");
    }

    #[test]
    fn a_repository_is_made() {
        let Some(git) = find_on_path("git") else {
            eprintln!("skipped: no git");
            return;
        };
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        make_repo(&git, &repo).unwrap();
        let log = run_git(&git, Some(&repo), &["log", "--oneline", "main"]).unwrap();
        assert_eq!(log.lines().count(), 1, "{log}");
        assert_eq!(
            std::fs::read_to_string(repo.join("greeting.txt")).unwrap(),
            "hello\n"
        );
        let status = run_git(&git, Some(&repo), &["status", "--porcelain"]).unwrap();
        assert!(status.is_empty(), "{status}");
    }
}
