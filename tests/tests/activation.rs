//! System integration without a service manager: a listening socket handed to the real octld
//! the way systemd does it (fd 3, `LISTEN_FDS=1`, `LISTEN_PID` = octld's pid), readiness on a
//! `NOTIFY_SOCKET` the test listens on, and the units `daemon install-service` renders.
//! The daemon binding its own socket (and removing it at exit) is covered in `daemon.rs`.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixDatagram, UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use octl_tests::{bin, wait_until, TestEnv, TestRepo};
use serde_json::{json, Value};

/// A daemon started by the test with a socket handed over; killed if the test fails early.
struct Started {
    child: Option<Child>,
    stderr: PathBuf,
}

impl Started {
    fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    fn wait_exit(mut self) -> (ExitStatus, String) {
        let mut child = self.child.take().unwrap();
        let status = wait_until("octld to exit", Duration::from_secs(15), || {
            child.try_wait().unwrap()
        });
        (
            status,
            std::fs::read_to_string(&self.stderr).unwrap_or_default(),
        )
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Starts `octld --foreground --home <home>` as systemd starts a socket-activated service:
/// `fd` becomes fd 3, `LISTEN_FDS=1`, and `LISTEN_PID` is octld's own pid. The pid is known
/// only in the child, so `sh` exports its own `$$` and `exec`s octld, which keeps that pid;
/// `pre_exec` only calls `dup2`/`fcntl`, which are async-signal-safe.
fn start_activated(env: &TestEnv, fd: Option<RawFd>, extra_env: &[(&str, &str)]) -> Started {
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(r#"LISTEN_PID=$$; export LISTEN_PID; exec "$0" "$@""#)
        .arg(bin("octld"))
        .arg("--foreground")
        .arg("--home")
        .arg(&env.home);
    env.isolate(&mut cmd);
    cmd.env_remove("LISTEN_PID").env_remove("NOTIFY_SOCKET");
    if fd.is_some() {
        cmd.env("LISTEN_FDS", "1")
            .env("LISTEN_FDNAMES", "octld.socket");
    }
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    let stderr = env
        .root
        .path()
        .join(format!("octld-activated-{}.stderr", unique()));
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr).unwrap());
    if let Some(fd) = fd {
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                let r = if fd == 3 {
                    // Already fd 3: only the close-on-exec flag std sets must go.
                    libc::fcntl(3, libc::F_SETFD, 0)
                } else {
                    // dup2 clears close-on-exec on the new fd.
                    libc::dup2(fd, 3)
                };
                if r < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    Started {
        child: Some(cmd.spawn().expect("start octld through sh")),
        stderr,
    }
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// The test's side of `NOTIFY_SOCKET`.
struct Notify {
    sock: UnixDatagram,
}

impl Notify {
    fn bind(path: &Path) -> Notify {
        Notify {
            sock: UnixDatagram::bind(path).unwrap(),
        }
    }

    /// Waits (with a deadline, on the socket itself) for a message holding `line`; returns it.
    fn expect(&self, line: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(15);
        let mut buf = vec![0u8; 4096];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "no {line} on NOTIFY_SOCKET within 15 s");
            self.sock.set_read_timeout(Some(left)).unwrap();
            match self.sock.recv(&mut buf) {
                Ok(n) => {
                    let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
                    if msg.lines().any(|l| l == line) {
                        return msg;
                    }
                }
                Err(e)
                    if e.kind() == std::io::ErrorKind::WouldBlock
                        || e.kind() == std::io::ErrorKind::TimedOut => {}
                Err(e) => panic!("reading NOTIFY_SOCKET: {e}"),
            }
        }
    }

    /// Nothing was sent (so far).
    fn nothing(&self) -> bool {
        self.sock.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 64];
        let got = self.sock.recv(&mut buf);
        self.sock.set_nonblocking(false).unwrap();
        matches!(got, Err(ref e) if e.kind() == std::io::ErrorKind::WouldBlock)
    }
}

