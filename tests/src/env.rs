//! An isolated world for one test: a temp dir holding the octl home, a fake user `HOME`, a
//! `CLAUDE_CONFIG_DIR`, and git's identity in the environment. The real `octld` and
//! `orchestratectl` binaries run inside it; nothing touches the user's own home or tmux.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::http;
use crate::wait::wait_until;

/// A binary of the workspace, built by `cargo build --workspace --bins`.
pub fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    // Tests live in target/<profile>/deps/, the bench binary in target/<profile>/.
    let here = exe.parent().expect("exe dir");
    let path = [here, here.parent().unwrap_or(here)]
        .iter()
        .map(|d| d.join(name))
        .find(|p| p.exists())
        .unwrap_or_else(|| here.join(name));
    assert!(
        path.exists(),
        "{} is missing: build the binaries first with `cargo build --workspace --bins` (the README's test command does)",
        path.display()
    );
    path
}

pub struct TestEnv {
    pub root: tempfile::TempDir,
    /// `$OCTL_HOME`.
    pub home: PathBuf,
    /// `$HOME` of every process started here.
    pub user_home: PathBuf,
    /// `$CLAUDE_CONFIG_DIR`.
    pub claude_dir: PathBuf,
    extra_env: Vec<(String, String)>,
    /// The open-file limit (soft and hard) of every process started here, when set.
    open_files: Option<u64>,
}

impl Default for TestEnv {
    fn default() -> Self {
        Self::new()
    }
}

impl TestEnv {
    pub fn new() -> TestEnv {
        let root = tempfile::Builder::new()
            .prefix("octl-test-")
            .tempdir()
            .expect("temp dir");
        let home = root.path().join("octl");
        let user_home = root.path().join("user");
        let claude_dir = root.path().join("claude");
        std::fs::create_dir_all(&user_home).unwrap();
        std::fs::create_dir_all(&claude_dir).unwrap();
        TestEnv {
            root,
            home,
            user_home,
            claude_dir,
            extra_env: Vec::new(),
            open_files: None,
        }
    }

    pub fn socket(&self) -> PathBuf {
        self.home.join("octld.sock")
    }

    pub fn run_dir(&self, run: &str) -> PathBuf {
        self.home.join("runs").join(run)
    }

    /// Adds an environment variable to every process started from now on.
    pub fn set_env(&mut self, key: &str, value: &str) {
        self.extra_env.push((key.into(), value.into()));
    }

    /// Gives every process started from now on (the daemon, the CLI, what they start) an
    /// open-file limit of `n`, soft and hard, as `ulimit -n n` does (macOS's default is 256).
    pub fn limit_open_files(&mut self, n: u64) {
        self.open_files = Some(n);
    }

