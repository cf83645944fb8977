//! The control client: it takes over once the server runs, and answers as a process would.

use super::*;
use crate::tmux::run::strings;
use octl_proto::ErrorKind;

#[test]
fn control_client_takes_over_once_the_server_runs() {
    let server = Server::new();
    assert_eq!(server.tmux.list_panes().unwrap(), vec![]);
    let first = server.spawn("run", "idle", &["sleep", "30"]);
    // The server was started by a process, which set its global options.
    assert_eq!(server.tmux.control_answers(), 0);
    let panes = server.tmux.list_panes().unwrap();
    assert_eq!(server.tmux.control_answers(), 1);
    let ids: Vec<&str> = panes.iter().map(|p| p.pane_id.as_str()).collect();
    assert_eq!(ids, [first.pane_id.as_str()]);

    // The hidden session is there, and nothing reports it.
    let process = server.process_only();
    let sessions = process
        .read1(&["list-sessions", "-F", "#{session_name}"])
        .unwrap();
    assert!(String::from_utf8_lossy(&sessions)
        .lines()
        .any(|s| s == CONTROL_SESSION));
    assert_eq!(process.list_panes().unwrap(), panes);
    assert!(!server.tmux.has_session(CONTROL_SESSION).unwrap());
    assert!(!server.tmux.kill_session(CONTROL_SESSION).unwrap());
    assert!(!server.tmux.kill_window(CONTROL_SESSION, "cat").unwrap());
    let argv = vec!["true".to_string()];
    let err = server
        .tmux
        .spawn_window(&WindowSpec {
            session: CONTROL_SESSION,
            window: "w",
            cwd: &server.dir,
            env: &[],
            argv: &argv,
            log: &server.log("w"),
        })
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidParams, "{err}");

    // The client asked for no pane output and to leave window sizes alone.
    let flags = server
        .tmux
        .run1(&["display-message", "-p", "#{client_flags}"])
        .unwrap();
    let flags = String::from_utf8_lossy(&flags);
    assert!(
        flags.contains("no-output") && flags.contains("ignore-size"),
        "{flags}"
    );

    // Clones share the one client.
    let clone = server.tmux.clone();
    assert_eq!(clone.list_panes().unwrap(), panes);
    assert_eq!(server.tmux.control_answers(), 3);
    let clients = process
        .read1(&["list-clients", "-F", "#{client_control_mode}"])
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&clients), "1\n");
}

/// Strings that mean something to tmux's parser, at the start of an argument and inside.
fn hostile() -> Vec<String> {
    let mut all: Vec<String> = TRICKY.iter().map(|s| s.to_string()).collect();
    all.extend(
        [
            "'",
            "''",
            "x'y",
            "\"",
            "\"\\\"",
            "#",
            "#{pane_id}",
            "#[fg=red]",
            "$HOME",
            "${HOME}",
            "$",
            "~",
            "~/x",
            "~root",
            "{",
            "}",
            "{ a }",
            "\\",
            "\\n",
            "x\\",
            "\\\n",
            "%",
            "%if",
            "%1",
            "%end 1 2 1",
            "\u{1f}",
            "#{pane_id}\u{1f}#{pane_pid}",
            "\r",
            "\n",
            "\r\n",
            "\t",
            "\u{1b}[31m",
            "\u{1}\u{7f}",
            "\u{a0}",
            "😀",
            "A=b",
            "a b=c",
            "-",
            "-t",
        ]
        .map(String::from),
    );
    // Many quotes and newlines, yet within what a command line takes.
    all.push("'\n".repeat(3000));
    all
}

