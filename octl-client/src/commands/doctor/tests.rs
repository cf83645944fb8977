//! Unit tests of `doctor`: version parsing, the report text, and the verdicts of the runs,
//! disk and agents checks.

use std::path::Path;

use super::system::{disk_verdict, GIT_MIN, TMUX_MIN};
use super::*;
use octl_proto::rpc::{DoctorAgentsResult, DoctorRunsResult};
use serde_json::json;

#[test]
fn versions() {
    assert_eq!(parse_version("git version 2.47.3"), Some((2, 47)));
    assert_eq!(
        parse_version("git version 2.39.3 (Apple Git-146)"),
        Some((2, 39))
    );
    assert_eq!(parse_version("tmux 3.3a"), Some((3, 3)));
    assert_eq!(parse_version("tmux next-3.5"), Some((3, 5)));
    assert_eq!(parse_version("tmux master"), None);
    assert!((2, 37) < GIT_MIN && (2, 38) >= GIT_MIN && (3, 0) >= TMUX_MIN);
}

#[test]
fn report_lines_hints_and_counts() {
    let r = Report::new(vec![
        Check::ok("git", "git version 2.47.3"),
        Check::fail(
            "socket-mode",
            "/h/octld.sock has mode 0666; want 0600",
            "chmod 600 /h/octld.sock",
        ),
        Check::warn("service", "no unit", "install it"),
    ]);
    assert_eq!((r.ok, r.warn, r.fail), (1, 1, 1));
    assert_eq!(
        report_text(&r),
        "ok   git          git version 2.47.3\n\
         FAIL socket-mode  /h/octld.sock has mode 0666; want 0600\n     hint: chmod 600 /h/octld.sock\n\
         warn service      no unit\n     hint: install it\n\
         3 checks: 1 ok, 1 warn, 1 fail"
    );
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["checks"][1]["status"], json!("fail"));
    assert_eq!(v["checks"][0]["hint"], Value::Null);
    assert_eq!(v["fail"], json!(1));
}

#[test]
fn a_run_refusing_appends_is_told_to_restart_not_to_inspect_a_corrupt_log() {
    use octl_proto::rpc::DoctorRun;
    let r = DoctorRunsResult {
        runs: vec![DoctorRun {
            run: "01R".into(),
            ok: false,
            events: 3,
            problem: Some("refuses appends until the daemon restarts: sync failed".into()),
            mismatched: vec![],
        }],
    };
    let c = runs_check(&r);
    assert_eq!(c.status, Status::Fail);
    let hint = c.hint.unwrap();
    assert!(hint.contains("daemon stop"), "{hint}");
    assert!(!hint.contains("corrupt"), "{hint}");
}

#[test]
fn disk_thresholds() {
    let h = Path::new("/h");
    let gib = 1u64 << 30;
    assert_eq!(disk_verdict(h, 50 * gib, 100 * gib).status, Status::Ok);
    assert_eq!(
        disk_verdict(h, 4 * gib, 100 * gib).status,
        Status::Warn,
        "under 5 %"
    );
    let small = disk_verdict(h, 50 << 20, 200 << 20);
    assert_eq!(small.status, Status::Warn, "under 100 MiB");
    // A small filesystem mostly free is not called nearly full.
    let tiny = disk_verdict(h, 57 << 20, 64 << 20);
    assert_eq!(tiny.status, Status::Warn);
    assert!(
        tiny.message
            .starts_with("little room: 57.0 MiB free of 64.0 MiB (89.1 %)")
            && tiny.message.contains("less than the 100.0 MiB"),
        "{}",
        tiny.message
    );
    assert!(disk_verdict(h, 4 * gib, 100 * gib)
        .message
        .starts_with("nearly full: "));
    let full = disk_verdict(h, 0, 100 * gib);
    assert_eq!(full.status, Status::Fail);
    assert!(full.hint.unwrap().contains("run gc"));
}

#[test]
fn agent_rules() {
    use octl_proto::rpc::DoctorAgent;
    let agent = |profile: &str, found: bool, used: bool| DoctorAgent {
        profile: profile.into(),
        program: profile.into(),
        found: found.then(|| format!("/bin/{profile}")),
        builtin: true,
        default: profile == "claude",
        used_by: if used { vec!["01R".into()] } else { vec![] },
        problem: None,
        version: found.then(|| "1.0".into()),
        usable: found,
        optional: profile == "codex" && !used,
    };
    let r = DoctorAgentsResult {
        agents: vec![agent("claude", false, false), agent("shell", true, false)],
        config_error: None,
    };
    assert_eq!(
        agents_check(&r).status,
        Status::Warn,
        "no claude, no run needs it"
    );
    let r = DoctorAgentsResult {
        agents: vec![agent("claude", false, true), agent("shell", true, false)],
        config_error: None,
    };
    let c = agents_check(&r);
    assert_eq!(c.status, Status::Fail, "an unfinished run needs it");
    assert!(c.message.contains("01R"), "{}", c.message);
    let r = DoctorAgentsResult {
        agents: vec![agent("shell", true, false), agent("codex", false, false)],
        config_error: None,
    };
    let c = agents_check(&r);
    assert_eq!(c.status, Status::Ok, "an optional CLI nobody chose");
    assert!(
        c.message.contains("codex: codex not installed"),
        "{}",
        c.message
    );
    assert!(
        c.message.contains("shell: /bin/shell (1.0)"),
        "{}",
        c.message
    );
    let r = DoctorAgentsResult {
        agents: vec![agent("shell", true, false)],
        config_error: Some("bad".into()),
    };
    assert_eq!(agents_check(&r).status, Status::Fail);
}