    /// Applies the isolated environment to a command.
    pub fn isolate(&self, cmd: &mut Command) {
        if let Some(n) = self.open_files {
            use std::os::unix::process::CommandExt;
            // SAFETY: setrlimit is async-signal-safe and touches no memory of the parent.
            unsafe {
                cmd.pre_exec(move || {
                    let lim = libc::rlimit {
                        rlim_cur: n as libc::rlim_t,
                        rlim_max: n as libc::rlim_t,
                    };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        for var in [
            "OCTL_RUN",
            "OCTL_NODE",
            "OCTL_WORKTREE",
            "OCTL_MANIFEST",
            "OCTL_AGENT",
            "OCTL_NO_AUTOSTART",
            "TMUX",
            "TMUX_PANE",
            // A suite run under a service manager must not hand its socket or readiness
            // channel to the test daemons.
            "NOTIFY_SOCKET",
            "LISTEN_PID",
            "LISTEN_FDS",
            "LISTEN_FDNAMES",
        ] {
            cmd.env_remove(var);
        }
        // Whatever Claude Code or model settings the caller has never leak into a test.
        for var in crate::model::CLAUDE_ENV_REMOVE {
            cmd.env_remove(var);
        }
        cmd.env("OCTL_HOME", &self.home)
            .env("HOME", &self.user_home)
            .env("CLAUDE_CONFIG_DIR", &self.claude_dir)
            .env("OCTLD_BIN", bin("octld"))
            .env("GIT_AUTHOR_NAME", "Octl Test")
            .env("GIT_AUTHOR_EMAIL", "test@octl.invalid")
            .env("GIT_COMMITTER_NAME", "Octl Test")
            .env("GIT_COMMITTER_EMAIL", "test@octl.invalid")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", self.user_home.join(".gitconfig"))
            .env("RUST_BACKTRACE", "1")
            // A finished run is let go of at once, so every test also goes through the runs
            // the daemon folds from their logs on demand (and makes active again).
            .env("OCTL_REST_AFTER_MS", "0");
        for (k, v) in &self.extra_env {
            cmd.env(k, v);
        }
    }

    /// Starts the real daemon in the foreground on this home and waits until it answers.
    pub fn start_daemon(&self) -> Daemon {
        self.start_daemon_with(&[])
    }

    /// Like [`start_daemon`](Self::start_daemon), with extra environment for this daemon only
    /// (e.g. `OCTL_FAILPOINTS`).
    pub fn start_daemon_with(&self, env: &[(&str, &str)]) -> Daemon {
        self.start_daemon_within(env, Duration::from_secs(10))
    }

    /// Like [`start_daemon_with`](Self::start_daemon_with), waiting up to `wait` for it to
    /// answer (a start that builds the run index from many logs).
    pub fn start_daemon_within(&self, env: &[(&str, &str)], wait: Duration) -> Daemon {
        self.start_daemon_from(&bin("octld"), env, wait)
    }

    /// Like [`start_daemon_within`](Self::start_daemon_within), with the daemon binary at
    /// `octld` (a release build, say).
    pub fn start_daemon_from(&self, octld: &Path, env: &[(&str, &str)], wait: Duration) -> Daemon {
        let mut cmd = Command::new(octld);
        cmd.arg("--home").arg(&self.home).arg("--foreground");
        self.isolate(&mut cmd);
        for (k, v) in env {
            cmd.env(k, v);
        }
        // Its stderr goes to a file: a pipe nobody reads would fill up and stall the daemon.
        let stderr_path = self
            .root
            .path()
            .join(format!("octld-{}.stderr", ulid_like()));
        let stderr = std::fs::File::create(&stderr_path).expect("stderr file");
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr);
        let mut child = cmd.spawn().expect("start octld");
        wait_until("octld to answer", wait, || {
            if let Ok(Some(status)) = child.try_wait() {
                let err = std::fs::read_to_string(&stderr_path).unwrap_or_default();
                panic!("octld exited during start ({status}): {err}");
            }
            self.try_rpc("daemon.status", json!({})).ok().map(|_| ())
        });
        Daemon {
            child: Some(child),
            stderr_path,
        }
    }

    /// Runs `orchestratectl --home <home> <args>` to completion.
    pub fn cli<I, S>(&self, args: I) -> Cli
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.cli_with(args, |_| {})
    }

    /// Like [`cli`](Self::cli), with a chance to adjust the command (env, cwd).
    pub fn cli_with<I, S>(&self, args: I, adjust: impl FnOnce(&mut Command)) -> Cli
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = self.cli_command(args);
        adjust(&mut cmd);
        Cli::from(cmd.output().expect("run orchestratectl"))
    }

    /// Starts `orchestratectl --home <home> <args>` without waiting for it: stdin empty,
    /// stdout and stderr piped (`adjust` may change that or the environment);
    /// `Cli::from(child.wait_with_output())` reads what it said.
    pub fn start_cli_with<I, S>(&self, args: I, adjust: impl FnOnce(&mut Command)) -> Child
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = self.cli_command(args);
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        adjust(&mut cmd);
        cmd.spawn().expect("start orchestratectl")
    }

