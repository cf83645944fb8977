//! A tmux control-mode client (`tmux -C`, the protocol iTerm2 uses) kept open by [`Tmux`], so
//! that a command costs a line on a pipe instead of a process (a process alone is 2–4 ms).
//!
//! The protocol as tmux 3.3a speaks it (found by trying; the tests in `super` exercise it):
//!
//! - Every command of a line answers with a block: `%begin TIME NUM FLAGS`, its output lines,
//!   then `%end TIME NUM FLAGS`, or `%error TIME NUM FLAGS` with the error text as the output
//!   (the same text the command line prints to stderr). `a ; b ; c` gives three blocks; when
//!   `b` fails its block is an `%error` and `c` does not run and has no block, as on the
//!   command line. A line that does not parse gives one `%error` block.
//! - Notifications (`%window-add`, `%sessions-changed`, `%exit`, …) come only between blocks.
//! - The command on the client's own command line (here the attach) answers with a block too,
//!   but a line written before it has run may run first, from a client not yet attached: so
//!   nothing is written until that first block has come.
//! - The server reads the client's input and writes its output itself (the client hands its
//!   descriptors over when it connects): the stream ends when the server drops the client (or
//!   exits), not when the client process dies.
//!
//! As a line yields anything from one block to one per command, each request line is followed
//! by a second one, `display-message -p MARKER`, and the request's blocks are those before the
//! marker's. A block's end is recognised only by its own `TIME NUM FLAGS`, so output that looks
//! like `%end …` (a pane's text in `capture-pane`) cannot end it early.
//!
//! [`Tmux`]: super::Tmux

use std::collections::hash_map::RandomState;
use std::ffi::OsStr;
use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::os::unix::io::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::Version;

/// The hidden session the control client is attached to (a control client with no session
/// exits after its command). Run sessions are 26-character ULIDs, so it cannot clash; the rest
/// of the module keeps it out of every listing.
pub const CONTROL_SESSION: &str = "octl-control";

/// The control session's program: silent, idle (it blocks reading a terminal nobody types
/// into, with no timer), and in every POSIX system, unlike `sleep infinity` (GNU only). `exec`
/// leaves one process rather than a shell waiting on it.
const CONTROL_PROGRAM: &str = "exec cat";

/// `tmux -N` (never start a server) and `new-session -f` (client flags) need 3.2.
const MIN_VERSION: Version = Version { major: 3, minor: 2 };

/// Whether a tmux of this version can have a control client (older ones go by process).
pub fn supports_control(version: Version) -> bool {
    version >= MIN_VERSION
}

/// What tells one server from another: its pid and its start time (seconds), so that a pid
/// reused by a later server does not pass for the earlier one.
pub const SERVER_ID_FORMAT: &str = "#{pid} #{start_time}";

/// One run of a tmux server, read with [`SERVER_ID_FORMAT`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerId {
    pid: u32,
    started: u64,
}

impl ServerId {
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Reads the text [`SERVER_ID_FORMAT`] expands to.
    pub fn parse(text: &str) -> Option<ServerId> {
        let (pid, started) = text.trim().split_once(' ')?;
        Some(ServerId {
            pid: pid.parse().ok().filter(|&pid| pid > 0)?,
            started: started.parse().ok()?,
        })
    }
}

/// How long tmux may take to attach a client, or to answer one request, before the client is
/// given up.
const TIMEOUT: Duration = Duration::from_secs(10);

/// After a failed attach, the process path is used for this long, doubling up to
/// [`MAX_BACKOFF`] while attaching keeps failing, so a tmux that cannot do it costs little.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// How long a server whose client went away may take to stop accepting connections before it
/// is taken to be alive (a killed server closes its clients a moment before its socket).
const EXIT_GRACE: Duration = Duration::from_millis(250);