#[test]
fn the_notify_check_warns_while_the_notifier_that_failed_has_not_delivered_since() {
    use super::daemon::notify_check;
    use octl_proto::rpc::{NotifyFailure, NotifyStatus};
    let none = notify_check(&NotifyStatus::default());
    assert_eq!(none.status, Status::Ok);
    assert!(
        none.message.starts_with("no notifier configured"),
        "{none:?}"
    );
    let mut n = NotifyStatus {
        command: Some("notify-send".into()),
        webhook: Some("http://127.0.0.1:9000/hook".into()),
        last_failure: None,
    };
    let fine = notify_check(&n);
    assert_eq!(fine.status, Status::Ok);
    assert_eq!(
        fine.message,
        "command notify-send, webhook http://127.0.0.1:9000/hook: no failure since the daemon started"
    );
    n.last_failure = Some(NotifyFailure {
        at: "2026-12-01T15:00:00.000Z".into(),
        notifier: "command".into(),
        message: "\"notify-send\" failed: exit status: 1 (no display)".into(),
        kind: "failed".into(),
        run: "01R".into(),
        delivered_since: None,
    });
    let failing = notify_check(&n);
    assert_eq!(failing.status, Status::Warn);
    assert!(
        failing
            .message
            .ends_with("the command failed at 2026-12-01T15:00:00.000Z telling failed of run 01R: \"notify-send\" failed: exit status: 1 (no display)"),
        "{failing:?}"
    );
    assert!(failing.hint.as_deref().unwrap().contains("[notify]"));
    assert_eq!(failing.details.len(), 1);
    n.last_failure.as_mut().unwrap().delivered_since = Some("2026-12-01T15:01:00.000Z".into());
    let again = notify_check(&n);
    assert_eq!(again.status, Status::Ok);
    assert!(
        again
            .message
            .ends_with("it has delivered since, at 2026-12-01T15:01:00.000Z"),
        "{again:?}"
    );
}

#[test]
fn the_sandbox_is_a_failure_only_when_something_asks_for_it() {
    use octl_proto::rpc::DoctorSandboxResult;
    let r = |bwrap: Option<&str>, ok: bool, message: &str, wanted_by: &[&str]| {
        sandbox_check(&DoctorSandboxResult {
            bwrap: bwrap.map(String::from),
            version: bwrap.map(|_| "bubblewrap 0.8.0".to_string()),
            ok,
            message: message.into(),
            wanted_by: wanted_by.iter().map(|w| w.to_string()).collect(),
        })
    };
    let ran = "ran a sandbox (its own namespaces, the system read-only, `true`)";
    let c = r(
        Some("/usr/bin/bwrap"),
        true,
        ran,
        &["config.toml's [sandbox] kind"],
    );
    assert_eq!(c.status, Status::Ok);
    assert_eq!(
        c.message,
        "/usr/bin/bwrap (bubblewrap 0.8.0) ran a sandbox (its own namespaces, the system read-only, `true`); wanted by config.toml's [sandbox] kind"
    );
    let missing = "bwrap (bubblewrap) is not on the daemon's PATH";
    let c = r(None, false, missing, &[]);
    assert_eq!(c.status, Status::Skip);
    assert!(
        c.hint
            .as_deref()
            .unwrap()
            .contains("apt-get install bubblewrap"),
        "{c:?}"
    );
    let c = r(None, false, missing, &["[agents.claude] sandbox"]);
    assert_eq!(c.status, Status::Fail);
    assert!(
        c.message.contains("wanted by [agents.claude] sandbox"),
        "{c:?}"
    );
    let refused = "a minimal sandbox failed (exit status: 1): bwrap: No permissions to create new namespace, likely because the kernel does not allow non-privileged user namespaces";
    let c = r(Some("/usr/bin/bwrap"), false, refused, &[]);
    assert_eq!(c.status, Status::Warn);
    assert!(
        c.message.ends_with("non-privileged user namespaces"),
        "{c:?}"
    );
    assert!(c.hint.as_deref().unwrap().contains("user namespaces"));
    let c = r(
        Some("/usr/bin/bwrap"),
        false,
        refused,
        &["unfinished run 01R"],
    );
    assert_eq!(c.status, Status::Fail);
}
