//! `orchestratectl hook <EVENT>`: the command Claude Code's hooks run in every agent the
//! daemon starts (octld passes them with `--settings`). It reads the hook's JSON from stdin and
//! records what it says as one `node.activity` event of the agent's node; a `PermissionRequest`
//! (`hook PermissionAsk`, `hook PermissionAsk window` in an interactive agent, whose dialog is
//! on screen meanwhile) is instead asked of a person, and the decision printed on stdout, the
//! one thing this ever prints there.
//!
//! A hook runs synchronously: the agent waits for it. So this is the CLI's fast path, taken at
//! the top of `main` before clap or a tokio runtime exist: blocking `std` I/O, one HTTP request
//! on the Unix socket with short timeouts. It never starts the daemon (not even through a
//! service manager's socket activation: a daemon whose lock holder is gone is down, and the
//! socket is not touched), never prints on stdout (Claude Code would read it as the hook's
//! decision), and always exits 0, whatever happens: an agent must never be blocked or broken
//! by its bookkeeping.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use serde::Deserialize;
use serde_json::{json, Value};

use octl_proto::method::Method as _;
use octl_proto::state::ActivityState;

pub const HOOK_EXAMPLES: &str = "\
Examples:
  # octld gives these to every Claude Code agent it starts; you do not run them yourself
  echo '{\"hook_event_name\":\"PreToolUse\",\"tool_name\":\"Bash\"}' | orchestratectl hook PreToolUse
  # in --settings: {\"hooks\":{\"Stop\":[{\"hooks\":[{\"type\":\"command\",\"command\":\"orchestratectl hook Stop\"}]}]}}";

/// `orchestratectl hook`'s arguments (only `--help` reaches clap; the fast path reads them).
#[derive(Debug, Args)]
pub struct HookArgs {
    /// The Claude Code hook that runs this: SessionStart, UserPromptSubmit, PreToolUse,
    /// PostToolUse, PostToolUseFailure, PermissionRequest, PermissionDenied, Notification, Stop,
    /// SessionEnd; PermissionAsk (a PermissionRequest asked of a person with `node
    /// allow|deny`, the decision printed; `PermissionAsk window`: an interactive agent's, whose
    /// dialog may be answered in its window first)
    #[arg(value_name = "EVENT")]
    pub event: Option<String>,
    /// With PermissionAsk: `window`, the agent's dialog is on screen while this waits
    #[arg(value_name = "WHERE", hide = true)]
    pub place: Option<String>,
}

/// How long the connection to the daemon may take to accept the request, and to answer it.
const WRITE_TIMEOUT: Duration = Duration::from_millis(500);
const READ_TIMEOUT: Duration = Duration::from_millis(1500);
/// Longest `detail` recorded (a prompt's message, a command line).
const DETAIL_MAX: usize = 200;

/// Is this `orchestratectl hook …` (and not a request for its help)?
pub fn is_hook(args: &[OsString]) -> bool {
    args.get(1).is_some_and(|a| a == "hook")
        && !args[2..]
            .iter()
            .any(|a| a == "--help" || a == "-h" || a == "--json")
}

/// The fast path: always 0.
pub fn main(args: &[OsString]) -> i32 {
    let arg = |i: usize| args.get(i).and_then(|a| a.to_str()).map(str::to_string);
    run_in(arg(2).as_deref(), arg(3).as_deref() == Some(WINDOW))
}

/// Reads the hook's input, records it if the daemon runs, and returns 0 in every case.
pub fn run(event: Option<&str>) -> i32 {
    run_in(event, false)
}

/// [`run`]; `window`: a `PermissionAsk` whose dialog is on screen in the agent's window.
pub fn run_in(event: Option<&str>, window: bool) -> i32 {
    if let Err(why) = record(event, window) {
        // On stderr only, which Claude Code shows in its debug output, never as a decision.
        if std::env::var_os("OCTL_HOOK_DEBUG").is_some() {
            eprintln!("orchestratectl hook: {why}");
        }
    }
    0
}