    /// `orchestratectl --home <home> <args>` in this world, stdin empty.
    fn cli_command<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = Command::new(bin("orchestratectl"));
        cmd.arg("--home").arg(&self.home).args(args);
        self.isolate(&mut cmd);
        cmd.stdin(Stdio::null());
        cmd
    }

    /// One JSON-RPC call; returns the `result`, or the `error` object as Err.
    pub fn try_rpc(&self, method: &str, params: Value) -> Result<Value, Value> {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let resp = http::request(
            &self.socket(),
            "POST",
            "/rpc",
            Some(body.to_string().as_bytes()),
        )
        .map_err(|e| json!({ "io": e.to_string() }))?;
        let v = resp.json();
        match v.get("result") {
            Some(r) => Ok(r.clone()),
            None => Err(v["error"].clone()),
        }
    }

    /// One JSON-RPC call that must succeed.
    pub fn rpc(&self, method: &str, params: Value) -> Value {
        self.try_rpc(method, params.clone())
            .unwrap_or_else(|e| panic!("{method} {params} failed: {e}"))
    }

    /// Sends a raw body to `POST /rpc`.
    pub fn raw_rpc(&self, body: &[u8]) -> http::Response {
        http::request(&self.socket(), "POST", "/rpc", Some(body)).expect("raw rpc")
    }

    /// Creates a generic run and returns its id.
    pub fn create_run(&self, title: &str) -> String {
        self.rpc("run.create", json!({"kind": "generic", "title": title}))["id"]
            .as_str()
            .unwrap()
            .to_string()
    }

    /// The lines of a run's log, parsed.
    pub fn log_events(&self, run: &str) -> Vec<Value> {
        let text =
            std::fs::read_to_string(self.run_dir(run).join("events.jsonl")).unwrap_or_default();
        text.lines()
            .map(|l| serde_json::from_str(l).expect("log line is JSON"))
            .collect()
    }

    /// The run's `node.permission_asked` of `request`, once it is both in the log file and in
    /// the daemon's view (the file has it a moment before the write is folded in), so whatever
    /// the caller asks next sees it. Fails with the run's events and its agents' logs.
    pub fn wait_permission_asked(&self, run: &str, request: &str) -> Value {
        crate::wait::wait_until_describing(
            &format!("request {request} asked"),
            Duration::from_secs(90),
            || {
                let seen = self.rpc("run.show", json!({"run": run}))["permissions"]
                    .as_array()
                    .is_some_and(|ps| ps.iter().any(|p| p["request"] == json!(request)));
                self.log_events(run).into_iter().find(|e| {
                    seen && e["type"] == json!("node.permission_asked")
                        && e["data"]["request"] == json!(request)
                })
            },
            || {
                let mut logs = String::new();
                if let Ok(rd) = std::fs::read_dir(self.run_dir(run).join("logs")) {
                    for e in rd.flatten() {
                        let text = std::fs::read_to_string(e.path()).unwrap_or_default();
                        logs.push_str(&format!("\n--- {}\n{text}", e.path().display()));
                    }
                }
                format!("{:?}{logs}", self.event_types(run))
            },
        )
    }

    /// Every projection file of a run, path → bytes.
    pub fn projections(&self, run: &str) -> std::collections::BTreeMap<String, Vec<u8>> {
        let dir = self.run_dir(run);
        let mut out = std::collections::BTreeMap::new();
        let mut files = vec![dir.join("manifest.json")];
        for sub in ["nodes", "discussions", "spinoffs"] {
            if let Ok(rd) = std::fs::read_dir(dir.join(sub)) {
                files.extend(
                    rd.filter_map(|e| e.ok())
                        .map(|e| e.path())
                        .filter(|p| p.extension().is_some_and(|x| x == "json")),
                );
            }
        }
        for f in files {
            if let Ok(bytes) = std::fs::read(&f) {
                out.insert(f.strip_prefix(&dir).unwrap().display().to_string(), bytes);
            }
        }
        out
    }
}

