//! `octld sandbox-relay --proxy SOCKET [--listen ADDR=HOST:PORT]… --http-proxy ADDR -- ARGV…`:
//! the first process inside a sandbox whose network is `allow` ([`super::proxy`]). Its
//! network namespace holds a loopback only (bubblewrap brings it up), so it relays:
//!
//! - each `--listen ADDR=HOST:PORT` (a loopback target of `[sandbox] allow`, at its own address
//!   and port): a connection there is sent to the daemon's proxy as `CONNECT HOST:PORT` and,
//!   once allowed, spliced;
//! - `--http-proxy ADDR` (what `HTTPS_PROXY` names): a connection's bytes go to the proxy as
//!   they are, so a client's own CONNECT is answered by the daemon;
//!
//! and runs ARGV (the agent) as its child with its stdio, passes SIGTERM, SIGINT and SIGHUP to
//! it, and exits with its status (128 + the signal that killed it). Plain threads: a handful of
//! connections at a time.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};

/// The agent's pid, for the signal handler.
static CHILD: AtomicI32 = AtomicI32::new(0);

extern "C" fn pass_on(sig: libc::c_int) {
    let pid = CHILD.load(Ordering::SeqCst);
    if pid > 0 {
        // SAFETY: kill(2) is async-signal-safe.
        unsafe { libc::kill(pid, sig) };
    }
}

pub fn run(proxy: &Path, listen: &[String], http_proxy: &str, argv: &[String]) -> i32 {
    let say = |what: String| eprintln!("octld sandbox-relay: {what}");
    let Some((program, args)) = argv.split_first() else {
        say("give the program to run after --".into());
        return 2;
    };
    let mut listeners = Vec::new();
    for spec in listen {
        let Some((addr, target)) = spec.split_once('=') else {
            say(format!("--listen {spec:?}: give ADDR=HOST:PORT"));
            return 2;
        };
        listeners.push((addr.to_string(), Some(target.to_string())));
    }
    listeners.push((http_proxy.to_string(), None));
    for (addr, target) in listeners {
        let listener = match TcpListener::bind(&addr) {
            Ok(l) => l,
            Err(e) => {
                say(format!("cannot listen on {addr}: {e}"));
                return 1;
            }
        };
        let proxy = proxy.to_path_buf();
        std::thread::spawn(move || accept(listener, proxy, target));
    }
    let mut child = match std::process::Command::new(program).args(args).spawn() {
        Ok(c) => c,
        Err(e) => {
            say(format!("cannot start {program}: {e}"));
            return 127;
        }
    };
    CHILD.store(child.id() as i32, Ordering::SeqCst);
    for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        // SAFETY: the handler only reads an atomic and calls kill(2).
        unsafe { libc::signal(sig, pass_on as *const () as libc::sighandler_t) };
    }
    crate::ended::shell_status(child.wait())
}

fn accept(listener: TcpListener, proxy: PathBuf, target: Option<String>) {
    for client in listener.incoming().flatten() {
        let (proxy, target) = (proxy.clone(), target.clone());
        std::thread::spawn(move || {
            let _ = relay(client, &proxy, target.as_deref());
        });
    }
}

/// One connection: through the proxy to `target` (CONNECT sent here), or as it is.
fn relay(client: TcpStream, proxy: &Path, target: Option<&str>) -> std::io::Result<()> {
    client.set_nodelay(true)?;
    let mut up = UnixStream::connect(proxy)?;
    if let Some(t) = target {
        up.write_all(format!("CONNECT {t} HTTP/1.1\r\nHost: {t}\r\n\r\n").as_bytes())?;
        // The answer's header, a byte at a time: what follows it is the target's.
        let mut header = Vec::with_capacity(64);
        let mut byte = [0u8; 1];
        while !header.ends_with(b"\r\n\r\n") {
            if up.read(&mut byte)? == 0 || header.len() > super::proxy::MAX_HEADER {
                return Ok(());
            }
            header.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&header);
        if head.split(' ').nth(1) != Some("200") {
            let line = head.lines().next().unwrap_or("");
            eprintln!("octld sandbox-relay: {t}: the daemon's proxy answered {line}");
            return Ok(());
        }
    }
    splice(client, up)
}

/// Both ways until each side is done, each end's write shut when its reader ends.
fn splice(client: TcpStream, up: UnixStream) -> std::io::Result<()> {
    let (mut client_r, mut up_w) = (client.try_clone()?, up.try_clone()?);
    let there = std::thread::spawn(move || {
        let _ = std::io::copy(&mut client_r, &mut up_w);
        let _ = up_w.shutdown(Shutdown::Write);
    });
    let (mut up_r, mut client_w) = (up, client);
    let _ = std::io::copy(&mut up_r, &mut client_w);
    let _ = client_w.shutdown(Shutdown::Write);
    let _ = there.join();
    Ok(())
}
