//! A program in a window, in every mode: its status, log, environment, argv, directory, keys.

use super::*;
use crate::tmux::launch::launch_script_path;

#[test]
fn exit_status_and_log() {
    in_every_mode(|server| {
        // Another session first, so the new window is not the server's most recent one.
        let other = server.spawn("other", "idle", &["sleep", "30"]);
        assert!(other.created_session);
        let spawned = server.spawn("run1", "node-a", &["sh", "-c", "echo hi; exit 3"]);
        assert!(spawned.created_session);
        assert!(spawned.pane_pid > 0);
        let pane = server.wait_dead(&spawned.pane_id);
        assert_eq!(pane.dead_status, Some(3));
        assert_eq!(pane.session, "run1");
        assert_eq!(pane.window, "node-a");
        assert_eq!(pane.pane_pid, Some(spawned.pane_pid));
        wait_file(&server.log("node-a"), |c| c.windows(2).any(|w| w == b"hi"));
        assert!(!fs::read_to_string(server.log("idle"))
            .unwrap_or_default()
            .contains("hi"));

        // A second node in the same session: new-window, and its own log.
        let second = server.spawn("run1", "node-b", &["sh", "-c", "echo second; exit 0"]);
        assert!(!second.created_session);
        assert_eq!(server.wait_dead(&second.pane_id).dead_status, Some(0));
        wait_file(&server.log("node-b"), |c| {
            String::from_utf8_lossy(c).contains("second")
        });
        assert!(
            !String::from_utf8_lossy(&fs::read(server.log("node-a")).unwrap()).contains("second")
        );

        let panes = server.tmux.list_panes().unwrap();
        assert_eq!(panes.len(), 3);
        let alive = panes.iter().find(|p| p.pane_id == other.pane_id).unwrap();
        assert!(!alive.dead);
        assert_eq!(alive.dead_status, None);

        // The windows have the fixed size.
        let out = server
            .tmux
            .run1(&[
                "display-message",
                "-p",
                "-t",
                &second.pane_id,
                "#{window_width}x#{window_height} #{window-size}",
            ])
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out).trim(), "200x50 manual");

        assert!(server.tmux.kill_window_of_pane(&spawned.pane_id).unwrap());
        assert!(!server.tmux.kill_window_of_pane(&spawned.pane_id).unwrap());
        assert!(server.tmux.kill_window("run1", "node-b").unwrap());
        assert!(!server.tmux.has_session("run1").unwrap());
        assert!(server.tmux.has_session("other").unwrap());
        assert!(!server.tmux.has_session("oth").unwrap());
        assert!(server.tmux.kill_session("other").unwrap());
        assert_eq!(server.tmux.list_panes().unwrap(), vec![]);
    });
}

#[test]
fn environment_reaches_the_program() {
    in_every_mode(|server| {
        let out = server.dir.join("env.out");
        let env = vec![
            ("OCTL_RUN".to_string(), "01JDXJ".to_string()),
            (
                "OCTL_TRICKY".to_string(),
                "va'l $(x) ;\n#{pane_id}".to_string(),
            ),
        ];
        let script = format!(
            r#"printf '%s\0%s' "$OCTL_RUN" "$OCTL_TRICKY" > {}"#,
            sh_quote(out.to_str().unwrap())
        );
        let spawned = server.spawn_env("run", "env", &["sh", "-c", &script], &env);
        assert_eq!(server.wait_dead(&spawned.pane_id).dead_status, Some(0));
        assert_eq!(
            String::from_utf8(fs::read(&out).unwrap()).unwrap(),
            "01JDXJ\0va'l $(x) ;\n#{pane_id}"
        );
    });
}

