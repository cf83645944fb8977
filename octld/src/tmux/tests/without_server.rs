//! What needs no server, or finds none: parsing, quoting, refused input, a missing tmux.

use super::*;
use octl_proto::ErrorKind;
use std::process::Command;

#[test]
fn parses_versions() {
    let v = |s| parse_version(s).unwrap();
    assert_eq!(v("tmux 3.3a\n"), Version { major: 3, minor: 3 });
    assert_eq!(v("tmux 3.0"), Version { major: 3, minor: 0 });
    assert_eq!(v("tmux next-3.5"), Version { major: 3, minor: 5 });
    assert_eq!(v("tmux 3.4-rc2"), Version { major: 3, minor: 4 });
    assert!(v("tmux master") >= MIN_VERSION);
    assert!(v("tmux 2.9a") < MIN_VERSION);
    assert!(parse_version("screen 4.0").is_none());
}

#[test]
fn sh_quote_round_trips_through_sh() {
    let script = r#"for a in "$@"; do printf '%s\0' "$a"; done"#;
    let mut line = format!("set -- {}; {script}", sh_join(TRICKY));
    line.push('\n');
    let out = Command::new("/bin/sh")
        .arg("-c")
        .arg(&line)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let expected: Vec<u8> = TRICKY
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&expected)
    );
    assert_eq!(sh_quote("plain-word_1.txt"), "plain-word_1.txt");
    assert_eq!(sh_quote(""), "''");
    assert_eq!(sh_quote("it's"), r"'it'\''s'");
}

#[test]
fn tmux_arg_escapes_only_a_trailing_semicolon() {
    assert_eq!(tmux_arg("a;"), r"a\;");
    assert_eq!(tmux_arg(";"), r"\;");
    assert_eq!(tmux_arg(r"a\;"), r"a\\;");
    assert_eq!(tmux_arg("a;b"), "a;b");
}

#[test]
fn rejects_bad_names_and_env() {
    let tmux = Tmux::new("/nonexistent/tmux.sock");
    let argv = vec!["true".to_string()];
    let spec = |session, window, env| WindowSpec {
        session,
        window,
        cwd: Path::new("/"),
        env,
        argv: &argv,
        log: Path::new("/nonexistent/x.log"),
    };
    for (s, w) in [
        ("a:b", "w"),
        ("s", "w.1"),
        ("", "w"),
        ("s", "#{x}"),
        ("s", "a;"),
    ] {
        let err = tmux.spawn_window(&spec(s, w, &[])).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidParams, "{s} {w}: {err}");
    }
    let env = vec![("BAD-NAME".to_string(), "v".to_string())];
    let err = tmux.spawn_window(&spec("s", "w", &env)).unwrap_err();
    assert!(matches!(err, TmuxError::Invalid { .. }), "{err}");
    assert!(tmux.kill_window_of_pane("1").is_err());
}

#[test]
fn missing_program_is_distinct() {
    let tmux = Tmux::new("/tmp/none.sock").with_program("/nonexistent/octl-no-such-tmux");
    let err = tmux.version().unwrap_err();
    assert!(matches!(err, TmuxError::Missing { .. }), "{err:?}");
    assert_eq!(err.kind(), ErrorKind::ToolMissing);
    assert!(matches!(tmux.list_panes(), Err(TmuxError::Missing { .. })));
}

#[test]
fn no_server_is_not_an_error() {
    let server = Server::new();
    assert!(server.tmux.check_version().unwrap() >= MIN_VERSION);
    assert_eq!(server.tmux.list_panes().unwrap(), vec![]);
    assert!(!server.tmux.has_session("run").unwrap());
    assert!(!server.tmux.kill_session("run").unwrap());
    server.tmux.kill_server().unwrap();
}