impl Drop for TestEnv {
    /// The private tmux server outlives the daemon; stop it with the test.
    fn drop(&mut self) {
        if let Some(dir) = std::env::var_os("OCTL_TEST_KEEP_LOGS") {
            keep_logs(&self.home.join("runs"), &PathBuf::from(dir));
        }
        let sock = self.home.join("tmux.sock");
        if sock.exists() {
            let _ = Command::new("tmux")
                .arg("-S")
                .arg(&sock)
                .arg("kill-server")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        // What the agents left (a process that ignored the tmux server's SIGHUP) and their
        // cgroups: only this home's, by its marker and the cgroups it recorded.
        octld::contain::reap_home(&self.home);
        // A test that panicked leaves its followers (`run logs --follow`, `event feed
        // --follow`) and any daemon a CLI started: only this home's, by `--home HOME`.
        for pid in started_for(&self.home) {
            // SAFETY: a plain kill of a process found by its own argv.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

/// The processes whose argv names `home` as `--home HOME` (the CLIs a test ran, the daemons
/// they started), other than this one.
fn started_for(home: &Path) -> Vec<libc::pid_t> {
    use std::os::unix::ffi::OsStrExt;
    let me = std::process::id() as libc::pid_t;
    let want = home.as_os_str().as_bytes();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<libc::pid_t>().ok())
        .filter(|pid| *pid != me)
        .filter(|pid| {
            let argv = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let words: Vec<&[u8]> = argv.split(|b| *b == 0).collect();
            words.windows(2).any(|w| w[0] == b"--home" && w[1] == want)
        })
        .collect()
}

impl TestEnv {
    /// The agents of this home with processes now, found as the daemon finds them (their
    /// cgroups, their environment marker), daemon or not: (run, node, pids).
    pub fn agent_processes(&self) -> Vec<(String, String, Vec<u32>)> {
        octld::contain::found_in_home(&self.home)
            .into_iter()
            .filter(|f| !f.pids.is_empty())
            .map(|f| (f.run, f.node, f.pids))
            .collect()
    }
}

/// Copies each run's log and projection files (not its agents' output logs) to
/// `dest/<run>/`, for recording a corpus of real logs (`OCTL_TEST_KEEP_LOGS=DIR`; see
/// octl-proto's `tests/corpus`).
fn keep_logs(runs: &std::path::Path, dest: &std::path::Path) {
    fn copy(from: &std::path::Path, to: &std::path::Path) {
        let Ok(entries) = std::fs::read_dir(from) else {
            return;
        };
        for e in entries.flatten() {
            let (path, name) = (e.path(), e.file_name());
            if path.is_dir() {
                if name != "logs" {
                    copy(&path, &to.join(&name));
                }
            } else if name.to_string_lossy().ends_with(".json")
                || name.to_string_lossy().ends_with(".jsonl")
            {
                let _ = std::fs::create_dir_all(to);
                let _ = std::fs::copy(&path, to.join(&name));
            }
        }
    }
    copy(runs, dest);
}

impl TestEnv {
    /// The world most tests start from: a fresh env, its daemon started, and a repository
    /// named `repo` in it. The daemon stops when the [`Daemon`] is dropped.
    pub fn world() -> (TestEnv, Daemon, crate::TestRepo) {
        let env = TestEnv::new();
        let daemon = env.start_daemon();
        let repo = crate::TestRepo::new(&env, "repo");
        (env, daemon, repo)
    }

    /// Spawns a run through the daemon (`spawn.spinoff` or `spawn.code`); the error object
    /// on failure.
    pub fn spawn(
        &self,
        kind: &str,
        repo: &crate::TestRepo,
        task: &str,
        extra: Value,
    ) -> Result<Value, Value> {
        let mut params = json!({"task": task, "repo": repo.path.display().to_string()});
        if let Value::Object(m) = extra {
            for (k, v) in m {
                params[k] = v;
            }
        }
        self.try_rpc(&format!("spawn.{kind}"), params)
    }

    /// Waits until the run's status is one of `statuses`; returns `run.show`.
    pub fn wait_status(&self, run: &str, statuses: &[&str]) -> Value {
        wait_until(
            &format!("run {run} to be {statuses:?}"),
            Duration::from_secs(60),
            || {
                let show = self.rpc("run.show", json!({"run": run}));
                let status = show["manifest"]["status"]
                    .as_str()
                    .unwrap_or("")
                    .to_string();
                statuses.contains(&status.as_str()).then_some(show)
            },
        )
    }

    /// A spinoff run whose shell node `clash` edits `shared.txt` after `main` changed it too,
    /// left in a merge conflict (its branch and worktree kept); returns the run's id.
    pub fn conflicted_spinoff(&self, repo: &crate::TestRepo) -> String {
        repo.write("shared.txt", "base\n");
        repo.commit_all("shared file");
        let task = "while [ ! -e go ]; do sleep 0.05; done; printf 'agent\\n' > shared.txt";
        let run = self
            .spawn(
                "spinoff",
                repo,
                task,
                json!({"agent": "shell", "node": "clash"}),
            )
            .unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string();
        self.wait_node(&run, "clash", "running");
        repo.write("shared.txt", "main\n");
        repo.commit_all("main edits shared");
        let worktree = self.home.join("worktrees").join(&run).join("clash");
        std::fs::write(worktree.join("go"), "").unwrap();
        self.wait_node(&run, "clash", "conflict");
        run
    }

    /// Waits until node `node` of `run` is in `state`; returns the node.
    pub fn wait_node(&self, run: &str, node: &str, state: &str) -> Value {
        wait_until(
            &format!("node {node} of {run} to be {state}"),
            Duration::from_secs(60),
            || {
                let show = self.rpc("run.show", json!({"run": run}));
                show["nodes"]
                    .as_array()
                    .and_then(|ns| ns.iter().find(|n| n["id"] == json!(node)).cloned())
                    .filter(|n| n["state"] == json!(state))
            },
        )
    }

    /// The types of a run's events, in order.
    pub fn event_types(&self, run: &str) -> Vec<String> {
        self.log_events(run)
            .iter()
            .map(|e| e["type"].as_str().unwrap().to_string())
            .collect()
    }

    /// Window names (`session:window`) on the private tmux server, less the daemon's hidden
    /// session for its tmux control client (`octld::tmux::CONTROL_SESSION`), which belongs to
    /// no run.
    pub fn tmux_windows(&self) -> Vec<String> {
        let out = self.tmux(&["list-windows", "-a", "-F", "#{session_name}:#{window_name}"]);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|w| !w.starts_with("octl-control:"))
            .map(str::to_string)
            .collect()
    }

    /// Runs `tmux ARGS…` on the daemon's private tmux server (never the user's).
    pub fn tmux(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-S")
            .arg(self.home.join("tmux.sock"))
            .args(args)
            .output()
            .expect("run tmux")
    }

    /// What tmux window `target` (`RUN:NODE`) shows now.
    pub fn tmux_screen(&self, target: &str) -> String {
        let out = self.tmux(&["capture-pane", "-p", "-t", target]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Writes the home's `config.toml` (the daemon reads it when it starts).
    pub fn write_config(&self, toml: &str) {
        std::fs::create_dir_all(&self.home).unwrap();
        std::fs::write(self.home.join("config.toml"), toml).unwrap();
    }

    /// `orchestratectl --json spawn ARGS…` run in `repo`'s working tree, as a user does (the
    /// run is on the repository it is run in); asserts that it succeeded and returns the id of
    /// the run.
    pub fn cli_spawn(&self, repo: &crate::TestRepo, args: &[&str]) -> String {
        let out = self.cli_with(["--json", "spawn"].iter().chain(args), |c| {
            c.current_dir(&repo.path);
        });
        out.ok();
        out.json()["id"].as_str().unwrap().to_string()
    }
}

/// A daemon started by [`TestEnv::start_daemon`]; killed when dropped.
pub struct Daemon {
    child: Option<Child>,
    stderr_path: PathBuf,
}

fn ulid_like() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

impl Daemon {
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("daemon running").id()
    }

    /// `kill -9`: the crash the store must survive.
    pub fn kill9(mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Sends a signal and waits for the exit status.
    pub fn signal_and_wait(self, sig: i32) -> std::process::ExitStatus {
        let c = self.child.as_ref().expect("daemon running");
        unsafe { libc::kill(c.id() as i32, sig) };
        self.wait_exit()
    }

    /// Waits for a daemon that was told to stop (e.g. `daemon.shutdown`).
    pub fn wait_exit(mut self) -> std::process::ExitStatus {
        let mut c = self.child.take().expect("daemon running");
        let status = wait_until("octld to exit", Duration::from_secs(15), || {
            c.try_wait().ok().flatten()
        });
        if !status.success() {
            eprintln!(
                "octld exited with {status}; its stderr:\n{}",
                std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
            );
        }
        status
    }

    /// What the daemon printed on stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// What a CLI invocation did.
#[derive(Debug)]
pub struct Cli {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Cli {
    fn from(o: Output) -> Cli {
        Cli {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

impl Cli {
    /// Stdout as one JSON document.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}): {self:?}"))
    }

    /// The `{"error":{…}}` object printed on stderr with `--json`.
    pub fn error(&self) -> Value {
        let v: Value = serde_json::from_str(self.stderr.trim())
            .unwrap_or_else(|e| panic!("stderr is not a JSON error ({e}): {self:?}"));
        v["error"].clone()
    }

    pub fn ok(&self) -> &Self {
        assert_eq!(self.code, 0, "command failed: {self:?}");
        self
    }
}