/// Every hostile argument reaches the server unchanged through the control client, and
/// the same as through a process.
#[test]
fn hostile_arguments_round_trip() {
    let server = Server::new();
    server.spawn("run", "idle", &["sleep", "30"]);
    let process = server.process_only();
    for (i, value) in hostile().iter().enumerate() {
        let mut shown = Vec::new();
        for (path, tmux) in [("control", &server.tmux), ("process", &process)] {
            let before = tmux.control_answers();
            let mut calls = 2;
            // The bytes as the server has them: it writes the buffer to a file.
            // (set-buffer ignores empty data.)
            if !value.is_empty() {
                let file = server.dir.join(format!("{path}-{i}"));
                tmux.run(&[
                    strings(&["set-buffer", "-b", "octl-x", "--", value]),
                    strings(&["save-buffer", "-b", "octl-x", file.to_str().unwrap()]),
                ])
                .unwrap_or_else(|e| panic!("{path} {value:?}: {e}"));
                assert_eq!(fs::read(&file).unwrap(), value.as_bytes(), "{path}");
                calls += 1;
            }
            tmux.run(&[strings(&["set-option", "-g", "@octl-x", value])])
                .unwrap_or_else(|e| panic!("{path} {value:?}: {e}"));
            shown.push(
                tmux.read(&[strings(&["show-options", "-gv", "@octl-x"])])
                    .unwrap(),
            );
            let by_control = if path == "control" { calls } else { 0 };
            assert_eq!(tmux.control_answers(), before + by_control, "{value:?}");
        }
        assert_eq!(shown[0], shown[1], "{value:?}");
    }
    // A NUL cannot be on a command line: the process path reports it, as before.
    let before = server.tmux.control_answers();
    let err = server
        .tmux
        .run(&[strings(&["set-option", "-g", "@octl-x", "a\0b"])])
        .unwrap_err();
    assert!(matches!(err, TmuxError::Spawn { .. }), "{err}");
    assert_eq!(server.tmux.control_answers(), before);
}

#[test]
fn errors_carry_tmux_messages() {
    let server = Server::new();
    let first = server.spawn("run", "a", &["sleep", "30"]);
    let process = server.process_only();
    // The second command fails: the third does not run, on either path.
    let line = [
        strings(&["set-option", "-g", "@octl-x", "one"]),
        strings(&["kill-window", "-t", "%999"]),
        strings(&["set-option", "-g", "@octl-x", "three"]),
    ];
    let mut errors = Vec::new();
    for tmux in [&server.tmux, &process] {
        errors.push(tmux.run(&line).unwrap_err());
        let value = tmux
            .read(&[strings(&["show-options", "-gv", "@octl-x"])])
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&value), "one\n");
    }
    assert_eq!(server.tmux.control_answers(), 2);
    match (&errors[0], &errors[1]) {
        (
            TmuxError::Failed {
                argv, code, stderr, ..
            },
            TmuxError::Failed {
                argv: argv2,
                code: code2,
                stderr: stderr2,
                ..
            },
        ) => {
            assert_eq!((argv, code, stderr), (argv2, code2, stderr2));
            assert_eq!(stderr, "can't find pane: %999\n");
        }
        other => panic!("{other:?}"),
    }
    assert!(errors[0].is_not_found());

    // The answers read from tmux's messages are the same through the client.
    assert!(!server.tmux.kill_window_of_pane("%999").unwrap());
    assert!(!server.tmux.has_session("nosuch").unwrap());
    assert!(server.tmux.has_session("run").unwrap());
    let argv = vec!["sleep".to_string(), "30".to_string()];
    let before = server.tmux.control_answers();
    // new-session fails with "duplicate session", then new-window.
    let second = server
        .tmux
        .spawn_first_window(&WindowSpec {
            session: "run",
            window: "b",
            cwd: &server.dir,
            env: &[],
            argv: &argv,
            log: &server.log("b"),
        })
        .unwrap();
    assert!(!second.created_session);
    assert_eq!(server.tmux.control_answers(), before + 2);
    let mut ids: Vec<String> = server
        .tmux
        .list_panes()
        .unwrap()
        .into_iter()
        .map(|p| p.pane_id)
        .collect();
    ids.sort();
    let mut expected = vec![first.pane_id, second.pane_id];
    expected.sort();
    assert_eq!(ids, expected);
}
