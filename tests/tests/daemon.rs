//! The daemon's life: one per home, stale sockets, signals and shutdown, permissions.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use octl_tests::{bin, wait_until, TestEnv, TestRepo};
use serde_json::json;

fn mode(p: &std::path::Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn home_and_socket_are_private() {
    let env = TestEnv::new();
    let _d = env.start_daemon();
    assert_eq!(mode(&env.home), 0o700);
    assert_eq!(mode(&env.socket()), 0o600);
    assert!(std::fs::metadata(env.socket())
        .unwrap()
        .file_type()
        .is_socket());
    assert!(env.home.join("octld.lock").exists());
    let log = std::fs::read_to_string(env.home.join("octld.log")).unwrap();
    for line in log.lines() {
        serde_json::from_str::<serde_json::Value>(line).expect("octld.log is JSON lines");
    }
}

#[test]
fn a_second_daemon_on_the_same_home_is_refused_naming_the_holder() {
    let env = TestEnv::new();
    let d = env.start_daemon();
    let mut cmd = Command::new(bin("octld"));
    cmd.arg("--home").arg(&env.home).arg("--foreground");
    env.isolate(&mut cmd);
    let out = cmd.stdin(Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("pid {}", d.pid())),
        "names the holder: {err}"
    );
    // The first daemon is untouched.
    assert!(env.try_rpc("daemon.status", json!({})).is_ok());
    assert!(env.socket().exists());
}

#[test]
fn a_socket_left_by_a_crash_is_replaced() {
    let env = TestEnv::new();
    let d = env.start_daemon();
    let run = env.create_run("before crash");
    d.kill9();
    assert!(
        env.socket().exists(),
        "kill -9 leaves the socket file behind"
    );
    let _d = env.start_daemon();
    let show = env.rpc("run.show", json!({"run": run}));
    assert_eq!(show["manifest"]["title"], json!("before crash"));
}

#[test]
fn a_socket_that_still_answers_is_never_removed() {
    let env = TestEnv::new();
    std::fs::create_dir_all(&env.home).unwrap();
    // Something else serves the socket path (no daemon lock is held).
    let listener = std::os::unix::net::UnixListener::bind(env.socket()).unwrap();
    let mut cmd = Command::new(bin("octld"));
    cmd.arg("--home").arg(&env.home).arg("--foreground");
    env.isolate(&mut cmd);
    let out = cmd.stdin(Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("still answers"));
    assert!(env.socket().exists(), "the answering socket is left alone");
    drop(listener);
}

#[test]
fn sigterm_and_sigint_finish_in_flight_appends_then_exit_zero() {
    for sig in [libc::SIGTERM, libc::SIGINT] {
        let env = Arc::new(TestEnv::new());
        let d = env.start_daemon();
        let run = env.create_run("signals");
        let acked = Arc::new(Mutex::new(Vec::new()));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (env, run, acked) = (env.clone(), run.clone(), acked.clone());
                std::thread::spawn(move || loop {
                    match env.try_rpc("event.append", json!({"run": run, "type": "x.tick"})) {
                        Ok(r) => acked.lock().unwrap().push(r["seq"].as_u64().unwrap()),
                        Err(_) => return,
                    }
                })
            })
            .collect();
        wait_until("some appends", Duration::from_secs(20), || {
            (acked.lock().unwrap().len() >= 50).then_some(())
        });
        let status = d.signal_and_wait(sig);
        assert_eq!(status.code(), Some(0), "signal {sig}: clean exit");
        for t in threads {
            t.join().unwrap();
        }
        assert!(!env.socket().exists(), "the socket is removed");
        let logged: std::collections::HashSet<u64> = env
            .log_events(&run)
            .iter()
            .map(|e| e["seq"].as_u64().unwrap())
            .collect();
        for seq in acked.lock().unwrap().iter() {
            assert!(logged.contains(seq), "acknowledged seq {seq} is in the log");
        }
    }
}

#[test]
fn daemon_shutdown_over_rpc_answers_then_exits_zero() {
    let env = TestEnv::new();
    let d = env.start_daemon();
    let r = env.rpc("daemon.shutdown", json!({}));
    assert_eq!(r["stopping"], json!(true));
    assert_eq!(d.wait_exit().code(), Some(0));
    assert!(!env.socket().exists());
}

