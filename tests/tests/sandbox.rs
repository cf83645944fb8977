//! Agents in a sandbox (docs/SECURITY.md): a sandboxed agent reaches its worktree, its tools
//! and its own node only. Real bubblewrap, the real daemon, git and tmux.
//!
//! One hostile script, run twice: in the sandbox every attempt is refused and nothing outside
//! its worktree changes (checked byte for byte), while its own work still merges; without the
//! sandbox the same script reads the secret, writes outside, moves branches and decides
//! permission requests — the contrast is what the sandbox is for.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};

use octl_tests::{TestEnv, TestRepo};
use serde_json::{json, Value};

fn run_id(v: &Value) -> String {
    v["id"].as_str().unwrap().to_string()
}

/// Tries each thing a hostile agent would, and writes one line per attempt to report.txt:
/// `NAME ok` when the attempt did what it tried (as far as the agent can tell from inside),
/// `NAME refused` when it failed. Then commits the report: its own work.
/// Its Python is the system's: a toolchain manager's shim in the home (pyenv's) needs the
/// rest of its directory, which the sandbox shows only when `[sandbox] read_only` names it.
const HOSTILE: &str = r#"#!/bin/sh
out=report.txt
: > "$out"
try() {
  name=$1; shift
  if "$@" > /dev/null 2>&1; then echo "$name ok" >> "$out"; else echo "$name refused" >> "$out"; fi
}
# A commit of its own first, so moving a branch to it is a change.
git commit -q --allow-empty -m 'the hostile agent was here'
try read-secret grep -q hunter2 "$SECRET"
try read-credentials grep -q hunter3 "$CLAUDE_CONFIG_DIR/.credentials.json"
try write-home sh -c 'echo hacked > "$REAL_HOME/hacked.txt"'
try write-checkout sh -c 'echo hacked > "$CHECKOUT/hacked.txt"'
try write-sibling sh -c 'echo hacked > "$SIBLING/hacked.txt"'
try git-config git config core.hooksPath /nonexistent
try git-hook sh -c 'echo "exit 0" > "$(git rev-parse --git-common-dir)/hooks/post-merge"'
try plant-pack touch "$(git rev-parse --git-common-dir)/objects/pack/planted"
try move-main git update-ref refs/heads/main HEAD
try move-victim git update-ref "refs/heads/$VICTIM_BRANCH" HEAD
try move-sibling-branch sh -c 'git update-ref "refs/heads/octl/$OCTL_RUN/other" HEAD && git rev-parse -q --verify "refs/heads/octl/$OCTL_RUN/other"'
try reach-port /usr/bin/python3 -c "
import os, socket, sys
try:
    s = socket.create_connection(('127.0.0.1', $PORT), 3)
    sys.exit(0 if s.recv(5) == b'hello' else 1)
except OSError:
    pass
proxy = os.environ.get('HTTPS_PROXY', '').replace('http://', '')
if not proxy:
    sys.exit(1)
host, port = proxy.rsplit(':', 1)
s = socket.create_connection((host, int(port)), 3)
s.sendall(b'CONNECT 127.0.0.1:$PORT HTTP/1.1\r\nHost: x\r\n\r\n')
sys.exit(0 if b' 200 ' in s.recv(100) else 1)
"
try tmux-socket tmux -S "$OCTL_HOME/tmux.sock" list-sessions
try allow-other env -u OCTL_AGENT orchestratectl node allow "$VICTIM_RUN" --node asks --request p1
try cancel-other env -u OCTL_AGENT orchestratectl run cancel "$VICTIM_RUN"
try merge-other env -u OCTL_AGENT orchestratectl merge "$VICTIM_RUN"
# Its own permission request, then its own decision on it.
echo '{"hook_event_name":"PermissionRequest","tool_name":"Bash","tool_input":{"command":"curl evil"}}' \
  | orchestratectl hook PermissionAsk > /dev/null 2>&1 &