/// Quotes one argument for tmux's command parser, which reads a control line like a line of a
/// configuration file. Inside single quotes nothing is special (`$`, `~`, `\`, `#`, `;`, `{`,
/// `}`, `%`, spaces); adjacent quoted pieces join into one argument, so `'` is written `'\''`,
/// and a newline, which would end the line, is written `"\n"`, an escape that only double
/// quotes read. `None` for a NUL, which no tmux command line can carry.
pub fn quote(arg: &str) -> Option<String> {
    if arg.contains('\0') {
        return None;
    }
    let mut quoted = String::with_capacity(arg.len() + 2);
    quoted.push('\'');
    for c in arg.chars() {
        match c {
            '\'' => quoted.push_str(r"'\''"),
            '\n' => quoted.push_str(r#"'"\n"'"#),
            c => quoted.push(c),
        }
    }
    quoted.push('\'');
    Some(quoted)
}

/// The control line that runs `commands` in order; `None` if an argument cannot be quoted.
pub fn line(commands: &[Vec<String>]) -> Option<String> {
    let mut line = String::new();
    for (i, command) in commands.iter().enumerate() {
        if i > 0 {
            line.push_str(" ; ");
        }
        for (j, arg) in command.iter().enumerate() {
            if j > 0 {
                line.push(' ');
            }
            line.push_str(&quote(arg)?);
        }
    }
    Some(line)
}

/// What became of a request given to [`Control::request`].
#[derive(Debug)]
pub enum Outcome {
    /// tmux answered: the output of every command, or the text of the first error.
    Answered(Result<Vec<u8>, String>),
    /// The request did not run, or ran on a server that no longer exists: the caller runs it
    /// as a process, which then sees what any later call would (a new server or none).
    Fallback,
    /// The request was sent and may have run, but no answer came: it must not be run again.
    Lost(String),
}

/// The control client shared by every clone of a [`super::Tmux`], connected on first use.
pub struct Control {
    enabled: bool,
    /// How long a request may wait for its answer.
    timeout: Duration,
    /// How long an attach may take.
    attach_timeout: Duration,
    /// The first back-off after a failed attach.
    first_backoff: Duration,
    state: Mutex<State>,
    answered: AtomicU64,
    #[cfg(test)]
    pub probe: Probe,
}

/// What the tests watch, as it happens (a request holds the state's lock throughout).
#[cfg(test)]
#[derive(Debug, Default)]
pub struct Probe {
    /// Attaches tried, and those that failed.
    pub attaches: AtomicU64,
    pub failed_attaches: AtomicU64,
}

#[derive(Default)]
struct State {
    client: Option<Client>,
    /// Whether this tmux is new enough, once a version has been read.
    supported: Option<bool>,
    /// No attach is tried before then (after a failed one).
    retry_at: Option<Instant>,
    backoff: Duration,
}

impl State {
    /// Whether an attach may be tried at `now`.
    fn may_attach(&self, now: Instant) -> bool {
        self.retry_at.is_none_or(|at| now >= at)
    }

    /// An attach failed at `now`: none is tried for `first`, doubling on each failure that
    /// follows up to [`MAX_BACKOFF`]. Returns the back-off.
    fn attach_failed(&mut self, now: Instant, first: Duration) -> Duration {
        self.backoff = (self.backoff * 2).clamp(first, MAX_BACKOFF.max(first));
        self.retry_at = Some(now + self.backoff);
        self.backoff
    }

    fn attached(&mut self) {
        self.retry_at = None;
        self.backoff = Duration::ZERO;
    }
}

impl fmt::Debug for Control {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let connected = self.state.try_lock().ok().map(|s| s.client.is_some());
        f.debug_struct("Control")
            .field("enabled", &self.enabled)
            .field("connected", &connected)
            .field("answered", &self.answered.load(Ordering::Relaxed))
            .finish()
    }
}

impl Control {
    pub fn new(enabled: bool) -> Control {
        Control {
            enabled,
            timeout: TIMEOUT,
            attach_timeout: TIMEOUT,
            first_backoff: FIRST_BACKOFF,
            state: Mutex::new(State::default()),
            answered: AtomicU64::new(0),
            #[cfg(test)]
            probe: Probe::default(),
        }
    }

    /// Sets how long a request may wait for its answer (attaching keeps [`TIMEOUT`]).
    #[cfg(test)]
    pub fn with_timeout(mut self, timeout: Duration) -> Control {
        self.timeout = timeout;
        self
    }

    /// Sets how long an attach may take, and the first back-off after one fails.
    #[cfg(test)]
    pub fn with_attach(mut self, timeout: Duration, first_backoff: Duration) -> Control {
        self.attach_timeout = timeout;
        self.first_backoff = first_backoff;
        self
    }

    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// How many requests the control client has answered (the rest went by process).
    pub fn answered(&self) -> u64 {
        self.answered.load(Ordering::Relaxed)
    }

