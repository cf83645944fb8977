//! When things go wrong under the control client: a killed server or session, a hung server,
//! a broken stream, a failed attach, a tmux too old for a client.

use super::*;
use crate::tmux::run::strings;
use octl_proto::ErrorKind;

#[test]
fn kill_server_then_the_next_calls_still_work() {
    let server = Server::new();
    server.spawn("run", "a", &["sleep", "30"]);
    server.tmux.list_panes().unwrap();
    let answers = server.tmux.control_answers();
    assert!(answers > 0);
    server.tmux.kill_server().unwrap();
    assert_eq!(server.tmux.list_panes().unwrap(), vec![]);
    assert!(!server.tmux.has_session("run").unwrap());
    let again = server.spawn("run", "b", &["sleep", "30"]);
    assert!(again.created_session);
    // A client attaches again (at once, or after the back-off of an attach that found
    // the old server exiting).
    let panes = wait_for(|| {
        let before = server.tmux.control_answers();
        let panes = server.tmux.list_panes().unwrap();
        (server.tmux.control_answers() > before).then_some(panes)
    });
    assert_eq!(panes.len(), 1);
    assert_eq!(panes[0].pane_id, again.pane_id);
}

/// Another client kills the server under the control client: a call that changes things
/// finds the client gone and runs by process, which starts a new server.
#[test]
fn a_server_killed_elsewhere_is_started_again() {
    let server = Server::new();
    server.spawn("run", "a", &["sleep", "30"]);
    server.tmux.list_panes().unwrap();
    assert!(server.tmux.control_answers() > 0);
    server.process_only().kill_server().unwrap();
    let again = server.spawn("run", "b", &["sleep", "30"]);
    assert!(again.created_session);
    let panes = server.tmux.list_panes().unwrap();
    assert_eq!(panes.len(), 1);
    assert_eq!(panes[0].pane_id, again.pane_id);
}

/// Someone kills the hidden session: its client ends, and the next one makes it again.
#[test]
fn a_lost_control_session_is_made_again() {
    let server = Server::new();
    let first = server.spawn("run", "a", &["sleep", "30"]);
    server.tmux.list_panes().unwrap();
    let process = server.process_only();
    let control_session = format!("={CONTROL_SESSION}");
    process
        .run1(&["kill-session", "-t", &control_session])
        .unwrap();
    wait_for(|| {
        let panes = server.tmux.list_panes().unwrap();
        assert_eq!(panes.len(), 1);
        assert_eq!(panes[0].pane_id, first.pane_id);
        process.read1(&["has-session", "-t", &control_session]).ok()
    });
    let before = server.tmux.control_answers();
    server.tmux.list_panes().unwrap();
    assert_eq!(server.tmux.control_answers(), before + 1);
}

/// The client is not tied to the thread that attached it: the daemon's calls come from a
/// pool whose threads end when idle, and the client is killed when the thread that
/// started it ends.
#[test]
fn the_client_outlives_the_thread_that_attached_it() {
    let server = Server::new();
    server.spawn("run", "a", &["sleep", "30"]);
    let tmux = server.tmux.clone();
    std::thread::spawn(move || tmux.list_panes().unwrap())
        .join()
        .unwrap();
    assert_eq!(server.tmux.control_answers(), 1);
    let clients = || {
        server
            .process_only()
            .read1(&["list-clients", "-F", "#{client_pid}"])
            .unwrap()
    };
    let before = clients();
    assert_eq!(String::from_utf8_lossy(&before).lines().count(), 1);
    server.tmux.list_panes().unwrap();
    assert_eq!(server.tmux.control_answers(), 2);
    assert_eq!(clients(), before);
}

fn signal(pid: u32, signal: libc::c_int) {
    assert!(pid > 1);
    // SAFETY: kill(2) has no memory-safety preconditions; the pid is a tmux process this
    // test started (its server or its control client).
    assert_eq!(
        unsafe { libc::kill(pid as libc::pid_t, signal) },
        0,
        "kill {pid}"
    );
}