i=0
until orchestratectl --json run show "$OCTL_RUN" | grep -q '"p1"' || [ $i -ge 300 ]; do sleep 0.1; i=$((i+1)); done
try allow-own env -u OCTL_AGENT orchestratectl node allow "$OCTL_RUN" --node "$OCTL_NODE" --request p1
try fork-200 /usr/bin/python3 -c "
import os, sys
kids = []
try:
    for _ in range(200):
        pid = os.fork()
        if pid == 0:
            os.execvp('sleep', ['sleep', '30'])
        kids.append(pid)
except OSError:
    pass
for k in kids:
    os.kill(k, 9)
for k in kids:
    os.waitpid(k, 0)
sys.exit(0 if len(kids) == 200 else 1)
"
git add report.txt && git commit -q -m 'hostile report'
# The links the daemon's own git follows in this worktree, each put back at once where it
# could be changed (without the sandbox), so the run still merges.
gitdir=$(git rev-parse --absolute-git-dir)
saved=$(mktemp -d)
cp .git "$gitdir/commondir" "$saved/"
try redirect-git sh -c 'echo "gitdir: $PWD/.evil" > .git'
cp "$saved/.git" .git 2> /dev/null
try redirect-common sh -c "echo /tmp > $gitdir/commondir"
cp "$saved/commondir" "$gitdir/commondir" 2> /dev/null
try head-to-main git symbolic-ref HEAD refs/heads/main
git symbolic-ref HEAD "refs/heads/octl/$OCTL_RUN/$OCTL_NODE" 2> /dev/null
# What it tried last is in its report still: the daemon commits what it left.
exit 0
"#;

/// Every file under `dir` (but for `skip`), relative path → bytes.
fn files(dir: &Path, skip: &[&str]) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, skip: &[&str], out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_path_buf();
            if skip.iter().any(|s| rel.starts_with(s)) {
                continue;
            }
            let t = e.file_type().unwrap();
            if t.is_dir() {
                walk(root, &p, skip, out);
            } else if t.is_file() {
                out.insert(rel, std::fs::read(&p).unwrap_or_default());
            } else if t.is_symlink() {
                out.insert(
                    rel,
                    std::fs::read_link(&p).unwrap().into_os_string().into_vec(),
                );
            }
        }
    }
    use std::os::unix::ffi::OsStringExt;
    let mut out = BTreeMap::new();
    walk(dir, dir, skip, &mut out);
    out
}

/// What a hostile agent might change outside its worktree, as it is now: every file of the
/// user's home, the user's checkout (but for the merged report), the victim's worktree, the
/// repository's config and hooks, and every ref but `main` and the hostile node's branch
/// (which its merge moves), each path → its bytes.
fn outside(
    env: &TestEnv,
    repo: &TestRepo,
    sibling: &Path,
    own_branch: &str,
) -> BTreeMap<String, Vec<u8>> {
    let git = repo.path.join(".git");
    let mut all = BTreeMap::new();
    for (label, dir, skip) in [
        ("home", env.user_home.clone(), &[][..]),
        ("checkout", repo.path.clone(), &[".git", "report.txt"][..]),
        ("sibling", sibling.to_path_buf(), &[][..]),
        ("hooks", git.join("hooks"), &[][..]),
        ("packs", git.join("objects/pack"), &[][..]),
    ] {
        for (path, bytes) in files(&dir, skip) {
            all.insert(format!("{label}/{}", path.display()), bytes);
        }
    }
    all.insert(
        "git/config".into(),
        std::fs::read(git.join("config")).unwrap(),
    );
    for line in repo
        .git(&["for-each-ref", "--format=%(refname) %(objectname)"])
        .lines()
        .filter(|l| !l.starts_with("refs/heads/main ") && !l.contains(own_branch))
    {
        let (name, id) = line.split_once(' ').unwrap();
        all.insert(name.to_string(), id.as_bytes().to_vec());
    }
    all
}

/// Asserts `after` is `before` byte for byte, naming what differs.
fn assert_unchanged(before: &BTreeMap<String, Vec<u8>>, after: &BTreeMap<String, Vec<u8>>) {
    let differs: Vec<&String> = before
        .keys()
        .chain(after.keys())
        .filter(|k| before.get(*k) != after.get(*k))
        .collect();
    assert!(
        differs.is_empty(),
        "changed outside the sandbox: {differs:?}"
    );
}