#[test]
fn octld_without_foreground_detaches_and_returns() {
    let env = TestEnv::new();
    let mut cmd = Command::new(bin("octld"));
    cmd.arg("--home").arg(&env.home);
    env.isolate(&mut cmd);
    let out = cmd.stdin(Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let status = env.rpc("daemon.status", json!({}));
    let pid = status["pid"].as_u64().unwrap() as i32;
    // It runs in its own session, not ours.
    assert_eq!(unsafe { libc::getsid(pid) }, pid);
    env.rpc("daemon.shutdown", json!({}));
    wait_until("detached daemon to exit", Duration::from_secs(10), || {
        (unsafe { libc::kill(pid, 0) } != 0).then_some(())
    });
}

/// config.toml is read once and again when it changes: an edit that does not parse is
/// refused with the last good file kept in force (a spawn still gets its profile), the error
/// shown by `daemon status` and `doctor` until a fixed file is in force.
#[test]
fn a_broken_config_edit_keeps_the_last_good_one_and_says_why() {
    let env = TestEnv::new();
    // A profile only config.toml defines: a spawn with it proves which file is in force.
    let good = "[agents.mine]\nautonomous = [\"/bin/sh\", \"-c\", \"echo mine > mine.txt && git add mine.txt && git commit -qm mine\", \"mine\", \"{prompt}\"]\non_exit = \"done\"\n";
    env.write_config(good);
    let _d = env.start_daemon();
    let repo = TestRepo::new(&env, "repo");
    assert_eq!(
        env.rpc("daemon.status", json!({})).get("config_error"),
        None
    );
    env.write_config("[agents.mine]\nautonomous = \"not a list\"\n");
    let status = env.rpc("daemon.status", json!({}));
    let why = status["config_error"].as_str().unwrap_or_default();
    assert!(
        why.contains("autonomous") && why.contains("the last good one stays in force"),
        "{status}"
    );
    let text = env.cli(["daemon", "status"]);
    assert!(
        text.stdout.contains("config.toml refused"),
        "{}",
        text.stdout
    );
    let agents = env.rpc("doctor.agents", json!({}));
    assert!(agents.to_string().contains("autonomous"), "{agents}");
    // The last good file is what a spawn gets.
    let run = env
        .spawn("spinoff", &repo, "write mine.txt", json!({"agent": "mine"}))
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let show = env.wait_status(&run, &["completed", "failed", "waiting"]);
    assert_eq!(show["manifest"]["status"], json!("completed"), "{show}");
    assert_eq!(repo.show("main", "mine.txt").as_deref(), Some("mine\n"));
    // Fixed (here: the profile gone), the new file is in force at once.
    env.write_config("");
    assert_eq!(
        env.rpc("daemon.status", json!({})).get("config_error"),
        None
    );
    let gone = env.spawn("spinoff", &repo, "write mine.txt", json!({"agent": "mine"}));
    assert!(gone.is_err(), "{gone:?}");
}

/// After `daemon stop`, nothing but an explicit command starts the daemon again: followers
/// (`run wait`, `event feed --follow`, `run logs --follow`) wait for it, and resume where they were once a daemon
/// is started; `daemon restart` is a stop then a start, and they carry on through it.
#[test]
fn followers_wait_for_a_stopped_daemon_and_resume_when_it_is_started() {
    use std::io::{BufRead, BufReader};
    let env = TestEnv::new();
    let d = env.start_daemon();
    let run = env.create_run("followed");
    let mut wait = env.start_cli_with(["--json", "run", "wait", &run], |c| {
        c.stderr(Stdio::null());
    });
    // Followed from a cursor taken now, so no note is missed however late it connects.
    let listed = env.cli(["--json", "event", "feed"]);
    let since = listed.stdout.lines().last().map(|l| {
        serde_json::from_str::<serde_json::Value>(l).unwrap()["cursor"]
            .as_str()
            .unwrap()
            .to_string()
    });
    let mut feed = env.start_cli_with(
        [
            "--json",
            "event",
            "feed",
            "--follow",
            "--since",
            &since.unwrap(),
        ],
        |c| {
            c.stderr(Stdio::null());
        },
    );
    let mut lines = BufReader::new(feed.stdout.take().unwrap());
    // The feed's next note.
    let mut next = || loop {
        let mut line = String::new();
        assert!(lines.read_line(&mut line).unwrap() > 0, "the feed ended");
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        if v["event"]["type"] == json!("x.note") {
            return v;
        }
    };
    let note = |n: u32| {
        env.rpc(
            "event.append",
            json!({"run": run, "type": "x.note", "data": {"n": n}}),
        );
    };
    // The feed follows (its line arrives), so both followers are connected.
    note(1);
    assert_eq!(next()["event"]["data"], json!({"n": 1}));
    // Three `run logs --follow` of one node's log, each read on a thread of its own.
    env.rpc(
        "event.append",
        json!({"run": run, "type": "node.added", "node": "a"}),
    );
    let log = env.run_dir(&run).join("logs").join("a.pane.log");
    std::fs::create_dir_all(log.parent().unwrap()).unwrap();
    let say = |line: &str| {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&log)
            .unwrap();
        std::io::Write::write_all(&mut f, format!("{line}\n").as_bytes()).unwrap();
    };
    say("line-0");
    let mut logs: Vec<_> = (0..3)
        .map(|_| {
            let mut child =
                env.start_cli_with(["run", "logs", &run, "--node", "a", "--follow"], |c| {
                    c.stderr(Stdio::piped());
                });
            let (tx, rx) = std::sync::mpsc::channel::<String>();
            let out = child.stdout.take().unwrap();
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines().map_while(Result::ok) {
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
            (child, rx)
        })
        .collect();
    heard(&mut logs, "line-0");

    env.cli(["daemon", "stop"]).ok();
    assert!(d.wait_exit().success());
    // For 4 s (40 of the followers' looks) no daemon comes back: nothing answers, no process
    // holds the lock, and the log says no start.
    let starts = || {
        std::fs::read_to_string(env.home.join("octld.log"))
            .unwrap_or_default()
            .matches("octld starting")
            .count()
    };
    let before = starts();
    let cpu_before: Vec<u64> = logs.iter().map(|(c, _)| cpu_ticks(c.id())).collect();
    for _ in 0..40 {
        std::thread::sleep(Duration::from_millis(100));
        assert!(
            std::os::unix::net::UnixStream::connect(env.socket()).is_err(),
            "a follower started the daemon after daemon stop"
        );
    }
    assert_eq!(starts(), before);
    // Waiting is idle: a follower that woke on its own reads of the log it watches spun
    // (a CPU each, and a connection attempt per turn that swamped the next daemon).
    for (i, ((c, _), was)) in logs.iter().zip(cpu_before).enumerate() {
        let used = cpu_ticks(c.id()) - was;
        assert!(
            used < 50,
            "follower {i} used {used} ticks of CPU in 4 s of waiting"
        );
    }
    assert!(wait.try_wait().unwrap().is_none(), "run wait gave up");

    // An explicit start: the followers come back and go on from where they were.
    let _d = env.start_daemon();
    note(2);
    assert_eq!(next()["event"]["data"], json!({"n": 2}));
    say("line-1");
    heard(&mut logs, "line-1");
    // Restarts, one after another: every follower carries on through each (a connect while
    // nothing accepts, or cut before its answer, was once taken for an internal error,
    // ending `run logs --follow`).
    for n in 3..6 {
        env.cli(["daemon", "restart"]).ok();
        note(n);
        assert_eq!(next()["event"]["data"], json!({"n": n}));
        say(&format!("line-{n}"));
        heard(&mut logs, &format!("line-{n}"));
    }
    // The node ends: each follower ends with it, exit 0.
    env.rpc(
        "event.append",
        json!({"run": run, "type": "node.done", "node": "a"}),
    );
    for (i, (child, _)) in logs.into_iter().enumerate() {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "follower {i}: {:?} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    env.rpc(
        "event.append",
        json!({"run": run, "type": "run.completed", "data": {}}),
    );
    let out = wait.wait_with_output().unwrap();
    assert!(out.status.success(), "run wait: {:?}", out.status);
    let done: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(done["status"], json!("completed"));
    let _ = feed.kill();
    let _ = feed.wait();
    // The daemon restart started is not this test's child: stop it by its home.
    env.cli(["daemon", "stop"]).ok();
}

/// The CPU time a process has used (user and system), in clock ticks (100 a second).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    // utime and stime: fields 14 and 15 of stat, 12 and 13 after the command name.
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// Each follower's next line is `want`; a follower that died has none (its channel closes),
/// and is shown with what it said.
fn heard(logs: &mut [(std::process::Child, std::sync::mpsc::Receiver<String>)], want: &str) {
    for (i, (child, rx)) in logs.iter_mut().enumerate() {
        let got = rx.recv_timeout(Duration::from_secs(60));
        if got.as_deref() != Ok(want) {
            let _ = child.kill();
            let mut err = String::new();
            let _ = std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err);
            panic!(
                "follower {i}: {got:?} instead of {want}: {:?} {err}",
                child.wait()
            );
        }
    }
}
