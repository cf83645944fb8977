//! `bench sandbox-proxy`: what `[sandbox] network = "allow"` adds to a request: a round trip
//! to a local TCP echo server directly, and through `octld sandbox-relay` (a loopback forward)
//! and the daemon's proxy (`octld::sandbox::proxy`, served here on a socket of its own, no
//! daemon), the two taking turns. On one open connection, and with a connection per request
//! (the relay's CONNECT to the proxy, the proxy's connection to the target).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use octld::sandbox::proxy::{serve_standalone, Pattern};

use super::{median, Row};

const SAMPLES: usize = 200;
const MESSAGE: [u8; 64] = [b'x'; 64];

/// Answers every connection with what it is sent.
fn echo_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut c in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let _ = c.set_nodelay(true);
                let mut buf = [0u8; 4096];
                while let Ok(n) = c.read(&mut buf) {
                    if n == 0 || c.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            });
        }
    });
    port
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn round_trip(c: &mut TcpStream) {
    c.write_all(&MESSAGE).unwrap();
    let mut got = [0u8; MESSAGE.len()];
    c.read_exact(&mut got).unwrap();
}

fn connect(port: u16) -> TcpStream {
    let c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_nodelay(true).unwrap();
    c
}

struct Relay(Child);

impl Drop for Relay {
    /// SIGTERM, which the relay passes on to its agent (`sleep`) and then exits with it.
    fn drop(&mut self) {
        // SAFETY: a plain kill(2) of our own child.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let _ = self.0.wait();
    }
}

pub fn timings(rows: &mut Vec<Row>) {
    let tmp = tempfile::tempdir().unwrap();
    let echo = echo_server();
    let socket = tmp.path().join("proxy.sock");
    let allowed = Pattern::parse(&format!("127.0.0.1:{echo}")).unwrap();
    serve_standalone(&socket, vec![allowed]).unwrap();
    let (forward, http) = (free_port(), free_port());
    let _relay = Relay(
        Command::new(octl_tests::bin("octld"))
            .arg("sandbox-relay")
            .arg("--proxy")
            .arg(&socket)
            .args(["--listen", &format!("127.0.0.1:{forward}=127.0.0.1:{echo}")])
            .args(["--http-proxy", &format!("127.0.0.1:{http}")])
            .args(["--", "sleep", "3600"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("start octld sandbox-relay"),
    );
    let start = Instant::now();
    while TcpStream::connect(("127.0.0.1", forward)).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the relay never listened"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let us = |d: Duration| d.as_secs_f64() * 1e6;

    // One open connection each: a request and its answer.
    let (mut direct, mut relayed) = (connect(echo), connect(forward));
    round_trip(&mut relayed);
    let (mut d_open, mut r_open) = (Vec::new(), Vec::new());
    for _ in 0..SAMPLES {
        let t = Instant::now();
        round_trip(&mut direct);
        d_open.push(us(t.elapsed()));
        let t = Instant::now();
        round_trip(&mut relayed);
        r_open.push(us(t.elapsed()));
    }
    // A connection per request: connect, the round trip, close.
    let (mut d_new, mut r_new) = (Vec::new(), Vec::new());
    for _ in 0..SAMPLES {
        for (port, out) in [(echo, &mut d_new), (forward, &mut r_new)] {
            let t = Instant::now();
            let mut c = connect(port);
            round_trip(&mut c);
            drop(c);
            out.push(us(t.elapsed()));
        }
    }
    for (what, ours, base) in [
        ("one open connection", median(r_open), median(d_open)),
        ("a connection per request", median(r_new), median(d_new)),
    ] {
        rows.push(Row {
            metric: format!(
                "sandbox network proxy: 64-byte round trip to a local echo server, {what} \
                 (median of {SAMPLES}), through relay + proxy vs direct"
            ),
            ours,
            baseline: Some(base),
            unit: "µs",
            target: "≤ +1 ms".into(),
            pass: ours - base <= 1000.0,
            skipped: None,
        });
    }
}