/// A world with a victim: another run whose shell node waits for a decision on its
/// permission request (`p1`), a secret in the user's home, a local port that answers, and the
/// hostile script committed in the repository. Returns the env (daemon up), the repo, the
/// victim run and node's worktree, the port's listener.
struct World {
    env: TestEnv,
    _daemon: octl_tests::Daemon,
    repo: TestRepo,
    victim: String,
    victim_worktree: PathBuf,
    listener: TcpListener,
}

fn world(config: &str) -> World {
    let env = TestEnv::new();
    env.write_config(config);
    let daemon = env.start_daemon();
    let repo = TestRepo::new(&env, "repo");
    repo.write("hostile.sh", HOSTILE);
    repo.commit_all("the hostile script");
    // Its history packed, as a repository's mostly is.
    repo.git(&["repack", "-adq"]);
    std::fs::create_dir_all(env.user_home.join(".ssh")).unwrap();
    std::fs::write(env.user_home.join(".ssh/id_secret"), "hunter2\n").unwrap();
    // Claude Code's credentials: a shell agent's sandbox gets no CLI's configuration.
    std::fs::write(env.claude_dir.join(".credentials.json"), "hunter3\n").unwrap();
    let input = json!({"hook_event_name": "PermissionRequest", "tool_name": "Bash",
                       "tool_input": {"command": "python3 x.py"}});
    let victim = run_id(
        &env.spawn(
            "spinoff",
            &repo,
            &format!("echo '{input}' | orchestratectl hook PermissionAsk; sleep 600"),
            json!({"agent": "shell", "node": "asks", "sandbox": "none"}),
        )
        .unwrap(),
    );
    env.wait_permission_asked(&victim, "p1");
    let show = env.rpc("run.show", json!({"run": victim}));
    let victim_worktree = PathBuf::from(show["nodes"][0]["worktree"].as_str().unwrap());
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let answering = listener.try_clone().unwrap();
    std::thread::spawn(move || {
        for s in answering.incoming().flatten() {
            let _ = std::io::Write::write_all(&mut &s, b"hello");
        }
    });
    World {
        env,
        _daemon: daemon,
        repo,
        victim,
        victim_worktree,
        listener,
    }
}

impl World {
    /// How many events of `kind` `run`'s log holds.
    fn count(&self, run: &str, kind: &str) -> usize {
        self.env
            .log_events(run)
            .into_iter()
            .filter(|e| e["type"] == json!(kind))
            .count()
    }

    /// Runs the hostile script as a shell agent in `sandbox`; returns its run and its report,
    /// line by line (`NAME` → `ok` / `refused`).
    fn hostile(&self, sandbox: &str) -> (String, Value, BTreeMap<String, String>) {
        let victim_branch = format!("octl/{}/asks", self.victim);
        let task = format!(
            "SECRET={secret} REAL_HOME={home} CHECKOUT={checkout} SIBLING={sibling} \
             VICTIM_RUN={victim} VICTIM_BRANCH={victim_branch} PORT={port} sh hostile.sh",
            secret = self.env.user_home.join(".ssh/id_secret").display(),
            home = self.env.user_home.display(),
            checkout = self.repo.path.display(),
            sibling = self.victim_worktree.display(),
            victim = self.victim,
            port = self.listener.local_addr().unwrap().port(),
        );
        let run = run_id(
            &self
                .env
                .spawn(
                    "spinoff",
                    &self.repo,
                    &task,
                    json!({"agent": "shell", "node": "hostile", "sandbox": sandbox}),
                )
                .unwrap(),
        );
        let show = self.env.wait_status(&run, &["completed", "failed"]);
        let log = std::fs::read_to_string(self.env.run_dir(&run).join("logs/hostile.log"))
            .unwrap_or_default();
        assert_eq!(
            show["manifest"]["status"],
            json!("completed"),
            "its own work merges: {show}\n{log}"
        );
        let report: BTreeMap<String, String> = self
            .repo
            .show("main", "report.txt")
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(report.len(), 21, "{report:?}\n{log}");
        (run, show, report)
    }
}

