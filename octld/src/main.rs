//! `octld [--home DIR] [--foreground] [-v]`: the daemon. Without `--foreground` it starts
//! itself detached in its own session and returns once it answers.
//! `octld agent-wrap --raw-log FILE -- ARGV…` is used inside agent windows (see `wrap`);
//! `octld sandbox-relay …` inside a sandbox whose network is `allow` (see `sandbox::relay`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The orchestratectl daemon: owns runs, their event logs, agents and merges.
#[derive(Parser, Debug)]
#[command(
    name = "octld",
    version,
    after_help = "Examples:\n  octld --foreground            run in this terminal, logging to stderr too\n  octld --home /tmp/octl-test   start detached on another home"
)]
struct Args {
    /// State directory (default: $OCTL_HOME, else ~/.orchestratectl); relative to the cwd.
    #[arg(long, value_name = "DIR")]
    home: Option<PathBuf>,
    /// Stay in this process and log to stderr as well as octld.log.
    #[arg(long)]
    foreground: bool,
    /// Log at debug level.
    #[arg(short, long)]
    verbose: bool,
    #[command(subcommand)]
    command: Option<Internal>,
}

#[derive(Subcommand, Debug)]
enum Internal {
    /// Runs a stream-json agent: raw lines to FILE, readable lines to the terminal.
    #[command(hide = true)]
    AgentWrap {
        #[arg(long, value_name = "FILE")]
        raw_log: PathBuf,
        #[arg(last = true, required = true)]
        argv: Vec<String>,
    },
    /// Inside a sandbox whose network is `allow`: relays to the daemon's proxy, runs ARGV.
    #[command(hide = true)]
    SandboxRelay {
        #[arg(long, value_name = "SOCKET")]
        proxy: PathBuf,
        #[arg(long, value_name = "ADDR=HOST:PORT")]
        listen: Vec<String>,
        #[arg(long, value_name = "ADDR")]
        http_proxy: String,
        #[arg(last = true, required = true)]
        argv: Vec<String>,
    },
}

fn main() -> ExitCode {
    let args = Args::parse();
    match args.command {
        Some(Internal::AgentWrap { raw_log, argv }) => {
            return ExitCode::from(octld::wrap::run(&raw_log, &argv).clamp(0, 255) as u8);
        }
        Some(Internal::SandboxRelay {
            proxy,
            listen,
            http_proxy,
            argv,
        }) => {
            let status = octld::sandbox::relay::run(&proxy, &listen, &http_proxy, &argv);
            return ExitCode::from(status.clamp(0, 255) as u8);
        }
        None => {}
    }
    // A daemon an agent started (its `orchestratectl` found none up) is not that agent's:
    // nothing it starts may carry the agent's marker (see octld::contain).
    std::env::remove_var(octld::contain::MARKER);
    // The resolver the CLI uses too, so both find the same home.
    let cwd = std::env::current_dir().ok();
    let home = match octl_proto::home::resolve(
        args.home.as_deref().map(std::path::Path::as_os_str),
        std::env::var_os("OCTL_HOME").as_deref(),
        std::env::var_os("HOME").as_deref(),
        cwd.as_deref(),
    ) {
        Ok(home) => home,
        Err(err) => {
            eprintln!("octld: {}", err.message);
            if let Some(hint) = &err.hint {
                eprintln!("hint: {hint}");
            }
            return ExitCode::from(err.kind.exit_code().clamp(0, 255) as u8);
        }
    };
    if !args.foreground {
        return detach(&home, args.verbose);
    }
    #[cfg(not(debug_assertions))]
    if std::env::var_os("OCTL_FAILPOINTS").is_some() {
        eprintln!("octld: OCTL_FAILPOINTS ignored: a release build has no failpoints (debug builds, which the tests use, do)");
    }
    // A long-lived daemon holds no directory of the shell that started it.
    let _ = std::env::set_current_dir("/");
    // Before any thread or descriptor exists; the start logs the limits it runs with.
    octld::nofile::raise();
    let options = octld::Options {
        home,
        foreground: true,
        verbose: args.verbose,
    };
    // Before any thread exists: it reads and clears LISTEN_* and NOTIFY_SOCKET.
    octld::activation::capture();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    match runtime.block_on(octld::run(options, signals())) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("octld: {e}");
            ExitCode::from(1)
        }
    }
}

async fn signals() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

/// Starts `octld --foreground` in its own session and waits until it answers or exits.
fn detach(home: &std::path::Path, verbose: bool) -> ExitCode {
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    if let Some(pid) = std::fs::create_dir_all(home)
        .ok()
        .and_then(|_| octld::lock::acquire(&octld::home::Home::new(home).lock()).err())
        .and_then(|e| match e {
            octld::lock::LockError::Held { pid, .. } => Some(pid),
            _ => None,
        })
    {
        eprintln!(
            "octld: another octld (pid {}) holds {}",
            pid.map(|p| p.to_string())
                .unwrap_or_else(|| "unknown".into()),
            home.join("octld.lock").display()
        );
        return ExitCode::from(1);
    }
    let exe = std::env::current_exe().unwrap_or_else(|_| "octld".into());
    let mut cmd = Command::new(exe);
    cmd.arg("--home").arg(home).arg("--foreground");
    if verbose {
        cmd.arg("--verbose");
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: setsid is async-signal-safe; it only detaches the child from our terminal.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("octld: cannot start: {e}");
            return ExitCode::from(1);
        }
    };
    let socket = home.join("octld.sock");
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if std::os::unix::net::UnixStream::connect(&socket).is_ok() {
            println!(
                "octld started (pid {}), socket {}",
                child.id(),
                socket.display()
            );
            return ExitCode::SUCCESS;
        }
        if let Ok(Some(status)) = child.try_wait() {
            eprintln!(
                "octld: exited during start ({status}); see {}",
                home.join("octld.log").display()
            );
            return ExitCode::from(1);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    eprintln!(
        "octld: did not answer within 5 s; see {}",
        home.join("octld.log").display()
    );
    ExitCode::from(1)
}
