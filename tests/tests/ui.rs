//! The web UI's doors, over raw HTTP against the real daemon: a request without the right
//! secrets, from another origin or under another host name is refused and changes nothing;
//! failed logins are limited; a session outlives a daemon restart and ends with `ui --stop`;
//! beyond loopback the UI is HTTPS or not served. What the page does is
//! tests/tests/ui_browser.rs's.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use octl_tests::TestEnv;
use serde_json::{json, Value};

/// One answer: its status, its header lines (lowercase names), its body.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Sends `head` (request line and headers, without the blank line) and `body` to `port`, and
/// reads the answer until the server closes (`Connection: close`) or, for an event stream,
/// until its first event.
fn send(port: u16, head: &str, body: &str) -> Answer {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let req = format!(
        "{head}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) => panic!("reading the answer to {head:?}: {e}"),
        }
        // An event stream never ends: its first event, the hello, is enough.
        let text = String::from_utf8_lossy(&buf);
        if let Some(at) = text.find("event: hello") {
            if text[at..].contains("\n\n") {
                break;
            }
        }
    }
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (top, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = top.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {text:?}"));
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Answer {
        status,
        headers,
        body: body.to_string(),
    }
}

/// A free port on loopback (the daemon binds it a moment later).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct Session {
    cookie: String,
    key: String,
}

/// The UI served (`orchestratectl ui --no-open`): its answer.
fn open_ui(env: &TestEnv) -> Value {
    let out = env.cli(["--json", "ui", "--no-open"]);
    assert_eq!(out.code, 0, "ui: {}", out.stderr);
    out.json()
}

fn login(port: u16, login_url: &str) -> Session {
    let path = &login_url[login_url.find("/login").unwrap()..];
    let a = send(
        port,
        &format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}"),
        "",
    );
    assert_eq!(a.status, 200, "login: {}", a.body);
    let set = a
        .header("set-cookie")
        .expect("a session cookie")
        .to_string();
    for attr in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set.contains(attr), "the cookie lacks {attr}: {set}");
    }
    let cookie = set
        .split(';')
        .next()
        .unwrap()
        .strip_prefix("octl_session=")
        .unwrap()
        .to_string();
    let key = a
        .body
        .split("name=\"octl-key\" content=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .expect("the page key in the login page")
        .to_string();
    Session { cookie, key }
}

/// `POST /api/rpc` with the given extra header lines.
fn rpc(port: u16, extra: &str, body: &Value) -> Answer {
    send(
        port,
        &format!("POST /api/rpc HTTP/1.1\r\nHost: 127.0.0.1:{port}{extra}"),
        &body.to_string(),
    )
}