/// A home as `DirectoryMode=0700` makes it, with the socket bound and listening on
/// `<home>/octld.sock` (mode 0600), as systemd's socket unit does.
fn bind_like_systemd(env: &TestEnv) -> UnixListener {
    std::fs::create_dir_all(&env.home).unwrap();
    std::fs::set_permissions(&env.home, std::fs::Permissions::from_mode(0o700)).unwrap();
    let listener = UnixListener::bind(env.socket()).unwrap();
    std::fs::set_permissions(env.socket(), std::fs::Permissions::from_mode(0o600)).unwrap();
    listener
}

fn inode(p: &Path) -> u64 {
    let meta = std::fs::metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    assert!(meta.file_type().is_socket(), "{} is a socket", p.display());
    meta.ino()
}

#[test]
fn octld_serves_a_socket_handed_over_like_systemd_and_never_unlinks_it() {
    let env = TestEnv::new();
    let listener = bind_like_systemd(&env);
    let ino = inode(&env.socket());
    let notify_path = env.root.path().join("notify.sock");
    let notify = Notify::bind(&notify_path);
    let notify_var = notify_path.display().to_string();

    let d = start_activated(
        &env,
        Some(listener.as_raw_fd()),
        &[("NOTIFY_SOCKET", &notify_var)],
    );
    let ready = notify.expect("READY=1");
    assert!(ready.contains("STATUS="), "{ready:?}");
    // Ready means answering: no retry needed.
    let status = env
        .try_rpc("daemon.status", json!({}))
        .expect("answers as soon as it said READY=1");
    assert_eq!(
        status["pid"],
        json!(d.pid()),
        "LISTEN_PID was octld's own pid"
    );
    let log = std::fs::read_to_string(env.home.join("octld.log")).unwrap();
    assert!(
        log.contains("handed over") && log.contains("\"by\":\"systemd\""),
        "the log says where the socket came from: {log}"
    );

    // Nothing the daemon starts inherits the activation variables.
    let repo = TestRepo::new(&env, "repo");
    let seen = env.root.path().join("agent-env.txt");
    let task = format!("env > '{}'; echo ok > ok.txt", seen.display());
    let run = env
        .spawn(
            "spinoff",
            &repo,
            &task,
            json!({"agent": "shell", "node": "env"}),
        )
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let show = env.wait_status(&run, &["completed", "failed"]);
    assert_eq!(show["manifest"]["status"], json!("completed"), "{show}");
    let agent_env = std::fs::read_to_string(&seen).unwrap();
    assert!(agent_env.contains("OCTL_HOME="), "{agent_env}");
    for var in [
        "LISTEN_PID=",
        "LISTEN_FDS=",
        "LISTEN_FDNAMES=",
        "NOTIFY_SOCKET=",
    ] {
        assert!(
            !agent_env.lines().any(|l| l.starts_with(var)),
            "{var} leaked into the agent: {agent_env}"
        );
    }

    env.rpc("daemon.shutdown", json!({}));
    notify.expect("STOPPING=1");
    let (status, stderr) = d.wait_exit();
    assert!(status.success(), "{status}: {stderr}");
    assert_eq!(
        inode(&env.socket()),
        ino,
        "the handed-over socket is still there, the same one"
    );

    // Like systemd, the test still listens: a request sent while no daemon runs waits in the
    // queue and is answered by the next activated daemon.
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "daemon.status"}).to_string();
    let mut early = UnixStream::connect(env.socket()).expect("the socket still listens");
    write!(
        early,
        "POST /rpc HTTP/1.1\r\nHost: octld\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let d2 = start_activated(
        &env,
        Some(listener.as_raw_fd()),
        &[("NOTIFY_SOCKET", &notify_var)],
    );
    early
        .set_read_timeout(Some(Duration::from_secs(15)))
        .unwrap();
    let mut response = String::new();
    early.read_to_string(&mut response).unwrap();
    let (_, answer) = response
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("an HTTP response: {response:?}"));
    let answer: Value = serde_json::from_str(answer).unwrap();
    assert_eq!(answer["result"]["pid"], json!(d2.pid()), "{answer}");
    notify.expect("READY=1");

    // `daemon stop` waits for the process, never connecting again: with systemd a connection
    // after octld let go of the socket would start a new octld.
    let stop = env.cli(["daemon", "stop"]);
    stop.ok();
    assert!(stop.stdout.contains("stays"), "{}", stop.stdout);
    notify.expect("STOPPING=1");
    let (status, stderr) = d2.wait_exit();
    assert!(status.success(), "{status}: {stderr}");
    assert_eq!(inode(&env.socket()), ino);
    listener.set_nonblocking(true).unwrap();
    match listener.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("a connection was left queued after the daemon stopped: {other:?}"),
    }
    drop(listener);
}