/// A process stopped (SIGSTOP) until this is dropped, or until a deadline at the latest: a
/// failing assertion never leaves it stopped, and a call that wrongly waits on it (a
/// process run again on a hung server) ends, to fail the test, rather than hang it.
struct Stopped {
    done: Option<std::sync::mpsc::Sender<()>>,
    watchdog: Option<std::thread::JoinHandle<()>>,
}

impl Stopped {
    fn new(pid: u32) -> Stopped {
        let (done, wait) = std::sync::mpsc::channel::<()>();
        signal(pid, libc::SIGSTOP);
        let watchdog = std::thread::spawn(move || {
            let _ = wait.recv_timeout(Duration::from_secs(5));
            signal(pid, libc::SIGCONT);
        });
        let stopped = Stopped {
            done: Some(done),
            watchdog: Some(watchdog),
        };
        // The signal is only queued when kill(2) returns.
        wait_for(|| (process_state(pid) == Some('T')).then_some(()));
        stopped
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        drop(self.done.take());
        if let Some(watchdog) = self.watchdog.take() {
            let _ = watchdog.join();
        }
    }
}

/// Another handle on `server`'s socket, with its own control client and process count.
fn handle(server: &Server, control: Control) -> Tmux {
    Tmux {
        control: Arc::new(control),
        processes: Arc::default(),
        ..server.tmux.clone()
    }
}

/// A hung server: the call fails after the deadline, and is not run again (it may have
/// run, and a process would hang as well).
#[test]
fn no_answer_is_an_error_and_not_run_again() {
    let server = Server::new();
    let cat = server.spawn("run", "cat", &["cat"]);
    let pid = server_pid(&server);
    let tmux = handle(
        &server,
        Control::new(true).with_timeout(Duration::from_millis(300)),
    );
    let change = |tmux: &Tmux| tmux.send_key(&cat.pane_id, "Enter");
    let read = |tmux: &Tmux| tmux.list_panes().map(drop);
    type Call<'a> = &'a dyn Fn(&Tmux) -> Result<()>;
    let calls: [(&str, Call); 2] = [("change", &change), ("read", &read)];
    for (what, call) in calls {
        // The client is attached (again, after the last timeout dropped it).
        let answers = tmux.control_answers();
        assert_eq!(tmux.list_panes().unwrap().len(), 1);
        assert_eq!(tmux.control_answers(), answers + 1, "{what}");
        let processes_before = processes(&tmux);
        let stopped = Stopped::new(pid);
        let err = call(&tmux).unwrap_err();
        assert!(matches!(err, TmuxError::NoAnswer { .. }), "{what}: {err}");
        assert_eq!(err.kind(), ErrorKind::ToolFailed);
        assert_eq!(processes(&tmux), processes_before, "{what} was run again");
        assert_eq!(tmux.control_answers(), answers + 1, "{what}");
        drop(stopped);
    }
}