#[test]
fn a_request_without_the_right_secrets_origin_or_host_is_refused_and_changes_nothing() {
    let env = TestEnv::new();
    let port = free_port();
    env.write_config(&format!("[ui]\nlisten = \"127.0.0.1:{port}\"\n"));
    let _d = env.start_daemon();
    let run = env.create_run("ui doors");
    let q = env.rpc(
        "discussion.ask",
        json!({"run": run, "title": "which?", "body": "a or b"}),
    )["id"]
        .as_str()
        .unwrap()
        .to_string();
    let opened = open_ui(&env);
    assert_eq!(opened["url"], json!(format!("http://127.0.0.1:{port}/")));
    let s = login(port, opened["login_url"].as_str().unwrap());

    // The login link works once.
    let path = opened["login_url"].as_str().unwrap();
    let path = &path[path.find("/login").unwrap()..];
    let again = send(
        port,
        &format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}"),
        "",
    );
    assert_eq!(again.status, 401);
    assert!(again.header("set-cookie").is_none());

    let answer = json!({"jsonrpc": "2.0", "id": 1, "method": "discussion.answer",
                        "params": {"id": q, "text": "a"}});
    let origin = format!("\r\nOrigin: http://127.0.0.1:{port}");
    let json_type = "\r\nContent-Type: application/json";
    let cookie = format!("\r\nCookie: octl_session={}", s.cookie);
    let key = format!("\r\nX-Octl-Key: {}", s.key);
    let refused: Vec<(&str, String, u16)> = vec![
        ("no session", format!("{origin}{json_type}"), 401),
        (
            "a made-up cookie",
            format!(
                "{origin}{json_type}\r\nCookie: octl_session={}{key}",
                "0".repeat(64)
            ),
            401,
        ),
        (
            "the cookie without the page key (another port's page has it)",
            format!("{origin}{json_type}{cookie}"),
            401,
        ),
        (
            "the cookie with the cookie as key",
            format!("{origin}{json_type}{cookie}\r\nX-Octl-Key: {}", s.cookie),
            401,
        ),
        (
            "a foreign Origin",
            format!("\r\nOrigin: http://evil.example{json_type}{cookie}{key}"),
            403,
        ),
        (
            "another port's Origin",
            format!("\r\nOrigin: http://127.0.0.1:1{json_type}{cookie}{key}"),
            403,
        ),
        ("no Origin", format!("{json_type}{cookie}{key}"), 403),
        (
            "a form's content type",
            format!("{origin}\r\nContent-Type: text/plain{cookie}{key}"),
            415,
        ),
    ];
    for (what, extra, status) in &refused {
        let a = rpc(port, extra, &answer);
        assert_eq!(a.status, *status, "{what}: {}", a.body);
    }
    // DNS rebinding: a page of evil.example whose name now points here.
    let rebound = send(
        port,
        &format!("POST /api/rpc HTTP/1.1\r\nHost: evil.example:{port}\r\nOrigin: http://evil.example:{port}{json_type}{cookie}{key}"),
        &answer.to_string(),
    );
    assert_eq!(rebound.status, 421, "{}", rebound.body);
    let page = send(
        port,
        &format!("GET / HTTP/1.1\r\nHost: evil.example:{port}{cookie}"),
        "",
    );
    assert_eq!(page.status, 421);
    // Nothing changed: the question is still open.
    let open = || env.rpc("discussion.list", json!({"run": run, "open": true}));
    assert_eq!(open().as_array().map(Vec::len), Some(1), "{}", open());

    // The page, its API and the event stream need the session; each answer carries the
    // policy that keeps scripts to the UI's own files.
    let no_page = send(
        port,
        &format!("GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}"),
        "",
    );
    assert_eq!(no_page.status, 401);
    let page = send(
        port,
        &format!("GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}{cookie}"),
        "",
    );
    assert_eq!(page.status, 200);
    let csp = page.header("content-security-policy").unwrap();
    assert!(
        csp.contains("script-src 'self'") && !csp.contains("unsafe"),
        "{csp}"
    );
    assert_eq!(page.header("x-frame-options"), Some("DENY"));
    assert!(
        !page.body.contains("<script>"),
        "no inline script in the page"
    );
    let events = |extra: &str| {
        send(
            port,
            &format!("GET /api/events?since=now{extra} HTTP/1.1\r\nHost: 127.0.0.1:{port}{cookie}"),
            "",
        )
    };
    assert_eq!(events("").status, 401);
    let stream = events(&format!("&key={}", s.key));
    assert_eq!(stream.status, 200);
    assert!(stream.body.contains("event: hello"), "{}", stream.body);

    // The same request with everything right does change it: the refusals above were real.
    let ok = rpc(port, &format!("{origin}{json_type}{cookie}{key}"), &answer);
    assert_eq!(ok.status, 200, "{}", ok.body);
    assert!(ok.body.contains("\"result\""), "{}", ok.body);
    assert_eq!(open().as_array().map(Vec::len), Some(0), "{}", open());
}