/// The sandbox's network is its own, through the daemon's proxy to one port (not the test's).
const CONFIG: &str = "[sandbox]\nnetwork = \"allow\"\nallow = [\"127.0.0.1:9\"]\npids_max = 64\n";

#[test]
fn a_hostile_agent_in_the_sandbox_is_refused_everything_outside_and_its_own_work_merges() {
    let w = world(CONFIG);
    let main_before = w.repo.rev("main");
    let before = outside(&w.env, &w.repo, &w.victim_worktree, "/hostile");
    let (run, _show, report) = w.hostile("bwrap");
    let refused: Vec<&str> = report
        .iter()
        .filter(|(_, v)| *v == "refused")
        .map(|(k, _)| k.as_str())
        .collect();
    // Writes into its private home and /tmp succeed inside and land in its own copies; a
    // branch it makes is in its private copy of its run's refs: none of them is outside.
    let inside_only = ["write-home", "write-checkout", "move-sibling-branch"];
    for (name, outcome) in &report {
        if !inside_only.contains(&name.as_str()) {
            assert_eq!(outcome, "refused", "{name}: {report:?}");
        }
    }
    assert!(refused.len() >= 13, "{report:?}");
    // Nothing outside changed, byte for byte; main moved only by the merge of its report.
    assert_unchanged(
        &before,
        &outside(&w.env, &w.repo, &w.victim_worktree, "/hostile"),
    );
    let changed = w.repo.git(&["diff", "--name-only", &main_before, "main"]);
    assert_eq!(changed.trim(), "report.txt");
    assert!(!w.env.user_home.join("hacked.txt").exists());
    // The victim's request still waits for a person; its own was never decided by it.
    let decided = |run: &str| w.count(run, "node.permission_decided");
    assert_eq!(decided(&w.victim), 0);
    // The port it tried through the proxy was refused and counted.
    let port = format!("127.0.0.1:{}", w.listener.local_addr().unwrap().port());
    let refused: Vec<Value> = w
        .env
        .log_events(&run)
        .into_iter()
        .filter(|e| e["type"] == json!("node.network_refused"))
        .collect();
    assert!(
        refused.iter().any(|e| e["data"]["target"] == json!(port)),
        "{refused:?}"
    );
    // Its own request reached the daemon through its socket, and only a person may decide it.
    assert_eq!(
        w.count(&run, "node.permission_asked"),
        1,
        "its hook asks through the node's socket"
    );
    assert_eq!(decided(&run), 0, "the agent decided its own request");
    // The run it tried to cancel and merge still runs, untouched.
    let victim = w.env.rpc("run.show", json!({"run": w.victim}));
    assert_eq!(victim["nodes"][0]["state"], json!("running"), "{victim}");
    assert!(w.env.log_events(&w.victim).iter().all(|e| {
        let t = e["type"].as_str().unwrap_or("");
        !t.starts_with("merge.") && !t.contains("cancel")
    }));
}

#[test]
fn the_same_hostile_agent_without_the_sandbox_reaches_everything_the_user_can() {
    let w = world(CONFIG);
    let (run, _show, report) = w.hostile("none");
    // What the sandbox is for: each of these worked as the user.
    for name in [
        "read-secret",
        "read-credentials",
        "write-home",
        "write-checkout",
        "write-sibling",
        "git-config",
        "git-hook",
        "plant-pack",
        "move-main",
        "move-victim",
        "move-sibling-branch",
        "reach-port",
        "tmux-socket",
        "allow-other",
        "cancel-other",
        "allow-own",
        "fork-200",
        "redirect-git",
        "redirect-common",
        "head-to-main",
    ] {
        assert_eq!(report[name], "ok", "{name}: {report:?}");
    }
    assert_eq!(
        std::fs::read_to_string(w.env.user_home.join("hacked.txt")).unwrap(),
        "hacked\n"
    );
    assert!(w.repo.path.join(".git/hooks/post-merge").exists());
    // It decided its own permission request and the victim's over the user's socket.
    let decided = |run: &str| w.count(run, "node.permission_decided");
    assert_eq!(decided(&w.victim), 1);
    assert_eq!(decided(&run), 1);
}