    /// Records the tmux version read by the process path, so that a tmux too old for the client
    /// is never asked to attach one.
    pub fn note_version(&self, version: Version) {
        self.lock().supported = Some(supports_control(version));
    }

    /// Drops the client (its process is killed and reaped); the next request attaches anew.
    pub fn disconnect(&self) {
        self.lock().client = None;
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        match self.state.lock() {
            Ok(state) => state,
            Err(poisoned) => {
                // A panic in the middle of a request leaves the client's stream at an unknown
                // point: start again from a fresh one.
                let mut state = poisoned.into_inner();
                state.client = None;
                self.state.clear_poison();
                state
            }
        }
    }

    /// Runs one control line (from [`line`]) on the server at `socket`, attaching a client
    /// first if there is none and the server is running. One request at a time: the answer is
    /// read from a single stream.
    ///
    /// `line` makes the line once the client is attached, given the server the client is
    /// attached to (if its identity could be read), which it stays attached to for its whole
    /// life: the line runs there or nowhere. `None` from it: the line cannot be written.
    ///
    /// `idempotent`: running the line twice does no harm (a read), so it may go by process
    /// after any failure but a timeout.
    pub fn request(
        &self,
        program: &OsStr,
        socket: &Path,
        line: impl FnOnce(Option<ServerId>) -> Option<String>,
        idempotent: bool,
    ) -> Outcome {
        if !self.enabled {
            return Outcome::Fallback;
        }
        let mut state = self.lock();
        if state.client.is_none() && !self.connect(&mut state, program, socket) {
            return Outcome::Fallback;
        }
        let Some(client) = state.client.as_mut() else {
            return Outcome::Fallback;
        };
        let Some(line) = line(client.server) else {
            return Outcome::Fallback;
        };
        let failure = match client.request(&line, self.timeout) {
            Ok(answer) => {
                self.answered.fetch_add(1, Ordering::Relaxed);
                return Outcome::Answered(answer);
            }
            Err(failure) => failure,
        };
        state.client = None;
        drop(state);
        tracing::debug!(error = failure.why(), "tmux control client dropped");
        // Whether the line may have run decides what may follow:
        // - not (fully) written: tmux runs only whole lines, so it did not run; go by process.
        // - written, then no answer in time: tmux may be hung, or slow and about to run it;
        //   running it again could do it twice, and by process would likely hang as well.
        // - written, then the stream ended (or went wrong): if the server is gone, whatever
        //   the line did went with it (its windows, their programs), and the process path sees
        //   what any later call would: "no server", or a server it starts itself with the
        //   global options. If the server lives (only the client died, say its session was
        //   killed), the line may have run there: report instead of doing it twice, unless
        //   it is a read.
        match failure {
            Failure::NotSent(_) => Outcome::Fallback,
            Failure::Timeout(why) => Outcome::Lost(why),
            Failure::Broken(_) if idempotent || server_gone(socket) => Outcome::Fallback,
            Failure::Broken(why) => Outcome::Lost(why),
        }
    }

    /// Attaches a client if the server is running; `false` (use the process path) otherwise.
    fn connect(&self, state: &mut State, program: &OsStr, socket: &Path) -> bool {
        if state.supported == Some(false) {
            return false;
        }
        if !state.may_attach(Instant::now()) {
            return false;
        }
        // The call that starts the server must be the process path's `new-session`, which
        // sets the server-wide options first; the client also passes `-N`, so a server that
        // stops between this check and its attach is never started by it.
        if !server_running(socket) {
            return false;
        }
        #[cfg(test)]
        self.probe.attaches.fetch_add(1, Ordering::Relaxed);
        match Client::start(program, socket, self.attach_timeout) {
            Ok(client) => {
                state.client = Some(client);
                state.attached();
                true
            }
            Err(why) => {
                let backoff = state.attach_failed(Instant::now(), self.first_backoff);
                #[cfg(test)]
                self.probe.failed_attaches.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(error = %why, retry_in = ?backoff, "tmux control client not attached");
                false
            }
        }
    }
}

fn server_running(socket: &Path) -> bool {
    UnixStream::connect(socket).is_ok()
}