/// The program receives exactly the argv, and the working directory, log path and
/// arguments survive shell and tmux syntax.
#[test]
fn argv_survives_quoting() {
    in_every_mode(|server| {
        let cwd = server.dir.join("work dir #{pane_id} ; $(x)");
        fs::create_dir(&cwd).unwrap();
        fs::write(cwd.join("x"), "must survive").unwrap();
        let log = server.dir.join("logs #1;").join("node.log");
        let script =
            r#"pwd > argv.cwd; for a in "$@"; do printf '%s\0' "$a"; done > argv.out; echo logged"#;
        let mut argv: Vec<String> = vec!["/bin/sh".into(), "-c".into(), script.into(), "sh".into()];
        argv.extend(TRICKY.iter().map(|s| s.to_string()));
        let spawned = server
            .tmux
            .spawn_window(&WindowSpec {
                session: "run",
                window: "quoting",
                cwd: &cwd,
                env: &[],
                argv: &argv,
                log: &log,
            })
            .unwrap();
        assert_eq!(server.wait_dead(&spawned.pane_id).dead_status, Some(0));
        let expected: Vec<u8> = TRICKY
            .iter()
            .flat_map(|a| [a.as_bytes(), b"\0"].concat())
            .collect();
        assert_eq!(
            String::from_utf8_lossy(&fs::read(cwd.join("argv.out")).unwrap()),
            String::from_utf8_lossy(&expected)
        );
        assert_eq!(
            fs::read_to_string(cwd.join("argv.cwd")).unwrap().trim_end(),
            cwd.to_str().unwrap()
        );
        assert_eq!(fs::read_to_string(cwd.join("x")).unwrap(), "must survive");
        assert!(!cwd.join("pwned").exists());
        wait_file(&log, |c| String::from_utf8_lossy(c).contains("logged"));
    });
}

#[test]
fn long_command_goes_through_a_script() {
    in_every_mode(|server| {
        let out = server.dir.join("long.out");
        let long = "x'$(y)\n".repeat(5000);
        let argv: Vec<String> = vec![
            "/bin/sh".into(),
            "-c".into(),
            r#"printf '%s' "$1" > "$2""#.into(),
            "sh".into(),
            long.clone(),
            out.to_str().unwrap().into(),
        ];
        let log = server.log("long");
        let spawned = server
            .tmux
            .spawn_window(&WindowSpec {
                session: "run",
                window: "long",
                cwd: &server.dir,
                env: &[],
                argv: &argv,
                log: &log,
            })
            .unwrap();
        assert_eq!(server.wait_dead(&spawned.pane_id).dead_status, Some(0));
        assert_eq!(fs::read_to_string(&out).unwrap(), long);
        assert!(!launch_script_path(&log).exists());
    });
}

#[test]
fn signal_death_is_reported_as_a_status() {
    in_every_mode(|server| {
        let spawned = server.spawn("run", "killed", &["sh", "-c", "kill -TERM $$"]);
        assert_eq!(
            server.wait_dead(&spawned.pane_id).dead_status,
            Some(128 + 15)
        );
    });
}

#[test]
fn missing_directory_fails_the_program() {
    in_every_mode(|server| {
        let argv = vec!["touch".to_string(), "created".to_string()];
        let spawned = server
            .tmux
            .spawn_window(&WindowSpec {
                session: "run",
                window: "nodir",
                cwd: &server.dir.join("missing"),
                env: &[],
                argv: &argv,
                log: &server.log("nodir"),
            })
            .unwrap();
        assert_eq!(server.wait_dead(&spawned.pane_id).dead_status, Some(126));
    });
}

#[test]
fn send_keys_and_capture() {
    in_every_mode(|server| {
        let spawned = server.spawn("run", "cat", &["cat"]);
        let text = "hello #{pane_id} $(x) ;";
        server
            .tmux
            .send_keys_literal(&spawned.pane_id, text)
            .unwrap();
        server.tmux.send_enter(&spawned.pane_id).unwrap();
        // The terminal echoes the line and cat prints it again.
        wait_for(|| {
            let screen = server.tmux.capture_pane(&spawned.pane_id).unwrap();
            (screen.matches(text).count() >= 2).then_some(())
        });
    });
}
