//! `[sandbox] network = "allow"` (docs/SECURITY.md, "Network"): a sandboxed agent has a
//! network of its own and reaches only the `host:port` patterns of `[sandbox] allow`, through
//! the daemon's proxy; every other target is refused and counted in the node's events. Real
//! bubblewrap, the real daemon and relay, real TCP servers on this machine's loopback.

use std::io::Write;
use std::net::TcpListener;
use std::time::Duration;

use octl_tests::{wait_until, TestEnv, TestRepo};
use serde_json::{json, Value};

/// A TCP server on 127.0.0.1 answering every connection with `line`; returns its port.
fn server(line: &'static str) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut c in listener.incoming().flatten() {
            let _ = c.write_all(format!("{line}\n").as_bytes());
        }
    });
    port
}

/// What the agent runs: each probe's outcome, a line each, into `net.txt`.
const PROBE: &str = r#"
import os, socket, sys

def direct(port):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        return s.makefile().readline().strip() or "nothing"
    except OSError as e:
        return "refused " + type(e).__name__

def proxy(request):
    host, port = os.environ["HTTPS_PROXY"].rsplit("/", 1)[-1].rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=10)
    s.sendall(request.encode())
    f = s.makefile("rb")
    status = f.readline().split()[1].decode()
    while f.readline() not in (b"\r\n", b""):
        pass
    return status + " " + f.readline().decode().strip()

def connect(port):
    return proxy("CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % (port, port))

out = []
for probe in sys.argv[1:]:
    kind, port = probe.split("=")
    if kind == "direct":
        out.append("direct %s" % direct(int(port)))
    elif kind == "connect":
        out.append("connect %s" % connect(int(port)))
    else:
        out.append("get %s" % proxy("GET http://127.0.0.1:%s/ HTTP/1.1\r\n\r\n" % port))
open("net.txt", "w").write("\n".join(out) + "\n")
"#;

/// A daemon whose sandbox allows only 127.0.0.1:`allowed`, and a repository holding the probe.
fn world(allowed: u16) -> (TestEnv, octl_tests::Daemon, TestRepo) {
    let env = TestEnv::new();
    env.write_config(&format!(
        "[sandbox]\nnetwork = \"allow\"\nallow = [\"127.0.0.1:{allowed}\", \"*.example.invalid:443\"]\n"
    ));
    let daemon = env.start_daemon();
    let repo = TestRepo::new(&env, "repo");
    repo.write("probe.py", PROBE);
    repo.commit_all("the probe");
    (env, daemon, repo)
}

/// Runs the probes in a sandboxed shell agent that commits what they saw; returns the run
/// once it completed, and `net.txt` as merged.
fn probe(env: &TestEnv, repo: &TestRepo, probes: &[String]) -> (String, String) {
    let task = format!(
        "/usr/bin/python3 probe.py {} && git add net.txt && git commit -q -m 'what the network said'",
        probes.join(" ")
    );
    let run = env
        .spawn(
            "spinoff",
            repo,
            &task,
            json!({"agent": "shell", "node": "n", "sandbox": "bwrap"}),
        )
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let show = env.wait_status(&run, &["completed", "failed"]);
    let log = std::fs::read_to_string(env.run_dir(&run).join("logs/n.log")).unwrap_or_default();
    assert_eq!(
        show["manifest"]["status"],
        json!("completed"),
        "{show}\n{log}"
    );
    let net = repo.show("main", "net.txt").unwrap_or_default();
    (run, net)
}

/// The run's `node.network_refused` events of `target`, once there is one.
fn refusals(env: &TestEnv, run: &str, target: &str) -> Vec<Value> {
    wait_until(
        &format!("a node.network_refused of {target}"),
        Duration::from_secs(20),
        || {
            let found: Vec<Value> = env
                .log_events(run)
                .into_iter()
                .filter(|e| e["type"] == "node.network_refused" && e["data"]["target"] == target)
                .collect();
            (!found.is_empty()).then_some(found)
        },
    )
}

#[test]
fn an_allowed_loopback_target_answers_unchanged_and_another_is_refused_and_counted() {
    let (allowed, other) = (server("allowed"), server("other"));
    let (env, _d, repo) = world(allowed);
    // The allowed target at its own address, the other directly and through the proxy.
    let (run, net) = probe(
        &env,
        &repo,
        &[
            format!("direct={allowed}"),
            format!("direct={other}"),
            format!("connect={other}"),
        ],
    );
    assert_eq!(
        net,
        "direct allowed\ndirect refused ConnectionRefusedError\nconnect 403 127.0.0.1:"
            .to_string()
            + &format!("{other} is not in [sandbox] allow of config.toml\n"),
        "the allowed server answered through the relay; the other is not there at all, and the proxy refused it"
    );
    let refused = refusals(&env, &run, &format!("127.0.0.1:{other}"));
    assert_eq!(refused[0]["data"]["count"], json!(1), "{refused:?}");
    assert_eq!(refused[0]["node"], json!("n"));
    assert_eq!(refused[0]["actor"], json!("daemon"));
    // The allowed target was never refused.
    assert!(!env.log_events(&run).iter().any(|e| {
        e["type"] == "node.network_refused"
            && e["data"]["target"] == json!(format!("127.0.0.1:{allowed}"))
    }));
}

#[test]
fn through_https_proxy_an_allowed_connect_is_spliced_and_the_rest_refused_once_a_minute() {
    let (allowed, other) = (server("allowed"), server("other"));
    let (env, _d, repo) = world(allowed);
    let mut probes = vec![format!("connect={allowed}"), format!("get={allowed}")];
    // The same refused target five times: recorded at once, then counted.
    probes.extend((0..5).map(|_| format!("connect={other}")));
    let (run, net) = probe(&env, &repo, &probes);
    let lines: Vec<&str> = net.lines().collect();
    assert_eq!(lines[0], "connect 200 allowed", "{net}");
    assert!(
        lines[1].starts_with("get 405 this sandbox's network proxy accepts only CONNECT host:port"),
        "{net}"
    );
    assert_eq!(lines.len(), 7, "{net}");
    assert!(
        lines[2..].iter().all(|l| l.starts_with("connect 403 ")),
        "{net}"
    );
    let target = format!("127.0.0.1:{other}");
    let refused = refusals(&env, &run, &target);
    assert_eq!(refused[0]["data"]["count"], json!(1), "{refused:?}");
    // The other four wait for their minute, or for the node's end (a second record, if the
    // run had not ended by then): never an event each.
    assert!(refused.len() <= 2, "{refused:?}");
    let total: u64 = refused
        .iter()
        .map(|e| e["data"]["count"].as_u64().unwrap())
        .sum();
    assert!(total <= 5, "{refused:?}");
}
