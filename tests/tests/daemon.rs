//! The daemon's life: one per home, stale sockets, signals and shutdown, permissions.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use octl_tests::{bin, wait_until, TestEnv};
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