/// The stream ends after a request was written, while the server still runs (someone
/// killed the client's session): a change is reported rather than risked twice, a read is
/// run again by process.
///
/// The request is a line that marks that it is running, then waits (`wait-for`), so that
/// it is in the server, unanswered, when the session is killed. (Stopping the server and
/// killing the client process would not end the stream: the server holds the client's
/// input and output itself.)
#[test]
fn a_broken_stream_reruns_only_reads() {
    let server = Server::new();
    server.spawn("run", "a", &["sleep", "30"]);
    let tmux = handle(&server, Control::new(true));
    let process = server.process_only();
    let waiting = |mark: &str| {
        let shown = process.read1(&["show-options", "-gqv", mark]).unwrap();
        (String::from_utf8_lossy(&shown).trim() == "running").then_some(())
    };
    let kill_client_session = || {
        process
            .run1(&["kill-session", "-t", &format!("={CONTROL_SESSION}")])
            .unwrap();
    };
    let blocking_call = |mark: &str, idempotent: bool| {
        let (tmux, mark) = (tmux.clone(), mark.to_string());
        std::thread::spawn(move || {
            tmux.run_as(
                &[
                    strings(&["set-option", "-g", &mark, "running"]),
                    strings(&["wait-for", &mark]),
                ],
                idempotent,
            )
        })
    };

    // A change.
    tmux.list_panes().unwrap();
    assert_eq!(tmux.control_answers(), 1);
    let call = blocking_call("@octl-change", false);
    wait_for(|| waiting("@octl-change"));
    kill_client_session();
    // Were it run again by process, it would wait until the server is killed.
    wait_for(|| call.is_finished().then_some(()));
    let err = call.join().unwrap().unwrap_err();
    assert!(matches!(err, TmuxError::NoAnswer { .. }), "{err}");
    assert_eq!(err.kind(), ErrorKind::ToolFailed);
    assert_eq!(processes(&tmux), 0, "the change was run again");
    assert_eq!(tmux.control_answers(), 1);

    // A read, with a new client: run again by process, it waits in turn, until told to
    // go on.
    tmux.list_panes().unwrap();
    assert_eq!(tmux.control_answers(), 2);
    let call = blocking_call("@octl-read", true);
    wait_for(|| waiting("@octl-read"));
    kill_client_session();
    wait_for(|| (processes(&tmux) == 1).then_some(()));
    wait_for(|| {
        process.run1(&["wait-for", "-S", "@octl-read"]).unwrap();
        call.is_finished().then_some(())
    });
    assert!(call.join().unwrap().is_ok());
    assert_eq!(processes(&tmux), 1);
    assert_eq!(tmux.control_answers(), 2);
}

/// An attach that fails (here it gets no answer in time: the server is stopped) costs the
/// call only the try: it runs by process. During the back-off no attach is tried.
#[test]
fn a_failed_attach_falls_back() {
    let server = Server::new();
    let first = server.spawn("run", "a", &["sleep", "30"]);
    let pid = server_pid(&server);
    let tmux = handle(
        &server,
        Control::new(true).with_attach(Duration::from_millis(300), Duration::from_secs(60)),
    );
    let probe = &tmux.control.probe;
    let stopped = Stopped::new(pid);
    let call = {
        let tmux = tmux.clone();
        std::thread::spawn(move || tmux.list_panes())
    };
    // The process run after the failed attach waits for the server to go on.
    wait_for(|| (probe.failed_attaches.load(Ordering::Relaxed) == 1).then_some(()));
    drop(stopped);
    let panes = call.join().unwrap().unwrap();
    assert_eq!(panes.len(), 1);
    assert_eq!(panes[0].pane_id, first.pane_id);
    assert_eq!(probe.attaches.load(Ordering::Relaxed), 1);
    assert_eq!(processes(&tmux), 1);

    tmux.send_enter(&first.pane_id).unwrap();
    assert_eq!(tmux.list_panes().unwrap(), panes);
    assert_eq!(probe.attaches.load(Ordering::Relaxed), 1);
    assert_eq!(processes(&tmux), 3);
    assert_eq!(tmux.control_answers(), 0);
}

/// A tmux older than the client needs is never asked to attach one.
#[test]
fn an_old_tmux_is_driven_by_processes() {
    let server = Server::new();
    let first = server.spawn("run", "a", &["sleep", "30"]);
    let tmux = handle(&server, Control::new(true));
    // As `version()` would note it from a tmux 3.1.
    tmux.control
        .note_version(parse_version("tmux 3.1").unwrap());
    assert_eq!(tmux.list_panes().unwrap()[0].pane_id, first.pane_id);
    tmux.send_enter(&first.pane_id).unwrap();
    assert_eq!(tmux.control.probe.attaches.load(Ordering::Relaxed), 0);
    assert_eq!(processes(&tmux), 2);
    assert_eq!(tmux.control_answers(), 0);
}