/// The fields of Claude Code's hook input this reads; the rest (a tool's whole response) is
/// skipped without being built.
#[derive(Debug, Default, Deserialize)]
pub struct HookInput {
    pub hook_event_name: Option<String>,
    pub session_id: Option<String>,
    pub tool_name: Option<String>,
    pub tool_input: Option<ToolInput>,
    pub message: Option<String>,
    pub notification_type: Option<String>,
    pub source: Option<String>,
    pub reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub struct ToolInput {
    pub command: Option<String>,
    pub file_path: Option<String>,
}

/// What a hook says: the node's activity and its detail; `None` for hooks that say nothing
/// about it (a login succeeded, a hook this version does not know).
pub fn activity(event: &str, input: &HookInput) -> Option<(ActivityState, Option<String>)> {
    let tool = || {
        input.tool_name.as_ref().map(|t| {
            let arg = input
                .tool_input
                .as_ref()
                .and_then(|i| i.command.as_ref().or(i.file_path.as_ref()));
            match arg {
                Some(a) => format!("{t}: {a}"),
                None => t.clone(),
            }
        })
    };
    let said = match event {
        "SessionStart" => (ActivityState::Idle, input.source.clone()),
        "UserPromptSubmit" => (ActivityState::Working, None),
        "PreToolUse" | "PostToolUse" | "PostToolUseFailure" => (ActivityState::Working, tool()),
        "PermissionRequest" => (ActivityState::NeedsPermission, tool()),
        // A tool its rules deny: the agent goes on without it, and says which it was refused.
        "PermissionDenied" => (
            ActivityState::Working,
            tool().map(|t| format!("denied: {t}")),
        ),
        "Notification" => match input.notification_type.as_deref() {
            Some("permission_prompt") => (ActivityState::NeedsPermission, input.message.clone()),
            Some("auth_success") => return None,
            _ => (ActivityState::WaitingInput, input.message.clone()),
        },
        "Stop" => (ActivityState::Idle, None),
        "StopFailure" => (ActivityState::Idle, Some("stopped on an error".to_string())),
        "SessionEnd" => (
            ActivityState::Idle,
            Some(format!(
                "session ended ({})",
                input.reason.as_deref().unwrap_or("other")
            )),
        ),
        _ => return None,
    };
    let (state, detail) = said;
    Some((state, detail.map(|d| shorten(&d))))
}

fn shorten(s: &str) -> String {
    let one_line = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() > DETAIL_MAX {
        format!(
            "{}…",
            one_line.chars().take(DETAIL_MAX - 1).collect::<String>()
        )
    } else {
        one_line
    }
}

fn record(event: Option<&str>, window: bool) -> Result<(), String> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    // Outside an agent window there is no node to speak for.
    let (run, node) = match (env("OCTL_RUN"), env("OCTL_NODE")) {
        (Some(r), Some(n)) => (r, n),
        _ => return Err("OCTL_RUN and OCTL_NODE are not set: not an agent's window".into()),
    };
    // Read all of it, so Claude Code's write never fails, however long a tool's output.
    let mut raw = Vec::new();
    std::io::stdin()
        .lock()
        .read_to_end(&mut raw)
        .map_err(|e| format!("reading stdin: {e}"))?;
    // An autonomous agent's request for a tool: asked of a person, and answered.
    if event == Some(ASK) {
        return ask(&run, &node, &raw, window);
    }
    let input: HookInput = serde_json::from_slice(&raw).unwrap_or_default();
    // The daemon's argument first: it says what the hook means for this agent (in `-p` a
    // permission request is asked of a person: `PermissionAsk`); the input's own name when
    // there is none.
    let event = event
        .or(input.hook_event_name.as_deref())
        .ok_or("no hook event: give it as the argument")?;
    let Some((state, detail)) = activity(event, &input) else {
        return Ok(());
    };
    let home = home()?;
    if !reachable(&home) {
        return Err("octld is not running".into());
    }
    let mut data = json!({"state": state.as_str(), "hook": event});
    if let Some(d) = detail {
        data["detail"] = Value::String(d);
    }
    if let Some(s) = input.session_id.filter(|s| octl_proto::ids::is_uuid(s)) {
        data["session_id"] = Value::String(s);
    }
    append_activity(&home.join("octld.sock"), &run, &node, data)
}

/// The hook a Claude Code agent's `PermissionRequest` runs (octld's settings say so): the
/// request is recorded and a person's decision waited for.
pub const ASK: &str = "PermissionAsk";
/// `PermissionAsk`'s second argument in an interactive agent: Claude Code shows its dialog
/// while the hook runs, takes the hook's decision if it comes first (the dialog goes), and,
/// when the dialog is answered No (or cancelled) first, ends the hook with SIGTERM — which
/// this reports, so the daemon records the window's denial; a Yes is reported by the tool's
/// `PostToolUse`.
pub const WINDOW: &str = "window";
/// How long one `node.permission_wait` may take to answer (it waits at most 20 s).
const WAIT_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// How long past the daemon's `[permissions] wait` the hook waits for its answer at most.
const ASK_MARGIN: Duration = Duration::from_secs(30);
/// How long a waiting hook goes on asking a daemon that does not answer (a restart takes well
/// under a second), and how often.
const RESTART_GRACE: Duration = Duration::from_secs(30);
const RESTART_POLL: Duration = Duration::from_millis(200);