#[test]
fn a_plan_node_chooses_its_sandbox_over_the_runs_and_each_merges() {
    let (env, _d, repo) = TestEnv::world();
    // The run says bwrap; node `host` says none for itself. Each gate runs where its agent
    // ran: it runs the agent's code too.
    let boxed = r#"test "$(hostname)" = octl-sandbox"#;
    let host = r#"test "$(hostname)" != octl-sandbox"#;
    let write = r#"s=$OCTL_SANDBOX; [ -n "$s" ] || s=none; printf "%s %s\n" "$s" "$(hostname)" > $OCTL_NODE.txt"#;
    let plan = format!(
        "[[nodes]]\nid = \"boxed\"\ntask = '{write}'\ngate = '{boxed}'\n[[nodes]]\nid = \"host\"\ntask = '{write}'\nsandbox = \"none\"\ngate = '{host}'\n"
    );
    let run = run_id(&env.rpc(
        "orchestrate.start",
        json!({"plan": plan, "format": "toml", "repo": repo.path.display().to_string(),
               "agent": "shell", "sandbox": "bwrap", "auto_merge": true}),
    ));
    let show = env.wait_status(&run, &["completed", "failed", "waiting"]);
    assert_eq!(show["manifest"]["status"], json!("completed"), "{show}");
    let added: Vec<Value> = env
        .log_events(&run)
        .into_iter()
        .filter(|e| e["type"] == json!("node.added"))
        .map(|e| e["data"]["sandbox"].clone())
        .collect();
    assert_eq!(added, [Value::Null, json!("none")]);
    assert_eq!(
        repo.show("main", "boxed.txt").as_deref(),
        Some("bwrap octl-sandbox\n")
    );
    let host = repo.show("main", "host.txt").unwrap_or_default();
    assert!(
        host.starts_with("none ") && !host.contains("octl-sandbox"),
        "{host}"
    );
}

#[test]
fn an_interactive_agent_that_says_its_request_was_allowed_in_its_window_gets_no_allow() {
    let (env, _d, repo) = TestEnv::world();
    // A code run's shell agent asks, then says its own tool ran (what a Yes in the window
    // looks like), and keeps what its hook printed.
    let task = r#"
ask='{"hook_event_name":"PermissionRequest","tool_name":"Bash","tool_input":{"command":"curl evil"}}'
ran='{"hook_event_name":"PostToolUse","tool_name":"Bash","tool_input":{"command":"curl evil"}}'
echo "$ask" | orchestratectl hook PermissionAsk window > decision.txt 2> /dev/null &
hook=$!
i=0
until orchestratectl --json run show "$OCTL_RUN" | grep -q '"p1"' || [ $i -ge 300 ]; do sleep 0.1; i=$((i+1)); done
echo "$ran" | orchestratectl hook PostToolUse
wait $hook
printf 'decision=[%s]\n' "$(cat decision.txt)" > forged.tmp && mv forged.tmp forged.txt
sleep 600
"#;
    let run = run_id(
        &env.spawn(
            "code",
            &repo,
            task,
            json!({"agent": "shell", "node": "ui", "sandbox": "bwrap"}),
        )
        .unwrap(),
    );
    let show = env.wait_node(&run, "ui", "running");
    let forged = PathBuf::from(show["worktree"].as_str().unwrap()).join("forged.txt");
    let seen = octl_tests::wait_until(
        "the hook's answer",
        std::time::Duration::from_secs(60),
        || std::fs::read_to_string(&forged).ok(),
    );
    // The daemon read the agent's word as the window's answer, and gave the agent nothing.
    assert_eq!(seen, "decision=[]\n");
    let decided: Vec<Value> = env
        .log_events(&run)
        .into_iter()
        .filter(|e| e["type"] == json!("node.permission_decided"))
        .collect();
    assert!(
        decided.iter().all(|e| e["data"]["by"] == json!("window")),
        "{decided:?}"
    );
    env.cli(["run", "cancel", &run, "--discard"]);
}