#[test]
fn a_handed_over_socket_that_is_not_a_listening_stream_is_refused() {
    let env = TestEnv::new();
    std::fs::create_dir_all(&env.home).unwrap();
    // ListenDatagram= instead of ListenStream=.
    let dgram = UnixDatagram::bind(env.socket()).unwrap();
    let ino = inode(&env.socket());
    let notify_path = env.root.path().join("notify.sock");
    let notify = Notify::bind(&notify_path);
    let d = start_activated(
        &env,
        Some(dgram.as_raw_fd()),
        &[("NOTIFY_SOCKET", &notify_path.display().to_string())],
    );
    let (status, stderr) = d.wait_exit();
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("fd 3") && stderr.contains("not a stream socket"),
        "says what is wrong: {stderr}"
    );
    assert_eq!(inode(&env.socket()), ino, "nothing bound in its place");
    assert!(notify.nothing(), "never ready");
}

#[cfg(target_os = "linux")]
#[test]
fn without_activation_it_binds_its_own_socket_and_notifies_an_abstract_socket() {
    let env = TestEnv::new();
    // Variables meant for another process (LISTEN_PID is not octld's pid) are ignored.
    let name = format!("octl-test-notify-{}-{}", std::process::id(), unique());
    let notify = {
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        Notify {
            sock: UnixDatagram::bind_addr(&addr).unwrap(),
        }
    };
    let mut cmd = Command::new(bin("octld"));
    cmd.arg("--foreground").arg("--home").arg(&env.home);
    env.isolate(&mut cmd);
    cmd.env("LISTEN_PID", "1")
        .env("LISTEN_FDS", "1")
        .env("NOTIFY_SOCKET", format!("@{name}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let d = Started {
        child: Some(cmd.spawn().unwrap()),
        stderr: env.root.path().join("none"),
    };
    notify.expect("READY=1");
    assert_eq!(env.rpc("daemon.status", json!({}))["pid"], json!(d.pid()));
    assert!(std::fs::metadata(env.socket())
        .unwrap()
        .file_type()
        .is_socket());
    env.rpc("daemon.shutdown", json!({}));
    notify.expect("STOPPING=1");
    assert!(d.wait_exit().0.success());
    assert!(!env.socket().exists(), "its own socket is removed at exit");
}

/// `daemon install-service` with the environment a test controls: no XDG_CONFIG_HOME unless
/// given, the isolated HOME.
fn install_service(env: &TestEnv, args: &[&str], xdg: Option<&Path>) -> octl_tests::Cli {
    let mut all = vec!["daemon", "install-service"];
    all.extend_from_slice(args);
    env.cli_with(all, |cmd| {
        cmd.env_remove("XDG_CONFIG_HOME");
        if let Some(x) = xdg {
            cmd.env("XDG_CONFIG_HOME", x);
        }
    })
}

#[test]
fn install_service_print_renders_the_units_for_this_octld_and_home() {
    let env = TestEnv::new();
    let out = install_service(&env, &["--json", "--print"], None);
    out.ok();
    let doc = out.json();
    let files = doc["files"].as_array().expect("files");
    let octld = bin("octld").display().to_string();
    let socket = env.socket().display().to_string();
    let text_of = |name: &str| -> String {
        let f = files
            .iter()
            .find(|f| f["path"].as_str().unwrap().ends_with(name))
            .unwrap_or_else(|| panic!("no {name} in {doc}"));
        f["text"].as_str().unwrap().to_string()
    };
    if cfg!(target_os = "macos") {
        assert_eq!(files.len(), 1, "{doc}");
        let plist = text_of("Library/LaunchAgents/dev.orchestratectl.octld.plist");
        assert!(
            plist.contains(&format!("<string>{octld}</string>")),
            "{plist}"
        );
        assert!(
            plist.contains(&format!("<string>{socket}</string>")),
            "{plist}"
        );
    } else {
        assert_eq!(files.len(), 2, "{doc}");
        let unit_dir = env.user_home.join(".config/systemd/user");
        for f in files {
            assert!(
                Path::new(f["path"].as_str().unwrap()).starts_with(&unit_dir),
                "{f}"
            );
        }
        let sock = text_of("/octld.socket");
        assert!(
            sock.contains(&format!("\nListenStream={socket}\n")),
            "{sock}"
        );
        assert!(sock.contains("\nSocketMode=0600\n"), "{sock}");
        let service = text_of("/octld.service");
        assert!(
            service.contains(&format!(
                "\nExecStart={octld} --foreground --home {}\n",
                env.home.display()
            )),
            "{service}"
        );
        assert!(service.contains("\nType=notify\n"), "{service}");
    }
    assert!(Path::new(&octld).is_absolute());
    // --print writes nothing.
    assert!(!env.user_home.join(".config").exists());
    assert!(!env.user_home.join("Library").exists());

    // The human form shows each file under a `# PATH` line.
    let human = install_service(&env, &["--print"], None);
    human.ok();
    for f in files {
        assert!(
            human
                .stdout
                .contains(&format!("# {}\n", f["path"].as_str().unwrap())),
            "{}",
            human.stdout
        );
    }
    assert!(human.stdout.contains(&octld), "{}", human.stdout);
}

#[test]
fn install_service_writes_once_and_overwrites_an_edited_unit_only_with_force() {
    let env = TestEnv::new();
    let xdg = env.root.path().join("xdg");
    let printed = install_service(&env, &["--json", "--print"], Some(&xdg)).json();
    let expected: Vec<(PathBuf, String)> = printed["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                PathBuf::from(f["path"].as_str().unwrap()),
                f["text"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let statuses = |doc: &Value| -> Vec<String> {
        doc["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["status"].as_str().unwrap().to_string())
            .collect()
    };

    let first = install_service(&env, &["--json"], Some(&xdg));
    first.ok();
    let doc = first.json();
    assert!(statuses(&doc).iter().all(|s| s == "installed"), "{doc}");
    for (path, text) in &expected {
        assert_eq!(&std::fs::read_to_string(path).unwrap(), text);
        if !cfg!(target_os = "macos") {
            assert!(
                path.starts_with(xdg.join("systemd/user")),
                "{}",
                path.display()
            );
        }
    }
    let next = doc["next"].to_string();
    if cfg!(target_os = "macos") {
        assert!(next.contains("launchctl bootstrap"), "{next}");
    } else {
        assert!(
            next.contains(
                "systemctl --user daemon-reload && systemctl --user enable --now octld.socket"
            ),
            "{next}"
        );
    }
    assert!(next.contains("daemon stop"), "{next}");

    let again = install_service(&env, &["--json"], Some(&xdg));
    again.ok();
    assert!(statuses(&again.json()).iter().all(|s| s == "unchanged"));

    // An edited unit is kept, and nothing is written, unless --force.
    let (edited, text) = &expected[0];
    std::fs::write(edited, format!("{text}# my change\n")).unwrap();
    let refused = install_service(&env, &["--json"], Some(&xdg));
    assert_eq!(refused.code, 4, "{refused:?}");
    assert_eq!(refused.error()["kind"], json!("forbidden"));
    assert!(refused.error()["hint"]
        .as_str()
        .unwrap()
        .contains("--force"));
    assert!(std::fs::read_to_string(edited)
        .unwrap()
        .ends_with("# my change\n"));

    let forced = install_service(&env, &["--force"], Some(&xdg));
    forced.ok();
    assert!(forced.stdout.contains("updated"), "{}", forced.stdout);
    assert!(forced.stdout.contains("Next"), "{}", forced.stdout);
    for (path, text) in &expected {
        assert_eq!(&std::fs::read_to_string(path).unwrap(), text);
    }
}