/// `PermissionAsk`: records the request (`node.permission_ask`), waits for its decision
/// (`node.permission_wait`, again until there is one) and prints it as Claude Code's
/// `PermissionRequest` decision. With the daemon down, or any error, it prints nothing: the
/// agent does as it would without the hook (in `-p`, the tool is denied). A daemon restarted
/// while it waits is asked again (up to 30 s without an answer). Bounded: 30 s past the wait the daemon gave, it gives up (and prints nothing).
fn ask(run: &str, node: &str, raw: &[u8], window: bool) -> Result<(), String> {
    let started = std::time::Instant::now();
    // SIGTERM waits (blocked, in every thread) until the request is known and a thread
    // reports it; a hook ended so before it asked leaves its request to the next hooks.
    let terminated = window.then(block_sigterm).flatten();
    let input: Value = serde_json::from_slice(raw).map_err(|e| format!("hook input: {e}"))?;
    let tool = input["tool_name"]
        .as_str()
        .filter(|t| !t.is_empty())
        .ok_or("no tool_name in the hook's input")?
        .to_string();
    let tool_input = match &input["tool_input"] {
        Value::Object(o) => Value::Object(o.clone()),
        _ => json!({}),
    };
    let detail = activity(
        "PreToolUse",
        &serde_json::from_value::<HookInput>(input.clone()).unwrap_or_default(),
    )
    .and_then(|(_, d)| d);
    let home = home()?;
    if !reachable(&home) {
        return Err("octld is not running".into());
    }
    let socket = home.join("octld.sock");
    // No activity of its own: the request it records sets the node's (`needs_permission`),
    // and is the one notice a person gets, with the commands that answer it.
    let mut params = json!({"run": run, "node": node, "tool": tool, "input": tool_input});
    if let Some(d) = &detail {
        params["detail"] = Value::String(d.clone());
    }
    let mut answer = call(
        &socket,
        octl_proto::method::NodePermissionAsk::NAME,
        &params,
        READ_TIMEOUT,
    )?;
    if let (Some(set), Some(request)) = (terminated, answer["request"].as_str()) {
        report_window_answer(set, &socket, run, node, request, detail.as_deref());
    }
    let wait = Duration::from_millis(answer["wait_ms"].as_u64().unwrap_or(600_000));
    let mut unanswered = None::<std::time::Instant>;
    while answer["decision"].is_null() {
        let request = answer["request"]
            .as_str()
            .ok_or("no request in the daemon's answer")?
            .to_string();
        if started.elapsed() > wait + ASK_MARGIN {
            return Err(format!("no decision on {request} in time"));
        }
        let asked = answered(
            &socket,
            octl_proto::method::NodePermissionWait::NAME,
            &json!({"run": run, "node": node, "request": request}),
            WAIT_READ_TIMEOUT,
        );
        match asked {
            Ok(a) => {
                answer = a?;
                unanswered = None;
            }
            // The request is in the run's log: a daemon restarting (or started again soon
            // after a crash) answers for it. Away longer (stopped, say): the agent does as
            // it would without the hook.
            Err(e) => {
                let since = *unanswered.get_or_insert_with(std::time::Instant::now);
                if since.elapsed() > RESTART_GRACE {
                    return Err(format!("octld went away while {request} waited: {e}"));
                }
                std::thread::sleep(RESTART_POLL);
            }
        }
    }
    let d = &answer["decision"];
    // An answer given in the window is Claude Code's own already. The daemon read it from
    // the agent's hooks — words an agent could also say of itself — so it is never handed
    // back as a decision: an agent cannot allow its own request by saying it was allowed.
    if d["by"] == "window" {
        return Ok(());
    }
    let mut decision = json!({"behavior": d["behavior"]});
    if d["behavior"] == "deny" {
        let why = d["reason"].as_str().unwrap_or("no reason given");
        let by = match d["by"].as_str() {
            Some("timeout") => "orchestratectl",
            _ => "a person, through orchestratectl",
        };
        decision["message"] = Value::String(format!("Permission denied by {by}: {why}"));
    }
    let out =
        json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": decision}});
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{out}")
        .and_then(|()| stdout.flush())
        .map_err(|e| format!("writing the decision: {e}"))
}

