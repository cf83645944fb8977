//! The server-wide options reach each server once.

use super::*;
use crate::tmux::run::strings;

/// The server-wide options, as the server has them.
fn server_options_of(server: &Server) -> String {
    let out = server
        .process_only()
        .read(&[
            strings(&["show-options", "-gv", "default-shell"]),
            strings(&["show-options", "-gv", "default-size"]),
            strings(&["show-options", "-gwv", "remain-on-exit"]),
            strings(&["show-options", "-sv", "exit-empty"]),
            strings(&["show-options", "-gwv", "allow-rename"]),
            strings(&["show-options", "-gwv", "automatic-rename"]),
        ])
        .unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

const CONFIGURED: &str = "/bin/sh\n200x50\non\noff\noff\noff\n";

/// A new run's session sends the server-wide options only to a server that does not have
/// them from this handle: one it starts, or one started by someone else.
#[test]
fn server_options_reach_each_server_once() {
    let server = Server::new();
    let spawn_first = |session: &str| {
        let argv = vec!["sleep".to_string(), "30".to_string()];
        let spawned = server
            .tmux
            .spawn_first_window(&WindowSpec {
                session,
                window: "w",
                cwd: &server.dir,
                env: &[],
                argv: &argv,
                log: &server.log(session),
            })
            .unwrap();
        assert!(spawned.created_session);
        spawned
    };
    let process = server.process_only();
    // The process that starts the server sets them.
    spawn_first("run1");
    assert_eq!(processes(&server.tmux), 1);
    assert_eq!(server_options_of(&server), CONFIGURED);

    // Through the client, on that server, they are not sent again: a change made
    // meanwhile stays.
    server.tmux.list_panes().unwrap();
    process
        .run1(&["set-option", "-g", "default-size", "80x24"])
        .unwrap();
    let answers = server.tmux.control_answers();
    spawn_first("run2");
    assert_eq!(server.tmux.control_answers(), answers + 1);
    assert_eq!(processes(&server.tmux), 1);
    assert_eq!(
        server_options_of(&server),
        CONFIGURED.replace("200x50", "80x24")
    );

    // Someone else kills the server and starts another, without them; the client
    // attaches to it, and the options go with the next session.
    let old = server_pid(&server);
    process.kill_server().unwrap();
    // A client that comes while the old server exits gets "server exited unexpectedly".
    wait_for(|| matches!(process_state(old), None | Some('Z')).then_some(()));
    process
        .run1(&["new-session", "-d", "-s", "other", "--", "sleep", "30"])
        .unwrap();
    assert_ne!(server_options_of(&server), CONFIGURED);
    wait_for(|| {
        let before = server.tmux.control_answers();
        server.tmux.list_panes().unwrap();
        (server.tmux.control_answers() > before).then_some(())
    });
    let (answers, processes_before) = (server.tmux.control_answers(), processes(&server.tmux));
    spawn_first("run3");
    assert_eq!(server.tmux.control_answers(), answers + 1);
    assert_eq!(processes(&server.tmux), processes_before);
    assert_eq!(server_options_of(&server), CONFIGURED);

    // After this handle's own kill-server, the process that starts the next server sets
    // them.
    server.tmux.kill_server().unwrap();
    let processes_before = processes(&server.tmux);
    spawn_first("run4");
    assert_eq!(processes(&server.tmux), processes_before + 1);
    assert_eq!(server_options_of(&server), CONFIGURED);
}
