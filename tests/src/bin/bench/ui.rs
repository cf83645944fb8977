//! `bench ui`: what the web UI's HTTP layer adds, against the real daemon with 200 runs: a
//! JSON-RPC call (`run.list`) through `POST /api/rpc` (session, key, Origin and Host checked)
//! beside the same call on the Unix socket, each on one kept-alive connection; and the time
//! from appending an event on the socket to its arrival on `/api/events` (the page's feed).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::time::Instant;

use octl_tests::TestEnv;
use serde_json::json;

use super::{median, Row};

const RUNS: usize = 200;
const SAMPLES: usize = 200;
const EVENTS: usize = 100;

/// Sends one request on a kept-alive connection and reads its answer (Content-Length).
fn call<S: Read + Write>(conn: &mut BufReader<S>, head: &str, body: &str) -> usize {
    let req = format!("{head}\r\nContent-Length: {}\r\n\r\n{body}", body.len());
    conn.get_mut().write_all(req.as_bytes()).unwrap();
    let mut len = 0;
    loop {
        let mut line = String::new();
        conn.read_line(&mut line).unwrap();
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            len = v.trim().parse().unwrap();
        }
        if line == "\r\n" {
            break;
        }
    }
    let mut buf = vec![0; len];
    conn.read_exact(&mut buf).unwrap();
    assert!(
        buf.starts_with(b"{\"id\":1,\"jsonrpc\"") || buf.windows(8).any(|w| w == b"\"result\""),
        "{}",
        String::from_utf8_lossy(&buf)
    );
    len
}

pub fn timings(rows: &mut Vec<Row>) {
    let env = TestEnv::new();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    env.write_config(&format!("[ui]\nlisten = \"127.0.0.1:{port}\"\n"));
    let _d = env.start_daemon();
    for i in 0..RUNS {
        env.create_run(&format!("bench run {i}"));
    }
    let opened = env.cli(["--json", "ui", "--no-open"]).json();
    let link = opened["login_url"].as_str().unwrap();
    let path = &link[link.find("/login").unwrap()..];
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut page = String::new();
    s.read_to_string(&mut page).unwrap();
    let cookie = page
        .split("octl_session=")
        .nth(1)
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let key = page
        .split("content=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .to_string();

    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "run.list", "params": {}}).to_string();
    let ui_head = format!(
        "POST /api/rpc HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nOrigin: http://127.0.0.1:{port}\r\nContent-Type: application/json\r\nCookie: octl_session={cookie}\r\nX-Octl-Key: {key}"
    );
    let sock_head = "POST /rpc HTTP/1.1\r\nHost: octld\r\nContent-Type: application/json";
    let mut ui = BufReader::new(TcpStream::connect(("127.0.0.1", port)).unwrap());
    ui.get_ref().set_nodelay(true).unwrap();
    let mut sock = BufReader::new(UnixStream::connect(env.socket()).unwrap());
    let (mut via_ui, mut via_socket) = (Vec::new(), Vec::new());
    let mut bytes = 0;
    for _ in 0..SAMPLES {
        let t = Instant::now();
        bytes = call(&mut ui, &ui_head, &body);
        via_ui.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        call(&mut sock, sock_head, &body);
        via_socket.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let (u, k) = (median(via_ui), median(via_socket));
    let row = |metric: String, ours: f64, baseline: Option<f64>, target: &str, pass: bool| Row {
        metric,
        ours,
        baseline,
        unit: "ms",
        target: target.into(),
        pass,
        skipped: None,
    };
    rows.push(row(
        format!("run.list of {RUNS} runs ({bytes} B) through the UI's /api/rpc (baseline: the socket), median of {SAMPLES}"),
        u,
        Some(k),
        "≤ socket + 2 ms",
        u <= k + 2.0,
    ));

    // The feed: one append on the socket, then its event read from the stream.
    let run = env.create_run("bench feed");
    let mut feed = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(feed, "GET /api/events?since=now&key={key} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nCookie: octl_session={cookie}\r\n\r\n").unwrap();
    let mut feed = BufReader::new(feed);
    let mut wait_for = |needle: &str| loop {
        let mut line = String::new();
        assert!(feed.read_line(&mut line).unwrap() > 0, "the feed ended");
        if line.contains(needle) {
            break;
        }
    };
    wait_for("event: hello");
    let mut lat = Vec::new();
    for i in 0..EVENTS {
        let mark = format!("mark-{i}-");
        let t = Instant::now();
        env.rpc(
            "event.append",
            json!({"run": run, "type": "x.bench", "data": {"m": mark}}),
        );
        wait_for(&mark);
        lat.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let l = median(lat);
    rows.push(row(
        format!("event appended on the socket → on the UI's /api/events, median of {EVENTS}"),
        l,
        None,
        "≤ 50 ms",
        l <= 50.0,
    ));
}
