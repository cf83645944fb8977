//! System integration: a listening socket handed over by a service manager, and readiness
//! notifications to it.
//!
//! - systemd socket activation: when `LISTEN_PID` is our pid and `LISTEN_FDS` ≥ 1, fd 3
//!   (`SD_LISTEN_FDS_START`) is our listening socket. It must be a listening Unix stream
//!   socket, else the daemon refuses to start.
//! - launchd (macOS): the `Listeners` entry of the job's `Sockets`, through
//!   `launch_activate_socket`.
//! - `sd_notify`: when `NOTIFY_SOCKET` is set, `READY=1` once the daemon answers and
//!   `STOPPING=1` when it begins to stop, as datagrams to that socket (a path, or on Linux an
//!   abstract name written `@name`).
//!
//! [`capture`] reads these once per process and removes `LISTEN_PID`, `LISTEN_FDS`,
//! `LISTEN_FDNAMES` and `NOTIFY_SOCKET` from the environment, so that nothing the daemon starts
//! (tmux, agents) inherits them. `main` calls it before any thread exists, where changing the
//! environment is sound; [`run`](crate::run) calls it too, which is then a no-op.
//!
//! A socket handed over belongs to the service manager: the daemon never unlinks it.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::{UnixDatagram, UnixListener};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use crate::daemon::DaemonError;

/// The first fd a service manager passes (`SD_LISTEN_FDS_START`).
pub const LISTEN_FDS_START: RawFd = 3;

/// What the service manager handed over, read once per process.
struct Captured {
    /// The socket handed over (taken by the daemon), or why it cannot be used.
    listener: Option<Result<Handed, String>>,
    /// Where readiness goes.
    notify: Option<NotifyAddr>,
}

struct Handed {
    fd: OwnedFd,
    by: &'static str,
    /// Other sockets passed along that the daemon does not use (only one is expected).
    extra: usize,
}

#[derive(Debug, Clone)]
enum NotifyAddr {
    Path(PathBuf),
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    Abstract(Vec<u8>),
    Unsupported(String),
}

static CAPTURED: OnceLock<Mutex<Captured>> = OnceLock::new();

fn captured() -> &'static Mutex<Captured> {
    CAPTURED.get_or_init(|| Mutex::new(read_environment()))
}

/// Reads what a service manager handed over and clears it from the environment. Call it once,
/// early in `main`, before any thread starts; later calls do nothing.
pub fn capture() {
    captured();
}

fn read_environment() -> Captured {
    let listen_pid = std::env::var("LISTEN_PID").ok();
    let listen_fds = std::env::var("LISTEN_FDS").ok();
    let notify = std::env::var_os("NOTIFY_SOCKET").filter(|v| !v.is_empty());
    for var in [
        "LISTEN_PID",
        "LISTEN_FDS",
        "LISTEN_FDNAMES",
        "NOTIFY_SOCKET",
    ] {
        std::env::remove_var(var);
    }
    let listener = match systemd_listener(listen_pid.as_deref(), listen_fds.as_deref()) {
        Some(handed) => Some(handed),
        None => launchd_listener(),
    };
    Captured {
        listener,
        notify: notify.map(|v| notify_addr(&v.to_string_lossy())),
    }
}

/// systemd's protocol: `LISTEN_PID` must be ours (variables inherited from a parent are not
/// meant for us), `LISTEN_FDS` says how many fds from 3 on are ours.
fn systemd_listener(pid: Option<&str>, fds: Option<&str>) -> Option<Result<Handed, String>> {
    let pid = pid?;
    if pid.trim().parse::<u32>().ok() != Some(std::process::id()) {
        return None;
    }
    let count: RawFd = match fds.map(|f| f.trim().parse::<RawFd>()) {
        Some(Ok(n)) if n >= 0 => n,
        _ => {
            return Some(Err(format!(
                "LISTEN_PID is this process but LISTEN_FDS is {fds:?}, not a number of sockets"
            )))
        }
    };
    if count == 0 {
        return None;
    }
    // Every fd passed is ours: none may leak into the programs the daemon starts.
    for fd in LISTEN_FDS_START..LISTEN_FDS_START.saturating_add(count) {
        // SAFETY: fcntl on an integer fd has no memory effects; a closed fd only fails.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    Some(
        check_listening_unix_stream(LISTEN_FDS_START)
            .map(|()| Handed {
                // SAFETY: fd 3 is open (checked) and was handed to this process to own.
                fd: unsafe { OwnedFd::from_raw_fd(LISTEN_FDS_START) },
                by: "systemd",
                extra: (count - 1) as usize,
            })
            .map_err(|why| format!("fd {LISTEN_FDS_START} (LISTEN_FDS={count}) {why}")),
    )
}

#[cfg(not(target_os = "macos"))]
fn launchd_listener() -> Option<Result<Handed, String>> {
    None
}