#[test]
fn failed_logins_are_limited_and_a_session_outlives_a_restart_until_ui_stop() {
    let env = TestEnv::new();
    let port = free_port();
    env.write_config(&format!("[ui]\nlisten = \"127.0.0.1:{port}\"\n"));
    let d = env.start_daemon();
    let opened = open_ui(&env);
    let s = login(port, opened["login_url"].as_str().unwrap());
    let whoami = |s: &Session| {
        send(
            port,
            &format!("GET /api/session HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nCookie: octl_session={}\r\nX-Octl-Key: {}", s.cookie, s.key),
            "",
        )
    };
    let first: Value = serde_json::from_str(&whoami(&s).body).unwrap();

    // A restarted daemon serves the UI again, on the same port, to the same session.
    d.signal_and_wait(libc::SIGTERM);
    let _d = env.start_daemon();
    let a = whoami(&s);
    assert_eq!(a.status, 200, "{}", a.body);
    let second: Value = serde_json::from_str(&a.body).unwrap();
    assert_ne!(first["pid"], second["pid"], "a new daemon answers");

    // Guessing: after 10 failures in a minute every login is refused, a right link too.
    let link = open_ui(&env)["login_url"].as_str().unwrap().to_string();
    for i in 0..10 {
        let a = send(
            port,
            &format!("GET /login?token={i:064} HTTP/1.1\r\nHost: 127.0.0.1:{port}"),
            "",
        );
        assert_eq!(a.status, 401);
    }
    let path = &link[link.find("/login").unwrap()..];
    let limited = send(
        port,
        &format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}"),
        "",
    );
    assert_eq!(limited.status, 429, "{}", limited.body);
    assert!(limited.header("retry-after").is_some());
    assert!(limited.header("set-cookie").is_none());

    // `ui --stop`: not served, and the session is over even once it is served again.
    let out = env.cli(["--json", "ui", "--stop"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.json()["sessions"], json!(1));
    assert!(
        TcpStream::connect(("127.0.0.1", port)).is_err(),
        "still served after --stop"
    );
    open_ui(&env);
    assert_eq!(whoami(&s).status, 401);
}

#[test]
fn beyond_loopback_the_ui_is_https_or_not_served() {
    let env = TestEnv::new();
    env.write_config("[ui]\nlisten = \"0.0.0.0:0\"\n");
    let _d = env.start_daemon();
    let out = env.cli(["--json", "ui", "--no-open"]);
    assert_eq!(out.code, 2, "{}", out.stdout);
    let msg = out.error()["message"].as_str().unwrap().to_string();
    assert!(msg.contains("[ui] listen") && msg.contains("tls"), "{msg}");

    // With TLS: a certificate made for the configured name, cookies only over HTTPS.
    let port = free_port();
    env.write_config(&format!(
        "[ui]\nlisten = \"0.0.0.0:{port}\"\ntls = true\nhosts = [\"octl.test\"]\n"
    ));
    let opened = open_ui(&env);
    assert_eq!(opened["tls"], json!(true));
    let fingerprint = opened["fingerprint"].as_str().unwrap().to_string();
    let link = opened["login_url"].as_str().unwrap().to_string();
    assert!(
        link.starts_with(&format!("https://octl.test:{port}/login?token=")),
        "{link}"
    );
    let curl = std::process::Command::new("curl")
        .args([
            "-sS",
            "-k",
            "-i",
            "--resolve",
            &format!("octl.test:{port}:127.0.0.1"),
            &link,
        ])
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&curl.stdout);
    assert!(
        text.starts_with("HTTP/1.1 200"),
        "{text}{}",
        String::from_utf8_lossy(&curl.stderr)
    );
    let cookie = text
        .lines()
        .find(|l| l.to_ascii_lowercase().starts_with("set-cookie"))
        .unwrap();
    assert!(cookie.contains("; Secure"), "{cookie}");
    assert!(text
        .to_ascii_lowercase()
        .contains("strict-transport-security"));
    // The certificate served is the one whose fingerprint `ui` printed.
    let pem = std::fs::read(env.home.join("ui/cert.pem")).unwrap();
    let der = pem_body(&String::from_utf8(pem).unwrap());
    let digest = sha256_hex(&der);
    assert_eq!(fingerprint.replace(':', "").to_ascii_lowercase(), digest);
    // Plain HTTP to the TLS port gets no page.
    let plain = std::process::Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            &format!("http://127.0.0.1:{port}/"),
        ])
        .output()
        .unwrap();
    assert_ne!(String::from_utf8_lossy(&plain.stdout), "200");
}

fn pem_body(pem: &str) -> Vec<u8> {
    let b64: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    let out = std::process::Command::new("base64")
        .arg("-d")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            c.stdin.take().unwrap().write_all(b64.as_bytes())?;
            c.wait_with_output()
        })
        .unwrap();
    out.stdout
}

fn sha256_hex(bytes: &[u8]) -> String {
    let mut c = std::process::Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(bytes).unwrap();
    let out = c.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}