/// Blocks SIGTERM in this thread (and so in the threads it starts), for [`sigwait`]; `None`
/// if it could not be.
fn block_sigterm() -> Option<libc::sigset_t> {
    // SAFETY: a zeroed sigset_t is emptied by sigemptyset before use; pthread_sigmask only
    // reads the set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        (libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) == 0).then_some(set)
    }
}

/// A thread that waits for the SIGTERM Claude Code sends the hook when its dialog is answered
/// No or cancelled in the window, and then says so (`node.activity` with `hook`
/// `PermissionAsk` and the `request`: the daemon records the window's denial) and ends the
/// hook, printing nothing.
fn report_window_answer(
    set: libc::sigset_t,
    socket: &Path,
    run: &str,
    node: &str,
    request: &str,
    detail: Option<&str>,
) {
    let (socket, run, node, request) = (
        socket.to_path_buf(),
        run.to_string(),
        node.to_string(),
        request.to_string(),
    );
    let what = detail.unwrap_or("the tool").to_string();
    let spawned = std::thread::Builder::new()
        .name("sigterm".into())
        .spawn(move || {
            let mut sig: libc::c_int = 0;
            // SAFETY: `set` is an initialised signal set; sigwait writes the signal taken.
            if unsafe { libc::sigwait(&set, &mut sig) } != 0 {
                return;
            }
            let data = json!({"state": ActivityState::Working.as_str(), "hook": ASK,
                "request": request, "detail": shorten(&format!("denied in the window: {what}"))});
            let _ = append_activity(&socket, &run, &node, data);
            std::process::exit(0);
        });
    if spawned.is_err() {
        // No thread to report it: SIGTERM ends the hook as it would have.
        // SAFETY: unblocks what block_sigterm blocked.
        unsafe { libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut()) };
    }
}

/// One `node.activity` of the agent's node (actor agent), `data` as given.
fn append_activity(socket: &Path, run: &str, node: &str, data: Value) -> Result<(), String> {
    let mut data = data;
    if let Some(o) = data.as_object_mut() {
        o.retain(|_, v| !v.is_null());
    }
    let body = json!({
        "jsonrpc": octl_proto::rpc::JSONRPC_VERSION,
        "id": 1,
        "method": octl_proto::method::EventAppend::NAME,
        "params": {"run": run, "node": node, "type": "node.activity", "actor": "agent", "data": data},
    })
    .to_string();
    post(socket, &body)
}

fn home() -> Result<PathBuf, String> {
    let cwd = std::env::current_dir().ok();
    octl_proto::home::resolve(
        None,
        std::env::var_os("OCTL_HOME").as_deref(),
        std::env::var_os("HOME").as_deref(),
        cwd.as_deref(),
    )
    .map_err(|e| e.message)
}

/// One JSON-RPC call; its `result`, or the error's message.
fn call(socket: &Path, method: &str, params: &Value, read: Duration) -> Result<Value, String> {
    answered(socket, method, params, read)?
}

/// One JSON-RPC call: `Err` when no answer came (the daemon is away or went away mid-call),
/// else the daemon's answer: its `result`, or its refusal's message.
fn answered(
    socket: &Path,
    method: &str,
    params: &Value,
    read: Duration,
) -> Result<Result<Value, String>, String> {
    let body = json!({
        "jsonrpc": octl_proto::rpc::JSONRPC_VERSION,
        "id": 1,
        "method": method,
        "params": params,
    })
    .to_string();
    let answer = exchange(socket, &body, read)?;
    let text = String::from_utf8_lossy(&answer);
    let json = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    let mut v: Value =
        serde_json::from_str(json).map_err(|e| format!("octld's answer to {method}: {e}"))?;
    if !v["error"].is_null() {
        return Ok(Err(format!("octld refused {method}: {}", v["error"])));
    }
    Ok(Ok(v["result"].take()))
}

/// Is the daemon of `home` running? Its lock file names the holder's pid; a socket whose
/// holder is gone may still be a service manager's, and connecting to it would start octld.
/// Whether a hook is to call the daemon: its lock names a live process (a look at one file,
/// cheaper than a connection that may wait). Inside a sandbox the view holds no lock and no
/// daemon process, only the node's own socket (docs/SECURITY.md), served while the node lives:
/// there the socket is the sign, and a connection refused the answer.
fn reachable(home: &Path) -> bool {
    if std::env::var_os("OCTL_SANDBOX").is_some_and(|k| k != "none") {
        return home.join("octld.sock").exists();
    }
    daemon_alive(home)
}