/// The `Listeners` socket of our launchd job, if launchd started us with one.
#[cfg(target_os = "macos")]
fn launchd_listener() -> Option<Result<Handed, String>> {
    extern "C" {
        // <launch.h>, in libSystem: returns 0 or an errno value; on success `*fds` is a
        // malloc'ed array of `*cnt` fds that the caller frees.
        fn launch_activate_socket(
            name: *const libc::c_char,
            fds: *mut *mut libc::c_int,
            cnt: *mut libc::size_t,
        ) -> libc::c_int;
    }
    let mut fds: *mut libc::c_int = std::ptr::null_mut();
    let mut cnt: libc::size_t = 0;
    // SAFETY: a NUL-terminated name and two valid out-pointers.
    let err = unsafe { launch_activate_socket(c"Listeners".as_ptr(), &mut fds, &mut cnt) };
    match err {
        0 => {}
        // Not started by launchd, or no `Listeners` socket in the job: bind it ourselves.
        libc::ESRCH | libc::ENOENT => return None,
        e => {
            return Some(Err(format!(
                "launch_activate_socket(\"Listeners\") failed: {}",
                io::Error::from_raw_os_error(e)
            )))
        }
    }
    let handed: Vec<RawFd> = if fds.is_null() {
        Vec::new()
    } else {
        // SAFETY: launchd returned an array of `cnt` ints, which we copy and then free.
        let v = unsafe { std::slice::from_raw_parts(fds, cnt) }.to_vec();
        unsafe { libc::free(fds.cast()) };
        v
    };
    let (&first, rest) = handed.split_first()?;
    for &fd in &handed {
        // SAFETY: as above, fcntl on an integer fd.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    Some(
        check_listening_unix_stream(first)
            .map(|()| Handed {
                // SAFETY: launchd handed this open fd to us to own.
                fd: unsafe { OwnedFd::from_raw_fd(first) },
                by: "launchd",
                extra: rest.len(),
            })
            .map_err(|why| format!("the launchd socket \"Listeners\" (fd {first}) {why}")),
    )
}

/// Is `fd` an open, listening, Unix-domain stream socket? Otherwise why not, as the end of a
/// sentence.
fn check_listening_unix_stream(fd: RawFd) -> Result<(), String> {
    // SAFETY: fstat, getsockname and getsockopt write only into the locals given, whose sizes
    // are passed along.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(fd, &mut st) != 0 {
            return Err(format!("is not open: {}", io::Error::last_os_error()));
        }
        if st.st_mode & libc::S_IFMT != libc::S_IFSOCK {
            return Err("is not a socket".into());
        }
        let mut addr: libc::sockaddr_storage = std::mem::zeroed();
        let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        if libc::getsockname(
            fd,
            (&mut addr as *mut libc::sockaddr_storage).cast(),
            &mut len,
        ) != 0
        {
            return Err(format!("has no address: {}", io::Error::last_os_error()));
        }
        if libc::c_int::from(addr.ss_family) != libc::AF_UNIX {
            return Err(format!(
                "is not a Unix-domain socket (address family {})",
                addr.ss_family
            ));
        }
        let int_opt = |opt: libc::c_int| -> Result<libc::c_int, String> {
            let mut v: libc::c_int = 0;
            let mut l = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
            if libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                opt,
                (&mut v as *mut libc::c_int).cast(),
                &mut l,
            ) != 0
            {
                return Err(format!(
                    "cannot be inspected: {}",
                    io::Error::last_os_error()
                ));
            }
            Ok(v)
        };
        if int_opt(libc::SO_TYPE)? != libc::SOCK_STREAM {
            return Err("is not a stream socket (use ListenStream=, not ListenDatagram=)".into());
        }
        if int_opt(libc::SO_ACCEPTCONN)? == 0 {
            return Err(
                "is not listening (Accept=no is needed: one daemon serves them all)".into(),
            );
        }
    }
    Ok(())
}

/// The listening socket a service manager handed over, if any, for the daemon of the home
/// whose socket is `expected`. An unusable one is an error: the daemon must not quietly bind a
/// second socket next to the one the service manager serves.
pub fn take_listener(expected: &Path) -> Result<Option<UnixListener>, DaemonError> {
    let taken = captured()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .listener
        .take();
    let handed = match taken {
        None => return Ok(None),
        Some(Ok(h)) => h,
        Some(Err(why)) => {
            return Err(DaemonError::Io {
                what: "cannot use the socket handed over by the service manager".into(),
                source: io::Error::new(io::ErrorKind::InvalidInput, why),
            })
        }
    };
    let fd = handed.fd.as_raw_fd();
    let listener = UnixListener::from(handed.fd);
    let path = listener
        .local_addr()
        .ok()
        .and_then(|a| a.as_pathname().map(Path::to_path_buf));
    let shown = path
        .as_deref()
        .map_or_else(|| "(unnamed)".to_string(), |p| p.display().to_string());
    tracing::info!(by = handed.by, fd, socket = %shown, "serving the socket handed over by the service manager");
    if handed.extra > 0 {
        tracing::warn!(
            by = handed.by,
            unused = handed.extra,
            "more than one socket was handed over; serving the first only"
        );
    }
    if path.as_deref() != Some(expected) {
        tracing::warn!(
            by = handed.by,
            socket = %shown,
            expected = %expected.display(),
            "the handed-over socket is not this home's socket; clients of this home will not find it"
        );
    }
    Ok(Some(listener))
}