/// Whether the server has stopped accepting connections, allowing it [`EXIT_GRACE`] to finish
/// exiting.
fn server_gone(socket: &Path) -> bool {
    let deadline = Instant::now() + EXIT_GRACE;
    loop {
        if !server_running(socket) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[derive(Debug)]
enum Failure {
    /// The request line was not written in full: it did not run.
    NotSent(String),
    /// The line was written and no answer came in time.
    Timeout(String),
    /// The line was written, then the stream ended or made no sense.
    Broken(String),
}

impl Failure {
    fn why(&self) -> &str {
        match self {
            Failure::NotSent(why) | Failure::Timeout(why) | Failure::Broken(why) => why,
        }
    }
}

/// What the reader thread passes on.
enum Event {
    /// One command's answer.
    Block { ok: bool, output: Vec<u8> },
    /// The stream ended or broke; nothing more will come.
    Closed(String),
}

/// A `tmux -C` process attached to [`CONTROL_SESSION`]. Dropping it closes its input, kills
/// and reaps it.
struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    events: Receiver<Event>,
    /// Makes markers unguessable, so no output can pass for one.
    nonce: u64,
    seq: u64,
    /// The server attached to, read once attached (`None` if its answer made no sense).
    server: Option<ServerId>,
}

impl Drop for Client {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Client {
    fn start(program: &OsStr, socket: &Path, timeout: Duration) -> Result<Client, String> {
        let mut command = Command::new(program);
        // Inside the user's tmux these would point the client at their server.
        command.env_remove("TMUX").env_remove("TMUX_PANE");
        command
            .arg("-S")
            .arg(socket)
            .args(["-N", "-f", "/dev/null", "-C", "new-session", "-A", "-s"])
            .arg(CONTROL_SESSION)
            // No `%output` for the hidden pane, and its size is nobody's concern.
            .args(["-f", "no-output,ignore-size", "--", CONTROL_PROGRAM])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        die_with_parent(&mut command);
        let (sender, events) = mpsc::channel();
        let (spawned, child) = mpsc::channel();
        // The thread that reads the client's output also starts it, so that the client lives
        // no longer than that thread (see `die_with_parent`), which ends only once the client
        // has ended or been dropped. A thread, so that reading has a deadline (recv_timeout),
        // and the output is always drained: notifications come whether or not a request waits.
        std::thread::Builder::new()
            .name("tmux-control".into())
            .spawn(move || {
                let mut child = match command.spawn() {
                    Ok(child) => child,
                    Err(e) => {
                        let _ = spawned.send(Err(format!("starting tmux -C: {e}")));
                        return;
                    }
                };
                let stdout = child.stdout.take();
                if spawned.send(Ok(child)).is_err() {
                    return;
                }
                if let Some(stdout) = stdout {
                    read_events(stdout, sender);
                }
            })
            .map_err(|e| format!("starting the tmux -C reader: {e}"))?;
        let mut child = child
            .recv()
            .map_err(|_| "the tmux -C reader stopped".to_string())??;
        let Some(stdin) = child.stdin.take() else {
            let _ = child.kill();
            let _ = child.wait();
            return Err("tmux -C has no input".into());
        };
        let mut client = Client {
            child,
            stdin: Some(stdin),
            events,
            nonce: RandomState::new().build_hasher().finish(),
            seq: 0,
            server: None,
        };
        if let Some(stdin) = &client.stdin {
            // Writes wait in poll(2) with a deadline instead of blocking in write(2).
            set_nonblocking(stdin).map_err(|e| format!("tmux -C input: {e}"))?;
        }
        let deadline = Instant::now() + timeout;
        match client.events.recv_timeout(timeout) {
            Ok(Event::Block { ok: true, .. }) => {}
            Ok(Event::Block { ok: false, output }) => {
                return Err(format!(
                    "attaching: {}",
                    String::from_utf8_lossy(&output).trim()
                ))
            }
            Ok(Event::Closed(why)) => return Err(why),
            Err(RecvTimeoutError::Timeout) => return Err(format!("no attach within {timeout:?}")),
            Err(RecvTimeoutError::Disconnected) => return Err("the tmux -C reader stopped".into()),
        }
        // Which server this is, for lines meant only for one server (see `Control::request`).
        let line = format!(
            "display-message -p {}",
            quote(SERVER_ID_FORMAT).unwrap_or_default()
        );
        let left = deadline.saturating_duration_since(Instant::now());
        let answer = client
            .request(&line, left)
            .map_err(|failure| format!("reading the server's identity: {}", failure.why()))?;
        client.server = answer
            .ok()
            .and_then(|out| ServerId::parse(&String::from_utf8_lossy(&out)));
        Ok(client)
    }

    fn request(
        &mut self,
        line: &str,
        timeout: Duration,
    ) -> Result<Result<Vec<u8>, String>, Failure> {
        let deadline = Instant::now() + timeout;
        // Anything that came while idle means the client has gone (its session or server
        // ended) or lost step: nothing is written to it.
        match self.events.try_recv() {
            Err(TryRecvError::Empty) => {}
            Ok(Event::Closed(why)) => return Err(Failure::NotSent(why)),
            Ok(Event::Block { .. }) => {
                return Err(Failure::NotSent("an answer to no request".into()))
            }
            Err(TryRecvError::Disconnected) => {
                return Err(Failure::NotSent("the reader stopped".into()))
            }
        }
        self.seq += 1;
        let marker = format!("octl-sync-{:016x}-{}", self.nonce, self.seq);
        let mut text = String::with_capacity(line.len() + marker.len() + 24);
        text.push_str(line);
        text.push('\n');
        let request_len = text.len();
        text.push_str("display-message -p ");
        text.push_str(&marker);
        text.push('\n');
        let Some(stdin) = self.stdin.as_mut() else {
            return Err(Failure::NotSent("input closed".into()));
        };
        if let Err((written, error)) = write_all(stdin, text.as_bytes(), deadline) {
            return Err(match error {
                WriteError::Timeout => Failure::Timeout(format!("writing took over {timeout:?}")),
                WriteError::Io(e) if written < request_len => Failure::NotSent(e),
                WriteError::Io(e) => Failure::Broken(e),
            });
        }
        let expected = format!("{marker}\n");
        let mut output = Vec::new();
        let mut error: Option<String> = None;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.events.recv_timeout(left) {
                Ok(Event::Block { output: out, .. }) if out == expected.as_bytes() => break,
                Ok(Event::Block {
                    ok: true,
                    output: out,
                }) => output.extend_from_slice(&out),
                Ok(Event::Block {
                    ok: false,
                    output: out,
                }) => {
                    error.get_or_insert_with(|| String::from_utf8_lossy(&out).into_owned());
                }
                Ok(Event::Closed(why)) => return Err(Failure::Broken(why)),
                Err(RecvTimeoutError::Timeout) => {
                    return Err(Failure::Timeout(format!("no answer within {timeout:?}")))
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(Failure::Broken("the reader stopped".into()))
                }
            }
        }
        Ok(match error {
            Some(error) => Err(error),
            None => Ok(output),
        })
    }
}

/// Reads the client's output until it ends, passing on each block and dropping notifications.
fn read_events(stdout: ChildStdout, events: Sender<Event>) {
    let mut reader = BufReader::new(stdout);
    let mut line = Vec::new();
    // The open block's guard (`TIME NUM FLAGS`) and its output so far.
    let mut block: Option<(Vec<u8>, Vec<u8>)> = None;
    let why = loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => break "tmux -C ended".to_string(),
            Ok(_) => {}
            Err(e) => break format!("reading tmux -C: {e}"),
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        match block.take() {
            None => {
                if let Some(guard) = line.strip_prefix(b"%begin ") {
                    block = Some((guard.to_vec(), Vec::new()));
                } else if !line.starts_with(b"%") {
                    break format!(
                        "unexpected line from tmux -C: {:?}",
                        String::from_utf8_lossy(&line)
                    );
                }
            }
            Some((guard, mut output)) => {
                let closes = |prefix: &[u8]| line.strip_prefix(prefix) == Some(&guard[..]);
                let (end, error) = (closes(b"%end "), closes(b"%error "));
                if end || error {
                    if events.send(Event::Block { ok: end, output }).is_err() {
                        return;
                    }
                } else {
                    output.extend_from_slice(&line);
                    output.push(b'\n');
                    block = Some((guard, output));
                }
            }
        }
    };
    let _ = events.send(Event::Closed(why));
}