pub fn daemon_alive(home: &Path) -> bool {
    let text = std::fs::read_to_string(home.join("octld.lock")).unwrap_or_default();
    let Some(pid) = text
        .split_whitespace()
        .next()
        .and_then(|p| p.parse::<libc::pid_t>().ok())
        .filter(|p| *p > 0)
    else {
        return false;
    };
    // SAFETY: kill(2) with signal 0 only checks that the process exists.
    let alive = unsafe { libc::kill(pid, 0) } == 0;
    alive || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// One `POST /rpc` with `Connection: close`, waiting (bounded) for the answer so the events
/// of consecutive hooks land in their order.
fn post(socket: &Path, body: &str) -> Result<(), String> {
    let answer = exchange(socket, body, READ_TIMEOUT)?;
    if answer.starts_with(b"HTTP/1.1 200") && !contains(&answer, b"\"error\"") {
        Ok(())
    } else {
        Err(format!(
            "octld refused it: {}",
            String::from_utf8_lossy(&answer)
        ))
    }
}

/// Sends `body` and reads the whole answer (the connection closes after it).
fn exchange(socket: &Path, body: &str, read: Duration) -> Result<Vec<u8>, String> {
    let mut stream = UnixStream::connect(socket).map_err(|e| format!("connecting: {e}"))?;
    stream
        .set_write_timeout(Some(WRITE_TIMEOUT))
        .and_then(|()| stream.set_read_timeout(Some(read)))
        .map_err(|e| e.to_string())?;
    let request = format!(
        "POST {} HTTP/1.1\r\nHost: octld\r\nContent-Type: application/json\r\nAccept: application/json\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        octl_proto::rpc::RPC_PATH,
        body.len()
    );
    stream
        .write_all(request.as_bytes())
        .map_err(|e| format!("sending: {e}"))?;
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    Ok(answer)
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(v: Value) -> HookInput {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn what_each_hook_says() {
        use ActivityState::*;
        let bash = input(json!({"tool_name": "Bash", "tool_input": {"command": "python3 x.py"}}));
        assert_eq!(
            activity("PreToolUse", &bash),
            Some((Working, Some("Bash: python3 x.py".into())))
        );
        assert_eq!(
            activity("PermissionRequest", &bash),
            Some((NeedsPermission, Some("Bash: python3 x.py".into())))
        );
        // An autonomous agent's request is reported as the denial it is.
        assert_eq!(
            activity("PermissionDenied", &bash),
            Some((Working, Some("denied: Bash: python3 x.py".into())))
        );
        let ask = input(
            json!({"message": "Claude needs your permission to use Bash",
            "notification_type": "permission_prompt"}),
        );
        assert_eq!(activity("Notification", &ask).unwrap().0, NeedsPermission);
        let idle = input(json!({"message": "Claude is waiting for your input",
            "notification_type": "idle_prompt"}));
        assert_eq!(activity("Notification", &idle).unwrap().0, WaitingInput);
        let auth = input(json!({"message": "ok", "notification_type": "auth_success"}));
        assert_eq!(activity("Notification", &auth), None);
        assert_eq!(activity("Stop", &HookInput::default()), Some((Idle, None)));
        let end = input(json!({"reason": "prompt_input_exit"}));
        assert_eq!(
            activity("SessionEnd", &end),
            Some((Idle, Some("session ended (prompt_input_exit)".into())))
        );
        assert_eq!(activity("FileChanged", &HookInput::default()), None);
        let long =
            input(json!({"tool_name": "Bash", "tool_input": {"command": "x\n".repeat(300)}}));
        let (_, d) = activity("PreToolUse", &long).unwrap();
        assert_eq!(d.unwrap().chars().count(), DETAIL_MAX);
    }

    #[test]
    fn only_hook_invocations_take_the_fast_path() {
        let a = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
        assert!(is_hook(&a(&["orchestratectl", "hook", "Stop"])));
        assert!(is_hook(&a(&["orchestratectl", "hook"])));
        assert!(!is_hook(&a(&["orchestratectl", "hook", "--help"])));
        assert!(!is_hook(&a(&["orchestratectl", "run", "list"])));
        assert!(!is_hook(&a(&["orchestratectl"])));
    }

    #[test]
    fn a_home_without_a_live_lock_holder_has_no_daemon() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!daemon_alive(dir.path()));
        std::fs::write(dir.path().join("octld.lock"), "999999999 0.1.0\n").unwrap();
        assert!(!daemon_alive(dir.path()));
        std::fs::write(
            dir.path().join("octld.lock"),
            format!("{} 0.1.0\n", std::process::id()),
        )
        .unwrap();
        assert!(daemon_alive(dir.path()));
    }
}