fn notify_addr(value: &str) -> NotifyAddr {
    if value.starts_with('/') {
        return NotifyAddr::Path(PathBuf::from(value));
    }
    if let Some(name) = value.strip_prefix('@') {
        if cfg!(target_os = "linux") {
            return NotifyAddr::Abstract(name.as_bytes().to_vec());
        }
    }
    NotifyAddr::Unsupported(value.to_string())
}

/// Tells the service manager something (`READY=1`, `STOPPING=1`, `STATUS=…`: one assignment a
/// line), if it asked to be told (`NOTIFY_SOCKET`). Failures are logged, never fatal.
pub fn notify(state: &str) {
    let addr = captured()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .notify
        .clone();
    let Some(addr) = addr else { return };
    if let Err(e) = send_notify(&addr, state.as_bytes()) {
        tracing::warn!(error = %e, notify_socket = ?addr, "cannot notify the service manager");
    }
}

fn send_notify(addr: &NotifyAddr, msg: &[u8]) -> io::Result<()> {
    let sock = UnixDatagram::unbound()?;
    // The service manager reads at once; never hang the daemon on it.
    sock.set_write_timeout(Some(Duration::from_secs(2)))?;
    let sent = match addr {
        NotifyAddr::Path(p) => sock.send_to(msg, p)?,
        #[cfg(target_os = "linux")]
        NotifyAddr::Abstract(name) => {
            use std::os::linux::net::SocketAddrExt;
            let a = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
            sock.send_to_addr(msg, &a)?
        }
        #[cfg(not(target_os = "linux"))]
        NotifyAddr::Abstract(_) => unreachable!("abstract names are Linux only"),
        NotifyAddr::Unsupported(v) => {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!("NOTIFY_SOCKET={v:?} is neither a path nor an @abstract name"),
            ))
        }
    };
    if sent != msg.len() {
        return Err(io::Error::other("the notification was cut short"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_for_another_process_are_ignored() {
        assert!(systemd_listener(None, Some("1")).is_none());
        assert!(systemd_listener(Some("1"), Some("1")).is_none());
        let me = std::process::id().to_string();
        assert!(systemd_listener(Some(&me), Some("0")).is_none());
        let err = systemd_listener(Some(&me), Some("x"))
            .unwrap()
            .err()
            .unwrap();
        assert!(err.contains("LISTEN_FDS"), "{err}");
    }

    #[test]
    fn only_a_listening_unix_stream_socket_is_accepted() {
        let dir = tempfile::tempdir().unwrap();
        let listener = UnixListener::bind(dir.path().join("s")).unwrap();
        assert_eq!(check_listening_unix_stream(listener.as_raw_fd()), Ok(()));

        let dgram = UnixDatagram::bind(dir.path().join("d")).unwrap();
        let err = check_listening_unix_stream(dgram.as_raw_fd()).unwrap_err();
        assert!(err.contains("not a stream socket"), "{err}");

        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let err = check_listening_unix_stream(a.as_raw_fd()).unwrap_err();
        assert!(err.contains("not listening"), "{err}");

        let file = std::fs::File::create(dir.path().join("f")).unwrap();
        let err = check_listening_unix_stream(file.as_raw_fd()).unwrap_err();
        assert_eq!(err, "is not a socket");

        let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let err = check_listening_unix_stream(tcp.as_raw_fd()).unwrap_err();
        assert!(err.contains("not a Unix-domain socket"), "{err}");
    }

    #[test]
    fn notify_addresses() {
        assert!(matches!(
            notify_addr("/run/user/1/systemd/notify"),
            NotifyAddr::Path(_)
        ));
        assert!(matches!(
            notify_addr("vsock:2:1"),
            NotifyAddr::Unsupported(_)
        ));
        #[cfg(target_os = "linux")]
        assert!(
            matches!(notify_addr("@x/notify"), NotifyAddr::Abstract(ref n) if n == b"x/notify")
        );
    }

    #[test]
    fn a_notification_is_one_datagram() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let rx = UnixDatagram::bind(&path).unwrap();
        send_notify(&NotifyAddr::Path(path), b"READY=1\nSTATUS=ok").unwrap();
        let mut buf = [0u8; 64];
        let n = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1\nSTATUS=ok");
    }
}