enum WriteError {
    Timeout,
    Io(String),
}

/// Writes all of `bytes` to the non-blocking `stdin` by `deadline`; on failure, how many bytes
/// were written.
fn write_all(
    stdin: &mut ChildStdin,
    bytes: &[u8],
    deadline: Instant,
) -> Result<(), (usize, WriteError)> {
    let mut written = 0;
    while written < bytes.len() {
        match stdin.write(&bytes[written..]) {
            Ok(0) => return Err((written, WriteError::Io("tmux -C takes no input".into()))),
            Ok(n) => written += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err((written, WriteError::Timeout));
                }
                let mut fd = libc::pollfd {
                    fd: stdin.as_raw_fd(),
                    events: libc::POLLOUT,
                    revents: 0,
                };
                let ms = left.as_millis().clamp(1, libc::c_int::MAX as u128) as libc::c_int;
                // SAFETY: one valid pollfd, alive for the whole call. Whatever it returns, the
                // next write says whether the pipe takes more (or is broken).
                unsafe { libc::poll(&mut fd, 1, ms) };
            }
            Err(e) => return Err((written, WriteError::Io(format!("writing to tmux -C: {e}")))),
        }
    }
    Ok(())
}

/// Has the kernel kill the client when the thread that starts it ends (Linux), as it does when
/// the daemon dies: a client outliving the daemon, its input closed and its output unread, can
/// wedge tmux 3.3a's server for good if `kill-server` comes before the server has seen the
/// input end (the server then waits for output nobody reads, refusing every new client with
/// "server exited unexpectedly"). Other systems have no such signal; there, that narrow race
/// after a daemon's crash remains.
#[cfg(target_os = "linux")]
fn die_with_parent(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id();
    // SAFETY: prctl(2) and getppid(2) are async-signal-safe, and the closure touches nothing
    // else; it runs in the child between fork and exec.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The daemon died before the signal was asked for.
            if libc::getppid() as u32 != parent {
                return Err(std::io::Error::other("the daemon has exited"));
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_command: &mut Command) {}

fn set_nonblocking(stdin: &ChildStdin) -> std::io::Result<()> {
    let fd = stdin.as_raw_fd();
    // SAFETY: fcntl(2) on a descriptor this process owns; no pointers involved.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tmux::parse_version;

    #[test]
    fn the_client_needs_tmux_3_2() {
        let supports = |v| supports_control(parse_version(v).unwrap());
        for old in [
            "tmux 3.0",
            "tmux 3.0a",
            "tmux 3.1c",
            "tmux 2.9",
            "tmux next-3.1",
        ] {
            assert!(!supports(old), "{old}");
        }
        for new in [
            "tmux 3.2",
            "tmux 3.2a",
            "tmux 3.3a",
            "tmux 3.4-rc2",
            "tmux next-3.5",
            "tmux 4.0",
            "tmux master",
            "tmux openbsd-7.5",
        ] {
            assert!(supports(new), "{new}");
        }
    }

    #[test]
    fn back_off_doubles_up_to_a_limit_and_ends_with_an_attach() {
        let mut state = State::default();
        let t0 = Instant::now();
        assert!(state.may_attach(t0));
        let mut expected = FIRST_BACKOFF;
        let mut now = t0;
        for _ in 0..12 {
            assert_eq!(state.attach_failed(now, FIRST_BACKOFF), expected);
            assert!(!state.may_attach(now));
            assert!(!state.may_attach(now + expected - Duration::from_millis(1)));
            assert!(state.may_attach(now + expected));
            now += expected;
            expected = (expected * 2).min(MAX_BACKOFF);
        }
        assert_eq!(state.backoff, MAX_BACKOFF);
        state.attached();
        assert!(state.may_attach(now));
        assert_eq!(state.attach_failed(now, FIRST_BACKOFF), FIRST_BACKOFF);
        // A first back-off above the limit is taken as given.
        let mut state = State::default();
        let long = MAX_BACKOFF * 2;
        assert_eq!(state.attach_failed(t0, long), long);
        assert_eq!(state.attach_failed(t0, long), long);
    }

    #[test]
    fn server_ids_parse() {
        assert_eq!(
            ServerId::parse("6408 1796012703\n"),
            Some(ServerId {
                pid: 6408,
                started: 1796012703
            })
        );
        for bad in ["", "6408", "0 1796012703", "x 1", "1 x", "1 2 3"] {
            assert_eq!(ServerId::parse(bad), None, "{bad:?}");
        }
    }
}
